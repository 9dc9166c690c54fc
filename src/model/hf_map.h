/*
 * hf_map.h - how trident's logical tensors map onto a HuggingFace model's
 * state dict, one table per architecture (doc/interop.md prints them).
 *
 * An entry names a trident tensor and its HuggingFace twin ("%d" standing
 * for the layer, a second "%d" for the expert of a mixture of experts:
 * "h.%d.moe.e.%d.gate.w") and how the elements move: a permutation of trident's
 * rows (GPT-2's QKV: trident stores the rows head by head, [head][q,k,v]
 * [head_dim], HF as [q|k|v]), then a transpose (GPT-2's Conv1D stores
 * (in, out), trident (out, in)), and whether the rows are vocabulary rows,
 * of which HF keeps only the tokenizer's (trident's vocab_size may pad
 * them). So the element at trident (r, c) is at HF (perm(r), c), or at
 * (c, perm(r)) when transposed. Each architecture's descriptor (arch.h)
 * holds its tables and its config.json; this file applies them.
 *
 * Nothing here is collective.
 */
#ifndef TRI_SRC_HF_MAP_H
#define TRI_SRC_HF_MAP_H

#include <jansson.h>
#include <stdint.h>

#include "config.h"
#include "params.h"

typedef enum {
    HF_PERM_NONE,
    HF_PERM_QKV,      /* rows [head][q,k,v][hs] -> [q,k,v][head][hs] */
    HF_ZERO_BIAS      /* not a twin: HF's bias of this trident weight, which
                         trident's model lacks (Qwen2-MoE's q, k, v), one
                         value per row: written as zeros, read back only
                         if all zero (hf_map_zero_bias) */
} HfPerm;

typedef struct HfName {
    const char *trident;   /* "h.%d.attn.qkv.w" */
    const char *hf;        /* "transformer.h.%d.attn.c_attn.weight" */
    HfPerm perm;
    int transpose;
    int vocab_rows;        /* dim 0 is the vocabulary: cut to vocab_used */
    int longer_ok;         /* a source may hold more rows (wpe: a longer
                              context); trident reads the first ones */
} HfName;

/* One table of entries; an architecture's names are up to HF_TABLES_MAX
 * of them, searched in turn (llama's attention and norms, then its MLP's
 * or its experts' names: arch.h's hf_tables). */
typedef struct HfTable {
    const HfName *names;
    size_t n;
} HfTable;

#define HF_TABLES_MAX 3

/* Whose names: HuggingFace's, or trident's own for an llm.c .bin (whose
 * tensors init_from.c names after trident's, one per layer). */
typedef enum { HF_NAMES_HF, HF_NAMES_LLMC } HfNames;

/* One logical tensor as HF stores it, and how to find its elements. */
typedef struct {
    char hf[96];
    const HfName *how;
    int64_t rows, cols;    /* trident's logical shape, cut to vocab_used */
    int ndim;              /* 1 or 2, as trident's */
    int64_t hf_shape[2];   /* HF's shape: (cols, rows) when transposed */
    int n_head;            /* for the QKV permutation */
} HfTensor;

/* The twin of trident tensor lp under cfg's architecture in names' table,
 * in out. Returns 0, or -1 when the table has no entry for it. */
int hf_map_tensor(const Config *cfg, HfNames names, const Param *lp, HfTensor *out);

/* The zero bias HF keeps for trident weight lp (HF_ZERO_BIAS), a 1-D
 * tensor of lp's rows, in out. Returns 0, or -1 when it has none. */
int hf_map_zero_bias(const Config *cfg, const Param *lp, HfTensor *out);

/* The HF row of trident row r (before any transpose). */
int64_t hf_map_row(const HfTensor *t, int64_t r);

/* The rows trident's vocabulary tensors keep in HF: [model] vocab_used,
 * or vocab_size when that is 0. Inline, so that the descriptors' tables
 * (arch.h), which hf_map.c reads, need nothing of hf_map.c. */
static inline int hf_map_vocab(const Config *cfg)
{
    return cfg->model.vocab_used ? cfg->model.vocab_used : cfg->model.vocab_size;
}

/* Converts a whole trident tensor (t->rows x t->cols, row-major: the
 * padding rows already left out) to HF's element order in out. */
void hf_map_to_hf(const HfTensor *t, const float *in, float *out);

/* config.json for cfg's model, as transformers' from_pretrained reads it;
 * torch_dtype names the stored dtype ("float32", "bfloat16"). NULL, with
 * the reason on why naming the key, for a model no HuggingFace format
 * expresses (a MoE llama without a shared expert whose layers alternate). */
json_t *hf_map_config_json(const Config *cfg, const char *torch_dtype, char *why, size_t n);

#endif
