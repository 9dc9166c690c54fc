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
# something, and its decay 1 - lr x wd). Then init_from's strictness
# (doc/errors.md, cases 263-273): copies changed by hf_check.py --edit with
# tensors nothing reads, a tied head unlike wte, config.json fields unlike
# [model], NaN and infinite weights, numbers that are not integers, each
# refused by name; and published models' quirks (HF hub's gpt2 layout,
# buffers) loaded.
. "${TRI_SRCDIR:-.}/tests/lib.sh"
DIFF="${TRI_BUILDDIR:-.}/tests/ckpt_diff"
CHECK="${TRI_SRCDIR:-.}/tests/hf_check.py"
plan 33
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

# 7. strictness (issue 37): init_from loads the model the directory holds,
# all of it, or refuses; hf_check.py --edit writes each changed copy.
# refuse NAME PATTERN WHAT OPTIONS...: a run from $WORK/NAME that must end
# with exit 1 and PATTERN
refuse() {
    r_dir=$1 r_pat=$2 r_what=$3
    shift 3
    # shellcheck disable=SC2086
    run 1 train --config "$cfg" $zero_lr --set checkpoint.init_from="$WORK/$r_dir" \
        --set checkpoint.dir="$WORK/r_$r_dir" "$@"
    expect 1 "$r_pat" "$r_what"
}
edit() { python3 "$CHECK" --edit "$@" > "$WORK/check" 2>&1 || sed 's/^/# /' "$WORK/check"; }
h1="transformer.h.1"
edit "$WORK/ea" "$WORK/x_block" "transformer.h.2.ln_1.weight=$h1.ln_1.weight" \
    "transformer.h.2.ln_1.bias=$h1.ln_1.bias" "transformer.h.2.attn.c_attn.weight=$h1.attn.c_attn.weight" \
    "transformer.h.2.attn.c_attn.bias=$h1.attn.c_attn.bias" "transformer.h.2.mlp.c_fc.weight=$h1.mlp.c_fc.weight" \
    "transformer.h.2.mlp.c_fc.bias=$h1.mlp.c_fc.bias" "transformer.h.0.attn.bias=$h1.ln_1.bias"
# shellcheck disable=SC2086
refuse x_block "x_block: 6 tensors that no tensor of \[model\] reads, which the run would drop: transformer.h.2.ln_1.weight, transformer.h.2.ln_1.bias, transformer.h.2.attn.c_attn.weight, transformer.h.2.attn.c_attn.bias (and 2 more)" \
    "a third block with n_layer = 2: refused, the unread tensors listed (the first 4 and a count; the buffer not among them)" $untied
edit "$WORK/eb" "$WORK/x_same" lm_head.weight=transformer.wte.weight \
    "transformer.h.0.attn.bias=$h1.ln_1.bias" "transformer.h.1.attn.masked_bias=$h1.ln_1.bias"
# shellcheck disable=SC2086
run 1 train --config "$cfg" $tied $zero_lr --set checkpoint.init_from="$WORK/x_same" \
    --set checkpoint.dir="$WORK/r_same"
expect 0 "note: \[checkpoint\] init_from: .*x_same holds 2 buffers that transformers computes on load" \
    "GPT-2's attn.bias and attn.masked_bias buffers and a tied lm_head equal to wte: loaded, the buffers named in a note"
edit "$WORK/eb" "$WORK/x_head" lm_head.weight=transformer.wte.weight "lm_head.weight[40]=0.5"
# shellcheck disable=SC2086
refuse x_head "x_head: tensor lm_head.weight differs from transformer.wte.weight (first at \[1, 8\]: 0.5, .*): config.json ties the head to the embedding" \
    "a tied model's lm_head.weight that differs from wte: refused, naming both" $tied
# shellcheck disable=SC2086
refuse ea "ea/config.json: tie_word_embeddings = false, \[model\] tie_embeddings = true" \
    "an untied directory into a tied model (its head would be dropped): refused" $tied
# shellcheck disable=SC2086
run 1 train --config "$cfg" $untied $zero_lr --set checkpoint.init_from="$WORK/eb" \
    --set model.vocab_size=264 --set model.vocab_used=256 --set checkpoint.dir="$WORK/r_untie"
expect 0 "note: \[checkpoint\] init_from: .*eb ties its head to the embedding and \[model\] tie_embeddings = false unties it: lm_head starts as a copy of transformer.wte.weight" \
    "a tied directory into an untied model: loaded (untied, as doc/interop.md chooses), with a note"
edit "$WORK/ea" "$WORK/x_nan" "transformer.h.1.mlp.c_fc.weight[130]=nan"
# shellcheck disable=SC2086
refuse x_nan "x_nan/model.safetensors: tensor transformer.h.1.mlp.c_fc.weight holds nan at \[1, 2\]: a model with a NaN or infinite weight cannot train" \
    "a NaN weight: refused on load, naming the file, the tensor and the first bad element" $untied
edit "$WORK/ea" "$WORK/x_inf" "transformer.ln_f.bias[3]=-inf"
# shellcheck disable=SC2086
refuse x_inf "x_inf/model.safetensors: tensor transformer.ln_f.bias holds -inf at \[3\]" \
    "an infinite weight (a 1-D tensor): refused likewise" $untied
edit "$WORK/ea" "$WORK/x_eps" "config.layer_norm_epsilon=1e-6"
# shellcheck disable=SC2086
refuse x_eps "x_eps/config.json: layer_norm_epsilon = 1e-06, trident's GPT-2 LayerNorm epsilon = 1e-05" \
    "config.json's layer_norm_epsilon other than trident's: refused, naming the field, both values and the file" $untied
edit "$WORK/el" "$WORK/x_rms" "config.rms_norm_eps=1e-6"
# shellcheck disable=SC2086
refuse x_rms "x_rms/config.json: rms_norm_eps = 1e-06, \[model\] norm_eps = 1e-05" \
    "llama: config.json's rms_norm_eps other than [model] norm_eps: refused" $llama
edit "$WORK/el" "$WORK/x_scale" 'config.rope_scaling={"rope_type": "llama3", "factor": 32.0}'
# shellcheck disable=SC2086
refuse x_scale 'x_scale/config.json: rope_scaling = {"rope_type":"llama3","factor":32.0}, trident.s rotary embedding is not scaled' \
    "llama: a scaled rotary embedding (rope_scaling): refused" $llama
for v in 1e300 '"2"' 2.0; do
    edit "$WORK/ea" "$WORK/x_layers" "config.n_layer=$v"
    # shellcheck disable=SC2086
    run 1 train --config "$cfg" $untied --set checkpoint.init_from="$WORK/x_layers"
    rm -rf "$WORK/x_layers"
    grep -o "n_layer = [^,]* (not an integer), \[model\] n_layer = 2" "$WORK/out" || echo "exit $rc"
done > "$WORK/layers"
[ "$(cat "$WORK/layers")" = "$(printf '%s\n' 'n_layer = 1e+300 (not an integer), [model] n_layer = 2' \
    'n_layer = "2" (not an integer), [model] n_layer = 2' 'n_layer = 2.0 (not an integer), [model] n_layer = 2')" ]
ok $? "config.json's n_layer as 1e300, \"2\" and 2.0: each shown as the file writes it: $(tr '\n' ';' < "$WORK/layers")"

# 8. what strictness must not refuse: published models' own quirks.
# A directory as HF hub's gpt2 is: names without "transformer.", the
# causal-mask buffers of each block, no tie_word_embeddings (tied by
# default), the fields of the head's summary and of dropout
edit "$WORK/eb" "$WORK/x_hub" strip=transformer. h.0.attn.bias=h.0.ln_1.bias \
    h.0.attn.masked_bias=h.0.ln_1.bias h.1.attn.bias=h.0.ln_1.bias -config.tie_word_embeddings \
    'config.summary_type="cls_index"' config.summary_use_proj=true config.resid_pdrop=0.1 \
    config.n_ctx=32 'config.task_specific_params={"text-generation": {"do_sample": true}}'
# shellcheck disable=SC2086
run 1 train --config "$cfg" $tied $zero_lr --set checkpoint.init_from="$WORK/x_hub" \
    --set checkpoint.dir="$WORK/r_hub"
"$DIFF" "$WORK/rhb/step_00000001.h5" "$WORK/r_hub/step_00000001.h5" 0 > "$WORK/diff" 2>&1
st=$?
expect 0 "holds 3 buffers that transformers computes on load" \
    "a directory laid out as HF hub's gpt2 (no transformer. prefix, attn.bias buffers, no tie_word_embeddings): loaded, the buffers in a note"
[ $st = 0 ]
ok $? "... the same weights as from the export it was made of: $(cat "$WORK/diff")"
edit "$WORK/el" "$WORK/x_lhub" model.layers.0.self_attn.rotary_emb.inv_freq=model.norm.weight \
    model.layers.1.self_attn.rotary_emb.inv_freq=model.norm.weight
# shellcheck disable=SC2086
run 1 train --config "$cfg" $llama $zero_lr --set checkpoint.init_from="$WORK/x_lhub" \
    --set checkpoint.dir="$WORK/r_lhub"
expect 0 "holds 2 buffers that transformers computes on load" \
    "llama: rotary_emb.inv_freq buffers beside the weights (older published llamas): loaded, with a note"
done_testing
