#!/bin/sh
# t_attention_emu.sh - builds tests/t_attention_emu.cpp with the device
# code of kernels/cuda/attention_cuda.cu and attention_mma_cuda.cu (each
# file up to its launches) and runs it: the fused CUDA attention's
# kernels on the host, against a double reference. Needs no GPU and no CUDA; skips without a C++20
# compiler. Each CUDA thread is a fiber (ucontext.h) on one host thread.
. "${TRI_SRCDIR:-.}/tests/lib.sh"
src="${TRI_SRCDIR:-.}"
CXX=${CXX:-c++}
if ! command -v "$CXX" >/dev/null 2>&1; then
    echo "1..0 # SKIP no C++ compiler ($CXX)"
    exit 0
fi
sed -n '1,/---- launches ----/p' "$src/kernels/cuda/attention_cuda.cu" > "$WORK/attention_kernels.inc"
sed -n '1,/---- launches ----/p' "$src/kernels/cuda/attention_mma_cuda.cu" \
    > "$WORK/attention_mma_kernels.inc"
# the stand-in cuda_common.h first; attention_tile_cuda.h from kernels/cuda
if ! "$CXX" -std=c++20 -O2 -pthread -I"$WORK" -I"$src/tests/cuda_emu" -I"$src" \
        -I"$src/kernels/cuda" \
        -o "$WORK/emu" "$src/tests/t_attention_emu.cpp" > "$WORK/cxx.log" 2>&1; then
    emu_not_built "t_attention_emu.cpp with the kernels of attention_cuda.cu and attention_mma_cuda.cu compiles" \
        "$WORK/cxx.log"
fi
"$WORK/emu"
