#!/bin/sh
# t_errors.sh - failures that only some ranks see, or that happen mid-run,
# end every rank quickly with a clear message and a non-zero exit, never a
# hang, and never damage a completed checkpoint. Faults are injected with
# the TRIDENT_FAULT test hook (src/base/fault.h).
. "${TRI_SRCDIR:-.}/tests/lib.sh"
np=${1:-4}
plan 7
cfg="$WORK/c.ini"
write_config "$cfg"
last=$((np - 1))

# fault POINT:RANK:STEP EXPECTED-PATTERN DESCRIPTION [trident options]
fault() {
    spec=$1 pattern=$2 what=$3
    shift 3
    t0=$(date +%s)
    TRIDENT_FAULT=$spec TRI_MPIEXEC="timeout -k 5 60 $TRI_MPIEXEC" run "$np" train --config "$cfg" "$@"
    secs=$(($(date +%s) - t0))
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] && grep -q -- "$pattern" "$WORK/out"; then
        ok 0 "$what (exit $rc, ${secs}s)"
    else
        ok 1 "$what: exit $rc after ${secs}s, wanted non-zero and '$pattern'"
        sed 's/^/#   /' "$WORK/out" | tail -n 8
    fi
}
export TRIDENT_FAULT

fault "data_open:$last:0" "\[rank $last .*injected fault" \
    "only rank $last cannot read the data: it says so and every rank exits"
fault "die:$last:3" "exited on signal\|non-zero status\|exit code" \
    "rank $last dies mid-step: mpiexec ends the job instead of hanging"
fault "nan_loss:0:3" "training diverged" \
    "a NaN loss stops the run with a message"
fault "grad_inf:$last:2" "gradient norm inf" \
    "an exploding gradient on one rank stops every rank (fp32)"
run "$np" train --config "$cfg" --set parallel.dp=3
expect 1 "dp \* pp \* tp = 3 \* 1 \* 1 = 3, but $np ranks" "a layout that does not fit: refused on every rank"

# a failed save keeps the last good checkpoint
ck="$WORK/ck"
fault "save_fail:$last:4" "injected fault: No space left" \
    "a save that fails on one rank (disk full) stops the run" \
    --set train.steps=6 --set checkpoint.every=2 --set checkpoint.dir="$ck"
[ "$(cat "$ck/latest")" = step_00000002.h5 ] && [ ! -e "$ck/step_00000004.h5" ] \
    && [ -z "$(find "$ck" -name '*.tmp*')" ] && "$TRIDENT" inspect "$ck/step_00000002.h5" > /dev/null
ok $? "after it, latest still names step 2, which verifies; no partial file is left"
done_testing
