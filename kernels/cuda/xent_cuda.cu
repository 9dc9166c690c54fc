/*
 * xent_cuda.cu - softmax cross-entropy: the three vocab-parallel phases,
 * and the one-shard path fused into two passes over the logits.
 *
 * Run on an NVIDIA H100 on 2026-11-27 (bench/gpu_check.sh, the code of
 * commit ac94e32): t_ops_cuda 644 ok, t_gpu 5 ok.
 *
 * The twin of xent_cpu.c (Megatron's vocab-parallel cross-entropy): a rank
 * sees only its columns [v0, v0+Vl) of the logits, so the row max and the
 * sum of exponentials are per shard, combined by the caller (MAX, then
 * SUM) between the phases. One block per row: a row is up to 128k wide,
 * its 16-byte packs (cuda_common.h) stride over the block's 512 threads
 * (for_row_packs, which keeps 4 loads per thread in flight), and
 * the block reduction combines the threads in a fixed order. The sum of
 * exponentials is kept in fp64 as on the CPU, so a wide row loses no
 * precision; the stored statistics are fp32.
 *
 * Why it is fast: the cost is the bytes of the logits, (N, V) fp32 in the
 * model (GPT-2 small's step: 16384 x 50304, 3.3 GB). The phases read them
 * three times and write them once (the gradient overwrites them). With
 * one shard, xent_fused_cuda reads each row twice, not three times: its
 * first pass keeps a running max and a sum of exponentials rescaled
 * whenever the max grows (the online softmax), so the max needs no pass
 * of its own; its second pass writes the gradient. A block's second pass
 * follows its first at once, and the model's chunk of rows (67 MB for
 * GPT-2) was just written by the LM head's GEMM, so some of the reads may
 * come from the 50 MB L2. Both paths load 16 bytes per instruction where
 * the rows are aligned (packs_fit; otherwise one element at a time, the
 * same code), 4 packs in flight per thread (for_row_packs).
 *
 * The fused sum is therefore not the phases' bits: each thread's terms
 * were taken against its own running max and rescaled to the row's once
 * (one more fp32 rounding of exp per rescale); they agree to fp32
 * rounding, and each path gives the same bits every run.
 *
 * xent_fused_narrow_cuda (TRIDENT_FUSED, fused_cuda.cu) is the fused path
 * with the gradient rounded to the model's 16-bit compute dtype and
 * written over the fp32 logits' own bytes (row_dlogits_narrow), so the
 * head's backward reads it as it is (matmul_bwd_ld_cuda): 1.6 GB written
 * for GPT-2's step instead of 3.3, and no rounding pass after it.
 */
#include "cuda_common.h"

/* This shard's column of row i's target, or -1 if another shard owns it. */
static __device__ __forceinline__ int64_t target_col(const int32_t *targets,
                                                     int i, int v0, int Vl)
{
    int64_t j = (int64_t)targets[i] - v0;
    return j >= 0 && j < Vl ? j : -1;
}

/* The max of a pack, as the CPU's `x > m ? x : m` (a NaN is passed over). */
template <int VEC>
static __device__ __forceinline__ float pack_max(float m, const float (&x)[VEC])
{
#pragma unroll
    for (int e = 0; e < VEC; e++)
        m = MaxOp()(m, x[e]);
    return m;
}

/* Threads per row (one block), and the packs a thread loads before it
 * uses the first. The model's head takes its rows in chunks of 16M
 * logits (333 rows of GPT-2's 50304, 130 of Llama 3's 128256), so a
 * launch has only that many blocks, 2.5 per SM of an H100. With 256
 * threads and one 16-byte load in flight each, that is about 10 KB per
 * SM on the way, by Little's law too little to cover the memory latency
 * at 3 TB/s (about 2.4 MB in flight over the GPU). 512 threads with 4
 * loads in flight each put 8 times as many bytes on the way, and the
 * 333 blocks stay resident at once (fp32 packs take 40 registers a
 * thread: 3 blocks an SM). Not measured alone: [log] profile read 11.8
 * ms a step for the cross-entropy with either, a figure its polling
 * host wait inflates (doc/gpu.md). */
#define XENT_THREADS 512
#define XENT_UNROLL 4

/* f(k, x) for each of this thread's packs k of a row (threadIdx.x,
 * + blockDim.x, ...: the order of the sums), x the pack's elements; a
 * row's packs are [k0, k0 + packs) of p. The loads of XENT_UNROLL packs
 * are issued before f sees the first. f may overwrite pack k0 + k of p:
 * no other thread reads it. */
template <ops_dtype DT, int VEC, typename F>
static __device__ __forceinline__ void for_row_packs(const void *p, int64_t k0, int packs, F f)
{
    int step = (int)blockDim.x;
    for (int k = threadIdx.x; k < packs; k += XENT_UNROLL * step) {
        float x[XENT_UNROLL][VEC];
#pragma unroll
        for (int u = 0; u < XENT_UNROLL; u++)
            if (k + u * step < packs)
                load_pack<DT, VEC>(x[u], p, k0 + k + u * step);
#pragma unroll
        for (int u = 0; u < XENT_UNROLL; u++)
            if (k + u * step < packs)
                f(k + u * step, x[u]);
    }
}

/* Row i's packs are [i*packs, (i+1)*packs) of the tensor: Vl is a whole
 * number of packs (packs_fit) when VEC > 1. */
template <ops_dtype DT, int VEC>
static __global__ void xent_max_kernel(float *rowmax, const void *logits, int Vl)
{
    // an empty shard reports -inf, the identity of MAX
    int packs = Vl / VEC;
    int64_t k0 = (int64_t)blockIdx.x * packs;
    float m = -INFINITY;
    for_row_packs<DT, VEC>(logits, k0, packs, [&](int, const float (&x)[VEC]) {
        m = pack_max(m, x);
    });
    m = block_allreduce(m, MaxOp(), -INFINITY);
    if (threadIdx.x == 0)
        rowmax[blockIdx.x] = m;
}

void xent_max_cuda(float *rowmax, const void *logits, ops_dtype dt, int N,
                   int Vl)
{
    // logits is (N,Vl)
    if (N <= 0)
        return;
#define XENT_MAX(DT, VEC)                                                     \
    xent_max_kernel<DT, VEC><<<N, XENT_THREADS, 0, stream_cuda()>>>(rowmax, logits, Vl)
    DISPATCH_PACKED(dt, packs_fit(dt, Vl, logits), XENT_MAX);
#undef XENT_MAX
    TRI_CHECK_LAUNCH(xent_max_kernel);
}

/* Element j of row i (of width Vl), for the one thread that reads a
 * target logit. */
template <ops_dtype DT>
static __device__ __forceinline__ float logit_at(const void *logits, int i, int Vl, int64_t j)
{
    float x[1];
    load_pack<DT, 1>(x, logits, (int64_t)i * Vl + j);
    return x[0];
}

template <ops_dtype DT, int VEC>
static __global__ void xent_sumexp_kernel(float *sumexp, float *target_logit,
                                          const void *logits,
                                          const float *rowmax,
                                          const int32_t *targets, int v0,
                                          int Vl)
{
    int i = blockIdx.x, packs = Vl / VEC;
    int64_t k0 = (int64_t)i * packs;
    float m = rowmax[i];
    double s = 0.0;
    for_row_packs<DT, VEC>(logits, k0, packs, [&](int, const float (&x)[VEC]) {
#pragma unroll
        for (int e = 0; e < VEC; e++)
            s += expf(x[e] - m);
    });
    s = block_allreduce(s, SumOp(), 0.0);
    if (threadIdx.x == 0) {
        sumexp[i] = (float)s;
        int64_t t = target_col(targets, i, v0, Vl);
        target_logit[i] = t >= 0 ? logit_at<DT>(logits, i, Vl, t) : 0.0f;
    }
}

void xent_sumexp_cuda(float *sumexp, float *target_logit, const void *logits,
                      ops_dtype dt, const float *rowmax,
                      const int32_t *targets, int v0, int N, int Vl)
{
    if (N <= 0)
        return;
#define XENT_SUMEXP(DT, VEC)                                                  \
    xent_sumexp_kernel<DT, VEC><<<N, XENT_THREADS, 0, stream_cuda()>>>(        \
        sumexp, target_logit, logits, rowmax, targets, v0, Vl)
    DISPATCH_PACKED(dt, packs_fit(dt, Vl, logits), XENT_SUMEXP);
#undef XENT_SUMEXP
    TRI_CHECK_LAUNCH(xent_sumexp_kernel);
}

/* g = (softmax - onehot(t)) * grad_scale for pack k of a row (elements
 * x), in fp32: the loss scale and 1/N multiply before the one rounding to
 * the gradient's dtype, so fp16's scaled gradient does not flush to 0. */
template <int VEC>
static __device__ __forceinline__ void pack_dlogits(float (&g)[VEC], const float (&x)[VEC],
                                                    int k, float m, float inv, int64_t t,
                                                    float grad_scale)
{
#pragma unroll
    for (int e = 0; e < VEC; e++) {
        float p = expf(x[e] - m) * inv;
        int64_t j = (int64_t)k * VEC + e;
        g[e] = (p - (j == t ? 1.0f : 0.0f)) * grad_scale;
    }
}

/* dlogits = (softmax - onehot(t)) * grad_scale over one row, whose packs
 * are [k0, k0 + packs); t is the target's column in the row, or -1.
 * dlogits may alias logits: each pack is read, then overwritten, by one
 * thread. */
template <ops_dtype DT, int VEC>
static __device__ void row_dlogits(void *dlogits, const void *logits, int64_t k0,
                                   int packs, float m, float inv, int64_t t,
                                   float grad_scale)
{
    for_row_packs<DT, VEC>(logits, k0, packs, [&](int k, const float (&x)[VEC]) {
        float g[VEC];
        pack_dlogits(g, x, k, m, inv, t, grad_scale);
        store_pack<DT, VEC>(dlogits, k0 + k, g);
    });
}

/* row_dlogits from fp32 logits to a gradient of the 16-bit dtype GT, over
 * the row's own bytes: pack k of the gradient (VEC elements of 2 bytes)
 * lands on the first half of the bytes of fp32 pack k, i.e. inside fp32
 * pack k/2, which another thread may read. So the row goes in stretches
 * of XENT_UNROLL * blockDim.x packs, every thread loading its packs of a
 * stretch before a barrier and storing after it: a stretch from pack b
 * writes into fp32 packs [b/2, b/2 + stretch/2), all below b + stretch,
 * so loaded by this stretch or an earlier one, never by a later one. The
 * row's gradient starts at element 2*k0*VEC of GT: rows 2V elements
 * apart. The loop is uniform over the block (the barrier needs every
 * thread). */
template <ops_dtype GT, int VEC>
static __device__ void row_dlogits_narrow(void *dlogits, const float *logits, int64_t k0,
                                          int packs, float m, float inv, int64_t t,
                                          float grad_scale)
{
    int step = (int)blockDim.x;
    for (int b = 0; b < packs; b += XENT_UNROLL * step) {
        float x[XENT_UNROLL][VEC];
#pragma unroll
        for (int u = 0; u < XENT_UNROLL; u++) {
            int k = b + u * step + threadIdx.x;
            if (k < packs)
                load_pack<OPS_F32, VEC>(x[u], logits, k0 + k);
        }
        __syncthreads();
#pragma unroll
        for (int u = 0; u < XENT_UNROLL; u++) {
            int k = b + u * step + threadIdx.x;
            if (k < packs) {
                float g[VEC];
                pack_dlogits(g, x[u], k, m, inv, t, grad_scale);
                store_pack<GT, VEC>(dlogits, 2 * k0 + k, g);
            }
        }
    }
}

template <ops_dtype DT, int VEC>
static __global__ void xent_finish_kernel(float *losses, void *dlogits,
                                          const void *logits,
                                          const float *rowmax,
                                          const float *sumexp,
                                          const float *target_logit,
                                          const int32_t *targets, int v0,
                                          int Vl, float grad_scale)
{
    int i = blockIdx.x, packs = Vl / VEC;
    float m = rowmax[i];
    if (threadIdx.x == 0)
        losses[i] = logf(sumexp[i]) + m - target_logit[i];
    if (dlogits)
        row_dlogits<DT, VEC>(dlogits, logits, (int64_t)i * packs, packs, m,
                             1.0f / sumexp[i], target_col(targets, i, v0, Vl),
                             grad_scale);
}

void xent_finish_cuda(float *losses, void *dlogits, const void *logits,
                      ops_dtype dt, const float *rowmax, const float *sumexp,
                      const float *target_logit, const int32_t *targets,
                      int v0, int N, int Vl, float grad_scale)
{
    if (N <= 0)
        return;
#define XENT_FINISH(DT, VEC)                                                  \
    xent_finish_kernel<DT, VEC><<<N, XENT_THREADS, 0, stream_cuda()>>>(        \
        losses, dlogits, logits, rowmax, sumexp, target_logit, targets, v0,  \
        Vl, grad_scale)
    DISPATCH_PACKED(dt, packs_fit(dt, Vl, logits, dlogits), XENT_FINISH);
#undef XENT_FINISH
    TRI_CHECK_LAUNCH(xent_finish_kernel);
}

/* ---- one shard: two passes ------------------------------------------------ */

/* Adds a pack to a running (max m, sum s of exp(x - m)): when the pack
 * raises the max, the sum so far is rescaled to the new one first. The
 * first pack finds m = -inf and s = 0, and 0 * exp(-inf) is 0. A -inf
 * logit adds nothing even while m is still -inf (exp(-inf - -inf) would
 * be NaN); a NaN logit makes the sum NaN, as on the CPU. */
template <int VEC>
static __device__ __forceinline__ void online_add(float &m, double &s, const float (&x)[VEC])
{
    float pm = pack_max(m, x);
    if (pm > m) {
        s *= (double)expf(m - pm);
        m = pm;
    }
#pragma unroll
    for (int e = 0; e < VEC; e++)
        s += x[e] == -INFINITY ? 0.0 : (double)expf(x[e] - m);
}

/* xent_max, xent_sumexp and xent_finish of one row with v0 = 0, in two
 * passes: pass 1 online_add over the thread's packs, the block's max M,
 * each thread's sum rescaled to M (a thread that saw no finite logit
 * holds 0, whatever its max) and summed; pass 2 row_dlogits. The target
 * logit is read before the reductions, whose barriers keep it ahead of
 * any thread overwriting the row. */
template <ops_dtype DT, int VEC, ops_dtype GT>
static __global__ void xent_fused_kernel(float *losses, void *dlogits,
                                         const void *logits, float *rowmax,
                                         float *sumexp, float *target_logit,
                                         const int32_t *targets, int V,
                                         float grad_scale)
{
    int i = blockIdx.x, packs = V / VEC;
    int64_t k0 = (int64_t)i * packs, t = target_col(targets, i, 0, V);
    float tl = 0.0f;
    if (threadIdx.x == 0 && t >= 0)
        tl = logit_at<DT>(logits, i, V, t);

    float m = -INFINITY;
    double s = 0.0;
    for_row_packs<DT, VEC>(logits, k0, packs, [&](int, const float (&x)[VEC]) {
        online_add(m, s, x);
    });
    float M = block_allreduce(m, MaxOp(), -INFINITY);
    s = s == 0.0 ? 0.0 : s * (double)expf(m - M);
    float S = (float)block_allreduce(s, SumOp(), 0.0);

    if (threadIdx.x == 0) {
        rowmax[i] = M;
        sumexp[i] = S;
        target_logit[i] = tl;
        losses[i] = logf(S) + M - tl;
    }
    if (!dlogits)
        return;
    if (GT == DT)
        row_dlogits<DT, VEC>(dlogits, logits, k0, packs, M, 1.0f / S, t, grad_scale);
    else
        row_dlogits_narrow<GT, VEC>(dlogits, (const float *)logits, k0, packs, M, 1.0f / S,
                                    t, grad_scale);
}

void xent_fused_cuda(float *losses, void *dlogits, const void *logits,
                     ops_dtype dt, float *rowmax, float *sumexp,
                     float *target_logit, const int32_t *targets, int N, int V,
                     float grad_scale)
{
    if (N <= 0)
        return;
#define XENT_FUSED(DT, VEC)                                                   \
    xent_fused_kernel<DT, VEC, DT><<<N, XENT_THREADS, 0, stream_cuda()>>>(     \
        losses, dlogits, logits, rowmax, sumexp, target_logit, targets, V,   \
        grad_scale)
    DISPATCH_PACKED(dt, packs_fit(dt, V, logits, dlogits), XENT_FUSED);
#undef XENT_FUSED
    TRI_CHECK_LAUNCH(xent_fused_kernel);
}

/* ---- one shard, the gradient in the compute dtype ------------------------- */

void xent_fused_narrow_cuda(float *losses, float *logits, ops_dtype gdt,
                            float *rowmax, float *sumexp, float *target_logit,
                            const int32_t *targets, int N, int V, float grad_scale)
{
    if (N <= 0)
        return;
#define XENT_NARROW(GT, VEC)                                                  \
    xent_fused_kernel<OPS_F32, VEC, GT><<<N, XENT_THREADS, 0, stream_cuda()>>>( \
        losses, logits, logits, rowmax, sumexp, target_logit, targets, V,    \
        grad_scale)
    const int F32_PACK = 16 / sizeof(float);
    if (packs_fit(OPS_F32, V, logits)) {
        if (gdt == OPS_BF16)
            XENT_NARROW(OPS_BF16, F32_PACK);
        else
            XENT_NARROW(OPS_F16, F32_PACK);
    } else {
        if (gdt == OPS_BF16)
            XENT_NARROW(OPS_BF16, 1);
        else
            XENT_NARROW(OPS_F16, 1);
    }
#undef XENT_NARROW
    TRI_CHECK_LAUNCH(xent_fused_kernel);
}
