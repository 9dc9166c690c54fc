/*
 * layernorm_cpu.c - LayerNorm forward and backward over the last dimension.
 *
 * As llm.c's train_gpt2.c, with fp32 statistics kept for the backward pass.
 * The backward pass is split by what it reduces over: dinp needs sums over
 * channels, so rows go to threads; dw and db need sums over rows, so
 * channel blocks go to threads and each walks the rows in order. No two
 * threads add into one element, and every sum has a fixed order, so the
 * result does not depend on the thread count.
 *
 * bf16 and fp16 (out, inp, w, b, dout, dinp): every element is widened as
 * it is read and the math is the fp32 code's, operation for operation, so
 * a result is the fp32 result on the widened inputs, rounded once when it
 * is stored. mean, rstd, dw and db are fp32 in every case. The fp32 and
 * bf16 loops are each compiled with their dtype a constant, so that they
 * vectorize.
 */
#include "cpu.h"

#include <math.h>

/* channels per task of the dw/db reduction */
#define LN_CBLOCK 64

/* x[c] of a row, widened: `dt` is a constant at each call site below, so
 * the compiler keeps the fp32 loops free of the switch. */
#define LD(p, c) load_f32_cpu(p, dt, c)

static inline __attribute__((always_inline)) void layernorm_fwd_row(void *out, float *mean, float *rstd,
                                     const void *inp, const void *w,
                                     const void *b, ops_dtype dt, int i,
                                     int C)
{
    int64_t off = (int64_t)i * C;
    float m = 0.0f;
    for (int c = 0; c < C; c++)
        m += LD(inp, off + c);
    m /= (float)C;
    float var = 0.0f;
    for (int c = 0; c < C; c++) {
        float x = LD(inp, off + c);
        var += (x - m) * (x - m);
    }
    var /= (float)C;
    float s = 1.0f / sqrtf(var + TRI_LN_EPS);
    for (int c = 0; c < C; c++)
        store_f32_cpu(out, dt, off + c,
                      (LD(inp, off + c) - m) * s * LD(w, c) + LD(b, c));
    mean[i] = m;
    rstd[i] = s;
}

void layernorm_fwd_cpu(void *out, float *mean, float *rstd, const void *inp,
                       const void *w, const void *b, ops_dtype dt, int N,
                       int C)
{
    // inp, out are (N,C); mean, rstd are (N)
    if (dt == OPS_F32) {
        #pragma omp parallel for schedule(static)
        for (int i = 0; i < N; i++)
            layernorm_fwd_row(out, mean, rstd, inp, w, b, OPS_F32, i, C);
    } else if (dt == OPS_BF16) {
        #pragma omp parallel for schedule(static)
        for (int i = 0; i < N; i++)
            layernorm_fwd_row(out, mean, rstd, inp, w, b, OPS_BF16, i, C);
    } else {
        #pragma omp parallel for schedule(static)
        for (int i = 0; i < N; i++)
            layernorm_fwd_row(out, mean, rstd, inp, w, b, dt, i, C);
    }
}

/* dinp(N,C) += for row i: (w*dout - mean(w*dout) - norm*mean(w*dout*norm))
 * * rstd, the gradient through the normalisation. */
static inline __attribute__((always_inline)) void layernorm_dinp_row(void *dinp, const void *dout,
                                      const void *inp, const void *w,
                                      float m, float s, ops_dtype dt, int i,
                                      int C)
{
    int64_t off = (int64_t)i * C;
    float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
    for (int c = 0; c < C; c++) {
        float dnorm = LD(w, c) * LD(dout, off + c);
        dnorm_mean += dnorm;
        dnorm_norm_mean += dnorm * (LD(inp, off + c) - m) * s;
    }
    dnorm_mean /= (float)C;
    dnorm_norm_mean /= (float)C;
    for (int c = 0; c < C; c++) {
        float norm = (LD(inp, off + c) - m) * s;
        float dnorm = LD(w, c) * LD(dout, off + c);
        store_f32_cpu(dinp, dt, off + c, LD(dinp, off + c) +
                      (dnorm - dnorm_mean - norm * dnorm_norm_mean) * s);
    }
}

/* dw, db += sums over the N rows for channels [c0, c0+nc). */
static inline __attribute__((always_inline)) void layernorm_dwdb_block(float *dw, float *db, const void *dout,
                                        const void *inp, const float *mean,
                                        const float *rstd, ops_dtype dt,
                                        int N, int C, int c0, int nc)
{
    float sw[LN_CBLOCK] = { 0 }, sb[LN_CBLOCK] = { 0 };
    for (int i = 0; i < N; i++) {
        int64_t off = (int64_t)i * C + c0;
        for (int c = 0; c < nc; c++) {
            float g = LD(dout, off + c);
            sw[c] += (LD(inp, off + c) - mean[i]) * rstd[i] * g;
            sb[c] += g;
        }
    }
    for (int c = 0; c < nc; c++) {
        dw[c0 + c] += sw[c];
        db[c0 + c] += sb[c];
    }
}

static inline __attribute__((always_inline)) void layernorm_bwd_all(void *dinp, float *dw, float *db,
                                     const void *dout, const void *inp,
                                     const void *w, const float *mean,
                                     const float *rstd, ops_dtype dt, int N,
                                     int C)
{
    int blocks = (C + LN_CBLOCK - 1) / LN_CBLOCK;
    #pragma omp parallel
    {
        #pragma omp for schedule(static) nowait
        for (int i = 0; i < N; i++)
            layernorm_dinp_row(dinp, dout, inp, w, mean[i], rstd[i], dt, i, C);
        #pragma omp for schedule(static)
        for (int blk = 0; blk < blocks; blk++) {
            int c0 = blk * LN_CBLOCK;
            int nc = C - c0 < LN_CBLOCK ? C - c0 : LN_CBLOCK;
            layernorm_dwdb_block(dw, db, dout, inp, mean, rstd, dt, N, C, c0,
                                 nc);
        }
    }
}

void layernorm_bwd_cpu(void *dinp, float *dw, float *db, const void *dout,
                       const void *inp, const void *w, const float *mean,
                       const float *rstd, ops_dtype dt, int N, int C)
{
    if (dt == OPS_F32)
        layernorm_bwd_all(dinp, dw, db, dout, inp, w, mean, rstd, OPS_F32, N,
                          C);
    else if (dt == OPS_BF16)
        layernorm_bwd_all(dinp, dw, db, dout, inp, w, mean, rstd, OPS_BF16, N,
                          C);
    else
        layernorm_bwd_all(dinp, dw, db, dout, inp, w, mean, rstd, dt, N, C);
}
