/*
 * t_zero.c - ZeRO's sizes: what a real Zero allocates and reports equals
 * zero_state_bytes of its table and layout, on DP groups of 1, 2 and 4
 * ranks, every stage, fp32 and bf16, with and without overlap, flat and
 * two-level, and over dp x cp replicas; the owned shards add up to the
 * whole; [train] offload moves
 * the optimizer state, and nothing else, to host memory; and the rules
 * that choose the stage a rank runs and whether it overlaps.
 */
#include <stdio.h>
#include <string.h>

#include "comm_dp.h"
#include "config.h"
#include "config_load.h"
#include "grid.h"
#include "model.h"
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
                    model_dtype(c->train.precision), places, 0, 0};
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
                            0, 0, 0};
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

int main(int argc, char **argv)
{
    tap_init(&argc, &argv);
    int n = tap_size();
    tap_plan(7);
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
    return tap_done();
}
