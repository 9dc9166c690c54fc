/*
 * ops_adamw.c - the AdamW step: one tensor, or a table of segments (one
 * launch over all of them on a GPU running the fused kernels, else
 * segment by segment). cpu/adamw_cpu.c, cuda/adamw_cuda.cu.
 *
 * Not collective.
 */
#include "ops_dispatch.h"

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
