/*
 * schedule.h - pipeline schedules as data.
 *
 * A schedule is the ordered list of actions one stage performs in a step:
 * forward of microbatch i, backward of microbatch i. It is a pure function
 * of (kind, pp, stage, m), so it can be printed, tested and simulated
 * without MPI, and one executor (pipeline.c) runs any of them. Sends and
 * receives are implied: a stage receives before each forward (from the
 * previous stage) and backward (from the next), and sends after.
 *
 *  1F1B:  min(pp - stage - 1, m) warm-up forwards, then one forward and one
 *         backward in turn, then the remaining backwards; a stage holds at
 *         most pp microbatches' activations.
 *  GPipe: all forwards, then all backwards; holds m.
 */
#ifndef TRI_SRC_SCHEDULE_H
#define TRI_SRC_SCHEDULE_H

#include "config.h"

typedef enum { ACTION_FORWARD = 0, ACTION_BACKWARD = 1 } ActionKind;

typedef struct {
    ActionKind kind;
    int mb;          /* microbatch */
} Action;

/* Fills out[0 .. 2m-1] with stage's actions; returns their count (2m).
 * Not collective. */
int schedule_build(ScheduleKind kind, int pp, int stage, int m, Action *out);

/* The largest number of microbatches whose forward has run and whose
 * backward has not, over the list: the activation slots a stage needs. */
int schedule_max_in_flight(const Action *a, int n);

/* Simulates all pp stages with forward cost tf and backward cost tb per
 * microbatch and zero communication time. Returns the bubble fraction:
 * idle time over total time, summed over stages. *makespan (if not NULL)
 * receives the step time. For 1F1B and GPipe with equal stages the result
 * is (pp-1)/(m+pp-1). */
double schedule_simulate(ScheduleKind kind, int pp, int m, double tf, double tb,
                         double *makespan);

const char *schedule_name(ScheduleKind kind);

#endif
