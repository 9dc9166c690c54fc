/*
 * schedule.c - 1F1B and GPipe as action lists, and a simulator; see
 * schedule.h.
 */
#include "schedule.h"

#include <stdlib.h>

#include "fail.h"

const char *schedule_name(ScheduleKind kind)
{
    return kind == SCHED_GPIPE ? "gpipe" : "1f1b";
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

int schedule_length(ScheduleKind kind, int v, int m)
{
    (void)kind;
    return 2 * v * m;
}

int schedule_build(ScheduleKind kind, int pp, int v, int stage, int m, Action *out)
{
    if (v != 1)
        fail_abort("virtual stages need the interleaved schedule", __FILE__, __LINE__);
    return kind == SCHED_GPIPE ? build_gpipe(m, out) : build_1f1b(pp, stage, m, out);
}

int schedule_max_in_flight(const Action *a, int n)
{
    int live = 0, most = 0;
    for (int i = 0; i < n; i++) {
        live += a[i].kind == ACTION_FORWARD ? 1 : -1;
        if (live > most)
            most = live;
    }
    return most;
}

/* finish time of (stage, kind, mb) */
#define DONE(s, k, i) done[((s) * 2 + (k)) * m + (i)]

double schedule_simulate(ScheduleKind kind, int pp, int v, int m, StageCost cost,
                         double *makespan)
{
    double tf = cost.f, tb = cost.b + cost.w;
    Action *acts = malloc(sizeof(Action) * (size_t)(2 * m * pp));
    double *done = malloc(sizeof(double) * (size_t)(2 * m * pp));
    int *next = calloc((size_t)pp, sizeof *next);
    double *clock = calloc((size_t)pp, sizeof *clock);
    if (!acts || !done || !next || !clock)
        fail_abort("out of memory in the schedule simulator", __FILE__, __LINE__);
    for (int s = 0; s < pp; s++)
        schedule_build(kind, pp, v, s, m, acts + s * 2 * m);
    for (int i = 0; i < 2 * m * pp; i++)
        done[i] = -1.0;
    /* Run whichever stage's next action has its input ready; a schedule
     * that can deadlock would stop making progress here. */
    int remaining = 2 * m * pp;
    while (remaining > 0) {
        int progressed = 0;
        for (int s = 0; s < pp; s++) {
            if (next[s] == 2 * m)
                continue;
            Action a = acts[s * 2 * m + next[s]];
            double ready;
            if (a.kind == ACTION_FORWARD)
                ready = s == 0 ? 0.0 : DONE(s - 1, 0, a.mb);
            else
                ready = s == pp - 1 ? DONE(s, 0, a.mb) : DONE(s + 1, 1, a.mb);
            if (ready < 0.0)
                continue;
            double start = clock[s] > ready ? clock[s] : ready;
            clock[s] = start + (a.kind == ACTION_FORWARD ? tf : tb);
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
    double busy = (double)pp * m * (tf + tb);
    free(acts);
    free(done);
    free(next);
    free(clock);
    return 1.0 - busy / (pp * end);
}
