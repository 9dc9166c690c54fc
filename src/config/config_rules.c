/*
 * config_rules.c - the rules between keys: what no single row of the key
 * table can check. Checks that need the data files are data_open's, and
 * those that need the world size are layout_check's. Each failed rule names
 * the key the user should change, with its value (fail_key).
 *
 * The rules about the model architecture (which keys gpt2 refuses, what
 * llama's grouped-query attention and rotary embeddings need) are the
 * architecture's descriptor's (arch.h: check_keys), and the layout's (a
 * stage holds a layer, tp divides the heads, the interleaved schedule,
 * sequence parallelism's slices) are layout.c's, the rule book of layouts;
 * this file words them.
 */
#include "config_rules.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "arch.h"
#include "config_keys.h"
#include "config_message.h"
#include "config_value.h"
#include "layout.h"

static int fail_key(const Config *cfg, char *msg, size_t n, const char *section,
                    const char *key, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* A cross-key rule failed: name the key the user should change. */
static int fail_key(const Config *cfg, char *msg, size_t n, const char *section,
                    const char *key, const char *fmt, ...)
{
    char value[CONFIG_VALUE_MAX], why[CONFIG_MSG_MAX];
    va_list ap;
    config_value_format(config_key_find(section, key), cfg, value, sizeof value);
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    config_describe(msg, n, section, key, value, why);
    return 1;
}

/* A rule that its owner checks and this file words: the architecture's
 * (its descriptor's check_keys: which keys it refuses, what its attention
 * needs of the heads and of tp) or the layout's (layout.c, the rule book
 * of layouts). */
static int worded(const Config *c, char *msg, size_t n,
                  int (*check)(const Config *, ConfigKeyProblem *))
{
    ConfigKeyProblem p;
    if (!check(c, &p))
        return 0;
    return fail_key(c, msg, n, p.section, p.key, "%s", p.why);
}

/* The keys of a mixture of experts mean nothing to a dense model: one set
 * while n_expert = 0 is refused rather than silently trained without (the
 * key table's default is what config_to_ini leaves out, so a default
 * passes, whatever the file spells it as). ep is the layout's (layout.c). */
static int moe_keys_check(const Config *c, char *msg, size_t n)
{
    static const char *const moe_keys[] = {
        "top_k", "moe_ffn_dim", "n_shared_expert", "moe_every", "moe_router",
        "moe_aux_loss", "moe_z_loss", "moe_capacity",
    };
    if (c->model.n_expert > 0)
        return 0;
    for (size_t i = 0; i < sizeof moe_keys / sizeof moe_keys[0]; i++) {
        const KeyDef *k = config_key_find("model", moe_keys[i]);
        char value[CONFIG_VALUE_MAX];
        config_value_format(k, c, value, sizeof value);
        if (strcmp(value, k->def))
            return fail_key(c, msg, n, "model", moe_keys[i], "applies to n_expert > 0 only "
                            "(this config's n_expert is 0: a dense model)");
    }
    return 0;
}

/* Rules between keys. Warmup longer than the run is legal (the run ends
 * warming up), so warmup <= steps is not one of them. */
int config_rules_check(const Config *c, char *msg, size_t n)
{
    const ModelConfig *m = &c->model;
    if (m->n_embd % m->n_head)
        return fail_key(c, msg, n, "model", "n_head", "n_embd (%d) is not divisible by n_head",
                        m->n_embd);
    /* Text is bytes, so at least 256 ids; more is legal padding (GPT-2's
     * 50257 is often padded to 50304 for faster matmuls). */
    if (c->data.format == DATA_TEXT && m->vocab_size < 256)
        return fail_key(c, msg, n, "model", "vocab_size",
                        "text data is bytes: vocab_size must be >= 256 with format = text");
    /* Text data is read as bytes, ids 0-255 that no tokenizer made: a
     * tokenizer there would decode the sample and be exported with the
     * model, yet the model never saw its ids. */
    if (c->data.format == DATA_TEXT && c->data.tokenizer[0])
        return fail_key(c, msg, n, "data", "tokenizer",
                        "[data] format = text reads the files as bytes (ids 0-255), not as "
                        "this tokenizer's ids: tokenize the text with `trident tokenize "
                        "--tokenizer FILE` and train on it with format = indexed, or leave "
                        "[data] tokenizer empty");
    /* the rows past vocab_used are padding that export leaves out */
    if (m->vocab_used > m->vocab_size)
        return fail_key(c, msg, n, "model", "vocab_used",
                        "more than vocab_size (%d): vocab_size pads vocab_used, not the "
                        "other way round", m->vocab_size);
    /* init_from starts a new run; resume = PATH continues one */
    if (c->checkpoint.init_from[0] && strcmp(c->checkpoint.resume, "auto")
        && strcmp(c->checkpoint.resume, "none"))
        return fail_key(c, msg, n, "checkpoint", "init_from",
                        "starts a new run, and resume = %s continues one: set one of them",
                        c->checkpoint.resume);
    if (c->data.format == DATA_TOKENS && m->vocab_size > 65536)
        return fail_key(c, msg, n, "model", "vocab_size",
                        "token shards hold uint16 ids: vocab_size must be <= 65536 "
                        "with format = tokens");
    /* The layout's rules that need no world size (layout_check does the
     * ones that need it), the architecture's, then sequence parallelism's. */
    if (worded(c, msg, n, layout_rules_check))
        return 1;
    if (worded(c, msg, n, arch_of(&c->model)->check_keys))
        return 1;
    if (moe_keys_check(c, msg, n))
        return 1;
    if (worded(c, msg, n, layout_sequence_rules_check))
        return 1;
    if (c->train.min_lr > c->train.lr)
        return fail_key(c, msg, n, "train", "min_lr", "greater than lr (%g)", c->train.lr);
    if (!c->data.train[0])
        return fail_key(c, msg, n, "data", "train", "required (the training data file)");
    if (c->checkpoint.every > 0 && !c->checkpoint.dir[0])
        return fail_key(c, msg, n, "checkpoint", "every", "needs [checkpoint] dir");
    if (c->eval.patience > 0 && c->eval.every == 0)
        return fail_key(c, msg, n, "eval", "patience",
                        "early stopping needs [eval] every > 0");
    return 0;
}
