/*
 * schedule.c - 1F1B, GPipe and ZB-H1 as action lists, and a simulator;
 * see schedule.h.
 */
#include "schedule.h"

#include <stdlib.h>

#include "fail.h"

const char *schedule_name(ScheduleKind kind)
{
    switch (kind) {
    case SCHED_GPIPE: return "gpipe";
    case SCHED_ZB1: return "zb1";
    default: return "1f1b";
    }
}

static int build_gpipe(int m, Action *out)
{
    int n = 0;
    for (int i = 0; i < m; i++)
        out[n++] = (Action){ACTION_FORWARD, i, 0};
    for (int i = 0; i < m; i++)
        out[n++] = (Action){ACTION_BACKWARD, i, 0};
    return n;
}

static int build_1f1b(int pp, int stage, int m, Action *out)
{
    int warmup = pp - stage - 1;
    if (warmup > m)
        warmup = m;
    int n = 0, next_fwd = 0, next_bwd = 0;
    while (next_fwd < warmup)
        out[n++] = (Action){ACTION_FORWARD, next_fwd++, 0};
    while (next_fwd < m) {
        out[n++] = (Action){ACTION_FORWARD, next_fwd++, 0};
        out[n++] = (Action){ACTION_BACKWARD, next_bwd++, 0};
    }
    while (next_bwd < m)
        out[n++] = (Action){ACTION_BACKWARD, next_bwd++, 0};
    return n;
}

/* ZB-H1 (Qi et al. 2023, "Zero Bubble Pipeline Parallelism", Figure 3):
 * 1F1B's warm-up and its forward/backward order, with each weight pass
 * run `stage` microbatches after its backward. The last stage, whose
 * backwards everyone upstream waits for, thus runs F and B back to back
 * while it can, and every stage's deferred W's fill what was 1F1B's
 * cool-down bubble. In flight (F done, W not): (pp - stage - 1) warm-up
 * + 1 + stage deferred = pp on every stage, 1F1B's peak (its stage 0's). */
static int build_zb1(int pp, int stage, int m, Action *out)
{
    int warmup = pp - stage - 1;
    if (warmup > m)
        warmup = m;
    int n = 0, next_fwd = 0, next_bwd = 0, next_w = 0;
    while (next_fwd < warmup)
        out[n++] = (Action){ACTION_FORWARD, next_fwd++, 0};
    while (next_bwd < m) {
        if (next_fwd < m)
            out[n++] = (Action){ACTION_FORWARD, next_fwd++, 0};
        out[n++] = (Action){ACTION_BACKWARD, next_bwd++, 0};
        /* in the cool-down each backward is followed by the oldest W,
         * which fills the wait for the next backward's gradient */
        if (next_bwd - next_w > stage || next_fwd == m)
            out[n++] = (Action){ACTION_WEIGHT, next_w++, 0};
    }
    while (next_w < m)
        out[n++] = (Action){ACTION_WEIGHT, next_w++, 0};
    return n;
}

int schedule_length(ScheduleKind kind, int v, int m)
{
    return (kind == SCHED_ZB1 ? 3 : 2) * v * m;
}

int schedule_build(ScheduleKind kind, int pp, int v, int stage, int m, Action *out)
{
    if (v != 1)
        fail_abort("virtual stages need the interleaved schedule", __FILE__, __LINE__);
    switch (kind) {
    case SCHED_GPIPE: return build_gpipe(m, out);
    case SCHED_ZB1: return build_zb1(pp, stage, m, out);
    default: return build_1f1b(pp, stage, m, out);
    }
}

/* A microbatch's activations are live from its forward until the last
 * pass that reads them: its weight pass where the list has them (W reads
 * the layers' inputs and the output gradients B kept), else its backward. */
int schedule_max_in_flight(const Action *a, int n)
{
    ActionKind frees = ACTION_BACKWARD;
    for (int i = 0; i < n; i++)
        if (a[i].kind == ACTION_WEIGHT)
            frees = ACTION_WEIGHT;
    int live = 0, most = 0;
    for (int i = 0; i < n; i++) {
        if (a[i].kind == ACTION_FORWARD)
            live++;
        else if (a[i].kind == frees)
            live--;
        if (live > most)
            most = live;
    }
    return most;
}

/* finish time of (stage, kind, mb) */
#define DONE(s, k, i) done[((s) * 3 + (k)) * m + (i)]

/* When action a of stage s can start: the data it reads is there. A
 * backward needs the next stage's backward (the gradient B sends, not W),
 * a weight pass only its own backward. -1 while not ready. */
static double ready_at(const double *done, int pp, int m, int s, Action a)
{
    switch (a.kind) {
    case ACTION_FORWARD: return s == 0 ? 0.0 : DONE(s - 1, ACTION_FORWARD, a.mb);
    case ACTION_WEIGHT: return DONE(s, ACTION_BACKWARD, a.mb);
    default:
        return s == pp - 1 ? DONE(s, ACTION_FORWARD, a.mb) : DONE(s + 1, ACTION_BACKWARD, a.mb);
    }
}

double schedule_simulate(ScheduleKind kind, int pp, int v, int m, StageCost cost,
                         double *makespan)
{
    int len = schedule_length(kind, v, m);
    /* without weight actions the backward does the weight gradients too */
    double secs[3] = {cost.f, kind == SCHED_ZB1 ? cost.b : cost.b + cost.w, cost.w};
    Action *acts = malloc(sizeof(Action) * (size_t)(len * pp));
    double *done = malloc(sizeof(double) * (size_t)(3 * m * pp));
    int *next = calloc((size_t)pp, sizeof *next), *count = calloc((size_t)pp, sizeof *count);
    double *clock = calloc((size_t)pp, sizeof *clock);
    if (!acts || !done || !next || !count || !clock)
        fail_abort("out of memory in the schedule simulator", __FILE__, __LINE__);
    int remaining = 0;
    for (int s = 0; s < pp; s++)
        remaining += count[s] = schedule_build(kind, pp, v, s, m, acts + s * len);
    for (int i = 0; i < 3 * m * pp; i++)
        done[i] = -1.0;
    /* Run whichever stage's next action has its input ready; a schedule
     * that can deadlock would stop making progress here. */
    while (remaining > 0) {
        int progressed = 0;
        for (int s = 0; s < pp; s++) {
            if (next[s] == count[s])
                continue;
            Action a = acts[s * len + next[s]];
            double ready = ready_at(done, pp, m, s, a);
            if (ready < 0.0)
                continue;
            double start = clock[s] > ready ? clock[s] : ready;
            clock[s] = start + secs[a.kind];
            DONE(s, a.kind, a.mb) = clock[s];
            next[s]++;
            remaining--;
            progressed = 1;
        }
        if (!progressed)
            fail_abort("pipeline schedule deadlocks", __FILE__, __LINE__);
    }
    double end = 0.0;
    for (int s = 0; s < pp; s++)
        if (clock[s] > end)
            end = clock[s];
    if (makespan)
        *makespan = end;
    double busy = (double)pp * m * (cost.f + cost.b + cost.w);
    free(acts);
    free(done);
    free(next);
    free(count);
    free(clock);
    return 1.0 - busy / (pp * end);
}
