/*
 * config_rules.c - the rules between keys: what no single row of the key
 * table can check. Checks that need the data files are data_open's, and
 * those that need the world size are grid_check's. Each failed rule names
 * the key the user should change, with its value (fail_key).
 *
 * The rules about the model architecture (which keys gpt2 refuses, what
 * llama's grouped-query attention and rotary embeddings need) are one
 * function, check_arch_keys, so that they can move into an architecture
 * descriptor (arch.h) as a whole.
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

/* The rules of each architecture. gpt2: the llama keys mean nothing to
 * it, so a gpt2 config that sets one is refused rather than silently
 * trained without it (defaults are the values that config_to_ini writes
 * back, so they pass). llama: grouped-query attention and rotary
 * embeddings constrain the heads; TP splits key/value heads or replicates
 * them (arch.h). */
static int check_arch_keys(const Config *c, char *msg, size_t n)
{
    const ModelConfig *m = &c->model;
    if (m->arch == ARCH_GPT2) {
        const char *why = "applies to arch = llama only (this config's arch is gpt2)";
        if (m->n_kv_head != 0 && m->n_kv_head != m->n_head)
            return fail_key(c, msg, n, "model", "n_kv_head", "%s", why);
        if (m->ffn_dim != 0 && m->ffn_dim != 4 * m->n_embd)
            return fail_key(c, msg, n, "model", "ffn_dim", "%s", why);
        if (m->norm_eps != 1e-5)
            return fail_key(c, msg, n, "model", "norm_eps", "%s", why);
        if (m->rope_theta != 10000.0)
            return fail_key(c, msg, n, "model", "rope_theta", "%s", why);
        return 0;
    }
    int kv = arch_kv_heads(m), tp = c->parallel.tp;
    if (m->n_head % kv)
        return fail_key(c, msg, n, "model", "n_kv_head",
                        "must divide n_head (%d): each key/value head serves n_head / "
                        "n_kv_head query heads", m->n_head);
    if ((m->n_embd / m->n_head) % 2)
        return fail_key(c, msg, n, "model", "n_head",
                        "the head size n_embd / n_head = %d is odd: rotary embeddings "
                        "rotate pairs of channels", m->n_embd / m->n_head);
    if (kv % tp && tp % kv)
        return fail_key(c, msg, n, "parallel", "tp",
                        "neither divides nor is divided by n_kv_head (%d): key/value heads "
                        "are split over TP ranks, or each replicated on tp / n_kv_head "
                        "ranks", kv);
    if (arch_ffn_dim(m) % tp)
        return fail_key(c, msg, n, "model", "ffn_dim",
                        "%d is not divisible by tp (%d): the MLP is split across TP ranks",
                        arch_ffn_dim(m), tp);
    return 0;
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
     * TP splits attention heads (grid_check does the ones that need it). */
    if (c->parallel.pp > m->n_layer)
        return fail_key(c, msg, n, "parallel", "pp",
                        "more pipeline stages than layers (n_layer = %d)", m->n_layer);
    /* Products of layout sizes are ints everywhere (grid_check, MPI):
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
