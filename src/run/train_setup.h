/*
 * train_setup.h - a training run set up (config shared, grid, device, peaks
 * measured, schedule, model, data, checkpoint directory, weights, metrics,
 * checkpoint writer) and torn down; train.c runs the steps in between.
 */
#ifndef TRI_SRC_TRAIN_SETUP_H
#define TRI_SRC_TRAIN_SETUP_H

#include <mpi.h>

#include "train_impl.h"

/* Broadcasts rank 0's config (t->cfg) and checks the layout against the
 * world; t->grid then knows only the world. Returns non-zero, the same on
 * every rank, when the layout does not fit. Collective on world. */
int train_setup_share_config(Trainer *t, MPI_Comm world);

/* Everything a run needs before its first step, in order (doc/design.md,
 * "From config to checkpoint", steps 2 to 5). Returns non-zero, the same
 * on every rank, on bad input (reported); t must be torn down either way.
 * Collective on world. */
int train_setup_build(Trainer *t);

/* Frees what train_setup_build made, however far it got. Collective on
 * world. */
void train_setup_teardown(Trainer *t);

#endif
