/*
 * gemm_lib.h - what a GEMM library's file gives gemm_cpu.c.
 *
 * configure picks one CPU GEMM library (m4/tri_gemm.m4) and the build
 * compiles exactly one file for it: gemm_dnnl.c (oneDNN) or gemm_cblas.c
 * (any CBLAS). That file defines these functions and gemm_serial_*_cpu of
 * cpu.h; gemm_cpu.c, the dispatcher, chooses which route runs each GEMM
 * and calls them. A library's file is a route: it calls nothing of
 * gemm_cpu.c or gemm_bf16_cpu.c (tests/t_deps.sh proves kernels/ has no
 * call circle). Why the routes are what they are: doc/performance.md,
 * "CPU GEMMs".
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
 * CPU (oneDNN's bf16 matmul: only on AMX). gemm_cpu.c chooses from it. */
int gemm_native_lib_available(ops_dtype dt, int *preferred);

/* The name of the library's sgemm for logs: "dnnl_sgemm", "cblas_sgemm". */
const char *gemm_f32_lib_name(void);
/* The name of the library's own kernel that gemm_native_lib would run for
 * this case (dense operands: lda, ldb and ldc as packed), e.g. "oneDNN
 * matmul brg:avx512_core_amx_bf16", or NULL where it would do nothing;
 * a static string, overwritten by the next call. */
const char *gemm_native_lib_name(ops_dtype dt, int trans_a, int trans_b, int M,
                                 int N, int K, ops_dtype cdt, int accumulate);
/* The library, its version and what it runs on, for ops_gemm_info:
 * "oneDNN 2.7.3 dnnl_sgemm, ISA avx512_core_amx". In *warning (when
 * warning is not NULL) a line saying why GEMMs run slower than this CPU
 * could, or NULL. Static strings. */
const char *gemm_lib_info(const char **warning);

#endif
