/*
 * roofline.h - predicted step time of a run on given hardware, for
 * `trident plan --hw NAME`.
 *
 * A step on the busiest pipeline stage is modelled term by term, each
 * printed: GEMM FLOPs at the device's sustained GEMM rate; the bytes that
 * elementwise ops (LayerNorm, GELU, residuals, softmax, the loss) and the
 * optimizer stream through memory at its bandwidth; tensor-parallel
 * all-reduces at the in-node link bandwidth; pipeline transfers and the
 * data-parallel reduction at the in-node or cross-node bandwidth, whichever
 * the group spans (the DP part minus what hides behind the backward when
 * overlap is on); context parallelism's collectives at the link the cp
 * group spans, minus what attention's own compute could hide (the figure
 * of a ring overlapped with attention's blocks, issue 39: the all-gather
 * the model runs today does not overlap), a cp rank holding 1/cp of the
 * tokens and of attention's causal work; the experts' all-to-alls at the
 * link the ep group spans, all exposed (plan_moe.h); and the schedule's bubble, simulated (schedule.h) with
 * the busiest stage's microbatch split into forward, backward to the input
 * and weight gradients (1F1B and GPipe: pp-1 microbatch times; zb1 hides
 * the weight-gradient GEMMs, about a third of the GEMMs, in it).
 *
 * Hardware profiles: H100 SXM, H200, A100 (datasheet peaks, with a GEMM
 * efficiency), and "cpu": this machine, measured when plan runs: its peak
 * is the trainer's (hw_peak.h: the widest multiply-add's rate on every
 * core) and its GEMM efficiency the GEMM library's measured share of it,
 * so plan's MFU and the trainer's have the same denominator. A
 * roofline misjudges a small model on a CPU (skinny GEMMs, GELU's tanh),
 * so there the GEMM and elementwise terms are the model's own kernels
 * timed at the run's shapes (kernel_times.h), the optimizer is AdamW
 * timed per parameter, and the world's ranks share the machine's cores,
 * bandwidth and memory.
 */
#ifndef TRI_SRC_ROOFLINE_H
#define TRI_SRC_ROOFLINE_H

#include <stdio.h>

#include "config.h"
#include "ops.h"

typedef struct {
    char name[32];
    double flops_fp32, flops_bf16, flops_fp16;   /* dense peak, per device */
    double gemm_efficiency;   /* share of peak large GEMMs sustain */
    double mem_bw;            /* bytes/s, per device */
    double mem_gib;           /* memory per device */
    double intra_bw;          /* bytes/s each device moves in in-node collectives */
    double inter_bw;          /* bytes/s each device moves across nodes */
    int per_node;             /* devices per node */
    int shared;               /* the world shares one machine (the CPU profile) */
    char how[256];            /* the CPU profile: what its peak is, as measured */
    double pcie_bw;           /* [train] offload: bytes/s host <-> device, each direction */
    double host_bw;           /* ... and the host memory bandwidth AdamW gets per device */
} Hardware;

/* Looks up a profile ("h100", "h200", "a100", "cpu"; "cpu" measures this
 * machine for `world` ranks). Returns non-zero with the known names on err.
 * Not collective. */
int roofline_hardware(const char *name, int world, ops_dtype dtype, Hardware *hw, FILE *err);

typedef struct {
    double gemm, elementwise, optimizer;   /* seconds per step, busiest rank */
    double tp, pp, dp_exposed, dp_total;   /* communication */
    double cp_total, cp_exposed;           /* context parallelism's, and what */
    double attention;                      /* ... attention's compute leaves of it */
    double cp_link;                        /* bytes/s the cp group's link gives a rank */
    double ep;                             /* the experts' all-to-alls, all exposed */
    double ep_link;                        /* bytes/s the ep group's link gives a rank */
    double bubble;
    double step;                           /* the prediction */
    double tokens_per_s, mfu;
    double memory_gib;                     /* largest rank, on its device */
    double host_gib;                       /* ... and offloaded to host memory */
} Prediction;

/* Predicts cfg on `world` devices of hw. cfg must pass layout_check. */
Prediction roofline_predict(const Config *cfg, int world, const Hardware *hw);

/* Prints the prediction's terms. */
void roofline_print(const Config *cfg, int world, const Hardware *hw, const Prediction *p,
                    FILE *out);

/* `trident plan --hw NAME` after plan_print: the predicted step of cfg on
 * `world` devices of the profile `hw_name`, term by term, and the fastest
 * layout that fits, which goes to *advice (left alone when none fits).
 * Returns 0, or non-zero with the known names on err when the profile is
 * unknown. Not collective. */
int roofline_print_plan(const Config *cfg, int world, const char *hw_name, Config *advice,
                        FILE *out,
                        FILE *err);

/* The fastest layout of `world` devices that fits hw's memory, keeping the
 * global batch: every dp x pp x cp x tp (tp within a node), ZeRO stage,
 * recompute policy and schedule (plan_each_layout). Fills best (layout in cfg) and returns 0, or non-zero
 * when nothing fits; *least_cp1_gib and *least_ep1_gib (if not NULL)
 * receive the least memory a layout at cp 1, at ep 1, needs. Not
 * collective. */
int roofline_recommend(const Config *cfg, int world, const Hardware *hw, Config *best,
                       Prediction *pred, double *least_cp1_gib, double *least_ep1_gib);

#endif
