/*
 * optim.h - the learning-rate schedule, gradient norm and clipping, and the
 * AdamW step over the rows this rank owns.
 */
#ifndef TRI_SRC_OPTIM_H
#define TRI_SRC_OPTIM_H

#include "config.h"
#include "model.h"
#include "zero.h"

/* Learning rate for 0-based step s: linear warm-up from lr/warmup to lr over
 * `warmup` steps, then cosine decay to min_lr at step decay_steps (0: the
 * last step), min_lr after it. Pure. */
double optim_lr(const TrainConfig *t, int step);

/* Clamps every owned gradient to [-c, c] (c already multiplied by the loss
 * scale). Not collective. */
void optim_clip_value(Model *m, Zero *z, float c);

/* The global L2 norm of the owned gradients, each logical element counted
 * once across TP, PP and DP (replicated tensors on TP rank 0 only, the
 * tied copy not at all). Non-finite when any gradient is inf or nan: that
 * single all-reduce is also the overflow check. Collective on world. */
double optim_grad_norm(Model *m, Zero *z);

/* One AdamW step (1-based `step`) on the owned rows: grads are multiplied
 * by grad_scale first (unscaling and norm clipping in one factor); weight
 * decay only on 2-D weights. With [train] offload on a GPU the master and
 * moments are in host memory and the update runs there (offload.h), with
 * the same result. Not collective. */
void optim_step(Model *m, Zero *z, const TrainConfig *t, int step, double lr,
                float grad_scale);

#endif
