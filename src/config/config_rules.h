/*
 * config_rules.h - the rules between keys (config_rules.c): what no single
 * key's range can say (n_embd % n_head, checkpoint.every needs a dir), and
 * the words of the rules others own: the layout's that need no world size
 * (layout.c: the interleaved schedule's shape, tp and the heads), the
 * architecture's (gpt2 vs llama keys). Private to the config files;
 * config_validate (config_load.h) runs them. Not collective.
 */
#ifndef TRI_SRC_CONFIG_RULES_H
#define TRI_SRC_CONFIG_RULES_H

#include <stddef.h>

#include "config.h"

/* 0 when every cross-key rule holds; else writes the first broken one to
 * msg as "[section] key = value: why", naming the key to change, and
 * returns 1. Each key must already be in its own range. */
int config_rules_check(const Config *cfg, char *msg, size_t n);

#endif
