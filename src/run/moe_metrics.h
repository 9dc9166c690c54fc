/*
 * moe_metrics.h - a mixture of experts' figures of a logged step, for the
 * step line, the metrics file (doc/moe.md, "The metrics"): each rank adds
 * the routing it counted (the model's MoeStats: expert loads per MoE
 * layer, the aux and z sums, the dropped pairs), one collective sums them
 * over the world, and the sums become MoeStepMetrics. A dense model
 * (n_expert = 0) has none: nothing to add, no collective.
 *
 * Every rank routes its own tokens, and the tp ranks of a replica route
 * the same ones: only tp rank 0 of each stage adds its layers' counts, so
 * that the sum counts each (token, slot) pair of the global batch once.
 */
#ifndef TRI_SRC_MOE_METRICS_H
#define TRI_SRC_MOE_METRICS_H

#include <stdint.h>

#include "config.h"
#include "grid.h"
#include "metrics.h"
#include "model.h"

typedef struct {
    int on;                    /* n_expert > 0 */
    int n_layers, n_expert;    /* the model's MoE layers, experts per layer */
    int moe_every;
    int capacity;              /* moe_capacity > 0 */
    int z_on;                  /* moe_z_loss > 0 */
    double *sums;              /* this rank's counts, then the world's sums */
    double *load;              /* n_layers: max over mean */
    MoeStepMetrics step;       /* the last reduced step */
} MoeMetrics;

/* Sets mm up for the model m: off for a dense one. Not collective. */
void moe_metrics_init(MoeMetrics *mm, const ModelConfig *m);
void moe_metrics_free(MoeMetrics *mm);

/* This rank's counts back to none. Not collective. */
void moe_metrics_clear(MoeMetrics *mm);
/* Adds the expert loads (n_expert of them: the (token, slot) pairs routed
 * to each) this rank counted in global layer `layer`, a MoE layer. Not
 * collective. */
void moe_metrics_add_layer(MoeMetrics *mm, int layer, const int64_t *load);
/* Adds this rank's sums of the aux and z values over `forwards` (MoE
 * layer, microbatch) forwards, and the pairs the capacity dropped. Not
 * collective. */
void moe_metrics_add_totals(MoeMetrics *mm, double aux_sum, double z_sum, int64_t forwards,
                            int64_t dropped);

/* Sums every rank's counts and returns the step's figures (in mm->step),
 * or NULL for a dense model. Collective on the world when n_expert > 0,
 * every rank at the same logged step; else nothing. */
const MoeStepMetrics *moe_metrics_reduce(MoeMetrics *mm, const Grid *g);

/* The step's figures of the model's counts since its last
 * model_moe_reset_stats (the step's training forwards), as
 * moe_metrics_reduce: this rank adds its counts on tp rank 0 only.
 * Collective on the world when n_expert > 0, else nothing (NULL). */
const MoeStepMetrics *moe_metrics_gather(MoeMetrics *mm, const Model *model, const Grid *g);

#endif
