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
 * layers (the blocks are alike: one priced, times their number). Not
 * collective. */
int64_t params_local_count(const Config *cfg, int pp_stage, int tp_rank);

/* Total elements of the logical model (each tensor once). Not collective. */
int64_t params_logical_count(const ModelConfig *m);

#endif
