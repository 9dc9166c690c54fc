#!/usr/bin/env bash
# .ci/hardening.sh - the hardening checks .ci/run calls after `make
# distcheck`, one sub-command per phase so that .ci/run times each:
#
#   .ci/hardening.sh sanitizers  ASan + UBSan build (configure
#                                --enable-sanitizers) of the release tarball
#                                in its own directory: the CPU unit tests,
#                                t_grads on 2 ranks, the fuzz corpora, and a
#                                short 2-rank training with a checkpoint,
#                                resumed on another layout
#   .ci/hardening.sh valgrind    memcheck over a short single-rank training
#                                of a plain CPU build of the tarball
#   .ci/hardening.sh fuzz        builds the libFuzzer targets with clang
#                                (tests/fuzz/build.sh) and runs fuzz_config,
#                                fuzz_data, fuzz_safetensors, fuzz_indexed and
#                                fuzz_tokenizer for FUZZ_SECONDS (30) each
#                                from their corpora, with a fixed seed
#                                (FUZZ_SEED, 1) so that a run repeats the
#                                inputs of the run before
#
# Each exits non-zero on any failure, sanitizer report or memcheck error.
# Run from the repository root, after `make distcheck` (which leaves the
# release tarball; `make dist` makes one otherwise). Every build here is
# of that tarball, --without-cuda, in its own directory under /tmp: the
# tree itself stays as the README's set-up configured it.
#
# Open MPI leaks by design in MPI_Init and MPI_Finalize: tests/lsan.supp
# and tests/valgrind.supp name its libraries (and PMIx, hwloc, libevent)
# so that a leak of trident's own is still caught. Open MPI unloads its
# plugins at MPI_Finalize, after which their frames have no name for a
# suppression to match: *_MCA_mca_base_component_disable_dlclose=1 keeps
# them loaded. ASan and UBSan need nothing special for OpenMP or oneDNN
# here (oneDNN's JIT code is not instrumented, and is not reported on).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
top=$(pwd)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_mca_base_component_disable_dlclose=1 PMIX_MCA_mca_base_component_disable_dlclose=1
MPIEXEC="mpiexec --oversubscribe --bind-to none"

step() { echo "--- $*"; }

# need PACKAGE...: installs the Debian packages that are missing (as root).
need() {
    local missing="" p
    for p in "$@"; do
        dpkg -s "$p" > /dev/null 2>&1 || missing="$missing $p"
    done
    [ -z "$missing" ] && return 0
    step "apt-get install$missing"
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing > /dev/null ||
        { apt-get update > /dev/null &&
          DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing > /dev/null; }
}

# A short training on 2 ranks through pp=2 (pipeline, sends), with a
# checkpoint, then resumed on tp=2 with ZeRO-3 (TP collectives, gathers,
# checkpoint reads of another layout). $1: the trident binary.
two_rank_training() {
    local bin=$1 work
    work=$(mktemp -d)
    cat > "$work/c.ini" <<EOC
[model]
n_layer = 2
n_embd = 32
n_head = 2
seq_len = 32
[train]
micro_batch = 4
grad_accum = 2
steps = 4
warmup = 2
[data]
train = $top/tests/data/small.txt
[checkpoint]
dir = $work/ck
every = 2
[log]
sample_tokens = 8
EOC
    # shellcheck disable=SC2086
    OMP_NUM_THREADS=1 $MPIEXEC -n 2 "$bin" train --config "$work/c.ini" --set parallel.pp=2 \
        > "$work/a.out" 2>&1 &&
        OMP_NUM_THREADS=1 $MPIEXEC -n 2 "$bin" train --config "$work/c.ini" --set parallel.tp=2 \
            --set parallel.zero=3 --set train.micro_batch=8 --set train.grad_accum=1 \
            --set train.steps=6 > "$work/b.out" 2>&1 &&
        grep -q "resumed from .*step_00000004.h5" "$work/b.out" &&
        ! grep -q "Sanitizer\|runtime error:" "$work/a.out" "$work/b.out"
    local rc=$?
    if [ $rc -ne 0 ]; then
        echo "two-rank training failed:"
        tail -n 40 "$work/a.out" "$work/b.out"
    else
        grep "^done" "$work/b.out"
    fi
    rm -rf "$work"
    return $rc
}

# cpu_build DIR [CONFIGURE-OPTIONS]: the release tarball (make distcheck
# left it; make dist otherwise) configured --without-cuda in DIR and built.
# CPU only: the CUDA runtime's libraries are not what these checks are
# about, and valgrind and ASan report on their loading and start-up.
cpu_build() {
    local dir=$1 tarball
    shift
    tarball=$(find . -maxdepth 1 -name "trident-*.tar.gz" | head -n 1)
    if [ -z "$tarball" ]; then
        make dist > /dev/null || return 1
        tarball=$(find . -maxdepth 1 -name "trident-*.tar.gz" | head -n 1)
    fi
    rm -rf "$dir" && mkdir -p "$dir" && tar -xzf "$tarball" -C "$dir" --strip-components=1
    step "configure --without-cuda $*, make (in $dir)"
    (cd "$dir" && ./configure --without-cuda "$@" > configure.log 2>&1 &&
        make -j"$(nproc)" > make.log 2>&1) || { tail -n 30 "$dir/configure.log" "$dir/make.log"; return 1; }
}

# The plain CPU build that valgrind and the fuzzers use, made once per
# tarball (a build of an older tarball is remade).
CPU_DIR=/tmp/trident-cpu
cpu_build_once() {
    local sum
    [ -n "$(find . -maxdepth 1 -name "trident-*.tar.gz")" ] || make dist > /dev/null || return 1
    sum=$(cat trident-*.tar.gz | md5sum)
    [ -x "$CPU_DIR/trident" ] && [ -f "$CPU_DIR/src/libtrident.a" ] &&
        [ "$(cat "$CPU_DIR/.tarball.md5" 2>/dev/null)" = "$sum" ] && return 0
    cpu_build "$CPU_DIR" && echo "$sum" > "$CPU_DIR/.tarball.md5"
}

sanitizers() {
    local dir=/tmp/trident-sanitizers rc=0
    cpu_build "$dir" --enable-sanitizers || return 1
    export ASAN_OPTIONS="detect_leaks=1:fast_unwind_on_malloc=0:detect_stack_use_after_return=0"
    export LSAN_OPTIONS="suppressions=$dir/tests/lsan.supp:print_suppressions=0"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
    local tests="tests/t_ops_grad.np1.tap tests/t_ops_misc.np1.tap tests/t_ops_precision.np1.tap"
    tests="$tests tests/t_config.np1.tap tests/t_data.np1.tap tests/t_schedule.np1.tap"
    tests="$tests tests/t_grid.np1.tap tests/t_optim.np1.tap tests/t_model_grad.np1.tap"
    tests="$tests tests/t_grads.np2.tap tests/t_gemm_bf16.np1.tap tests/fuzz/t_replay.np1.tap"
    step "unit tests, t_grads on 2 ranks and the fuzz corpora under ASan + UBSan"
    (cd "$dir" && make -j"$(nproc)" check TESTS="$tests" > check.log 2>&1) || rc=1
    grep -E "^# (TOTAL|PASS|FAIL|ERROR)" "$dir/check.log"
    if grep -l "Sanitizer\|runtime error:" "$dir"/tests/*.log "$dir"/tests/fuzz/*.log 2>/dev/null; then
        echo "sanitizer reports in the logs above"
        rc=1
    fi
    [ $rc -eq 0 ] || grep -E "^(FAIL|ERROR)" "$dir/check.log"
    step "a short 2-rank training under ASan + UBSan"
    two_rank_training "$dir/trident" || rc=1
    return $rc
}

valgrind_run() {
    need valgrind || return 1
    cpu_build_once || return 1
    local work rc
    work=$(mktemp -d)
    step "valgrind memcheck: 2 steps of a 1-layer model on 1 rank, with a checkpoint"
    OMP_NUM_THREADS=1 $MPIEXEC -n 1 valgrind --error-exitcode=99 --leak-check=full \
        --show-leak-kinds=definite --errors-for-leak-kinds=definite --num-callers=40 \
        --suppressions="$top/tests/valgrind.supp" --log-file="$work/vg.log" \
        "$CPU_DIR/trident" train --set train.steps=2 --set model.n_layer=1 --set model.n_embd=32 \
        --set model.n_head=2 --set model.seq_len=32 --set train.micro_batch=2 \
        --set data.train="$top/tests/data/small.txt" --set checkpoint.dir="$work/ck" \
        --set log.sample_tokens=4 > "$work/out" 2>&1
    rc=$?
    grep -E "ERROR SUMMARY|definitely lost" "$work/vg.log"
    if [ $rc -ne 0 ]; then
        echo "valgrind: exit $rc"
        grep -A 20 "Invalid\|uninitialised\|definitely lost in" "$work/vg.log" | head -n 80
        tail -n 20 "$work/out"
    fi
    rm -rf "$work"
    return $rc
}

fuzz() {
    need clang libclang-rt-14-dev || return 1
    cpu_build_once || return 1
    local out=/tmp/trident-fuzz rc=0 t
    step "tests/fuzz/build.sh (clang, libFuzzer, ASan + UBSan)"
    rm -rf "$out"
    sh tests/fuzz/build.sh "$CPU_DIR" "$out" > "$out.build.log" 2>&1 ||
        { tail -n 30 "$out.build.log"; return 1; }
    export ASAN_OPTIONS="fast_unwind_on_malloc=0"
    export LSAN_OPTIONS="suppressions=$top/tests/lsan.supp"
    # fuzz_ckpt is not run here: within seconds it finds libhdf5's own
    # memory errors on corrupt files (tests/fuzz/hdf5-bugs/), which are
    # not ours to fix; its corpus is replayed under ASan by the
    # sanitizers phase, and tests/fuzz/README.md says how to run it.
    for t in config data safetensors indexed tokenizer; do
        step "fuzz_$t for ${FUZZ_SECONDS:-30} s"
        mkdir -p "$out/new_$t" "$out/crash_$t"
        OMP_NUM_THREADS=1 "$out/fuzz_$t" -max_total_time="${FUZZ_SECONDS:-30}" -timeout=30 \
            -seed="${FUZZ_SEED:-1}" \
            -print_final_stats=1 -artifact_prefix="$out/crash_$t/" "$out/new_$t" \
            "tests/fuzz/corpus/$t" > "$out/fuzz_$t.log" 2>&1 || rc=1
        grep -E "stat::number_of_executed_units|stat::average_exec_per_sec" "$out/fuzz_$t.log"
        if [ -n "$(ls -A "$out/crash_$t")" ]; then
            echo "fuzz_$t found: $(ls "$out/crash_$t")"
            grep -A 30 "ERROR\|FINDING" "$out/fuzz_$t.log" | head -n 40
            rc=1
        fi
    done
    return $rc
}

case "${1:-all}" in
    sanitizers) sanitizers ;;
    valgrind) valgrind_run ;;
    fuzz) fuzz ;;
    all) r=0; sanitizers || r=1; valgrind_run || r=1; fuzz || r=1; exit $r ;;
    *) echo "usage: .ci/hardening.sh [sanitizers|valgrind|fuzz|all]" >&2; exit 2 ;;
esac
