/*
 * attention_exact_cpu.c - causal self-attention that keeps the whole
 * (B,NH,T,T) probability matrix: the reference attention_cpu.c is tested
 * against, and the timing baseline it must not fall behind.
 *
 * This was the trainer's kernel until the fused one (attention_cpu.c)
 * replaced it: its memory grows with T^2 (864 MiB of activations for a
 * 2-layer, 128-wide model at T = 4096, against 72 MiB at T = 1024). It
 * stays because it is the straightforward algorithm: S = Q K^T / sqrt(hs),
 * P = causal softmax(S) stored in att, O = P V, and a backward from the
 * stored P through a T x T scratch. tests/t_ops_grad compares the two.
 *
 * Per (batch, head) Q, K and V are read in place from the (B,T,NH,3,hs)
 * qkv tensor through the GEMM's leading dimension 3*NH*hs, and O is
 * written in place into (B,T,NH*hs), so nothing is repacked.
 *
 * The causal mask makes the upper triangle dead work, so the GEMMs go in
 * blocks of ATT_BLOCK rows (or columns), each reaching only up to its
 * block's end of the diagonal: at T = 1024 that skips 47% of the FLOPs
 * (50% are dead), at T = 256 37%.
 *
 * Threads: the (batch, head) pairs go to OpenMP threads and each runs its
 * small GEMMs single-threaded, rather than looping over heads and letting
 * every GEMM fan out. fwd+bwd on 2 cores (OMP_NUM_THREADS=2), heads in
 * parallel vs heads in sequence:
 *   B=4 T=256 NH=12 hs=64   oneDNN 9.2 vs 115 ms    OpenBLAS 10.5 vs 22 ms
 *   B=4 T=64  NH=4  hs=32   oneDNN 0.18 vs 0.36 ms  OpenBLAS 0.19 vs 0.37 ms
 * A threaded GEMM of 256x256x64 spends more time starting threads than
 * computing. gemm_serial_begin_cpu keeps pthreads OpenBLAS from fanning
 * out inside the region (oneDNN does that by itself). ATT_BLOCK 64 beat 32,
 * 128 and unblocked at T = 256. A third of the forward time is expf in
 * the softmax, which glibc vectorizes only under -ffast-math.
 *
 * bf16 and fp16: each thread widens its head's q, k, v (and dout) to fp32
 * in its share of a scratch buffer, runs the fp32 head code above on the
 * copies, and rounds the head's output (or dq, dk, dv) once into the
 * tensor. So the GEMMs stay fp32 sgemm, single-threaded per head as in
 * fp32, and P keeps fp32 in att; only the stored activations are rounded.
 * Correctness first: a bf16 GEMM per block would need a oneDNN primitive
 * per causal block shape and P rounded to bf16, for GEMMs that are 10% of
 * the model's FLOPs at T = 1024.
 */
#include "cpu.h"

#include <math.h>
#include <omp.h>

#define ATT_BLOCK 64

/* Causal softmax of S(T,T) in place, row by row; zero above the diagonal.
 * Max and sum run in 16 lanes, a fixed order the compiler can vectorize
 * without reassociating. */
TRI_CLONES static void causal_softmax(float *s, int T)
{
    for (int t = 0; t < T; t++) {
        float *row = s + (int64_t)t * T;
        int n = t + 1, j = 0;
        float lane[16];
        for (int k = 0; k < 16; k++)
            lane[k] = -INFINITY;
        for (; j + 16 <= n; j += 16)
            for (int k = 0; k < 16; k++)
                lane[k] = row[j + k] > lane[k] ? row[j + k] : lane[k];
        float m = -INFINITY;
        for (int k = 0; k < 16; k++)
            m = lane[k] > m ? lane[k] : m;
        for (; j < n; j++)
            m = row[j] > m ? row[j] : m;
        for (j = 0; j < n; j++)
            row[j] = elem_expf(row[j] - m);
        for (int k = 0; k < 16; k++)
            lane[k] = 0.0f;
        for (j = 0; j + 16 <= n; j += 16)
            for (int k = 0; k < 16; k++)
                lane[k] += row[j + k];
        float sum = 0.0f;
        for (int k = 0; k < 16; k++)
            sum += lane[k];
        for (; j < n; j++)
            sum += row[j];
        float inv = 1.0f / sum;
        for (j = 0; j < n; j++)
            row[j] *= inv;
        for (j = n; j < T; j++)
            row[j] = 0.0f;
    }
}

/* One head. q, k, v point at this head's first row (row stride ld);
 * o at its first output row (stride ldo); p is its (T,T) block of att. */
static void head_fwd(float *o, float *p, const float *q, const float *k,
                     const float *v, int T, int hs, int ld, int ldo)
{
    float scale = 1.0f / sqrtf((float)hs);
    for (int r0 = 0; r0 < T; r0 += ATT_BLOCK) {
        int nr = T - r0 < ATT_BLOCK ? T - r0 : ATT_BLOCK;
        // S[r0:r0+nr, 0:r0+nr] = scale * Q[r0:r0+nr] K[0:r0+nr]^T
        gemm_f32_cpu(0, 1, nr, r0 + nr, hs, scale, q + (int64_t)r0 * ld, ld,
                     k, ld, 0.0f, p + (int64_t)r0 * T, T);
    }
    causal_softmax(p, T);
    for (int r0 = 0; r0 < T; r0 += ATT_BLOCK) {
        int nr = T - r0 < ATT_BLOCK ? T - r0 : ATT_BLOCK;
        // O[r0:r0+nr] = P[r0:r0+nr, 0:r0+nr] V[0:r0+nr]
        gemm_f32_cpu(0, 0, nr, hs, r0 + nr, 1.0f, p + (int64_t)r0 * T, T,
                     v, ld, 0.0f, o + (int64_t)r0 * ldo, ldo);
    }
}

/* dS = P * (dP - rowsum(dP * P)) * scale in place over dP; zero above the
 * diagonal so the blocked GEMMs below may read whole blocks. */
static void softmax_bwd(float *ds, const float *p, int T, float scale)
{
    for (int t = 0; t < T; t++) {
        float *drow = ds + (int64_t)t * T;
        const float *prow = p + (int64_t)t * T;
        float dot = 0.0f;
        for (int j = 0; j <= t; j++)
            dot += drow[j] * prow[j];
        for (int j = 0; j <= t; j++)
            drow[j] = prow[j] * (drow[j] - dot) * scale;
        for (int j = t + 1; j < T; j++)
            drow[j] = 0.0f;
    }
}

/* One head's backward: dq, dk, dv are written (=), ds is (T,T) scratch. */
static void head_bwd(float *dq, float *dk, float *dv, float *ds,
                     const float *dout, const float *q, const float *k,
                     const float *v, const float *p, int T, int hs, int ld,
                     int ldo)
{
    float scale = 1.0f / sqrtf((float)hs);
    for (int r0 = 0; r0 < T; r0 += ATT_BLOCK) {
        int nr = T - r0 < ATT_BLOCK ? T - r0 : ATT_BLOCK;
        // dP[r0:r0+nr, 0:r0+nr] = dO[r0:r0+nr] V[0:r0+nr]^T
        gemm_f32_cpu(0, 1, nr, r0 + nr, hs, 1.0f, dout + (int64_t)r0 * ldo,
                     ldo, v, ld, 0.0f, ds + (int64_t)r0 * T, T);
    }
    softmax_bwd(ds, p, T, scale);
    for (int r0 = 0; r0 < T; r0 += ATT_BLOCK) {
        int nr = T - r0 < ATT_BLOCK ? T - r0 : ATT_BLOCK;
        // dQ[r0:r0+nr] = dS[r0:r0+nr, 0:r0+nr] K[0:r0+nr]
        gemm_f32_cpu(0, 0, nr, hs, r0 + nr, 1.0f, ds + (int64_t)r0 * T, T,
                     k, ld, 0.0f, dq + (int64_t)r0 * ld, ld);
        // key rows [r0, r0+nr) are attended by query rows [r0, T) only:
        // dK[r0:r0+nr] = dS[r0:T, r0:r0+nr]^T Q[r0:T]
        gemm_f32_cpu(1, 0, nr, hs, T - r0, 1.0f, ds + (int64_t)r0 * T + r0,
                     T, q + (int64_t)r0 * ld, ld, 0.0f, dk + (int64_t)r0 * ld,
                     ld);
        // dV[r0:r0+nr] = P[r0:T, r0:r0+nr]^T dO[r0:T]
        gemm_f32_cpu(1, 0, nr, hs, T - r0, 1.0f, p + (int64_t)r0 * T + r0, T,
                     dout + (int64_t)r0 * ldo, ldo, 0.0f,
                     dv + (int64_t)r0 * ld, ld);
    }
}

static void attention_fwd_f32(float *out, float *att, const float *qkv,
                              int B, int T, int NH, int hs)
{
    int ld = 3 * NH * hs, ldo = NH * hs;
    #pragma omp parallel for schedule(static)
    for (int bh = 0; bh < B * NH; bh++) {
        int b = bh / NH, h = bh % NH;
        const float *q = qkv + (int64_t)b * T * ld + (int64_t)h * 3 * hs;
        head_fwd(out + (int64_t)b * T * ldo + (int64_t)h * hs,
                 att + (int64_t)bh * T * T, q, q + hs, q + 2 * hs, T, hs, ld,
                 ldo);
    }
}

/* Each head widened into fp32 (T, 3hs) q|k|v rows and a (T, hs) output. */
static void attention_fwd_lowp(void *out, float *att, const void *qkv,
                               ops_dtype dt, int B, int T, int NH, int hs)
{
    int ld = 3 * NH * hs, ldo = NH * hs;
    int64_t share = (int64_t)T * 4 * hs;
    float *buf = scratch_cpu(SCRATCH_ATTENTION, (size_t)omp_get_max_threads()
                             * share * sizeof(float));
    #pragma omp parallel for schedule(static)
    for (int bh = 0; bh < B * NH; bh++) {
        int b = bh / NH, h = bh % NH;
        float *q = thread_share_cpu(buf, share), *o = q + (int64_t)T * 3 * hs;
        int64_t qoff = (int64_t)b * T * ld + (int64_t)h * 3 * hs;
        int64_t ooff = (int64_t)b * T * ldo + (int64_t)h * hs;
        widen_rows_cpu(q, 3 * hs, (const char *)qkv + qoff * ops_dtype_size(dt),
                   dt, ld, T, 3 * hs);
        head_fwd(o, att + (int64_t)bh * T * T, q, q + hs, q + 2 * hs, T, hs,
                 3 * hs, hs);
        narrow_rows_cpu((char *)out + ooff * ops_dtype_size(dt), dt, ldo, o, hs,
                    T, hs);
    }
}

void attention_exact_fwd_cpu(void *out, float *att, const void *qkv, ops_dtype dt,
                             int B, int T, int NH, int hs)
{
    int saved = gemm_serial_begin_cpu();
    if (dt == OPS_F32)
        attention_fwd_f32(out, att, qkv, B, T, NH, hs);
    else
        attention_fwd_lowp(out, att, qkv, dt, B, T, NH, hs);
    gemm_serial_end_cpu(saved);
}

static void attention_bwd_f32(float *dqkv, float *scratch, const float *dout,
                              const float *qkv, const float *att,
                              int B, int T, int NH, int hs)
{
    int ld = 3 * NH * hs, ldo = NH * hs;
    #pragma omp parallel for schedule(static)
    for (int bh = 0; bh < B * NH; bh++) {
        int b = bh / NH, h = bh % NH;
        int64_t qoff = (int64_t)b * T * ld + (int64_t)h * 3 * hs;
        const float *q = qkv + qoff;
        float *dq = dqkv + qoff;
        head_bwd(dq, dq + hs, dq + 2 * hs, scratch + (int64_t)bh * T * T,
                 dout + (int64_t)b * T * ldo + (int64_t)h * hs, q, q + hs,
                 q + 2 * hs, att + (int64_t)bh * T * T, T, hs, ld, ldo);
    }
}

/* Each head's q|k|v and dout widened, dq|dk|dv computed in fp32 (T, 3hs)
 * and rounded once into dqkv. */
static void attention_bwd_lowp(void *dqkv, float *scratch, const void *dout,
                               const void *qkv, const float *att,
                               ops_dtype dt, int B, int T, int NH, int hs)
{
    int ld = 3 * NH * hs, ldo = NH * hs;
    size_t es = ops_dtype_size(dt);
    int64_t share = (int64_t)T * 7 * hs;
    float *buf = scratch_cpu(SCRATCH_ATTENTION, (size_t)omp_get_max_threads()
                             * share * sizeof(float));
    #pragma omp parallel for schedule(static)
    for (int bh = 0; bh < B * NH; bh++) {
        int b = bh / NH, h = bh % NH;
        float *q = thread_share_cpu(buf, share), *dq = q + (int64_t)T * 3 * hs;
        float *g = dq + (int64_t)T * 3 * hs;
        int64_t qoff = (int64_t)b * T * ld + (int64_t)h * 3 * hs;
        int64_t ooff = (int64_t)b * T * ldo + (int64_t)h * hs;
        widen_rows_cpu(q, 3 * hs, (const char *)qkv + qoff * es, dt, ld, T,
                   3 * hs);
        widen_rows_cpu(g, hs, (const char *)dout + ooff * es, dt, ldo, T, hs);
        head_bwd(dq, dq + hs, dq + 2 * hs, scratch + (int64_t)bh * T * T, g,
                 q, q + hs, q + 2 * hs, att + (int64_t)bh * T * T, T, hs,
                 3 * hs, hs);
        narrow_rows_cpu((char *)dqkv + qoff * es, dt, ld, dq, 3 * hs, T, 3 * hs);
    }
}

void attention_exact_bwd_cpu(void *dqkv, float *scratch, const void *dout,
                             const void *qkv, const float *att, ops_dtype dt,
                             int B, int T, int NH, int hs)
{
    int saved = gemm_serial_begin_cpu();
    if (dt == OPS_F32)
        attention_bwd_f32(dqkv, scratch, dout, qkv, att, B, T, NH, hs);
    else
        attention_bwd_lowp(dqkv, scratch, dout, qkv, att, dt, B, T, NH, hs);
    gemm_serial_end_cpu(saved);
}
