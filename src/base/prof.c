/*
 * prof.c - the per-op time breakdown; see prof.h.
 */
#include "prof.h"

int prof_on;
ops_timer prof_timers[PROF_KINDS];
static double prof_seconds[PROF_KINDS];

static const char *const prof_names[PROF_KINDS] = {
    /* GPT-2's GELU runs inside its MLP matmuls (ops_matmul_gelu_fwd,
     * ops_matmul_dgelu_bwd), so "gelu" holds only SwiGLU's time */
    "matmul (GEMM, bias, GELU)", "LM head matmul", "attention", "layernorm", "gelu (SwiGLU)",
    "residual adds",
    "embeddings", "softmax cross-entropy", "tensor-parallel all-reduce",
    "data-parallel reduce/gather", "optimizer (norm, clip, AdamW)",
};

void prof_start(ops_device device)
{
    for (int k = 0; k < PROF_KINDS; k++) {
        prof_timers[k] = ops_timer_on(device);
        prof_seconds[k] = 0.0;
    }
    prof_on = 1;
}

void prof_collect(void)
{
    for (int k = 0; k < PROF_KINDS; k++)
        prof_seconds[k] += ops_timer_read(&prof_timers[k]);
}

void prof_stop(void)
{
    for (int k = 0; k < PROF_KINDS; k++)
        ops_timer_free(&prof_timers[k]);
    prof_on = 0;
}

void prof_print(FILE *out, int steps, double step_seconds)
{
    if (steps <= 0 || step_seconds <= 0)
        return;
    double covered = 0.0;
    fprintf(out, "time per step by op (rank 0, %d steps, %.1f ms per step):\n", steps,
            1e3 * step_seconds / steps);
    for (int k = 0; k < PROF_KINDS; k++) {
        double s = prof_seconds[k] / steps;
        covered += prof_seconds[k];
        fprintf(out, "  %-30s %9.2f ms  %5.1f%%\n", prof_names[k], 1e3 * s,
                100.0 * prof_seconds[k] / step_seconds);
    }
    double rest = step_seconds - covered;
    fprintf(out, "  %-30s %9.2f ms  %5.1f%%\n", "other (pipeline waits, data, ...)",
            1e3 * rest / steps, 100.0 * rest / step_seconds);
}
