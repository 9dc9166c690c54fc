#!/bin/sh
# t_gpu_comm.sh - NCCL's paths between GPUs (src/parallel/comm_nccl.c), end
# to end: the small test model trained 12 steps on GPUs gives the per-step
# losses of the same layout on the CPU, within 1e-4 relative (fp32; as
# t_gpu.sh, reassociation compounded over the Adam steps).
# On 2 ranks (tests/t_gpu_comm.np2.tap):
#  - dp 2 and the DP reduction overlapped with the backward (zero 0: an
#    all-reduce per tensor; zero 1: a reduce-scatter per tensor, in place),
#    each bucket on the DP stream while the backward computes;
#  - pp 2 under each schedule (1f1b, gpipe, zb1, interleaved with two
#    chunks, whose ring closes), the messages device to device over the
#    four links, each a FIFO on its own stream;
#  - tp 2 with sequence parallelism (the TP all-gathers and
#    reduce-scatters), and a Llama model whose one key/value head is
#    replicated over tp 2 (its kv communicator);
#  - cp 2 (context parallelism: attention's all-gather of q|k|v and the
#    reduce-scatter of its gradient over COMM_CP, the row-window kernels,
#    RoPE at each chunk's positions in the Llama model);
#  - a MoE Llama at ep 2 (4 experts, top 2, a shared expert): tokens to
#    their experts' rank and back by NCCL's grouped send/receive on
#    COMM_EP, the experts' gradients reduced over COMM_EDP;
#  - the faults: one rank stopped (kill -STOP) mid-run, and one killed
#    (kill -9) in another run; nothing may hang: the job must end within
#    [fault] timeout plus a minute. The stop must end it with exit 76
#    and a message naming the operation: the GPU wait's, naming the NCCL
#    operation (with its pp peer), or the watchdog's, naming the host
#    call a rank waited in (tests/fault_verdict.sh says why either may
#    come). The kill runs with mpiexec told to let the survivors run on
#    (--enable-recovery, tests/kill_rank.sh), as srun does on a cluster,
#    and each rank's status read through tests/rank_status.sh: the
#    survivor must end itself with exit 76 and the same kind of message;
#    mpiexec's own end of the job (137, which it would otherwise make the
#    moment the rank dies, before any survivor notices) is no pass. Only
#    where that mpiexec has no --enable-recovery does the case fall back
#    to accepting mpiexec's end or NCCL's peer failure, and its TAP line
#    says so.
# On 4 ranks (tests/t_gpu_comm.np4.tap, not in make check's list; run by
# bench/gpu_check.sh): two-level DP (node_size 2: the dp_node and
# dp_cross communicators), tp 2 x dp 2 with sequence parallelism, the
# Llama model on tp 2 x pp 2, cp 2 x tp 2 with sequence parallelism, and
# the MoE Llama on ep 2 x tp 2.
# On 8 ranks (tests/t_gpu_comm.np8.tap, not in make check's list; the
# first hour on a real node, doc/gpu.md's runbook): dp 2 x pp 2 x tp 2
# with sequence parallelism and ZeRO 1 overlapped (every communicator
# and link at once), dp 8 over two pretended nodes of four (node_size 4),
# and the Llama model, its key/value head replicated over tp 2, x dp 4
# under ZeRO 3.
# A hang in any training run (links matched out of order, a cycle in
# their set-up) ends at [fault] timeout with exit 76, which fails it.
#
# Without a CUDA build, or with fewer GPUs than ranks on the node (unless
# TRIDENT_TEST_SHARE_GPU=1, the test-only escape, with NCCL 2.30's
# NCCL_MULTI_RANK_GPU_ENABLE=1, puts them on one GPU), it prints
# `1..0 # SKIP` and why. TRI_GPU_FAULT_TIMEOUT sets the faults' and the GPU runs' [fault]
# timeout (default 20 s).
. "${TRI_SRCDIR:-.}/tests/lib.sh"
# shellcheck source=tests/fault_verdict.sh
. "${TRI_SRCDIR:-.}/tests/fault_verdict.sh"
# shellcheck source=tests/kill_rank.sh
. "${TRI_SRCDIR:-.}/tests/kill_rank.sh"
np=${1:-2}
case "$np" in
2 | 4 | 8) ;;
*) echo "Bail out! t_gpu_comm.sh has layouts for 2, 4 and 8 ranks, not $np"; exit 1 ;;
esac
cfg="$WORK/c.ini"
write_config "$cfg"
steps=12
fault_timeout=${TRI_GPU_FAULT_TIMEOUT:-20}
llama="--set model.arch=llama --set model.n_kv_head=1 --set model.ffn_dim=48 --set model.tie_embeddings=false"
moe="$llama --set model.n_expert=4 --set model.top_k=2 --set model.n_shared_expert=1 --set model.moe_ffn_dim=32"

# train NAME DEVICE SETTINGS...: an $np-rank run; metrics to $WORK/NAME.jsonl
# (shell variables are global: train's are run_*, same's case_*)
# A GPU run that hangs (NCCL's several ranks on one GPU are experimental)
# ends at the faults' [fault] timeout (3 x that before its first step,
# where NCCL sets up), not at 120 s (6 minutes at start-up: more than
# gpu_check.sh's whole comm section), so the cases after it still run and
# report; the CPU twins keep 120 s, for make check's loaded machines.
train() {
    run_name=$1
    run_device=$2
    shift 2
    run_timeout=120
    [ "$run_device" = cpu ] || run_timeout=$fault_timeout
    run "$np" train --config "$cfg" --set parallel.device="$run_device" --set train.steps=$steps \
        --set fault.timeout="$run_timeout" --set log.metrics="$WORK/$run_name.jsonl" "$@"
    cp "$WORK/out" "$WORK/$run_name.out"
}

if [ "$np" -eq 8 ]; then
    train probe cuda --set parallel.dp=2 --set parallel.pp=2 --set parallel.tp=2 \
        --set parallel.sequence_parallel=1 --set parallel.zero=1 --set parallel.overlap=true \
        --set train.grad_accum=4
elif [ "$np" -eq 4 ]; then
    train probe cuda --set parallel.dp=4 --set parallel.node_size=2 --set parallel.zero=1 \
        --set parallel.overlap=true
else
    train probe cuda --set parallel.dp=2 --set parallel.zero=1 --set parallel.overlap=true
fi
skip_without_gpu
if [ "$rc" -ne 0 ] && grep -q -e "visible GPUs" -e "the same GPU" "$WORK/out"; then
    echo "1..0 # SKIP fewer than $np GPUs on this node (TRIDENT_TEST_SHARE_GPU=1 and NCCL_MULTI_RANK_GPU_ENABLE=1 share one)"
    exit 0
fi
case "$np" in 8) plan 3 ;; 4) plan 5 ;; *) plan 13 ;; esac
grep '^nccl:' "$WORK/probe.out" | sed 's/^/# /'

losses() { sed -n 's/.*"loss":\([^,}]*\).*/\1/p' "$1"; }

# same NAME WHAT SETTINGS...: NAME on GPUs and on the CPU, per-step
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
    ok $? "$case_what: on $np GPU ranks (exit $gpu_rc) the CPU's $steps losses (max rel $worst, tol 1e-4)"
}

# fault NAME SIGNAL SETTINGS...: a long GPU run whose last rank gets
# SIGNAL once a step is logged; sets rc (124: still running at
# [fault] timeout + 60 s, then killed) and took (seconds from the signal)
fault() {
    f_name=$1
    f_sig=$2
    shift 2
    # shellcheck disable=SC2086  # TRI_MPIEXEC is a command line
    $TRI_MPIEXEC -n "$np" "$TRIDENT" train --config "$cfg" --set parallel.device=cuda \
        --set train.steps=100000 --set fault.timeout="$fault_timeout" "$@" > "$WORK/$f_name.out" 2>&1 &
    f_mp=$!
    i=0   # start-up: CUDA and NCCL, 3 x [fault] timeout at most
    until grep -q '^step  *[0-9]' "$WORK/$f_name.out" || ! kill -0 "$f_mp" 2>/dev/null ||
        [ $i -gt $((30 * fault_timeout)) ]; do
        sleep 0.1
        i=$((i + 1))
    done
    victim=$(pgrep -P "$f_mp" | tail -n 1)
    t0=$(date +%s)
    [ -n "$victim" ] && kill "-$f_sig" "$victim" 2>/dev/null
    while kill -0 "$f_mp" 2>/dev/null && [ $(($(date +%s) - t0)) -lt $((fault_timeout + 60)) ]; do
        sleep 0.5
    done
    took=$(($(date +%s) - t0))
    if kill -0 "$f_mp" 2>/dev/null; then
        # shellcheck disable=SC2046  # a list of pids
        kill -KILL $(pgrep -P "$f_mp") "$f_mp" 2>/dev/null
        wait "$f_mp"
        rc=124
    else
        wait "$f_mp"
        rc=$?
    fi
    [ -n "$victim" ] && kill -CONT "$victim" 2>/dev/null && kill -KILL "$victim" 2>/dev/null
    [ -n "$victim" ] || rc=125   # never reached a step: nothing was signalled
}

if [ "$np" -eq 8 ]; then
    same probe "dp 2 x pp 2 x tp 2, sequence parallel, zero 1 overlapped (every communicator and link)" \
        --set parallel.dp=2 --set parallel.pp=2 --set parallel.tp=2 \
        --set parallel.sequence_parallel=1 --set parallel.zero=1 --set parallel.overlap=true \
        --set train.grad_accum=4
    same dp8_two_level "dp 8 over two pretended nodes (node_size 4: dp_node, dp_cross), zero 1, overlapped" \
        --set parallel.dp=8 --set parallel.node_size=4 --set parallel.zero=1 --set parallel.overlap=true
    # shellcheck disable=SC2086  # a list of settings
    same llama_tp2_dp4 "Llama, its key/value head replicated over tp 2, x dp 4, zero 3" \
        $llama --set parallel.tp=2 --set parallel.dp=4 --set parallel.zero=3
    done_testing
fi
if [ "$np" -eq 4 ]; then
    same probe "dp 4 over two pretended nodes (node_size 2: dp_node, dp_cross), zero 1, overlapped" \
        --set parallel.dp=4 --set parallel.node_size=2 --set parallel.zero=1 --set parallel.overlap=true
    same tp_dp_sp "tp 2 x dp 2, sequence parallel" \
        --set parallel.tp=2 --set parallel.dp=2 --set parallel.sequence_parallel=1
    # shellcheck disable=SC2086  # a list of settings
    same llama_tp_pp "Llama, its key/value head replicated over tp 2, x pp 2" \
        $llama --set parallel.tp=2 --set parallel.pp=2 --set train.grad_accum=4
    same cp_tp_sp "cp 2 x tp 2, sequence parallel (COMM_CP beside the TP collectives)" \
        --set parallel.cp=2 --set parallel.tp=2 --set parallel.sequence_parallel=1
    # shellcheck disable=SC2086  # a list of settings
    same moe_ep_tp "MoE Llama, ep 2 x tp 2 (the all-to-all on COMM_EP beside TP's), zero 1" \
        $moe --set parallel.ep=2 --set parallel.dp=2 --set parallel.tp=2 --set parallel.zero=1
    done_testing
fi

# the most telling first: a run cut short by a time limit keeps them
same probe "dp 2, zero 1, DP reduce-scatters overlapped" \
    --set parallel.dp=2 --set parallel.zero=1 --set parallel.overlap=true
same pp_1f1b "pp 2, 1f1b, messages over the links" \
    --set parallel.pp=2 --set parallel.schedule=1f1b --set train.grad_accum=4
same tp_sp "tp 2, sequence parallel (TP all-gathers and reduce-scatters)" \
    --set parallel.tp=2 --set parallel.sequence_parallel=1
# shellcheck disable=SC2086  # a list of settings
same llama_tp "Llama, its one key/value head replicated over tp 2 (the kv communicator)" \
    $llama --set parallel.tp=2
same cp "cp 2 (attention's all-gather and reduce-scatter over COMM_CP, the row windows)" \
    --set parallel.cp=2
# shellcheck disable=SC2086  # a list of settings
same llama_cp "Llama at cp 2 (RoPE at each chunk's positions, grouped-query heads)" \
    $llama --set parallel.cp=2
# shellcheck disable=SC2086  # a list of settings
same moe_ep "MoE Llama at ep 2 (tokens to their experts and back by NCCL send/receive; experts reduced over edp), zero 1 overlapped" \
    $moe --set parallel.ep=2 --set parallel.dp=2 --set parallel.zero=1 --set parallel.overlap=true

fault stop STOP --set parallel.pp=2 --set train.grad_accum=4
said=$(fault_said "$WORK/stop.out")
path=$(fault_path "$said")
[ "$rc" -eq 76 ] && [ -n "$said" ]
ok $? "pp 2, one rank stopped (kill -STOP): exit 76 in ${took}s (limit $((fault_timeout + 60))) through ${path:-no message recognised}, naming the operation (exit $rc)" ||
    fault_output "$WORK/stop.out"
diag "${said:-no message}"

# the last rank killed once a step is logged (3 x [fault] timeout at most:
# CUDA's and NCCL's set-up)
recovery=$(recovery_option)
victim=$((np - 1))
kill_rank kill "$np" "$victim" $((3 * fault_timeout)) $((fault_timeout + 60)) "$recovery" \
    train --config "$cfg" --set parallel.device=cuda --set train.steps=100000 \
    --set fault.timeout="$fault_timeout" --set parallel.dp=2 --set parallel.overlap=true
statuses=$(rank_statuses "$WORK/kill.ranks" "$np")
if [ -n "$recovery" ]; then
    how=$(survivors_how "$WORK/kill.out" "$WORK/kill.ranks" "$np" "$victim")
    [ -n "$how" ] && [ -z "$left" ] && [ "$rc" -ne 124 ]
    verdict=$?
    ok $verdict "dp 2, rank $victim killed (kill -9), mpiexec letting the survivor run on: it ends itself in ${took}s (limit $((fault_timeout + 60))) through ${how:-nothing recognised} (rank:status $statuses, left:${left:- none})"
else
    how=$(kill_how "$WORK/kill.out" "$rc")
    [ -n "$how" ]
    verdict=$?
    ok $verdict "dp 2, rank $victim killed (kill -9), FALLBACK (this mpiexec has no --enable-recovery: its own end of the job is accepted, the survivors' verdict unchecked): the job ended in ${took}s (limit $((fault_timeout + 60))) through ${how:-nothing recognised} (exit $rc)"
fi
[ $verdict -eq 0 ] || fault_output "$WORK/kill.out"
diag "$(fault_said_by "$WORK/kill.out" 0 || echo no message from rank 0)"

same dp0 "dp 2, zero 0, DP all-reduces overlapped" \
    --set parallel.dp=2 --set parallel.zero=0 --set parallel.overlap=true
for schedule in gpipe zb1; do
    same "pp_$schedule" "pp 2, $schedule, messages over the links" \
        --set parallel.pp=2 --set parallel.schedule=$schedule --set train.grad_accum=4
done
same pp_interleaved "pp 2, interleaved v=2 (the ring closes), messages over the links" \
    --set parallel.pp=2 --set parallel.schedule=interleaved --set parallel.virtual_stages=2 \
    --set model.n_layer=4 --set train.grad_accum=4
done_testing
