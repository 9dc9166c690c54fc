/*
 * ops_moe.c - mixture of experts (issue 38): the router's top-k forward
 * and backward, its auxiliary and z losses, the permutation of token rows
 * by expert, gather and combine, the sigmoid gate, and the grouped GEMM
 * (one ops_matmul per expert's block of rows). cpu/moe_cpu.c,
 * cuda/moe_cuda.cu.
 *
 * Not collective.
 */
#include "ops_dispatch.h"

#include <stdint.h>
#include <stdio.h>

static void check_moe_dims(const char *fn, int N, int E, int k)
{
    check_dims(fn, "N, E, k", N, E, k);
    if (k < 1 || k > E)
        FAIL("%s: k = %d experts per token must be in [1, E = %d]", fn, k, E);
}

void ops_moe_router_fwd(ops_tensor ids, ops_tensor weights, ops_tensor probs,
                        ops_tensor logits, int N, int E, int k, ops_moe_order order)
{
    static const char fn[] = "ops_moe_router_fwd";
    check_moe_dims(fn, N, E, k);
    if (order != OPS_MOE_SOFTMAX_TOPK && order != OPS_MOE_SOFTMAX_TOPK_RAW)
        FAIL("%s: unknown order %d", fn, (int)order);
    ops_device dev = CHECK_ARGS(fn, NULL,
        { "ids", ids, (int64_t)N * k, ARG_I32, 0 },
        { "weights", weights, (int64_t)N * k, ARG_F32, 0 },
        { "probs", probs, (int64_t)N * E, ARG_F32, 0 },
        { "logits", logits, (int64_t)N * E, ARG_F32, 0 });
    if (dev == OPS_CPU)
        moe_router_fwd_cpu(ids.data, weights.data, probs.data, logits.data, N, E, k, order);
    else
        ON_CUDA(moe_router_fwd_cuda(ids.data, weights.data, probs.data, logits.data, N, E, k,
                                    order));
}

void ops_moe_router_bwd(ops_tensor dlogits, ops_tensor dweights, ops_tensor ids,
                        ops_tensor weights, ops_tensor probs, int N, int E, int k,
                        ops_moe_order order)
{
    static const char fn[] = "ops_moe_router_bwd";
    check_moe_dims(fn, N, E, k);
    if (order != OPS_MOE_SOFTMAX_TOPK && order != OPS_MOE_SOFTMAX_TOPK_RAW)
        FAIL("%s: unknown order %d", fn, (int)order);
    ops_device dev = CHECK_ARGS(fn, NULL,
        { "dlogits", dlogits, (int64_t)N * E, ARG_F32, 0 },
        { "dweights", dweights, (int64_t)N * k, ARG_F32, 0 },
        { "ids", ids, (int64_t)N * k, ARG_I32, 0 },
        { "weights", weights, (int64_t)N * k, ARG_F32, 0 },
        { "probs", probs, (int64_t)N * E, ARG_F32, 0 });
    if (dev == OPS_CPU)
        moe_router_bwd_cpu(dlogits.data, dweights.data, ids.data, weights.data, probs.data,
                           N, E, k, order);
    else
        ON_CUDA(moe_router_bwd_cuda(dlogits.data, dweights.data, ids.data, weights.data,
                                    probs.data, N, E, k, order));
}

void ops_moe_aux_fwd(ops_tensor loss, ops_tensor frac, ops_tensor mean_prob,
                     ops_tensor probs, ops_tensor ids, int N, int E, int k)
{
    static const char fn[] = "ops_moe_aux_fwd";
    check_moe_dims(fn, N, E, k);
    ops_device dev = CHECK_ARGS(fn, NULL,
        { "loss", loss, 1, ARG_F32, 0 },
        { "frac", frac, E, ARG_F32, 0 },
        { "mean_prob", mean_prob, E, ARG_F32, 0 },
        { "probs", probs, (int64_t)N * E, ARG_F32, 0 },
        { "ids", ids, (int64_t)N * k, ARG_I32, 0 });
    if (dev == OPS_CPU)
        moe_aux_fwd_cpu(loss.data, frac.data, mean_prob.data, probs.data, ids.data, N, E, k);
    else
        ON_CUDA(moe_aux_fwd_cuda(loss.data, frac.data, mean_prob.data, probs.data, ids.data,
                                 N, E, k));
}

void ops_moe_aux_bwd(ops_tensor dlogits, ops_tensor probs, ops_tensor frac,
                     int N, int E, float coeff)
{
    static const char fn[] = "ops_moe_aux_bwd";
    check_dims(fn, "N, E, 0", N, E, 0);
    ops_device dev = CHECK_ARGS(fn, NULL,
        { "dlogits", dlogits, (int64_t)N * E, ARG_F32, 0 },
        { "probs", probs, (int64_t)N * E, ARG_F32, 0 },
        { "frac", frac, E, ARG_F32, 0 });
    if (dev == OPS_CPU)
        moe_aux_bwd_cpu(dlogits.data, probs.data, frac.data, N, E, coeff);
    else
        ON_CUDA(moe_aux_bwd_cuda(dlogits.data, probs.data, frac.data, N, E, coeff));
}

void ops_moe_zloss_fwd(ops_tensor loss, ops_tensor lse, ops_tensor logits, int N, int E)
{
    static const char fn[] = "ops_moe_zloss_fwd";
    check_dims(fn, "N, E, 0", N, E, 0);
    ops_device dev = CHECK_ARGS(fn, NULL,
        { "loss", loss, 1, ARG_F32, 0 },
        { "lse", lse, N, ARG_F32, 0 },
        { "logits", logits, (int64_t)N * E, ARG_F32, 0 });
    if (dev == OPS_CPU)
        moe_zloss_fwd_cpu(loss.data, lse.data, logits.data, N, E);
    else
        ON_CUDA(moe_zloss_fwd_cuda(loss.data, lse.data, logits.data, N, E));
}

void ops_moe_zloss_bwd(ops_tensor dlogits, ops_tensor logits, ops_tensor lse,
                       int N, int E, float coeff)
{
    static const char fn[] = "ops_moe_zloss_bwd";
    check_dims(fn, "N, E, 0", N, E, 0);
    ops_device dev = CHECK_ARGS(fn, NULL,
        { "dlogits", dlogits, (int64_t)N * E, ARG_F32, 0 },
        { "logits", logits, (int64_t)N * E, ARG_F32, 0 },
        { "lse", lse, N, ARG_F32, 0 });
    if (dev == OPS_CPU)
        moe_zloss_bwd_cpu(dlogits.data, logits.data, lse.data, N, E, coeff);
    else
        ON_CUDA(moe_zloss_bwd_cuda(dlogits.data, logits.data, lse.data, N, E, coeff));
}

void ops_moe_permute(ops_tensor order, ops_tensor row_of, ops_tensor offsets,
                     ops_tensor dropped, ops_tensor ids, int N, int E, int k,
                     int capacity)
{
    static const char fn[] = "ops_moe_permute";
    check_moe_dims(fn, N, E, k);
    if (capacity < 0)
        FAIL("%s: capacity = %d must be >= 0 (0: dropless)", fn, capacity);
    ops_device dev = CHECK_ARGS(fn, NULL,
        { "order", order, (int64_t)N * k, ARG_I32, 0 },
        { "row_of", row_of, (int64_t)N * k, ARG_I32, 0 },
        { "offsets", offsets, (int64_t)E + 1, ARG_I32, 0 },
        { "dropped", dropped, 1, ARG_I32, 0 },
        { "ids", ids, (int64_t)N * k, ARG_I32, 0 });
    if (dev == OPS_CPU)
        moe_permute_cpu(order.data, row_of.data, offsets.data, dropped.data, ids.data,
                        N, E, k, capacity);
    else
        ON_CUDA(moe_permute_cuda(order.data, row_of.data, offsets.data, dropped.data,
                                 ids.data, N, E, k, capacity));
}

void ops_moe_gather(ops_tensor xs, ops_tensor x, ops_tensor order, int R, int C, int k)
{
    static const char fn[] = "ops_moe_gather";
    check_dims(fn, "R, C, k", R, C, k);
    ops_dtype dt;
    /* x's rows are those order names: N is not passed, so x is checked
     * against one row only; the pairs come from ops_moe_permute. */
    ops_device dev = CHECK_ARGS(fn, &dt,
        { "xs", xs, (int64_t)R * C, ARG_D, 0 },
        { "x", x, C, ARG_D, 0 },
        { "order", order, R, ARG_I32, 0 });
    if (dev == OPS_CPU)
        moe_gather_cpu(xs.data, x.data, dt, order.data, R, C, k);
    else
        ON_CUDA(moe_gather_cuda(xs.data, x.data, dt, order.data, R, C, k));
}

void ops_moe_gather_bwd(ops_tensor dx, ops_tensor dxs, ops_tensor row_of, int N, int C,
                        int k)
{
    static const char fn[] = "ops_moe_gather_bwd";
    check_dims(fn, "N, C, k", N, C, k);
    ops_dtype dt;
    ops_device dev = CHECK_ARGS(fn, &dt,
        { "dx", dx, (int64_t)N * C, ARG_D, 0 },
        { "dxs", dxs, C, ARG_D, 0 },
        { "row_of", row_of, (int64_t)N * k, ARG_I32, 0 });
    if (dev == OPS_CPU)
        moe_gather_bwd_cpu(dx.data, dxs.data, dt, row_of.data, N, C, k);
    else
        ON_CUDA(moe_gather_bwd_cuda(dx.data, dxs.data, dt, row_of.data, N, C, k));
}

void ops_moe_combine_fwd(ops_tensor out, ops_tensor ys, ops_tensor weights,
                         ops_tensor row_of, int N, int C, int k)
{
    static const char fn[] = "ops_moe_combine_fwd";
    check_dims(fn, "N, C, k", N, C, k);
    ops_dtype dt;
    ops_device dev = CHECK_ARGS(fn, &dt,
        { "out", out, (int64_t)N * C, ARG_D, 0 },
        { "ys", ys, C, ARG_D, 0 },
        { "weights", weights, (int64_t)N * k, ARG_F32, 0 },
        { "row_of", row_of, (int64_t)N * k, ARG_I32, 0 });
    if (dev == OPS_CPU)
        moe_combine_fwd_cpu(out.data, ys.data, dt, weights.data, row_of.data, N, C, k);
    else
        ON_CUDA(moe_combine_fwd_cuda(out.data, ys.data, dt, weights.data, row_of.data,
                                     N, C, k));
}

void ops_moe_combine_bwd(ops_tensor dys, ops_tensor dweights, ops_tensor dout,
                         ops_tensor ys, ops_tensor weights, ops_tensor row_of,
                         int N, int C, int k)
{
    static const char fn[] = "ops_moe_combine_bwd";
    check_dims(fn, "N, C, k", N, C, k);
    ops_dtype dt;
    /* ys is needed only for dweights, weights only for dys */
    ops_device dev = CHECK_ARGS(fn, &dt,
        { "dys", dys, C, ARG_D, 1 },
        { "dweights", dweights, (int64_t)N * k, ARG_F32, 1 },
        { "dout", dout, (int64_t)N * C, ARG_D, 0 },
        { "ys", ys, C, ARG_D, !dweights.data },
        { "weights", weights, (int64_t)N * k, ARG_F32, !dys.data },
        { "row_of", row_of, (int64_t)N * k, ARG_I32, 0 });
    if (dev == OPS_CPU)
        moe_combine_bwd_cpu(dys.data, dweights.data, dout.data, ys.data, dt, weights.data,
                            row_of.data, N, C, k);
    else
        ON_CUDA(moe_combine_bwd_cuda(dys.data, dweights.data, dout.data, ys.data, dt,
                                     weights.data, row_of.data, N, C, k));
}

void ops_moe_sigmoid_fwd(ops_tensor gate, ops_tensor logit, int N)
{
    static const char fn[] = "ops_moe_sigmoid_fwd";
    check_dims(fn, "N", N, 0, 0);
    ops_device dev = CHECK_ARGS(fn, NULL,
        { "gate", gate, N, ARG_F32, 0 },
        { "logit", logit, N, ARG_F32, 0 });
    if (dev == OPS_CPU)
        moe_sigmoid_fwd_cpu(gate.data, logit.data, N);
    else
        ON_CUDA(moe_sigmoid_fwd_cuda(gate.data, logit.data, N));
}

void ops_moe_sigmoid_bwd(ops_tensor dlogit, ops_tensor dgate, ops_tensor gate, int N)
{
    static const char fn[] = "ops_moe_sigmoid_bwd";
    check_dims(fn, "N", N, 0, 0);
    ops_device dev = CHECK_ARGS(fn, NULL,
        { "dlogit", dlogit, N, ARG_F32, 0 },
        { "dgate", dgate, N, ARG_F32, 0 },
        { "gate", gate, N, ARG_F32, 0 });
    if (dev == OPS_CPU)
        moe_sigmoid_bwd_cpu(dlogit.data, dgate.data, gate.data, N);
    else
        ON_CUDA(moe_sigmoid_bwd_cuda(dlogit.data, dgate.data, gate.data, N));
}

/* offsets are host memory the caller filled: each must lie in [0, R]
 * rising, or the views below would address past the tensors. */
static void check_offsets(const char *fn, const int32_t *offsets, int E)
{
    if (!offsets)
        FAIL("%s: required argument offsets is missing", fn);
    if (offsets[0] != 0)
        FAIL("%s: offsets[0] = %d but must be 0", fn, offsets[0]);
    for (int e = 0; e < E; e++)
        if (offsets[e + 1] < offsets[e])
            FAIL("%s: offsets[%d] = %d is below offsets[%d] = %d", fn, e + 1,
                 offsets[e + 1], e, offsets[e]);
}

/* The rows [r0, r0 + rows) of a (., cols) tensor; absent stays absent. */
static ops_tensor row_block(ops_tensor t, int64_t r0, int64_t rows, int64_t cols)
{
    return t.data ? ops_view(t, r0 * cols, rows * cols) : t;
}

/* Each expert's weight (and gradient, when given) must be present with
 * N*K elements of the expected dtype; the views stop at those counts. */
static void check_expert_weights(const char *fn, const char *what, const ops_tensor *w,
                                 int E, int64_t NK, int grad)
{
    char name[32];
    if (!w)
        FAIL("%s: required argument %s is missing", fn, what);
    for (int e = 0; e < E; e++) {
        snprintf(name, sizeof name, "%s[%d]", what, e);
        CHECK_ARGS(fn, NULL, { name, w[e], NK, grad ? ARG_GRAD : ARG_D, 0 });
    }
}

void ops_moe_grouped_matmul_fwd(ops_tensor out, ops_tensor inp, const ops_tensor *w,
                                const int32_t *offsets, int E, int N, int K)
{
    static const char fn[] = "ops_moe_grouped_matmul_fwd";
    check_dims(fn, "E, N, K", E, N, K);
    check_offsets(fn, offsets, E);
    int64_t R = offsets[E];
    CHECK_ARGS(fn, NULL,
        { "out", out, R * N, ARG_D_OR_F32, 0 },
        { "inp", inp, R * K, ARG_D, 0 });
    check_expert_weights(fn, "w", w, E, (int64_t)N * K, 0);
    for (int e = 0; e < E; e++) {
        int rows = offsets[e + 1] - offsets[e];
        if (rows > 0)
            ops_matmul_fwd(row_block(out, offsets[e], rows, N),
                           row_block(inp, offsets[e], rows, K), w[e], OPS_NONE,
                           rows, N, K);
    }
}

void ops_moe_grouped_matmul_bwd(ops_tensor dinp, const ops_tensor *dw, ops_tensor dout,
                                ops_tensor inp, const ops_tensor *w, const int32_t *offsets,
                                int E, int N, int K)
{
    static const char fn[] = "ops_moe_grouped_matmul_bwd";
    check_dims(fn, "E, N, K", E, N, K);
    check_offsets(fn, offsets, E);
    int64_t R = offsets[E];
    CHECK_ARGS(fn, NULL,
        { "dinp", dinp, R * K, ARG_D, 1 },
        { "dout", dout, R * N, ARG_D_OR_F32, 0 },
        { "inp", inp, R * K, ARG_D, !dw });
    if (dw)
        check_expert_weights(fn, "dw", dw, E, (int64_t)N * K, 1);
    if (dinp.data)
        check_expert_weights(fn, "w", w, E, (int64_t)N * K, 0);
    for (int e = 0; e < E; e++) {
        int rows = offsets[e + 1] - offsets[e];
        if (rows > 0)
            ops_matmul_bwd(row_block(dinp, offsets[e], rows, K), dw ? dw[e] : OPS_NONE,
                           OPS_NONE, row_block(dout, offsets[e], rows, N),
                           row_block(inp, offsets[e], rows, K), w ? w[e] : OPS_NONE,
                           rows, N, K);
    }
}
