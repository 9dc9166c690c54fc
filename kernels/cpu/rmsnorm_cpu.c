/*
 * rmsnorm_cpu.c - RMSNorm forward and backward over the last dimension.
 *
 * y = x * rstd * w with rstd = 1 / sqrt(mean(x^2) + eps): LayerNorm
 * without the mean and the bias, as Llama normalises. Same structure as
 * layernorm_cpu.c: rows go to threads for the output and dinp, channel
 * blocks for dw, so every sum has a fixed order and the result does not
 * depend on the thread count. Every element is widened to fp32 as it is
 * read and rounded once when stored; rstd and dw are fp32.
 */
#include "cpu.h"

#define RMS_CBLOCK 64
#define LD(p, c) load_f32_cpu(p, dt, c)

void rmsnorm_fwd_cpu(void *out, float *rstd, const void *inp, const void *w,
                     ops_dtype dt, int N, int C, float eps)
{
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        int64_t off = (int64_t)i * C;
        float ss = 0.0f;
        for (int c = 0; c < C; c++) {
            float x = LD(inp, off + c);
            ss += x * x;
        }
        float r = elem_rms_rstd(ss, C, eps);
        for (int c = 0; c < C; c++)
            store_f32_cpu(out, dt, off + c, LD(inp, off + c) * r * LD(w, c));
        rstd[i] = r;
    }
}

void rmsnorm_bwd_cpu(void *dinp, float *dw, const void *dout, const void *inp,
                     const void *w, const float *rstd, ops_dtype dt, int N, int C)
{
    int blocks = (C + RMS_CBLOCK - 1) / RMS_CBLOCK;
    #pragma omp parallel
    {
        #pragma omp for schedule(static) nowait
        for (int i = 0; i < N; i++) {
            int64_t off = (int64_t)i * C;
            float dot = 0.0f;
            for (int c = 0; c < C; c++)
                dot += LD(w, c) * LD(dout, off + c) * LD(inp, off + c);
            dot /= (float)C;
            for (int c = 0; c < C; c++) {
                float d = elem_rms_dinp(LD(w, c) * LD(dout, off + c), LD(inp, off + c),
                                        rstd[i], dot);
                store_f32_cpu(dinp, dt, off + c, LD(dinp, off + c) + d);
            }
        }
        #pragma omp for schedule(static)
        for (int blk = 0; blk < blocks; blk++) {
            int c0 = blk * RMS_CBLOCK;
            int nc = C - c0 < RMS_CBLOCK ? C - c0 : RMS_CBLOCK;
            float sw[RMS_CBLOCK] = { 0 };
            for (int i = 0; i < N; i++) {
                int64_t off = (int64_t)i * C + c0;
                for (int c = 0; c < nc; c++)
                    sw[c] += LD(inp, off + c) * rstd[i] * LD(dout, off + c);
            }
            for (int c = 0; c < nc; c++)
                dw[c0 + c] += sw[c];
        }
    }
}
