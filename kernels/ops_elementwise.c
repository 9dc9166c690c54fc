/*
 * ops_elementwise.c - the ops that go element by element: GELU, add,
 * accumulate, scale, clip; and the fp64 accumulations over a tensor (sum
 * of squares for the gradient norm, one tensor or a table of them; sum for
 * the losses). cpu/elementwise_cpu.c, cuda/elementwise_cuda.cu.
 *
 * Not collective.
 */
#include "ops_dispatch.h"

#include <stdint.h>

void ops_gelu_fwd(ops_tensor out, ops_tensor inp, int64_t n)
{
    static const char fn[] = "ops_gelu_fwd";
    ops_dtype dt;
    ops_device dev = CHECK_ARGS(fn, &dt,
        { "out", out, n, ARG_D, 0 },
        { "inp", inp, n, ARG_D, 0 });
    if (dev == OPS_CPU)
        gelu_fwd_cpu(out.data, inp.data, dt, n);
    else
        ON_CUDA(gelu_fwd_cuda(out.data, inp.data, dt, n));
}

void ops_gelu_bwd(ops_tensor dinp, ops_tensor inp, ops_tensor dout, int64_t n)
{
    static const char fn[] = "ops_gelu_bwd";
    ops_dtype dt;
    ops_device dev = CHECK_ARGS(fn, &dt,
        { "dinp", dinp, n, ARG_D, 0 },
        { "inp", inp, n, ARG_D, 0 },
        { "dout", dout, n, ARG_D, 0 });
    if (dev == OPS_CPU)
        gelu_bwd_cpu(dinp.data, inp.data, dout.data, dt, n);
    else
        ON_CUDA(gelu_bwd_cuda(dinp.data, inp.data, dout.data, dt, n));
}

void ops_add(ops_tensor out, ops_tensor a, ops_tensor b, int64_t n)
{
    static const char fn[] = "ops_add";
    ops_dtype dt;
    ops_device dev = CHECK_ARGS(fn, &dt,
        { "out", out, n, ARG_D, 0 },
        { "a", a, n, ARG_D, 0 },
        { "b", b, n, ARG_D, 0 });
    if (dev == OPS_CPU)
        add_cpu(out.data, a.data, b.data, dt, n);
    else
        ON_CUDA(add_cuda(out.data, a.data, b.data, dt, n));
}

void ops_accumulate(ops_tensor y, ops_tensor x, int64_t n)
{
    static const char fn[] = "ops_accumulate";
    ops_dtype dt;
    ops_device dev = CHECK_ARGS(fn, &dt,
        { "y", y, n, ARG_D, 0 },
        { "x", x, n, ARG_D, 0 });
    if (dev == OPS_CPU)
        accumulate_cpu(y.data, x.data, dt, n);
    else
        ON_CUDA(accumulate_cuda(y.data, x.data, dt, n));
}

void ops_scale(ops_tensor x, float s, int64_t n)
{
    static const char fn[] = "ops_scale";
    ops_dtype dt;
    ops_device dev = CHECK_ARGS(fn, &dt, { "x", x, n, ARG_D, 0 });
    if (dev == OPS_CPU)
        scale_cpu(x.data, s, dt, n);
    else
        ON_CUDA(scale_cuda(x.data, s, dt, n));
}

void ops_clip_value(ops_tensor x, float c, int64_t n)
{
    static const char fn[] = "ops_clip_value";
    ops_dtype dt;
    ops_device dev = CHECK_ARGS(fn, &dt, { "x", x, n, ARG_D, 0 });
    if (dev == OPS_CPU)
        clip_value_cpu(x.data, c, dt, n);
    else
        ON_CUDA(clip_value_cuda(x.data, c, dt, n));
}

/* Checks a one-element fp64 accumulator on x's device. */
static ops_device check_accumulator(const char *fn, ops_tensor acc, ops_tensor x, int64_t n)
{
    if (!acc.data || acc.n < 1 || acc.dtype != OPS_F64)
        FAIL("%s: acc must hold one fp64 element", fn);
    if ((uintptr_t)acc.data % _Alignof(double) != 0)
        FAIL("%s: acc is not aligned for a double", fn);
    ops_arg a = { "acc", acc, 0, ARG_ANY, 0 };
    check_device(fn, &a);
    ops_device dev = CHECK_ARGS(fn, NULL, { "x", x, n, ARG_ANY_FLOAT, 0 });
    if (acc.device != dev)
        FAIL("%s: acc is on %s but x is on %s", fn, device_name(acc.device),
             device_name(dev));
    return dev;
}

void ops_sumsq_accumulate(ops_tensor acc, ops_tensor x, int64_t n)
{
    static const char fn[] = "ops_sumsq_accumulate";
    ops_device dev = check_accumulator(fn, acc, x, n);
    if (dev == OPS_CPU)
        sumsq_accumulate_cpu(acc.data, x.data, x.dtype, n);
    else
        ON_CUDA(sumsq_accumulate_cuda(acc.data, x.data, x.dtype, n));
}

void ops_sumsq_multi(ops_tensor acc, const ops_tensor *x, int count)
{
    static const char fn[] = "ops_sumsq_multi";
    if (count <= 0)
        return;
    if (!x)
        FAIL("%s: %d tensors but no table", fn, count);
    ops_device dev = OPS_CPU;
    for (int i = 0; i < count; i++)
        dev = check_accumulator(fn, acc, x[i], x[i].n);
    if (ops_fused(dev))
        ON_CUDA(sumsq_multi_cuda(acc.data, x, count));
    else
        for (int i = 0; i < count; i++)
            ops_sumsq_accumulate(acc, x[i], x[i].n);
}

void ops_sum_accumulate(ops_tensor acc, ops_tensor x, int64_t n)
{
    static const char fn[] = "ops_sum_accumulate";
    ops_device dev = check_accumulator(fn, acc, x, n);
    if (dev == OPS_CPU)
        sum_accumulate_cpu(acc.data, x.data, x.dtype, n);
    else
        ON_CUDA(sum_accumulate_cuda(acc.data, x.data, x.dtype, n));
}
