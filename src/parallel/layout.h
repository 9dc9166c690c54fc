/*
 * layout.h - the layout of a run, world = pp x dp x cp x tp with TP
 * innermost, and a rank's place in it: plain arithmetic on the config and
 * the world size, no MPI. Not collective.
 *
 * World rank r sits at tp_rank = r % tp, cp_rank = (r / tp) % cp,
 * dp_rank = (r / (tp * cp)) % dp and pp_stage = r / (tp * cp * dp), so a
 * TP group (the chattiest) is a run of consecutive ranks and lands on one
 * node, then CP (the attention's all-gathers), then DP, then PP
 * (Megatron's order).
 *
 * dp and dp_rank are the *data*: which samples a rank reads (the global
 * batch is rows x grad_accum x dp). The ranks that hold the same weights
 * and reduce their gradients together are more: every cp rank of every
 * dp rank, the replicas (layout_replicas, layout_replica_rank), which the
 * grid's dp_comm joins. With cp = 1 the two are the same. A Layout is a value: the trainer's grid holds its own (grid.h,
 * which adds the communicators), and whatever reasons about a rank without
 * being it builds one for that rank: plan for every rank of a world it
 * never starts, the parameter table of any (stage, TP rank), the
 * checkpoint's logical tensors as one rank holding everything.
 *
 * This file is also the rule book of layouts: what a layout must satisfy
 * to run on a world (layout_check), how dp = 0 resolves, which layers a
 * stage holds and when a DP group reduces in two levels. The trainer
 * (before grid_create) and plan apply these functions rather than restate
 * them; config_validate checks the rules that need no world size first
 * (layout_rules_check, layout_sequence_rules_check), naming the key to
 * change in its own words.
 */
#ifndef TRI_SRC_LAYOUT_H
#define TRI_SRC_LAYOUT_H

#include <stdio.h>

#include "config.h"

typedef struct {
    int rank, size;                  /* world */
    int dp, pp, tp, cp;              /* group sizes */
    int dp_rank, pp_stage, tp_rank;  /* this rank's place */
    int cp_rank;                     /* which chunks of each sequence it holds */
    int ep, ep_rank;                 /* expert parallelism: ep consecutive DP
                                        ranks split each MoE layer's experts;
                                        ep_rank = dp_rank % ep holds experts
                                        [ep_rank, ep_rank + 1) * n_expert / ep */
    int node_size;                   /* [parallel] node_size: nodes pretended to
                                        hold that many world ranks; 0: real nodes */
} Layout;

/* The layout of p on a world of `world` ranks (dp resolved as
 * layout_resolve_dp), seen from world rank `rank`. p must have passed
 * layout_check for that world. */
Layout layout_of_rank(const ParallelConfig *p, int world, int rank);

/* The layout of p's pp, cp and tp with dp DP ranks (already resolved),
 * seen from the rank at (pp_stage, dp_rank, tp_rank) and cp_rank 0: for a
 * rank that is not this process's (plan, the parameter table of any
 * stage, which no cp rank changes). */
Layout layout_at(const ParallelConfig *p, int dp, int pp_stage, int dp_rank, int tp_rank);

/* World rank of the rank at (pp_stage, dp_rank, tp_rank) and cp_rank 0 of
 * l: the first rank of its context-parallel group. */
int layout_world_rank(const Layout *l, int pp_stage, int dp_rank, int tp_rank);

/* World rank of replica `replica_rank` of the replica group at (pp_stage,
 * tp_rank) of l (the ranks dp_comm joins, layout_replica_rank's order). */
int layout_replica_world_rank(const Layout *l, int pp_stage, int replica_rank, int tp_rank);

/* The ranks that hold the same weights and reduce their gradients
 * together, dp * cp: the DP reduction, ZeRO's shards and the sums of
 * loss and tokens run over them (the grid's dp_comm). */
int layout_replicas(const Layout *l);

/* This rank's place among its replicas, dp_rank * cp + cp_rank: its rank
 * in dp_comm, and the block of every ZeRO-sharded tensor it owns. */
int layout_replica_rank(const Layout *l);

/* The ranks that hold the same experts and reduce the experts' gradients
 * together (the grid's edp_comm, COMM_EDP): the replicas with the same
 * ep_rank, dp / ep * cp of them. ZeRO shards expert tensors over them. */
int layout_expert_replicas(const Layout *l);
/* This rank's place among them, (dp_rank / ep) * cp + cp_rank. */
int layout_expert_replica_rank(const Layout *l);
/* Checks that the layout of cfg fits a world of `world` ranks: dp*pp*tp,
 * divisibility by tp (the experts' width too), ep's rules (it needs
 * experts and divides them and dp; no cp with experts), layers per stage,
 * node_size. Writes the reason on err and returns non-zero. The rules it shares with layout_rules_check (tp
 * divides the heads, a stage holds a layer) are the same tests, worded
 * for the world. */
int layout_check(const Config *cfg, int world, FILE *err);

/* The layout rules that need no world size, which config_validate checks
 * first (config_rules.c words them): a stage holds a layer, no product of
 * the layout's sizes is more ranks than an MPI world holds (INT_MAX), tp
 * divides the heads, expert parallelism's (ep > 1 only with n_expert > 0,
 * dividing n_expert and a given dp; cp = 1 with experts), and the
 * interleaved schedule's (virtual_stages only with it, >= 2 chunks a
 * stage, pp >= 2, equal chunks of layers, microbatches in groups of pp). 0 when they hold; else 1 with the first
 * broken one in p. */
int layout_rules_check(const Config *cfg, ConfigKeyProblem *p);

/* What context and sequence parallelism need of the tokens, which needs
 * no world size either: seq_len cut into 2 cp equal chunks, each TP rank
 * an equal slice of a microbatch's tokens on its cp rank (micro_batch *
 * seq_len / cp), and a layout that can generate when the run samples. 0 or 1 as layout_rules_check; apart
 * from it because config_validate checks the architecture's keys between
 * the two, and keeps that order of its messages. */
int layout_sequence_rules_check(const Config *cfg, ConfigKeyProblem *p);

/* Whether the layout can generate text (the end-of-run sample, `trident
 * sample`): generation runs one whole row of seq_len tokens, so it needs
 * cp = 1 (context parallelism cuts rows over cp ranks), ep = 1 (it has
 * no all-to-all to reach the experts on other ranks), and with
 * sequence parallelism, which slices the row over TP, seq_len divisible
 * by tp. The rule above refuses a sample asked for where this is 0;
 * config_load turns the default sample off here instead. Not collective. */
int layout_sample_fits(const Config *cfg);

/* Why layout_sample_fits is 0 for cfg, in the words of its note and its
 * refusal, naming the key; returns 1 (reason.h). Not collective. */
int layout_sample_why(const Config *cfg, char *why, size_t n);

/* The DP size of a world of `world` ranks: [parallel] dp, or world /
 * (pp * cp * tp) when dp = 0. The one place that rule lives: the trainer's grid
 * and `trident plan` resolve it alike. */
int layout_resolve_dp(const ParallelConfig *p, int world);

/* Layers [*first, *first + *count) that stage s owns: balanced, the earlier
 * stages taking one more when n_layer % pp != 0. */
void layout_stage_layers(int n_layer, int pp, int stage, int *first, int *count);

/* Layers [*first, *first + *count) of chunk `chunk` of stage s when every
 * stage holds v chunks (the interleaved schedule): virtual stage
 * chunk * pp + s of pp * v, Megatron's assignment, so stage 0 holds layers
 * 0.., then pp*L.., for L layers a chunk. With v = 1 it is
 * layout_stage_layers. */
void layout_chunk_layers(int n_layer, int pp, int v, int stage, int chunk, int *first,
                         int *count);

/* The DP group of the rules below is the replica group (dp_comm: dp x cp
 * ranks, layout_replicas) and its "DP rank" the replica rank
 * (layout_replica_rank); with cp = 1 both are the plain DP ones. */

/* Whether a DP group reduces in two levels (inside each node on dp_node,
 * then across nodes on dp_cross; comm_dp.h): more than one node, more than
 * one DP rank per node, and the same number on every node. node_of[r] is
 * the node of DP rank r, in any numbering. The one rule that the trainer
 * (from the grid's real or pretended nodes) and plan (from node_size)
 * both apply. */
int layout_dp_two_level(const int *node_of, int dp);

/* Where a DP rank sits on the nodes l->node_size pretends: the how-many-th
 * of its DP group's nodes (counted from the group's first) and its place
 * among the group's ranks on that node, in DP rank order (its dp_node
 * rank; over two levels also its node's dp_cross rank). */
typedef struct {
    int node, place;
} LayoutDpSpot;

/* The spot of DP rank dp_rank of l's DP group (the ranks of l's pp_stage
 * and tp_rank) on nodes of l->node_size world ranks; with node_size = 0
 * every rank on one node (plan's assumption: real nodes are not known
 * before the run). Counted, not listed, so it costs the same at any world
 * size. l must have passed layout_check (node_size a multiple of tp). */
LayoutDpSpot layout_dp_spot(const Layout *l, int dp_rank);

/* The DP ranks each node holds when l's DP group reduces in two levels
 * over the nodes l->node_size makes, by layout_dp_two_level's rule
 * (counted: the group fills a first node partly, then whole nodes, then
 * a last partial one); 0 for one level, and for node_size = 0. The
 * trainer checks its grid's pretended nodes against this (comm_dp.c). */
int layout_dp_places(const Layout *l);

/* The block of the rank at place `place` of node `node` (its dp_node and
 * dp_cross ranks) of a DP group that reduces in two levels over `nodes`
 * nodes: blocks go by place, then by node, so each level finds its
 * blocks contiguous (comm_dp_order; ZeRO's rank owns that block of every
 * tensor). */
int layout_dp_block(int place, int node, int nodes);

/* The place of the rank owning block `block` of that order. */
int layout_dp_block_place(int block, int nodes);

#endif
