/*
 * comm_dp.c - the reduction over data parallelism; see comm_dp.h. Its
 * group is dp_comm, the replicas (dp x cp ranks, layout_replicas): a
 * "DP rank" here is a replica rank (layout_replica_rank), which is the DP
 * rank itself where cp = 1.
 *
 * With two levels, position layout_dp_block(l, n, nodes) = l * nodes + n
 * of the packing order holds the DP rank at place l of node n (its dp_node
 * and dp_cross ranks). The node level then sees, at place l, the blocks of
 * every node's place-l rank: that place's share of the buffer. The cross
 * level splits that share into one block per node.
 *
 * Where [parallel] node_size pretends the nodes, the grid's node map must
 * be the one layout_dp_spot and layout_dp_places count for plan: checked
 * here, so plan's figures are the trainer's.
 */
#include "comm_dp.h"

#include <stdlib.h>

#include "alloc.h"
#include "fail.h"
#include "layout.h"

struct CommDp {
    const Grid *g;
    int two_level;
    int nodes, places;        /* two levels: dp_cross and dp_node sizes */
    int *order;               /* DP ranks in packing order */
    int *node_counts, *cross_counts;  /* per dp_node / dp_cross rank */
};

static int *ints(int n)
{
    return TRI_CALLOC((size_t)(n > 0 ? n : 1), sizeof(int), "the DP reduction's tables");
}

/* Each DP rank's node, dp_node rank and dp_cross rank, DP rank-major. */
static int *dp_places(const Grid *g)
{
    int mine[3] = {g->node, g->dp_node_rank, g->dp_cross_rank};
    int dp = layout_replicas(&g->layout);
    int *all = ints(3 * dp), *counts = ints(dp);
    for (int r = 0; r < dp; r++)
        counts[r] = 3;
    comm_allgather(g, COMM_DP, (ops_tensor){mine, 3, OPS_I32, OPS_CPU},
                   (ops_tensor){all, 3 * (int64_t)dp, OPS_I32, OPS_CPU}, counts);
    free(counts);
    return all;
}

/* The node map of the grid's pretended nodes (all: dp_places's) against
 * the one the layout counts (layout.h): each DP rank's node and place,
 * over two levels its dp_cross rank and the ranks per node. A mismatch is
 * a programming error in one of the two. */
static void check_pretended_nodes(const CommDp *d, const int *all)
{
    const Layout *l = &d->g->layout;
    int ok = layout_dp_places(l) == (d->two_level ? d->places : 0);
    for (int r = 0; r < layout_replicas(l) && ok; r++) {
        LayoutDpSpot s = layout_dp_spot(l, r);
        ok = all[3 * r] - all[0] == s.node && all[3 * r + 1] == s.place
             && (!d->two_level || all[3 * r + 2] == s.node);
    }
    if (!ok)
        fail_abort("the grid's pretended nodes differ from layout_dp_spot's and "
                   "layout_dp_places's", __FILE__, __LINE__);
}

CommDp *comm_dp_create(const Grid *g)
{
    CommDp *d = TRI_CALLOC(1, sizeof *d, "the DP reduction");
    int dp = layout_replicas(&g->layout);
    d->g = g;
    d->order = ints(dp);
    d->node_counts = ints(dp);
    d->cross_counts = ints(dp);
    for (int r = 0; r < dp; r++)
        d->order[r] = r;
    if (dp == 1)
        return d;
    int *all = dp_places(g), *node_of = ints(dp);
    for (int r = 0; r < dp; r++)
        node_of[r] = all[3 * r];
    d->two_level = layout_dp_two_level(node_of, dp);
    d->nodes = g->dp_cross_size;
    d->places = g->dp_node_size;
    for (int r = 0; r < dp && d->two_level; r++) {
        int place = all[3 * r + 1], node = all[3 * r + 2];
        if (place >= d->places || node >= d->nodes || d->nodes * d->places != dp)
            fail_abort("the dp_node and dp_cross groups do not tile the DP group",
                       __FILE__, __LINE__);
        d->order[layout_dp_block(place, node, d->nodes)] = r;
    }
    if (g->layout.node_size > 0)
        check_pretended_nodes(d, all);
    free(node_of);
    free(all);
    return d;
}

void comm_dp_destroy(CommDp *d)
{
    if (!d)
        return;
    free(d->order);
    free(d->node_counts);
    free(d->cross_counts);
    free(d);
}

int comm_dp_two_level(const CommDp *d) { return d->two_level; }

const int *comm_dp_order(const CommDp *d) { return d->order; }

/* n elements of dtype at the start of the scratch buffer, which is sized
 * in fp32 elements and holds fp32 or compute-dtype data. */
static ops_tensor scratch_as(ops_tensor scratch, ops_dtype dtype, int64_t n)
{
    if (n * (int64_t)ops_dtype_size(dtype) > scratch.n * (int64_t)ops_dtype_size(scratch.dtype))
        fail_abort("comm_dp: a node-level share larger than the caller's scratch",
                   __FILE__, __LINE__);
    ops_tensor t = {scratch.data, n, dtype, scratch.device};
    return t;
}

/* Element counts per rank of the two levels, from counts per DP rank: a
 * place's share is that place's block of every node. */
static void level_counts(CommDp *d, const int *counts)
{
    for (int l = 0; l < d->places; l++) {
        d->node_counts[l] = 0;
        for (int n = 0; n < d->nodes; n++)
            d->node_counts[l] += counts[d->order[l * d->nodes + n]];
    }
    for (int n = 0; n < d->nodes; n++)
        d->cross_counts[n] = counts[d->order[d->g->dp_node_rank * d->nodes + n]];
}

void comm_dp_reduce_scatter(CommDp *d, ops_tensor send, ops_tensor recv,
                            const int *counts, ops_tensor scratch)
{
    const Grid *g = d->g;
    if (!d->two_level) {
        comm_reduce_scatter(g, COMM_DP, send, recv, counts);
        return;
    }
    level_counts(d, counts);
    ops_tensor share = scratch_as(scratch, send.dtype, d->node_counts[g->dp_node_rank]);
    comm_reduce_scatter(g, COMM_DP_NODE, send, share, d->node_counts);
    comm_reduce_scatter(g, COMM_DP_CROSS, share, recv, d->cross_counts);
}

void comm_dp_allgather(CommDp *d, ops_tensor send, ops_tensor recv,
                       const int *counts, ops_tensor scratch)
{
    const Grid *g = d->g;
    if (!d->two_level) {
        comm_allgather(g, COMM_DP, send, recv, counts);
        return;
    }
    level_counts(d, counts);
    ops_tensor share = scratch_as(scratch, send.dtype, d->node_counts[g->dp_node_rank]);
    comm_allgather(g, COMM_DP_CROSS, send, share, d->cross_counts);
    comm_allgather(g, COMM_DP_NODE, share, recv, d->node_counts);
}

/* Place k's part of n elements cut into `parts` near-equal runs, the last
 * one short (as zero_partition cuts rows). */
static int part_count(int64_t n, int parts, int k)
{
    int64_t block = (n + parts - 1) / parts;
    int64_t start = block * k < n ? block * k : n;
    int64_t end = start + block < n ? start + block : n;
    return (int)(end - start);
}

void comm_dp_allreduce(CommDp *d, ops_tensor buf, ops_tensor scratch)
{
    const Grid *g = d->g;
    if (!d->two_level) {
        comm_allreduce(g, COMM_DP, buf, buf.n, COMM_SUM);
        return;
    }
    for (int l = 0; l < d->places; l++)
        d->node_counts[l] = part_count(buf.n, d->places, l);
    ops_tensor share = scratch_as(scratch, buf.dtype, d->node_counts[g->dp_node_rank]);
    comm_reduce_scatter(g, COMM_DP_NODE, buf, share, d->node_counts);
    comm_allreduce(g, COMM_DP_CROSS, share, share.n, COMM_SUM);
    comm_allgather(g, COMM_DP_NODE, share, buf, d->node_counts);
}
