#!/bin/sh
# t_interop_moe.sh - a mixture-of-experts llama in and out of HuggingFace's
# formats (doc/interop.md, "Mixture of experts"): `trident export` of a
# Mixtral-shaped model (MixtralForCausalLM) and of a Qwen2-MoE-shaped one
# (a shared expert, a dense layer, the top-k not renormalised), each read
# by tests/hf_check_moe.py, written from transformers' modeling files and
# the safetensors specification alone: every name, shape and dtype, every
# value against the checkpoint's, Qwen2-MoE's q, k, v biases zero, and the
# format's forward pass from the export alone giving the run's loss
# (within 1e-5 relative). The runs train on one window (a file of seq_len
# + 1 bytes), so a step's loss is the cross-entropy of that window. Then
# init_from: the round trip gives bitwise the checkpoint's weights (1 rank,
# ep = 2 and tp = 2), and a run started from the export trains on exactly as the
# run that wrote it (the same losses and final weights, bitwise); a missing
# expert, an extra one, config.json fields and nonzero or missing biases
# refused by name; a model neither format expresses refused by export, and
# a capacity factor (no HF field) noted.
. "${TRI_SRCDIR:-.}/tests/lib.sh"
DIFF="${TRI_BUILDDIR:-.}/tests/ckpt_diff"
CHECK="${TRI_SRCDIR:-.}/tests/hf_check.py"
CHECK_MOE="${TRI_SRCDIR:-.}/tests/hf_check_moe.py"
plan 18
if ! command -v python3 >/dev/null 2>&1 || ! command -v h5dump >/dev/null 2>&1; then
    echo "# python3 and h5dump (hdf5-tools) are needed" >&2
    exit 1
fi
printf 'Mixture of expert' > "$WORK/window.txt"   # seq_len + 1 = 17 bytes
cfg="$WORK/c.ini"
cat > "$cfg" <<EOC
[parallel]
device = cpu
[model]
arch = llama
n_layer = 2
n_embd = 32
n_head = 2
n_kv_head = 1
seq_len = 16
vocab_size = 256
tie_embeddings = false
n_expert = 4
top_k = 2
moe_ffn_dim = 48
[train]
micro_batch = 2
steps = 1
lr = 0
min_lr = 0
warmup = 0
[data]
train = $WORK/window.txt
val = $WORK/window.txt
[eval]
every = 0
[log]
every = 1
sample_tokens = 0
EOC
# a capacity factor that drops nothing (4 x tokens x top_k / n_expert: all
# of them), which export notes
qwen="--set model.n_shared_expert=1 --set model.moe_every=2 --set model.moe_router=softmax_topk --set model.moe_capacity=4"
# the step-1 loss of a run's metrics file
loss_of() { sed -n 's/.*"step":1,"loss":\([^,]*\),.*/\1/p' "$1"; }

# 1. Mixtral: one step at lr = 0, so the checkpoint holds the weights the
# loss was computed with
run 1 train --config "$cfg" --set checkpoint.dir="$WORK/m" --set log.metrics="$WORK/m.jsonl"
M="$WORK/m/step_00000001.h5"
run 1 export "$M" --format hf "$WORK/em"
expect 0 "exported .* to .*em: 41 tensors in 1 file (fp32)" "export of a Mixtral-shaped model (41 tensors: 12 experts' a layer)"
python3 "$CHECK_MOE" "$WORK/em" "$M" "$WORK/window.txt" "$(loss_of "$WORK/m.jsonl")" \
    > "$WORK/check" 2>&1
st=$?
sed 's/^/# /' "$WORK/check"
[ $st = 0 ] && grep -q '"MixtralForCausalLM"' "$WORK/em/config.json"
ok $? "MixtralForCausalLM's names, shapes and values as hf_check_moe.py reads them; its forward pass from the export gives the run's loss"

# 2. init_from: bitwise the weights, on 1 rank, with the experts split
# over ep = 2, and over tp = 2
run 1 train --config "$cfg" --set checkpoint.init_from="$WORK/em" --set checkpoint.dir="$WORK/r1"
expect 0 "initialised from .*em (HuggingFace safetensors): step 0" "init_from the Mixtral export"
"$DIFF" "$M" "$WORK/r1/step_00000001.h5" 0 > "$WORK/diff" 2>&1
ok $? "export then init_from gives bitwise the checkpoint's weights: $(cat "$WORK/diff")"
for split in ep tp; do
    run 2 train --config "$cfg" --set checkpoint.init_from="$WORK/em" \
        --set checkpoint.dir="$WORK/r_$split" --set parallel.$split=2
    "$DIFF" "$M" "$WORK/r_$split/step_00000001.h5" 0 > "$WORK/diff" 2>&1
    st=$?
    how="2 experts a rank"
    [ $split = tp ] && how="each expert's rows or columns split, the router whole"
    [ $rc = 0 ] && [ $st = 0 ]
    ok $? "... and on $split = 2 ($how): $(cat "$WORK/diff")"
done

# 3. it trains on from the export as it would have without it
trainon="--set train.steps=3 --set train.lr=3e-3 --set train.warmup=1"
# shellcheck disable=SC2086
run 1 train --config "$cfg" $trainon --set checkpoint.dir="$WORK/t0" --set log.metrics="$WORK/t0.jsonl"
# shellcheck disable=SC2086
run 1 train --config "$cfg" $trainon --set checkpoint.init_from="$WORK/em" \
    --set checkpoint.dir="$WORK/t1" --set log.metrics="$WORK/t1.jsonl"
losses() { grep '"step"' "$1" | sed 's/.*"loss":\([^,]*\),.*/\1/' | tr '\n' ' '; }
"$DIFF" "$WORK/t0/step_00000003.h5" "$WORK/t1/step_00000003.h5" 0 > "$WORK/diff" 2>&1
st=$?
[ $st = 0 ] && [ -n "$(losses "$WORK/t0.jsonl")" ] && [ "$(losses "$WORK/t0.jsonl")" = "$(losses "$WORK/t1.jsonl")" ]
ok $? "3 steps from the export = 3 steps from the seed: losses $(losses "$WORK/t1.jsonl")and final weights bitwise: $(cat "$WORK/diff")"

# 4. Qwen2-MoE: a shared expert, layer 0 dense, the top-k as they are
# shellcheck disable=SC2086
run 1 train --config "$cfg" $qwen --set checkpoint.dir="$WORK/q" --set log.metrics="$WORK/q.jsonl"
Q="$WORK/q/step_00000001.h5"
run 1 export "$Q" --format hf "$WORK/eq"
expect 0 "note: export: \[model\] moe_capacity = 4 has no HuggingFace field: transformers' MoE layers drop no token" \
    "export of a Qwen2-MoE-shaped model, its capacity factor noted"
python3 "$CHECK_MOE" "$WORK/eq" "$Q" "$WORK/window.txt" "$(loss_of "$WORK/q.jsonl")" \
    > "$WORK/check" 2>&1
st=$?
sed 's/^/# /' "$WORK/check"
[ $st = 0 ] && grep -q 'Qwen2MoeForCausalLM' "$WORK/eq/config.json" \
    && grep -q '"norm_topk_prob": false' "$WORK/eq/config.json"
ok $? "Qwen2MoeForCausalLM's names (q, k, v biases zero), shapes and values; its forward pass gives the run's loss"
# shellcheck disable=SC2086
run 1 train --config "$cfg" $qwen --set checkpoint.init_from="$WORK/eq" --set checkpoint.dir="$WORK/rq"
"$DIFF" "$Q" "$WORK/rq/step_00000001.h5" 0 > "$WORK/diff" 2>&1
st=$?
[ $rc = 0 ] && [ $st = 0 ]
ok $? "Qwen2-MoE: export then init_from gives bitwise the checkpoint's weights: $(cat "$WORK/diff")"

# 5. strictness: each copy changed by hf_check.py --edit, refused by name
refuse() {
    r_dir=$1 r_pat=$2 r_what=$3
    shift 3
    run 1 train --config "$cfg" --set checkpoint.init_from="$WORK/$r_dir" \
        --set checkpoint.dir="$WORK/r_$r_dir" "$@"
    expect 1 "$r_pat" "$r_what"
}
edit() { python3 "$CHECK" --edit "$@" > "$WORK/check" 2>&1 || sed 's/^/# /' "$WORK/check"; }
e13="model.layers.1.block_sparse_moe.experts.3"
edit "$WORK/em" "$WORK/x_miss" "-$e13.w2.weight"
refuse x_miss "x_miss: tensor $e13.w2.weight is missing (trident's h.1.moe.e.3.down.w)" \
    "a missing expert tensor: refused, naming it and trident's tensor"
edit "$WORK/em" "$WORK/x_extra" "model.layers.1.block_sparse_moe.experts.4.w1.weight=$e13.w1.weight"
refuse x_extra "x_extra: 1 tensor that no tensor of \[model\] reads, which the run would drop: model.layers.1.block_sparse_moe.experts.4.w1.weight" \
    "an expert more than n_expert: refused, naming the tensor nothing reads"
edit "$WORK/em" "$WORK/x_topk" "config.num_experts_per_tok=1"
refuse x_topk "x_topk/config.json: num_experts_per_tok = 1, \[model\] top_k = 2" \
    "config.json's num_experts_per_tok other than top_k: refused, naming both"
# shellcheck disable=SC2086
refuse em "em/config.json: model_type is mixtral, \[model\] is Qwen2-MoE's" \
    "a Mixtral directory into a Qwen2-MoE [model]: refused" $qwen
edit "$WORK/eq" "$WORK/x_bias" "model.layers.0.self_attn.k_proj.bias[3]=0.5"
# shellcheck disable=SC2086
refuse x_bias "x_bias/model.safetensors: tensor model.layers.0.self_attn.k_proj.bias holds 0.5 at \[3\]: trident's attention has no bias" \
    "Qwen2-MoE: a nonzero k bias: refused, naming the tensor and the element" $qwen
edit "$WORK/eq" "$WORK/x_nobias" "-model.layers.1.self_attn.q_proj.bias"
# shellcheck disable=SC2086
refuse x_nobias "x_nobias: tensor model.layers.1.self_attn.q_proj.bias is missing (the bias of trident's h.1.attn.q.w" \
    "Qwen2-MoE: a missing q bias: refused" $qwen

# 6. a model neither format expresses: no shared expert, a dense layer
run 1 train --config "$cfg" --set model.moe_every=2 --set checkpoint.dir="$WORK/n"
run 1 export "$WORK/n/step_00000001.h5" --format hf "$WORK/en"
expect 1 "\[model\] n_shared_expert = 0 with moe_every > 1 (dense layers between the MoE ones): no HuggingFace format expresses this model" \
    "export of a MoE model with dense layers and no shared expert: refused, naming n_shared_expert"
[ ! -e "$WORK/en" ]
ok $? "... before it made the directory"
done_testing
