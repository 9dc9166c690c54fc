/*
 * xent_cpu.c - softmax cross-entropy in the three vocab-parallel phases.
 *
 * Megatron's vocab-parallel cross-entropy: a rank sees only its columns
 * [v0, v0+Vl) of the logits, so the row max and the sum of exponentials are
 * computed per shard and combined by the caller (MAX, then SUM) between the
 * phases. Each row is independent, so rows go to threads; within a row the
 * max and the fp64 sum run in fixed lanes (vectorizable, never
 * reassociated), so the loss does not depend on the thread count and a
 * 50k-wide row loses no precision. Stored statistics are fp32.
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

/* The three per-row loops of the fp32 path: one pass each over a 50k row,
 * so they decide the cost of the head. */
TRI_CLONES static float row_max(const float *row, int n)
{
    float lane[16];
    for (int k = 0; k < 16; k++)
        lane[k] = -INFINITY;
    int j = 0;
    for (; j + 16 <= n; j += 16)
        for (int k = 0; k < 16; k++)
            lane[k] = row[j + k] > lane[k] ? row[j + k] : lane[k];
    float m = -INFINITY;
    for (int k = 0; k < 16; k++)
        m = lane[k] > m ? lane[k] : m;
    for (; j < n; j++)
        m = row[j] > m ? row[j] : m;
    return m;
}

TRI_CLONES static double row_sumexp(const float *row, float m, int n)
{
    double lane[8] = {0};
    int j = 0;
    for (; j + 8 <= n; j += 8)
        for (int k = 0; k < 8; k++)
            lane[k] += (double)elem_expf(row[j + k] - m);
    double s = 0.0;
    for (int k = 0; k < 8; k++)
        s += lane[k];
    for (; j < n; j++)
        s += (double)elem_expf(row[j] - m);
    return s;
}

TRI_CLONES static void row_dlogits(float *drow, const float *row, float m, float inv,
                                   int64_t t, float grad_scale, int n)
{
    for (int j = 0; j < n; j++) {
        float p = elem_expf(row[j] - m) * inv;
        drow[j] = (p - (j == t ? 1.0f : 0.0f)) * grad_scale;
    }
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
            m = row_max((const float *)logits + off, Vl);
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
            s = row_sumexp((const float *)logits + off, m, Vl);
        } else {
            for (int j = 0; j < Vl; j++)
                s += elem_expf(load_f32_cpu(logits, dt, off + j) - m);
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
            row_dlogits((float *)dlogits + off, (const float *)logits + off, m, inv, t,
                        grad_scale, Vl);
        } else {
            for (int j = 0; j < Vl; j++) {
                float p = elem_expf(load_f32_cpu(logits, dt, off + j) - m) * inv;
                store_f32_cpu(dlogits, dt, off + j,
                              (p - (j == t ? 1.0f : 0.0f)) * grad_scale);
            }
        }
    }
}
