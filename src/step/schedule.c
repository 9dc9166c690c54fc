/*
 * schedule.c - 1F1B, GPipe, interleaved 1F1B and ZB-H1 as action lists,
 * and a simulator; see schedule.h.
 */
#include "schedule.h"

#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "fail.h"

const char *schedule_name(ScheduleKind kind)
{
    switch (kind) {
    case SCHED_GPIPE: return "gpipe";
    case SCHED_INTERLEAVED: return "interleaved";
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

/* Megatron's interleaved order: the stage's k-th forward (k < v*m) runs
 * microbatches in groups of pp, each group through chunk 0, then chunk 1,
 * and so on; its k-th backward takes the chunks in reverse. */
static Action interleaved_action(ActionKind kind, int pp, int v, int k)
{
    int round = pp * v;
    int chunk = k % round / pp;
    if (kind == ACTION_BACKWARD)
        chunk = v - 1 - chunk;
    return (Action){kind, k / round * pp + k % pp, chunk};
}

/* Megatron's interleaved 1F1B (Narayanan et al. 2021): warm-up forwards
 * (two per later stage, so that the first backward finds its gradient
 * ready, and v-1 rounds of pp to fill the other chunks), then one forward
 * and one backward in turn, then the remaining backwards. */
static int build_interleaved(int pp, int v, int stage, int m, Action *out)
{
    int total = v * m;
    int warmup = 2 * (pp - stage - 1) + (v - 1) * pp;
    if (warmup > total)
        warmup = total;
    int n = 0, next_fwd = 0, next_bwd = 0;
    while (next_fwd < warmup)
        out[n++] = interleaved_action(ACTION_FORWARD, pp, v, next_fwd++);
    while (next_fwd < total) {
        out[n++] = interleaved_action(ACTION_FORWARD, pp, v, next_fwd++);
        out[n++] = interleaved_action(ACTION_BACKWARD, pp, v, next_bwd++);
    }
    while (next_bwd < total)
        out[n++] = interleaved_action(ACTION_BACKWARD, pp, v, next_bwd++);
    return n;
}

int schedule_length(ScheduleKind kind, int v, int m)
{
    return (kind == SCHED_ZB1 ? 3 : 2) * v * m;
}

int schedule_build(ScheduleKind kind, int pp, int v, int stage, int m, Action *out)
{
    if (kind == SCHED_INTERLEAVED) {
        if (v < 2 || m % pp)
            fail_abort("the interleaved schedule needs v >= 2 and m a multiple of pp",
                       __FILE__, __LINE__);
        return build_interleaved(pp, v, stage, m, out);
    }
    if (v != 1)
        fail_abort("virtual stages need the interleaved schedule", __FILE__, __LINE__);
    switch (kind) {
    case SCHED_GPIPE: return build_gpipe(m, out);
    case SCHED_ZB1: return build_zb1(pp, stage, m, out);
    default: return build_1f1b(pp, stage, m, out);
    }
}

int schedule_forwards(ScheduleKind kind, int pp, int v, int m, Action *out)
{
    if (kind != SCHED_INTERLEAVED)
        v = 1;
    int n = 0;
    for (int group = 0; group < m; group += pp)
        for (int c = 0; c < v; c++)
            for (int mb = group; mb < m && mb < group + pp; mb++)
                out[n++] = (Action){ACTION_FORWARD, mb, c};
    return n;
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

/* ---- message order --------------------------------------------------- */

int schedule_has_input(int stage, int chunk) { return stage > 0 || chunk > 0; }

int schedule_has_output(int pp, int v, int stage, int chunk)
{
    return stage < pp - 1 || chunk < v - 1;
}

/* The messages of one kind on one link, in the order one end posts them,
 * as the receiver's keys mb * v + chunk: walks `list` for the actions of
 * `kind` that send (sending end) or receive (receiving end) such a
 * message. Returns their count. */
static int link_keys(const Action *list, int len, ActionKind kind, int sending, int pp, int v,
                     int s, int *keys)
{
    int n = 0;
    for (int i = 0; i < len; i++) {
        Action a = list[i];
        if (a.kind != kind)
            continue;
        int forward = kind == ACTION_FORWARD;
        /* activations go out of the output and into the input; gradients
         * the other way */
        int moves = forward == sending ? schedule_has_output(pp, v, s, a.chunk)
                                       : schedule_has_input(s, a.chunk);
        if (!moves)
            continue;
        int chunk = a.chunk;
        if (sending && forward && s == pp - 1)
            chunk++;   /* the ring's wrap: into the next chunk of stage 0 */
        if (sending && !forward && s == 0)
            chunk--;   /* ... and back */
        keys[n++] = a.mb * v + chunk;
    }
    return n;
}

int schedule_links_in_order(const Action *lists, int len, int pp, int v)
{
    int *sent = TRI_MALLOC(sizeof *sent * (size_t)(len + 1), "a schedule's check");
    int *posted = TRI_MALLOC(sizeof *posted * (size_t)(len + 1), "a schedule's check");
    int ok = 1;
    for (int s = 0; s < pp && pp > 1 && ok; s++) {
        for (int backward = 0; backward < 2 && ok; backward++) {
            ActionKind kind = backward ? ACTION_BACKWARD : ACTION_FORWARD;
            int r = backward ? (s + pp - 1) % pp : (s + 1) % pp;
            int ns = link_keys(lists + (size_t)s * len, len, kind, 1, pp, v, s, sent);
            int nr = link_keys(lists + (size_t)r * len, len, kind, 0, pp, v, r, posted);
            ok = ns == nr && memcmp(sent, posted, sizeof *sent * (size_t)ns) == 0;
        }
    }
    free(sent);
    free(posted);
    return ok;
}

double schedule_ideal_bubble(ScheduleKind kind, int pp, int v, int m)
{
    if (kind == SCHED_ZB1) /* f = b = w: t_schedule.c derives it */
        return 1.0 - 3.0 * m / (3.0 * m + pp - 1 + (pp > m ? pp - m : 0));
    if (kind != SCHED_INTERLEAVED)
        v = 1;
    return (double)(pp - 1) / ((double)v * m + pp - 1);
}

long long schedule_messages(ScheduleKind kind, int pp, int v, int m)
{
    if (kind != SCHED_INTERLEAVED)
        v = 1;
    return 2LL * m * ((long long)v * pp - 1);
}

/* The simulator's state: every stage's list, and when each (stage, chunk,
 * kind, mb) finished (-1: not yet). */
typedef struct {
    int pp, v, m;
    Action *acts;       /* stage s's list at s * len */
    int len;
    double *done;
} Sim;

static double *done_at(const Sim *sim, int stage, int chunk, ActionKind kind, int mb)
{
    return &sim->done[((stage * sim->v + chunk) * 3 + (int)kind) * sim->m + mb];
}

/* When the input of stage's action a is ready (-1: not yet). A forward of
 * chunk c takes the output of chunk c on the stage before, or of chunk
 * c-1 on the last stage when it runs on stage 0 (the ring); a backward
 * mirrors it (it needs the next stage's backward, the gradient B sends,
 * not its W), and the last virtual stage's backward starts from its own
 * forward (the loss). A weight pass needs only its own backward. */
static double input_ready(const Sim *sim, int stage, Action a)
{
    int last = sim->pp - 1;
    if (a.kind == ACTION_WEIGHT)
        return *done_at(sim, stage, a.chunk, ACTION_BACKWARD, a.mb);
    if (a.kind == ACTION_FORWARD) {
        if (stage > 0)
            return *done_at(sim, stage - 1, a.chunk, ACTION_FORWARD, a.mb);
        return a.chunk > 0 ? *done_at(sim, last, a.chunk - 1, ACTION_FORWARD, a.mb) : 0.0;
    }
    if (stage < last)
        return *done_at(sim, stage + 1, a.chunk, ACTION_BACKWARD, a.mb);
    if (a.chunk < sim->v - 1)
        return *done_at(sim, 0, a.chunk + 1, ACTION_BACKWARD, a.mb);
    return *done_at(sim, stage, a.chunk, ACTION_FORWARD, a.mb);
}

double schedule_simulate(ScheduleKind kind, int pp, int v, int m, StageCost cost,
                         double *makespan)
{
    /* a chunk holds 1/v of the stage's layers; without weight actions the
     * backward does the weight gradients too */
    double secs[3] = {cost.f / v, (kind == SCHED_ZB1 ? cost.b : cost.b + cost.w) / v,
                      cost.w / v};
    Sim sim = {.pp = pp, .v = v, .m = m, .len = schedule_length(kind, v, m)};
    int total = sim.len * pp;
    sim.acts = TRI_MALLOC(sizeof(Action) * (size_t)total, "the schedule simulator");
    sim.done = TRI_MALLOC(sizeof(double) * (size_t)(3 * v * m * pp), "the schedule simulator");
    int *next = TRI_CALLOC((size_t)pp, sizeof *next, "the schedule simulator");
    double *clock = TRI_CALLOC((size_t)pp, sizeof *clock, "the schedule simulator");
    for (int s = 0; s < pp; s++)
        schedule_build(kind, pp, v, s, m, sim.acts + s * sim.len);
    for (int i = 0; i < 3 * v * m * pp; i++)
        sim.done[i] = -1.0;
    /* Run whichever stage's next action has its input ready; a schedule
     * that can deadlock would stop making progress here. */
    int remaining = total;
    while (remaining > 0) {
        int progressed = 0;
        for (int s = 0; s < pp; s++) {
            if (next[s] == sim.len)
                continue;
            Action a = sim.acts[s * sim.len + next[s]];
            double ready = input_ready(&sim, s, a);
            if (ready < 0.0)
                continue;
            double start = clock[s] > ready ? clock[s] : ready;
            clock[s] = start + secs[a.kind];
            *done_at(&sim, s, a.chunk, a.kind, a.mb) = clock[s];
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
    free(sim.acts);
    free(sim.done);
    free(next);
    free(clock);
    return 1.0 - busy / (pp * end);
}

int schedule_stage_slots(ScheduleKind kind, int pp, int v, int stage, int m)
{
    Action *acts = TRI_MALLOC(sizeof(Action) * (size_t)schedule_length(kind, v, m), "a schedule");
    int slots = schedule_max_in_flight(acts, schedule_build(kind, pp, v, stage, m, acts));
    free(acts);
    return slots;
}
