/*
 * hf_llama.c - the llama architecture in HuggingFace's formats; see
 * hf_llama.h.
 *
 * transformers' LlamaForCausalLM (modeling_llama.py), MixtralForCausalLM
 * (modeling_mixtral.py) and Qwen2MoeForCausalLM (modeling_qwen2_moe.py)
 * share the embedding, the norms, the attention and the head: every
 * Linear is (out, in) like trident's, and trident keeps q and k rows in
 * HF's rotary layout (rotate_half) already (checkpoint-format.md), so
 * nothing moves but the vocabulary's padding; k and v have n_kv_head
 * heads. They differ in the MLP: LlamaForCausalLM's gate_proj, up_proj,
 * down_proj; Mixtral's block_sparse_moe (router `gate`, experts w1 = gate,
 * w3 = up, w2 = down); Qwen2-MoE's mlp (router `gate`, experts' gate_proj,
 * up_proj, down_proj, a shared expert and its sigmoid gate, dense layers'
 * gate_proj, up_proj, down_proj where decoder_sparse_step skips), and
 * Qwen2-MoE's q, k and v have biases, which trident's attention lacks:
 * they are written as zeros and read back only if zero.
 *
 * The routing is the same function in both: softmax over the experts in
 * fp32, the top k, renormalised over them (Mixtral always, Qwen2-MoE with
 * norm_topk_prob) or not (Qwen2-MoE's default); trident's MoeRouter names
 * the two (config.h).
 */
#include "hf_llama.h"

#include <string.h>

#include "arch_sizes.h"
#include "fail.h"
#include "hf_config.h"
#include "reason.h"

typedef enum { HF_LLAMA, HF_MIXTRAL, HF_QWEN2_MOE } HfFormat;

/* What a format calls itself, and transformers' defaults for the fields
 * it may leave out (configuration_*.py). */
typedef struct {
    const char *model_type, *architecture, *title;
    int kv_heads;          /* num_key_value_heads when absent; 0: num_attention_heads */
    double norm_eps, rope_theta;
} HfFormatInfo;

static const HfFormatInfo FORMATS[] = {
    [HF_LLAMA] = {"llama", "LlamaForCausalLM", "a dense llama", 0, 1e-6, 10000.0},
    [HF_MIXTRAL] = {"mixtral", "MixtralForCausalLM", "Mixtral", 8, 1e-5, 1e6},
    [HF_QWEN2_MOE] = {"qwen2_moe", "Qwen2MoeForCausalLM", "Qwen2-MoE", 16, 1e-6, 10000.0},
};

/* The format m is, or 1 with the reason naming the key where none
 * expresses it: Mixtral's layers are all MoE with the top-k renormalised
 * and no shared expert; Qwen2-MoE has both orders and dense layers, but
 * always a shared expert. */
static int format_of(const ModelConfig *m, HfFormat *f, char *why, size_t n)
{
    *f = HF_LLAMA;
    if (!m->n_expert)
        *f = HF_LLAMA;
    else if (m->n_shared_expert)
        *f = HF_QWEN2_MOE;
    else if (m->moe_every == 1 && m->moe_router == MOE_ROUTER_SOFTMAX_TOPK_NORM)
        *f = HF_MIXTRAL;
    else
        return reason_set(why, n, "[model] n_shared_expert = 0 with %s: no HuggingFace format "
                          "expresses this model: Mixtral (MixtralForCausalLM) has only MoE "
                          "layers and renormalises the top-k weights, and Qwen2-MoE "
                          "(Qwen2MoeForCausalLM), which has dense layers and both routers, "
                          "always has a shared expert (n_shared_expert >= 1)",
                          m->moe_every != 1 ? "moe_every > 1 (dense layers between the MoE "
                                              "ones)"
                                            : "moe_router = softmax_topk (the top-k weights "
                                              "not renormalised)");
    return 0;
}

/* ---- the names ---------------------------------------------------------- */

/* Every format's: the embedding, the norms, the attention, the head. */
static const HfName LLAMA_COMMON[] = {
    {"wte", "model.embed_tokens.weight", HF_PERM_NONE, 0, 1, 0},
    {"h.%d.ln1.w", "model.layers.%d.input_layernorm.weight", HF_PERM_NONE, 0, 0, 0},
    {"h.%d.attn.q.w", "model.layers.%d.self_attn.q_proj.weight", HF_PERM_NONE, 0, 0, 0},
    {"h.%d.attn.k.w", "model.layers.%d.self_attn.k_proj.weight", HF_PERM_NONE, 0, 0, 0},
    {"h.%d.attn.v.w", "model.layers.%d.self_attn.v_proj.weight", HF_PERM_NONE, 0, 0, 0},
    {"h.%d.attn.o.w", "model.layers.%d.self_attn.o_proj.weight", HF_PERM_NONE, 0, 0, 0},
    {"h.%d.ln2.w", "model.layers.%d.post_attention_layernorm.weight", HF_PERM_NONE, 0, 0, 0},
    {"lnf.w", "model.norm.weight", HF_PERM_NONE, 0, 0, 0},
    {"lm_head", "lm_head.weight", HF_PERM_NONE, 0, 1, 0},
};

/* A dense layer's SwiGLU (LlamaForCausalLM's, and Qwen2-MoE's between its
 * MoE layers). */
static const HfName LLAMA_MLP[] = {
    {"h.%d.mlp.gate.w", "model.layers.%d.mlp.gate_proj.weight", HF_PERM_NONE, 0, 0, 0},
    {"h.%d.mlp.up.w", "model.layers.%d.mlp.up_proj.weight", HF_PERM_NONE, 0, 0, 0},
    {"h.%d.mlp.down.w", "model.layers.%d.mlp.down_proj.weight", HF_PERM_NONE, 0, 0, 0},
};

/* MixtralSparseMoeBlock: the layer, then the expert. */
static const HfName MIXTRAL_MOE[] = {
    {"h.%d.moe.router.w", "model.layers.%d.block_sparse_moe.gate.weight", HF_PERM_NONE, 0, 0, 0},
    {"h.%d.moe.e.%d.gate.w", "model.layers.%d.block_sparse_moe.experts.%d.w1.weight",
     HF_PERM_NONE, 0, 0, 0},
    {"h.%d.moe.e.%d.up.w", "model.layers.%d.block_sparse_moe.experts.%d.w3.weight",
     HF_PERM_NONE, 0, 0, 0},
    {"h.%d.moe.e.%d.down.w", "model.layers.%d.block_sparse_moe.experts.%d.w2.weight",
     HF_PERM_NONE, 0, 0, 0},
};

/* Qwen2MoeSparseMoeBlock, and Qwen2MoeAttention's biases. */
static const HfName QWEN2_MOE[] = {
    {"h.%d.attn.q.w", "model.layers.%d.self_attn.q_proj.bias", HF_ZERO_BIAS, 0, 0, 0},
    {"h.%d.attn.k.w", "model.layers.%d.self_attn.k_proj.bias", HF_ZERO_BIAS, 0, 0, 0},
    {"h.%d.attn.v.w", "model.layers.%d.self_attn.v_proj.bias", HF_ZERO_BIAS, 0, 0, 0},
    {"h.%d.moe.router.w", "model.layers.%d.mlp.gate.weight", HF_PERM_NONE, 0, 0, 0},
    {"h.%d.moe.e.%d.gate.w", "model.layers.%d.mlp.experts.%d.gate_proj.weight",
     HF_PERM_NONE, 0, 0, 0},
    {"h.%d.moe.e.%d.up.w", "model.layers.%d.mlp.experts.%d.up_proj.weight",
     HF_PERM_NONE, 0, 0, 0},
    {"h.%d.moe.e.%d.down.w", "model.layers.%d.mlp.experts.%d.down_proj.weight",
     HF_PERM_NONE, 0, 0, 0},
    {"h.%d.moe.shared.gate.w", "model.layers.%d.mlp.shared_expert.gate_proj.weight",
     HF_PERM_NONE, 0, 0, 0},
    {"h.%d.moe.shared.up.w", "model.layers.%d.mlp.shared_expert.up_proj.weight",
     HF_PERM_NONE, 0, 0, 0},
    {"h.%d.moe.shared.down.w", "model.layers.%d.mlp.shared_expert.down_proj.weight",
     HF_PERM_NONE, 0, 0, 0},
    {"h.%d.moe.shared_gate.w", "model.layers.%d.mlp.shared_expert_gate.weight",
     HF_PERM_NONE, 0, 0, 0},
};

#define TABLE(t) ((HfTable){t, sizeof t / sizeof t[0]})

/* A model no format expresses gets the tables of none: export refuses it
 * by its config.json first (hf_llama_config). */
int hf_llama_tables(const ModelConfig *m, HfTable *out)
{
    HfFormat f;
    char why[8];
    if (format_of(m, &f, why, sizeof why))
        return 0;
    out[0] = TABLE(LLAMA_COMMON);
    if (f == HF_LLAMA) {
        out[1] = TABLE(LLAMA_MLP);
        return 2;
    }
    if (f == HF_MIXTRAL) {
        out[1] = TABLE(MIXTRAL_MOE);
        return 2;
    }
    out[1] = TABLE(LLAMA_MLP);
    out[2] = TABLE(QWEN2_MOE);
    return 3;
}

/* ---- config.json -------------------------------------------------------- */

/* The fields every format shares. */
static json_t *common_config(const Config *cfg, HfFormat f, const char *torch_dtype)
{
    const ModelConfig *m = &cfg->model;
    return json_pack("{s:[s], s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:f, s:f, s:s, s:f, s:b, "
                     "s:f, s:n, s:s}",
                     "architectures", FORMATS[f].architecture,
                     "model_type", FORMATS[f].model_type,
                     "vocab_size", hf_map_vocab(cfg),
                     "hidden_size", m->n_embd,
                     "num_hidden_layers", m->n_layer,
                     "num_attention_heads", m->n_head,
                     "num_key_value_heads", arch_kv_heads(m),
                     "max_position_embeddings", m->seq_len,
                     "rms_norm_eps", m->norm_eps,
                     "rope_theta", m->rope_theta,
                     "hidden_act", "silu",
                     "attention_dropout", 0.0,
                     "tie_word_embeddings", m->tie_embeddings,
                     "initializer_range", m->init_std,
                     "rope_scaling",
                     "torch_dtype", torch_dtype);
}

/* HuggingFace's load-balancing loss (Mixtral's and Qwen2-MoE's) is top_k
 * times trident's aux (doc/moe.md, "The losses"), so the coefficient
 * that weighs the same loss there is moe_aux_loss / top_k. */
static double hf_aux_coef(const ModelConfig *m)
{
    return m->moe_aux_loss / m->top_k;
}

/* What each format adds. Qwen2-MoE's intermediate_size is its dense
 * layers' width (written even where every layer is MoE); its attention's
 * biases are there (qkv_bias, transformers' default), as zeros. */
static json_t *format_config(const ModelConfig *m, HfFormat f)
{
    int hd = m->n_embd / m->n_head;
    if (f == HF_LLAMA)
        return json_pack("{s:i, s:i, s:b, s:b}", "intermediate_size", arch_ffn_dim(m),
                         "head_dim", hd, "attention_bias", 0, "mlp_bias", 0);
    if (f == HF_MIXTRAL)
        return json_pack("{s:i, s:i, s:i, s:i, s:f, s:f, s:b, s:n}",
                         "intermediate_size", arch_moe_ffn_dim(m), "head_dim", hd,
                         "num_local_experts", m->n_expert, "num_experts_per_tok", m->top_k,
                         "router_aux_loss_coef", hf_aux_coef(m), "router_jitter_noise", 0.0,
                         "output_router_logits", 0, "sliding_window");
    return json_pack("{s:i, s:i, s:i, s:i, s:i, s:i, s:b, s:f, s:b, s:[], s:b, s:b}",
                     "intermediate_size", arch_ffn_dim(m), "num_experts", m->n_expert,
                     "num_experts_per_tok", m->top_k, "moe_intermediate_size",
                     arch_moe_ffn_dim(m), "shared_expert_intermediate_size",
                     arch_shared_ffn_dim(m), "decoder_sparse_step", m->moe_every,
                     "norm_topk_prob", m->moe_router == MOE_ROUTER_SOFTMAX_TOPK_NORM,
                     "router_aux_loss_coef", hf_aux_coef(m), "output_router_logits", 0,
                     "mlp_only_layers", "use_sliding_window", 0, "qkv_bias", 1);
}

json_t *hf_llama_config(const Config *cfg, const char *torch_dtype, char *why, size_t n)
{
    HfFormat f;
    if (format_of(&cfg->model, &f, why, n))
        return NULL;
    json_t *root = common_config(cfg, f, torch_dtype), *more = format_config(&cfg->model, f);
    if (!root || !more || json_object_update(root, more)) {
        json_decref(root);
        root = NULL;
        reason_set(why, n, "config.json: out of memory");
    }
    json_decref(more);
    return root;
}

/* ---- the check ---------------------------------------------------------- */

/* The activation of trident's SwiGLU, as transformers names it. */
static const char *const SILU[] = {"silu", NULL};

/* model_type against the format [model] is. */
static int check_type(json_t *root, const char *path, const ModelConfig *m, HfFormat f,
                      char *why, size_t n)
{
    const char *type = json_string_value(json_object_get(root, "model_type"));
    if (type && !strcmp(type, FORMATS[f].model_type))
        return 0;
    if (f == HF_LLAMA)
        return reason_set(why, n, "%s: model_type is %s, [model] arch is llama", path,
                          type ? type : "missing");
    return reason_set(why, n, "%s: model_type is %s, [model] is %s's (\"%s\": n_expert = %d, "
                      "n_shared_expert = %d, moe_every = %d, moe_router = %s)", path,
                      type ? type : "missing", FORMATS[f].title, FORMATS[f].model_type,
                      m->n_expert, m->n_shared_expert, m->moe_every,
                      m->moe_router == MOE_ROUTER_SOFTMAX_TOPK_NORM ? "softmax_topk_norm"
                                                                    : "softmax_topk");
}

/* num_key_value_heads: absent, the format's default; null, the query
 * heads (as transformers' configs read it). */
static int check_kv_heads(json_t *root, const char *path, const ModelConfig *m, HfFormat f,
                          char *why, size_t n)
{
    json_t *kv = json_object_get(root, "num_key_value_heads");
    int dflt = FORMATS[f].kv_heads ? FORMATS[f].kv_heads : m->n_head;
    if (kv && json_is_null(kv))
        dflt = m->n_head;
    else if (kv)
        return hf_config_int(root, path, "num_key_value_heads", "n_kv_head", arch_kv_heads(m),
                             why, n);
    if (dflt == arch_kv_heads(m))
        return 0;
    return reason_set(why, n, "%s: num_key_value_heads is %s (so %d), [model] n_kv_head = %d",
                      path, kv ? "null" : "absent", dflt, arch_kv_heads(m));
}

/* transformers 5 writes the rotary embedding as rope_parameters
 * ({"rope_type": "default", "rope_theta": ...}) where 4 wrote rope_theta
 * and rope_scaling: an unscaled one with trident's theta, or nothing. */
static int check_rope_parameters(json_t *root, const char *path, const ModelConfig *m,
                                 char *why, size_t n)
{
    json_t *rope = json_object_get(root, "rope_parameters");
    if (!rope || json_is_null(rope))
        return 0;
    const char *key;
    json_t *v;
    json_object_foreach(rope, key, v) {
        if (!strcmp(key, "rope_type") && json_is_string(v)
            && !strcmp(json_string_value(v), "default"))
            continue;
        if (!strcmp(key, "rope_theta") && json_is_number(v) && json_number_value(v) == m->rope_theta)
            continue;
        return reason_set(why, n, "%s: rope_parameters.%s is not what trident computes (an "
                          "unscaled rotary embedding, rope_type \"default\", rope_theta = "
                          "[model] rope_theta = %g)", path, key, m->rope_theta);
    }
    if (!json_is_object(rope) || !json_object_get(rope, "rope_theta"))
        return reason_set(why, n, "%s: rope_parameters holds no rope_theta, [model] rope_theta "
                          "= %g", path, m->rope_theta);
    return 0;
}

/* The fields every format shares: the shapes, the norm, the rotary
 * embedding, the activation. */
static int check_common(json_t *root, const char *path, const Config *cfg, HfFormat f,
                        char *why, size_t n)
{
    const ModelConfig *m = &cfg->model;
    TRI_TRY(hf_config_int(root, path, "hidden_size", "n_embd", m->n_embd, why, n));
    TRI_TRY(hf_config_int(root, path, "num_hidden_layers", "n_layer", m->n_layer, why, n));
    TRI_TRY(hf_config_int(root, path, "num_attention_heads", "n_head", m->n_head, why, n));
    TRI_TRY(check_kv_heads(root, path, m, f, why, n));
    TRI_TRY(hf_config_int(root, path, "vocab_size", "vocab_used (or vocab_size)",
                          hf_map_vocab(cfg), why, n));
    TRI_TRY(hf_config_context(root, path, "max_position_embeddings", m->seq_len, why, n));
    json_t *head_dim = json_object_get(root, "head_dim");
    if (head_dim && !json_is_null(head_dim))
        TRI_TRY(hf_config_int(root, path, "head_dim", "n_embd / n_head", m->n_embd / m->n_head,
                              why, n));
    TRI_TRY(hf_config_real(root, path, "rms_norm_eps", FORMATS[f].norm_eps, "[model] norm_eps",
                           m->norm_eps, why, n));
    json_t *rope = json_object_get(root, "rope_parameters");
    if (json_object_get(root, "rope_theta") || !rope || json_is_null(rope))
        TRI_TRY(hf_config_real(root, path, "rope_theta", FORMATS[f].rope_theta,
                               "[model] rope_theta", m->rope_theta, why, n));
    TRI_TRY(check_rope_parameters(root, path, m, why, n));
    TRI_TRY(hf_config_none(root, path, "rope_scaling", "trident's rotary embedding is not "
                           "scaled (rope_scaling must be null)", why, n));
    return hf_config_word(root, path, "hidden_act", SILU, "trident's SwiGLU uses silu", why, n);
}

/* The routed experts' count, k and width. */
static int check_experts(json_t *root, const char *path, const ModelConfig *m, HfFormat f,
                         char *why, size_t n)
{
    int mixtral = f == HF_MIXTRAL;
    TRI_TRY(hf_config_int_or(root, path, mixtral ? "num_local_experts" : "num_experts",
                             mixtral ? 8 : 60, "n_expert", m->n_expert, why, n));
    TRI_TRY(hf_config_int_or(root, path, "num_experts_per_tok", mixtral ? 2 : 4, "top_k",
                             m->top_k, why, n));
    /* Mixtral has no dense layer: its intermediate_size is the experts' */
    const char *width = m->moe_ffn_dim ? "moe_ffn_dim" : "ffn_dim (moe_ffn_dim = 0)";
    if (mixtral)
        return hf_config_int_or(root, path, "intermediate_size", 14336, width,
                                arch_moe_ffn_dim(m), why, n);
    return hf_config_int_or(root, path, "moe_intermediate_size", 1408, width,
                            arch_moe_ffn_dim(m), why, n);
}

/* Qwen2-MoE's router order: norm_topk_prob renormalises the top k. */
static int check_router(json_t *root, const char *path, const ModelConfig *m, char *why,
                        size_t n)
{
    json_t *v = json_object_get(root, "norm_topk_prob");
    int norm = m->moe_router == MOE_ROUTER_SOFTMAX_TOPK_NORM;
    if ((!v && !norm) || (json_is_boolean(v) && json_is_true(v) == norm))
        return 0;
    return reason_set(why, n, "%s: norm_topk_prob is %s, [model] moe_router = %s (set it to %s)",
                      path, !v ? "absent (so false)" : json_is_true(v) ? "true" : "not false",
                      norm ? "softmax_topk_norm" : "softmax_topk",
                      norm ? "softmax_topk" : "softmax_topk_norm");
}

/* Qwen2-MoE's layers: MoE every decoder_sparse_step-th, as trident's
 * moe_every, with no exceptions (mlp_only_layers) and full attention. */
static int check_layers(json_t *root, const char *path, const ModelConfig *m, char *why,
                        size_t n)
{
    TRI_TRY(hf_config_int_or(root, path, "decoder_sparse_step", 1, "moe_every", m->moe_every,
                             why, n));
    json_t *only = json_object_get(root, "mlp_only_layers");
    if (only && !json_is_null(only) && !(json_is_array(only) && !json_array_size(only)))
        return hf_config_none(root, path, "mlp_only_layers", "trident's MoE layers are every "
                              "moe_every-th, with no exception (mlp_only_layers must be empty)",
                              why, n);
    json_t *types = json_object_get(root, "layer_types");
    for (size_t i = 0; json_is_array(types) && i < json_array_size(types); i++) {
        const char *type = json_string_value(json_array_get(types, i));
        if (!type || strcmp(type, "full_attention"))
            return reason_set(why, n, "%s: layer_types[%zu] is not \"full_attention\": "
                              "trident's attention has no sliding window", path, i);
    }
    if (types && !json_is_null(types) && !json_is_array(types))
        return reason_set(why, n, "%s: layer_types is not a list", path);
    return hf_config_bool(root, path, "use_sliding_window", 0,
                          "trident's attention has no sliding window: use_sliding_window", 0,
                          why, n);
}

/* Qwen2-MoE: the shared expert, the dense layers' width where there are
 * dense layers (it is unused where every layer is MoE), q, k, v biases. */
static int check_qwen2_moe(json_t *root, const char *path, const ModelConfig *m, char *why,
                           size_t n)
{
    TRI_TRY(check_router(root, path, m, why, n));
    TRI_TRY(check_layers(root, path, m, why, n));
    TRI_TRY(hf_config_int_or(root, path, "shared_expert_intermediate_size", 5632,
                             "n_shared_expert x the experts' width", arch_shared_ffn_dim(m),
                             why, n));
    if (arch_moe_layer_count(m) < m->n_layer)
        TRI_TRY(hf_config_int_or(root, path, "intermediate_size", 5632, "ffn_dim (the dense "
                                 "layers')", arch_ffn_dim(m), why, n));
    return hf_config_bool(root, path, "qkv_bias", 1, "trident reads Qwen2-MoE's q, k and v "
                          "biases (which must be zero): qkv_bias", 1, why, n);
}

int hf_llama_check(json_t *root, const char *path, const Config *cfg, char *why, size_t n)
{
    const ModelConfig *m = &cfg->model;
    HfFormat f;
    TRI_TRY(format_of(m, &f, why, n));
    TRI_TRY(check_type(root, path, m, f, why, n));
    TRI_TRY(check_common(root, path, cfg, f, why, n));
    if (f == HF_LLAMA) {
        TRI_TRY(hf_config_int(root, path, "intermediate_size", "ffn_dim", arch_ffn_dim(m), why,
                              n));
        TRI_TRY(hf_config_bool(root, path, "attention_bias", 0,
                               "trident's llama always has attention_bias", 0, why, n));
        return hf_config_bool(root, path, "mlp_bias", 0, "trident's llama always has mlp_bias",
                              0, why, n);
    }
    TRI_TRY(check_experts(root, path, m, f, why, n));
    if (f == HF_MIXTRAL)
        return hf_config_none(root, path, "sliding_window", "trident's attention has no "
                              "sliding window (sliding_window must be null)", why, n);
    return check_qwen2_moe(root, path, m, why, n);
}
