/*
 * rmsnorm_cpu.c - RMSNorm forward and backward over the last dimension.
 *
 * y = x * rstd * w with rstd = 1 / sqrt(mean(x^2) + eps): LayerNorm
 * without the mean and the bias, as Llama normalises. Same structure as
 * layernorm_cpu.c: rows go to threads for the output and dinp, channel
 * blocks for dw, so every sum has a fixed order and the result does not
 * depend on the thread count. Every element is widened to fp32 as it is
 * read and rounded once when stored; rstd and dw are fp32. Row sums run
 * in vec.h's 16 lanes, and each row function is compiled for fp32 and
 * bf16 with the dtype a constant and cloned per ISA, as LayerNorm's are.
 */
#include "cpu.h"
#include "vec.h"

#define RMS_CBLOCK 64
#define LD(p, c) load_f32_cpu(p, dt, c)
#define LD16(p, c) load16_f32_cpu(p, dt, c)

static inline __attribute__((always_inline)) void rmsnorm_fwd_row(void *out, float *rstd, const void *inp,
                                   const void *w, ops_dtype dt, int i, int C,
                                   float eps)
{
    int64_t off = (int64_t)i * C;
    int c16 = C & ~15;
    vec16 acc = vec16_set(0.0f);
    for (int c = 0; c < c16; c += 16) {
        vec16 x = LD16(inp, off + c);
        acc = vec16_add(acc, vec16_mul(x, x));
    }
    float ss = vec16_sum_lanes(acc);
    for (int c = c16; c < C; c++) {
        float x = LD(inp, off + c);
        ss += x * x;
    }
    float r = elem_rms_rstd(ss, C, eps);
    vec16 rv = vec16_set(r);
    for (int c = 0; c < c16; c += 16)
        store16_f32_cpu(out, dt, off + c,
                        vec16_mul(vec16_mul(LD16(inp, off + c), rv), LD16(w, c)));
    for (int c = c16; c < C; c++)
        store_f32_cpu(out, dt, off + c, LD(inp, off + c) * r * LD(w, c));
    rstd[i] = r;
}

/* dinp(row i) += elem_rms_dinp of each element, after the row's dot of
 * w dy x */
static inline __attribute__((always_inline)) void rmsnorm_dinp_row(void *dinp, const void *dout,
                                    const void *inp, const void *w, float r,
                                    ops_dtype dt, int i, int C)
{
    int64_t off = (int64_t)i * C;
    int c16 = C & ~15;
    vec16 acc = vec16_set(0.0f);
    for (int c = 0; c < c16; c += 16)
        acc = vec16_add(acc, vec16_mul(vec16_mul(LD16(w, c), LD16(dout, off + c)),
                                       LD16(inp, off + c)));
    float dot = vec16_sum_lanes(acc);
    for (int c = c16; c < C; c++)
        dot += LD(w, c) * LD(dout, off + c) * LD(inp, off + c);
    dot /= (float)C;
    for (int c = 0; c < C; c++) {
        float d = elem_rms_dinp(LD(w, c) * LD(dout, off + c), LD(inp, off + c),
                                r, dot);
        store_f32_cpu(dinp, dt, off + c, LD(dinp, off + c) + d);
    }
}

/* dw += sums over the N rows for channels [c0, c0+nc), each in row order */
static inline __attribute__((always_inline)) void rmsnorm_dw_block(float *dw, const void *dout, const void *inp,
                                    const float *rstd, ops_dtype dt, int N,
                                    int C, int c0, int nc)
{
    float sw[RMS_CBLOCK] = { 0 };
    for (int i = 0; i < N; i++) {
        int64_t off = (int64_t)i * C + c0;
        for (int c = 0; c < nc; c++)
            sw[c] += LD(inp, off + c) * rstd[i] * LD(dout, off + c);
    }
    for (int c = 0; c < nc; c++)
        dw[c0 + c] += sw[c];
}

/* The rows and blocks with their dtype a constant, cloned per ISA (the
 * OpenMP regions' outlined bodies are not). */
TRI_CLONES static void fwd_row(void *out, float *rstd, const void *inp,
                               const void *w, ops_dtype dt, int i, int C,
                               float eps)
{
    TRI_WITH_CONST_DTYPE(dt, rmsnorm_fwd_row(out, rstd, inp, w, dt_, i, C, eps));
}

TRI_CLONES static void dinp_row(void *dinp, const void *dout,
                                const void *inp, const void *w, float r,
                                ops_dtype dt, int i, int C)
{
    TRI_WITH_CONST_DTYPE(dt, rmsnorm_dinp_row(dinp, dout, inp, w, r, dt_, i,
                                              C));
}

TRI_CLONES static void dw_block(float *dw, const void *dout, const void *inp,
                                const float *rstd, ops_dtype dt, int N, int C,
                                int c0, int nc)
{
    TRI_WITH_CONST_DTYPE(dt, rmsnorm_dw_block(dw, dout, inp, rstd, dt_, N,
                                              C, c0, nc));
}

void rmsnorm_fwd_cpu(void *out, float *rstd, const void *inp, const void *w,
                     ops_dtype dt, int N, int C, float eps)
{
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++)
        fwd_row(out, rstd, inp, w, dt, i, C, eps);
}

void rmsnorm_bwd_cpu(void *dinp, float *dw, const void *dout, const void *inp,
                     const void *w, const float *rstd, ops_dtype dt, int N, int C)
{
    int blocks = (C + RMS_CBLOCK - 1) / RMS_CBLOCK;
    #pragma omp parallel
    {
        #pragma omp for schedule(static) nowait
        for (int i = 0; i < N; i++)
            dinp_row(dinp, dout, inp, w, rstd[i], dt, i, C);
        #pragma omp for schedule(static)
        for (int blk = 0; blk < blocks; blk++) {
            int c0 = blk * RMS_CBLOCK;
            int nc = C - c0 < RMS_CBLOCK ? C - c0 : RMS_CBLOCK;
            dw_block(dw, dout, inp, rstd, dt, N, C, c0, nc);
        }
    }
}
