/*
 * arch.c - sizes that follow from the architecture (arch.h).
 */
#include "arch.h"

#include <stdio.h>

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

void arch_copy_keys(ModelConfig *dst, const ModelConfig *src)
{
    dst->arch = src->arch;
    dst->n_kv_head = src->n_kv_head;
    dst->ffn_dim = src->ffn_dim;
    dst->norm_eps = src->norm_eps;
    dst->rope_theta = src->rope_theta;
}

int arch_differs(const ModelConfig *ckpt, const ModelConfig *cfg, char *why, size_t n)
{
    static const char *const names[] = { "gpt2", "llama" };
    if (ckpt->arch != cfg->arch)
        return snprintf(why, n, "[model] arch is %s in the checkpoint but %s in the config",
                        names[ckpt->arch == ARCH_LLAMA], names[cfg->arch == ARCH_LLAMA]) > 0;
    if (arch_kv_heads(ckpt) != arch_kv_heads(cfg))
        return snprintf(why, n, "[model] n_kv_head is %d in the checkpoint but %d in the config",
                        arch_kv_heads(ckpt), arch_kv_heads(cfg)) > 0;
    if (arch_ffn_dim(ckpt) != arch_ffn_dim(cfg))
        return snprintf(why, n, "[model] ffn_dim is %d in the checkpoint but %d in the config",
                        arch_ffn_dim(ckpt), arch_ffn_dim(cfg)) > 0;
    return 0;
}
