/*
 * zero.h - where parameter state lives, and how DP ranks share it (ZeRO).
 *
 * One rule for all state (doc/design.md, the sharding rule): each DP rank owns a contiguous block
 * of dim-0 rows of every local tensor; the last block may be short. Block
 * k goes to the k-th rank in the DP reduction's order (comm_dp_order: DP
 * rank order over one level), so every collective runs in place on the
 * tensor itself. A routed expert's tensor (Param.expert, MoE with ep > 1)
 * is held by the ranks with its ep rank alone: its rows are cut among
 * those (COMM_EDP, layout_expert_replicas, in their rank order, one level)
 * and its gradients reduced over them. Then:
 *   zero 0: every rank keeps full weights, gradients and optimizer state;
 *           gradients are all-reduced (the baseline);
 *   zero 1: fp32 master weights and Adam moments exist only for owned rows;
 *           gradients are reduce-scattered, tensor by tensor, straight
 *           into that layout; the updated rows are all-gathered into the
 *           full weights;
 *   zero 2: as 1, but a unit's full gradients live only while its backward
 *           runs: they are reduce-scattered right after it, every
 *           microbatch, and added into the owned rows;
 *   zero 3: as 2, and only owned weights are kept: a unit's weights are
 *           all-gathered just before its forward and again before its
 *           backward.
 * The buckets (the parameters whose gradients are final together, which
 * an overlapped reduction starts at once) are the model's units
 * (embeddings, each block, the head).
 * With one DP rank every stage behaves as stage 0 (zero_stage): there is
 * nothing to shard, and no reason to copy gradients into an "owned" buffer.
 *
 * What a rank holds is a pure function of its parameter table and layout
 * (zero_state_bytes): zero_create allocates by it and reports it, and
 * `trident plan` predicts memory with it.
 */
#ifndef TRI_SRC_ZERO_H
#define TRI_SRC_ZERO_H

#include <stdint.h>

#include "config.h"
#include "grid.h"
#include "model.h"
#include "offload.h"
#include "zero_state.h"

typedef struct Zero Zero;

/* Decides ownership, allocates weights, gradients and optimizer state for
 * m's parameters, and installs the unit hooks ZeRO-2/3 need. Learns how
 * DP reduces (comm_dp_create all-gathers every DP rank's node).
 * Collective on dp. */
Zero *zero_create(Model *m, const Config *cfg, const Grid *g);
/* Not collective. */
void zero_destroy(Zero *z);

/* Initialises every parameter this rank holds from the counter-based RNG.
 * Not collective. */
void zero_init_weights(Zero *z);

/* Fills every parameter this rank holds, its whole local block (lrows x
 * lcols, fp32, row-major) at a time, from fill; stops at fill's first
 * non-zero return and returns it. Not collective. */
typedef int (*ZeroFill)(const Param *p, float *block, void *ctx);
int zero_fill_weights(Zero *z, ZeroFill fill, void *ctx);

/* Zeroes gradients before a step's first microbatch. Not collective. */
void zero_begin_step(Zero *z);
/* After the last microbatch: reduces gradients over DP into the owned rows
 * (zero 0: all-reduce; 1: reduce-scatter; 2/3: already done per unit).
 * The sums the model's own sharding needs come after, from the model
 * (model_sum_split_grads). Collective on dp. */
void zero_reduce_grads(Zero *z);
/* After the optimizer: all-gathers updated owned rows into the full
 * weights (zero 1/2; nothing for 0 and 3). Collective on dp. */
void zero_gather_weights(Zero *z);

/* Rows of p's block this rank updates: all of them under zero 0, else the
 * owned block. og, master, m and v cover exactly these rows.
 * Not collective. */
void zero_update_rows(const Zero *z, const Param *p, int64_t *row0, int64_t *rows);

/* What this rank allocated: zero_state_bytes of its table and layout.
 * Not collective. */
ZeroBytes zero_bytes(const Zero *z);

/* The optimizer offload's staging (offload.h), NULL when the run does not
 * offload. Not collective. */
Offload *zero_offload(const Zero *z);

/* Overlapped DP reductions since the last call: the seconds they were in
 * flight (from the host's start to its completing them: on a GPU, where
 * the host runs ahead, only > 0 says there were some), and the seconds the
 * step waited for them (the exposed part: on a GPU the compute stream's
 * wait, read from device timers, so call it after the step's host wait).
 * Resets both. Not collective. */
void zero_overlap_seconds(Zero *z, double *span, double *exposed);

#endif
