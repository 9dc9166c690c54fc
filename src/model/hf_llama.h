/*
 * hf_llama.h - the llama architecture in HuggingFace's formats, for its
 * descriptor (arch_llama.c): a dense llama is LlamaForCausalLM; a mixture
 * of experts is MixtralForCausalLM when its layers are all MoE, without a
 * shared expert, with Mixtral's renormalised top-k, and otherwise
 * Qwen2MoeForCausalLM, which needs a shared expert (doc/interop.md). Not
 * collective, every function.
 */
#ifndef TRI_SRC_HF_LLAMA_H
#define TRI_SRC_HF_LLAMA_H

#include <jansson.h>
#include <stddef.h>

#include "config.h"
#include "hf_map.h"

/* The names tables of m's format, in out; returns how many (arch.h). */
int hf_llama_tables(const ModelConfig *m, HfTable *out);

/* config.json of cfg's format; NULL, with the reason naming the key, for
 * a MoE llama neither Mixtral nor Qwen2-MoE expresses. */
json_t *hf_llama_config(const Config *cfg, const char *torch_dtype, char *why, size_t n);

/* A directory's config.json (root, read from path) against [model]: the
 * format [model] is, then every field that changes what the weights
 * compute. 0, or 1 with the reason naming the field and the key. */
int hf_llama_check(json_t *root, const char *path, const Config *cfg, char *why, size_t n);

#endif
