/*
 * arch_moe.c - the rules of a mixture of experts' keys (arch_moe.h). The
 * shared expert's width, n_shared_expert * moe_ffn_dim, is split over TP
 * like a routed expert's; it is divisible by tp whenever moe_ffn_dim is,
 * so that one rule covers both.
 */
#include "arch_moe.h"

#include <limits.h>

#include "arch_sizes.h"
#include "reason.h"

int arch_moe_check_keys(const Config *c, ArchKeyProblem *p)
{
    const ModelConfig *m = &c->model;
    int tp = c->parallel.tp;
    if (m->n_expert == 0)
        return 0;
    if (m->top_k > m->n_expert) {
        reason_set(p->why, sizeof p->why, "more than n_expert (%d): each token goes to top_k "
                   "different experts", m->n_expert);
        return arch_refuse(p, "model", "top_k");
    }
    if (m->moe_every > m->n_layer) {
        reason_set(p->why, sizeof p->why, "more than n_layer (%d): no layer would be a MoE "
                   "layer (layer L is one when (L + 1) %% moe_every == 0)", m->n_layer);
        return arch_refuse(p, "model", "moe_every");
    }
    /* moe_ffn_dim = 0 is ffn_dim, whose rule check_keys states already */
    if (m->moe_ffn_dim % tp) {
        reason_set(p->why, sizeof p->why, "%d is not divisible by tp (%d): each expert is split "
                   "across TP ranks", m->moe_ffn_dim, tp);
        return arch_refuse(p, "model", "moe_ffn_dim");
    }
    if ((long long)m->n_shared_expert * arch_moe_ffn_dim(m) > INT_MAX) {
        reason_set(p->why, sizeof p->why, "the shared expert's width n_shared_expert * "
                   "moe_ffn_dim = %d * %d is more than %d", m->n_shared_expert,
                   arch_moe_ffn_dim(m), INT_MAX);
        return arch_refuse(p, "model", "n_shared_expert");
    }
    return 0;
}
