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
 *  ZB-H1 (zb1): 1F1B with each backward split into B (the gradient at the
 *         input, which the previous stage waits for) and W (the parameter
 *         gradients, which nobody waits for); stage s runs each W s
 *         microbatches after its B, so the W's fill what was 1F1B's
 *         cool-down bubble. With f = b = w and m >= pp a stage idles
 *         (pp-1)(f+b-w), a third of 1F1B's (pp-1)(f+b+w); every stage holds
 *         up to pp microbatches (from F until W), 1F1B's peak at stage 0.
 *         Qi et al. 2023, "Zero Bubble Pipeline Parallelism".
 *  Interleaved 1F1B (Megatron's, Narayanan et al. 2021): each stage holds
 *         v chunks of layers, chunk c of stage s being virtual stage
 *         c*pp + s of pp*v (layout_chunk_layers), so a microbatch goes round
 *         the ring of stages v times. Microbatches run in groups of pp
 *         (m must be a multiple of pp), each group through chunk 0, then
 *         1, ...; backwards take the chunks in reverse. Stage s warms up
 *         with 2(pp-s-1) + (v-1)pp forwards of a chunk each, then
 *         alternates, then drains. With equal stages the bubble falls
 *         from (pp-1)/(m+pp-1) to (pp-1)/(v*m+pp-1), at the price of
 *         2m(v*pp-1) pipeline messages a step instead of 2m(pp-1), and of
 *         holding min(2(pp-s-1) + (v-1)pp + 1, v*m) chunks' activations
 *         on stage s: on stage 0, 1 + (pp-1)/(pp*v) times 1F1B's.
 */
#ifndef TRI_SRC_SCHEDULE_H
#define TRI_SRC_SCHEDULE_H

#include "config.h"

/* ACTION_BACKWARD is the whole backward of a microbatch on one chunk,
 * except in schedules that also list ACTION_WEIGHT for it: then the
 * backward computes only the gradient at the chunk's input, and the weight
 * action its parameter gradients later. */
typedef enum { ACTION_FORWARD = 0, ACTION_BACKWARD = 1, ACTION_WEIGHT = 2 } ActionKind;

typedef struct {
    ActionKind kind;
    int mb;          /* microbatch */
    int chunk;       /* the stage's chunk of layers, 0 .. v-1 (0 unless
                        the schedule is interleaved) */
} Action;

/* Seconds one stage spends per microbatch, over all its chunks: forward,
 * backward to the input, and the parameter gradients. Schedules without
 * weight actions run b + w in each backward. */
typedef struct {
    double f, b, w;
} StageCost;

/* The number of actions one stage performs in a step of m microbatches
 * with v chunks per stage. Not collective. */
int schedule_length(ScheduleKind kind, int v, int m);

/* Fills out[0 .. schedule_length) with stage's actions; returns their
 * count. v is the number of chunks per stage (1 unless interleaved).
 * Not collective. */
int schedule_build(ScheduleKind kind, int pp, int v, int stage, int m, Action *out);

/* Fills out[0 .. v*m) with the forwards alone of a step of m
 * microbatches, for evaluation and generation: in groups of pp through
 * the chunks, the order the training schedule forwards them in (with
 * v = 1, microbatch order). Every stage runs the same list, and every
 * forward's input comes from an earlier entry, so it cannot deadlock.
 * Returns the count. Not collective. */
int schedule_forwards(ScheduleKind kind, int pp, int v, int m, Action *out);

/* The largest number of (microbatch, chunk) pairs whose forward has run
 * and whose last pass has not, over the list: the activation slots, each
 * holding one chunk's activations, that a stage needs. The last pass is
 * the weight pass where the list has them (W reads the layer inputs and
 * the output gradients B kept), else the backward. Not collective. */
int schedule_max_in_flight(const Action *a, int n);
/* The slots stage needs under `kind` with m microbatches: the
 * schedule_max_in_flight of its list, built here (plan asks this; the
 * executor reads the list it runs). Not collective. */
int schedule_stage_slots(ScheduleKind kind, int pp, int v, int stage, int m);

/* Whether chunk `chunk` of stage `stage` takes its input from another
 * stage, and sends its output to one: every chunk but the model's first
 * (stage 0, chunk 0) and last (stage pp-1, chunk v-1). Not collective. */
int schedule_has_input(int stage, int chunk);
int schedule_has_output(int pp, int v, int stage, int chunk);

/* 1 when on every link between stages the receiver can post its
 * receives in the order its sender sends, which pipeline messages need
 * (they match by order, as NCCL's do: comm.h): activations in the order
 * of the stages' forwards, gradients in the order of their backwards.
 * lists holds the pp stages' lists of len actions each, stage s's at
 * s * len; v is the chunks per stage. Not collective. */
int schedule_links_in_order(const Action *lists, int len, int pp, int v);

/* Simulates all pp stages with per-microbatch costs `cost` and zero
 * communication time. Returns the bubble fraction: idle time over total
 * time, summed over stages. *makespan (if not NULL) receives the step
 * time. A backward waits for the next stage's backward (not its W), a W
 * for its own backward; schedules without W run b + w in each backward,
 * and a chunk's forward costs f/v and its backward (b+w)/v. For 1F1B and
 * GPipe with equal stages the result is (pp-1)/(m+pp-1); for interleaved
 * (pp-1)/(v*m+pp-1); for zb1 with f = b = w,
 * 1 - 3m/(3m + pp-1 + max(0, pp-m)) (t_schedule.c derives both). Not
 * collective. */
double schedule_simulate(ScheduleKind kind, int pp, int v, int m, StageCost cost,
                         double *makespan);

/* The bubble the literature states for equal stages and free messages:
 * (pp-1)/(v*m+pp-1), v being 1 except for the interleaved schedule.
 * Not collective. */
double schedule_ideal_bubble(ScheduleKind kind, int pp, int v, int m);

/* Point-to-point pipeline messages in one step, over all stages:
 * activations forward and gradients back across each of the v*pp - 1
 * boundaries between virtual stages, per microbatch. Not collective. */
long long schedule_messages(ScheduleKind kind, int pp, int v, int m);

const char *schedule_name(ScheduleKind kind);

#endif
