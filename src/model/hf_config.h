/*
 * hf_config.h - checks of a HuggingFace config.json's fields against
 * [model], which every architecture's descriptor (arch.h) makes of its
 * own keys: an integer that must equal trident's, a context that must be
 * at least seq_len, a real, a boolean or a word that must be trident's,
 * and a field trident has no way to honour. A field config.json leaves
 * out is transformers' default for it, passed as dflt. Each returns 0, or
 * 1 with the reason on why: "PATH: FIELD = VALUE, [model] KEY = VALUE",
 * the file's value as the file writes it (1e+300, 2.0, "two"), never a
 * stand-in. Not collective.
 */
#ifndef TRI_SRC_HF_CONFIG_H
#define TRI_SRC_HF_CONFIG_H

#include <jansson.h>
#include <stddef.h>

#include "reason.h"

/* root's integer `json` equals want, [model]'s `key`. */
int hf_config_int(json_t *root, const char *path, const char *json, const char *key, int want,
                  char *why, size_t n);
/* root's integer `json` (dflt when absent) equals want, [model]'s `key`. */
int hf_config_int_or(json_t *root, const char *path, const char *json, int dflt, const char *key,
                     int want, char *why, size_t n);
/* root's integer `json`, the positions the model was made for, is at
 * least [model] seq_len. */
int hf_config_context(json_t *root, const char *path, const char *json, int seq_len, char *why,
                      size_t n);
/* root's number `json` (dflt when absent) equals want, which `trident`
 * names ("[model] norm_eps", "trident's GPT-2 LayerNorm"). */
int hf_config_real(json_t *root, const char *path, const char *json, double dflt,
                   const char *trident, double want, char *why, size_t n);
/* root's boolean `json` (dflt when absent) equals want, named by
 * `trident` as above. */
int hf_config_bool(json_t *root, const char *path, const char *json, int dflt,
                   const char *trident, int want, char *why, size_t n);
/* root's string `json` is one of the NULL-terminated words (absent: the
 * first, transformers' default); `trident` says what trident computes. */
int hf_config_word(json_t *root, const char *path, const char *json, const char *const *words,
                   const char *trident, char *why, size_t n);
/* root's `json` is absent or null: a feature trident does not have,
 * which `trident` names ("trident's rotary embedding is not scaled"). */
int hf_config_none(json_t *root, const char *path, const char *json, const char *trident,
                   char *why, size_t n);

#endif
