/*
 * gemm_cblas.c - the CPU GEMMs on a CBLAS (configure --with-gemm=cblas, or
 * where oneDNN is missing): OpenBLAS, BLIS, MKL's cblas, ...
 *
 * fp32 runs on cblas_sgemm; a CBLAS has no bf16 or fp16 GEMM (Debian's
 * OpenBLAS lacks sbgemm), so those always take gemm_cpu.c's widened
 * panels. OpenBLAS's pthread pool and its kernel choice need the care
 * described in doc/performance.md, "CPU GEMMs". A route of gemm_cpu.c's
 * (gemm_lib.h): nothing here calls back up.
 *
 * Not collective.
 */
#include "cpu.h"
#include "gemm_lib.h"

#include <cblas.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static char info[256];
static char warn[512];

void gemm_f32_lib(int trans_a, int trans_b, int M, int N, int K, float alpha,
                  const float *A, int lda, const float *B, int ldb,
                  float beta, float *C, int ldc)
{
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda,
                B, ldb, beta, C, ldc);
}

int gemm_native_lib(ops_dtype dt, int trans_a, int trans_b, int M, int N,
                    int K, const void *A, int lda, const void *B, int ldb,
                    const void *bias, int accumulate, void *C, ops_dtype cdt,
                    int ldc)
{
    return 0;
}

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

int gemm_native_lib_available(ops_dtype dt, int *preferred)
{
    (void)dt;
    *preferred = 0;
    return 0;
}

const char *gemm_f32_lib_name(void)
{
    return "cblas_sgemm";
}

const char *gemm_native_lib_name(ops_dtype dt, int trans_a, int trans_b, int M,
                                 int N, int K, ops_dtype cdt, int accumulate)
{
    (void)dt; (void)trans_a; (void)trans_b; (void)M; (void)N; (void)K;
    (void)cdt; (void)accumulate;
    return NULL;
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

const char *gemm_lib_info(const char **warning)
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
    int tier = cpu_isa_tier();
    if (warning && openblas_core_tier(core) < 2 && tier >= 2) {
        snprintf(warn, sizeof warn,
                 "OpenBLAS runs its %s kernel but this CPU has %s, so GEMMs "
                 "run several times slower than they could; set "
                 "OPENBLAS_CORETYPE=%s in the environment, or rebuild with "
                 "--with-gemm=dnnl", core, cpu_isa_tier_name(tier),
                 tier == 3 ? "SkylakeX" : "Haswell");
        *warning = warn;
    }
    return info;
}
