/*
 * layernorm_cuda.cu - LayerNorm forward and backward over the last dimension.
 *
 * The twin of layernorm_cpu.c, split the same way by what each part sums
 * over. Sums over channels (the statistics, dinp's two means) take one
 * warp per row: the row's C elements stride over the 32 lanes and a
 * shuffle butterfly combines them, so a row never needs shared memory or
 * a block barrier. Sums over rows (dw, db) take the two-pass column sums
 * of matmul_cuda.cu: chunks of rows in order, then the chunks in order,
 * no atomics, the same bits every run. The formulas are the CPU's,
 * including the two-pass variance.
 */
#include "cuda_common.h"

/* rows per block for the warp-per-row kernels */
#define LN_ROWS_PER_BLOCK (TRI_THREADS / 32)

static __global__ void layernorm_fwd_warp_kernel(void *out, float *mean,
                                                 float *rstd, const void *inp,
                                                 const void *w, const void *b,
                                                 ops_dtype dt, int N, int C)
{
    int row = blockIdx.x * LN_ROWS_PER_BLOCK + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (row >= N)
        return; /* the whole warp leaves: the shuffles below stay full */
    int64_t off = (int64_t)row * C;
    float m = 0.0f;
    for (int c = lane; c < C; c += 32)
        m += load_f32_cuda(inp, dt, off + c);
    m = warp_allreduce(m, SumOp()) / (float)C;
    float var = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float d = load_f32_cuda(inp, dt, off + c) - m;
        var += d * d;
    }
    var = warp_allreduce(var, SumOp()) / (float)C;
    float s = 1.0f / sqrtf(var + TRI_LN_EPS);
    for (int c = lane; c < C; c += 32) {
        float x = load_f32_cuda(inp, dt, off + c);
        float y = (x - m) * s * load_f32_cuda(w, dt, c) + load_f32_cuda(b, dt, c);
        store_f32_cuda(out, dt, off + c, y);
    }
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = s;
    }
}

void layernorm_fwd_cuda(void *out, float *mean, float *rstd, const void *inp,
                        const void *w, const void *b, ops_dtype dt, int N,
                        int C)
{
    // inp, out are (N,C); mean, rstd are (N)
    if (N <= 0)
        return;
    unsigned blocks = (unsigned)((N + LN_ROWS_PER_BLOCK - 1) / LN_ROWS_PER_BLOCK);
    layernorm_fwd_warp_kernel<<<blocks, TRI_THREADS, 0, stream_cuda()>>>(
        out, mean, rstd, inp, w, b, dt, N, C);
    TRI_CHECK_LAUNCH(layernorm_fwd_warp_kernel);
}

/* dinp(N,C) += for each row: (w*dout - mean(w*dout) - norm*mean(w*dout*norm))
 * * rstd, the gradient through the normalisation; one warp per row. */
static __global__ void layernorm_dinp_warp_kernel(void *dinp, const void *dout,
                                                  const void *inp, const void *w,
                                                  const float *mean,
                                                  const float *rstd,
                                                  ops_dtype dt, int N, int C)
{
    int row = blockIdx.x * LN_ROWS_PER_BLOCK + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (row >= N)
        return;
    int64_t off = (int64_t)row * C;
    float m = mean[row], s = rstd[row];
    float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float dnorm = load_f32_cuda(w, dt, c) * load_f32_cuda(dout, dt, off + c);
        dnorm_mean += dnorm;
        dnorm_norm_mean += dnorm * (load_f32_cuda(inp, dt, off + c) - m) * s;
    }
    dnorm_mean = warp_allreduce(dnorm_mean, SumOp()) / (float)C;
    dnorm_norm_mean = warp_allreduce(dnorm_norm_mean, SumOp()) / (float)C;
    for (int c = lane; c < C; c += 32) {
        float norm = (load_f32_cuda(inp, dt, off + c) - m) * s;
        float dnorm = load_f32_cuda(w, dt, c) * load_f32_cuda(dout, dt, off + c);
        float g = (dnorm - dnorm_mean - norm * dnorm_norm_mean) * s;
        store_f32_cuda(dinp, dt, off + c, load_f32_cuda(dinp, dt, off + c) + g);
    }
}

/* pw[r*C + c], pb[r*C + c] = sums over the rows of chunk r (in order) of
 * norm * dout and dout, for channel c. Grid (channel blocks, chunks). */
static __global__ void layernorm_dwdb_partial_kernel(float *pw, float *pb,
                                                     const void *dout,
                                                     const void *inp,
                                                     const float *mean,
                                                     const float *rstd,
                                                     ops_dtype dt, int N, int C,
                                                     int rpc)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C)
        return;
    int i0 = blockIdx.y * rpc;
    int i1 = i0 + rpc < N ? i0 + rpc : N;
    float sw = 0.0f, sb = 0.0f;
    for (int i = i0; i < i1; i++) {
        int64_t at = (int64_t)i * C + c;
        float g = load_f32_cuda(dout, dt, at);
        sw += (load_f32_cuda(inp, dt, at) - mean[i]) * rstd[i] * g;
        sb += g;
    }
    pw[(int64_t)blockIdx.y * C + c] = sw;
    pb[(int64_t)blockIdx.y * C + c] = sb;
}

void layernorm_bwd_cuda(void *dinp, float *dw, float *db, const void *dout,
                        const void *inp, const void *w, const float *mean,
                        const float *rstd, ops_dtype dt, int N, int C)
{
    if (N <= 0 || C <= 0)
        return;
    cudaStream_t s = stream_cuda();
    unsigned blocks = (unsigned)((N + LN_ROWS_PER_BLOCK - 1) / LN_ROWS_PER_BLOCK);
    layernorm_dinp_warp_kernel<<<blocks, TRI_THREADS, 0, s>>>(
        dinp, dout, inp, w, mean, rstd, dt, N, C);
    TRI_CHECK_LAUNCH(layernorm_dinp_warp_kernel);

    int rpc;
    int chunks = colsum_chunks(N, &rpc);
    float *pw = (float *)scratch_cuda(SCRATCH_CUDA_REDUCE,
                                      2 * (size_t)chunks * C * sizeof(float));
    float *pb = pw + (size_t)chunks * C;
    dim3 grid((C + TRI_THREADS - 1) / TRI_THREADS, chunks);
    layernorm_dwdb_partial_kernel<<<grid, TRI_THREADS, 0, s>>>(
        pw, pb, dout, inp, mean, rstd, dt, N, C, rpc);
    TRI_CHECK_LAUNCH(layernorm_dwdb_partial_kernel);
    colsum_finish_cuda(dw, pw, chunks, C);
    colsum_finish_cuda(db, pb, chunks, C);
}
