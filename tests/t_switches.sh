#!/bin/sh
# t_switches.sh - the measurement switches (kernels/switches.h, doc/gpu.md)
# through the real binary on the CPU: a bad value of each stops the run on
# every rank before the first step, naming the variable, the value and the
# values it takes, also when one rank alone has it; good values train, and
# a GPU switch set on a CPU run is noted once as having no effect, and
# named on the start-up line `switches:`. A TRIDENT_CPU_BF16_GEMM path
# this CPU or build cannot run stops the run at start-up, on every rank,
# in an fp32 run too: forced here by the test's hook
# TRIDENT_TEST_BF16_GEMM_LACKS (kernels/cpu/gemm_bf16.h), which makes the
# choice take the CPU or build as lacking what it lists. doc/errors.md,
# "The measurement switches", has one row per line.
. "${TRI_SRCDIR:-.}/tests/lib.sh"
np=${1:-2}
plan 15
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
# a path this CPU or build lacks: refused at start-up with what it lacks
# (before this check, an fp32 run never chose a path and trained)
TRIDENT_CPU_BF16_GEMM=trident TRIDENT_TEST_BF16_GEMM_LACKS=avx512bf16,avx2 \
    run "$np" train --config "$cfg" --set train.steps=1
expect 1 "^trident: TRIDENT_CPU_BF16_GEMM=trident: trident's bf16 GEMMs need AVX512_BF16, or AVX2 with FMA, on x86, which this CPU lacks (TRIDENT_TEST_BF16_GEMM_LACKS=avx512bf16,avx2); unset TRIDENT_CPU_BF16_GEMM (auto)$" \
    "TRIDENT_CPU_BF16_GEMM=trident on a CPU without AVX512_BF16 or AVX2 stops an fp32 run at start-up"
TRIDENT_CPU_BF16_GEMM=library TRIDENT_TEST_BF16_GEMM_LACKS=library \
    run "$np" train --config "$cfg" --set train.steps=1
expect 1 "^trident: TRIDENT_CPU_BF16_GEMM=library: this build's GEMM library has no bf16 kernel (TRIDENT_TEST_BF16_GEMM_LACKS=library); configure --with-gemm=dnnl for oneDNN's, or unset TRIDENT_CPU_BF16_GEMM (auto)$" \
    "TRIDENT_CPU_BF16_GEMM=library in a build whose library has no bf16 kernel stops the run at start-up"
# one rank's CPU lacking it: every rank stops, none hangs
# shellcheck disable=SC2086  # TRI_MPIEXEC is a command line
TRIDENT_CPU_BF16_GEMM=trident $TRI_MPIEXEC -n $((np - 1)) "$TRIDENT" train --config "$cfg" \
    --set train.steps=1 : -n 1 env TRIDENT_TEST_BF16_GEMM_LACKS=avx2,avx512bf16 "$TRIDENT" train \
    --config "$cfg" --set train.steps=1 > "$WORK/out" 2>&1
rc=$?
expect 1 "trident: TRIDENT_CPU_BF16_GEMM=trident: trident's bf16 GEMMs need" \
    "TRIDENT_CPU_BF16_GEMM=trident where rank $((np - 1))'s CPU alone lacks it stops every rank"
# auto takes what is there: with nothing but sgemm, bf16 trains on it
TRIDENT_TEST_BF16_GEMM_LACKS=library,avx512bf16,avx2 \
    run "$np" train --config "$cfg" --set train.steps=1 --set train.precision=bf16
expect 0 "^gemm: .*; bf16 on [a-z_]*sgemm on fp32 copies; measured bf16 peak" \
    "auto on a CPU and build with no bf16 kernel trains bf16 on sgemm on widened copies"
# the hook takes only its words
TRIDENT_TEST_BF16_GEMM_LACKS=sse run "$np" train --config "$cfg" --set train.steps=1
expect 1 "trident: fatal: TRIDENT_TEST_BF16_GEMM_LACKS=sse: expected a comma-separated list of library, avx512bf16 and avx2" \
    "a word the test's hook does not take stops the run, naming it"
done_testing
