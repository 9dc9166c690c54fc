#!/bin/sh
# t_plan.sh - `trident plan` against the trainer: for the same config and
# world, the per-rank memory table that plan computes (arithmetic, no MPI)
# equals the one the trainer prints from its real allocations (for gpt2
# and llama, replicated key/value heads included, with and without
# sequence parallelism, which must shrink the activations); and plan
# handles a 175B model on 1024 ranks, with the layouts that fit 80 GiB.
. "${TRI_SRCDIR:-.}/tests/lib.sh"
np=${1:-4}
cfg="$WORK/c.ini"
write_config "$cfg"
sed -i 's/^n_layer = 2/n_layer = 4/; s/^micro_batch = 4/micro_batch = 2/' "$cfg"
CASES="dp:--set+parallel.zero=1
pp2:--set+parallel.pp=2+--set+train.grad_accum=4
tp2-zero3:--set+parallel.tp=2+--set+parallel.zero=3
tp2-pp2-zero0-gpipe:--set+parallel.tp=2+--set+parallel.pp=2+--set+parallel.zero=0+--set+parallel.schedule=gpipe+--set+train.grad_accum=3
pp2-zero2-recompute:--set+parallel.pp=2+--set+parallel.zero=2+--set+train.recompute=full+--set+train.grad_accum=4
untied-every2:--set+model.tie_embeddings=0+--set+train.recompute=every:2+--set+parallel.zero=3
two-level-dp:--set+parallel.node_size=2+--set+parallel.zero=2
llama-tp2-kv1-zero3-every2:--set+model.arch=llama+--set+model.n_kv_head=1+--set+model.ffn_dim=48+--set+parallel.tp=2+--set+parallel.zero=3+--set+train.recompute=every:2+--set+model.tie_embeddings=0
llama-pp2-tp2-zero2-recompute:--set+model.arch=llama+--set+parallel.pp=2+--set+parallel.tp=2+--set+parallel.zero=2+--set+train.recompute=full+--set+train.grad_accum=4
sp-tp2-zero3:--set+parallel.tp=2+--set+parallel.zero=3+--set+parallel.sequence_parallel=1
sp-pp2-tp2-every2:--set+parallel.tp=2+--set+parallel.pp=2+--set+train.recompute=every:2+--set+parallel.sequence_parallel=1+--set+train.grad_accum=4
sp-tp4-llama-kv1:--set+model.arch=llama+--set+model.n_head=4+--set+model.n_kv_head=1+--set+model.ffn_dim=48+--set+parallel.tp=4+--set+model.tie_embeddings=0+--set+parallel.sequence_parallel=1"
plan $(($(echo "$CASES" | wc -l) + 6))
table() { sed -n '/^memory per rank/,/^[^ m]/p' "$1" | grep '^  rank'; }
for c in $CASES; do
    name=${c%%:*}
    sets=$(echo "${c#*:}" | tr '+' ' ')
    # shellcheck disable=SC2086
    run "$np" train --config "$cfg" --set train.steps=0 $sets
    table "$WORK/out" > "$WORK/train.mem"
    # shellcheck disable=SC2086
    "$TRIDENT" plan --config "$cfg" --world "$np" $sets > "$WORK/plan.out" 2>&1
    table "$WORK/plan.out" > "$WORK/plan.mem"
    [ -s "$WORK/train.mem" ] && cmp -s "$WORK/train.mem" "$WORK/plan.mem"
    ok $? "$name: plan's per-rank memory equals the trainer's ($(wc -l < "$WORK/plan.mem") ranks)"
    cmp -s "$WORK/train.mem" "$WORK/plan.mem" || diff "$WORK/train.mem" "$WORK/plan.mem" | sed 's/^/# /'
done
# Sequence parallelism divides the activations outside attention and the
# MLP by tp: on tp 4 the trainer's rank 0 allocates less with it.
acts() {  # the trainer's rank 0 activations (MiB) with sequence_parallel=$1
    run "$np" train --config "$cfg" --set train.steps=0 --set parallel.tp=4 --set model.n_head=4 \
        --set parallel.sequence_parallel="$1"
    table "$WORK/out" | awk 'NR == 1 { print $NF }'
}
without=$(acts 0) with=$(acts 1)
awk -v a="$without" -v b="$with" 'BEGIN { exit !(b > 0 && b < a) }'
ok $? "sequence_parallel on tp 4: activations per rank $with MiB, against $without MiB without"
cat > "$WORK/g175.ini" <<EOC
[model]
n_layer = 96
n_embd = 12288
n_head = 96
seq_len = 2048
vocab_size = 50304
[parallel]
tp = 8
pp = 16
[train]
micro_batch = 1
grad_accum = 192
recompute = full
[data]
train = none.bin
format = tokens
EOC
start=$(date +%s%N)
"$TRIDENT" plan --config "$WORK/g175.ini" --world 1024 --mem 80 > "$WORK/out" 2>&1
rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
expect 0 "174604.837M parameters" "plan: GPT-3 175B on 1024 ranks (${ms} ms)"
grep -q "layouts of 1024 ranks within 80.0 GiB" "$WORK/out"
ok $? "plan lists the layouts that fit 80 GiB"
"$TRIDENT" plan --config "$WORK/g175.ini" --world 1024 --hw h100 --set train.precision=bf16 \
    > "$WORK/out" 2>&1
mfu=$(sed -n 's/.*MFU \([0-9.]*\)%.*/\1/p' "$WORK/out" | tail -n 1)
grep -q "^fastest layout on 1024 x h100" "$WORK/out" \
    && awk -v m="$mfu" 'BEGIN { exit !(m > 20 && m < 70) }'
ok $? "plan --hw h100: a term-by-term prediction and the fastest layout (MFU $mfu%)"
"$TRIDENT" plan --config "$cfg" --world 1 --hw cpu > "$WORK/out" 2>&1
grep -q "^predicted step on 1 x cpu" "$WORK/out" && grep -q "^  GEMMs" "$WORK/out"
ok $? "plan --hw cpu measures this machine and predicts the step"
"$TRIDENT" plan --config "$cfg" --world 1 --hw tpu > "$WORK/out" 2>&1
rc=$?
expect 1 "unknown hardware" "an unknown hardware profile is refused"
done_testing
