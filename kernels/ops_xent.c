/*
 * ops_xent.c - the softmax cross-entropy over vocabulary shards (row
 * max, sum of exponentials, then losses and dlogits; or all at once on a
 * whole vocabulary), and the GPU head's gradient in the compute dtype:
 * the narrow dlogits written over the fp32 logits and the GEMM that reads
 * them at their row stride. cpu/xent_cpu.c, cuda/xent_cuda.cu (the strided
 * GEMM in cuda/matmul_cuda.cu).
 *
 * Not collective.
 */
#include "ops_dispatch.h"

#include <stdint.h>

/* logits (and dlogits) are ARG_D: the model passes fp32 logits, so D is
 * fp32 here whatever the model's compute dtype; bf16 or fp16 logits work
 * too. */

void ops_xent_max(ops_tensor rowmax, ops_tensor logits, int N, int Vl)
{
    static const char fn[] = "ops_xent_max";
    check_dims(fn, "N, Vl, Vl", N, Vl, Vl);
    ops_dtype dt;
    ops_device dev = CHECK_ARGS(fn, &dt,
        { "rowmax", rowmax, N, ARG_F32, 0 },
        { "logits", logits, (int64_t)N * Vl, ARG_D, 0 });
    if (dev == OPS_CPU)
        xent_max_cpu(rowmax.data, logits.data, dt, N, Vl);
    else
        ON_CUDA(xent_max_cuda(rowmax.data, logits.data, dt, N, Vl));
}

void ops_xent_sumexp(ops_tensor sumexp, ops_tensor target_logit,
                     ops_tensor logits, ops_tensor rowmax, ops_tensor targets,
                     int v0, int N, int Vl)
{
    static const char fn[] = "ops_xent_sumexp";
    check_dims(fn, "N, Vl, Vl", N, Vl, Vl);
    check_shard(fn, v0, Vl);
    ops_dtype dt;
    ops_device dev = CHECK_ARGS(fn, &dt,
        { "sumexp", sumexp, N, ARG_F32, 0 },
        { "target_logit", target_logit, N, ARG_F32, 0 },
        { "logits", logits, (int64_t)N * Vl, ARG_D, 0 },
        { "rowmax", rowmax, N, ARG_F32, 0 },
        { "targets", targets, N, ARG_I32, 0 });
    if (dev == OPS_CPU)
        xent_sumexp_cpu(sumexp.data, target_logit.data, logits.data, dt,
                        rowmax.data, targets.data, v0, N, Vl);
    else
        ON_CUDA(xent_sumexp_cuda(sumexp.data, target_logit.data, logits.data, dt,
                        rowmax.data, targets.data, v0, N, Vl));
}

void ops_xent_fused(ops_tensor losses, ops_tensor dlogits, ops_tensor logits,
                    ops_tensor rowmax, ops_tensor sumexp, ops_tensor target_logit,
                    ops_tensor targets, int N, int V, float grad_scale)
{
    static const char fn[] = "ops_xent_fused";
    check_dims(fn, "N, V, V", N, V, V);
    ops_dtype dt;
    ops_device dev = CHECK_ARGS(fn, &dt,
        { "losses", losses, N, ARG_F32, 0 },
        { "logits", logits, (int64_t)N * V, ARG_D, 0 },
        { "dlogits", dlogits, (int64_t)N * V, ARG_D, 1 },
        { "rowmax", rowmax, N, ARG_F32, 0 },
        { "sumexp", sumexp, N, ARG_F32, 0 },
        { "target_logit", target_logit, N, ARG_F32, 0 },
        { "targets", targets, N, ARG_I32, 0 });
    if (dev == OPS_CPU) {
        xent_fused_cpu(losses.data, dlogits.data, logits.data, dt, rowmax.data, sumexp.data,
                       target_logit.data, targets.data, N, V, grad_scale);
    } else {
        ON_CUDA(xent_fused_cuda(losses.data, dlogits.data, logits.data, dt, rowmax.data,
                                sumexp.data, target_logit.data, targets.data, N, V,
                                grad_scale));
    }
}

void ops_xent_finish(ops_tensor losses, ops_tensor dlogits, ops_tensor logits,
                     ops_tensor rowmax, ops_tensor sumexp,
                     ops_tensor target_logit, ops_tensor targets,
                     int v0, int N, int Vl, float grad_scale)
{
    static const char fn[] = "ops_xent_finish";
    check_dims(fn, "N, Vl, Vl", N, Vl, Vl);
    check_shard(fn, v0, Vl);
    ops_dtype dt;
    ops_device dev = CHECK_ARGS(fn, &dt,
        { "losses", losses, N, ARG_F32, 0 },
        { "logits", logits, (int64_t)N * Vl, ARG_D, 0 },
        { "dlogits", dlogits, (int64_t)N * Vl, ARG_D, 1 },
        { "rowmax", rowmax, N, ARG_F32, 0 },
        { "sumexp", sumexp, N, ARG_F32, 0 },
        { "target_logit", target_logit, N, ARG_F32, 0 },
        { "targets", targets, N, ARG_I32, 0 });
    if (dev == OPS_CPU)
        xent_finish_cpu(losses.data, dlogits.data, logits.data, dt,
                        rowmax.data, sumexp.data, target_logit.data,
                        targets.data, v0, N, Vl, grad_scale);
    else
        ON_CUDA(xent_finish_cuda(losses.data, dlogits.data, logits.data, dt,
                        rowmax.data, sumexp.data, target_logit.data,
                        targets.data, v0, N, Vl, grad_scale));
}

/* ---- the head's gradient in the compute dtype (GPU) -------------------- */

int ops_head_narrow(ops_device dev, ops_dtype dt)
{
    return (dt == OPS_BF16 || dt == OPS_F16) && ops_fused(dev);
}

/* The CPU keeps the fp32 dlogits: these two exist for the GPU's head. */
static void require_cuda(const char *fn, ops_device dev)
{
    if (dev != OPS_CUDA)
        FAIL("%s: runs on a GPU only; on the %s the head keeps ops_xent_fused's fp32 "
             "dlogits (ops_head_narrow)", fn, device_name(dev));
}

static void check_narrow_dtype(const char *fn, ops_dtype gdt)
{
    if (gdt != OPS_BF16 && gdt != OPS_F16)
        FAIL("%s: the gradient's dtype is %s, not bf16 or fp16", fn, ops_dtype_name(gdt));
}

void ops_xent_fused_narrow(ops_tensor losses, ops_tensor logits, ops_dtype gdt,
                           ops_tensor rowmax, ops_tensor sumexp, ops_tensor target_logit,
                           ops_tensor targets, int N, int V, float grad_scale)
{
    static const char fn[] = "ops_xent_fused_narrow";
    check_dims(fn, "N, V, V", N, V, V);
    check_narrow_dtype(fn, gdt);
    ops_device dev = CHECK_ARGS(fn, NULL,
        { "losses", losses, N, ARG_F32, 0 },
        { "logits", logits, (int64_t)N * V, ARG_F32, 0 },
        { "rowmax", rowmax, N, ARG_F32, 0 },
        { "sumexp", sumexp, N, ARG_F32, 0 },
        { "target_logit", target_logit, N, ARG_F32, 0 },
        { "targets", targets, N, ARG_I32, 0 });
    require_cuda(fn, dev);
    ON_CUDA(xent_fused_narrow_cuda(losses.data, logits.data, gdt, rowmax.data, sumexp.data,
                                   target_logit.data, targets.data, N, V, grad_scale));
}

ops_tensor ops_head_dlogits(ops_tensor logits, ops_dtype gdt)
{
    ops_tensor t = logits;
    t.dtype = gdt;
    t.n = logits.n * (int64_t)(ops_dtype_size(OPS_F32) / ops_dtype_size(gdt));
    return t;
}

void ops_matmul_bwd_ld(ops_tensor dinp, ops_tensor dw, ops_tensor dout, int64_t ld,
                       ops_tensor inp, ops_tensor w, int M, int N, int K)
{
    static const char fn[] = "ops_matmul_bwd_ld";
    check_dims(fn, "M, N, K", M, N, K);
    if (ld < N || ld > INT32_MAX)
        FAIL("%s: row stride ld %lld outside [N %d, 2^31)", fn, (long long)ld, N);
    ops_dtype dt;
    ops_device dev = CHECK_ARGS(fn, &dt,
        { "dinp", dinp, (int64_t)M * K, ARG_D, 1 },
        { "dw", dw, (int64_t)N * K, ARG_GRAD, 1 },
        { "dout", dout, M > 0 ? (int64_t)(M - 1) * ld + N : 0, ARG_D, 0 },
        { "inp", inp, (int64_t)M * K, ARG_D, !dw.data },
        { "w", w, (int64_t)N * K, ARG_D, !dinp.data });
    require_cuda(fn, dev);
    ON_CUDA(matmul_bwd_ld_cuda(dinp.data, dw.data, dout.data, ld, inp.data, w.data, dt, M, N,
                               K));
}
