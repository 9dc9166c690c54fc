/*
 * arch.c - the table of architectures (arch.h): one entry per descriptor,
 * indexed by [model] arch.
 */
#include "arch.h"

#include <stdio.h>

#include "fail.h"

/* In ModelArch's order (config.h). */
static const Arch *const ARCHS[] = {
    [ARCH_GPT2] = &arch_gpt2,
    [ARCH_LLAMA] = &arch_llama,
};

const Arch *arch_of(const ModelConfig *m)
{
    /* the config's words and a checkpoint's range check admit no other */
    if ((unsigned)m->arch >= sizeof ARCHS / sizeof ARCHS[0])
        fail_abort("arch_of: an architecture outside the table", __FILE__, __LINE__);
    return ARCHS[m->arch];
}

int arch_differs(const ModelConfig *ckpt, const ModelConfig *cfg, char *why, size_t n)
{
    if (ckpt->arch != cfg->arch)
        return snprintf(why, n, "[model] arch is %s in the checkpoint but %s in the config",
                        arch_of(ckpt)->name, arch_of(cfg)->name) > 0;
    if (arch_kv_heads(ckpt) != arch_kv_heads(cfg))
        return snprintf(why, n, "[model] n_kv_head is %d in the checkpoint but %d in the config",
                        arch_kv_heads(ckpt), arch_kv_heads(cfg)) > 0;
    if (arch_ffn_dim(ckpt) != arch_ffn_dim(cfg))
        return snprintf(why, n, "[model] ffn_dim is %d in the checkpoint but %d in the config",
                        arch_ffn_dim(ckpt), arch_ffn_dim(cfg)) > 0;
    return 0;
}
