/*
 * t_grads.c - one step's gradients on every layout that fits the world,
 * tensor by tensor, against a single-rank reference computed on each rank.
 *
 * After the reduction each rank holds the owned rows of its TP block of
 * every tensor on its stage (the tied embedding's last-stage copy
 * included); each piece is compared with the same rows and columns of the
 * reference's full logical gradient. Gradients come before Adam, so the
 * only differences are fp32 reassociation: a wrong shard, a missing
 * all-reduce or a double-counted replica shows up at once. The layouts with
 * node_size run the two-level DP reduction (inside pretended nodes, then
 * across them) and must match like the flat one.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "config_load.h"
#include "grid.h"
#include "model.h"
#include "pipeline.h"
#include "rng.h"
#include "schedule.h"
#include "tap.h"
#include "zero.h"

#define GB 8 /* sequences in the global batch */

typedef struct {
    Config cfg;
    Grid grid;
    Model model;
    Pipeline pipe;
    Zero *zero;
    double loss;
} Run;

/* The architecture base_config builds: main checks gpt2 on every layout,
 * then llama (8 query heads over 2 key/value heads, so tp 4 and 8
 * replicate each key/value head) on the world's largest splits. */
static ModelArch base_arch = ARCH_GPT2;

static void base_config(Config *c)
{
    config_defaults(c);
    c->model.n_layer = 4;
    c->model.n_embd = 32;
    c->model.n_head = 8;
    c->model.seq_len = 16;
    c->model.vocab_size = 64;
    c->model.init = INIT_NORMAL;
    c->model.init_std = 0.1;
    if (base_arch == ARCH_LLAMA) {
        c->model.arch = ARCH_LLAMA;
        c->model.n_kv_head = 2;
        c->model.ffn_dim = 48;
    }
}

static int32_t *global_batch(const Config *c)
{
    int n = GB * (c->model.seq_len + 1);
    int32_t *b = malloc((size_t)n * sizeof *b);
    uint64_t key = rng_key(11, "batch");
    for (int i = 0; i < n; i++)
        b[i] = (int32_t)(rng_u64(key, (uint64_t)i) % (uint64_t)c->model.vocab_size);
    return b;
}

/* One step's forward and backward and the gradient reduction. */
static void run_step(Run *r, MPI_Comm comm, const int32_t *batch)
{
    Config *c = &r->cfg;
    grid_create(&r->grid, c, comm);
    int ga = c->train.grad_accum, mb = c->train.micro_batch;
    Action acts[64];
    int n = schedule_build(c->parallel.schedule, r->grid.layout.pp, c->parallel.virtual_stages,
                           r->grid.layout.pp_stage, ga, acts);
    model_create(&r->model, c, &r->grid, schedule_max_in_flight(acts, n));
    pipeline_create(&r->pipe, &r->model);
    r->zero = zero_create(&r->model, c, &r->grid);
    zero_init_weights(r->zero);
    zero_begin_step(r->zero);
    model_reset_loss(&r->model);
    PipelineTimes times = {0};
    const int32_t *mine = batch + (int64_t)r->grid.layout.dp_rank * ga * mb * (c->model.seq_len + 1);
    pipeline_run(&r->pipe, acts, n, mine, mb, FORWARD_TRAIN, 1.0f / (float)(GB * c->model.seq_len),
                 &times);
    zero_reduce_grads(r->zero);
    model_sum_split_grads(&r->model);
    double l = r->model.is_last && r->grid.layout.tp_rank == 0 ? model_loss_sum(&r->model) : 0.0;
    MPI_Allreduce(&l, &r->loss, 1, MPI_DOUBLE, MPI_SUM, comm);
}

static void run_free(Run *r)
{
    zero_destroy(r->zero);
    pipeline_destroy(&r->pipe);
    model_destroy(&r->model);
    grid_destroy(&r->grid);
}

/* Owned rows of p's reduced gradient (og covers the update rows). */
static const float *owned_grad(Run *r, const Param *p)
{
    int64_t r0, nr;
    zero_update_rows(r->zero, p, &r0, &nr);
    return (const float *)p->og.data + (p->zrow0 - r0) * p->lcols;
}

/* Worst per-tensor ||g - ref|| / ||ref|| over this layout, world-wide. */
static double compare(Run *dist, Run *ref, char *worst_name)
{
    double worst = 0.0;
    ParamSet *all = &ref->model.ps;
    double *sums = calloc((size_t)(2 * all->n), sizeof *sums);
    for (int i = 0; i < dist->model.ps.n; i++) {
        Param *p = &dist->model.ps.p[i];
        Param *q = params_find(all, p->name);
        int k = (int)(q - all->p);
        const float *g = owned_grad(dist, p), *full = q->og.data;
        for (int64_t a = 0; a < p->zrows; a++)
            for (int64_t b = 0; b < p->lcols; b++) {
                double x = g[a * p->lcols + b];
                double y = full[(p->row0 + p->zrow0 + a) * q->lcols + p->col0 + b];
                sums[2 * k] += (x - y) * (x - y);
                sums[2 * k + 1] += y * y;
            }
    }
    MPI_Allreduce(MPI_IN_PLACE, sums, 2 * all->n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    for (int k = 0; k < all->n; k++) {
        double rel = sqrt(sums[2 * k]) / fmax(sqrt(sums[2 * k + 1]), 1e-30);
        if (!(rel <= worst)) {
            worst = isnan(rel) ? INFINITY : rel;
            snprintf(worst_name, 48, "%s", all->p[k].name);
        }
    }
    free(sums);
    return worst;
}

/* kind's chunks a stage: v for the interleaved schedule, else 1 */
static void check_layout(Run *ref, const int32_t *batch, int dp, int pp, int tp, int zero,
                         int ga, ScheduleKind kind, int tie, int node_size, int v, int sp)
{
    Run r;
    memset(&r, 0, sizeof r);
    base_config(&r.cfg);
    r.cfg.model.tie_embeddings = tie;
    r.cfg.parallel.dp = dp;
    r.cfg.parallel.pp = pp;
    r.cfg.parallel.tp = tp;
    r.cfg.parallel.zero = zero;
    r.cfg.parallel.schedule = kind;
    r.cfg.parallel.virtual_stages = kind == SCHED_INTERLEAVED ? v : 1;
    r.cfg.parallel.node_size = node_size;
    r.cfg.parallel.sequence_parallel = sp;
    r.cfg.train.grad_accum = ga;
    r.cfg.train.micro_batch = GB / (ga * dp);
    run_step(&r, MPI_COMM_WORLD, batch);
    char name[48] = "-";
    double worst = compare(&r, ref, name);
    double lrel = fabs(r.loss - ref->loss) / ref->loss;
    char nodes[32] = "";
    if (node_size)
        snprintf(nodes, sizeof nodes, ", node_size %d%s", node_size,
                 r.grid.dp_node_size > 1 && r.grid.dp_cross_size > 1 ? " (two-level)" : "");
    tap_ok(worst < 1e-5 && lrel < 1e-6,
           "%sdp %d x pp %d x tp %d%s, zero %d, %s%s, ga %d%s%s: loss rel %.1e, grads per tensor max rel %.1e (%s)",
           base_arch == ARCH_LLAMA ? "llama: " : "", dp, pp, tp, sp ? " sequence-parallel" : "",
           zero, schedule_name(kind), kind == SCHED_INTERLEAVED ? (v == 2 ? " v=2" : " v=4") : "",
           ga, tie ? "" : ", untied", nodes, lrel, worst, name);
    run_free(&r);
}

/* Recomputation changes memory, never gradients: on this world's largest
 * model split, recompute = full gives bitwise the gradients of none, under
 * `kind` against 1F1B's (zb1 splits the same GEMMs, in the same order per
 * parameter), with and without sequence parallelism. */
static void check_recompute(const int32_t *batch, int dp, int pp, int tp, ScheduleKind kind,
                            int sp)
{
    Run r[2];
    for (int k = 0; k < 2; k++) {
        memset(&r[k], 0, sizeof r[k]);
        base_config(&r[k].cfg);
        r[k].cfg.parallel.dp = dp;
        r[k].cfg.parallel.pp = pp;
        r[k].cfg.parallel.tp = tp;
        r[k].cfg.parallel.sequence_parallel = sp;
        r[k].cfg.train.grad_accum = 4;
        r[k].cfg.train.micro_batch = GB / (4 * dp);
        r[k].cfg.train.recompute = k ? RECOMPUTE_FULL : RECOMPUTE_NONE;
        r[k].cfg.parallel.schedule = k ? kind : SCHED_1F1B;
        run_step(&r[k], MPI_COMM_WORLD, batch);
    }
    int same = r[0].loss == r[1].loss;
    for (int i = 0; i < r[0].model.ps.n; i++) {
        Param *a = &r[0].model.ps.p[i], *b = &r[1].model.ps.p[i];
        same &= memcmp(a->og.data, b->og.data, (size_t)a->og.n * sizeof(float)) == 0;
    }
    tap_ok(same, "dp %d x pp %d x tp %d%s: recompute=full under %s gives bitwise the gradients "
           "of none under 1f1b", dp, pp, tp, sp ? " sequence-parallel" : "", schedule_name(kind));
    run_free(&r[0]);
    run_free(&r[1]);
}

int main(int argc, char **argv)
{
    tap_init(&argc, &argv);
    int n = tap_size();
    static const int layouts[][9] = {
        /* dp pp tp zero ga schedule node_size virtual_stages sequence_parallel */
        {1, 1, 1, 1, 4, SCHED_1F1B}, {2, 1, 1, 0, 4, SCHED_1F1B}, {2, 1, 1, 1, 2, SCHED_1F1B},
        {2, 1, 1, 2, 4, SCHED_1F1B}, {2, 1, 1, 3, 4, SCHED_1F1B}, {1, 2, 1, 1, 4, SCHED_1F1B},
        {1, 2, 1, 1, 4, SCHED_GPIPE}, {1, 1, 2, 1, 4, SCHED_1F1B}, {4, 1, 1, 1, 2, SCHED_1F1B},
        {1, 4, 1, 1, 8, SCHED_1F1B}, {1, 1, 4, 1, 4, SCHED_1F1B}, {2, 2, 1, 2, 4, SCHED_1F1B},
        {1, 2, 2, 3, 4, SCHED_1F1B}, {2, 1, 2, 0, 4, SCHED_1F1B}, {2, 2, 2, 0, 4, SCHED_1F1B},
        {2, 2, 2, 1, 4, SCHED_1F1B}, {2, 2, 2, 2, 2, SCHED_1F1B}, {2, 2, 2, 3, 4, SCHED_GPIPE},
        {8, 1, 1, 1, 1, SCHED_1F1B}, {1, 1, 8, 1, 4, SCHED_1F1B}, {1, 4, 2, 3, 4, SCHED_1F1B},
        {4, 1, 1, 1, 2, SCHED_1F1B, 2}, {8, 1, 1, 1, 1, SCHED_1F1B, 2},
        {8, 1, 1, 2, 1, SCHED_1F1B, 4}, {8, 1, 1, 3, 1, SCHED_1F1B, 2},
        {4, 1, 2, 1, 2, SCHED_1F1B, 4}, {4, 2, 1, 0, 2, SCHED_1F1B, 2},
        /* zb1: W deferred, the DP reductions overlapped (zero 1) or per
         * unit (2, 3) after the last W; ga < pp too */
        {1, 2, 1, 1, 4, SCHED_ZB1}, {2, 1, 1, 3, 4, SCHED_ZB1}, {2, 2, 1, 1, 4, SCHED_ZB1},
        {2, 2, 1, 3, 4, SCHED_ZB1}, {1, 4, 1, 1, 2, SCHED_ZB1}, {2, 2, 2, 1, 4, SCHED_ZB1},
        {2, 2, 2, 2, 2, SCHED_ZB1}, {2, 4, 1, 3, 4, SCHED_ZB1}, {1, 4, 2, 0, 4, SCHED_ZB1},
        {1, 2, 1, 1, 4, SCHED_INTERLEAVED, 0, 2}, {1, 2, 1, 0, 2, SCHED_INTERLEAVED, 0, 2},
        {2, 2, 1, 2, 2, SCHED_INTERLEAVED, 0, 2}, {1, 2, 2, 3, 4, SCHED_INTERLEAVED, 0, 2},
        {2, 2, 2, 1, 4, SCHED_INTERLEAVED, 0, 2}, {2, 2, 2, 3, 2, SCHED_INTERLEAVED, 2, 2},
        /* sequence parallelism: the norms' gradients are partial sums over
         * TP; with zb1 and interleaved too */
        {1, 1, 2, 1, 4, SCHED_1F1B, 0, 1, 1}, {2, 1, 2, 3, 4, SCHED_1F1B, 0, 1, 1},
        {1, 2, 2, 1, 4, SCHED_GPIPE, 0, 1, 1}, {1, 1, 4, 0, 2, SCHED_1F1B, 0, 1, 1},
        {2, 2, 2, 2, 2, SCHED_1F1B, 0, 1, 1}, {1, 1, 8, 1, 4, SCHED_1F1B, 0, 1, 1},
        {2, 1, 4, 3, 4, SCHED_1F1B, 0, 1, 1}, {1, 4, 2, 1, 4, SCHED_1F1B, 0, 1, 1},
        {1, 2, 2, 3, 4, SCHED_ZB1, 0, 1, 1}, {2, 2, 2, 2, 4, SCHED_ZB1, 0, 1, 1},
        {1, 2, 2, 1, 4, SCHED_INTERLEAVED, 0, 2, 1}, {2, 2, 2, 3, 2, SCHED_INTERLEAVED, 0, 2, 1},
    };
    int count = 0;
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++)
        count += layouts[i][0] * layouts[i][1] * layouts[i][2] == n;
    int tp_max = n >= 4 ? 2 : 1; /* check_recompute's */
    tap_plan(count + 7 + (n >= 2) + (tp_max > 1) + (n > 1));
    int32_t *batch = NULL;
    Run ref[2];
    for (int tie = 1; tie >= 0; tie--) {
        Run *r = &ref[tie];
        memset(r, 0, sizeof *r);
        base_config(&r->cfg);
        r->cfg.model.tie_embeddings = tie;
        r->cfg.parallel.dp = r->cfg.parallel.pp = r->cfg.parallel.tp = 1;
        r->cfg.train.micro_batch = GB;
        if (!batch)
            batch = global_batch(&r->cfg);
        run_step(r, MPI_COMM_SELF, batch);
    }
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) {
        const int *l = layouts[i];
        if (l[0] * l[1] * l[2] == n)
            check_layout(&ref[1], batch, l[0], l[1], l[2], l[3], l[4], (ScheduleKind)l[5], 1,
                         l[6], l[7], l[8]);
    }
    /* an untied LM head, on the largest model split of this world */
    check_layout(&ref[0], batch, 1, n >= 2 ? 2 : 1, n >= 4 ? n / 2 : 1, 1, 4, SCHED_1F1B, 0, 0, 1,
                 0);
    check_layout(&ref[1], batch, n, 1, 1, 3, 1, SCHED_1F1B, 1, 0, 1, 0);
    check_recompute(batch, n >= 8 ? 2 : 1, n >= 2 ? 2 : 1, tp_max, SCHED_1F1B, 0);
    check_recompute(batch, n >= 8 ? 2 : 1, n >= 2 ? 2 : 1, tp_max, SCHED_ZB1, 0);
    if (tp_max > 1)
        check_recompute(batch, n >= 8 ? 2 : 1, 2, tp_max, SCHED_1F1B, 1);
    run_free(&ref[0]);
    run_free(&ref[1]);

    /* llama, untied: all of the world in TP, and split with pipeline stages */
    base_arch = ARCH_LLAMA;
    memset(&ref[0], 0, sizeof ref[0]);
    base_config(&ref[0].cfg);
    ref[0].cfg.model.tie_embeddings = 0;
    ref[0].cfg.parallel.dp = ref[0].cfg.parallel.pp = ref[0].cfg.parallel.tp = 1;
    ref[0].cfg.train.micro_batch = GB;
    run_step(&ref[0], MPI_COMM_SELF, batch);
    check_layout(&ref[0], batch, 1, 1, n, 1, 4, SCHED_1F1B, 0, 0, 1, 0);
    check_layout(&ref[0], batch, n >= 4 ? 2 : 1, n >= 2 ? 2 : 1, n >= 8 ? 2 : 1, 3, 4,
                 SCHED_1F1B, 0, 0, 1, 0);
    check_layout(&ref[0], batch, n >= 4 ? 2 : 1, n >= 2 ? 2 : 1, n >= 8 ? 2 : 1, 2, 4,
                 SCHED_ZB1, 0, 0, 1, 0);
    /* llama interleaved: 2 chunks a stage, untied (the last stage's head
     * and stage 0's embedding sit on different chunks) */
    if (n >= 2)
        check_layout(&ref[0], batch, n >= 4 ? n / 2 : 1, 2, 1, 2, n >= 4 ? 2 : 4,
                     SCHED_INTERLEAVED, 0, 0, 2, 0);
    if (n > 1) /* sequence parallelism; replicated key/value heads from tp 4 on */
        check_layout(&ref[0], batch, n >= 4 ? 2 : 1, 1, n >= 4 ? n / 2 : n, 3, 4, SCHED_1F1B,
                     0, 0, 1, 1);
    run_free(&ref[0]);
    free(batch);
    return tap_done();
}
