#!/bin/sh
# t_gpu.sh - the CUDA backend end to end on one GPU: the small test model
# trained 20 steps on the GPU gives the CPU backend's per-step losses,
# within 1e-4 relative in fp32 (fp32 reassociation in cuBLAS and the
# reductions, compounded over 20 Adam steps) and 3e-2 in bf16 (one bf16 ulp
# is 2^-8 = 3.9e-3 of a value; the two backends round the same fp32 results
# but their GEMMs sum in different orders, so activations may differ by an
# ulp, and Adam carries that forward; the tensor-core attention also
# rounds P and dS to bf16 before their second products). Each run's steps
# are also checked to run and to report device = cuda; bf16 also with
# TRIDENT_LT_EPILOGUE=none (the unfused kernels) against the default
# cuBLASLt epilogues (bias) and against all (GELU fused too), within
# bf16's 3e-2, with TRIDENT_FUSED=0 against the fused kernels (the
# default), the same, and TRIDENT_ATTENTION_ASYNC=0 (the attention's tiles
# loaded without cp.async) against the default, every logged digit alike;
# a bad value of either switch stops the run. Then the same for
# a small Llama (grouped-query attention, 4 query heads over 2 key/value
# heads; RMSNorm, RoPE, SwiGLU, untied head), in fp32 with and without
# full recomputation and in bf16: the ops only Llama uses, end to end
# (on an H100: 2.4e-6 in fp32, 1.1e-2 in bf16), and in fp32 and bf16
# with TRIDENT_FUSED=0 against the default (1e-4, 3e-2). No GPU run allocates
# device memory after its first step (the metrics' `allocations`: on a GPU
# a cudaFree inside a step waits for the whole device, NCCL included).
# The LM head on the GPU holds its whole microbatch of logits where the
# CPU cuts it in two, as plan counts it for a GPU. Then a mixture of
# experts (the same Llama with 4 experts, top 2, a shared expert, a
# capacity that drops some pairs): routing, the permutation, the grouped
# GEMMs and the aux loss on the device against the CPU, fp32 and bf16.
#
# Without a CUDA build, or without a GPU, it prints `1..0 # SKIP` and why.
. "${TRI_SRCDIR:-.}/tests/lib.sh"
cfg="$WORK/c.ini"
write_config "$cfg"
llama="$WORK/llama.ini"
write_config "$WORK/gpt2.ini"
sed '/^\[model\]/,/^\[train\]/{/^\[train\]/!d;}' "$WORK/gpt2.ini" > "$llama"
cat >> "$llama" <<EOC
[model]
arch = llama
n_layer = 4
n_embd = 64
n_head = 4
n_kv_head = 2
ffn_dim = 96
seq_len = 64
tie_embeddings = false
EOC
steps=20

# train NAME DEVICE PRECISION [KEY=VALUE]: a 20-step run of $cfg;
# metrics to $WORK/NAME.jsonl
train() {
    run 1 train --config "$cfg" --set parallel.device="$2" --set train.precision="$3" \
        --set train.steps=$steps --set log.metrics="$WORK/$1.jsonl" ${4:+--set "$4"}
    cp "$WORK/out" "$WORK/$1.out"
}

train probe cuda fp32
skip_without_gpu
plan 24

losses() { sed -n 's/.*"loss":\([^,}]*\).*/\1/p' "$1"; }

# agree NAME_A NAME_B TOL WHAT: the two runs' per-step losses within TOL
agree() {
    losses "$WORK/$1.jsonl" > "$WORK/$1.loss"
    losses "$WORK/$2.jsonl" > "$WORK/$2.loss"
    worst=$(paste "$WORK/$1.loss" "$WORK/$2.loss" | awk -v n_want=$steps '
        { d = $1 - $2; if (d < 0) d = -d; r = d / ($1 < 0 ? -$1 : $1); if (r > w) w = r; n++ }
        END { if (n != n_want) print "missing"; else printf "%.2e", w }')
    awk -v w="$worst" -v tol="$3" 'BEGIN { exit !(w != "missing" && w + 0 <= tol + 0) }'
    ok $? "$4: $steps per-step losses agree (max rel $worst, tol $3)"
}

ok "$rc" "fp32 on the GPU trains $steps steps (exit $rc)"
[ "$rc" -eq 0 ] || sed 's/^/#   /' "$WORK/probe.out" | tail -n 15
train cpu32 cpu fp32
agree cpu32 probe 1e-4 "fp32: GPU against CPU"
train gpu16 cuda bf16
ok "$rc" "bf16 on the GPU trains $steps steps (exit $rc)"
[ "$rc" -eq 0 ] || sed 's/^/#   /' "$WORK/gpu16.out" | tail -n 15
train cpu16 cpu bf16
agree cpu16 gpu16 3e-2 "bf16: GPU against CPU"
# the unfused kernels of before (bias rows, GELU, the column-sum bias
# gradient) against the cuBLASLt epilogues that replaced them
export TRIDENT_LT_EPILOGUE=none
train gpu16none cuda bf16
unset TRIDENT_LT_EPILOGUE
grep -q "^gemm: .*cuBLASLt epilogues: none (TRIDENT_LT_EPILOGUE)" "$WORK/gpu16none.out"
ok $? "TRIDENT_LT_EPILOGUE=none is named on the gemm: line (exit $rc)"
agree gpu16none gpu16 3e-2 "bf16: cuBLASLt epilogues against the unfused kernels"
# TRIDENT_FUSED's kernels (the head's bf16 gradient over the logits and
# its strided backward, the batched embedding backward, AdamW and the
# norm in one launch, the add inside LayerNorm) against those they replace
export TRIDENT_FUSED=0
train gpu16unfused cuda bf16
unset TRIDENT_FUSED
grep -q "^fused: off (TRIDENT_FUSED=0" "$WORK/gpu16unfused.out"
ok $? "TRIDENT_FUSED=0 is named on the fused: line (exit $rc)"
agree gpu16unfused gpu16 3e-2 "bf16: TRIDENT_FUSED's kernels against the unfused ones"
# all (not the default: cuBLASLt's GELU, doc/gpu.md) trains too
export TRIDENT_LT_EPILOGUE=all
train gpu16all cuda bf16
unset TRIDENT_LT_EPILOGUE
agree gpu16none gpu16all 3e-2 "bf16: TRIDENT_LT_EPILOGUE=all against the unfused kernels"
export TRIDENT_LT_EPILOGUE=gelu
run 1 train --config "$cfg" --set parallel.device=cuda --set train.steps=1
unset TRIDENT_LT_EPILOGUE
[ "$rc" -ne 0 ] && grep -q "TRIDENT_LT_EPILOGUE=gelu: must be none, bias or all" "$WORK/out"
ok $? "TRIDENT_LT_EPILOGUE=gelu stops the run naming it (exit $rc)"
# the tensor-core attention's tiles by cp.async into two buffers (the
# default) against one buffer loaded between two barriers
# (TRIDENT_ATTENTION_ASYNC=0): the same sums in the same order, so the
# same bits (the losses, every digit logged); one head of 32 so that the
# tiles stream by cp.async
train gpu16async cuda bf16 model.n_head=1
export TRIDENT_ATTENTION_ASYNC=0
train gpu16sync cuda bf16 model.n_head=1
unset TRIDENT_ATTENTION_ASYNC
losses "$WORK/gpu16async.jsonl" > "$WORK/gpu16async.loss"
losses "$WORK/gpu16sync.jsonl" > "$WORK/gpu16sync.loss"
[ "$(wc -l < "$WORK/gpu16async.loss")" -eq "$steps" ] \
    && cmp -s "$WORK/gpu16async.loss" "$WORK/gpu16sync.loss"
ok $? "bf16, hs 32: TRIDENT_ATTENTION_ASYNC=0 gives the cp.async kernels' $steps per-step losses, every logged digit"
export TRIDENT_ATTENTION_ASYNC=2
run 1 train --config "$cfg" --set parallel.device=cuda --set train.precision=bf16 --set train.steps=1
unset TRIDENT_ATTENTION_ASYNC
[ "$rc" -ne 0 ] && grep -q "TRIDENT_ATTENTION_ASYNC=2: expected 0 or 1" "$WORK/out"
ok $? "TRIDENT_ATTENTION_ASYNC=2 stops a bf16 run naming it (exit $rc)"
# allocations NAME...: each run's device allocations after step 1 stay
# what they were at step 1 (its metrics file's `allocations`)
flat_allocations() {
    for name in "$@"; do
        sed -n 's/^{"step":.*"allocations":\([0-9]*\).*/\1/p' "$WORK/$name.jsonl" |
            awk -v want="$steps" '{ n++; if (n == 1) first = $1; else if ($1 != first) bad++ }
                END { exit !(n == want && bad == 0) }' || return 1
    done
}
# the run says which device it used, and it was the GPU
grep -q "^device = cuda" "$WORK/probe.out" && grep -q "^gemm: cuBLAS .* (sm_[0-9]*" "$WORK/probe.out"
ok $? "the GPU run reports the CUDA backend"
# and what fuses into its GEMMs (TRIDENT_LT_EPILOGUE, unset here: bias)
grep -q "^gemm: .*cuBLASLt epilogues: bias (TRIDENT_LT_EPILOGUE)" "$WORK/probe.out"
ok $? "the gemm: line names the cuBLASLt epilogues"

# The head's budget on a GPU is a sixteenth of its memory, on the CPU 16 Mi
# logits: with a 262144-word vocabulary the 128 rows of a microbatch are
# one chunk on the GPU and two of 64 on the CPU, 64 MiB more fp32 logits;
# plan with device = cuda and --mem counts the GPU's (any GPU over 2 GiB).
head_mib() {  # rank 0's activations (MiB) of a 0-step run ($1: trident train or plan)
    awk -F/ '/^  rank   0:/ { print $4 + 0; exit }' "$1"
}
big_vocab="--set model.vocab_size=262144 --set train.steps=0"
# shellcheck disable=SC2086
run 1 train --config "$cfg" $big_vocab --set parallel.device=cuda
on_gpu=$(head_mib "$WORK/out")
# shellcheck disable=SC2086
run 1 train --config "$cfg" $big_vocab --set parallel.device=cpu
on_cpu=$(head_mib "$WORK/out")
# shellcheck disable=SC2086
"$TRIDENT" plan --config "$cfg" --world 1 $big_vocab --set parallel.device=cuda --mem 80 \
    > "$WORK/plan.out" 2>&1
planned=$(head_mib "$WORK/plan.out")
awk -v g="$on_gpu" -v c="$on_cpu" -v p="$planned" \
    'BEGIN { d = g - c; exit !(d > 63.9 && d < 64.1 && p == g) }'
ok $? "the LM head on the GPU: activations $on_gpu MiB against $on_cpu on the CPU (one chunk, not two); plan for a GPU: $planned"

cfg="$llama"
train llama32 cuda fp32
ok "$rc" "Llama fp32 on the GPU trains $steps steps (exit $rc)"
[ "$rc" -eq 0 ] || sed 's/^/#   /' "$WORK/llama32.out" | tail -n 15
train llama_cpu32 cpu fp32
agree llama_cpu32 llama32 1e-4 "Llama fp32: GPU against CPU"
train llama_recompute cuda fp32 train.recompute=full
agree llama_cpu32 llama_recompute 1e-4 "Llama fp32, full recomputation: GPU against CPU"
train llama16 cuda bf16
train llama_cpu16 cpu bf16
agree llama_cpu16 llama16 3e-2 "Llama bf16: GPU against CPU"
# TRIDENT_FUSED's kernels of Llama (RMSNorm's dw in 16-byte packs, the
# residual add inside the MLP's RMSNorm, and the rest the GPT-2 runs
# above switch) against those they replace, fp32 (4-element packs) and
# bf16 (8)
export TRIDENT_FUSED=0
train llama32unfused cuda fp32
train llama16unfused cuda bf16
unset TRIDENT_FUSED
agree llama32unfused llama32 1e-4 "Llama fp32: TRIDENT_FUSED's kernels against the unfused ones"
agree llama16unfused llama16 3e-2 "Llama bf16: TRIDENT_FUSED's kernels against the unfused ones"
moe="model.n_expert=4"
for key in top_k=2 n_shared_expert=1 moe_ffn_dim=32 moe_capacity=1.25 moe_aux_loss=0.05; do
    printf 'model.%s\n' "$key"
done > "$WORK/moe.keys"
# train_moe NAME DEVICE PRECISION: train with the MoE keys on top of $cfg
train_moe() {
    # shellcheck disable=SC2046  # one --set per line of moe.keys
    run 1 train --config "$cfg" --set parallel.device="$2" --set train.precision="$3" \
        --set train.steps=$steps --set log.metrics="$WORK/$1.jsonl" --set "$moe" \
        $(sed 's/^/--set /' "$WORK/moe.keys")
    cp "$WORK/out" "$WORK/$1.out"
}
train_moe moe32 cuda fp32
[ "$rc" -eq 0 ] || sed 's/^/#   /' "$WORK/moe32.out" | tail -n 15
train_moe moe_cpu32 cpu fp32
agree moe_cpu32 moe32 1e-4 "MoE Llama fp32 (4 experts, top 2, shared, capacity 1.25): GPU against CPU"
train_moe moe16 cuda bf16
train_moe moe_cpu16 cpu bf16
agree moe_cpu16 moe16 3e-2 "MoE Llama bf16: GPU against CPU"
flat_allocations probe gpu16 llama32 llama_recompute llama16 moe32 moe16
ok $? "no GPU run allocates device memory after step 1 (metrics' allocations: $(
    sed -n 's/^{"step":.*"allocations":\([0-9]*\).*/\1/p' "$WORK/gpu16.jsonl" | sort -u | tr '\n' ' '))"
done_testing
