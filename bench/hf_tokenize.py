#!/usr/bin/env python3
"""hf_tokenize.py - `trident tokenize`'s ids against HuggingFace's
tokenizers library, GPT-2's byte-level BPE, on one text.

    hf_tokenize.py ENCODER_JSON VOCAB_BPE TEXT PREFIX

PREFIX is the indexed dataset (PREFIX.bin, PREFIX.idx) that
`trident tokenize --tokenizer ENCODER_JSON --input TEXT --output PREFIX`
wrote: TEXT as one document, closed by the end-of-document token
<|endoftext|>. tokenizers' ByteLevelBPETokenizer, built from the same two
files (GPT-2's vocab.json and merges.txt under the names OpenAI gave them),
encodes TEXT; the ids must be identical, and the last one the
end-of-document token's. TEXT must be UTF-8 (tokenizers takes text, not
bytes). For bench/gpu_check.sh's interop section (tokenizers is on the GPU
machine, not in CI). Prints one line; exits 1 when the ids differ.
"""
import json
import os
import sys

from tokenizers import ByteLevelBPETokenizer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from indexed_read import read  # noqa: E402


def main():
    if len(sys.argv) != 5:
        print(__doc__)
        sys.exit(2)
    encoder, merges, text_path, prefix = sys.argv[1:]
    with open(text_path, "rb") as f:
        text = f.read().decode("utf-8")
    with open(encoder) as f:
        eod = json.load(f)["<|endoftext|>"]
    want = ByteLevelBPETokenizer(encoder, merges).encode(text).ids
    got = list(read(prefix)[3])
    if got[-1:] != [eod]:
        print("FAIL: trident's dataset does not end with <|endoftext|> (%d): %s" % (eod, got[-3:]))
        sys.exit(1)
    got = got[:-1]
    first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    if got == want:
        print("ok: trident tokenize and tokenizers agree on all %d ids of %s (%d bytes)"
              % (len(got), os.path.basename(text_path), len(text.encode("utf-8"))))
        return
    print("FAIL: trident %d ids, tokenizers %d; the first difference at id %d: trident %s, "
          "tokenizers %s" % (len(got), len(want), first, got[first:first + 5], want[first:first + 5]))
    sys.exit(1)


if __name__ == "__main__":
    main()
