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
 * bf16 loops are each compiled with their dtype a constant and cloned per
 * ISA, so that they run in the CPU's widest vectors. The sums over a row's channels run in vec.h's 16 lanes (a
 * serial sum waits on each add's latency: it made LayerNorm 3x slower)
 * and are folded in one fixed order, so they are the same bits on every
 * CPU and thread count.
 */
#include "cpu.h"
#include "vec.h"

#include <math.h>

/* channels per task of the dw/db reduction (a multiple of 16; 32 keeps
 * the four 16-lane sums in AVX2's registers) */
#define LN_CBLOCK 32

/* x[c] of a row, widened: `dt` is a constant at each call site below, so
 * the compiler keeps the fp32 loops free of the switch. */
#define LD(p, c) load_f32_cpu(p, dt, c)
#define LD16(p, c) load16_f32_cpu(p, dt, c)

static inline __attribute__((always_inline)) void layernorm_fwd_row(void *out, float *mean, float *rstd,
                                     const void *inp, const void *w,
                                     const void *b, ops_dtype dt, int i,
                                     int C)
{
    int64_t off = (int64_t)i * C;
    int c16 = C & ~15;
    vec16 acc = vec16_set(0.0f);
    for (int c = 0; c < c16; c += 16)
        acc = vec16_add(acc, LD16(inp, off + c));
    float m = vec16_sum_lanes(acc);
    for (int c = c16; c < C; c++)
        m += LD(inp, off + c);
    m /= (float)C;
    vec16 mv = vec16_set(m);
    acc = vec16_set(0.0f);
    for (int c = 0; c < c16; c += 16) {
        vec16 d = vec16_sub(LD16(inp, off + c), mv);
        acc = vec16_add(acc, vec16_mul(d, d));
    }
    float var = vec16_sum_lanes(acc);
    for (int c = c16; c < C; c++) {
        float x = LD(inp, off + c);
        var += (x - m) * (x - m);
    }
    var /= (float)C;
    float s = 1.0f / sqrtf(var + TRI_LN_EPS);
    vec16 sv = vec16_set(s);
    for (int c = 0; c < c16; c += 16) {
        vec16 norm = vec16_mul(vec16_sub(LD16(inp, off + c), mv), sv);
        store16_f32_cpu(out, dt, off + c,
                        vec16_add(vec16_mul(norm, LD16(w, c)), LD16(b, c)));
    }
    for (int c = c16; c < C; c++)
        store_f32_cpu(out, dt, off + c,
                      (LD(inp, off + c) - m) * s * LD(w, c) + LD(b, c));
    mean[i] = m;
    rstd[i] = s;
}

/* Row i: the always-inline row with its dtype a constant, so each loop
 * is compiled for fp32 and bf16 alone; cloned per ISA (TRI_CLONES), which
 * the OpenMP regions' outlined bodies are not. */
TRI_CLONES static void fwd_row(void *out, float *mean, float *rstd,
                               const void *inp, const void *w, const void *b,
                               ops_dtype dt, int i, int C)
{
    TRI_WITH_CONST_DTYPE(dt, layernorm_fwd_row(out, mean, rstd, inp, w, b,
                                               dt_, i, C));
}

void layernorm_fwd_cpu(void *out, float *mean, float *rstd, const void *inp,
                       const void *w, const void *b, ops_dtype dt, int N,
                       int C)
{
    // inp, out are (N,C); mean, rstd are (N)
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++)
        fwd_row(out, mean, rstd, inp, w, b, dt, i, C);
}

/* dinp(N,C) += for row i: (w*dout - mean(w*dout) - norm*mean(w*dout*norm))
 * * rstd, the gradient through the normalisation. */
static inline __attribute__((always_inline)) void layernorm_dinp_row(void *dinp, const void *dout,
                                      const void *inp, const void *w,
                                      float m, float s, ops_dtype dt, int i,
                                      int C)
{
    int64_t off = (int64_t)i * C;
    int c16 = C & ~15;
    vec16 mv = vec16_set(m), sv = vec16_set(s);
    vec16 acc_d = vec16_set(0.0f), acc_dn = vec16_set(0.0f);
    for (int c = 0; c < c16; c += 16) {
        vec16 dnorm = vec16_mul(LD16(w, c), LD16(dout, off + c));
        vec16 centred = vec16_sub(LD16(inp, off + c), mv);
        acc_d = vec16_add(acc_d, dnorm);
        acc_dn = vec16_add(acc_dn, vec16_mul(vec16_mul(dnorm, centred), sv));
    }
    float dnorm_mean = vec16_sum_lanes(acc_d);
    float dnorm_norm_mean = vec16_sum_lanes(acc_dn);
    for (int c = c16; c < C; c++) {
        float dnorm = LD(w, c) * LD(dout, off + c);
        dnorm_mean += dnorm;
        dnorm_norm_mean += dnorm * (LD(inp, off + c) - m) * s;
    }
    dnorm_mean /= (float)C;
    dnorm_norm_mean /= (float)C;
    vec16 dmv = vec16_set(dnorm_mean), dnmv = vec16_set(dnorm_norm_mean);
    for (int c = 0; c < c16; c += 16) {
        vec16 norm = vec16_mul(vec16_sub(LD16(inp, off + c), mv), sv);
        vec16 dnorm = vec16_mul(LD16(w, c), LD16(dout, off + c));
        vec16 d = vec16_sub(vec16_sub(dnorm, dmv), vec16_mul(norm, dnmv));
        store16_f32_cpu(dinp, dt, off + c,
                        vec16_add(LD16(dinp, off + c), vec16_mul(d, sv)));
    }
    for (int c = c16; c < C; c++) {
        float norm = (LD(inp, off + c) - m) * s;
        float dnorm = LD(w, c) * LD(dout, off + c);
        store_f32_cpu(dinp, dt, off + c, LD(dinp, off + c) +
                      (dnorm - dnorm_mean - norm * dnorm_norm_mean) * s);
    }
}

/* dw, db += sums over the N rows for channels [c0, c0+nc): 16 channels a
 * vector, the last nc % 16 one by one, each channel's sum in row order. */
static inline __attribute__((always_inline)) void layernorm_dwdb_block(float *dw, float *db, const void *dout,
                                        const void *inp, const float *mean,
                                        const float *rstd, ops_dtype dt,
                                        int N, int C, int c0, int nc)
{
    vec16 sw[LN_CBLOCK / 16], sb[LN_CBLOCK / 16];
    float tw[16] = { 0 }, tb[16] = { 0 };
    int nv = nc / 16, c_tail = nv * 16;
    for (int v = 0; v < nv; v++)
        sw[v] = sb[v] = vec16_set(0.0f);
    for (int i = 0; i < N; i++) {
        int64_t off = (int64_t)i * C + c0;
        vec16 mv = vec16_set(mean[i]), rv = vec16_set(rstd[i]);
        for (int v = 0; v < nv; v++) {
            vec16 g = LD16(dout, off + 16 * v);
            vec16 norm = vec16_mul(vec16_sub(LD16(inp, off + 16 * v), mv), rv);
            sw[v] = vec16_add(sw[v], vec16_mul(norm, g));
            sb[v] = vec16_add(sb[v], g);
        }
        for (int c = c_tail; c < nc; c++) {
            float g = LD(dout, off + c);
            tw[c - c_tail] += (LD(inp, off + c) - mean[i]) * rstd[i] * g;
            tb[c - c_tail] += g;
        }
    }
    for (int c = 0; c < c_tail; c++) {
        dw[c0 + c] += vec16_lane(sw[c / 16], c % 16);
        db[c0 + c] += vec16_lane(sb[c / 16], c % 16);
    }
    for (int c = c_tail; c < nc; c++) {
        dw[c0 + c] += tw[c - c_tail];
        db[c0 + c] += tb[c - c_tail];
    }
}

TRI_CLONES static void dinp_row(void *dinp, const void *dout,
                                const void *inp, const void *w, float m,
                                float s, ops_dtype dt, int i, int C)
{
    TRI_WITH_CONST_DTYPE(dt, layernorm_dinp_row(dinp, dout, inp, w, m, s,
                                                dt_, i, C));
}

TRI_CLONES static void dwdb_block(float *dw, float *db, const void *dout,
                                  const void *inp, const float *mean,
                                  const float *rstd, ops_dtype dt, int N,
                                  int C, int c0, int nc)
{
    TRI_WITH_CONST_DTYPE(dt, layernorm_dwdb_block(dw, db, dout, inp, mean,
                                                  rstd, dt_, N, C, c0, nc));
}

void layernorm_bwd_cpu(void *dinp, float *dw, float *db, const void *dout,
                       const void *inp, const void *w, const float *mean,
                       const float *rstd, ops_dtype dt, int N, int C)
{
    int blocks = (C + LN_CBLOCK - 1) / LN_CBLOCK;
    #pragma omp parallel
    {
        #pragma omp for schedule(static) nowait
        for (int i = 0; i < N; i++)
            dinp_row(dinp, dout, inp, w, mean[i], rstd[i], dt, i, C);
        #pragma omp for schedule(static)
        for (int blk = 0; blk < blocks; blk++) {
            int c0 = blk * LN_CBLOCK;
            int nc = C - c0 < LN_CBLOCK ? C - c0 : LN_CBLOCK;
            dwdb_block(dw, db, dout, inp, mean, rstd, dt, N, C, c0, nc);
        }
    }
}
