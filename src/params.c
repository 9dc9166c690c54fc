/*
 * params.c - the parameter table of one rank, and its initialisation.
 *
 * The table is built from the config and the grid alone, in the same order
 * on every rank of a stage, so "parameter i" means the same tensor on every
 * DP and TP peer: ZeRO and checkpoints rely on that.
 */
#include "params.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "fail.h"
#include "rng.h"

static Param *add_param(ParamSet *ps, const char *name, int64_t rows,
                        int64_t cols, int ndim, TpSplit split, ParamRole role,
                        const Grid *g)
{
    if (ps->n == ps->cap) {
        ps->cap = ps->cap ? 2 * ps->cap : 64;
        ps->p = realloc(ps->p, (size_t)ps->cap * sizeof *ps->p);
        if (!ps->p)
            fail_abort("out of memory for the parameter table", __FILE__, __LINE__);
    }
    Param *p = &ps->p[ps->n++];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->ndim = ndim;
    p->rows = rows;
    p->cols = cols;
    p->split = split;
    p->role = role;
    p->lrows = rows;
    p->lcols = cols;
    if (split == SPLIT_ROWS) {
        p->lrows = rows / g->tp;
        p->row0 = p->lrows * g->tp_rank;
    } else if (split == SPLIT_COLS) {
        p->lcols = cols / g->tp;
        p->col0 = p->lcols * g->tp_rank;
    }
    p->decay = ndim == 2;
    int replicated_here = split == SPLIT_NONE && g->tp_rank != 0;
    p->counts_in_norm = !replicated_here;
    p->writes_ckpt = !replicated_here;
    p->w = p->g = p->master = p->m = p->v = p->og = OPS_NONE;
    return p;
}

static void unit_begin(ParamSet *ps, const char *name)
{
    ps->units = realloc(ps->units, (size_t)(ps->n_units + 1) * sizeof *ps->units);
    if (!ps->units)
        fail_abort("out of memory for the unit table", __FILE__, __LINE__);
    Unit *u = &ps->units[ps->n_units++];
    memset(u, 0, sizeof *u);
    snprintf(u->name, sizeof u->name, "%s", name);
}

static void unit_add(ParamSet *ps, int idx)
{
    Unit *u = &ps->units[ps->n_units - 1];
    if (u->n == PARAMS_MAX_UNIT)
        fail_abort("too many parameters in one unit", __FILE__, __LINE__);
    u->idx[u->n++] = idx;
}

/* Adds a parameter and puts it in the current unit. */
static Param *unit_param(ParamSet *ps, const char *name, int64_t rows,
                         int64_t cols, int ndim, TpSplit split, ParamRole role,
                         const Grid *g)
{
    Param *p = add_param(ps, name, rows, cols, ndim, split, role, g);
    unit_add(ps, ps->n - 1);
    return p;
}

static void build_block(ParamSet *ps, int l, int64_t C, const Grid *g)
{
    char name[48], unit[16];
    snprintf(unit, sizeof unit, "h.%d", l);
    unit_begin(ps, unit);
#define P(suffix, r, c, nd, split, role)                                    \
    (snprintf(name, sizeof name, "h.%d.%s", l, suffix),                    \
     unit_param(ps, name, r, c, nd, split, role, g))
    P("ln1.w", C, 1, 1, SPLIT_NONE, ROLE_NORM_GAIN);
    P("ln1.b", C, 1, 1, SPLIT_NONE, ROLE_NORM_BIAS);
    P("attn.qkv.w", 3 * C, C, 2, SPLIT_ROWS, ROLE_WEIGHT);
    P("attn.qkv.b", 3 * C, 1, 1, SPLIT_ROWS, ROLE_BIAS);
    P("attn.proj.w", C, C, 2, SPLIT_COLS, ROLE_RESIDUAL);
    P("attn.proj.b", C, 1, 1, SPLIT_NONE, ROLE_BIAS);
    P("ln2.w", C, 1, 1, SPLIT_NONE, ROLE_NORM_GAIN);
    P("ln2.b", C, 1, 1, SPLIT_NONE, ROLE_NORM_BIAS);
    P("mlp.fc.w", 4 * C, C, 2, SPLIT_ROWS, ROLE_WEIGHT);
    P("mlp.fc.b", 4 * C, 1, 1, SPLIT_ROWS, ROLE_BIAS);
    P("mlp.proj.w", C, 4 * C, 2, SPLIT_COLS, ROLE_RESIDUAL);
    P("mlp.proj.b", C, 1, 1, SPLIT_NONE, ROLE_BIAS);
#undef P
}

/* Key/value projections: rows split over TP like any column-parallel
 * weight when tp divides the heads; with fewer heads than ranks, each
 * rank holds its head's rows whole and only the first of the head's
 * replicas counts them in norms and writes them (arch.h). */
static void kv_rows(Param *p, const ModelConfig *m, const Grid *g)
{
    int replicas = arch_kv_replicas(m, g->tp);
    int64_t hs = m->n_embd / m->n_head;
    p->lrows = arch_kv_heads_local(m, g->tp) * hs;
    p->row0 = p->lrows * (g->tp_rank / replicas);
    if (g->tp_rank % replicas) {
        p->counts_in_norm = 0;
        p->writes_ckpt = 0;
    }
}

/* A Llama block: RMSNorm gains, q, k, v, o, gate, up, down; no biases.
 * model.c's find_params reads them in this order. */
static void build_llama_block(ParamSet *ps, int l, const ModelConfig *m, const Grid *g)
{
    char name[48], unit[16];
    int64_t C = m->n_embd, F = arch_ffn_dim(m);
    int64_t KV = (int64_t)arch_kv_heads(m) * (C / m->n_head);
    snprintf(unit, sizeof unit, "h.%d", l);
    unit_begin(ps, unit);
#define P(suffix, r, c, nd, split, role)                                    \
    (snprintf(name, sizeof name, "h.%d.%s", l, suffix),                    \
     unit_param(ps, name, r, c, nd, split, role, g))
    P("ln1.w", C, 1, 1, SPLIT_NONE, ROLE_NORM_GAIN);
    P("attn.q.w", C, C, 2, SPLIT_ROWS, ROLE_WEIGHT);
    kv_rows(P("attn.k.w", KV, C, 2, SPLIT_ROWS, ROLE_WEIGHT), m, g);
    kv_rows(P("attn.v.w", KV, C, 2, SPLIT_ROWS, ROLE_WEIGHT), m, g);
    P("attn.o.w", C, C, 2, SPLIT_COLS, ROLE_RESIDUAL);
    P("ln2.w", C, 1, 1, SPLIT_NONE, ROLE_NORM_GAIN);
    P("mlp.gate.w", F, C, 2, SPLIT_ROWS, ROLE_WEIGHT);
    P("mlp.up.w", F, C, 2, SPLIT_ROWS, ROLE_WEIGHT);
    P("mlp.down.w", C, F, 2, SPLIT_COLS, ROLE_RESIDUAL);
#undef P
}

void params_build(ParamSet *ps, const Config *cfg, const Grid *g)
{
    const ModelConfig *m = &cfg->model;
    int64_t C = m->n_embd, V = m->vocab_size;
    int v = cfg->parallel.virtual_stages;
    memset(ps, 0, sizeof *ps);
    int is_first = g->pp_stage == 0, is_last = g->pp_stage == g->pp - 1;
    int wte_index = -1, llama = m->arch == ARCH_LLAMA;
    if (is_first) {
        unit_begin(ps, "embed");
        unit_param(ps, "wte", V, C, 2, SPLIT_ROWS, ROLE_EMBEDDING, g);
        wte_index = ps->n - 1;
        if (!llama) /* llama rotates q and k instead */
            unit_param(ps, "wpe", m->seq_len, C, 2, SPLIT_NONE, ROLE_EMBEDDING, g);
    }
    /* the stage's chunks in order, each a run of consecutive layers */
    for (int chunk = 0; chunk < v; chunk++) {
        int first, count;
        grid_chunk_layers(m->n_layer, g->pp, v, g->pp_stage, chunk, &first, &count);
        for (int l = first; l < first + count; l++) {
            if (llama)
                build_llama_block(ps, l, m, g);
            else
                build_block(ps, l, C, g);
        }
    }
    if (is_last) {
        unit_begin(ps, "head");
        unit_param(ps, "lnf.w", C, 1, 1, SPLIT_NONE, ROLE_NORM_GAIN, g);
        if (!llama)
            unit_param(ps, "lnf.b", C, 1, 1, SPLIT_NONE, ROLE_NORM_BIAS, g);
        if (!m->tie_embeddings) {
            unit_param(ps, "lm_head", V, C, 2, SPLIT_ROWS, ROLE_EMBEDDING, g);
        } else if (wte_index >= 0) {
            unit_add(ps, wte_index); /* one stage: the head reads wte itself */
        } else {
            /* Megatron's answer to tied embeddings across stages: the last
             * stage keeps its own copy, initialised alike, and the two
             * copies' gradients are summed before every update. */
            Param *p = unit_param(ps, "wte", V, C, 2, SPLIT_ROWS, ROLE_EMBEDDING, g);
            p->is_copy = 1;
            p->counts_in_norm = 0;
            p->writes_ckpt = 0;
        }
    }
}

void params_free(ParamSet *ps)
{
    free(ps->p);
    free(ps->units);
    memset(ps, 0, sizeof *ps);
}

Param *params_find(ParamSet *ps, const char *name)
{
    for (int i = 0; i < ps->n; i++)
        if (strcmp(ps->p[i].name, name) == 0)
            return &ps->p[i];
    return NULL;
}

int64_t params_local_numel(const Param *p) { return p->lrows * p->lcols; }

/* fan_in and fan_out of a linear weight stored (out, in). */
static void fans(const Param *p, double *fan_in, double *fan_out)
{
    *fan_out = (double)p->rows;
    *fan_in = (double)p->cols;
}

double params_init_scale(const Param *p, const Config *cfg, int *uniform)
{
    const ModelConfig *m = &cfg->model;
    double std = m->init_std, fan_in, fan_out;
    *uniform = 0;
    fans(p, &fan_in, &fan_out);
    double fan = m->init_fan == FAN_IN ? fan_in : fan_out;
    if (p->role != ROLE_WEIGHT && p->role != ROLE_RESIDUAL && p->role != ROLE_EMBEDDING)
        return 0.0;
    if (m->init == INIT_ZEROS)
        return 0.0;
    /* Embeddings are lookup tables, not linear maps: fans mean nothing for
     * them, so every scheme but zeros draws them from N(0, init_std). */
    if (p->role == ROLE_EMBEDDING)
        return std;
    switch (m->init) {
    case INIT_GPT2:
        /* GPT-2 scales the projections into the residual stream by
         * 1/sqrt(2 n_layer): each block adds two of them. */
        return p->role == ROLE_RESIDUAL ? std / sqrt(2.0 * m->n_layer) : std;
    case INIT_NORMAL: return std;
    case INIT_HE_NORMAL: return sqrt(2.0 / fan);
    case INIT_HE_UNIFORM: *uniform = 1; return sqrt(6.0 / fan);
    case INIT_XAVIER_NORMAL: return sqrt(2.0 / (fan_in + fan_out));
    case INIT_XAVIER_UNIFORM: *uniform = 1; return sqrt(6.0 / (fan_in + fan_out));
    case INIT_ZEROS: return 0.0;
    }
    return std;
}

void params_init(Param *p, const Config *cfg, float *block)
{
    int uniform;
    double scale = params_init_scale(p, cfg, &uniform);
    float constant = p->role == ROLE_NORM_GAIN ? 1.0f : 0.0f;
    int random = scale > 0.0;
    uint64_t key = rng_key(cfg->train.seed, p->name);
    /* Element (r, c) of the block is element (row0 + r, col0 + c) of the
     * logical tensor: its counter is that logical index. */
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < p->lrows; r++) {
        for (int64_t c = 0; c < p->lcols; c++) {
            uint64_t i = (uint64_t)((p->row0 + r) * p->cols + (p->col0 + c));
            float x = constant;
            if (random && uniform)
                x = (float)(scale * (2.0 * rng_uniform(key, i) - 1.0));
            else if (random)
                x = (float)(scale * rng_normal(key, i));
            block[r * p->lcols + c] = x;
        }
    }
}

int64_t params_local_count(const Config *cfg, int pp_stage, int tp_rank)
{
    Grid g; /* params_build reads only the layout and the place in it */
    memset(&g, 0, sizeof g);
    g.pp = cfg->parallel.pp;
    g.tp = cfg->parallel.tp;
    g.pp_stage = pp_stage;
    g.tp_rank = tp_rank;
    ParamSet ps;
    params_build(&ps, cfg, &g);
    int64_t n = 0;
    for (int i = 0; i < ps.n; i++)
        n += params_local_numel(&ps.p[i]);
    params_free(&ps);
    return n;
}

int64_t params_logical_count(const ModelConfig *m)
{
    int64_t C = m->n_embd, V = m->vocab_size, T = m->seq_len;
    int64_t per_block = 2 * C + 3 * C * C + 3 * C + C * C + C + 2 * C
                      + 4 * C * C + 4 * C + 4 * C * C + C;
    int64_t n = V * C + T * C + m->n_layer * per_block + 2 * C;
    if (m->arch == ARCH_LLAMA) {
        int64_t KV = (int64_t)arch_kv_heads(m) * (C / m->n_head), F = arch_ffn_dim(m);
        per_block = 2 * C + 2 * C * C + 2 * KV * C + 3 * F * C;
        n = V * C + m->n_layer * per_block + C;
    }
    if (!m->tie_embeddings)
        n += V * C;
    return n;
}
