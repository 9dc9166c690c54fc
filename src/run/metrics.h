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

/* A mixture of experts' figures of a step (doc/moe.md, "The metrics"),
 * from the training forwards of the step on every rank (moe_metrics.h
 * gathers them). */
typedef struct {
    double aux;            /* load-balancing loss, mean over MoE layers
                              and microbatches */
    double z;              /* router z-loss, the same mean; NaN: no z-loss */
    double load_max;       /* the worst MoE layer's max over mean expert load */
    int load_max_layer;    /* that layer's global index */
    int n_layers;          /* MoE layers: load's length */
    const double *load;    /* each MoE layer's max over mean, in layer order */
    int64_t dropped;       /* (token, slot) pairs the capacity dropped */
    int capacity;          /* [model] moe_capacity > 0: drops are possible */
} MoeStepMetrics;

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
    int64_t allocations;   /* rank 0's device allocations so far
                              (ops_device_allocations): flat after step 1 */
    double eta_s;          /* NaN: not yet steady, and not shown */
    const MoeStepMetrics *moe; /* NULL: a dense model (nothing written) */
} StepMetrics;

typedef struct {
    FILE *jsonl;           /* NULL: no metrics file, or writing it failed */
    char path[4096];
    int failed;            /* a write failed: warned once, file no longer written */
    char header[512];      /* the run's header record, until the first step writes it */
} Metrics;

/* What the run's header record says of it. */
typedef struct {
    const char *config_text;  /* the effective config (config_to_ini): its digest */
    int steps;                /* [train] steps */
    long resumed_step;        /* the checkpoint's step; 0: a fresh run */
} MetricsRun;

/* Opens the JSON Lines file for appending, creating missing parent
 * directories: nothing another run wrote is ever removed. Every run
 * starts with a header record, {"run":ID,"start":UTC,"config_digest":HEX,
 * "steps":N,"resumed":BOOL,"resumed_from_step":S}, written with its first
 * step's record; step records follow, each {"step":N,...}. A resumed run
 * also drops the lines its own run (those after the last header) logged
 * after resumed_step: the steps it logs again, so a requeued job's steps
 * appear once each. A last line cut short by a full disk or a kill is
 * dropped, or the next record would be appended onto it. The path must
 * be a regular file or a character device (/dev/null); a FIFO is refused
 * without waiting for a reader. Returns non-zero with a message on err.
 * Not collective: rank 0 only. */
int metrics_open(Metrics *mt, const char *path, const MetricsRun *run, FILE *err);
/* Closes the file; a failure warns on stderr. Not collective. */
void metrics_close(Metrics *mt);

/* Writes one JSON object (after the run's header record, the first
 * time; flushed, so a killed job keeps its lines). A
 * failed write or flush (a full disk) warns once on stderr, naming the
 * file and the reason, and stops the file's writing; training goes on.
 * Not collective. */
void metrics_write(Metrics *mt, const StepMetrics *s);
/* "step   10/600 | loss 3.2145 | ... | eta 1:02" */
void metrics_print(FILE *out, const StepMetrics *s);
/* s seconds, rounded, as H:MM:SS, or as M:SS under an hour unless hours
 * is set (the ETA's "1:02", the summary's wall time "0:01:02"); a
 * negative or non-finite s is 0. Not collective. */
void metrics_format_duration(char *buf, size_t size, double s, int hours);

/* Peak resident set size of this process, bytes. */
int64_t metrics_peak_rss(void);

#endif
