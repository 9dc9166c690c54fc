#!/bin/sh
# t_llama_emu.sh - builds tests/t_llama_emu.cpp with the device code of
# kernels/cuda/llama_cuda.cu (its host functions dropped), the column
# sums' kernels of matmul_cuda.cu, and the 16-byte packs and grid-stride
# loop of kernels/cuda/cuda_common.h, links it with the CPU twins of the
# build's kernels/libkernels.a, and runs it: RMSNorm, rotary embeddings,
# SwiGLU and the grouped-query heads' kernels on the host against
# rmsnorm_cpu.c, rope_cpu.c, elementwise_cpu.c and gqa_cpu.c, and
# RMSNorm's dw (packed and not) bit for bit against the CPU's sums chunk
# by chunk. Needs no GPU and no CUDA; skips without a C++20 compiler.
. "${TRI_SRCDIR:-.}/tests/lib.sh"
src="${TRI_SRCDIR:-.}" CXX=${CXX:-c++} common="${TRI_SRCDIR:-.}/kernels/cuda/cuda_common.h"
lib="${TRI_BUILDDIR:-.}/kernels/libkernels.a"
command -v "$CXX" >/dev/null 2>&1 || { echo "1..0 # SKIP no C++ compiler ($CXX)"; exit 0; }
{
    sed -n '/^template <ops_dtype DT> struct Storage {/,/^\/\* Elements of dtype dt in 16 bytes/p' "$common"
    sed -n '/^#define GRID_STRIDE(/,/i += /p' "$common"
} > "$WORK/packs.inc"
# the kernels without their host functions (void x_cuda(...) { ... }, and
# int x_cuda(...): the choice of a pack, which reads the switches)
device_code() {
    awk '/^(static )?(void|int) [a-z0-9_]+_cuda\(/ { skip = 1 } !skip { print }
         skip && /^}/ { skip = 0 }' "$1"
}
device_code "$src/kernels/cuda/llama_cuda.cu" > "$WORK/llama_kernels.inc"
# matmul_cuda.cu's column-sum section up to its host code (the chunking,
# the finish kernel)
sed -n '/^\/\* ---- deterministic column sums/,/^void bias_bwd_cuda(/p' \
    "$src/kernels/cuda/matmul_cuda.cu" | device_code /dev/stdin > "$WORK/colsum_kernels.inc"
# the kernels' names the test launches must all be there: a renamed one
# would otherwise fail the build with a less helpful message
for k in rmsnorm_fwd_kernel rmsnorm_dinp_kernel rmsnorm_dw_partial_kernel \
        rmsnorm_dw_pack_kernel rope_kernel swiglu_fwd_kernel swiglu_bwd_kernel \
        gqa_expand_kernel gqa_reduce_q_kernel gqa_reduce_kv_kernel; do
    grep -q "void $k(" "$WORK/llama_kernels.inc" || {
        echo "1..1"
        echo "not ok 1 - llama_cuda.cu defines $k (extracted to $WORK/llama_kernels.inc)"
        exit 1
    }
done
if [ ! -f "$lib" ]; then
    echo "1..1"
    echo "not ok 1 - the CPU twins' library $lib exists (run make first)"
    exit 1
fi
if ! "$CXX" -std=c++20 -O2 -fopenmp -I"$WORK" -I"$src/tests/cuda_emu" -I"$src" \
        -o "$WORK/emu" "$src/tests/t_llama_emu.cpp" "$lib" -lm > "$WORK/cxx.log" 2>&1; then
    emu_not_built "t_llama_emu.cpp with the kernels of llama_cuda.cu compiles and links" \
        "$WORK/cxx.log"
fi
OMP_NUM_THREADS=1 "$WORK/emu"
