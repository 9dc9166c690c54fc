/*
 * ops_matmul.c - the dense (linear) layers: y = x . W^T + b forward and
 * backward, and the MLP's GEMM with GELU fused in (forward: keeping the
 * pre-activation; backward: dGELU on the input gradient). The CPU runs
 * the unfused pair; the GPU one GEMM with a cuBLASLt epilogue unless
 * TRIDENT_LT_EPILOGUE says otherwise (cpu/matmul_cpu.c,
 * cuda/matmul_cuda.cu).
 *
 * Not collective.
 */
#include "ops_dispatch.h"

void ops_matmul_fwd(ops_tensor out, ops_tensor inp, ops_tensor w,
                    ops_tensor bias, int M, int N, int K)
{
    static const char fn[] = "ops_matmul_fwd";
    check_dims(fn, "M, N, K", M, N, K);
    ops_dtype dt;
    ops_device dev = CHECK_ARGS(fn, &dt,
        { "out", out, (int64_t)M * N, ARG_D_OR_F32, 0 },
        { "inp", inp, (int64_t)M * K, ARG_D, 0 },
        { "w", w, (int64_t)N * K, ARG_D, 0 },
        { "bias", bias, N, ARG_D, 1 });
    if (dev == OPS_CPU)
        matmul_fwd_cpu(out.data, out.dtype, inp.data, w.data, bias.data, dt,
                       M, N, K);
    else
        ON_CUDA(matmul_fwd_cuda(out.data, out.dtype, inp.data, w.data, bias.data, dt,
                       M, N, K));
}

void ops_matmul_bwd(ops_tensor dinp, ops_tensor dw, ops_tensor dbias,
                    ops_tensor dout, ops_tensor inp, ops_tensor w,
                    int M, int N, int K)
{
    static const char fn[] = "ops_matmul_bwd";
    check_dims(fn, "M, N, K", M, N, K);
    /* inp is needed only for dw, w only for dinp */
    ops_dtype dt;
    ops_device dev = CHECK_ARGS(fn, &dt,
        { "dinp", dinp, (int64_t)M * K, ARG_D, 1 },
        { "dw", dw, (int64_t)N * K, ARG_GRAD, 1 },
        { "dbias", dbias, N, ARG_GRAD, 1 },
        { "dout", dout, (int64_t)M * N, ARG_D_OR_F32, 0 },
        { "inp", inp, (int64_t)M * K, ARG_D, !dw.data },
        { "w", w, (int64_t)N * K, ARG_D, !dinp.data });
    if (dev == OPS_CPU)
        matmul_bwd_cpu(dinp.data, dw.data, dbias.data, dout.data, dout.dtype,
                       inp.data, w.data, dt, M, N, K);
    else
        ON_CUDA(matmul_bwd_cuda(dinp.data, dw.data, dbias.data, dout.data, dout.dtype,
                       inp.data, w.data, dt, M, N, K));
}

void ops_matmul_gelu_fwd(ops_tensor out, ops_tensor pre, ops_tensor inp, ops_tensor w,
                         ops_tensor bias, int M, int N, int K)
{
    static const char fn[] = "ops_matmul_gelu_fwd";
    check_dims(fn, "M, N, K", M, N, K);
    ops_dtype dt;
    ops_device dev = CHECK_ARGS(fn, &dt,
        { "out", out, (int64_t)M * N, ARG_D, 0 },
        { "pre", pre, (int64_t)M * N, ARG_D, 0 },
        { "inp", inp, (int64_t)M * K, ARG_D, 0 },
        { "w", w, (int64_t)N * K, ARG_D, 0 },
        { "bias", bias, N, ARG_D, 1 });
    if (dev == OPS_CPU) {
        matmul_fwd_cpu(pre.data, dt, inp.data, w.data, bias.data, dt, M, N, K);
        gelu_fwd_cpu(out.data, pre.data, dt, (int64_t)M * N);
    } else
        ON_CUDA(matmul_gelu_fwd_cuda(out.data, pre.data, inp.data, w.data, bias.data, dt, M,
                                     N, K));
}

void ops_matmul_dgelu_bwd(ops_tensor dinp, ops_tensor dw, ops_tensor dbias,
                          ops_tensor dout, ops_tensor inp, ops_tensor w, ops_tensor pre,
                          int M, int N, int K)
{
    static const char fn[] = "ops_matmul_dgelu_bwd";
    check_dims(fn, "M, N, K", M, N, K);
    ops_dtype dt;
    ops_device dev = CHECK_ARGS(fn, &dt,
        { "dinp", dinp, (int64_t)M * K, ARG_D, 0 },
        { "dw", dw, (int64_t)N * K, ARG_GRAD, 1 },
        { "dbias", dbias, N, ARG_GRAD, 1 },
        { "dout", dout, (int64_t)M * N, ARG_D, 0 },
        { "inp", inp, (int64_t)M * K, ARG_D, !dw.data },
        { "w", w, (int64_t)N * K, ARG_D, 0 },
        { "pre", pre, (int64_t)M * K, ARG_D, 0 });
    if (dev == OPS_CPU) {
        matmul_bwd_cpu(dinp.data, dw.data, dbias.data, dout.data, dt, inp.data, w.data, dt, M,
                       N, K);
        gelu_bwd_cpu(dinp.data, pre.data, dinp.data, dt, (int64_t)M * K);
    } else
        ON_CUDA(matmul_dgelu_bwd_cuda(dinp.data, dw.data, dbias.data, dout.data, inp.data,
                                      w.data, pre.data, dt, M, N, K));
}
