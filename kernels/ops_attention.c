/*
 * ops_attention.c - causal self-attention forward and backward, over the
 * whole sequence or a window of its query rows, and the largest head size
 * a device's fused attention takes. cpu/attention_cpu.c; on a GPU
 * cuda/attention_*_cuda.cu, the route chosen in attention_route.c.
 *
 * Not collective.
 */
#include "ops_dispatch.h"

/* The shape checks of every attention op: the window [q0, q0 + Tq) must
 * lie in [0, T) (the whole-sequence ops pass q0 = 0, Tq = T). */
static void check_attention(const char *fn, int B, int T, int q0, int Tq, int NH, int hs)
{
    check_dims(fn, "B, T, NH", B, T, NH);
    if (hs <= 0)
        FAIL("%s: head size %d must be positive", fn, hs);
    if (q0 < 0 || Tq < 0 || q0 > T - Tq)
        FAIL("%s: query rows [%d, %d + %d) are not inside the sequence's T = %d", fn, q0,
             q0, Tq, T);
}

static void attention_fwd(const char *fn, ops_tensor out, ops_tensor lse, ops_tensor qkv,
                          int B, int T, int q0, int Tq, int NH, int hs)
{
    check_attention(fn, B, T, q0, Tq, NH, hs);
    int64_t rows = (int64_t)B * Tq;
    ops_dtype dt;
    ops_device dev = CHECK_ARGS(fn, &dt,
        { "out", out, rows * NH * hs, ARG_D, 0 },
        { "lse", lse, rows * NH, ARG_F32, 0 },
        { "qkv", qkv, (int64_t)B * T * NH * 3 * hs, ARG_D, 0 });
    if (dev == OPS_CPU)
        attention_rows_fwd_cpu(out.data, lse.data, qkv.data, dt, B, T, q0, Tq, NH, hs);
    else
        ON_CUDA(attention_rows_fwd_cuda(out.data, lse.data, qkv.data, dt, B, T, q0, Tq, NH,
                                        hs));
}

void ops_attention_fwd(ops_tensor out, ops_tensor lse, ops_tensor qkv,
                       int B, int T, int NH, int hs)
{
    attention_fwd("ops_attention_fwd", out, lse, qkv, B, T, 0, T, NH, hs);
}

void ops_attention_rows_fwd(ops_tensor out, ops_tensor lse, ops_tensor qkv,
                            int B, int T, int q0, int Tq, int NH, int hs)
{
    attention_fwd("ops_attention_rows_fwd", out, lse, qkv, B, T, q0, Tq, NH, hs);
}

/* accumulate: the window's op adds into dqkv, the whole sequence's
 * overwrites it (ops.h). */
static void attention_bwd(const char *fn, ops_tensor dqkv, ops_tensor dout, ops_tensor qkv,
                          ops_tensor out, ops_tensor lse, int B, int T, int q0, int Tq,
                          int NH, int hs, int accumulate)
{
    check_attention(fn, B, T, q0, Tq, NH, hs);
    int64_t rows = (int64_t)B * Tq, all = (int64_t)B * T * NH * 3 * hs;
    ops_dtype dt;
    ops_device dev = CHECK_ARGS(fn, &dt,
        { "dqkv", dqkv, all, ARG_D, 0 },
        { "dout", dout, rows * NH * hs, ARG_D, 0 },
        { "qkv", qkv, all, ARG_D, 0 },
        { "out", out, rows * NH * hs, ARG_D, 0 },
        { "lse", lse, rows * NH, ARG_F32, 0 });
    if (dev == OPS_CPU)
        attention_rows_bwd_cpu(dqkv.data, dout.data, qkv.data, out.data, lse.data, dt, B, T,
                               q0, Tq, NH, hs, accumulate);
    else
        ON_CUDA(attention_rows_bwd_cuda(dqkv.data, dout.data, qkv.data, out.data, lse.data,
                                        dt, B, T, q0, Tq, NH, hs, accumulate));
}

void ops_attention_bwd(ops_tensor dqkv, ops_tensor dout, ops_tensor qkv,
                       ops_tensor out, ops_tensor lse,
                       int B, int T, int NH, int hs)
{
    attention_bwd("ops_attention_bwd", dqkv, dout, qkv, out, lse, B, T, 0, T, NH, hs, 0);
}

void ops_attention_rows_bwd(ops_tensor dqkv, ops_tensor dout, ops_tensor qkv,
                            ops_tensor out, ops_tensor lse,
                            int B, int T, int q0, int Tq, int NH, int hs)
{
    attention_bwd("ops_attention_rows_bwd", dqkv, dout, qkv, out, lse, B, T, q0, Tq, NH, hs,
                  1);
}

int ops_attention_max_head_size(ops_device dev)
{
#if TRI_HAVE_CUDA
    if (dev == OPS_CUDA)
        return ATTENTION_MAX_HS_CUDA;
#endif
    (void)dev;
    return 0;
}
