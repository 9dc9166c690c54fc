/*
 * comm_dp.h - the reduction over data parallelism: flat, or in two levels.
 *
 * Its group is the grid's dp_comm: the replicas, every rank that holds the
 * same weights (dp x cp of them, layout_replicas), so a "DP rank" below is
 * a replica rank (layout_replica_rank); with cp = 1 they are the DP ranks.
 *
 * Across nodes, DP traffic runs in two levels (doc/design.md, Communication):
 * a reduce-scatter inside the node (dp_node), then one across nodes among
 * the ranks with the same place in their node (dp_cross), so the slow
 * links carry each block once; all-gathers run the same two levels in
 * reverse, and an all-reduce is a reduce-scatter in the node, an
 * all-reduce across nodes and an all-gather in the node.
 * layout_dp_two_level says when; with one node, one rank per node, or nodes
 * of unequal counts, every call is one flat collective over dp.
 *
 * Callers say what to reduce; this says how. A buffer cut into one block
 * per DP rank (ZeRO's owned rows) must list the blocks in comm_dp_order:
 * DP rank order when flat; with two levels grouped by place in the node,
 * then by node, so that each level's collective finds its blocks
 * contiguous. Each rank still ends with exactly its own block.
 *
 * The two-level path needs a scratch buffer for this rank's node-level
 * share. The caller allocates it (so it counts in the caller's memory) on
 * the buffers' device, of at least as many bytes as the largest buffer
 * reduced in fp32, and passes it to every call; flat, it is not used and
 * may be OPS_NONE.
 */
#ifndef TRI_SRC_COMM_DP_H
#define TRI_SRC_COMM_DP_H

#include "comm.h"
#include "grid.h"
#include "ops.h"

typedef struct CommDp CommDp;

/* Learns the node of every rank of g's DP group and decides flat or two
 * levels. Collective on dp. */
CommDp *comm_dp_create(const Grid *g);
/* Not collective. */
void comm_dp_destroy(CommDp *d);

/* Non-zero when the reduction runs in two levels. Not collective. */
int comm_dp_two_level(const CommDp *d);
/* order[k] is the DP rank whose block comes k-th in a packed buffer
 * (dp entries). Not collective. */
const int *comm_dp_order(const CommDp *d);

/* Sums send over DP. send holds every DP rank's block, counts[r] fp32
 * elements for DP rank r, in comm_dp_order; this rank's summed block lands
 * in recv. Collective on dp. */
void comm_dp_reduce_scatter(CommDp *d, ops_tensor send, ops_tensor recv,
                            const int *counts, ops_tensor scratch);
/* recv = every DP rank's block (counts[r] elements of send's dtype for DP
 * rank r), in comm_dp_order; send is this rank's, and may be its block of
 * recv (in place). Collective on dp. */
void comm_dp_allgather(CommDp *d, ops_tensor send, ops_tensor recv,
                       const int *counts, ops_tensor scratch);
/* buf (fp32) summed over DP, in place. Collective on dp. */
void comm_dp_allreduce(CommDp *d, ops_tensor buf, ops_tensor scratch);

#endif
