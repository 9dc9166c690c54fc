/*
 * gemm_dnnl.c - the CPU GEMMs on oneDNN (configure --with-gemm=dnnl, the
 * default where libdnnl-dev is installed).
 *
 * fp32 runs on dnnl_sgemm. bf16 runs on oneDNN's matmul primitive (fp32
 * accumulation, bias and the "+=" of weight gradients fused in) only where
 * the CPU has AMX, and each primitive is created once and cached; every
 * other case goes back to gemm_cpu.c's widened panels. The measurements
 * behind that choice: doc/performance.md, "CPU GEMMs". A route of
 * gemm_cpu.c's (gemm_lib.h): nothing here calls back up.
 *
 * Not collective.
 */
#include "cpu.h"
#include "gemm_lib.h"

#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <string.h>

static char info[256];
static char warn[512];

void gemm_f32_lib(int trans_a, int trans_b, int M, int N, int K, float alpha,
                  const float *A, int lda, const float *B, int ldb,
                  float beta, float *C, int ldc)
{
    dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N',
                                  M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    if (st != dnnl_success) {
        char msg[160];
        snprintf(msg, sizeof msg,
                 "dnnl_sgemm(M=%d, N=%d, K=%d, lda=%d, ldb=%d, ldc=%d) "
                 "returned status %d", M, N, K, lda, ldb, ldc, (int)st);
        ops_fatal(msg, __FILE__, __LINE__);
    }
}

/* Nothing to do: inside a parallel region oneDNN runs on the calling
 * thread alone. */
int gemm_serial_begin_cpu(void)
{
    return 0;
}

void gemm_serial_end_cpu(int saved)
{
}

/* ---- bf16 through oneDNN's matmul primitive ----------------------------- */

#define MM_CACHE_SIZE 64

/* Everything a matmul primitive is specialised on. */
typedef struct {
    int M, N, K, ta, tb, lda, ldb, ldc, bias, accumulate;
    ops_dtype cdt;
} mm_key;

enum { MM_SRC, MM_WEI, MM_BIAS, MM_DST, MM_PAD, MM_NMEM };

typedef struct {
    mm_key key;
    int used;        /* the slot holds key */
    int ok;          /* oneDNN implements it; else gemm_widened runs */
    uint64_t last;   /* LRU clock of the last use */
    dnnl_primitive_t prim;
    dnnl_memory_t mem[MM_NMEM];  /* handles set at each execution */
    size_t pad_bytes;
    char impl[64];
} mm_entry;

static mm_entry mm_cache[MM_CACHE_SIZE];
static uint64_t mm_clock;
static dnnl_engine_t dnnl_eng;
static dnnl_stream_t dnnl_str;

#define DNNL_CHECK(call) dnnl_check((call), #call, __FILE__, __LINE__)

static void dnnl_check(dnnl_status_t st, const char *call, const char *file,
                       int line)
{
    if (st == dnnl_success)
        return;
    char msg[256];
    snprintf(msg, sizeof msg, "%s returned oneDNN status %d", call, (int)st);
    ops_fatal(msg, file, line);
}

/* A CPU engine and an in-order stream; with Debian's GNU OpenMP build of
 * oneDNN the primitives run on our OpenMP pool. */
static void dnnl_setup(void)
{
    if (dnnl_eng)
        return;
    DNNL_CHECK(dnnl_engine_create(&dnnl_eng, dnnl_cpu, 0));
    DNNL_CHECK(dnnl_stream_create(&dnnl_str, dnnl_eng,
                                  dnnl_stream_default_flags));
}

/* A plain row-major (rows, cols) matrix with leading dimension ld, stored
 * transposed when trans: the strides say it, so nothing is copied. */
static void mm_desc(dnnl_memory_desc_t *md, int rows, int cols, int trans,
                    int ld, dnnl_data_type_t type)
{
    dnnl_dims_t dims = { rows, cols };
    dnnl_dims_t strides = { trans ? 1 : ld, trans ? ld : 1 };
    DNNL_CHECK(dnnl_memory_desc_init_by_strides(md, 2, dims, type, strides));
}

static void mm_release(mm_entry *e)
{
    for (int i = 0; i < MM_NMEM; i++)
        if (e->mem[i])
            dnnl_memory_destroy(e->mem[i]);
    if (e->prim)
        dnnl_primitive_destroy(e->prim);
    memset(e, 0, sizeof *e);
}

/* Fills e for e->key: the primitive and its memory objects, or ok = 0 when
 * oneDNN has no implementation for it. */
static void mm_create(mm_entry *e)
{
    const mm_key *k = &e->key;
    dnnl_memory_desc_t src, wei, bias, dst;
    mm_desc(&src, k->M, k->K, k->ta, k->lda, dnnl_bf16);
    mm_desc(&wei, k->K, k->N, k->tb, k->ldb, dnnl_bf16);
    mm_desc(&bias, 1, k->N, 0, k->N, dnnl_bf16);
    mm_desc(&dst, k->M, k->N, 0, k->ldc,
            k->cdt == OPS_F32 ? dnnl_f32 : dnnl_bf16);
    dnnl_matmul_desc_t md;
    DNNL_CHECK(dnnl_matmul_desc_init(&md, &src, &wei, k->bias ? &bias : NULL,
                                     &dst));
    dnnl_primitive_attr_t attr;
    DNNL_CHECK(dnnl_primitive_attr_create(&attr));
    DNNL_CHECK(dnnl_primitive_attr_set_scratchpad_mode(attr,
                                                       dnnl_scratchpad_mode_user));
    if (k->accumulate) {
        dnnl_post_ops_t po;
        DNNL_CHECK(dnnl_post_ops_create(&po));
        DNNL_CHECK(dnnl_post_ops_append_sum(po, 1.0f));
        DNNL_CHECK(dnnl_primitive_attr_set_post_ops(attr, po));
        dnnl_post_ops_destroy(po);
    }
    dnnl_primitive_desc_t pd;
    dnnl_status_t st = dnnl_primitive_desc_create(&pd, &md, attr, dnnl_eng,
                                                  NULL);
    dnnl_primitive_attr_destroy(attr);
    e->ok = st == dnnl_success;
    if (st == dnnl_unimplemented)
        return;
    DNNL_CHECK(st);
    const char *impl = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) !=
        dnnl_success || !impl)
        impl = "unknown";
    snprintf(e->impl, sizeof e->impl, "%s", impl);
    /* oneDNN falls back to its reference loops ("ref:any") for layouts its
     * kernels do not take; those run 100x slower than sgemm on widened
     * copies, so they count as unimplemented */
    if (strstr(impl, "ref")) {
        e->ok = 0;
        dnnl_primitive_desc_destroy(pd);
        return;
    }
    DNNL_CHECK(dnnl_primitive_create(&e->prim, pd));
    static const dnnl_query_t what[MM_NMEM] = { dnnl_query_src_md,
        dnnl_query_weights_md, dnnl_query_weights_md, dnnl_query_dst_md,
        dnnl_query_scratchpad_md };
    for (int i = 0; i < MM_NMEM; i++) {
        if (i == MM_BIAS && !k->bias)
            continue;
        const dnnl_memory_desc_t *d =
            dnnl_primitive_desc_query_md(pd, what[i], i == MM_BIAS);
        if (i == MM_PAD) {
            e->pad_bytes = d ? dnnl_memory_desc_get_size(d) : 0;
            if (!e->pad_bytes)
                continue;
        }
        DNNL_CHECK(dnnl_memory_create(&e->mem[i], d, dnnl_eng,
                                      DNNL_MEMORY_NONE));
    }
    dnnl_primitive_desc_destroy(pd);
}

/* The cache entry for key, created on a miss over the least recently used
 * slot. */
static mm_entry *mm_lookup(const mm_key *key)
{
    mm_entry *victim = NULL;
    for (int i = 0; i < MM_CACHE_SIZE; i++) {
        mm_entry *e = &mm_cache[i];
        if (e->used && memcmp(&e->key, key, sizeof *key) == 0) {
            e->last = ++mm_clock;
            return e;
        }
        /* the first free slot, else the least recently used one */
        if (!victim || (victim->used && (!e->used || e->last < victim->last)))
            victim = e;
    }
    dnnl_setup();
    mm_release(victim);
    victim->key = *key;
    victim->used = 1;
    victim->last = ++mm_clock;
    mm_create(victim);
    return victim;
}

static mm_key mm_make_key(int ta, int tb, int M, int N, int K, int lda,
                          int ldb, int ldc, int bias, int accumulate,
                          ops_dtype cdt)
{
    mm_key k;
    memset(&k, 0, sizeof k); /* padding too: keys are compared bytewise */
    k.M = M; k.N = N; k.K = K; k.ta = !!ta; k.tb = !!tb;
    k.lda = lda; k.ldb = ldb; k.ldc = ldc;
    k.bias = !!bias; k.accumulate = !!accumulate; k.cdt = cdt;
    return k;
}

/* Whether oneDNN's bf16 kernel is the first choice: only with AMX-BF16,
 * the one ISA where it beats sgemm on widened copies and trident's own
 * kernels (doc/performance.md, "CPU GEMMs"). Decided on first use from the
 * ISA oneDNN will run, which ONEDNN_MAX_CPU_ISA can lower. */
static int bf16_dnnl_wanted(void)
{
    static int wanted = -1;
    if (wanted < 0) {
        unsigned isa = (unsigned)dnnl_get_effective_cpu_isa();
        unsigned amx = (unsigned)dnnl_cpu_isa_avx512_core_amx;
        wanted = (isa & amx) == amx;
    }
    return wanted;
}

/* Runs the bf16 GEMM through a cached matmul primitive (gemm_cpu calls
 * it where gemm_bf16_path_cpu chose the library); returns 0 (and does
 * nothing) where oneDNN has no implementation for it. */
static int gemm_bf16_dnnl(int ta, int tb, int M, int N, int K,
                          const void *A, int lda, const void *B, int ldb,
                          const void *bias, int accumulate, void *C,
                          ops_dtype cdt, int ldc)
{
    mm_key key = mm_make_key(ta, tb, M, N, K, lda, ldb, ldc, bias != NULL,
                             accumulate, cdt);
    mm_entry *e = mm_lookup(&key);
    if (!e->ok)
        return 0;
    void *ptr[MM_NMEM] = { (void *)A, (void *)B, (void *)bias, C, NULL };
    if (e->pad_bytes)
        ptr[MM_PAD] = scratch_cpu(SCRATCH_DNNL, e->pad_bytes);
    static const int arg[MM_NMEM] = { DNNL_ARG_SRC, DNNL_ARG_WEIGHTS,
        DNNL_ARG_BIAS, DNNL_ARG_DST, DNNL_ARG_SCRATCHPAD };
    dnnl_exec_arg_t args[MM_NMEM];
    int nargs = 0;
    for (int i = 0; i < MM_NMEM; i++) {
        if (!e->mem[i])
            continue;
        DNNL_CHECK(dnnl_memory_set_data_handle(e->mem[i], ptr[i]));
        args[nargs].arg = arg[i];
        args[nargs].memory = e->mem[i];
        nargs++;
    }
    DNNL_CHECK(dnnl_primitive_execute(e->prim, dnnl_str, nargs, args));
    DNNL_CHECK(dnnl_stream_wait(dnnl_str));
    return 1;
}

int gemm_native_lib(ops_dtype dt, int trans_a, int trans_b, int M, int N,
                    int K, const void *A, int lda, const void *B, int ldb,
                    const void *bias, int accumulate, void *C, ops_dtype cdt,
                    int ldc)
{
    /* oneDNN 2.6 has no fp16 matmul on CPUs */
    return dt == OPS_BF16 && (cdt == OPS_F32 || cdt == OPS_BF16) &&
           gemm_bf16_dnnl(trans_a, trans_b, M, N, K, A, lda, B, ldb, bias,
                          accumulate, C, cdt, ldc);
}

int gemm_native_lib_available(ops_dtype dt, int *preferred)
{
    *preferred = dt == OPS_BF16 && bf16_dnnl_wanted();
    return dt == OPS_BF16;
}

const char *gemm_f32_lib_name(void)
{
    return "dnnl_sgemm";
}

const char *gemm_native_lib_name(ops_dtype dt, int trans_a, int trans_b, int M,
                                 int N, int K, ops_dtype cdt, int accumulate)
{
    static char name[96];
    if (dt != OPS_BF16 || (cdt != OPS_F32 && cdt != OPS_BF16) || M <= 0 ||
        N <= 0 || K <= 0)
        return NULL;
    int lda = trans_a ? M : K, ldb = trans_b ? K : N;
    mm_key key = mm_make_key(trans_a, trans_b, M, N, K, lda, ldb, N, 0,
                             accumulate, cdt);
    mm_entry *e = mm_lookup(&key);
    if (!e->ok)
        return NULL;
    snprintf(name, sizeof name, "oneDNN matmul %s", e->impl);
    return name;
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

const char *gemm_lib_info(const char **warning)
{
    const dnnl_version_t *ver = dnnl_version();
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    snprintf(info, sizeof info, "oneDNN %d.%d.%d dnnl_sgemm, ISA %s",
             ver->major, ver->minor, ver->patch, isa_name(isa));
    /* the ISA values are nested bit sets: avx2 and above include its bits */
    int below_avx2 = ((unsigned)isa & (unsigned)dnnl_cpu_isa_avx2)
                     != (unsigned)dnnl_cpu_isa_avx2;
    int tier = cpu_isa_tier();
    if (warning)
        *warning = NULL;
    if (warning && below_avx2 && tier >= 2) {
        snprintf(warn, sizeof warn,
                 "oneDNN runs its %s kernels but this CPU has %s, so GEMMs "
                 "run several times slower than they could; unset "
                 "ONEDNN_MAX_CPU_ISA (or DNNL_MAX_CPU_ISA) in the environment",
                 isa_name(isa), cpu_isa_tier_name(tier));
        *warning = warn;
    }
    return info;
}
