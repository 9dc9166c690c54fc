/*
 * xent_cuda.cu - softmax cross-entropy in the three vocab-parallel phases.
 *
 * The twin of xent_cpu.c (Megatron's vocab-parallel cross-entropy): a rank
 * sees only its columns [v0, v0+Vl) of the logits, so the row max and the
 * sum of exponentials are per shard, combined by the caller (MAX, then
 * SUM) between the phases. One block per row: a row is up to 50k wide,
 * its elements stride over the block's threads, and the block reduction
 * combines the threads in a fixed order. The sum of exponentials is kept
 * in fp64 as on the CPU, so a wide row loses no precision; the stored
 * statistics are fp32.
 */
#include "cuda_common.h"

/* This shard's column of row i's target, or -1 if another shard owns it. */
static __device__ __forceinline__ int64_t target_col(const int32_t *targets,
                                                     int i, int v0, int Vl)
{
    int64_t j = (int64_t)targets[i] - v0;
    return j >= 0 && j < Vl ? j : -1;
}

static __global__ void xent_max_kernel(float *rowmax, const void *logits,
                                       ops_dtype dt, int Vl)
{
    // an empty shard reports -inf, the identity of MAX
    int i = blockIdx.x;
    int64_t off = (int64_t)i * Vl;
    float m = -INFINITY;
    for (int j = threadIdx.x; j < Vl; j += blockDim.x) {
        float x = load_f32_cuda(logits, dt, off + j);
        m = x > m ? x : m;
    }
    m = block_allreduce(m, MaxOp(), -INFINITY);
    if (threadIdx.x == 0)
        rowmax[i] = m;
}

void xent_max_cuda(float *rowmax, const void *logits, ops_dtype dt, int N,
                   int Vl)
{
    // logits is (N,Vl)
    if (N <= 0)
        return;
    xent_max_kernel<<<N, TRI_THREADS, 0, stream_cuda()>>>(rowmax, logits, dt, Vl);
    TRI_CHECK_LAUNCH(xent_max_kernel);
}

static __global__ void xent_sumexp_kernel(float *sumexp, float *target_logit,
                                          const void *logits, ops_dtype dt,
                                          const float *rowmax,
                                          const int32_t *targets, int v0,
                                          int Vl)
{
    int i = blockIdx.x;
    int64_t off = (int64_t)i * Vl;
    float m = rowmax[i];
    double s = 0.0;
    for (int j = threadIdx.x; j < Vl; j += blockDim.x)
        s += expf(load_f32_cuda(logits, dt, off + j) - m);
    s = block_allreduce(s, SumOp(), 0.0);
    if (threadIdx.x == 0) {
        sumexp[i] = (float)s;
        int64_t t = target_col(targets, i, v0, Vl);
        target_logit[i] = t >= 0 ? load_f32_cuda(logits, dt, off + t) : 0.0f;
    }
}

void xent_sumexp_cuda(float *sumexp, float *target_logit, const void *logits,
                      ops_dtype dt, const float *rowmax,
                      const int32_t *targets, int v0, int N, int Vl)
{
    if (N <= 0)
        return;
    xent_sumexp_kernel<<<N, TRI_THREADS, 0, stream_cuda()>>>(
        sumexp, target_logit, logits, dt, rowmax, targets, v0, Vl);
    TRI_CHECK_LAUNCH(xent_sumexp_kernel);
}

static __global__ void xent_finish_kernel(float *losses, void *dlogits,
                                          const void *logits, ops_dtype dt,
                                          const float *rowmax,
                                          const float *sumexp,
                                          const float *target_logit,
                                          const int32_t *targets, int v0,
                                          int Vl, float grad_scale)
{
    int i = blockIdx.x;
    float m = rowmax[i];
    if (threadIdx.x == 0)
        losses[i] = logf(sumexp[i]) + m - target_logit[i];
    if (!dlogits)
        return;
    // dlogits may alias logits: each element is read, then overwritten, by
    // one thread
    int64_t off = (int64_t)i * Vl;
    float inv = 1.0f / sumexp[i];
    int64_t t = target_col(targets, i, v0, Vl);
    for (int j = threadIdx.x; j < Vl; j += blockDim.x) {
        float p = expf(load_f32_cuda(logits, dt, off + j) - m) * inv;
        store_f32_cuda(dlogits, dt, off + j, (p - (j == t ? 1.0f : 0.0f)) * grad_scale);
    }
}

void xent_finish_cuda(float *losses, void *dlogits, const void *logits,
                      ops_dtype dt, const float *rowmax, const float *sumexp,
                      const float *target_logit, const int32_t *targets,
                      int v0, int N, int Vl, float grad_scale)
{
    if (N <= 0)
        return;
    xent_finish_kernel<<<N, TRI_THREADS, 0, stream_cuda()>>>(
        losses, dlogits, logits, dt, rowmax, sumexp, target_logit, targets, v0,
        Vl, grad_scale);
    TRI_CHECK_LAUNCH(xent_finish_kernel);
}
