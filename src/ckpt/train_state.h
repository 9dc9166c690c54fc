/*
 * train_state.h - what a run needs besides its tensors to continue
 * exactly: the counters a checkpoint's root attributes carry. A header of
 * its own because both the checkpoint (ckpt.h) and its file format
 * (ckpt_format.h) name it, and the format must not include the
 * checkpoint. Nothing here is a function.
 */
#ifndef TRI_SRC_TRAIN_STATE_H
#define TRI_SRC_TRAIN_STATE_H

#include <stdint.h>

/* What a run needs besides tensors to continue exactly. */
typedef struct {
    int64_t step;             /* steps completed */
    int64_t tokens;           /* tokens trained on */
    int64_t cursor;           /* global sample index of the next step */
    int64_t updates;          /* optimizer steps applied (skipped ones not) */
    double loss_scale;
    int64_t scale_good_steps; /* clean steps since the scale last changed */
    int32_t scale_overflows;  /* overflows since the last backoff */
    double best_val;          /* early stopping: best validation loss */
    int32_t evals_bad;        /* evaluations without improvement */
} TrainState;

#endif
