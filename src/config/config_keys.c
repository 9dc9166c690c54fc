/*
 * config_keys.c - the key table: one row per key, naming its section, its
 * name, its type, where it lives in Config, its default, its range or its
 * words. Defaults (config_load.c), parsing and checking (config_value.c),
 * messages (config_message.c) and printing (config_to_ini) all walk this
 * table, so a key is added in one row and can never be parsed but left
 * out of the config text a checkpoint stores. The table is data and
 * lookup only: it calls no other config file, so it sits at the bottom of
 * their call graph.
 */
#include "config_keys.h"

#include <limits.h>
#include <math.h>
#include <string.h>

/* K_ENUM fields are written through an int lvalue. */
_Static_assert(sizeof(InitScheme) == sizeof(int), "enum is not int-sized");
_Static_assert(sizeof(FanMode) == sizeof(int), "enum is not int-sized");
_Static_assert(sizeof(ScheduleKind) == sizeof(int), "enum is not int-sized");
_Static_assert(sizeof(DeviceChoice) == sizeof(int), "enum is not int-sized");
_Static_assert(sizeof(DataFormat) == sizeof(int), "enum is not int-sized");
_Static_assert(sizeof(Precision) == sizeof(int), "enum is not int-sized");
_Static_assert(sizeof(ModelArch) == sizeof(int), "enum is not int-sized");

/* Word lists are in enum order: the index is the enum value. An empty
 * word holds a value that no word names (yet): ScheduleKind keeps 2 for
 * the interleaved schedule. */
static const char *const INIT_WORDS[] = {
    "gpt2", "normal", "he_normal", "he_uniform", "xavier_normal",
    "xavier_uniform", "zeros", NULL
};
static const char *const FAN_WORDS[] = { "fan_in", "fan_out", NULL };
static const char *const SCHEDULE_WORDS[] = { "1f1b", "gpipe", "interleaved", "zb1", NULL };
static const char *const DEVICE_WORDS[] = { "auto", "cpu", "cuda", NULL };
static const char *const PRECISION_WORDS[] = { "fp32", "bf16", "fp16", NULL };
static const char *const OFFLOAD_WORDS[] = { "none", "optimizer", NULL };
static const char *const FORMAT_WORDS[] = { "text", "tokens", "indexed", NULL };
static const char *const ARCH_WORDS[] = { "gpt2", "llama", NULL };
static const char *const MOE_ROUTER_WORDS[] = { "softmax_topk_norm", "softmax_topk", NULL };

#define KEY(s, n, t, f, d) \
    .section = (s), .name = (n), .type = (t), .offset = offsetof(Config, f), \
    .size = sizeof(((Config *)0)->f), .def = (d)
#define INT_KEY(s, n, f, d, lo, hi) { KEY(s, n, K_INT, f, d), .min = (lo), .max = (hi) }
#define REAL_KEY(s, n, f, d, lo, hi, fl) \
    { KEY(s, n, K_REAL, f, d), .min = (lo), .max = (hi), .flags = (fl) }
#define ENUM_KEY(s, n, f, d, w) { KEY(s, n, K_ENUM, f, d), .words = (w) }
#define PATH_KEY(s, n, f, d, fl) { KEY(s, n, K_PATH, f, d), .flags = (fl) }

/* The order of jobs/configs/tiny.ini and README's table; config_to_ini
 * prints in this order. The defaults are a tiny byte-level model that
 * runs anywhere. */
const KeyDef config_keys[] = {
    INT_KEY("model", "n_layer", model.n_layer, "4", 1, INT_MAX),
    INT_KEY("model", "n_embd", model.n_embd, "128", 1, INT_MAX),
    INT_KEY("model", "n_head", model.n_head, "4", 1, INT_MAX),
    INT_KEY("model", "seq_len", model.seq_len, "128", 1, INT_MAX),
    INT_KEY("model", "vocab_size", model.vocab_size, "256", 1, INT_MAX),
    { KEY("model", "vocab_used", K_INT, model.vocab_used, "0"), .min = 0, .max = INT_MAX,
      .flags = OMIT_UNSET },
    ENUM_KEY("model", "init", model.init, "gpt2", INIT_WORDS),
    REAL_KEY("model", "init_std", model.init_std, "0.02", 0, INFINITY, OPEN_MIN),
    ENUM_KEY("model", "init_fan", model.init_fan, "fan_in", FAN_WORDS),
    { KEY("model", "tie_embeddings", K_BOOL, model.tie_embeddings, "auto"), .flags = AUTO_BOOL,
      .auto_is = "tied for gpt2, untied for llama" },
    { KEY("model", "arch", K_ENUM, model.arch, "gpt2"), .words = ARCH_WORDS, .flags = ARCH_KEY },
    { KEY("model", "n_kv_head", K_INT, model.n_kv_head, "0"), .min = 0, .max = INT_MAX,
      .flags = ARCH_KEY },
    { KEY("model", "ffn_dim", K_INT, model.ffn_dim, "0"), .min = 0, .max = INT_MAX,
      .flags = ARCH_KEY },
    REAL_KEY("model", "norm_eps", model.norm_eps, "1e-5", 0, 1, OPEN_MIN | ARCH_KEY),
    REAL_KEY("model", "rope_theta", model.rope_theta, "10000", 1, INFINITY, OPEN_MIN | ARCH_KEY),
    /* mixture of experts: left out of the stored config while at their
     * defaults, so a dense model's config reads as before they came */
    { KEY("model", "n_expert", K_INT, model.n_expert, "0"), .min = 0, .max = 65536,
      .flags = OMIT_UNSET },
    { KEY("model", "top_k", K_INT, model.top_k, "2"), .min = 1, .max = 65536,
      .flags = OMIT_UNSET },
    { KEY("model", "moe_ffn_dim", K_INT, model.moe_ffn_dim, "0"), .min = 0, .max = INT_MAX,
      .flags = OMIT_UNSET },
    { KEY("model", "n_shared_expert", K_INT, model.n_shared_expert, "0"), .min = 0,
      .max = 65536, .flags = OMIT_UNSET },
    { KEY("model", "moe_every", K_INT, model.moe_every, "1"), .min = 1, .max = INT_MAX,
      .flags = OMIT_UNSET },
    { KEY("model", "moe_router", K_ENUM, model.moe_router, "softmax_topk_norm"),
      .words = MOE_ROUTER_WORDS, .flags = OMIT_UNSET },
    REAL_KEY("model", "moe_aux_loss", model.moe_aux_loss, "0.01", 0, INFINITY, OMIT_UNSET),
    REAL_KEY("model", "moe_z_loss", model.moe_z_loss, "0", 0, INFINITY, OMIT_UNSET),
    REAL_KEY("model", "moe_capacity", model.moe_capacity, "0", 0, INFINITY, OMIT_UNSET),

    INT_KEY("parallel", "dp", parallel.dp, "0", 0, INT_MAX),
    INT_KEY("parallel", "pp", parallel.pp, "1", 1, INT_MAX),
    INT_KEY("parallel", "tp", parallel.tp, "1", 1, INT_MAX),
    /* left out of the stored config while 1: a checkpoint of a run
     * without context parallelism reads as it did before the key came */
    { KEY("parallel", "cp", K_INT, parallel.cp, "1"), .min = 1, .max = INT_MAX,
      .flags = OMIT_UNSET },
    { KEY("parallel", "ep", K_INT, parallel.ep, "1"), .min = 1, .max = INT_MAX,
      .flags = OMIT_UNSET },
    ENUM_KEY("parallel", "schedule", parallel.schedule, "1f1b", SCHEDULE_WORDS),
    INT_KEY("parallel", "virtual_stages", parallel.virtual_stages, "1", 1, INT_MAX),
    INT_KEY("parallel", "zero", parallel.zero, "1", 0, 3),
    INT_KEY("parallel", "node_size", parallel.node_size, "0", 0, INT_MAX),
    ENUM_KEY("parallel", "device", parallel.device, "auto", DEVICE_WORDS),
    { KEY("parallel", "overlap", K_BOOL, parallel.overlap, "true") },
    { KEY("parallel", "sequence_parallel", K_BOOL, parallel.sequence_parallel, "false") },

    INT_KEY("train", "micro_batch", train.micro_batch, "8", 1, INT_MAX),
    INT_KEY("train", "grad_accum", train.grad_accum, "1", 1, INT_MAX),
    INT_KEY("train", "steps", train.steps, "1000", 0, INT_MAX),
    REAL_KEY("train", "lr", train.lr, "1e-3", 0, INFINITY, 0),
    REAL_KEY("train", "min_lr", train.min_lr, "1e-4", 0, INFINITY, 0),
    INT_KEY("train", "warmup", train.warmup, "100", 0, INT_MAX),
    { KEY("train", "decay_steps", K_INT, train.decay_steps, "0"), .min = 0, .max = INT_MAX,
      .flags = OMIT_UNSET },
    REAL_KEY("train", "weight_decay", train.weight_decay, "0.1", 0, INFINITY, 0),
    REAL_KEY("train", "beta1", train.beta1, "0.9", 0, 1, OPEN_MAX),
    REAL_KEY("train", "beta2", train.beta2, "0.95", 0, 1, OPEN_MAX),
    REAL_KEY("train", "eps", train.eps, "1e-8", 0, INFINITY, OPEN_MIN),
    REAL_KEY("train", "clip_norm", train.clip_norm, "1.0", 0, INFINITY, 0),
    REAL_KEY("train", "clip_value", train.clip_value, "0", 0, INFINITY, 0),
    ENUM_KEY("train", "precision", train.precision, "fp32", PRECISION_WORDS),
    /* also sets train.recompute_every: see config_value.c, parse_recompute */
    { KEY("train", "recompute", K_RECOMPUTE, train.recompute, "none") },
    ENUM_KEY("train", "offload", train.offload, "none", OFFLOAD_WORDS),
    { KEY("train", "seed", K_SEED, train.seed, "1337") },
    INT_KEY("train", "loss_scale_window", train.loss_scale_window, "2000", 1, INT_MAX),
    INT_KEY("train", "loss_scale_hysteresis", train.loss_scale_hysteresis, "2", 1, INT_MAX),
    REAL_KEY("train", "loss_scale_min", train.loss_scale_min, "1", 0, INFINITY, OPEN_MIN),

    PATH_KEY("data", "train", data.train, "", 0),
    PATH_KEY("data", "val", data.val, "", 0),
    REAL_KEY("data", "val_fraction", data.val_fraction, "0.1", 0, 1, OPEN_MIN | OPEN_MAX),
    ENUM_KEY("data", "format", data.format, "text", FORMAT_WORDS),
    PATH_KEY("data", "tokenizer", data.tokenizer, "", OMIT_UNSET),

    PATH_KEY("checkpoint", "dir", checkpoint.dir, "", 0),
    INT_KEY("checkpoint", "every", checkpoint.every, "0", 0, INT_MAX),
    INT_KEY("checkpoint", "keep", checkpoint.keep, "3", 1, INT_MAX),
    PATH_KEY("checkpoint", "resume", checkpoint.resume, "auto", NONEMPTY),
    { KEY("checkpoint", "async", K_BOOL, checkpoint.async, "false") },
    PATH_KEY("checkpoint", "init_from", checkpoint.init_from, "", OMIT_UNSET),

    /* validation by default, as tiny.ini: it also runs at the last step,
     * and costs `batches` forward passes per 100 steps (about 1%) */
    INT_KEY("eval", "every", eval.every, "100", 0, INT_MAX),
    INT_KEY("eval", "batches", eval.batches, "4", 1, INT_MAX),
    INT_KEY("eval", "patience", eval.patience, "0", 0, INT_MAX),
    REAL_KEY("eval", "min_delta", eval.min_delta, "0", 0, INFINITY, 0),

    INT_KEY("log", "every", log.every, "1", 1, INT_MAX),
    /* auto: a run's files together in its checkpoint dir; "" (set empty)
     * turns the file off */
    { KEY("log", "metrics", K_PATH, log.metrics, "auto"),
      .auto_is = "`metrics.jsonl` in `[checkpoint] dir`; none without a dir" },
    /* auto: a sample unless the layout cannot generate, so that the
     * default never makes a valid config fail (layout_sample_fits) */
    { KEY("log", "sample_tokens", K_INT, log.sample_tokens, "auto"), .min = 0, .max = INT_MAX,
      .flags = AUTO_INT,
      .auto_is = "200, or none (with a note) where cp > 1 or sequence_parallel cannot "
                 "generate" },
    { KEY("log", "profile", K_BOOL, log.profile, "false") },

    REAL_KEY("fault", "timeout", fault.timeout, "600", 0, 604800, 0),
};
#define N_KEYS (sizeof config_keys / sizeof config_keys[0])

int config_key_count(void)
{
    return (int)N_KEYS;
}

const KeyDef *config_key_find(const char *section, const char *name)
{
    for (size_t i = 0; i < N_KEYS; i++)
        if (!strcmp(config_keys[i].section, section) && !strcmp(config_keys[i].name, name))
            return &config_keys[i];
    return NULL;
}

int config_key_index(const char *section, const char *key)
{
    const KeyDef *k = config_key_find(section, key);
    return k ? (int)(k - config_keys) : -1;
}

int config_section_known(const char *section)
{
    for (size_t i = 0; i < N_KEYS; i++)
        if (!strcmp(config_keys[i].section, section))
            return 1;
    return 0;
}
