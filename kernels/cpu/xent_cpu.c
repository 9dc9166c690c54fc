/*
 * xent_cpu.c - softmax cross-entropy in the three vocab-parallel phases.
 *
 * Megatron's vocab-parallel cross-entropy: a rank sees only its columns
 * [v0, v0+Vl) of the logits, so the row max and the sum of exponentials are
 * computed per shard and combined by the caller (MAX, then SUM) between the
 * phases. Each row is independent, so rows go to threads; within a row the
 * sum runs in order, in fp64, so the loss does not depend on the thread
 * count and a 50k-wide row loses no precision. Stored statistics are fp32.
 *
 * The model computes its logits in fp32 (matmul_fwd with an fp32 out), so
 * the loss and dlogits are fp32 whatever the compute dtype; bf16 or fp16
 * logits also work, widened as they are read, with dlogits in their dtype.
 */
#include "cpu.h"

#include <math.h>

/* This shard's column of row i's target, or -1 if another shard owns it. */
static int64_t target_col(const int32_t *targets, int i, int v0, int Vl)
{
    int64_t j = (int64_t)targets[i] - v0;
    return j >= 0 && j < Vl ? j : -1;
}

void xent_max_cpu(float *rowmax, const void *logits, ops_dtype dt, int N,
                  int Vl)
{
    // logits is (N,Vl); an empty shard reports -inf, the identity of MAX
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        int64_t off = (int64_t)i * Vl;
        float m = -INFINITY;
        if (dt == OPS_F32) {
            const float *row = (const float *)logits + off;
            for (int j = 0; j < Vl; j++)
                m = row[j] > m ? row[j] : m;
        } else {
            for (int j = 0; j < Vl; j++) {
                float x = load_f32_cpu(logits, dt, off + j);
                m = x > m ? x : m;
            }
        }
        rowmax[i] = m;
    }
}

void xent_sumexp_cpu(float *sumexp, float *target_logit, const void *logits,
                     ops_dtype dt, const float *rowmax,
                     const int32_t *targets, int v0, int N, int Vl)
{
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        int64_t off = (int64_t)i * Vl;
        float m = rowmax[i];
        double s = 0.0;
        if (dt == OPS_F32) {
            const float *row = (const float *)logits + off;
            for (int j = 0; j < Vl; j++)
                s += expf(row[j] - m);
        } else {
            for (int j = 0; j < Vl; j++)
                s += expf(load_f32_cpu(logits, dt, off + j) - m);
        }
        sumexp[i] = (float)s;
        int64_t t = target_col(targets, i, v0, Vl);
        target_logit[i] = t >= 0 ? load_f32_cpu(logits, dt, off + t) : 0.0f;
    }
}

void xent_finish_cpu(float *losses, void *dlogits, const void *logits,
                     ops_dtype dt, const float *rowmax, const float *sumexp,
                     const float *target_logit, const int32_t *targets,
                     int v0, int N, int Vl, float grad_scale)
{
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        float m = rowmax[i];
        losses[i] = logf(sumexp[i]) + m - target_logit[i];
        if (!dlogits)
            continue;
        // dlogits may alias logits: each element is read, then overwritten
        int64_t off = (int64_t)i * Vl;
        float inv = 1.0f / sumexp[i];
        int64_t t = target_col(targets, i, v0, Vl);
        if (dt == OPS_F32) {
            const float *row = (const float *)logits + off;
            float *drow = (float *)dlogits + off;
            for (int j = 0; j < Vl; j++) {
                float p = expf(row[j] - m) * inv;
                drow[j] = (p - (j == t ? 1.0f : 0.0f)) * grad_scale;
            }
        } else {
            for (int j = 0; j < Vl; j++) {
                float p = expf(load_f32_cpu(logits, dt, off + j) - m) * inv;
                store_f32_cpu(dlogits, dt, off + j,
                              (p - (j == t ? 1.0f : 0.0f)) * grad_scale);
            }
        }
    }
}
