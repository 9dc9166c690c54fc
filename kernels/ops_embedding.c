/*
 * ops_embedding.c - the token embedding (a vocabulary shard of it) and
 * the position embedding, forward and backward. cpu/embedding_cpu.c,
 * cuda/embedding_cuda.cu.
 *
 * Not collective.
 */
#include "ops_dispatch.h"

void ops_embedding_fwd(ops_tensor out, ops_tensor tokens, ops_tensor wte,
                       int v0, int Vl, int N, int C)
{
    static const char fn[] = "ops_embedding_fwd";
    check_dims(fn, "N, C, Vl", N, C, Vl);
    check_shard(fn, v0, Vl);
    ops_dtype dt;
    ops_device dev = CHECK_ARGS(fn, &dt,
        { "out", out, (int64_t)N * C, ARG_D, 0 },
        { "tokens", tokens, N, ARG_I32, 0 },
        { "wte", wte, (int64_t)Vl * C, ARG_D, 0 });
    if (dev == OPS_CPU)
        embedding_fwd_cpu(out.data, tokens.data, wte.data, dt, v0, Vl, N, C);
    else
        ON_CUDA(embedding_fwd_cuda(out.data, tokens.data, wte.data, dt, v0, Vl, N, C));
}

void ops_embedding_bwd(ops_tensor dwte, ops_tensor tokens, ops_tensor dout,
                       int v0, int Vl, int N, int C)
{
    static const char fn[] = "ops_embedding_bwd";
    check_dims(fn, "N, C, Vl", N, C, Vl);
    check_shard(fn, v0, Vl);
    ops_dtype dt;
    ops_device dev = CHECK_ARGS(fn, &dt,
        { "dwte", dwte, (int64_t)Vl * C, ARG_GRAD, 0 },
        { "tokens", tokens, N, ARG_I32, 0 },
        { "dout", dout, (int64_t)N * C, ARG_D, 0 });
    if (dev == OPS_CPU)
        embedding_bwd_cpu(dwte.data, tokens.data, dout.data, dt, v0, Vl, N, C);
    else
        ON_CUDA(embedding_bwd_cuda(dwte.data, tokens.data, dout.data, dt, v0, Vl, N, C));
}

void ops_position_fwd(ops_tensor out, ops_tensor wpe, int B, int T, int C)
{
    static const char fn[] = "ops_position_fwd";
    check_dims(fn, "B, T, C", B, T, C);
    ops_dtype dt;
    ops_device dev = CHECK_ARGS(fn, &dt,
        { "out", out, (int64_t)B * T * C, ARG_D, 0 },
        { "wpe", wpe, (int64_t)T * C, ARG_D, 0 });
    if (dev == OPS_CPU)
        position_fwd_cpu(out.data, wpe.data, dt, B, T, C);
    else
        ON_CUDA(position_fwd_cuda(out.data, wpe.data, dt, B, T, C));
}

void ops_position_bwd(ops_tensor dwpe, ops_tensor dout, int B, int T, int C)
{
    static const char fn[] = "ops_position_bwd";
    check_dims(fn, "B, T, C", B, T, C);
    ops_dtype dt;
    ops_device dev = CHECK_ARGS(fn, &dt,
        { "dwpe", dwpe, (int64_t)T * C, ARG_GRAD, 0 },
        { "dout", dout, (int64_t)B * T * C, ARG_D, 0 });
    if (dev == OPS_CPU)
        position_bwd_cpu(dwpe.data, dout.data, dt, B, T, C);
    else
        ON_CUDA(position_bwd_cuda(dwpe.data, dout.data, dt, B, T, C));
}
