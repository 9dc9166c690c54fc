/*
 * ops_layernorm.c - LayerNorm forward and backward, and the residual add
 * fused into the forward on a GPU running the fused kernels (elsewhere
 * ops_add then ops_layernorm_fwd, so the CPU's bits are theirs). cpu/layernorm_cpu.c,
 * cuda/layernorm_cuda.cu.
 *
 * Not collective.
 */
#include "ops_dispatch.h"

void ops_layernorm_fwd(ops_tensor out, ops_tensor mean, ops_tensor rstd,
                       ops_tensor inp, ops_tensor w, ops_tensor b,
                       int N, int C)
{
    static const char fn[] = "ops_layernorm_fwd";
    check_dims(fn, "N, C, C", N, C, C);
    ops_dtype dt;
    ops_device dev = CHECK_ARGS(fn, &dt,
        { "out", out, (int64_t)N * C, ARG_D, 0 },
        { "mean", mean, N, ARG_F32, 0 },
        { "rstd", rstd, N, ARG_F32, 0 },
        { "inp", inp, (int64_t)N * C, ARG_D, 0 },
        { "w", w, C, ARG_D, 0 },
        { "b", b, C, ARG_D, 0 });
    if (dev == OPS_CPU)
        layernorm_fwd_cpu(out.data, mean.data, rstd.data, inp.data, w.data,
                          b.data, dt, N, C);
    else
        ON_CUDA(layernorm_fwd_cuda(out.data, mean.data, rstd.data, inp.data, w.data,
                          b.data, dt, N, C));
}

void ops_add_layernorm_fwd(ops_tensor resid, ops_tensor out, ops_tensor mean,
                           ops_tensor rstd, ops_tensor a, ops_tensor b,
                           ops_tensor w, ops_tensor bias, int N, int C)
{
    static const char fn[] = "ops_add_layernorm_fwd";
    check_dims(fn, "N, C, C", N, C, C);
    int64_t n = (int64_t)N * C;
    ops_dtype dt;
    ops_device dev = CHECK_ARGS(fn, &dt,
        { "resid", resid, n, ARG_D, 0 },
        { "out", out, n, ARG_D, 0 },
        { "mean", mean, N, ARG_F32, 0 },
        { "rstd", rstd, N, ARG_F32, 0 },
        { "a", a, n, ARG_D, 0 },
        { "b", b, n, ARG_D, 0 },
        { "w", w, C, ARG_D, 0 },
        { "bias", bias, C, ARG_D, 0 });
    if (ops_fused(dev)) {
        ON_CUDA(add_layernorm_fwd_cuda(resid.data, out.data, mean.data, rstd.data, a.data,
                                       b.data, w.data, bias.data, dt, N, C));
    } else { /* the two ops it fuses, so the CPU's bits are theirs */
        ops_add(resid, a, b, n);
        ops_layernorm_fwd(out, mean, rstd, resid, w, bias, N, C);
    }
}

void ops_layernorm_bwd(ops_tensor dinp, ops_tensor dw, ops_tensor db,
                       ops_tensor dout, ops_tensor inp, ops_tensor w,
                       ops_tensor mean, ops_tensor rstd, int N, int C)
{
    static const char fn[] = "ops_layernorm_bwd";
    check_dims(fn, "N, C, C", N, C, C);
    ops_dtype dt;
    ops_device dev = CHECK_ARGS(fn, &dt,
        { "dinp", dinp, (int64_t)N * C, ARG_D, 0 },
        { "dw", dw, C, ARG_GRAD, 0 },
        { "db", db, C, ARG_GRAD, 0 },
        { "dout", dout, (int64_t)N * C, ARG_D, 0 },
        { "inp", inp, (int64_t)N * C, ARG_D, 0 },
        { "w", w, C, ARG_D, 0 },
        { "mean", mean, N, ARG_F32, 0 },
        { "rstd", rstd, N, ARG_F32, 0 });
    if (dev == OPS_CPU)
        layernorm_bwd_cpu(dinp.data, dw.data, db.data, dout.data, inp.data,
                          w.data, mean.data, rstd.data, dt, N, C);
    else
        ON_CUDA(layernorm_bwd_cuda(dinp.data, dw.data, db.data, dout.data, inp.data,
                          w.data, mean.data, rstd.data, dt, N, C));
}
