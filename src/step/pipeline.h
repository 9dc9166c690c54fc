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

/* The executor of one stage's model: what it keeps between steps so that
 * a step allocates nothing. Each of the model's activation slots has four
 * requests (the receive and send of an activation and of a gradient), a
 * holder (the (microbatch, chunk) it serves) and whether that forward has
 * run; on a GPU the step's batch is uploaded into one buffer, grown and
 * never shrunk. Every request is complete between steps. */
typedef struct {
    Model *m;
    CommRequest *requests;   /* 4 x n_slots */
    int *holder;             /* per slot: mb * v + chunk, or -1 */
    char *forwarded;         /* per slot: its holder's forward has run */
    ops_tensor batch;        /* GPU: the step's batch; unused on the CPU */
} Pipeline;

/* The executor of m (already created), which it must not outlive.
 * Not collective. */
void pipeline_create(Pipeline *p, Model *m);
void pipeline_destroy(Pipeline *p);

/* Runs actions[0..n) on this stage. batch holds the DP rank's microbatches
 * back to back: microbatch i is rows [i*rows, (i+1)*rows) of (T+1)
 * tokens each (inputs are tokens 0..T-1, targets 1..T); only the first and
 * last stages read it. grad_scale multiplies d loss_sum in a training
 * step (the loss scale over the step's tokens). Collective on pp (and tp
 * inside the model); every stage must run the schedule built for it. */
void pipeline_run(Pipeline *p, const Action *actions, int n, const int32_t *batch, int rows,
                  ForwardMode mode, float grad_scale, PipelineTimes *times);

#endif
