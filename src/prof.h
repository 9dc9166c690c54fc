/*
 * prof.h - where a step's time goes, per kind of op, for `[log] profile`.
 *
 * Each PROF(kind, call) adds the call's wall time to its kind when
 * profiling is on, and costs one branch when it is off. On a GPU the
 * kernels run asynchronously, so there the figures would show launch time:
 * profile on the CPU, or with CUDA's own tools.
 */
#ifndef TRI_SRC_PROF_H
#define TRI_SRC_PROF_H

#include <stdio.h>

#include "timer.h"

typedef enum {
    PROF_MATMUL, PROF_ATTENTION, PROF_LAYERNORM, PROF_GELU, PROF_RESIDUAL,
    PROF_EMBEDDING, PROF_XENT, PROF_TP_COMM, PROF_DP_COMM, PROF_OPTIMIZER,
    PROF_KINDS
} ProfKind;

extern int prof_on;
extern double prof_seconds[PROF_KINDS];

#define PROF(kind, call)                                                   \
    do {                                                                   \
        if (prof_on) {                                                     \
            double prof_t0_ = timer_now();                                 \
            call;                                                          \
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
