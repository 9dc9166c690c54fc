/*
 * arch.c - sizes that follow from the architecture (arch.h).
 */
#include "arch.h"

int arch_kv_heads(const ModelConfig *m)
{
    if (m->arch != ARCH_LLAMA || m->n_kv_head == 0)
        return m->n_head;
    return m->n_kv_head;
}

int arch_ffn_dim(const ModelConfig *m)
{
    if (m->arch != ARCH_LLAMA || m->ffn_dim == 0)
        return 4 * m->n_embd;
    return m->ffn_dim;
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
