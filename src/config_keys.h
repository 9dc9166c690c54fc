/*
 * config_keys.h - what the INI reader (config_ini.c) needs of the key
 * table in config.c: which keys and sections exist, setting a key with the
 * error kept for the reader to place, and the wording of errors. No other
 * file includes it: everything else goes through config.h.
 */
#ifndef TRI_SRC_CONFIG_KEYS_H
#define TRI_SRC_CONFIG_KEYS_H

#include <stddef.h>
#include <stdio.h>

#include "config.h"

#define CONFIG_MSG_MAX 1024   /* one error line */

/* The number of keys, and a key's index below it (-1: no such key).
 * Not collective. */
int config_key_count(void);
int config_key_index(const char *section, const char *key);

/* 0 for a known section; else writes why to msg and returns 1.
 * Not collective. */
int config_section_unknown(const char *section, char *msg, size_t n);

/* config_set, but on failure the message (without "trident: origin: ") goes
 * to msg. Not collective. */
int config_set_key(Config *cfg, const char *section, const char *key, const char *value,
                   char *msg, size_t n);

/* "[section] key = value: why", or "[section] key: why" for an empty value.
 * Not collective. */
void config_describe(char *msg, size_t n, const char *section, const char *key,
                     const char *value, const char *why);

/* The message for a line that is not INI: 'syntax error in "LINE" (...)'.
 * Not collective. */
void config_describe_syntax(char *msg, size_t n, const char *line);

/* Prints "trident: <message>" as one line on err (if any); returns 1 so
 * callers can `return config_report(...)`. Not collective. */
int config_report(FILE *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
