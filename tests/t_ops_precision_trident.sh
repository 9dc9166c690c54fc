#!/bin/sh
# t_ops_precision_trident.sh - t_ops_precision again with every bf16 GEMM
# on trident's own kernel (TRIDENT_CPU_BF16_GEMM=trident: vdpbf16ps on a
# CPU with AVX512_BF16, AVX2 FMAs here), whatever path this CPU would
# choose by itself. Skips on a CPU with neither.
. "${TRI_SRCDIR:-.}/tests/lib.sh"
if ! cpu_has_trident_bf16_gemm; then
    echo "1..0 # SKIP trident's bf16 GEMMs need AVX2 or AVX512_BF16"
    exit 0
fi
export TRIDENT_CPU_BF16_GEMM=trident
# TRI_MPIEXEC is a command with options: split it
# shellcheck disable=SC2086
${TRI_MPIEXEC:-mpiexec} -n "${1:-1}" "${TRI_BUILDDIR:-.}/tests/t_ops_precision"
