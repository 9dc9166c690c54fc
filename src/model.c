/*
 * model.c - GPT-2 forward and backward on one stage and one TP shard.
 *
 * The block follows GPT-2 (pre-LayerNorm, tanh GELU, MLP width 4C) split
 * the Megatron way: QKV and MLP-up are column-parallel (each TP rank has
 * whole heads and a slice of the hidden width), attention-out and MLP-down
 * are row-parallel (each rank multiplies its slice and an all-reduce sums
 * them). So a block costs two all-reduces forward and two backward, and
 * the residual stream is replicated across the TP group.
 *
 * Sequence parallelism ([parallel] sequence_parallel, Megatron's) slices
 * that replicated work instead: the residual stream, the norms and the
 * residual adds run on this rank's 1/tp of the B*T tokens. Each
 * all-reduce becomes a reduce-scatter (onto the slices) and the norm's
 * output is all-gathered before the next column-parallel GEMM; backward
 * mirrors it. The helpers below (model_row_parallel, model_column_input,
 * model_row_parallel_grad, model_norm_output_grad) hide which, so the
 * blocks of both architectures read the same either way.
 *
 * Shapes: B rows of T tokens, N = B*T, C channels; Cl = C/tp, NHl = NH/tp.
 */
#include "model.h"
#include "model_impl.h"
#include "model_llama.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "comm.h"
#include "fail.h"
#include "prof.h"

static void hook(Model *m, int unit, UnitEvent ev)
{
    if (m->hook && unit >= 0)
        m->hook(m->hook_ctx, unit, ev);
}

/* ---- set-up ------------------------------------------------------------ */

static ops_tensor act(Model *m, int64_t n) { return ops_alloc(m->act_dtype, m->grid->device, n); }
static ops_tensor f32(const Model *m, int64_t n) { return ops_alloc(OPS_F32, m->grid->device, n); }

/* Allocates a block's activations; with keep_input_only, all but x point
 * at the shared recompute buffers. */
static void acts_alloc(Model *m, BlockActs *a, int keep_input_only)
{
    int64_t N = (int64_t)m->B * m->T, C = m->C, Cl = C / m->grid->tp;
    int64_t n = model_local_rows(m, N);
    a->x = act(m, n * C);
    if (keep_input_only) {
        BlockActs *r = &m->scratch->recomputed;
        ops_tensor x = a->x;
        *a = *r;
        a->x = x;
        return;
    }
    a->ln1 = act(m, n * C);
    a->ln1_mean = m->llama ? OPS_NONE : f32(m, n);
    a->ln1_rstd = f32(m, n);
    a->qkv = act(m, N * 3 * Cl);
    a->lse = f32(m, N * m->NHl);
    a->atty = act(m, N * Cl);
    a->xmid = act(m, n * C);
    a->ln2 = act(m, n * C);
    a->ln2_mean = m->llama ? OPS_NONE : f32(m, n);
    a->ln2_rstd = f32(m, n);
    a->fc = act(m, N * (m->llama ? 2 : 1) * m->Fl);
    a->fcg = act(m, N * m->Fl);
}

static void acts_free(BlockActs *a, int keep_input_only)
{
    ops_free(&a->x);
    ops_free(&a->kept);
    if (keep_input_only)
        return;
    ops_tensor *all[] = {&a->ln1, &a->ln1_mean, &a->ln1_rstd, &a->qkv, &a->lse,
                         &a->atty, &a->xmid, &a->ln2, &a->ln2_mean, &a->ln2_rstd,
                         &a->fc, &a->fcg};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        ops_free(all[i]);
}

/* Logit rows held at once: at most about 16M floats, so the 50k-word head
 * never holds a full (N, V) matrix, and the N rows cut into chunks of even
 * size: 1,024 rows of GPT-2's head are 4 chunks of 256, not 3 of 333 and
 * one of 25, whose GEMMs ran at a fraction of the others' rate. */
int model_head_chunk_rows(int64_t N, int Vl)
{
    int64_t most = (16LL << 20) / (Vl > 0 ? Vl : 1);
    if (most < 1)
        most = 1;
    if (N <= most)
        return (int)(N > 0 ? N : 1);
    int64_t chunks = (N + most - 1) / most;
    return (int)((N + chunks - 1) / chunks);
}

static void scratch_alloc(Model *m, int any_recompute)
{
    ModelScratch *s = calloc(1, sizeof *s);
    if (!s)
        fail_abort("out of memory for model scratch", __FILE__, __LINE__);
    m->scratch = s;
    int64_t N = (int64_t)m->B * m->T, C = m->C, Cl = C / m->grid->tp;
    int64_t n = model_local_rows(m, N);
    if (any_recompute) {
        acts_alloc(m, &s->recomputed, 0);
        ops_free(&s->recomputed.x); /* a recomputed block reads its kept x */
    }
    s->tmp = act(m, N * C);
    s->gathered = m->sp ? act(m, N * C) : OPS_NONE;
    s->slice = m->sp ? act(m, n * C) : OPS_NONE;
    s->d_ln = act(m, N * C);
    s->d_fc = act(m, N * (m->llama ? 3 : 1) * m->Fl);
    if (m->llama)
        s->qkv_raw = act(m, N * (m->NHl + 2 * m->NKVl) * m->hs);
    s->d_atty = act(m, N * Cl);
    s->d_qkv = act(m, N * 3 * Cl);
    if (m->is_last) {
        s->lnf = act(m, N * C); /* gathered: the head reads every token */
        s->lnf_mean = m->llama ? OPS_NONE : f32(m, n);
        s->lnf_rstd = f32(m, n);
        s->d_lnf = act(m, N * C);
        s->chunk = model_head_chunk_rows(N, m->Vl);
        s->logits = f32(m, (int64_t)s->chunk * m->Vl);
        s->rowmax = f32(m, s->chunk);
        s->stats = f32(m, 2 * (int64_t)s->chunk);
        s->losses = f32(m, s->chunk);
    }
    m->loss_acc = ops_alloc(OPS_F64, m->grid->device, 1);
}

static int param_index(Model *m, const char *name)
{
    Param *p = params_find(&m->ps, name);
    return p ? (int)(p - m->ps.p) : -1;
}

static void find_params(Model *m)
{
    m->p_wte = param_index(m, "wte");
    m->p_wpe = param_index(m, "wpe");
    m->p_lnfw = param_index(m, "lnf.w");
    m->p_lnfb = param_index(m, "lnf.b");
    m->p_lm = m->cfg->model.tie_embeddings ? m->p_wte : param_index(m, "lm_head");
    m->unit_embed = m->unit_head = -1;
    m->unit_block0 = m->is_first ? 1 : 0;
    for (int u = 0; u < m->ps.n_units; u++) {
        if (strcmp(m->ps.units[u].name, "embed") == 0)
            m->unit_embed = u;
        if (strcmp(m->ps.units[u].name, "head") == 0)
            m->unit_head = u;
    }
    m->blocks = calloc((size_t)m->n_local, sizeof *m->blocks);
    if (!m->blocks && m->n_local)
        fail_abort("out of memory", __FILE__, __LINE__);
    for (int l = 0; l < m->n_local; l++) {
        const int *u = m->ps.units[m->unit_block0 + l].idx;
        BlockParams *b = &m->blocks[l];
        /* params_build adds a block's tensors in these orders */
        if (m->llama)
            *b = (BlockParams){.ln1w = u[0], .ln1b = -1, .qkvw = u[1], .qkvb = -1,
                               .kw = u[2], .vw = u[3], .projw = u[4], .projb = -1,
                               .ln2w = u[5], .ln2b = -1, .fcw = u[6], .fcb = -1,
                               .upw = u[7], .mprojw = u[8], .mprojb = -1};
        else
            *b = (BlockParams){u[0], u[1], u[2], u[3], u[4], u[5],
                               u[6], u[7], u[8], u[9], u[10], u[11], -1, -1, -1};
    }
}

ops_dtype model_dtype(Precision precision)
{
    switch (precision) {
    case PRECISION_FP32: return OPS_F32;
    case PRECISION_BF16: return OPS_BF16;
    case PRECISION_FP16: return OPS_F16;
    }
    return OPS_F32;
}

int model_layer_recomputes(const TrainConfig *t, int layer)
{
    switch (t->recompute) {
    case RECOMPUTE_NONE: return 0;
    case RECOMPUTE_FULL: return 1;
    case RECOMPUTE_EVERY: return layer % t->recompute_every == 0;
    }
    return 0;
}

int model_recomputed_layers(const TrainConfig *t, int first, int count)
{
    int n = 0;
    for (int l = first; l < first + count; l++)
        n += model_layer_recomputes(t, l);
    return n;
}

int model_block_layer(const Model *m, int l)
{
    int first, count;
    grid_chunk_layers(m->cfg->model.n_layer, m->grid->pp, m->n_chunks, m->grid->pp_stage,
                      l / m->chunk_len, &first, &count);
    return first + l % m->chunk_len;
}

int model_slot_input_only(const Config *cfg, int stage, int j)
{
    const ParallelConfig *p = &cfg->parallel;
    int keeps_input = 1;
    for (int c = 0; c < p->virtual_stages; c++) {
        int first, count;
        grid_chunk_layers(cfg->model.n_layer, p->pp, p->virtual_stages, stage, c, &first, &count);
        keeps_input &= model_layer_recomputes(&cfg->train, first + j);
    }
    return keeps_input;
}

int model_stage_recomputes(const Config *cfg, int stage, int *layers)
{
    const ParallelConfig *p = &cfg->parallel;
    int held = 0, recomputed = 0;
    for (int c = 0; c < p->virtual_stages; c++) {
        int first, count;
        grid_chunk_layers(cfg->model.n_layer, p->pp, p->virtual_stages, stage, c, &first, &count);
        held += count;
        recomputed += model_recomputed_layers(&cfg->train, first, count);
    }
    if (layers)
        *layers = held;
    return recomputed;
}

/* Which blocks recompute, and which layers of a slot keep only their
 * input. Returns whether any block recomputes. */
static int choose_recompute(Model *m, const Config *cfg)
{
    m->recompute = calloc((size_t)m->n_local + 1, sizeof *m->recompute);
    m->input_only = calloc((size_t)m->chunk_len + 1, sizeof *m->input_only);
    if (!m->recompute || !m->input_only)
        fail_abort("out of memory", __FILE__, __LINE__);
    int any = 0;
    for (int l = 0; l < m->n_local; l++) {
        m->recompute[l] = model_layer_recomputes(&cfg->train, model_block_layer(m, l));
        any |= m->recompute[l];
    }
    for (int j = 0; j < m->chunk_len; j++)
        m->input_only[j] = model_slot_input_only(cfg, m->grid->pp_stage, j);
    return any;
}

void model_create(Model *m, const Config *cfg, const Grid *g, int n_slots)
{
    memset(m, 0, sizeof *m);
    m->cfg = cfg;
    m->grid = g;
    m->B = cfg->train.micro_batch;
    m->T = cfg->model.seq_len;
    m->C = cfg->model.n_embd;
    m->NH = cfg->model.n_head;
    m->V = cfg->model.vocab_size;
    m->hs = m->C / m->NH;
    m->NHl = m->NH / g->tp;
    m->llama = cfg->model.arch == ARCH_LLAMA;
    m->NKVl = arch_kv_heads_local(&cfg->model, g->tp);
    m->Fl = arch_ffn_dim(&cfg->model) / g->tp;
    m->kv_replicas = arch_kv_replicas(&cfg->model, g->tp);
    m->sp = cfg->parallel.sequence_parallel && g->tp > 1;
    m->Vl = m->V / g->tp;
    m->v0 = m->Vl * g->tp_rank;
    m->is_first = g->pp_stage == 0;
    m->is_last = g->pp_stage == g->pp - 1;
    m->act_dtype = model_dtype(cfg->train.precision);
    m->defer_weights = cfg->parallel.schedule == SCHED_ZB1;
    m->n_chunks = cfg->parallel.virtual_stages;
    grid_chunk_layers(cfg->model.n_layer, g->pp, m->n_chunks, g->pp_stage, 0, &m->layer0,
                      &m->chunk_len);
    m->n_local = m->n_chunks * m->chunk_len; /* config_validate: chunks are equal */
    params_build(&m->ps, cfg, g);
    find_params(m);
    int any = choose_recompute(m, cfg);
    scratch_alloc(m, any);

    int64_t N = (int64_t)m->B * m->T, n = model_local_rows(m, N);
    m->n_slots = n_slots;
    m->acts = calloc((size_t)(n_slots * m->chunk_len), sizeof *m->acts);
    m->out = calloc((size_t)n_slots, sizeof *m->out);
    m->grad = calloc((size_t)n_slots, sizeof *m->grad);
    m->tokens = calloc((size_t)n_slots, sizeof *m->tokens);
    m->targets = calloc((size_t)n_slots, sizeof *m->targets);
    if (!m->acts || !m->out || !m->grad || !m->tokens || !m->targets)
        fail_abort("out of memory for activations", __FILE__, __LINE__);
    for (int s = 0; s < n_slots; s++) {
        for (int j = 0; j < m->chunk_len; j++) {
            BlockActs *a = &m->acts[s * m->chunk_len + j];
            acts_alloc(m, a, m->input_only[j]);
            if (m->defer_weights) /* recomputed layers too: B's output is not recomputable */
                a->kept = act(m, N * model_kept_grad_width(&cfg->model, g->tp));
        }
        m->out[s] = act(m, n * m->C);
        m->grad[s] = act(m, n * m->C);
        m->tokens[s] = m->is_first ? ops_alloc(OPS_I32, g->device, N) : OPS_NONE;
        m->targets[s] = m->is_last ? ops_alloc(OPS_I32, g->device, N) : OPS_NONE;
    }
}

void model_destroy(Model *m)
{
    for (int s = 0; s < m->n_slots; s++) {
        for (int j = 0; j < m->chunk_len; j++)
            acts_free(&m->acts[s * m->chunk_len + j], m->input_only[j]);
        ops_free(&m->out[s]);
        ops_free(&m->grad[s]);
        ops_free(&m->tokens[s]);
        ops_free(&m->targets[s]);
    }
    ModelScratch *s = m->scratch;
    BlockActs *r = &s->recomputed;
    if (r->ln1.data) {
        r->x = OPS_NONE;
        acts_free(r, 0);
    }
    ops_tensor *all[] = {&s->tmp, &s->gathered, &s->slice, &s->d_ln, &s->d_fc, &s->d_atty,
                         &s->d_qkv, &s->qkv_raw, &s->lnf, &s->lnf_mean, &s->lnf_rstd,
                         &s->d_lnf, &s->logits, &s->rowmax, &s->stats, &s->losses,
                         &m->loss_acc, &m->batch};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        ops_free(all[i]);
    free(s);
    free(m->acts);
    free(m->out);
    free(m->grad);
    free(m->tokens);
    free(m->targets);
    free(m->blocks);
    free(m->recompute);
    free(m->input_only);
    free(m->requests);
    free(m->slot_holder);
    free(m->slot_forwarded);
    params_free(&m->ps);
    memset(m, 0, sizeof *m);
}

/* ---- forward ----------------------------------------------------------- */

void model_tp_allreduce(Model *m, ops_tensor t, int64_t n)
{
    comm_allreduce(m->grid, COMM_TP, t, n, COMM_SUM);
}

/* The equal per-rank counts of N rows of C split over TP. */
static void slice_counts(const Model *m, int64_t N, int *counts)
{
    for (int r = 0; r < m->grid->tp; r++)
        counts[r] = (int)(N / m->grid->tp * m->C);
}

/* dst (N rows) = every TP rank's slice src (N/tp rows), in rank order. */
static void gather_rows(Model *m, ops_tensor dst, ops_tensor src, int64_t N)
{
    int counts[m->grid->tp];
    slice_counts(m, N, counts);
    PROF(PROF_TP_COMM, comm_allgather(m->grid, COMM_TP, head_of(src, counts[0]),
                                      head_of(dst, N * m->C), counts));
}

/* full (N rows of partial sums) summed over TP: in place, or this rank's
 * slice of the sum in s->slice under sequence parallelism. Returns the
 * local rows. */
static ops_tensor sum_rows(Model *m, ops_tensor full, int64_t N)
{
    if (!m->sp) {
        PROF(PROF_TP_COMM, model_tp_allreduce(m, full, N * m->C));
        return head_of(full, N * m->C);
    }
    int counts[m->grid->tp];
    slice_counts(m, N, counts);
    ops_tensor mine = head_of(m->scratch->slice, counts[0]);
    PROF(PROF_TP_COMM, comm_reduce_scatter(m->grid, COMM_TP, head_of(full, N * m->C), mine,
                                           counts));
    return mine;
}

/* x = wte[tokens] + wpe: each TP rank looks up the words of its
 * vocabulary shard (zeros elsewhere), and the sum over TP assembles them.
 * Under sequence parallelism the positions, which every rank would add
 * alike, go in on TP rank 0 before the sum, since a slice need not start
 * a sequence. */
static void embed_forward(Model *m, int slot, int rows)
{
    int64_t N = (int64_t)rows * m->T, C = m->C;
    ops_tensor x = head_of(m->acts[slot * m->chunk_len].x, model_local_rows(m, N) * C);
    ops_tensor e = m->sp ? head_of(m->scratch->tmp, N * C) : x;
    int positions = m->p_wpe >= 0; /* llama rotates q and k instead */
    PROF(PROF_EMBEDDING, ops_embedding_fwd(e, head_of(m->tokens[slot], N), W(m, m->p_wte), m->v0, m->Vl,
                      (int)N, (int)C));
    if (m->sp && positions && m->grid->tp_rank == 0)
        PROF(PROF_EMBEDDING, ops_position_fwd(e, W(m, m->p_wpe), rows, m->T, (int)C));
    if (m->sp) {
        ops_copy(x, sum_rows(m, e, N));
        return;
    }
    PROF(PROF_TP_COMM, model_tp_allreduce(m, x, N * C));
    if (positions)
        PROF(PROF_EMBEDDING, ops_position_fwd(x, W(m, m->p_wpe), rows, m->T, (int)C));
}

/* TP rank 0 adds the bias before the sum, so it counts once. */
ops_tensor model_row_parallel(Model *m, ops_tensor x, int w, int b, int64_t N,
                              int64_t in_local)
{
    ops_tensor y = head_of(m->scratch->tmp, N * m->C);
    ops_tensor bias = b >= 0 && m->grid->tp_rank == 0 ? W(m, b) : OPS_NONE;
    PROF(PROF_MATMUL, ops_matmul_fwd(y, head_of(x, N * in_local), W(m, w), bias,
                   (int)N, m->C, (int)in_local));
    return sum_rows(m, y, N);
}

void model_linear_bwd(Model *m, ops_tensor dinp, int w, int b, ops_tensor dout, ops_tensor inp,
                      ops_tensor kept, int64_t N, int64_t out, int64_t in)
{
    if (kept.data) {
        ops_copy(kept, head_of(dout, N * out));
        PROF(PROF_MATMUL, ops_matmul_bwd(dinp, OPS_NONE, OPS_NONE, dout, OPS_NONE, W(m, w),
                                         (int)N, (int)out, (int)in));
        return;
    }
    PROF(PROF_MATMUL, ops_matmul_bwd(dinp, G(m, w), b >= 0 ? G(m, b) : OPS_NONE, dout, inp,
                                     W(m, w), (int)N, (int)out, (int)in));
}

void model_linear_weights(Model *m, int w, int b, ops_tensor kept, ops_tensor inp, int64_t N,
                          int64_t out, int64_t in)
{
    PROF(PROF_MATMUL, ops_matmul_bwd(OPS_NONE, G(m, w), b >= 0 ? G(m, b) : OPS_NONE, kept, inp,
                                     OPS_NONE, (int)N, (int)out, (int)in));
}

/* All N rows of a tensor this rank holds the local rows of: itself, or
 * under sequence parallelism gathered into `into`. */
static ops_tensor all_rows(Model *m, ops_tensor local, ops_tensor into, int64_t N)
{
    if (!m->sp)
        return head_of(local, N * m->C);
    gather_rows(m, into, local, N);
    return head_of(into, N * m->C);
}

ops_tensor model_column_input(Model *m, ops_tensor ln, int64_t N)
{
    return all_rows(m, ln, m->scratch->gathered, N);
}

ops_tensor model_row_parallel_grad(Model *m, ops_tensor dres, int64_t N)
{
    return all_rows(m, dres, m->scratch->tmp, N);
}

ops_tensor model_norm_output_grad(Model *m, int64_t N)
{
    return sum_rows(m, m->scratch->d_ln, N);
}

/* N tokens through the GEMMs and attention; n (model_local_rows) through
 * the norms and residual adds. */
static void block_forward(Model *m, const BlockParams *p, BlockActs *a,
                          ops_tensor out, int rows)
{
    int64_t N = (int64_t)rows * m->T, C = m->C, Cl = C / m->grid->tp;
    int64_t n = model_local_rows(m, N);
    PROF(PROF_LAYERNORM, ops_layernorm_fwd(head_of(a->ln1, n * C), a->ln1_mean, a->ln1_rstd,
                      head_of(a->x, n * C), W(m, p->ln1w), W(m, p->ln1b), (int)n, (int)C));
    PROF(PROF_MATMUL, ops_matmul_fwd(head_of(a->qkv, N * 3 * Cl), model_column_input(m, a->ln1, N),
                   W(m, p->qkvw), W(m, p->qkvb), (int)N, (int)(3 * Cl), (int)C));
    PROF(PROF_ATTENTION, ops_attention_fwd(head_of(a->atty, N * Cl), a->lse, head_of(a->qkv, N * 3 * Cl),
                      rows, m->T, m->NHl, m->hs));
    ops_tensor y = model_row_parallel(m, a->atty, p->projw, p->projb, N, Cl);
    PROF(PROF_RESIDUAL, ops_add(head_of(a->xmid, n * C), head_of(a->x, n * C), y, n * C));
    PROF(PROF_LAYERNORM, ops_layernorm_fwd(head_of(a->ln2, n * C), a->ln2_mean, a->ln2_rstd,
                      head_of(a->xmid, n * C), W(m, p->ln2w), W(m, p->ln2b), (int)n, (int)C));
    PROF(PROF_MATMUL, ops_matmul_fwd(head_of(a->fc, N * 4 * Cl), model_column_input(m, a->ln2, N),
                   W(m, p->fcw), W(m, p->fcb), (int)N, (int)(4 * Cl), (int)C));
    PROF(PROF_GELU, ops_gelu_fwd(head_of(a->fcg, N * 4 * Cl), head_of(a->fc, N * 4 * Cl), N * 4 * Cl));
    y = model_row_parallel(m, a->fcg, p->mprojw, p->mprojb, N, 4 * Cl);
    PROF(PROF_RESIDUAL, ops_add(head_of(out, n * C), head_of(a->xmid, n * C), y, n * C));
}

/* Vocab-parallel: each phase's row statistics are combined over the TP
 * group before the next, by two small all-reduces (never the logits). */
static void xent_phases(Model *m, ops_tensor logits, ops_tensor targets, ops_tensor losses,
                        int nr, int grad)
{
    ModelScratch *s = m->scratch;
    int Vl = m->Vl;
    ops_tensor rowmax = head_of(s->rowmax, nr);
    ops_tensor sumexp = head_of(s->stats, nr), target = ops_view(s->stats, nr, nr);
    PROF(PROF_XENT, ops_xent_max(rowmax, logits, nr, Vl));
    PROF(PROF_TP_COMM, comm_allreduce(m->grid, COMM_TP, rowmax, nr, COMM_MAX));
    PROF(PROF_XENT, ops_xent_sumexp(sumexp, target, logits, rowmax, targets, m->v0, nr, Vl));
    PROF(PROF_TP_COMM, comm_allreduce(m->grid, COMM_TP, head_of(s->stats, 2 * (int64_t)nr),
                                      2 * (int64_t)nr, COMM_SUM));
    PROF(PROF_XENT, ops_xent_finish(losses, grad ? logits : OPS_NONE, logits, rowmax, sumexp,
                                    target, targets, m->v0, nr, Vl, m->grad_scale));
}

/* Softmax cross-entropy over rows [r0, r0+nr). With grad, the logits turn
 * into their gradient in place and flow straight into the head's
 * backward. One TP rank holds the whole vocabulary and fuses the phases
 * row by row; several run them in turn with reductions between. */
static void head_chunk(Model *m, int slot, int64_t r0, int nr, ForwardMode mode)
{
    ModelScratch *s = m->scratch;
    int C = m->C, Vl = m->Vl, grad = mode == FORWARD_TRAIN;
    ops_tensor lnf = ops_view(s->lnf, r0 * C, (int64_t)nr * C);
    ops_tensor logits = head_of(s->logits, (int64_t)nr * Vl);
    ops_tensor targets = ops_view(m->targets[slot], r0, nr);
    ops_tensor losses = head_of(s->losses, nr);

    PROF(PROF_HEAD_MATMUL, ops_matmul_fwd(logits, lnf, W(m, m->p_lm), OPS_NONE, nr, Vl, C));
    if (m->grid->tp == 1)
        PROF(PROF_XENT, ops_xent_fused(losses, grad ? logits : OPS_NONE, logits,
                                       head_of(s->rowmax, nr), head_of(s->stats, nr),
                                       ops_view(s->stats, nr, nr), targets, nr, Vl,
                                       m->grad_scale));
    else
        xent_phases(m, logits, targets, losses, nr, grad);
    PROF(PROF_XENT, ops_sum_accumulate(m->loss_acc, losses, nr));
    m->loss_count += nr;
    if (grad)
        PROF(PROF_HEAD_MATMUL,
             ops_matmul_bwd(ops_view(s->d_lnf, r0 * C, (int64_t)nr * C), G(m, m->p_lm),
                            OPS_NONE, logits, lnf, W(m, m->p_lm), nr, Vl, C));
}

/* The final norm of N rows of x into out: LayerNorm (gpt2) or RMSNorm. */
static void final_norm_fwd(Model *m, ops_tensor out, ops_tensor x, int64_t N)
{
    ModelScratch *s = m->scratch;
    if (m->llama)
        PROF(PROF_LAYERNORM, ops_rmsnorm_fwd(out, head_of(s->lnf_rstd, N), x, W(m, m->p_lnfw),
                                             (int)N, m->C, (float)m->cfg->model.norm_eps));
    else
        PROF(PROF_LAYERNORM, ops_layernorm_fwd(out, s->lnf_mean, s->lnf_rstd, x,
                                               W(m, m->p_lnfw), W(m, m->p_lnfb), (int)N, m->C));
}

/* The final norm runs on the local rows; under sequence parallelism its
 * output is gathered, since the vocabulary-parallel head needs every
 * token's. */
static void head_forward(Model *m, int slot, int rows, ForwardMode mode)
{
    ModelScratch *s = m->scratch;
    int64_t N = (int64_t)rows * m->T, C = m->C, n = model_local_rows(m, N);
    ops_tensor x = head_of(m->out[slot], n * C);
    final_norm_fwd(m, head_of(m->sp ? s->slice : s->lnf, n * C), x, n);
    if (m->sp)
        gather_rows(m, s->lnf, s->slice, N);
    for (int64_t r0 = 0; r0 < N; r0 += s->chunk) {
        int nr = (int)(N - r0 < s->chunk ? N - r0 : s->chunk);
        head_chunk(m, slot, r0, nr, mode);
    }
    if (mode != FORWARD_TRAIN)
        return;
    /* each TP rank's d_lnf holds its vocabulary shard's share */
    ops_tensor d_lnf = sum_rows(m, s->d_lnf, N);
    ops_tensor dx = head_of(m->grad[slot], n * C);
    ops_zero(dx);
    if (m->llama)
        PROF(PROF_LAYERNORM, ops_rmsnorm_bwd(dx, G(m, m->p_lnfw), d_lnf, x,
                                             W(m, m->p_lnfw), s->lnf_rstd, (int)n, (int)C));
    else
        PROF(PROF_LAYERNORM, ops_layernorm_bwd(dx, G(m, m->p_lnfw), G(m, m->p_lnfb),
                                               d_lnf, x, W(m, m->p_lnfw),
                                               s->lnf_mean, s->lnf_rstd, (int)n, (int)C));
}

/* The buffer layer j of a slot writes: the next layer's input, or the
 * chunk's output. */
static ops_tensor block_output(Model *m, int slot, int j)
{
    return j + 1 < m->chunk_len ? m->acts[slot * m->chunk_len + j + 1].x : m->out[slot];
}

void model_forward(Model *m, int chunk, int slot, int rows, ForwardMode mode)
{
    if (m->sp && (int64_t)rows * m->T % m->grid->tp)
        fail_abort("model_forward: sequence parallelism needs rows * T divisible by tp "
                   "(config_validate checks it)", __FILE__, __LINE__);
    m->rows = rows;
    if (m->is_first && chunk == 0) {
        hook(m, m->unit_embed, UNIT_BEFORE_FORWARD);
        embed_forward(m, slot, rows);
        hook(m, m->unit_embed, UNIT_AFTER_FORWARD);
    }
    for (int j = 0; j < m->chunk_len; j++) {
        int l = chunk * m->chunk_len + j, unit = m->unit_block0 + l;
        hook(m, unit, UNIT_BEFORE_FORWARD);
        (m->llama ? llama_block_forward : block_forward)(
            m, &m->blocks[l], &m->acts[slot * m->chunk_len + j], block_output(m, slot, j), rows);
        hook(m, unit, UNIT_AFTER_FORWARD);
    }
    if (m->is_last && chunk == m->n_chunks - 1 && mode != FORWARD_ONLY) {
        hook(m, m->unit_head, UNIT_BEFORE_FORWARD);
        if (mode == FORWARD_TRAIN)
            hook(m, m->unit_head, UNIT_BEFORE_BACKWARD);
        head_forward(m, slot, rows, mode);
        hook(m, m->unit_head, mode == FORWARD_TRAIN ? UNIT_AFTER_BACKWARD : UNIT_AFTER_FORWARD);
    }
}

/* ---- backward ---------------------------------------------------------- */

/* The gradient at a LayerNorm's output arrives as partial sums from the
 * column-parallel layer after it: sum over TP, then LayerNorm's backward
 * adds into the residual gradient dres. */
static void ln_backward(Model *m, ops_tensor dres, ops_tensor inp, int w, int b,
                        ops_tensor mean, ops_tensor rstd, int64_t N)
{
    int64_t n = model_local_rows(m, N);
    ops_tensor d_ln = model_norm_output_grad(m, N);
    PROF(PROF_LAYERNORM, ops_layernorm_bwd(dres, G(m, w), G(m, b), d_ln, head_of(inp, n * m->C),
                                           W(m, w), mean, rstd, (int)n, m->C));
}

/* dres (the local rows, C): gradient at the block output on entry, at its
 * input on exit. Under sequence parallelism the norms' outputs are
 * gathered again for the weight gradients rather than kept whole. Under
 * zb1 the weight halves wait in a->kept for block_weights (which gathers
 * the norms' outputs itself). */
static void block_backward(Model *m, const BlockParams *p, BlockActs *a,
                           ops_tensor dres, int rows)
{
    ModelScratch *s = m->scratch;
    int64_t N = (int64_t)rows * m->T, C = m->C, Cl = C / m->grid->tp, at = 0;
    ops_tensor d_fc = head_of(s->d_fc, N * 4 * Cl);
    ops_tensor d_ln = head_of(s->d_ln, N * C);

    /* MLP: out = xmid + fcg . Wp^T; fcg = gelu(fc); fc = ln2 . Wf^T */
    ops_tensor dout = model_row_parallel_grad(m, dres, N);
    model_linear_bwd(m, d_fc, p->mprojw, p->mprojb, dout, head_of(a->fcg, N * 4 * Cl),
                     kept_next(a, &at, N * C), N, C, 4 * Cl);
    PROF(PROF_GELU, ops_gelu_bwd(d_fc, head_of(a->fc, N * 4 * Cl), d_fc, N * 4 * Cl));
    ops_tensor ln2 = a->kept.data ? OPS_NONE : model_column_input(m, a->ln2, N);
    model_linear_bwd(m, d_ln, p->fcw, p->fcb, d_fc, ln2, kept_next(a, &at, N * 4 * Cl), N,
                     4 * Cl, C);
    ln_backward(m, dres, a->xmid, p->ln2w, p->ln2b, a->ln2_mean, a->ln2_rstd, N);

    /* attention: xmid = x + atty . Wo^T; atty = attn(qkv); qkv = ln1 . Wq^T */
    ops_tensor d_atty = head_of(s->d_atty, N * Cl), d_qkv = head_of(s->d_qkv, N * 3 * Cl);
    dout = model_row_parallel_grad(m, dres, N);
    model_linear_bwd(m, d_atty, p->projw, p->projb, dout, head_of(a->atty, N * Cl),
                     kept_next(a, &at, N * C), N, C, Cl);
    PROF(PROF_ATTENTION, ops_attention_bwd(d_qkv, d_atty, head_of(a->qkv, N * 3 * Cl),
                      head_of(a->atty, N * Cl), a->lse, rows, m->T, m->NHl, m->hs));
    ops_tensor ln1 = a->kept.data ? OPS_NONE : model_column_input(m, a->ln1, N);
    model_linear_bwd(m, d_ln, p->qkvw, p->qkvb, d_qkv, ln1, kept_next(a, &at, N * 3 * Cl), N,
                     3 * Cl, C);
    ln_backward(m, dres, a->x, p->ln1w, p->ln1b, a->ln1_mean, a->ln1_rstd, N);
}

/* zb1's weight pass over the block: the four GEMMs' weight halves, in
 * block_backward's order (so a->kept's views line up). dres is unused.
 * Under sequence parallelism the norms' outputs are gathered again:
 * collective on tp, as every TP rank runs the same weight passes. */
static void block_weights(Model *m, const BlockParams *p, BlockActs *a, ops_tensor dres,
                          int rows)
{
    (void)dres;
    int64_t N = (int64_t)rows * m->T, C = m->C, Cl = C / m->grid->tp, at = 0;
    model_linear_weights(m, p->mprojw, p->mprojb, kept_next(a, &at, N * C),
                         head_of(a->fcg, N * 4 * Cl), N, C, 4 * Cl);
    model_linear_weights(m, p->fcw, p->fcb, kept_next(a, &at, N * 4 * Cl),
                         model_column_input(m, a->ln2, N), N, 4 * Cl, C);
    model_linear_weights(m, p->projw, p->projb, kept_next(a, &at, N * C),
                         head_of(a->atty, N * Cl), N, C, Cl);
    model_linear_weights(m, p->qkvw, p->qkvb, kept_next(a, &at, N * 3 * Cl),
                         model_column_input(m, a->ln1, N), N, 3 * Cl, C);
}

/* Under sequence parallelism the gradient is gathered first: each TP rank
 * updates its vocabulary shard's rows for every token. */
static void embed_backward(Model *m, int slot, int rows)
{
    int64_t N = (int64_t)rows * m->T, C = m->C;
    ops_tensor dx = model_row_parallel_grad(m, m->grad[slot], N);
    PROF(PROF_EMBEDDING, ops_embedding_bwd(G(m, m->p_wte), head_of(m->tokens[slot], N), dx, m->v0, m->Vl,
                      (int)N, (int)C));
    if (m->p_wpe >= 0)
        PROF(PROF_EMBEDDING, ops_position_bwd(G(m, m->p_wpe), dx, rows, m->T, (int)C));
}

typedef void BlockPass(Model *m, const BlockParams *p, BlockActs *a, ops_tensor dres, int rows);

/* One backward pass over the chunk's blocks, last to first, each inside
 * its unit's hooks; then, with `embed` on chunk 0 of stage 0, the
 * embedding's backward. */
static void backward_pass(Model *m, int chunk, int slot, int rows, BlockPass *block, int embed)
{
    int64_t N = (int64_t)rows * m->T;
    ops_tensor dres = head_of(m->grad[slot], model_local_rows(m, N) * m->C);
    for (int j = m->chunk_len - 1; j >= 0; j--) {
        int l = chunk * m->chunk_len + j, unit = m->unit_block0 + l;
        BlockActs *a = &m->acts[slot * m->chunk_len + j];
        hook(m, unit, UNIT_BEFORE_BACKWARD);
        if (m->recompute[l]) /* rebuild what forward threw away; output unused */
            (m->llama ? llama_block_forward : block_forward)(m, &m->blocks[l], a,
                                                             m->scratch->tmp, rows);
        block(m, &m->blocks[l], a, dres, rows);
        hook(m, unit, UNIT_AFTER_BACKWARD);
    }
    if (m->is_first && chunk == 0 && embed) {
        hook(m, m->unit_embed, UNIT_BEFORE_BACKWARD);
        embed_backward(m, slot, rows);
        hook(m, m->unit_embed, UNIT_AFTER_BACKWARD);
    }
}

void model_backward(Model *m, int chunk, int slot, int rows)
{
    backward_pass(m, chunk, slot, rows, m->llama ? llama_block_backward : block_backward,
                  !m->defer_weights);
}

/* The embedding's backward reads only the gradient at the stage input,
 * which stays in m->grad[slot] until the slot's next forward. */
void model_backward_weights(Model *m, int chunk, int slot, int rows)
{
    if (!m->defer_weights)
        fail_abort("model_backward_weights without a split backward", __FILE__, __LINE__);
    backward_pass(m, chunk, slot, rows, m->llama ? llama_block_weights : block_weights, 1);
}

void model_reset_loss(Model *m)
{
    ops_zero(m->loss_acc);
    m->loss_count = 0;
}

double model_loss_sum(const Model *m)
{
    double sum = 0.0;
    ops_tensor host = {&sum, 1, OPS_F64, OPS_CPU};
    ops_copy(host, m->loss_acc);
    return sum;
}

/* ---- pipeline buffers, generation, accounting ------------------------- */

ops_tensor model_stage_input(Model *m, int slot)
{
    return m->chunk_len > 0 ? m->acts[slot * m->chunk_len].x : m->out[slot];
}

ops_tensor model_stage_output(Model *m, int slot) { return m->out[slot]; }
ops_tensor model_stage_grad(Model *m, int slot) { return m->grad[slot]; }

int64_t model_stage_elems(const Model *m, int rows)
{
    return model_local_rows(m, (int64_t)rows * m->T) * m->C;
}

void model_logits_at(Model *m, int slot, int row, int t, float *logits)
{
    ModelScratch *s = m->scratch;
    int C = m->C;
    int64_t at = ((int64_t)row * m->T + t) * C;
    /* under sequence parallelism the stage output holds a slice */
    ops_tensor out = all_rows(m, m->out[slot], s->tmp, (int64_t)m->rows * m->T);
    hook(m, m->unit_head, UNIT_BEFORE_FORWARD);
    ops_tensor ln = head_of(s->lnf, C);
    final_norm_fwd(m, ln, ops_view(out, at, C), 1);
    ops_tensor lg = head_of(s->logits, m->Vl);
    ops_matmul_fwd(lg, ln, W(m, m->p_lm), OPS_NONE, 1, m->Vl, C);
    ops_copy((ops_tensor){logits, m->Vl, OPS_F32, OPS_CPU}, lg);
    hook(m, m->unit_head, UNIT_AFTER_FORWARD);
}

static int64_t tensor_bytes(ops_tensor t)
{
    return t.data ? t.n * (int64_t)ops_dtype_size(t.dtype) : 0;
}

static int64_t acts_bytes(const BlockActs *a, int keep_input_only)
{
    if (keep_input_only)
        return tensor_bytes(a->x) + tensor_bytes(a->kept);
    const ops_tensor all[] = {a->x, a->ln1, a->ln1_mean, a->ln1_rstd, a->qkv, a->lse,
                              a->atty, a->xmid, a->ln2, a->ln2_mean, a->ln2_rstd,
                              a->fc, a->fcg, a->kept};
    int64_t b = 0;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        b += tensor_bytes(all[i]);
    return b;
}

int64_t model_activation_bytes(const Model *m)
{
    int64_t b = 0;
    for (int s = 0; s < m->n_slots; s++) {
        for (int j = 0; j < m->chunk_len; j++)
            b += acts_bytes(&m->acts[s * m->chunk_len + j], m->input_only[j]);
        b += tensor_bytes(m->out[s]) + tensor_bytes(m->grad[s]);
        b += tensor_bytes(m->tokens[s]) + tensor_bytes(m->targets[s]);
    }
    const ModelScratch *s = m->scratch;
    BlockActs r = s->recomputed;
    r.x = OPS_NONE;
    b += acts_bytes(&r, 0);
    const ops_tensor all[] = {s->tmp, s->gathered, s->slice, s->d_ln, s->d_fc, s->d_atty, s->d_qkv,
                              s->qkv_raw, s->lnf, s->lnf_mean, s->lnf_rstd, s->d_lnf, s->logits,
                              s->rowmax, s->stats, s->losses};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        b += tensor_bytes(all[i]);
    return b;
}

/* The views block_backward and llama_block_backward take with kept_next:
 * the output gradients of gpt2's MLP-down (C), MLP-up (4C/tp),
 * attention-out (C) and QKV (3C/tp); of llama's down (C), gate and up
 * (ffn/tp each), o (C), q (C/tp), k and v (kv width/tp each). */
int64_t model_kept_grad_width(const ModelConfig *mc, int tp)
{
    int64_t C = mc->n_embd;
    int64_t hs = C / mc->n_head, Cl = (int64_t)(mc->n_head / tp) * hs;
    if (mc->arch != ARCH_LLAMA)
        return 2 * C + 7 * Cl;
    int64_t KVl = (int64_t)arch_kv_heads_local(mc, tp) * hs;
    return 2 * C + 2 * (int64_t)(arch_ffn_dim(mc) / tp) + Cl + 2 * KVl;
}

/* One block's forward FLOPs per token, 2 per multiply-add. */
static double layer_flops_per_token(const ModelConfig *mc)
{
    double C = mc->n_embd, T = mc->seq_len;
    /* QKV 3C^2, out C^2, MLP 8C^2 multiply-adds; attention scores and
     * values T*C each (all T x T, as computed) */
    if (mc->arch != ARCH_LLAMA)
        return 24.0 * C * C + 4.0 * T * C;
    /* q and o C^2 each, k and v C*KV each (grouped-query), gate, up and
     * down C*F each (SwiGLU); attention as GPT-2's */
    double KV = (double)arch_kv_heads(mc) * (C / mc->n_head), F = arch_ffn_dim(mc);
    return 2.0 * (2.0 * C * C + 2.0 * C * KV + 3.0 * C * F) + 4.0 * T * C;
}

double model_layer_flops(const ModelConfig *mc, double tokens)
{
    return tokens * layer_flops_per_token(mc);
}

double model_forward_flops(const ModelConfig *mc, double tokens)
{
    double C = mc->n_embd, V = mc->vocab_size;
    /* the blocks, and the head's C*V multiply-adds per token */
    return tokens * (mc->n_layer * layer_flops_per_token(mc) + 2.0 * C * V);
}
