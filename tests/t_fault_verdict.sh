#!/bin/sh
# t_fault_verdict.sh - tests/fault_verdict.sh, which tests/t_gpu_comm.sh's
# fault cases read their jobs' ends with, on the lines the code prints:
# comm_nccl.c's GPU wait (its format, as no GPU runs here), the watchdog's
# and mpiexec's (as printed on the CPU: a pp 2 job with one rank stopped
# ends in the watchdog, in the step's reduction over MPI; a dp 2 job with
# one rank killed, in mpiexec's notice). A stopped job that ends in a host
# call is recognised (the GPU check once wanted the GPU wait only), and so
# is a reduce-scatter's peer failure (it has no element count). And
# t_gpu_comm's GPU runs take the faults' [fault] timeout, so that a hang
# costs a case, not gpu_check.sh's whole section (run on a stand-in
# trident and launcher that record the probe run's settings and say there
# is no GPU). The kill's verdict under a launcher that lets the survivors
# run on (tests/kill_rank.sh): every survivor's own exit 76 with its own
# line naming the operation, the victim's 137, read from
# tests/rank_status.sh's files; mpiexec's end of the job, NCCL's peer
# failure (exit 1) or a survivor without its line is no pass; and which
# launchers have that mode.
. "${TRI_SRCDIR:-.}/tests/lib.sh"
# shellcheck source=tests/fault_verdict.sh
. "${TRI_SRCDIR:-.}/tests/fault_verdict.sh"
# shellcheck source=tests/kill_rank.sh
. "${TRI_SRCDIR:-.}/tests/kill_rank.sh"
plan 22
log="$WORK/log"
# said TEXT: the log is one line of other output, then TEXT
said() { printf 'step     7/100000 | loss 5.1\n%s\n' "$1" > "$log"; }

said "[rank 0 vm] trident: waited 20 s for the GPU (a copy between host and GPU; the latest operation queued: NCCL receive of gradients from pp rank 1) without progress: a peer may be stopped or its node dead; aborting the NCCL communicators, then ending the job with exit 76 ([fault] timeout)"
[ "$(fault_path "$(fault_said "$log")")" = "the GPU wait, naming the NCCL operation" ]
ok $? "the GPU wait's timeout, naming the NCCL operation"

said "[rank 0 vm] trident: watchdog: no progress for 20 s: waiting in comm_allreduce_scalars on world (in train_step, step 96) since 02:06:38; a rank may be stopped, its node dead or its file system stuck: ending the job with exit 76 ([fault] timeout = 20 s)"
[ "$(fault_path "$(fault_said "$log")")" = "the watchdog in a host call" ]
ok $? "the watchdog in the step's reduction over MPI (a stop's likelier end)"

said "[rank 0 vm] trident: watchdog: no progress for 20 s: waiting in waiting for the GPU on a copy between host and GPU (in train_step, step 3) since 02:06:38; a rank may be stopped, its node dead or its file system stuck: ending the job with exit 76 ([fault] timeout = 20 s)"
[ "$(fault_path "$(fault_said "$log")")" = "the watchdog in a GPU wait" ]
ok $? "the watchdog in the GPU wait (it fires beside the wait's own timeout)"

printf '%s\n%s\n' "[rank 0 vm] trident: waited 20 s for the GPU (x; the latest operation queued: NCCL all-reduce of 8 elements on tp) without progress" \
    "[rank 0 vm] trident: watchdog: no progress for 20 s: waiting in waiting for the GPU on x" > "$log"
case "$(fault_said "$log")" in *"NCCL all-reduce"*) r=0 ;; *) r=1 ;; esac
ok $r "with both, the GPU wait's line (it names the NCCL operation) is the one read"

said "[rank 0 vm] trident: fatal: something else at x.c:1"
[ -z "$(fault_said "$log")" ] && [ -z "$(kill_how "$log" 76)" ]
ok $? "another ending is not taken for either"

said "[rank 0 vm] trident: NCCL reduce-scatter on dp: a peer failed: remote process exited or there was a network error (x); the host was waiting for a copy; aborting the NCCL communicators"
[ "$(kill_how "$log" 1)" = "NCCL's peer failure" ]
ok $? "a kill seen as NCCL's peer failure, on a reduce-scatter (no element count)"

said "mpiexec noticed that process rank 1 with PID 0 on node vm exited on signal 9 (Killed)."
[ "$(kill_how "$log" 137)" = "mpiexec, naming the killed rank" ]
ok $? "a kill ended by mpiexec's notice (exit 137)"
[ -z "$(kill_how "$log" 124)" ] && [ -z "$(kill_how "$log" 125)" ]
ok $? "but not when the job ran past the limit (124) or nothing was signalled (125)"

said "[rank 0 vm] trident: watchdog: no progress for 20 s: waiting in comm_allreduce_scalars on world (in train_step, step 9)"
[ "$(kill_how "$log" 76)" = "the watchdog in a host call" ] && [ -z "$(kill_how "$log" 1)" ]
ok $? "a kill ended by the watchdog (exit 76 only)"

# ranks STATUS...: rank_status.sh's files in $WORK/ranks, one STATUS per
# rank from 0 ("none": no file, as when mpiexec killed the wrapper too)
ranks() {
    rm -rf "$WORK/ranks"
    mkdir -p "$WORK/ranks"
    r=0
    for st in "$@"; do
        [ "$st" = none ] || echo "$st" > "$WORK/ranks/rank$r.status"
        r=$((r + 1))
    done
}
watchdog_pp="trident: watchdog: no progress for 3.0 s: waiting in comm_wait for a receive of activations on pp, peer pp rank 1 (in train_step, step 2) since 05:28:02; a rank may be stopped, its node dead or its file system stuck: ending the job with exit 76 ([fault] timeout = 3 s)"
gpu_wait="trident: waited 20 s for the GPU (a copy between host and GPU; the latest operation queued: NCCL all-reduce of 8 elements on dp) without progress: a peer may be stopped or its node dead; aborting the NCCL communicators, then ending the job with exit 76 ([fault] timeout)"
said "[rank 0 vm] $watchdog_pp"
ranks 76 137
[ "$(survivors_how "$log" "$WORK/ranks" 2 1)" = "the watchdog in a host call" ]
ok $? "a kill the survivor ended itself: exit 76, the watchdog naming the message and its peer"
[ "$(rank_statuses "$WORK/ranks" 2)" = "0:76 1:137" ]
ok $? "each rank's status read back (0:76 1:137)"
said "[rank 0 vm] $gpu_wait"
[ "$(survivors_how "$log" "$WORK/ranks" 2 1)" = "the GPU wait, naming the NCCL operation" ]
ok $? "a kill the survivor ended in the GPU wait: exit 76, the NCCL operation named"
said "mpiexec noticed that process rank 1 with PID 0 on node vm exited on signal 9 (Killed)."
ranks none 137
[ -z "$(survivors_how "$log" "$WORK/ranks" 2 1)" ] && [ "$(rank_statuses "$WORK/ranks" 2)" = "0:none 1:137" ]
ok $? "mpiexec's end of the job (the survivor's status never recorded) is no pass"
ranks 137 137
[ -z "$(survivors_how "$log" "$WORK/ranks" 2 1)" ]
ok $? "nor is the survivor killed with it (137)"
said "[rank 0 vm] trident: NCCL all-reduce of 8 elements on dp: a peer failed: remote process exited or there was a network error (x); the host was waiting for a copy between host and GPU; aborting the NCCL communicators"
ranks 1 137
[ -z "$(survivors_how "$log" "$WORK/ranks" 2 1)" ]
ok $? "nor NCCL's peer failure (exit 1): the survivor must end at [fault] timeout, exit 76"
said "[rank 0 vm] $watchdog_pp"
ranks 76 76 137
[ -z "$(survivors_how "$log" "$WORK/ranks" 3 2)" ]
ok $? "every survivor needs its own line: rank 1's exit 76 without one is no pass"
ranks 76 0
[ -z "$(survivors_how "$log" "$WORK/ranks" 2 1)" ]
ok $? "nor a victim that was never killed (status 0)"

# recovery_option on a stand-in launcher that takes --enable-recovery, and
# on one that refuses it (another MPI's)
mkdir -p "$WORK/launchers"
cat > "$WORK/launchers/ompi" <<'EOF'
#!/bin/sh
[ "$1" = --enable-recovery ] || exit 1
shift 3
exec "$@"
EOF
cat > "$WORK/launchers/other" <<'EOF'
#!/bin/sh
case "$1" in --*) echo "unknown option $1" >&2; exit 1 ;; esac
shift 2
exec "$@"
EOF
chmod +x "$WORK/launchers/ompi" "$WORK/launchers/other"
[ "$(TRI_MPIEXEC="$WORK/launchers/ompi" recovery_option)" = --enable-recovery ] &&
    [ -z "$(TRI_MPIEXEC="$WORK/launchers/other" recovery_option)" ]
ok $? "the recovery mode is found where the launcher has it, and only there"

# tests/rank_status.sh itself: the status of a child killed by signal 9,
# under the launcher's rank, and a TERM to the wrapper passed on to the
# child (whose status is then 143)
wrapper="${TRI_SRCDIR:-.}/tests/rank_status.sh"
rm -rf "$WORK/ranks"
mkdir -p "$WORK/ranks"
# shellcheck disable=SC2016  # the child's own $$
# (in a shell of its own, whose notice of the death goes to /dev/null)
OMPI_COMM_WORLD_RANK=3 sh -c 'sh "$1" "$2" sh -c "kill -9 \$\$"; exit $?' - "$wrapper" \
    "$WORK/ranks" 2> /dev/null
wrapped=$?
[ "$wrapped" -eq 137 ] && [ "$(cat "$WORK/ranks/rank3.status")" = 137 ] && [ -s "$WORK/ranks/rank3.pid" ]
ok $? "rank_status.sh records a killed child's pid and status 137 under its rank, and ends by the same signal ($wrapped)"
OMPI_COMM_WORLD_RANK=4 sh "$wrapper" "$WORK/ranks" sleep 60 2> /dev/null &
wrapper_pid=$!
i=0
until [ -s "$WORK/ranks/rank4.pid" ] || [ $i -ge 100 ]; do sleep 0.1; i=$((i + 1)); done
sleep 0.2   # its trap set
kill -TERM "$wrapper_pid"
wait "$wrapper_pid" 2> /dev/null
[ "$(cat "$WORK/ranks/rank4.status" 2>/dev/null)" = 143 ] && ! kill -0 "$(cat "$WORK/ranks/rank4.pid")" 2>/dev/null
ok $? "a TERM to the wrapper reaches its child (status $(cat "$WORK/ranks/rank4.status" 2>/dev/null || echo none))"

# probe_settings [TIMEOUT]: t_gpu_comm.sh on stand-ins (test doubles, not
# unfinished code: a launcher that runs its command, and a trident that
# records its arguments, then answers as a machine without a GPU); the
# probe's command line, one word a line, in $WORK/args
mkdir -p "$WORK/standin"
printf '#!/bin/sh\nshift 2\nexec "$@"\n' > "$WORK/standin/mpiexec"
printf '#!/bin/sh\nprintf "%%s\\n" "$@" > "%s/args"\necho "no CUDA device"\nexit 1\n' "$WORK" \
    > "$WORK/standin/trident"
chmod +x "$WORK/standin/mpiexec" "$WORK/standin/trident"
probe_settings() {
    rm -f "$WORK/args"
    TRI_GPU_FAULT_TIMEOUT=$1 TRI_BUILDDIR="$WORK/standin" TRI_MPIEXEC="$WORK/standin/mpiexec" \
        sh "${TRI_SRCDIR:-.}/tests/t_gpu_comm.sh" 2 > "$WORK/out" 2>&1
}
probe_settings ""
grep -qx "parallel.device=cuda" "$WORK/args" && grep -qx "fault.timeout=20" "$WORK/args" &&
    grep -q "SKIP no CUDA device" "$WORK/out"
ok $? "t_gpu_comm's GPU runs stop a hang at the faults' [fault] timeout, 20 s by default"
probe_settings 7
grep -qx "fault.timeout=7" "$WORK/args"
ok $? "and at TRI_GPU_FAULT_TIMEOUT's"
done_testing
