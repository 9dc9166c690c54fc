/*
 * t_gemm_bf16.c - trident's own bf16 GEMM (kernels/cpu/gemm_bf16_pairs.h)
 * in each of its ISA layers, against the plain loop that defines it.
 *
 * The kernel accumulates every element of C in k order, each k-pair's high
 * product before its low one, one fp32 rounding per product: the plain
 * loop below. So the portable layers must give the same bits:
 *   - kernels/cpu/gemm_bf16_avx512.c, the AVX512_BF16 kernel as the
 *     library builds it but for its target pragma, compiled into this test
 *     against tests/simd_emu/immintrin.h (its seven intrinsics in plain C,
 *     from Intel's definitions) with block sizes shrunk so that small
 *     shapes cross every loop (several panels of K, of N, blocks of M,
 *     ragged tiles, odd K);
 *   - the AVX2 layer as the library builds it (default blocks), on a CPU
 *     with AVX2.
 * The real AVX512_BF16 instructions run where the CPU has them, held to
 * fp32 round-off instead (a unit may flush denormals or round a pair
 * once). A check that the comparison can fail: the emulated instruction
 * with the halves of A's pairs swapped must disagree, and the check each run makes
 * before it uses a trident kernel (gemm_bf16_kernel_agrees) must refuse
 * it.
 *
 * What auto picks (in a child process) follows the CPU: the library's AMX
 * kernel, else the vdpbf16ps kernel on AMD (where that instruction outruns
 * the FMA; decided from CPUID, cpu_bf16_dot_speedup's timing only
 * printed), else the widened path; bf16's hardware peak is measured on
 * the same unit.
 *
 * Then gemm_cpu's bf16 case on the path TRIDENT_CPU_BF16_GEMM=trident
 * picks (bias, bf16 or fp32 C, accumulation, column blocks) against a
 * double reference; t_ops_precision runs every bf16 op on that path too
 * (t_ops_precision_trident.sh).
 */
#include "kernels/ops.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/cpu/cpu.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/gemm_lib.h"
#include "tests/tap.h"

/* gemm_bf16_avx512.c itself, on the emulated intrinsics of
 * tests/simd_emu/immintrin.h (first on this test's include path), with
 * small blocks: 3 pairs of K a panel, 12 rows a block, 128 columns a panel
 * (two slivers of 64) */
#define TRI_SIMD_EMU 1
#define BF16_KC 6
#define BF16_MC 12
#define BF16_NC 128
#define BF16_GEMM_FN gemm_bf16_emu
void gemm_bf16_emu(int ta, int tb, int M, int N, int K, const uint16_t *A,
                   int lda, const uint16_t *B, int ldb, float *C, int ldc,
                   int accumulate);
#include "kernels/cpu/gemm_bf16_avx512.c"

static uint32_t rng = 2463534242u;

static float uniform(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 17;
    rng ^= rng << 5;
    return (float)(rng >> 8) / 8388608.0f - 1.0f;
}

static uint16_t *random_bf16(int64_t n)
{
    uint16_t *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++)
        x[i] = elem_f32_to_bf16(uniform());
    return x;
}

static float elem(const uint16_t *X, int ld, int trans, int r, int c)
{
    return elem_bf16_to_f32(trans ? X[(int64_t)c * ld + r] : X[(int64_t)r * ld + c]);
}

/* The definition: each panel of kc elements of K summed from zero in k
 * order, the high product of each pair first, fmaf per product, and added
 * to c (kept when accumulating, else from the second panel on). */
static void plain(int kc, int ta, int tb, int M, int N, int K,
                  const uint16_t *a, int lda, const uint16_t *b, int ldb,
                  float *c, int ldc, int accumulate)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float *out = &c[(int64_t)i * ldc + j];
            for (int k0 = 0; k0 < K; k0 += kc) {
                float sum = 0.0f;
                for (int k = k0; k < K && k < k0 + kc; k += 2) {
                    float hi_a = k + 1 < K ? elem(a, lda, ta, i, k + 1) : 0.0f;
                    float hi_b = k + 1 < K ? elem(b, ldb, tb, k + 1, j) : 0.0f;
                    sum = fmaf(hi_a, hi_b, sum);
                    sum = fmaf(elem(a, lda, ta, i, k), elem(b, ldb, tb, k, j), sum);
                }
                *out = accumulate || k0 > 0 ? *out + sum : sum;
            }
        }
}

typedef struct {
    int M, N, K;
} Shape;

/* Runs fn and the plain loop on one shape and transpose, C with 3 columns
 * of padding (which must stay untouched) and, when accumulating, random
 * starting values; returns the largest |difference| (INFINITY when the
 * padding changed or a NaN appeared). */
static double compare(gemm_bf16_fn fn, int kc, Shape s, int ta, int tb,
                      int accumulate)
{
    int ldc = s.N + 3;
    int lda = ta ? s.M : s.K, ldb = tb ? s.K : s.N;
    uint16_t *a = random_bf16((int64_t)s.M * s.K);
    uint16_t *b = random_bf16((int64_t)s.K * s.N);
    size_t cn = (size_t)s.M * ldc;
    float *got = malloc(cn * sizeof(float)), *want = malloc(cn * sizeof(float));
    for (size_t i = 0; i < cn; i++)
        got[i] = want[i] = accumulate || i % ldc >= (size_t)s.N ? uniform() : NAN;
    plain(kc, ta, tb, s.M, s.N, s.K, a, lda, b, ldb, want, ldc, accumulate);
    fn(ta, tb, s.M, s.N, s.K, a, lda, b, ldb, got, ldc, accumulate);
    double worst = 0.0;
    for (size_t i = 0; i < cn; i++) {
        double d = fabs((double)got[i] - want[i]);
        if (i % ldc >= (size_t)s.N && memcmp(&got[i], &want[i], sizeof(float)))
            d = INFINITY;
        worst = isnan(d) ? INFINITY : fmax(worst, d);
    }
    free(a);
    free(b);
    free(got);
    free(want);
    return worst;
}

/* The largest difference over shapes x transposes x accumulate, for a
 * kernel whose panels are kc deep. */
static double sweep(gemm_bf16_fn fn, int kc, const Shape *shapes, int n)
{
    double worst = 0.0;
    for (int i = 0; i < n; i++)
        for (int t = 0; t < 8; t++)
            worst = fmax(worst, compare(fn, kc, shapes[i], t & 1, t >> 1 & 1, t >> 2));
    return worst;
}

/* small shapes that cross the emulated layer's shrunk blocks */
static const Shape small[] = {
    { 1, 1, 1 }, { 1, 1, 2 }, { 6, 64, 6 }, { 7, 65, 7 }, { 13, 129, 13 },
    { 25, 200, 37 }, { 12, 128, 12 }, { 5, 300, 1 }, { 30, 3, 50 },
};
/* shapes that cross the library's own blocks (K > 256, N > 4096, M above
 * a block) and GPT-2's head size */
static const Shape large[] = {
    { 3, 4100, 9 }, { 150, 70, 600 }, { 97, 768, 64 }, { 4, 17, 1031 },
};
/* the library's panel depths: gemm_bf16_pairs.h's default (AVX2) and
 * gemm_bf16_avx512.c's */
#define AVX2_KC 256
#define AVX512_KC 192
#define COUNT(x) ((int)(sizeof x / sizeof x[0]))

static void test_emulated(void)
{
    double e = sweep(gemm_bf16_emu, BF16_KC, small, COUNT(small));
    tap_ok(e == 0.0, "gemm_bf16_avx512.c on emulated intrinsics (16 lanes, 6 x 64 "
           "tiles, shrunk blocks): the plain loop's bits on %d shapes x 4 transposes x "
           "[+]= (max |diff| %g)", COUNT(small), e);
    tri_simd_emu_fault = 1;
    e = sweep(gemm_bf16_emu, BF16_KC, small + 4, 1);
    tri_simd_emu_fault = 0;
    tap_ok(e > 1e-3, "the same with the halves of A's pairs swapped differs "
           "(max |diff| %g): the comparison sees a lane fault", e);
    /* the check every run makes before it uses a trident kernel */
    double good, bad;
    int passes = gemm_bf16_kernel_agrees(gemm_bf16_emu, &good);
    tri_simd_emu_fault = 1;
    int fails = !gemm_bf16_kernel_agrees(gemm_bf16_emu, &bad);
    tri_simd_emu_fault = 0;
    tap_ok(passes && fails, "the start-up check passes the emulated AVX-512 "
           "kernel (error %g) and refuses it with the lane fault (error %g)", good, bad);
}

static void test_avx2(void)
{
    __builtin_cpu_init();
    if (!TRI_GEMM_BF16_X86 || !__builtin_cpu_supports("avx2") ||
        !__builtin_cpu_supports("fma")) {
        tap_ok(1, "# SKIP AVX2 layer: this CPU or build has no AVX2 + FMA");
        tap_ok(1, "# SKIP AVX2 layer: this CPU or build has no AVX2 + FMA");
        return;
    }
    gemm_bf16_fn fn = gemm_bf16_kernel_cpu(GEMM_BF16_AVX2);
    double e = sweep(fn, AVX2_KC, small, COUNT(small));
    tap_ok(e == 0.0, "AVX2 layer: the plain loop's bits on the small shapes "
           "(max |diff| %g)", e);
    e = sweep(fn, AVX2_KC, large, COUNT(large));
    tap_ok(e == 0.0, "AVX2 layer: the plain loop's bits across its own "
           "blocks (K 1031, N 4100, M 150; max |diff| %g)", e);
}

static void test_avx512(void)
{
    __builtin_cpu_init();
    if (!TRI_GEMM_BF16_X86 || !__builtin_cpu_supports("avx512bf16") ||
        !__builtin_cpu_supports("avx512bw") || !__builtin_cpu_supports("avx512vl")) {
        tap_ok(1, "# SKIP AVX512_BF16 layer: this CPU has no AVX512_BF16");
        return;
    }
    gemm_bf16_fn fn = gemm_bf16_kernel_cpu(GEMM_BF16_AVX512);
    double e = fmax(sweep(fn, AVX512_KC, small, COUNT(small)),
                    sweep(fn, AVX512_KC, large, COUNT(large)));
    /* terms below 1 in size, K up to 1031: fp32 reassociation stays under
     * K * 2^-22 */
    tap_ok(e <= 1031 * 0x1p-22, "AVX512_BF16 layer (vdpbf16ps) within fp32 "
           "round-off of the plain loop (max |diff| %g, tol %g)", e,
           1031 * 0x1p-22);
}

/* gemm_cpu(bf16) on the trident path: C = [C +] op(A) op(B) + bias,
 * against double, relative to sum |a b| + |bias| + |c|. */
static double gemm_cpu_error(int ta, int tb, int M, int N, int K,
                             ops_dtype cdt, int accumulate)
{
    int lda = ta ? M : K, ldb = tb ? K : N;
    uint16_t *a = random_bf16((int64_t)M * K), *b = random_bf16((int64_t)K * N);
    uint16_t *bias = random_bf16(N);
    size_t cs = ops_dtype_size(cdt);
    void *c = malloc((size_t)M * N * cs);
    float *c0 = malloc((size_t)M * N * sizeof(float));
    for (int64_t i = 0; i < (int64_t)M * N; i++) {
        store_f32_cpu(c, cdt, i, uniform());
        c0[i] = load_f32_cpu(c, cdt, i);
    }
    gemm_cpu(OPS_BF16, ta, tb, M, N, K, a, lda, b, ldb, bias, accumulate, c,
             cdt, N);
    double worst = 0.0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double sum = elem_bf16_to_f32(bias[j]), size = fabs(sum);
            if (accumulate) {
                sum += c0[(int64_t)i * N + j];
                size += fabs(c0[(int64_t)i * N + j]);
            }
            for (int k = 0; k < K; k++) {
                double p = (double)elem(a, lda, ta, i, k) * elem(b, ldb, tb, k, j);
                sum += p;
                size += fabs(p);
            }
            double got = load_f32_cpu(c, cdt, (int64_t)i * N + j);
            worst = fmax(worst, fabs(got - sum) / size);
        }
    free(a);
    free(b);
    free(bias);
    free(c);
    free(c0);
    return worst;
}

static void test_gemm_cpu(void)
{
    const char *name = gemm_kernel_name_cpu(OPS_BF16, 0, 1, 64, 64, 64, OPS_BF16, 0);
    int own = gemm_bf16_kernel_cpu(gemm_bf16_path_cpu()) != NULL;
    tap_ok(own && strstr(name, "trident"), "TRIDENT_CPU_BF16_GEMM=trident: "
           "bf16 GEMMs run on %s", name);
    double f32 = 0.0, bf16 = 0.0;
    for (int t = 0; t < 8; t++) {
        f32 = fmax(f32, gemm_cpu_error(t & 1, t >> 1 & 1, 37, 130, 301, OPS_F32, t >> 2));
        bf16 = fmax(bf16, gemm_cpu_error(t & 1, t >> 1 & 1, 37, 130, 301, OPS_BF16, t >> 2));
    }
    tap_ok(f32 < 1e-6, "gemm_cpu bf16 -> fp32 C with bias, 4 transposes, "
           "[+]=: max |err| / size %.1e (tol 1e-6)", f32);
    /* one bf16 rounding of C: half an ulp, 2^-9 relative */
    tap_ok(bf16 < 0x1p-8, "gemm_cpu bf16 -> bf16 C with bias, 4 transposes, "
           "[+]=: max |err| / size %.1e (tol 2^-8)", bf16);
}

/* The path TRIDENT_CPU_BF16_GEMM=auto takes, chosen in a child process
 * (this one's choice is fixed to trident's kernel), or -1. Call before any
 * OpenMP region: the child of a process with a thread pool may not use
 * one. */
static int auto_path_in_child(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        setenv("TRIDENT_CPU_BF16_GEMM", "auto", 1);
        _exit((int)gemm_bf16_path_cpu());
    }
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
        return -1;
    return WEXITSTATUS(status);
}

/* Whether /proc/cpuinfo names AMD as the vendor (0 where it cannot be
 * read: not Linux, not x86). */
static int cpu_vendor_is_amd(void)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[256];
    int amd = 0;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "vendor_id", 9) == 0) {
            amd = strstr(line, "AuthenticAMD") != NULL;
            break;
        }
    if (f)
        fclose(f);
    return amd;
}

/* vdpbf16ps against the FMA: cpu_bf16_dot_speedup's timing, printed, and
 * the rule auto and MFU's bf16 peak follow (AMD's vdpbf16ps, from CPUID). */
static void test_dot_speedup(int auto_path)
{
    __builtin_cpu_init();
    int has = TRI_GEMM_BF16_X86 && __builtin_cpu_supports("avx512bf16");
    double s = cpu_bf16_dot_speedup(), dot, fma;
    cpu_bf16_dot_rates(&dot, &fma);
    if (has) {
        /* the FMA's rate against the peak probe's on one thread: a timing
         * loop the compiler emptied reads a thousand times too fast, while
         * other tests' load moves either reading by a few times at most */
        int threads = omp_get_max_threads();
        omp_set_num_threads(1);
        double one = cpu_peak_flops(OPS_F32, 0.02, NULL, 0);
        omp_set_num_threads(threads);
        tap_ok(fma > one / 20.0 && fma < 20.0 * one && dot < 20.0 * fma &&
               s == cpu_bf16_dot_speedup(),
               "vdpbf16ps runs at %.2fx the AVX-512 FMA's FLOP/s on one core "
               "(%.1f against %.1f GFLOP/s; the peak probe's FMA %.1f), "
               "measured once per process", s, dot / 1e9, fma / 1e9, one / 1e9);
    } else {
        tap_ok(s == 0.0 && dot == 0.0, "no AVX512_BF16: cpu_bf16_dot_speedup "
               "is 0 (%g)", s);
    }

    /* the rule, from /proc/cpuinfo's vendor rather than CPUID's builtin */
    int amd = cpu_vendor_is_amd();
    tap_ok(cpu_bf16_dot_outpaces_fma() == (has && amd),
           "vdpbf16ps counts as the faster unit on AMD alone, whatever its "
           "timing (%s, %s AVX512_BF16; timed %.2fx)", amd ? "AMD" : "not AMD",
           has ? "with" : "without", s);

    int preferred = 0;
    int library = gemm_native_lib_available(OPS_BF16, &preferred);
    gemm_bf16_path want = library && preferred ? GEMM_BF16_LIBRARY
                        : has && cpu_bf16_dot_outpaces_fma() ? GEMM_BF16_AVX512
                        : GEMM_BF16_WIDENED;
    tap_ok(auto_path == (int)want, "auto runs bf16 GEMMs on %s (%s; vdpbf16ps "
           "%.2fx the FMA, %s): got %s", gemm_bf16_path_name(want),
           library && preferred ? "the library's AMX kernel" : "no AMX", s,
           amd ? "AMD" : "not AMD",
           auto_path >= 0 ? gemm_bf16_path_name((gemm_bf16_path)auto_path) : "no child");

    char how[160];
    cpu_peak_flops(OPS_BF16, 0.01, how, sizeof how);
    int on_dot = strstr(how, "vdpbf16ps") != NULL;
    int on_amx = strstr(how, "AMX") != NULL;
    tap_ok(on_amx || on_dot == (has && cpu_bf16_dot_outpaces_fma()),
           "bf16's hardware peak is measured on the faster unit: %s", how);
}

int main(int argc, char **argv)
{
    int auto_path = auto_path_in_child();
    /* before the first bf16 GEMM: the path is chosen once */
    setenv("TRIDENT_CPU_BF16_GEMM", "trident", 1);
    tap_init(&argc, &argv);
    tap_plan(4 + 2 + 1 + 3 + 3);
    test_dot_speedup(auto_path);
    test_emulated();
    test_avx2();
    test_avx512();
    __builtin_cpu_init();
    if (gemm_bf16_kernel_cpu(GEMM_BF16_AVX2) && __builtin_cpu_supports("avx2") &&
        __builtin_cpu_supports("fma")) {
        test_gemm_cpu();
    } else {
        for (int i = 0; i < 3; i++)
            tap_ok(1, "# SKIP gemm_cpu on trident's kernel: no AVX2 here");
    }
    return tap_done();
}
