/*
 * grid.h - the process grid: a rank's Layout (layout.h: the sizes, the
 * rank order, its place) and the communicators and device that make it
 * real.
 *
 * The layout is a member, g->layout, rather than fields of Grid's own:
 * what only needs the arithmetic (the parameter table, plan, checkpoint
 * checks) takes a const Layout *, which a caller holding a grid passes as
 * &g->layout and one that is not that rank builds with layout_at, so no
 * one makes a grid without communicators to reach it. The rest of Grid is
 * what MPI finds at start-up: the nodes (real or pretended), the machine's
 * ranks, and the groups. dp_comm is the replica group: every rank of
 * this stage and TP rank, dp x cp of them (layout_replicas), which hold
 * the same weights and reduce their gradients together; with cp = 1 it is
 * the DP group. Each replica group is cut into node-local groups
 * (dp_node) and cross-node groups (dp_cross, one rank per node), over which
 * comm_dp.h reduces in two levels when layout_dp_two_level says so.
 * [parallel] node_size pretends a node holds that many world ranks, so one
 * machine can exercise the multi-node paths.
 */
#ifndef TRI_SRC_GRID_H
#define TRI_SRC_GRID_H

#include <mpi.h>
#include <stdio.h>

#include "config.h"
#include "layout.h"
#include "ops.h"

typedef struct {
    Layout layout;               /* sizes and this rank's place (layout.h) */
    int node, n_nodes;           /* node index and count, real or pretended */
    int local_rank, local_size;  /* world ranks on this node, real or pretended */
    int host_rank, host_size;    /* world ranks on this machine (the
                                    shared-memory split, never pretended):
                                    GPU choice and memory share */
    int dp_node_rank, dp_node_size;   /* within dp_node */
    int dp_cross_rank, dp_cross_size; /* within dp_cross */
    MPI_Comm world;
    MPI_Comm tp_comm;            /* same dp_rank, cp_rank, pp_stage */
    MPI_Comm cp_comm;            /* same dp_rank, tp_rank, pp_stage; rank =
                                    cp_rank: the ranks sharing each sequence */
    MPI_Comm dp_comm;            /* same tp_rank, pp_stage: the replicas,
                                    rank = layout_replica_rank */
    MPI_Comm pp_comm;            /* same tp_rank, dp_rank, cp_rank: the pipeline */
    MPI_Comm ep_comm;            /* same pp_stage, tp_rank, cp_rank and
                                    dp_rank / ep: the ranks that split each
                                    MoE layer's experts; rank = ep_rank */
    MPI_Comm edp_comm;           /* same pp_stage, tp_rank, ep_rank: the
                                    ranks holding the same experts, rank =
                                    layout_expert_replica_rank */
    MPI_Comm dp_node;            /* replicas on this node */
    MPI_Comm dp_cross;           /* replicas with this dp_node_rank, one per node */
    MPI_Comm embed_comm;         /* first and last stage (tied embeddings) */
    MPI_Comm kv_comm;            /* TP ranks holding the same replicated
                                    key/value heads (llama); else NULL */
    MPI_Comm node_comm;          /* world ranks on this node */
    MPI_Comm host_comm;          /* world ranks on this machine */
    ops_device device;           /* where this rank computes (device.c) */
} Grid;

/* Builds every communicator. Collective on world; cfg must have passed
 * layout_check; its dp is layout_resolve_dp's. */
void grid_create(Grid *g, const Config *cfg, MPI_Comm world);
/* Frees the communicators grid_create built (MPI_Comm_free is collective
 * on each). Collective on world. */
void grid_destroy(Grid *g);

/* A grid of the world alone, for the calls made before the layout is known
 * (sharing the config from rank 0): world and the layout's rank and size
 * are set, every other group is absent, so comm calls may name COMM_WORLD
 * only. The background checkpoint writer's grid is one too, on its own
 * world, with the run's layout and device copied in (ckpt_async.c). Builds
 * nothing, so there is nothing to destroy. Not collective. */
void grid_world_only(Grid *g, MPI_Comm world);

/* Rank 0 prints the layout and which world ranks form each group.
 * Not collective. */
void grid_print(const Grid *g, FILE *out);

#endif
