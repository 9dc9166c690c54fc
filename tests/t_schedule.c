/*
 * t_schedule.c - pipeline schedules as data, checked without MPI traffic:
 * every microbatch is forwarded and backwarded exactly once per stage, in
 * an order the stages can actually run (dependencies across stages), 1F1B
 * holds at most pp microbatches and GPipe m, and the simulated bubble is
 * (pp-1)/(m+pp-1).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "schedule.h"
#include "tap.h"

/* Each (kind, mb) appears once and backward(i) follows forward(i). */
static int complete_once(const Action *a, int n, int m)
{
    int *fwd = calloc((size_t)m, sizeof *fwd), *bwd = calloc((size_t)m, sizeof *bwd);
    int ok = n == 2 * m;
    for (int i = 0; i < n && ok; i++) {
        if (a[i].mb < 0 || a[i].mb >= m)
            ok = 0;
        else if (a[i].kind == ACTION_FORWARD)
            ok = fwd[a[i].mb]++ == 0;
        else
            ok = bwd[a[i].mb]++ == 0 && fwd[a[i].mb] == 1;
    }
    free(fwd);
    free(bwd);
    return ok;
}

/* Forwards and backwards run in microbatch order on every stage, which is
 * what neighbours' send/receive matching relies on. */
static int ordered(const Action *a, int n)
{
    int next_f = 0, next_b = 0;
    for (int i = 0; i < n; i++) {
        if (a[i].kind == ACTION_FORWARD && a[i].mb != next_f++)
            return 0;
        if (a[i].kind == ACTION_BACKWARD && a[i].mb != next_b++)
            return 0;
    }
    return 1;
}

static void check_kind(ScheduleKind kind, int pp, int m)
{
    Action *a = malloc(sizeof(Action) * (size_t)(2 * m));
    int ok = 1, ord = 1, flight_ok = 1, worst = 0;
    for (int s = 0; s < pp; s++) {
        int n = schedule_build(kind, pp, 1, s, m, a);
        ok &= complete_once(a, n, m);
        ord &= ordered(a, n);
        int f = schedule_max_in_flight(a, n);
        if (f > worst)
            worst = f;
        int limit = kind == SCHED_1F1B ? (pp - s < m ? pp - s : m) : m;
        flight_ok &= f <= limit && (kind != SCHED_GPIPE || f == m);
    }
    const char *name = schedule_name(kind);
    tap_ok(ok, "%s pp=%d m=%d: each microbatch forward and backward once per stage", name, pp, m);
    tap_ok(ord, "%s pp=%d m=%d: microbatches in order on every stage", name, pp, m);
    tap_ok(flight_ok, "%s pp=%d m=%d: at most %s microbatches in flight (max %d)", name, pp, m,
           kind == SCHED_1F1B ? "pp" : "m", worst);
    double makespan;
    double bubble = schedule_simulate(kind, pp, 1, m, (StageCost){1.0, 1.0, 1.0}, &makespan);
    double expect = (double)(pp - 1) / (m + pp - 1);
    tap_ok(fabs(bubble - expect) < 1e-12,
           "%s pp=%d m=%d: simulated bubble %.4f = (pp-1)/(m+pp-1) = %.4f (no deadlock)", name, pp,
           m, bubble, expect);
    free(a);
}

int main(int argc, char **argv)
{
    tap_init(&argc, &argv);
    static const int cases[][2] = {{1, 1}, {1, 4}, {2, 2}, {2, 8}, {4, 4}, {4, 8}, {4, 3}, {8, 16}};
    int n_cases = sizeof cases / sizeof cases[0];
    tap_plan(n_cases * 2 * 4 + 2);
    for (int c = 0; c < n_cases; c++) {
        check_kind(SCHED_1F1B, cases[c][0], cases[c][1]);
        check_kind(SCHED_GPIPE, cases[c][0], cases[c][1]);
    }
    /* 1F1B's warm-up on stage 0 of 4 is 3 forwards, then F/B pairs */
    Action a[16];
    schedule_build(SCHED_1F1B, 4, 1, 0, 8, a);
    tap_ok(a[0].kind == ACTION_FORWARD && a[2].kind == ACTION_FORWARD && a[3].kind == ACTION_FORWARD
           && a[4].kind == ACTION_BACKWARD && a[4].mb == 0 && a[15].kind == ACTION_BACKWARD,
           "1f1b stage 0 of 4: 3 warm-up forwards, then one forward one backward");
    schedule_build(SCHED_1F1B, 4, 1, 3, 8, a);
    int alternates = 1;
    for (int i = 0; i < 16; i++)
        alternates &= a[i].kind == (i % 2 ? ACTION_BACKWARD : ACTION_FORWARD);
    tap_ok(alternates, "1f1b last stage: no warm-up, strict forward/backward alternation");
    return tap_done();
}
