/*
 * layernorm_cpu.c - LayerNorm forward and backward over the last dimension.
 *
 * As llm.c's train_gpt2.c, with fp32 statistics kept for the backward pass.
 * The backward pass is split by what it reduces over: dinp needs sums over
 * channels, so rows go to threads; dw and db need sums over rows, so
 * channel blocks go to threads and each walks the rows in order. No two
 * threads add into one element, and every sum has a fixed order, so the
 * result does not depend on the thread count.
 */
#include "cpu.h"

#include <math.h>

/* channels per task of the dw/db reduction */
#define LN_CBLOCK 64

void layernorm_fwd_cpu(float *out, float *mean, float *rstd, const float *inp,
                       const float *w, const float *b, int N, int C)
{
    // inp, out are (N,C); mean, rstd are (N)
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        const float *x = inp + (int64_t)i * C;
        float m = 0.0f;
        for (int c = 0; c < C; c++)
            m += x[c];
        m /= (float)C;
        float var = 0.0f;
        for (int c = 0; c < C; c++)
            var += (x[c] - m) * (x[c] - m);
        var /= (float)C;
        float s = 1.0f / sqrtf(var + TRI_LN_EPS);
        float *y = out + (int64_t)i * C;
        for (int c = 0; c < C; c++)
            y[c] = (x[c] - m) * s * w[c] + b[c];
        mean[i] = m;
        rstd[i] = s;
    }
}

/* dinp(N,C) += for one row: (w*dout - mean(w*dout) - norm*mean(w*dout*norm))
 * * rstd, the gradient through the normalisation. */
static void layernorm_dinp_row(float *dinp, const float *dout, const float *x,
                               const float *w, float m, float s, int C)
{
    float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
    for (int c = 0; c < C; c++) {
        float dnorm = w[c] * dout[c];
        dnorm_mean += dnorm;
        dnorm_norm_mean += dnorm * (x[c] - m) * s;
    }
    dnorm_mean /= (float)C;
    dnorm_norm_mean /= (float)C;
    for (int c = 0; c < C; c++) {
        float norm = (x[c] - m) * s;
        float dnorm = w[c] * dout[c];
        dinp[c] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * s;
    }
}

/* dw, db += sums over the N rows for channels [c0, c0+nc). */
static void layernorm_dwdb_block(float *dw, float *db, const float *dout,
                                 const float *inp, const float *mean,
                                 const float *rstd, int N, int C, int c0,
                                 int nc)
{
    float sw[LN_CBLOCK] = { 0 }, sb[LN_CBLOCK] = { 0 };
    for (int i = 0; i < N; i++) {
        const float *x = inp + (int64_t)i * C + c0;
        const float *g = dout + (int64_t)i * C + c0;
        for (int c = 0; c < nc; c++) {
            sw[c] += (x[c] - mean[i]) * rstd[i] * g[c];
            sb[c] += g[c];
        }
    }
    for (int c = 0; c < nc; c++) {
        dw[c0 + c] += sw[c];
        db[c0 + c] += sb[c];
    }
}

void layernorm_bwd_cpu(float *dinp, float *dw, float *db, const float *dout,
                       const float *inp, const float *w, const float *mean,
                       const float *rstd, int N, int C)
{
    int blocks = (C + LN_CBLOCK - 1) / LN_CBLOCK;
    #pragma omp parallel
    {
        #pragma omp for schedule(static) nowait
        for (int i = 0; i < N; i++) {
            int64_t off = (int64_t)i * C;
            layernorm_dinp_row(dinp + off, dout + off, inp + off, w, mean[i],
                               rstd[i], C);
        }
        #pragma omp for schedule(static)
        for (int blk = 0; blk < blocks; blk++) {
            int c0 = blk * LN_CBLOCK;
            int nc = C - c0 < LN_CBLOCK ? C - c0 : LN_CBLOCK;
            layernorm_dwdb_block(dw, db, dout, inp, mean, rstd, N, C, c0, nc);
        }
    }
}
