/*
 * config_alias.h - other trainers' names for trident's keys and sections
 * (nanoGPT, llm.c, Megatron-LM, HF transformers, torchtitan:
 * learning_rate, batch_size, max_steps, warmup_steps, grad_clip,
 * [training], ...), so that an unknown name's message can say which key
 * trident means by it ("did you mean [train] lr?"). Names are compared
 * case-insensitively and without '_', '-', '.' and blanks, so
 * "weight-decay" and "weightDecay" find weight_decay too. Private to the
 * config files (config_message.c asks it). Not collective.
 */
#ifndef TRI_SRC_CONFIG_ALIAS_H
#define TRI_SRC_CONFIG_ALIAS_H

#include "config_keys.h"

/* The key another trainer's name (or trident's own, spelt another way)
 * means, or NULL. Where trident's name is in several sections (every),
 * section's own is preferred. */
const KeyDef *config_alias_key(const char *name, const char *section);

/* The section another trainer's section name means ("training": "train"),
 * or NULL. */
const char *config_alias_section(const char *name);

#endif
