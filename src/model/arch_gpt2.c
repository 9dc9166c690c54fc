/*
 * arch_gpt2.c - the GPT-2 architecture's descriptor (arch.h): its block's
 * parameters, forward and backward, sizes and costs, and its HuggingFace
 * (GPT2LMHeadModel) and llm.c names.
 *
 * The block follows GPT-2 (pre-LayerNorm, tanh GELU, MLP width 4C) split
 * the Megatron way: QKV and MLP-up are column-parallel (each TP rank has
 * whole heads and a slice of the hidden width), attention-out and
 * MLP-down are row-parallel (each rank multiplies its slice and an
 * all-reduce sums them). So a block costs two all-reduces forward and two
 * backward; under sequence parallelism model_tp.c's helpers turn them
 * into reduce-scatters and all-gathers, and the block reads the same.
 *
 * Shapes: B rows of T tokens, N = B*T, C channels; Cl = C/tp, NHl = NH/tp.
 */
#include "arch.h"

#include <stdio.h>
#include <string.h>

#include "fail.h"
#include "hf_config.h"
#include "hf_map.h"
#include "model_impl.h"
#include "prof.h"

/* ---- the config --------------------------------------------------------- */

/* The architecture keys mean nothing to GPT-2: a gpt2 config that sets
 * one is refused rather than silently trained without it (defaults are
 * what config_to_ini writes back, so they pass). */
static int check_keys(const Config *c, ArchKeyProblem *p)
{
    const ModelConfig *m = &c->model;
    const char *key = NULL;
    if (m->n_kv_head != 0 && m->n_kv_head != m->n_head)
        key = "n_kv_head";
    else if (m->ffn_dim != 0 && m->ffn_dim != 4 * m->n_embd)
        key = "ffn_dim";
    else if (m->norm_eps != 1e-5)
        key = "norm_eps";
    else if (m->rope_theta != 10000.0)
        key = "rope_theta";
    else if (m->n_expert != 0)
        key = "n_expert";
    if (!key)
        return 0;
    reason_set(p->why, sizeof p->why, "applies to arch = llama only (this config's arch is gpt2)");
    return arch_refuse(p, "model", key);
}

/* ---- parameters --------------------------------------------------------- */

static void build_block(ParamSet *ps, int l, const ModelConfig *m, const Layout *layout)
{
    int64_t C = m->n_embd;
    char name[48], unit[16];
    snprintf(unit, sizeof unit, "h.%d", l);
    params_unit_begin(ps, unit);
#define P(suffix, r, c, nd, split, role)                                    \
    (snprintf(name, sizeof name, "h.%d.%s", l, suffix),                    \
     params_unit_param(ps, name, r, c, nd, split, role, layout))
    P("ln1.w", C, 1, 1, SPLIT_NONE, ROLE_NORM_GAIN);
    P("ln1.b", C, 1, 1, SPLIT_NONE, ROLE_NORM_BIAS);
    P("attn.qkv.w", 3 * C, C, 2, SPLIT_ROWS, ROLE_WEIGHT);
    P("attn.qkv.b", 3 * C, 1, 1, SPLIT_ROWS, ROLE_BIAS);
    P("attn.proj.w", C, C, 2, SPLIT_COLS, ROLE_RESIDUAL);
    P("attn.proj.b", C, 1, 1, SPLIT_NONE, ROLE_BIAS);
    P("ln2.w", C, 1, 1, SPLIT_NONE, ROLE_NORM_GAIN);
    P("ln2.b", C, 1, 1, SPLIT_NONE, ROLE_NORM_BIAS);
    P("mlp.fc.w", 4 * C, C, 2, SPLIT_ROWS, ROLE_WEIGHT);
    P("mlp.fc.b", 4 * C, 1, 1, SPLIT_ROWS, ROLE_BIAS);
    P("mlp.proj.w", C, 4 * C, 2, SPLIT_COLS, ROLE_RESIDUAL);
    P("mlp.proj.b", C, 1, 1, SPLIT_NONE, ROLE_BIAS);
#undef P
}

/* The order build_block adds them in. */
static void block_roles(const Unit *unit, const ModelConfig *m, int layer, BlockParams *b)
{
    (void)m;
    const int *u = unit->idx;
    *b = (BlockParams){u[0], u[1], u[2], u[3], u[4], u[5],
                       u[6], u[7], u[8], u[9], u[10], u[11], -1, -1, -1, .layer = layer};
}

/* Every GPT-2 block is alike: `layer` is not read (arch.h). */
static int64_t block_numel(const ModelConfig *m, int layer)
{
    (void)layer;
    int64_t C = m->n_embd;
    return 2 * C + 3 * C * C + 3 * C + C * C + C + 2 * C + 4 * C * C + 4 * C + 4 * C * C + C;
}

/* ---- the block ---------------------------------------------------------- */

/* N tokens through the GEMMs and attention; n (model_local_rows) through
 * the norms and residual adds. */
static void block_forward(Model *m, const BlockParams *p, BlockActs *a,
                          ops_tensor out, int rows)
{
    int64_t N = (int64_t)rows * m->T, C = m->C, Cl = C / m->grid->layout.tp;
    int64_t n = model_local_rows(m, N);
    PROF(PROF_LAYERNORM, ops_layernorm_fwd(head_of(a->ln1, n * C), a->ln1_mean, a->ln1_rstd,
                      head_of(a->x, n * C), W(m, p->ln1w), W(m, p->ln1b), (int)n, (int)C));
    PROF(PROF_MATMUL, ops_matmul_fwd(head_of(a->qkv, N * 3 * Cl), model_column_input(m, a->ln1, N),
                   W(m, p->qkvw), W(m, p->qkvb), (int)N, (int)(3 * Cl), (int)C));
    PROF(PROF_ATTENTION, model_cp_attention_fwd(m, head_of(a->atty, N * Cl), a->lse,
                                                head_of(a->qkv, N * 3 * Cl), rows));
    ops_tensor y = model_row_parallel(m, a->atty, p->projw, p->projb, N, Cl);
    /* xmid = x + y and ln2(xmid): one pass on a GPU (ops.h) */
    PROF(PROF_LAYERNORM, ops_add_layernorm_fwd(head_of(a->xmid, n * C), head_of(a->ln2, n * C),
                                               a->ln2_mean, a->ln2_rstd, head_of(a->x, n * C), y,
                                               W(m, p->ln2w), W(m, p->ln2b), (int)n, (int)C));
    /* fc, then fcg = gelu(fc), in one op: one GEMM on a GPU (ops.h) */
    PROF(PROF_MATMUL, ops_matmul_gelu_fwd(head_of(a->fcg, N * 4 * Cl), head_of(a->fc, N * 4 * Cl),
                                          model_column_input(m, a->ln2, N), W(m, p->fcw),
                                          W(m, p->fcb), (int)N, (int)(4 * Cl), (int)C));
    y = model_row_parallel(m, a->fcg, p->mprojw, p->mprojb, N, 4 * Cl);
    PROF(PROF_RESIDUAL, ops_add(head_of(out, n * C), head_of(a->xmid, n * C), y, n * C));
}

/* The gradient at a LayerNorm's output arrives as partial sums from the
 * column-parallel layer after it: sum over TP, then LayerNorm's backward
 * adds into the residual gradient dres. */
static void ln_backward(Model *m, ops_tensor dres, ops_tensor inp, int w, int b,
                        ops_tensor mean, ops_tensor rstd, int64_t N)
{
    int64_t n = model_local_rows(m, N);
    ops_tensor d_ln = model_norm_output_grad(m, N);
    PROF(PROF_LAYERNORM, ops_layernorm_bwd(dres, G(m, w), G(m, b), d_ln, head_of(inp, n * m->C),
                                           W(m, w), mean, rstd, (int)n, m->C));
}

/* dres (the local rows, C): gradient at the block output on entry, at its
 * input on exit. Under sequence parallelism the norms' outputs are
 * gathered again for the weight gradients rather than kept whole. Under
 * zb1 the weight halves wait in a->kept for block_weights (which gathers
 * the norms' outputs itself). */
static void block_backward(Model *m, const BlockParams *p, BlockActs *a,
                           ops_tensor dres, int rows)
{
    ModelScratch *s = m->scratch;
    int64_t N = (int64_t)rows * m->T, C = m->C, Cl = C / m->grid->layout.tp, at = 0;
    ops_tensor d_fc = head_of(s->d_fc, N * 4 * Cl);
    ops_tensor d_ln = head_of(s->d_ln, N * C);

    /* MLP: out = xmid + fcg . Wp^T; fcg = gelu(fc); fc = ln2 . Wf^T */
    ops_tensor dout = model_row_parallel_grad(m, dres, N);
    /* d_fc: the gradient at fc, through the GELU, in one op */
    model_linear_bwd_gelu(m, d_fc, p->mprojw, p->mprojb, dout, head_of(a->fcg, N * 4 * Cl),
                          kept_next(a, &at, N * C), head_of(a->fc, N * 4 * Cl), N, C, 4 * Cl);
    ops_tensor ln2 = a->kept.data ? OPS_NONE : model_column_input(m, a->ln2, N);
    model_linear_bwd(m, d_ln, p->fcw, p->fcb, d_fc, ln2, kept_next(a, &at, N * 4 * Cl), N,
                     4 * Cl, C);
    ln_backward(m, dres, a->xmid, p->ln2w, p->ln2b, a->ln2_mean, a->ln2_rstd, N);

    /* attention: xmid = x + atty . Wo^T; atty = attn(qkv); qkv = ln1 . Wq^T */
    ops_tensor d_atty = head_of(s->d_atty, N * Cl), d_qkv = head_of(s->d_qkv, N * 3 * Cl);
    dout = model_row_parallel_grad(m, dres, N);
    model_linear_bwd(m, d_atty, p->projw, p->projb, dout, head_of(a->atty, N * Cl),
                     kept_next(a, &at, N * C), N, C, Cl);
    PROF(PROF_ATTENTION, model_cp_attention_bwd(m, d_qkv, d_atty, head_of(a->qkv, N * 3 * Cl),
                                                head_of(a->atty, N * Cl), a->lse, rows));
    ops_tensor ln1 = a->kept.data ? OPS_NONE : model_column_input(m, a->ln1, N);
    model_linear_bwd(m, d_ln, p->qkvw, p->qkvb, d_qkv, ln1, kept_next(a, &at, N * 3 * Cl), N,
                     3 * Cl, C);
    ln_backward(m, dres, a->x, p->ln1w, p->ln1b, a->ln1_mean, a->ln1_rstd, N);
}

/* zb1's weight pass over the block: the four GEMMs' weight halves, in
 * block_backward's order (so a->kept's views line up). dres is unused.
 * Under sequence parallelism the norms' outputs are gathered again:
 * collective on tp, as every TP rank runs the same weight passes. */
static void block_weights(Model *m, const BlockParams *p, BlockActs *a, ops_tensor dres,
                          int rows)
{
    (void)dres;
    int64_t N = (int64_t)rows * m->T, C = m->C, Cl = C / m->grid->layout.tp, at = 0;
    model_linear_weights(m, p->mprojw, p->mprojb, kept_next(a, &at, N * C),
                         head_of(a->fcg, N * 4 * Cl), N, C, 4 * Cl);
    model_linear_weights(m, p->fcw, p->fcb, kept_next(a, &at, N * 4 * Cl),
                         model_column_input(m, a->ln2, N), N, 4 * Cl, C);
    model_linear_weights(m, p->projw, p->projb, kept_next(a, &at, N * C),
                         head_of(a->atty, N * Cl), N, C, Cl);
    model_linear_weights(m, p->qkvw, p->qkvb, kept_next(a, &at, N * 3 * Cl),
                         model_column_input(m, a->ln1, N), N, 3 * Cl, C);
}

/* ---- sizes and costs ---------------------------------------------------- */

static void widths(const ModelConfig *m, int tp, ArchWidths *w)
{
    int64_t Cl = m->n_embd / tp;
    *w = (ArchWidths){.fc = 4 * Cl, .fcg = 4 * Cl, .d_fc = 4 * Cl, .qkv_raw = 0};
}

/* The views block_backward takes with kept_next: the output gradients of
 * MLP-down (C), MLP-up (4C/tp), attention-out (C) and QKV (3C/tp). */
static int64_t kept_grad_width(const ModelConfig *m, int tp)
{
    int64_t C = m->n_embd;
    int64_t hs = C / m->n_head, Cl = (int64_t)(m->n_head / tp) * hs;
    return 2 * C + 7 * Cl;
}

/* QKV 3C^2, out C^2, MLP 8C^2 multiply-adds; attention scores and values
 * T*C each (all T x T, as computed). */
static double layer_flops(const ModelConfig *m, int layer)
{
    (void)layer;
    double C = m->n_embd, T = m->seq_len;
    return 24.0 * C * C + 4.0 * T * C;
}

/* Forward: two LayerNorms, two residual adds, GELU's input written by
 * the MLP up GEMM's epilogue beside its output (and read back by the MLP
 * down's dGELU epilogue: no GELU pass of its own on a GPU, cuBLASLt's
 * epilogues, doc/gpu.md; a CPU plan times its kernels instead), the
 * attention probabilities (fp32) read and written (a term from when the
 * CUDA attention formed them in a scratch: its fused kernel keeps its
 * tiles on chip but runs its products on CUDA cores in fp32, which the
 * GEMM term's tensor-core rate does not see; neither cost has been
 * measured on a GPU). The norms and residual adds run on 1/sp of the
 * tokens. */
static double layer_bytes(const ModelConfig *m, int layer, double a, double tp, double sp)
{
    (void)layer;
    double C = m->n_embd, T = m->seq_len, NH = m->n_head;
    return a * C * ((4.0 + 6.0) / sp + 4.0 / tp) + 8.0 * NH / tp * T / 2.0;
}

static int linears(const ModelConfig *m, int layer, int tp, ArchLinear *out)
{
    (void)layer;
    int C = m->n_embd, Cl = C / tp;
    out[0] = (ArchLinear){3 * Cl, C, 1, 1};
    out[1] = (ArchLinear){C, Cl, 1, 1};
    out[2] = (ArchLinear){4 * Cl, C, 1, 1};
    out[3] = (ArchLinear){C, 4 * Cl, 1, 1};
    return 4;
}

/* ---- HuggingFace and llm.c ---------------------------------------------- */

/* transformers' GPT2LMHeadModel (modeling_gpt2.py): every Linear is a
 * Conv1D whose weight is (in, out), c_attn's columns are [q | k | v], each
 * C wide, and the head is tied to wte (no lm_head tensor) unless
 * tie_word_embeddings is false. */
static const HfName GPT2_NAMES[] = {
    {"wte", "transformer.wte.weight", HF_PERM_NONE, 0, 1, 0},
    {"wpe", "transformer.wpe.weight", HF_PERM_NONE, 0, 0, 1},
    {"h.%d.ln1.w", "transformer.h.%d.ln_1.weight", HF_PERM_NONE, 0, 0, 0},
    {"h.%d.ln1.b", "transformer.h.%d.ln_1.bias", HF_PERM_NONE, 0, 0, 0},
    {"h.%d.attn.qkv.w", "transformer.h.%d.attn.c_attn.weight", HF_PERM_QKV, 1, 0, 0},
    {"h.%d.attn.qkv.b", "transformer.h.%d.attn.c_attn.bias", HF_PERM_QKV, 0, 0, 0},
    {"h.%d.attn.proj.w", "transformer.h.%d.attn.c_proj.weight", HF_PERM_NONE, 1, 0, 0},
    {"h.%d.attn.proj.b", "transformer.h.%d.attn.c_proj.bias", HF_PERM_NONE, 0, 0, 0},
    {"h.%d.ln2.w", "transformer.h.%d.ln_2.weight", HF_PERM_NONE, 0, 0, 0},
    {"h.%d.ln2.b", "transformer.h.%d.ln_2.bias", HF_PERM_NONE, 0, 0, 0},
    {"h.%d.mlp.fc.w", "transformer.h.%d.mlp.c_fc.weight", HF_PERM_NONE, 1, 0, 0},
    {"h.%d.mlp.fc.b", "transformer.h.%d.mlp.c_fc.bias", HF_PERM_NONE, 0, 0, 0},
    {"h.%d.mlp.proj.w", "transformer.h.%d.mlp.c_proj.weight", HF_PERM_NONE, 1, 0, 0},
    {"h.%d.mlp.proj.b", "transformer.h.%d.mlp.c_proj.bias", HF_PERM_NONE, 0, 0, 0},
    {"lnf.w", "transformer.ln_f.weight", HF_PERM_NONE, 0, 0, 0},
    {"lnf.b", "transformer.ln_f.bias", HF_PERM_NONE, 0, 0, 0},
    {"lm_head", "lm_head.weight", HF_PERM_NONE, 0, 1, 0},
};

/* An llm.c .bin (karpathy/llm.c train_gpt2.c): PyTorch's Linear layout,
 * (out, in), with c_attn's rows [q | k | v]; wte holds the padded
 * vocabulary and wpe max_seq_len rows; the head is always tied. */
static const HfName LLMC_NAMES[] = {
    {"wte", "wte", HF_PERM_NONE, 0, 1, 1},
    {"wpe", "wpe", HF_PERM_NONE, 0, 0, 1},
    {"h.%d.ln1.w", "h.%d.ln1.w", HF_PERM_NONE, 0, 0, 0},
    {"h.%d.ln1.b", "h.%d.ln1.b", HF_PERM_NONE, 0, 0, 0},
    {"h.%d.attn.qkv.w", "h.%d.attn.qkv.w", HF_PERM_QKV, 0, 0, 0},
    {"h.%d.attn.qkv.b", "h.%d.attn.qkv.b", HF_PERM_QKV, 0, 0, 0},
    {"h.%d.attn.proj.w", "h.%d.attn.proj.w", HF_PERM_NONE, 0, 0, 0},
    {"h.%d.attn.proj.b", "h.%d.attn.proj.b", HF_PERM_NONE, 0, 0, 0},
    {"h.%d.ln2.w", "h.%d.ln2.w", HF_PERM_NONE, 0, 0, 0},
    {"h.%d.ln2.b", "h.%d.ln2.b", HF_PERM_NONE, 0, 0, 0},
    {"h.%d.mlp.fc.w", "h.%d.mlp.fc.w", HF_PERM_NONE, 0, 0, 0},
    {"h.%d.mlp.fc.b", "h.%d.mlp.fc.b", HF_PERM_NONE, 0, 0, 0},
    {"h.%d.mlp.proj.w", "h.%d.mlp.proj.w", HF_PERM_NONE, 0, 0, 0},
    {"h.%d.mlp.proj.b", "h.%d.mlp.proj.b", HF_PERM_NONE, 0, 0, 0},
    {"lnf.w", "lnf.w", HF_PERM_NONE, 0, 0, 0},
    {"lnf.b", "lnf.b", HF_PERM_NONE, 0, 0, 0},
};

static int hf_tables(const ModelConfig *m, HfTable *out)
{
    (void)m;
    out[0] = (HfTable){GPT2_NAMES, sizeof GPT2_NAMES / sizeof GPT2_NAMES[0]};
    return 1;
}

/* Every GPT-2 is expressible: why is never written. */
static json_t *hf_config(const Config *cfg, const char *torch_dtype, char *why, size_t n)
{
    (void)why;
    (void)n;
    const ModelConfig *m = &cfg->model;
    /* dropout is 0: trident trains without it, and HF's evaluation mode
     * ignores it anyway; LayerNorm eps is kernels/elem.h's TRI_LN_EPS */
    return json_pack("{s:[s], s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:n, s:s, s:f, s:f, s:f, "
                     "s:f, s:f, s:b, s:b, s:s}",
                     "architectures", "GPT2LMHeadModel",
                     "model_type", "gpt2",
                     "vocab_size", hf_map_vocab(cfg),
                     "n_positions", m->seq_len,
                     "n_ctx", m->seq_len,
                     "n_embd", m->n_embd,
                     "n_layer", m->n_layer,
                     "n_head", m->n_head,
                     "n_inner",
                     "activation_function", "gelu_new",
                     "layer_norm_epsilon", 1e-5,
                     "initializer_range", m->init_std,
                     "resid_pdrop", 0.0,
                     "embd_pdrop", 0.0,
                     "attn_pdrop", 0.0,
                     "scale_attn_weights", 1,
                     "tie_word_embeddings", m->tie_embeddings,
                     "torch_dtype", torch_dtype);
}

/* transformers' words for the tanh GELU trident's MLP computes; the
 * first is GPT2Config's default. */
static const char *const TANH_GELU[] = {"gelu_new", "gelu_pytorch_tanh", NULL};

/* GPT2LMHeadModel's config.json against [model]: the shapes, then every
 * field that changes what the weights compute, each against what trident
 * does (absent: GPT2Config's default). Dropout and initializer_range do
 * not change a loaded model's function and are not compared;
 * tie_word_embeddings is init_from's (a tied source may be untied). */
static int hf_check(json_t *root, const char *path, const Config *cfg, char *why, size_t n)
{
    const ModelConfig *m = &cfg->model;
    const char *type = json_string_value(json_object_get(root, "model_type"));
    if (!type || strcmp(type, "gpt2"))
        return reason_set(why, n, "%s: model_type is %s, [model] is GPT-2 (\"gpt2\")", path,
                          type ? type : "missing");
    TRI_TRY(hf_config_int(root, path, "n_layer", "n_layer", m->n_layer, why, n));
    TRI_TRY(hf_config_int(root, path, "n_head", "n_head", m->n_head, why, n));
    TRI_TRY(hf_config_int(root, path, "n_embd", "n_embd", m->n_embd, why, n));
    TRI_TRY(hf_config_int(root, path, "vocab_size", "vocab_used (or vocab_size)",
                          hf_map_vocab(cfg), why, n));
    TRI_TRY(hf_config_context(root, path, "n_positions", m->seq_len, why, n));
    json_t *inner = json_object_get(root, "n_inner");
    if (inner && !json_is_null(inner))
        TRI_TRY(hf_config_int(root, path, "n_inner", "4 x n_embd (trident's MLP width)",
                              4 * m->n_embd, why, n));
    TRI_TRY(hf_config_real(root, path, "layer_norm_epsilon", 1e-5,
                           "trident's GPT-2 LayerNorm epsilon", 1e-5, why, n));
    TRI_TRY(hf_config_word(root, path, "activation_function", TANH_GELU,
                           "trident's GPT-2 MLP computes the tanh GELU (gelu_new, "
                           "gelu_pytorch_tanh)", why, n));
    TRI_TRY(hf_config_bool(root, path, "scale_attn_weights", 1,
                           "trident's GPT-2 always has scale_attn_weights", 1, why, n));
    TRI_TRY(hf_config_bool(root, path, "scale_attn_by_inverse_layer_idx", 0,
                           "trident's GPT-2 always has scale_attn_by_inverse_layer_idx", 0, why, n));
    return hf_config_bool(root, path, "add_cross_attention", 0,
                          "trident's GPT-2 always has add_cross_attention", 0, why, n);
}

const Arch arch_gpt2 = {
    .name = "gpt2",
    .positions = 1, .norm_bias = 1, .rotary = 0, .gated_mlp = 0,
    .tied_head = 1, .writes_arch_keys = 0, .check_keys = check_keys,
    .build_block = build_block, .block_roles = block_roles, .block_numel = block_numel,
    .forward = block_forward, .backward = block_backward, .weights = block_weights,
    .widths = widths, .kept_grad_width = kept_grad_width,
    .layer_flops = layer_flops, .layer_bytes = layer_bytes, .linears = linears,
    .hf_tables = hf_tables,
    .llmc_names = LLMC_NAMES, .n_llmc_names = sizeof LLMC_NAMES / sizeof LLMC_NAMES[0],
    .hf_config = hf_config, .hf_check = hf_check,
};
