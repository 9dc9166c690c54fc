/*
 * gemm_bf16_cpu.c - the choice of the kernel that runs bf16 GEMMs on this
 * CPU (gemm_bf16.h lists the four paths).
 *
 * The choice is made once per process, so that a run takes one path
 * throughout and stays bitwise reproducible, and it follows the CPU, not a
 * GEMM's timing, so that two runs on one machine (a run and its resume)
 * take the same path (doc/performance.md, "CPU GEMMs", has the figures):
 *   AMX           oneDNN's matmul primitive (measured: 1,300 to 1,400
 *                 GFLOP/s on 2 cores, about 4x sgemm);
 *   AVX512_BF16   trident's vdpbf16ps kernel, where vdpbf16ps outruns the
 *   faster than   fp32 FMA (AMD Zen 4: twice its multiply-adds), which
 *   the FMA       cpu_bf16_dot_outpaces_fma times once; the kernel runs
 *                 at 80% of the instruction's rate (Sapphire Rapids), and
 *                 the alternatives measured there run under the fp32 rate
 *                 (oneDNN 2.6's bf16 kernel 0.6x sgemm, the widened path
 *                 0.9x). The two measured cases are 4x apart, so the
 *                 timing cannot flip between a run and its resume;
 *   otherwise     sgemm on widened panels: the AVX2 kernel does not beat
 *                 it on the machines measured (0.72 to 0.77x sgemm), nor
 *                 the vdpbf16ps kernel where that instruction runs at half
 *                 the FMA's rate (Sapphire Rapids without AMX: 0.55x).
 * The switch TRIDENT_CPU_BF16_GEMM overrides it (auto, library, trident,
 * widened; switches.h), for measurements and comparisons.
 *
 * A trident kernel is used only after it has computed a few ragged
 * products, in every transpose, as a plain loop does: a fault in a kernel
 * this machine has never run becomes a warning and the widened path, not a
 * wrong model.
 *
 * Not collective.
 */
#include "gemm_bf16.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "gemm_lib.h"

#define ENV_NAME "TRIDENT_CPU_BF16_GEMM"

static int cpu_has(const char *feature)
{
#if TRI_GEMM_BF16_X86
    __builtin_cpu_init();
    if (strcmp(feature, "avx512bf16") == 0)
        return __builtin_cpu_supports("avx512bf16") &&
               __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl");
    if (strcmp(feature, "avx2") == 0)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    (void)feature;
#endif
    return 0;
}

gemm_bf16_fn gemm_bf16_kernel_cpu(gemm_bf16_path path)
{
#if TRI_GEMM_BF16_X86
    if (path == GEMM_BF16_AVX512)
        return gemm_bf16_avx512;
    if (path == GEMM_BF16_AVX2)
        return gemm_bf16_avx2;
#else
    (void)path;
#endif
    return NULL;
}

const char *gemm_bf16_path_name(gemm_bf16_path path)
{
    switch (path) {
    case GEMM_BF16_LIBRARY: return "the GEMM library's bf16 kernel";
    case GEMM_BF16_AVX512: return "trident's bf16 GEMM on vdpbf16ps (AVX512_BF16)";
    case GEMM_BF16_AVX2: return "trident's bf16 GEMM on AVX2 FMAs";
    case GEMM_BF16_WIDENED: break;
    }
    return "sgemm on fp32 copies";
}

/* ---- the check a trident kernel passes before it is used --------------- */

/* Element (r, c) of op(X), X bf16 with row stride ld, as fp32. */
static float op_at(const uint16_t *x, int ld, int trans, int r, int c)
{
    return elem_bf16_to_f32(trans ? x[(int64_t)c * ld + r] : x[(int64_t)r * ld + c]);
}

/* c(M,N) = op(a) . op(b) in k order, each pair's high product first, one
 * fp32 rounding per product added: the kernels' sum, but for their adding
 * a panel's sum to C every KC elements (within the check's tolerance). */
static void plain_product(int ta, int tb, int M, int N, int K,
                          const uint16_t *a, int lda, const uint16_t *b,
                          int ldb, float *c)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float acc = 0.0f;
            for (int k = 0; k < K; k += 2) {
                int odd = k + 1 < K;
                acc = fmaf(odd ? op_at(a, lda, ta, i, k + 1) : 0.0f,
                           odd ? op_at(b, ldb, tb, k + 1, j) : 0.0f, acc);
                acc = fmaf(op_at(a, lda, ta, i, k), op_at(b, ldb, tb, k, j), acc);
            }
            c[(int64_t)i * N + j] = acc;
        }
}

int gemm_bf16_kernel_agrees(gemm_bf16_fn fn, double *worst)
{
    static const int shapes[][3] = { { 1, 1, 1 }, { 7, 70, 3 },
                                     { 13, 129, 517 }, { 33, 17, 64 } };
    enum { MAX_ELEMS = 33 * 517 + 129 * 517 };
    uint16_t *ab = malloc(MAX_ELEMS * sizeof(uint16_t));
    float *got = malloc(33 * 129 * sizeof(float));
    float *want = malloc(33 * 129 * sizeof(float));
    if (!ab || !got || !want)
        ops_fatal("gemm_bf16: out of memory for the kernel's check", __FILE__,
                  __LINE__);
    uint32_t seed = 12345u;
    for (int i = 0; i < MAX_ELEMS; i++) {
        seed = seed * 1664525u + 1013904223u;
        ab[i] = elem_f32_to_bf16((float)(seed >> 8) / 8388608.0f - 1.0f);
    }
    *worst = 0.0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 4; t++) {
            int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
            int ta = t & 1, tb = t >> 1;
            const uint16_t *a = ab, *b = ab + 33 * 517;
            int lda = ta ? M : K, ldb = tb ? K : N;
            plain_product(ta, tb, M, N, K, a, lda, b, ldb, want);
            fn(ta, tb, M, N, K, a, lda, b, ldb, got, N, 0);
            for (int i = 0; i < M * N; i++) {
                /* |terms| < 1 each: K * 2^-22 bounds fp32's reassociation */
                double e = fabs((double)got[i] - want[i]);
                if (!(e <= K * 0x1p-22))
                    *worst = isnan(e) ? INFINITY : fmax(*worst, e);
            }
        }
    free(ab);
    free(got);
    free(want);
    return *worst == 0.0;
}

/* ---- the choice ---------------------------------------------------------- */

/* The fastest own kernel this CPU can run, or WIDENED. */
static gemm_bf16_path own_path(void)
{
    if (cpu_has("avx512bf16"))
        return GEMM_BF16_AVX512;
    if (cpu_has("avx2"))
        return GEMM_BF16_AVX2;
    return GEMM_BF16_WIDENED;
}

/* path, or WIDENED with a warning when it is a trident kernel that fails
 * its check here (fatal when the user asked for it by name). */
static gemm_bf16_path checked(gemm_bf16_path path, int asked)
{
    gemm_bf16_fn fn = gemm_bf16_kernel_cpu(path);
    double worst;
    if (!fn || gemm_bf16_kernel_agrees(fn, &worst))
        return path;
    char msg[320];
    snprintf(msg, sizeof msg, "%s disagrees with a plain loop on this CPU "
             "(error %.3g), so bf16 GEMMs run on %s", gemm_bf16_path_name(path),
             worst, gemm_bf16_path_name(GEMM_BF16_WIDENED));
    if (asked)
        ops_fatal(msg, __FILE__, __LINE__);
    fprintf(stderr, "trident: warning: %s; please report it\n", msg);
    return GEMM_BF16_WIDENED;
}

/* The switch's word (switches.h refuses any other), then what this CPU
 * and build can run of it. */
static gemm_bf16_path choose(void)
{
    const char *word = ops_switch_word(OPS_SWITCH_CPU_BF16_GEMM);
    int preferred = 0;
    int library = gemm_native_lib_available(OPS_BF16, &preferred);
    if (strcmp(word, "auto") == 0) {
        if (library && preferred)
            return GEMM_BF16_LIBRARY;
        if (own_path() == GEMM_BF16_AVX512 && cpu_bf16_dot_outpaces_fma())
            return checked(GEMM_BF16_AVX512, 0);
        return GEMM_BF16_WIDENED;
    }
    char msg[256];
    if (strcmp(word, "library") == 0) {
        if (library)
            return GEMM_BF16_LIBRARY;
        snprintf(msg, sizeof msg, "%s=library: this build's GEMM library has "
                 "no bf16 kernel (configure --with-gemm=dnnl for oneDNN's)",
                 ENV_NAME);
        ops_fatal(msg, __FILE__, __LINE__);
    }
    if (strcmp(word, "trident") == 0) {
        if (own_path() != GEMM_BF16_WIDENED)
            return checked(own_path(), 1);
        snprintf(msg, sizeof msg, "%s=trident: trident's bf16 GEMMs need "
                 "AVX512_BF16 or AVX2 with FMA, which this CPU or compiler "
                 "lacks", ENV_NAME);
        ops_fatal(msg, __FILE__, __LINE__);
    }
    return GEMM_BF16_WIDENED; /* "widened" */
}

gemm_bf16_path gemm_bf16_path_cpu(void)
{
    static int chosen = -1;
    if (chosen < 0)
        chosen = (int)choose();
    return (gemm_bf16_path)chosen;
}
