#!/bin/sh
# t_interop.sh - HuggingFace and llm.c models in and out (doc/interop.md):
# `trident export --format hf` checked by tests/hf_check.py, a reader
# written from the safetensors specification, transformers' GPT-2 and
# doc/checkpoint-format.md alone (names, shapes, dtypes, every value
# against the checkpoint's, a forward pass both ways); shards; the
# refusal to write into a non-empty directory; and [checkpoint] init_from:
# export then init_from gives bitwise the checkpoint's fp32 weights on 1
# rank and on dp = pp = tp = 2 (8 ranks), from bf16 and F16 files and an
# llm.c file too, and for a llama with grouped-query attention; and a
# directory with checkpoints resumes them instead. The run that starts
# from the model takes one step at lr = 0, so its checkpoint holds the
# weights it started from, unchanged (AdamW's update is lr times
# something, and its decay 1 - lr x wd).
. "${TRI_SRCDIR:-.}/tests/lib.sh"
DIFF="${TRI_BUILDDIR:-.}/tests/ckpt_diff"
CHECK="${TRI_SRCDIR:-.}/tests/hf_check.py"
plan 19
if ! command -v python3 >/dev/null 2>&1 || ! command -v h5dump >/dev/null 2>&1; then
    echo "# python3 and h5dump (hdf5-tools) are needed" >&2
    exit 1
fi
cfg="$WORK/c.ini"
write_config "$cfg"
tied="--set model.tie_embeddings=true --set model.vocab_size=264 --set model.vocab_used=256"
untied="--set model.tie_embeddings=false"
zero_lr="--set train.steps=1 --set train.lr=0 --set train.min_lr=0"

# A: untied head, no padding. B: tied, the vocabulary padded 256 -> 264.
# shellcheck disable=SC2086
run 1 train --config "$cfg" $untied --set checkpoint.dir="$WORK/a"
A="$WORK/a/step_00000004.h5"
# shellcheck disable=SC2086
run 1 train --config "$cfg" $tied --set checkpoint.dir="$WORK/b"
B="$WORK/b/step_00000004.h5"
[ -f "$A" ] && [ -f "$B" ]
ok $? "two small models trained (untied; tied with vocab 256 padded to 264)"

# 1. export, checked independently
run 1 export "$A" --format hf "$WORK/ea"
python3 "$CHECK" "$WORK/ea" "$A" > "$WORK/check" 2>&1
st=$?
sed 's/^/# /' "$WORK/check"
[ $st = 0 ] && [ -f "$WORK/ea/model.safetensors" ] && [ ! -e "$WORK/ea/model.safetensors.index.json" ]
ok $? "export fp32: one model.safetensors that hf_check.py reads as GPT2LMHeadModel's, every value bitwise"
run 1 export "$B" --format hf "$WORK/eb" --dtype bf16 --max-shard-size 20KB
python3 "$CHECK" "$WORK/eb" "$B" > "$WORK/check" 2>&1
st=$?
sed 's/^/# /' "$WORK/check"
shards=$(find "$WORK/eb" -name 'model-*-of-*.safetensors' | wc -l)
[ $st = 0 ] && [ "$shards" -gt 1 ] && grep -q '"vocab_size": 256' "$WORK/eb/config.json"
ok $? "export bf16 past --max-shard-size 20KB: $shards shards and an index, the padded vocabulary cut to 256, values rounded to nearest even"

# 2. never over existing files
sum_before=$(cksum "$WORK/ea/model.safetensors")
run 1 export "$B" --format hf "$WORK/ea"
expect 1 "ea is not empty (it holds .*): export refuses to write over files" \
    "export into a non-empty directory is refused"
[ "$sum_before" = "$(cksum "$WORK/ea/model.safetensors")" ]
ok $? "... and its files are as they were"
mkdir -p "$WORK/ef" && cp "$WORK/ea/model.safetensors" "$WORK/ea/config.json" "$WORK/ef/"
run 1 export "$A" --format hf "$WORK/ef" --force --max-shard-size 30000
python3 "$CHECK" "$WORK/ef" "$A" > "$WORK/check" 2>&1 && [ ! -e "$WORK/ef/model.safetensors" ] && [ -e "$WORK/ef/model.safetensors.index.json" ] \
    && [ -z "$(find "$WORK/ef" -name '.*tmp*')" ]
ok $? "--force replaces an earlier export: its stale model.safetensors removed, no temporary file left"

# 3. init_from: the round trip, bitwise
# shellcheck disable=SC2086
run 1 train --config "$cfg" $untied $zero_lr --set checkpoint.init_from="$WORK/ea" \
    --set checkpoint.dir="$WORK/ra1"
expect 0 "initialised from .*ea (HuggingFace safetensors): step 0" "init_from a HuggingFace directory, 1 rank"
"$DIFF" "$A" "$WORK/ra1/step_00000001.h5" 0 > "$WORK/diff" 2>&1
ok $? "export then init_from gives bitwise the checkpoint's weights on 1 rank: $(cat "$WORK/diff")"
# shellcheck disable=SC2086
run 8 train --config "$cfg" $untied $zero_lr --set checkpoint.init_from="$WORK/ef" \
    --set checkpoint.dir="$WORK/ra8" --set parallel.dp=2 --set parallel.pp=2 --set parallel.tp=2
expect 0 "initialised from" "init_from a sharded directory on dp = pp = tp = 2 (8 ranks)"
"$DIFF" "$A" "$WORK/ra8/step_00000001.h5" 0 > "$WORK/diff" 2>&1
ok $? "... bitwise the checkpoint's weights: $(cat "$WORK/diff")"
"$TRIDENT" export "$A" --format hf "$WORK/ea16" --dtype bf16 > /dev/null 2>&1
# shellcheck disable=SC2086
run 2 train --config "$cfg" $untied $zero_lr --set checkpoint.init_from="$WORK/ea16" \
    --set checkpoint.dir="$WORK/ra16" --set parallel.tp=2
"$DIFF" "$A" "$WORK/ra16/step_00000001.h5" 0.01 > "$WORK/diff" 2>&1
st=$?
! grep -q "max |a-b| 0.0e+00" "$WORK/diff" && [ $st = 0 ]
ok $? "init_from bf16 on tp = 2: the checkpoint's weights to bf16's precision: $(cat "$WORK/diff")"

python3 "$CHECK" --to-f16 "$WORK/ea" "$WORK/ea_f16" > "$WORK/check" 2>&1
# shellcheck disable=SC2086
run 1 train --config "$cfg" $untied $zero_lr --set checkpoint.init_from="$WORK/ea_f16" \
    --set checkpoint.dir="$WORK/rf16"
"$DIFF" "$A" "$WORK/rf16/step_00000001.h5" 0.002 > "$WORK/diff" 2>&1
st=$?
! grep -q "max |a-b| 0.0e+00" "$WORK/diff" && [ $st = 0 ]
ok $? "init_from F16 (written by hf_check.py): the checkpoint's weights to fp16's precision: $(cat "$WORK/diff")"

# 4. llm.c: a file written by the checker, as llm.c lays it out
python3 "$CHECK" --to-llmc "$WORK/ea" "$WORK/a.bin" 256 > "$WORK/check" 2>&1
# shellcheck disable=SC2086
run 2 train --config "$cfg" $zero_lr --set checkpoint.init_from="$WORK/a.bin" \
    --set checkpoint.dir="$WORK/rl" --set parallel.pp=2
expect 0 "initialised from .*a.bin (llm.c model file)" "init_from an llm.c .bin on pp = 2"
# llm.c's head is tied: the run's 28 tensors are A's but its lm_head
"$DIFF" "$WORK/rl/step_00000001.h5" "$A" 0 > "$WORK/diff" 2>&1
grep -q "28 tensors, ||A-B||/||A|| 0.00e+00" "$WORK/diff"
ok $? "... gives bitwise the weights the HuggingFace export held: $(cat "$WORK/diff")"
python3 "$CHECK" --to-llmc "$WORK/eb" "$WORK/b.bin" 264 > "$WORK/check" 2>&1
# shellcheck disable=SC2086
run 1 train --config "$cfg" $tied $zero_lr --set checkpoint.init_from="$WORK/b.bin" \
    --set checkpoint.dir="$WORK/rlb"
# shellcheck disable=SC2086
run 1 train --config "$cfg" $tied $zero_lr --set checkpoint.init_from="$WORK/eb" \
    --set checkpoint.dir="$WORK/rhb"
"$DIFF" "$WORK/rlb/step_00000001.h5" "$WORK/rhb/step_00000001.h5" 0 > "$WORK/diff" 2>&1
ok $? "a padded vocabulary (264 rows, 256 used) from llm.c and from HuggingFace: the same weights: $(cat "$WORK/diff")"

# 5. llama: grouped-query attention (n_kv_head = 1 < tp = 2), untied head
llama="--set model.arch=llama --set model.n_kv_head=1 --set model.tie_embeddings=false --set model.rope_theta=500000"
# shellcheck disable=SC2086
run 1 train --config "$cfg" $llama --set checkpoint.dir="$WORK/l"
Lk="$WORK/l/step_00000004.h5"
run 1 export "$Lk" --format hf "$WORK/el"
python3 "$CHECK" "$WORK/el" "$Lk" > "$WORK/check" 2>&1
st=$?
sed 's/^/# /' "$WORK/check"
[ $st = 0 ] && grep -q '"num_key_value_heads": 1' "$WORK/el/config.json"
ok $? "llama export: LlamaForCausalLM's names and shapes (k and v with one head), every value bitwise"
# shellcheck disable=SC2086
run 8 train --config "$cfg" $llama $zero_lr --set checkpoint.init_from="$WORK/el" \
    --set checkpoint.dir="$WORK/rl8" --set parallel.dp=2 --set parallel.pp=2 --set parallel.tp=2
"$DIFF" "$Lk" "$WORK/rl8/step_00000001.h5" 0 > "$WORK/diff" 2>&1
ok $? "llama: export then init_from on dp = pp = tp = 2 (key/value heads replicated over tp) gives bitwise the checkpoint's weights: $(cat "$WORK/diff")"

# 6. precedence: a directory with checkpoints resumes them
# shellcheck disable=SC2086
run 1 train --config "$cfg" $untied --set train.steps=6 --set checkpoint.init_from="$WORK/ea" \
    --set checkpoint.dir="$WORK/a"
expect 0 "init_from = .*ea starts new runs only and is ignored" \
    "init_from beside a directory holding checkpoints: a note"
grep -q "resumed from .*step_00000004.h5: step 4" "$WORK/out" && ! grep -q "initialised from" "$WORK/out"
ok $? "... and the run resumes its checkpoints"
done_testing
