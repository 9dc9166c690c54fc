/*
 * model.c - the stage machinery, the same for every architecture: the
 * activation slots and scratch, the embedding, the chunk's blocks run
 * through the architecture's descriptor (arch.h: arch_gpt2.c,
 * arch_llama.c) inside the unit hooks, the head and the loss in chunks of
 * logit rows, the split backward, which layers recompute, and the model's
 * FLOPs.
 *
 * Nothing here names an architecture: where they differ it asks the
 * descriptor, for a block's passes and parameter roles, the widths of
 * what a block keeps, and two features, whether the norms are LayerNorms
 * (a bias and a kept mean) and whether there is a position table.
 *
 * Sequence parallelism ([parallel] sequence_parallel, Megatron's) slices
 * the replicated work: the residual stream, the norms and the residual
 * adds run on this rank's 1/tp of the B*T tokens; model_tp.c's helpers
 * carry the difference, so the blocks read the same either way.
 *
 * Shapes: B rows of T tokens, N = B*T, C channels; Cl = C/tp, NHl = NH/tp.
 * T is the tokens of a row this rank holds: seq_len, or seq_len / cp
 * under context parallelism, whose positions and attention model_cp.c
 * handles.
 */
#include "model.h"
#include "model_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "arch.h"
#include "comm.h"
#include "fail.h"
#include "params_stage.h"
#include "prof.h"

static void hook(Model *m, int unit, UnitEvent ev)
{
    if (m->hook && unit >= 0)
        m->hook(m->hook_ctx, unit, ev, m->pass.final);
}

/* ---- set-up ------------------------------------------------------------ */

/* Elements of every buffer a stage allocates, from the config and the
 * rank's place alone: the one statement of the sizes, which the
 * allocators below take and model_planned_activation_bytes sums for plan.
 * 0 means the buffer does not exist here. */
typedef struct {
    /* one block's activations; x, ln1, xmid and ln2 are `rows` x C each */
    int64_t rows;          /* local rows: N, or N/tp under sequence parallelism */
    int64_t mean, rstd;    /* fp32 norm statistics (mean: LayerNorm only) */
    int64_t qkv, lse, atty, fc, fcg;   /* lse in fp32 */
    int64_t kept;          /* zb1's kept output gradients */
    /* the stage's scratch */
    int64_t tmp, gathered, slice, d_ln, d_fc, qkv_raw, d_atty, d_qkv;
    int64_t cp_seq;        /* each of context parallelism's two
                              whole-sequence buffers (model_cp.c) */
    int64_t lnf, lnf_mean, lnf_rstd, d_lnf;      /* the head: last stage */
    int64_t chunk, logits;                       /* fp32 */
    /* per slot: the stage's input ids and targets (int32) */
    int64_t tokens, targets;
} ModelSizes;

static void model_sizes(const Config *cfg, int tp, int stage, int64_t head_budget,
                        ModelSizes *z)
{
    const ModelConfig *mc = &cfg->model;
    const Arch *arch = arch_of(mc);
    /* a rank holds seq_len / cp tokens of each row (model.h, model_cp.c) */
    int64_t N = (int64_t)cfg->train.micro_batch * (mc->seq_len / cfg->parallel.cp);
    int64_t C = mc->n_embd, Cl = C / tp;
    int sp = cfg->parallel.sequence_parallel && tp > 1;
    int first = stage == 0, last = stage == cfg->parallel.pp - 1;
    int64_t n = sp ? N / tp : N;
    ArchWidths w;
    arch->widths(mc, tp, &w);
    memset(z, 0, sizeof *z);
    z->rows = n;
    z->mean = arch->norm_bias ? n : 0;
    z->rstd = n;
    z->qkv = N * 3 * Cl;
    z->lse = N * (mc->n_head / tp);
    z->atty = N * Cl;
    z->fc = N * w.fc;
    z->fcg = N * w.fcg;
    z->kept = cfg->parallel.schedule == SCHED_ZB1 ? N * model_kept_grad_width(mc, tp) : 0;
    z->tmp = z->d_ln = N * C;
    z->gathered = sp ? N * C : 0;
    z->slice = sp ? n * C : 0;
    z->d_fc = N * w.d_fc;
    z->qkv_raw = N * w.qkv_raw;
    z->d_atty = N * Cl;
    z->d_qkv = N * 3 * Cl;
    z->cp_seq = model_cp_scratch_elems(cfg, tp);
    if (last) {
        z->lnf = z->d_lnf = N * C; /* gathered: the head reads every token */
        z->lnf_mean = z->mean;
        z->lnf_rstd = n;
        z->chunk = model_head_chunk_rows(N, mc->vocab_size / tp, head_budget);
        z->logits = z->chunk * (mc->vocab_size / tp);
    }
    z->tokens = first ? N : 0;
    z->targets = last ? N : 0;
}

/* A buffer of n elements of dtype on the rank's device, or none for 0. */
static ops_tensor buffer(const Model *m, ops_dtype dtype, int64_t n)
{
    return n ? ops_alloc(dtype, m->grid->device, n) : OPS_NONE;
}

static ops_tensor act(Model *m, int64_t n) { return buffer(m, m->act_dtype, n); }
static ops_tensor f32(const Model *m, int64_t n) { return buffer(m, OPS_F32, n); }

static void sizes_of(const Model *m, ModelSizes *z)
{
    model_sizes(m->cfg, m->grid->layout.tp, m->grid->layout.pp_stage, m->head_budget, z);
}

/* Allocates a block's activations (not the kept gradients: model_create
 * adds those to the slots' blocks); with keep_input_only, all but x
 * point at the shared recompute buffers. */
static void acts_alloc(Model *m, BlockActs *a, int keep_input_only)
{
    ModelSizes z;
    sizes_of(m, &z);
    int64_t rc = z.rows * m->C;
    a->x = act(m, rc);
    if (keep_input_only) {
        BlockActs *r = &m->scratch->recomputed;
        ops_tensor x = a->x;
        *a = *r;
        a->x = x;
        return;
    }
    a->ln1 = act(m, rc);
    a->ln1_mean = f32(m, z.mean);
    a->ln1_rstd = f32(m, z.rstd);
    a->qkv = act(m, z.qkv);
    a->lse = f32(m, z.lse);
    a->atty = act(m, z.atty);
    a->xmid = act(m, rc);
    a->ln2 = act(m, rc);
    a->ln2_mean = f32(m, z.mean);
    a->ln2_rstd = f32(m, z.rstd);
    a->fc = act(m, z.fc);
    a->fcg = act(m, z.fcg);
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

static void scratch_alloc(Model *m, int any_recompute)
{
    ModelScratch *s = TRI_CALLOC(1, sizeof *s, "model scratch");
    m->scratch = s;
    ModelSizes z;
    sizes_of(m, &z);
    if (any_recompute) {
        acts_alloc(m, &s->recomputed, 0);
        ops_free(&s->recomputed.x); /* a recomputed block reads its kept x */
    }
    s->tmp = act(m, z.tmp);
    s->gathered = act(m, z.gathered);
    s->slice = act(m, z.slice);
    s->d_ln = act(m, z.d_ln);
    s->d_fc = act(m, z.d_fc);
    s->qkv_raw = act(m, z.qkv_raw);
    s->d_atty = act(m, z.d_atty);
    s->d_qkv = act(m, z.d_qkv);
    s->cp_gathered = act(m, z.cp_seq);
    s->cp_sequence = act(m, z.cp_seq);
    s->cp_counts = TRI_CALLOC((size_t)m->cp, sizeof *s->cp_counts, "context parallelism's counts");
    s->lnf = act(m, z.lnf);
    s->lnf_mean = f32(m, z.lnf_mean);
    s->lnf_rstd = f32(m, z.lnf_rstd);
    s->d_lnf = act(m, z.d_lnf);
    s->chunk = (int)z.chunk;
    s->logits = f32(m, z.logits);
    s->rowmax = f32(m, z.chunk);
    s->stats = f32(m, 2 * z.chunk);
    s->losses = f32(m, z.chunk);
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
    m->blocks = TRI_CALLOC((size_t)m->n_local, sizeof *m->blocks, "the stage's blocks");
    for (int l = 0; l < m->n_local; l++)
        m->arch->block_roles(&m->ps.units[m->unit_block0 + l], &m->cfg->model,
                             model_block_layer(m, l), &m->blocks[l]);
}

int model_block_layer(const Model *m, int l)
{
    int first, count;
    layout_chunk_layers(m->cfg->model.n_layer, m->grid->layout.pp, m->n_chunks, m->grid->layout.pp_stage,
                      l / m->chunk_len, &first, &count);
    return first + l % m->chunk_len;
}

/* Which blocks recompute, and which layers of a slot keep only their
 * input. Returns whether any block recomputes. */
static int choose_recompute(Model *m, const Config *cfg)
{
    m->recompute = TRI_CALLOC((size_t)m->n_local + 1, sizeof *m->recompute, "recompute flags");
    m->input_only = TRI_CALLOC((size_t)m->chunk_len + 1, sizeof *m->input_only, "recompute flags");
    int any = 0;
    for (int l = 0; l < m->n_local; l++) {
        m->recompute[l] = model_layer_recomputes(&cfg->train, model_block_layer(m, l));
        any |= m->recompute[l];
    }
    for (int j = 0; j < m->chunk_len; j++)
        m->input_only[j] = model_slot_input_only(cfg, m->grid->layout.pp_stage, j);
    return any;
}

void model_create(Model *m, const Config *cfg, const Grid *g, int n_slots)
{
    memset(m, 0, sizeof *m);
    m->cfg = cfg;
    m->grid = g;
    m->B = cfg->train.micro_batch;
    m->seq_len = cfg->model.seq_len;
    m->cp = g->layout.cp;
    m->cp_rank = g->layout.cp_rank;
    m->T = m->seq_len / m->cp;
    m->C = cfg->model.n_embd;
    m->NH = cfg->model.n_head;
    m->V = cfg->model.vocab_size;
    m->hs = m->C / m->NH;
    m->NHl = m->NH / g->layout.tp;
    m->arch = arch_of(&cfg->model);
    m->NKVl = arch_kv_heads_local(&cfg->model, g->layout.tp);
    m->Fl = arch_ffn_dim(&cfg->model) / g->layout.tp;
    m->kv_replicas = arch_kv_replicas(&cfg->model, g->layout.tp);
    m->sp = cfg->parallel.sequence_parallel && g->layout.tp > 1;
    m->Vl = m->V / g->layout.tp;
    m->v0 = m->Vl * g->layout.tp_rank;
    m->is_first = g->layout.pp_stage == 0;
    m->is_last = g->layout.pp_stage == g->layout.pp - 1;
    m->act_dtype = model_dtype(cfg->train.precision);
    m->defer_weights = cfg->parallel.schedule == SCHED_ZB1;
    m->n_chunks = cfg->parallel.virtual_stages;
    layout_chunk_layers(cfg->model.n_layer, g->layout.pp, m->n_chunks, g->layout.pp_stage, 0, &m->layer0,
                      &m->chunk_len);
    m->n_local = m->n_chunks * m->chunk_len; /* config_validate: chunks are equal */
    model_cp_check(m);
    params_build(&m->ps, cfg, &g->layout);
    find_params(m);
    int any = choose_recompute(m, cfg);
    m->head_budget = model_head_logit_budget(ops_device_memory_bytes(g->device));
    scratch_alloc(m, any);

    ModelSizes z;
    sizes_of(m, &z);
    m->n_slots = n_slots;
    m->acts = TRI_CALLOC((size_t)(n_slots * m->chunk_len), sizeof *m->acts, "activations");
    m->out = TRI_CALLOC((size_t)n_slots, sizeof *m->out, "activations");
    m->grad = TRI_CALLOC((size_t)n_slots, sizeof *m->grad, "activations");
    m->tokens = TRI_CALLOC((size_t)n_slots, sizeof *m->tokens, "activations");
    m->targets = TRI_CALLOC((size_t)n_slots, sizeof *m->targets, "activations");
    for (int s = 0; s < n_slots; s++) {
        for (int j = 0; j < m->chunk_len; j++) {
            BlockActs *a = &m->acts[s * m->chunk_len + j];
            acts_alloc(m, a, m->input_only[j]);
            a->kept = act(m, z.kept); /* recomputed layers too: B's output is not recomputable */
        }
        m->out[s] = act(m, z.rows * m->C);
        m->grad[s] = act(m, z.rows * m->C);
        m->tokens[s] = buffer(m, OPS_I32, z.tokens);
        m->targets[s] = buffer(m, OPS_I32, z.targets);
    }
    moe_create(m);
    /* what plan predicts is what was allocated, buffer for buffer */
    if (model_activation_bytes(m) != model_planned_activation_bytes(cfg, g->layout.tp, g->layout.pp_stage,
                                                                    n_slots, m->head_budget))
        fail_abort("model_create: the activations allocated differ from "
                   "model_planned_activation_bytes", __FILE__, __LINE__);
}

void model_destroy(Model *m)
{
    moe_destroy(m);
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
                         &s->cp_gathered, &s->cp_sequence, &m->loss_acc};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        ops_free(all[i]);
    free(s->cp_counts);
    free(s);
    free(m->acts);
    free(m->out);
    free(m->grad);
    free(m->tokens);
    free(m->targets);
    free(m->blocks);
    free(m->recompute);
    free(m->input_only);
    params_free(&m->ps);
    memset(m, 0, sizeof *m);
}

/* ---- forward ----------------------------------------------------------- */

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
    if (m->sp && positions && m->grid->layout.tp_rank == 0)
        PROF(PROF_EMBEDDING, model_cp_position_fwd(m, e, W(m, m->p_wpe), rows));
    if (m->sp) {
        ops_copy(x, model_sum_rows(m, e, N));
        return;
    }
    PROF(PROF_TP_COMM, model_tp_allreduce(m, x, N * C));
    if (positions)
        PROF(PROF_EMBEDDING, model_cp_position_fwd(m, x, W(m, m->p_wpe), rows));
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
                                    target, targets, m->v0, nr, Vl, m->pass.grad_scale));
}

/* Softmax cross-entropy over rows [r0, r0+nr). With grad, the logits turn
 * into their gradient in place and flow straight into the head's
 * backward. One TP rank holds the whole vocabulary and fuses the phases
 * row by row; several run them in turn with reductions between. The
 * training step's one-shard head on a GPU in bf16 or fp16 (narrow,
 * ops_head_narrow) rounds dlogits to the compute dtype over the logits'
 * memory, and the head's backward reads them there: two GEMMs with no
 * rounding pass between. */
static void head_chunk(Model *m, int slot, int64_t r0, int nr, ForwardMode mode)
{
    ModelScratch *s = m->scratch;
    int C = m->C, Vl = m->Vl, grad = mode == FORWARD_TRAIN;
    ops_tensor lnf = ops_view(s->lnf, r0 * C, (int64_t)nr * C);
    ops_tensor logits = head_of(s->logits, (int64_t)nr * Vl);
    ops_tensor targets = ops_view(m->targets[slot], r0, nr);
    ops_tensor losses = head_of(s->losses, nr);
    int narrow = grad && m->grid->layout.tp == 1 &&
                 ops_head_narrow(m->grid->device, m->act_dtype);

    PROF(PROF_HEAD_MATMUL, ops_matmul_fwd(logits, lnf, W(m, m->p_lm), OPS_NONE, nr, Vl, C));
    if (narrow)
        PROF(PROF_XENT, ops_xent_fused_narrow(losses, logits, m->act_dtype,
                                              head_of(s->rowmax, nr), head_of(s->stats, nr),
                                              ops_view(s->stats, nr, nr), targets, nr, Vl,
                                              m->pass.grad_scale));
    else if (m->grid->layout.tp == 1)
        PROF(PROF_XENT, ops_xent_fused(losses, grad ? logits : OPS_NONE, logits,
                                       head_of(s->rowmax, nr), head_of(s->stats, nr),
                                       ops_view(s->stats, nr, nr), targets, nr, Vl,
                                       m->pass.grad_scale));
    else
        xent_phases(m, logits, targets, losses, nr, grad);
    PROF(PROF_XENT, ops_sum_accumulate(m->loss_acc, losses, nr));
    m->loss_count += nr;
    if (!grad)
        return;
    ops_tensor d_lnf = ops_view(s->d_lnf, r0 * C, (int64_t)nr * C);
    if (narrow)
        PROF(PROF_HEAD_MATMUL,
             ops_matmul_bwd_ld(d_lnf, G(m, m->p_lm), ops_head_dlogits(logits, m->act_dtype),
                               2 * (int64_t)Vl, lnf, W(m, m->p_lm), nr, Vl, C));
    else
        PROF(PROF_HEAD_MATMUL, ops_matmul_bwd(d_lnf, G(m, m->p_lm), OPS_NONE, logits, lnf,
                                              W(m, m->p_lm), nr, Vl, C));
}

/* The final norm of N rows of x into out: LayerNorm or RMSNorm, as the
 * architecture's blocks. */
static void final_norm_fwd(Model *m, ops_tensor out, ops_tensor x, int64_t N)
{
    ModelScratch *s = m->scratch;
    if (!m->arch->norm_bias)
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
        model_gather_rows(m, s->lnf, s->slice, N);
    for (int64_t r0 = 0; r0 < N; r0 += s->chunk) {
        int nr = (int)(N - r0 < s->chunk ? N - r0 : s->chunk);
        head_chunk(m, slot, r0, nr, mode);
    }
    if (mode != FORWARD_TRAIN)
        return;
    /* each TP rank's d_lnf holds its vocabulary shard's share */
    ops_tensor d_lnf = model_sum_rows(m, s->d_lnf, N);
    ops_tensor dx = head_of(m->grad[slot], n * C);
    ops_zero(dx);
    if (!m->arch->norm_bias)
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

void model_forward(Model *m, int chunk, int slot, int rows, ForwardMode mode, ModelPass pass)
{
    m->pass = pass;
    if (m->sp && (int64_t)rows * m->T % m->grid->layout.tp)
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
        m->arch->forward(m, &m->blocks[l], &m->acts[slot * m->chunk_len + j],
                         block_output(m, slot, j), rows);
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

/* Under sequence parallelism the gradient is gathered first: each TP rank
 * updates its vocabulary shard's rows for every token. */
static void embed_backward(Model *m, int slot, int rows)
{
    int64_t N = (int64_t)rows * m->T, C = m->C;
    ops_tensor dx = model_row_parallel_grad(m, m->grad[slot], N);
    PROF(PROF_EMBEDDING, ops_embedding_bwd(G(m, m->p_wte), head_of(m->tokens[slot], N), dx, m->v0, m->Vl,
                      (int)N, (int)C));
    if (m->p_wpe >= 0)
        PROF(PROF_EMBEDDING, model_cp_position_bwd(m, G(m, m->p_wpe), dx, rows));
}

/* One backward pass over the chunk's blocks, last to first, each inside
 * its unit's hooks; then, with `embed` on chunk 0 of stage 0, the
 * embedding's backward. */
static void backward_pass(Model *m, int chunk, int slot, int rows, ArchBlockPass *block,
                          int embed)
{
    int64_t N = (int64_t)rows * m->T;
    ops_tensor dres = head_of(m->grad[slot], model_local_rows(m, N) * m->C);
    for (int j = m->chunk_len - 1; j >= 0; j--) {
        int l = chunk * m->chunk_len + j, unit = m->unit_block0 + l;
        BlockActs *a = &m->acts[slot * m->chunk_len + j];
        hook(m, unit, UNIT_BEFORE_BACKWARD);
        if (m->recompute[l]) /* rebuild what forward threw away; output unused */
            m->arch->forward(m, &m->blocks[l], a, m->scratch->tmp, rows);
        block(m, &m->blocks[l], a, dres, rows);
        hook(m, unit, UNIT_AFTER_BACKWARD);
    }
    if (m->is_first && chunk == 0 && embed) {
        hook(m, m->unit_embed, UNIT_BEFORE_BACKWARD);
        embed_backward(m, slot, rows);
        hook(m, m->unit_embed, UNIT_AFTER_BACKWARD);
    }
}

void model_backward(Model *m, int chunk, int slot, int rows, ModelPass pass)
{
    m->pass = pass;
    backward_pass(m, chunk, slot, rows, m->arch->backward, !m->defer_weights);
}

/* The embedding's backward reads only the gradient at the stage input,
 * which stays in m->grad[slot] until the slot's next forward. */
void model_backward_weights(Model *m, int chunk, int slot, int rows, ModelPass pass)
{
    m->pass = pass;
    if (!m->defer_weights)
        fail_abort("model_backward_weights without a split backward", __FILE__, __LINE__);
    backward_pass(m, chunk, slot, rows, m->arch->weights, 1);
}

void model_set_unit_hook(Model *m, UnitHook fn, void *ctx)
{
    m->hook = fn;
    m->hook_ctx = ctx;
}

void model_sum_split_grads(Model *m)
{
    const Grid *g = m->grid;
    if (g->layout.pp > 1 && m->cfg->model.tie_embeddings && (m->is_first || m->is_last)) {
        Param *p = params_find(&m->ps, "wte");
        comm_allreduce(g, COMM_EMBED, p->og, p->og.n, COMM_SUM);
    }
    if (!m->sp)
        return;
    for (int i = 0; i < m->ps.n; i++) {
        Param *p = &m->ps.p[i];
        if (p->role == ROLE_NORM_GAIN || p->role == ROLE_NORM_BIAS)
            PROF(PROF_TP_COMM, comm_allreduce(g, COMM_TP, p->og, p->og.n, COMM_SUM));
    }
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
    ops_tensor out = model_all_rows(m, m->out[slot], s->tmp, (int64_t)m->rows * m->T);
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

int64_t model_planned_activation_bytes(const Config *cfg, int tp, int stage, int n_slots,
                                       int64_t head_budget)
{
    ModelSizes z;
    model_sizes(cfg, tp, stage, head_budget, &z);
    int64_t a = (int64_t)ops_dtype_size(model_dtype(cfg->train.precision)), C = cfg->model.n_embd;
    int64_t x = a * z.rows * C;
    int64_t block = 4 * x + a * (z.qkv + z.atty + z.fc + z.fcg)
                  + 4 * (2 * z.mean + 2 * z.rstd + z.lse);
    const ParallelConfig *p = &cfg->parallel;
    int first, chunk_len;
    layout_chunk_layers(cfg->model.n_layer, p->pp, p->virtual_stages, stage, 0, &first, &chunk_len);
    /* the layers of a slot that keep only their input: none or all of
     * them but under every:K, so plan's cost does not grow with n_layer */
    int64_t input_only = 0;
    if (cfg->train.recompute == RECOMPUTE_FULL)
        input_only = chunk_len;
    else if (cfg->train.recompute == RECOMPUTE_EVERY)
        for (int j = 0; j < chunk_len; j++)
            input_only += model_slot_input_only(cfg, stage, j);
    int64_t per_slot = 2 * x + 4 * (z.tokens + z.targets)
                     + input_only * x + (chunk_len - input_only) * block + chunk_len * a * z.kept;
    int64_t scratch = model_stage_recomputes(cfg, stage, NULL) > 0 ? block - x : 0;
    scratch += a * (z.tmp + z.gathered + z.slice + z.d_ln + z.d_fc + z.qkv_raw + z.d_atty
                    + z.d_qkv + 2 * z.cp_seq + z.lnf + z.d_lnf);
    scratch += 4 * (z.lnf_mean + z.lnf_rstd + z.logits + 4 * z.chunk);
    return n_slots * per_slot + scratch + moe_planned_activation_bytes(cfg, tp, stage, n_slots);
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
                              s->rowmax, s->stats, s->losses, s->cp_gathered,
                              s->cp_sequence};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        b += tensor_bytes(all[i]);
    return b + moe_activation_bytes(m);
}

int64_t model_kept_grad_width(const ModelConfig *mc, int tp)
{
    return arch_of(mc)->kept_grad_width(mc, tp);
}

double model_layer_flops(const ModelConfig *mc, int layer, double tokens)
{
    return tokens * arch_of(mc)->layer_flops(mc, layer);
}

double model_forward_flops(const ModelConfig *mc, double tokens)
{
    double C = mc->n_embd, V = mc->vocab_size, blocks = 0.0;
    /* each block (dense and MoE layers differ), and the head's C*V
     * multiply-adds per token */
    for (int l = 0; l < mc->n_layer; l++)
        blocks += arch_of(mc)->layer_flops(mc, l);
    return tokens * (blocks + 2.0 * C * V);
}
