#!/bin/sh
# t_ckpt.sh - checkpoints: periodic saves and `keep`, a bitwise-identical
# continuation after resume, resume on another layout, the stop signals
# (checkpoint, then exit 75), early stopping, `inspect` and `sample`, and
# every kind of bad checkpoint refused with the file and dataset (or the
# stored config's line) named before any step runs (doc/design.md,
# invariants 2, 3 and 5).
. "${TRI_SRCDIR:-.}/tests/lib.sh"
np=${1:-2}
TAMPER="${TRI_BUILDDIR:-.}/tests/ckpt_tamper"
DIFF="${TRI_BUILDDIR:-.}/tests/ckpt_diff"
plan 25
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
steps=$(sed 's/{"step":\([0-9]*\),.*/\1/' "$WORK/cont.jsonl" | tr '\n' ' ')
[ "$steps" = "1 2 3 4 5 6 7 8 " ]
ok $? "the metrics file continues across a resume, each step once ($steps)"

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

# 4. signals: checkpoint at the next step boundary, then exit 75
for sig in USR1 TERM; do
    # shellcheck disable=SC2086
    $TRI_MPIEXEC -n "$np" "$TRIDENT" train --config "$cfg" --set train.steps=100000 \
        --set checkpoint.dir="$WORK/sig$sig" > "$WORK/sig.out" 2>&1 &
    pid=$!
    i=0
    until grep -q "^step  *[0-9]" "$WORK/sig.out" || [ $i -gt 100 ]; do sleep 0.1; i=$((i + 1)); done
    # the ranks only (mpiexec's children): SIGTERM to mpiexec itself ends
    # the job (doc/errors.md, M71), which is not what this tests
    # shellcheck disable=SC2046
    kill -"$sig" $(pgrep -P "$pid") 2>/dev/null
    wait $pid
    code=$?
    grep -q "stopping at step" "$WORK/sig.out" && [ -f "$WORK/sig$sig/latest" ]
    ok $? "SIG$sig to every rank: a checkpoint, then 'stopping' (mpiexec exit $code)"
done
code=$(grep -c "exit 75" "$WORK/sig.out")
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

# 7. bad checkpoints: refused, named, and nothing runs
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
