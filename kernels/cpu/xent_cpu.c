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
#include "vec.h"

#include <math.h>

/* This shard's column of row i's target, or -1 if another shard owns it. */
static int64_t target_col(const int32_t *targets, int i, int v0, int Vl)
{
    int64_t j = (int64_t)targets[i] - v0;
    return j >= 0 && j < Vl ? j : -1;
}

/* The three per-row loops of the fp32 path: one pass each over a 50k row,
 * so they decide the cost of the head. Exponentials go through a small
 * buffer, a loop that vectorizes; maxima and sums run in vec.h's fixed 16
 * lanes, per block of 256, and the blocks add up in fp64. */
#define XENT_BLOCK 256

TRI_CLONES static float row_max(const float *row, int n)
{
    return vec_row_max(row, n);
}

TRI_CLONES static double row_sumexp(const float *row, float m, int n)
{
    float buf[XENT_BLOCK];
    double s = 0.0;
    for (int j0 = 0; j0 < n; j0 += XENT_BLOCK) {
        int nb = n - j0 < XENT_BLOCK ? n - j0 : XENT_BLOCK;
        for (int j = 0; j < nb; j++)
            buf[j] = elem_expf(row[j0 + j] - m);
        s += vec_row_sum(buf, nb);
    }
    return s;
}

TRI_CLONES static void row_dlogits(float *drow, const float *row, float m, float inv,
                                   int64_t t, float grad_scale, int n)
{
    float scale = inv * grad_scale;
    for (int j = 0; j < n; j++)
        drow[j] = elem_expf(row[j] - m) * scale;
    if (t >= 0)
        drow[t] -= grad_scale;
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

/* One row at a time, all phases: the row (V floats, 200 KB for GPT-2)
 * stays in this core's cache from the max to the gradient. The same
 * per-row functions as the phases, so the same numbers. */
void xent_fused_cpu(float *losses, void *dlogits, const void *logits, ops_dtype dt,
                    float *rowmax, float *sumexp, float *target_logit,
                    const int32_t *targets, int N, int V, float grad_scale)
{
    if (dt != OPS_F32) {
        xent_max_cpu(rowmax, logits, dt, N, V);
        xent_sumexp_cpu(sumexp, target_logit, logits, dt, rowmax, targets, 0, N, V);
        xent_finish_cpu(losses, dlogits, logits, dt, rowmax, sumexp, target_logit, targets,
                        0, N, V, grad_scale);
        return;
    }
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        const float *row = (const float *)logits + (int64_t)i * V;
        float m = row_max(row, V);
        double s = row_sumexp(row, m, V);
        int64_t t = target_col(targets, i, 0, V);
        rowmax[i] = m;
        sumexp[i] = (float)s;
        target_logit[i] = t >= 0 ? row[t] : 0.0f;
        losses[i] = logf(sumexp[i]) + m - target_logit[i];
        if (dlogits)
            row_dlogits((float *)dlogits + (int64_t)i * V, row, m, 1.0f / sumexp[i], t,
                        grad_scale, V);
    }
}
