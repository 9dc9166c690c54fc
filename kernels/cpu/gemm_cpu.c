/*
 * gemm_cpu.c - the GEMMs every CPU op calls: the dispatcher, which chooses
 * the route of each GEMM and calls it.
 *
 * The routes, each of which calls nothing here (tests/t_deps.sh proves
 * kernels/ has no call circle):
 *   - the GEMM library configure picked (m4/tri_gemm.m4), oneDNN's
 *     dnnl_sgemm when present, else any CBLAS, whose file the build
 *     compiles beside this one (gemm_lib.h): fp32, and its own
 *     low-precision kernel where it has one;
 *   - trident's own bf16 kernels (gemm_bf16.h), which write fp32 blocks
 *     that are finished here;
 *   - the library's sgemm on bf16 and fp16 operands widened to fp32 in
 *     bounded panels, here.
 * All take row-major operands directly, so no op transposes anything by
 * hand. The path of bf16 GEMMs is chosen once per process, at start-up
 * (ops_cpu_gemm_check); here too: the empty cases, the routes' names for
 * the logs, and the peak probes. doc/performance.md ("CPU GEMMs") says
 * why each route is what it is.
 *
 * Not collective.
 */
#include "cpu.h"
#include "gemm_bf16.h"
#include "gemm_lib.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* ---- the path of bf16 GEMMs, chosen once -------------------------------
 * Once per process, so that a run takes one path throughout and stays
 * bitwise reproducible, and by the CPU, not a GEMM's timing, so that two
 * runs on one machine (a run and its resume) take the same path
 * (doc/performance.md, "CPU GEMMs", has the figures):
 *   AMX           the library's kernel, oneDNN's matmul primitive
 *                 (measured: 1,300 to 1,400 GFLOP/s on 2 cores, about 4x
 *                 sgemm);
 *   AVX512_BF16   trident's vdpbf16ps kernel, where vdpbf16ps outruns the
 *   faster than   fp32 FMA (AMD Zen 4: twice its multiply-adds), which
 *   the FMA       cpu_bf16_dot_outpaces_fma answers from CPUID (AMD), not
 *                 from a timing that another job's load can move; the
 *                 kernel runs at 80% of the instruction's rate (Sapphire
 *                 Rapids), and the alternatives measured there run under
 *                 the fp32 rate (oneDNN 2.6's bf16 kernel 0.6x sgemm, the
 *                 widened path 0.9x);
 *   otherwise     sgemm on widened panels: the AVX2 kernel does not beat
 *                 it on the machines measured (0.72 to 0.77x sgemm), nor
 *                 the vdpbf16ps kernel where that instruction runs at half
 *                 the FMA's rate (Sapphire Rapids without AMX: 0.55x).
 * The switch TRIDENT_CPU_BF16_GEMM overrides it (auto, library, trident,
 * widened; switches.h), for measurements and comparisons; a path it names
 * that this build or CPU cannot run stops the run at start-up. */

#define BF16_ENV "TRIDENT_CPU_BF16_GEMM"

/* " (TRIDENT_TEST_BF16_GEMM_LACKS=...)" when the test's hook is set, so
 * that an error it caused says so; else "". */
static const char *lacks_note(void)
{
    static char note[160];
    const char *list = getenv(GEMM_BF16_LACKS_ENV);
    if (!list || !*list)
        return "";
    snprintf(note, sizeof note, " (%s=%.80s)", GEMM_BF16_LACKS_ENV, list);
    return note;
}

/* path, or WIDENED with a warning when it is a trident kernel that fails
 * its check here; where the user asked for it by name (asked), -1 with
 * err instead. */
static int checked(gemm_bf16_path path, int asked, char *err, size_t err_size)
{
    gemm_bf16_fn fn = gemm_bf16_kernel_cpu(path);
    double worst;
    if (!fn || gemm_bf16_kernel_agrees(fn, &worst))
        return (int)path;
    if (asked) {
        snprintf(err, err_size, "%s=trident: %s disagrees with a plain loop on "
                 "this CPU (error %.3g); please report it, and unset %s (auto) "
                 "meanwhile", BF16_ENV, gemm_bf16_path_name(path), worst, BF16_ENV);
        return -1;
    }
    fprintf(stderr, "trident: warning: %s disagrees with a plain loop on this "
            "CPU (error %.3g), so bf16 GEMMs run on %s; please report it\n",
            gemm_bf16_path_name(path), worst,
            gemm_bf16_path_name(GEMM_BF16_WIDENED));
    return GEMM_BF16_WIDENED;
}

/* The switch's word (switches.h refuses any other), then what this CPU
 * and build can run of it: a gemm_bf16_path, or -1 with err naming the
 * variable, the value and what this CPU or build lacks. */
static int choose(char *err, size_t err_size)
{
    const char *word = ops_switch_word(OPS_SWITCH_CPU_BF16_GEMM);
    int preferred = 0;
    int library = gemm_native_lib_available(OPS_BF16, &preferred) &&
                  !gemm_bf16_test_lacks("library");
    gemm_bf16_path own = gemm_bf16_own_path_cpu();
    if (strcmp(word, "auto") == 0) {
        if (library && preferred)
            return GEMM_BF16_LIBRARY;
        if (own == GEMM_BF16_AVX512 && cpu_bf16_dot_outpaces_fma())
            return checked(GEMM_BF16_AVX512, 0, err, err_size);
        return GEMM_BF16_WIDENED;
    }
    if (strcmp(word, "library") == 0) {
        if (library)
            return GEMM_BF16_LIBRARY;
        snprintf(err, err_size, "%s=library: this build's GEMM library has no "
                 "bf16 kernel%s; configure --with-gemm=dnnl for oneDNN's, or "
                 "unset %s (auto)", BF16_ENV, lacks_note(), BF16_ENV);
        return -1;
    }
    if (strcmp(word, "trident") == 0) {
        if (own != GEMM_BF16_WIDENED)
            return checked(own, 1, err, err_size);
        snprintf(err, err_size, "%s=trident: trident's bf16 GEMMs need "
                 "AVX512_BF16, or AVX2 with FMA, on x86, which this CPU lacks%s; "
                 "unset %s (auto)", BF16_ENV, lacks_note(), BF16_ENV);
        return -1;
    }
    return GEMM_BF16_WIDENED; /* "widened" */
}

/* The path chosen (a gemm_bf16_path), or -1 with the reason in why. */
static int chosen = -1;
static char why[400];

static int choose_once(void)
{
    static int done;
    if (!done) {
        chosen = choose(why, sizeof why);
        done = 1;
    }
    return chosen;
}

int ops_cpu_gemm_check(char *err, size_t err_size)
{
    if (choose_once() >= 0)
        return 0;
    snprintf(err, err_size, "%s", why);
    return 1;
}

gemm_bf16_path gemm_bf16_path_cpu(void)
{
    if (choose_once() < 0)
        ops_fatal(why, __FILE__, __LINE__);
    return (gemm_bf16_path)chosen;
}

/* ---- the dispatch --------------------------------------------------------- */

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

/* ---- the routes' names ----------------------------------------------------- */

/* The same choice as gemm_cpu's, in words. */
const char *gemm_kernel_name_cpu(ops_dtype dt, int trans_a, int trans_b,
                                 int M, int N, int K, ops_dtype cdt,
                                 int accumulate)
{
    static char name[96];
    if (dt == OPS_F32 && cdt == OPS_F32)
        return gemm_f32_lib_name();
    const char *native = NULL;
    if (dt == OPS_BF16 && (cdt == OPS_F32 || cdt == OPS_BF16)) {
        gemm_bf16_path path = gemm_bf16_path_cpu();
        if (gemm_bf16_kernel_cpu(path))
            return gemm_bf16_path_name(path);
        if (path == GEMM_BF16_LIBRARY)
            native = gemm_native_lib_name(dt, trans_a, trans_b, M, N, K, cdt,
                                          accumulate);
    } else {
        native = gemm_native_lib_name(dt, trans_a, trans_b, M, N, K, cdt,
                                      accumulate);
    }
    if (native)
        return native;
    snprintf(name, sizeof name, "%s on fp32 copies", gemm_f32_lib_name());
    return name;
}

const char *ops_gemm_info(const char **warning)
{
    static char info[400];
    snprintf(info, sizeof info, "%s; bf16 on %s", gemm_lib_info(warning),
             gemm_kernel_name_cpu(OPS_BF16, 0, 1, 1024, 768, 768, OPS_BF16, 0));
    return info;
}

/* ---- the peak ------------------------------------------------------------ */

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
