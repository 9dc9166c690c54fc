# shellcheck shell=sh
# fault_verdict.sh - how a GPU job ended when one of its ranks was stopped
# (kill -STOP) or killed (kill -9), read from its output (and, for a kill,
# from each rank's exit status as tests/rank_status.sh recorded it):
# sourced by tests/t_gpu_comm.sh and tests/t_fault_kill.sh, checked on the
# CPU by tests/t_fault_verdict.sh against the messages as
# src/parallel/comm_nccl.c, src/base/watchdog.c and Open MPI's mpiexec
# print them.
#
# A rank whose peer stopped ends in one of two places. In the GPU's wait
# (comm_nccl.c's polling hook: "waited N s for the GPU (...; the latest
# operation queued: NCCL ...)"), when the NCCL work it waits behind needs
# a message the peer never queued. Or in a host call over MPI, where the
# watchdog ends it ("watchdog: no progress for N s: waiting in
# comm_allreduce_scalars on world"): the stopped rank had queued its last
# NCCL messages of the step before it stopped, which is likelier than not,
# as a rank spends most of a step waiting for its GPU with everything
# queued; its peer then finishes the step's GPU work and waits for it in
# the step's reduction of the gradient norm (seen on the CPU, pp 2, where
# the links are MPI's). Both exit 76 naming the operation.

# fault_said FILE: the line that says why the job ended, the GPU wait's
# before the watchdog's (which may follow it while the communicators are
# aborted), or nothing.
fault_said() {
    grep -m 1 "trident: waited [0-9]* s for the GPU (.*the latest operation queued: NCCL " "$1" ||
        grep -m 1 "trident: watchdog: no progress for [0-9.]* s: waiting in [^ ]" "$1"
}

# fault_output FILE: FILE's last lines as TAP comments, the config's
# echo left out, for a case that failed (`ok $? "..." || fault_output F`)
fault_output() { sed 's/^/#   /' "$1" | grep -v '^#   [a-z_0-9]* = ' | tail -n 12; }

# fault_said_by FILE RANK: fault_said's line, as rank RANK printed it
# (FILE's lines of that rank go to FILE.rankRANK)
fault_said_by() {
    grep "^\[rank $2 " "$1" > "$1.rank$2"
    fault_said "$1.rank$2"
}

# fault_path LINE: where fault_said's LINE says the job ended
fault_path() {
    case "$1" in
    *" s for the GPU ("*) echo "the GPU wait, naming the NCCL operation" ;;
    *"waiting in waiting for the GPU"*) echo "the watchdog in a GPU wait" ;;
    *"waiting in "*) echo "the watchdog in a host call" ;;
    esac
}

# kill_how FILE RC: how a job with a rank killed ended (RC: its exit
# status; 124: still running at the limit, 125: nothing was signalled), or
# nothing when none of the ways is recognised: the wait's timeout or the
# watchdog's (exit 76), a peer failure NCCL reported (exit 1, the
# operation named), or mpiexec's own end of a job whose rank died of a
# signal, naming the rank (often before NCCL or the wait notice).
kill_how() {
    if [ "$2" -eq 76 ] && [ -n "$(fault_said "$1")" ]; then
        fault_path "$(fault_said "$1")"
    elif [ "$2" -eq 1 ] && grep -q "trident: .*NCCL.*: a peer failed" "$1"; then
        echo "NCCL's peer failure"
    elif [ "$2" -ne 124 ] && [ "$2" -ne 125 ] && grep -q "rank [0-9]* .*signal 9" "$1"; then
        echo "mpiexec, naming the killed rank"
    fi
}

# rank_statuses DIR NP: each rank's exit status as tests/rank_status.sh
# recorded it in DIR, "rank:status" on one line ("none": not recorded)
rank_statuses() {
    r=0
    while [ "$r" -lt "$2" ]; do
        printf '%s:%s' "$r" "$(cat "$1/rank$r.status" 2>/dev/null || echo none)"
        r=$((r + 1))
        [ "$r" -lt "$2" ] && printf ' '
    done
    echo
}

# survivors_how FILE DIR NP VICTIM: how the survivors of a job ended whose
# rank VICTIM was killed (kill -9) while the launcher let the others run
# on (tests/kill_rank.sh): fault_path's answer for the first survivor's
# line when the victim died of the signal (status 137) and every other
# rank exited 76 with its own line naming the operation; else nothing.
# mpiexec's end of the job (the survivors killed: 137, or no status) is
# no answer: the survivors' own fault detection is what this checks.
survivors_how() {
    [ "$(cat "$2/rank$4.status" 2>/dev/null)" = 137 ] || return 0
    s_first=""
    r=0
    while [ "$r" -lt "$3" ]; do
        if [ "$r" -ne "$4" ]; then
            [ "$(cat "$2/rank$r.status" 2>/dev/null)" = 76 ] || return 0
            s_line=$(fault_said_by "$1" "$r")
            [ -n "$s_line" ] || return 0
            [ -n "$s_first" ] || s_first=$s_line
        fi
        r=$((r + 1))
    done
    fault_path "$s_first"
}
