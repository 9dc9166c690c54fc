#!/bin/sh
# t_switches.sh - the measurement switches (kernels/switches.h, doc/gpu.md)
# through the real binary on the CPU: a bad value of each stops the run on
# every rank before the first step, naming the variable, the value and the
# values it takes, also when one rank alone has it; good values train, and
# a GPU switch set on a CPU run is noted once as having no effect, and
# named on the start-up line `switches:`. doc/errors.md, "The measurement
# switches", has one row per line.
. "${TRI_SRCDIR:-.}/tests/lib.sh"
np=${1:-2}
plan 10
cfg="$WORK/c.ini"
write_config "$cfg"

# refused VAR VALUE VALUES: VAR=VALUE stops the run naming VALUES
refused() {
    # shellcheck disable=SC2086  # TRI_MPIEXEC is a command line
    env "$1=$2" $TRI_MPIEXEC -n "$np" "$TRIDENT" train --config "$cfg" --set train.steps=1 \
        > "$WORK/out" 2>&1
    rc=$?
    expect 1 "^trident: $1=$2: expected $3 (unset: " "$1=$2 stops a CPU run, naming the values"
}
refused TRIDENT_ATTENTION flash "trident or cudnn"
refused TRIDENT_ATTENTION_D sideways "out or sweep"
refused TRIDENT_ATTENTION_ASYNC yes "0 or 1"
refused TRIDENT_LT_EPILOGUE gelu "none, bias or all"
refused TRIDENT_FUSED off "0 or 1"
refused TRIDENT_CPU_BF16_GEMM fastest "auto, library, trident or widened"

# a bad value on the last rank alone: every rank stops, none hangs
# (Open MPI's colon syntax gives each rank its own environment)
# shellcheck disable=SC2086  # TRI_MPIEXEC is a command line
$TRI_MPIEXEC -n $((np - 1)) "$TRIDENT" train --config "$cfg" --set train.steps=1 : \
    -n 1 env TRIDENT_FUSED=2 "$TRIDENT" train --config "$cfg" --set train.steps=1 > "$WORK/out" 2>&1
rc=$?
expect 1 "trident: TRIDENT_FUSED=2: expected 0 or 1 (unset: 1)" \
    "TRIDENT_FUSED=2 on rank $((np - 1)) alone stops every rank, naming it"

# every GPU switch at a good value, and the CPU's: the run trains, says
# once that the GPU ones change nothing here, and names them all
TRIDENT_ATTENTION=trident TRIDENT_ATTENTION_D=sweep TRIDENT_ATTENTION_ASYNC=0 \
    TRIDENT_LT_EPILOGUE=none TRIDENT_FUSED=0 TRIDENT_CPU_BF16_GEMM=widened \
    run "$np" train --config "$cfg" --set train.steps=1
notes=$(grep -c "^trident: note: TRIDENT_[A-Z_]*=[a-z0-9]* has no effect on this run: it switches GPU kernels, and this run computes on the CPU$" "$WORK/out")
[ "$rc" -eq 0 ] && [ "$notes" -eq 5 ] && ! grep -q "note: TRIDENT_CPU_BF16_GEMM" "$WORK/out" &&
    grep -q "^switches: TRIDENT_ATTENTION=trident TRIDENT_ATTENTION_D=sweep TRIDENT_ATTENTION_ASYNC=0 TRIDENT_LT_EPILOGUE=none TRIDENT_FUSED=0 TRIDENT_CPU_BF16_GEMM=widened (doc/gpu.md)$" "$WORK/out" &&
    grep -q "^done: 1 step" "$WORK/out"
ok $? "good values train; the 5 GPU switches are noted once each as no effect on the CPU (exit $rc, $notes notes), and named on the switches: line" ||
    sed 's/^/#   /' "$WORK/out" | tail -n 20

# empty is unset: no note, no switches: line
TRIDENT_FUSED='' TRIDENT_LT_EPILOGUE='' run "$np" train --config "$cfg" --set train.steps=1
[ "$rc" -eq 0 ] && ! grep -q "note: TRIDENT_\|^switches:" "$WORK/out"
ok $? "an empty value is the default: nothing noted (exit $rc)"

# cudnn where the build has no cuDNN: refused with the reason
if grep -q "define TRI_HAVE_CUDNN 1" "${TRI_BUILDDIR:-.}/tri_config.h"; then
    ok 0 "# SKIP this build has cuDNN's attention"
else
    TRIDENT_ATTENTION=cudnn run "$np" train --config "$cfg" --set train.steps=1
    expect 1 "^trident: TRIDENT_ATTENTION=cudnn: this build has no cuDNN attention; configure --with-cuda --with-cudnn-frontend=DIR for it" \
        "TRIDENT_ATTENTION=cudnn in a build without cuDNN stops the run"
fi
done_testing
