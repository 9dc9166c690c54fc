/*
 * model_tp.c - the tensor-parallel and sequence-parallel collectives that
 * every architecture's block calls, and the two halves of a linear layer's
 * backward; see model_impl.h.
 *
 * They sit apart from model.c (the stage machinery) so that the blocks,
 * which live in the architectures' descriptors (arch_gpt2.c,
 * arch_llama.c), call down into them while model.c calls the blocks
 * through the descriptor: the arrows run model.c -> arch -> model_tp.c,
 * never back.
 *
 * Without sequence parallelism the residual stream is replicated over TP:
 * a row-parallel output is all-reduced. With it each rank holds 1/tp of
 * the B*T tokens: the all-reduce becomes a reduce-scatter onto the
 * slices and a norm's output is all-gathered before the column-parallel
 * GEMM that reads it; the backward mirrors that. The helpers hide which,
 * so a block reads the same either way.
 */
#include "model_impl.h"

#include "comm.h"
#include "prof.h"

void model_tp_allreduce(Model *m, ops_tensor t, int64_t n)
{
    comm_allreduce(m->grid, COMM_TP, t, n, COMM_SUM);
}

/* The equal per-rank counts of N rows of C split over TP. */
static void slice_counts(const Model *m, int64_t N, int *counts)
{
    for (int r = 0; r < m->grid->layout.tp; r++)
        counts[r] = (int)(N / m->grid->layout.tp * m->C);
}

/* dst (N rows) = every TP rank's slice src (N/tp rows), in rank order. */
void model_gather_rows(Model *m, ops_tensor dst, ops_tensor src, int64_t N)
{
    int counts[m->grid->layout.tp];
    slice_counts(m, N, counts);
    PROF(PROF_TP_COMM, comm_allgather(m->grid, COMM_TP, head_of(src, counts[0]),
                                      head_of(dst, N * m->C), counts));
}

/* full (N rows of partial sums) summed over TP: in place, or this rank's
 * slice of the sum in s->slice under sequence parallelism. Returns the
 * local rows. */
ops_tensor model_sum_rows(Model *m, ops_tensor full, int64_t N)
{
    if (!m->sp) {
        PROF(PROF_TP_COMM, model_tp_allreduce(m, full, N * m->C));
        return head_of(full, N * m->C);
    }
    int counts[m->grid->layout.tp];
    slice_counts(m, N, counts);
    ops_tensor mine = head_of(m->scratch->slice, counts[0]);
    PROF(PROF_TP_COMM, comm_reduce_scatter(m->grid, COMM_TP, head_of(full, N * m->C), mine,
                                           counts));
    return mine;
}

/* TP rank 0 adds the bias before the sum, so it counts once. */
ops_tensor model_row_parallel(Model *m, ops_tensor x, int w, int b, int64_t N,
                              int64_t in_local)
{
    ops_tensor y = head_of(m->scratch->tmp, N * m->C);
    ops_tensor bias = b >= 0 && m->grid->layout.tp_rank == 0 ? W(m, b) : OPS_NONE;
    PROF(PROF_MATMUL, ops_matmul_fwd(y, head_of(x, N * in_local), W(m, w), bias,
                   (int)N, m->C, (int)in_local));
    return model_sum_rows(m, y, N);
}

/* ops_matmul_bwd, or with `pre` (the GELU's input before this layer)
 * ops_matmul_dgelu_bwd, whose dinp is the gradient at pre. */
static void linear_bwd(Model *m, ops_tensor dinp, ops_tensor dw, ops_tensor db,
                       ops_tensor dout, ops_tensor inp, int w, ops_tensor pre, int64_t N,
                       int64_t out, int64_t in)
{
    if (pre.data)
        PROF(PROF_MATMUL, ops_matmul_dgelu_bwd(dinp, dw, db, dout, inp, W(m, w), pre, (int)N,
                                               (int)out, (int)in));
    else
        PROF(PROF_MATMUL, ops_matmul_bwd(dinp, dw, db, dout, inp, W(m, w), (int)N, (int)out,
                                         (int)in));
}

void model_linear_bwd_gelu(Model *m, ops_tensor dinp, int w, int b, ops_tensor dout,
                           ops_tensor inp, ops_tensor kept, ops_tensor pre, int64_t N,
                           int64_t out, int64_t in)
{
    if (kept.data) {
        ops_copy(kept, head_of(dout, N * out));
        linear_bwd(m, dinp, OPS_NONE, OPS_NONE, dout, OPS_NONE, w, pre, N, out, in);
        return;
    }
    linear_bwd(m, dinp, G(m, w), b >= 0 ? G(m, b) : OPS_NONE, dout, inp, w, pre, N, out, in);
}

void model_linear_bwd(Model *m, ops_tensor dinp, int w, int b, ops_tensor dout, ops_tensor inp,
                      ops_tensor kept, int64_t N, int64_t out, int64_t in)
{
    model_linear_bwd_gelu(m, dinp, w, b, dout, inp, kept, OPS_NONE, N, out, in);
}

void model_linear_weights(Model *m, int w, int b, ops_tensor kept, ops_tensor inp, int64_t N,
                          int64_t out, int64_t in)
{
    PROF(PROF_MATMUL, ops_matmul_bwd(OPS_NONE, G(m, w), b >= 0 ? G(m, b) : OPS_NONE, kept, inp,
                                     OPS_NONE, (int)N, (int)out, (int)in));
}

/* All N rows of a tensor this rank holds the local rows of: itself, or
 * under sequence parallelism gathered into `into`. */
ops_tensor model_all_rows(Model *m, ops_tensor local, ops_tensor into, int64_t N)
{
    if (!m->sp)
        return head_of(local, N * m->C);
    model_gather_rows(m, into, local, N);
    return head_of(into, N * m->C);
}

ops_tensor model_column_input(Model *m, ops_tensor ln, int64_t N)
{
    return model_all_rows(m, ln, m->scratch->gathered, N);
}

ops_tensor model_row_parallel_grad(Model *m, ops_tensor dres, int64_t N)
{
    return model_all_rows(m, dres, m->scratch->tmp, N);
}

ops_tensor model_norm_output_grad(Model *m, int64_t N)
{
    return model_sum_rows(m, m->scratch->d_ln, N);
}

