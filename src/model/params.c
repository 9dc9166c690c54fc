/*
 * params.c - the parameter table of one rank: adding tensors and units,
 * finding them, and their initialisation. Which tensors a stage holds is
 * params_stage.c's.
 */
#include "params.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "rng.h"

static Param *add_param(ParamSet *ps, const char *name, int64_t rows,
                        int64_t cols, int ndim, TpSplit split, ParamRole role,
                        const Layout *layout)
{
    if (ps->n == ps->cap) {
        ps->cap = ps->cap ? 2 * ps->cap : 64;
        ps->p = TRI_REALLOC(ps->p, (size_t)ps->cap * sizeof *ps->p, "the parameter table");
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
        p->lrows = rows / layout->tp;
        p->row0 = p->lrows * layout->tp_rank;
    } else if (split == SPLIT_COLS) {
        p->lcols = cols / layout->tp;
        p->col0 = p->lcols * layout->tp_rank;
    }
    p->decay = ndim == 2;
    int replicated_here = split == SPLIT_NONE && layout->tp_rank != 0;
    p->counts_in_norm = !replicated_here;
    p->writes_ckpt = !replicated_here;
    p->w = p->g = p->master = p->m = p->v = p->og = OPS_NONE;
    return p;
}

void params_unit_begin(ParamSet *ps, const char *name)
{
    ps->units = TRI_REALLOC(ps->units, (size_t)(ps->n_units + 1) * sizeof *ps->units, "the unit table");
    Unit *u = &ps->units[ps->n_units++];
    memset(u, 0, sizeof *u);
    snprintf(u->name, sizeof u->name, "%s", name);
}

void params_unit_add(ParamSet *ps, int idx)
{
    Unit *u = &ps->units[ps->n_units - 1];
    if (u->n == u->cap) {
        u->cap = u->cap ? 2 * u->cap : 16;
        u->idx = TRI_REALLOC(u->idx, (size_t)u->cap * sizeof *u->idx, "a unit's parameters");
    }
    u->idx[u->n++] = idx;
}

Param *params_unit_param(ParamSet *ps, const char *name, int64_t rows, int64_t cols, int ndim,
                         TpSplit split, ParamRole role, const Layout *l)
{
    Param *p = add_param(ps, name, rows, cols, ndim, split, role, l);
    params_unit_add(ps, ps->n - 1);
    return p;
}

void params_free(ParamSet *ps)
{
    free(ps->p);
    for (int u = 0; u < ps->n_units; u++)
        free(ps->units[u].idx);
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
