/*
 * prof.h - where a step's time goes, per kind of op, for `[log] profile`.
 *
 * Each PROF(kind, call) adds the call's wall time to its kind when
 * profiling is on, and costs one branch when it is off. A GPU runs its
 * kernels asynchronously, so there profiling waits for the device before
 * and after each call (prof_device): the figures are the kernels' own
 * time, and the step runs somewhat slower than it would unprofiled, as
 * every overlap of communication with compute is undone.
 */
#ifndef TRI_SRC_PROF_H
#define TRI_SRC_PROF_H

#include <stdio.h>

#include "kernels/ops.h"
#include "timer.h"

typedef enum {
    PROF_MATMUL, PROF_ATTENTION, PROF_LAYERNORM, PROF_GELU, PROF_RESIDUAL,
    PROF_EMBEDDING, PROF_XENT, PROF_TP_COMM, PROF_DP_COMM, PROF_OPTIMIZER,
    PROF_KINDS
} ProfKind;

extern int prof_on;
extern ops_device prof_device; /* whose queue PROF waits for */
extern double prof_seconds[PROF_KINDS];

#define PROF(kind, call)                                                   \
    do {                                                                   \
        if (prof_on) {                                                     \
            ops_device_synchronize(prof_device);                           \
            double prof_t0_ = timer_now();                                 \
            call;                                                          \
            ops_device_synchronize(prof_device);                           \
            prof_seconds[kind] += timer_now() - prof_t0_;                  \
        } else {                                                           \
            call;                                                          \
        }                                                                  \
    } while (0)

/* Clears the accumulators. Not collective. */
void prof_reset(void);
/* Prints each kind's seconds per step and share of the step time, and
 * what the kinds do not cover. Not collective. */
void prof_print(FILE *out, int steps, double step_seconds);

#endif
