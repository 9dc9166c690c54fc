/*
 * gemm_bf16_cpu.c - trident's own bf16 GEMM kernels as a route of
 * gemm_cpu.c's (gemm_bf16.h): which of them this CPU can run, the check
 * each passes before it is used, and the four paths' names.
 *
 * gemm_cpu.c, the dispatcher, chooses the path once per process from what
 * this file and the GEMM library's say is there (the reasons behind the
 * choice are written there and in doc/performance.md, "CPU GEMMs"); this
 * file calls nothing above it.
 *
 * A trident kernel is used only after it has computed a few ragged
 * products, in every transpose, as a plain loop does: a fault in a kernel
 * this machine has never run becomes a warning and the widened path (or,
 * where TRIDENT_CPU_BF16_GEMM=trident asked for it, an error at start-up),
 * not a wrong model.
 *
 * Not collective.
 */
#include "gemm_bf16.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"

/* The test's hook (gemm_bf16.h): the words it takes. */
static const char *const lacks_words[] = { "library", "avx512bf16", "avx2" };

/* Whether word, n characters long, is one of lacks_words. */
static int lacks_word_known(const char *word, size_t n)
{
    for (size_t i = 0; i < sizeof lacks_words / sizeof lacks_words[0]; i++)
        if (strlen(lacks_words[i]) == n && strncmp(word, lacks_words[i], n) == 0)
            return 1;
    return 0;
}

int gemm_bf16_test_lacks(const char *what)
{
    const char *list = getenv(GEMM_BF16_LACKS_ENV);
    int found = 0;
    for (const char *w = list; w && *w;) {
        size_t n = strcspn(w, ",");
        if (!lacks_word_known(w, n))
            ops_fatalf(__FILE__, __LINE__, "%s=%.60s: expected a comma-separated "
                       "list of library, avx512bf16 and avx2 (a test's hook: "
                       "what this build and CPU are to be taken to lack)",
                       GEMM_BF16_LACKS_ENV, list);
        found |= strlen(what) == n && strncmp(w, what, n) == 0;
        w += n + (w[n] == ',');
    }
    return found;
}

static int cpu_has(const char *feature)
{
    if (gemm_bf16_test_lacks(feature))
        return 0;
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

/* ---- what this CPU runs ------------------------------------------------- */

gemm_bf16_path gemm_bf16_own_path_cpu(void)
{
    if (cpu_has("avx512bf16"))
        return GEMM_BF16_AVX512;
    if (cpu_has("avx2"))
        return GEMM_BF16_AVX2;
    return GEMM_BF16_WIDENED;
}
