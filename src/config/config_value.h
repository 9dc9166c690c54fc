/*
 * config_value.h - one key's value as text, both ways (config_value.c):
 * parsing text into its field with the row's type and range, re-checking
 * a field set in code, printing a field as the text that parses back to
 * it; and setting a key named by section and name, which config_set and
 * the INI loader (config_ini.c) go through. Private to the config files.
 * Not collective.
 */
#ifndef TRI_SRC_CONFIG_VALUE_H
#define TRI_SRC_CONFIG_VALUE_H

#include <stddef.h>

#include "config.h"
#include "config_keys.h"

#define CONFIG_VALUE_MAX (CONFIG_PATH_MAX + 32)   /* any key's value as text */

/* Parses text into the key's field. On failure leaves cfg unchanged, writes
 * the reason to why and returns 1. */
int config_value_parse(const KeyDef *k, const char *text, Config *cfg, char *why, size_t n);

/* The key's current value as the text config_value_parse would accept. */
void config_value_format(const KeyDef *k, const Config *cfg, char *buf, size_t n);

/* Re-checks a field against its row, for configs built or changed in code
 * rather than parsed: 0, or 1 with the reason in why. */
int config_value_check(const Config *cfg, const KeyDef *k, char *why, size_t n);

/* Copies s into a text field, zeroing its tail (configs compare with
 * memcmp). s must fit. */
void config_value_set_text(void *field, size_t size, const char *s);

/* Sets one key by section and name, as config_set, but on failure writes
 * the message (without "trident: origin: ") to msg and returns 1. */
int config_set_key(Config *cfg, const char *section, const char *key, const char *value,
                   char *msg, size_t n);

/* 0 for a known section; else writes why to msg and returns 1. */
int config_section_unknown(const char *section, char *msg, size_t n);

#endif
