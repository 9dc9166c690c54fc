/*
 * config_load.h - a run's config made: defaults, the INI file (libinih)
 * plus --set overrides, every value and cross-key rule validated, and the
 * config written back as INI text.
 *
 * config_load fills defaults, reads the file, applies overrides, then
 * validates, so a bad input is reported before any work starts, naming
 * file, key, value and reason. The parts are files of their own
 * (config_load.c lists them); the INI reader is config_ini.h.
 */
#ifndef TRI_SRC_CONFIG_LOAD_H
#define TRI_SRC_CONFIG_LOAD_H

#include <stddef.h>
#include <stdio.h>

#include "config.h"

/* Fills every key with its default, the autos resolved as for a config
 * that sets nothing else (tie_embeddings for gpt2: true; metrics: none, as
 * there is no checkpoint dir; sample_tokens: 200). Not collective. */
void config_defaults(Config *cfg);

/* Loads `path` (NULL: the built-in jobs/configs/tiny.ini), then applies the
 * "section.key=value" overrides in order, then resolves the keys still at
 * auto (config_load.c, resolve_auto), then validates. On failure writes
 * one line naming file, key, value and reason to err and returns non-zero.
 * Not collective: rank 0 calls it and broadcasts the result. */
int config_load(Config *cfg, const char *path, const char *const *overrides,
                int n_overrides, FILE *err);

/* Sets one key from text; returns non-zero (with a message on err) when the
 * section or key is unknown, the value has the wrong type or is out of
 * range. origin names where the value came from ("tiny.ini:12", "--set"). */
int config_set(Config *cfg, const char *section, const char *key,
               const char *value, const char *origin, FILE *err);

/* Applies one --set override, "section.key=value" (blanks around each part
 * ignored), as config_load does; returns non-zero with a message on err
 * when it is malformed (saying which --set it may mean) or config_set
 * refuses it. Not collective. */
int config_apply_override(Config *cfg, const char *text, FILE *err);

/* Cross-key checks (n_embd % n_head, checkpoint.every needs a dir, ...). Checks that
 * need the data files are data_open's, and those that need the world size
 * are layout_check's. Returns non-zero on failure. */
int config_validate(const Config *cfg, FILE *err);

/* Writes the effective config as INI text, every key, to buf; returns the
 * length (as snprintf). Loading that text gives the same Config. */
int config_to_ini(const Config *cfg, char *buf, size_t size);

/* config_to_ini with only the keys whose value differs from the key
 * table's default (for cfg's architecture), under their sections' headers:
 * what the trainer prints at start-up. Empty when every key holds its
 * default. Not collective. */
int config_to_ini_changed(const Config *cfg, char *buf, size_t size);

/* What a run does only when asked and cfg leaves off, as one list for the
 * start-up print: "validation ([eval] every), a metrics file ([log]
 * metrics), checkpoints ([checkpoint] dir), a sample at the end ([log]
 * sample_tokens)", those that are off; the metrics file names the dir
 * where none is set, and the sample says why where the layout cannot
 * generate. Returns how many are; buf is "" when none. Not collective. */
int config_off(const Config *cfg, char *buf, size_t size);

/* The built-in default config text (jobs/configs/tiny.ini at build time). */
extern const char config_builtin_tiny[];

#endif
