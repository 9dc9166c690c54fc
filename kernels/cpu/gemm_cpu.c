/*
 * gemm_cpu.c - the one fp32 GEMM every CPU op calls, and what it runs on.
 *
 * configure picks the library (m4/tri_gemm.m4): oneDNN's dnnl_sgemm when
 * present, else any CBLAS. Both take row-major operands directly, so no op
 * transposes anything by hand. The library code sits under `#if` because
 * only one library's header exists on a given machine.
 *
 * Threads. Debian's oneDNN is built on GNU OpenMP, the same pool as our
 * `#pragma omp` loops: it uses omp_get_max_threads() threads, and inside a
 * parallel region it runs on the calling thread alone. Debian's default
 * OpenBLAS (libopenblas0-pthread) keeps its own pthread pool instead. It
 * reads OMP_NUM_THREADS when OPENBLAS_NUM_THREADS is unset, so both pools
 * have the same size (an MPI launcher that gives each rank a few cores
 * through OMP_NUM_THREADS limits OpenBLAS too), but its spinning workers and
 * our idle OpenMP workers can still contend for cores between ops. And
 * called from several OpenMP threads at once, each call fans out to the
 * whole pool: 10x slower for attention's small GEMMs, hence
 * gemm_serial_begin_cpu. The OpenMP flavour of OpenBLAS
 * (libopenblas0-openmp) has neither problem.
 *
 * ops_gemm_info names the library and kernel, and warns when the kernel is
 * far below what the CPU supports: a DYNAMIC_ARCH OpenBLAS that does not
 * know a new CPU falls back to an SSE3 kernel and runs 5-10x slower, which
 * otherwise shows up only as a mysteriously low MFU.
 */
#include "cpu.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#if TRI_GEMM_DNNL
#include <oneapi/dnnl/dnnl.h>
#elif TRI_GEMM_CBLAS
#include <cblas.h>
#include <dlfcn.h>
#endif

#if !TRI_GEMM_DNNL && !TRI_GEMM_CBLAS
#error "no GEMM library: configure sets TRI_GEMM_DNNL or TRI_GEMM_CBLAS to 1"
#endif

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
#if TRI_GEMM_DNNL
    dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N',
                                  M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    if (st != dnnl_success) {
        char msg[160];
        snprintf(msg, sizeof msg,
                 "dnnl_sgemm(M=%d, N=%d, K=%d, lda=%d, ldb=%d, ldc=%d) "
                 "returned status %d", M, N, K, lda, ldb, ldc, (int)st);
        ops_fatal(msg, __FILE__, __LINE__);
    }
#else
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda,
                B, ldb, beta, C, ldc);
#endif
}

/* 0 = SSE only, 1 = AVX, 2 = AVX2/FMA, 3 = AVX-512: what this CPU can do.
 * Other architectures report 0, so nothing is warned about there. */
static int cpu_tier(void)
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

static const char *tier_name(int tier)
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
        a[i] = (float)(i % 7) * 0.25f - 0.75f;
        b[i] = (float)(i % 5) * 0.5f - 1.0f;
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

static char info[256];
static char warn[512];

#if TRI_GEMM_DNNL

int gemm_serial_begin_cpu(void)
{
    return 0;
}

void gemm_serial_end_cpu(int saved)
{
}

static const char *isa_name(dnnl_cpu_isa_t isa)
{
    switch (isa) {
    case dnnl_cpu_isa_all: return "all";
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_mic: return "avx512_mic";
    case dnnl_cpu_isa_avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    }
    return "unknown";
}

const char *ops_gemm_info(const char **warning)
{
    const dnnl_version_t *ver = dnnl_version();
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    snprintf(info, sizeof info, "oneDNN %d.%d.%d dnnl_sgemm, ISA %s",
             ver->major, ver->minor, ver->patch, isa_name(isa));
    /* the ISA values are nested bit sets: avx2 and above include its bits */
    int below_avx2 = ((unsigned)isa & (unsigned)dnnl_cpu_isa_avx2)
                     != (unsigned)dnnl_cpu_isa_avx2;
    int tier = cpu_tier();
    if (warning)
        *warning = NULL;
    if (warning && below_avx2 && tier >= 2) {
        snprintf(warn, sizeof warn,
                 "oneDNN runs its %s kernels but this CPU has %s, so GEMMs "
                 "run several times slower than they could; unset "
                 "ONEDNN_MAX_CPU_ISA (or DNNL_MAX_CPU_ISA) in the environment",
                 isa_name(isa), tier_name(tier));
        *warning = warn;
    }
    return info;
}

#else

/* OpenBLAS's extensions, looked up at run time so that a build against
 * another CBLAS still links; each is NULL where absent. */
typedef struct {
    char *(*corename)(void);
    char *(*config)(void);
    int (*parallel)(void);    /* 0 sequential, 1 pthreads, 2 OpenMP */
    int (*get_threads)(void);
    void (*set_threads)(int);
} openblas_api;

static openblas_api openblas(void)
{
    openblas_api ob;
    ob.corename = (char *(*)(void))dlsym(RTLD_DEFAULT, "openblas_get_corename");
    ob.config = (char *(*)(void))dlsym(RTLD_DEFAULT, "openblas_get_config");
    ob.parallel = (int (*)(void))dlsym(RTLD_DEFAULT, "openblas_get_parallel");
    ob.get_threads =
        (int (*)(void))dlsym(RTLD_DEFAULT, "openblas_get_num_threads");
    ob.set_threads =
        (void (*)(int))dlsym(RTLD_DEFAULT, "openblas_set_num_threads");
    return ob;
}

int gemm_serial_begin_cpu(void)
{
    openblas_api ob = openblas();
    /* only pthreads: the OpenMP flavour would pass a set_num_threads on to
     * omp_set_num_threads and serialise our own loops instead */
    if (!ob.parallel || !ob.get_threads || !ob.set_threads ||
        ob.parallel() != 1)
        return 0;
    int saved = ob.get_threads();
    ob.set_threads(1);
    return saved;
}

void gemm_serial_end_cpu(int saved)
{
    openblas_api ob = openblas();
    if (saved > 0 && ob.set_threads)
        ob.set_threads(saved);
}

/* OpenBLAS core names by the widest vector unit their kernels use; names
 * not listed (new cores, other CBLAS) are not warned about. */
static int openblas_core_tier(const char *core)
{
    static const char *sse[] = { "Katmai", "Coppermine", "Northwood",
        "Prescott", "Banias", "Core2", "Penryn", "Dunnington", "Nehalem",
        "Atom", "Opteron", "Opteron_SSE3", "Barcelona", "Bobcat", "Nano" };
    static const char *avx[] = { "Sandybridge", "Bulldozer", "Piledriver",
        "Steamroller" };
    for (size_t i = 0; i < sizeof sse / sizeof sse[0]; i++)
        if (strcasecmp(core, sse[i]) == 0)
            return 0;
    for (size_t i = 0; i < sizeof avx / sizeof avx[0]; i++)
        if (strcasecmp(core, avx[i]) == 0)
            return 1;
    return 3;
}

const char *ops_gemm_info(const char **warning)
{
    openblas_api ob = openblas();
    if (warning)
        *warning = NULL;
    if (!ob.corename || !ob.config) {
        snprintf(info, sizeof info, "CBLAS cblas_sgemm (not OpenBLAS)");
        return info;
    }
    const char *core = ob.corename();
    char version[48];
    /* the config string starts "OpenBLAS 0.3.21 DYNAMIC_ARCH ..." */
    if (sscanf(ob.config(), "OpenBLAS %40s", version) != 1)
        strcpy(version, "(unknown version)");
    snprintf(info, sizeof info, "OpenBLAS %s cblas_sgemm, core %s", version,
             core);
    int tier = cpu_tier();
    if (warning && openblas_core_tier(core) < 2 && tier >= 2) {
        snprintf(warn, sizeof warn,
                 "OpenBLAS runs its %s kernel but this CPU has %s, so GEMMs "
                 "run several times slower than they could; set "
                 "OPENBLAS_CORETYPE=%s in the environment, or rebuild with "
                 "--with-gemm=dnnl", core, tier_name(tier),
                 tier == 3 ? "SkylakeX" : "Haswell");
        *warning = warn;
    }
    return info;
}

#endif
