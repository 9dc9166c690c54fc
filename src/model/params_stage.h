/*
 * params_stage.h - which parameters a rank holds: its stage's embeddings,
 * blocks and head, in the same order on every rank of a stage, so
 * "parameter i" means the same tensor on every DP and TP peer (ZeRO and
 * checkpoints rely on that). A block's tensors are its architecture's
 * (arch.h); the table they go in is params.h's.
 */
#ifndef TRI_SRC_PARAMS_STAGE_H
#define TRI_SRC_PARAMS_STAGE_H

#include <stdint.h>

#include "config.h"
#include "layout.h"
#include "params.h"

/* Builds the table for the stage and TP shard of layout's rank (no memory yet):
 * a trainer passes its grid's layout, plan and checkpoints one of any rank
 * (layout_at). Not collective. */
void params_build(ParamSet *ps, const Config *cfg, const Layout *layout);

/* params_build with only the first max_layers of the stage's blocks (its
 * embeddings and head all the same): plan prices a stage of alike blocks
 * from one and two of them, so that its cost does not grow with n_layer.
 * Not collective. */
void params_build_layers(ParamSet *ps, const Config *cfg, const Layout *layout, int max_layers);

/* The number of blocks (layers) the stage of layout's rank holds, over all
 * its chunks. Pure. */
int params_stage_layers(const Config *cfg, const Layout *layout);

/* Elements of the blocks the rank at (pp_stage, tp_rank) of cfg's layout
 * holds, before ZeRO shards them: what its DP reduction carries and, over
 * dp, what its optimizer updates. Its cost does not grow with the stage's
 * layers where the blocks are alike (params_blocks_alike: one priced,
 * times their number); else every block is built. Not collective. */
int64_t params_local_count(const Config *cfg, int pp_stage, int tp_rank);

/* Of params_local_count, the routed experts' (Param.expert): the part
 * that reduces and shards over the expert-data-parallel group. Not
 * collective. */
int64_t params_local_expert_count(const Config *cfg, int pp_stage, int tp_rank);

/* Whether every block has the same tensors, so that one block prices
 * them all: dense models and MoE models with moe_every = 1 (else dense
 * and MoE layers alternate). Pure. */
int params_blocks_alike(const ModelConfig *m);

/* Total elements of the logical model (each tensor once, every expert).
 * Not collective. */
int64_t params_logical_count(const ModelConfig *m);

/* The elements one token's forward uses: params_logical_count less, in
 * each MoE layer, the n_expert - top_k routed experts it is not sent to
 * (Mixtral 8x7B: 46.7 B total, 12.9 B active). Not collective. */
int64_t params_active_count(const ModelConfig *m);

#endif
