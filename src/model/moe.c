/*
 * moe.c - a mixture-of-experts layer (issue 38); see model_impl.h. The contract
 * (doc/design.md's MoE section) gives the math; in short, for the N
 * tokens h of a microbatch:
 *
 *   logits = h . Wr^T (fp32) -> router: ids, weights (N, k), probs (N, E)
 *   -> permute (capacity) -> the offsets to the host (the layer's one wait)
 *   -> gather h into expert order -> [ep > 1: moe_ep_send] -> per local
 *   expert gate, up, SwiGLU, down (grouped GEMMs; partial over TP)
 *   -> [ep > 1: moe_ep_return] -> combine with the weights
 *   + sigmoid(h . Wsg^T) * SwiGLU_shared(h) -> summed over TP as the dense
 *   MLP's output is.
 *
 * The losses: per microbatch and layer the Switch aux loss and the z-loss
 * join the objective scaled by their coefficient x N / the step's tokens,
 * so their backward scales by coeff x N x grad_scale, grad_scale being
 * the forward's (kept in the layer's activations).
 *
 * TP: the router and the shared gate are replicated, so every TP rank
 * routes alike; the experts' widths are split, so the combine's weight
 * gradients and the shared gate's are partial sums, all-reduced over TP;
 * the replicated layers' share of dh is added on TP rank 0 only (d_ln is
 * summed over TP by the norm's backward).
 *
 * Activations: every field of a layer's MoeActs and of the stage's
 * scratch is sized in one table (act_sizes, scratch_sizes), which the
 * allocation takes and the planned bytes sum, so the two cannot part.
 */
#include "model_impl.h"

#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "arch_sizes.h"
#include "comm.h"
#include "fail.h"
#include "moe_ep.h"
#include "prof.h"

/* A layer's activations, kept from its forward for its backward. */
enum {
    A_LOGITS, A_PROBS, A_WEIGHTS, A_FRAC, A_LSE, A_LOSS,     /* fp32 */
    A_SLOGIT, A_SIG,                                        /* fp32, shared */
    A_IDS, A_ORDER, A_ROW_OF, A_ROUTE,                      /* int32 */
    A_XIN, A_GATE, A_UP, A_HACT, A_YS,                      /* compute dtype */
    A_SGATE, A_SUP, A_SSW, A_YSH,                           /* shared */
    A_COUNT
};

/* The stage's scratch, shared by its MoE layers. */
enum {
    S_XS, S_YIN, S_OUT, S_SOUT, S_DYS, S_DYIN, S_DHACT, S_DGATE, S_DUP, S_DXIN,
    S_TMPX, S_DXS, S_TMP, S_DYSH, S_DSSW, S_DSG, S_DSU,     /* compute dtype */
    S_DWEIGHTS, S_DLOGITS, S_MEAN_PROB, S_DSIG, S_DSLOGIT,  /* fp32 */
    S_IOTA,                                                 /* int32 */
    S_ACC,                                                  /* fp64 */
    S_COUNT
};

typedef struct MoeActs {
    ops_tensor t[A_COUNT];
    int32_t *host;          /* 2E + 3: offsets (E + 1), dropped, the load's
                               offsets before the capacity (E + 1) */
    int32_t *in_offsets;    /* El + 1: the local experts' rows (moe_ep_route) */
    MoeRoute *route;
    int64_t R, R_in;        /* rows sent, rows this rank's experts got */
    float grad_scale;       /* the forward's ModelPass.grad_scale */
} MoeActs;

typedef struct MoeState {
    ops_tensor t[S_COUNT];
    MoeActs *acts;          /* every MoeActs allocated, to free */
    int n_acts;
    int n_layers, n_expert; /* the statistics (model.h's MoeStats) */
    int *layer;
    int64_t *load, dropped, forwards;
} MoeState;

/* Elements and dtype of each field of a table (A_ or S_ indices). */
enum { MOE_MAX_FIELDS = 32 };
typedef struct {
    int64_t n[MOE_MAX_FIELDS];
    ops_dtype dt[MOE_MAX_FIELDS];
} MoeSizes;
_Static_assert((int)A_COUNT <= (int)MOE_MAX_FIELDS && (int)S_COUNT <= (int)MOE_MAX_FIELDS,
               "MoeSizes holds every field");

/* The shapes every size derives from. */
typedef struct {
    int64_t N, C, E, k, El, Fml, Fsl, Ns, Rl, Ri;
    int ep;
    ops_dtype act;
} MoeDims;

static MoeDims dims_of(const Config *cfg, int tp)
{
    const ModelConfig *mc = &cfg->model;
    MoeDims d;
    d.N = (int64_t)cfg->train.micro_batch * (mc->seq_len / cfg->parallel.cp);
    d.C = mc->n_embd;
    d.E = mc->n_expert;
    d.k = mc->top_k;
    d.ep = cfg->parallel.ep > 0 ? cfg->parallel.ep : 1;
    d.El = d.E / d.ep;
    d.Fml = arch_moe_ffn_dim(mc) / tp;
    d.Fsl = arch_shared_ffn_dim(mc) / tp;
    d.Ns = d.Fsl > 0 ? d.N : 0;
    d.Rl = d.N * d.k;                          /* this rank's (token, slot) rows */
    d.Ri = moe_ep_max_rows(mc, d.ep, d.N);     /* rows its experts may receive */
    d.act = model_dtype(cfg->train.precision);
    return d;
}

/* Fields fields[0..) (ending at -1) each of n elements of dt. */
static void set(MoeSizes *z, int64_t n, ops_dtype dt, const int *fields)
{
    for (; *fields >= 0; fields++) {
        z->n[*fields] = n;
        z->dt[*fields] = dt;
    }
}

#define SET(z, n, dt, ...) set(z, n, dt, (const int[]){__VA_ARGS__, -1})

static void act_sizes(const MoeDims *d, MoeSizes *z)
{
    SET(z, d->N * d->E, OPS_F32, A_LOGITS, A_PROBS);
    SET(z, d->N * d->k, OPS_F32, A_WEIGHTS);
    SET(z, d->E, OPS_F32, A_FRAC);
    SET(z, d->N, OPS_F32, A_LSE);
    SET(z, 2, OPS_F32, A_LOSS);
    SET(z, d->Ns, OPS_F32, A_SLOGIT, A_SIG);
    SET(z, d->N * d->k, OPS_I32, A_IDS, A_ORDER, A_ROW_OF);
    SET(z, 2 * d->E + 3, OPS_I32, A_ROUTE);
    SET(z, d->Ri * d->C, d->act, A_XIN);
    SET(z, d->Ri * d->Fml, d->act, A_GATE, A_UP, A_HACT);
    SET(z, d->Rl * d->C, d->act, A_YS);
    SET(z, d->Ns * d->Fsl, d->act, A_SGATE, A_SUP, A_SSW);
    SET(z, d->Ns * d->C, d->act, A_YSH);
}

/* At ep = 1 the rows stay where they are: the send and return buffers
 * are the activations themselves (moe_ep_send's copy-free case). */
static void scratch_sizes(const MoeDims *d, MoeSizes *z)
{
    int64_t moved = d->ep > 1;
    SET(z, moved * d->Rl * d->C, d->act, S_XS, S_DXS);
    SET(z, moved * d->Ri * d->C, d->act, S_YIN, S_DYIN);
    SET(z, d->N * d->C, d->act, S_OUT, S_TMP);
    SET(z, d->Ns * d->C, d->act, S_SOUT, S_DYSH);
    SET(z, d->Rl * d->C, d->act, S_DYS);
    SET(z, d->Ri * d->Fml, d->act, S_DHACT, S_DGATE, S_DUP);
    SET(z, d->Ri * d->C, d->act, S_DXIN, S_TMPX);
    SET(z, d->Ns * d->Fsl, d->act, S_DSSW, S_DSG, S_DSU);
    SET(z, d->N * d->k, OPS_F32, S_DWEIGHTS);
    SET(z, d->N * d->E, OPS_F32, S_DLOGITS);
    SET(z, d->E, OPS_F32, S_MEAN_PROB);
    SET(z, d->Ns, OPS_F32, S_DSIG, S_DSLOGIT);
    SET(z, d->Ns, OPS_I32, S_IOTA);
    SET(z, 2, OPS_F64, S_ACC);
}

static int64_t sizes_bytes(const MoeSizes *z, int count)
{
    int64_t b = 0;
    for (int i = 0; i < count; i++)
        b += z->n[i] * (int64_t)ops_dtype_size(z->dt[i]);
    return b;
}

/* ---- which slots hold MoE layers ---------------------------------------- */

/* Whether any chunk's layer j of `stage` is a MoE layer (a slot serves
 * every chunk, as model.c's slots do). */
static int slot_has_moe(const Config *cfg, int stage, int j)
{
    const ParallelConfig *p = &cfg->parallel;
    for (int c = 0; c < p->virtual_stages; c++) {
        int first, count;
        layout_chunk_layers(cfg->model.n_layer, p->pp, p->virtual_stages, stage, c, &first,
                            &count);
        if (j < count && arch_layer_is_moe(&cfg->model, first + j))
            return 1;
    }
    return 0;
}

/* Whether a MoE layer of `stage` recomputes (into the shared buffers). */
static int stage_recomputes_moe(const Config *cfg, int stage)
{
    const ParallelConfig *p = &cfg->parallel;
    for (int c = 0; c < p->virtual_stages; c++) {
        int first, count;
        layout_chunk_layers(cfg->model.n_layer, p->pp, p->virtual_stages, stage, c, &first,
                            &count);
        for (int l = first; l < first + count; l++)
            if (arch_layer_is_moe(&cfg->model, l) && model_layer_recomputes(&cfg->train, l))
                return 1;
    }
    return 0;
}

/* How many MoeActs the stage allocates: one per slot layer that keeps its
 * activations and may be MoE, one for the recompute buffers; and the
 * MoE layers it holds (0: no MoE state at all). */
static int planned_acts(const Config *cfg, int stage, int n_slots, int *layers)
{
    const ParallelConfig *p = &cfg->parallel;
    int first, chunk_len, n = 0;
    layout_chunk_layers(cfg->model.n_layer, p->pp, p->virtual_stages, stage, 0, &first,
                        &chunk_len);
    *layers = 0;
    for (int j = 0; j < chunk_len; j++) {
        if (slot_has_moe(cfg, stage, j) && !model_slot_input_only(cfg, stage, j))
            n += n_slots;
    }
    for (int c = 0; c < p->virtual_stages; c++) {
        int f, count;
        layout_chunk_layers(cfg->model.n_layer, p->pp, p->virtual_stages, stage, c, &f, &count);
        for (int l = f; l < f + count; l++)
            *layers += arch_layer_is_moe(&cfg->model, l);
    }
    return n + stage_recomputes_moe(cfg, stage);
}

int64_t moe_planned_activation_bytes(const Config *cfg, int tp, int stage, int n_slots)
{
    int layers, n = planned_acts(cfg, stage, n_slots, &layers);
    if (layers == 0)
        return 0;
    MoeDims d = dims_of(cfg, tp);
    MoeSizes za, zs;
    act_sizes(&d, &za);
    scratch_sizes(&d, &zs);
    return n * sizes_bytes(&za, A_COUNT) + sizes_bytes(&zs, S_COUNT);
}

/* ---- set-up ------------------------------------------------------------- */

static ops_tensor alloc_or_none(const Model *m, int64_t n, ops_dtype dt)
{
    return n ? ops_alloc(dt, m->grid->device, n) : OPS_NONE;
}

static MoeActs *acts_next(Model *m, const MoeSizes *z, const MoeDims *d)
{
    MoeActs *x = &m->moe->acts[m->moe->n_acts++];
    for (int i = 0; i < A_COUNT; i++)
        x->t[i] = alloc_or_none(m, z->n[i], z->dt[i]);
    x->host = TRI_CALLOC((size_t)(2 * d->E + 3), sizeof *x->host, "a MoE layer's offsets");
    x->in_offsets = TRI_CALLOC((size_t)(d->El + 1), sizeof *x->in_offsets,
                               "a MoE layer's offsets");
    x->route = moe_route_create(m);
    return x;
}

/* The statistics' layers: every MoE layer of the stage's blocks. */
static void stats_create(Model *m, MoeState *st)
{
    st->n_expert = m->cfg->model.n_expert;
    st->layer = TRI_CALLOC((size_t)m->n_local + 1, sizeof *st->layer, "MoE statistics");
    for (int l = 0; l < m->n_local; l++)
        if (m->blocks[l].moe)
            st->layer[st->n_layers++] = m->blocks[l].layer;
    st->load = TRI_CALLOC((size_t)st->n_layers * st->n_expert + 1, sizeof *st->load,
                          "MoE statistics");
}

/* The identity row map of the shared expert's combine (one slot per
 * token, row t), written once. */
static void fill_iota(ops_tensor iota)
{
    if (!iota.data)
        return;
    int32_t *h = TRI_CALLOC((size_t)iota.n, sizeof *h, "the shared expert's rows");
    for (int64_t t = 0; t < iota.n; t++)
        h[t] = (int32_t)t;
    ops_copy(iota, (ops_tensor){h, iota.n, OPS_I32, OPS_CPU});
    free(h);
}

void moe_create(Model *m)
{
    const Config *cfg = m->cfg;
    int stage = m->grid->layout.pp_stage, layers;
    int n = planned_acts(cfg, stage, m->n_slots, &layers);
    if (layers == 0)
        return;
    MoeState *st = TRI_CALLOC(1, sizeof *st, "MoE state");
    m->moe = st;
    MoeDims d = dims_of(cfg, m->grid->layout.tp);
    MoeSizes za, zs;
    act_sizes(&d, &za);
    scratch_sizes(&d, &zs);
    for (int i = 0; i < S_COUNT; i++)
        st->t[i] = alloc_or_none(m, zs.n[i], zs.dt[i]);
    ops_zero(st->t[S_ACC]);
    fill_iota(st->t[S_IOTA]);
    st->acts = TRI_CALLOC((size_t)n + 1, sizeof *st->acts, "MoE activations");
    MoeActs *recomputed = stage_recomputes_moe(cfg, stage) ? acts_next(m, &za, &d) : NULL;
    m->scratch->recomputed.moe = recomputed;
    for (int j = 0; j < m->chunk_len; j++) {
        if (!slot_has_moe(cfg, stage, j))
            continue;
        for (int s = 0; s < m->n_slots; s++)
            m->acts[s * m->chunk_len + j].moe =
                m->input_only[j] ? recomputed : acts_next(m, &za, &d);
    }
    stats_create(m, st);
}

void moe_destroy(Model *m)
{
    MoeState *st = m->moe;
    if (!st)
        return;
    for (int a = 0; a < st->n_acts; a++) {
        MoeActs *x = &st->acts[a];
        for (int i = 0; i < A_COUNT; i++)
            ops_free(&x->t[i]);
        free(x->host);
        free(x->in_offsets);
        moe_route_destroy(x->route);
    }
    for (int i = 0; i < S_COUNT; i++)
        ops_free(&st->t[i]);
    free(st->acts);
    free(st->layer);
    free(st->load);
    free(st);
    m->moe = NULL;
}

static int64_t tensor_bytes(ops_tensor t)
{
    return t.data ? t.n * (int64_t)ops_dtype_size(t.dtype) : 0;
}

int64_t moe_activation_bytes(const Model *m)
{
    const MoeState *st = m->moe;
    if (!st)
        return 0;
    int64_t b = 0;
    for (int a = 0; a < st->n_acts; a++)
        for (int i = 0; i < A_COUNT; i++)
            b += tensor_bytes(st->acts[a].t[i]);
    for (int i = 0; i < S_COUNT; i++)
        b += tensor_bytes(st->t[i]);
    return b;
}

/* ---- statistics --------------------------------------------------------- */

void model_moe_stats(const Model *m, MoeStats *out)
{
    memset(out, 0, sizeof *out);
    const MoeState *st = m->moe;
    if (!st)
        return;
    double acc[2];
    ops_copy((ops_tensor){acc, 2, OPS_F64, OPS_CPU}, st->t[S_ACC]);
    *out = (MoeStats){.n_layers = st->n_layers, .n_expert = st->n_expert, .layer = st->layer,
                      .load = st->load, .dropped = st->dropped, .aux_sum = acc[0],
                      .z_sum = acc[1], .forwards = st->forwards};
}

void model_moe_reset_stats(Model *m)
{
    MoeState *st = m->moe;
    if (!st)
        return;
    memset(st->load, 0, (size_t)st->n_layers * st->n_expert * sizeof *st->load);
    st->dropped = st->forwards = 0;
    ops_zero(st->t[S_ACC]);
}

/* One training pass's routing of layer p into the statistics. Counted by
 * the backward (a deviation of form from the contract's "training
 * forwards"): each training forward has exactly one backward, while
 * evaluation has none and recompute and zb1's weight pass rerun or
 * follow it, so the totals are those of the training forwards. */
static void count_stats(Model *m, const BlockParams *p, const MoeActs *x)
{
    MoeState *st = m->moe;
    int E = st->n_expert, li = 0;
    while (li < st->n_layers && st->layer[li] != p->layer)
        li++;
    if (li == st->n_layers)
        fail_abort("moe: a MoE layer missing from the statistics", __FILE__, __LINE__);
    const int32_t *load = x->host + E + 2;
    for (int e = 0; e < E; e++)
        st->load[(int64_t)li * E + e] += load[e + 1] - load[e];
    st->dropped += x->host[E + 1];
    st->forwards++;
    ops_sum_accumulate(ops_view(st->t[S_ACC], 0, 1), ops_view(x->t[A_LOSS], 0, 1), 1);
    if (m->cfg->model.moe_z_loss > 0)
        ops_sum_accumulate(ops_view(st->t[S_ACC], 1, 1), ops_view(x->t[A_LOSS], 1, 1), 1);
}

/* ---- forward ------------------------------------------------------------ */

/* Each local expert's gate (0), up (1) or down (2) weight, or gradient. */
static void expert_tensors(Model *m, const BlockParams *p, int which, int grads,
                           ops_tensor *out)
{
    for (int i = 0; i < p->n_local_experts; i++) {
        int idx = p->expert0 + 3 * i + which;
        out[i] = grads ? G(m, idx) : W(m, idx);
    }
}

/* Per expert, capacity pairs per microbatch: ceil(factor N k / E); 0 is
 * dropless. */
static int capacity_rows(const ModelConfig *mc, int64_t N)
{
    if (mc->moe_capacity <= 0)
        return 0;
    double cap = mc->moe_capacity * (double)N * mc->top_k / mc->n_expert;
    int64_t rows = (int64_t)cap;
    return (int)(rows < cap ? rows + 1 : rows);
}

/* The router, its losses, the permutation, and the offsets on the host. */
static void route_tokens(Model *m, const BlockParams *p, MoeActs *x, ops_tensor h, int64_t N)
{
    const ModelConfig *mc = &m->cfg->model;
    int E = mc->n_expert, k = mc->top_k, C = m->C, cap = capacity_rows(mc, N);
    ops_tensor logits = head_of(x->t[A_LOGITS], N * E), probs = head_of(x->t[A_PROBS], N * E);
    ops_tensor ids = head_of(x->t[A_IDS], N * k), route = x->t[A_ROUTE];
    ops_tensor offsets = head_of(route, E + 1), dropped = ops_view(route, E + 1, 1);
    PROF(PROF_MATMUL, ops_matmul_fwd(logits, h, W(m, p->router), OPS_NONE, (int)N, E, C));
    ops_moe_router_fwd(ids, head_of(x->t[A_WEIGHTS], N * k), probs, logits, (int)N, E, k,
                       (ops_moe_order)mc->moe_router);
    ops_moe_aux_fwd(ops_view(x->t[A_LOSS], 0, 1), x->t[A_FRAC], m->moe->t[S_MEAN_PROB], probs,
                    ids, (int)N, E, k);
    if (mc->moe_z_loss > 0)
        ops_moe_zloss_fwd(ops_view(x->t[A_LOSS], 1, 1), head_of(x->t[A_LSE], N), logits, (int)N,
                          E);
    ops_tensor order = head_of(x->t[A_ORDER], N * k), row_of = head_of(x->t[A_ROW_OF], N * k);
    if (cap > 0) /* the load before the capacity, for the statistics */
        ops_moe_permute(order, row_of, ops_view(route, E + 2, E + 1), dropped, ids, (int)N, E,
                        k, 0);
    ops_moe_permute(order, row_of, offsets, dropped, ids, (int)N, E, k, cap);
    ops_copy((ops_tensor){x->host, 2 * E + 3, OPS_I32, OPS_CPU}, route); /* the one wait */
    if (cap == 0)
        memcpy(x->host + E + 2, x->host, (size_t)(E + 1) * sizeof *x->host);
    x->R = x->host[E];
    x->R_in = moe_ep_route(m, x->route, x->host, x->in_offsets);
}

/* The routed experts: rows in, gate and up, SwiGLU, down, rows back. */
static void run_experts(Model *m, const BlockParams *p, MoeActs *x, ops_tensor h)
{
    MoeState *st = m->moe;
    int El = p->n_local_experts, C = m->C, k = m->cfg->model.top_k;
    int Fml = arch_moe_ffn_dim(&m->cfg->model) / m->grid->layout.tp;
    int ep = m->grid->layout.ep > 1;
    ops_tensor w[El];
    ops_tensor xs = ep ? st->t[S_XS] : x->t[A_XIN];
    ops_moe_gather(xs, h, x->t[A_ORDER], (int)x->R, C, k);
    if (ep)
        moe_ep_send(m, x->route, x->t[A_XIN], xs, C);
    expert_tensors(m, p, 0, 0, w);
    PROF(PROF_MATMUL, ops_moe_grouped_matmul_fwd(x->t[A_GATE], x->t[A_XIN], w, x->in_offsets,
                                                 El, Fml, C));
    expert_tensors(m, p, 1, 0, w);
    PROF(PROF_MATMUL, ops_moe_grouped_matmul_fwd(x->t[A_UP], x->t[A_XIN], w, x->in_offsets,
                                                 El, Fml, C));
    if (x->R_in > 0)
        PROF(PROF_GELU, ops_swiglu_fwd(head_of(x->t[A_HACT], x->R_in * Fml),
                                       head_of(x->t[A_GATE], x->R_in * Fml),
                                       head_of(x->t[A_UP], x->R_in * Fml), x->R_in * Fml));
    expert_tensors(m, p, 2, 0, w);
    ops_tensor yin = ep ? st->t[S_YIN] : x->t[A_YS];
    PROF(PROF_MATMUL, ops_moe_grouped_matmul_fwd(yin, x->t[A_HACT], w, x->in_offsets, El, C,
                                                 Fml));
    if (ep)
        moe_ep_return(m, x->route, x->t[A_YS], yin, C);
}

/* out (N, C) += sigmoid(h . Wsg^T) * SwiGLU_shared(h) (partial over TP). */
static void shared_forward(Model *m, const BlockParams *p, MoeActs *x, ops_tensor h,
                           ops_tensor out, int64_t N)
{
    MoeState *st = m->moe;
    int C = m->C, Fsl = arch_shared_ffn_dim(&m->cfg->model) / m->grid->layout.tp;
    PROF(PROF_MATMUL, ops_matmul_fwd(x->t[A_SGATE], h, W(m, p->shared_gate), OPS_NONE, (int)N,
                                     Fsl, C));
    PROF(PROF_MATMUL, ops_matmul_fwd(x->t[A_SUP], h, W(m, p->shared_up), OPS_NONE, (int)N, Fsl,
                                     C));
    PROF(PROF_GELU, ops_swiglu_fwd(x->t[A_SSW], x->t[A_SGATE], x->t[A_SUP], N * Fsl));
    PROF(PROF_MATMUL, ops_matmul_fwd(x->t[A_YSH], x->t[A_SSW], W(m, p->shared_down), OPS_NONE,
                                     (int)N, C, Fsl));
    PROF(PROF_MATMUL, ops_matmul_fwd(x->t[A_SLOGIT], h, W(m, p->shared_gatew), OPS_NONE,
                                     (int)N, 1, C));
    ops_moe_sigmoid_fwd(x->t[A_SIG], x->t[A_SLOGIT], (int)N);
    /* the gate as a combine of one slot per token, row t */
    ops_moe_combine_fwd(st->t[S_SOUT], x->t[A_YSH], x->t[A_SIG], st->t[S_IOTA], (int)N, C, 1);
    PROF(PROF_RESIDUAL, ops_accumulate(out, st->t[S_SOUT], N * C));
}

ops_tensor moe_forward(Model *m, const BlockParams *p, BlockActs *a, ops_tensor h, int64_t N)
{
    MoeActs *x = a->moe;
    const ModelConfig *mc = &m->cfg->model;
    if (!x || !p->moe)
        fail_abort("moe_forward: a MoE layer without MoE activations", __FILE__, __LINE__);
    x->grad_scale = m->pass.grad_scale;
    route_tokens(m, p, x, h, N);
    run_experts(m, p, x, h);
    ops_tensor out = head_of(m->moe->t[S_OUT], N * m->C);
    ops_moe_combine_fwd(out, x->t[A_YS], head_of(x->t[A_WEIGHTS], N * mc->top_k),
                        head_of(x->t[A_ROW_OF], N * mc->top_k), (int)N, m->C, mc->top_k);
    if (arch_shared_ffn_dim(&m->cfg->model) > 0)
        shared_forward(m, p, x, h, out, N);
    return model_sum_rows(m, out, N);
}

/* ---- backward ----------------------------------------------------------- */

/* dx (R_in, C) = the experts' input gradient from dy (R_in, C) at their
 * output; the experts' weight gradients accumulate. */
static void experts_backward(Model *m, const BlockParams *p, MoeActs *x, ops_tensor dy)
{
    MoeState *st = m->moe;
    int El = p->n_local_experts, C = m->C;
    int64_t Fml = arch_moe_ffn_dim(&m->cfg->model) / m->grid->layout.tp, RF = x->R_in * Fml;
    ops_tensor w[El], dw[El];
    expert_tensors(m, p, 2, 0, w);
    expert_tensors(m, p, 2, 1, dw);
    PROF(PROF_MATMUL, ops_moe_grouped_matmul_bwd(st->t[S_DHACT], dw, dy, x->t[A_HACT], w,
                                                 x->in_offsets, El, C, (int)Fml));
    if (RF > 0)
        PROF(PROF_GELU, ops_swiglu_bwd(head_of(st->t[S_DGATE], RF), head_of(st->t[S_DUP], RF),
                                       head_of(st->t[S_DHACT], RF), head_of(x->t[A_GATE], RF),
                                       head_of(x->t[A_UP], RF), RF));
    expert_tensors(m, p, 0, 0, w);
    expert_tensors(m, p, 0, 1, dw);
    PROF(PROF_MATMUL, ops_moe_grouped_matmul_bwd(st->t[S_DXIN], dw, st->t[S_DGATE],
                                                 x->t[A_XIN], w, x->in_offsets, El, (int)Fml,
                                                 C));
    expert_tensors(m, p, 1, 0, w);
    expert_tensors(m, p, 1, 1, dw);
    PROF(PROF_MATMUL, ops_moe_grouped_matmul_bwd(st->t[S_TMPX], dw, st->t[S_DUP], x->t[A_XIN],
                                                 w, x->in_offsets, El, (int)Fml, C));
    if (x->R_in > 0)
        PROF(PROF_RESIDUAL, ops_accumulate(st->t[S_DXIN], st->t[S_TMPX], x->R_in * C));
}

/* d_ln += dy . W for a replicated layer (the router, the shared gate),
 * on TP rank 0 only; every rank accumulates the same weight gradient. */
static void replicated_backward(Model *m, int w, ops_tensor dy, ops_tensor h, ops_tensor d_ln,
                                int64_t N, int out)
{
    int first = m->grid->layout.tp_rank == 0;
    ops_tensor tmp = head_of(m->moe->t[S_TMP], N * m->C);
    PROF(PROF_MATMUL, ops_matmul_bwd(first ? tmp : OPS_NONE, G(m, w), OPS_NONE, dy, h, W(m, w),
                                     (int)N, out, m->C));
    if (first)
        PROF(PROF_RESIDUAL, ops_accumulate(d_ln, tmp, N * m->C));
}

/* The shared expert and its gate: d_ln += their input gradients. */
static void shared_backward(Model *m, const BlockParams *p, MoeActs *x, ops_tensor dout,
                            ops_tensor h, ops_tensor d_ln, int64_t N)
{
    MoeState *st = m->moe;
    int C = m->C, Fsl = arch_shared_ffn_dim(&m->cfg->model) / m->grid->layout.tp;
    ops_tensor tmp = head_of(st->t[S_TMP], N * C);
    ops_moe_combine_bwd(st->t[S_DYSH], st->t[S_DSIG], dout, x->t[A_YSH], x->t[A_SIG],
                        st->t[S_IOTA], (int)N, C, 1);
    if (m->grid->layout.tp > 1) /* each rank's ysh is a partial sum */
        PROF(PROF_TP_COMM, comm_allreduce(m->grid, COMM_TP, st->t[S_DSIG], N, COMM_SUM));
    ops_moe_sigmoid_bwd(st->t[S_DSLOGIT], st->t[S_DSIG], x->t[A_SIG], (int)N);
    PROF(PROF_MATMUL, ops_matmul_bwd(st->t[S_DSSW], G(m, p->shared_down), OPS_NONE,
                                     st->t[S_DYSH], x->t[A_SSW], W(m, p->shared_down), (int)N,
                                     C, Fsl));
    PROF(PROF_GELU, ops_swiglu_bwd(st->t[S_DSG], st->t[S_DSU], st->t[S_DSSW], x->t[A_SGATE],
                                   x->t[A_SUP], N * Fsl));
    PROF(PROF_MATMUL, ops_matmul_bwd(tmp, G(m, p->shared_gate), OPS_NONE, st->t[S_DSG], h,
                                     W(m, p->shared_gate), (int)N, Fsl, C));
    PROF(PROF_RESIDUAL, ops_accumulate(d_ln, tmp, N * C));
    PROF(PROF_MATMUL, ops_matmul_bwd(tmp, G(m, p->shared_up), OPS_NONE, st->t[S_DSU], h,
                                     W(m, p->shared_up), (int)N, Fsl, C));
    PROF(PROF_RESIDUAL, ops_accumulate(d_ln, tmp, N * C));
    replicated_backward(m, p->shared_gatew, st->t[S_DSLOGIT], h, d_ln, N, 1);
}

/* The router's logits' gradient from the combine's weights and the two
 * losses, then the router's. */
static void router_backward(Model *m, const BlockParams *p, MoeActs *x, ops_tensor h,
                            ops_tensor d_ln, int64_t N)
{
    const ModelConfig *mc = &m->cfg->model;
    int E = mc->n_expert, k = mc->top_k;
    ops_tensor dlogits = head_of(m->moe->t[S_DLOGITS], N * E);
    ops_tensor probs = head_of(x->t[A_PROBS], N * E), logits = head_of(x->t[A_LOGITS], N * E);
    /* the losses' share of the objective: coeff x N / the step's tokens */
    float scale = (float)N * x->grad_scale;
    ops_zero(dlogits);
    ops_moe_router_bwd(dlogits, head_of(m->moe->t[S_DWEIGHTS], N * k),
                       head_of(x->t[A_IDS], N * k), head_of(x->t[A_WEIGHTS], N * k), probs,
                       (int)N, E, k, (ops_moe_order)mc->moe_router);
    if (mc->moe_aux_loss > 0)
        ops_moe_aux_bwd(dlogits, probs, x->t[A_FRAC], (int)N, E,
                        (float)mc->moe_aux_loss * scale);
    if (mc->moe_z_loss > 0)
        ops_moe_zloss_bwd(dlogits, logits, head_of(x->t[A_LSE], N), (int)N, E,
                          (float)mc->moe_z_loss * scale);
    replicated_backward(m, p->router, dlogits, h, d_ln, N, E);
}

void moe_backward(Model *m, const BlockParams *p, BlockActs *a, ops_tensor dout,
                  ops_tensor h, ops_tensor d_ln, int64_t N)
{
    MoeState *st = m->moe;
    MoeActs *x = a->moe;
    int C = m->C, k = m->cfg->model.top_k, ep = m->grid->layout.ep > 1;
    ops_tensor dweights = head_of(st->t[S_DWEIGHTS], N * k);
    ops_tensor row_of = head_of(x->t[A_ROW_OF], N * k);
    count_stats(m, p, x);
    ops_moe_combine_bwd(st->t[S_DYS], dweights, dout, x->t[A_YS],
                        head_of(x->t[A_WEIGHTS], N * k), row_of, (int)N, C, k);
    if (m->grid->layout.tp > 1) /* each rank's ys is a partial sum */
        PROF(PROF_TP_COMM, comm_allreduce(m->grid, COMM_TP, dweights, N * k, COMM_SUM));
    ops_tensor dyin = ep ? st->t[S_DYIN] : st->t[S_DYS];
    if (ep)
        moe_ep_send(m, x->route, dyin, st->t[S_DYS], C);
    experts_backward(m, p, x, dyin);
    ops_tensor dxs = ep ? st->t[S_DXS] : st->t[S_DXIN];
    if (ep)
        moe_ep_return(m, x->route, dxs, st->t[S_DXIN], C);
    ops_moe_gather_bwd(d_ln, dxs, row_of, (int)N, C, k);
    if (arch_shared_ffn_dim(&m->cfg->model) > 0)
        shared_backward(m, p, x, dout, h, d_ln, N);
    router_backward(m, p, x, h, d_ln, N);
}
