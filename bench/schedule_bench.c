/*
 * schedule_bench.c - each pipeline schedule's bubble, simulated with this
 * machine's per-microbatch costs, beside the formula for equal stages.
 *
 *   bench/schedule_bench N_LAYER N_EMBD N_HEAD SEQ VOCAB MICRO_BATCH PP M
 *
 * The costs are the model's own kernels timed at the run's shapes
 * (kernel_times_measure, as `trident plan --hw cpu` times them, fp32, one
 * TP rank): a stage of N_LAYER/PP layers costs that many layers' forward
 * and backward, plus the embedding-free LM head on the last stage. The
 * simulator takes one cost for every stage, so it is given the busiest
 * stage's (the last, with the head): what a real pipeline runs at. One
 * line per schedule (zb1 with its backward split into B and W), for
 * bench.sh to join with measured runs:
 *   SCHEDULE V SIMULATED FORMULA MESSAGES
 * after a '#' line with the costs. Printed, never asserted.
 */
#include <stdio.h>
#include <stdlib.h>

#include "kernel_times.h"
#include "schedule.h"

static void row(ScheduleKind kind, int pp, int v, int m, StageCost cost)
{
    double sim = schedule_simulate(kind, pp, v, m, cost, NULL);
    printf("%s %d %.4f %.4f %lld\n", schedule_name(kind), v, sim,
           schedule_ideal_bubble(kind, pp, v, m), schedule_messages(kind, pp, v, m));
}

int main(int argc, char **argv)
{
    if (argc != 9) {
        fprintf(stderr, "usage: %s N_LAYER N_EMBD N_HEAD SEQ VOCAB MICRO_BATCH PP M\n", argv[0]);
        return 2;
    }
    int a[8];
    for (int i = 0; i < 8; i++)
        a[i] = atoi(argv[i + 1]);
    int n_layer = a[0], pp = a[6], m = a[7];
    if (pp < 1 || n_layer % pp || m < 1) {
        fprintf(stderr, "schedule_bench: PP must divide N_LAYER, and M >= 1\n");
        return 2;
    }
    ModelConfig mc = {.arch = ARCH_GPT2, .n_layer = n_layer, .n_embd = a[1], .n_head = a[2],
                      .seq_len = a[3], .vocab_size = a[4]};
    KernelShape shape = kernel_times_shape(&mc, 0, OPS_F32, a[5], 1);
    KernelTimes layer, head;
    kernel_times_measure(&shape, &layer, &head);
    int layers = n_layer / pp;
    StageCost cost = {
        .f = layers * (layer.gemm_fwd + layer.elem_fwd) + head.gemm_fwd + head.elem_fwd,
        .b = layers * (layer.gemm_bwd + layer.elem_bwd) + head.gemm_bwd + head.elem_bwd,
    };
    printf("# stage of %d layers + head, one microbatch: forward %.3f ms, backward %.3f ms\n",
           layers, 1e3 * cost.f, 1e3 * cost.b);
    row(SCHED_1F1B, pp, 1, m, cost);
    row(SCHED_GPIPE, pp, 1, m, cost);
    for (int v = 2; v <= 8; v++)
        if (pp >= 2 && n_layer % (pp * v) == 0 && m % pp == 0)
            row(SCHED_INTERLEAVED, pp, v, m, cost);
    /* zb1 defers the blocks' weight GEMMs: half of their backward GEMMs
     * (dW and dX cost the same); the head's stay in the backward */
    double w = layers * layer.gemm_bwd / 2;
    if (pp >= 2)
        row(SCHED_ZB1, pp, 1, m, (StageCost){cost.f, cost.b - w, w});
    return 0;
}
