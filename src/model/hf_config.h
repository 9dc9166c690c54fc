/*
 * hf_config.h - checks of a HuggingFace config.json's fields against
 * [model], which every architecture's descriptor (arch.h) makes of its
 * own keys: an integer that must equal trident's, and a context that must
 * be at least seq_len. Each returns 0, or 1 with the reason on why
 * ("PATH: KEY = VALUE, [model] KEY = VALUE"). Not collective.
 */
#ifndef TRI_SRC_HF_CONFIG_H
#define TRI_SRC_HF_CONFIG_H

#include <jansson.h>
#include <stddef.h>

#include "reason.h"

/* root's integer `json` equals want, [model]'s `key`. */
int hf_config_int(json_t *root, const char *path, const char *json, const char *key, int want,
                  char *why, size_t n);
/* root's integer `json`, the positions the model was made for, is at
 * least [model] seq_len. */
int hf_config_context(json_t *root, const char *path, const char *json, int seq_len, char *why,
                      size_t n);

#endif
