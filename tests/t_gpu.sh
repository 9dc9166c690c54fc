#!/bin/sh
# t_gpu.sh - the CUDA backend end to end on one GPU: the small test model
# trained 20 steps on the GPU gives the CPU backend's per-step losses,
# within 1e-4 relative in fp32 (fp32 reassociation in cuBLAS and the
# reductions, compounded over 20 Adam steps) and 3e-2 in bf16 (one bf16 ulp
# is 2^-8 = 3.9e-3 of a value; the two backends round the same fp32 results
# but their GEMMs sum in different orders, so activations may differ by an
# ulp, and Adam carries that forward; the tensor-core attention also
# rounds P and dS to bf16 before their second products). Each run's steps
# are also checked to run and to report device = cuda. Then the same for
# a small Llama (grouped-query attention, 4 query heads over 2 key/value
# heads; RMSNorm, RoPE, SwiGLU, untied head), in fp32 with and without
# full recomputation and in bf16: the ops only Llama uses, end to end
# (on an H100: 2.4e-6 in fp32, 1.1e-2 in bf16). No GPU run allocates
# device memory after its first step (the metrics' `allocations`: on a GPU
# a cudaFree inside a step waits for the whole device, NCCL included).
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
plan 11

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
flat_allocations probe gpu16 llama32 llama_recompute llama16
ok $? "no GPU run allocates device memory after step 1 (metrics' allocations: $(
    sed -n 's/^{"step":.*"allocations":\([0-9]*\).*/\1/p' "$WORK/gpu16.jsonl" | sort -u | tr '\n' ' '))"
done_testing
