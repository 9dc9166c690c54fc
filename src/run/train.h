/*
 * train.h - `trident train`: set up the grid, model, optimizer state and
 * data, run the steps, evaluate, log, and generate a sample at the end.
 */
#ifndef TRI_SRC_TRAIN_H
#define TRI_SRC_TRAIN_H

#include <mpi.h>

#include "config.h"

/* Runs a training job. cfg is valid on world rank 0 only; it is broadcast.
 * started is when the process began (timer_now() before MPI_Init), for the
 * start-up time it reports. Returns the process exit code (fail.h), the
 * same on every rank. Collective on world. */
int train_run(Config *cfg, MPI_Comm world, double started);

#endif
