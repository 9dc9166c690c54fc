/*
 * matmul_cpu.c - a linear layer y = x . W^T + b and its backward pass.
 *
 * All the FLOPs are in three library GEMMs; the weight stays (out, in) as
 * in GPT-2, and the GEMM reads it transposed in place. Only the bias work is
 * ours: forward adds it row by row, backward sums dout's columns in a fixed
 * order (row 0, 1, ...) per column, so dbias does not depend on the thread
 * count.
 */
#include "cpu.h"

/* columns per task of the dbias reduction: 64 floats = 4 cache lines */
#define BIAS_BLOCK 64

void matmul_fwd_cpu(float *out, const float *inp, const float *w,
                    const float *bias, int M, int N, int K)
{
    // out is (M,N), inp is (M,K), w is (N,K)
    gemm_f32_cpu(0, 1, M, N, K, 1.0f, inp, K, w, K, 0.0f, out, N);
    if (!bias)
        return;
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < M; i++) {
        float *row = out + (int64_t)i * N;
        for (int j = 0; j < N; j++)
            row[j] += bias[j];
    }
}

/* dbias(N) += sum over the M rows of dout(M,N). Parallel over column blocks:
 * each thread walks all rows but touches only its own columns. */
static void bias_bwd(float *dbias, const float *dout, int M, int N)
{
    int blocks = (N + BIAS_BLOCK - 1) / BIAS_BLOCK;
    #pragma omp parallel for schedule(static)
    for (int blk = 0; blk < blocks; blk++) {
        int j0 = blk * BIAS_BLOCK;
        int nj = N - j0 < BIAS_BLOCK ? N - j0 : BIAS_BLOCK;
        float sum[BIAS_BLOCK] = { 0 };
        for (int i = 0; i < M; i++) {
            const float *row = dout + (int64_t)i * N + j0;
            for (int j = 0; j < nj; j++)
                sum[j] += row[j];
        }
        for (int j = 0; j < nj; j++)
            dbias[j0 + j] += sum[j];
    }
}

void matmul_bwd_cpu(float *dinp, float *dw, float *dbias, const float *dout,
                    const float *inp, const float *w, int M, int N, int K)
{
    // dout is (M,N); dinp (M,K) = dout . w, overwritten
    if (dinp)
        gemm_f32_cpu(0, 0, M, K, N, 1.0f, dout, N, w, K, 0.0f, dinp, K);
    // dw (N,K) += dout^T . inp
    if (dw)
        gemm_f32_cpu(1, 0, N, K, M, 1.0f, dout, N, inp, K, 1.0f, dw, K);
    if (dbias)
        bias_bwd(dbias, dout, M, N);
}
