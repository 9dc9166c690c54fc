/*
 * t_config.c - the config loader (src/config/) and config_ini.c: defaults, the built-in job, the
 * INI round trip, --set overrides, INI text from memory, and one check per
 * kind of bad input; the start-up print of the keys not at their
 * defaults; doc/guide.md's table of every key's default, which
 * `tests/t_config --defaults-table` prints from the key table.
 *
 * Every bad input must fail with exactly one line on err, starting with
 * "trident: <origin>" (file:line, the file for cross-key rules, or --set)
 * and naming the key, the value and the reason; the lines are echoed as TAP
 * diagnostics so a reader sees what a user would. Runs at any rank count:
 * each rank writes its own temporary files.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L     /* mkstemp, open_memstream */
#endif
#include "config.h"
#include "config_ini.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config_keys.h"
#include "config_load.h"
#include "config_value.h"
#include "tap.h"

/* the smallest valid file */
#define BASE "[data]\ntrain = data.txt\n"

/* Every key, none at its default. */
static const char FULL[] =
    "[model]\nn_layer = 6\nn_embd = 96\nn_head = 6\nseq_len = 64\nvocab_size = 50304\n"
    "vocab_used = 50257\n"
    "init = xavier_uniform\ninit_std = 0.01\ninit_fan = fan_out\ntie_embeddings = no\n"
    "arch = llama\nn_kv_head = 2\nffn_dim = 144\nnorm_eps = 1e-6\nrope_theta = 500000\n"
    "[parallel]\ndp = 2\npp = 3\ntp = 2\ncp = 2\nschedule = interleaved\nvirtual_stages = 2\nzero = 3\n"
    "node_size = 4\n"
    "device = cpu\noverlap = false\nsequence_parallel = true\n"
    "[train]\nmicro_batch = 4\ngrad_accum = 6\nsteps = 77\nlr = 6e-4\nmin_lr = 6e-5\n"
    "warmup = 7\nweight_decay = 0.33333333333333331\nbeta1 = 0.85\nbeta2 = 0.99\n"
    "eps = 1e-6\nclip_norm = 0.5\nclip_value = 2.5\nprecision = bf16\nrecompute = every:2\n"
    "offload = optimizer\n"
    "seed = 18446744073709551615\nloss_scale_window = 500\nloss_scale_hysteresis = 3\n"
    "loss_scale_min = 0.25\n"
    "[data]\ntrain = /data/shard_train.bin\nval = /data/shard_val.bin\nval_fraction = 0.05\n"
    "format = tokens\ntokenizer = /data/tokenizer.json\n"
    "[checkpoint]\ndir = /scratch/ckpt\nevery = 25\nkeep = 2\n"
    "resume = none\nasync = true\n"
    "init_from = /models/gpt2\n"
    "[eval]\nevery = 10\nbatches = 3\npatience = 4\nmin_delta = 0.001\n"
    "[log]\nevery = 5\nmetrics = /scratch/m.jsonl\nsample_tokens = 0\nprofile = yes\n"
    "[fault]\ntimeout = 90.5\n";

typedef struct {
    int rc;
    char *msg;      /* everything written to err */
    size_t len;
    char *path;     /* the temporary file (already removed), or NULL */
} Outcome;

static char *write_file(const char *text)
{
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir)
        dir = "/tmp";
    size_t n = strlen(dir) + 32, len = strlen(text);
    char *path = malloc(n);
    snprintf(path, n, "%s/t_config_XXXXXX", dir);
    int fd = mkstemp(path);
    if (fd < 0 || write(fd, text, len) != (ssize_t)len || close(fd) != 0) {
        perror(path);
        exit(1);
    }
    return path;
}

/* config_load on text written to a file (NULL: the built-in config). */
static Outcome run(const char *text, const char *const *ov, int n_ov, Config *cfg)
{
    Outcome o = { 0, NULL, 0, text ? write_file(text) : NULL };
    FILE *err = open_memstream(&o.msg, &o.len);
    o.rc = config_load(cfg, o.path, ov, n_ov, err);
    fclose(err);
    if (o.path)
        unlink(o.path);
    return o;
}

static void outcome_free(Outcome *o)
{
    free(o->msg);
    free(o->path);
}

static int one_line(const char *msg, size_t len)
{
    return len > 0 && memchr(msg, '\n', len) == msg + len - 1;
}

/* The load must fail with one line that starts with the origin (line > 0:
 * "file:line: ", line 0: "file: ", line < 0: "--set") and contains both
 * needles. */
static void expect_error(const char *what, const char *text, const char *const *ov, int n_ov,
                         int line, const char *needle, const char *needle2)
{
    static Config cfg;
    char prefix[1200];
    Outcome o = run(text, ov, n_ov, &cfg);
    if (line > 0)
        snprintf(prefix, sizeof prefix, "trident: %s:%d: ", o.path, line);
    else if (line == 0)
        snprintf(prefix, sizeof prefix, "trident: %s: ", o.path);
    else
        snprintf(prefix, sizeof prefix, "trident: --set");
    int ok = o.rc != 0 && one_line(o.msg, o.len) && !strncmp(o.msg, prefix, strlen(prefix)) &&
             strstr(o.msg, needle) && (!needle2 || strstr(o.msg, needle2));
    tap_ok(ok, "%s", what);
    tap_diag("%.*s", (int)(o.len ? o.len - 1 : 0), o.msg ? o.msg : "");
    outcome_free(&o);
}

#define FILE_ERR(what, text, line, needle, needle2) \
    expect_error(what, text, NULL, 0, line, needle, needle2)
#define SET_ERR(what, ov, needle, needle2) \
    expect_error(what, BASE, (const char *const[]){ ov }, 1, -1, needle, needle2)

static int same_config(const Config *a, const Config *b)
{
    return !memcmp(&a->model, &b->model, sizeof a->model) &&
           !memcmp(&a->parallel, &b->parallel, sizeof a->parallel) &&
           !memcmp(&a->train, &b->train, sizeof a->train) &&
           !memcmp(&a->data, &b->data, sizeof a->data) &&
           !memcmp(&a->checkpoint, &b->checkpoint, sizeof a->checkpoint) &&
           !memcmp(&a->eval, &b->eval, sizeof a->eval) &&
           !memcmp(&a->log, &b->log, sizeof a->log);
}

/* config_to_ini, then config_load of that text: the same Config back? */
static int round_trips(const Config *cfg)
{
    static Config back;
    static char a[1 << 16], b[1 << 16];
    config_to_ini(cfg, a, sizeof a);
    Outcome o = run(a, NULL, 0, &back);
    config_to_ini(&back, b, sizeof b);
    int ok = o.rc == 0 && same_config(cfg, &back) && !strcmp(a, b);
    if (o.rc)
        tap_diag("%.*s", (int)o.len, o.msg);
    outcome_free(&o);
    return ok;
}

static void test_defaults(void)
{
    static Config c;
    char *msg = NULL;
    size_t len = 0;
    config_defaults(&c);
    const ModelConfig *m = &c.model;
    tap_ok(m->n_layer == 4 && m->n_embd == 128 && m->n_head == 4 && m->seq_len == 128 &&
           m->vocab_size == 256 && m->init == INIT_GPT2 && m->init_std == 0.02 &&
           m->init_fan == FAN_IN && m->tie_embeddings == 1,
           "defaults: [model] is the tiny byte-level model");
    const ParallelConfig *p = &c.parallel;
    const TrainConfig *t = &c.train;
    tap_ok(p->dp == 0 && p->pp == 1 && p->tp == 1 && p->schedule == SCHED_1F1B && p->zero == 1 &&
           p->node_size == 0 && !p->sequence_parallel && t->micro_batch == 8 && t->grad_accum == 1 && t->steps == 1000 &&
           t->lr == 1e-3 && t->min_lr == 1e-4 && t->warmup == 100 && t->weight_decay == 0.1 &&
           t->beta1 == 0.9 && t->beta2 == 0.95 && t->eps == 1e-8 && t->clip_norm == 1.0 &&
           t->clip_value == 0 && t->precision == PRECISION_FP32 &&
           t->recompute == RECOMPUTE_NONE && t->recompute_every == 0 && t->seed == 1337 &&
           t->offload == OFFLOAD_NONE &&
           t->loss_scale_window == 2000 && t->loss_scale_hysteresis == 2 &&
           t->loss_scale_min == 1.0,
           "defaults: [parallel] and [train]");
    tap_ok(!c.data.train[0] && !c.data.val[0] && c.data.val_fraction == 0.1 &&
           c.data.format == DATA_TEXT && !c.checkpoint.dir[0] && c.checkpoint.every == 0 &&
           c.checkpoint.keep == 3 && !strcmp(c.checkpoint.resume, "auto") && !c.checkpoint.async &&
           c.eval.every == 100 && c.eval.batches == 4 && c.eval.patience == 0 &&
           c.eval.min_delta == 0 && c.log.every == 1 && !c.log.metrics[0] &&
           c.log.sample_tokens == SAMPLE_TOKENS_DEFAULT && !c.source[0],
           "defaults: [data], [checkpoint], [eval], [log]");

    FILE *err = open_memstream(&msg, &len);
    int rc = config_validate(&c, err);
    fclose(err);
    tap_ok(rc != 0 && one_line(msg, len) &&
           !strcmp(msg, "trident: config: [data] train: required (the training data file)\n"),
           "defaults fail validation only for want of [data] train");
    tap_diag("%.*s", (int)(len ? len - 1 : 0), msg);
    free(msg);
    tap_ok(config_set(&c, "data", "train", "x.txt", "test", NULL) == 0 &&
           config_validate(&c, NULL) == 0 && round_trips(&c),
           "defaults plus a train file validate and round-trip");
}

static void test_builtin(void)
{
    static Config c;
    Outcome o = run(NULL, NULL, 0, &c);
    tap_ok(o.rc == 0 && o.len == 0 && !strcmp(c.source, "(built-in tiny.ini)"),
           "built-in tiny.ini loads and validates");
    outcome_free(&o);
    tap_ok(c.model.n_layer == 4 && c.model.n_embd == 128 && c.train.micro_batch == 16 &&
           c.train.steps == 600 && c.train.lr == 2e-3 && c.train.min_lr == 2e-4 &&
           c.train.warmup == 50 && !strcmp(c.data.train, "data/fortunes.txt") &&
           !c.data.val[0] && c.eval.every == 100 && c.eval.batches == 8 && c.log.every == 10 &&
           !strcmp(c.log.metrics, "runs/tiny/metrics.jsonl") && c.log.sample_tokens == 300,
           "built-in values are tiny.ini's (inline comments stripped)");
    tap_ok(round_trips(&c), "built-in config round-trips through config_to_ini");
}

static void test_full_file(void)
{
    static Config c, d;
    static char full[1 << 16], def[1 << 16];
    Outcome o = run(FULL, NULL, 0, &c);
    tap_ok(o.rc == 0 && c.model.vocab_size == 50304 && c.model.init == INIT_XAVIER_UNIFORM &&
           c.model.init_fan == FAN_OUT && c.model.tie_embeddings == 0 &&
           c.parallel.schedule == SCHED_INTERLEAVED && c.parallel.virtual_stages == 2 &&
           c.parallel.zero == 3 && c.parallel.cp == 2 &&
           c.train.precision == PRECISION_BF16 && c.train.recompute == RECOMPUTE_EVERY &&
           c.train.recompute_every == 2 && c.train.offload == OFFLOAD_OPTIMIZER &&
           c.train.seed == 18446744073709551615ULL &&
           c.train.loss_scale_min == 0.25 && c.data.format == DATA_TOKENS &&
           !strcmp(c.checkpoint.resume, "none") && c.checkpoint.async &&
           !strcmp(c.checkpoint.init_from, "/models/gpt2") && c.model.vocab_used == 50257 &&
           c.eval.min_delta == 0.001 && !strcmp(c.log.metrics, "/scratch/m.jsonl") &&
           c.fault.timeout == 90.5 && c.model.arch == ARCH_LLAMA && c.model.n_kv_head == 2 &&
           c.model.ffn_dim == 144 && c.model.norm_eps == 1e-6 && c.model.rope_theta == 500000 &&
           !strcmp(c.source, o.path),
           "a file with every key loads");
    if (o.rc)
        tap_diag("%.*s", (int)o.len, o.msg);
    outcome_free(&o);

    /* each key line against the defaults' lines: FULL must change every
     * key (the defaults' text leaves out the keys config_to_ini omits
     * while unset, so lines are looked up, not compared in order) */
    config_defaults(&d);
    d.model.arch = ARCH_LLAMA;
    int n = config_to_ini(&c, full, sizeof full);
    config_to_ini(&d, def, sizeof def);
    int keys = 0, same = 0;
    for (char *a = full; *a;) {
        size_t la = strcspn(a, "\n");
        if (memchr(a, '=', la)) {
            keys++;
            for (char *b = def; *b;) {
                size_t lb = strcspn(b, "\n");
                if (la == lb && !memcmp(a, b, la)) {
                    same++;
                    break;
                }
                b += lb + (b[lb] != 0);
            }
        }
        a += la + (a[la] != 0);
    }
    /* 65 keys today: a new key must be added to FULL too; the one line
     * both texts hold is d's arch = llama (set so def has llama's keys) */
    tap_ok(keys == 65 && same == 1 && n == (int)strlen(full),
           "config_to_ini writes all %d keys, and the full file sets each", keys);
    tap_ok(round_trips(&c), "every key round-trips: config_to_ini -> config_load -> same Config");
    tap_ok(!strstr(def, "vocab_used") && !strstr(def, "init_from") && !strstr(def, "tokenizer")
           && !strstr(def, "cp = "),
           "unset, vocab_used, init_from, tokenizer and cp are left out of config_to_ini's text "
           "(stored configs as before)");
    config_defaults(&d);
    config_to_ini(&d, def, sizeof def);
    tap_ok(!strstr(def, "arch") && !strstr(def, "n_kv_head") && !strstr(def, "ffn_dim") &&
           !strstr(def, "norm_eps") && !strstr(def, "rope_theta"),
           "a gpt2 config's text leaves out arch and the llama keys (stored configs as before)");

    char small[16];
    tap_ok(config_to_ini(&c, NULL, 0) == n && config_to_ini(&c, small, sizeof small) == n &&
           strlen(small) == sizeof small - 1 && !strncmp(small, full, sizeof small - 1),
           "config_to_ini returns the full length and truncates like snprintf");
}

/* The keys of a mixture of experts (issue 38) are left out of a dense
 * model's stored config, which reads as before they came; a MoE model's
 * stored config holds every one of them and loads back the same. */
static void test_moe_stored(void)
{
    static const char *const moe_lines[] = {
        "n_expert = ", "top_k = ", "moe_ffn_dim = ", "n_shared_expert = ", "moe_every = ",
        "moe_router = ", "moe_aux_loss = ", "moe_z_loss = ", "moe_capacity = ", "\nep = ",
    };
    static const char MOE[] =
        "[model]\narch = llama\nn_expert = 8\ntop_k = 3\nmoe_ffn_dim = 96\n"
        "n_shared_expert = 2\nmoe_every = 2\nmoe_router = softmax_topk\nmoe_aux_loss = 0.02\n"
        "moe_z_loss = 0.001\nmoe_capacity = 1.25\n[parallel]\ndp = 4\nep = 4\n" BASE;
    static Config c;
    static char text[1 << 16];
    size_t n = sizeof moe_lines / sizeof moe_lines[0];
    /* tiny.ini spells out every MoE key at its default: a dense llama */
    Outcome o = run("[model]\narch = llama\nn_expert = 0\ntop_k = 2\nmoe_ffn_dim = 0\n"
                    "n_shared_expert = 0\nmoe_every = 1\nmoe_router = softmax_topk_norm\n"
                    "moe_aux_loss = 1e-2\nmoe_z_loss = 0\nmoe_capacity = 0\n"
                    "[parallel]\nep = 1\n" BASE, NULL, 0, &c);
    config_to_ini(&c, text, sizeof text);
    size_t absent = 0;
    for (size_t i = 0; i < n; i++)
        absent += strstr(text, moe_lines[i]) == NULL;
    tap_ok(o.rc == 0 && absent == n && round_trips(&c),
           "a dense llama that spells out every MoE key at its default stores none of them");
    if (o.rc)
        tap_diag("%.*s", (int)o.len, o.msg);
    outcome_free(&o);

    o = run(MOE, NULL, 0, &c);
    config_to_ini(&c, text, sizeof text);
    size_t present = 0;
    for (size_t i = 0; i < n; i++)
        present += strstr(text, moe_lines[i]) != NULL;
    const ModelConfig *m = &c.model;
    tap_ok(o.rc == 0 && present == n && m->n_expert == 8 && m->top_k == 3 &&
           m->moe_ffn_dim == 96 && m->n_shared_expert == 2 && m->moe_every == 2 &&
           m->moe_router == MOE_ROUTER_SOFTMAX_TOPK && m->moe_aux_loss == 0.02 &&
           m->moe_z_loss == 0.001 && m->moe_capacity == 1.25 && c.parallel.ep == 4 &&
           round_trips(&c),
           "a MoE config stores every MoE key and round-trips");
    if (o.rc)
        tap_diag("%.*s", (int)o.len, o.msg);
    outcome_free(&o);
}

static void test_overrides(void)
{
    static Config c;
    const char *ov[] = { "model.n_layer=8", "  train.lr = 0.25 ", "model.n_layer=2",
                         "data.val=v=1.txt" };
    Outcome o = run("[model]\nn_layer = 6\nn_embd = 96\n[train]\nlr = 0.5\n" BASE, ov, 4, &c);
    tap_ok(o.rc == 0 && c.model.n_layer == 2 && c.train.lr == 0.25 && c.model.n_embd == 96 &&
           !strcmp(c.data.val, "v=1.txt"),
           "--set wins over the file, in order, blanks trimmed, value split at the first '='");
    outcome_free(&o);

    /* zb1 is value 3 (2 is kept for the interleaved schedule), which no
     * word names: an empty value does not select it */
    const char *zb1[] = { "parallel.schedule=zb1" };
    o = run(BASE, zb1, 1, &c);
    char text[1 << 14];
    config_to_ini(&c, text, sizeof text);
    tap_ok(o.rc == 0 && c.parallel.schedule == SCHED_ZB1 && SCHED_ZB1 == 3
               && strstr(text, "schedule = zb1\n"),
           "schedule = zb1: value 3, written back as zb1");
    outcome_free(&o);
    const char *empty[] = { "parallel.schedule=" };
    o = run(BASE, empty, 1, &c);
    tap_ok(o.rc != 0, "schedule = (empty) is refused, not the unnamed value 2");
    outcome_free(&o);

    const char *fix[] = { "data.train=late.txt" };
    o = run("[model]\nn_layer = 2\n", fix, 1, &c);
    tap_ok(o.rc == 0 && !strcmp(c.data.train, "late.txt"), "--set applies before validation");
    outcome_free(&o);

    o = run("[model]\nn_layer = 6\n", fix, 1, &c);
    char *msg = NULL;
    size_t len = 0;
    FILE *err = open_memstream(&msg, &len);
    int rc = config_set(&c, "model", "n_layer", "0", "unit", err);
    fclose(err);
    tap_ok(rc != 0 && c.model.n_layer == 6 &&
           !strcmp(msg, "trident: unit: [model] n_layer = 0: must be >= 1\n"),
           "config_set: a bad value leaves the key unchanged and names the origin");
    free(msg);
    outcome_free(&o);

    tap_ok(!config_set(&c, "model", "tie_embeddings", "YES", "t", NULL) &&
           c.model.tie_embeddings == 1 &&
           !config_set(&c, "model", "tie_embeddings", "off", "t", NULL) &&
           c.model.tie_embeddings == 0 &&
           !config_set(&c, "model", "tie_embeddings", "1", "t", NULL) &&
           c.model.tie_embeddings == 1,
           "booleans: yes/off/1 in any case");

    /* tie_embeddings = auto (the default) follows arch once the file and
     * the overrides are in: tied for gpt2, untied for llama; an explicit
     * value wins; a default config (no arch yet) is gpt2's */
    static Config t1, t2, t3, t4;
    const char *const llama[] = { "model.arch=llama" };
    const char *const llama_tied[] = { "model.arch=llama", "model.tie_embeddings=true" };
    Outcome a1 = run("[model]\nn_layer = 2\n" BASE, NULL, 0, &t1);
    Outcome a2 = run("[model]\nn_layer = 2\n" BASE, llama, 1, &t2);
    Outcome a3 = run("[model]\ntie_embeddings = auto\n" BASE, llama_tied, 2, &t3);
    config_defaults(&t4);
    tap_ok(!a1.rc && !a2.rc && !a3.rc && t1.model.tie_embeddings == 1 &&
           t2.model.tie_embeddings == 0 && t3.model.tie_embeddings == 1 &&
           t4.model.tie_embeddings == 1 && round_trips(&t2),
           "tie_embeddings = auto: true for gpt2, false for llama, an explicit value wins");
    outcome_free(&a1);
    outcome_free(&a2);
    outcome_free(&a3);

    /* precision is parsed once, into the enum, and printed back as its word */
    static const char *const words[] = { "fp32", "bf16", "fp16" };
    static const Precision values[] = { PRECISION_FP32, PRECISION_BF16, PRECISION_FP16 };
    static char ini[1 << 16];
    int all = 1;
    for (int i = 0; i < 3; i++) {
        char line[32];
        snprintf(line, sizeof line, "\nprecision = %s\n", words[i]);
        all &= !config_set(&c, "train", "precision", words[i], "t", NULL) &&
               c.train.precision == values[i] && config_validate(&c, NULL) == 0 &&
               config_to_ini(&c, ini, sizeof ini) > 0 && strstr(ini, line) && round_trips(&c);
    }
    c.train.precision = (Precision)7;
    tap_ok(all && config_validate(&c, NULL) != 0,
           "precision: fp32/bf16/fp16 parse to the enum and print back; another value fails");
}

static void test_syntax_variants(void)
{
    static Config c;
    Outcome o = run("\xEF\xBB\xBF; comment\r\n[model]\r\n   n_layer = 6 ; six\r\n\t# note\r\n"
                    "  [train]\r\n lr=0.5\r\nrecompute = full\r\n" BASE, NULL, 0, &c);
    tap_ok(o.rc == 0 && c.model.n_layer == 6 && c.train.lr == 0.5 &&
           c.train.recompute == RECOMPUTE_FULL,
           "BOM, CRLF, indentation, ';' and '#' comments, inline ' ;' comments");
    outcome_free(&o);

    /* libinih's line buffer is 200 bytes: longer values must pass intact */
    char path[1100], text[1300];
    memset(path, 0, sizeof path);
    memset(path, 'p', 300);
    path[0] = '/';
    snprintf(text, sizeof text, "[data]\ntrain = %s   ; a long path\n[model]\nn_layer = 3\n", path);
    o = run(text, NULL, 0, &c);
    tap_ok(o.rc == 0 && !strcmp(c.data.train, path) && c.model.n_layer == 3,
           "a 300-character path in a file loads intact");
    outcome_free(&o);

    memset(path, 'q', CONFIG_PATH_MAX - 1);
    snprintf(text, sizeof text, "[data]\ntrain = %s\n", path);
    o = run(text, NULL, 0, &c);
    tap_ok(o.rc == 0 && strlen(c.data.train) == CONFIG_PATH_MAX - 1 && round_trips(&c),
           "a path of CONFIG_PATH_MAX-1 characters loads and round-trips");
    outcome_free(&o);

    memset(path, 'r', 300);
    path[300] = '\0';
    snprintf(text, sizeof text, "[data]\ntrain = %s\n[model]\nn_layer = 0\n", path);
    FILE_ERR("line numbers stay right after a long line", text, 4, "[model] n_layer = 0: must be >= 1",
             NULL);
    snprintf(text, sizeof text, "[data]\ntrain = %s\noops\n", path);
    FILE_ERR("syntax error after a long line", text, 3, "syntax error in \"oops\"", NULL);
}

static void test_file_errors(void)
{
    FILE_ERR("unknown section", "[model]\nn_layer = 4\n[modle]\nn_embd = 64\n" BASE, 3,
             "[modle]: unknown section (did you mean [model]? known: model, parallel, train, data, "
             "checkpoint, eval, log, fault)", NULL);
    FILE_ERR("unknown section without keys", BASE "[modle]\n", 3, "[modle]: unknown section", NULL);
    FILE_ERR("unknown key, with a suggestion", "[model]\nn_layers = 4\n" BASE, 2,
             "[model] n_layers: unknown key in [model] (did you mean n_layer?)", NULL);
    FILE_ERR("another section's key", "[model]\nlr = 0.1\n" BASE, 2,
             "[model] lr: unknown key in [model] (lr is in [train])", NULL);
    FILE_ERR("unknown key, nothing close", "[log]\nverbosity = 3\n" BASE, 2,
             "[log] verbosity: unknown key in [log] (known: every, metrics, sample_tokens, profile)", NULL);
    FILE_ERR("key before any section", "n_layer = 4\n" BASE, 1,
             "n_layer: key before any [section] header (n_layer is in [model])", NULL);
    FILE_ERR("syntax error", "[model]\nn_layer 4\n" BASE, 2, "syntax error", "n_layer 4");
    FILE_ERR("unterminated section header", "[model\nn_layer = 4\n" BASE, 1, "syntax error", NULL);
    FILE_ERR("the first error wins (syntax before unknown key)",
             "[model]\nthis is not ini\nn_layers = 3\n" BASE, 2, "syntax error", NULL);
    FILE_ERR("the first error wins (two bad values)", "[model]\nn_layer = 0\nn_embd = x\n" BASE, 2,
             "n_layer = 0", NULL);
    FILE_ERR("key set twice", "[model]\nn_layer = 2\n\n[model]\nn_layer = 3\n" BASE, 5,
             "[model] n_layer = 3: set twice (first on line 2)", NULL);
}

static void test_value_errors(void)
{
    FILE_ERR("integer: word", "[model]\nn_layer = four\n" BASE, 2,
             "[model] n_layer = four: not an integer", NULL);
    FILE_ERR("integer: trailing junk", "[model]\nn_layer = 4abc\n" BASE, 2,
             "[model] n_layer = 4abc: not an integer", NULL);
    FILE_ERR("integer: overflow", "[train]\nsteps = 99999999999999\n" BASE, 2,
             "[train] steps = 99999999999999: integer overflow", NULL);
    FILE_ERR("real: trailing junk", "[train]\nlr = 1e-3x\n" BASE, 2,
             "[train] lr = 1e-3x: not a number", NULL);
    FILE_ERR("real: not finite", "[train]\nlr = inf\n" BASE, 2,
             "[train] lr = inf: not a finite number", NULL);
    FILE_ERR("real: '#' comment hint", "[train]\nlr = 1e-3 # peak\n" BASE, 2,
             "not a number", "inline comments start with \" ;\"");
    FILE_ERR("boolean", "[model]\ntie_embeddings = maybe\n" BASE, 2,
             "[model] tie_embeddings = maybe: not a boolean", NULL);
    FILE_ERR("seed: negative", "[train]\nseed = -1\n" BASE, 2,
             "[train] seed = -1: not an unsigned integer", NULL);
    FILE_ERR("seed: overflow", "[train]\nseed = 18446744073709551616\n" BASE, 2,
             "[train] seed = 18446744073709551616: integer overflow", NULL);
    FILE_ERR("range: n_layer = 0", "[model]\nn_layer = 0\n" BASE, 2,
             "[model] n_layer = 0: must be >= 1", NULL);
    FILE_ERR("range: zero = 4", "[parallel]\nzero = 4\n" BASE, 2,
             "[parallel] zero = 4: must be between 0 and 3", NULL);
    FILE_ERR("range: beta1 = 1.0", "[train]\nbeta1 = 1.0\n" BASE, 2,
             "[train] beta1 = 1.0: must be in [0, 1)", NULL);
    FILE_ERR("range: dp = -1", "[parallel]\ndp = -1\n" BASE, 2,
             "[parallel] dp = -1: must be >= 0", NULL);
    FILE_ERR("range: steps = -5", "[train]\nsteps = -5\n" BASE, 2,
             "[train] steps = -5: must be >= 0", NULL);
    FILE_ERR("range: lr = -1", "[train]\nlr = -1\n" BASE, 2, "[train] lr = -1: must be >= 0", NULL);
    FILE_ERR("range: fault timeout = 1e9", "[fault]\ntimeout = 1e9\n" BASE, 2,
             "[fault] timeout = 1e9: must be in [0, 604800]", NULL);
    FILE_ERR("range: val_fraction = 1.5", BASE "val_fraction = 1.5\n", 3,
             "[data] val_fraction = 1.5: must be in (0, 1)", NULL);
    FILE_ERR("range: eps = 0", "[train]\neps = 0\n" BASE, 2, "[train] eps = 0: must be > 0", NULL);
    FILE_ERR("enum: schedule", "[parallel]\nschedule = zigzag\n" BASE, 2,
             "[parallel] schedule = zigzag: expected one of 1f1b, gpipe, interleaved, zb1\n", NULL);
    FILE_ERR("enum: precision", "[train]\nprecision = fp8\n" BASE, 2,
             "[train] precision = fp8: expected one of fp32, bf16, fp16", NULL);
    FILE_ERR("enum: format", BASE "format = csv\n", 3,
             "[data] format = csv: expected one of text, tokens", NULL);
    FILE_ERR("enum: init", "[model]\ninit = kaiming\n" BASE, 2,
             "[model] init = kaiming: expected one of gpt2, normal, he_normal", NULL);
    FILE_ERR("enum: recompute = some", "[train]\nrecompute = some\n" BASE, 2,
             "[train] recompute = some: expected none, full or every:K (K >= 1)", NULL);
    FILE_ERR("enum: recompute = every:0", "[train]\nrecompute = every:0\n" BASE, 2,
             "[train] recompute = every:0: K of every:K must be an integer >= 1", NULL);
    FILE_ERR("resume must not be empty", BASE "[checkpoint]\nresume =\n", 4,
             "[checkpoint] resume: must not be empty", NULL);

    char path[CONFIG_PATH_MAX + 100], text[CONFIG_PATH_MAX + 200];
    memset(path, 0, sizeof path);
    memset(path, 'x', CONFIG_PATH_MAX);
    snprintf(text, sizeof text, "[data]\ntrain = %s\n", path);
    FILE_ERR("path too long (file), the value shown elided", text, 2,
             "[data] train = xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...x",
             "x: path longer than 1023 characters");
}

static void test_rule_errors(void)
{
    FILE_ERR("n_embd not divisible by n_head", "[model]\nn_head = 5\n" BASE, 0,
             "[model] n_head = 5: n_embd (128) is not divisible by n_head", NULL);
    FILE_ERR("missing [data] train", "[model]\nn_layer = 4\n", 0,
             "[data] train: required", NULL);
    FILE_ERR("vocab_size > 65536 with tokens",
             "[model]\nvocab_size = 70000\n" BASE "format = tokens\n", 0,
             "[model] vocab_size = 70000: token shards hold uint16 ids", NULL);
    FILE_ERR("vocab_used > vocab_size", "[model]\nvocab_used = 300\n" BASE, 0,
             "[model] vocab_used = 300: more than vocab_size (256)", NULL);
    FILE_ERR("init_from with resume = PATH",
             "[checkpoint]\ninit_from = /m\nresume = /c/step_00000001.h5\n" BASE, 0,
             "[checkpoint] init_from = /m: starts a new run, and resume = "
             "/c/step_00000001.h5 continues one", NULL);
    FILE_ERR("vocab_size < 256 with text", "[model]\nvocab_size = 100\n" BASE, 0,
             "[model] vocab_size = 100: text data is bytes", NULL);
    FILE_ERR("min_lr > lr", "[train]\nlr = 0.001\nmin_lr = 0.01\n" BASE, 0,
             "[train] min_lr = 0.01: greater than lr (0.001)", NULL);
    FILE_ERR("patience without eval.every", "[eval]\npatience = 3\nevery = 0\n" BASE, 0,
             "[eval] patience = 3: early stopping needs [eval] every > 0", NULL);
    FILE_ERR("checkpoint.every without dir", "[checkpoint]\nevery = 100\n" BASE, 0,
             "[checkpoint] every = 100: needs [checkpoint] dir", NULL);
    FILE_ERR("tp must divide n_head", "[parallel]\ntp = 3\n" BASE, 0,
             "[parallel] tp = 3: n_head (4) is not divisible by tp", NULL);
    FILE_ERR("pp must not exceed n_layer", "[parallel]\npp = 8\n" BASE, 0,
             "[parallel] pp = 8: more pipeline stages than layers (n_layer = 4)", NULL);
    FILE_ERR("interleaved needs virtual_stages >= 2", "[parallel]\npp = 2\nschedule = interleaved\n"
             BASE, 0, "[parallel] virtual_stages = 1: schedule = interleaved needs "
             "virtual_stages >= 2", NULL);
    FILE_ERR("virtual_stages without interleaved", "[parallel]\npp = 2\nvirtual_stages = 2\n"
             BASE, 0, "[parallel] virtual_stages = 2: applies to schedule = interleaved only "
             "(this config's schedule is 1f1b)", NULL);
    FILE_ERR("interleaved needs pp >= 2",
             "[parallel]\nschedule = interleaved\nvirtual_stages = 2\n" BASE, 0,
             "[parallel] pp = 1: schedule = interleaved needs pp >= 2", NULL);
    FILE_ERR("interleaved: n_layer divisible by pp * virtual_stages",
             "[parallel]\npp = 2\nschedule = interleaved\nvirtual_stages = 3\n" BASE, 0,
             "[parallel] virtual_stages = 3: n_layer (4) is not divisible by pp * "
             "virtual_stages = 6", NULL);
    FILE_ERR("interleaved: grad_accum a multiple of pp",
             "[parallel]\npp = 2\nschedule = interleaved\nvirtual_stages = 2\n"
             "[train]\ngrad_accum = 3\n" BASE, 0,
             "[train] grad_accum = 3: schedule = interleaved runs microbatches in groups of pp: "
             "grad_accum must be a multiple of pp (2)", NULL);
    FILE_ERR("sequence_parallel needs B*T divisible by tp",
             "[model]\nseq_len = 3\n[parallel]\ntp = 2\nsequence_parallel = true\n"
             "[train]\nmicro_batch = 1\n" BASE, 0,
             "[parallel] sequence_parallel = true: needs [train] micro_batch * [model] seq_len "
             "= 1 * 3 = 3 divisible by tp (2)", NULL);
    FILE_ERR("sequence_parallel generation needs seq_len divisible by tp",
             "[model]\nseq_len = 3\n[parallel]\ntp = 2\nsequence_parallel = true\n"
             "[train]\nmicro_batch = 2\n[log]\nsample_tokens = 5\n" BASE, 0,
             "[log] sample_tokens = 5: generation with sequence_parallel needs [model] seq_len "
             "(3) divisible by tp (2)", NULL);
    /* context parallelism (issue 39): its own words for the chunks, the
     * slices and generation; its size in the product of the layout */
    FILE_ERR("cp: seq_len cut into 2 cp chunks", "[model]\nseq_len = 8\n[parallel]\ncp = 3\n"
             BASE, 0, "[parallel] cp = 3: needs [model] seq_len (8) divisible by 2 * cp = 6: "
             "each sequence is cut into 2 cp chunks, two for each cp rank", NULL);
    FILE_ERR("cp with sequence_parallel: each TP rank a slice of the cp rank's tokens",
             "[model]\nseq_len = 12\n[parallel]\ntp = 4\ncp = 2\nsequence_parallel = true\n"
             "[train]\nmicro_batch = 1\n[log]\nsample_tokens = 0\n" BASE, 0,
             "[parallel] sequence_parallel = true: needs [train] micro_batch * [model] seq_len / "
             "[parallel] cp = 1 * 12 / 2 = 6 divisible by tp (4)", NULL);
    FILE_ERR("cp > 1: an asked-for sample is refused, naming both keys",
             "[parallel]\ncp = 2\n[log]\nsample_tokens = 5\n" BASE, 0,
             "[log] sample_tokens = 5: generation needs [parallel] cp = 1 (this config's is 2)",
             NULL);
    FILE_ERR("cp in the layout's product", "[parallel]\npp = 2\ncp = 2147483647\n" BASE, 0,
             "[parallel] cp = 2147483647: pp * cp * tp = 2 * 2147483647 * 1 = 4294967294 is more "
             "ranks than an MPI world holds", NULL);
    static Config sp;
    Outcome o = run("[model]\nseq_len = 3\n[parallel]\nsequence_parallel = true\n"
                    "[train]\nmicro_batch = 1\n" BASE, NULL, 0, &sp);
    tap_ok(o.rc == 0 && sp.parallel.sequence_parallel == 1,
           "sequence_parallel with tp = 1 is accepted (it slices nothing)");
    outcome_free(&o);

    static Config c;
    char *msg = NULL;
    size_t len = 0;
    config_defaults(&c);
    config_set(&c, "data", "train", "x.txt", "t", NULL);
    c.train.beta2 = 1.5;
    FILE *err = open_memstream(&msg, &len);
    int rc = config_validate(&c, err);
    fclose(err);
    tap_ok(rc != 0 && one_line(msg, len) && strstr(msg, "[train] beta2 = 1.5: must be in [0, 1)"),
           "config_validate re-checks ranges of a config built in code");
    tap_diag("%.*s", (int)(len ? len - 1 : 0), msg);
    free(msg);
    /* mixture of experts (issue 38; doc/moe.md): its keys' rules */
#define LLAMA_MOE "[model]\narch = llama\nn_expert = 4\n"
    FILE_ERR("moe: a MoE key on a dense model", "[model]\ntop_k = 1\n" BASE, 0,
             "[model] top_k = 1: applies to n_expert > 0 only (this config's n_expert is 0: a "
             "dense model)", NULL);
    FILE_ERR("moe: the router's order on a dense model", "[model]\narch = llama\n"
             "moe_router = softmax_topk\n" BASE, 0,
             "[model] moe_router = softmax_topk: applies to n_expert > 0 only", NULL);
    FILE_ERR("moe: n_expert with arch = gpt2", "[model]\nn_expert = 4\n" BASE, 0,
             "[model] n_expert = 4: applies to arch = llama only (this config's arch is gpt2)",
             NULL);
    FILE_ERR("moe: top_k more than n_expert", LLAMA_MOE "top_k = 5\n" BASE, 0,
             "[model] top_k = 5: more than n_expert (4): each token goes to top_k different "
             "experts", NULL);
    FILE_ERR("moe: no MoE layer", LLAMA_MOE "moe_every = 5\n" BASE, 0,
             "[model] moe_every = 5: more than n_layer (4): no layer would be a MoE layer", NULL);
    FILE_ERR("moe: an expert's width not divisible by tp",
             LLAMA_MOE "moe_ffn_dim = 66\n[parallel]\ntp = 4\n" BASE, 0,
             "[model] moe_ffn_dim = 66: 66 is not divisible by tp (4): each expert is split "
             "across TP ranks", NULL);
    FILE_ERR("moe: the shared expert's width past an int",
             LLAMA_MOE "moe_ffn_dim = 1000000\nn_shared_expert = 65536\n" BASE, 0,
             "[model] n_shared_expert = 65536: the shared expert's width n_shared_expert * "
             "moe_ffn_dim = 65536 * 1000000 is more than 2147483647", NULL);
    FILE_ERR("moe: ep on a dense model", "[parallel]\nep = 2\n" BASE, 0,
             "[parallel] ep = 2: applies to n_expert > 0 only (this config's n_expert is 0", NULL);
    FILE_ERR("moe: ep not dividing n_expert", LLAMA_MOE "[parallel]\nep = 3\n" BASE, 0,
             "[parallel] ep = 3: n_expert (4) is not divisible by ep: each ep rank holds "
             "n_expert / ep experts of every MoE layer", NULL);
    FILE_ERR("moe: ep not dividing a given dp", LLAMA_MOE "[parallel]\ndp = 3\nep = 2\n" BASE,
             0, "[parallel] ep = 2: dp (3) is not divisible by ep: the expert-parallel ranks "
             "are carved out of the data-parallel ones", NULL);
    FILE_ERR("moe: cp with experts", LLAMA_MOE "[parallel]\ncp = 2\n" BASE, 0,
             "[parallel] cp = 2: context parallelism with a mixture of experts (n_expert = 4) "
             "is not built", NULL);
    FILE_ERR("moe: an asked-for sample at ep > 1",
             LLAMA_MOE "[parallel]\nep = 2\n[log]\nsample_tokens = 5\n" BASE, 0,
             "[log] sample_tokens = 5: generation needs [parallel] ep = 1 (this config's is 2): "
             "it runs without the all-to-all", NULL);

}

static void test_set_errors(void)
{
    SET_ERR("--set without '='", "model.n_layer",
            "trident: --set model.n_layer: expected section.key=value", NULL);
    SET_ERR("--set without section", "n_layer=3",
            "trident: --set n_layer=3: expected section.key=value", NULL);
    SET_ERR("--set with an empty key", "model.=3", "expected section.key=value", NULL);
    SET_ERR("--set: out of range", "model.n_layer=0",
            "trident: --set: [model] n_layer = 0: must be >= 1", NULL);
    SET_ERR("--set: a bad offload", "train.offload=gpu",
            "trident: --set: [train] offload = gpu", "none, optimizer");
    SET_ERR("--set: unknown key", "model.n_layers=3",
            "trident: --set: [model] n_layers: unknown key in [model] (did you mean n_layer?)",
            NULL);
    SET_ERR("--set: unknown section", "modle.n_layer=3", "trident: --set: [modle]: unknown section",
            NULL);
    SET_ERR("--set: a path INI would cut at ' ;'", "data.train=a ;b",
            "[data] train = a ;b: has a ';' first or after a blank", NULL);

    char ov[CONFIG_PATH_MAX + 200];
    snprintf(ov, sizeof ov, "data.train=/");
    memset(ov + 12, 'y', 1100);
    ov[1112] = '\0';
    static Config c;
    const char *list[] = { ov };
    Outcome o = run(BASE, list, 1, &c);
    tap_ok(o.rc != 0 && one_line(o.msg, o.len) && o.len < 200 &&
           strstr(o.msg, "trident: --set: [data] train = /yyy") &&
           strstr(o.msg, "yyy: path longer than 1023 characters"),
           "path too long (--set), the value shown elided");
    tap_diag("%.*s", (int)(o.len ? o.len - 1 : 0), o.msg);
    outcome_free(&o);
}

/* Other trainers' names (config_alias.c) get the key trident means. */
static void test_aliases(void)
{
    FILE_ERR("learning_rate", "[train]\nlearning_rate = 1e-3\n" BASE, 2,
             "[train] learning_rate: unknown key in [train] (did you mean lr?)", NULL);
    FILE_ERR("batch_size, in another section", "[model]\nbatch_size = 8\n" BASE, 2,
             "[model] batch_size: unknown key in [model] (did you mean [train] micro_batch?)", NULL);
    FILE_ERR("max_steps", "[train]\nmax_steps = 5\n" BASE, 2, "(did you mean steps?)", NULL);
    FILE_ERR("warmup_steps", "[train]\nwarmup_steps = 5\n" BASE, 2, "(did you mean warmup?)", NULL);
    FILE_ERR("weightDecay", "[train]\nweightDecay = 0.1\n" BASE, 2,
             "(did you mean weight_decay?)", NULL);
    FILE_ERR("wd", "[train]\nwd = 0.1\n" BASE, 2, "(did you mean weight_decay?)", NULL);
    FILE_ERR("grad_clip", "[train]\ngrad_clip = 1\n" BASE, 2, "(did you mean clip_norm?)", NULL);
    FILE_ERR("[training]", "[training]\nlr = 1\n" BASE, 1,
             "[training]: unknown section (did you mean [train]? known: model,", NULL);
    FILE_ERR("a key before any section, by another name", "learning_rate = 1\n" BASE, 1,
             "learning_rate: key before any [section] header (did you mean [train] lr?)", NULL);
    FILE_ERR("num_local_experts (Mixtral)", "[model]\nnum_local_experts = 8\n" BASE, 2,
             "[model] num_local_experts: unknown key in [model] (did you mean n_expert?)", NULL);
    FILE_ERR("num_experts_per_tok", "[model]\nnum_experts_per_tok = 2\n" BASE, 2,
             "(did you mean top_k?)", NULL);
    FILE_ERR("moe_intermediate_size (Qwen2-MoE)", "[model]\nmoe_intermediate_size = 64\n" BASE,
             2, "(did you mean moe_ffn_dim?)", NULL);
    FILE_ERR("decoder_sparse_step", "[model]\ndecoder_sparse_step = 2\n" BASE, 2,
             "(did you mean moe_every?)", NULL);
    FILE_ERR("router_aux_loss_coef", "[model]\nrouter_aux_loss_coef = 0.02\n" BASE, 2,
             "(did you mean moe_aux_loss?)", NULL);
    FILE_ERR("expert_model_parallel_size, in another section",
             "[model]\nexpert_model_parallel_size = 2\n" BASE, 2,
             "(did you mean [parallel] ep?)", NULL);
    SET_ERR("--set lr=", "lr=3e-4",
            "trident: --set lr=3e-4: expected section.key=value (did you mean --set train.lr=3e-4?)",
            NULL);
    SET_ERR("--set max_steps=", "max_steps=7", "(did you mean --set train.steps=7?)", NULL);
    SET_ERR("--set every= (three sections have it)", "every=5",
            "(every is a key of [checkpoint], [eval], [log]: --set SECTION.every=5)", NULL);
    SET_ERR("--set train.learning_rate=", "train.learning_rate=1",
            "trident: --set: [train] learning_rate: unknown key in [train] (did you mean lr?)", NULL);
}

/* The values a key takes, from its row: "1 to 3", ">= 1", "> 0", words. */
static void key_values(const KeyDef *k, char *buf, size_t n)
{
    const char *ge = k->flags & OPEN_MIN ? ">" : ">=", *le = k->flags & OPEN_MAX ? "<" : "<=";
    int has_max = k->type == K_INT ? k->max < 2147483647.0 : k->max < 1e300;
    switch (k->type) {
    case K_INT:
    case K_REAL:
        if (has_max && !(k->flags & (OPEN_MIN | OPEN_MAX)))
            snprintf(buf, n, "%g to %g", k->min, k->max);
        else if (has_max)
            snprintf(buf, n, "%s %g, %s %g", ge, k->min, le, k->max);
        else
            snprintf(buf, n, "%s %g", ge, k->min);
        break;
    case K_SEED: snprintf(buf, n, "an integer"); break;
    case K_BOOL: snprintf(buf, n, "%strue, false", k->flags & AUTO_BOOL ? "auto, " : ""); break;
    case K_RECOMPUTE: snprintf(buf, n, "none, full, every:K"); break;
    case K_PATH: snprintf(buf, n, "a path"); break;
    case K_ENUM: {
        size_t len = 0;
        buf[0] = '\0';
        for (int i = 0; k->words[i]; i++)
            len += (size_t)snprintf(buf + len, len < n ? n - len : 0, "%s%s", i ? ", " : "", k->words[i]);
        break;
    }
    }
}

/* doc/guide.md's table of every key's default, made from the key table;
 * a default of auto says what it becomes. */
static void defaults_table(FILE *out)
{
    char values[256];
    fputs("| key | default | values |\n|---|---|---|\n", out);
    for (int i = 0; i < config_key_count(); i++) {
        const KeyDef *k = &config_keys[i];
        key_values(k, values, sizeof values);
        /* a boolean's words already name auto */
        const char *rest = k->auto_is && !strncmp(values, "auto, ", 6) ? values + 6 : values;
        fprintf(out, "| `[%s] %s` | %s%s%s", k->section, k->name, k->def[0] ? "`" : "",
                k->def[0] ? k->def : "(empty)", k->def[0] ? "`" : "");
        if (k->auto_is)
            fprintf(out, ": %s | auto, %s%s |\n", k->auto_is, rest,
                    k->type == K_PATH ? " (empty: none)" : "");
        else
            fprintf(out, " | %s |\n", values);
    }
}

/* The guide's table is defaults_table's, between its two markers. */
static void test_defaults_table(void)
{
    static const char begin[] = "<!-- defaults: `tests/t_config --defaults-table` writes this table -->\n",
                      end[] = "<!-- end of the defaults -->";
    const char *dir = getenv("TRI_SRCDIR");
    char path[1024], *want = NULL, *doc = NULL;
    size_t want_len = 0, doc_len = 0;
    snprintf(path, sizeof path, "%s/doc/guide.md", dir ? dir : ".");
    FILE *f = fopen(path, "r"), *w = open_memstream(&want, &want_len);
    defaults_table(w);
    fclose(w);
    if (f) {
        doc = malloc(1 << 20);
        doc_len = fread(doc, 1, (1 << 20) - 1, f);
        doc[doc_len] = '\0';
        fclose(f);
    }
    char *from = doc ? strstr(doc, begin) : NULL, *to = from ? strstr(from, end) : NULL;
    int same = to && (size_t)(to - from) == strlen(begin) + want_len &&
               !strncmp(from + strlen(begin), want, want_len);
    tap_ok(same, "%s holds every key's default as the key table has it (%d keys)%s", path,
           config_key_count(), same ? "" : ": run tests/t_config --defaults-table");
    free(want);
    free(doc);
}

/* The start-up print: only the keys whose value is not the default. */
static void test_changed_keys(void)
{
    static Config c;
    char text[16384];
    config_defaults(&c);
    int none = config_to_ini_changed(&c, text, sizeof text);
    config_set(&c, "data", "train", "x.txt", "test", NULL);
    config_to_ini_changed(&c, text, sizeof text);
    tap_ok(none == 0 && !strcmp(text, "[data]\ntrain = x.txt\n"),
           "the keys not at their defaults: none, then [data] train alone");
    Outcome o = run("[model]\narch = llama\n" BASE, NULL, 0, &c);
    config_to_ini_changed(&c, text, sizeof text);
    tap_ok(o.rc == 0 && !strcmp(text, "[model]\narch = llama\n\n[data]\ntrain = data.txt\n"),
           "llama's untied head is its default, not a change");
    tap_diag("%s", text);
    outcome_free(&o);
    int off = config_off(&c, text, sizeof text);
    tap_ok(off == 2 && !strcmp(text, "a metrics file ([log] metrics, or [checkpoint] dir for one "
                                     "inside it), checkpoints ([checkpoint] dir)"),
           "without a checkpoint dir the defaults leave off metrics and checkpoints: %s", text);
    config_set(&c, "eval", "every", "0", "test", NULL);
    config_set(&c, "log", "sample_tokens", "0", "test", NULL);
    off = config_off(&c, text, sizeof text);
    tap_ok(off == 4 && !strcmp(text, "validation ([eval] every), a metrics file ([log] metrics, or "
                                     "[checkpoint] dir for one inside it), checkpoints "
                                     "([checkpoint] dir), a sample at the end ([log] sample_tokens)"),
           "every = 0 and sample_tokens = 0 are listed as off: %s", text);
}

/* A config that sets only the model and the data (and a checkpoint dir,
 * as the guide's corpus.ini) gets what tiny.ini's run has: validation, a
 * metrics file beside the checkpoints, a sample at the end; set empty or
 * 0, each is off. */
/* The config of the overrides ov (one of them `parallel.KEY=2`) loads
 * with the default sample off, and the note of what is off names KEY. */
static void default_sample_off(const char *const *ov, int n, const char *key)
{
    static Config c;
    char text[16384], want[256];
    Outcome o = run(BASE, ov, n, &c);
    config_off(&c, text, sizeof text);
    snprintf(want, sizeof want, "a sample at the end ([log] sample_tokens; none by default here: "
             "generation needs [parallel] %s = 1 (this config's is 2)", key);
    tap_ok(o.rc == 0 && c.log.sample_tokens == 0 && strstr(text, want),
           "%s = 2: the default sample falls back to none, with a note naming %s: %s", key, key,
           text);
    outcome_free(&o);
}

static void test_run_defaults(void)
{
    static Config c;
    char text[16384], none[512];
    Outcome o = run("[model]\nn_layer = 2\n[checkpoint]\ndir = runs/x/\n" BASE, NULL, 0, &c);
    int changed = config_to_ini_changed(&c, text, sizeof text);
    tap_ok(o.rc == 0 && c.eval.every == 100 && !strcmp(c.log.metrics, "runs/x/metrics.jsonl") &&
           c.log.sample_tokens == SAMPLE_TOKENS_DEFAULT && config_off(&c, none, sizeof none) == 0 &&
           changed > 0 && !strstr(text, "metrics") && !strstr(text, "sample_tokens") &&
           round_trips(&c),
           "model and data alone: validation every 100 steps, metrics.jsonl in the checkpoint "
           "dir, a %d-token sample; none of them printed as a change", SAMPLE_TOKENS_DEFAULT);
    tap_diag("%s", text);
    outcome_free(&o);

    o = run("[eval]\nevery = 0\n[log]\nmetrics =\nsample_tokens = 0\n[checkpoint]\ndir = ck\n"
            BASE, NULL, 0, &c);
    config_to_ini_changed(&c, text, sizeof text);
    int off = config_off(&c, text + 8192, 8192);
    tap_ok(o.rc == 0 && c.eval.every == 0 && !c.log.metrics[0] && c.log.sample_tokens == 0 &&
           strstr(text, "[eval]\nevery = 0\n") && strstr(text, "metrics = \nsample_tokens = 0\n") &&
           off == 3 && !strcmp(text + 8192, "validation ([eval] every), a metrics file ([log] metrics), "
                                            "a sample at the end ([log] sample_tokens)"),
           "every = 0, metrics = (empty) and sample_tokens = 0 turn each off, with a dir too: %s",
           text + 8192);
    outcome_free(&o);

    const char *const autos[] = { "log.metrics=auto", "log.sample_tokens=auto",
                                  "checkpoint.dir=elsewhere" };
    o = run("[log]\nmetrics = m.jsonl\nsample_tokens = 7\n" BASE, autos, 3, &c);
    tap_ok(o.rc == 0 && !strcmp(c.log.metrics, "elsewhere/metrics.jsonl") &&
           c.log.sample_tokens == SAMPLE_TOKENS_DEFAULT,
           "auto, named, asks for the default (--set log.metrics=auto follows the --set dir)");
    outcome_free(&o);

    /* the default sample where generation cannot run: off, and said why;
     * asked for, it is today's error (doc/errors.md, 195) */
    const char *const sp[] = { "parallel.tp=2", "parallel.sequence_parallel=true",
                               "model.seq_len=15", "train.micro_batch=2" };
    o = run(BASE, sp, 4, &c);
    off = config_off(&c, text, sizeof text);
    tap_ok(o.rc == 0 && c.log.sample_tokens == 0 &&
           strstr(text, "a sample at the end ([log] sample_tokens; none by default here: generation "
                        "with sequence_parallel needs [model] seq_len (15) divisible by tp (2))"),
           "the default sample falls back to none, with a note, where sequence_parallel cannot "
           "generate: %s", text);
    outcome_free(&o);
    o = run("[log]\nsample_tokens = 200\n" BASE, sp, 4, &c);
    tap_ok(o.rc != 0 && o.msg && strstr(o.msg, "[log] sample_tokens = 200: generation with "
                                               "sequence_parallel needs [model] seq_len (15)"),
           "an explicit sample_tokens there is still refused, naming the key");
    tap_diag("%s", o.msg ? o.msg : "");
    outcome_free(&o);
    /* context parallelism cuts every row, and expert parallelism splits
     * the experts generation would need: no default sample, said why */
    const char *const cp[] = { "parallel.cp=2" };
    default_sample_off(cp, 1, "cp");
    const char *const ep[] = { "model.arch=llama", "model.n_expert=4", "parallel.ep=2" };
    default_sample_off(ep, 3, "ep");

    /* a dir so long that dir/metrics.jsonl would not fit a path */
    static char ini[CONFIG_PATH_MAX + 256];
    char dir[CONFIG_PATH_MAX];
    memset(dir, 'd', sizeof dir - 1);
    dir[sizeof dir - 1] = '\0';
    snprintf(ini, sizeof ini, "[checkpoint]\ndir = %s\n" BASE, dir);
    o = run(ini, NULL, 0, &c);
    tap_ok(o.rc != 0 && o.msg && strstr(o.msg, "[log] metrics = auto: [checkpoint] dir is too long"),
           "a checkpoint dir too long to hold metrics.jsonl is refused, naming [log] metrics");
    outcome_free(&o);
}

static void test_missing_file(void)
{
    static Config c;
    char *msg = NULL;
    size_t len = 0;
    FILE *err = open_memstream(&msg, &len);
    int rc = config_load(&c, "/nonexistent/nofile.ini", NULL, 0, err);
    fclose(err);
    tap_ok(rc != 0 && !strcmp(msg, "trident: cannot read config /nonexistent/nofile.ini: "
                                   "No such file or directory\n"),
           "missing config file");
    tap_diag("%.*s", (int)(len ? len - 1 : 0), msg);
    free(msg);

    msg = NULL;
    err = open_memstream(&msg, &len);
    rc = config_load(&c, "/", NULL, 0, err);
    fclose(err);
    tap_ok(rc != 0 && one_line(msg, len) && strstr(msg, "cannot read config /: Is a directory"),
           "a directory as config file");
    tap_diag("%.*s", (int)(len ? len - 1 : 0), msg);
    free(msg);
}

/* config_parse_text: what a checkpoint's stored config goes through. */
static void test_parse_text(void)
{
    static Config c, full;
    static char ini[1 << 16];
    char *msg = NULL;
    size_t len = 0;
    config_defaults(&c);
    FILE *err = open_memstream(&msg, &len);
    int rc = config_parse_text(&c, "[model]\nn_layer = 2\n[train]\nlr = 0.5\n", "mem", err);
    fclose(err);
    tap_ok(rc == 0 && len == 0 && c.model.n_layer == 2 && c.train.lr == 0.5 &&
           c.model.n_embd == 128 && !c.source[0],
           "config_parse_text sets the keys it names and leaves the others");
    free(msg);

    Outcome o = run(FULL, NULL, 0, &full);
    config_to_ini(&full, ini, sizeof ini);
    config_defaults(&c);
    rc = config_parse_text(&c, ini, "mem", stderr);
    tap_ok(o.rc == 0 && rc == 0 && same_config(&c, &full),
           "config_parse_text of config_to_ini's text gives the same Config");
    outcome_free(&o);

    static const struct {
        const char *text, *want;
    } bad[] = {
        { "[model]\nn_layer = 2\n\n; a comment\nn_embd = many\n",
          "trident: stored:5: [model] n_embd = many: " },
        { "[model]\nn_layer = 2\nnot ini\n",
          "trident: stored:3: syntax error in \"not ini\"" },
        { "[model]\nn_layer = 2\n[modle]\n",
          "trident: stored:3: [modle]: unknown section" },
        { "[model]\nn_layer = 2\nn_layer = 3\n",
          "trident: stored:3: [model] n_layer = 3: set twice (first on line 2)" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        msg = NULL;
        len = 0;
        config_defaults(&c);
        err = open_memstream(&msg, &len);
        rc = config_parse_text(&c, bad[i].text, "stored", err);
        fclose(err);
        tap_ok(rc != 0 && one_line(msg, len) && !strncmp(msg, bad[i].want, strlen(bad[i].want)),
               "config_parse_text reports a bad line with its number: %s", bad[i].want);
        tap_diag("%.*s", (int)(len ? len - 1 : 0), msg ? msg : "");
        free(msg);
    }
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "--defaults-table")) {
        defaults_table(stdout);
        return 0;
    }
    tap_init(&argc, &argv);
    tap_plan(151);
    test_defaults();
    test_builtin();
    test_full_file();
    test_moe_stored();
    test_overrides();
    test_syntax_variants();
    test_file_errors();
    test_value_errors();
    test_rule_errors();
    test_set_errors();
    test_aliases();
    test_changed_keys();
    test_run_defaults();
    test_defaults_table();
    test_missing_file();
    test_parse_text();
    return tap_done();
}
