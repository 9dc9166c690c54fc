/*
 * arch_sizes.c - the sizes every architecture derives from [model]'s keys
 * (arch_sizes.h).
 */
#include "arch_sizes.h"

int arch_kv_heads(const ModelConfig *m)
{
    return m->n_kv_head ? m->n_kv_head : m->n_head;
}

int arch_ffn_dim(const ModelConfig *m)
{
    return m->ffn_dim ? m->ffn_dim : 4 * m->n_embd;
}

int arch_kv_replicas(const ModelConfig *m, int tp)
{
    int kv = arch_kv_heads(m);
    return kv < tp ? tp / kv : 1;
}

int arch_kv_heads_local(const ModelConfig *m, int tp)
{
    int kv = arch_kv_heads(m);
    return kv < tp ? 1 : kv / tp;
}

void arch_copy_keys(ModelConfig *dst, const ModelConfig *src)
{
    dst->arch = src->arch;
    dst->n_kv_head = src->n_kv_head;
    dst->ffn_dim = src->ffn_dim;
    dst->norm_eps = src->norm_eps;
    dst->rope_theta = src->rope_theta;
    dst->n_expert = src->n_expert;
    dst->top_k = src->top_k;
    dst->moe_ffn_dim = src->moe_ffn_dim;
    dst->n_shared_expert = src->n_shared_expert;
    dst->moe_every = src->moe_every;
    dst->moe_router = src->moe_router;
    dst->moe_aux_loss = src->moe_aux_loss;
    dst->moe_z_loss = src->moe_z_loss;
    dst->moe_capacity = src->moe_capacity;
}

int arch_layer_is_moe(const ModelConfig *m, int layer)
{
    return m->n_expert > 0 && (layer + 1) % m->moe_every == 0;
}

int arch_moe_layer_count(const ModelConfig *m)
{
    return m->n_expert > 0 ? m->n_layer / m->moe_every : 0;
}

int arch_moe_ffn_dim(const ModelConfig *m)
{
    return m->moe_ffn_dim ? m->moe_ffn_dim : arch_ffn_dim(m);
}

int arch_shared_ffn_dim(const ModelConfig *m)
{
    return m->n_shared_expert * arch_moe_ffn_dim(m);
}
