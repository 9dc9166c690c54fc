/*
 * moe_metrics.c - a mixture of experts' figures summed over the world
 * (moe_metrics.h). One buffer of doubles (counts stay exact below 2^53)
 * is summed in one collective:
 *   [0] aux sum, [1] z sum, [2] (MoE layer, microbatch) forwards counted,
 *   [3] dropped pairs, [4 ...] the loads, n_layers x n_expert, by MoE
 *   layer (global layer L is MoE layer (L + 1) / moe_every - 1).
 */
#include "moe_metrics.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "arch_sizes.h"
#include "comm.h"

enum { SUM_AUX, SUM_Z, SUM_FORWARDS, SUM_DROPPED, SUM_LOAD };

static int sums_len(const MoeMetrics *mm)
{
    return SUM_LOAD + mm->n_layers * mm->n_expert;
}

void moe_metrics_init(MoeMetrics *mm, const ModelConfig *m)
{
    memset(mm, 0, sizeof *mm);
    mm->on = m->n_expert > 0;
    if (!mm->on)
        return;
    mm->n_layers = arch_moe_layer_count(m);
    mm->n_expert = m->n_expert;
    mm->moe_every = m->moe_every;
    mm->capacity = m->moe_capacity > 0;
    mm->z_on = m->moe_z_loss > 0;
    mm->sums = TRI_CALLOC((size_t)sums_len(mm), sizeof *mm->sums, "the MoE metrics");
    mm->load = TRI_CALLOC((size_t)mm->n_layers, sizeof *mm->load, "the MoE metrics");
}

void moe_metrics_free(MoeMetrics *mm)
{
    free(mm->sums);
    free(mm->load);
    memset(mm, 0, sizeof *mm);
}

void moe_metrics_clear(MoeMetrics *mm)
{
    if (mm->on)
        memset(mm->sums, 0, (size_t)sums_len(mm) * sizeof *mm->sums);
}

void moe_metrics_add_layer(MoeMetrics *mm, int layer, const int64_t *load)
{
    int moe_index = (layer + 1) / mm->moe_every - 1;
    double *to = mm->sums + SUM_LOAD + (size_t)moe_index * mm->n_expert;
    for (int e = 0; e < mm->n_expert; e++)
        to[e] += (double)load[e];
}

void moe_metrics_add_totals(MoeMetrics *mm, double aux_sum, double z_sum, int64_t forwards,
                            int64_t dropped)
{
    mm->sums[SUM_AUX] += aux_sum;
    mm->sums[SUM_Z] += z_sum;
    mm->sums[SUM_FORWARDS] += (double)forwards;
    mm->sums[SUM_DROPPED] += (double)dropped;
}

/* A layer's max over mean load; NaN where nothing was routed. */
static double imbalance(const double *load, int n_expert)
{
    double max = 0.0, sum = 0.0;
    for (int e = 0; e < n_expert; e++) {
        sum += load[e];
        if (load[e] > max)
            max = load[e];
    }
    return sum > 0.0 ? max / (sum / n_expert) : NAN;
}

const MoeStepMetrics *moe_metrics_reduce(MoeMetrics *mm, const Grid *g)
{
    if (!mm->on)
        return NULL;
    comm_allreduce_scalars(g, COMM_WORLD, mm->sums, sums_len(mm), COMM_DOUBLE, COMM_SUM);
    MoeStepMetrics *s = &mm->step;
    double forwards = mm->sums[SUM_FORWARDS];
    s->aux = forwards > 0 ? mm->sums[SUM_AUX] / forwards : NAN;
    s->z = mm->z_on && forwards > 0 ? mm->sums[SUM_Z] / forwards : NAN;
    s->dropped = (int64_t)mm->sums[SUM_DROPPED];
    s->capacity = mm->capacity;
    s->n_layers = mm->n_layers;
    s->load = mm->load;
    s->load_max = NAN;
    s->load_max_layer = mm->moe_every - 1; /* the first MoE layer, until one routed */
    for (int i = 0; i < mm->n_layers; i++) {
        mm->load[i] = imbalance(mm->sums + SUM_LOAD + (size_t)i * mm->n_expert, mm->n_expert);
        /* the first finite value, then a larger one */
        if (isfinite(mm->load[i]) && !(mm->load[i] <= s->load_max)) {
            s->load_max = mm->load[i];
            s->load_max_layer = (i + 1) * mm->moe_every - 1;
        }
    }
    return s;
}

const MoeStepMetrics *moe_metrics_gather(MoeMetrics *mm, const Model *model, const Grid *g)
{
    if (!mm->on)
        return NULL;
    moe_metrics_clear(mm);
    if (g->layout.tp_rank == 0) {
        MoeStats st;
        model_moe_stats(model, &st);
        for (int i = 0; i < st.n_layers; i++)
            moe_metrics_add_layer(mm, st.layer[i], st.load + (size_t)i * st.n_expert);
        moe_metrics_add_totals(mm, st.aux_sum, st.z_sum, st.forwards, st.dropped);
    }
    return moe_metrics_reduce(mm, g);
}
