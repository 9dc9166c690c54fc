/*
 * ops.c - validation and dispatch for every op in ops.h.
 *
 * Each ops_* call describes its arguments once (name, tensor, elements the
 * shapes need, which dtypes it may have), check_args checks them all, and a
 * two-line `if` sends the call to its backend. Bad calls are programming
 * errors of the caller, so they go to the fatal handler with the op, the
 * argument and what is wrong, rather than an error code nobody checks.
 * The dtype checks are the precision contract of ops.h: each argument is
 * of a kind (compute dtype D, D or fp32, always fp32, parameter gradient,
 * ...), the call's D is read off its first D argument, and every other
 * argument is checked against it, so a mixed-up tensor fails at the call
 * with both names rather than as garbage three layers later.
 *
 * Each op's CPU call and its CUDA twin (kernels/cuda/, same arguments) sit
 * side by side. A CUDA tensor in a CPU-only build fails in check_device
 * with "built without CUDA; reconfigure with --with-cuda".
 *
 * Not collective.
 */
#include "ops_dispatch.h"

#include <stdio.h>
#include <stdlib.h>

const ops_tensor OPS_NONE = { NULL, 0, OPS_F32, OPS_CPU };

const char *device_name(ops_device dev)
{
    return dev == OPS_CPU ? "cpu" : dev == OPS_CUDA ? "cuda" : "unknown";
}

/* Whether dev runs issue 34's fused GPU kernels: a GPU, and TRIDENT_FUSED
 * not 0 (fused_cuda.cu). The CPU's kernels are what they are. */
int ops_fused(ops_device dev)
{
#if TRI_HAVE_CUDA
    return dev == OPS_CUDA && fused_enabled_cuda();
#else
    (void)dev;
    return 0;
#endif
}

/* ---- argument checks ------------------------------------------------- */

static int is_float_dtype(ops_dtype d)
{
    return d == OPS_F32 || d == OPS_BF16 || d == OPS_F16;
}

/* Whether `dev`'s backend implements this dtype for this kind. The CPU
 * backend does every compute dtype; a backend without bf16 or fp16 yet
 * returns 0 for them here and callers get "not supported by the ...
 * backend yet". */
static int dtype_ok(ops_device dev, arg_kind kind, ops_dtype d)
{
    (void)dev;
    switch (kind) {
    case ARG_D: return is_float_dtype(d);
    case ARG_D_OR_F32: return is_float_dtype(d);
    case ARG_F32: return d == OPS_F32;
    case ARG_GRAD: return d == OPS_F32;
    case ARG_ANY_FLOAT: return is_float_dtype(d);
    case ARG_I32: return d == OPS_I32;
    case ARG_ANY: return is_float_dtype(d) || d == OPS_I32 || d == OPS_F64;
    }
    return 0;
}

static const char *kind_dtypes(arg_kind kind)
{
    switch (kind) {
    case ARG_D:
    case ARG_D_OR_F32:
    case ARG_ANY_FLOAT: return "fp32, bf16 or fp16";
    case ARG_F32: return "fp32";
    case ARG_GRAD: return "fp32 (parameter gradients are fp32 in every "
                          "precision)";
    case ARG_I32: return "int32";
    case ARG_ANY: return "fp32, bf16, fp16, int32 or fp64";
    }
    return "?";
}

void check_device(const char *fn, const ops_arg *a)
{
    if (a->t.device == OPS_CPU)
        return;
    if (a->t.device != OPS_CUDA)
        FAIL("%s: %s has unknown device %d", fn, a->name, (int)a->t.device);
    if (!TRI_HAVE_CUDA)
        FAIL("%s: %s is on a CUDA device, but trident was built without "
             "CUDA; reconfigure with --with-cuda", fn, a->name);
}

/* d is the argument that sets the call's compute dtype (NULL: none). */
static void check_dtype(const char *fn, const ops_arg *a, ops_device dev,
                        const ops_arg *d)
{
    ops_dtype t = a->t.dtype;
    if (!dtype_ok(dev, a->kind, t)) {
        if ((a->kind == ARG_D || a->kind == ARG_D_OR_F32) && is_float_dtype(t))
            FAIL("%s: %s not supported by the %s backend yet (argument %s)",
                 fn, ops_dtype_name(t), dev == OPS_CPU ? "CPU" : "CUDA",
                 a->name);
        FAIL("%s: %s is %s but must be %s", fn, a->name, ops_dtype_name(t),
             kind_dtypes(a->kind));
    }
    if (!d || a == d)
        return;
    if (a->kind == ARG_D && t != d->t.dtype)
        FAIL("%s: %s is %s but %s is %s; the activations, weights and "
             "activation gradients of one call share one compute dtype", fn,
             a->name, ops_dtype_name(t), d->name, ops_dtype_name(d->t.dtype));
    if (a->kind == ARG_D_OR_F32 && t != OPS_F32 && t != d->t.dtype)
        FAIL("%s: %s is %s but must be fp32 or the compute dtype, %s (that "
             "of %s)", fn, a->name, ops_dtype_name(t),
             ops_dtype_name(d->t.dtype), d->name);
}

ops_device check_args(const char *fn, ops_dtype *compute, const ops_arg *args, int n)
{
    const ops_arg *first = NULL, *d = NULL, *d_or_f32 = NULL;
    for (int i = 0; i < n; i++) {
        const ops_arg *a = &args[i];
        if (!a->t.data) {
            if (a->optional)
                continue;
            FAIL("%s: required argument %s is missing", fn, a->name);
        }
        if (a->need < 0)
            FAIL("%s: negative shape for %s", fn, a->name);
        if (a->t.n < a->need)
            FAIL("%s: %s holds %lld elements but the shapes need %lld", fn,
                 a->name, (long long)a->t.n, (long long)a->need);
        check_device(fn, a);
        if (!first)
            first = a;
        else if (a->t.device != first->t.device)
            FAIL("%s: %s is on %s but %s is on %s", fn, a->name,
                 device_name(a->t.device), first->name,
                 device_name(first->t.device));
        if (a->kind == ARG_D && !d)
            d = a;
        if (a->kind == ARG_D_OR_F32 && !d_or_f32)
            d_or_f32 = a;
    }
    ops_device dev = first ? first->t.device : OPS_CPU;
    if (!d)
        d = d_or_f32;
    for (int i = 0; i < n; i++)
        if (args[i].t.data)
            check_dtype(fn, &args[i], dev, d);
    if (compute)
        *compute = d ? d->t.dtype : OPS_F32;
    return dev;
}

#if !TRI_HAVE_CUDA
void no_backend(const char *fn, ops_device dev)
{
    FAIL("%s: no %s backend in this build", fn, device_name(dev));
}
#endif

void check_dims(const char *fn, const char *names, int a, int b, int c)
{
    if (a < 0 || b < 0 || c < 0)
        FAIL("%s: negative shape (%s = %d, %d, %d)", fn, names, a, b, c);
}

void check_shard(const char *fn, int v0, int Vl)
{
    if (v0 < 0 || Vl < 0)
        FAIL("%s: bad vocabulary shard v0 = %d, Vl = %d", fn, v0, Vl);
}

/* ---- mixture of experts ---------------------------------------------- */

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

/* ---- optimizer --------------------------------------------------------- */

/* The arguments every AdamW call shares. */
static void check_adamw_args(const char *fn, const ops_adamw_args *a)
{
    if (!a)
        FAIL("%s: no arguments", fn);
    if (a->step < 1)
        FAIL("%s: step %d must be 1 or more (bias correction)", fn, a->step);
}

static ops_device check_adamw_tensors(const char *fn, ops_tensor master, ops_tensor grad,
                                      ops_tensor m, ops_tensor v, ops_tensor wcopy, int64_t n)
{
    return CHECK_ARGS(fn, NULL,
        { "master", master, n, ARG_F32, 0 },
        { "grad", grad, n, ARG_ANY_FLOAT, 0 },
        { "m", m, n, ARG_F32, 0 },
        { "v", v, n, ARG_F32, 0 },
        { "wcopy", wcopy, n, ARG_ANY_FLOAT, 1 });
}

void ops_adamw(ops_tensor master, ops_tensor grad, ops_tensor m, ops_tensor v,
               ops_tensor wcopy, int64_t n, const ops_adamw_args *a)
{
    static const char fn[] = "ops_adamw";
    check_adamw_args(fn, a);
    ops_device dev = check_adamw_tensors(fn, master, grad, m, v, wcopy, n);
    if (dev == OPS_CPU)
        adamw_cpu(master.data, grad.data, grad.dtype, m.data, v.data,
                  wcopy.data, wcopy.dtype, n, a);
    else
        ON_CUDA(adamw_cuda(master.data, grad.data, grad.dtype, m.data, v.data,
                  wcopy.data, wcopy.dtype, n, a));
}

/* ops_adamw on each segment in order, with the segment's weight decay. */
static void adamw_each(const ops_adamw_seg *seg, int count, const ops_adamw_args *a)
{
    for (int i = 0; i < count; i++) {
        ops_adamw_args ai = *a;
        ai.weight_decay = seg[i].weight_decay;
        ops_adamw(seg[i].master, seg[i].grad, seg[i].m, seg[i].v, seg[i].wcopy,
                  seg[i].master.n, &ai);
    }
}

void ops_adamw_multi(const ops_adamw_seg *seg, int count, const ops_adamw_args *a)
{
    static const char fn[] = "ops_adamw_multi";
    check_adamw_args(fn, a);
    if (count <= 0)
        return;
    if (!seg)
        FAIL("%s: %d segments but no table", fn, count);
    ops_device dev = OPS_CPU;
    for (int i = 0; i < count; i++) {
        ops_device d = check_adamw_tensors(fn, seg[i].master, seg[i].grad, seg[i].m,
                                           seg[i].v, seg[i].wcopy, seg[i].master.n);
        if (i > 0 && d != dev)
            FAIL("%s: segment %d is on %s but segment 0 is on %s", fn, i,
                 device_name(d), device_name(dev));
        dev = d;
    }
    if (ops_fused(dev))
        ON_CUDA(adamw_multi_cuda(seg, count, a));
    else
        adamw_each(seg, count, a);
}

/* ---- devices -------------------------------------------------------------- */

int ops_device_count(ops_device dev)
{
    if (dev == OPS_CPU)
        return 1;
#if TRI_HAVE_CUDA
    return cuda_device_count();
#else
    return 0;
#endif
}

const char *ops_device_count_error(ops_device dev)
{
    (void)dev;
#if TRI_HAVE_CUDA
    return cuda_device_count_error();
#else
    return "";
#endif
}

int ops_device_init(ops_device dev, int local_rank, int local_size, char *err,
                    size_t err_size)
{
    if (dev == OPS_CPU)
        return 0;
#if TRI_HAVE_CUDA
    return cuda_device_init(local_rank, local_size, err, err_size);
#else
    (void)local_rank;
    (void)local_size;
    snprintf(err, err_size, "trident was built without CUDA; reconfigure with --with-cuda");
    return 1;
#endif
}

int64_t ops_device_memory_bytes(ops_device dev)
{
#if TRI_HAVE_CUDA
    if (dev == OPS_CUDA)
        return cuda_device_memory_bytes();
#endif
    (void)dev;
    return 0;
}

int ops_device_uuid(ops_device dev, unsigned char uuid[16])
{
#if TRI_HAVE_CUDA
    if (dev == OPS_CUDA) {
        cuda_device_uuid(uuid);
        return 1;
    }
#else
    (void)uuid;
#endif
    (void)dev;
    return 0;
}

void ops_device_finalize(ops_device dev)
{
#if TRI_HAVE_CUDA
    if (dev == OPS_CUDA)
        cuda_device_finalize();
#else
    (void)dev;
#endif
}

const char *ops_gemm_info_on(ops_device dev, const char **warning)
{
#if TRI_HAVE_CUDA
    if (dev == OPS_CUDA)
        return gemm_info_cuda(warning);
#endif
    (void)dev;
    return ops_gemm_info(warning);
}

double ops_gemm_peak_on(ops_device dev, ops_dtype dtype, double seconds)
{
#if TRI_HAVE_CUDA
    if (dev == OPS_CUDA)
        return gemm_peak_cuda(dtype, seconds);
#endif
    (void)dev;
    return ops_gemm_peak_dtype(dtype, seconds);
}

double ops_hardware_peak_on(ops_device dev, ops_dtype dtype, double seconds, char *how,
                            size_t how_size)
{
#if TRI_HAVE_CUDA
    if (dev == OPS_CUDA)
        return hardware_peak_cuda(dtype, how, how_size);
#endif
    (void)dev;
    return cpu_peak_flops(dtype, seconds, how, how_size);
}

const char *ops_cpu_name(void)
{
    return cpu_model_name();
}

int ops_cpu_native_bf16(void)
{
    return cpu_has_native_bf16();
}
