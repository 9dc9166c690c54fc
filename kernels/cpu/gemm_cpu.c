/*
 * gemm_cpu.c - the GEMMs every CPU op calls, whatever library runs them.
 *
 * configure picks the library (m4/tri_gemm.m4), oneDNN's dnnl_sgemm when
 * present, else any CBLAS, and the build compiles its file beside this
 * one (gemm_lib.h). Both take row-major operands directly, so no op
 * transposes anything by hand. Here: the empty cases, the dispatch of
 * bf16 GEMMs to the path gemm_bf16.h chose (trident's own kernels write
 * fp32 blocks, finished here), bf16 and fp16 operands widened to fp32 in
 * bounded panels for the library's sgemm, and the peak probes.
 * doc/performance.md ("CPU GEMMs") says why each path is what it is.
 *
 * Not collective.
 */
#include "cpu.h"
#include "gemm_bf16.h"
#include "gemm_lib.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>

/* fp32 elements per widened panel (16 MiB), and the longest panel side:
 * enough that sgemm runs at full speed on each block */
#define PANEL_FLOATS ((int64_t)1 << 22)
#define PANEL_MAX 2048
/* K is split into blocks only above this (the LM head's dinp, K = V) */
#define PANEL_K_MAX 4096

/* C = beta C, for K == 0 where libraries disagree on what to do. */
static void scale_c(int M, int N, float beta, float *C, int ldc)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float *c = &C[(int64_t)i * ldc + j];
            *c = beta == 0.0f ? 0.0f : beta * *c;
        }
}

void gemm_f32_cpu(int trans_a, int trans_b, int M, int N, int K, float alpha,
                  const float *A, int lda, const float *B, int ldb,
                  float beta, float *C, int ldc)
{
    if (M <= 0 || N <= 0)
        return;
    if (K <= 0) {
        scale_c(M, N, beta, C, ldc);
        return;
    }
    gemm_f32_lib(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C,
                 ldc);
}

/* ---- any compute dtype -------------------------------------------------- */

/* How many rows (or columns) of a panel whose other side is `other` long
 * fit the panel budget; at least 64, at most PANEL_MAX and n. */
static int panel_len(int n, int other)
{
    int64_t len = PANEL_FLOATS / (other > 0 ? other : 1);
    len = len > PANEL_MAX ? PANEL_MAX : len < 64 ? 64 : len;
    return n < len ? n : (int)len;
}

/* Rows [r0, r0+nr) and columns [c0, c0+nc) of op(X) as fp32: X itself
 * when it is fp32, else a widened copy in `slot`. The copy keeps X's
 * orientation, so gemm_f32_cpu reads it with the same transpose flag;
 * *ld receives its leading dimension. */
static const float *panel(scratch_slot slot, ops_dtype dt, int trans,
                          const void *X, int ldx, int r0, int nr, int c0,
                          int nc, int *ld)
{
    int sr0 = trans ? c0 : r0, snr = trans ? nc : nr;
    int sc0 = trans ? r0 : c0, snc = trans ? nr : nc;
    const char *base = (const char *)X +
                       ((size_t)sr0 * ldx + sc0) * ops_dtype_size(dt);
    if (dt == OPS_F32) {
        *ld = ldx;
        return (const float *)base;
    }
    float *p = scratch_cpu(slot, (size_t)snr * snc * sizeof(float));
    cast_2d_cpu(p, OPS_F32, snc, base, dt, ldx, snr, snc);
    *ld = snc;
    return p;
}

/* c(M,N) (fp32, ldc) += bias[n0 .. n0+N) of dtype dt, row by row. */
static void add_bias(float *c, int ldc, const void *bias, ops_dtype dt,
                     int n0, int M, int N)
{
    #pragma omp parallel for schedule(static) if ((int64_t)M * N > 65536)
    for (int i = 0; i < M; i++) {
        float *row = c + (int64_t)i * ldc;
        if (dt == OPS_F32) {
            const float *b = (const float *)bias + n0;
            for (int j = 0; j < N; j++)
                row[j] += b[j];
        } else {
            for (int j = 0; j < N; j++)
                row[j] += load_f32_cpu(bias, dt, n0 + j);
        }
    }
}

/* A block of C (rows x cols at cblk, row stride ldc, dtype cdt) as the
 * fp32 the GEMMs accumulate in: C itself when it is fp32, else a scratch
 * copy, holding the old C when accumulating. *ld receives its stride. */
static float *c_block_open(char *cblk, ops_dtype cdt, int ldc, int rows,
                           int cols, int accumulate, int *ld)
{
    if (cdt == OPS_F32) {
        *ld = ldc;
        return (float *)cblk;
    }
    float *c = scratch_cpu(SCRATCH_GEMM_C, (size_t)rows * cols * sizeof(float));
    *ld = cols;
    if (accumulate)
        cast_2d_cpu(c, OPS_F32, cols, cblk, cdt, ldc, rows, cols);
    return c;
}

/* The block's columns [n0, n0+cols) take bias (dtype dt) and, from a
 * scratch copy, go back to C rounded to cdt once. */
static void c_block_close(char *cblk, ops_dtype cdt, int ldc, float *c, int ld,
                          int rows, int cols, const void *bias, ops_dtype dt,
                          int n0)
{
    if (bias)
        add_bias(c, ld, bias, dt, n0, rows, cols);
    if (cdt != OPS_F32)
        cast_2d_cpu(cblk, cdt, ldc, c, OPS_F32, ld, rows, cols);
}

/* gemm_cpu on widened fp32 panels: blocks of C (at most PANEL_MAX square)
 * accumulate over blocks of K in fp32, then take the bias and are rounded
 * to cdt once. The A panel of a row block is widened once for all column
 * blocks when K is not split. */
static void gemm_widened(ops_dtype dt, int ta, int tb, int M, int N, int K,
                         const void *A, int lda, const void *B, int ldb,
                         const void *bias, int accumulate, void *C,
                         ops_dtype cdt, int ldc)
{
    int kb = K <= PANEL_K_MAX ? K : PANEL_K_MAX / 2;
    int mb = panel_len(M, kb), nb = panel_len(N, kb);
    size_t cs = ops_dtype_size(cdt);
    for (int m0 = 0; m0 < M; m0 += mb) {
        int mm = M - m0 < mb ? M - m0 : mb;
        const float *a = NULL;
        int lda32 = 0;
        for (int n0 = 0; n0 < N; n0 += nb) {
            int nn = N - n0 < nb ? N - n0 : nb;
            char *cblk = (char *)C + ((size_t)m0 * ldc + n0) * cs;
            int ldc32;
            float *c = c_block_open(cblk, cdt, ldc, mm, nn, accumulate, &ldc32);
            for (int k0 = 0; k0 < K; k0 += kb) {
                int kk = K - k0 < kb ? K - k0 : kb;
                if (kb < K || n0 == 0)
                    a = panel(SCRATCH_GEMM_A, dt, ta, A, lda, m0, mm, k0, kk,
                              &lda32);
                int ldb32;
                const float *b = panel(SCRATCH_GEMM_B, dt, tb, B, ldb, k0, kk,
                                       n0, nn, &ldb32);
                float beta = k0 == 0 && !accumulate ? 0.0f : 1.0f;
                gemm_f32_cpu(ta, tb, mm, nn, kk, 1.0f, a, lda32, b, ldb32,
                             beta, c, ldc32);
            }
            c_block_close(cblk, cdt, ldc, c, ldc32, mm, nn, bias, dt, n0);
        }
    }
}

/* gemm_cpu's bf16 case on one of trident's kernels (fn), which computes
 * fp32: into C itself when C is fp32 (one call, so op(A) is packed once
 * per panel of K), else into scratch blocks of columns that take the old
 * C, the bias, and are rounded to cdt once. */
static void gemm_own_bf16(gemm_bf16_fn fn, int ta, int tb, int M, int N,
                          int K, const void *A, int lda, const void *B,
                          int ldb, const void *bias, int accumulate, void *C,
                          ops_dtype cdt, int ldc)
{
    int nb = cdt == OPS_F32 ? N : panel_len(N, M);
    size_t cs = ops_dtype_size(cdt);
    for (int n0 = 0; n0 < N; n0 += nb) {
        int nn = N - n0 < nb ? N - n0 : nb;
        char *cblk = (char *)C + (size_t)n0 * cs;
        int ld;
        float *c = c_block_open(cblk, cdt, ldc, M, nn, accumulate, &ld);
        const uint16_t *b = (const uint16_t *)B + (tb ? (size_t)n0 * ldb : (size_t)n0);
        fn(ta, tb, M, nn, K, A, lda, b, ldb, c, ld, accumulate);
        c_block_close(cblk, cdt, ldc, c, ld, M, nn, bias, OPS_BF16, n0);
    }
}

/* K == 0: C = bias [+ C], which libraries disagree about. */
static void gemm_empty_k(int M, int N, ops_dtype dt, const void *bias,
                         int accumulate, void *C, ops_dtype cdt, int ldc)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            int64_t at = (int64_t)i * ldc + j;
            float c = accumulate ? load_f32_cpu(C, cdt, at) : 0.0f;
            store_f32_cpu(C, cdt, at, c + (bias ? load_f32_cpu(bias, dt, j) : 0.0f));
        }
}

void gemm_cpu(ops_dtype dt, int trans_a, int trans_b, int M, int N, int K,
              const void *A, int lda, const void *B, int ldb,
              const void *bias, int accumulate, void *C, ops_dtype cdt,
              int ldc)
{
    if (M <= 0 || N <= 0)
        return;
    if (K <= 0) {
        gemm_empty_k(M, N, dt, bias, accumulate, C, cdt, ldc);
        return;
    }
    if (dt == OPS_F32 && cdt == OPS_F32) {
        gemm_f32_cpu(trans_a, trans_b, M, N, K, 1.0f, A, lda, B, ldb,
                     accumulate ? 1.0f : 0.0f, C, ldc);
        if (bias)
            add_bias(C, ldc, bias, dt, 0, M, N);
        return;
    }
    if (dt == OPS_BF16 && (cdt == OPS_F32 || cdt == OPS_BF16)) {
        gemm_bf16_path path = gemm_bf16_path_cpu();
        gemm_bf16_fn fn = gemm_bf16_kernel_cpu(path);
        if (fn) {
            gemm_own_bf16(fn, trans_a, trans_b, M, N, K, A, lda, B, ldb, bias,
                          accumulate, C, cdt, ldc);
            return;
        }
        if (path == GEMM_BF16_LIBRARY &&
            gemm_native_lib(dt, trans_a, trans_b, M, N, K, A, lda, B, ldb,
                            bias, accumulate, C, cdt, ldc))
            return;
    } else if (gemm_native_lib(dt, trans_a, trans_b, M, N, K, A, lda, B, ldb,
                               bias, accumulate, C, cdt, ldc)) {
        return;
    }
    gemm_widened(dt, trans_a, trans_b, M, N, K, A, lda, B, ldb, bias,
                 accumulate, C, cdt, ldc);
}

/* ---- the CPU and the peak ------------------------------------------------ */

int cpu_isa_tier(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        return 3;
    if (__builtin_cpu_supports("avx2"))
        return 2;
    if (__builtin_cpu_supports("avx"))
        return 1;
#endif
    return 0;
}

const char *cpu_isa_tier_name(int tier)
{
    static const char *names[] = { "only SSE", "AVX", "AVX2", "AVX-512" };
    return names[tier];
}

double ops_gemm_peak(double seconds)
{
    /* 1024^3: the order of GPT-2 small's GEMMs (1024 tokens, C = 768) */
    const int n = 1024;
    size_t bytes = (size_t)n * n * sizeof(float);
    float *a = aligned_alloc(64, bytes), *b = aligned_alloc(64, bytes);
    float *c = aligned_alloc(64, bytes);
    if (!a || !b || !c)
        ops_fatal("ops_gemm_peak: out of memory for three 4 MiB matrices",
                  __FILE__, __LINE__);
    for (int64_t i = 0; i < (int64_t)n * n; i++) {
        a[i] = elem_probe_value((uint64_t)i, 0);
        b[i] = elem_probe_value((uint64_t)i, 1);
    }
    gemm_f32_cpu(0, 0, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n); /* warm up */
    double best = INFINITY, start = omp_get_wtime();
    do {
        double t0 = omp_get_wtime();
        gemm_f32_cpu(0, 0, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        double dt = omp_get_wtime() - t0;
        if (dt < best)
            best = dt;
    } while (omp_get_wtime() - start < seconds);
    free(a);
    free(b);
    free(c);
    return 2.0 * n * n * n / best;
}

double ops_gemm_peak_dtype(ops_dtype dtype, double seconds)
{
    if (dtype == OPS_F32)
        return ops_gemm_peak(seconds);
    if (dtype != OPS_BF16 && dtype != OPS_F16)
        ops_fatal("ops_gemm_peak_dtype: dtype must be fp32, bf16 or fp16",
                  __FILE__, __LINE__);
    /* a linear layer's forward GEMM, out(n,n) = inp(n,n) . w(n,n)^T, all
     * in the compute dtype, as the model runs it */
    const int n = 1024;
    size_t bytes = (size_t)n * n * sizeof(uint16_t);
    uint16_t *a = aligned_alloc(64, bytes), *b = aligned_alloc(64, bytes);
    uint16_t *c = aligned_alloc(64, bytes);
    if (!a || !b || !c)
        ops_fatal("ops_gemm_peak_dtype: out of memory for three 2 MiB "
                  "matrices", __FILE__, __LINE__);
    for (int64_t i = 0; i < (int64_t)n * n; i++) {
        store_f32_cpu(a, dtype, i, elem_probe_value((uint64_t)i, 0));
        store_f32_cpu(b, dtype, i, elem_probe_value((uint64_t)i, 1));
    }
    gemm_cpu(dtype, 0, 1, n, n, n, a, n, b, n, NULL, 0, c, dtype, n);
    double best = INFINITY, start = omp_get_wtime();
    do {
        double t0 = omp_get_wtime();
        gemm_cpu(dtype, 0, 1, n, n, n, a, n, b, n, NULL, 0, c, dtype, n);
        double dt = omp_get_wtime() - t0;
        if (dt < best)
            best = dt;
    } while (omp_get_wtime() - start < seconds);
    free(a);
    free(b);
    free(c);
    return 2.0 * n * n * n / best;
}
