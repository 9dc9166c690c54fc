/*
 * arch.h - a model architecture as one descriptor: a struct of tables and
 * functions, each architecture in a file of its own (arch_gpt2.c,
 * arch_llama.c), listed once in arch.c's table.
 *
 * gpt2: LayerNorm with bias, learned positions, GELU MLP of width 4C,
 * biases everywhere. llama: RMSNorm, rotary positions, SwiGLU MLP of
 * width ffn_dim, grouped-query attention, no biases.
 *
 * Everything that differs between architectures is here, so the rest of
 * the program asks the descriptor (arch_of) instead of branching on
 * [model] arch: the stage machinery (model.c) runs its blocks; the
 * parameter table (params_stage.c) builds its block's tensors; plan,
 * the roofline and the CPU profile read its FLOPs, bytes, activation
 * widths and GEMM shapes; export and init_from its HuggingFace names,
 * config.json and checks; the config its key rules and defaults. Adding an
 * architecture is a file that defines one `Arch`, a line in arch.c's
 * table and a word in config.h's ModelArch (doc/design.md lists what a
 * descriptor holds).
 *
 * The descriptors call down (model_tp.c's collectives, params.c's table,
 * arch_sizes.c) and nothing they call calls back up into arch.c, so no
 * file-level call circle passes through the table. Not collective, every
 * function but the blocks' passes, whose comment says.
 */
#ifndef TRI_SRC_ARCH_H
#define TRI_SRC_ARCH_H

#include <stddef.h>
#include <stdint.h>

#include "arch_sizes.h"
#include "config.h"
#include "layout.h"
#include "params.h"
#include "ops.h"

/* The model's and the HuggingFace map's types, by name only: model.c and
 * hf_map.c include this header, so it includes neither of theirs (no
 * include circle; tests/t_deps.sh). */
struct Model;
struct BlockActs;
struct BlockParams;
struct HfName;
struct json_t;

/* A block's pass over one microbatch of `rows` rows: forward (io is where
 * the output goes), backward (io: the gradient at the block output on
 * entry, at its input on exit; parameter gradients accumulate) or zb1's
 * weight pass (io unused). Collective on tp (and, for llama's backward,
 * on the key/value replica group when heads are replicated). */
typedef void ArchBlockPass(struct Model *m, const struct BlockParams *p, struct BlockActs *a,
                           ops_tensor io, int rows);

/* Widths per token of a block's activations and of the stage's scratch
 * where they depend on the architecture (the rest, x, ln1, qkv, atty,
 * xmid, ln2 and the attention statistics, are alike). model.c allocates
 * by them and plan counts by them. */
typedef struct {
    int64_t fc;        /* the MLP before its activation: 4Cl, or gate|up 2Fl */
    int64_t fcg;       /* after it: 4Cl, or Fl */
    int64_t d_fc;      /* scratch for their gradients: 4Cl, or 3Fl */
    int64_t qkv_raw;   /* scratch: q|k|v before the grouped-query
                          expansion, (NHl + 2 NKVl) hs; 0 when none */
} ArchWidths;

/* One of a block's GEMM shapes, for the CPU profile (kernel_times.c):
 * `count` linear layers of (out, in) on one TP rank, with a bias or not. */
typedef struct {
    int out, in, count, bias;
} ArchLinear;

#define ARCH_MAX_LINEARS 8

/* A key an architecture refuses (its check_keys): which, and why; the
 * config words it ("trident: FILE: [model] KEY = VALUE: WHY"). */
typedef ConfigKeyProblem ArchKeyProblem;

/* Names the key of a refusal whose reason is already in p->why; returns 1. */
static inline int arch_refuse(ArchKeyProblem *p, const char *section, const char *key)
{
    p->section = section;
    p->key = key;
    return 1;
}

typedef struct Arch {
    const char *name;          /* [model] arch */
    int positions;             /* a learned position table, wpe */
    int norm_bias;             /* LayerNorm (gain and bias; the mean kept
                                  for the backward), else RMSNorm (gain) */
    int rotary;                /* q and k rotated; grouped-query expansion */
    int gated_mlp;             /* SwiGLU (gate, up, down), else GELU */

    /* The config: tie_embeddings = auto's answer; whether a stored config
     * carries [model] arch and the architecture keys (config_keys.h's
     * ARCH_KEY: gpt2's does not, so it reads as before llama came); the
     * rules the keys must keep, 0 or 1 with the refused key in p. */
    int tied_head;
    int writes_arch_keys;
    int (*check_keys)(const Config *c, ArchKeyProblem *p);

    /* The parameter table: a block's tensors, in order, added to ps as
     * unit "h.L" (params_stage.c builds the rest of a stage around it),
     * and where each lands in BlockParams (from the unit of global layer
     * `layer`: its indices into ParamSet.p, and its size). */
    void (*build_block)(ParamSet *ps, int layer, const ModelConfig *m, const Layout *layout);
    void (*block_roles)(const Unit *unit, const ModelConfig *m, int layer,
                        struct BlockParams *p);
    /* Elements of one block's logical tensors. */
    int64_t (*block_numel)(const ModelConfig *m);

    /* The block's compute (model.c runs them inside the unit hooks). */
    ArchBlockPass *forward, *backward, *weights;
    void (*widths)(const ModelConfig *m, int tp, ArchWidths *w);
    /* Elements per token a layer keeps from the backward until zb1's
     * weight pass: its linear layers' output gradients, this TP shard. */
    int64_t (*kept_grad_width)(const ModelConfig *m, int tp);

    /* Costs per token of one block's forward, for the whole model (not a
     * shard): FLOPs, 2 per multiply-add; and the bytes its elementwise
     * work streams with a-byte activations, tp ranks and the norms on
     * 1/sp of the tokens (the roofline). */
    double (*layer_flops)(const ModelConfig *m);
    double (*layer_bytes)(const ModelConfig *m, double a, double tp, double sp);
    /* The block's GEMMs on one TP shard, for the CPU profile; returns how
     * many are in out (at most ARCH_MAX_LINEARS). */
    int (*linears)(const ModelConfig *m, int tp, ArchLinear *out);

    /* HuggingFace: the names table, config.json, and the check of a
     * directory's config.json against [model] (init_from); an llm.c .bin's
     * table where llm.c writes this architecture, else NULL. */
    const struct HfName *hf_names;
    size_t n_hf_names;
    const struct HfName *llmc_names;
    size_t n_llmc_names;
    struct json_t *(*hf_config)(const Config *cfg, const char *torch_dtype);
    int (*hf_check)(struct json_t *root, const char *path, const Config *cfg, char *why,
                    size_t n);
} Arch;

/* The descriptors, each defined in its own file (arch_NAME.c). */
extern const Arch arch_gpt2, arch_llama;

/* The descriptor of m's architecture. */
const Arch *arch_of(const ModelConfig *m);

/* 0 when a and b build the same tensors and math; else writes which key
 * differs, "[model] KEY is A in the checkpoint but B in the config", with
 * a the checkpoint's. */
int arch_differs(const ModelConfig *ckpt, const ModelConfig *cfg, char *why, size_t n);

#endif
