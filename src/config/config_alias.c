/*
 * config_alias.c - other trainers' names for trident's keys and sections;
 * see config_alias.h. Data and lookup only: it reads the key table
 * (config_keys.c) and calls nothing else of the config; config_message.c
 * asks it.
 */
#include "config_alias.h"

#include <ctype.h>
#include <string.h>

#include "config_keys.h"

typedef struct {
    const char *name, *section, *key;
} KeyAlias;

/* What a user of nanoGPT, llm.c, Megatron-LM, HF transformers or
 * torchtitan writes, and the key trident means by it. Compared squeezed
 * (below), so "learning-rate" and "learningRate" are "learning_rate". */
static const KeyAlias KEY_ALIASES[] = {
    {"learning_rate", "train", "lr"}, {"max_lr", "train", "lr"}, {"peak_lr", "train", "lr"},
    {"min_learning_rate", "train", "min_lr"}, {"final_lr", "train", "min_lr"},
    {"batch_size", "train", "micro_batch"}, {"micro_batch_size", "train", "micro_batch"},
    {"per_device_train_batch_size", "train", "micro_batch"},
    {"gradient_accumulation_steps", "train", "grad_accum"},
    {"grad_accum_steps", "train", "grad_accum"},
    {"max_steps", "train", "steps"}, {"max_iters", "train", "steps"},
    {"train_iters", "train", "steps"}, {"num_steps", "train", "steps"},
    {"total_steps", "train", "steps"}, {"iterations", "train", "steps"},
    {"warmup_steps", "train", "warmup"}, {"warmup_iters", "train", "warmup"},
    {"lr_warmup_iters", "train", "warmup"}, {"lr_warmup_steps", "train", "warmup"},
    {"wd", "train", "weight_decay"}, {"adam_weight_decay", "train", "weight_decay"},
    {"grad_clip", "train", "clip_norm"}, {"max_grad_norm", "train", "clip_norm"},
    {"clip_grad", "train", "clip_norm"}, {"clip_grad_norm", "train", "clip_norm"},
    {"gradient_clipping", "train", "clip_norm"}, {"grad_norm_clip", "train", "clip_norm"},
    {"adam_beta1", "train", "beta1"}, {"adam_beta2", "train", "beta2"},
    {"adam_eps", "train", "eps"}, {"adam_epsilon", "train", "eps"},
    {"dtype", "train", "precision"}, {"mixed_precision", "train", "precision"},
    {"activation_checkpointing", "train", "recompute"},
    {"gradient_checkpointing", "train", "recompute"},
    {"n_layers", "model", "n_layer"}, {"num_layers", "model", "n_layer"},
    {"num_hidden_layers", "model", "n_layer"},
    {"hidden_size", "model", "n_embd"}, {"d_model", "model", "n_embd"}, {"dim", "model", "n_embd"},
    {"n_heads", "model", "n_head"}, {"num_heads", "model", "n_head"},
    {"num_attention_heads", "model", "n_head"},
    {"n_kv_heads", "model", "n_kv_head"}, {"num_key_value_heads", "model", "n_kv_head"},
    {"intermediate_size", "model", "ffn_dim"}, {"ffn_hidden_size", "model", "ffn_dim"},
    {"block_size", "model", "seq_len"}, {"seq_length", "model", "seq_len"},
    {"max_seq_len", "model", "seq_len"}, {"context_length", "model", "seq_len"},
    {"n_ctx", "model", "seq_len"}, {"max_position_embeddings", "model", "seq_len"},
    {"rms_norm_eps", "model", "norm_eps"}, {"layer_norm_epsilon", "model", "norm_eps"},
    {"tie_word_embeddings", "model", "tie_embeddings"},
    /* mixture of experts: Mixtral's and Qwen2-MoE's config.json, Megatron-LM */
    {"num_local_experts", "model", "n_expert"}, {"num_experts", "model", "n_expert"},
    {"num_experts_per_tok", "model", "top_k"}, {"moe_router_topk", "model", "top_k"},
    {"moe_intermediate_size", "model", "moe_ffn_dim"},
    {"moe_ffn_hidden_size", "model", "moe_ffn_dim"},
    {"decoder_sparse_step", "model", "moe_every"},
    {"router_aux_loss_coef", "model", "moe_aux_loss"},
    {"moe_aux_loss_coeff", "model", "moe_aux_loss"},
    {"router_z_loss_coef", "model", "moe_z_loss"}, {"moe_z_loss_coeff", "model", "moe_z_loss"},
    {"capacity_factor", "model", "moe_capacity"},
    {"moe_expert_capacity_factor", "model", "moe_capacity"},
    {"tensor_model_parallel_size", "parallel", "tp"},
    {"pipeline_model_parallel_size", "parallel", "pp"},
    {"data_parallel_size", "parallel", "dp"},
    {"expert_model_parallel_size", "parallel", "ep"},
    {"eval_interval", "eval", "every"}, {"eval_iters", "eval", "batches"},
    {"log_interval", "log", "every"},
    {"save_interval", "checkpoint", "every"}, {"checkpoint_interval", "checkpoint", "every"},
    {"out_dir", "checkpoint", "dir"}, {"output_dir", "checkpoint", "dir"},
    {"save_dir", "checkpoint", "dir"},
    {"data_path", "data", "train"}, {"train_data", "data", "train"},
    {"val_data", "data", "val"},
};

typedef struct {
    const char *name, *section;
} SectionAlias;

static const SectionAlias SECTION_ALIASES[] = {
    {"training", "train"}, {"trainer", "train"}, {"optimizer", "train"}, {"optim", "train"},
    {"optimization", "train"}, {"scheduler", "train"}, {"lr_scheduler", "train"},
    {"architecture", "model"}, {"transformer", "model"}, {"network", "model"},
    {"parallelism", "parallel"}, {"distributed", "parallel"},
    {"dataset", "data"}, {"datasets", "data"},
    {"checkpointing", "checkpoint"}, {"checkpoints", "checkpoint"}, {"ckpt", "checkpoint"},
    {"evaluation", "eval"}, {"validation", "eval"},
    {"logging", "log"}, {"metrics", "log"},
};

/* name lower-cased, without '_', '-', '.' or blanks; "" past 63 characters. */
static void squeeze(const char *name, char *out)
{
    size_t n = 0;
    for (; *name && n < 63; name++)
        if (!strchr("_-. ", *name))
            out[n++] = (char)tolower((unsigned char)*name);
    out[*name ? 0 : n] = '\0';
}

static int same_squeezed(const char *a, const char *b)
{
    char sa[64], sb[64];
    squeeze(a, sa);
    squeeze(b, sb);
    return sa[0] && !strcmp(sa, sb);
}

const KeyDef *config_alias_key(const char *name, const char *section)
{
    for (size_t i = 0; i < sizeof KEY_ALIASES / sizeof KEY_ALIASES[0]; i++)
        if (same_squeezed(name, KEY_ALIASES[i].name))
            return config_key_find(KEY_ALIASES[i].section, KEY_ALIASES[i].key);
    /* trident's own name, spelt another way: the section's key first */
    const KeyDef *found = NULL;
    for (int i = 0; i < config_key_count(); i++) {
        const KeyDef *k = &config_keys[i];
        if (same_squeezed(name, k->name) && (!found || (section && !strcmp(k->section, section))))
            found = k;
    }
    return found;
}

const char *config_alias_section(const char *name)
{
    for (size_t i = 0; i < sizeof SECTION_ALIASES / sizeof SECTION_ALIASES[0]; i++)
        if (same_squeezed(name, SECTION_ALIASES[i].name))
            return SECTION_ALIASES[i].section;
    return NULL;
}
