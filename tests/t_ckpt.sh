#!/bin/sh
# t_ckpt.sh - checkpoints: periodic saves and `keep`, a bitwise-identical
# continuation after resume, resume on another layout, the stop signals
# (checkpoint, then exit 75), [train] offload = optimizer on the CPU (the
# same run, checkpoints and resume), early stopping, asynchronous saves (the same
# files, a stop that waits, kill -9 mid-save), `inspect` and `sample`, and
# every kind of bad checkpoint refused with the file and dataset (or the
# stored config's line) named before any step runs (doc/design.md,
# invariants 2, 3 and 5).
. "${TRI_SRCDIR:-.}/tests/lib.sh"
np=${1:-2}
TAMPER="${TRI_BUILDDIR:-.}/tests/ckpt_tamper"
DIFF="${TRI_BUILDDIR:-.}/tests/ckpt_diff"
plan 35
cfg="$WORK/c.ini"
write_config "$cfg"
cat >> "$cfg" <<EOC
[checkpoint]
keep = 2
EOC
loss_lines() { grep -o '"step":[0-9]*,"loss":[^,]*,"lr":[^,]*,"grad_norm":[^,]*' "$1"; }

# 1. periodic saves, keep, latest
run "$np" train --config "$cfg" --set train.steps=9 --set checkpoint.every=3 \
    --set checkpoint.dir="$WORK/a"
ok $rc "9 steps with a checkpoint every 3 (exit $rc)"
files=$(cd "$WORK/a" && echo step_*)
[ "$files" = "step_00000006.h5 step_00000009.h5" ] && [ "$(cat "$WORK/a/latest")" = step_00000009.h5 ]
ok $? "keep = 2 leaves the newest two ($files) and latest names step 9"

# 2. resume from step 4 of an 8-step run: bitwise the run that never stopped
run "$np" train --config "$cfg" --set train.steps=8 --set checkpoint.every=4 \
    --set checkpoint.dir="$WORK/straight" --set log.metrics="$WORK/straight.jsonl"
mkdir -p "$WORK/split"
cp "$WORK/straight/step_00000004.h5" "$WORK/split/"
cp "$WORK/straight/step_00000004.h5" "$WORK/step4.h5"
echo step_00000004.h5 > "$WORK/split/latest"
run "$np" train --config "$cfg" --set train.steps=8 --set checkpoint.dir="$WORK/split" \
    --set log.metrics="$WORK/split.jsonl"
grep -q "resumed from .*step_00000004.h5: step 4" "$WORK/out"
ok $? "resume=auto continues from latest (step 4)"
loss_lines "$WORK/straight.jsonl" | tail -n 4 > "$WORK/x"
loss_lines "$WORK/split.jsonl" > "$WORK/y"
cmp -s "$WORK/x" "$WORK/y"
ok $? "steps 5-8 after resuming are bitwise those of the straight run"
"$DIFF" "$WORK/straight/step_00000008.h5" "$WORK/split/step_00000008.h5" 0 > "$WORK/d"
ok $? "and so are the final weights ($(cat "$WORK/d"))"

# a resumed run continues the same metrics file: steps 1..8 once each
mkdir -p "$WORK/cont"
cp "$WORK/step4.h5" "$WORK/cont/step_00000004.h5"
echo step_00000004.h5 > "$WORK/cont/latest"
cp "$WORK/straight.jsonl" "$WORK/cont.jsonl"
run "$np" train --config "$cfg" --set train.steps=8 --set checkpoint.dir="$WORK/cont" \
    --set log.metrics="$WORK/cont.jsonl"
steps=$(sed -n 's/^{"step":\([0-9]*\),.*/\1/p' "$WORK/cont.jsonl" | tr '\n' ' ')
[ "$steps" = "1 2 3 4 5 6 7 8 " ]
ok $? "the metrics file continues across a resume, each step once ($steps)"

# offload = optimizer on the CPU: said once, and it changes nothing: the
# same losses and checkpoints as the straight run, and its checkpoint resumes
run "$np" train --config "$cfg" --set train.steps=8 --set checkpoint.every=4 \
    --set checkpoint.dir="$WORK/offl" --set log.metrics="$WORK/offl.jsonl" \
    --set train.offload=optimizer
said=$(grep -c "^offload: .* changes nothing on the CPU backend" "$WORK/out")
loss_lines "$WORK/straight.jsonl" > "$WORK/x"
loss_lines "$WORK/offl.jsonl" > "$WORK/y"
cmp -s "$WORK/x" "$WORK/y" && [ "$said" = 1 ]
ok $? "offload = optimizer on the CPU: said once ($said), bitwise the losses and norms of offload = none"
"$DIFF" "$WORK/straight/step_00000008.h5" "$WORK/offl/step_00000008.h5" 0 > "$WORK/d"
ok $? "and the same final checkpoint ($(cat "$WORK/d"))"
mkdir -p "$WORK/offl2"
cp "$WORK/offl/step_00000004.h5" "$WORK/offl2/"
echo step_00000004.h5 > "$WORK/offl2/latest"
run "$np" train --config "$cfg" --set train.steps=8 --set checkpoint.dir="$WORK/offl2" \
    --set log.metrics="$WORK/offl2.jsonl" --set train.offload=optimizer
loss_lines "$WORK/straight.jsonl" | tail -n 4 > "$WORK/x"
loss_lines "$WORK/offl2.jsonl" > "$WORK/y"
cmp -s "$WORK/x" "$WORK/y"
ok $? "its step-4 checkpoint resumes with offload: steps 5-8 bitwise the straight run's"

# 3. resume the same checkpoint on another layout
run "$np" train --config "$cfg" --set train.steps=8 --set checkpoint.resume="$WORK/step4.h5" \
    --set parallel.tp=2 --set parallel.dp=1 --set train.micro_batch=8 --set parallel.zero=3 \
    --set log.metrics="$WORK/tp.jsonl"
worst=$(loss_lines "$WORK/tp.jsonl" | sed 's/.*"loss":\([^,]*\).*/\1/' > "$WORK/l1";
        loss_lines "$WORK/straight.jsonl" | tail -n 4 | sed 's/.*"loss":\([^,]*\).*/\1/' > "$WORK/l2";
        paste "$WORK/l1" "$WORK/l2" | awk '{ d = ($1 - $2) / $2; if (d < 0) d = -d; if (d > w) w = d; n++ }
                                          END { if (n != 4) print "missing"; else printf "%.1e", w }')
awk -v w="$worst" 'BEGIN { exit !(w != "missing" && w + 0 <= 1e-5) }'
ok $? "a dp=2 checkpoint resumes on tp=2 zero=3, same global batch (loss max rel $worst)"

# the layout attribute records cp where it is more than 1, and cp holds no
# state: a checkpoint written at cp = 2 resumes at cp = 1
run "$np" train --config "$cfg" --set train.steps=1 --set checkpoint.every=1 \
    --set parallel.cp=2 --set checkpoint.dir="$WORK/cp2"
"$TRIDENT" inspect "$WORK/cp2/step_00000001.h5" > "$WORK/cp2.txt" 2>&1
run "$np" train --config "$cfg" --set train.steps=2 \
    --set checkpoint.resume="$WORK/cp2/step_00000001.h5"
resumed=$(grep -c "resumed from .*step_00000001.h5: step 1" "$WORK/out")
"$TRIDENT" inspect "$WORK/step4.h5" > "$WORK/cp1.txt" 2>&1
grep -q "layout .*world=$np dp=$((np / 2)) pp=1 tp=1 cp=2 zero=" "$WORK/cp2.txt" \
    && grep -q "layout .*world=$np dp=$np pp=1 tp=1 zero=" "$WORK/cp1.txt" && [ "$resumed" = 1 ]
ok $? "a cp = 2 checkpoint says so in its layout ($(grep -o 'world=[^z]*' "$WORK/cp2.txt")), a cp = 1 one as before, and it resumes at cp = 1 (resumed: $resumed)"

# 4. signals: checkpoint at the next step boundary, then exit 75. Each
# run has its own output file, created empty before the launch: the
# background job opens it only once it runs, so a shared file could still
# show the previous run's step lines, and the signal would then go to
# ranks not yet started (none), leaving 100000 steps to run. A run still
# going a minute after its signal is killed and fails its check.
for sig in USR1 TERM; do
    out="$WORK/sig$sig.out"
    : > "$out"
    # shellcheck disable=SC2086
    $TRI_MPIEXEC -n "$np" "$TRIDENT" train --config "$cfg" --set train.steps=100000 \
        --set checkpoint.dir="$WORK/sig$sig" > "$out" 2>&1 &
    pid=$!
    i=0
    until grep -q "^step  *[0-9]" "$out" || [ $i -gt 300 ]; do sleep 0.1; i=$((i + 1)); done
    # the ranks only (mpiexec's children): SIGTERM to mpiexec itself ends
    # the job (doc/errors.md, M71), which is not what this tests
    # shellcheck disable=SC2046
    kill -"$sig" $(pgrep -P "$pid") 2>/dev/null
    i=0
    while kill -0 "$pid" 2>/dev/null && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
    # shellcheck disable=SC2046
    kill -0 "$pid" 2>/dev/null && kill -9 $(pgrep -P "$pid") "$pid" 2>/dev/null
    wait $pid
    code=$?
    grep -q "stopping at step" "$out" && [ -f "$WORK/sig$sig/latest" ]
    ok $? "SIG$sig to every rank: a checkpoint, then 'stopping' (mpiexec exit $code)"
done
code=$(grep -c "exit 75" "$WORK/sigTERM.out")
[ "$code" -ge 1 ]
ok $? "the stop message names the requeue exit code 75"

# 5. early stopping
run "$np" train --config "$cfg" --set train.steps=50 --set eval.every=2 --set eval.patience=2 \
    --set eval.min_delta=100 --set checkpoint.dir="$WORK/early"
expect 0 "early stop at step 6" "patience runs out at the third evaluation"

# 6. inspect and sample
run 1 inspect "$WORK/step4.h5"
expect 0 "datasets (checksums verified)" "inspect lists and verifies a checkpoint"
run "$np" sample --ckpt "$WORK/step4.h5" --prompt "The river" --tokens 20
expect 0 "sample: .*step 4, 20 tokens" "sample generates from a checkpoint"

# 7. asynchronous saves ([checkpoint] async = true): the files of the
# synchronous run, bit for bit; a resume from one continues bitwise; a stop
# signal waits for the save in flight; kill -9 at any instant of a save
# leaves latest naming a checkpoint that verifies and resumes.
np=${1:-2}    # `run 1 inspect` above left np = 1
run "$np" train --config "$cfg" --set train.steps=8 --set checkpoint.every=4 \
    --set checkpoint.dir="$WORK/async" --set checkpoint.async=true \
    --set log.metrics="$WORK/async.jsonl"
expect 0 "checkpoint: .*step_00000004.h5, .* in the background" \
    "an asynchronous run writes its checkpoints in the background"
# inspect prints the attributes, the stored config and every checksum
shown() { "$TRIDENT" inspect "$1" | sed '1d;/^dir = /d;/^metrics = /d;/^async = /d;/^  config  /d;/^  attrs_checksum  /d'; }
same=0
for s in 00000004 00000008; do
    "$DIFF" "$WORK/straight/step_$s.h5" "$WORK/async/step_$s.h5" 0 optim > "$WORK/d" || same=1
    shown "$WORK/straight/step_$s.h5" > "$WORK/i1" && shown "$WORK/async/step_$s.h5" > "$WORK/i2" \
        && cmp -s "$WORK/i1" "$WORK/i2" || same=1
done
ok $same "its checkpoints are the synchronous run's: every dataset bitwise ($(cat "$WORK/d")), every attribute and checksum"
loss_lines "$WORK/straight.jsonl" > "$WORK/x"
loss_lines "$WORK/async.jsonl" > "$WORK/y"
cmp -s "$WORK/x" "$WORK/y"
ok $? "and its losses are bitwise those of the synchronous run"
mkdir -p "$WORK/asplit"
cp "$WORK/async/step_00000004.h5" "$WORK/asplit/"
echo step_00000004.h5 > "$WORK/asplit/latest"
run "$np" train --config "$cfg" --set train.steps=8 --set checkpoint.dir="$WORK/asplit" \
    --set checkpoint.async=true --set log.metrics="$WORK/asplit.jsonl"
loss_lines "$WORK/straight.jsonl" | tail -n 4 > "$WORK/x"
loss_lines "$WORK/asplit.jsonl" > "$WORK/y"
grep -q "resumed from .*step_00000004.h5: step 4" "$WORK/out" && cmp -s "$WORK/x" "$WORK/y"
ok $? "resuming from an asynchronous checkpoint: steps 5-8 bitwise those of the straight run"

# every rank's writer slowed down (fault.h: save_slow), so a save stays in
# flight for seconds; every rank, since the save is collective
# shellcheck disable=SC2086
TRIDENT_FAULT=$(every_rank save_slow 0) $TRI_MPIEXEC -n "$np" "$TRIDENT" train --config "$cfg" \
    --set train.steps=100000 --set checkpoint.every=2 --set checkpoint.async=true \
    --set checkpoint.keep=10 --set checkpoint.dir="$WORK/asig" > "$WORK/asig.out" 2>&1 &
pid=$!
i=0
until grep -q "^step  *3/" "$WORK/asig.out" 2>/dev/null || [ $i -gt 300 ]; do sleep 0.1; i=$((i + 1)); done
inflight=$(grep -c "checkpoint: .*in the background" "$WORK/asig.out")
# shellcheck disable=SC2046
kill -TERM $(pgrep -P $pid) 2>/dev/null
wait $pid
code=$?
stop=$(sed -n 's/^stopping at step \([0-9]*\) on SIG.*/\1/p' "$WORK/asig.out")
last=$(printf 'step_%08d.h5' "${stop:-0}")
[ "$inflight" = 0 ] && [ "$code" = 75 ] && grep -q "checkpoint: .*step_00000002.h5.*in the background" "$WORK/asig.out" \
    && [ "$(cat "$WORK/asig/latest")" = "$last" ] \
    && "$TRIDENT" inspect "$WORK/asig/step_00000002.h5" > /dev/null \
    && "$TRIDENT" inspect "$WORK/asig/$last" > /dev/null
ok $? "SIGTERM while an asynchronous save is in flight: it completes, the stop's own save too ($last), exit $code"

# kill -9 of every rank (and mpiexec) at several instants of slowed saves,
# a save every step, once a first one completed: latest must name a
# checkpoint that verifies, and a run must resume from it. The four runs
# go side by side, each in its own directory, killed at its own instant
# after its own first save (a save sleeps 20 ms a read, and a step waits
# for the save before it: the runs mostly sleep), then resume in turn.
kill_at() {  # kill_at DELAY DIR: the run, killed DELAY s after its first save
    # shellcheck disable=SC2086
    TRIDENT_FAULT=$(every_rank save_slow 0) $TRI_MPIEXEC -n "$np" "$TRIDENT" train --config "$cfg" \
        --set train.steps=100000 --set checkpoint.every=1 --set checkpoint.async=true \
        --set checkpoint.dir="$2" > "$2.out" 2>&1 &
    pid=$!
    i=0
    # up to 120 s for the first completed save: a loaded machine (make -j2
    # beside 8-rank tests) has taken more than 30 s
    until grep -q "checkpoint: .*in the background" "$2.out" 2>/dev/null || [ $i -gt 1200 ]; do
        sleep 0.1; i=$((i + 1))
    done
    sleep "$1"
    # shellcheck disable=SC2046
    kill -KILL $(pgrep -P $pid) $pid 2>/dev/null
    wait $pid 2>/dev/null
}
killers=""
for delay in 0 0.9 1.8 2.7; do
    kill_at "$delay" "$WORK/akill$delay" &
    killers="$killers $!"
done
# shellcheck disable=SC2086  # a list of pids
wait $killers
killed=0
for delay in 0 0.9 1.8 2.7; do
    dir="$WORK/akill$delay"
    latest=$(cat "$dir/latest" 2>/dev/null)
    step=$(echo "$latest" | sed -n 's/^step_0*\([0-9][0-9]*\)\.h5$/\1/p')
    run "$np" train --config "$cfg" --set train.steps=$((${step:-0} + 1)) \
        --set checkpoint.dir="$dir" --set checkpoint.async=true
    if [ -n "$step" ] && "$TRIDENT" inspect "$dir/$latest" > /dev/null 2>&1 && [ "$rc" = 0 ] \
        && grep -q "resumed from .*$latest: step $step" "$WORK/out"; then
        killed=$((killed + 1))
    else
        diag "kill -9 after ${delay}s: latest '$latest', resume exit $rc"
    fi
done
[ "$killed" = 4 ]
ok $? "kill -9 of every rank at 4 instants of asynchronous saves: latest verifies and resumes each time ($killed of 4)"

# 8. bad checkpoints: refused, named, and nothing runs
bad() {  # bad FILE PATTERN DESCRIPTION
    run "$np" train --config "$cfg" --set train.steps=8 --set checkpoint.resume="$1"
    if grep -q "^step  *[0-9]" "$WORK/out"; then
        ok 1 "$3: training started anyway"
    else
        expect 1 "$2" "$3"
    fi
}
cp "$WORK/step4.h5" "$WORK/trunc.h5"
size=$(wc -c < "$WORK/trunc.h5")
head -c $((size / 2)) "$WORK/step4.h5" > "$WORK/trunc.h5"
bad "$WORK/trunc.h5" "trunc.h5" "a truncated checkpoint"
cp "$WORK/step4.h5" "$WORK/flip.h5"
"$TAMPER" "$WORK/flip.h5" flip /model/h.1.mlp.fc.w 17
bad "$WORK/flip.h5" "/model/h.1.mlp.fc.w is corrupt" "a corrupted dataset is caught by its checksum"
cp "$WORK/step4.h5" "$WORK/del.h5"
"$TAMPER" "$WORK/del.h5" delete /optim/lnf.b/v
bad "$WORK/del.h5" "/optim/lnf.b/v is missing" "a missing dataset"
cp "$WORK/step4.h5" "$WORK/ver.h5"
"$TAMPER" "$WORK/ver.h5" version 99
bad "$WORK/ver.h5" "format version 99" "a newer format version"
"$TAMPER" "$WORK/foreign.h5" foreign
bad "$WORK/foreign.h5" "not a trident checkpoint" "a foreign HDF5 file"
printf 'not hdf5 at all\n' > "$WORK/text.h5"
bad "$WORK/text.h5" "not an HDF5 file" "a file that is not HDF5"
bad "$WORK/none.h5" "none.h5" "a checkpoint that does not exist"
run "$np" train --config "$cfg" --set train.steps=8 --set checkpoint.resume="$WORK/step4.h5" \
    --set model.n_embd=64
expect 1 "n_embd is 32 in the checkpoint but 64" "a checkpoint of another model shape"
mkdir -p "$WORK/dangling"
echo step_00000042.h5 > "$WORK/dangling/latest"
run "$np" train --config "$cfg" --set checkpoint.dir="$WORK/dangling"
expect 1 "names .*step_00000042.h5" "latest naming a missing file"
run 1 inspect "$WORK/flip.h5"
expect 1 "CORRUPT" "inspect reports the corrupt dataset"
cp "$WORK/step4.h5" "$WORK/badcfg.h5"
"$TAMPER" "$WORK/badcfg.h5" config "$(printf '[model]\nn_layer = 2\n\n[train]\nlr = fast\n')"
run 1 sample --ckpt "$WORK/badcfg.h5" --tokens 4
expect 1 "badcfg.h5 (stored config):5: \[train\] lr = fast: not a number" \
    "sample of a checkpoint whose stored config is bad names the file and the line"
[ "$(cat "$WORK/split/latest")" = step_00000008.h5 ] && "$DIFF" "$WORK/split/step_00000008.h5" \
    "$WORK/straight/step_00000008.h5" 0 > /dev/null
ok $? "completed checkpoints are untouched by all of the above"
done_testing
