/*
 * adamw_cuda.cu - one AdamW step on flat blocks of fp32 master weights.
 *
 * The twin of adamw_cpu.c: the per-element update is elem_adamw, the bias
 * corrections are computed once per call on the host in fp64 (1 - beta^t
 * cancels badly in fp32 while beta2^t is near 1), the gradient is widened
 * and unscaled as it is read, and the weight copy the next forward pass
 * reads is refreshed in the same sweep. nvcc fuses multiply-adds where the
 * CPU build does not, so the updated weights agree with the CPU's to a few
 * ulp, not bit for bit.
 *
 * Two launches of the same element: adamw_cuda on one block, and
 * adamw_multi_cuda on every parameter's rows at once, through a table of
 * them (multi_cuda.cu), one block per chunk. Both go through
 * adamw_element, so their bits are the same.
 */
#include "cuda_common.h"

#include <stdlib.h>

/* What every element of one step shares. */
struct AdamwStep {
    float lr, beta1, beta2, eps, grad_scale, bc1, bc2;
};

static AdamwStep adamw_step_of(const ops_adamw_args *a)
{
    return AdamwStep{ a->lr, a->beta1, a->beta2, a->eps, a->grad_scale,
                      (float)(1.0 - pow((double)a->beta1, a->step)),
                      (float)(1.0 - pow((double)a->beta2, a->step)) };
}

static __device__ __forceinline__ void adamw_element(float *master, const void *grad,
                                                     ops_dtype gdt, float *m, float *v,
                                                     void *wcopy, ops_dtype wdt, int64_t i,
                                                     float wd, const AdamwStep &s)
{
    float g = load_f32_cuda(grad, gdt, i) * s.grad_scale;
    float mi = m[i], vi = v[i];
    float w = elem_adamw(master[i], g, &mi, &vi, s.lr, s.beta1, s.beta2, s.eps, wd,
                         s.bc1, s.bc2);
    master[i] = w;
    m[i] = mi;
    v[i] = vi;
    if (wcopy)
        store_f32_cuda(wcopy, wdt, i, w);
}

static __global__ void adamw_kernel(float *master, const void *grad,
                                    ops_dtype gdt, float *m, float *v,
                                    void *wcopy, ops_dtype wdt, int64_t n,
                                    float wd, AdamwStep s)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        adamw_element(master, grad, gdt, m, v, wcopy, wdt, i, wd, s);
}

void adamw_cuda(float *master, const void *grad, ops_dtype gdt, float *m,
                float *v, void *wcopy, ops_dtype wdt, int64_t n,
                const ops_adamw_args *a)
{
    if (n <= 0)
        return;
    adamw_kernel<<<grid_for(n, TRI_THREADS), TRI_THREADS, 0, stream_cuda()>>>(
        master, grad, gdt, m, v, wcopy, wdt, n, a->weight_decay, adamw_step_of(a));
    TRI_CHECK_LAUNCH(adamw_kernel);
}

/* ---- every segment in one launch ----------------------------------------- */

/* One segment of the table, on the device. No padding bytes: the table
 * is kept when it compares equal to the last one, byte for byte, and a
 * padding byte's value is unspecified (zero stays, for the compare). */
struct AdamwRecord {
    float *master, *m, *v;
    const void *grad;
    void *wcopy;
    ops_dtype gdt, wdt;
    float wd;
    int32_t zero;
};
static_assert(sizeof(AdamwRecord) == 5 * sizeof(void *) + 16, "AdamwRecord has padding");

/* Block c updates chunk c (grid-stride over the chunks). */
static __global__ void adamw_multi_kernel(const AdamwRecord *rec, const multi_chunk *chunks,
                                          int64_t nchunks, AdamwStep s)
{
    for (int64_t c = blockIdx.x; c < nchunks; c += gridDim.x) {
        multi_chunk ch = chunks[c];
        AdamwRecord r = rec[ch.t];
        for (int64_t i = ch.start + threadIdx.x; i < ch.start + ch.n; i += blockDim.x)
            adamw_element(r.master, r.grad, r.gdt, r.m, r.v, r.wcopy, r.wdt, i, r.wd, s);
    }
}

void adamw_multi_cuda(const ops_adamw_seg *seg, int count, const ops_adamw_args *a)
{
    AdamwRecord *rec = (AdamwRecord *)calloc((size_t)count, sizeof *rec);
    int64_t *n = (int64_t *)calloc((size_t)count, sizeof *n);
    if (!rec || !n)
        ops_fatalf(__FILE__, __LINE__, "adamw_multi_cuda: out of host memory (%d segments)", count);
    for (int i = 0; i < count; i++) {
        const ops_adamw_seg *g = &seg[i];
        rec[i] = AdamwRecord{ (float *)g->master.data, (float *)g->m.data, (float *)g->v.data,
                              g->grad.data, g->wcopy.data, g->grad.dtype, g->wcopy.dtype,
                              g->weight_decay, 0 };
        n[i] = g->master.n;
    }
    multi_table t = multi_table_cuda(SCRATCH_CUDA_ADAMW_TABLE, rec, sizeof *rec, n, count);
    free(rec);
    free(n);
    if (t.nchunks == 0)
        return;
    unsigned blocks = (unsigned)(t.nchunks < TRI_MAX_BLOCKS ? t.nchunks : TRI_MAX_BLOCKS);
    adamw_multi_kernel<<<blocks, TRI_THREADS, 0, stream_cuda()>>>(
        (const AdamwRecord *)t.records, t.chunks, t.nchunks, adamw_step_of(a));
    TRI_CHECK_LAUNCH(adamw_multi_kernel);
}
