/*
 * t_zero.c - ZeRO's sizes: what a real Zero allocates and reports equals
 * zero_state_bytes of its table and layout, on DP groups of 1, 2 and 4
 * ranks, every stage, fp32 and bf16, with and without overlap, flat and
 * two-level, and over dp x cp replicas; the owned shards add up to the
 * whole; [train] offload moves
 * the optimizer state, and nothing else, to host memory; and the rules
 * that choose the stage a rank runs and whether it overlaps; with ep,
 * routed experts' tensors sized, partitioned, reduced and gathered over
 * the ranks holding them (COMM_EDP), the norm counting each once.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm_dp.h"
#include "config.h"
#include "config_load.h"
#include "grid.h"
#include "model.h"
#include "optim.h"
#include "tap.h"
#include "zero.h"

static void small_config(Config *c, int zero, Precision precision, int overlap, int node_size)
{
    config_defaults(c);
    c->model.n_layer = 3;
    c->model.n_embd = 32;
    c->model.n_head = 4;
    c->model.seq_len = 16;
    c->model.vocab_size = 70; /* owned blocks of unequal sizes on 4 ranks */
    c->train.micro_batch = 1;
    c->train.precision = precision;
    c->parallel.dp = 0;
    c->parallel.zero = zero;
    c->parallel.overlap = overlap;
    c->parallel.node_size = node_size;
}

static int same(ZeroBytes a, ZeroBytes b)
{
    return a.weights == b.weights && a.grads == b.grads && a.optimizer == b.optimizer
        && a.host == b.host;
}

/* The block of rows a DP rank (a replica: dp x cp of them) owns: its
 * place in the DP reduction's order (over two levels not its DP rank). */
static int block_of_rank(const Grid *g)
{
    CommDp *d = comm_dp_create(g);
    int block = -1;
    for (int k = 0; k < layout_replicas(&g->layout); k++)
        if (comm_dp_order(d)[k] == layout_replica_rank(&g->layout))
            block = k;
    comm_dp_destroy(d);
    return block;
}

/* A Zero on comm (dp = its size): zero_bytes against zero_state_bytes of
 * the layout the rules give, the test's own statement of the places per
 * node (0: one level), and the rank's block. *mine receives the bytes. */
static int real_equals_pure(MPI_Comm comm, const Config *c, int places, ZeroBytes *mine)
{
    Grid g;
    Model m;
    grid_create(&g, c, comm);
    model_create(&m, c, &g, 1);
    Zero *z = zero_create(&m, c, &g);
    int replicas = layout_replicas(&g.layout);
    ZeroLayout l = {zero_stage(c->parallel.zero, replicas), replicas, block_of_rank(&g),
                    model_dtype(c->train.precision), places, 0, 0, 0, 0};
    l.overlap = zero_overlaps(c->parallel.overlap, l.stage, replicas, places, g.device);
    *mine = zero_bytes(z);
    int ok = same(*mine, zero_state_bytes(&m.ps, &l));
    if (!ok)
        tap_diag("dp %d zero %d %s overlap %d: real %lld/%lld/%lld", g.layout.dp, c->parallel.zero,
                 ops_dtype_name(l.dtype), l.overlap, (long long)mine->weights,
                 (long long)mine->grads, (long long)mine->optimizer);
    zero_destroy(z);
    model_destroy(&m);
    grid_destroy(&g);
    return ok;
}

/* Every stage, precision and overlap on DP groups of `dp` ranks. */
static int every_layout(int dp, int *cases)
{
    int rank = tap_rank(), ok = 1;
    MPI_Comm comm;
    MPI_Comm_split(MPI_COMM_WORLD, rank / dp, rank, &comm);
    for (int zero = 0; zero <= 3; zero++)
        for (int p = 0; p < 2; p++)
            for (int overlap = 0; overlap <= 1; overlap++) {
                Config c;
                ZeroBytes b;
                small_config(&c, zero, p ? PRECISION_BF16 : PRECISION_FP32, overlap, 0);
                ok &= real_equals_pure(comm, &c, 0, &b);
                (*cases)++;
            }
    MPI_Comm_free(&comm);
    return ok;
}

/* Zero 1 and 3 over the world: the ranks' optimizer state (and, under
 * zero 3, their master weights) partition one rank's zero 0 state. */
static int shards_add_up(void)
{
    Config c;
    ZeroBytes whole, part;
    MPI_Comm self;
    MPI_Comm_split(MPI_COMM_WORLD, tap_rank(), 0, &self);
    small_config(&c, 0, PRECISION_FP32, 0, 0);
    int ok = real_equals_pure(self, &c, 0, &whole);
    MPI_Comm_free(&self);
    small_config(&c, 1, PRECISION_FP32, 0, 0);
    ok &= real_equals_pure(MPI_COMM_WORLD, &c, 0, &part);
    long long sum = 0;
    MPI_Allreduce(&(long long){part.optimizer}, &sum, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    ok &= sum == whole.optimizer;
    return ok;
}

/* zero_state_bytes with offload against without, on this rank's table of
 * a dp = world model: the device keeps no optimizer state (zero 3: nor the
 * master rows), the host holds it and the staging, gradients are the same. */
static int offload_moves_optimizer(void)
{
    int ok = 1;
    for (int zero = 0; zero <= 3; zero++) {
        for (int p = 0; p < 3; p++) {
            Config c;
            small_config(&c, zero, (Precision)p, 0, 0);
            Grid g;
            Model m;
            grid_create(&g, &c, MPI_COMM_WORLD);
            model_create(&m, &c, &g, 1);
            ZeroLayout l = {zero_stage(zero, g.layout.dp), g.layout.dp, g.layout.dp_rank, model_dtype(c.train.precision),
                            0, 0, 0, 0, 0};
            ZeroBytes on = zero_state_bytes(&m.ps, &l), off;
            l.offload = 1;
            off = zero_state_bytes(&m.ps, &l);
            int64_t staging = offload_staging_bytes(l.dtype, OFFLOAD_CHUNK);
            /* without offload, fp32 below zero 3 and zero 3 keep no master
             * among the optimizer state (the weights are it): 2 of 3 arrays */
            int two_of_three = (l.dtype == OPS_F32 && l.stage < 3) || l.stage == 3;
            int64_t state = two_of_three ? on.optimizer / 2 * 3 : on.optimizer;
            int64_t weights = l.stage == 3 ? on.weights - on.optimizer / 2 : on.weights;
            ok &= off.optimizer == 0 && off.grads == on.grads && off.host == state + staging
                  && off.weights == weights;
            model_destroy(&m);
            grid_destroy(&g);
        }
    }
    return ok;
}

/* Context parallelism: ZeRO shards over the replicas, every cp rank of
 * every dp rank. With pp = tp = 1 a rank's replica rank is its world rank
 * at any cp, so dp n/cp x cp holds exactly what dp n holds, zero 1 and 3. */
static int shards_over_replicas(int n)
{
    int ok = 1;
    for (int zero = 1; zero <= 3; zero += 2) {
        Config c;
        ZeroBytes plain, cut;
        small_config(&c, zero, PRECISION_FP32, 1, 0);
        ok &= real_equals_pure(MPI_COMM_WORLD, &c, 0, &plain);
        for (c.parallel.cp = 2; c.parallel.cp <= n; c.parallel.cp *= 2) {
            ok &= real_equals_pure(MPI_COMM_WORLD, &c, 0, &cut) && same(plain, cut);
            if (!same(plain, cut))
                tap_diag("zero %d cp %d: %lld/%lld/%lld bytes, dp %d alone %lld/%lld/%lld",
                         zero, c.parallel.cp, (long long)cut.weights, (long long)cut.grads,
                         (long long)cut.optimizer, n, (long long)plain.weights,
                         (long long)plain.grads, (long long)plain.optimizer);
        }
    }
    return ok;
}

/* ---- routed experts' state over COMM_EDP ----------------------------------
 * No MoE model is needed: a dense model on dp = world has its MLP tensors
 * marked as routed experts' (Param.expert), as a MoE layer's are, so with
 * ep > 1 each ep rank's copy stands for other experts, shared by the
 * ranks with that ep rank alone (world rank r % ep, as pp = tp = cp = 1).
 */

static int marked_expert(const Param *p) { return strstr(p->name, ".mlp.") != NULL; }

/* World rank r's gradient of element e of parameter i: small integers,
 * so every sum is exact in fp32. */
static float grad_value(int r, int i, int64_t e) { return (float)((r + 1) * ((i + e) % 5 + 1)); }

/* World rank r's own weight value of element e of parameter i (exact in fp32). */
static float weight_value(int r, int i, int64_t e) { return (float)(r * 1000 + (i * 7 + e) % 997); }

/* Whether world rank r shares p's state with world rank me. */
static int shares(const Param *p, int r, int me, int ep)
{
    return !p->expert || r % ep == me % ep;
}

static float group_sum(const Param *p, int i, int64_t e, int me, int n, int ep)
{
    float sum = 0.0f;
    for (int r = 0; r < n; r++)
        if (shares(p, r, me, ep))
            sum += grad_value(r, i, e);
    return sum;
}

/* comm_dp_order of the world's replicas: DP rank order, over two
 * pretended nodes by place in the node first. */
static const int *dense_order;

/* The world rank owning row `row` of p among me's group: block k of an
 * expert's edp ranks is its k-th member (one level always), of the
 * replicas DP rank dense_order[k]. */
static int owner_of(const Param *p, int64_t row, int me, int n, int ep)
{
    int size = p->expert ? n / ep : n;
    for (int k = 0; k < size; k++) {
        int64_t r0, rows;
        zero_partition(p->lrows, size, k, &r0, &rows);
        if (row >= r0 && row < r0 + rows)
            return p->expert ? k * ep + me % ep : dense_order[k];
    }
    return -1;
}

static void put(ops_tensor t, const float *v)
{
    ops_copy(t, (ops_tensor){(void *)v, t.n, OPS_F32, OPS_CPU});
}

static void hook(Model *m, int unit, UnitEvent ev)
{
    if (m->hook)
        m->hook(m->hook_ctx, unit, ev, 1);
}

/* One step's backward without a model pass: each unit's gradients set to
 * grad_value, in the units' hooks, the last unit first; then the
 * reduction. */
static void backward(Model *m, Zero *z, int me, float *buf)
{
    zero_begin_step(z);
    for (int u = m->ps.n_units - 1; u >= 0; u--) {
        hook(m, u, UNIT_BEFORE_BACKWARD);
        for (int j = 0; j < m->ps.units[u].n; j++) {
            int i = m->ps.units[u].idx[j];
            Param *p = &m->ps.p[i];
            for (int64_t e = 0; e < p->g.n; e++)
                buf[e] = grad_value(me, i, e);
            put(p->g, buf);
        }
        hook(m, u, UNIT_AFTER_BACKWARD);
    }
    zero_reduce_grads(z);
}

/* Each parameter's owned rows: the partition of its group, and the sum of
 * its group's gradients there; the norm counts every element of each
 * expert once over the world. */
static int reduced_right(Model *m, Zero *z, int me, int n, int ep, int block,
                         const char **why)
{
    int ok = 1;
    double want_sq = 0.0;
    for (int i = 0; i < m->ps.n; i++) {
        const Param *p = &m->ps.p[i];
        int64_t r0, rows, u0, urows;
        zero_partition(p->lrows, p->expert ? n / ep : n, p->expert ? me / ep : block, &r0, &rows);
        if (p->zrow0 != r0 || p->zrows != rows)
            *why = "an owned block is not its group's partition", ok = 0;
        zero_update_rows(z, p, &u0, &urows);
        float *og = malloc(sizeof *og * (size_t)(p->og.n + 1));
        ops_copy((ops_tensor){og, p->og.n, OPS_F32, OPS_CPU}, p->og);
        for (int64_t e = 0; e < p->zrows * p->lcols; e++)
            if (og[(p->zrow0 - u0) * p->lcols + e] != group_sum(p, i, p->zrow0 * p->lcols + e, me, n, ep))
                *why = "an owned gradient is not its group's sum", ok = 0;
        free(og);
        /* every element once: a dense tensor's over the world, an
         * expert's once per ep rank (each stands for other experts) */
        for (int q = 0; q < (p->expert ? ep : 1); q++)
            for (int64_t e = 0; e < params_local_numel(p); e++) {
                double g = group_sum(p, i, e, q, n, ep);
                want_sq += g * g;
            }
    }
    double norm = optim_grad_norm(m, z), want = sqrt(want_sq);
    if (fabs(norm - want) > 1e-9 * want)
        *why = "the gradient norm does not count each element once", ok = 0;
    return ok;
}

/* The weights gathered (zero 1/2 after the update, zero 3 before a unit's
 * forward) hold each row from its owner in the parameter's group. */
static int gathered_right(Model *m, Zero *z, int stage, int me, int n, int ep, const char **why)
{
    if (stage == 0)
        return 1;
    ParamSet *ps = &m->ps;
    float buf[1 << 14];
    for (int i = 0; i < ps->n; i++) {
        Param *p = &ps->p[i];
        for (int64_t e = 0; e < p->master.n; e++)
            buf[e] = weight_value(me, i, p->zrow0 * p->lcols + e);
        put(p->master, buf);
    }
    if (stage < 3)
        zero_gather_weights(z);
    int ok = 1;
    for (int u = 0; u < ps->n_units; u++) {
        hook(m, u, UNIT_BEFORE_FORWARD);
        for (int j = 0; j < ps->units[u].n; j++) {
            int i = ps->units[u].idx[j];
            Param *p = &ps->p[i];
            ops_copy((ops_tensor){buf, p->w.n, OPS_F32, OPS_CPU}, p->w);
            for (int64_t e = 0; e < p->w.n; e++)
                if (buf[e] != weight_value(owner_of(p, e / p->lcols, me, n, ep), i, e))
                    *why = "a gathered row is not its owner's", ok = 0;
        }
        hook(m, u, UNIT_AFTER_FORWARD);
    }
    return ok;
}

/* Zero `stage` over dp = world with ep of the ranks splitting the
 * (marked) experts: its sizes are zero_state_bytes with edp, its
 * reduction and gathers run over each tensor's group. */
static int experts_over_edp(int ep, int stage, int overlap, int node_size, const char **why)
{
    Config c;
    small_config(&c, stage, PRECISION_FP32, overlap, node_size);
    c.model.tie_embeddings = 0;
    c.parallel.ep = ep;
    Grid g;
    Model m;
    grid_create(&g, &c, MPI_COMM_WORLD);
    model_create(&m, &c, &g, 1);
    for (int i = 0; i < m.ps.n; i++)
        m.ps.p[i].expert = ep > 1 && marked_expert(&m.ps.p[i]);
    Zero *z = zero_create(&m, &c, &g);
    int n = g.layout.size, me = g.layout.rank, replicas = layout_replicas(&g.layout);
    ZeroLayout l = {zero_stage(stage, replicas), replicas, block_of_rank(&g),
                    OPS_F32, node_size ? layout_dp_places(&g.layout) : 0, 0, 0,
                    layout_expert_replicas(&g.layout), layout_expert_replica_rank(&g.layout)};
    l.overlap = zero_overlaps(overlap, l.stage, replicas, l.places, g.device);
    int ok = same(zero_bytes(z), zero_state_bytes(&m.ps, &l));
    if (!ok)
        *why = "zero_bytes differs from zero_state_bytes with edp";
    float *buf = malloc(sizeof *buf * (1 << 14));
    CommDp *d = comm_dp_create(&g);
    dense_order = comm_dp_order(d);
    backward(&m, z, me, buf);
    ok &= reduced_right(&m, z, me, n, ep, l.dp_rank, why);
    ok &= gathered_right(&m, z, l.stage, me, n, ep, why);
    comm_dp_destroy(d);
    free(buf);
    zero_destroy(z);
    model_destroy(&m);
    grid_destroy(&g);
    return ok;
}

int main(int argc, char **argv)
{
    tap_init(&argc, &argv);
    int n = tap_size();
    tap_plan(11);
    tap_ok(zero_stage(3, 1) == 0 && zero_stage(0, 1) == 0 && zero_stage(2, 4) == 2 &&
           zero_stage(0, 4) == 0,
           "zero_stage: one DP rank runs stage 0 whatever the config says");
    tap_ok(zero_overlaps(1, 1, 2, 0, OPS_CPU) && zero_overlaps(1, 0, 2, 0, OPS_CPU) &&
           !zero_overlaps(0, 1, 2, 0, OPS_CPU) && !zero_overlaps(1, 2, 2, 0, OPS_CPU) &&
           !zero_overlaps(1, 1, 1, 0, OPS_CPU) && !zero_overlaps(1, 1, 2, 1, OPS_CPU) &&
           zero_overlaps(1, 1, 2, 0, OPS_CUDA) && zero_overlaps(1, 0, 2, 0, OPS_CUDA) &&
           !zero_overlaps(1, 2, 2, 0, OPS_CUDA) && !zero_overlaps(1, 1, 2, 1, OPS_CUDA),
           "zero_overlaps: zero 0/1, dp > 1, one level, when asked, on the CPU and GPUs alike");
    int ok = 1, cases = 0;
    for (int dp = 1; dp <= n; dp *= 2)
        if (n % dp == 0)
            ok &= every_layout(dp, &cases);
    tap_ok(ok, "zero_bytes of a real Zero is zero_state_bytes: %d layouts on DP groups up to %d",
           cases, n);
    tap_ok(n < 2 || shards_add_up(), "zero 1: the ranks' optimizer state adds up to zero 0's");
    /* two pretended nodes of two DP ranks: DP ranks 1 and 2 own blocks 2
     * and 1 (place in node first), which a vocabulary of 5 rows cuts into
     * 2, 2, 1 and 0 rows, so the sizes tell whose block is whose; the
     * two-level reduction adds only a scratch for one parameter's share in
     * the node (of the largest, the MLP's 4C x C: its place's two blocks,
     * half), and does not overlap */
    int two_level = 1;
    if (n == 4) {
        Config c;
        ZeroBytes hier, flat;
        small_config(&c, 1, PRECISION_FP32, 1, 2);
        c.model.vocab_size = 5;
        two_level &= real_equals_pure(MPI_COMM_WORLD, &c, 2, &hier);
        c.parallel.node_size = 0;
        c.parallel.overlap = 0;
        two_level &= real_equals_pure(MPI_COMM_WORLD, &c, 0, &flat);
        int64_t scratch = 4 * 32 * 32 / 2 * (int64_t)sizeof(float);
        int64_t wte_rows[4] = {2, 2, 1, 0}, flat_rows[4] = {2, 2, 1, 0};
        int r = tap_rank(), block = r == 1 ? 2 : r == 2 ? 1 : r;
        int64_t wte_diff = (wte_rows[block] - flat_rows[r]) * 32 * (int64_t)sizeof(float);
        two_level &= hier.grads == flat.grads + scratch + wte_diff
                     && hier.weights == flat.weights;
        if (!two_level)
            tap_diag("rank %d: two levels %lld, one %lld bytes of gradients", r,
                     (long long)hier.grads, (long long)flat.grads);
    }
    tap_ok(two_level, "node_size 2 on 4 ranks: each rank owns the block at its place in the "
           "reduction's order, and two levels add a scratch for one parameter's share in "
           "the node, no overlap");
    tap_ok(shards_over_replicas(n), "cp 2 to %d: ZeRO 1 and 3 shard over dp x cp replicas, as "
           "dp %d alone does%s", n, n, n < 2 ? " (nothing to cut on one rank)" : "");
    tap_ok(offload_moves_optimizer(),
           "offload: master and moments to the host, with the staging; the device keeps none");
    for (int ep = 1; ep <= n; ep *= 2) {
        if (n % ep)
            continue;
        const char *why = "";
        ok = 1;
        for (int stage = 0; stage <= 3; stage++)
            for (int overlap = 0; overlap <= 1; overlap++)
                ok &= experts_over_edp(ep, stage, overlap, 0, &why);
        MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
        tap_ok(ok, "ep %d on %d ranks, zero 0-3 with and without overlap: experts' state sized, "
               "partitioned, reduced and gathered over their %d ranks, dense over %d; the norm "
               "counts each element once%s%s", ep, n, n / ep, n, ok ? "" : ": ", why);
    }
    for (int ep = n * 2; ep <= 4; ep *= 2)
        tap_ok(1, "ep %d # SKIP needs %d ranks", ep, ep);
    /* two pretended nodes of two: the dense tensors reduce in two levels,
     * the experts flat over their edp ranks (0 and 2, 1 and 3: one per
     * node) */
    const char *why = "";
    ok = n != 4 || (experts_over_edp(2, 0, 0, 2, &why) && experts_over_edp(2, 1, 0, 2, &why)
                    && experts_over_edp(2, 3, 0, 2, &why));
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    tap_ok(ok, "node_size 2, ep 2, zero 0, 1 and 3: dense tensors in two levels, experts flat "
           "over edp%s%s%s", n != 4 ? " # SKIP needs 4 ranks" : "", ok ? "" : ": ", why);
    return tap_done();
}
