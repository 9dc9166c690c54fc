/*
 * ops_llama.c - the ops Llama adds to GPT-2's: RMSNorm (also with the
 * residual add before it, one pass on a GPU), rotary position
 * embeddings (from position 0 or from t0), SwiGLU, and grouped-query
 * attention's expansion of the key/value heads and its reduction of their
 * gradients. cpu/rmsnorm_cpu.c, rope_cpu.c, gqa_cpu.c and SwiGLU in
 * elementwise_cpu.c; cuda/llama_cuda.cu.
 *
 * Not collective.
 */
#include "ops_dispatch.h"

#include <stdint.h>

void ops_rmsnorm_fwd(ops_tensor out, ops_tensor rstd, ops_tensor inp, ops_tensor w,
                     int N, int C, float eps)
{
    static const char fn[] = "ops_rmsnorm_fwd";
    check_dims(fn, "N, C, C", N, C, C);
    ops_dtype dt;
    ops_device dev = CHECK_ARGS(fn, &dt,
        { "out", out, (int64_t)N * C, ARG_D, 0 },
        { "rstd", rstd, N, ARG_F32, 0 },
        { "inp", inp, (int64_t)N * C, ARG_D, 0 },
        { "w", w, C, ARG_D, 0 });
    if (dev == OPS_CPU)
        rmsnorm_fwd_cpu(out.data, rstd.data, inp.data, w.data, dt, N, C, eps);
    else
        ON_CUDA(rmsnorm_fwd_cuda(out.data, rstd.data, inp.data, w.data, dt, N, C, eps));
}

void ops_add_rmsnorm_fwd(ops_tensor resid, ops_tensor out, ops_tensor rstd, ops_tensor a,
                         ops_tensor b, ops_tensor w, int N, int C, float eps)
{
    static const char fn[] = "ops_add_rmsnorm_fwd";
    check_dims(fn, "N, C, C", N, C, C);
    int64_t n = (int64_t)N * C;
    ops_dtype dt;
    ops_device dev = CHECK_ARGS(fn, &dt,
        { "resid", resid, n, ARG_D, 0 },
        { "out", out, n, ARG_D, 0 },
        { "rstd", rstd, N, ARG_F32, 0 },
        { "a", a, n, ARG_D, 0 },
        { "b", b, n, ARG_D, 0 },
        { "w", w, C, ARG_D, 0 });
    if (ops_fused(dev)) {
        ON_CUDA(add_rmsnorm_fwd_cuda(resid.data, out.data, rstd.data, a.data, b.data, w.data,
                                     dt, N, C, eps));
    } else { /* the two ops it fuses, so the CPU's bits are theirs */
        ops_add(resid, a, b, n);
        ops_rmsnorm_fwd(out, rstd, resid, w, N, C, eps);
    }
}

void ops_rmsnorm_bwd(ops_tensor dinp, ops_tensor dw, ops_tensor dout, ops_tensor inp,
                     ops_tensor w, ops_tensor rstd, int N, int C)
{
    static const char fn[] = "ops_rmsnorm_bwd";
    check_dims(fn, "N, C, C", N, C, C);
    ops_dtype dt;
    ops_device dev = CHECK_ARGS(fn, &dt,
        { "dinp", dinp, (int64_t)N * C, ARG_D, 0 },
        { "dw", dw, C, ARG_GRAD, 0 },
        { "dout", dout, (int64_t)N * C, ARG_D, 0 },
        { "inp", inp, (int64_t)N * C, ARG_D, 0 },
        { "w", w, C, ARG_D, 0 },
        { "rstd", rstd, N, ARG_F32, 0 });
    if (dev == OPS_CPU)
        rmsnorm_bwd_cpu(dinp.data, dw.data, dout.data, inp.data, w.data, rstd.data, dt, N, C);
    else
        ON_CUDA(rmsnorm_bwd_cuda(dinp.data, dw.data, dout.data, inp.data, w.data, rstd.data,
                                 dt, N, C));
}

static void rope(const char *fn, ops_tensor x, int B, int T, int t0, int H, int hs,
                 double theta, int inverse)
{
    check_dims(fn, "B, T, H", B, T, H);
    if (hs <= 0 || hs % 2)
        FAIL("%s: head size %d must be positive and even", fn, hs);
    if (t0 < 0 || t0 > INT32_MAX - T)
        FAIL("%s: first position t0 = %d of T = %d rows is negative or past 2^31 - 1", fn,
             t0, T);
    ops_dtype dt;
    ops_device dev = CHECK_ARGS(fn, &dt,
        { "x", x, (int64_t)B * T * H * hs, ARG_D, 0 });
    if (dev == OPS_CPU)
        rope_cpu(x.data, dt, B, T, t0, H, hs, theta, inverse);
    else
        ON_CUDA(rope_cuda(x.data, dt, B, T, t0, H, hs, theta, inverse));
}

void ops_rope_fwd(ops_tensor x, int B, int T, int H, int hs, double theta)
{
    rope("ops_rope_fwd", x, B, T, 0, H, hs, theta, 0);
}

void ops_rope_bwd(ops_tensor dx, int B, int T, int H, int hs, double theta)
{
    rope("ops_rope_bwd", dx, B, T, 0, H, hs, theta, 1);
}

void ops_rope_fwd_at(ops_tensor x, int B, int T, int t0, int H, int hs, double theta)
{
    rope("ops_rope_fwd_at", x, B, T, t0, H, hs, theta, 0);
}

void ops_rope_bwd_at(ops_tensor dx, int B, int T, int t0, int H, int hs, double theta)
{
    rope("ops_rope_bwd_at", dx, B, T, t0, H, hs, theta, 1);
}

void ops_swiglu_fwd(ops_tensor out, ops_tensor gate, ops_tensor up, int64_t n)
{
    static const char fn[] = "ops_swiglu_fwd";
    ops_dtype dt;
    ops_device dev = CHECK_ARGS(fn, &dt,
        { "out", out, n, ARG_D, 0 },
        { "gate", gate, n, ARG_D, 0 },
        { "up", up, n, ARG_D, 0 });
    if (dev == OPS_CPU)
        swiglu_fwd_cpu(out.data, gate.data, up.data, dt, n);
    else
        ON_CUDA(swiglu_fwd_cuda(out.data, gate.data, up.data, dt, n));
}

void ops_swiglu_bwd(ops_tensor dgate, ops_tensor dup, ops_tensor dout, ops_tensor gate,
                    ops_tensor up, int64_t n)
{
    static const char fn[] = "ops_swiglu_bwd";
    ops_dtype dt;
    ops_device dev = CHECK_ARGS(fn, &dt,
        { "dgate", dgate, n, ARG_D, 0 },
        { "dup", dup, n, ARG_D, 0 },
        { "dout", dout, n, ARG_D, 0 },
        { "gate", gate, n, ARG_D, 0 },
        { "up", up, n, ARG_D, 0 });
    if (dev == OPS_CPU)
        swiglu_bwd_cpu(dgate.data, dup.data, dout.data, gate.data, up.data, dt, n);
    else
        ON_CUDA(swiglu_bwd_cuda(dgate.data, dup.data, dout.data, gate.data, up.data, dt, n));
}

static void check_gqa(const char *fn, int N, int NH, int NKV, int hs)
{
    check_dims(fn, "N, NH, NKV", N, NH, NKV);
    if (hs <= 0 || NKV <= 0)
        FAIL("%s: head size %d and NKV %d must be positive", fn, hs, NKV);
    if (NH % NKV)
        FAIL("%s: NKV = %d key/value heads do not divide NH = %d query heads", fn, NKV, NH);
}

void ops_gqa_expand(ops_tensor qkv, ops_tensor q, ops_tensor k, ops_tensor v,
                    int N, int NH, int NKV, int hs)
{
    static const char fn[] = "ops_gqa_expand";
    check_gqa(fn, N, NH, NKV, hs);
    int64_t nq = (int64_t)N * NH * hs, nkv = (int64_t)N * NKV * hs;
    ops_dtype dt;
    ops_device dev = CHECK_ARGS(fn, &dt,
        { "qkv", qkv, 3 * nq, ARG_D, 0 },
        { "q", q, nq, ARG_D, 0 },
        { "k", k, nkv, ARG_D, 0 },
        { "v", v, nkv, ARG_D, 0 });
    if (dev == OPS_CPU)
        gqa_expand_cpu(qkv.data, q.data, k.data, v.data, dt, N, NH, NKV, hs);
    else
        ON_CUDA(gqa_expand_cuda(qkv.data, q.data, k.data, v.data, dt, N, NH, NKV, hs));
}

void ops_gqa_reduce(ops_tensor dq, ops_tensor dk, ops_tensor dv, ops_tensor dqkv,
                    int N, int NH, int NKV, int hs)
{
    static const char fn[] = "ops_gqa_reduce";
    check_gqa(fn, N, NH, NKV, hs);
    int64_t nq = (int64_t)N * NH * hs, nkv = (int64_t)N * NKV * hs;
    ops_dtype dt;
    ops_device dev = CHECK_ARGS(fn, &dt,
        { "dq", dq, nq, ARG_D, 0 },
        { "dk", dk, nkv, ARG_D, 0 },
        { "dv", dv, nkv, ARG_D, 0 },
        { "dqkv", dqkv, 3 * nq, ARG_D, 0 });
    if (dev == OPS_CPU)
        gqa_reduce_cpu(dq.data, dk.data, dv.data, dqkv.data, dt, N, NH, NKV, hs);
    else
        ON_CUDA(gqa_reduce_cuda(dq.data, dk.data, dv.data, dqkv.data, dt, N, NH, NKV, hs));
}
