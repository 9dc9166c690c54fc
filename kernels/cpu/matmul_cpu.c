/*
 * matmul_cpu.c - a linear layer y = x . W^T + b and its backward pass.
 *
 * All the FLOPs are in three GEMMs (gemm_cpu, in the layer's compute dtype
 * with fp32 accumulation); the weight stays (out, in) as in GPT-2, and the
 * GEMM reads it transposed in place. Only the bias gradient is ours: it
 * sums dout's columns in a fixed order (row 0, 1, ...) per column, so dbias
 * does not depend on the thread count.
 *
 * The LM head is the one mixed case: its dout is dlogits, fp32 because the
 * loss is computed in fp32, while inp and w are the compute dtype D. The
 * backward pass then rounds dout to D block by block (BLOCK_ELEMS: 2 MB
 * of bf16, 1024 columns at B*T = 1024, which stay in cache) and uses each
 * rounded block for both GEMMs, with
 * dinp accumulating over the blocks in fp32 and rounded once. That is the
 * result the caller would get by casting dlogits to D first, up to fp32
 * reassociation in dinp, without a (B*T, V) copy in D or a second pass
 * over it in memory.
 */
#include "cpu.h"

/* columns per task of the dbias reduction: 64 floats = 4 cache lines */
#define BIAS_BLOCK 64
/* elements of dout per rounded block in the mixed backward pass */
#define BLOCK_ELEMS ((int64_t)1 << 20)

void matmul_fwd_cpu(void *out, ops_dtype odt, const void *inp, const void *w,
                    const void *bias, ops_dtype dt, int M, int N, int K)
{
    // out is (M,N), inp is (M,K), w is (N,K)
    gemm_cpu(dt, 0, 1, M, N, K, inp, K, w, K, bias, 0, out, odt, N);
}

/* dbias(N) += sum over the M rows of dout(M,N) (dtype dt, row stride ld).
 * Parallel over column blocks: each thread walks all rows but touches only
 * its own columns. */
static void bias_bwd(float *dbias, const void *dout, ops_dtype dt, int64_t ld,
                     int M, int N)
{
    int blocks = (N + BIAS_BLOCK - 1) / BIAS_BLOCK;
    #pragma omp parallel for schedule(static)
    for (int blk = 0; blk < blocks; blk++) {
        int j0 = blk * BIAS_BLOCK;
        int nj = N - j0 < BIAS_BLOCK ? N - j0 : BIAS_BLOCK;
        float sum[BIAS_BLOCK] = { 0 };
        for (int i = 0; i < M; i++) {
            if (dt == OPS_F32) {
                const float *row = (const float *)dout + i * ld + j0;
                for (int j = 0; j < nj; j++)
                    sum[j] += row[j];
            } else {
                for (int j = 0; j < nj; j++)
                    sum[j] += load_f32_cpu(dout, dt, i * ld + j0 + j);
            }
        }
        for (int j = 0; j < nj; j++)
            dbias[j0 + j] += sum[j];
    }
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
    size_t es = ops_dtype_size(dt);
    void *blk = scratch_cpu(SCRATCH_MATMUL_DOUT, (size_t)M * nb * es);
    float *acc = dinp ? scratch_cpu(SCRATCH_MATMUL_ACC,
                                    (size_t)M * K * sizeof(float)) : NULL;
    if (acc && N == 0)
        zero_cpu(acc, (size_t)M * K * sizeof(float));
    for (int n0 = 0; n0 < N; n0 += nb) {
        int nn = N - n0 < nb ? N - n0 : nb;
        // blk (M,nn) = dout[:, n0:n0+nn] rounded to dt
        cast_2d_cpu(blk, dt, nn, dout + n0, OPS_F32, N, M, nn);
        // dw[n0:n0+nn] (nn,K) += blk^T . inp
        if (dw)
            gemm_cpu(dt, 1, 0, nn, K, M, blk, nn, inp, K, NULL, 1,
                     dw + (int64_t)n0 * K, OPS_F32, K);
        // acc (M,K) (+)= blk . w[n0:n0+nn]
        if (acc)
            gemm_cpu(dt, 0, 0, M, K, nn, blk, nn,
                     (const char *)w + (size_t)n0 * K * es, K, NULL, n0 > 0,
                     acc, OPS_F32, K);
        if (dbias)
            bias_bwd(dbias + n0, blk, dt, nn, M, nn);
    }
    if (dinp)
        cast_2d_cpu(dinp, dt, K, acc, OPS_F32, K, M, K);
}

void matmul_bwd_cpu(void *dinp, float *dw, float *dbias, const void *dout,
                    ops_dtype ddt, const void *inp, const void *w,
                    ops_dtype dt, int M, int N, int K)
{
    if (ddt != dt) {
        matmul_bwd_mixed(dinp, dw, dbias, dout, inp, w, dt, M, N, K);
        return;
    }
    // dout is (M,N); dinp (M,K) = dout . w, overwritten
    if (dinp)
        gemm_cpu(dt, 0, 0, M, K, N, dout, N, w, K, NULL, 0, dinp, dt, K);
    // dw (N,K) += dout^T . inp, in fp32
    if (dw)
        gemm_cpu(dt, 1, 0, N, K, M, dout, N, inp, K, NULL, 1, dw, OPS_F32, K);
    if (dbias)
        bias_bwd(dbias, dout, dt, N, M, N);
}
