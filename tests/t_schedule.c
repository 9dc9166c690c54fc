/*
 * t_schedule.c - pipeline schedules as data, checked without MPI traffic:
 * every microbatch is forwarded and backwarded (and, in zb1, weight-passed)
 * exactly once per stage, in an order the stages can actually run
 * (dependencies across stages), 1F1B holds at most pp microbatches, zb1
 * as many (live until W) and GPipe m, and the simulated bubble is
 * (pp-1)/(m+pp-1) for 1F1B and GPipe, and for zb1 with f = b = w a third
 * of 1F1B's idle time once m >= pp (see zb1_makespan).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "schedule.h"
#include "tap.h"

/* Each (kind, mb) appears once, backward(i) follows forward(i), and with
 * weight passes (`split`) weight(i) follows backward(i); without, none. */
static int complete_once(const Action *a, int n, int m, int split)
{
    int *seen = calloc((size_t)(3 * m), sizeof *seen); /* [kind * m + mb] */
    int ok = n == (split ? 3 : 2) * m;
    for (int i = 0; i < n && ok; i++) {
        int mb = a[i].mb, k = a[i].kind;
        if (mb < 0 || mb >= m || k < 0 || k > 2 || (k == ACTION_WEIGHT && !split))
            ok = 0;
        else
            ok = seen[k * m + mb]++ == 0 && (k == ACTION_FORWARD || seen[(k - 1) * m + mb] == 1);
    }
    free(seen);
    return ok;
}

/* Each kind of action runs in microbatch order on every stage, which is
 * what neighbours' send/receive matching (and slot reuse) relies on. */
static int ordered(const Action *a, int n)
{
    int next[3] = {0, 0, 0};
    for (int i = 0; i < n; i++)
        if (a[i].mb != next[a[i].kind]++)
            return 0;
    return 1;
}

/* zb1's step time with f = b = w = 1, as the simulator gives it. For
 * m >= pp: the 3m of work plus a pp - 1 start-up (the first forward's trip
 * to the last stage), and nothing at the end: 1F1B's (pp-1)(f+b+w) idle
 * per stage becomes (pp-1)(f+b-w), a third, as in Qi et al. With m < pp
 * the deferred W's cannot cover the backward's trip back up, and each
 * microbatch missing costs one more: 2(m + pp) - 1. */
static double zb1_makespan(int pp, int m)
{
    return 3.0 * m + pp - 1 + (m < pp ? pp - m : 0);
}

/* The most microbatches stage s may hold: 1F1B's pp - s, zb1's pp on
 * every stage (1F1B's peak, its stage 0's: the W's deferred on later
 * stages take what their shorter warm-up leaves), GPipe's m. */
static int flight_limit(ScheduleKind kind, int pp, int s, int m)
{
    int limit = kind == SCHED_1F1B ? pp - s : kind == SCHED_ZB1 ? pp : m;
    return limit < m ? limit : m;
}

static void check_kind(ScheduleKind kind, int pp, int m)
{
    int split = kind == SCHED_ZB1;
    Action *a = malloc(sizeof(Action) * (size_t)schedule_length(kind, 1, m));
    int ok = 1, ord = 1, flight_ok = 1, worst = 0;
    for (int s = 0; s < pp; s++) {
        int n = schedule_build(kind, pp, 1, s, m, a);
        ok &= n == schedule_length(kind, 1, m) && complete_once(a, n, m, split);
        ord &= ordered(a, n);
        int f = schedule_max_in_flight(a, n);
        if (f > worst)
            worst = f;
        flight_ok &= f <= flight_limit(kind, pp, s, m) && (kind != SCHED_GPIPE || f == m);
    }
    const char *name = schedule_name(kind);
    tap_ok(ok, "%s pp=%d m=%d: each microbatch %s once per stage", name, pp, m,
           split ? "F, B and W (W after its B)" : "forward and backward");
    tap_ok(ord, "%s pp=%d m=%d: microbatches in order on every stage", name, pp, m);
    tap_ok(flight_ok, "%s pp=%d m=%d: at most %s microbatches in flight (max %d)", name, pp, m,
           kind == SCHED_GPIPE ? "m" : kind == SCHED_ZB1 ? "pp (F to W)" : "pp - stage", worst);
    double makespan;
    double bubble = schedule_simulate(kind, pp, 1, m, (StageCost){1.0, 1.0, 1.0}, &makespan);
    if (split) {
        double expect = 1.0 - 3.0 * m / zb1_makespan(pp, m);
        tap_ok(fabs(bubble - expect) < 1e-12 && makespan == zb1_makespan(pp, m),
               "zb1 pp=%d m=%d: simulated bubble %.4f = 1 - 3m/(3m + pp-1 + max(0, pp-m)) = %.4f "
               "(no deadlock)", pp, m, bubble, expect);
    } else {
        double expect = (double)(pp - 1) / (m + pp - 1);
        tap_ok(fabs(bubble - expect) < 1e-12,
               "%s pp=%d m=%d: simulated bubble %.4f = (pp-1)/(m+pp-1) = %.4f (no deadlock)", name,
               pp, m, bubble, expect);
    }
    free(a);
}

/* ZB-H1's shape, and its gain where the costs differ: the backward to the
 * input is what the stages wait for, so the cheaper it is against W the
 * more the deferred W's hide. */
static void check_zb1_shape(void)
{
    Action a[24];
    int n = schedule_build(SCHED_ZB1, 4, 1, 0, 8, a);
    int ok = n == 24 && a[3].kind == ACTION_FORWARD && a[4].kind == ACTION_BACKWARD
             && a[5].kind == ACTION_WEIGHT && a[5].mb == 0 && a[6].kind == ACTION_FORWARD;
    tap_ok(ok, "zb1 stage 0 of 4: 1F1B's 3 warm-up forwards, then F, B and at once its W");
    n = schedule_build(SCHED_ZB1, 4, 1, 3, 8, a);
    ok = a[0].kind == ACTION_FORWARD && a[1].kind == ACTION_BACKWARD && a[6].kind == ACTION_FORWARD
         && a[7].kind == ACTION_BACKWARD && a[7].mb == 3 && a[8].kind == ACTION_WEIGHT
         && a[8].mb == 0 && a[21].kind == ACTION_WEIGHT && a[21].mb == 5 && a[23].mb == 7;
    tap_ok(ok, "zb1 last stage of 4: F/B alternation with each W 3 microbatches late, the last "
               "3 W's at the end");
    /* (pp-1)(f+b-w) idle per stage for m >= pp: f=1, b=1, w=0.5, pp=4, m=8:
     * 8 * 2.5 + 3 * 1.5 = 24.5 */
    StageCost c = {1.0, 1.0, 0.5};
    double zb, fb, mk;
    zb = schedule_simulate(SCHED_ZB1, 4, 1, 8, c, &mk);
    fb = schedule_simulate(SCHED_1F1B, 4, 1, 8, c, NULL);
    tap_ok(fabs(mk - 24.5) < 1e-12 && zb < fb,
           "zb1 pp=4 m=8, f=1 b=1 w=0.5: makespan %.2f = m(f+b+w) + (pp-1)(f+b-w) = 24.5, "
           "bubble %.3f < 1f1b's %.3f", mk, zb, fb);
}

int main(int argc, char **argv)
{
    tap_init(&argc, &argv);
    static const int cases[][2] = {{1, 1}, {1, 4}, {2, 2}, {2, 8}, {4, 4}, {4, 8}, {4, 3}, {8, 16}};
    int n_cases = sizeof cases / sizeof cases[0];
    tap_plan(n_cases * 3 * 4 + 2 + 3);
    for (int c = 0; c < n_cases; c++) {
        check_kind(SCHED_1F1B, cases[c][0], cases[c][1]);
        check_kind(SCHED_GPIPE, cases[c][0], cases[c][1]);
        check_kind(SCHED_ZB1, cases[c][0], cases[c][1]);
    }
    check_zb1_shape();
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
