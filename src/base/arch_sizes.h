/*
 * arch_sizes.h - the sizes every architecture derives alike from [model]'s
 * keys: key/value heads (grouped-query attention: n_kv_head, each shared
 * by n_head / n_kv_head query heads; 0 means one per query head), the MLP
 * width (ffn_dim; 0 means 4 n_embd), and how tensor parallelism splits or
 * replicates the key/value heads.
 *
 * They hold for every architecture because config_validate refuses
 * n_kv_head and ffn_dim where an architecture has no use for them (gpt2),
 * so the defaults are gpt2's shapes. They sit below the descriptors
 * (arch.h), which call them, and below the config's and the grid's
 * checks, which must not depend on any descriptor. Not collective, every
 * function.
 */
#ifndef TRI_SRC_ARCH_SIZES_H
#define TRI_SRC_ARCH_SIZES_H

#include "config.h"

/* Key/value heads: n_kv_head, or n_head when it is 0. */
int arch_kv_heads(const ModelConfig *m);
/* The MLP's hidden width: ffn_dim, or 4 n_embd when it is 0. */
int arch_ffn_dim(const ModelConfig *m);
/* How many TP ranks hold each key/value head: 1 when tp divides the
 * key/value heads (each rank holds kv_heads / tp of them), tp / kv_heads
 * when there are fewer heads than ranks (each rank holds one, the way
 * Megatron-LM replicates them). */
int arch_kv_replicas(const ModelConfig *m, int tp);
/* Key/value heads one TP rank holds. */
int arch_kv_heads_local(const ModelConfig *m, int tp);

/* Mixture of experts ([model] n_expert > 0; doc/moe.md). */
/* Whether global layer `layer` is a MoE layer: n_expert > 0 and
 * (layer + 1) % moe_every == 0 (Qwen2-MoE's decoder_sparse_step). */
int arch_layer_is_moe(const ModelConfig *m, int layer);
/* How many of the n_layer layers are MoE. */
int arch_moe_layer_count(const ModelConfig *m);
/* A routed expert's SwiGLU width: moe_ffn_dim, or ffn_dim when 0. */
int arch_moe_ffn_dim(const ModelConfig *m);
/* The shared expert's SwiGLU width: n_shared_expert * arch_moe_ffn_dim
 * (0 without shared experts). */
int arch_shared_ffn_dim(const ModelConfig *m);

/* Copies arch and the llama keys from src to dst: a checkpoint's root
 * attributes carry gpt2's shape keys, its stored config the rest. */
void arch_copy_keys(ModelConfig *dst, const ModelConfig *src);

#endif
