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
}
