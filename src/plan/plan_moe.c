/*
 * plan_moe.c - mixture of experts in `trident plan`; see plan_moe.h.
 */
#include "plan_moe.h"

#include <stdint.h>

#include "arch_sizes.h"
#include "layout.h"
#include "model.h"
#include "params_stage.h"
#include "schedule.h"

static int ep_of(const Config *cfg) { return cfg->parallel.ep > 0 ? cfg->parallel.ep : 1; }

double plan_moe_alltoall_bytes(const Config *cfg)
{
    const ModelConfig *mc = &cfg->model;
    int ep = ep_of(cfg);
    if (mc->n_expert == 0 || ep == 1)
        return 0.0;
    double a = (double)ops_dtype_size(model_dtype(cfg->train.precision));
    /* a rank's tokens: seq_len / cp of each sequence (plan.h's
     * plan_rank_seq_len, which plan.c, this file's caller, owns) */
    double tokens = (double)cfg->train.micro_batch * mc->seq_len / cfg->parallel.cp;
    double rows = tokens * mc->top_k;
    return (double)(ep - 1) / ep * rows * mc->n_embd * a;
}

int plan_moe_alltoalls(const Config *cfg, int stage)
{
    const ParallelConfig *p = &cfg->parallel;
    /* zb1's weight pass runs a recomputed layer's forward a second time,
     * its all-to-alls with it (traced: 8 a microbatch for one MoE layer) */
    int reruns = p->schedule == SCHED_ZB1 ? 2 : 1, n = 0;
    for (int c = 0; c < p->virtual_stages; c++) {
        int first, count;
        layout_chunk_layers(cfg->model.n_layer, p->pp, p->virtual_stages, stage, c, &first,
                            &count);
        for (int l = first; l < first + count; l++)
            if (arch_layer_is_moe(&cfg->model, l))
                n += 4 + 2 * reruns * model_layer_recomputes(&cfg->train, l);
    }
    return n;
}

int plan_moe_ep_span(const Config *cfg)
{
    return cfg->parallel.tp * cfg->parallel.cp * ep_of(cfg);
}

void plan_moe_print(const Config *cfg, double step_bytes, FILE *out)
{
    const ModelConfig *mc = &cfg->model;
    if (mc->n_expert == 0)
        return;
    int ep = ep_of(cfg);
    int64_t total = params_logical_count(mc), active = params_active_count(mc);
    fprintf(out, "mixture of experts: params %.3g B total, %.3g B active (%lld and %lld; top %d "
            "of %d experts in %d of %d layers); ep %d, %d of the %d experts of each MoE layer "
            "a rank\n", total / 1e9, active / 1e9, (long long)total, (long long)active,
            mc->top_k, mc->n_expert, arch_moe_layer_count(mc), mc->n_layer, ep,
            mc->n_expert / ep, mc->n_expert);
    if (ep == 1) {
        fprintf(out, "expert all-to-all: none (ep 1: every rank holds every expert)\n");
        return;
    }
    fprintf(out, "expert all-to-all: %.4g bytes a rank in each, %d a microbatch on stage 0 "
            "(per MoE layer 2 forward, 2 backward, 2 more recomputed, 4 under zb1), %.4g bytes "
            "a step over "
            "ep %d (%d world ranks); exposed: nothing overlaps it\n",
            plan_moe_alltoall_bytes(cfg), plan_moe_alltoalls(cfg, 0), step_bytes, ep,
            plan_moe_ep_span(cfg));
}
