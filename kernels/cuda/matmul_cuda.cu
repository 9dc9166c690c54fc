/*
 * matmul_cuda.cu - a linear layer y = x . W^T + b and its backward pass.
 *
 * The twin of matmul_cpu.c: the FLOPs are three cuBLAS GEMMs in the
 * layer's compute dtype with fp32 accumulation (gemm_cuda.cu); the weight
 * stays (out, in) and is read transposed in place. The bias is added in
 * fp32 before the output's single rounding, as gemm_cpu's fused bias: by
 * cuBLASLt's epilogue (gemm_lt_cuda.cu) unless TRIDENT_LT_EPILOGUE is
 * none, else by writing the bias into every row first and letting the
 * GEMM add onto it (beta = 1). The bias gradient comes the same way:
 * cuBLASLt's BGRADB epilogue on the weight gradient's GEMM, else the
 * column sums below. GPT-2's MLP fuses GELU into its up GEMM and GELU's
 * gradient into its down GEMM's input gradient (matmul_gelu_fwd_cuda,
 * matmul_dgelu_bwd_cuda) under TRIDENT_LT_EPILOGUE=all.
 *
 * The LM head is the one mixed case, as on the CPU: its dout is dlogits,
 * fp32, while inp and w are D, and cuBLAS wants both GEMM inputs in one
 * dtype. So dout is rounded to D block by block of columns (BLOCK_ELEMS,
 * 32 MiB in bf16) and each rounded block feeds both GEMMs, with dinp
 * accumulating over the blocks in fp32 and rounded once: the result of
 * casting dlogits to D first, without a (B*T, V) copy in D. Under
 * TRIDENT_FUSED the cross-entropy writes dlogits in D already, over the
 * logits' memory, and matmul_bwd_ld_cuda reads them there: no blocks.
 *
 * Unfused, dbias sums dout's columns without atomics, in two passes (the
 * column sums below, shared with layernorm_cuda.cu): fixed chunks of rows
 * summed in order, then the chunk sums in order, so it is the same bits
 * on every run; cuBLASLt's is deterministic too (one cached algorithm).
 * A thread sums a 16-byte pack of columns where the rows allow (a column
 * under TRIDENT_FUSED=0: the same bits).
 */
#include "cuda_common.h"

/* elements of dout per rounded block in the mixed backward pass */
#define BLOCK_ELEMS ((int64_t)1 << 24)

/* ---- deterministic column sums ------------------------------------------ */

/* at most this many row chunks: the partials stay small (256 x N floats) */
#define COLSUM_MAX_CHUNKS 256
#define COLSUM_MIN_ROWS 32

int colsum_chunks(int M, int *rows_per_chunk)
{
    int rpc = (M + COLSUM_MAX_CHUNKS - 1) / COLSUM_MAX_CHUNKS;
    if (rpc < COLSUM_MIN_ROWS)
        rpc = COLSUM_MIN_ROWS;
    *rows_per_chunk = rpc;
    return M > 0 ? (M + rpc - 1) / rpc : 0;
}

/* dst[j] += sum over r of partial[r*N + j], r in order */
static __global__ void colsum_finish_kernel(float *dst, const float *partial,
                                            int chunks, int N)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= N)
        return;
    float s = 0.0f;
    for (int r = 0; r < chunks; r++)
        s += partial[(int64_t)r * N + j];
    dst[j] += s;
}

void colsum_finish_cuda(float *dst, const float *partial, int chunks, int N)
{
    if (N <= 0 || chunks <= 0)
        return;
    colsum_finish_kernel<<<(N + TRI_THREADS - 1) / TRI_THREADS, TRI_THREADS, 0,
                           stream_cuda()>>>(dst, partial, chunks, N);
    TRI_CHECK_LAUNCH(colsum_finish_kernel);
}

/* partial[r*N + j] = sum of dout[i, j] over the rows i of chunk r, in
 * order (dout has dtype dt and row stride ld). Grid (column blocks,
 * chunks); a thread owns one column, so a warp reads 32 consecutive
 * elements of a row. */
static __global__ void bias_partial_kernel(float *partial, const void *dout,
                                           ops_dtype dt, int64_t ld, int M,
                                           int N, int rpc)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= N)
        return;
    int i0 = blockIdx.y * rpc;
    int i1 = i0 + rpc < M ? i0 + rpc : M;
    float s = 0.0f;
    for (int i = i0; i < i1; i++)
        s += load_f32_cuda(dout, dt, i * ld + j);
    partial[(int64_t)blockIdx.y * N + j] = s;
}

/* The packed twin of bias_partial_kernel: a thread owns VEC columns (one
 * 16-byte pack), so a warp reads 512 contiguous bytes of a row where the
 * other reads 64 (bf16). Each column's sum runs over the same rows in the
 * same order: the same bits. The rows (ld elements apart) start on packs:
 * ld and N are whole numbers of packs when VEC > 1. */
template <ops_dtype DT, int VEC>
static __global__ void bias_pack_kernel(float *partial, const void *dout,
                                        int64_t ld, int M, int N, int rpc)
{
    float *const out[1] = { partial };
    colsum_pack_pass<VEC, 1>(out, N, M, rpc, [&](int i, int k, float (&s)[1][VEC]) {
        float g[VEC];
        load_pack<DT, VEC>(g, dout, i * (ld / VEC) + k);
#pragma unroll
        for (int e = 0; e < VEC; e++)
            s[0][e] += g[e];
    });
}

void bias_bwd_cuda(float *dbias, const void *dout, ops_dtype dt, int64_t ld,
                   int M, int N, int packed)
{
    int rpc;
    int chunks = colsum_chunks(M, &rpc);
    if (chunks == 0 || N <= 0)
        return;
    float *partial = (float *)scratch_cuda(SCRATCH_CUDA_REDUCE,
                                           (size_t)chunks * N * sizeof(float));
    if (packed) {
        int vec = aligned16(dout) && ld % pack_elems(dt) == 0 &&
                          N % pack_elems(dt) == 0
                      ? pack_elems(dt)
                      : 1;
        unsigned threads = colsum_threads(N / vec);
        dim3 grid((unsigned)((N / vec + threads - 1) / threads), chunks);
#define BIAS_PACK(DT, VEC)                                                    \
        bias_pack_kernel<DT, VEC><<<grid, threads, 0, stream_cuda()>>>(       \
            partial, dout, ld, M, N, rpc)
        DISPATCH_PACKED(dt, vec > 1, BIAS_PACK);
#undef BIAS_PACK
        TRI_CHECK_LAUNCH(bias_pack_kernel);
    } else {
        dim3 grid((N + TRI_THREADS - 1) / TRI_THREADS, chunks);
        bias_partial_kernel<<<grid, TRI_THREADS, 0, stream_cuda()>>>(
            partial, dout, dt, ld, M, N, rpc);
        TRI_CHECK_LAUNCH(bias_partial_kernel);
    }
    colsum_finish_cuda(dbias, partial, chunks, N);
}

/* dbias(N) += sum over the M rows of dout(M,N) (dtype dt, row stride ld):
 * the packed column sums, or under TRIDENT_FUSED=0 the kernel a column a
 * thread that they replaced (the same bits) */
static void bias_bwd(float *dbias, const void *dout, ops_dtype dt, int64_t ld,
                     int M, int N)
{
    bias_bwd_cuda(dbias, dout, dt, ld, M, N, fused_enabled_cuda());
}

/* ---- the layer ------------------------------------------------------------- */

/* out[i, j] (odt) = bias[j] (dt) for the M rows: exact, odt is F32 or dt */
static __global__ void bias_rows_kernel(void *out, ops_dtype odt,
                                        const void *bias, ops_dtype dt, int M,
                                        int N)
{
    int64_t total = (int64_t)M * N;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < total;
         k += (int64_t)gridDim.x * blockDim.x)
        store_f32_cuda(out, odt, k, load_f32_cuda(bias, dt, k % N));
}

void matmul_fwd_cuda(void *out, ops_dtype odt, const void *inp, const void *w,
                     const void *bias, ops_dtype dt, int M, int N, int K)
{
    // out is (M,N), inp is (M,K), w is (N,K)
    if (M <= 0 || N <= 0)
        return;
    if (bias && odt == dt && lt_epilogue_cuda() != LT_EPILOGUE_NONE &&
        gemm_lt_cuda(0, 1, M, N, K, inp, K, w, K, 0.0f, out, N, dt, odt, LT_BIAS, bias, NULL))
        return;
    float beta = 0.0f;
    if (bias) {
        bias_rows_kernel<<<grid_for((int64_t)M * N, TRI_THREADS), TRI_THREADS, 0,
                           stream_cuda()>>>(out, odt, bias, dt, M, N);
        TRI_CHECK_LAUNCH(bias_rows_kernel);
        beta = 1.0f;
    }
    gemm_cuda(0, 1, M, N, K, 1.0f, inp, K, w, K, beta, out, N, dt, odt);
}

/* The head's case: dout fp32, inp and w of dtype dt. */
static void matmul_bwd_mixed(void *dinp, float *dw, float *dbias,
                             const float *dout, const void *inp,
                             const void *w, ops_dtype dt, int M, int N,
                             int K)
{
    int64_t nb64 = BLOCK_ELEMS / (M > 0 ? M : 1);
    nb64 = nb64 < 64 ? 64 : nb64 > N ? N : nb64;
    int nb = (int)nb64;
    size_t es = esize_cuda(dt);
    void *blk = scratch_cuda(SCRATCH_CUDA_MATMUL_DOUT, (size_t)M * nb * es);
    float *acc = dinp ? (float *)scratch_cuda(SCRATCH_CUDA_MATMUL_ACC,
                                              (size_t)M * K * sizeof(float))
                      : NULL;
    if (acc && N == 0)
        zero_cuda(acc, (size_t)M * K * sizeof(float));
    for (int n0 = 0; n0 < N; n0 += nb) {
        int nn = N - n0 < nb ? N - n0 : nb;
        // blk (M,nn) = dout[:, n0:n0+nn] rounded to dt
        cast_2d_cuda(blk, dt, nn, dout + n0, OPS_F32, N, M, nn);
        // dw[n0:n0+nn] (nn,K) += blk^T . inp
        if (dw)
            gemm_cuda(1, 0, nn, K, M, 1.0f, blk, nn, inp, K, 1.0f,
                      dw + (int64_t)n0 * K, K, dt, OPS_F32);
        // acc (M,K) (+)= blk . w[n0:n0+nn]
        if (acc)
            gemm_cuda(0, 0, M, K, nn, 1.0f, blk, nn,
                      (const char *)w + (size_t)n0 * K * es, K,
                      n0 > 0 ? 1.0f : 0.0f, acc, K, dt, OPS_F32);
        if (dbias)
            bias_bwd(dbias + n0, blk, dt, nn, M, nn);
    }
    if (dinp)
        cast_2d_cuda(dinp, dt, K, acc, OPS_F32, K, M, K);
}

/* The head's case under TRIDENT_FUSED: dout already in dt (the
 * cross-entropy rounded it, rows ld apart over the logits' memory), so
 * two GEMMs over the whole chunk, without matmul_bwd_mixed's blocks, its
 * rounding pass or its fp32 dinp accumulator. */
void matmul_bwd_ld_cuda(void *dinp, float *dw, const void *dout, int64_t ld,
                        const void *inp, const void *w, ops_dtype dt, int M,
                        int N, int K)
{
    if (M <= 0 || N <= 0)
        return;
    // dinp (M,K) = dout . w, overwritten
    if (dinp)
        gemm_cuda(0, 0, M, K, N, 1.0f, dout, (int)ld, w, K, 0.0f, dinp, K, dt, dt);
    // dw (N,K) += dout^T . inp, in fp32
    if (dw)
        gemm_cuda(1, 0, N, K, M, 1.0f, dout, (int)ld, inp, K, 1.0f, dw, K, dt, OPS_F32);
}

/* dw (N,K) += dout^T . inp and dbias (N) += dout's column sums in one
 * cuBLASLt GEMM (BGRADB): its bias gradient overwrites, so it lands in a
 * scratch and is added to dbias. 0 when not fused (TRIDENT_LT_EPILOGUE
 * none, or no algorithm): nothing was done. */
static int weight_and_bias_grad(float *dw, float *dbias, const void *dout, const void *inp,
                                ops_dtype dt, int M, int N, int K)
{
    if (lt_epilogue_cuda() == LT_EPILOGUE_NONE)
        return 0;
    float *g = (float *)scratch_cuda(SCRATCH_CUDA_BIAS_GRAD, (size_t)N * sizeof(float));
    if (!gemm_lt_cuda(1, 0, N, K, M, dout, N, inp, K, 1.0f, dw, K, dt, OPS_F32, LT_BGRAD, g,
                      NULL))
        return 0;
    colsum_finish_cuda(dbias, g, 1, N);
    return 1;
}

void matmul_bwd_cuda(void *dinp, float *dw, float *dbias, const void *dout,
                     ops_dtype ddt, const void *inp, const void *w,
                     ops_dtype dt, int M, int N, int K)
{
    if (ddt != dt) {
        matmul_bwd_mixed(dinp, dw, dbias, (const float *)dout, inp, w, dt, M,
                         N, K);
        return;
    }
    // dout is (M,N); dinp (M,K) = dout . w, overwritten
    if (dinp)
        gemm_cuda(0, 0, M, K, N, 1.0f, dout, N, w, K, 0.0f, dinp, K, dt, dt);
    // dw (N,K) += dout^T . inp, in fp32
    if (dw && dbias && weight_and_bias_grad(dw, dbias, dout, inp, dt, M, N, K))
        return;
    if (dw)
        gemm_cuda(1, 0, N, K, M, 1.0f, dout, N, inp, K, 1.0f, dw, K, dt,
                  OPS_F32);
    if (dbias)
        bias_bwd(dbias, dout, dt, N, M, N);
}

void matmul_gelu_fwd_cuda(void *out, void *pre, const void *inp, const void *w,
                          const void *bias, ops_dtype dt, int M, int N, int K)
{
    if (lt_epilogue_cuda() == LT_EPILOGUE_ALL &&
        gemm_lt_cuda(0, 1, M, N, K, inp, K, w, K, 0.0f, out, N, dt, dt, LT_GELU, bias, pre))
        return;
    matmul_fwd_cuda(pre, dt, inp, w, bias, dt, M, N, K);
    gelu_fwd_cuda(out, pre, dt, (int64_t)M * N);
}

void matmul_dgelu_bwd_cuda(void *dinp, float *dw, float *dbias, const void *dout,
                           const void *inp, const void *w, const void *pre, ops_dtype dt,
                           int M, int N, int K)
{
    // dinp (M,K) = (dout . w) * gelu'(pre), in the GEMM's epilogue
    if (lt_epilogue_cuda() == LT_EPILOGUE_ALL &&
        gemm_lt_cuda(0, 0, M, K, N, dout, N, w, K, 0.0f, dinp, K, dt, dt, LT_DGELU, NULL,
                     (void *)pre)) {
        matmul_bwd_cuda(NULL, dw, dbias, dout, dt, inp, w, dt, M, N, K);
        return;
    }
    matmul_bwd_cuda(dinp, dw, dbias, dout, dt, inp, w, dt, M, N, K);
    gelu_bwd_cuda(dinp, pre, dinp, dt, (int64_t)M * K);
}
