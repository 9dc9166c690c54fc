/*
 * moe.h - a mixture-of-experts layer (issue 38) in place of a Llama
 * block's MLP: the router, the routed SwiGLU experts (grouped GEMMs over
 * this ep rank's experts, rows moved by moe_ep.h), the shared expert with
 * its sigmoid gate, the load-balancing and z losses, and the statistics
 * the metrics read (model.h's MoeStats).
 *
 * Shapes: N tokens (all of the microbatch's, gathered over TP under
 * sequence parallelism), E experts, k per token, El on this ep rank,
 * Fml = moe_ffn_dim / tp, Fsl = the shared width / tp. A layer's
 * activations live in its slot's BlockActs (a->moe), sized at set-up by
 * the worst case moe_ep_max_rows gives.
 */
#ifndef TRI_SRC_MOE_H
#define TRI_SRC_MOE_H

#include <stdint.h>

#include "config.h"
#include "model.h"
#include "ops.h"

/* Allocates the MoE activations of the slots' and the recompute buffers'
 * MoE layers, the stage's MoE scratch and statistics (m->moe); nothing
 * when the stage holds no MoE layer. After the dense activations (the
 * slots keeping only their input share the recompute buffers' MoE part).
 * Not collective. */
void moe_create(Model *m);
/* Frees what moe_create allocated. Not collective. */
void moe_destroy(Model *m);
/* Bytes of device memory moe_create allocated. Not collective. */
int64_t moe_activation_bytes(const Model *m);
/* The same as a pure function of the config, for stage `stage` on one of
 * tp ranks with n_slots slots: what model_planned_activation_bytes adds.
 * Not collective. */
int64_t moe_planned_activation_bytes(const Config *cfg, int tp, int stage, int n_slots);

/* The MoE layer's output for the rank's local rows of the N tokens, from
 * h (N, C), the post-attention norm's output on all N rows
 * (model_column_input's): the experts' and shared expert's sum over TP
 * (all-reduce, or reduce-scatter under sequence parallelism), in a
 * scratch view the next layer overwrites. Collective on tp and ep. */
ops_tensor moe_forward(Model *m, const BlockParams *p, BlockActs *a, ops_tensor h, int64_t N);
/* Its backward from dout (N, C) (model_row_parallel_grad's) and h:
 * overwrites d_ln (N, C) with this TP rank's share of the gradient at h,
 * and accumulates every MoE weight's gradient now (also under zb1: the
 * layer defers nothing). Collective on tp and ep. */
void moe_backward(Model *m, const BlockParams *p, BlockActs *a, ops_tensor dout,
                  ops_tensor h, ops_tensor d_ln, int64_t N);

#endif
