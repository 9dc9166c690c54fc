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

/* Device timers (ops.h), so that on a GPU they count the device's time,
 * not the launches': read them after the step's host wait. Zeroed, they
 * are CPU timers. */
typedef struct {
    ops_timer busy;  /* computing: model_forward and model_backward */
    ops_timer wait;  /* waiting for a neighbour's message */
} PipelineTimes;

/* Runs actions[0..n) on this stage. batch holds the DP rank's microbatches
 * back to back: microbatch i is rows [i*rows, (i+1)*rows) of (T+1)
 * tokens each (inputs are tokens 0..T-1, targets 1..T); only the first and
 * last stages read it. Collective on pp (and tp inside the model); every
 * stage must run the schedule built for it with the same m. */
void pipeline_run(Model *m, const Action *actions, int n, const int32_t *batch,
                  int rows, ForwardMode mode, PipelineTimes *times);

#endif
