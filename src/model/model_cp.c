/*
 * model_cp.c - context parallelism in the model ([parallel] cp): which
 * part of each sequence this rank holds, the positions of its tokens, and
 * attention over the whole sequence from the cp group's parts. model.h
 * declares the chunks' places (pipeline.c reads them), model_impl.h the
 * rest (the model's own files call them), as for model_tp.c: model.c
 * calls down into this file, which reads the Model, so it has no header
 * of its own (no include circle, tests/t_deps.sh).
 *
 * The seq_len tokens of a row are cut into 2*cp chunks of Tc = seq_len /
 * (2 cp); cp rank i holds chunks i and 2cp-1-i (the "zigzag": an early
 * chunk, cheap under the causal mask, beside a late, dear one, so every
 * rank does the same attention work). The model's local tokens are
 * chunk-major, [local chunk 0: rows x Tc][local chunk 1: rows x Tc], so
 * m->T = seq_len / cp and everything per token (norms, GEMMs, residuals,
 * the loss, sequence parallelism's slices, pipeline messages) runs as at
 * cp = 1.
 *
 * Attention is an all-gather of qkv over the cp group (Llama 3's choice
 * over a ring: one collective a layer, and the fused kernels run as they
 * are on the whole sequence's keys and values): gather every rank's
 * chunk-major qkv, reorder it into the sequence's natural (rows,
 * seq_len) order, and run the causal kernel once per local chunk, for
 * that chunk's query rows. The backward gathers qkv again rather than
 * keeping it (the point of cp is that nothing of a layer holds the whole
 * sequence between passes), accumulates every chunk's gradient into a
 * zeroed whole-sequence dqkv, reorders it rank-major and reduce-scatters
 * it, so each rank receives its own tokens' gradient summed over the
 * later chunks' queries of every rank.
 *
 * Two whole-sequence buffers serve the three roles, as each is spent
 * before the next use: `cp_gathered` takes the all-gather and, once
 * reordered, the whole dqkv; `cp_sequence` holds the natural-order qkv
 * the kernels read and, once they are done, the rank-major dqkv the
 * reduce-scatter sends. They live in the stage's scratch, sized at
 * set-up (model_cp_scratch_elems): nothing is allocated in a step.
 */
#include "comm.h"
#include "fail.h"
#include "model_impl.h"

int model_cp_chunks(const Model *m) { return m->cp > 1 ? 2 : 1; }

int model_cp_chunk_len(const Model *m) { return m->T / model_cp_chunks(m); }

/* The zigzag: local chunk 0 of rank i is global chunk i, local chunk 1
 * is 2cp-1-i. */
static int global_chunk(int cp, int cp_rank, int h) { return h == 0 ? cp_rank : 2 * cp - 1 - cp_rank; }

int64_t model_cp_chunk_start(const Model *m, int h)
{
    return (int64_t)global_chunk(m->cp, m->cp_rank, h) * model_cp_chunk_len(m);
}

int64_t model_cp_scratch_elems(const Config *cfg, int tp)
{
    const ModelConfig *mc = &cfg->model;
    if (cfg->parallel.cp <= 1)
        return 0;
    int64_t Cl = (int64_t)(mc->n_head / tp) * (mc->n_embd / mc->n_head);
    return (int64_t)cfg->train.micro_batch * mc->seq_len * 3 * Cl;
}

void model_cp_check(const Model *m)
{
    if (m->cp != m->cfg->parallel.cp || (m->cp > 1 && m->seq_len % (2 * m->cp) != 0))
        fail_abort("model_create: [model] seq_len must be cut into 2 * [parallel] cp equal "
                   "chunks (config_validate checks it)", __FILE__, __LINE__);
    if (m->cp > 1 && (int64_t)m->B * m->T * 3 * m->C / m->grid->layout.tp > INT32_MAX)
        fail_abort("model_create: a rank's qkv passes the 2^31 elements MPI counts take at "
                   "[parallel] cp > 1; lower [train] micro_batch", __FILE__, __LINE__);
}

/* Local chunk h of a chunk-major tensor of `width` elements a token. */
static ops_tensor local_chunk(const Model *m, ops_tensor t, int rows, int h, int64_t width)
{
    int64_t n = (int64_t)rows * model_cp_chunk_len(m) * width;
    return ops_view(t, h * n, n);
}

/* ---- the whole sequence ------------------------------------------------ */

/* Copies between `ranked` (the cp group's local tensors one after
 * another, rank-major, as the all-gather leaves them and the
 * reduce-scatter takes them) and `natural` (rows x seq_len tokens), both
 * `width` elements a token. */
static void reorder(const Model *m, ops_tensor natural, ops_tensor ranked, int rows,
                    int64_t width, int to_natural)
{
    int64_t Tc = model_cp_chunk_len(m), T = m->seq_len, run = Tc * width;
    for (int r = 0; r < m->cp; r++)
        for (int h = 0; h < 2; h++) {
            int64_t c0 = global_chunk(m->cp, r, h) * run;
            ops_tensor block = ops_view(ranked, (int64_t)(2 * r + h) * rows * run, rows * run);
            if (!to_natural) {
                /* row b's chunk sits at b*T*width + c0: one strided gather */
                ops_copy_rows(block, ops_view(natural, c0, ((int64_t)rows - 1) * T * width + run),
                              rows, run, T * width);
                continue;
            }
            for (int b = 0; b < rows; b++)
                ops_copy(ops_view(natural, (int64_t)b * T * width + c0, run),
                         ops_view(block, b * run, run));
        }
}

/* Every rank's element count of one local tensor, for the collectives
 * (model_create stops if a rank's qkv passes the counts' int). */
static const int *cp_counts(Model *m, int64_t n)
{
    int *counts = m->scratch->cp_counts;
    for (int r = 0; r < m->cp; r++)
        counts[r] = (int)n;
    return counts;
}

/* The whole sequence's qkv (rows x seq_len tokens, natural order), from
 * this rank's chunk-major qkv and the rest of the cp group's. Collective
 * on cp. */
static ops_tensor gather_sequence(Model *m, ops_tensor qkv, int rows)
{
    ModelScratch *s = m->scratch;
    int64_t width = 3 * (int64_t)m->NHl * m->hs, n = (int64_t)rows * m->T * width;
    ops_tensor ranked = head_of(s->cp_gathered, m->cp * n);
    comm_allgather(m->grid, COMM_CP, head_of(qkv, n), ranked, cp_counts(m, n));
    ops_tensor full = head_of(s->cp_sequence, m->cp * n);
    reorder(m, full, ranked, rows, width, 1);
    return full;
}

/* ---- attention ---------------------------------------------------------- */

void model_cp_attention_fwd(Model *m, ops_tensor out, ops_tensor lse, ops_tensor qkv, int rows)
{
    if (m->cp == 1) {
        ops_attention_fwd(out, lse, qkv, rows, m->T, m->NHl, m->hs);
        return;
    }
    ops_tensor full = gather_sequence(m, qkv, rows);
    int64_t Cl = (int64_t)m->NHl * m->hs;
    for (int h = 0; h < 2; h++)
        ops_attention_rows_fwd(local_chunk(m, out, rows, h, Cl), local_chunk(m, lse, rows, h, m->NHl),
                               full, rows, m->seq_len, (int)model_cp_chunk_start(m, h),
                               model_cp_chunk_len(m), m->NHl, m->hs);
}

void model_cp_attention_bwd(Model *m, ops_tensor dqkv, ops_tensor dout, ops_tensor qkv,
                            ops_tensor out, ops_tensor lse, int rows)
{
    if (m->cp == 1) {
        ops_attention_bwd(dqkv, dout, qkv, out, lse, rows, m->T, m->NHl, m->hs);
        return;
    }
    ModelScratch *s = m->scratch;
    int64_t Cl = (int64_t)m->NHl * m->hs, width = 3 * Cl, n = (int64_t)rows * m->T * width;
    ops_tensor full = gather_sequence(m, qkv, rows);
    ops_tensor dfull = head_of(s->cp_gathered, m->cp * n); /* reordered: spent */
    ops_zero(dfull);
    for (int h = 0; h < 2; h++)
        ops_attention_rows_bwd(dfull, local_chunk(m, dout, rows, h, Cl), full,
                               local_chunk(m, out, rows, h, Cl), local_chunk(m, lse, rows, h, m->NHl),
                               rows, m->seq_len, (int)model_cp_chunk_start(m, h),
                               model_cp_chunk_len(m), m->NHl, m->hs);
    /* the kernels are done with the sequence's qkv */
    ops_tensor ranked = full;
    reorder(m, dfull, ranked, rows, width, 0);
    comm_reduce_scatter(m->grid, COMM_CP, ranked, head_of(dqkv, n), cp_counts(m, n));
}

/* ---- positions ---------------------------------------------------------- */

void model_cp_rope_fwd(const Model *m, ops_tensor x, int rows, int H, double theta)
{
    if (m->cp == 1) {
        ops_rope_fwd(x, rows, m->T, H, m->hs, theta);
        return;
    }
    for (int h = 0; h < 2; h++)
        ops_rope_fwd_at(local_chunk(m, x, rows, h, (int64_t)H * m->hs), rows, model_cp_chunk_len(m),
                        (int)model_cp_chunk_start(m, h), H, m->hs, theta);
}

void model_cp_rope_bwd(const Model *m, ops_tensor dx, int rows, int H, double theta)
{
    if (m->cp == 1) {
        ops_rope_bwd(dx, rows, m->T, H, m->hs, theta);
        return;
    }
    for (int h = 0; h < 2; h++)
        ops_rope_bwd_at(local_chunk(m, dx, rows, h, (int64_t)H * m->hs), rows, model_cp_chunk_len(m),
                        (int)model_cp_chunk_start(m, h), H, m->hs, theta);
}

/* The position table's rows of local chunk h. */
static ops_tensor table_rows(const Model *m, ops_tensor wpe, int h)
{
    int64_t Tc = model_cp_chunk_len(m);
    return ops_view(wpe, model_cp_chunk_start(m, h) * m->C, Tc * m->C);
}

void model_cp_position_fwd(const Model *m, ops_tensor x, ops_tensor wpe, int rows)
{
    for (int h = 0; h < model_cp_chunks(m); h++) {
        ops_tensor xs = m->cp == 1 ? x : local_chunk(m, x, rows, h, m->C);
        ops_tensor w = m->cp == 1 ? wpe : table_rows(m, wpe, h);
        ops_position_fwd(xs, w, rows, model_cp_chunk_len(m), m->C);
    }
}

void model_cp_position_bwd(const Model *m, ops_tensor dwpe, ops_tensor dx, int rows)
{
    for (int h = 0; h < model_cp_chunks(m); h++) {
        ops_tensor d = m->cp == 1 ? dx : local_chunk(m, dx, rows, h, m->C);
        ops_tensor dw = m->cp == 1 ? dwpe : table_rows(m, dwpe, h);
        ops_position_bwd(dw, d, rows, model_cp_chunk_len(m), m->C);
    }
}
