/*
 * arch.h - the model architectures, gpt2 and llama, and the sizes that
 * follow from [model]'s keys: key/value heads, MLP width, and how tensor
 * parallelism splits or replicates the key/value heads.
 *
 * gpt2: LayerNorm with bias, learned positions, GELU MLP of width 4C,
 * one key/value head per query head, biases everywhere. llama: RMSNorm,
 * rotary positions, SwiGLU MLP of width ffn_dim, grouped-query attention
 * (n_kv_head key/value heads, each shared by n_head / n_kv_head query
 * heads), no biases. Not collective, every function.
 */
#ifndef TRI_SRC_ARCH_H
#define TRI_SRC_ARCH_H

#include "config.h"

/* Key/value heads: n_kv_head for llama (0: n_head), n_head for gpt2. */
int arch_kv_heads(const ModelConfig *m);
/* The MLP's hidden width: ffn_dim for llama (0: 4 n_embd), 4 n_embd for gpt2. */
int arch_ffn_dim(const ModelConfig *m);
/* How many TP ranks hold each key/value head: 1 when tp divides the
 * key/value heads (each rank holds kv_heads / tp of them), tp / kv_heads
 * when there are fewer heads than ranks (each rank holds one, the way
 * Megatron-LM replicates them). */
int arch_kv_replicas(const ModelConfig *m, int tp);
/* Key/value heads one TP rank holds. */
int arch_kv_heads_local(const ModelConfig *m, int tp);

/* Copies arch and the llama keys from src to dst: a checkpoint's root
 * attributes carry gpt2's shape keys, its stored config the rest. */
void arch_copy_keys(ModelConfig *dst, const ModelConfig *src);
/* 0 when a and b build the same tensors and math; else writes which key
 * differs, "[model] KEY is A in the checkpoint but B in the config", with
 * a the checkpoint's. */
int arch_differs(const ModelConfig *ckpt, const ModelConfig *cfg, char *why, size_t n);

#endif
