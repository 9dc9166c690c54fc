/*
 * run_summary.h - what a run prints when it ends (rank 0): its losses,
 * time and speed, where its checkpoints and metrics are, and the commands
 * that come next (plot, sample, export) with those paths filled in.
 */
#ifndef TRI_SRC_RUN_SUMMARY_H
#define TRI_SRC_RUN_SUMMARY_H

#include <stdint.h>
#include <stdio.h>

#include "metrics.h"

typedef struct {
    int first_step;           /* steps done when the run began (a resume's step) */
    int last_step;            /* steps done when it ended */
    int total_steps;          /* [train] steps */
    double train_loss;        /* of the last step */
    double val_loss;          /* of the last evaluation; NaN if none */
    int val_step;             /* the step of that evaluation */
    double wall_s;            /* process start to the end */
    double train_s;           /* seconds spent in this run's steps */
    int64_t tokens;           /* tokens trained on in this run */
    double model_flops;       /* the model's FLOPs over those tokens */
    double peak_flops;        /* the hardware's peak, FLOP/s; 0 if unknown */
    const char *ckpt_dir;     /* [checkpoint] dir; "" for none */
    int saved_step;           /* the step of the newest checkpoint; -1 if none */
    const char *saved_path;   /* its file (ckpt_files_paths names it); "" if none */
    const char *metrics_path; /* [log] metrics; "" for none */
    const MoeStepMetrics *moe; /* a MoE model's last logged step; NULL if dense */
} RunSummary;

/* Prints the summary block ("summary: ..." lines). Not collective. */
void run_summary_print(FILE *out, const RunSummary *s);

#endif
