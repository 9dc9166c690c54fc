#!/bin/sh
# t_fault_kill.sh - a rank killed (kill -9) mid-run, on the CPU over MPI:
# the survivors must end themselves, each with exit 76 and the watchdog's
# line naming the operation it waited in and its communicator (and the
# peer, on a pipeline link), within [fault] timeout (3 s here) plus a
# minute, and no process may be left running. The launcher is told to let
# the survivors run on (mpiexec --enable-recovery, tests/kill_rank.sh),
# as srun does by default: otherwise mpiexec ends the job itself the
# moment the rank dies, and the survivors' own verdict, the only one on a
# Slurm cluster, would never be what the test sees. Each rank's status
# comes from tests/rank_status.sh, as mpiexec then returns 0 whatever its
# ranks did; a run where nothing is killed must give every rank 0 through
# the same wrapper. The same launch serves tests/t_gpu_comm.sh's kill case
# on GPUs. About 15 s: three short jobs of 2 ranks, two of them a 3 s
# timeout each.
. "${TRI_SRCDIR:-.}/tests/lib.sh"
# shellcheck source=tests/fault_verdict.sh
. "${TRI_SRCDIR:-.}/tests/fault_verdict.sh"
# shellcheck source=tests/kill_rank.sh
. "${TRI_SRCDIR:-.}/tests/kill_rank.sh"
recovery=$(recovery_option)
if [ -z "$recovery" ]; then
    echo "1..0 # SKIP this mpiexec has no --enable-recovery: it ends a job whose rank dies before the survivors can"
    exit 0
fi
plan 5
cfg="$WORK/c.ini"
write_config "$cfg"
timeout=3
limit=$((timeout + 60))

# nothing killed, through the same wrapper: every rank's status is 0
mkdir -p "$WORK/clean.ranks"
# shellcheck disable=SC2086  # TRI_MPIEXEC is a command line
$TRI_MPIEXEC $recovery -n 2 sh "${TRI_SRCDIR:-.}/tests/rank_status.sh" "$WORK/clean.ranks" \
    "$TRIDENT" train --config "$cfg" --set parallel.dp=2 > "$WORK/clean.out" 2>&1
statuses=$(rank_statuses "$WORK/clean.ranks" 2)
[ "$statuses" = "0:0 1:0" ]
ok $? "dp 2, nothing killed: every rank exits 0 through the wrapper (rank:status $statuses)" ||
    fault_output "$WORK/clean.out"

# killed NAME VICTIM WHAT SETTINGS...: rank VICTIM killed in a long run;
# the survivor's verdict and the processes left, two TAP lines
killed() {
    name=$1
    victim=$2
    what=$3
    shift 3
    kill_rank "$name" 2 "$victim" 120 "$limit" "$recovery" train --config "$cfg" \
        --set train.steps=100000 --set fault.timeout=$timeout "$@"
    how=$(survivors_how "$WORK/$name.out" "$WORK/$name.ranks" 2 "$victim")
    statuses=$(rank_statuses "$WORK/$name.ranks" 2)
    survivor=$((1 - victim))
    said=$(fault_said_by "$WORK/$name.out" "$survivor")
    # the operation and its communicator: "waiting in comm_x ... on GROUP",
    # or the agreement of every rank on a step's status (fail.c's
    # fail_agree, over the whole job: it takes no named group), where a
    # kill just after a step's collectives leaves the survivor
    echo "$said" | grep -q -e "waiting in comm_[a-z_]*[^(]* on [a-z_]*" \
        -e "waiting in fail_agree (the ranks agree on a status)"
    named=$?
    [ -n "$how" ] && [ "$named" -eq 0 ] && [ "$rc" -ne 124 ]
    ok $? "$what, rank $victim killed: the survivor ends itself in ${took}s (limit $limit) through ${how:-nothing recognised}, naming the operation and communicator (rank:status $statuses, mpiexec $rc)" ||
        fault_output "$WORK/$name.out"
    diag "${said:-no message}"
    [ -z "$left" ]
    ok $? "$what: no process left running after the job (left:${left:- none})"
}

killed dp 1 "dp 2" --set parallel.dp=2
killed pp 0 "pp 2 (1f1b)" --set parallel.pp=2 --set train.grad_accum=4
done_testing
