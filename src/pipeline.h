/*
 * pipeline.h - runs one stage's schedule for a step: loads microbatches,
 * calls the model, and moves activations and gradients between
 * neighbouring stages with nonblocking point-to-point messages.
 */
#ifndef TRI_SRC_PIPELINE_H
#define TRI_SRC_PIPELINE_H

#include <stdint.h>

#include "model.h"
#include "schedule.h"

typedef struct {
    double busy;     /* seconds computing */
    double wait;     /* seconds waiting for a neighbour's message */
} PipelineTimes;

/* Runs actions[0..n) on this stage. batch holds the DP rank's microbatches
 * back to back: microbatch i is rows [i*rows, (i+1)*rows) of (T+1)
 * tokens each (inputs are tokens 0..T-1, targets 1..T); only the first and
 * last stages read it. Collective on pp (and tp inside the model); every
 * stage must run the schedule built for it with the same m. */
void pipeline_run(Model *m, const Action *actions, int n, const int32_t *batch,
                  int rows, ForwardMode mode, PipelineTimes *times);

#endif
