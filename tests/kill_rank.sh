# shellcheck shell=sh
# shellcheck disable=SC2034  # rc, took and left are for the test that sources this
# kill_rank.sh - a job with one rank killed (kill -9) mid-run, launched so
# that the launcher leaves the survivors running: what ends them is then
# trident's own fault detection (its GPU wait or its watchdog, exit 76),
# as under srun, whose default (KillOnBadExit=0) does the same. Open MPI's
# mpiexec would otherwise end the whole job as soon as the rank dies,
# before any survivor notices. Sourced by tests/t_fault_kill.sh (on the
# CPU) and tests/t_gpu_comm.sh (on GPUs), after tests/lib.sh; their
# verdicts are tests/fault_verdict.sh's survivors_how.

# recovery_option: the launcher's option that keeps a job running when
# one of its ranks dies (Open MPI's --enable-recovery; mpiexec then
# returns 0 whatever its ranks did, so each rank's status is read from
# tests/rank_status.sh's files), or nothing when this $TRI_MPIEXEC has
# none. (Open MPI 4.1.4's mpiexec prints "PMIX ERROR: BAD-PARAM ... at
# line 1033" in this mode when a rank dies: its own noise, nothing of
# trident's.)
recovery_option() {
    # shellcheck disable=SC2086  # TRI_MPIEXEC is a command line
    if $TRI_MPIEXEC --enable-recovery -n 1 true > /dev/null 2>&1; then
        echo "--enable-recovery"
    fi
}

# kill_rank NAME NP VICTIM START_S LIMIT_S RECOVERY ARGS...: trident ARGS on
# NP ranks, each through tests/rank_status.sh, under $TRI_MPIEXEC
# RECOVERY (recovery_option's answer; empty: mpiexec ends the job itself);
# once a step is logged (or START_S seconds have passed), rank VICTIM's
# trident gets kill -9. Output in $WORK/NAME.out, each rank's pid and
# status in $WORK/NAME.ranks. Sets rc (mpiexec's status; 124: still running
# LIMIT_S seconds after the kill, then killed; 125: no rank was killed),
# took (seconds from the kill to the job's end) and left (the pids of ranks
# still running when mpiexec ended or was killed; they are then killed).
kill_rank() {
    k_name=$1
    k_np=$2
    k_victim=$3
    k_start=$4
    k_limit=$5
    k_recovery=$6
    shift 6
    k_dir="$WORK/$k_name.ranks"
    rm -rf "$k_dir"
    mkdir -p "$k_dir"
    : > "$WORK/$k_name.out"
    # shellcheck disable=SC2086  # TRI_MPIEXEC is a command line, RECOVERY empty or one option
    $TRI_MPIEXEC $k_recovery -n "$k_np" sh "${TRI_SRCDIR:-.}/tests/rank_status.sh" "$k_dir" \
        "$TRIDENT" "$@" > "$WORK/$k_name.out" 2>&1 &
    k_mp=$!
    i=0
    until grep -q '^step  *[0-9]' "$WORK/$k_name.out" || ! kill -0 "$k_mp" 2>/dev/null ||
        [ $i -ge $((10 * k_start)) ]; do
        sleep 0.1
        i=$((i + 1))
    done
    k_pid=$(cat "$k_dir/rank$k_victim.pid" 2>/dev/null)
    t0=$(date +%s)
    [ -n "$k_pid" ] && kill -KILL "$k_pid" 2>/dev/null || k_pid=""
    while kill -0 "$k_mp" 2>/dev/null && [ $(($(date +%s) - t0)) -lt "$k_limit" ]; do
        sleep 0.2
    done
    took=$(($(date +%s) - t0))
    if kill -0 "$k_mp" 2>/dev/null; then
        kill -KILL "$k_mp" 2>/dev/null
        wait "$k_mp"
        rc=124
    else
        wait "$k_mp"
        rc=$?
    fi
    left=""
    for f in "$k_dir"/rank*.pid; do
        [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null && left="$left $(cat "$f")"
    done
    # shellcheck disable=SC2086  # a list of pids
    [ -z "$left" ] || kill -KILL $left 2>/dev/null
    [ -n "$k_pid" ] || rc=125
}
