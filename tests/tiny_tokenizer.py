"""tiny_tokenizer.py PATH - writes a small HuggingFace tokenizer.json for
the tests: the 256 bytes in GPT-2's printable spelling (ids 0-255), two
merges ("th" 256, "the" 257) and <|endoftext|> (258). Used where npm's
reference tokenizers are absent (t_tokenize.sh) and where any tokenizer
will do (t_runlife.sh)."""
import json
import sys

bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
cs, n = bs[:], 0
for b in range(256):
    if b not in bs:
        bs.append(b)
        cs.append(256 + n)
        n += 1
vocab = {chr(c): i for i, c in enumerate(cs)}
vocab.update({"th": 256, "the": 257, "<|endoftext|>": 258})
with open(sys.argv[1], "w") as out:
    json.dump({"model": {"type": "BPE", "vocab": vocab, "merges": ["t h", "th e"]},
               "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False,
                                 "use_regex": True},
               "normalizer": None,
               "added_tokens": [{"id": 258, "content": "<|endoftext|>", "special": True}]},
              out)
