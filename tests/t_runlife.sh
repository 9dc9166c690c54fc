#!/bin/sh
# t_runlife.sh - a run's life as a user meets it: the metrics file keeps
# every run (each after a header record) and jobs/plot.sh marks where each
# begins; the summary at the end and its next commands, which must run as
# printed; a resume with more steps says how the schedule changes, and
# decay_steps keeps it; a finished run run again says so; the ETA appears
# once the step time is steady; a stop with nothing saved says so and is
# not a requeue (exit 77), through jobs/workstation.sh too, whose own
# thread setting no longer draws trident's OMP_NUM_THREADS warning; a
# config of the model and the data alone validates, writes metrics.jsonl
# in its checkpoint dir and samples, each off when set so.
. "${TRI_SRCDIR:-.}/tests/lib.sh"
np=${1:-1}
plan 31
cfg="$WORK/c.ini"
write_config "$cfg"
PY=${PYTHON:-python3}
abs() { (cd "$(dirname "$1")" && echo "$(pwd)/$(basename "$1")"); }

# ---- the metrics file: runs are appended, never replaced ------------------
m="$WORK/m.jsonl"
run "$np" train --config "$cfg" --set log.metrics="$m" --set train.steps=1
expect 0 "^done: 1 step;" "one step is 'done: 1 step', not '1 steps'"
run "$np" train --config "$cfg" --set log.metrics="$m" --set train.steps=6
head='^{"run":"[0-9]\{8\}T[0-9]\{6\}Z-[0-9]*","start":"[0-9-]*T[0-9:]*Z","config_digest":"[0-9a-f]\{16\}","steps":[0-9]*,"resumed":false,"resumed_from_step":0}$'
headers=$(grep -c "$head" "$m")
steps=$(sed -n 's/^{"step":\([0-9]*\),.*/\1/p' "$m" | tr '\n' ' ')
[ "$headers" = 2 ] && [ "$steps" = "1 1 2 3 4 5 6 " ]
ok $? "a fresh run appends after a header record; the earlier run's records stay ($headers headers, steps $steps)"

# the ETA: none while the step time settles (the first step pays for
# warm-up; three more are averaged), then on every line
no_eta=$(grep '^step ' "$WORK/out" | grep -v '| eta ' | sed 's/^step *\([0-9]*\)\/.*/\1/' | tr '\n' ' ')
with_eta=$(grep -c '^step .*| eta [0-9]*:[0-9][0-9]$' "$WORK/out")
[ "$no_eta" = "1 2 3 " ] && [ "$with_eta" = 3 ]
ok $? "the ETA is shown from step 4 on, once 3 steps after the first are averaged (none at: $no_eta)"

# ---- the summary, and its next commands as printed --------------------
r="$WORK/r.jsonl"
run "$np" train --config "$cfg" --set log.metrics="$r" --set checkpoint.dir="$WORK/ck" \
    --set eval.every=2 --set train.min_lr=3e-4
cp "$WORK/out" "$WORK/summary.out"
expect 0 "^summary: final training loss [0-9.]* (step 4), validation loss [0-9.]* (step 4)$" \
    "the summary gives the final training and validation loss"
expect 0 "^summary: 4 steps this run (steps 1 to 4 of 4) in [0-9]*:[0-9][0-9]:[0-9][0-9] wall time; mean [0-9]* tokens/s, MFU" \
    "... the wall time, mean tokens/s and MFU"
expect 0 "^summary: checkpoints: $WORK/ck (newest: $WORK/ck/step_00000004.h5)$" "... where the checkpoints are"
expect 0 "^summary: metrics: $r$" "... and the metrics"
expect 0 "^next: plot the curves:  jobs/plot.sh $r$" "... and the plot command"
sample=$(sed -n 's/^next: sample the model: trident //p' "$WORK/summary.out")
export_cmd=$(sed -n 's/^next: export it: *trident //p' "$WORK/summary.out")
# shellcheck disable=SC2086  # the command as printed, split into words
run "$np" $sample
expect 0 "" "the printed sample command runs: trident ${sample:-(none printed)}"
# shellcheck disable=SC2086
run "$np" $export_cmd
[ "$rc" = 0 ] && [ -f "$WORK/hf/config.json" ]
ok $? "the printed export command runs and writes beside the checkpoints: trident ${export_cmd:-(none printed)}"
# a [checkpoint] dir written with a trailing slash is the same directory:
# the export still goes beside it, not into it
run "$np" train --config "$cfg" --set checkpoint.dir="$WORK/slash/ck/" --set train.steps=1
expect 0 "^next: export it: *trident export .* --format hf $WORK/slash/hf$" \
    "with [checkpoint] dir = .../ck/ (a trailing slash) the export command still writes beside it"

# ---- a resume that raises steps, and decay_steps -----------------------
cp -r "$WORK/ck" "$WORK/keep"
run "$np" train --config "$cfg" --set log.metrics="$r" --set checkpoint.dir="$WORK/ck" \
    --set train.steps=8 --set eval.every=2 --set train.min_lr=3e-4
expect 0 "^note: the cosine schedule now ends at step 8, the checkpoint's at step 4 (\[train\] steps 8, was 4): step 5 trains at lr [0-9.e+-]* (0.0003 on the checkpoint's schedule); to keep the checkpoint's schedule, set \[train\] decay_steps = 4$" \
    "raising steps on resume says how the schedule changes, with step 5's lr under each"
grep -q '^{"run":"[^"]*","start":"[^"]*","config_digest":"[0-9a-f]*","steps":8,"resumed":true,"resumed_from_step":4}$' "$r" &&
    [ "$(sed -n 's/^{"step":\([0-9]*\),.*/\1/p' "$r" | tr '\n' ' ')" = "1 2 3 4 5 6 7 8 " ]
ok $? "the resumed run's header says it resumed at step 4, and each step is in the file once"
run "$np" train --config "$cfg" --set log.metrics="$WORK/k.jsonl" --set checkpoint.dir="$WORK/keep" \
    --set train.steps=8 --set train.decay_steps=4 --set train.min_lr=3e-4
! grep -q '^note: ' "$WORK/out" && [ "$rc" = 0 ] &&
    grep -q '^{"step":5,"loss":[^,]*,"lr":0.0003,' "$WORK/k.jsonl" &&
    grep -q '^{"step":8,"loss":[^,]*,"lr":0.0003,' "$WORK/k.jsonl"
ok $? "[train] decay_steps = 4 keeps the checkpoint's schedule: steps 5-8 at min_lr, no note"
run "$np" train --config "$cfg" --set log.metrics="$WORK/k.jsonl" --set checkpoint.dir="$WORK/keep" \
    --set train.steps=8 --set train.decay_steps=4 --set train.min_lr=3e-4
expect 0 "^already at step 8 of 8: nothing to train" "a finished run run again says it is already at its last step"
! grep -q '^summary:\|^sample (' "$WORK/out"
ok $? "... and neither samples nor summarises a run of no steps"

# ---- plot.sh: the boundaries, the name, tokens on x ---------------------
if command -v gnuplot > /dev/null 2>&1; then
    sh "${TRI_SRCDIR:-.}/jobs/plot.sh" "$m" "$WORK/m.png" > "$WORK/out" 2>&1
    rc=$?
    expect 0 "^plot.sh: $WORK/m.png: 2 runs in $m; run 2 (new) at step 1$" "plot.sh marks where the second run begins"
    sh "${TRI_SRCDIR:-.}/jobs/plot.sh" --tokens --name tiny "$r" "$WORK/r.png" > "$WORK/out" 2>&1
    rc=$?
    [ -s "$WORK/r.png" ] || rc=1
    expect 0 "^plot.sh: $WORK/r.png: 2 runs in $r; run 2 (resumed) at tokens 640$" \
        "plot.sh --tokens: a resumed run is marked at its first step's tokens (5 steps x 128)"
else
    ok 0 "# SKIP no gnuplot"
    ok 0 "# SKIP no gnuplot"
fi

# ---- stopping ---------------------------------------------------------
# wait_bounded PID: waits for it, killing it after 240 s (a hang fails the
# case instead of the suite); rc is its exit status. The guard's output
# goes to /dev/null and its sleep is ended with it: a sleep left holding
# the test's standard output made the TAP driver wait out its 240 s.
wait_bounded() {
    ( sleep 240; kill -KILL "$1" 2>/dev/null ) >/dev/null 2>&1 &
    guard=$!
    wait "$1"
    rc=$?
    pkill -P "$guard" sleep 2>/dev/null
    kill "$guard" 2>/dev/null
}
# until_step OUT: waits (up to 300 s) for the first step line in OUT
until_step() {
    i=0
    until grep -q "^step  *[0-9]" "$1" 2>/dev/null || [ $i -gt 3000 ]; do sleep 0.1; i=$((i + 1)); done
}

# SIGTERM to the ranks with a checkpoint dir: exit 75, and the line says
# what happens next without a batch system (no requeue is promised); under
# Open MPI, that mpirun's report of the non-zero exit is expected
# shellcheck disable=SC2086
env -u SLURM_JOB_ID $TRI_MPIEXEC -n "$np" "$TRIDENT" train --config "$cfg" \
    --set train.steps=100000 --set checkpoint.dir="$WORK/stop" > "$WORK/stop.out" 2>&1 &
mp=$!
until_step "$WORK/stop.out"
# shellcheck disable=SC2046  # the ranks: mpiexec's children
kill -TERM $(pgrep -P "$mp" | tr '\n' ' ') 2>/dev/null
wait_bounded "$mp"
cp "$WORK/stop.out" "$WORK/out"
expect 75 "^stopping at step [0-9]* on SIGTERM, its checkpoint saved: exit 75; the same command resumes from the checkpoint" \
    "a stop with a checkpoint, by hand: exit 75, and the same command resumes"
if $TRI_MPIEXEC --version 2>&1 | grep -q "Open MPI\|OpenRTE\|open-mpi"; then
    expect 75 "^stopping at step .*(Open MPI's report that follows, of processes that exited with a non-zero status, is expected; a mpirun that got Ctrl-C or SIGTERM itself exits 1)$" \
        "... and says that Open MPI's non-zero-exit report is expected, and what mpirun itself exits with"
else
    ok 0 "# SKIP not Open MPI"
fi

# jobs/workstation.sh with no [checkpoint] dir: the stop saves nothing,
# says so, and exits 77, which no script requeues
ws="$(abs "${TRI_SRCDIR:-.}/jobs/workstation.sh")"
data="$(abs "$DATA/small.txt")"
TRIDENT=$(abs "$TRIDENT") "$ws" -n 1 -c "$cfg" -- --set data.train="$data" \
    --set train.steps=100000 --set log.metrics= > "$WORK/ws.out" 2>&1 &
mp=$!
until_step "$WORK/ws.out"
kill -TERM "$mp"
wait_bounded "$mp"
cp "$WORK/ws.out" "$WORK/out"
expect 77 "^stopping at step [0-9]* on SIGUSR1 with nothing saved: \[checkpoint\] dir is empty, so the [0-9]* steps\? trained here \(is\|are\) lost and running again starts over; exit 77, not 75" \
    "a stop with no [checkpoint] dir says nothing was saved and exits 77, not 75"
grep -q "^workstation.sh: stopped on request with nothing saved (exit 77: no \[checkpoint\] dir); the same command starts over" "$WORK/out" &&
    ! grep -q "resumes from" "$WORK/out"
ok $? "... and workstation.sh says the same command starts over, not that it resumes"

# workstation.sh leaves the thread count to trident: two ranks on one core
# (taskset) drew "warning: OMP_NUM_THREADS=1 gives the 2 ranks ..." when
# the script set it
if command -v taskset > /dev/null 2>&1; then
    TRIDENT=$(abs "$TRIDENT") env -u OMP_NUM_THREADS taskset -c 0 "$ws" -n 2 -c "$cfg" -- --set data.train="$data" \
        --set train.steps=1 --set log.metrics= > "$WORK/out" 2>&1
    rc=$?
    expect 0 "^threads: 1 OpenMP thread per rank (its share of the cores" "workstation.sh on one core, 2 ranks: trident sizes the pools"
    ! grep -q "warning: OMP_NUM_THREADS" "$WORK/out"
    ok $? "... and draws no OMP_NUM_THREADS warning"
else
    ok 0 "# SKIP no taskset"
    ok 0 "# SKIP no taskset"
fi

# ---- counts in words --------------------------------------------------
if $PY -c 'import json' 2>/dev/null; then
    $PY "${TRI_SRCDIR:-.}/tests/bytelevel.py" tiny "$WORK/tok.json"
    printf 'one\n' > "$WORK/one.txt"
    run 1 tokenize --tokenizer "$WORK/tok.json" --input "$WORK/one.txt" --output "$WORK/one"
    expect 0 "^tokenize: wrote .*: 1 document, " "tokenize counts '1 document', not '1 documents'"
else
    ok 0 "# SKIP no python3"
fi
# ---- the defaults: a config of the model and the data gets tiny.ini's run --
# (validation, a metrics file beside the checkpoints, a sample at the end),
# as the guide's corpus.ini; write_config's own config turns them off
cat > "$WORK/bare.ini" <<EOC
[parallel]
device = cpu
[model]
n_layer = 1
n_embd = 32
n_head = 2
seq_len = 31
[train]
micro_batch = 4
steps = 3
warmup = 1
[data]
train = $DATA/small.txt
[checkpoint]
dir = $WORK/bare
EOC
run "$np" train --config "$WORK/bare.ini"
cp "$WORK/out" "$WORK/bare.out"
val=$(grep -c '^step .*| val [0-9.]* |' "$WORK/bare.out")
vals=$(grep -c '"val_loss":[0-9]' "$WORK/bare/metrics.jsonl" 2>/dev/null)
[ "$rc" = 0 ] && [ "$val" = 1 ] && [ "$vals" = 1 ] && grep -q '^sample (200 tokens' "$WORK/bare.out" &&
    grep -q "^summary: metrics: $WORK/bare/metrics.jsonl\$" "$WORK/bare.out" &&
    ! grep -q '^off, as the config' "$WORK/bare.out" && ! grep -q '^metrics = ' "$WORK/bare.out"
ok $? "model and data alone: validation at the last step, metrics.jsonl in the checkpoint dir, a 200-token sample, nothing off (exit $rc, $val val lines, $vals in the file)"
# the file beside the checkpoints confuses none of their users: sample and
# inspect take the directory, a resume there appends under a header
run 1 sample --ckpt "$WORK/bare" --tokens 4
sampled=$rc
run 1 inspect "$WORK/bare"
inspected=$rc
run "$np" train --config "$WORK/bare.ini" --set train.steps=5 --set log.sample_tokens=0
headers=$(grep -c '^{"run":' "$WORK/bare/metrics.jsonl")
files=$(cd "$WORK/bare" && echo *)
[ "$sampled" = 0 ] && [ "$inspected" = 0 ] && [ "$rc" = 0 ] && [ "$headers" = 2 ] &&
    grep -q '^resum' "$WORK/out" && [ "$files" = "latest metrics.jsonl step_00000003.h5 step_00000005.h5" ]
ok $? "sample and inspect take the dir, a resume appends to its metrics.jsonl (exits $sampled $inspected $rc, $headers headers; files: $files)"

# each turned off by saying so
run "$np" train --config "$WORK/bare.ini" --set checkpoint.dir="$WORK/bare_off" \
    --set eval.every=0 --set log.metrics= --set log.sample_tokens=0
[ "$rc" = 0 ] && ! grep -q '| val ' "$WORK/out" && ! grep -q '^sample (' "$WORK/out" &&
    [ ! -e "$WORK/bare_off/metrics.jsonl" ] &&
    grep -q '^off, as the config does not ask for them: validation (\[eval\] every), a metrics file (\[log\] metrics), a sample at the end (\[log\] sample_tokens)$' "$WORK/out"
ok $? "every = 0, metrics = (empty) and sample_tokens = 0 turn each off, and the start-up line says so (exit $rc)"

# where sequence_parallel cannot generate (seq_len 31, tp 2), the default
# sample is none, with a note; an explicit one is refused (t_matrix M195)
run 2 train --config "$WORK/bare.ini" --set checkpoint.dir= --set parallel.tp=2 \
    --set parallel.sequence_parallel=true --set train.steps=1
[ "$rc" = 0 ] && ! grep -q '^sample (' "$WORK/out" &&
    grep -q '^off, as the config does not ask for them: .*a sample at the end (\[log\] sample_tokens; none by default here: generation with sequence_parallel needs \[model\] seq_len (31) divisible by tp (2))$' "$WORK/out"
ok $? "the default sample falls back to none with a note where sequence_parallel cannot generate (exit $rc)"
run 2 train --config "$WORK/bare.ini" --set checkpoint.dir= --set parallel.tp=2 \
    --set parallel.sequence_parallel=true --set train.steps=1 --set log.sample_tokens=200
expect 1 "\[log\] sample_tokens = 200: generation with sequence_parallel needs \[model\] seq_len (31) divisible by tp (2)" \
    "an explicit sample_tokens there is still refused, naming the key"

grep -q "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1" "${TRI_SRCDIR:-.}/doc/guide.md"
ok $? "the guide says what mpirun needs to run as root"
done_testing
