/*
 * metrics.h - what a run reports: one human line per logged step on
 * stdout, and a JSON Lines file with one object per logged step.
 *
 * Every figure describes the global batch, and only world rank 0 writes.
 */
#ifndef TRI_SRC_METRICS_H
#define TRI_SRC_METRICS_H

#include <stdint.h>
#include <stdio.h>

typedef struct {
    int step;              /* 1-based: steps completed */
    int steps;             /* of the run */
    double loss;           /* mean over the global batch's tokens */
    double val_loss;       /* NaN when not evaluated this step */
    int val_parts;         /* > 1 with a blend: val_loss/<name> of each dataset */
    char *const *val_names;
    const double *val_part_loss;
    double lr, grad_norm, loss_scale;
    int skipped;           /* fp16 overflow: the update was skipped */
    int64_t tokens;        /* tokens seen so far */
    double tokens_per_s, step_ms;
    double mfu;            /* against the hardware's peak (hw_peak.h); NaN if unknown */
    double of_gemm_peak;   /* against the GEMM library's measured rate */
    double data_wait_ms;   /* time the step waited for its batch */
    double bubble;         /* pipeline idle share, max over stages */
    double comm_share;     /* share of the step in DP/TP collectives */
    double dp_wait_ms;     /* time the step waited for its DP reduction */
    double rank_busy_ms_median, rank_busy_ms_max;  /* straggler.h: NaN if none */
    int slowest_rank;      /* the rank of rank_busy_ms_max; -1 if none */
    double eta_s;
} StepMetrics;

typedef struct {
    FILE *jsonl;           /* NULL: no metrics file, or writing it failed */
    char path[4096];
    int failed;            /* a write failed: warned once, file no longer written */
} Metrics;

/* Opens the JSON Lines file, creating missing parent directories. A fresh
 * run (resumed_step 0) starts it empty; a resumed run keeps the lines up
 * to resumed_step and appends, so a requeued job has one continuous file
 * (lines a killed run logged after its last checkpoint are dropped: the
 * resumed run logs those steps again, and so is a last line cut short by a
 * full disk or a kill). The path must be a regular file or a character
 * device (/dev/null); a FIFO is refused without waiting for a reader.
 * Returns non-zero with a message on err. Not collective: rank 0 only. */
int metrics_open(Metrics *mt, const char *path, long resumed_step, FILE *err);
/* Closes the file; a failure warns on stderr. Not collective. */
void metrics_close(Metrics *mt);

/* Writes one JSON object (flushed, so a killed job keeps its lines). A
 * failed write or flush (a full disk) warns once on stderr, naming the
 * file and the reason, and stops the file's writing; training goes on.
 * Not collective. */
void metrics_write(Metrics *mt, const StepMetrics *s);
/* "step   10/600 | loss 3.2145 | ..." */
void metrics_print(FILE *out, const StepMetrics *s);

/* Peak resident set size of this process, bytes. */
int64_t metrics_peak_rss(void);

#endif
