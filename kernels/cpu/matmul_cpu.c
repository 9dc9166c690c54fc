/*
 * matmul_cpu.c - a linear layer y = x . W^T + b and its backward pass.
 *
 * All the FLOPs are in three GEMMs (gemm_cpu, in the layer's compute dtype
 * with fp32 accumulation); the weight stays (out, in) as in GPT-2, and the
 * GEMM reads it transposed in place. Only the bias gradient is ours: it
 * sums dout's rows in a fixed order (chunks of rows fixed by M, then the
 * chunks in order), so dbias does not depend on the thread count.
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
#include "vec.h"

/* dbias's row chunks: at least BIAS_MIN_ROWS rows, at most BIAS_CHUNKS
 * chunks (their partial sums are BIAS_CHUNKS x N floats at most) */
#define BIAS_MIN_ROWS 32
#define BIAS_CHUNKS 64
/* elements of dout per rounded block in the mixed backward pass */
#define BLOCK_ELEMS ((int64_t)1 << 20)

void matmul_fwd_cpu(void *out, ops_dtype odt, const void *inp, const void *w,
                    const void *bias, ops_dtype dt, int M, int N, int K)
{
    // out is (M,N), inp is (M,K), w is (N,K)
    gemm_cpu(dt, 0, 1, M, N, K, inp, K, w, K, bias, 0, out, odt, N);
}

/* part(N) += one row of dout, widened 16 elements at a time */
static inline __attribute__((always_inline)) void add_row(float *part, const void *row,
                                                          ops_dtype dt, int N)
{
    int n16 = N & ~15;
    for (int j = 0; j < n16; j += 16)
        vec16_store(part + j, vec16_add(vec16_load(part + j),
                                        load16_f32_cpu(row, dt, j)));
    for (int j = n16; j < N; j++)
        part[j] += load_f32_cpu(row, dt, j);
}

/* part(N) = the sum of rows [r0, r0+nr) of dout (dtype dt, row stride
 * ld), row by row: whole rows, so the loads stream. */
TRI_CLONES static void bias_rows(float *part, const void *dout, ops_dtype dt,
                                 int64_t ld, int r0, int nr, int N)
{
    size_t row_bytes = (size_t)ld * ops_dtype_size(dt);
    for (int j = 0; j < N; j++)
        part[j] = 0.0f;
    for (int i = r0; i < r0 + nr; i++) {
        const void *row = (const char *)dout + i * row_bytes;
        TRI_WITH_CONST_DTYPE(dt, add_row(part, row, dt_, N));
    }
}

/* dbias(N) += the sum of dout's M rows (dtype dt, row stride ld). Rows go
 * in chunks whose size depends on M alone; each chunk is summed in row
 * order, then the chunks' sums are added in chunk order, so dbias does
 * not depend on the number of threads. (Summing each column down all M
 * rows instead read dout a few cache lines per row: 3 GB/s in fp32 and
 * 1 GB/s in bf16 on GPT-2 small's 1024 x 3072 dout.) */
static void bias_bwd(float *dbias, const void *dout, ops_dtype dt, int64_t ld,
                     int M, int N)
{
    int rows = (M + BIAS_CHUNKS - 1) / BIAS_CHUNKS;
    rows = rows < BIAS_MIN_ROWS ? BIAS_MIN_ROWS : rows;
    int chunks = (M + rows - 1) / rows;
    float *part = scratch_cpu(SCRATCH_MATMUL_BIAS,
                              (size_t)chunks * N * sizeof(float));
    #pragma omp parallel
    {
        #pragma omp for schedule(static)
        for (int c = 0; c < chunks; c++) {
            int r0 = c * rows;
            bias_rows(part + (int64_t)c * N, dout, dt, ld, r0,
                      M - r0 < rows ? M - r0 : rows, N);
        }
        #pragma omp for schedule(static)
        for (int j = 0; j < N; j++) {
            float sum = part[j];
            for (int c = 1; c < chunks; c++)
                sum += part[(int64_t)c * N + j];
            dbias[j] += sum;
        }
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
