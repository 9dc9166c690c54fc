#!/bin/sh
# t_optim_emu.sh - builds tests/t_optim_emu.cpp with kernels/cuda/
# adamw_cuda.cu, multi_cuda.cu and elementwise_cuda.cu whole (kernels and
# host functions) and tensor_cuda.cu's copy_cuda and casts, their
# launches rewritten for the host (tests/cuda_emu/runtime.h), with the
# pieces of kernels/cuda/cuda_common.h they use (scratch slots, the
# tables' types, grid sizes, 16-byte packs, the block reduction), links
# the CPU twins of the build's kernels/libkernels.a, and runs it: AdamW on
# one tensor and on a table of segments, the table's upload, reuse and
# rebuild, the maps, the fp64 sums and casts, against the CPU's. Two
# builds side by side: the test (-ffp-contract=off, the CPU's arithmetic:
# bit for bit) and the same with fused multiply-adds as nvcc makes them
# (AdamW and GELU within a tolerance); the first also runs with the
# multi-tensor kernels' chunk bound off by one, and with multi_cuda.cu
# keeping a table that differs, each of which must fail.
# Needs no GPU and no CUDA; skips without a C++20 compiler.
. "${TRI_SRCDIR:-.}/tests/lib.sh"
src="${TRI_SRCDIR:-.}" CXX=${CXX:-c++} cu="${TRI_SRCDIR:-.}/kernels/cuda"
lib="${TRI_BUILDDIR:-.}/kernels/libkernels.a"
command -v "$CXX" >/dev/null 2>&1 || { echo "1..0 # SKIP no C++ compiler ($CXX)"; exit 0; }
if [ ! -f "$lib" ]; then
    echo "1..1"
    echo "not ok 1 - the CPU twins' library $lib exists (run make first)"
    exit 1
fi
# cuda_common.h's scratch slots, tables, grid sizes, packs and reduction
{
    sed -n '/^typedef enum {$/,/^} scratch_slot_cuda;/p' "$cu/cuda_common.h"
    sed -n '/^static inline size_t align256/,/^}/p' "$cu/cuda_common.h"
    sed -n '/^#define MULTI_CHUNK/,/^void multi_tables_forget_cuda/p' "$cu/cuda_common.h"
    sed -n -e '/^#define TRI_MAX_BLOCKS/,/^}/p' -e '/^#define GRID_STRIDE(/,/i += /p' \
        "$cu/cuda_common.h"
    sed -n '/^static inline size_t esize_cuda/,/^}/p' "$cu/cuda_common.h"
    sed -n '/^template <ops_dtype DT> struct Storage {/,/^    } while (0)$/p' "$cu/cuda_common.h"
    sed -n '/^\/\* Every thread gets op over the block/,/^}/p' "$cu/cuda_common.h"
} > "$WORK/common.inc"
# kernel<<<grid, threads, shmem, stream>>>(args), which no host compiler
# takes, as emu_launch(kernel, grid, threads, shmem, stream)(args)
launches='s/\([A-Za-z0-9_]*\(<[^<>]*>\)\{0,1\}\)<<</emu_launch([](auto... args) { \1(args...); }, /
s/>>>(/)(/'
sed "$launches" "$cu/adamw_cuda.cu" > "$WORK/adamw_kernels.inc"
sed "$launches" "$cu/multi_cuda.cu" > "$WORK/multi_kernels.inc"
sed "$launches" "$cu/elementwise_cuda.cu" > "$WORK/elementwise_kernels.inc"
sed -n -e '/^void copy_cuda(/,/^}/p' -e '/^static __global__ void cast_kernel(/,$p' \
    "$cu/tensor_cuda.cu" | sed "$launches" > "$WORK/tensor_kernels.inc"
# every function the test calls must be there: a renamed one would
# otherwise fail the build with a less helpful message
for f in adamw_kernels:adamw_cuda adamw_kernels:adamw_multi_cuda \
        multi_kernels:multi_table_cuda multi_kernels:multi_tables_forget_cuda \
        elementwise_kernels:sumsq_multi_cuda elementwise_kernels:gelu_bwd_cuda \
        tensor_kernels:copy_cuda tensor_kernels:cast_cuda tensor_kernels:cast_2d_cuda; do
    grep -q "^[a-z_ ]* \**${f#*:}(" "$WORK/${f%%:*}.inc" || {
        echo "1..1"
        echo "not ok 1 - the extracted CUDA code defines ${f#*:} ($WORK/${f%%:*}.inc)"
        exit 1
    }
done
# the mutants, inert until the test switches one on (emu mutant K):
# 1, each chunk's loop in the multi-tensor kernels one element too long;
# 2, multi_cuda.cu keeping a table of the same length whatever its bytes
mutate() { # FILE FROM TO: FROM replaced by TO in FILE.inc, which must hold FROM
    sed "s/$2/$3/" "$WORK/$1.inc" > "$WORK/$1.m"
    cmp -s "$WORK/$1.inc" "$WORK/$1.m" &&
        echo "# $1.inc lacks '$2': the mutant is the code itself"
    mv "$WORK/$1.m" "$WORK/$1.inc"
}
for f in adamw_kernels elementwise_kernels; do
    mutate "$f" 'i < ch\.start + ch\.n;' 'i < ch.start + ch.n + (emu_mutant == 1);'
done
mutate multi_kernels '&& memcmp(kept\[slot\]\.host, host, bytes) == 0)' \
    '\&\& (memcmp(kept[slot].host, host, bytes) == 0 || emu_mutant == 2))'
mkdir "$WORK/fma"
cp "$WORK"/*.inc "$WORK/fma/"
# nvcc's contraction: fused multiply-adds, which x86 has only with FMA
fma_flags="-ffp-contract=fast"
case $(uname -m) in
x86_64 | i?86)
    if grep -q -w fma /proc/cpuinfo 2>/dev/null; then
        fma_flags="$fma_flags -mfma"
    else
        fma_flags=""
    fi
    ;;
esac
build() { # DIR FLAGS: the test with DIR's .inc files
    # shellcheck disable=SC2086
    "$CXX" -std=c++20 -O1 $2 -fopenmp -I"$1" -I"$src/tests/cuda_emu" -I"$src" \
        -o "$1/emu" "$src/tests/t_optim_emu.cpp" "$lib" -lm > "$1/cxx.log" 2>&1
}
build "$WORK" "-ffp-contract=off" &
main_pid=$!
built=1
if [ -n "$fma_flags" ] && ! build "$WORK/fma" "$fma_flags -DEMU_CONTRACTED"; then
    built=0
fi
wait "$main_pid" || built=0
[ "$built" = 1 ] ||
    emu_not_built "t_optim_emu.cpp with the code of adamw_cuda.cu, multi_cuda.cu, elementwise_cuda.cu and tensor_cuda.cu compiles" \
        "$WORK/cxx.log" "$WORK/fma/cxx.log"
export OMP_NUM_THREADS=1
"$WORK/emu" mutant 1 2>/dev/null
chunk_rc=$?
"$WORK/emu" mutant 2 2>/dev/null
table_rc=$?
if [ -n "$fma_flags" ]; then
    "$WORK/fma/emu" fma 1 > "$WORK/fma.tap"
    fma_rc=$?
    cat "$WORK/fma.tap"
    n=$(grep -c '^\(not \)\{0,1\}ok ' "$WORK/fma.tap")
    if [ "$fma_rc" -ne 0 ]; then # a crash would otherwise leave its checks out unseen
        n=$((n + 1))
        echo "not ok $n - the build with fused multiply-adds ran to its end (exit status $fma_rc)"
    fi
else
    n=1
    echo "ok 1 # SKIP no build with fused multiply-adds: this CPU has no FMA"
fi
"$WORK/emu" main $((n + 1)) "$chunk_rc" "$table_rc"
