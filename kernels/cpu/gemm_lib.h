/*
 * gemm_lib.h - what a GEMM library's file gives gemm_cpu.c.
 *
 * configure picks one CPU GEMM library (m4/tri_gemm.m4) and the build
 * compiles exactly one file for it: gemm_dnnl.c (oneDNN) or gemm_cblas.c
 * (any CBLAS). That file defines these functions, and gemm_serial_*_cpu,
 * gemm_kernel_name_cpu and ops_gemm_info of cpu.h and ops.h; gemm_cpu.c
 * holds everything the libraries share. Why the paths are what they are:
 * doc/performance.md, "CPU GEMMs".
 *
 * Not collective.
 */
#ifndef TRI_KERNELS_CPU_GEMM_LIB_H
#define TRI_KERNELS_CPU_GEMM_LIB_H

#include "../dtype.h"

/* gemm_f32_cpu on the library's sgemm, for M, N, K > 0 (gemm_f32_cpu
 * handles the empty cases, where libraries disagree). */
void gemm_f32_lib(int trans_a, int trans_b, int M, int N, int K, float alpha,
                  const float *A, int lda, const float *B, int ldb,
                  float beta, float *C, int ldc);

/* gemm_cpu's low-precision case (dt BF16 or F16, M, N, K > 0) in the
 * library's own kernel, as gemm_cpu specifies it: returns 1 when done, 0
 * (having done nothing) when the library has no kernel worth running for
 * it, and gemm_cpu widens to fp32 instead. */
int gemm_native_lib(ops_dtype dt, int trans_a, int trans_b, int M, int N,
                    int K, const void *A, int lda, const void *B, int ldb,
                    const void *bias, int accumulate, void *C, ops_dtype cdt,
                    int ldc);

/* Whether the library has a kernel of its own for dt (1) or not (0), and
 * in *preferred whether that kernel beats sgemm on widened copies on this
 * CPU (oneDNN's bf16 matmul: only on AMX). gemm_bf16_cpu.c chooses from
 * it. */
int gemm_native_lib_available(ops_dtype dt, int *preferred);

/* What this CPU's vector units can do: 0 = SSE only, 1 = AVX, 2 =
 * AVX2/FMA, 3 = AVX-512 (other architectures: 0, so nothing is warned
 * about there), and its name for ops_gemm_info's warning. */
int cpu_isa_tier(void);
const char *cpu_isa_tier_name(int tier);

#endif
