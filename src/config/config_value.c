/*
 * config_value.c - a key's value as text: the parsers of each type (int,
 * seed, real, bool, enum word, path, recompute), the range and path
 * checks, and the printer that writes a value back so that it parses to
 * the same bits (config_to_ini's round trip). Each works on one row of the
 * key table and one field of Config; which keys exist is config_keys.c's,
 * how errors read is config_message.c's. Setting a key by its name, the
 * one entry that both --set (config_load.c) and the INI loader (config_ini.c)
 * use, is here too: a name lookup, then a parse.
 */
#include "config_value.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "config_message.h"

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

/* "expected one of fp32, bf16, fp16" to why; returns 1. */
static int expected_words(const char *const *words, char *why, size_t n)
{
    ConfigText t = { why, n, 0 };
    const char *sep = "";
    config_put(&t, "expected one of ");
    for (int i = 0; words[i]; i++)
        if (words[i][0]) {
            config_put(&t, "%s%s", sep, words[i]);
            sep = ", ";
        }
    return 1;
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

void config_value_format(const KeyDef *k, const Config *cfg, char *buf, size_t n)
{
    const void *p = (const char *)cfg + k->offset;
    switch (k->type) {
    case K_INT:
        if (*(const int *)p == -1 && (k->flags & AUTO_INT))
            snprintf(buf, n, "auto");
        else
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
        if (strlen(s) == strlen(yes[i]) && config_edit_distance(s, yes[i]) == 0) {
            *out = 1;
            return 0;
        }
        if (strlen(s) == strlen(no[i]) && config_edit_distance(s, no[i]) == 0) {
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

void config_value_set_text(void *field, size_t size, const char *s)
{
    memset(field, 0, size);     /* zero tail: configs compare with memcmp */
    memcpy(field, s, strlen(s));
}

int config_value_parse(const KeyDef *k, const char *text, Config *cfg, char *why, size_t n)
{
    void *p = (char *)cfg + k->offset;
    long long i;
    double d;
    int w;
    switch (k->type) {
    case K_INT:
        if ((k->flags & AUTO_INT) && !strcmp(text, "auto")) {
            *(int *)p = -1;
            return 0;
        }
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
        if (w < 0)
            return expected_words(k->words, why, n);
        *(int *)p = w;
        return 0;
    case K_PATH:
        if (check_path(k, text, why, n))
            return 1;
        config_value_set_text(p, k->size, text);
        return 0;
    case K_RECOMPUTE:
        return parse_recompute(text, &cfg->train, why, n);
    }
    return 1;
}

int config_value_check(const Config *cfg, const KeyDef *k, char *why, size_t n)
{
    const void *p = (const char *)cfg + k->offset;
    switch (k->type) {
    case K_INT:
        if (*(const int *)p == -1 && (k->flags & AUTO_INT))
            return 0;
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
        return expected_words(k->words, why, n);
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

/* ---- a key named by section and name: config_set, the INI loader ---- */

int config_set_key(Config *cfg, const char *section, const char *key, const char *value,
                   char *msg, size_t n)
{
    char why[CONFIG_MSG_MAX];
    if (!*section) {
        config_describe_orphan_key(msg, n, key);
        return 1;
    }
    if (!config_section_known(section)) {
        config_describe_unknown_section(msg, n, section);
        return 1;
    }
    const KeyDef *k = config_key_find(section, key);
    if (!k) {
        config_describe_unknown_key(msg, n, section, key);
        return 1;
    }
    if (!config_value_parse(k, value, cfg, why, sizeof why))
        return 0;
    /* libinih knows only ";" inline comments: "lr = 1e-3 # peak" is one value */
    if (k->type != K_PATH && strchr(value, '#')) {
        size_t len = strlen(why);
        snprintf(why + len, sizeof why - len, " (inline comments start with \" ;\", not \"#\")");
    }
    config_describe(msg, n, section, key, value, why);
    return 1;
}

int config_section_unknown(const char *section, char *msg, size_t n)
{
    if (config_section_known(section))
        return 0;
    config_describe_unknown_section(msg, n, section);
    return 1;
}
