/*
 * cli_options.c - the option parser of every command; see cli_options.h.
 *
 * A plain loop over argv rather than getopt_long: getopt keeps its place
 * in globals (optind, optarg) that each caller had to reset, reports
 * through return codes each caller turned into messages of its own, and
 * knows nothing of values, so every command repeated the same switch.
 * The reading of words below is getopt_long's (see the header), minus
 * its dependence on POSIXLY_CORRECT.
 */
#include "cli_options.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fail.h"

int cli_options_fail(FILE *err, const char *fmt, const char *arg)
{
    fputs("trident: ", err);
    fprintf(err, fmt, arg);
    fputs("\n(trident --help shows the usage)\n", err);
    return TRI_EXIT_USAGE;
}

/* The option `--name` (len bytes of name) means: the one of that name,
 * else the one it is a prefix of, as getopt_long takes them; NULL when
 * none or several are. */
static CliOption *find_long(const CliSpec *s, const char *name, size_t len)
{
    CliOption *found = NULL;
    int n = 0;
    for (int i = 0; i < s->n_options; i++) {
        CliOption *o = &s->options[i];
        if (strncmp(o->name, name, len))
            continue;
        if (o->name[len] == '\0')
            return o;
        found = o;
        n++;
    }
    return n == 1 ? found : NULL;
}

static CliOption *find_letter(const CliSpec *s, char letter)
{
    for (int i = 0; i < s->n_options; i++)
        if (letter && s->options[i].letter == letter)
            return &s->options[i];
    return NULL;
}

/* Whether s is all digits (and, for a real, '.', 'e' and signs): strtol
 * and strtod also take leading blanks, "inf", "nan" and hexadecimal, which
 * no option means. */
static int plain_number(const char *s, const char *chars)
{
    return *s && s[strspn(s, chars)] == '\0';
}

static int parse_positive(const char *s, int *out)
{
    char *end;
    if (!plain_number(s, "0123456789"))
        return 1;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < 1 || v > INT_MAX)
        return 1;
    *out = (int)v;
    return 0;
}

static int parse_real(const char *s, double most, double *out)
{
    char *end;
    if (!plain_number(s, "0123456789.eE+-"))
        return 1;
    double v = strtod(s, &end);
    if (*end || end == s || !isfinite(v) || !(v > 0) || (most > 0 && v > most))
        return 1;
    *out = v;
    return 0;
}

/* The index of s in choices, words separated by '|'. */
static int parse_choice(const char *s, const char *choices, int *out)
{
    size_t n = strlen(s);
    for (int i = 0; *choices; i++) {
        size_t len = strcspn(choices, "|");
        if (len == n && !strncmp(choices, s, n)) {
            *out = i;
            return 0;
        }
        choices += len + (choices[len] == '|');
    }
    return 1;
}

static int take(const CliOption *o, const char *value, FILE *err)
{
    int bad = 0;
    switch (o->check) {
    case CLI_TEXT: *(const char **)o->to = value; break;
    case CLI_POSITIVE: bad = parse_positive(value, o->to); break;
    case CLI_REAL: bad = parse_real(value, o->most, o->to); break;
    case CLI_CHOICE: bad = parse_choice(value, o->choices, o->to); break;
    case CLI_CUSTOM: bad = o->parse(value, o->to); break;
    }
    return bad ? cli_options_fail(err, o->invalid, value) : 0;
}

static int append(const CliOption *o, const char *value, FILE *err)
{
    if (*o->count == o->max)
        return cli_options_fail(err, o->invalid, value);
    ((const char **)o->to)[(*o->count)++] = value;
    return 0;
}

/* One option word, argv[*i], and its value; *stop set by CLI_STOP. */
static int option(const CliSpec *s, int argc, char **argv, int *i, int *seen, int *stop,
                  FILE *err)
{
    const char *word = argv[*i], *value = NULL;
    CliOption *o;
    if (word[1] == '-') {
        const char *eq = strchr(word + 2, '=');
        o = find_long(s, word + 2, eq ? (size_t)(eq - word - 2) : strlen(word + 2));
        value = eq ? eq + 1 : NULL;
    } else {
        o = word[2] ? NULL : find_letter(s, word[1]);
    }
    int flag = o && (o->takes == CLI_FLAG || o->takes == CLI_STOP);
    if (!o || (flag && value))
        return cli_options_fail(err, "unknown option '%s'", word);
    if (!flag && !value) {
        if (*i + 1 == argc)
            return cli_options_fail(err, "option '%s' needs a value", word);
        value = argv[++*i];
    }
    if (o->elsewhere) {
        char name[64];
        snprintf(name, sizeof name, "--%s", o->name);
        return cli_options_fail(err, "option '%s' does not apply to this command", name);
    }
    seen[o - s->options] = 1;
    switch (o->takes) {
    case CLI_STOP: *stop = 1; /* fall through */
    case CLI_FLAG: *(int *)o->to = 1; return 0;
    case CLI_ONE: return take(o, value, err);
    case CLI_REPEAT: return append(o, value, err);
    case CLI_WORDS:
        TRI_TRY(append(o, value, err));
        while (*i + 1 < argc && argv[*i + 1][0] != '-')
            TRI_TRY(append(o, argv[++*i], err));
        return 0;
    }
    return 0;
}

int cli_options_parse(const CliSpec *s, int argc, char **argv, FILE *err)
{
    int seen[CLI_MAX_OPTIONS] = {0}, n_positional = 0, stop = 0, options_end = 0;
    const char *unexpected = NULL;
    if (s->n_options > CLI_MAX_OPTIONS)
        return cli_options_fail(err, "%s: too many options in its table (a bug)", s->command);
    for (int i = 1; i < argc; i++) {
        const char *word = argv[i];
        if (!options_end && !strcmp(word, "--")) {
            options_end = 1;
        } else if (!options_end && word[0] == '-' && word[1]) {
            TRI_TRY(option(s, argc, argv, &i, seen, &stop, err));
            if (stop)
                return 0;
        } else if (n_positional < s->n_positional) {
            *s->positional[n_positional++] = word;
        } else if (!unexpected) {
            unexpected = word;
        }
    }
    if (unexpected)
        return cli_options_fail(err, "unexpected argument '%s'", unexpected);
    if (n_positional < s->n_positional)
        return cli_options_fail(err, "%s", s->missing);
    for (int k = 0; k < s->n_options; k++) {
        if (s->options[k].needed && !seen[k]) {
            char msg[256];
            snprintf(msg, sizeof msg, "%s needs --%s %s", s->command, s->options[k].name,
                     s->options[k].needed);
            return cli_options_fail(err, "%s", msg);
        }
    }
    return 0;
}
