/*
 * embedding_cpu.c - token and position embeddings, vocab-parallel aware.
 *
 * A rank holding vocabulary rows [v0, v0+Vl) looks up only the tokens it
 * owns and writes zero rows for the others; summing the outputs over the
 * tensor-parallel ranks then gives the full lookup (Megatron's
 * VocabParallelEmbedding). The backward passes scatter-add into weight rows
 * that repeated tokens share, so threads split the channels, not the rows:
 * each dwte/dwpe element gets its contributions from one thread, in token
 * order, whatever the thread count.
 *
 * wte, wpe and out are the compute dtype (a lookup copies rows bit for bit;
 * adding positions rounds once); dwte and dwpe are fp32 parameter
 * gradients, summed in fp32 from the widened dout.
 */
#include "cpu.h"

#include <string.h>

/* channels per task of the backward scatter-adds */
#define EMB_CBLOCK 64

void embedding_fwd_cpu(void *out, const int32_t *tokens, const void *wte,
                       ops_dtype dt, int v0, int Vl, int N, int C)
{
    // out is (N,C), tokens (N), wte (Vl,C)
    size_t row_bytes = (size_t)C * ops_dtype_size(dt);
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        char *row = (char *)out + (size_t)i * row_bytes;
        int64_t r = (int64_t)tokens[i] - v0;
        if (r >= 0 && r < Vl)
            memcpy(row, (const char *)wte + (size_t)r * row_bytes, row_bytes);
        else
            memset(row, 0, row_bytes);
    }
}

void embedding_bwd_cpu(float *dwte, const int32_t *tokens, const void *dout,
                       ops_dtype dt, int v0, int Vl, int N, int C)
{
    int blocks = (C + EMB_CBLOCK - 1) / EMB_CBLOCK;
    #pragma omp parallel for schedule(static)
    for (int blk = 0; blk < blocks; blk++) {
        int c0 = blk * EMB_CBLOCK;
        int nc = C - c0 < EMB_CBLOCK ? C - c0 : EMB_CBLOCK;
        for (int i = 0; i < N; i++) {
            int64_t r = (int64_t)tokens[i] - v0;
            if (r < 0 || r >= Vl)
                continue;
            float *dst = dwte + r * C + c0;
            int64_t src = (int64_t)i * C + c0;
            if (dt == OPS_F32) {
                const float *g = (const float *)dout + src;
                for (int c = 0; c < nc; c++)
                    dst[c] += g[c];
            } else {
                for (int c = 0; c < nc; c++)
                    dst[c] += load_f32_cpu(dout, dt, src + c);
            }
        }
    }
}

void position_fwd_cpu(void *out, const void *wpe, ops_dtype dt, int B, int T,
                      int C)
{
    // out is (B,T,C), wpe (T,C)
    #pragma omp parallel for schedule(static)
    for (int bt = 0; bt < B * T; bt++) {
        int64_t o = (int64_t)bt * C, p = (int64_t)(bt % T) * C;
        if (dt == OPS_F32) {
            float *row = (float *)out + o;
            const float *w = (const float *)wpe + p;
            for (int c = 0; c < C; c++)
                row[c] += w[c];
        } else {
            for (int c = 0; c < C; c++)
                store_f32_cpu(out, dt, o + c, load_f32_cpu(out, dt, o + c) +
                                              load_f32_cpu(wpe, dt, p + c));
        }
    }
}

void position_bwd_cpu(float *dwpe, const void *dout, ops_dtype dt, int B,
                      int T, int C)
{
    // each position t is one task; the batch is summed in order b = 0, 1, ...
    #pragma omp parallel for schedule(static)
    for (int t = 0; t < T; t++) {
        float *dst = dwpe + (int64_t)t * C;
        for (int b = 0; b < B; b++) {
            int64_t src = ((int64_t)b * T + t) * C;
            if (dt == OPS_F32) {
                const float *g = (const float *)dout + src;
                for (int c = 0; c < C; c++)
                    dst[c] += g[c];
            } else {
                for (int c = 0; c < C; c++)
                    dst[c] += load_f32_cpu(dout, dt, src + c);
            }
        }
    }
}
