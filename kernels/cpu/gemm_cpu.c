/*
 * gemm_cpu.c - the GEMMs every CPU op calls, and what they run on.
 *
 * configure picks the library (m4/tri_gemm.m4): oneDNN's dnnl_sgemm when
 * present, else any CBLAS. Both take row-major operands directly, so no op
 * transposes anything by hand. The library code sits under `#if` because
 * only one library's header exists on a given machine.
 *
 * Low precision (gemm_cpu). bf16 GEMMs run on oneDNN's matmul primitive:
 * bf16 inputs, fp32 accumulation, an fp32 or bf16 result, bias and the
 * "+=" of weight gradients (a sum post-op) fused in, but only where the
 * CPU has AMX. There oneDNN runs its AMX kernel (brg:avx512_core_amx_bf16)
 * at 3-6x sgemm on GPT-2's layer shapes, 4x over a whole step
 * (bench/gemm_bench.c, 2 threads: 1400 vs 350 GFLOP/s). Everywhere else
 * sgemm on widened copies is faster: masked to AVX512-BF16, oneDNN's bf16
 * kernel runs at 0.6x sgemm (215 vs 350) while the widened path keeps
 * 0.9x; on AVX-512 without bf16 (Skylake to Ice Lake) oneDNN 2.6 picks
 * "gemm:jit" and crawls at 0.2 GFLOP/s. The choice is made once, from the
 * ISA oneDNN reports, so a run takes one path throughout and stays
 * bitwise reproducible. A reference implementation ("ref:any", for
 * layouts no kernel takes) is refused in favour of the fp32 path too.
 * Creating a primitive costs far more than a small GEMM, so primitives are
 * kept in a 64-entry cache keyed by everything that shapes them (sizes,
 * transposes, leading dimensions, output dtype, bias, accumulate) with
 * least-recently-used eviction: a training step meets about 20 keys, all
 * created in the first step. The scratchpad is ours (user mode), one
 * growing buffer, so executing allocates nothing. A primitive is tuned for
 * the thread count at its creation (oneDNN's rule), which suits a process
 * that sets OMP_NUM_THREADS once.
 *
 * oneDNN 2.6 has no fp16 matmul on CPUs (the primitive descriptor reports
 * "unimplemented"), and a CBLAS has no bf16 GEMM (Debian's OpenBLAS lacks
 * sbgemm), so those cases widen panels of A and B to fp32 in scratch (exact:
 * fp32 holds every bf16 and fp16 value) and call sgemm, accumulating in
 * fp32 and rounding C once. Panels are bounded (PANEL_FLOATS) so the 50k
 * vocabulary GEMMs do not need a 200 MB copy, and each panel is widened
 * once per pass where the loop order allows it.
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
            float *c;
            int ldc32;
            if (cdt == OPS_F32) {
                c = (float *)cblk;
                ldc32 = ldc;
            } else {
                c = scratch_cpu(SCRATCH_GEMM_C, (size_t)mm * nn * sizeof(float));
                ldc32 = nn;
                if (accumulate)
                    cast_2d_cpu(c, OPS_F32, nn, cblk, cdt, ldc, mm, nn);
            }
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
            if (bias)
                add_bias(c, ldc32, bias, dt, n0, mm, nn);
            if (cdt != OPS_F32)
                cast_2d_cpu(cblk, cdt, ldc, c, OPS_F32, ldc32, mm, nn);
        }
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

#if TRI_GEMM_DNNL
static int gemm_bf16_dnnl(int ta, int tb, int M, int N, int K,
                          const void *A, int lda, const void *B, int ldb,
                          const void *bias, int accumulate, void *C,
                          ops_dtype cdt, int ldc);
#endif

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
#if TRI_GEMM_DNNL
    if (dt == OPS_BF16 && (cdt == OPS_F32 || cdt == OPS_BF16) &&
        gemm_bf16_dnnl(trans_a, trans_b, M, N, K, A, lda, B, ldb, bias,
                       accumulate, C, cdt, ldc))
        return;
#endif
    gemm_widened(dt, trans_a, trans_b, M, N, K, A, lda, B, ldb, bias,
                 accumulate, C, cdt, ldc);
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
        store_f32_cpu(a, dtype, i, (float)(i % 7) * 0.25f - 0.75f);
        store_f32_cpu(b, dtype, i, (float)(i % 5) * 0.5f - 1.0f);
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

/* Whether bf16 GEMMs go to oneDNN at all: only with AMX-BF16 (see the top
 * of the file). Decided on first use from the ISA oneDNN will run, which
 * ONEDNN_MAX_CPU_ISA can lower. */
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

/* Runs the bf16 GEMM through a cached matmul primitive; returns 0 (and
 * does nothing) where oneDNN is not wanted or has no implementation for
 * it. */
static int gemm_bf16_dnnl(int ta, int tb, int M, int N, int K,
                          const void *A, int lda, const void *B, int ldb,
                          const void *bias, int accumulate, void *C,
                          ops_dtype cdt, int ldc)
{
    if (!bf16_dnnl_wanted())
        return 0;
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

const char *gemm_kernel_name_cpu(ops_dtype dt, int trans_a, int trans_b,
                                 int M, int N, int K, ops_dtype cdt,
                                 int accumulate)
{
    static char name[96];
    if (dt == OPS_F32 && cdt == OPS_F32)
        return "dnnl_sgemm";
    if (dt == OPS_BF16 && (cdt == OPS_F32 || cdt == OPS_BF16) && M > 0 &&
        N > 0 && K > 0 && bf16_dnnl_wanted()) {
        int lda = trans_a ? M : K, ldb = trans_b ? K : N;
        mm_key key = mm_make_key(trans_a, trans_b, M, N, K, lda, ldb, N, 0,
                                 accumulate, cdt);
        mm_entry *e = mm_lookup(&key);
        if (e->ok) {
            snprintf(name, sizeof name, "oneDNN matmul %s", e->impl);
            return name;
        }
    }
    return "dnnl_sgemm on fp32 copies";
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

const char *gemm_kernel_name_cpu(ops_dtype dt, int trans_a, int trans_b,
                                 int M, int N, int K, ops_dtype cdt,
                                 int accumulate)
{
    (void)trans_a; (void)trans_b; (void)M; (void)N; (void)K; (void)cdt;
    (void)accumulate;
    return dt == OPS_F32 && cdt == OPS_F32 ? "cblas_sgemm"
                                           : "cblas_sgemm on fp32 copies";
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
