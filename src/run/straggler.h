/*
 * straggler.h - the spread of step times across ranks, and the warning
 * when one rank stays behind.
 *
 * Every rank ends a step at about the same time, because the last
 * collectives wait for the slowest; what differs is how long each
 * computed. So a rank's figure is its step time less the time it was
 * blocked in comm.c (comm_blocked_seconds): its busy time. At each logged
 * step (where the loss is already reduced) one small gather brings every
 * rank's mean busy time since the last report to rank 0, which compares
 * the slowest with the median. When the same rank is above
 * STRAGGLER_RATIO x the median (and by more than STRAGGLER_MIN_MS, so
 * millisecond steps do not warn on noise) for STRAGGLER_REPORTS logged
 * steps in a row, rank 0 prints one warning naming it and its host.
 */
#ifndef TRI_SRC_STRAGGLER_H
#define TRI_SRC_STRAGGLER_H

#include <stdio.h>

#include "grid.h"

#define STRAGGLER_RATIO 1.5
#define STRAGGLER_MIN_MS 10.0
#define STRAGGLER_REPORTS 3

typedef struct {
    double busy_s;            /* this rank's busy seconds since the last report */
    int steps;                /* steps in busy_s */
    int behind;               /* rank 0: reports in a row with the same rank behind */
    int behind_rank;
} Straggler;

typedef struct {
    double median_ms;         /* lower median over ranks of busy ms per step */
    double slowest_ms;        /* the largest */
    int slowest_rank;         /* its world rank; -1: no report */
} StragglerReport;

/* Adds one step of this rank: its wall seconds and the seconds it was
 * blocked in communication. Not collective. */
void straggler_add_step(Straggler *s, double step_s, double blocked_s);

/* Gathers every rank's mean busy time per step since the last call;
 * rank 0 fills *out (other ranks get slowest_rank -1) and prints the
 * warning on warn when one rank stays behind. Collective on world. */
void straggler_report(Straggler *s, const Grid *g, StragglerReport *out, FILE *warn);

#endif
