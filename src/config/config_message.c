/*
 * config_message.c - how the config's errors read. Every bad input ends
 * as one line naming the key, the value and the reason; an unknown name
 * gets a suggestion from the key table (the section that has the key, a
 * key within two edits, or the list of known names). The wording lives
 * here alone so that the key table, the value parsers, the cross-key
 * rules and the INI reader say things the same way. It reads the key
 * table (config_keys.c) and other trainers' names (config_alias.c), and
 * nothing else of the config.
 */
#include "config_message.h"

#include <ctype.h>
#include <stdarg.h>
#include <string.h>

#include "config_alias.h"
#include "config_keys.h"

void config_put(ConfigText *t, const char *fmt, ...)
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
 * strings are shown by their head and tail. buf holds CONFIG_SHOW_MAX + 1. */
const char *config_shown(const char *s, char *buf)
{
    size_t len = strlen(s);
    if (len <= CONFIG_SHOW_MAX)
        return s;
    snprintf(buf, CONFIG_SHOW_MAX + 1, "%.40s...%s", s, s + len - (CONFIG_SHOW_MAX - 43));
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

char *config_trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    return s;
}

/* Levenshtein distance, case-insensitive; short names only. */
size_t config_edit_distance(const char *a, const char *b)
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

/* "model, parallel, ..." in table order; "in" restricts to one section's
 * keys, otherwise the sections are listed. */
static void list_names(ConfigText *t, const char *in)
{
    const char *prev = NULL;
    for (int i = 0; i < config_key_count(); i++) {
        const KeyDef *k = &config_keys[i];
        if (in && strcmp(k->section, in))
            continue;
        if (!in && prev && !strcmp(prev, k->section))
            continue;
        config_put(t, "%s%s", prev ? ", " : "", in ? k->name : k->section);
        prev = k->section;
    }
}

/* "[section] key = value: why", or "[section] key: why" for an empty value. */
void config_describe(char *msg, size_t n, const char *section, const char *key,
                     const char *value, const char *why)
{
    char b1[CONFIG_SHOW_MAX + 1], b2[CONFIG_SHOW_MAX + 1], b3[CONFIG_SHOW_MAX + 1];
    ConfigText t = { msg, n, 0 };
    config_put(&t, "[%s] %s", config_shown(section, b1), config_shown(key, b2));
    if (value && *value)
        config_put(&t, " = %s", config_shown(value, b3));
    config_put(&t, ": %s", why);
}

/* Sections that have a key of this name: "[eval], [log]". */
static int sections_with(ConfigText *t, const char *key)
{
    int found = 0;
    for (int i = 0; i < config_key_count(); i++)
        if (!strcmp(config_keys[i].name, key))
            config_put(t, "%s[%s]", found++ ? ", " : "", config_keys[i].section);
    return found;
}

/* The section a wrong one means: another trainer's name for it, else one
 * within two edits (and fewer than half the name); NULL if none. */
static const char *section_meant(const char *section)
{
    const char *meant = config_alias_section(section);
    for (int i = 0; !meant && i < config_key_count(); i++) {
        size_t d = config_edit_distance(section, config_keys[i].section);
        if (d <= 2 && 2 * d < strlen(section))
            meant = config_keys[i].section;
    }
    return meant;
}

void config_describe_unknown_section(char *msg, size_t n, const char *section)
{
    char b[CONFIG_SHOW_MAX + 1];
    ConfigText t = { msg, n, 0 };
    const char *meant = section_meant(section);
    config_put(&t, "[%s]: unknown section (", config_shown(section, b));
    if (meant)
        config_put(&t, "did you mean [%s]? ", meant);
    config_put(&t, "known: ");
    list_names(&t, NULL);
    config_put(&t, ")");
}

/* "did you mean [train] lr?" for another trainer's name of a key, into t;
 * the section is left out when it is `section`. Returns whether one was
 * found. */
static int put_alias(ConfigText *t, const char *key, const char *section)
{
    const KeyDef *k = config_alias_key(key, section);
    if (!k)
        return 0;
    if (section && !strcmp(k->section, section))
        config_put(t, "did you mean %s?", k->name);
    else
        config_put(t, "did you mean [%s] %s?", k->section, k->name);
    return 1;
}

int config_describe_set_guess(char *msg, size_t n, const char *key, const char *value)
{
    char b[CONFIG_SHOW_MAX + 1], b2[CONFIG_SHOW_MAX + 1], where[CONFIG_MSG_MAX];
    ConfigText t = { msg, n, 0 }, w = { where, sizeof where, 0 };
    int found = sections_with(&w, key);
    if (found > 1) {
        config_put(&t, "%s is a key of %s: --set SECTION.%s=%s", config_shown(key, b), where,
                   config_shown(key, b), config_shown(value, b2));
        return 1;
    }
    /* another trainer's name of a key, else trident's own name of one
     * (spelt any way: config_alias_key looks in that order) */
    const KeyDef *k = config_alias_key(key, NULL);
    if (!k)
        return 0;
    config_put(&t, "did you mean --set %s.%s=%s?", k->section, k->name, config_shown(value, b));
    return 1;
}

/* A key above the first [section] header. */
void config_describe_orphan_key(char *msg, size_t n, const char *key)
{
    char b[CONFIG_SHOW_MAX + 1], where[CONFIG_MSG_MAX];
    ConfigText t = { msg, n, 0 }, w = { where, sizeof where, 0 };
    int found = sections_with(&w, key);
    config_put(&t, "%s: key before any [section] header", config_shown(key, b));
    if (found) {
        config_put(&t, " (%s is in %s)", config_shown(key, b), where);
    } else {
        ConfigText a = { where, sizeof where, 0 };
        if (put_alias(&a, key, NULL))
            config_put(&t, " (%s)", where);
    }
}

/* Unknown key: say where it lives if it is another section's key, else
 * suggest the nearest key of this section, else list them all. */
void config_describe_unknown_key(char *msg, size_t n, const char *section, const char *key)
{
    char b[CONFIG_SHOW_MAX + 1], why[CONFIG_MSG_MAX], where[CONFIG_MSG_MAX];
    ConfigText t = { why, sizeof why, 0 }, w = { where, sizeof where, 0 };
    const KeyDef *near = NULL;
    size_t best = (size_t)-1;
    for (int i = 0; i < config_key_count(); i++) {
        size_t d = strcmp(config_keys[i].section, section)
                       ? best : config_edit_distance(key, config_keys[i].name);
        if (d < best) {
            best = d;
            near = &config_keys[i];
        }
    }
    config_put(&t, "unknown key in [%s] (", section);
    if (sections_with(&w, key)) {
        config_put(&t, "%s is in %s", config_shown(key, b), where);
    } else if (put_alias(&t, key, section)) {
        /* another trainer's name, or trident's spelt another way */
    } else if (near && best <= 2 && 2 * best < strlen(key)) {
        /* a typo: at most 2 edits, and fewer than half the name */
        config_put(&t, "did you mean %s?", near->name);
    } else {
        config_put(&t, "known: ");
        list_names(&t, section);
    }
    config_put(&t, ")");
    config_describe(msg, n, section, key, NULL, why);
}

void config_describe_syntax(char *msg, size_t n, const char *line)
{
    char text[256], b[CONFIG_SHOW_MAX + 1];
    snprintf(text, sizeof text, "%s", line);
    snprintf(msg, n, "syntax error in \"%s\" (expected key = value, [section] or a ; comment)",
             config_shown(config_trim(text), b));
}
