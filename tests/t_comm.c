/*
 * t_comm.c - comm's host-value helpers on the world (before and after the
 * grid exists), and comm_dp's reductions: with pretended nodes of two
 * ranks they run in two levels and give what one flat collective gives;
 * with cp > 1 they run over the replicas, dp x cp ranks. The all-to-all
 * (expert parallelism's) moves uneven and empty blocks to their peers.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "comm_dp.h"
#include "config.h"
#include "config_load.h"
#include "grid.h"
#include "tap.h"

static void layout(Config *cfg, int node_size, int cp)
{
    config_defaults(cfg);
    cfg->model.n_layer = 8;
    cfg->model.n_head = 8;
    cfg->model.n_embd = 64;
    cfg->parallel.dp = 0;
    cfg->parallel.pp = cfg->parallel.tp = 1;
    cfg->parallel.cp = cp;
    cfg->parallel.node_size = node_size;
}

static int scalars(const Grid *g)
{
    int n = g->layout.size, r = g->layout.rank, ok = 1;
    int i[3] = {r + 1, r + 1, r + 1};
    comm_allreduce_scalars(g, COMM_WORLD, &i[0], 1, COMM_INT, COMM_SUM);
    comm_allreduce_scalars(g, COMM_WORLD, &i[1], 1, COMM_INT, COMM_MAX);
    comm_allreduce_scalars(g, COMM_WORLD, &i[2], 1, COMM_INT, COMM_MIN);
    ok &= i[0] == n * (n + 1) / 2 && i[1] == n && i[2] == 1;
    int64_t big = (int64_t)1 << 40;
    comm_allreduce_scalars(g, COMM_WORLD, &big, 1, COMM_INT64, COMM_SUM);
    ok &= big == (int64_t)n << 40;
    uint64_t wrap[2] = {UINT64_MAX, (uint64_t)r};  /* sums wrap: -n mod 2^64 */
    comm_allreduce_scalars(g, COMM_WORLD, wrap, 2, COMM_UINT64, COMM_SUM);
    ok &= wrap[0] == (uint64_t)0 - (uint64_t)n && wrap[1] == (uint64_t)(n * (n - 1) / 2);
    double d[2] = {0.5 * r, 0.25 * r};
    comm_allreduce_scalars(g, COMM_WORLD, d, 1, COMM_DOUBLE, COMM_SUM);
    comm_allreduce_scalars(g, COMM_WORLD, d + 1, 1, COMM_DOUBLE, COMM_MAX);
    ok &= d[0] == 0.25 * n * (n - 1) && d[1] == 0.25 * (n - 1);
    return ok;
}

static int bytes(const Grid *g)
{
    int n = g->layout.size, r = g->layout.rank, last = n - 1;
    char text[32] = "";
    if (r == last)
        strcpy(text, "from the last rank");
    comm_bcast_bytes(g, COMM_WORLD, text, sizeof text, last);
    int ok = strcmp(text, "from the last rank") == 0;
    double mine[2] = {r, -r};
    double *all = r == last ? calloc(2 * (size_t)n, sizeof *all) : NULL;
    comm_gather_bytes(g, COMM_WORLD, mine, sizeof mine, all, last);
    for (int k = 0; all && k < n; k++)
        ok &= all[2 * k] == k && all[2 * k + 1] == -k;
    free(all);
    return ok;
}

static ops_tensor host(float *p, int64_t n)
{
    return (ops_tensor){p, n, OPS_F32, OPS_CPU};
}

/* Small whole numbers, so every sum is exact in fp32. */
static float value(int sender, int owner, int j)
{
    return (float)((sender + 1) * 100 + owner * 10 + j);
}

/* Each DP rank r (a replica: dp x cp of them) owns a block of r + 1
 * elements. */
static int dp_reductions(const Grid *g, CommDp *d)
{
    int dp = layout_replicas(&g->layout), me = layout_replica_rank(&g->layout);
    int total = dp * (dp + 1) / 2, ok = 1;
    const int *order = comm_dp_order(d);
    int *counts = calloc((size_t)dp, sizeof *counts);
    float *send = calloc((size_t)total, sizeof *send), *recv = calloc((size_t)total, sizeof *recv);
    float *scratch = calloc((size_t)total, sizeof *scratch);
    for (int r = 0; r < dp; r++)
        counts[r] = r + 1;
    int off = 0;
    for (int k = 0; k < dp; k++)
        for (int j = 0; j < counts[order[k]]; j++)
            send[off++] = value(me, order[k], j);
    comm_dp_reduce_scatter(d, host(send, total), host(recv, counts[me]), counts,
                           host(scratch, total));
    for (int j = 0; j < counts[me]; j++) {
        float want = 0.0f;
        for (int s = 0; s < dp; s++)
            want += value(s, me, j);
        ok &= recv[j] == want;
    }
    for (int j = 0; j < counts[me]; j++)
        send[j] = value(0, me, j);
    comm_dp_allgather(d, host(send, counts[me]), host(recv, total), counts,
                      host(scratch, total));
    off = 0;
    for (int k = 0; k < dp; k++)
        for (int j = 0; j < counts[order[k]]; j++)
            ok &= recv[off++] == value(0, order[k], j);
    for (int j = 0; j < total; j++)
        send[j] = (float)((me + 1) * j);
    comm_dp_allreduce(d, host(send, total), host(scratch, total));
    for (int j = 0; j < total; j++)
        ok &= send[j] == (float)(j * dp * (dp + 1) / 2);
    free(counts);
    free(send);
    free(recv);
    free(scratch);
    return ok;
}

/* comm_dp on a grid of cp context-parallel ranks with nodes of node_size
 * ranks (0: the real ones): the decision is layout_dp_two_level's over
 * the replicas, the reductions are right. */
static int dp_on_nodes(int node_size, int cp, int *two_level)
{
    Config cfg;
    layout(&cfg, node_size, cp);
    Grid g;
    grid_create(&g, &cfg, MPI_COMM_WORLD);
    CommDp *d = comm_dp_create(&g);
    int replicas = layout_replicas(&g.layout);
    int *node_of = calloc((size_t)replicas, sizeof *node_of);
    for (int r = 0; r < replicas; r++)
        node_of[r] = node_size > 0 ? layout_replica_world_rank(&g.layout, 0, r, 0) / node_size : 0;
    *two_level = comm_dp_two_level(d);
    int ok = *two_level == layout_dp_two_level(node_of, replicas) || node_size == 0;
    ok &= replicas == g.layout.size && comm_size(&g, COMM_DP) == replicas;
    ok &= dp_reductions(&g, d);
    free(node_of);
    comm_dp_destroy(d);
    grid_destroy(&g);
    return ok;
}

/* bf16 blocks through the reduce-scatter (summed in fp32 on the CPU
 * path, as the all-reduce is) and back through the all-gather: sequence
 * parallelism's pair. Small integers, so every sum is exact in bf16. */
static int bf16_scatter_gather(const Grid *g)
{
    int n = g->layout.size, r = g->layout.rank, per = 3, total = n * per, ok = 1;
    int counts[n];
    float f[total];
    for (int k = 0; k < n; k++)
        counts[k] = per;
    for (int i = 0; i < total; i++)
        f[i] = (float)(i + r);
    ops_tensor send = ops_alloc(OPS_BF16, OPS_CPU, total), mine = ops_alloc(OPS_BF16, OPS_CPU, per);
    ops_tensor all = ops_alloc(OPS_BF16, OPS_CPU, total);
    ops_cast(send, host(f, total));
    comm_reduce_scatter(g, COMM_WORLD, send, mine, counts);
    comm_allgather(g, COMM_WORLD, mine, all, counts);
    ops_cast(host(f, total), all);
    for (int i = 0; i < total; i++)
        ok &= f[i] == (float)(n * i + n * (n - 1) / 2);
    ops_free(&send);
    ops_free(&mine);
    ops_free(&all);
    return ok;
}

/* ZeRO's all-gather of a tensor where it lives: each rank's block of
 * uneven length (rank r has r + 1 elements, rank 0 none when there are
 * several) is already in place in recv, and the rest arrives around it. */
static int allgather_in_place(const Grid *g, ops_dtype dtype)
{
    int n = g->layout.size, r = g->layout.rank, total = 0, ok = 1;
    int counts[n], start[n];
    for (int k = 0; k < n; k++) {
        counts[k] = n > 1 && k == 0 ? 0 : k + 1;
        start[k] = total;
        total += counts[k];
    }
    float f[total > 0 ? total : 1];
    for (int i = 0; i < total; i++)
        f[i] = i >= start[r] && i < start[r] + counts[r] ? (float)(i + 1) : -1.0f;
    ops_tensor all = ops_alloc(dtype, OPS_CPU, total);
    ops_cast(all, host(f, total));
    comm_allgather(g, COMM_WORLD, ops_view(all, start[r], counts[r]), all, counts);
    ops_cast(host(f, total), all);
    for (int i = 0; i < total; i++)
        ok &= f[i] == (float)(i + 1);
    ops_free(&all);
    return ok;
}

/* Rank r sends peer j a2a_count(r, j) elements: uneven, and zero for
 * some pairs (every pair at some rank count), itself included. */
static int64_t a2a_count(int r, int j)
{
    return (r + 2 * j) % 3;
}

/* An element's value names its sender, receiver and place (i < 3): small
 * enough to be exact in bf16 up to 9 ranks. */
static float a2a_value(int sender, int receiver, int64_t i)
{
    return (float)((sender * tap_size() + receiver) * 3 + i);
}

/* comm_alltoallv over the world in dtype (fp32, bf16: small integers,
 * exact), every block where its prefix sum says, and a receive buffer
 * longer than the counts keeps its tail. */
static int alltoallv_world(const Grid *g, ops_dtype dtype)
{
    int n = g->layout.size, me = g->layout.rank, ok = 1;
    int64_t sc[n], rc[n], out = 0, in = 0;
    for (int j = 0; j < n; j++) {
        sc[j] = a2a_count(me, j);
        rc[j] = a2a_count(j, me);
        out += sc[j];
        in += rc[j];
    }
    float f[out + 1], got[in + 2];
    int64_t k = 0;
    for (int j = 0; j < n; j++)
        for (int64_t i = 0; i < sc[j]; i++)
            f[k++] = a2a_value(me, j, i);
    ops_tensor send = ops_alloc(dtype, OPS_CPU, out + 1), recv = ops_alloc(dtype, OPS_CPU, in + 2);
    for (int64_t i = 0; i < in + 2; i++)
        got[i] = -1.0f;
    ops_cast(ops_view(send, 0, out), host(f, out));
    ops_cast(recv, host(got, in + 2));
    comm_alltoallv(g, COMM_WORLD, send, sc, recv, rc);
    ops_cast(host(got, in + 2), recv);
    k = 0;
    for (int j = 0; j < n; j++)
        for (int64_t i = 0; i < rc[j]; i++)
            ok &= got[k++] == a2a_value(j, me, i);
    ok &= got[in] == -1.0f && got[in + 1] == -1.0f;
    ops_free(&send);
    ops_free(&recv);
    return ok;
}

/* comm_alltoall_int64: two values per peer, each naming sender and
 * receiver, beyond 32 bits. */
static int alltoall_counts(const Grid *g)
{
    int n = g->layout.size, me = g->layout.rank, ok = 1;
    int64_t send[2 * n], recv[2 * n];
    for (int j = 0; j < n; j++) {
        send[2 * j] = ((int64_t)me << 33) + j;
        send[2 * j + 1] = -(int64_t)(me * n + j);
    }
    comm_alltoall_int64(g, COMM_WORLD, send, recv, 2);
    for (int j = 0; j < n; j++)
        ok &= recv[2 * j] == ((int64_t)j << 33) + me && recv[2 * j + 1] == -(int64_t)(j * n + me);
    return ok;
}

int main(int argc, char **argv)
{
    tap_init(&argc, &argv);
    int n = tap_size();
    tap_plan(12);
    Grid w;
    grid_world_only(&w, MPI_COMM_WORLD);
    tap_ok(w.layout.size == n && w.layout.rank == tap_rank() && comm_size(&w, COMM_WORLD) == n
           && comm_size(&w, COMM_DP) == 0, "a world-only grid has the world and no other group");
    tap_ok(scalars(&w) && bytes(&w), "scalars and bytes on a world-only grid");
    Config cfg;
    layout(&cfg, 0, 1);
    Grid g;
    grid_create(&g, &cfg, MPI_COMM_WORLD);
    tap_ok(scalars(&g) && bytes(&g), "scalars and bytes on a full grid");
    float x[2] = {(float)tap_rank(), -(float)tap_rank()};
    comm_allreduce(&g, COMM_WORLD, host(x, 2), 2, COMM_MIN);
    tap_ok(n == 1 || (x[0] == 0.0f && x[1] == -(float)(n - 1)), "a tensor all-reduce with MIN");
    tap_ok(bf16_scatter_gather(&g), "bf16 blocks reduce-scattered and all-gathered over %d ranks",
           n);
    tap_ok(allgather_in_place(&g, OPS_F32) && allgather_in_place(&g, OPS_BF16),
           "fp32 and bf16 blocks of uneven length all-gathered in place over %d ranks", n);
    tap_ok(alltoallv_world(&g, OPS_F32) && alltoallv_world(&g, OPS_BF16),
           "fp32 and bf16 all-to-all over %d ranks: uneven and zero counts, each block in place",
           n);
    tap_ok(alltoall_counts(&g), "int64 counts exchanged all-to-all over %d ranks", n);
    grid_destroy(&g);
    int two = 0;
    tap_ok(dp_on_nodes(0, 1, &two), "dp %d on this machine: %s, blocks summed and gathered", n,
           two ? "two levels" : "flat");
    two = 0;
    int ok = n % 2 != 0 || dp_on_nodes(2, 1, &two);
    tap_ok(ok && two == (n >= 4 && n % 2 == 0),
           "dp %d on pretended nodes of 2: %s", n,
           n % 2 ? "not run (odd world)" : two ? "two levels, blocks summed and gathered"
                                               : "flat, blocks summed and gathered");
    /* context parallelism: the reduction's group is every cp rank of
     * every dp rank, flat and over two levels */
    two = 0;
    ok = n % 2 != 0 || dp_on_nodes(0, 2, &two);
    tap_ok(ok, "dp %d x cp 2 on this machine: the replicas' blocks summed and gathered%s", n / 2,
           n % 2 ? " (not run: odd world)" : "");
    two = 0;
    ok = n % 4 != 0 || dp_on_nodes(2, 2, &two);
    tap_ok(ok && two == (n % 4 == 0),
           "dp %d x cp 2 on pretended nodes of 2: %s", n / 2,
           n % 4 ? "not run (world not a multiple of 4)"
                 : two ? "two levels over the replicas, blocks summed and gathered" : "flat");
    return tap_done();
}
