/*
 * config_rules.c - the rules between keys: what no single row of the key
 * table can check. Checks that need the data files are data_open's, and
 * those that need the world size are layout_check's. Each failed rule names
 * the key the user should change, with its value (fail_key).
 *
 * The rules about the model architecture (which keys gpt2 refuses, what
 * llama's grouped-query attention and rotary embeddings need) are the
 * architecture's descriptor's (arch.h: check_keys); this file words them.
 */
#include "config_rules.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "arch.h"
#include "config_keys.h"
#include "config_message.h"
#include "config_value.h"

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

/* The architecture's own rules (its descriptor's check_keys: which keys
 * it refuses, what its attention needs of the heads and of tp). */
static int check_arch_keys(const Config *c, char *msg, size_t n)
{
    ArchKeyProblem p;
    if (!arch_of(&c->model)->check_keys(c, &p))
        return 0;
    return fail_key(c, msg, n, p.section, p.key, "%s", p.why);
}

/* The interleaved schedule's rules (Megatron's): each stage holds
 * virtual_stages equal chunks of layers, and microbatches go round the
 * ring of stages in groups of pp. */
static int check_virtual_stages(const Config *c, char *msg, size_t n)
{
    const ParallelConfig *pl = &c->parallel;
    if (pl->schedule != SCHED_INTERLEAVED) {
        if (pl->virtual_stages != 1)
            return fail_key(c, msg, n, "parallel", "virtual_stages",
                            "applies to schedule = interleaved only (this config's schedule "
                            "is %s)", pl->schedule == SCHED_GPIPE ? "gpipe" : "1f1b");
        return 0;
    }
    if (pl->virtual_stages < 2)
        return fail_key(c, msg, n, "parallel", "virtual_stages",
                        "schedule = interleaved needs virtual_stages >= 2 (the chunks of "
                        "layers each stage holds)");
    if (pl->pp < 2)
        return fail_key(c, msg, n, "parallel", "pp",
                        "schedule = interleaved needs pp >= 2 (it shrinks the bubble "
                        "between pipeline stages)");
    long long chunks = (long long)pl->pp * pl->virtual_stages;
    if (c->model.n_layer % chunks)
        return fail_key(c, msg, n, "parallel", "virtual_stages",
                        "n_layer (%d) is not divisible by pp * virtual_stages = %lld "
                        "(every chunk holds the same number of layers)",
                        c->model.n_layer, chunks);
    if (c->train.grad_accum % pl->pp)
        return fail_key(c, msg, n, "train", "grad_accum",
                        "schedule = interleaved runs microbatches in groups of pp: "
                        "grad_accum must be a multiple of pp (%d)", pl->pp);
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
    /* Layout rules that need no world size: a stage owns >= 1 layer, and
     * TP splits attention heads (layout_check does the ones that need it). */
    if (c->parallel.pp > m->n_layer)
        return fail_key(c, msg, n, "parallel", "pp",
                        "more pipeline stages than layers (n_layer = %d)", m->n_layer);
    /* Products of layout sizes are ints everywhere (layout_check, MPI):
     * none may exceed the largest MPI world, INT_MAX ranks. */
    const ParallelConfig *pl = &c->parallel;
    long long pt = (long long)pl->pp * pl->tp, world = pt * (pl->dp ? pl->dp : 1);
    if (pt > INT_MAX || world > INT_MAX) {
        const char *key = pl->tp >= pl->pp && pl->tp >= pl->dp ? "tp"
                          : pl->pp >= pl->dp ? "pp" : "dp";
        if (!pl->dp)
            return fail_key(c, msg, n, "parallel", key,
                            "pp * tp = %d * %d = %lld is more ranks than an MPI world holds "
                            "(at most %d)", pl->pp, pl->tp, pt, INT_MAX);
        return fail_key(c, msg, n, "parallel", key,
                        "dp * pp * tp = %d * %d * %d = %lld is more ranks than an MPI world "
                        "holds (at most %d)", pl->dp, pl->pp, pl->tp, world, INT_MAX);
    }
    if (m->n_head % c->parallel.tp)
        return fail_key(c, msg, n, "parallel", "tp",
                        "n_head (%d) is not divisible by tp (heads are split across TP ranks)",
                        m->n_head);
    if (check_virtual_stages(c, msg, n))
        return 1;
    if (check_arch_keys(c, msg, n))
        return 1;
    /* each TP rank's slice of the microbatch's flattened tokens (model.c) */
    long long tokens = (long long)c->train.micro_batch * m->seq_len;
    if (pl->sequence_parallel && tokens % pl->tp)
        return fail_key(c, msg, n, "parallel", "sequence_parallel",
                        "needs [train] micro_batch * [model] seq_len = %d * %d = %lld "
                        "divisible by tp (%d): each TP rank holds an equal slice of the "
                        "microbatch's tokens", c->train.micro_batch, m->seq_len, tokens,
                        pl->tp);
    /* generation runs one row at a time: T tokens sliced over TP */
    if (pl->sequence_parallel && c->log.sample_tokens > 0 && m->seq_len % pl->tp)
        return fail_key(c, msg, n, "log", "sample_tokens",
                        "generation with sequence_parallel needs [model] seq_len (%d) "
                        "divisible by tp (%d): it runs one row of seq_len tokens",
                        m->seq_len, pl->tp);
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
