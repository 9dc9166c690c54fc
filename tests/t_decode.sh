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
plan 16
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
expect 0 "exported $WORK/ck/step_00000004.h5 to $WORK/hf" "export takes a checkpoint directory"

done_testing
