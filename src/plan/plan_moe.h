/*
 * plan_moe.h - mixture of experts in `trident plan` ([model] n_expert > 0,
 * [parallel] ep; doc/moe.md): total against active parameters, and the
 * all-to-alls of expert parallelism.
 *
 * An MoE layer sends each token's top_k routed rows to the ranks that hold
 * their experts and the experts' outputs back (moe_ep.h): per layer and
 * microbatch two all-to-alls in the forward (dispatch and return), two in
 * the backward (their gradients), two more where the layer's forward runs
 * again (recompute; twice under zb1). Each moves, from one rank, the (ep-1)/ep of its N
 * top_k rows whose experts live elsewhere (routing assumed even; dropless),
 * n_embd wide in the activations' dtype: every TP rank of the ep group
 * sends the same whole rows. The ep group is ep consecutive DP ranks, so
 * it spans tp x cp x ep world ranks, and nothing overlaps the exchange
 * with compute: all of it is exposed. Why a search picks ep > 1 is
 * plan_reason.h's. Not collective, every function.
 */
#ifndef TRI_SRC_PLAN_MOE_H
#define TRI_SRC_PLAN_MOE_H

#include <stdio.h>

#include "config.h"

/* Bytes one rank sends in one all-to-all of one MoE layer and microbatch:
 * (ep-1)/ep x micro_batch x seq_len/cp x top_k x n_embd elements of the
 * activations' dtype; 0 at ep 1 or without experts. Pure. */
double plan_moe_alltoall_bytes(const Config *cfg);

/* The all-to-alls stage `stage` runs per microbatch: 4 per MoE layer, 2
 * more per recomputed MoE layer (4 under zb1, whose weight pass runs the
 * forward again). Pure. */
int plan_moe_alltoalls(const Config *cfg, int stage);

/* The world ranks an ep group spans: tp x cp x ep (its ranks are DP ranks
 * tp x cp apart). Pure. */
int plan_moe_ep_span(const Config *cfg);

/* plan's lines about the experts, where cfg has them: "params X B total,
 * Y B active", the experts a rank holds, and the all-to-all bytes per
 * layer and microbatch and per step (step_bytes: plan_communication's).
 * Nothing for a dense model. */
void plan_moe_print(const Config *cfg, double step_bytes, FILE *out);

#endif
