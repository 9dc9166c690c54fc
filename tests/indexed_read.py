#!/usr/bin/env python3
"""indexed_read.py - an independent reader of Megatron-LM's indexed dataset
(PREFIX.bin + PREFIX.idx), written from the format as
megatron/core/datasets/indexed_dataset.py writes it, for the tests.

    indexed_read.py check PREFIX            checks the index against the .bin
    indexed_read.py compare PREFIX REF      and compares with a reference:
                                            REF (int32 ids) and REF.len
                                            (int32 ids per document)

Prints what it checked or the first difference; exits 1 on a difference.
"""
import struct
import sys

DTYPES = {1: ("B", 1), 2: ("b", 1), 3: ("h", 2), 4: ("i", 4), 5: ("q", 8), 6: ("d", 8), 7: ("f", 4), 8: ("H", 2)}


def read(prefix):
    with open(prefix + ".idx", "rb") as f:
        idx = f.read()
    if idx[:9] != b"MMIDIDX\x00\x00":
        sys.exit("%s.idx: not MMIDIDX" % prefix)
    version, code = struct.unpack_from("<QB", idx, 9)
    n_seq, n_doc_idx = struct.unpack_from("<QQ", idx, 18)
    if version != 1 or code not in DTYPES:
        sys.exit("%s.idx: version %d, dtype %d" % (prefix, version, code))
    at = 34
    lengths = struct.unpack_from("<%di" % n_seq, idx, at)
    at += 4 * n_seq
    pointers = struct.unpack_from("<%dq" % n_seq, idx, at)
    at += 8 * n_seq
    doc_idx = struct.unpack_from("<%dq" % n_doc_idx, idx, at)
    at += 8 * n_doc_idx
    if at != len(idx):
        sys.exit("%s.idx: %d bytes, the header says %d" % (prefix, len(idx), at))
    fmt, size = DTYPES[code]
    with open(prefix + ".bin", "rb") as f:
        data = f.read()
    expect = 0
    for i, (n, p) in enumerate(zip(lengths, pointers)):
        if p != expect:
            sys.exit("%s.idx: sequence %d points at byte %d, expected %d" % (prefix, i, p, expect))
        expect += n * size
    if expect != len(data):
        sys.exit("%s.bin: %d bytes, the index says %d" % (prefix, len(data), expect))
    if doc_idx[0] != 0 or doc_idx[-1] != n_seq or any(a > b for a, b in zip(doc_idx, doc_idx[1:])):
        sys.exit("%s.idx: document indices do not run from 0 to %d" % (prefix, n_seq))
    tokens = struct.unpack("<%d%s" % (len(data) // size, fmt), data)
    return code, lengths, doc_idx, tokens


def main():
    mode, prefix = sys.argv[1], sys.argv[2]
    code, lengths, doc_idx, tokens = read(prefix)
    if mode == "check":
        print("%s: dtype %d, %d sequences, %d documents, %d tokens" % (prefix, code, len(lengths), len(doc_idx) - 1, len(tokens)))
        return
    ref = sys.argv[3]
    with open(ref, "rb") as f:
        data = f.read()
    ref_tokens = struct.unpack("<%di" % (len(data) // 4), data)
    with open(ref + ".len", "rb") as f:
        data = f.read()
    ref_lens = struct.unpack("<%di" % (len(data) // 4), data)
    if len(ref_lens) != len(lengths):
        print("documents: trident %d, reference %d" % (len(lengths), len(ref_lens)))
    at = 0
    for d, (a, b) in enumerate(zip(lengths, ref_lens)):
        mine, theirs = tokens[at:at + a], ref_tokens[at:at + b]
        if mine != theirs:
            k = next((i for i, (x, y) in enumerate(zip(mine, theirs)) if x != y), min(a, b))
            print("document %d differs at token %d: trident %s, reference %s"
                  % (d, k, list(mine[max(0, k - 3):k + 5]), list(theirs[max(0, k - 3):k + 5])))
            sys.exit(1)
        at += a
    if len(ref_lens) != len(lengths) or tokens != ref_tokens:
        sys.exit(1)
    print("%s: %d documents, %d tokens, all equal to the reference" % (prefix, len(lengths), len(tokens)))


if __name__ == "__main__":
    main()
