/*
 * moe_cuda.cu - the twins of cpu/moe_cpu.c: mixture-of-experts routing,
 * permutation, gather and combine (issue 38).
 *
 * NOT YET RUN ON A GPU: these compile and link in the CUDA build;
 * tests/t_moe_emu runs them as written on the host (tests/cuda_emu), bit
 * for bit against the CPU twins, and tests/t_ops_cuda has a case for each
 * ops_moe_* op for the first GPU session. They are deliberately simple:
 * one thread per token (router, losses) or per element (gather, combine),
 * per-token work in the CPU's order so the results match it, and the
 * counting sort with a thread per expert, each walking the pairs in
 * order, which keeps it stable and deterministic (TRIDENT_FUSED=0: the
 * first version, the whole sort on one thread; a parallel scan over the
 * pairs is for later).
 */
#include "cuda_common.h"

/* The max of z[0..n) and the sum of exp(z - max) in fp64: both rows'
 * steps of the CPU's softmax_row, in its order. */
static __device__ double row_sum_exp(const float *z, int n, float *max_out)
{
    float m = z[0];
    for (int i = 1; i < n; i++)
        m = z[i] > m ? z[i] : m;
    double s = 0.0;
    for (int i = 0; i < n; i++)
        s += expf(z[i] - m);
    *max_out = m;
    return s;
}

/* Log-sum-exp of z[0..n), as the CPU's softmax_row returns it. */
static __device__ float row_lse(const float *z, int n)
{
    float m;
    double s = row_sum_exp(z, n, &m);
    return m + (float)log(s);
}

static __global__ void router_fwd_kernel(int32_t *ids, float *weights, float *probs,
                                         const float *logits, int N, int E, int k,
                                         int order)
{
    GRID_STRIDE(t, N) {
        const float *z = logits + t * E;
        float *p = probs + t * E, *w = weights + t * k;
        int32_t *id = ids + t * k;
        float m;
        double s = row_sum_exp(z, E, &m);
        for (int e = 0; e < E; e++)
            p[e] = (float)(expf(z[e] - m) / s);
        elem_moe_top_k(id, z, E, k);
        /* Mixtral renormalises the k probabilities; the raw order keeps them */
        float S = 0.0f;
        for (int j = 0; j < k; j++)
            S += p[id[j]];
        for (int j = 0; j < k; j++)
            w[j] = order == OPS_MOE_SOFTMAX_TOPK ? p[id[j]] / S : p[id[j]];
    }
}

void moe_router_fwd_cuda(int32_t *ids, float *weights, float *probs, const float *logits,
                         int N, int E, int k, int order)
{
    if (N > 0)
        LAUNCH(router_fwd_kernel, N, ids, weights, probs, logits, N, E, k, order);
}

/* d loss / d p_e of the weights' loss for expert e (0 if no slot chose
 * it): renormalised, (dw_j - w . dw) / S; raw, dw_j; j the slot of e. */
static __device__ float chosen_grad(const int32_t *id, const float *dw, int k, int e,
                                    int order, float wdw, float S)
{
    for (int j = 0; j < k; j++)
        if (id[j] == e)
            return order == OPS_MOE_SOFTMAX_TOPK ? (dw[j] - wdw) / S : dw[j];
    return 0.0f;
}

/* Softmax's backward over the row, dz += p * (dp - p . dp), with p . dp
 * summed over every expert in index order, as the CPU's softmax_bwd_row
 * sums it (in slot order the sum of k >= 3 terms rounds differently). */
static __global__ void router_bwd_kernel(float *dlogits, const float *dweights,
                                         const int32_t *ids, const float *weights,
                                         const float *probs, int N, int E, int k,
                                         int order)
{
    GRID_STRIDE(t, N) {
        float *dz = dlogits + t * E;
        const float *w = weights + t * k, *dw = dweights + t * k, *p = probs + t * E;
        const int32_t *id = ids + t * k;
        float S = 0.0f, wdw = 0.0f, dot = 0.0f;
        for (int j = 0; j < k; j++) {
            S += p[id[j]];
            wdw += w[j] * dw[j];
        }
        for (int e = 0; e < E; e++)
            dot += p[e] * chosen_grad(id, dw, k, e, order, wdw, S);
        for (int e = 0; e < E; e++)
            dz[e] += p[e] * (chosen_grad(id, dw, k, e, order, wdw, S) - dot);
    }
}

void moe_router_bwd_cuda(float *dlogits, const float *dweights, const int32_t *ids,
                         const float *weights, const float *probs, int N, int E, int k,
                         int order)
{
    if (N > 0)
        LAUNCH(router_bwd_kernel, N, dlogits, dweights, ids, weights, probs, N, E, k, order);
}

/* One thread per expert: its mean probability and its share of the pairs;
 * the loss is summed by one thread after them, in expert order. */
static __global__ void aux_stats_kernel(float *frac, float *mean_prob, const float *probs,
                                        const int32_t *ids, int N, int E, int k)
{
    GRID_STRIDE(e, E) {
        double s = 0.0;
        for (int t = 0; t < N; t++)
            s += probs[(int64_t)t * E + e];
        float count = 0.0f;
        for (int64_t p = 0; p < (int64_t)N * k; p++)
            count += ids[p] == e ? 1.0f : 0.0f;
        mean_prob[e] = N > 0 ? (float)(s / N) : 0.0f;
        frac[e] = N > 0 ? count / ((float)N * k) : 0.0f;
    }
}

static __global__ void aux_loss_kernel(float *loss, const float *frac,
                                       const float *mean_prob, int E)
{
    double l = 0.0;
    for (int e = 0; e < E; e++)
        l += (double)frac[e] * mean_prob[e];
    loss[0] = (float)(E * l);
}

void moe_aux_fwd_cuda(float *loss, float *frac, float *mean_prob, const float *probs,
                      const int32_t *ids, int N, int E, int k)
{
    if (E > 0)
        LAUNCH(aux_stats_kernel, E, frac, mean_prob, probs, ids, N, E, k);
    aux_loss_kernel<<<1, 1, 0, stream_cuda()>>>(loss, frac, mean_prob, E);
    TRI_CHECK_LAUNCH(aux_loss_kernel);
}

static __global__ void aux_bwd_kernel(float *dlogits, const float *probs, const float *frac,
                                      int N, int E, float coeff)
{
    GRID_STRIDE(t, N) {
        const float *p = probs + t * E;
        float dot = 0.0f;
        for (int e = 0; e < E; e++)
            dot += p[e] * (coeff * E * frac[e] / N);
        for (int e = 0; e < E; e++)
            dlogits[t * E + e] += p[e] * (coeff * E * frac[e] / N - dot);
    }
}

void moe_aux_bwd_cuda(float *dlogits, const float *probs, const float *frac, int N, int E,
                      float coeff)
{
    if (N > 0)
        LAUNCH(aux_bwd_kernel, N, dlogits, probs, frac, N, E, coeff);
}

static __global__ void zloss_lse_kernel(float *lse, const float *logits, int N, int E)
{
    GRID_STRIDE(t, N) {
        lse[t] = row_lse(logits + t * E, E);
    }
}

static __global__ void zloss_mean_kernel(float *loss, const float *lse, int N)
{
    double s = 0.0;
    for (int t = 0; t < N; t++)
        s += (double)lse[t] * lse[t];
    loss[0] = N > 0 ? (float)(s / N) : 0.0f;
}

void moe_zloss_fwd_cuda(float *loss, float *lse, const float *logits, int N, int E)
{
    if (N > 0)
        LAUNCH(zloss_lse_kernel, N, lse, logits, N, E);
    zloss_mean_kernel<<<1, 1, 0, stream_cuda()>>>(loss, lse, N);
    TRI_CHECK_LAUNCH(zloss_mean_kernel);
}

static __global__ void zloss_bwd_kernel(float *dlogits, const float *logits,
                                        const float *lse, int N, int E, float coeff)
{
    GRID_STRIDE(i, (int64_t)N * E) {
        int64_t t = i / E;
        dlogits[i] += coeff * 2.0f * lse[t] / N * expf(logits[i] - lse[t]);
    }
}

void moe_zloss_bwd_cuda(float *dlogits, const float *logits, const float *lse, int N, int E,
                        float coeff)
{
    if ((int64_t)N * E > 0)
        LAUNCH(zloss_bwd_kernel, (int64_t)N * E, dlogits, logits, lse, N, E, coeff);
}

/* Expert e's pairs, in index order (token, then slot), fill its rows
 * [offsets[e], offsets[e+1]) as the CPU's sort fills them; the pairs past
 * its capacity get row -1. */
static __device__ void fill_expert_rows(int32_t *order, int32_t *row_of, const int32_t *offsets,
                                        const int32_t *ids, int64_t pairs, int e)
{
    int32_t r = offsets[e];
    for (int64_t p = 0; p < pairs; p++)
        if (ids[p] == e) {
            if (r < offsets[e + 1]) {
                order[r] = (int32_t)p;
                row_of[p] = r++;
            } else {
                row_of[p] = -1;
            }
        }
}

/* The CPU's serial counting sort on one thread (TRIDENT_FUSED=0): stable
 * by construction, but O(E * N * k) on one thread (4M steps at E 64,
 * N 8192, k 8); order's unused tail is -1. */
static __global__ void permute_kernel(int32_t *order, int32_t *row_of, int32_t *offsets,
                                      int32_t *dropped, const int32_t *ids, int N, int E,
                                      int k, int capacity)
{
    int64_t pairs = (int64_t)N * k;
    int32_t lost = elem_moe_offsets(offsets, ids, pairs, E, capacity);
    for (int64_t p = 0; p < pairs; p++)
        order[p] = -1;
    for (int e = 0; e < E; e++)
        fill_expert_rows(order, row_of, offsets, ids, pairs, e);
    dropped[0] = lost;
}

/* Threads of permute_experts_kernel's one block */
#define PERMUTE_THREADS 256

/* The same sort with a thread per expert (e, e + blockDim.x, ...) in one
 * block: each thread counts its experts' pairs, thread 0 cuts and sums the
 * counts as the CPU does (elem_moe_cut), and each thread fills its
 * experts' rows, so every output is the serial kernel's. Each thread
 * walks the N k pairs twice (all threads read the same id at once); the
 * threads' writes are disjoint: an expert's count, rows and pairs' row_of,
 * and a stride of order's tail. */
static __global__ void permute_experts_kernel(int32_t *order, int32_t *row_of,
                                              int32_t *offsets, int32_t *dropped,
                                              const int32_t *ids, int N, int E, int k,
                                              int capacity)
{
    int64_t pairs = (int64_t)N * k;
    for (int e = threadIdx.x; e < E; e += blockDim.x) {
        int32_t n = 0;
        for (int64_t p = 0; p < pairs; p++)
            n += ids[p] == e;
        offsets[e + 1] = n;
    }
    __syncthreads(); /* every count written */
    if (threadIdx.x == 0)
        dropped[0] = elem_moe_cut(offsets, E, capacity);
    __syncthreads(); /* the offsets final */
    for (int64_t p = (int64_t)offsets[E] + threadIdx.x; p < pairs; p += blockDim.x)
        order[p] = -1;
    for (int e = threadIdx.x; e < E; e += blockDim.x)
        fill_expert_rows(order, row_of, offsets, ids, pairs, e);
}

void moe_permute_serial_cuda(int32_t *order, int32_t *row_of, int32_t *offsets,
                             int32_t *dropped, const int32_t *ids, int N, int E, int k,
                             int capacity)
{
    permute_kernel<<<1, 1, 0, stream_cuda()>>>(order, row_of, offsets, dropped, ids, N, E,
                                               k, capacity);
    TRI_CHECK_LAUNCH(permute_kernel);
}

void moe_permute_experts_cuda(int32_t *order, int32_t *row_of, int32_t *offsets,
                              int32_t *dropped, const int32_t *ids, int N, int E, int k,
                              int capacity)
{
    permute_experts_kernel<<<1, PERMUTE_THREADS, 0, stream_cuda()>>>(
        order, row_of, offsets, dropped, ids, N, E, k, capacity);
    TRI_CHECK_LAUNCH(permute_experts_kernel);
}

void moe_permute_cuda(int32_t *order, int32_t *row_of, int32_t *offsets, int32_t *dropped,
                      const int32_t *ids, int N, int E, int k, int capacity)
{
    if (fused_enabled_cuda())
        moe_permute_experts_cuda(order, row_of, offsets, dropped, ids, N, E, k, capacity);
    else
        moe_permute_serial_cuda(order, row_of, offsets, dropped, ids, N, E, k, capacity);
}

static __global__ void gather_kernel(void *xs, const void *x, ops_dtype dt,
                                     const int32_t *order, int64_t total, int C, int k)
{
    GRID_STRIDE(i, total) {
        int64_t r = i / C, c = i % C;
        store_f32_cuda(xs, dt, i, load_f32_cuda(x, dt, (int64_t)(order[r] / k) * C + c));
    }
}

void moe_gather_cuda(void *xs, const void *x, ops_dtype dt, const int32_t *order, int R,
                     int C, int k)
{
    int64_t total = (int64_t)R * C;
    if (total > 0)
        LAUNCH(gather_kernel, total, xs, x, dt, order, total, C, k);
}

static __global__ void gather_bwd_kernel(void *dx, const void *dxs, ops_dtype dt,
                                         const int32_t *row_of, int64_t total, int C,
                                         int k)
{
    GRID_STRIDE(i, total) {
        int64_t t = i / C, c = i % C;
        float s = 0.0f;
        for (int j = 0; j < k; j++) {
            int32_t r = row_of[t * k + j];
            if (r >= 0)
                s += load_f32_cuda(dxs, dt, (int64_t)r * C + c);
        }
        store_f32_cuda(dx, dt, i, s);
    }
}

void moe_gather_bwd_cuda(void *dx, const void *dxs, ops_dtype dt, const int32_t *row_of,
                         int N, int C, int k)
{
    int64_t total = (int64_t)N * C;
    if (total > 0)
        LAUNCH(gather_bwd_kernel, total, dx, dxs, dt, row_of, total, C, k);
}

static __global__ void combine_fwd_kernel(void *out, const void *ys, ops_dtype dt,
                                          const float *weights, const int32_t *row_of,
                                          int64_t total, int C, int k)
{
    GRID_STRIDE(i, total) {
        int64_t t = i / C, c = i % C;
        float s = 0.0f;
        for (int j = 0; j < k; j++) {
            int64_t p = t * k + j;
            if (row_of[p] >= 0)
                s += weights[p] * load_f32_cuda(ys, dt, (int64_t)row_of[p] * C + c);
        }
        store_f32_cuda(out, dt, i, s);
    }
}

void moe_combine_fwd_cuda(void *out, const void *ys, ops_dtype dt, const float *weights,
                          const int32_t *row_of, int N, int C, int k)
{
    int64_t total = (int64_t)N * C;
    if (total > 0)
        LAUNCH(combine_fwd_kernel, total, out, ys, dt, weights, row_of, total, C, k);
}

/* One thread per pair: its row's gradient and its weight's dot product. */
static __global__ void combine_bwd_kernel(void *dys, float *dweights, const void *dout,
                                          const void *ys, ops_dtype dt,
                                          const float *weights, const int32_t *row_of,
                                          int64_t pairs, int C, int k)
{
    GRID_STRIDE(p, pairs) {
        int64_t t = p / k, r = row_of[p];
        float dot = 0.0f;
        for (int c = 0; c < C && r >= 0; c++) {
            float g = load_f32_cuda(dout, dt, t * C + c);
            if (ys)
                dot += g * load_f32_cuda(ys, dt, r * C + c);
            if (dys)
                store_f32_cuda(dys, dt, r * C + c, weights[p] * g);
        }
        if (dweights)
            dweights[p] = dot;
    }
}

void moe_combine_bwd_cuda(void *dys, float *dweights, const void *dout, const void *ys,
                          ops_dtype dt, const float *weights, const int32_t *row_of,
                          int N, int C, int k)
{
    int64_t pairs = (int64_t)N * k;
    if (pairs > 0)
        LAUNCH(combine_bwd_kernel, pairs, dys, dweights, dout, ys, dt, weights, row_of,
               pairs, C, k);
}

static __global__ void sigmoid_fwd_kernel(float *gate, const float *logit, int N)
{
    GRID_STRIDE(t, N) gate[t] = 1.0f / (1.0f + expf(-logit[t]));
}

void moe_sigmoid_fwd_cuda(float *gate, const float *logit, int N)
{
    if (N > 0)
        LAUNCH(sigmoid_fwd_kernel, N, gate, logit, N);
}

static __global__ void sigmoid_bwd_kernel(float *dlogit, const float *dgate,
                                          const float *gate, int N)
{
    GRID_STRIDE(t, N) dlogit[t] = dgate[t] * gate[t] * (1.0f - gate[t]);
}

void moe_sigmoid_bwd_cuda(float *dlogit, const float *dgate, const float *gate, int N)
{
    if (N > 0)
        LAUNCH(sigmoid_bwd_kernel, N, dlogit, dgate, gate, N);
}
