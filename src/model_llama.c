/*
 * model_llama.c - the Llama block, forward and backward, on one TP shard.
 *
 * Split the Megatron way, as model.c splits GPT-2: q, k, v, gate and up
 * are column-parallel (each TP rank has whole query heads, whole or
 * replicated key/value heads, and a slice of the MLP width), o and down
 * are row-parallel (an all-reduce sums the shards). So the block costs the
 * same two all-reduces forward and two backward as GPT-2's.
 *
 * Attention runs through GPT-2's kernels: q and k are rotated in a q|k|v
 * scratch, then ops_gqa_expand lays them out with each key/value head
 * repeated for its query heads. The backward reduces the repeated heads'
 * gradients back (ops_gqa_reduce) and rotates them back.
 *
 * Key/value heads replicated on R = tp / n_kv_head ranks (arch.h): each
 * replica's dk, dv hold only its own query heads' share. Their share of
 * d_ln is summed over TP with everything else, so that part is already
 * right; the weight gradient needs the whole dk, dv, so they are summed
 * over the replica group first (model_kv_allreduce), which leaves every
 * replica with the same k and v gradients, kept in step like any
 * replicated parameter.
 *
 * Under sequence parallelism the norms and residual adds run on this
 * rank's slice of the tokens (model_local_rows); model.c's helpers gather
 * and scatter around the GEMMs, as for GPT-2.
 */
#include "model_llama.h"

#include "comm.h"
#include "model_impl.h"
#include "prof.h"

static float norm_eps(const Model *m) { return (float)m->cfg->model.norm_eps; }

static void rmsnorm(Model *m, ops_tensor out, ops_tensor rstd, ops_tensor x, int w, int64_t N)
{
    PROF(PROF_LAYERNORM, ops_rmsnorm_fwd(head_of(out, N * m->C), head_of(rstd, N),
                                         head_of(x, N * m->C), W(m, w), (int)N, m->C,
                                         norm_eps(m)));
}

/* q, k, v of N rows in the raw scratch: (N, NHl hs), (N, NKVl hs) twice. */
static void qkv_views(Model *m, int64_t N, ops_tensor *q, ops_tensor *k, ops_tensor *v)
{
    int64_t nq = N * m->NHl * m->hs, nkv = N * m->NKVl * m->hs;
    ops_tensor raw = m->scratch->qkv_raw;
    *q = ops_view(raw, 0, nq);
    *k = ops_view(raw, nq, nkv);
    *v = ops_view(raw, nq + nkv, nkv);
}

void llama_block_forward(Model *m, const BlockParams *p, BlockActs *a, ops_tensor out,
                         int rows)
{
    int64_t N = (int64_t)rows * m->T, C = m->C, Cl = (int64_t)m->NHl * m->hs;
    int64_t Fl = m->Fl, KVl = (int64_t)m->NKVl * m->hs;
    int64_t n = model_local_rows(m, N);
    double theta = m->cfg->model.rope_theta;
    ops_tensor q, k, v;
    qkv_views(m, N, &q, &k, &v);

    rmsnorm(m, a->ln1, a->ln1_rstd, a->x, p->ln1w, n);
    ops_tensor ln1 = model_column_input(m, a->ln1, N);
    PROF(PROF_MATMUL, ops_matmul_fwd(q, ln1, W(m, p->qkvw), OPS_NONE, (int)N, (int)Cl, (int)C));
    PROF(PROF_MATMUL, ops_matmul_fwd(k, ln1, W(m, p->kw), OPS_NONE, (int)N, (int)KVl, (int)C));
    PROF(PROF_MATMUL, ops_matmul_fwd(v, ln1, W(m, p->vw), OPS_NONE, (int)N, (int)KVl, (int)C));
    PROF(PROF_ATTENTION, ops_rope_fwd(q, rows, m->T, m->NHl, m->hs, theta));
    PROF(PROF_ATTENTION, ops_rope_fwd(k, rows, m->T, m->NKVl, m->hs, theta));
    PROF(PROF_ATTENTION, ops_gqa_expand(head_of(a->qkv, N * 3 * Cl), q, k, v, (int)N, m->NHl,
                                        m->NKVl, m->hs));
    PROF(PROF_ATTENTION, ops_attention_fwd(head_of(a->atty, N * Cl), a->lse,
                                           head_of(a->qkv, N * 3 * Cl), rows, m->T, m->NHl,
                                           m->hs));
    ops_tensor y = model_row_parallel(m, a->atty, p->projw, -1, N, Cl);
    PROF(PROF_RESIDUAL, ops_add(head_of(a->xmid, n * C), head_of(a->x, n * C), y, n * C));

    rmsnorm(m, a->ln2, a->ln2_rstd, a->xmid, p->ln2w, n);
    ops_tensor ln2 = model_column_input(m, a->ln2, N);
    ops_tensor gate = ops_view(a->fc, 0, N * Fl), up = ops_view(a->fc, N * Fl, N * Fl);
    PROF(PROF_MATMUL, ops_matmul_fwd(gate, ln2, W(m, p->fcw), OPS_NONE, (int)N, (int)Fl, (int)C));
    PROF(PROF_MATMUL, ops_matmul_fwd(up, ln2, W(m, p->upw), OPS_NONE, (int)N, (int)Fl, (int)C));
    PROF(PROF_GELU, ops_swiglu_fwd(head_of(a->fcg, N * Fl), gate, up, N * Fl));
    y = model_row_parallel(m, a->fcg, p->mprojw, -1, N, Fl);
    PROF(PROF_RESIDUAL, ops_add(head_of(out, n * C), head_of(a->xmid, n * C), y, n * C));
}

/* d_ln (N,C) = the sum over TP of every column-parallel input gradient;
 * then RMSNorm's backward adds into dres (the local rows). */
static void rms_backward(Model *m, ops_tensor dres, ops_tensor inp, int w, ops_tensor rstd,
                         int64_t N)
{
    int64_t n = model_local_rows(m, N);
    ops_tensor d_ln = model_norm_output_grad(m, N);
    PROF(PROF_LAYERNORM, ops_rmsnorm_bwd(dres, G(m, w), d_ln, head_of(inp, n * m->C), W(m, w),
                                         head_of(rstd, n), (int)n, m->C));
}

/* d_ln += dout . W (through tmp, since matmul_bwd overwrites dinp). */
static void add_input_grad(Model *m, ops_tensor dout, int w, int64_t N, int64_t out_local)
{
    ModelScratch *s = m->scratch;
    ops_tensor tmp = head_of(s->tmp, N * m->C);
    PROF(PROF_MATMUL, ops_matmul_bwd(tmp, OPS_NONE, OPS_NONE, dout, OPS_NONE, W(m, w), (int)N,
                                     (int)out_local, m->C));
    PROF(PROF_RESIDUAL, ops_accumulate(head_of(s->d_ln, N * m->C), tmp, N * m->C));
}

/* The weight half now, or (zb1) dout copied into kept for later. */
static void weight_grad_or_keep(Model *m, ops_tensor dout, ops_tensor inp, int w, int64_t N,
                                int64_t out_local, ops_tensor kept)
{
    if (kept.data)
        ops_copy(kept, dout);
    else
        model_linear_weights(m, w, -1, dout, inp, N, out_local, m->C);
}

void llama_block_backward(Model *m, const BlockParams *p, BlockActs *a, ops_tensor dres,
                          int rows)
{
    ModelScratch *s = m->scratch;
    int64_t N = (int64_t)rows * m->T, C = m->C, Cl = (int64_t)m->NHl * m->hs, at = 0;
    int64_t Fl = m->Fl, KVl = (int64_t)m->NKVl * m->hs;
    double theta = m->cfg->model.rope_theta;
    ops_tensor d_ln = head_of(s->d_ln, N * C);

    /* MLP: out = xmid + swiglu(gate, up) . Wd^T; gate, up = ln2 . Wg^T, ln2 . Wu^T */
    ops_tensor dh = ops_view(s->d_fc, 0, N * Fl);
    ops_tensor dgate = ops_view(s->d_fc, N * Fl, N * Fl), dup = ops_view(s->d_fc, 2 * N * Fl, N * Fl);
    ops_tensor gate = ops_view(a->fc, 0, N * Fl), up = ops_view(a->fc, N * Fl, N * Fl);
    ops_tensor dout = model_row_parallel_grad(m, dres, N);
    model_linear_bwd(m, dh, p->mprojw, -1, dout, head_of(a->fcg, N * Fl),
                     kept_next(a, &at, N * C), N, C, Fl);
    PROF(PROF_GELU, ops_swiglu_bwd(dgate, dup, dh, gate, up, N * Fl));
    /* under zb1 the weight pass gathers the norm's output itself */
    ops_tensor ln2 = a->kept.data ? OPS_NONE : model_column_input(m, a->ln2, N);
    model_linear_bwd(m, d_ln, p->fcw, -1, dgate, ln2, kept_next(a, &at, N * Fl), N, Fl, C);
    add_input_grad(m, dup, p->upw, N, Fl);
    weight_grad_or_keep(m, dup, ln2, p->upw, N, Fl, kept_next(a, &at, N * Fl));
    rms_backward(m, dres, a->xmid, p->ln2w, a->ln2_rstd, N);

    /* attention: xmid = x + atty . Wo^T; atty = attn(expand(rope(q), rope(k), v)) */
    ops_tensor d_atty = head_of(s->d_atty, N * Cl), d_qkv = head_of(s->d_qkv, N * 3 * Cl);
    ops_tensor dq, dk, dv;
    qkv_views(m, N, &dq, &dk, &dv);
    dout = model_row_parallel_grad(m, dres, N);
    model_linear_bwd(m, d_atty, p->projw, -1, dout, head_of(a->atty, N * Cl),
                     kept_next(a, &at, N * C), N, C, Cl);
    PROF(PROF_ATTENTION, ops_attention_bwd(d_qkv, d_atty, head_of(a->qkv, N * 3 * Cl),
                                           head_of(a->atty, N * Cl), a->lse, rows, m->T,
                                           m->NHl, m->hs));
    PROF(PROF_ATTENTION, ops_gqa_reduce(dq, dk, dv, d_qkv, (int)N, m->NHl, m->NKVl, m->hs));
    PROF(PROF_ATTENTION, ops_rope_bwd(dq, rows, m->T, m->NHl, m->hs, theta));
    PROF(PROF_ATTENTION, ops_rope_bwd(dk, rows, m->T, m->NKVl, m->hs, theta));
    ops_tensor ln1 = a->kept.data ? OPS_NONE : model_column_input(m, a->ln1, N);
    model_linear_bwd(m, d_ln, p->qkvw, -1, dq, ln1, kept_next(a, &at, N * Cl), N, Cl, C);
    add_input_grad(m, dk, p->kw, N, KVl);
    add_input_grad(m, dv, p->vw, N, KVl);
    if (m->kv_replicas > 1) {
        PROF(PROF_TP_COMM, comm_allreduce(m->grid, COMM_KV, dk, N * KVl, COMM_SUM));
        PROF(PROF_TP_COMM, comm_allreduce(m->grid, COMM_KV, dv, N * KVl, COMM_SUM));
    }
    weight_grad_or_keep(m, dk, ln1, p->kw, N, KVl, kept_next(a, &at, N * KVl));
    weight_grad_or_keep(m, dv, ln1, p->vw, N, KVl, kept_next(a, &at, N * KVl));
    rms_backward(m, dres, a->x, p->ln1w, a->ln1_rstd, N);
}

void llama_block_weights(Model *m, const BlockParams *p, BlockActs *a, ops_tensor dres,
                         int rows)
{
    (void)dres;
    int64_t N = (int64_t)rows * m->T, C = m->C, Cl = (int64_t)m->NHl * m->hs, at = 0;
    int64_t Fl = m->Fl, KVl = (int64_t)m->NKVl * m->hs;
    model_linear_weights(m, p->mprojw, -1, kept_next(a, &at, N * C), head_of(a->fcg, N * Fl),
                         N, C, Fl);
    /* the norms' outputs, gathered again under sequence parallelism (one
     * buffer: ln2's uses end before ln1's gather) */
    ops_tensor ln2 = model_column_input(m, a->ln2, N);
    model_linear_weights(m, p->fcw, -1, kept_next(a, &at, N * Fl), ln2, N, Fl, C);
    model_linear_weights(m, p->upw, -1, kept_next(a, &at, N * Fl), ln2, N, Fl, C);
    model_linear_weights(m, p->projw, -1, kept_next(a, &at, N * C), head_of(a->atty, N * Cl),
                         N, C, Cl);
    ops_tensor ln1 = model_column_input(m, a->ln1, N);
    model_linear_weights(m, p->qkvw, -1, kept_next(a, &at, N * Cl), ln1, N, Cl, C);
    model_linear_weights(m, p->kw, -1, kept_next(a, &at, N * KVl), ln1, N, KVl, C);
    model_linear_weights(m, p->vw, -1, kept_next(a, &at, N * KVl), ln1, N, KVl, C);
}
