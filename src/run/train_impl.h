/*
 * train_impl.h - what train.c and train_setup.c share: the Trainer, one
 * run's state from set-up to teardown, and two one-line helpers both
 * files call. Only those two files include it; everything else goes
 * through train.h.
 */
#ifndef TRI_SRC_TRAIN_IMPL_H
#define TRI_SRC_TRAIN_IMPL_H

#include <stdint.h>

#include "blend.h"
#include "ckpt.h"
#include "ckpt_async.h"
#include "ckpt_files.h"
#include "comm.h"
#include "config.h"
#include "data.h"
#include "grid.h"
#include "hw_peak.h"
#include "metrics.h"
#include "model.h"
#include "moe_metrics.h"
#include "pipeline.h"
#include "scaler.h"
#include "schedule.h"
#include "straggler.h"
#include "zero.h"
#include "ops.h"

typedef struct {
    Config *cfg;
    Grid grid;
    Model model;
    Pipeline pipe;            /* the executor of model */
    Zero *zero;
    int init_from;            /* weights from [checkpoint] init_from */
    Dataset *data;            /* first and last stages only */
    Loader *loader;
    Metrics metrics;
    Straggler straggler;      /* busy time per rank, for the spread */
    MoeMetrics moe;           /* a MoE model's step figures (off when dense) */
    Action *actions;          /* this stage's training schedule */
    Action *eval_actions;     /* forwards only */
    int n_actions, n_eval_actions;
    int rows;                 /* microbatch rows B */
    int ga;                   /* microbatches per step */
    int64_t global_batch;     /* sequences per step */
    TrainState st;            /* step, cursor, early stopping, for checkpoints */
    Scaler scaler;            /* fp16 loss scale */
    int step;                 /* steps done (st.step as an int) */
    double peak_flops;        /* GEMM FLOP/s of the whole world */
    HardwarePeak hw_peak;     /* the hardware's: MFU's denominator */
    double hw_probed;         /* the highest the hardware probe has read */
    CkptAsync *async;         /* [checkpoint] async: the background writer */
    int64_t *index;           /* sample indices of one step, this DP rank */
    CkptLock ckpt_lock;       /* rank 0: the checkpoint directory is this run's */
    int device_ready;         /* device_setup succeeded */
    double profiled_seconds;  /* [log] profile: step time measured so far */
    double started;           /* process start, for the start-up time */
    int32_t *eval_batch;
    PipelineTimes times;      /* the step's busy and waiting time, on the device */
    ops_timer dp_timer;       /* the step's DP reduction, on the device */
    Blend val_blend;          /* the validation datasets, known on every rank */
    double *val_part_loss;    /* of each, at the last evaluation */
    /* for the end-of-run summary and the ETA (rank 0's figures) */
    int first_step;           /* steps done when this run began */
    double last_loss;         /* of the last step */
    double last_val;          /* of the last evaluation; NaN if none */
    int last_val_step;
    double train_seconds;     /* in this run's steps */
    double avg_step_s;        /* exponential average of the step time after warm-up */
    int avg_steps;            /* steps in that average */
    double eval_seconds;      /* the last evaluation's */
    int saved_step;           /* the newest checkpoint this run wrote; -1 if none */
} Trainer;

static inline int is_root(const Trainer *t) { return t->grid.layout.rank == 0; }

/* The largest v over the world. Collective on world. */
static inline double max_over_world(Trainer *t, double v)
{
    comm_allreduce_scalars(&t->grid, COMM_WORLD, &v, 1, COMM_DOUBLE, COMM_MAX);
    return v;
}

#endif
