/*
 * hf_map.c - trident's tensors in HuggingFace's names and layouts; see
 * hf_map.h.
 *
 * GPT-2's table follows transformers' GPT2LMHeadModel (modeling_gpt2.py):
 * every Linear is a Conv1D whose weight is (in, out), c_attn's columns are
 * [q | k | v], each C wide, and the head is tied to wte (no lm_head tensor)
 * unless tie_word_embeddings is false.
 */
#include "hf_map.h"

#include <stdio.h>
#include <string.h>

#include "arch.h"

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


/* transformers' LlamaForCausalLM (modeling_llama.py): every Linear is
 * (out, in) like trident's, and trident keeps q and k rows in HF's rotary
 * layout (rotate_half) already (checkpoint-format.md), so nothing moves
 * but the vocabulary's padding; k and v have n_kv_head heads; no biases. */
static const HfName LLAMA_NAMES[] = {
    {"wte", "model.embed_tokens.weight", HF_PERM_NONE, 0, 1, 0},
    {"h.%d.ln1.w", "model.layers.%d.input_layernorm.weight", HF_PERM_NONE, 0, 0, 0},
    {"h.%d.attn.q.w", "model.layers.%d.self_attn.q_proj.weight", HF_PERM_NONE, 0, 0, 0},
    {"h.%d.attn.k.w", "model.layers.%d.self_attn.k_proj.weight", HF_PERM_NONE, 0, 0, 0},
    {"h.%d.attn.v.w", "model.layers.%d.self_attn.v_proj.weight", HF_PERM_NONE, 0, 0, 0},
    {"h.%d.attn.o.w", "model.layers.%d.self_attn.o_proj.weight", HF_PERM_NONE, 0, 0, 0},
    {"h.%d.ln2.w", "model.layers.%d.post_attention_layernorm.weight", HF_PERM_NONE, 0, 0, 0},
    {"h.%d.mlp.gate.w", "model.layers.%d.mlp.gate_proj.weight", HF_PERM_NONE, 0, 0, 0},
    {"h.%d.mlp.up.w", "model.layers.%d.mlp.up_proj.weight", HF_PERM_NONE, 0, 0, 0},
    {"h.%d.mlp.down.w", "model.layers.%d.mlp.down_proj.weight", HF_PERM_NONE, 0, 0, 0},
    {"lnf.w", "model.norm.weight", HF_PERM_NONE, 0, 0, 0},
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

/* The entry for trident name, with its twin's name filled in; NULL if
 * none. */
static const HfName *find_entry(const HfName *table, size_t count, const char *name, char *hf,
                                size_t n)
{
    int layer = -1;
    if (sscanf(name, "h.%d.", &layer) != 1)
        layer = -1;
    for (size_t i = 0; i < count; i++) {
        const HfName *e = &table[i];
        char want[96];
        int layered = strstr(e->trident, "%d") != NULL;
        if (layered != (layer >= 0))
            continue;
        /* the format is one of the table's literals above */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
        snprintf(want, sizeof want, e->trident, layer);
        if (!strcmp(want, name)) {
            snprintf(hf, n, e->hf, layer);
#pragma GCC diagnostic pop
            return e;
        }
    }
    return NULL;
}

int hf_map_vocab(const Config *cfg)
{
    return cfg->model.vocab_used ? cfg->model.vocab_used : cfg->model.vocab_size;
}

int hf_map_tensor(const Config *cfg, HfNames names, const Param *lp, HfTensor *out)
{
    memset(out, 0, sizeof *out);
    if (names == HF_NAMES_LLMC)
        out->how = find_entry(LLMC_NAMES, sizeof LLMC_NAMES / sizeof LLMC_NAMES[0], lp->name,
                              out->hf, sizeof out->hf);
    else if (cfg->model.arch == ARCH_LLAMA)
        out->how = find_entry(LLAMA_NAMES, sizeof LLAMA_NAMES / sizeof LLAMA_NAMES[0], lp->name,
                              out->hf, sizeof out->hf);
    else
        out->how = find_entry(GPT2_NAMES, sizeof GPT2_NAMES / sizeof GPT2_NAMES[0], lp->name,
                              out->hf, sizeof out->hf);
    if (!out->how)
        return -1;
    out->rows = out->how->vocab_rows ? hf_map_vocab(cfg) : lp->rows;
    out->cols = lp->cols;
    out->ndim = lp->ndim;
    out->n_head = cfg->model.n_head;
    out->hf_shape[0] = out->how->transpose ? out->cols : out->rows;
    out->hf_shape[1] = out->how->transpose ? out->rows : out->cols;
    return 0;
}

int64_t hf_map_row(const HfTensor *t, int64_t r)
{
    if (t->how->perm == HF_PERM_QKV) {
        /* trident: r = (head * 3 + which) * hs + d; HF: (which * NH + head) * hs + d */
        int64_t hs = t->rows / (3 * (int64_t)t->n_head);
        int64_t d = r % hs, which = (r / hs) % 3, head = r / (3 * hs);
        return (which * t->n_head + head) * hs + d;
    }
    return r;
}

void hf_map_to_hf(const HfTensor *t, const float *in, float *out)
{
    for (int64_t r = 0; r < t->rows; r++) {
        int64_t h = hf_map_row(t, r);
        for (int64_t c = 0; c < t->cols; c++) {
            float v = in[r * t->cols + c];
            if (t->how->transpose)
                out[c * t->rows + h] = v;
            else
                out[h * t->cols + c] = v;
        }
    }
}

static json_t *llama_config_json(const Config *cfg, const char *torch_dtype)
{
    const ModelConfig *m = &cfg->model;
    return json_pack("{s:[s], s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:f, s:f, s:s, "
                     "s:b, s:b, s:f, s:b, s:f, s:n, s:s}",
                     "architectures", "LlamaForCausalLM",
                     "model_type", "llama",
                     "vocab_size", hf_map_vocab(cfg),
                     "hidden_size", m->n_embd,
                     "intermediate_size", arch_ffn_dim(m),
                     "num_hidden_layers", m->n_layer,
                     "num_attention_heads", m->n_head,
                     "num_key_value_heads", arch_kv_heads(m),
                     "head_dim", m->n_embd / m->n_head,
                     "max_position_embeddings", m->seq_len,
                     "rms_norm_eps", m->norm_eps,
                     "rope_theta", m->rope_theta,
                     "hidden_act", "silu",
                     "attention_bias", 0,
                     "mlp_bias", 0,
                     "attention_dropout", 0.0,
                     "tie_word_embeddings", m->tie_embeddings,
                     "initializer_range", m->init_std,
                     "rope_scaling",
                     "torch_dtype", torch_dtype);
}

json_t *hf_map_config_json(const Config *cfg, const char *torch_dtype)
{
    const ModelConfig *m = &cfg->model;
    if (m->arch == ARCH_LLAMA)
        return llama_config_json(cfg, torch_dtype);
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
