/*
 * config_message.h - the wording of the config's error lines
 * (config_message.c): "[section] key = value: why", the suggestions for an
 * unknown section or key ("did you mean micro_batch?"), the syntax error,
 * and the "trident: " line they are reported as. Private to the config
 * files. Not collective.
 */
#ifndef TRI_SRC_CONFIG_MESSAGE_H
#define TRI_SRC_CONFIG_MESSAGE_H

#include <stddef.h>
#include <stdio.h>

#define CONFIG_MSG_MAX 1024   /* one error line */
#define CONFIG_SHOW_MAX 72    /* longer names and values are elided */

/* snprintf-style appender: keeps counting once the buffer is full. */
typedef struct {
    char *buf;
    size_t size, len;
} ConfigText;

void config_put(ConfigText *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* s, or its head and tail when longer than CONFIG_SHOW_MAX; buf holds
 * CONFIG_SHOW_MAX + 1. */
const char *config_shown(const char *s, char *buf);

/* s without its leading and trailing blanks (cut in place). */
char *config_trim(char *s);

/* Levenshtein distance, case-insensitive; (size_t)-1 for names of 64
 * characters or more. */
size_t config_edit_distance(const char *a, const char *b);

/* Prints "trident: <message>" as one line on err (if any); returns 1 so
 * callers can `return config_report(...)`. */
int config_report(FILE *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* "[section] key = value: why", or "[section] key: why" for an empty value. */
void config_describe(char *msg, size_t n, const char *section, const char *key,
                     const char *value, const char *why);

/* The message for a line that is not INI: 'syntax error in "LINE" (...)'. */
void config_describe_syntax(char *msg, size_t n, const char *line);

/* "[section]: unknown section (known: model, parallel, ...)", after
 * "did you mean [train]? " for another trainer's name of a section or a
 * typo. */
void config_describe_unknown_section(char *msg, size_t n, const char *section);

/* A key above the first [section] header, and the sections that have it. */
void config_describe_orphan_key(char *msg, size_t n, const char *key);

/* A --set without a section ("lr=3e-4"): "did you mean --set
 * train.lr=3e-4?" for trident's key or another trainer's name of one, or
 * the sections of a key several have. Returns whether it wrote one. */
int config_describe_set_guess(char *msg, size_t n, const char *key, const char *value);

/* An unknown key: the section that has it, else the key another trainer's
 * name means (config_alias.h), else the nearest key of this section, else
 * all of them. */
void config_describe_unknown_key(char *msg, size_t n, const char *section, const char *key);

#endif
