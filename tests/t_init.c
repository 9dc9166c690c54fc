/*
 * t_init.c - every initialisation scheme: each tensor's sample mean and
 * standard deviation within sampling tolerance of its formula, LayerNorm
 * gains at 1 and biases at 0; and layout independence (doc/design.md,
 * invariant 1): a TP shard's values are bitwise the same elements of the
 * single-rank tensor.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "config.h"
#include "config_load.h"
#include "layout.h"
#include "params.h"
#include "params_stage.h"
#include "tap.h"

/* Stage 0 of one, TP rank tp_rank of tp: the block params_build gives it. */
static Layout tp_layout(int tp, int tp_rank)
{
    ParallelConfig p = {.pp = 1, .tp = tp, .cp = 1};
    return layout_at(&p, 1, 0, 0, tp_rank);
}

static void config_for(Config *c, InitScheme scheme, FanMode fan)
{
    config_defaults(c);
    c->model.n_layer = 2;
    c->model.n_embd = 256;
    c->model.n_head = 4;
    c->model.seq_len = 64;
    c->model.vocab_size = 512;
    c->model.init = scheme;
    c->model.init_fan = fan;
    c->model.init_std = 0.05;
}

/* Checks every tensor of the scheme; returns the worst z-score seen. */
static double check_scheme(InitScheme scheme, FanMode fan, int *ok)
{
    Config c;
    config_for(&c, scheme, fan);
    Layout g = tp_layout(1, 0);
    ParamSet ps;
    params_build(&ps, &c, &g);
    double worst = 0.0;
    *ok = 1;
    for (int i = 0; i < ps.n; i++) {
        Param *p = &ps.p[i];
        int64_t n = params_local_numel(p);
        float *x = malloc((size_t)n * sizeof *x);
        params_init(p, &c, x);
        double sum = 0, sq = 0;
        for (int64_t k = 0; k < n; k++) {
            sum += x[k];
            sq += (double)x[k] * x[k];
        }
        double mean = sum / n, sd = sqrt(fmax(sq / n - mean * mean, 0.0));
        int uniform;
        double scale = params_init_scale(p, &c, &uniform);
        if (scale == 0.0) {
            double want = p->role == ROLE_NORM_GAIN ? 1.0 : 0.0;
            *ok &= mean == want && sd == 0.0;
        } else {
            double want_sd = uniform ? scale / sqrt(3.0) : scale;
            double z_mean = fabs(mean) / (want_sd / sqrt((double)n));
            double z_sd = fabs(sd / want_sd - 1.0) / sqrt(1.0 / (2.0 * n) * (uniform ? 0.8 : 1.0));
            worst = fmax(worst, fmax(z_mean, z_sd));
            *ok &= z_mean < 5.0 && z_sd < 5.0;
            if (uniform)
                for (int64_t k = 0; k < n; k++)
                    *ok &= fabs(x[k]) <= scale;
        }
        free(x);
    }
    params_free(&ps);
    return worst;
}

/* Each TP rank's block is bitwise the same elements of the full tensor. */
static int tp_shards_match(int tp)
{
    Config c;
    config_for(&c, INIT_GPT2, FAN_IN);
    Layout one = tp_layout(1, 0);
    ParamSet full;
    params_build(&full, &c, &one);
    int ok = 1;
    for (int r = 0; r < tp; r++) {
        Layout g = tp_layout(tp, r);
        ParamSet ps;
        params_build(&ps, &c, &g);
        for (int i = 0; i < ps.n; i++) {
            Param *p = &ps.p[i], *q = params_find(&full, p->name);
            float *a = malloc(sizeof(float) * (size_t)params_local_numel(p));
            float *b = malloc(sizeof(float) * (size_t)params_local_numel(q));
            params_init(p, &c, a);
            params_init(q, &c, b);
            for (int64_t y = 0; y < p->lrows; y++)
                for (int64_t x = 0; x < p->lcols; x++)
                    ok &= a[y * p->lcols + x] == b[(p->row0 + y) * q->lcols + p->col0 + x];
            free(a);
            free(b);
        }
        params_free(&ps);
    }
    params_free(&full);
    return ok;
}

/* The local count against the logical model: the whole of it on one rank,
 * plus the last stage's copy of the tied wte on two stages; TP ranks hold
 * the same sizes, each less than the whole. */
static int local_counts(void)
{
    Config c;
    config_for(&c, INIT_GPT2, FAN_IN);
    int64_t logical = params_logical_count(&c.model);
    int64_t V = c.model.vocab_size, C = c.model.n_embd;
    int ok = params_local_count(&c, 0, 0) == logical;
    c.parallel.pp = 2;
    ok &= params_local_count(&c, 0, 0) + params_local_count(&c, 1, 0) == logical + V * C;
    c.parallel.pp = 1;
    c.parallel.tp = 2;
    int64_t half = params_local_count(&c, 0, 0);
    ok &= half == params_local_count(&c, 0, 1) && half < logical && 2 * half > logical;
    c.parallel.tp = 1;
    c.model.tie_embeddings = 0;
    ok &= params_local_count(&c, 0, 0) == params_logical_count(&c.model);
    return ok;
}

int main(int argc, char **argv)
{
    tap_init(&argc, &argv);
    static const struct { InitScheme s; FanMode f; const char *name; } schemes[] = {
        {INIT_GPT2, FAN_IN, "gpt2"}, {INIT_NORMAL, FAN_IN, "normal"},
        {INIT_HE_NORMAL, FAN_IN, "he_normal fan_in"}, {INIT_HE_NORMAL, FAN_OUT, "he_normal fan_out"},
        {INIT_HE_UNIFORM, FAN_IN, "he_uniform fan_in"}, {INIT_XAVIER_NORMAL, FAN_IN, "xavier_normal"},
        {INIT_XAVIER_UNIFORM, FAN_IN, "xavier_uniform"}, {INIT_ZEROS, FAN_IN, "zeros"},
    };
    int n = sizeof schemes / sizeof schemes[0];
    tap_plan(n + 4);
    for (int i = 0; i < n; i++) {
        int ok;
        double z = check_scheme(schemes[i].s, schemes[i].f, &ok);
        tap_ok(ok, "%s: every tensor's mean and std match the formula (worst z %.2f < 5)",
               schemes[i].name, z);
    }
    tap_ok(local_counts(),
           "params_local_count: one rank holds the model; two stages add the tied copy");
    tap_ok(tp_shards_match(2), "tp 2 shards are bitwise slices of the single-rank tensors");
    tap_ok(tp_shards_match(4), "tp 4 shards are bitwise slices of the single-rank tensors");
    Config c;
    config_for(&c, INIT_GPT2, FAN_IN);
    Layout g = tp_layout(1, 0);
    ParamSet ps;
    params_build(&ps, &c, &g);
    int u;
    double fc = params_init_scale(params_find(&ps, "h.0.mlp.fc.w"), &c, &u);
    double proj = params_init_scale(params_find(&ps, "h.0.mlp.proj.w"), &c, &u);
    tap_ok(fabs(fc - 0.05) < 1e-12 && fabs(proj - 0.05 / sqrt(4.0)) < 1e-12,
           "gpt2 scales residual projections by 1/sqrt(2 n_layer): %.4f -> %.4f", fc, proj);
    params_free(&ps);
    return tap_done();
}
