/*
 * t_schedule.c - pipeline schedules as data, checked without MPI traffic:
 * every microbatch is forwarded and backwarded (and, in zb1, weight-passed)
 * exactly once per stage, in an order the stages can actually run
 * (dependencies across stages), 1F1B holds at most pp microbatches, zb1
 * as many (live until W) and GPipe m, and the simulated bubble is
 * (pp-1)/(m+pp-1) for 1F1B and GPipe, and for zb1 with f = b = w a third
 * of 1F1B's idle time once m >= pp (see zb1_makespan). The interleaved
 * schedule runs each (microbatch, chunk) forward and backward once, holds
 * what schedule.h says, and its simulated bubble is (pp-1)/(v*m+pp-1).
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

/* Each (mb, chunk) is forwarded and backwarded once, the backward after
 * the forward, and on each chunk microbatches run in order (the executor's
 * message tags and slot reuse rely on both). */
static int interleaved_complete(const Action *a, int n, int v, int m)
{
    int *fwd = calloc((size_t)(v * m), sizeof *fwd), *bwd = calloc((size_t)(v * m), sizeof *bwd);
    int *next_f = calloc((size_t)v, sizeof *next_f), *next_b = calloc((size_t)v, sizeof *next_b);
    int ok = n == 2 * v * m;
    for (int i = 0; i < n && ok; i++) {
        int c = a[i].chunk, mb = a[i].mb;
        ok = c >= 0 && c < v && mb >= 0 && mb < m;
        if (!ok)
            break;
        if (a[i].kind == ACTION_FORWARD)
            ok = fwd[c * m + mb]++ == 0 && next_f[c]++ == mb;
        else
            ok = a[i].kind == ACTION_BACKWARD && bwd[c * m + mb]++ == 0 && fwd[c * m + mb] == 1
                 && next_b[c]++ == mb;
    }
    free(fwd);
    free(bwd);
    free(next_f);
    free(next_b);
    return ok;
}

/* The peak schedule.h states: 2(pp-s-1) + (v-1)pp warm-up forwards, plus
 * the steady state's one, of chunks whose backward is still to come. */
static int interleaved_peak(int pp, int v, int s, int m)
{
    int peak = 2 * (pp - s - 1) + (v - 1) * pp + 1;
    return peak < v * m ? peak : v * m;
}

static void check_interleaved(int pp, int v, int m)
{
    Action *a = malloc(sizeof(Action) * (size_t)schedule_length(SCHED_INTERLEAVED, v, m));
    Action *f = malloc(sizeof(Action) * (size_t)(v * m));
    int ok = 1, peak_ok = 1, fwd_ok = 1, stage0 = 0;
    for (int s = 0; s < pp; s++) {
        int n = schedule_build(SCHED_INTERLEAVED, pp, v, s, m, a);
        ok &= interleaved_complete(a, n, v, m);
        int in_flight = schedule_max_in_flight(a, n);
        peak_ok &= in_flight == interleaved_peak(pp, v, s, m);
        if (s == 0)
            stage0 = in_flight;
        /* evaluation forwards in the order training does */
        int nf = schedule_forwards(SCHED_INTERLEAVED, pp, v, m, f);
        fwd_ok &= nf == v * m;
        for (int i = 0, k = 0; i < n && fwd_ok; i++)
            if (a[i].kind == ACTION_FORWARD)
                fwd_ok &= f[k].mb == a[i].mb && f[k].chunk == a[i].chunk, k++;
    }
    tap_ok(ok, "interleaved pp=%d v=%d m=%d: each (microbatch, chunk) forward and backward once, "
           "in microbatch order per chunk", pp, v, m);
    tap_ok(peak_ok, "interleaved pp=%d v=%d m=%d: stage s holds min(2(pp-s-1)+(v-1)pp+1, vm) "
           "chunks (stage 0: %d)", pp, v, m, stage0);
    tap_ok(fwd_ok, "interleaved pp=%d v=%d m=%d: the forward-only list is training's order",
           pp, v, m);
    double makespan;
    double bubble = schedule_simulate(SCHED_INTERLEAVED, pp, v, m, (StageCost){1.0, 2.0, 0.0},
                                      &makespan);
    /* exact for equal stages: the last stage starts after (pp-1) chunk
     * forwards and the first ends (pp-1) chunk backwards after the rest */
    double expect = (double)(pp - 1) / ((double)v * m + pp - 1);
    tap_ok(fabs(bubble - expect) < 1e-12 && fabs(expect - schedule_ideal_bubble(
               SCHED_INTERLEAVED, pp, v, m)) < 1e-15,
           "interleaved pp=%d v=%d m=%d: simulated bubble %.4f = (pp-1)/(v*m+pp-1) = %.4f "
           "(no deadlock)", pp, v, m, bubble, expect);
    tap_ok(schedule_messages(SCHED_INTERLEAVED, pp, v, m) == 2LL * m * (v * pp - 1)
           && schedule_messages(SCHED_1F1B, pp, 1, m) == 2LL * m * (pp - 1),
           "interleaved pp=%d v=%d m=%d: %lld messages a step against 1f1b's %lld", pp, v, m,
           schedule_messages(SCHED_INTERLEAVED, pp, v, m), schedule_messages(SCHED_1F1B, pp, 1, m));
    free(a);
    free(f);
}

/* Pipeline messages match in posting order per kind and link (comm.h):
 * on every link the receiver's order of receives (activations in its
 * forward order, gradients in its backward order) must be its sender's
 * order of sends, for the training lists and the forward-only ones. */
static int links_in_order(ScheduleKind kind, int pp, int v, int m, int forwards_only)
{
    int len = forwards_only ? v * m : schedule_length(kind, v, m);
    Action *lists = malloc(sizeof *lists * (size_t)(pp * len));
    for (int s = 0; s < pp; s++) {
        Action *list = lists + (size_t)s * len;
        if (forwards_only)
            schedule_forwards(kind, pp, v, m, list);
        else
            schedule_build(kind, pp, v, s, m, list);
    }
    int ok = schedule_links_in_order(lists, len, pp, v);
    free(lists);
    return ok;
}

static void check_links(void)
{
    static const ScheduleKind kinds[] = {SCHED_1F1B, SCHED_GPIPE, SCHED_ZB1};
    int ok = 1;
    for (int k = 0; k < 3; k++)
        for (int pp = 1; pp <= 8; pp++)
            for (int m = 1; m <= 17; m++)
                ok &= links_in_order(kinds[k], pp, 1, m, 0) && links_in_order(kinds[k], pp, 1, m, 1);
    tap_ok(ok, "1f1b, gpipe, zb1, pp 1..8, m 1..17: every link's receives can be posted in "
           "its sender's order (training and forward-only)");
    ok = 1;
    for (int pp = 2; pp <= 8; pp++)
        for (int v = 2; v <= 4; v++)
            for (int m = pp; m <= 4 * pp; m += pp)
                ok &= links_in_order(SCHED_INTERLEAVED, pp, v, m, 0)
                   && links_in_order(SCHED_INTERLEAVED, pp, v, m, 1);
    tap_ok(ok, "interleaved, pp 2..8, v 2..4, m up to 4pp: every link in order, the ring's "
           "wrap included");
    /* the check sees a receiver that would take gradients in another
     * order: swap stage 0's first two backwards (4 stages, 1F1B) */
    int pp = 4, m = 8, len = schedule_length(SCHED_1F1B, 1, m);
    Action *lists = malloc(sizeof *lists * (size_t)(pp * len));
    for (int s = 0; s < pp; s++)
        schedule_build(SCHED_1F1B, pp, 1, s, m, lists + (size_t)s * len);
    int first = -1, second = -1;
    for (int i = 0; i < len && second < 0; i++)
        if (lists[i].kind == ACTION_BACKWARD) {
            if (first < 0)
                first = i;
            else
                second = i;
        }
    Action t = lists[first];
    lists[first] = lists[second];
    lists[second] = t;
    tap_ok(second > 0 && !schedule_links_in_order(lists, len, pp, 1),
           "a stage taking two gradients in another order than its sender sends them is seen");
    free(lists);
}

int main(int argc, char **argv)
{
    tap_init(&argc, &argv);
    static const int cases[][2] = {{1, 1}, {1, 4}, {2, 2}, {2, 8}, {4, 4}, {4, 8}, {4, 3}, {8, 16}};
    int n_cases = sizeof cases / sizeof cases[0];
    /* pp, v, m: m = pp (all warm-up on stage 0), several rounds, v up to 4 */
    static const int inter[][3] = {{2, 2, 2}, {2, 2, 4}, {2, 4, 6}, {4, 2, 4}, {4, 2, 8},
                                   {4, 3, 12}, {3, 2, 9}, {8, 2, 16}, {8, 4, 8}};
    int n_inter = sizeof inter / sizeof inter[0];
    tap_plan(n_cases * 3 * 4 + n_inter * 5 + 3 + 3 + 3);
    for (int c = 0; c < n_cases; c++) {
        check_kind(SCHED_1F1B, cases[c][0], cases[c][1]);
        check_kind(SCHED_GPIPE, cases[c][0], cases[c][1]);
        check_kind(SCHED_ZB1, cases[c][0], cases[c][1]);
    }
    check_zb1_shape();
    check_links();
    for (int c = 0; c < n_inter; c++)
        check_interleaved(inter[c][0], inter[c][1], inter[c][2]);
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
    /* Megatron's order on stage 0 of 2 with 2 chunks, 4 microbatches: 4
     * warm-up forwards (mb 0,1 chunk 0; mb 0,1 chunk 1), and the first
     * backward is of chunk 1 */
    schedule_build(SCHED_INTERLEAVED, 2, 2, 0, 4, a);
    tap_ok(a[0].mb == 0 && a[0].chunk == 0 && a[1].mb == 1 && a[1].chunk == 0 && a[2].mb == 0
           && a[2].chunk == 1 && a[3].mb == 1 && a[3].chunk == 1 && a[4].kind == ACTION_FORWARD
           && a[4].mb == 2 && a[4].chunk == 0 && a[5].kind == ACTION_BACKWARD && a[5].mb == 0
           && a[5].chunk == 1,
           "interleaved stage 0 of 2, v=2: groups of pp through chunk 0 then 1, backwards from "
           "the last chunk");
    return tap_done();
}
