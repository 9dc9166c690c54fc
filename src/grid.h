/*
 * grid.h - the process grid: world = pp x dp x tp, TP innermost.
 *
 * World rank r sits at tp_rank = r % tp, dp_rank = (r / tp) % dp and
 * pp_stage = r / (tp * dp), so a TP group (the chattiest) is a run of
 * consecutive ranks and lands on one node, then DP, then PP (Megatron's
 * order). Each DP group is cut into node-local groups (dp_node) and
 * cross-node groups (dp_cross, one rank per node), over which comm_dp.h
 * reduces in two levels when grid_dp_two_level says so. [parallel]
 * node_size pretends a node holds that many world ranks, so one machine
 * can exercise the multi-node paths.
 */
#ifndef TRI_SRC_GRID_H
#define TRI_SRC_GRID_H

#include <mpi.h>
#include <stdio.h>

#include "config.h"
#include "kernels/ops.h"

typedef struct {
    int rank, size;              /* world */
    int dp, pp, tp;              /* group sizes */
    int dp_rank, pp_stage, tp_rank;
    int node, n_nodes;           /* node index and count, real or pretended */
    int local_rank, local_size;  /* world ranks on this node, real or pretended */
    int host_rank, host_size;    /* world ranks on this machine (the
                                    shared-memory split, never pretended):
                                    GPU choice and memory share */
    int dp_node_rank, dp_node_size;   /* within dp_node */
    int dp_cross_rank, dp_cross_size; /* within dp_cross */
    MPI_Comm world;
    MPI_Comm tp_comm;            /* same dp_rank, pp_stage */
    MPI_Comm dp_comm;            /* same tp_rank, pp_stage */
    MPI_Comm pp_comm;            /* same tp_rank, dp_rank: the pipeline */
    MPI_Comm dp_node;            /* DP ranks on this node */
    MPI_Comm dp_cross;           /* DP ranks with this dp_node_rank, one per node */
    MPI_Comm embed_comm;         /* first and last stage (tied embeddings) */
    MPI_Comm kv_comm;            /* TP ranks holding the same replicated
                                    key/value heads (llama); else NULL */
    MPI_Comm node_comm;          /* world ranks on this node */
    MPI_Comm host_comm;          /* world ranks on this machine */
    ops_device device;           /* where this rank computes (device.c) */
} Grid;

/* Checks that the layout of cfg fits a world of `world` ranks: dp*pp*tp,
 * divisibility by tp, layers per stage, node_size. Writes the reason on err
 * and returns non-zero. Not collective. */
int grid_check(const Config *cfg, int world, FILE *err);

/* The DP size of a world of `world` ranks: [parallel] dp, or world /
 * (pp * tp) when dp = 0. The one place that rule lives: the trainer's grid
 * and `trident plan` resolve it alike. Not collective. */
int grid_resolve_dp(const ParallelConfig *p, int world);

/* Builds every communicator. Collective on world; cfg must have passed
 * grid_check; its dp is grid_resolve_dp's. */
void grid_create(Grid *g, const Config *cfg, MPI_Comm world);
/* Frees the communicators grid_create built (MPI_Comm_free is collective
 * on each). Collective on world. */
void grid_destroy(Grid *g);

/* A grid of the world alone, for the calls made before the layout is known
 * (sharing the config from rank 0): rank, size and world are set, every
 * other group is absent, so comm calls may name COMM_WORLD only. Builds
 * nothing, so there is nothing to destroy. Not collective. */
void grid_world_only(Grid *g, MPI_Comm world);

/* World rank of the rank at (pp_stage, dp_rank, tp_rank). Not collective. */
int grid_world_rank(const Grid *g, int pp_stage, int dp_rank, int tp_rank);

/* Rank 0 prints the layout and which world ranks form each group.
 * Not collective. */
void grid_print(const Grid *g, FILE *out);

/* Layers [*first, *first + *count) that stage s owns: balanced, the earlier
 * stages taking one more when n_layer % pp != 0. Not collective. */
void grid_stage_layers(int n_layer, int pp, int stage, int *first, int *count);

/* Layers [*first, *first + *count) of chunk `chunk` of stage s when every
 * stage holds v chunks (the interleaved schedule): virtual stage
 * chunk * pp + s of pp * v, Megatron's assignment, so stage 0 holds layers
 * 0.., then pp*L.., for L layers a chunk. With v = 1 it is
 * grid_stage_layers. Not collective. */
void grid_chunk_layers(int n_layer, int pp, int v, int stage, int chunk, int *first,
                       int *count);

/* Whether a DP group reduces in two levels (inside each node on dp_node,
 * then across nodes on dp_cross; comm_dp.h): more than one node, more than
 * one DP rank per node, and the same number on every node. node_of[r] is
 * the node of DP rank r, in any numbering. The one rule that the trainer
 * (from the grid's real or pretended nodes) and plan (from node_size)
 * both apply. Not collective. */
int grid_dp_two_level(const int *node_of, int dp);

#endif
