#!/bin/sh
# t_moe_layer.sh - a tiny MoE Llama (2 layers, 32 wide, 4 experts, top 2,
# one shared expert, capacity 1.0) trains on one rank: its loss falls, a
# second run gives the same bits (routing is deterministic), and the
# layer's TP path (tp 2, sequence parallelism) matches the single rank's
# per-step losses within 1e-5. Every layout against the single rank is
# t_layouts_moe.sh's.
. "${TRI_SRCDIR:-.}/tests/lib.sh"
np=${1:-2}
cfg="$WORK/c.ini"
write_config "$cfg"
cat >> "$cfg" <<EOC
[model]
arch = llama
n_kv_head = 1
ffn_dim = 48
tie_embeddings = false
n_expert = 4
top_k = 2
moe_ffn_dim = 24
n_shared_expert = 1
moe_capacity = 1.0
moe_z_loss = 0.001
EOC
plan 4

train() {  # name ranks extra --set keys...
    name=$1 ranks=$2
    shift 2
    $TRI_MPIEXEC -n "$ranks" "$TRIDENT" train --config "$cfg" --set train.micro_batch=2 \
        --set train.grad_accum=2 --set train.steps=20 --set log.metrics="$WORK/$name.jsonl" \
        "$@" > "$WORK/$name.out" 2>&1
    st=$?
    [ $st -eq 0 ] || sed 's/^/# /' "$WORK/$name.out"
    return $st
}
losses() { sed -n 's/^{"step":.*"loss":\([^,]*\).*/\1/p' "$1"; }

train one 1 --set checkpoint.dir="$WORK/ck" &&
    "$TRIDENT" inspect "$WORK/ck" > "$WORK/inspect.out" 2>&1 &&
    grep -q '/model/h.1.moe.e.3.down.w  *32 x 24 ' "$WORK/inspect.out" &&
    grep -q '/model/h.0.moe.shared_gate.w  *1 x 32 ' "$WORK/inspect.out" &&
    ! grep -q 'mlp' "$WORK/inspect.out" &&
    grep -q '^experts: 2 of 2 layers MoE, 4 experts of width 24, top 2, a shared expert of width 24: [0-9.]*M of the parameters active per token$' "$WORK/one.out"
ok $? "a MoE llama trains on one rank; its checkpoint holds the experts, no dense MLP; start-up names the experts"
losses "$WORK/one.jsonl" > "$WORK/one.loss"
first=$(head -n 1 "$WORK/one.loss") last=$(tail -n 1 "$WORK/one.loss")
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b + 0 < a - 0.5) }'
ok $? "its loss falls by more than 0.5 in 20 steps ($first to $last)"
train again 1
losses "$WORK/again.jsonl" > "$WORK/again.loss"
[ -s "$WORK/one.loss" ] && cmp -s "$WORK/one.loss" "$WORK/again.loss"
ok $? "a second run gives the same losses, bit for bit"
if [ "$np" -ge 2 ]; then
    train tp2 2 --set parallel.tp=2 --set parallel.sequence_parallel=true
    losses "$WORK/tp2.jsonl" > "$WORK/tp2.loss"
    worst=$(max_rel "$WORK/one.loss" "$WORK/tp2.loss" 20)
    awk -v w="$worst" 'BEGIN { exit !(w != "missing" && w + 0 <= 1e-5) }'
    ok $? "tp 2 with sequence parallelism: 20 per-step losses match the single rank (max rel $worst, tol 1e-5)"
else
    ok 0 "tp 2 # SKIP needs 2 ranks"
fi
done_testing
