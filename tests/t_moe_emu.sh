#!/bin/sh
# t_moe_emu.sh - builds tests/t_moe_emu.cpp with kernels/cuda/moe_cuda.cu,
# its kernels and their host functions, its launches rewritten for the
# host (so the test always runs the kernels as they are now; cuda_common.h's
# grid size and grid-stride loop too) and the CPU twins of
# kernels/cpu/moe_cpu.c, and runs it: every mixture-of-experts kernel on
# the host under tests/cuda_emu, against its CPU twin called directly.
# Two more builds, one with an off-by-one in the permutation's capacity
# bound and one without the block permutation's barriers, must fail.
# Needs no GPU and no CUDA; skips without a C++20 compiler.
. "${TRI_SRCDIR:-.}/tests/lib.sh"
src="${TRI_SRCDIR:-.}" CXX=${CXX:-c++} common="${TRI_SRCDIR:-.}/kernels/cuda/cuda_common.h"
command -v "$CXX" >/dev/null 2>&1 || { echo "1..0 # SKIP no C++ compiler ($CXX)"; exit 0; }
# the real header's launch size, capped grid and grid-stride loop
sed -n -e '/^#define TRI_THREADS/p' -e '/^#define TRI_MAX_BLOCKS/,/^}/p' \
    -e '/^#define GRID_STRIDE/,/blockDim\.x)$/p' "$common" > "$WORK/grid.inc"
# the kernels and their host functions, each kernel<<<grid, threads, 0,
# stream_cuda()>>>(args) (which no host compiler takes) rewritten as
# EMU_LAUNCH(grid, threads, kernel)(args)
sed 's/\([A-Za-z0-9_]*\)<<<\([^,]*\), *\([^,]*\), 0, stream_cuda()>>>(/EMU_LAUNCH(\2, \3, \1)(/' \
    "$src/kernels/cuda/moe_cuda.cu" > "$WORK/moe_kernels.inc"
mkdir "$WORK/mutant" "$WORK/barrier"
cp "$WORK/grid.inc" "$WORK/mutant/"
cp "$WORK/grid.inc" "$WORK/barrier/"
# the mutants: the permutation keeps one pair past an expert's capacity;
# the block's threads do not wait for the counts and the cut
sed 's/if (r < offsets\[e + 1\])/if (r <= offsets[e + 1])/' "$WORK/moe_kernels.inc" \
    > "$WORK/mutant/moe_kernels.inc"
sed 's/__syncthreads();/\/* the barrier, removed *\//' "$WORK/moe_kernels.inc" \
    > "$WORK/barrier/moe_kernels.inc"
build() { # DIR: the test with DIR's .inc file and the CPU twins
    "$CXX" -std=c++20 -O2 -I"$1" -I"$src/tests/cuda_emu" -I"$src" \
        -o "$1/emu" "$src/tests/t_moe_emu.cpp" "$WORK/moe_cpu.o" > "$1/cxx.log" 2>&1
}
# the three builds side by side (make check runs one test at a time)
built() { # DIRS...: build each in the background; fails if any build did
    pids=""
    for d in "$@"; do
        build "$d" &
        pids="$pids $!"
    done
    status=0
    for p in $pids; do wait "$p" || status=1; done
    return $status
}
if ! "$CXX" -x c -std=c11 -O2 -I"$src" -c -o "$WORK/moe_cpu.o" \
        "$src/kernels/cpu/moe_cpu.c" > "$WORK/cc.log" 2>&1 ||
    ! built "$WORK" "$WORK/mutant" "$WORK/barrier"; then
    emu_not_built "t_moe_emu.cpp with the kernels of moe_cuda.cu and moe_cpu.c compiles" \
        "$WORK/cxx.log" "$WORK/cc.log" "$WORK/mutant/cxx.log" "$WORK/barrier/cxx.log"
fi
for m in mutant barrier; do
    cmp -s "$WORK/moe_kernels.inc" "$WORK/$m/moe_kernels.inc" &&
        echo "# moe_cuda.cu has changed where the $m build edits it: that build is the kernel itself"
done
"$WORK/mutant/emu" mutant
bound_rc=$?
"$WORK/barrier/emu" mutant 2>/dev/null
"$WORK/emu" "$bound_rc" $?
