#!/bin/sh
# t_gpu_comm.sh - NCCL's paths on two GPUs (src/parallel/comm_nccl.c), end to end:
# the small test model trained 12 steps on two GPUs gives the per-step
# losses of the same layout on the CPU, within 1e-4 relative (fp32; as
# t_gpu.sh, reassociation compounded over the Adam steps), with
#  - dp 2 and the DP reduction overlapped with the backward (zero 0: an
#    all-reduce per tensor; zero 1: a reduce-scatter per tensor, in place),
#    each bucket on the DP stream while the backward computes;
#  - pp 2 under each schedule (1f1b, gpipe, zb1, interleaved with two
#    chunks, whose ring closes), the messages device to device over the
#    four links, each a FIFO on its own stream.
# A hang in any of them (links matched out of order, a cycle in their
# set-up) ends at [fault] timeout with exit 76, which fails the check.
#
# Without a CUDA build, or without two GPUs on the node, it prints
# `1..0 # SKIP` and why.
. "${TRI_SRCDIR:-.}/tests/lib.sh"
cfg="$WORK/c.ini"
write_config "$cfg"
steps=12

# train NAME DEVICE SETTINGS...: a 2-rank run; metrics to $WORK/NAME.jsonl
# (shell variables are global: train's are run_*, same's case_*)
train() {
    run_name=$1
    run_device=$2
    shift 2
    run 2 train --config "$cfg" --set parallel.device="$run_device" --set train.steps=$steps \
        --set fault.timeout=120 --set log.metrics="$WORK/$run_name.jsonl" "$@"
    cp "$WORK/out" "$WORK/$run_name.out"
}

train probe cuda --set parallel.dp=2 --set parallel.zero=1 --set parallel.overlap=true
skip_without_gpu
if [ "$rc" -ne 0 ] && grep -q -e "visible GPUs" -e "the same GPU" "$WORK/out"; then
    echo "1..0 # SKIP fewer than two GPUs on this node"
    exit 0
fi
plan 6

losses() { sed -n 's/.*"loss":\([^,}]*\).*/\1/p' "$1"; }

# same NAME WHAT SETTINGS...: NAME on two GPUs and on the CPU, per-step
# losses within 1e-4 (the GPU run may be the probe, already made)
same() {
    case_name=$1
    case_what=$2
    shift 2
    [ -f "$WORK/$case_name.jsonl" ] || train "$case_name" cuda "$@"
    gpu_rc=$rc
    [ "$gpu_rc" -eq 0 ] || sed 's/^/#   /' "$WORK/$case_name.out" | tail -n 15
    train "$case_name.cpu" cpu "$@"
    losses "$WORK/$case_name.jsonl" > "$WORK/$case_name.loss"
    losses "$WORK/$case_name.cpu.jsonl" > "$WORK/$case_name.cpu.loss"
    worst=$(max_rel "$WORK/$case_name.cpu.loss" "$WORK/$case_name.loss" $steps)
    awk -v w="$worst" -v g="$gpu_rc" 'BEGIN { exit !(g == 0 && w != "missing" && w + 0 <= 1e-4) }'
    ok $? "$case_what: on two GPUs (exit $gpu_rc) the CPU's $steps losses (max rel $worst, tol 1e-4)"
}

same probe "dp 2, zero 1, DP reduce-scatters overlapped" \
    --set parallel.dp=2 --set parallel.zero=1 --set parallel.overlap=true
same dp0 "dp 2, zero 0, DP all-reduces overlapped" \
    --set parallel.dp=2 --set parallel.zero=0 --set parallel.overlap=true
for schedule in 1f1b gpipe zb1; do
    same "pp_$schedule" "pp 2, $schedule, messages over the links" \
        --set parallel.pp=2 --set parallel.schedule=$schedule --set train.grad_accum=4
done
same pp_interleaved "pp 2, interleaved v=2 (the ring closes), messages over the links" \
    --set parallel.pp=2 --set parallel.schedule=interleaved --set parallel.virtual_stages=2 \
    --set model.n_layer=4 --set train.grad_accum=4
done_testing
