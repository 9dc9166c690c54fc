#!/bin/sh
# t_layouts_moe.sh - t_layouts.sh's invariant for mixtures of experts
# (issue 38; doc/moe.md, doc/design.md "Mixture of experts"): every layout
# trains the same MoE model. Three tiny MoE Llamas of 4 layers with 4
# experts, top 2: "moe" (one shared expert, every layer MoE, a z-loss),
# "plain" (no shared expert, every second layer MoE, the router's
# not-renormalised order) and "cap" (a capacity factor that drops), and
# "bf16" (moe in bf16). Each layout's 4 per-step losses and 4 aux-loss
# metrics (moe_aux) match its model's single-rank run within relative 1e-5
# and its final weights (the checkpoints' logical tensors, tests/ckpt_diff)
# within 1e-5; cap's dropped pairs (moe_dropped) are the single rank's;
# bf16 within t_layouts_llama's bf16 tolerances. The layouts put ep 2 and
# 4 beside tp (with and without sequence parallelism), pp (1F1B, zb1,
# interleaved), ZeRO 0-3 over the expert-data-parallel group (overlapped
# and not) and recompute. Every layout keeps micro_batch = 2, so each sees
# the single rank's microbatches: routing, capacity and the aux loss are
# per microbatch.
#
# Then: a layout run twice gives the same bits; a checkpoint saved at ep 2
# holds every expert, samples on one rank, and resumes at ep 1, at ep 4
# and at ep 2 x tp 2 with the uninterrupted run's losses.
. "${TRI_SRCDIR:-.}/tests/lib.sh"
np=${1:-4}
[ "$np" -ge 4 ] || { echo "1..0 # SKIP the layouts need 4 ranks"; exit 0; }
DIFF="${TRI_BUILDDIR:-.}/tests/ckpt_diff"
cfg="$WORK/c.ini"
write_config "$cfg"
# lib.sh's tiny model made a 4-layer MoE Llama; decay_steps fixes the
# learning-rate schedule, so a 4-step run is the first 4 steps of a
# 6-step one (the resume checks below)
tiny="model.arch=llama,model.n_layer=4,model.n_head=4,model.n_kv_head=2,model.ffn_dim=48"
tiny="$tiny,model.tie_embeddings=false,model.n_expert=4,model.top_k=2,model.moe_ffn_dim=16"
tiny="$tiny,train.micro_batch=2,train.decay_steps=6"
moe="model.n_shared_expert=1,model.moe_z_loss=1e-3"
plain="model.moe_every=2,model.moe_router=softmax_topk"
cap="model.n_shared_expert=1,model.moe_capacity=1"

# model:layout: ranks dp pp tp ep grad_accum zero schedule extra,keys
# (the first line of each model is its single-rank reference; micro_batch
# is 2 and the global batch 8 sequences throughout)
LAYOUTS="moe:1x1x1:1:1:1:1:1:4:1:1f1b:$moe,train.steps=6,checkpoint.every=4
moe:ep2:2:2:1:1:2:2:1:1f1b:$moe
moe:ep4-zero0:4:4:1:1:4:1:0:1f1b:$moe
moe:ep2-tp2:4:2:1:2:2:2:1:1f1b:$moe
moe:ep2-pp2-1f1b:4:2:2:1:2:2:1:1f1b:$moe
moe:ep2-pp2-zb1:4:2:2:1:2:2:1:zb1:$moe
moe:ep2-pp2-interleaved:4:2:2:1:2:2:1:interleaved:$moe,parallel.virtual_stages=2
moe:dp4-ep2-zero1:4:4:1:1:2:1:1:1f1b:$moe
moe:dp4-ep2-zero1-no-overlap:4:4:1:1:2:1:1:1f1b:$moe,parallel.overlap=false
moe:dp4-ep2-zero3:4:4:1:1:2:1:3:1f1b:$moe
moe:ep2-recompute:2:2:1:1:2:2:1:1f1b:$moe,train.recompute=full
plain:1x1x1:1:1:1:1:1:4:1:1f1b:$plain
plain:dp4-ep2-zero2:4:4:1:1:2:1:2:1f1b:$plain
cap:1x1x1:1:1:1:1:1:4:1:1f1b:$cap
cap:ep2-tp2-sp:4:2:1:2:2:2:1:1f1b:$cap,parallel.sequence_parallel=1
bf16:1x1x1:1:1:1:1:1:4:1:1f1b:$moe,train.precision=bf16
bf16:ep4:4:4:1:1:4:1:1:1f1b:$moe,train.precision=bf16"
count=$(echo "$LAYOUTS" | wc -l)
plan $((2 * (count - 4) + 7))

# train NAME RANKS KEYS: lib.sh's train_keys on the tiny MoE model
train() { train_keys "$cfg" "$1" "$2" "$tiny,$3"; }

# field NAME FILE: the value of NAME in each step record of FILE
field() { sed -n "s/^{\"step\":.*\"$1\":\([^,}]*\).*/\1/p" "$2"; }
# the per-step losses, then the per-step aux-loss metrics
loss_and_aux() { field loss "$1"; field moe_aux "$1"; }
# matches MODEL RUN TOL WTOL STATUS: two TAP lines, RUN's 4 per-step
# losses and aux metrics and its final weights against MODEL's
# single-rank run
matches() {
    loss_and_aux "$WORK/$2.jsonl" > "$WORK/$2.loss"
    single_rank_match "$1" "$2" 8 "4 per-step losses and aux metrics" "$3" "$4" "$5"
}

for line in $LAYOUTS; do
    IFS=: read -r model name ranks dp pp tp ep ga zero sched extra <<EOL
$line
EOL
    train "$model-$name" "$ranks" "parallel.dp=$dp,parallel.pp=$pp,parallel.tp=$tp,parallel.ep=$ep,train.grad_accum=$ga,parallel.zero=$zero,parallel.schedule=$sched${extra:+,$extra}"
    status=$?
    if [ "$name" = 1x1x1 ]; then
        [ $status -eq 0 ] || sed 's/^/# /' "$WORK/$model-$name.out" | tail -n 20
        # moe's reference runs on to step 6 for the resume checks below
        field loss "$WORK/$model-$name.jsonl" | head -n 4 > "$WORK/$model.ref.loss"
        field moe_aux "$WORK/$model-$name.jsonl" | head -n 4 >> "$WORK/$model.ref.loss"
    elif [ "$model" = bf16 ]; then
        matches "$model" "$model-$name" 2e-3 1e-2 $status   # t_layouts_llama's bf16 bounds
    else
        matches "$model" "$model-$name" 1e-5 1e-5 $status
    fi
done

# The capacity drops pairs, and every layout drops the same ones: each
# source rank caps its own microbatch's pairs per expert as one rank does.
field moe_dropped "$WORK/cap-1x1x1.jsonl" > "$WORK/cap.ref.dropped"
field moe_dropped "$WORK/cap-ep2-tp2-sp.jsonl" > "$WORK/cap.sp.dropped"
dropped=$(awk '{ s += $1 } END { print s + 0 }' "$WORK/cap.ref.dropped")
[ "$dropped" -gt 0 ] && [ "$(wc -l < "$WORK/cap.ref.dropped")" -eq 4 ] &&
    cmp -s "$WORK/cap.ref.dropped" "$WORK/cap.sp.dropped"
ok $? "cap: the capacity drops pairs ($dropped over 4 steps), the same at ep 2 x tp 2 with SP"

# Determinism: the all-to-alls deliver rows in a fixed order, so the
# same layout twice gives the same bits (losses, norms, weights).
train moe-ep4-again 4 "parallel.dp=4,parallel.ep=4,train.grad_accum=1,parallel.zero=0,$moe"
for run in moe-ep4-zero0 moe-ep4-again; do
    { field loss "$WORK/$run.jsonl"; field grad_norm "$WORK/$run.jsonl"; } > "$WORK/$run.bits"
done
[ "$(wc -l < "$WORK/moe-ep4-again.bits")" -eq 8 ] &&
    cmp -s "$WORK/moe-ep4-zero0.bits" "$WORK/moe-ep4-again.bits" &&
    "$DIFF" "$WORK/moe-ep4-zero0/step_00000004.h5" "$WORK/moe-ep4-again/step_00000004.h5" 0 \
        > /dev/null
ok $? "moe ep 4 twice: the same losses, norms and weights, bit for bit"

# Checkpoints hold every expert in its logical shape (ep = 1): the files
# the ep 2 runs wrote (dp 2, and dp 4 with ZeRO 3 sharding the experts
# over their replicas) are complete and verify, generation runs from one
# on a single rank, and the dp 2 one resumes at ep 1, at ep 4 and at
# ep 2 x tp 2 for steps 5 and 6 with the uninterrupted single-rank run's
# losses.
bad=0
for run in moe-ep2 moe-dp4-ep2-zero3; do
    out="$WORK/inspect-$run.out"
    if ! { "$TRIDENT" inspect "$WORK/$run/step_00000004.h5" > "$out" 2>&1 &&
        grep -q "complete: all [0-9]* datasets of the model (llama, 4 layers" "$out" &&
        grep -q "h\.3\.moe\.e\.3\.down\.w" "$out" && grep -q "^verdict: good" "$out"; }; then
        bad=1
        grep "verdict" "$out" | sed 's/^/# /'
    fi
done
ok $bad "inspect: the checkpoints saved at ep 2 are complete and verify, every expert in them"
$TRI_MPIEXEC -n 1 "$TRIDENT" sample --ckpt "$WORK/moe-dp4-ep2-zero3/step_00000004.h5" \
    --tokens 8 > "$WORK/sample.out" 2>&1
rc=$?
ok $rc "sample generates on one rank from the checkpoint saved at ep 2 (exit $rc)"
[ $rc -eq 0 ] || grep "trident:" "$WORK/sample.out" | sed 's/^/# /' | head -n 3
field loss "$WORK/moe-1x1x1.jsonl" | tail -n 2 > "$WORK/ref6.loss"
from="checkpoint.resume=$WORK/moe-ep2/step_00000004.h5,train.steps=6,$moe"
for to in "ep1:1:parallel.dp=1,parallel.ep=1,train.grad_accum=4" \
    "ep4:4:parallel.dp=4,parallel.ep=4,train.grad_accum=1" \
    "ep2-tp2:4:parallel.dp=2,parallel.ep=2,parallel.tp=2,train.grad_accum=2"; do
    IFS=: read -r name ranks keys <<EOL
$to
EOL
    train "resumed-$name" "$ranks" "$keys,$from"
    field loss "$WORK/resumed-$name.jsonl" > "$WORK/resumed-$name.loss"
    worst=$(max_rel "$WORK/ref6.loss" "$WORK/resumed-$name.loss" 2)
    within "$worst" 1e-5
    ok $? "saved at ep 2, resumed at $name: steps 5-6 match the uninterrupted run (max rel $worst)"
    [ "$worst" != missing ] || sed 's/^/# /' "$WORK/resumed-$name.out" | tail -n 5
done
done_testing
