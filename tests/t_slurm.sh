#!/bin/sh
# t_slurm.sh - jobs/cpu.sbatch under a real Slurm. Starts munged, slurmctld
# and slurmd on localhost (Debian's munge and slurm-wlm), with everything
# they use (slurm.conf, state, spool, logs, munge key and socket) in a
# private directory, on free ports. Then submits: a tiny 2-rank run (srun
# --mpi=pmix) and checks its output, checkpoint and metrics; a run with a
# bad config, which fails and is not requeued; a run whose rank 1 stops
# (TRIDENT_FAULT=stall), which the watchdog ends with 76 and the script
# does not requeue; a run under mpirun that gets
# the time-limit signal (-t 1 --signal=B:USR1@50), checkpoints, is requeued
# by the script and resumes until it finishes; and a run under srun that
# gets USR1 from scancel and does the same; and a run under mpirun that is
# cancelled (SIGTERM) and saves first. The jobs run side by side and are
# judged in this order; the long ones sleep in each step
# (TRIDENT_FAULT=slow), so they leave the cores to the others. The daemons are stopped by
# their pids, also on failure or timeout. Root only; where Slurm is not
# installed, a skip names the packages. TRI_TEST_KEEP=1 keeps the files.
. "${TRI_SRCDIR:-.}/tests/lib.sh"
np=${1:-2}
t_start=$(date +%s)
PATH=$PATH:/usr/sbin:/sbin

skip() { echo "1..0 # SKIP $*"; rm -rf "$WORK"; exit 0; }
[ "$(id -u)" = 0 ] || skip "needs root (slurmd runs the jobs)"
missing=""
for need in munged:munge slurmctld:slurmctld slurmd:slurmd sbatch:slurm-client \
            scontrol:slurm-client; do
    command -v "${need%%:*}" >/dev/null 2>&1 || missing="$missing ${need#*:}"
done
[ -z "$missing" ] || skip "no Slurm: apt-get install -y --no-install-recommends$missing"

SRC=$(cd "${TRI_SRCDIR:-.}" && pwd)
DATA=$SRC/tests/data                  # absolute: the jobs run elsewhere
TRIDENT=$(cd "$(dirname "$TRIDENT")" && pwd)/trident
S=$WORK/slurm                            # the cluster's files
export SLURM_CONF="$S/slurm.conf"
mkdir -p "$S/munge" "$S/run" "$S/state" "$S/spool" "$S/log"
chmod 0711 "$WORK" "$S" "$S/munge"   # munged wants a socket dir nobody else can write

elapsed() { echo $(($(date +%s) - t_start)); }

# ---- stopping: cancel the jobs, then TERM each daemon by its pid file
# (slurmstepd outlives slurmd, so jobs go first), KILL after 10 s.
stop_cluster() {
    if [ -s "$S/run/slurmctld.pid" ]; then
        ids=$(squeue -h -o %i 2>/dev/null)
        if [ -n "$ids" ]; then
            # shellcheck disable=SC2086  # a list of job ids
            scancel $ids 2>/dev/null
            i=0
            while [ $i -lt 100 ] && [ -n "$(squeue -h -o %i 2>/dev/null)" ]; do
                sleep 0.1
                i=$((i + 1))
            done
        fi
    fi
    stopped=0
    for d in slurmd slurmctld munged; do
        f="$S/run/$d.pid"
        [ -s "$f" ] || continue
        pid=$(cat "$f")
        if kill -0 "$pid" 2>/dev/null; then
            kill -TERM "$pid"
            i=0
            while [ $i -lt 100 ] && kill -0 "$pid" 2>/dev/null; do
                sleep 0.1
                i=$((i + 1))
            done
            kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
        fi
        kill -0 "$pid" 2>/dev/null || stopped=$((stopped + 1))
        rm -f "$f"
    done
}
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
    # the cases still running in the background (their jobs go next)
    # shellcheck disable=SC2086  # a list of pids
    [ -z "${bg_pids:-}" ] || kill $bg_pids 2>/dev/null
    stop_cluster
    [ -n "${TRI_TEST_KEEP:-}" ] || rm -rf "$WORK"    # keep it to debug a failure
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP PIPE

# check STATUS DESCRIPTION: ok, and returns STATUS (for "|| show ...")
check() {
    ok "$1" "$2"
    return "$1"
}
# On failure: the end of the daemons' logs.
show_logs() {
    for f in "$S"/log/*.log; do
        [ -f "$f" ] || continue
        diag "--- $f"
        tail -n 15 "$f" | sed 's/^/#   /'
    done
}

plan 20

# ---- the cluster
port_used() {    # port_used PORT: some TCP socket on this host has that local port
    hex=$(printf '%04X' "$1")
    cat /proc/net/tcp /proc/net/tcp6 2>/dev/null |
        awk -v p=":$hex" '$2 ~ p"$" { f = 1 } END { exit !f }'
}
port=$((20000 + $$ % 20000))
tries=0
while port_used "$port" || port_used $((port + 1)); do
    port=$((port + 2))
    tries=$((tries + 1))
    [ $tries -lt 100 ] || break
done
hw=$(slurmd -C | head -n 1)
field() { echo "$hw" | sed -n "s/.*$1=\([0-9]*\).*/\1/p"; }
cpus=$(field CPUs)
sockets=$(field SocketsPerBoard)
cores=$(field CoresPerSocket)
threads=$(field ThreadsPerCore)
mem=$(field RealMemory)
: "${cpus:=$(nproc)}" "${sockets:=1}" "${cores:=$cpus}" "${threads:=1}" "${mem:=2000}"
# The cases run side by side, six jobs of np ranks at most: a smaller
# machine declares that many cores (config_overrides below lets slurmd
# believe it). The jobs that run long mostly sleep (see slow_all).
if [ "$cpus" -lt $((6 * np)) ]; then
    cpus=$((6 * np)) sockets=1 cores=$((6 * np)) threads=1
fi
# cred_expire: a requeued job may start again after this many seconds (120
# by default). sched_interval: look for startable jobs every second.
# FirstJobId and TmpFS: job ids and srun's PMIx directories that another
# cluster of this test, in another build tree, does not share.
mkdir -p "$S/tmp"
cat > "$SLURM_CONF" <<EOF
ClusterName=tritest
FirstJobId=$((port % 20000 * 100 + 1000))
TmpFS=$S/tmp
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$S/munge/munge.socket.2,cred_expire=5
SlurmctldPidFile=$S/run/slurmctld.pid
SlurmdPidFile=$S/run/slurmd.pid
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd.log
PlugStackConfig=$S/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SlurmdParameters=config_overrides
ReturnToService=2
MinJobAge=600
KillWait=5
InactiveLimit=0
MailProg=/bin/true
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus Sockets=$sockets CoresPerSocket=$cores ThreadsPerCore=$threads RealMemory=$((mem * 9 / 10)) State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
: > "$S/plugstack.conf"

wait_pid_file() {    # wait_pid_file FILE: up to 10 s for a live pid in FILE
    i=0
    while [ $i -lt 100 ]; do
        [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null && return 0
        sleep 0.1
        i=$((i + 1))
    done
    return 1
}
start_cluster() {
    # munged: a private key, socket and pid file; nothing in /etc or /run
    if [ -r /etc/munge/munge.key ]; then
        cp /etc/munge/munge.key "$S/munge/munge.key"
    else
        dd if=/dev/urandom of="$S/munge/munge.key" bs=1024 count=1 2>/dev/null
    fi
    chmod 0400 "$S/munge/munge.key"
    munged --socket="$S/munge/munge.socket.2" --key-file="$S/munge/munge.key" \
        --pid-file="$S/run/munged.pid" --seed-file="$S/munge/seed" \
        --log-file="$S/log/munged.log" || return 1
    wait_pid_file "$S/run/munged.pid" || return 1
    slurmctld -c -i || return 1        # -c: a clean start, no saved jobs
    wait_pid_file "$S/run/slurmctld.pid" || return 1
    slurmd -N localhost || return 1     # -N: whatever this host is called
    wait_pid_file "$S/run/slurmd.pid" || return 1
    i=0
    while [ $i -lt 300 ]; do
        [ "$(sinfo -h -n localhost -o %t 2>/dev/null)" = idle ] && return 0
        sleep 0.1
        i=$((i + 1))
    done
    return 1
}
start_cluster
rc=$?
ok $rc "munged, slurmctld and slurmd start on ports $port-$((port + 1)) and the node is idle ($(elapsed) s)"
if [ $rc -ne 0 ]; then
    show_logs
    done_testing
fi

# wait_job ID SECONDS: polls every 0.5 s until the job ends; sets $state,
# $exit (N:S) and $restarts.
wait_job() {
    deadline=$(($(date +%s) + $2))
    state=""
    while [ "$(date +%s)" -lt "$deadline" ]; do
        line=$(scontrol show job -o "$1" 2>/dev/null)
        state=$(echo "$line" | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
        case $state in
        COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE) break ;;
        esac
        sleep 0.5
    done
    exit=$(echo "$line" | sed -n 's/.* ExitCode=\([0-9:]*\).*/\1/p')
    restarts=$(echo "$line" | sed -n 's/.* Restarts=\([0-9]*\).*/\1/p')
}
# last_step FILE: the step of the last line of a metrics file
last_step() { tail -n 1 "$1" | sed -n 's/.*"step":\([0-9]*\).*/\1/p'; }
show() { sed 's/^/#   /' "$1" | tail -n "${2:-25}"; }

cfg="$WORK/tiny.ini"
write_config "$cfg" 50
cat >> "$cfg" <<EOF2
[eval]
batches = 2
[checkpoint]
every = 100
EOF2
cd "$WORK" || exit 1

# The cases run side by side (the node declares room for six jobs at
# once): each job has its own RUN_DIR and output file, and each case is
# judged in order once its job has ended. The runs that must outlast a
# signal (cases 3 to 5) sleep 50 ms in each step on every rank
# (TRIDENT_FAULT=slow, fault.h), so they last long while using little of
# the cores the others train on: N steps take at least N / 20 s, whatever
# the load.
slow_all=slow:0:0
r=1
while [ $r -lt "$np" ]; do
    slow_all="$slow_all,slow:$r:0"
    r=$((r + 1))
done
sized() { echo $(($1 * 20)); }    # sized SECONDS: steps of at least that long a run
# Only the run that must outlast a signal sleeps: the requeued run that
# resumes (cases 3 and 4) trains at full speed, since what is checked of
# it is that it resumed and finished, not how long it took (slowed, it
# took 25 of t_slurm's 96 s). The sbatch script starts this in place of
# trident; RUN_DIR/ckpt/latest exists once the stopped run saved (these
# runs save no periodic checkpoints).
SLOW_ONCE="$WORK/trident-slow-until-saved"
cat > "$SLOW_ONCE" <<EOF3
#!/bin/sh
[ ! -s "\$RUN_DIR/ckpt/latest" ] || unset TRIDENT_FAULT
exec "$TRIDENT" "\$@"
EOF3
chmod +x "$SLOW_ONCE"
# save_vars FILE NAME...: what a case run in the background found, for
# the judging shell to read back with `. FILE`
save_vars() {
    f=$1
    shift
    : > "$f.new"
    val=""
    for v in "$@"; do
        eval "val=\$$v"
        printf "%s='%s'\n" "$v" "$val" >> "$f.new"
    done
    mv "$f.new" "$f"
}
bg_pids=""

# ---- 1, 2, 2b: submitted together, judged below
# 1. a tiny run, launched by srun --mpi=pmix (the script's default)
t1=$(date +%s)
id1=$(TRIDENT=$TRIDENT CONFIG=$cfg RUN_DIR=$WORK/run1 sbatch --parsable -J tiny \
      -o "$WORK/tiny-%j.out" --ntasks-per-node="$np" -t 10 "$SRC/jobs/cpu.sbatch" \
      --set train.steps=200 --set log.every=10 --set log.sample_tokens=20)
rc1=$?
# 2. a run that fails is not requeued either
id2=$(TRIDENT=$TRIDENT CONFIG=$cfg RUN_DIR=$WORK/bad sbatch --parsable -J bad \
      -o "$WORK/bad-%j.out" --ntasks-per-node="$np" -t 10 "$SRC/jobs/cpu.sbatch" \
      --set model.n_head=3)
# 2b. a stalled run: rank 1 stops itself (SIGSTOP) at step 20; the
# watchdog of rank 0 ends the job with 76, which is not requeued
id2b=$(TRIDENT_FAULT=stall:1:20 TRIDENT=$TRIDENT CONFIG=$cfg RUN_DIR=$WORK/stall sbatch --parsable \
       -J stall -o "$WORK/stall-%j.out" --ntasks-per-node="$np" -t 10 "$SRC/jobs/cpu.sbatch" \
       --set train.steps=1000 --set fault.timeout=3)

# ---- 3. a run that outlasts the first time-limit signal (in the background)
# The signal (-t 1 --signal=B:USR1@50) comes 10 to 40 s into a run, as
# slurmctld checks limits every 30 s. So the run is sized to at least 45 s;
# a resumed run that is signalled again is requeued again. Should the run
# end before the signal, it is tried once more, longer.
# slurmctld checks time limits from a background thread every 30 s; under a
# parallel make check that thread has been seen to skip more than a minute
# (a job ran 64 s past -t 1 with neither the signal nor the kill). Such a try
# tests nothing here, so it is tried again; the last try has a 3-minute
# limit (the signal still due 10 s in) and a run sized to 150 s, so a late
# check still lands in time. The same stall can deliver a resumed run's
# signal seconds before its limit: trident saves, but the limit's SIGTERM
# ends the script before it requeues (TIMEOUT, seen under make -j2 check),
# or mpirun dies by the USR1 it forwards before the ranks save (FAILED
# 138). Such a try is tried again too. A try that got the signal and
# completed is judged, and so is the last try, whatever it did.
# MPIRUN_GRACE=1: once a rank exits 75, mpirun ends the job and waits its
# odls_base_sigkill_timeout out, twice, though the ranks are gone: 15 s
# each by default, which left 28 s between the save and the requeue (the
# grace itself, for a SIGTERM, is case 5's).
long_job() {    # long_job TRY: submits the run, waits for it
    every=$((steps / 100))
    t0=$(date +%s)
    rm -rf "$WORK/run2"
    id=$(TRIDENT_FAULT=$slow_all LAUNCHER=mpirun MPIRUN_GRACE=1 TRIDENT=$SLOW_ONCE CONFIG=$cfg \
         RUN_DIR=$WORK/run2 sbatch --parsable -J "long$1" -o "$WORK/long-%j.out" \
         --ntasks-per-node="$np" -t "$limit" --signal=B:USR1@"$warn" \
         "$SRC/jobs/cpu.sbatch" --set train.steps="$steps" --set log.every="$every" \
         --set eval.every=0 --set checkpoint.every=0 --set log.sample_tokens=20)
    rc=$?
    wait_job "$id" $((limit * 60 + 180))
}
case3() {
    steps=$(sized 45)
    limit=1 warn=50
    for try in 1 2 3; do
        long_job "$try"
        took=$(($(date +%s) - t0))
        if grep -q '^stopping at step' "$WORK/long-$id.out" 2>/dev/null; then
            [ "$state" = COMPLETED ] && break
            diag "try $try: signalled, but ended $state $exit after $took s (a late limit check, or mpirun's own death by USR1): again"
        elif [ "$state" = COMPLETED ] && [ "$restarts" = 0 ] && [ "$took" -lt 58 ]; then
            steps=$((steps * 60 / (took > 3 ? took - 2 : 1)))
            diag "try $try finished in $took s, before the signal: again with $steps steps"
        else
            diag "try $try: no signal reached trident in $took s ($state): again"
        fi
        if [ "$try" = 2 ]; then
            limit=3 warn=170
            steps=$((steps * 150 / 45))
            diag "the last try: -t $limit --signal=B:USR1@$warn, $steps steps"
        fi
    done
    took=$(($(date +%s) - t0))
    save_vars "$WORK/case3.vars" rc id state exit restarts steps limit warn took
}
( trap - EXIT; case3 ) > "$WORK/case3.log" 2>&1 &
bg_pids="$bg_pids $!"

# ---- 4. srun passes the signal on too: USR1 to the batch shell, as
# --signal=B:USR1 sends it, but now, from scancel (in the background)
# (20 s of work: a busy slurmctld can take seconds to pass scancel on)
# scancel itself has been seen to take 20 s to reach a slurmctld busy under
# make check, after the run had ended: such a try tests nothing, so it is
# tried once more with a run three times as long.
case4() {
    steps=$(sized 20)
    for try in 1 2; do
        t0=$(date +%s)
        rm -rf "$WORK/run3"
        id=$(TRIDENT_FAULT=$slow_all TRIDENT=$SLOW_ONCE CONFIG=$cfg RUN_DIR=$WORK/run3 sbatch --parsable \
             -J srun -o "$WORK/srun-%j.out" --ntasks-per-node="$np" -t 10 "$SRC/jobs/cpu.sbatch" \
             --set train.steps="$steps" --set log.every=100 --set eval.every=0 \
             --set checkpoint.every=0 --set log.sample_tokens=20)
        deadline=$(($(date +%s) + 60))
        while [ ! -s "$WORK/run3/metrics.jsonl" ] && [ "$(date +%s)" -lt "$deadline" ]; do
            sleep 0.5
        done
        scancel --batch --signal=USR1 "$id" || { sleep 1; scancel --batch --signal=USR1 "$id"; }
        wait_job "$id" 150
        grep -q '^stopping at step' "$WORK/srun-$id.out" 2>/dev/null && break
        [ "$try" = 2 ] && break
        diag "try $try: the run ended ($state) before scancel's USR1 reached it, after $(($(date +%s) - t0)) s: again, 3x longer"
        steps=$((steps * 3))
    done
    took=$(($(date +%s) - t0))
    save_vars "$WORK/case4.vars" id state exit restarts steps took
}
( trap - EXIT; case4 ) > "$WORK/case4.log" 2>&1 &
bg_pids="$bg_pids $!"

# ---- 5. scancel of a run under mpirun: Slurm sends SIGTERM to the batch
# script, mpirun and the ranks at once. mpirun then ends the job, and by
# default leaves the ranks 2 s: the script's MPIRUN_GRACE must give them the
# time to save (here a save slowed to 3 s by TRIDENT_FAULT=slow_stop; Slurm's
# SIGKILL comes KillWait = 5 s after the SIGTERM). In the background.
case5() {
    steps=$(sized 60)
    t0=$(date +%s)
    id=$(TRIDENT_FAULT=slow_stop:0:0,$slow_all LAUNCHER=mpirun TRIDENT=$TRIDENT CONFIG=$cfg \
         RUN_DIR=$WORK/run4 sbatch --parsable -J cancel -o "$WORK/cancel-%j.out" \
         --ntasks-per-node="$np" -t 10 "$SRC/jobs/cpu.sbatch" --set train.steps="$steps" \
         --set log.every=100 --set eval.every=0 --set checkpoint.every=0 --set log.sample_tokens=20)
    rc=$?
    deadline=$(($(date +%s) + 60))
    while [ ! -s "$WORK/run4/metrics.jsonl" ] && [ "$(date +%s)" -lt "$deadline" ]; do
        sleep 0.5
    done
    scancel "$id"
    wait_job "$id" 60
    took=$(($(date +%s) - t0))
    save_vars "$WORK/case5.vars" rc id state exit restarts steps took
}
( trap - EXIT; case5 ) > "$WORK/case5.log" 2>&1 &
bg_pids="$bg_pids $!"

# ---- 1. judged
ok $rc1 "sbatch jobs/cpu.sbatch: a $np-rank tiny run is job $id1"
wait_job "$id1" 120
out="$WORK/tiny-$id1.out"
[ "$state" = COMPLETED ] && [ "$exit" = 0:0 ]
check $? "the job completes with exit 0 ($state $exit after $(($(date +%s) - t1)) s)" ||
    { show "$out"; show_logs; }
grep -q '^config: ' "$out" && grep -q '^ranks: ' "$out" && grep -q '^git: ' "$out" &&
    grep -q '^== trident finished' "$out"
check $? "the output shows the git version, config, ranks and the end" || show "$out"
grep -q "^layout: $np ranks = dp $np x pp 1 x tp 1" "$out" && grep -q '^done: 200 steps' "$out"
check $? "trident ran on $np ranks under srun and did 200 steps" || show "$out"
ckpt=$(cat "$WORK/run1/ckpt/latest" 2>/dev/null)
[ "$ckpt" = step_00000200.h5 ] && [ -s "$WORK/run1/ckpt/$ckpt" ]
ok $? "RUN_DIR/ckpt/latest names the final checkpoint (${ckpt:-none})"
[ "$(last_step "$WORK/run1/metrics.jsonl")" = 200 ] && grep -q '"val_loss":' "$WORK/run1/metrics.jsonl" &&
    cmp -s "$out" "$WORK/run1/train.log"
ok $? "RUN_DIR has the metrics up to step 200 and a copy of the output"

[ "$restarts" = 0 ]
ok $? "a finished run is not requeued (Restarts=$restarts)"

# ---- 2. judged
wait_job "$id2" 60
out="$WORK/bad-$id2.out"
[ "$state" = FAILED ] && [ "$exit" = 1:0 ] && [ "$restarts" = 0 ] &&
    grep -q '^== trident failed (exit 1): not requeued' "$out"
check $? "a run with a bad config fails with exit 1 and is not requeued ($state $exit, Restarts=$restarts)" ||
    show "$out"

# ---- 2b. judged
wait_job "$id2b" 90
out="$WORK/stall-$id2b.out"
[ "$state" = FAILED ] && [ "$exit" = 76:0 ] && [ "$restarts" = 0 ] &&
    grep -q 'watchdog: no progress for [0-9.]* s: waiting in .*(in train_step, step 20)' "$out" &&
    grep -q "^== trident's watchdog ended a stalled job (exit 76" "$out"
check $? "a run whose rank 1 stops at step 20 is ended by the watchdog with 76, and not requeued ($state $exit, Restarts=$restarts)" ||
    show "$out"

# the background cases' findings
# shellcheck disable=SC2086  # a list of pids
wait $bg_pids
bg_pids=""

# ---- 3. judged
cat "$WORK/case3.log"
rc=1 id=none state="" exit="" restarts="" steps=0 limit=1 warn=50 took=0
# shellcheck disable=SC1091  # written above (not if the case was killed)
[ ! -f "$WORK/case3.vars" ] || . "$WORK/case3.vars"
ok $rc "sbatch -t $limit --signal=B:USR1@$warn jobs/cpu.sbatch: $steps steps under mpirun, job $id"
out="$WORK/long-$id.out"
[ "$state" = COMPLETED ] && [ "$exit" = 0:0 ] && [ "${restarts:-0}" -ge 1 ]
check $? "the job completes after $restarts requeue(s) ($state $exit after $took s)" ||
    { show "$out" 40; show_logs; }
stops=$(grep -c '^stopping at step' "$out")
requeues=$(grep -c '^== trident saved a checkpoint and stopped on USR1 (exit 75): requeueing' "$out")
[ "$stops" -ge 1 ] && [ "$requeues" = "$stops" ]
check $? "USR1 reached the batch script, mpirun passed it to the ranks, trident saved and exited 75, the script requeued ($requeues time(s))" ||
    show "$out" 40
grep 'Forwarding signal\|^stopping at step\|^resumed from\|^== ' "$out" | sed 's/^/#   /'
resumes=$(grep -c '^resumed from .*/run2/ckpt/step_[0-9]*\.h5' "$out")
[ "$resumes" -ge 1 ] && [ "$resumes" = "$restarts" ]
ok $? "each requeued run resumed from the latest checkpoint ($resumes)"
ckpt=$(cat "$WORK/run2/ckpt/latest" 2>/dev/null)
[ "$ckpt" = "$(printf 'step_%08d.h5' "$steps")" ] && [ -s "$WORK/run2/ckpt/$ckpt" ] &&
    [ "$(grep -c '^done: ' "$out")" = $((restarts + 1)) ] && grep -q "^done: $steps steps" "$out"
ok $? "the final checkpoint is step $steps (${ckpt:-none})"
m="$WORK/run2/metrics.jsonl"
sed -n 's/.*"step":\([0-9]*\).*/\1/p' "$m" |
    awk -v last="$steps" 'NR > 1 && $1 <= prev { bad = 1 } { prev = $1 } END { exit bad || prev != last }'
rc=$?
first=$(sed -n 's/.*"step":\([0-9]*\).*/\1/p' "$m" | head -n 1)
what="the metrics file continues across the restarts: steps $first to $steps, increasing ($(wc -l < "$m") lines)"
[ $rc -eq 0 ] && [ "$first" = 1 ]
ok $? "$what"

# ---- 4. judged
cat "$WORK/case4.log"
id=none state="" exit="" restarts="" steps=0 took=0
# shellcheck disable=SC1091  # written above (not if the case was killed)
[ ! -f "$WORK/case4.vars" ] || . "$WORK/case4.vars"
out="$WORK/srun-$id.out"
ckpt=$(cat "$WORK/run3/ckpt/latest" 2>/dev/null)
[ "$state" = COMPLETED ] && [ "$exit" = 0:0 ] && [ "$restarts" = 1 ] &&
    grep -q '^== trident saved a checkpoint and stopped on USR1 (exit 75): requeueing' "$out" &&
    grep -q '^resumed from .*/run3/ckpt/step_' "$out" &&
    [ "$ckpt" = "$(printf 'step_%08d.h5' "$steps")" ]
check $? "scancel -b -s USR1: srun passes it on, the job is requeued once and resumes to step $steps ($state $exit, Restarts=$restarts, $took s)" ||
    { show "$out" 40; show_logs; }

# ---- 5. judged
cat "$WORK/case5.log"
rc=1 id=none state="" exit="" restarts="" steps=0 took=0
# shellcheck disable=SC1091  # written above (not if the case was killed)
[ ! -f "$WORK/case5.vars" ] || . "$WORK/case5.vars"
ok $rc "sbatch LAUNCHER=mpirun jobs/cpu.sbatch: a long run, job $id"
out="$WORK/cancel-$id.out"
ckpt=$(cat "$WORK/run4/ckpt/latest" 2>/dev/null)
# (mpirun stops passing the ranks' output on once it ends the job, and
# Slurm kills the script at KillWait: the checkpoint is what tells.)
[ "$state" = CANCELLED ] && [ "${restarts:-0}" = 0 ] && [ -n "$ckpt" ] &&
    [ -s "$WORK/run4/ckpt/$ckpt" ] && "$TRIDENT" inspect "$WORK/run4/ckpt/$ckpt" > /dev/null 2>&1
check $? "scancel under mpirun: the ranks save (${ckpt:-no checkpoint}) before mpirun or Slurm ends them; not requeued ($state, Restarts=$restarts, $took s)" ||
    { show "$out" 40; show_logs; }

# ---- stop
stop_cluster
[ "$stopped" = 3 ]
ok $? "the three daemons stopped by pid (total $(elapsed) s)"
done_testing
