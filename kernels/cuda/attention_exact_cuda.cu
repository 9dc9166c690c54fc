/*
 * attention_exact_cuda.cu - causal self-attention, forward and backward, by
 * GEMMs over whole T x T blocks: the reference the fused attention_cuda.cu
 * is tested against (tests/t_ops_cuda), not called by the trainer; the
 * GPU's counterpart of cpu/attention_exact_cpu.c.
 *
 * Per (batch, head) S = Q K^T / sqrt(hs), P = causal softmax(S), O = P V,
 * with Q, K and V read in place from the (B,T,NH,3,hs) qkv tensor and O
 * written in place into (B,T,NH*hs). Head h of sequence b starts at
 * element (b*T*NH + h)*3*hs of qkv and its rows are 3*NH*hs apart, so
 * within one sequence the heads are a constant 3*hs apart: each GEMM runs
 * over all NH heads of a sequence as one cublasGemmStridedBatchedEx, B of
 * them per pass (one strided batch over all (b, h) would need the
 * sequence stride T*NH*3*hs to be NH times the head stride 3*hs, true
 * only for T = 1).
 *
 * It takes the fused kernel's arguments (only each row's log-sum-exp, lse,
 * passes from the forward to the backward), but forms one sequence's
 * (NH,T,T) probabilities in a device scratch, and the backward recomputes
 * them from S and lse: the scratch grows with NH*T^2 (805 MB per sequence
 * at T = 4096, NH = 12), which is why the trainer runs the fused kernel.
 * It stays because it is the straightforward algorithm, built from cuBLAS
 * and two small kernels, so a test can tell a fault of the fused kernel's
 * tiling from one of the math. The backward takes D = rowsum(dP * P) from
 * the recomputed P and does not read `out`. t_ops_cuda's checks of it
 * passed on an H100.
 *
 * The GEMMs compute whole T x T blocks: the masked softmax writes zeros
 * above the diagonal, so the upper half of S is computed and discarded,
 * and P V, dS K, dS^T Q, P^T dO read exact zeros there. That spends the
 * FLOPs the CPU's blocking saves, for two library calls per product.
 *
 * bf16/fp16: S and dP come out of the GEMMs in fp32 (inputs in D, fp32
 * accumulation), and the softmax and its backward run in fp32. cuBLAS
 * takes both inputs of a GEMM in one dtype, so P and dS are rounded to D
 * (into scratch, one sequence at a time) before the GEMMs that multiply
 * them with V, dO, K or Q: two roundings the CPU, which widens Q, K, V to
 * fp32, does not make. Their effect is the size of the final rounding of
 * the output to D; t_ops_cuda's tolerances cover it.
 */
#include "cuda_common.h"

/* rows per block for the warp-per-row kernels */
#define ATT_ROWS_PER_BLOCK (TRI_THREADS / 32)

/* Causal softmax, in place, of `rows` rows of length T (the NH heads of
 * one sequence: row r is query t = r % T), zero above the diagonal; one
 * warp per row. lse[r] receives the row's log-sum-exp. With p16, P
 * rounded to dt goes there too. */
static __global__ void causal_softmax_warp_kernel(float *att, float *lse, void *p16,
                                                  ops_dtype dt, int rows, int T)
{
    int row = blockIdx.x * ATT_ROWS_PER_BLOCK + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (row >= rows)
        return; /* the whole warp leaves: the shuffles below stay full */
    int t = row % T;
    int64_t off = (int64_t)row * T;
    float *s = att + off;
    float m = -INFINITY;
    for (int j = lane; j <= t; j += 32)
        m = s[j] > m ? s[j] : m;
    m = warp_allreduce(m, MaxOp());
    float sum = 0.0f;
    for (int j = lane; j <= t; j += 32) {
        float e = expf(s[j] - m);
        s[j] = e;
        sum += e;
    }
    sum = warp_allreduce(sum, SumOp());
    if (lane == 0)
        lse[row] = m + logf(sum);
    float inv = 1.0f / sum;
    // each lane rereads only the elements it wrote above
    for (int j = lane; j < T; j += 32) {
        float p = j <= t ? s[j] * inv : 0.0f;
        s[j] = p;
        if (p16)
            store_f32_cuda(p16, dt, off + j, p);
    }
}

/* dS = P * (dP - rowsum(dP * P)) * scale in place over dP, zero above the
 * diagonal; one warp per row as above. With ds16 and p16, dS and P
 * rounded to dt go there too. */
static __global__ void softmax_bwd_warp_kernel(float *ds, const float *p,
                                               void *ds16, void *p16,
                                               ops_dtype dt, int rows, int T,
                                               float scale)
{
    int row = blockIdx.x * ATT_ROWS_PER_BLOCK + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (row >= rows)
        return;
    int t = row % T;
    int64_t off = (int64_t)row * T;
    float *drow = ds + off;
    const float *prow = p + off;
    float dot = 0.0f;
    for (int j = lane; j <= t; j += 32)
        dot += drow[j] * prow[j];
    dot = warp_allreduce(dot, SumOp());
    for (int j = lane; j < T; j += 32) {
        float pj = j <= t ? prow[j] : 0.0f;
        float v = j <= t ? pj * (drow[j] - dot) * scale : 0.0f;
        drow[j] = v;
        if (ds16) {
            store_f32_cuda(ds16, dt, off + j, v);
            store_f32_cuda(p16, dt, off + j, pj);
        }
    }
}

/* P = exp(S - lse) in place over S (rows of length T as above), zero
 * above the diagonal; one thread per element. */
static __global__ void softmax_recompute_kernel(float *s, const float *lse,
                                                int rows, int T)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)rows * T)
        return;
    int row = (int)(i / T), j = (int)(i % T), t = row % T;
    s[i] = j <= t ? expf(s[i] - lse[row]) : 0.0f;
}

static unsigned row_blocks(int rows)
{
    return (unsigned)((rows + ATT_ROWS_PER_BLOCK - 1) / ATT_ROWS_PER_BLOCK);
}

void attention_exact_fwd_cuda(void *out, float *lse, const void *qkv, ops_dtype dt,
                              int B, int T, int NH, int hs)
{
    if (B <= 0 || T <= 0 || NH <= 0)
        return;
    int ld = 3 * NH * hs, ldo = NH * hs, rows = NH * T;
    int64_t tt = (int64_t)T * T;
    size_t es = esize_cuda(dt);
    float scale = 1.0f / sqrtf((float)hs);
    cudaStream_t s = stream_cuda();
    size_t part = align256((size_t)(NH * tt) * sizeof(float));
    char *buf = (char *)scratch_cuda(SCRATCH_CUDA_ATTENTION,
                                     part + (dt == OPS_F32 ? 0 : (size_t)(NH * tt) * es));
    float *pb = (float *)buf;
    void *p16 = dt == OPS_F32 ? NULL : buf + part;
    for (int b = 0; b < B; b++) {
        const char *q = (const char *)qkv + (size_t)((int64_t)b * T * ld) * es;
        const char *k = q + (size_t)hs * es, *v = q + (size_t)2 * hs * es;
        char *o = (char *)out + (size_t)((int64_t)b * T * ldo) * es;
        // S[h] (T,T) = scale Q[h] K[h]^T, the NH heads of sequence b at once
        gemm_batched_cuda(0, 1, T, T, hs, scale, q, ld, 3 * hs, k, ld, 3 * hs,
                          0.0f, pb, T, tt, NH, dt, OPS_F32);
        causal_softmax_warp_kernel<<<row_blocks(rows), TRI_THREADS, 0, s>>>(
            pb, lse + (int64_t)b * rows, p16, dt, rows, T);
        TRI_CHECK_LAUNCH(causal_softmax_warp_kernel);
        // O[h] (T,hs) = P[h] V[h]
        gemm_batched_cuda(0, 0, T, hs, T, 1.0f, p16 ? p16 : (const void *)pb, T,
                          tt, v, ld, 3 * hs, 0.0f, o, ldo, hs, NH, dt, dt);
    }
}

void attention_exact_bwd_cuda(void *dqkv, const void *dout, const void *qkv,
                              const void *out, const float *lse, ops_dtype dt,
                              int B, int T, int NH, int hs)
{
    if (B <= 0 || T <= 0 || NH <= 0)
        return;
    int ld = 3 * NH * hs, ldo = NH * hs, rows = NH * T;
    int64_t tt = (int64_t)T * T;
    size_t es = esize_cuda(dt);
    float scale = 1.0f / sqrtf((float)hs);
    cudaStream_t s = stream_cuda();
    size_t part32 = align256((size_t)(NH * tt) * sizeof(float));
    size_t part16 = dt == OPS_F32 ? 0 : align256((size_t)(NH * tt) * es);
    char *buf = (char *)scratch_cuda(SCRATCH_CUDA_ATTENTION, 2 * part32 + 2 * part16);
    float *pb = (float *)buf, *ds = (float *)(buf + part32);
    void *ds16 = NULL, *p16 = NULL;
    if (dt != OPS_F32) {
        ds16 = buf + 2 * part32;
        p16 = buf + 2 * part32 + part16;
    }
    unsigned elem_blocks = (unsigned)(((int64_t)rows * T + TRI_THREADS - 1) / TRI_THREADS);
    for (int b = 0; b < B; b++) {
        size_t qoff = (size_t)((int64_t)b * T * ld) * es;
        const char *q = (const char *)qkv + qoff;
        const char *k = q + (size_t)hs * es, *v = q + (size_t)2 * hs * es;
        char *dq = (char *)dqkv + qoff;
        char *dk = dq + (size_t)hs * es, *dv = dq + (size_t)2 * hs * es;
        const char *dob = (const char *)dout + (size_t)((int64_t)b * T * ldo) * es;
        // P[h] (T,T) = exp(scale Q[h] K[h]^T - lse), recomputed
        gemm_batched_cuda(0, 1, T, T, hs, scale, q, ld, 3 * hs, k, ld, 3 * hs,
                          0.0f, pb, T, tt, NH, dt, OPS_F32);
        softmax_recompute_kernel<<<elem_blocks, TRI_THREADS, 0, s>>>(
            pb, lse + (int64_t)b * rows, rows, T);
        TRI_CHECK_LAUNCH(softmax_recompute_kernel);
        // dP[h] (T,T) = dO[h] V[h]^T
        gemm_batched_cuda(0, 1, T, T, hs, 1.0f, dob, ldo, hs, v, ld, 3 * hs,
                          0.0f, ds, T, tt, NH, dt, OPS_F32);
        softmax_bwd_warp_kernel<<<row_blocks(rows), TRI_THREADS, 0, s>>>(
            ds, pb, ds16, p16, dt, rows, T, scale);
        TRI_CHECK_LAUNCH(softmax_bwd_warp_kernel);
        const void *dsa = ds16 ? ds16 : (const void *)ds;
        const void *pa = p16 ? p16 : (const void *)pb;
        // dQ[h] (T,hs) = dS[h] K[h]
        gemm_batched_cuda(0, 0, T, hs, T, 1.0f, dsa, T, tt, k, ld, 3 * hs,
                          0.0f, dq, ld, 3 * hs, NH, dt, dt);
        // dK[h] (T,hs) = dS[h]^T Q[h]
        gemm_batched_cuda(1, 0, T, hs, T, 1.0f, dsa, T, tt, q, ld, 3 * hs,
                          0.0f, dk, ld, 3 * hs, NH, dt, dt);
        // dV[h] (T,hs) = P[h]^T dO[h]
        gemm_batched_cuda(1, 0, T, hs, T, 1.0f, pa, T, tt, dob, ldo, hs,
                          0.0f, dv, ld, 3 * hs, NH, dt, dt);
    }
}
