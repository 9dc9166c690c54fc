/*
 * zero_state.h - what a rank's ZeRO state holds, counted from its
 * parameter table and ZeroLayout alone, so that the allocator (zero.c)
 * and the pure size (zero_state_bytes, which plan asks) count alike; and
 * the rules that choose the stage and whether reductions overlap. zero.h
 * includes it (callers include zero.h); it includes nothing of zero.h, so
 * the two make no circle (tests/t_deps.sh).
 */
#ifndef TRI_SRC_ZERO_STATE_H
#define TRI_SRC_ZERO_STATE_H

#include <stdint.h>

#include "comm_group.h"
#include "ops.h"
#include "params.h"

typedef struct {
    int64_t weights, grads, optimizer;   /* bytes this rank holds on its device */
    int64_t host;    /* [train] offload: the optimizer state and staging in host memory */
} ZeroBytes;

/* The stage a rank runs when [parallel] zero is `zero` over dp ranks: 0
 * with one DP rank, else `zero`. Not collective. */
int zero_stage(int zero, int dp);

/* Whether DP reductions start during the backward: [parallel] overlap,
 * stage 0 or 1, more than one DP rank, one DP level (not hierarchical),
 * on either device (the host over MPI, a GPU over NCCL on the DP stream).
 * Not collective. */
int zero_overlaps(int overlap, int stage, int dp, int hierarchical, ops_device device);

/* What sizes a rank's ZeRO state, besides its parameter table. */
typedef struct {
    int stage;          /* zero_stage's */
    int dp;             /* the replicas that share the state: dp x cp
                           (layout_replicas) */
    int dp_rank;        /* the rank's block: its place in comm_dp_order, which
                           is its replica rank over one level */
    ops_dtype dtype;    /* the weights' compute dtype */
    int places;         /* two DP levels: the DP ranks each node holds;
                           0: one level */
    int overlap;        /* zero_overlaps's */
    int offload;        /* offload_active's: master and moments in host memory */
    int edp;            /* the ranks that share routed experts' state
                           (Param.expert), layout_expert_replicas; 0: dp
                           (ep = 1, where they are the replicas) */
    int edp_rank;       /* the rank's block of them, layout_expert_replica_rank
                           (one level always) */
} ZeroLayout;

/* Bytes of weights, gradients and optimizer state that the rank with
 * parameter table ps holds under l: full or owned weights in the compute
 * dtype, fp32 gradients (full, owned, zero 2/3's unit-sized work buffer
 * and one parameter's share to receive into, and two levels' scratch for
 * one parameter's node-level share), fp32 master rows and Adam moments;
 * with offload the
 * master rows and moments, and the staging slots, count as host memory.
 * Not collective. */
ZeroBytes zero_state_bytes(const ParamSet *ps, const ZeroLayout *l);

/* Block `block` of `rows` rows cut into dp blocks of ceil(rows / dp), the
 * last short or empty. Not collective. */
void zero_partition(int64_t rows, int dp, int block, int64_t *row0, int64_t *n);

/* Elements that size a rank's state. */
typedef struct {
    int64_t full;     /* its local blocks */
    int64_t owned;    /* its owned rows of them */
    int64_t update;   /* rows its optimizer updates: all under zero 0, else the owned */
    int64_t unit;     /* the largest unit, as the model uses it (zero 2/3's
                         transient gradients, zero 3's gathered weights) */
    int64_t scratch;  /* two levels: the largest node-level share of one
                         dense parameter (comm_dp's scratch; at least 1) */
    int64_t share;    /* the most of one parameter's elements this rank owns
                         (at least 1): zero 2/3's receive buffer */
} ZeroCounts;

/* The counts of ps under l. Not collective. */
ZeroCounts zero_counts(const ParamSet *ps, const ZeroLayout *l);

/* The group that shares p's state, its size and this rank's block in it:
 * a routed expert's tensor over the ranks holding the same experts
 * (COMM_EDP: l->edp, l->edp_rank), any other over the replicas (COMM_DP:
 * l->dp, l->dp_rank). Not collective. */
CommGroup zero_param_group(const Param *p, const ZeroLayout *l, int *size, int *block);

/* The rows of p this rank owns under l: zero_partition of its group. Not
 * collective. */
void zero_param_rows(const Param *p, const ZeroLayout *l, int64_t *row0, int64_t *rows);

/* Whether fp32 master rows are kept apart from the weights. Not
 * collective. */
int zero_separate_master(const ZeroLayout *l);

#endif
