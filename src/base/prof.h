/*
 * prof.h - where a step's time goes, per kind of op, for `[log] profile`.
 *
 * Each PROF(kind, call) opens and closes an interval of its kind's device
 * timer (ops.h) around the call when profiling is on, and costs one
 * branch when it is off. On the CPU an interval is the host clock's; on a
 * GPU, whose kernels run after their call returns, it is two CUDA events
 * on the compute stream, read once the step is over (prof_collect), so
 * the figures are the device's own time and profiling neither waits nor
 * slows the step. A blocking collective's interval includes its wait; a
 * nonblocking one's (the overlapped DP reduction) only what it exposes.
 */
#ifndef TRI_SRC_PROF_H
#define TRI_SRC_PROF_H

#include <stdio.h>

#include "ops.h"

typedef enum {
    PROF_MATMUL, PROF_HEAD_MATMUL, PROF_ATTENTION, PROF_LAYERNORM, PROF_GELU, PROF_RESIDUAL,
    PROF_EMBEDDING, PROF_XENT, PROF_TP_COMM, PROF_DP_COMM, PROF_OPTIMIZER,
    PROF_KINDS
} ProfKind;

extern int prof_on;
extern ops_timer prof_timers[PROF_KINDS];

#define PROF(kind, call)                                                   \
    do {                                                                   \
        if (prof_on) {                                                     \
            ops_timer_start(&prof_timers[kind]);                           \
            call;                                                          \
            ops_timer_stop(&prof_timers[kind]);                            \
        } else {                                                           \
            call;                                                          \
        }                                                                  \
    } while (0)

/* Turns profiling on, with timers on device and the sums at 0. Not
 * collective. */
void prof_start(ops_device device);
/* Adds the intervals timed since the last call to the sums; call after
 * the step's host wait. Not collective. */
void prof_collect(void);
/* Turns profiling off and releases the timers. Not collective. */
void prof_stop(void);
/* Prints each kind's seconds per step and share of the step time, and
 * what the kinds do not cover. Not collective. */
void prof_print(FILE *out, int steps, double step_seconds);

#endif
