/*
 * t_hf_moe.c - the HuggingFace formats of a mixture-of-experts llama
 * (doc/interop.md), without a model: which format a [model] is, each
 * tensor's HF name and shape (the layer and the expert in the name),
 * Qwen2-MoE's zero q, k, v biases, config.json written then checked
 * back, every MoE field of it refused by name when it differs from
 * [model], and the models neither format expresses refused naming
 * n_shared_expert. tests/t_interop.sh exports and reads real models.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "arch.h"
#include "config.h"
#include "config_load.h"
#include "hf_map.h"
#include "tap.h"

/* A small llama: 4 layers of n_embd 32, 4 heads (2 key/value heads). */
static void llama(Config *c)
{
    config_defaults(c);
    c->model.arch = ARCH_LLAMA;
    c->model.n_layer = 4;
    c->model.n_embd = 32;
    c->model.n_head = 4;
    c->model.n_kv_head = 2;
    c->model.ffn_dim = 64;
    c->model.seq_len = 16;
    c->model.vocab_size = 256;
    c->model.tie_embeddings = 0;
}

/* Mixtral's: 4 experts, top 2, 48 wide, every layer MoE. */
static void mixtral(Config *c)
{
    llama(c);
    c->model.n_expert = 4;
    c->model.top_k = 2;
    c->model.moe_ffn_dim = 48;
}

/* Qwen2-MoE's: a shared expert, every second layer MoE, the top-k as
 * they are. */
static void qwen2_moe(Config *c)
{
    mixtral(c);
    c->model.n_shared_expert = 1;
    c->model.moe_every = 2;
    c->model.moe_router = MOE_ROUTER_SOFTMAX_TOPK;
}

static Param param(const char *name, int64_t rows, int64_t cols)
{
    Param p = {0};
    snprintf(p.name, sizeof p.name, "%s", name);
    p.rows = rows;
    p.cols = cols;
    p.ndim = cols > 1 ? 2 : 1;
    return p;
}

/* name maps to hf of shape (r, c). */
static int maps(const Config *c, const char *name, int64_t rows, int64_t cols, const char *hf)
{
    Param p = param(name, rows, cols);
    HfTensor t;
    if (hf_map_tensor(c, HF_NAMES_HF, &p, &t)) {
        tap_diag("%s: no HF name", name);
        return 0;
    }
    if (strcmp(t.hf, hf) || t.hf_shape[0] != rows || t.hf_shape[1] != cols) {
        tap_diag("%s -> %s [%lld, %lld], want %s", name, t.hf, (long long)t.hf_shape[0],
                 (long long)t.hf_shape[1], hf);
        return 0;
    }
    return 1;
}

static int unmapped(const Config *c, const char *name)
{
    Param p = param(name, 8, 8);
    HfTensor t;
    return hf_map_tensor(c, HF_NAMES_HF, &p, &t) != 0;
}

/* The zero bias of name is hf (NULL: none), of `rows` values. */
static int bias_of(const Config *c, const char *name, int64_t rows, const char *hf)
{
    Param p = param(name, rows, 32);
    HfTensor t;
    int none = hf_map_zero_bias(c, &p, &t) != 0;
    if (!hf)
        return none;
    return !none && !strcmp(t.hf, hf) && t.ndim == 1 && t.hf_shape[0] == rows;
}

/* c's config.json, edited by `edit` (a JSON object merged in, a null
 * removing its key; NULL: none; "-KEY" removes KEY), checked against c: 0
 * and why = "" if accepted. */
static int check(const Config *c, const char *edit, char *why, size_t n)
{
    why[0] = '\0';
    json_t *root = hf_map_config_json(c, "float32", why, n);
    if (!root)
        return -1;
    if (edit && edit[0] == '-') {
        json_object_del(root, edit + 1);
    } else if (edit) {
        json_t *more = json_loads(edit, 0, NULL), *v;
        const char *key;
        json_object_update(root, more);
        json_object_foreach(more, key, v)
            if (json_is_null(v))
                json_object_del(root, key);
        json_decref(more);
    }
    int rc = arch_of(&c->model)->hf_check(root, "d/config.json", c, why, n);
    json_decref(root);
    return rc;
}

/* The edit is refused with a reason containing want. */
static int refused(const Config *c, const char *edit, const char *want)
{
    char why[1024];
    int rc = check(c, edit, why, sizeof why);
    if (rc == 1 && strstr(why, want))
        return 1;
    tap_diag("%s: rc %d, \"%s\"; want \"%s\"", edit ? edit : "(none)", rc, why, want);
    return 0;
}

static const char *field(json_t *root, const char *key)
{
    json_t *v = json_object_get(root, key);
    if (json_is_array(v))
        v = json_array_get(v, 0);
    return json_string_value(v);
}

static void names(void)
{
    Config c;
    mixtral(&c);
    tap_ok(maps(&c, "h.3.moe.router.w", 4, 32, "model.layers.3.block_sparse_moe.gate.weight")
           && maps(&c, "h.1.moe.e.3.gate.w", 48, 32,
                   "model.layers.1.block_sparse_moe.experts.3.w1.weight")
           && maps(&c, "h.1.moe.e.3.up.w", 48, 32,
                   "model.layers.1.block_sparse_moe.experts.3.w3.weight")
           && maps(&c, "h.12.moe.e.10.down.w", 32, 48,
                   "model.layers.12.block_sparse_moe.experts.10.w2.weight")
           && maps(&c, "h.0.attn.k.w", 16, 32, "model.layers.0.self_attn.k_proj.weight")
           && maps(&c, "lm_head", 256, 32, "lm_head.weight"),
           "Mixtral: the router, each expert's w1 (gate), w3 (up), w2 (down) by layer and "
           "expert, the attention and head as LlamaForCausalLM's");
    tap_ok(unmapped(&c, "h.0.mlp.gate.w") && unmapped(&c, "h.0.moe.shared.gate.w")
           && unmapped(&c, "h.0.moe.e.gate.w") && bias_of(&c, "h.0.attn.q.w", 32, NULL),
           "Mixtral: no dense MLP, no shared expert, no expert index: no name; no q bias");

    qwen2_moe(&c);
    tap_ok(maps(&c, "h.1.moe.router.w", 4, 32, "model.layers.1.mlp.gate.weight")
           && maps(&c, "h.1.moe.e.2.gate.w", 48, 32,
                   "model.layers.1.mlp.experts.2.gate_proj.weight")
           && maps(&c, "h.1.moe.e.2.up.w", 48, 32, "model.layers.1.mlp.experts.2.up_proj.weight")
           && maps(&c, "h.1.moe.e.2.down.w", 32, 48,
                   "model.layers.1.mlp.experts.2.down_proj.weight")
           && maps(&c, "h.1.moe.shared.gate.w", 48, 32,
                   "model.layers.1.mlp.shared_expert.gate_proj.weight")
           && maps(&c, "h.1.moe.shared.down.w", 32, 48,
                   "model.layers.1.mlp.shared_expert.down_proj.weight")
           && maps(&c, "h.1.moe.shared_gate.w", 1, 32,
                   "model.layers.1.mlp.shared_expert_gate.weight")
           && maps(&c, "h.0.mlp.gate.w", 64, 32, "model.layers.0.mlp.gate_proj.weight"),
           "Qwen2-MoE: the router, the experts' and the shared expert's gate/up/down_proj, "
           "the shared expert's gate, a dense layer's MLP");
    tap_ok(bias_of(&c, "h.2.attn.q.w", 32, "model.layers.2.self_attn.q_proj.bias")
           && bias_of(&c, "h.2.attn.k.w", 16, "model.layers.2.self_attn.k_proj.bias")
           && bias_of(&c, "h.2.attn.v.w", 16, "model.layers.2.self_attn.v_proj.bias")
           && bias_of(&c, "h.2.attn.o.w", 32, NULL) && bias_of(&c, "h.2.moe.router.w", 4, NULL),
           "Qwen2-MoE: q, k and v have a zero bias of their rows; o and the rest none");
}

static void config_json(void)
{
    Config c;
    char why[1024];
    mixtral(&c);
    json_t *root = hf_map_config_json(&c, "float32", why, sizeof why);
    tap_ok(root && !strcmp(field(root, "architectures"), "MixtralForCausalLM")
           && json_integer_value(json_object_get(root, "num_local_experts")) == 4
           && json_integer_value(json_object_get(root, "intermediate_size")) == 48
           && json_real_value(json_object_get(root, "router_aux_loss_coef"))
                  == c.model.moe_aux_loss / c.model.top_k
           && check(&c, NULL, why, sizeof why) == 0,
           "Mixtral's config.json (MixtralForCausalLM, intermediate_size the experts' 48, "
           "router_aux_loss_coef moe_aux_loss / top_k: its loss is top_k times trident's aux) "
           "checks back against [model]");
    if (why[0])
        tap_diag("%s", why);
    json_decref(root);
    qwen2_moe(&c);
    root = hf_map_config_json(&c, "float32", why, sizeof why);
    tap_ok(root && !strcmp(field(root, "architectures"), "Qwen2MoeForCausalLM")
           && json_integer_value(json_object_get(root, "shared_expert_intermediate_size")) == 48
           && json_integer_value(json_object_get(root, "decoder_sparse_step")) == 2
           && json_is_false(json_object_get(root, "norm_topk_prob"))
           && check(&c, NULL, why, sizeof why) == 0,
           "Qwen2-MoE's config.json (Qwen2MoeForCausalLM, decoder_sparse_step 2, "
           "norm_topk_prob false) checks back against [model]");
    if (why[0])
        tap_diag("%s", why);
    json_decref(root);
    c.model.moe_every = 1;
    c.model.moe_router = MOE_ROUTER_SOFTMAX_TOPK_NORM;
    tap_ok(check(&c, NULL, why, sizeof why) == 0 && refused(&c, "-norm_topk_prob",
           "norm_topk_prob is absent (so false), [model] moe_router = softmax_topk_norm"),
           "a shared expert on every layer with Mixtral's router is Qwen2-MoE's with "
           "norm_topk_prob = true (absent: false, refused)");
}

static void inexpressible(void)
{
    Config c;
    char why[1024];
    mixtral(&c);
    c.model.moe_every = 2;
    tap_ok(check(&c, NULL, why, sizeof why) == -1
           && strstr(why, "[model] n_shared_expert = 0 with moe_every > 1")
           && strstr(why, "always has a shared expert"),
           "dense layers without a shared expert: no format, refused naming n_shared_expert");
    mixtral(&c);
    c.model.moe_router = MOE_ROUTER_SOFTMAX_TOPK;
    HfTable tables[HF_TABLES_MAX];
    json_t *empty = json_object();
    tap_ok(check(&c, NULL, why, sizeof why) == -1
           && strstr(why, "n_shared_expert = 0 with moe_router = softmax_topk")
           && arch_of(&c.model)->hf_tables(&c.model, tables) == 0
           && arch_of(&c.model)->hf_check(empty, "d/config.json", &c, why, sizeof why)
           && strstr(why, "n_shared_expert = 0"),
           "the top-k not renormalised without a shared expert: refused by export and by "
           "init_from alike");
    json_decref(empty);
}

static void refusals(void)
{
    Config c;
    mixtral(&c);
    tap_ok(refused(&c, "{\"model_type\": \"qwen2_moe\"}", "model_type is qwen2_moe, [model] is "
                   "Mixtral's (\"mixtral\": n_expert = 4, n_shared_expert = 0")
           && refused(&c, "{\"num_local_experts\": 8}", "num_local_experts = 8, [model] n_expert = 4")
           && refused(&c, "-num_local_experts", "no num_local_experts, so transformers' default 8, "
                      "[model] n_expert = 4")
           && refused(&c, "{\"num_experts_per_tok\": 1}", "num_experts_per_tok = 1, [model] top_k = 2")
           && refused(&c, "{\"intermediate_size\": 64}",
                      "intermediate_size = 64, [model] moe_ffn_dim = 48")
           && refused(&c, "{\"sliding_window\": 4096}", "sliding_window = 4096")
           && refused(&c, "-rope_theta", "no rope_theta, so transformers' default 1e+06")
           && refused(&c, "-num_key_value_heads", "num_key_value_heads is absent (so 8), "
                      "[model] n_kv_head = 2")
           && refused(&c, "{\"rope_parameters\": {\"rope_type\": \"default\", "
                      "\"rope_theta\": 500000.0}}", "rope_parameters.rope_theta is not what "
                      "trident computes")
           && refused(&c, "{\"rope_parameters\": {\"rope_type\": \"yarn\", "
                      "\"rope_theta\": 10000.0, \"factor\": 4.0}}",
                      "rope_parameters.rope_type is not what trident computes"),
           "Mixtral's config.json: model_type, num_local_experts (and its default), "
           "num_experts_per_tok, intermediate_size, sliding_window, rope_theta's and "
           "num_key_value_heads' defaults, transformers 5's rope_parameters: each refused by "
           "name");
    char why[1024];
    tap_ok(check(&c, "-rope_theta", why, sizeof why) == 1
           && check(&c, "{\"rope_theta\": null, \"rope_parameters\": {\"rope_type\": "
                    "\"default\", \"rope_theta\": 10000.0}}", why, sizeof why) == 0
           && refused(&c, "{\"rope_theta\": null, \"rope_parameters\": {\"rope_type\": "
                      "\"default\"}}", "rope_parameters holds no rope_theta"),
           "transformers 5's rope_parameters with [model] rope_theta stands for rope_theta "
           "(without it, Mixtral's default 1e6 would be taken)");
    qwen2_moe(&c);
    tap_ok(refused(&c, "{\"model_type\": \"mixtral\"}", "model_type is mixtral, [model] is "
                   "Qwen2-MoE's")
           && refused(&c, "{\"num_experts\": 60}", "num_experts = 60, [model] n_expert = 4")
           && refused(&c, "{\"moe_intermediate_size\": 8}", "moe_intermediate_size = 8")
           && refused(&c, "{\"shared_expert_intermediate_size\": 96}",
                      "shared_expert_intermediate_size = 96, [model] n_shared_expert x the "
                      "experts' width = 48")
           && refused(&c, "{\"decoder_sparse_step\": 1}", "decoder_sparse_step = 1, [model] "
                      "moe_every = 2")
           && refused(&c, "{\"norm_topk_prob\": true}", "norm_topk_prob is true, [model] "
                      "moe_router = softmax_topk (set it to softmax_topk_norm)")
           && refused(&c, "{\"intermediate_size\": 48}", "intermediate_size = 48, [model] "
                      "ffn_dim (the dense layers') = 64")
           && refused(&c, "{\"mlp_only_layers\": [1]}", "mlp_only_layers = [1]")
           && refused(&c, "{\"use_sliding_window\": true}", "use_sliding_window = true")
           && refused(&c, "{\"layer_types\": [\"full_attention\", \"sliding_attention\"]}",
                      "layer_types[1] is not \"full_attention\"")
           && refused(&c, "{\"qkv_bias\": false}", "qkv_bias = false"),
           "Qwen2-MoE's config.json: model_type, num_experts, moe_intermediate_size, "
           "shared_expert_intermediate_size, decoder_sparse_step, norm_topk_prob, the dense "
           "intermediate_size, mlp_only_layers, sliding windows, qkv_bias: each refused by name");
}

int main(int argc, char **argv)
{
    tap_init(&argc, &argv);
    tap_plan(12);
    names();
    config_json();
    inexpressible();
    refusals();
    return tap_done();
}
