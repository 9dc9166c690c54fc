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
 */
#include "cpu.h"

#include <string.h>

/* channels per task of the backward scatter-adds */
#define EMB_CBLOCK 64

void embedding_fwd_cpu(float *out, const int32_t *tokens, const float *wte,
                       int v0, int Vl, int N, int C)
{
    // out is (N,C), tokens (N), wte (Vl,C)
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        float *row = out + (int64_t)i * C;
        int64_t r = (int64_t)tokens[i] - v0;
        if (r >= 0 && r < Vl)
            memcpy(row, wte + r * C, (size_t)C * sizeof(float));
        else
            memset(row, 0, (size_t)C * sizeof(float));
    }
}

void embedding_bwd_cpu(float *dwte, const int32_t *tokens, const float *dout,
                       int v0, int Vl, int N, int C)
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
            const float *src = dout + (int64_t)i * C + c0;
            for (int c = 0; c < nc; c++)
                dst[c] += src[c];
        }
    }
}

void position_fwd_cpu(float *out, const float *wpe, int B, int T, int C)
{
    // out is (B,T,C), wpe (T,C)
    #pragma omp parallel for schedule(static)
    for (int bt = 0; bt < B * T; bt++) {
        float *row = out + (int64_t)bt * C;
        const float *p = wpe + (int64_t)(bt % T) * C;
        for (int c = 0; c < C; c++)
            row[c] += p[c];
    }
}

void position_bwd_cpu(float *dwpe, const float *dout, int B, int T, int C)
{
    // each position t is one task; the batch is summed in order b = 0, 1, ...
    #pragma omp parallel for schedule(static)
    for (int t = 0; t < T; t++) {
        float *dst = dwpe + (int64_t)t * C;
        for (int b = 0; b < B; b++) {
            const float *src = dout + ((int64_t)b * T + t) * C;
            for (int c = 0; c < C; c++)
                dst[c] += src[c];
        }
    }
}
