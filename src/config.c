/*
 * config.c - the run's configuration: the table of every key, defaults,
 * setting a key from text, validation, and the config as INI text; plus
 * config_load, which puts them together with the INI reader (config_ini.c)
 * and the --set overrides.
 *
 * One table, KEYS, describes every key: section, name, type, where it lives
 * in Config, its default, its range or its words. Defaults, parsing
 * (config_set), checking (config_validate) and printing (config_to_ini) all
 * walk that table, so a key is added in one row and can never be parsed but
 * left out of the config text a checkpoint stores.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "arch_sizes.h"
#include "config_ini.h"
#include "config_keys.h"

#define BUILTIN_NAME "(built-in tiny.ini)"
#define MSG_MAX 1024                  /* one error line */
#define SHOW_MAX 72                   /* longer names and values are elided */
#define VALUE_MAX (CONFIG_PATH_MAX + 32)

typedef enum { K_INT, K_SEED, K_REAL, K_BOOL, K_ENUM, K_PATH, K_RECOMPUTE } KeyType;

/* LLAMA_KEY: arch and the keys only llama reads; config_to_ini leaves
 * them out of a gpt2 config (where they must hold their defaults), so a
 * gpt2 run's stored config is what it was before llama came. */
/* AUTO_BOOL: a boolean that also takes "auto" (TIE_AUTO), which
 * config_load resolves by arch. */
/* OMIT_UNSET: config_to_ini leaves the key out while it holds its
 * default, so the stored config (and its checksum) of a run that does not
 * use it is what it was before the key came (vocab_used, init_from,
 * tokenizer). */
enum { OPEN_MIN = 1, OPEN_MAX = 2, NONEMPTY = 4, LLAMA_KEY = 8, AUTO_BOOL = 16, OMIT_UNSET = 32 };

typedef struct {
    const char *section, *name;
    KeyType type;
    size_t offset, size;        /* of the field in Config */
    const char *def;            /* default, as text: config_defaults parses it */
    double min, max;            /* K_INT, K_REAL: the allowed range */
    unsigned flags;             /* OPEN_*: bound excluded; NONEMPTY: path required */
    const char *const *words;   /* K_ENUM: value i is words[i] */
} KeyDef;

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
static const KeyDef KEYS[] = {
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
    { KEY("model", "tie_embeddings", K_BOOL, model.tie_embeddings, "auto"), .flags = AUTO_BOOL },
    { KEY("model", "arch", K_ENUM, model.arch, "gpt2"), .words = ARCH_WORDS, .flags = LLAMA_KEY },
    { KEY("model", "n_kv_head", K_INT, model.n_kv_head, "0"), .min = 0, .max = INT_MAX,
      .flags = LLAMA_KEY },
    { KEY("model", "ffn_dim", K_INT, model.ffn_dim, "0"), .min = 0, .max = INT_MAX,
      .flags = LLAMA_KEY },
    REAL_KEY("model", "norm_eps", model.norm_eps, "1e-5", 0, 1, OPEN_MIN | LLAMA_KEY),
    REAL_KEY("model", "rope_theta", model.rope_theta, "10000", 1, INFINITY, OPEN_MIN | LLAMA_KEY),

    INT_KEY("parallel", "dp", parallel.dp, "0", 0, INT_MAX),
    INT_KEY("parallel", "pp", parallel.pp, "1", 1, INT_MAX),
    INT_KEY("parallel", "tp", parallel.tp, "1", 1, INT_MAX),
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
    REAL_KEY("train", "weight_decay", train.weight_decay, "0.1", 0, INFINITY, 0),
    REAL_KEY("train", "beta1", train.beta1, "0.9", 0, 1, OPEN_MAX),
    REAL_KEY("train", "beta2", train.beta2, "0.95", 0, 1, OPEN_MAX),
    REAL_KEY("train", "eps", train.eps, "1e-8", 0, INFINITY, OPEN_MIN),
    REAL_KEY("train", "clip_norm", train.clip_norm, "1.0", 0, INFINITY, 0),
    REAL_KEY("train", "clip_value", train.clip_value, "0", 0, INFINITY, 0),
    ENUM_KEY("train", "precision", train.precision, "fp32", PRECISION_WORDS),
    /* also sets train.recompute_every: see parse_recompute */
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

    INT_KEY("eval", "every", eval.every, "0", 0, INT_MAX),
    INT_KEY("eval", "batches", eval.batches, "4", 1, INT_MAX),
    INT_KEY("eval", "patience", eval.patience, "0", 0, INT_MAX),
    REAL_KEY("eval", "min_delta", eval.min_delta, "0", 0, INFINITY, 0),

    INT_KEY("log", "every", log.every, "1", 1, INT_MAX),
    PATH_KEY("log", "metrics", log.metrics, "", 0),
    INT_KEY("log", "sample_tokens", log.sample_tokens, "0", 0, INT_MAX),
    { KEY("log", "profile", K_BOOL, log.profile, "false") },

    REAL_KEY("fault", "timeout", fault.timeout, "600", 0, 604800, 0),
};
#define N_KEYS (sizeof KEYS / sizeof KEYS[0])

/* snprintf-style appender: keeps counting once the buffer is full. */
typedef struct {
    char *buf;
    size_t size, len;
} Text;

static void put(Text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(Text *t, const char *fmt, ...)
{
    size_t room = t->len < t->size ? t->size - t->len : 0;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(room ? t->buf + t->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0)
        t->len += (size_t)n;
}

/* Error lines stay readable when a value is a 1000-character path: long
 * strings are shown by their head and tail. buf holds SHOW_MAX + 1. */
static const char *shown(const char *s, char *buf)
{
    size_t len = strlen(s);
    if (len <= SHOW_MAX)
        return s;
    snprintf(buf, SHOW_MAX + 1, "%.40s...%s", s, s + len - (SHOW_MAX - 43));
    return buf;
}

int config_report(FILE *err, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        fputs("trident: ", err);
        vfprintf(err, fmt, ap);
        fputc('\n', err);
        fflush(err);
        va_end(ap);
    }
    return 1;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    return s;
}

/* Levenshtein distance, case-insensitive; short names only. */
static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), row[64];
    if (la >= 64 || lb >= 64)
        return (size_t)-1;
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
            size_t best = diag + cost;
            if (row[j] + 1 < best)
                best = row[j] + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

static const KeyDef *find_key(const char *section, const char *name)
{
    for (size_t i = 0; i < N_KEYS; i++)
        if (!strcmp(KEYS[i].section, section) && !strcmp(KEYS[i].name, name))
            return &KEYS[i];
    return NULL;
}

static int section_known(const char *section)
{
    for (size_t i = 0; i < N_KEYS; i++)
        if (!strcmp(KEYS[i].section, section))
            return 1;
    return 0;
}

static int word_index(const char *const *words, const char *s)
{
    for (int i = 0; words[i]; i++)
        if (words[i][0] && !strcmp(words[i], s))
            return i;
    return -1;
}

/* Whether v is the value of a word in the list. */
static int word_valid(const char *const *words, int v)
{
    for (int i = 0; words[i]; i++)
        if (i == v)
            return words[i][0] != '\0';
    return 0;
}

static void list_words(Text *t, const char *const *words)
{
    const char *sep = "";
    for (int i = 0; words[i]; i++)
        if (words[i][0]) {
            put(t, "%s%s", sep, words[i]);
            sep = ", ";
        }
}

/* "model, parallel, ..." in table order; "in" restricts to one section's
 * keys, otherwise the sections are listed. */
static void list_names(Text *t, const char *in)
{
    const char *prev = NULL;
    for (size_t i = 0; i < N_KEYS; i++) {
        const KeyDef *k = &KEYS[i];
        if (in && strcmp(k->section, in))
            continue;
        if (!in && prev && !strcmp(prev, k->section))
            continue;
        put(t, "%s%s", prev ? ", " : "", in ? k->name : k->section);
        prev = k->section;
    }
}

/* "[section] key = value: why", or "[section] key: why" for an empty value. */
static void describe(char *msg, size_t n, const char *section, const char *key,
                     const char *value, const char *why)
{
    char b1[SHOW_MAX + 1], b2[SHOW_MAX + 1], b3[SHOW_MAX + 1];
    Text t = { msg, n, 0 };
    put(&t, "[%s] %s", shown(section, b1), shown(key, b2));
    if (value && *value)
        put(&t, " = %s", shown(value, b3));
    put(&t, ": %s", why);
}

/* Sections that have a key of this name: "[eval], [log]". */
static int sections_with(Text *t, const char *key)
{
    int found = 0;
    for (size_t i = 0; i < N_KEYS; i++)
        if (!strcmp(KEYS[i].name, key))
            put(t, "%s[%s]", found++ ? ", " : "", KEYS[i].section);
    return found;
}

static void describe_unknown_section(char *msg, size_t n, const char *section)
{
    char b[SHOW_MAX + 1];
    Text t = { msg, n, 0 };
    put(&t, "[%s]: unknown section (known: ", shown(section, b));
    list_names(&t, NULL);
    put(&t, ")");
}

/* A key above the first [section] header. */
static void describe_orphan_key(char *msg, size_t n, const char *key)
{
    char b[SHOW_MAX + 1], where[MSG_MAX];
    Text t = { msg, n, 0 }, w = { where, sizeof where, 0 };
    int found = sections_with(&w, key);
    put(&t, "%s: key before any [section] header", shown(key, b));
    if (found)
        put(&t, " (%s is in %s)", shown(key, b), where);
}

/* Unknown key: say where it lives if it is another section's key, else
 * suggest the nearest key of this section, else list them all. */
static void describe_unknown_key(char *msg, size_t n, const char *section, const char *key)
{
    char b[SHOW_MAX + 1], why[MSG_MAX], where[MSG_MAX];
    Text t = { why, sizeof why, 0 }, w = { where, sizeof where, 0 };
    const KeyDef *near = NULL;
    size_t best = (size_t)-1;
    for (size_t i = 0; i < N_KEYS; i++) {
        size_t d = strcmp(KEYS[i].section, section) ? best : edit_distance(key, KEYS[i].name);
        if (d < best) {
            best = d;
            near = &KEYS[i];
        }
    }
    put(&t, "unknown key in [%s] (", section);
    if (sections_with(&w, key)) {
        put(&t, "%s is in %s", shown(key, b), where);
    } else if (near && best <= 2 && 2 * best < strlen(key)) {
        /* a typo: at most 2 edits, and fewer than half the name */
        put(&t, "did you mean %s?", near->name);
    } else {
        put(&t, "known: ");
        list_names(&t, section);
    }
    put(&t, ")");
    describe(msg, n, section, key, NULL, why);
}

static void format_real(double v, char *buf, size_t n)
{
    /* the shortest of %.15g..%.17g that reads back to the same double, so
     * 0.1 prints as 0.1 and every value round-trips exactly */
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(buf, n, "%.*g", digits, v);
        if (strtod(buf, NULL) == v)
            return;
    }
}

static size_t field_len(const char *s, size_t size)
{
    const char *end = memchr(s, '\0', size);
    return end ? (size_t)(end - s) : size;
}

/* The key's current value as the text config_set would accept. */
static void format_value(const KeyDef *k, const Config *cfg, char *buf, size_t n)
{
    const void *p = (const char *)cfg + k->offset;
    switch (k->type) {
    case K_INT:
        snprintf(buf, n, "%d", *(const int *)p);
        break;
    case K_SEED:
        snprintf(buf, n, "%llu", *(const unsigned long long *)p);
        break;
    case K_REAL:
        format_real(*(const double *)p, buf, n);
        break;
    case K_BOOL:
        if (*(const int *)p == TIE_AUTO && (k->flags & AUTO_BOOL))
            snprintf(buf, n, "auto");
        else
            snprintf(buf, n, "%s", *(const int *)p ? "true" : "false");
        break;
    case K_ENUM: {
        int v = *(const int *)p;
        if (word_valid(k->words, v))
            snprintf(buf, n, "%s", k->words[v]);
        else
            snprintf(buf, n, "%d", v);
        break;
    }
    case K_PATH:
        snprintf(buf, n, "%.*s", (int)field_len(p, k->size), (const char *)p);
        break;
    case K_RECOMPUTE:
        if (cfg->train.recompute == RECOMPUTE_EVERY)
            snprintf(buf, n, "every:%d", cfg->train.recompute_every);
        else
            snprintf(buf, n, "%s", cfg->train.recompute == RECOMPUTE_FULL ? "full" : "none");
        break;
    }
}

/* Why v is outside the key's range, or 0 when it is inside. */
static int check_range(const KeyDef *k, double v, char *why, size_t n)
{
    int low = (k->flags & OPEN_MIN) ? !(v > k->min) : !(v >= k->min);
    int high = (k->flags & OPEN_MAX) ? !(v < k->max) : !(v <= k->max);
    if (!low && !high)
        return 0;
    int bounded = k->type == K_INT ? k->max < INT_MAX : isfinite(k->max);
    if (!bounded)
        snprintf(why, n, "must be %s %g", (k->flags & OPEN_MIN) ? ">" : ">=", k->min);
    else if (k->type == K_INT)
        snprintf(why, n, "must be between %g and %g", k->min, k->max);
    else
        snprintf(why, n, "must be in %c%g, %g%c", (k->flags & OPEN_MIN) ? '(' : '[', k->min,
                 k->max, (k->flags & OPEN_MAX) ? ')' : ']');
    return 1;
}

static int parse_int(const char *s, long long *out, char *why, size_t n)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || isspace((unsigned char)*s)) {
        snprintf(why, n, "not an integer");
        return 1;
    }
    if (errno == ERANGE || v < INT_MIN || v > INT_MAX) {
        snprintf(why, n, "integer overflow (the range is %d..%d)", INT_MIN, INT_MAX);
        return 1;
    }
    *out = v;
    return 0;
}

static int parse_seed(const char *s, unsigned long long *out, char *why, size_t n)
{
    char *end;
    errno = 0;
    /* strtoull would quietly wrap "-1" to 2^64-1: digits only */
    unsigned long long v = isdigit((unsigned char)*s) ? strtoull(s, &end, 10) : 0;
    if (!isdigit((unsigned char)*s) || *end) {
        snprintf(why, n, "not an unsigned integer");
        return 1;
    }
    if (errno == ERANGE) {
        snprintf(why, n, "integer overflow (the range is 0..%llu)", (unsigned long long)-1);
        return 1;
    }
    *out = v;
    return 0;
}

static int parse_real(const char *s, double *out, char *why, size_t n)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || isspace((unsigned char)*s)) {
        snprintf(why, n, "not a number");
        return 1;
    }
    if (!isfinite(v)) {
        snprintf(why, n, "not a finite number");
        return 1;
    }
    *out = v;
    return 0;
}

static int parse_bool(const char *s, int *out, char *why, size_t n)
{
    static const char *const yes[] = { "1", "true", "yes", "on" };
    static const char *const no[] = { "0", "false", "no", "off" };
    for (int i = 0; i < 4; i++) {
        /* case-insensitive: edit distance 0 with equal lengths */
        if (strlen(s) == strlen(yes[i]) && edit_distance(s, yes[i]) == 0) {
            *out = 1;
            return 0;
        }
        if (strlen(s) == strlen(no[i]) && edit_distance(s, no[i]) == 0) {
            *out = 0;
            return 0;
        }
    }
    snprintf(why, n, "not a boolean (true/false, yes/no, on/off, 1/0)");
    return 1;
}

/* none | full | every:K: checkpoint activations of every K-th layer. */
static int parse_recompute(const char *s, TrainConfig *train, char *why, size_t n)
{
    long long every = 0;
    RecomputeKind kind;
    if (!strcmp(s, "none")) {
        kind = RECOMPUTE_NONE;
    } else if (!strcmp(s, "full")) {
        kind = RECOMPUTE_FULL;
    } else if (!strncmp(s, "every:", 6)) {
        if (parse_int(s + 6, &every, why, n) || every < 1) {
            snprintf(why, n, "K of every:K must be an integer >= 1");
            return 1;
        }
        kind = RECOMPUTE_EVERY;
    } else {
        snprintf(why, n, "expected none, full or every:K (K >= 1)");
        return 1;
    }
    train->recompute = kind;
    train->recompute_every = (int)every;
    return 0;
}

/* A path must read back the same from config_to_ini's output. */
static int check_path(const KeyDef *k, const char *s, char *why, size_t n)
{
    size_t len = strlen(s);
    if (len >= k->size) {
        snprintf(why, n, "path longer than %zu characters", k->size - 1);
        return 1;
    }
    if ((k->flags & NONEMPTY) && len == 0) {
        snprintf(why, n, "must not be empty (auto, none or a checkpoint path)");
        return 1;
    }
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '\n' || s[i] == '\r') {
            snprintf(why, n, "contains a line break");
            return 1;
        }
        if (s[i] == ';' && (i == 0 || isspace((unsigned char)s[i - 1]))) {
            snprintf(why, n, "has a ';' first or after a blank, which INI reads as a comment");
            return 1;
        }
    }
    if (len && (isspace((unsigned char)s[0]) || isspace((unsigned char)s[len - 1]))) {
        snprintf(why, n, "has leading or trailing blanks, which INI drops");
        return 1;
    }
    return 0;
}

static void set_text(void *field, size_t size, const char *s)
{
    memset(field, 0, size);     /* zero tail: configs compare with memcmp */
    memcpy(field, s, strlen(s));
}

/* Parses text into the key's field. On failure leaves cfg unchanged, writes
 * the reason to why and returns 1. */
static int parse_value(const KeyDef *k, const char *text, Config *cfg, char *why, size_t n)
{
    void *p = (char *)cfg + k->offset;
    long long i;
    double d;
    int w;
    switch (k->type) {
    case K_INT:
        if (parse_int(text, &i, why, n) || check_range(k, (double)i, why, n))
            return 1;
        *(int *)p = (int)i;
        return 0;
    case K_SEED:
        return parse_seed(text, p, why, n);
    case K_REAL:
        if (parse_real(text, &d, why, n) || check_range(k, d, why, n))
            return 1;
        *(double *)p = d;
        return 0;
    case K_BOOL:
        if ((k->flags & AUTO_BOOL) && !strcmp(text, "auto")) {
            *(int *)p = TIE_AUTO;
            return 0;
        }
        return parse_bool(text, p, why, n);
    case K_ENUM:
        w = word_index(k->words, text);
        if (w < 0) {
            Text t = { why, n, 0 };
            put(&t, "expected one of ");
            list_words(&t, k->words);
            return 1;
        }
        *(int *)p = w;
        return 0;
    case K_PATH:
        if (check_path(k, text, why, n))
            return 1;
        set_text(p, k->size, text);
        return 0;
    case K_RECOMPUTE:
        return parse_recompute(text, &cfg->train, why, n);
    }
    return 1;
}

/* Sets one key; on failure writes the error (without "trident: origin: ")
 * to msg and returns 1. */
static int set_key(Config *cfg, const char *section, const char *key, const char *value,
                   char *msg, size_t n)
{
    char why[MSG_MAX];
    if (!*section) {
        describe_orphan_key(msg, n, key);
        return 1;
    }
    if (!section_known(section)) {
        describe_unknown_section(msg, n, section);
        return 1;
    }
    const KeyDef *k = find_key(section, key);
    if (!k) {
        describe_unknown_key(msg, n, section, key);
        return 1;
    }
    if (!parse_value(k, value, cfg, why, sizeof why))
        return 0;
    /* libinih knows only ";" inline comments: "lr = 1e-3 # peak" is one value */
    if (k->type != K_PATH && strchr(value, '#')) {
        size_t len = strlen(why);
        snprintf(why + len, sizeof why - len, " (inline comments start with \" ;\", not \"#\")");
    }
    describe(msg, n, section, key, value, why);
    return 1;
}

int config_set(Config *cfg, const char *section, const char *key, const char *value,
               const char *origin, FILE *err)
{
    char msg[MSG_MAX];
    if (!set_key(cfg, section, key, value, msg, sizeof msg))
        return 0;
    return config_report(err, "%s: %s", origin ? origin : "config", msg);
}

static void defaults_unresolved(Config *cfg);

/* tie_embeddings = auto: Llama unties its head, GPT-2 ties it. */
static void resolve_auto(Config *cfg)
{
    if (cfg->model.tie_embeddings == TIE_AUTO)
        cfg->model.tie_embeddings = cfg->model.arch != ARCH_LLAMA;
}

void config_defaults(Config *cfg)
{
    defaults_unresolved(cfg);
    resolve_auto(cfg);
}

/* Every key's default as the table gives it, auto left for config_load to
 * resolve once the file and the overrides have set arch. */
static void defaults_unresolved(Config *cfg)
{
    char why[MSG_MAX];
    memset(cfg, 0, sizeof *cfg);
    for (size_t i = 0; i < N_KEYS; i++) {
        if (parse_value(&KEYS[i], KEYS[i].def, cfg, why, sizeof why)) {
            /* a bad default is a bug in KEYS, not bad input */
            fprintf(stderr, "trident: bug: default of [%s] %s: %s\n", KEYS[i].section,
                    KEYS[i].name, why);
            abort();
        }
    }
}

/* Re-checks a field against its row, for configs built or changed in code
 * rather than parsed. */
static int check_key(const Config *cfg, const KeyDef *k, char *why, size_t n)
{
    const void *p = (const char *)cfg + k->offset;
    switch (k->type) {
    case K_INT:
        return check_range(k, *(const int *)p, why, n);
    case K_REAL: {
        double v = *(const double *)p;
        if (!isfinite(v)) {
            snprintf(why, n, "not a finite number");
            return 1;
        }
        return check_range(k, v, why, n);
    }
    case K_BOOL:
        if (*(const int *)p == 0 || *(const int *)p == 1
            || (*(const int *)p == TIE_AUTO && (k->flags & AUTO_BOOL)))
            return 0;
        snprintf(why, n, "must be 0 or 1");
        return 1;
    case K_ENUM: {
        int v = *(const int *)p;
        if (word_valid(k->words, v))
            return 0;
        Text t = { why, n, 0 };
        put(&t, "expected one of ");
        list_words(&t, k->words);
        return 1;
    }
    case K_PATH:
        if (field_len(p, k->size) == k->size) {
            snprintf(why, n, "path longer than %zu characters", k->size - 1);
            return 1;
        }
        return check_path(k, p, why, n);
    case K_RECOMPUTE:
        if (cfg->train.recompute == RECOMPUTE_NONE || cfg->train.recompute == RECOMPUTE_FULL)
            return 0;
        if (cfg->train.recompute == RECOMPUTE_EVERY && cfg->train.recompute_every >= 1)
            return 0;
        snprintf(why, n, "expected none, full or every:K (K >= 1)");
        return 1;
    case K_SEED:
        return 0;
    }
    return 0;
}

static int fail_key(const Config *cfg, char *msg, size_t n, const char *section,
                    const char *key, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* A cross-key rule failed: name the key the user should change. */
static int fail_key(const Config *cfg, char *msg, size_t n, const char *section,
                    const char *key, const char *fmt, ...)
{
    char value[VALUE_MAX], why[MSG_MAX];
    va_list ap;
    format_value(find_key(section, key), cfg, value, sizeof value);
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    describe(msg, n, section, key, value, why);
    return 1;
}

/* The llama keys mean nothing to gpt2: a gpt2 config that sets one
 * is refused rather than silently trained without it. Defaults are the
 * values that config_to_ini writes back, so they pass. */
static int check_gpt2_keys(const Config *c, char *msg, size_t n)
{
    const ModelConfig *m = &c->model;
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

/* Grouped-query attention and rotary embeddings constrain the heads;
 * TP splits key/value heads or replicates them (arch.h). */
static int check_llama_keys(const Config *c, char *msg, size_t n)
{
    const ModelConfig *m = &c->model;
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
static int check_rules(const Config *c, char *msg, size_t n)
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
    if (m->arch == ARCH_GPT2 ? check_gpt2_keys(c, msg, n) : check_llama_keys(c, msg, n))
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

int config_validate(const Config *cfg, FILE *err)
{
    char msg[MSG_MAX], why[MSG_MAX], value[VALUE_MAX];
    const char *origin = cfg->source[0] ? cfg->source : "config";
    for (size_t i = 0; i < N_KEYS; i++) {
        const KeyDef *k = &KEYS[i];
        if (check_key(cfg, k, why, sizeof why)) {
            format_value(k, cfg, value, sizeof value);
            describe(msg, sizeof msg, k->section, k->name, value, why);
            return config_report(err, "%.*s: %s", CONFIG_PATH_MAX, origin, msg);
        }
    }
    if (check_rules(cfg, msg, sizeof msg))
        return config_report(err, "%.*s: %s", CONFIG_PATH_MAX, origin, msg);
    return 0;
}

int config_to_ini(const Config *cfg, char *buf, size_t size)
{
    Text t = { buf, size, 0 };
    char value[VALUE_MAX];
    const char *section = NULL;
    if (size)
        buf[0] = '\0';
    for (size_t i = 0; i < N_KEYS; i++) {
        const KeyDef *k = &KEYS[i];
        if ((k->flags & LLAMA_KEY) && cfg->model.arch == ARCH_GPT2)
            continue;
        if (!section || strcmp(section, k->section)) {
            put(&t, "%s[%s]\n", section ? "\n" : "", k->section);
            section = k->section;
        }
        format_value(k, cfg, value, sizeof value);
        if ((k->flags & OMIT_UNSET) && !strcmp(value, k->def))
            continue;
        put(&t, "%s = %s\n", k->name, value);
    }
    return (int)t.len;
}

/* ---- for the INI reader, config_ini.c (config_keys.h) ---------------- */

int config_key_count(void)
{
    return (int)N_KEYS;
}

int config_key_index(const char *section, const char *key)
{
    const KeyDef *k = find_key(section, key);
    return k ? (int)(k - KEYS) : -1;
}

int config_section_unknown(const char *section, char *msg, size_t n)
{
    if (section_known(section))
        return 0;
    describe_unknown_section(msg, n, section);
    return 1;
}

int config_set_key(Config *cfg, const char *section, const char *key, const char *value,
                   char *msg, size_t n)
{
    return set_key(cfg, section, key, value, msg, n);
}

void config_describe(char *msg, size_t n, const char *section, const char *key,
                     const char *value, const char *why)
{
    describe(msg, n, section, key, value, why);
}

void config_describe_syntax(char *msg, size_t n, const char *line)
{
    char text[256], b[SHOW_MAX + 1];
    snprintf(text, sizeof text, "%s", line);
    snprintf(msg, n, "syntax error in \"%s\" (expected key = value, [section] or a ; comment)",
             shown(trim(text), b));
}

/* "section.key=value", blanks around each part ignored. */
static int apply_override(Config *cfg, const char *text, FILE *err)
{
    char b[SHOW_MAX + 1];
    size_t len = strlen(text);
    char *copy = malloc(len + 1);
    if (!copy)
        return config_report(err, "--set: out of memory");
    memcpy(copy, text, len + 1);
    char *eq = strchr(copy, '=');
    char *dot = eq ? memchr(copy, '.', (size_t)(eq - copy)) : NULL;
    int malformed = !eq || !dot, rc = 0;
    if (!malformed) {
        *eq = '\0';
        *dot = '\0';
        char *section = trim(copy), *key = trim(dot + 1), *value = trim(eq + 1);
        malformed = !*section || !*key;
        if (!malformed)
            rc = config_set(cfg, section, key, value, "--set", err);
    }
    free(copy);
    if (malformed)
        return config_report(err, "--set %s: expected section.key=value", shown(text, b));
    return rc;
}

int config_load(Config *cfg, const char *path, const char *const *overrides,
                int n_overrides, FILE *err)
{
    const char *name = path ? path : BUILTIN_NAME;
    int rc;
    defaults_unresolved(cfg);
    if (strlen(name) >= sizeof cfg->source)
        return config_report(err, "cannot read config %.64s...: path longer than %d characters", name,
                      CONFIG_PATH_MAX - 1);
    set_text(cfg->source, sizeof cfg->source, name);
    if (path)
        rc = config_parse_file(cfg, path, err);
    else
        rc = config_parse_text(cfg, config_builtin_tiny, name, err);
    if (rc)
        return rc;
    for (int i = 0; i < n_overrides; i++)
        if (apply_override(cfg, overrides[i], err))
            return 1;
    resolve_auto(cfg);
    return config_validate(cfg, err);
}
