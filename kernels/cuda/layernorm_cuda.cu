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
 *
 * Run on an NVIDIA H100 on 2026-11-27 (bench/gpu_check.sh, the code of
 * commit ac94e32): t_ops_cuda 644 ok, t_gpu 5 ok.
 *
 * Why the warp-per-row kernels are fast: a lane moves 16-byte packs (8
 * bf16 channels, cuda_common.h) where the row, w and b are aligned, so a
 * warp reads 512 contiguous bytes per instruction instead of 64; a row
 * (1.5 KB in bf16 for C = 768) is read from memory once and its second
 * and third passes hit the L1. The bytes: the forward reads inp and
 * writes out, 4 bytes a bf16 element; dinp reads dout, inp and dinp and
 * writes dinp, 8; dw, db read dout and inp again, 4, a thread owning a
 * pack of channels (layernorm_dwdb_cuda; a channel a thread under
 * TRIDENT_FUSED=0, the same bits). Unaligned rows (C not a multiple of
 * 8, or 4 in fp32) take the same code a channel at a time.
 *
 * add_layernorm_fwd_cuda is the forward with the residual add before it
 * (GPT-2's x + attn_out, then ln2) in the same pass: the sum is written
 * once and read back from the L1, where the two ops read and wrote it
 * from memory again (8 bytes a bf16 element less).
 */
#include "cuda_common.h"

/* rows per block for the warp-per-row kernels */
#define LN_ROWS_PER_BLOCK (TRI_THREADS / 32)

/* The warp-per-row kernels take a row as C / VEC packs, pack k of row
 * `row` at k0 + k with k0 = row * (C / VEC), and pack k of w and b at k:
 * C is a whole number of packs when VEC > 1 (packs_fit). */

/* With ADD (add_layernorm_fwd_cuda) the first pass also forms the
 * residual: resid = inp + addend, stored in dt and read back, so the
 * statistics see the rounded sum as layernorm_fwd_cuda of resid would; the
 * later passes read resid (the lane's own packs, just written). */
template <ops_dtype DT, int VEC, bool ADD>
static __global__ void layernorm_fwd_warp_kernel(void *out, float *mean,
                                                 float *rstd, const void *inp,
                                                 const void *w, const void *b,
                                                 int N, int C, void *resid,
                                                 const void *addend)
{
    int row = blockIdx.x * LN_ROWS_PER_BLOCK + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (row >= N)
        return; /* the whole warp leaves: the shuffles below stay full */
    int packs = C / VEC;
    int64_t k0 = (int64_t)row * packs;
    float m = 0.0f;
    for (int k = lane; k < packs; k += 32) {
        float x[VEC];
        load_pack_added<DT, VEC, ADD>(x, inp, addend, resid, k0 + k);
#pragma unroll
        for (int e = 0; e < VEC; e++)
            m += x[e];
    }
    m = warp_allreduce(m, SumOp()) / (float)C;
    if (ADD)
        inp = resid;
    float var = 0.0f;
    for (int k = lane; k < packs; k += 32) {
        float x[VEC];
        load_pack<DT, VEC>(x, inp, k0 + k);
#pragma unroll
        for (int e = 0; e < VEC; e++)
            var += (x[e] - m) * (x[e] - m);
    }
    var = warp_allreduce(var, SumOp()) / (float)C;
    float s = 1.0f / sqrtf(var + TRI_LN_EPS);
    for (int k = lane; k < packs; k += 32) {
        float x[VEC], wk[VEC], bk[VEC];
        load_pack<DT, VEC>(x, inp, k0 + k);
        load_pack<DT, VEC>(wk, w, k);
        load_pack<DT, VEC>(bk, b, k);
#pragma unroll
        for (int e = 0; e < VEC; e++)
            x[e] = (x[e] - m) * s * wk[e] + bk[e];
        store_pack<DT, VEC>(out, k0 + k, x);
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
#define LN_FWD(DT, VEC)                                                       \
    layernorm_fwd_warp_kernel<DT, VEC, false><<<blocks, TRI_THREADS, 0, stream_cuda()>>>( \
        out, mean, rstd, inp, w, b, N, C, NULL, NULL)
    DISPATCH_PACKED(dt, packs_fit(dt, C, out, inp, w, b), LN_FWD);
#undef LN_FWD
    TRI_CHECK_LAUNCH(layernorm_fwd_warp_kernel);
}

void add_layernorm_fwd_cuda(void *resid, void *out, float *mean, float *rstd,
                            const void *a, const void *b, const void *w,
                            const void *bias, ops_dtype dt, int N, int C)
{
    if (N <= 0)
        return;
    unsigned blocks = (unsigned)((N + LN_ROWS_PER_BLOCK - 1) / LN_ROWS_PER_BLOCK);
    int packed = packs_fit(dt, C, out, a, w, bias) && aligned16(resid, b);
#define LN_ADD_FWD(DT, VEC)                                                   \
    layernorm_fwd_warp_kernel<DT, VEC, true><<<blocks, TRI_THREADS, 0, stream_cuda()>>>( \
        out, mean, rstd, a, w, bias, N, C, resid, b)
    DISPATCH_PACKED(dt, packed, LN_ADD_FWD);
#undef LN_ADD_FWD
    TRI_CHECK_LAUNCH(layernorm_fwd_warp_kernel);
}

/* dinp(N,C) += for each row: (w*dout - mean(w*dout) - norm*mean(w*dout*norm))
 * * rstd, the gradient through the normalisation; one warp per row. */
template <ops_dtype DT, int VEC>
static __global__ void layernorm_dinp_warp_kernel(void *dinp, const void *dout,
                                                  const void *inp, const void *w,
                                                  const float *mean,
                                                  const float *rstd, int N, int C)
{
    int row = blockIdx.x * LN_ROWS_PER_BLOCK + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (row >= N)
        return;
    int packs = C / VEC;
    int64_t k0 = (int64_t)row * packs;
    float m = mean[row], s = rstd[row];
    float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
    for (int k = lane; k < packs; k += 32) {
        float wk[VEC], g[VEC], x[VEC];
        load_pack<DT, VEC>(wk, w, k);
        load_pack<DT, VEC>(g, dout, k0 + k);
        load_pack<DT, VEC>(x, inp, k0 + k);
#pragma unroll
        for (int e = 0; e < VEC; e++) {
            float dnorm = wk[e] * g[e];
            dnorm_mean += dnorm;
            dnorm_norm_mean += dnorm * (x[e] - m) * s;
        }
    }
    dnorm_mean = warp_allreduce(dnorm_mean, SumOp()) / (float)C;
    dnorm_norm_mean = warp_allreduce(dnorm_norm_mean, SumOp()) / (float)C;
    for (int k = lane; k < packs; k += 32) {
        float wk[VEC], g[VEC], x[VEC], d[VEC];
        load_pack<DT, VEC>(wk, w, k);
        load_pack<DT, VEC>(g, dout, k0 + k);
        load_pack<DT, VEC>(x, inp, k0 + k);
        load_pack<DT, VEC>(d, dinp, k0 + k);
#pragma unroll
        for (int e = 0; e < VEC; e++) {
            float norm = (x[e] - m) * s;
            float dnorm = wk[e] * g[e];
            d[e] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * s;
        }
        store_pack<DT, VEC>(dinp, k0 + k, d);
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

/* The packed twin of layernorm_dwdb_partial_kernel: a thread owns VEC
 * channels (one 16-byte pack, pack k of each row), so a warp reads 512
 * contiguous bytes of a row where the other reads 64 (bf16), and the
 * dtype is a constant. Each channel's sum is the same expression over the
 * same rows in the same order: the same bits. Grid (pack blocks, chunks). */
template <ops_dtype DT, int VEC>
static __global__ void layernorm_dwdb_pack_kernel(float *pw, float *pb,
                                                  const void *dout,
                                                  const void *inp,
                                                  const float *mean,
                                                  const float *rstd, int N,
                                                  int C, int rpc)
{
    float *const partial[2] = { pw, pb };
    colsum_pack_pass<VEC, 2>(partial, C, N, rpc, [&](int i, int k, float (&s)[2][VEC]) {
        float g[VEC], x[VEC];
        load_pack<DT, VEC>(g, dout, (int64_t)i * (C / VEC) + k);
        load_pack<DT, VEC>(x, inp, (int64_t)i * (C / VEC) + k);
#pragma unroll
        for (int e = 0; e < VEC; e++) {
            s[0][e] += (x[e] - mean[i]) * rstd[i] * g[e];
            s[1][e] += g[e];
        }
    });
}

void layernorm_dwdb_cuda(float *dw, float *db, const void *dout,
                         const void *inp, const float *mean, const float *rstd,
                         ops_dtype dt, int N, int C, int packed)
{
    if (N <= 0 || C <= 0)
        return;
    cudaStream_t s = stream_cuda();
    int rpc;
    int chunks = colsum_chunks(N, &rpc);
    float *pw = (float *)scratch_cuda(SCRATCH_CUDA_REDUCE,
                                      2 * (size_t)chunks * C * sizeof(float));
    float *pb = pw + (size_t)chunks * C;
    if (packed) {
        int vec = packs_fit(dt, C, dout, inp) ? pack_elems(dt) : 1;
        unsigned threads = colsum_threads(C / vec);
        dim3 grid((unsigned)((C / vec + threads - 1) / threads), chunks);
#define LN_DWDB(DT, VEC)                                                      \
        layernorm_dwdb_pack_kernel<DT, VEC><<<grid, threads, 0, s>>>(         \
            pw, pb, dout, inp, mean, rstd, N, C, rpc)
        DISPATCH_PACKED(dt, vec > 1, LN_DWDB);
#undef LN_DWDB
        TRI_CHECK_LAUNCH(layernorm_dwdb_pack_kernel);
    } else {
        dim3 grid((C + TRI_THREADS - 1) / TRI_THREADS, chunks);
        layernorm_dwdb_partial_kernel<<<grid, TRI_THREADS, 0, s>>>(
            pw, pb, dout, inp, mean, rstd, dt, N, C, rpc);
        TRI_CHECK_LAUNCH(layernorm_dwdb_partial_kernel);
    }
    colsum_finish_cuda(dw, pw, chunks, C);
    colsum_finish_cuda(db, pb, chunks, C);
}

void layernorm_bwd_cuda(void *dinp, float *dw, float *db, const void *dout,
                        const void *inp, const void *w, const float *mean,
                        const float *rstd, ops_dtype dt, int N, int C)
{
    if (N <= 0 || C <= 0)
        return;
    cudaStream_t s = stream_cuda();
    unsigned blocks = (unsigned)((N + LN_ROWS_PER_BLOCK - 1) / LN_ROWS_PER_BLOCK);
#define LN_DINP(DT, VEC)                                                      \
    layernorm_dinp_warp_kernel<DT, VEC><<<blocks, TRI_THREADS, 0, s>>>(       \
        dinp, dout, inp, w, mean, rstd, N, C)
    DISPATCH_PACKED(dt, packs_fit(dt, C, dinp, dout, inp, w), LN_DINP);
#undef LN_DINP
    TRI_CHECK_LAUNCH(layernorm_dinp_warp_kernel);

    /* dw, db: the packed column sums, or under TRIDENT_FUSED=0 the kernel
     * a channel a thread that they replaced (the same bits) */
    layernorm_dwdb_cuda(dw, db, dout, inp, mean, rstd, dt, N, C,
                        fused_enabled_cuda());
}
