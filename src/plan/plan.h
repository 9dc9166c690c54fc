/*
 * plan.h - `trident plan`: what a run will cost, computed from the config
 * and a world size without running anything: per-rank memory (weights,
 * gradients, optimizer state, activations) under the layout, precision,
 * ZeRO stage and recompute policy; FLOPs per step; the pipeline bubble
 * and memory of each schedule, and the one to use;
 * the communication volume per step of each group; and which layouts of
 * the world fit a given memory per device. Context parallelism (cp) is in
 * all of them: a rank holds seq_len / cp tokens of each sequence, so its
 * activations (model.c's count, with attention's two whole-sequence
 * buffers at cp > 1), its compute and its share of every per-token
 * message fall by cp, and attention's all-gathers and reduce-scatter over
 * the cp group come on top (plan_communication).
 *
 * Parameter state is zero_state_bytes, the sizes zero.c allocates by;
 * activations follow model.c's allocation rules, restated as arithmetic.
 * The trainer reports the same numbers at start-up from its real
 * allocations (tests/t_plan.sh checks that they agree).
 */
#ifndef TRI_SRC_PLAN_H
#define TRI_SRC_PLAN_H

#include <stdint.h>
#include <stdio.h>

#include "config.h"

typedef struct {
    int64_t weights, grads, optimizer, activations;   /* on the device */
    int64_t host;   /* [train] offload: optimizer state and staging in host memory */
} PlanMemory;

/* Whether plan counts cfg's run as offloading the optimizer: [train]
 * offload = optimizer on a GPU, as the trainer decides (device = cuda, or
 * auto where this process sees a GPU), so that plan's memory table is the
 * one the trainer prints here. Not collective. */
int plan_offloads(const Config *cfg);

/* Layouts that "fit a device's memory" (--mem, --hw on a GPU profile)
 * are for GPUs: device = auto becomes cuda, cpu stays. Pure. */
void plan_assume_gpu(Config *cfg);

/* The logits the head of cfg's run holds at once (model_head_logit_budget)
 * on a device of device_gib GiB: a GPU's budget where cfg runs on GPUs
 * (device = cuda, as plan_assume_gpu makes it for --mem and a GPU's --hw)
 * and its memory is known, else the CPU's. Pure. */
int64_t plan_head_budget(const Config *cfg, double device_gib);

/* Memory of the rank at (stage, dp_rank, tp_rank) of a world of `world`
 * ranks (its cp rank 0), its head holding head_budget logits at once
 * (plan_head_budget). cfg must pass layout_check for that world. Not
 * collective. */
PlanMemory plan_rank_memory(const Config *cfg, int world, int stage, int dp_rank,
                            int tp_rank, int64_t head_budget);

/* The tokens of one sequence that a rank holds: seq_len / cp (context
 * parallelism gives each rank of its group two of 2 cp chunks). Pure. */
int plan_rank_seq_len(const Config *cfg);

/* The ranks that hold the same weights and reduce their gradients
 * together on `world` ranks: layout_replicas, dp x cp. Pure. */
int plan_replicas(const Config *cfg, int world);

/* The largest rank's memory (first, a middle and the last stage; first
 * and last replica, dp x cp); *stage (if not NULL) receives its stage. */
PlanMemory plan_largest_rank(const Config *cfg, int world, int64_t head_budget, int *stage);

/* Calls visit for every layout of `world` ranks that keeps cfg's global
 * batch (grad_accum adjusted): dp x pp x cp x tp with tp a power of two up
 * to max_tp and cp 1, 2, 4 or 8 (PLAN_MAX_CP), with experts ep 1, 2, 4, ...
 * dividing dp and n_expert, that layout_check and the
 * config's rules accept (seq_len a multiple of 2 cp), each ZeRO stage, recompute none and
 * full, offload none and optimizer where plan_offloads would count it (on
 * the CPU it frees nothing), sequence parallelism off and, with tp > 1,
 * on, and with pp > 1 the schedules 1f1b, zb1 and (where the layout
 * allows) interleaved with 2 chunks a stage (GPipe has 1F1B's bubble in
 * more memory). Returns the number visited. Not collective. */
typedef void (*PlanVisit)(const Config *layout, void *ctx);
int plan_each_layout(const Config *cfg, int world, int max_tp, PlanVisit visit, void *ctx);

/* cfg's pipeline bubble (idle share of the step) with equal stages and
 * equal forward, backward and weight-gradient times (schedule_simulate).
 * Not collective. */
double plan_bubble(const Config *cfg);

/* The largest context-parallel group plan's search tries. */
#define PLAN_MAX_CP 8

/* Bytes one rank sends per step in each group (ring algorithms). dp:
 * the dense parameters' reduction over the dp x cp replicas and the
 * routed experts' over their dp / ep x cp replicas. ep: the all-to-alls
 * of the MoE layers (plan_moe.h). cp:
 * context parallelism's, per layer and microbatch an all-gather of q|k|v
 * in the forward (and again in a recomputed forward), another and a
 * reduce-scatter of its gradient in the backward: (cp-1)/cp x B x T x
 * 3C/tp elements each, in the activations' dtype; cp_layer is one of
 * them. Not collective. */
typedef struct {
    double tp, dp, pp, embed;
    double cp, cp_layer;
    double ep, ep_layer;   /* expert parallelism's all-to-alls (plan_moe.h):
                              a step's on stage 0, and one of them */
} PlanComm;
PlanComm plan_communication(const Config *cfg, int world);

/* The most chunks a stage plan considers for the interleaved schedule. */
#define PLAN_MAX_CHUNKS 8

/* The schedules plan compares for cfg's layout, as copies of cfg: 1f1b,
 * gpipe, interleaved with each v up to PLAN_MAX_CHUNKS that the layout
 * allows, and zb1. Returns how many it wrote (at most max). Not
 * collective. */
int plan_schedules(const Config *cfg, Config *out, int max);

/* cfg's pipeline bubble with equal stages, from the schedule simulator:
 * idle over total time. Not collective. */
double plan_bubble(const Config *cfg);

/* The most layouts that fit plan_print lists unless asked for all. */
#define PLAN_FITS_SHOWN 10

/* Prints the plan for cfg on `world` ranks: the costs, the schedules
 * table and the one to use, the memory table (equal ranks on one line),
 * the largest rank; mem_gib > 0 adds the layouts that fit in that much
 * memory per device, best first, PLAN_FITS_SHOWN of them unless all (the
 * predicted step time on given hardware is roofline_print_plan's).
 * *advice receives what plan advises: cfg with the recommended schedule,
 * or with mem_gib the best layout that fits (cfg itself when nothing
 * does). Returns 0, or non-zero with the reason on err when the layout
 * does not fit the world. Not collective. */
int plan_print(const Config *cfg, int world, double mem_gib, int all, Config *advice,
               FILE *out, FILE *err);

/* The last line of a plan: "train with:" and the options to paste into
 * `trident train` for advice: plan's own --set options (sets, as given,
 * quoted for the shell where needed), then a --set for each layout key
 * (dp, pp, cp, tp, ep, grad_accum, zero, recompute, offload, schedule,
 * virtual_stages, sequence_parallel, and log.sample_tokens, which cp > 1
 * turns off) whose advised value differs from
 * cfg's. Not collective. */
void plan_print_advice(const Config *cfg, const Config *advice, const char *const *sets,
                       int n_sets, FILE *out);

#endif
