/*
 * arch_llama.c - the Llama architecture's descriptor (arch.h): its block's
 * parameters, forward and backward, sizes and costs; its HuggingFace
 * formats are hf_llama.c's.
 *
 * Split the Megatron way, as arch_gpt2.c splits GPT-2: q, k, v, gate and up
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
 * rank's slice of the tokens (model_local_rows); model_tp.c's helpers
 * gather and scatter around the GEMMs, as for GPT-2.
 */
#include "arch.h"

#include <stdio.h>
#include <string.h>

#include "arch_moe.h"
#include "comm.h"
#include "fail.h"
#include "hf_llama.h"
#include "model_impl.h"
#include "prof.h"
#include "reason.h"

/* ---- the config --------------------------------------------------------- */

/* Grouped-query attention and rotary embeddings constrain the heads; TP
 * splits key/value heads or replicates them (arch_sizes.h). */
static int check_keys(const Config *c, ArchKeyProblem *p)
{
    const ModelConfig *m = &c->model;
    int kv = arch_kv_heads(m), tp = c->parallel.tp;
    if (m->n_head % kv) {
        reason_set(p->why, sizeof p->why, "must divide n_head (%d): each key/value head serves "
                   "n_head / n_kv_head query heads", m->n_head);
        return arch_refuse(p, "model", "n_kv_head");
    }
    if ((m->n_embd / m->n_head) % 2) {
        reason_set(p->why, sizeof p->why, "the head size n_embd / n_head = %d is odd: rotary "
                   "embeddings rotate pairs of channels", m->n_embd / m->n_head);
        return arch_refuse(p, "model", "n_head");
    }
    if (kv % tp && tp % kv) {
        reason_set(p->why, sizeof p->why, "neither divides nor is divided by n_kv_head (%d): "
                   "key/value heads are split over TP ranks, or each replicated on "
                   "tp / n_kv_head ranks", kv);
        return arch_refuse(p, "parallel", "tp");
    }
    if (arch_ffn_dim(m) % tp) {
        reason_set(p->why, sizeof p->why, "%d is not divisible by tp (%d): the MLP is split "
                   "across TP ranks", arch_ffn_dim(m), tp);
        return arch_refuse(p, "model", "ffn_dim");
    }
    return arch_moe_check_keys(c, p);
}

/* ---- parameters --------------------------------------------------------- */

/* Key/value projections: rows split over TP like any column-parallel
 * weight when tp divides the heads; with fewer heads than ranks, each
 * rank holds its head's rows whole and only the first of the head's
 * replicas counts them in norms and writes them (arch.h). */
static void kv_rows(Param *p, const ModelConfig *m, const Layout *layout)
{
    int replicas = arch_kv_replicas(m, layout->tp);
    int64_t hs = m->n_embd / m->n_head;
    p->lrows = arch_kv_heads_local(m, layout->tp) * hs;
    p->row0 = p->lrows * (layout->tp_rank / replicas);
    if (layout->tp_rank % replicas) {
        p->counts_in_norm = 0;
        p->writes_ckpt = 0;
    }
}

/* A MoE layer's tensors in place of the MLP (the contract's names): the
 * router, this ep rank's El experts by their global index J (gate, up,
 * down each), then the shared expert and its sigmoid gate. Routed experts
 * and the router initialise as their dense counterparts (down writes
 * into the residual stream). */
static void build_moe(ParamSet *ps, int l, const ModelConfig *m, const Layout *layout)
{
    char name[48];
    int64_t C = m->n_embd, Fm = arch_moe_ffn_dim(m), Fs = arch_shared_ffn_dim(m);
    int ep = layout->ep > 0 ? layout->ep : 1, El = m->n_expert / ep;
#define P(r, c, nd, split, role)                                            \
    params_unit_param(ps, name, r, c, nd, split, role, layout)
    snprintf(name, sizeof name, "h.%d.moe.router.w", l);
    P(m->n_expert, C, 2, SPLIT_NONE, ROLE_WEIGHT);
    for (int J = layout->ep_rank * El; J < (layout->ep_rank + 1) * El; J++) {
        snprintf(name, sizeof name, "h.%d.moe.e.%d.gate.w", l, J);
        P(Fm, C, 2, SPLIT_ROWS, ROLE_WEIGHT)->expert = 1;
        snprintf(name, sizeof name, "h.%d.moe.e.%d.up.w", l, J);
        P(Fm, C, 2, SPLIT_ROWS, ROLE_WEIGHT)->expert = 1;
        snprintf(name, sizeof name, "h.%d.moe.e.%d.down.w", l, J);
        P(C, Fm, 2, SPLIT_COLS, ROLE_RESIDUAL)->expert = 1;
    }
    if (Fs > 0) {
        snprintf(name, sizeof name, "h.%d.moe.shared.gate.w", l);
        P(Fs, C, 2, SPLIT_ROWS, ROLE_WEIGHT);
        snprintf(name, sizeof name, "h.%d.moe.shared.up.w", l);
        P(Fs, C, 2, SPLIT_ROWS, ROLE_WEIGHT);
        snprintf(name, sizeof name, "h.%d.moe.shared.down.w", l);
        P(C, Fs, 2, SPLIT_COLS, ROLE_RESIDUAL);
        snprintf(name, sizeof name, "h.%d.moe.shared_gate.w", l);
        P(1, C, 2, SPLIT_NONE, ROLE_WEIGHT);
    }
#undef P
}

/* A Llama block: RMSNorm gains, q, k, v, o, gate, up, down (a MoE layer's
 * tensors in place of the last three); no biases. block_roles reads them
 * in this order. */
static void build_block(ParamSet *ps, int l, const ModelConfig *m, const Layout *layout)
{
    char name[48], unit[16];
    int64_t C = m->n_embd, F = arch_ffn_dim(m);
    int64_t KV = (int64_t)arch_kv_heads(m) * (C / m->n_head);
    snprintf(unit, sizeof unit, "h.%d", l);
    params_unit_begin(ps, unit);
#define P(suffix, r, c, nd, split, role)                                    \
    (snprintf(name, sizeof name, "h.%d.%s", l, suffix),                    \
     params_unit_param(ps, name, r, c, nd, split, role, layout))
    P("ln1.w", C, 1, 1, SPLIT_NONE, ROLE_NORM_GAIN);
    P("attn.q.w", C, C, 2, SPLIT_ROWS, ROLE_WEIGHT);
    kv_rows(P("attn.k.w", KV, C, 2, SPLIT_ROWS, ROLE_WEIGHT), m, layout);
    kv_rows(P("attn.v.w", KV, C, 2, SPLIT_ROWS, ROLE_WEIGHT), m, layout);
    P("attn.o.w", C, C, 2, SPLIT_COLS, ROLE_RESIDUAL);
    P("ln2.w", C, 1, 1, SPLIT_NONE, ROLE_NORM_GAIN);
    if (arch_layer_is_moe(m, l)) {
        build_moe(ps, l, m, layout);
        return;
    }
    P("mlp.gate.w", F, C, 2, SPLIT_ROWS, ROLE_WEIGHT);
    P("mlp.up.w", F, C, 2, SPLIT_ROWS, ROLE_WEIGHT);
    P("mlp.down.w", C, F, 2, SPLIT_COLS, ROLE_RESIDUAL);
#undef P
}

/* The order build_block adds them in; llama's q, o, gate and down sit in
 * BlockParams' qkvw, projw, fcw and mprojw. A MoE layer's: the router at
 * 6, 3 per local expert from 7, the shared expert's 4 last; its unit's
 * size says how many local experts this rank holds. */
static void block_roles(const Unit *unit, const ModelConfig *m, int layer, BlockParams *b)
{
    const int *u = unit->idx;
    *b = (BlockParams){.ln1w = u[0], .ln1b = -1, .qkvw = u[1], .qkvb = -1,
                       .kw = u[2], .vw = u[3], .projw = u[4], .projb = -1,
                       .ln2w = u[5], .ln2b = -1, .fcw = -1, .fcb = -1,
                       .upw = -1, .mprojw = -1, .mprojb = -1, .layer = layer};
    if (!arch_layer_is_moe(m, layer)) {
        b->fcw = u[6], b->upw = u[7], b->mprojw = u[8];
        return;
    }
    int shared = arch_shared_ffn_dim(m) > 0;
    b->moe = 1;
    b->router = u[6];
    b->expert0 = u[7];
    b->n_local_experts = (unit->n - 7 - 4 * shared) / 3;
    if (shared) {
        const int *s = u + unit->n - 4;
        b->shared_gate = s[0], b->shared_up = s[1], b->shared_down = s[2];
        b->shared_gatew = s[3];
    }
}

/* One routed expert: gate, up and down, Fm x C each. */
static int64_t expert_numel(const ModelConfig *m)
{
    return 3 * (int64_t)arch_moe_ffn_dim(m) * m->n_embd;
}

/* The MLP of block `layer`: the dense SwiGLU, or in a MoE layer the
 * router (E x C), every routed expert and the shared expert (3 Fs x C)
 * with its gate (1 x C). */
static int64_t mlp_numel(const ModelConfig *m, int layer)
{
    int64_t C = m->n_embd, Fs = arch_shared_ffn_dim(m);
    if (!arch_layer_is_moe(m, layer))
        return 3 * (int64_t)arch_ffn_dim(m) * C;
    return m->n_expert * (C + expert_numel(m)) + (Fs ? 3 * Fs * C + C : 0);
}

static int64_t block_numel(const ModelConfig *m, int layer)
{
    int64_t C = m->n_embd;
    int64_t KV = (int64_t)arch_kv_heads(m) * (C / m->n_head);
    return 2 * C + 2 * C * C + 2 * KV * C + mlp_numel(m, layer);
}

/* ---- the block ---------------------------------------------------------- */

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

static void block_forward(Model *m, const BlockParams *p, BlockActs *a, ops_tensor out,
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
    PROF(PROF_ATTENTION, model_cp_rope_fwd(m, q, rows, m->NHl, theta));
    PROF(PROF_ATTENTION, model_cp_rope_fwd(m, k, rows, m->NKVl, theta));
    PROF(PROF_ATTENTION, ops_gqa_expand(head_of(a->qkv, N * 3 * Cl), q, k, v, (int)N, m->NHl,
                                        m->NKVl, m->hs));
    PROF(PROF_ATTENTION, model_cp_attention_fwd(m, head_of(a->atty, N * Cl), a->lse,
                                                head_of(a->qkv, N * 3 * Cl), rows));
    ops_tensor y = model_row_parallel(m, a->atty, p->projw, -1, N, Cl);
    /* xmid = x + y and the MLP's norm of xmid: one pass on a GPU (ops.h) */
    PROF(PROF_LAYERNORM, ops_add_rmsnorm_fwd(head_of(a->xmid, n * C), head_of(a->ln2, n * C),
                                             head_of(a->ln2_rstd, n), head_of(a->x, n * C), y,
                                             W(m, p->ln2w), (int)n, (int)C, norm_eps(m)));
    ops_tensor ln2 = model_column_input(m, a->ln2, N);
    if (p->moe) {
        y = moe_forward(m, p, a, ln2, N);
        PROF(PROF_RESIDUAL, ops_add(head_of(out, n * C), head_of(a->xmid, n * C), y, n * C));
        return;
    }
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

/* The attention half of the backward, from dres at xmid: the kept
 * gradients' views from *at on. */
static void attention_backward(Model *m, const BlockParams *p, BlockActs *a, ops_tensor dres,
                               int rows, int64_t *at_in)
{
    ModelScratch *s = m->scratch;
    int64_t N = (int64_t)rows * m->T, C = m->C, Cl = (int64_t)m->NHl * m->hs, at = *at_in;
    int64_t KVl = (int64_t)m->NKVl * m->hs;
    double theta = m->cfg->model.rope_theta;
    ops_tensor d_ln = head_of(s->d_ln, N * C), dout;
    /* attention: xmid = x + atty . Wo^T; atty = attn(expand(rope(q), rope(k), v)) */
    ops_tensor d_atty = head_of(s->d_atty, N * Cl), d_qkv = head_of(s->d_qkv, N * 3 * Cl);
    ops_tensor dq, dk, dv;
    qkv_views(m, N, &dq, &dk, &dv);
    dout = model_row_parallel_grad(m, dres, N);
    model_linear_bwd(m, d_atty, p->projw, -1, dout, head_of(a->atty, N * Cl),
                     kept_next(a, &at, N * C), N, C, Cl);
    PROF(PROF_ATTENTION, model_cp_attention_bwd(m, d_qkv, d_atty, head_of(a->qkv, N * 3 * Cl),
                                                head_of(a->atty, N * Cl), a->lse, rows));
    PROF(PROF_ATTENTION, ops_gqa_reduce(dq, dk, dv, d_qkv, (int)N, m->NHl, m->NKVl, m->hs));
    PROF(PROF_ATTENTION, model_cp_rope_bwd(m, dq, rows, m->NHl, theta));
    PROF(PROF_ATTENTION, model_cp_rope_bwd(m, dk, rows, m->NKVl, theta));
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
    *at_in = at;
}

static void block_backward(Model *m, const BlockParams *p, BlockActs *a, ops_tensor dres,
                          int rows)
{
    ModelScratch *s = m->scratch;
    int64_t N = (int64_t)rows * m->T, C = m->C, at = 0, Fl = m->Fl;
    ops_tensor d_ln = head_of(s->d_ln, N * C);

    if (p->moe) { /* its weight gradients now, also under zb1 (model_impl.h) */
        ops_tensor dout = model_row_parallel_grad(m, dres, N);
        moe_backward(m, p, a, dout, model_column_input(m, a->ln2, N), d_ln, N);
        rms_backward(m, dres, a->xmid, p->ln2w, a->ln2_rstd, N);
        attention_backward(m, p, a, dres, rows, &at);
        return;
    }
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
    attention_backward(m, p, a, dres, rows, &at);
}

/* zb1's weight pass: a MoE layer's MLP part has none left (model_impl.h), so
 * its kept views start at the attention's, as its backward took them. */
static void block_weights(Model *m, const BlockParams *p, BlockActs *a, ops_tensor dres,
                         int rows)
{
    (void)dres;
    int64_t N = (int64_t)rows * m->T, C = m->C, Cl = (int64_t)m->NHl * m->hs, at = 0;
    int64_t Fl = m->Fl, KVl = (int64_t)m->NKVl * m->hs;
    if (!p->moe) {
        model_linear_weights(m, p->mprojw, -1, kept_next(a, &at, N * C),
                             head_of(a->fcg, N * Fl), N, C, Fl);
        /* the norms' outputs, gathered again under sequence parallelism
         * (one buffer: ln2's uses end before ln1's gather) */
        ops_tensor ln2 = model_column_input(m, a->ln2, N);
        model_linear_weights(m, p->fcw, -1, kept_next(a, &at, N * Fl), ln2, N, Fl, C);
        model_linear_weights(m, p->upw, -1, kept_next(a, &at, N * Fl), ln2, N, Fl, C);
    }
    model_linear_weights(m, p->projw, -1, kept_next(a, &at, N * C), head_of(a->atty, N * Cl),
                         N, C, Cl);
    ops_tensor ln1 = model_column_input(m, a->ln1, N);
    model_linear_weights(m, p->qkvw, -1, kept_next(a, &at, N * Cl), ln1, N, Cl, C);
    model_linear_weights(m, p->kw, -1, kept_next(a, &at, N * KVl), ln1, N, KVl, C);
    model_linear_weights(m, p->vw, -1, kept_next(a, &at, N * KVl), ln1, N, KVl, C);
}

/* ---- sizes and costs ---------------------------------------------------- */

/* fc holds gate|up, fcg SwiGLU's product; d_fc d(fcg)|dgate|dup; q, k
 * and v wait in qkv_raw before the expansion into qkv. */
static void widths(const ModelConfig *m, int tp, ArchWidths *w)
{
    int64_t Fl = arch_ffn_dim(m) / tp, hs = m->n_embd / m->n_head;
    int64_t NHl = m->n_head / tp, NKVl = arch_kv_heads_local(m, tp);
    *w = (ArchWidths){.fc = 2 * Fl, .fcg = Fl, .d_fc = 3 * Fl, .qkv_raw = (NHl + 2 * NKVl) * hs};
}

/* The views block_backward takes with kept_next: the output gradients of
 * down (C), gate and up (ffn/tp each), o (C), q (C/tp), k and v (kv
 * width/tp each). */
static int64_t kept_grad_width(const ModelConfig *m, int tp)
{
    int64_t C = m->n_embd;
    int64_t hs = C / m->n_head, Cl = (int64_t)(m->n_head / tp) * hs;
    int64_t KVl = (int64_t)arch_kv_heads_local(m, tp) * hs;
    return 2 * C + 2 * (int64_t)(arch_ffn_dim(m) / tp) + Cl + 2 * KVl;
}

/* Multiply-adds per token of block `layer`'s MLP: the dense SwiGLU (3 C F),
 * or in a MoE layer the router (C E), the top_k routed experts a token
 * goes through (3 C Fm each: active, not total) and the shared expert
 * (3 C Fs and its 1 x C gate). Tokens a capacity drops are still
 * counted: the model's work, as MFU counts it. */
static double mlp_macs(const ModelConfig *m, int layer)
{
    double C = m->n_embd, Fs = arch_shared_ffn_dim(m);
    if (!arch_layer_is_moe(m, layer))
        return 3.0 * C * arch_ffn_dim(m);
    return C * m->n_expert + m->top_k * 3.0 * C * arch_moe_ffn_dim(m)
           + (Fs ? 3.0 * C * Fs + C : 0.0);
}

/* q and o C^2 each, k and v C*KV each (grouped-query), the MLP's
 * (mlp_macs); attention as GPT-2's. */
static double layer_flops(const ModelConfig *m, int layer)
{
    double C = m->n_embd, T = m->seq_len;
    double KV = (double)arch_kv_heads(m) * (C / m->n_head);
    return 2.0 * (2.0 * C * C + 2.0 * C * KV + mlp_macs(m, layer)) + 4.0 * T * C;
}

/* Elements per token the MLP's elementwise work streams: SwiGLU reads
 * gate and up and writes its product (3F, split over TP). A MoE layer's
 * SwiGLU runs on top_k Fm + Fs; besides, on every TP rank alike (the
 * routed rows are whole), the permutation gathers top_k copies of the
 * row (read and written, 2kC), the combine reads the top_k expert outputs
 * and writes the sum ((k+1)C), and the router's softmax reads and writes
 * E fp32 logits and its top-k reads them again (counted as 3E elements of
 * 4 bytes: eps against the rest). */
static double mlp_bytes(const ModelConfig *m, int layer, double a, double tp)
{
    double C = m->n_embd;
    if (!arch_layer_is_moe(m, layer))
        return a * 3.0 * arch_ffn_dim(m) / tp;
    double k = m->top_k, swiglu = k * arch_moe_ffn_dim(m) + arch_shared_ffn_dim(m);
    return a * (3.0 * swiglu / tp + (3.0 * k + 1.0) * C) + 4.0 * 3.0 * m->n_expert;
}

/* As GPT-2's, and: the MLP's (mlp_bytes), rotary embeddings rewrite q and
 * k, the key/value expansion writes q|k|v (3C) from q, k, v: all split
 * over TP. */
static double layer_bytes(const ModelConfig *m, int layer, double a, double tp, double sp)
{
    double C = m->n_embd, T = m->seq_len, NH = m->n_head;
    double KV = (double)arch_kv_heads(m) * (C / NH);
    return a * (C * 10.0 / sp + (2.0 * (C + KV) + 4.0 * C + 2.0 * KV) / tp)
           + mlp_bytes(m, layer, a, tp) + 8.0 * NH / tp * T / 2.0;
}

/* A MoE layer's GEMMs after attention's: the router (E x C, whole on
 * every TP rank), the routed experts' gate and up (Fm/tp x C) and down
 * (C x Fm/tp), counted as top_k GEMMs of all the tokens each: the FLOPs
 * of the grouped GEMMs over N top_k rows (their smaller pieces may run a
 * little slower than this times), then the shared expert and its gate. */
static int moe_linears(const ModelConfig *m, int tp, ArchLinear *out)
{
    int C = m->n_embd, Fml = arch_moe_ffn_dim(m) / tp, Fsl = arch_shared_ffn_dim(m) / tp;
    int n = 0, k = m->top_k;
    out[n++] = (ArchLinear){m->n_expert, C, 1, 0};
    out[n++] = (ArchLinear){Fml, C, 2 * k, 0};
    out[n++] = (ArchLinear){C, Fml, k, 0};
    if (Fsl) {
        out[n++] = (ArchLinear){Fsl, C, 2, 0};
        out[n++] = (ArchLinear){C, Fsl, 1, 0};
        out[n++] = (ArchLinear){1, C, 1, 0};
    }
    return n;
}

/* q, k and v, the output projection, then the MLP's: gate and up, down,
 * or a MoE layer's (moe_linears). */
static int linears(const ModelConfig *m, int layer, int tp, ArchLinear *out)
{
    int C = m->n_embd, Cl = C / tp, Fl = arch_ffn_dim(m) / tp;
    int KVl = arch_kv_heads_local(m, tp) * (C / m->n_head);
    out[0] = (ArchLinear){Cl, C, 1, 0};
    out[1] = (ArchLinear){KVl, C, 2, 0};
    out[2] = (ArchLinear){C, Cl, 1, 0};
    if (arch_layer_is_moe(m, layer))
        return 3 + moe_linears(m, tp, out + 3);
    out[3] = (ArchLinear){Fl, C, 2, 0};
    out[4] = (ArchLinear){C, Fl, 1, 0};
    return 5;
}

const Arch arch_llama = {
    .name = "llama",
    .positions = 0, .norm_bias = 0, .rotary = 1, .gated_mlp = 1,
    .tied_head = 0, .writes_arch_keys = 1, .check_keys = check_keys,
    .build_block = build_block, .block_roles = block_roles, .block_numel = block_numel,
    .expert_numel = expert_numel,
    .forward = block_forward, .backward = block_backward, .weights = block_weights,
    .widths = widths, .kept_grad_width = kept_grad_width,
    .layer_flops = layer_flops, .layer_bytes = layer_bytes, .linears = linears,
    .hf_tables = hf_llama_tables,
    .llmc_names = NULL, .n_llmc_names = 0, /* llm.c writes GPT-2 only */
    .hf_config = hf_llama_config, .hf_check = hf_llama_check,
};
