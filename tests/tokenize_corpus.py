#!/usr/bin/env python3
"""tokenize_corpus.py - a deterministic, varied test corpus for t_tokenize.

    tokenize_corpus.py OUT_DIR MEGABYTES [SEED]

writes OUT_DIR/docs.txt (documents separated by a blank line, "\\n\\n",
with invalid UTF-8 bytes in them) and OUT_DIR/docs.jsonl (JSON Lines, key
"text", valid Unicode only, since JSON has no invalid bytes). The text
mixes English prose with contractions and numbers, code (tabs, CRLF, runs
of spaces), now and then a piece of hundreds of bytes to over a thousand (a
word, digits, a rule of "=", spaces), several scripts (Latin, Greek, Cyrillic, Arabic, Hebrew,
Devanagari with its marks, Thai, CJK, Hangul), emoji (with skin tones and
ZWJ sequences), Unicode spaces and digits, control bytes and broken UTF-8.

Left out on purpose: U+0085 and U+FEFF, which JavaScript's \\s (the npm
reference encoders) counts differently from Unicode's White_Space (what
tiktoken, HuggingFace and trident use); characters newer than Unicode 13,
whose classes the engines may not all know; and special-token names such
as <|endoftext|>, which transformers.js splits out of text while the
others (and trident) encode them as text.
"""
import json
import os
import random
import sys

WORDS = ("the of and to in is was he for it with as his on be at by I had that not are but "
         "from or have an they which one you were her all she there would their we him been "
         "has when who will more no if out so said what up its about into than them can only "
         "other new some could time these two may then do first any my now such like our over "
         "man me even most made after also did many before must through back years where much "
         "your way well down should because each just those people Mr how too little state "
         "good very make world still own see men work long get here between both life being "
         "under never day same another know while last might us great old year off come since "
         "against go came right used take three Tokenizer GPT Megatron HDF5 MPI CUDA").split()
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ll", "'D", "\u2019s"]
PUNCT = [".", ",", ";", ":", "!", "?", "...", " -", " --", "(", ")", "\"", "'", "[", "]", "/", "&", "%", "$", "#", "@"]
CODE = [
    "int main(int argc, char **argv)\n{\n\treturn 0;\n}\n",
    "    for (size_t i = 0; i < n; i++) {\n        sum += a[i] * b[i];\n    }\n",
    "def f(x):\n    if x <= 0:\n        return []\n    return [y ** 2 for y in range(x)]\n",
    "#include <stdio.h>\r\n#define MAX(a, b) ((a) > (b) ? (a) : (b))\r\n",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name;\n",
    "x=1;y=x+++--x;z=x<<2|y>>>3&&!w||~v^u\n",
    "\t\t\t}\n\t\t}\n\t}\n}\n\n\n",
    "    \n        \n   \t  \n",
    "{\"key\": [1, 2.5e-3, null, true], \"nested\": {\"a\": \"b\"}}\n",
    "https://example.org/path?q=1&r=%20x#frag  user@example.com\n",
]
SCRIPTS = [
    [(0x0410, 0x044F)],                    # Cyrillic
    [(0x0391, 0x03A1), (0x03A3, 0x03A9), (0x03B1, 0x03C9)],  # Greek
    [(0x0621, 0x063A), (0x0641, 0x064A)],  # Arabic
    [(0x05D0, 0x05EA)],                    # Hebrew
    [(0x0905, 0x0939), (0x093E, 0x094C)],  # Devanagari letters and marks
    [(0x0E01, 0x0E2E), (0x0E31, 0x0E3A)],  # Thai with its marks
    [(0x4E00, 0x9FA5)],                    # CJK
    [(0xAC00, 0xD7A3)],                    # Hangul
    [(0x00C0, 0x00FF), (0x0100, 0x017F)],  # Latin-1 and Extended-A
    [(0x0300, 0x036F)],                    # combining marks alone
]
EMOJI = ["\U0001F600", "\U0001F389", "\U0001F44D\U0001F3FD", "\U0001F468\u200D\U0001F469\u200D\U0001F467",
         "\u2764\uFE0F", "\U0001F1EB\U0001F1F7", "\U0001F9D1\u200D\U0001F4BB", "\u263A", "\U0001F525" * 3]
SPACES = [" ", "  ", "   ", "\t", "\n", "\r\n", "\u00A0", "\u3000", "\u2009", "\u2028", "\u202F",
          " " * 17, "\n" * 3, " \n ", "\t \t", "\x0b", "\x0c"]
DIGITS = ["\uFF11\uFF12\uFF13", "\u0663\u0664", "\u2167", "\u00B2", "\u00BD", "\u0967\u0968"]
BROKEN = [b"\xff", b"\xc0\x80", b"\xe2\x82", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80\x80",
          b"\xf0\x9f\x98", b"\xc3", b"\xfe\xfe", b"\xe0\x80\xaf", b"\x00", b"\x01\x02\x1b[0m"]


def script_word(rng):
    ranges = rng.choice(SCRIPTS)
    out = []
    for _ in range(rng.randint(1, 9)):
        lo, hi = rng.choice(ranges)
        out.append(chr(rng.randint(lo, hi)))
    return "".join(out)


def number(rng):
    n = rng.choice([rng.randint(0, 9), rng.randint(10, 999), rng.randint(1000, 10**9), rng.random() * 1000])
    return str(n) if not isinstance(n, float) else "%.3f" % n


def sentence(rng):
    parts = []
    for _ in range(rng.randint(3, 18)):
        r = rng.random()
        if r < 0.55:
            w = rng.choice(WORDS)
            parts.append(w.capitalize() if rng.random() < 0.1 else w.upper() if rng.random() < 0.02 else w)
        elif r < 0.62:
            parts.append(rng.choice(WORDS) + rng.choice(CONTRACTIONS))
        elif r < 0.72:
            parts.append(number(rng))
        elif r < 0.84:
            parts.append(script_word(rng))
        elif r < 0.90:
            parts.append(rng.choice(EMOJI))
        elif r < 0.95:
            parts.append(rng.choice(DIGITS))
        else:
            parts.append(rng.choice(PUNCT))
    text = ""
    for p in parts:
        text += (rng.choice(SPACES) if rng.random() < 0.08 else " ") + p
    return text.lstrip(" ") + rng.choice([".", "!", "?", "", "\u3002"])


def long_piece(rng):
    """one pre-tokenised piece of hundreds to thousands of bytes: a word,
    digits, a rule of punctuation, a run of spaces, a script's letters"""
    n = rng.randint(260, 1200)
    kind = rng.randrange(6)
    if kind == 0:
        return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(n))
    if kind == 1:
        return rng.choice(["=", "-", "*", "#", "~"]) * n
    if kind == 2:
        return " " * n + "x"
    if kind == 3:
        return "".join(rng.choice("0123456789") for _ in range(n))
    if kind == 4:
        return "".join(rng.choice(["ab", "ba", "aab", "abc"]) for _ in range(n // 2))
    return script_word(rng) * (n // 8)


def document(rng):
    out = []
    for _ in range(rng.randint(1, 12)):
        r = rng.random()
        if r < 0.004:
            out.append(long_piece(rng))
        elif r < 0.6:
            out.append(sentence(rng))
        elif r < 0.8:
            out.append(rng.choice(CODE))
        else:
            out.append(rng.choice(SPACES) * rng.randint(1, 4))
        out.append(rng.choice([" ", "\n", "\n", "\r\n", "  ", "\n\n\n"]))
    return "".join(out)


def main():
    out_dir, megabytes = sys.argv[1], float(sys.argv[2])
    rng = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 16)
    target = int(megabytes * 1e6)
    with open(os.path.join(out_dir, "docs.txt"), "wb") as f:
        n = 0
        while n < target:
            doc = document(rng).encode("utf-8")
            if rng.random() < 0.3:  # break it: insert bytes that are not UTF-8
                at = rng.randint(0, len(doc))
                doc = doc[:at] + rng.choice(BROKEN) + doc[at:]
            data = doc + b"\n\n"
            f.write(data)
            n += len(data)
    with open(os.path.join(out_dir, "docs.jsonl"), "w", encoding="utf-8", newline="") as f:
        n = 0
        while n < target:
            line = json.dumps({"id": n, "text": document(rng), "meta": {"src": "t"}},
                              ensure_ascii=rng.random() < 0.5) + "\n"
            f.write(line)
            n += len(line.encode("utf-8"))


if __name__ == "__main__":
    main()
