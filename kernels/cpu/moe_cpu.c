/*
 * moe_cpu.c - mixture-of-experts routing (issue 38): the router's top-k and
 * its losses, the permutation of (token, slot) pairs into expert order, and
 * the gather/combine that move rows between the two orders.
 *
 * Everything is deterministic and independent of the thread count: each
 * token's work is one thread's, in a fixed order (slots ascending, experts
 * ascending), and the permutation is a serial counting sort, so a rerun, a
 * different OMP_NUM_THREADS or the CUDA twin routes the same rows.
 */
#include <math.h>

#include "cpu.h"

/* p = softmax(z) over n; returns log-sum-exp of z. */
static float softmax_row(float *p, const float *z, int n)
{
    float m = z[0];
    for (int i = 1; i < n; i++)
        m = z[i] > m ? z[i] : m;
    double s = 0.0;
    for (int i = 0; i < n; i++)
        s += expf(z[i] - m);
    for (int i = 0; i < n; i++)
        p[i] = (float)(expf(z[i] - m) / s);
    return m + (float)log(s);
}

void moe_router_fwd_cpu(int32_t *ids, float *weights, float *probs, const float *logits,
                        int N, int E, int k, int order)
{
    #pragma omp parallel for schedule(static)
    for (int t = 0; t < N; t++) {
        const float *z = logits + (int64_t)t * E;
        float *p = probs + (int64_t)t * E, *w = weights + (int64_t)t * k;
        int32_t *id = ids + (int64_t)t * k;
        softmax_row(p, z, E);
        elem_moe_top_k(id, z, E, k);
        /* Mixtral renormalises the k probabilities; the raw order keeps them */
        float S = 0.0f;
        for (int j = 0; j < k; j++)
            S += p[id[j]];
        for (int j = 0; j < k; j++)
            w[j] = order == OPS_MOE_SOFTMAX_TOPK ? p[id[j]] / S : p[id[j]];
    }
}

/* dz += p * (dp - p . dp) over the row: softmax's backward. */
static void softmax_bwd_row(float *dz, const float *p, const float *dp, int n)
{
    float dot = 0.0f;
    for (int i = 0; i < n; i++)
        dot += p[i] * dp[i];
    for (int i = 0; i < n; i++)
        dz[i] += p[i] * (dp[i] - dot);
}

void moe_router_bwd_cpu(float *dlogits, const float *dweights, const int32_t *ids,
                        const float *weights, const float *probs, int N, int E, int k,
                        int order)
{
    #pragma omp parallel for schedule(static)
    for (int t = 0; t < N; t++) {
        float *dz = dlogits + (int64_t)t * E;
        const float *w = weights + (int64_t)t * k, *dw = dweights + (int64_t)t * k;
        const int32_t *id = ids + (int64_t)t * k;
        const float *p = probs + (int64_t)t * E;
        float dp[E];
        for (int e = 0; e < E; e++)
            dp[e] = 0.0f;
        if (order == OPS_MOE_SOFTMAX_TOPK) {
            /* w_j = p_j / S: dp_j = (dw_j - w . dw) / S for chosen j, 0 else */
            float S = 0.0f, wdw = 0.0f;
            for (int j = 0; j < k; j++) {
                S += p[id[j]];
                wdw += w[j] * dw[j];
            }
            for (int j = 0; j < k; j++)
                dp[id[j]] = (dw[j] - wdw) / S;
        } else {
            /* w_j = p_j: the chosen probabilities take dw as it is */
            for (int j = 0; j < k; j++)
                dp[id[j]] = dw[j];
        }
        softmax_bwd_row(dz, p, dp, E);
    }
}

void moe_aux_fwd_cpu(float *loss, float *frac, float *mean_prob, const float *probs,
                     const int32_t *ids, int N, int E, int k)
{
    for (int e = 0; e < E; e++) {
        double s = 0.0;
        for (int t = 0; t < N; t++)
            s += probs[(int64_t)t * E + e];
        mean_prob[e] = N > 0 ? (float)(s / N) : 0.0f;
        frac[e] = 0.0f;
    }
    for (int64_t p = 0; p < (int64_t)N * k; p++)
        frac[ids[p]] += 1.0f;
    double l = 0.0;
    for (int e = 0; e < E; e++) {
        frac[e] = N > 0 ? frac[e] / ((float)N * k) : 0.0f;
        l += (double)frac[e] * mean_prob[e];
    }
    loss[0] = (float)(E * l);
}

void moe_aux_bwd_cpu(float *dlogits, const float *probs, const float *frac, int N, int E,
                     float coeff)
{
    #pragma omp parallel for schedule(static)
    for (int t = 0; t < N; t++) {
        float dp[E];
        for (int e = 0; e < E; e++)
            dp[e] = coeff * E * frac[e] / N;
        softmax_bwd_row(dlogits + (int64_t)t * E, probs + (int64_t)t * E, dp, E);
    }
}

void moe_zloss_fwd_cpu(float *loss, float *lse, const float *logits, int N, int E)
{
    #pragma omp parallel for schedule(static)
    for (int t = 0; t < N; t++) {
        float p[E];
        lse[t] = softmax_row(p, logits + (int64_t)t * E, E);
    }
    double s = 0.0;
    for (int t = 0; t < N; t++)
        s += (double)lse[t] * lse[t];
    loss[0] = N > 0 ? (float)(s / N) : 0.0f;
}

void moe_zloss_bwd_cpu(float *dlogits, const float *logits, const float *lse, int N, int E,
                       float coeff)
{
    #pragma omp parallel for schedule(static)
    for (int t = 0; t < N; t++) {
        float g = coeff * 2.0f * lse[t] / N;
        for (int e = 0; e < E; e++) {
            int64_t i = (int64_t)t * E + e;
            dlogits[i] += g * expf(logits[i] - lse[t]);
        }
    }
}

void moe_permute_cpu(int32_t *order, int32_t *row_of, int32_t *offsets, int32_t *dropped,
                     const int32_t *ids, int N, int E, int k, int capacity)
{
    int64_t pairs = (int64_t)N * k;
    int32_t lost = elem_moe_offsets(offsets, ids, pairs, E, capacity);
    /* Pairs in index order (token, then slot) fill each expert's rows in
     * that order: the sort is stable. fill[e] counts up to the next row. */
    int32_t fill[E];
    for (int e = 0; e < E; e++)
        fill[e] = offsets[e];
    for (int64_t p = 0; p < pairs; p++)
        order[p] = -1;
    for (int64_t p = 0; p < pairs; p++) {
        int e = ids[p];
        if (fill[e] < offsets[e + 1]) {
            order[fill[e]] = (int32_t)p;
            row_of[p] = fill[e]++;
        } else {
            row_of[p] = -1;
        }
    }
    dropped[0] = lost;
}

void moe_gather_cpu(void *xs, const void *x, ops_dtype dt, const int32_t *order, int R,
                    int C, int k)
{
    #pragma omp parallel for schedule(static)
    for (int r = 0; r < R; r++)
        copy_cpu((char *)xs + (size_t)r * C * ops_dtype_size(dt),
                 (const char *)x + (size_t)(order[r] / k) * C * ops_dtype_size(dt),
                 (size_t)C * ops_dtype_size(dt));
}

void moe_gather_bwd_cpu(void *dx, const void *dxs, ops_dtype dt, const int32_t *row_of,
                        int N, int C, int k)
{
    #pragma omp parallel for schedule(static)
    for (int t = 0; t < N; t++)
        for (int c = 0; c < C; c++) {
            float s = 0.0f;
            for (int j = 0; j < k; j++) {
                int32_t r = row_of[(int64_t)t * k + j];
                if (r >= 0)
                    s += load_f32_cpu(dxs, dt, (int64_t)r * C + c);
            }
            store_f32_cpu(dx, dt, (int64_t)t * C + c, s);
        }
}

void moe_combine_fwd_cpu(void *out, const void *ys, ops_dtype dt, const float *weights,
                         const int32_t *row_of, int N, int C, int k)
{
    #pragma omp parallel for schedule(static)
    for (int t = 0; t < N; t++)
        for (int c = 0; c < C; c++) {
            float s = 0.0f;
            for (int j = 0; j < k; j++) {
                int64_t p = (int64_t)t * k + j;
                if (row_of[p] >= 0)
                    s += weights[p] * load_f32_cpu(ys, dt, (int64_t)row_of[p] * C + c);
            }
            store_f32_cpu(out, dt, (int64_t)t * C + c, s);
        }
}

void moe_combine_bwd_cpu(void *dys, float *dweights, const void *dout, const void *ys,
                         ops_dtype dt, const float *weights, const int32_t *row_of,
                         int N, int C, int k)
{
    #pragma omp parallel for schedule(static)
    for (int t = 0; t < N; t++)
        for (int j = 0; j < k; j++) {
            int64_t p = (int64_t)t * k + j, r = row_of[p];
            float dot = 0.0f;
            for (int c = 0; c < C && r >= 0; c++) {
                float g = load_f32_cpu(dout, dt, (int64_t)t * C + c);
                if (ys)
                    dot += g * load_f32_cpu(ys, dt, r * C + c);
                if (dys)
                    store_f32_cpu(dys, dt, r * C + c, weights[p] * g);
            }
            if (dweights)
                dweights[p] = dot;
        }
}

/* The shared expert's gate: the logistic function of its logit. */
void moe_sigmoid_fwd_cpu(float *gate, const float *logit, int N)
{
    #pragma omp parallel for schedule(static)
    for (int t = 0; t < N; t++)
        gate[t] = 1.0f / (1.0f + expf(-logit[t]));
}

void moe_sigmoid_bwd_cpu(float *dlogit, const float *dgate, const float *gate, int N)
{
    #pragma omp parallel for schedule(static)
    for (int t = 0; t < N; t++)
        dlogit[t] = dgate[t] * gate[t] * (1.0f - gate[t]);
}
