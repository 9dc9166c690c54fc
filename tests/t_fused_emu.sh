#!/bin/sh
# t_fused_emu.sh - builds tests/t_fused_emu.cpp with the device code of
# kernels/cuda/xent_cuda.cu and embedding_cuda.cu (their host functions
# dropped), of the column sums' kernels and the 16-byte packs and block reduction of
# kernels/cuda/cuda_common.h, and runs it: the narrow cross-entropy, which
# writes bf16/fp16 dlogits over the fp32 logits it reads, on the host
# against a double reference, and the token embedding's backward kernels
# against the CPU's order, and the column sums (LayerNorm's dw, db and the
# bias gradient, layernorm_cuda.cu and matmul_cuda.cu) packed and not,
# bit for bit against the CPU's sums. A second build without the cross-entropy's
# store barrier must fail its cases.
# Needs no GPU and no CUDA; skips without a C++20 compiler.
. "${TRI_SRCDIR:-.}/tests/lib.sh"
src="${TRI_SRCDIR:-.}" CXX=${CXX:-c++} common="${TRI_SRCDIR:-.}/kernels/cuda/cuda_common.h"
command -v "$CXX" >/dev/null 2>&1 || { echo "1..0 # SKIP no C++ compiler ($CXX)"; exit 0; }
{
    sed -n '/^template <ops_dtype DT> struct Storage {/,/^\/\* Elements of dtype dt in 16 bytes/p' "$common"
    sed -n '/^\/\* Every thread gets op over the block/,/^}/p' "$common"
} > "$WORK/packs.inc"
# the kernels without their host functions (void x_cuda(...) { ... },
# and the sort on CUB: its declaration, then its definition)
device_code() {
    grep -v '^#include <cub/' "$1" |
        awk '/^(static )?void ([a-z0-9_]+_cuda|sort_tokens)\(/ { skip = 1 } !skip { print }
             skip && /^}/ { skip = 0 }'
}
device_code "$src/kernels/cuda/xent_cuda.cu" > "$WORK/xent_kernels.inc"
device_code "$src/kernels/cuda/embedding_cuda.cu" > "$WORK/embedding_kernels.inc"
# the column sums: LayerNorm's dw, db kernels and matmul_cuda.cu's
# column-sum section up to its host code (the chunking, the finish and
# the bias kernels)
{
    sed -n '/^\/\* pw\[r\*C + c\], pb\[r\*C + c\] = sums/,/^void layernorm_dwdb_cuda(/p' \
        "$src/kernels/cuda/layernorm_cuda.cu" | device_code /dev/stdin
    sed -n '/^\/\* ---- deterministic column sums/,/^void bias_bwd_cuda(/p' \
        "$src/kernels/cuda/matmul_cuda.cu" | device_code /dev/stdin
} > "$WORK/colsum_kernels.inc"
mkdir "$WORK/mutant"
cp "$WORK/packs.inc" "$WORK/embedding_kernels.inc" "$WORK/colsum_kernels.inc" "$WORK/mutant/"
# xent_cuda.cu's one barrier is row_dlogits_narrow's
sed 's/__syncthreads();/\/* the barrier, removed *\//' "$WORK/xent_kernels.inc" \
    > "$WORK/mutant/xent_kernels.inc"
build() { # DIR: the test with DIR's .inc files
    "$CXX" -std=c++20 -O2 -I"$1" -I"$src/tests/cuda_emu" -I"$src" \
        -o "$1/emu" "$src/tests/t_fused_emu.cpp" > "$1/cxx.log" 2>&1
}
if ! build "$WORK" || ! build "$WORK/mutant"; then
    emu_not_built "t_fused_emu.cpp with the kernels of xent_cuda.cu and embedding_cuda.cu compiles" \
        "$WORK/cxx.log" "$WORK/mutant/cxx.log"
fi
grep -c __syncthreads "$WORK/xent_kernels.inc" | grep -qx 1 ||
    echo "# xent_cuda.cu has more than one barrier: the mutant lacks them all"
"$WORK/mutant/emu" mutant
"$WORK/emu" $?
