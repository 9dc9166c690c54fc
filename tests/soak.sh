#!/bin/sh
# soak.sh - the chaos soak (doc/errors.md, "The chaos soak"): one training
# run on NP ranks (4) interrupted SOAK_FAULTS times at random instants, each
# fault drawn from a seeded list, and resumed each time with the same
# command. After every fault `latest` must still name a checkpoint that
# `trident inspect` verifies, at a step no earlier than before, and the run
# must have ended the way that fault ends a run (no hang, no crash, no rank
# left behind); at the end the final checkpoint's weights and Adam moments
# must be bitwise those of the same run left alone.
#
# The faults: kill_rank (SIGKILL of one rank), kill_job (SIGKILL of every
# rank and mpiexec), term (SIGTERM to every rank, as a batch system sends
# it: the stop-and-save path, exit 75, then the requeue), stop_rank
# (SIGSTOP of one rank until the watchdog ends the job, exit 76),
# disk_full (the disk fills while every rank is half-way through a save),
# trunc_tmp (the job is killed half-way through a save and its temporary
# file is then cut short, as a node's crash leaves it), async_kill (one
# rank dies by SIGKILL half-way through an asynchronous save). The signals
# land at a random step and a random fraction of a second after it; the
# saves' faults at a random checkpoint; about half the runs save
# asynchronously.
#
#   SOAK_SEED    the seed of the draws (default: the clock; printed)
#   SOAK_FAULTS  how many faults (default 7: every kind once, in a seeded
#                order, the brief run `make check` does; `make soak`: 50)
#   SOAK_STEPS   the run's length (default: enough for every fault)
#
# As root the checkpoint directory is a tmpfs of its own (unshare -m), which
# disk_full really fills; elsewhere disk_full uses the save_fail test hook
# (src/base/fault.h) and says so.
if [ -z "${SOAK_IN_NS:-}" ] && [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then
    SOAK_IN_NS=1 exec unshare -m sh "$0" "$@"
fi
. "${TRI_SRCDIR:-.}/tests/lib.sh"
np=${1:-4}
faults=${SOAK_FAULTS:-7}
seed=${SOAK_SEED:-$(date +%s)}
steps=${SOAK_STEPS:-$((12 * faults + 24))}
limit=$((120 + steps / 2))         # seconds any one run may take (load 28: 0.1 s a step, 0.4 s a save)
DIFF="${TRI_BUILDDIR:-.}/tests/ckpt_diff"
plan $((faults + 3))
# shellcheck disable=SC3045
ulimit -c 0 2>/dev/null            # a crash is detected below, not left as a core file
t_start=$(date +%s)
echo "# soak: seed $seed (SOAK_SEED=$seed SOAK_FAULTS=$faults to replay), $faults faults, $steps steps, $np ranks"

fs="$WORK/fs"
ck="$fs/ck"
mkdir -p "$fs"
real_disk=0
if [ -n "${SOAK_IN_NS:-}" ] && mount -t tmpfs -o size=64m tmpfs "$fs" 2>/dev/null; then
    real_disk=1
    # lib.sh's clean-up, after the tmpfs is gone
    trap 'umount "$fs"; rm -rf "$WORK"' EXIT
else
    diag "cannot mount a tmpfs here (not root, or no mount namespaces): disk_full uses the save_fail hook"
fi

# The job: jobs/configs/tiny.ini made small, a watchdog of 5 s. Every run
# of the soak is this command with a checkpoint every 2 steps, its
# checkpoint directory and, drawn per run, [checkpoint] async; the run left
# alone saves only at its end (a save must not change the run, and a
# thousand saves would take minutes).
job="train --config ${TRI_SRCDIR:-.}/jobs/configs/tiny.ini --set data.train=$DATA/small.txt
 --set model.n_layer=2 --set model.n_embd=32 --set model.n_head=2 --set model.seq_len=32
 --set train.micro_batch=4 --set train.steps=$steps --set train.warmup=4 --set eval.every=0
 --set log.every=1 --set log.sample_tokens=0 --set checkpoint.keep=3
 --set fault.timeout=5"

# start OUT DIR ASYNC FAULTS [EVERY]: the job in the background, its
# checkpoints in DIR every EVERY steps (2), TRIDENT_FAULT=FAULTS; $mp is
# mpiexec's pid, $t0 the start.
start() {
    t0=$(date +%s)
    # shellcheck disable=SC2086
    TRIDENT_FAULT=$4 $TRI_MPIEXEC -n "$np" "$TRIDENT" $job --set log.metrics="$2.jsonl" \
        --set checkpoint.dir="$2" --set checkpoint.async="$3" --set checkpoint.every="${5:-2}" \
        > "$1" 2>&1 < /dev/null &
    mp=$!
}

# alive: whether the job started last still runs
alive() { kill -0 "$mp" 2>/dev/null; }
# rank_pids: the ranks of that job (mpiexec's children)
rank_pids() { pgrep -P "$mp" | tr '\n' ' '; }
# signal_ranks SIG: sends SIG to every one of them
signal_ranks() {
    # shellcheck disable=SC2046
    kill -"$1" $(rank_pids)
}
# nth_rank N: the pid of one of them
nth_rank() { rank_pids | awk -v n="$1" '{ print $(n % NF + 1) }'; }
# elapsed: seconds since the job started
elapsed() { echo $(($(date +%s) - t0)); }

# wait_step OUT STEP: until the job printed its line of STEP, ended, or
# ran out of time; whether it printed it
wait_step() {
    until grep -q "^step  *$2/" "$1"; do
        alive && [ "$(elapsed)" -lt "$limit" ] || return 1
        sleep 0.05
    done
}

# wait_stopped: until every rank is stopped (state T) in the save_pause
# hook, or the job ended; whether they all are
wait_stopped() {
    while alive && [ "$(elapsed)" -lt "$limit" ]; do
        n=$(ps -o stat= -p "$(rank_pids | tr ' ' ',' | sed 's/,$//')" 2>/dev/null | grep -c '^T')
        [ "$n" -ge "$np" ] && return 0
        sleep 0.05
    done
    return 1
}

# is_rank PID: whether PID is (still) a trident process, not a pid the
# system has given to another since
is_rank() { [ "$(ps -o comm= -p "$1" 2>/dev/null)" = trident ]; }

# finish: waits for the job at most $limit seconds from its start (then
# kills it: rc 124); sets $rc. A rank still running once mpiexec is gone
# is killed and reported in $left.
finish() {
    pids=$(rank_pids)
    while alive && [ "$(elapsed)" -lt "$limit" ]; do
        # shellcheck disable=SC2046,SC2086
        pids=$(printf '%s\n' $pids $(rank_pids) | sort -u)
        sleep 0.1
    done
    if alive; then
        # shellcheck disable=SC2046
        kill -KILL $(rank_pids) "$mp" 2>/dev/null
        wait "$mp" 2>/dev/null
        rc=124
    else
        wait "$mp"
        rc=$?
    fi
    left=""
    for p in $pids; do
        tries=0
        while is_rank "$p" && [ $tries -lt 50 ]; do sleep 0.1; tries=$((tries + 1)); done
        if is_rank "$p"; then
            left="$left $p"
            kill -KILL "$p" 2>/dev/null
        fi
    done
}

# latest_step DIR: the step `latest` names (0 when there is none)
latest_step() {
    if [ -f "$1/latest" ]; then
        sed -n 's/^step_0*\([0-9][0-9]*\)\.h5$/\1/p' "$1/latest"
    else
        echo 0
    fi
}

# next_save AFTER AHEAD: a checkpoint step (a multiple of 2) 2 to 6 steps
# past AFTER
next_save() { echo $(($1 - $1 % 2 + 2 * (($2 + 1) / 2))); }

# ---- the same run, left alone ----------------------------------------------
start "$WORK/ref.out" "$WORK/ref" false "" 0
finish
ref="$WORK/ref/step_$(printf %08d "$steps").h5"
[ "$rc" = 0 ] && [ -f "$ref" ]
ok $? "the run left alone: $steps steps on $np ranks, saved at the end (exit $rc, $(elapsed)s)"
if [ ! -f "$ref" ]; then
    echo "Bail out! the uninterrupted run failed"
    sed 's/^/# /' "$WORK/ref.out" | tail -n 20
    exit 1
fi

# ---- the draws: every kind once in a random order, then at random -----------
awk -v seed="$seed" -v n="$faults" -v np="$np" 'BEGIN {
    srand(seed)
    nk = split("kill_rank kill_job term stop_rank disk_full trunc_tmp async_kill", kind, " ")
    for (i = 1; i <= nk; i++) order[i] = i
    for (i = nk; i > 1; i--) { j = int(rand() * i) + 1; t = order[i]; order[i] = order[j]; order[j] = t }
    for (i = 1; i <= n; i++) {
        k = i <= nk ? order[i] : int(rand() * nk) + 1
        # kind, steps ahead (1-6), delay after that step (ms: about a step
        # under load, a few on an idle machine), victim rank, async
        printf "%s %d %d %d %s\n", kind[k], int(rand() * 6) + 1, int(rand() * 100),
            int(rand() * np), rand() < 0.5 ? "true" : "false"
    }
}' > "$WORK/draws"

# ---- the faults ----------------------------------------------------------------
# Each sets $what (where it struck), $want (the exit regex), $pattern (what
# the output must say), $saved_at and $no_tmp (judge's extra checks), and
# $why when it could not strike.

# signal_fault KIND: the job runs to step $at; $delay s later the signal
# of KIND lands
signal_fault() {
    what="step $at + ${ms} ms"
    start "$out" "$ck" "$async" ""
    if ! wait_step "$out" "$at"; then why="the run ended before step $at (raise SOAK_STEPS)"; finish; return; fi
    sleep "$delay"
    case $1 in
        kill_rank) kill -KILL "$(nth_rank "$victim")" ;;
        kill_job) signal_ranks KILL; kill -KILL "$mp" ;;
        term) signal_ranks TERM; want=75 pattern="on SIGTERM" saved_at=$at ;;
        stop_rank) kill -STOP "$(nth_rank "$victim")"; want=76 pattern="watchdog" ;;
    esac
    finish
}

# save_fault KIND: every rank stops itself half-way through the (not
# asynchronous) save of step $save; then the disk fills and they go on
# (disk_full), or the job is killed and its temporary file cut short
# (trunc_tmp)
save_fault() {
    async=false
    what="the save of step $save"
    if [ "$1" = disk_full ] && [ $real_disk = 0 ]; then
        what="$what (stand-in: the save_fail hook on rank $victim)"
        want=1 pattern="No space left on device" no_tmp=1
        start "$out" "$ck" false "save_fail:$victim:$save"
        finish
        return
    fi
    start "$out" "$ck" false "$(every_rank save_pause "$save")"
    if ! wait_stopped; then why="the ranks did not all stop in the save of step $save"; finish; return; fi
    if [ "$1" = disk_full ]; then
        want=1 pattern="No space left on device" no_tmp=1
        head -c 128M /dev/zero > "$fs/filler" 2>/dev/null
        signal_ranks CONT
        finish
        rm -f "$fs/filler"
    else
        signal_ranks KILL
        kill -KILL "$mp"
        finish
        cut_tmp
    fi
}

# cut_tmp: the temporary file of the save of step $save cut to $ms / 100
# of its length, as a node's crash can leave it
cut_tmp() {
    tmp=$(find "$ck" -name "step_$(printf %08d "$save").h5.tmp*" | head -n 1)
    if [ -z "$tmp" ]; then why="no temporary file of step $save to cut short"; return; fi
    size=$(wc -c < "$tmp")
    truncate -s $((size * ms / 100)) "$tmp"
    what="$what, cut from $size to $((size * ms / 100)) bytes"
}

# async_fault: rank $victim kills itself half-way through the
# asynchronous save of step $save, slowed so the training goes on meanwhile
async_fault() {
    async=true
    what="the save of step $save on rank $victim"
    pattern="exited on signal 9"
    start "$out" "$ck" true "async_kill:$victim:$save,save_slow:$victim:$save"
    finish
}

# inject KIND AHEAD MS VICTIM: starts the job (with the fault's hooks, if
# any), delivers the fault of KIND AHEAD steps past latest (or at the
# checkpoint after), MS ms after the step, on rank VICTIM; waits for the end
inject() {
    kind=$1 ahead=$2 ms=$3 victim=$4
    at=$((before + ahead))
    save=$(next_save "$before" "$ahead")
    delay=$(awk -v ms="$ms" 'BEGIN { printf "%.3f", ms / 1000 }')
    what="" want='[1-9][0-9]*' pattern="" saved_at=0 no_tmp=0
    case $kind in
        disk_full | trunc_tmp) save_fault "$kind" ;;
        async_kill) async_fault ;;
        *) signal_fault "$kind" ;;
    esac
}

# judge: the run ended as $kind wants (exit $want, $pattern printed, a
# checkpoint at step $saved_at or later, no temporary file if $no_tmp),
# and latest is still sound
judge() {
    now=$(latest_step "$ck")
    if [ -n "$why" ]; then
        :
    elif [ "$rc" = 124 ]; then
        why="no end within ${limit}s"
    elif grep -q "exited on signal \(4\|6\|7\|8\|11\) \|Segmentation fault\|core dumped\|Sanitizer\|runtime error:" "$out"; then
        why="crashed"
    elif [ -n "$left" ]; then
        why="rank pids$left outlived mpiexec"
    elif ! echo "$rc" | grep -Eqx "$want"; then
        why="exit $rc, wanted $want"
    elif [ -n "$pattern" ] && ! grep -q -- "$pattern" "$out"; then
        why="no '$pattern' in the output"
    elif [ "$before" -gt 0 ] && ! grep -q "resumed from .*step_0*$before\.h5" "$out"; then
        why="did not resume from step $before"
    elif [ "$now" -lt "$before" ] || { [ "$before" -gt 0 ] && [ "$now" = 0 ]; }; then
        why="latest went back from step $before to $now"
    elif [ "$now" -lt "$saved_at" ]; then
        why="the stop saved no checkpoint: latest is step $now, the stop came after step $saved_at"
    elif [ $no_tmp = 1 ] && [ -n "$(find "$ck" -name '*.tmp*')" ]; then
        why="the failed save left its temporary file: $(find "$ck" -name '*.tmp*')"
    elif [ "$now" -gt 0 ] && ! "$TRIDENT" inspect "$ck/$(cat "$ck/latest")" > "$WORK/inspect.out" 2>&1; then
        why="latest ($(cat "$ck/latest")) does not verify: $(tail -n 1 "$WORK/inspect.out")"
    fi
}

survived=0
i=0
while read -r kind ahead ms victim async <&3; do
    i=$((i + 1))
    before=$(latest_step "$ck")
    out="$WORK/run$i.out"
    why="" left="" rc=0
    inject "$kind" "$ahead" "$ms" "$victim"
    judge
    label="fault $i/$faults $kind at $what (async $async): from step $before"
    if [ -z "$why" ]; then
        survived=$((survived + 1))
        echo "$kind" >> "$WORK/survived"
        if [ "$now" = 0 ]; then to="to no checkpoint yet"; else to="to latest step $now, which verifies"; fi
        ok 0 "$label $to (exit $rc, $(elapsed)s)"
    else
        ok 1 "$label: $why"
        sed 's/^/#   /' "$out" | grep -v '^#   [a-z_0-9]* = ' | tail -n 12
    fi
done 3< "$WORK/draws"

# ---- the last resume runs to the end ---------------------------------------------
before=$(latest_step "$ck")
start "$WORK/last.out" "$ck" false ""
finish
final="$ck/step_$(printf %08d "$steps").h5"
[ "$rc" = 0 ] && [ -f "$final" ] && grep -q "resumed from .*step_0*$before\.h5" "$WORK/last.out" \
    && [ -z "$(find "$ck" -name '*.tmp*')" ]
ok $? "the last resume, from step $before, ends at step $steps with no temporary file left (exit $rc, $(elapsed)s)"
"$DIFF" "$ref" "$final" 0 optim > "$WORK/diff.out" 2>&1
ok $? "after $survived faults the final weights and Adam moments are bitwise those of the run left alone"
sed 's/^/#   /' "$WORK/diff.out" | tail -n 3

took=$(($(date +%s) - t_start))
by_kind=$(sort "$WORK/survived" 2>/dev/null | uniq -c | awk '{ printf "%s%s %d", sep, $2, $1; sep = ", " }')
echo "# soak: survived $survived of $faults faults ($by_kind) in ${took}s, seed $seed"
done_testing
