/*
 * config_keys.h - the key table (config_keys.c): every key's section,
 * name, type, place in Config, default, and its range or words. Private to
 * the config files (config_load.c, config_value.c, config_message.c,
 * config_rules.c, config_ini.c); everything else goes through config.h.
 * The table depends on nothing: the files above it read it, and it calls
 * none of them. Not collective.
 */
#ifndef TRI_SRC_CONFIG_KEYS_H
#define TRI_SRC_CONFIG_KEYS_H

#include <stddef.h>

#include "config.h"

typedef enum { K_INT, K_SEED, K_REAL, K_BOOL, K_ENUM, K_PATH, K_RECOMPUTE } KeyType;

/* ARCH_KEY: arch and the keys only some architectures read (llama's);
 * config_to_ini leaves them out where the architecture's descriptor says
 * (arch.h: writes_arch_keys; gpt2, where they must hold their defaults),
 * so a gpt2 run's stored config is what it was before llama came. */
/* AUTO_BOOL: a boolean that also takes "auto" (TIE_AUTO), which
 * config_load resolves by arch. */
/* OMIT_UNSET: config_to_ini leaves the key out while it holds its
 * default, so the stored config (and its checksum) of a run that does not
 * use it is what it was before the key came (vocab_used, init_from,
 * tokenizer, cp). */
/* AUTO_INT: an integer that also takes "auto" (stored as -1, e.g.
 * SAMPLE_AUTO), which config_load resolves from the other keys. */
enum { OPEN_MIN = 1, OPEN_MAX = 2, NONEMPTY = 4, ARCH_KEY = 8, AUTO_BOOL = 16, OMIT_UNSET = 32,
       AUTO_INT = 64 };

typedef struct {
    const char *section, *name;
    KeyType type;
    size_t offset, size;        /* of the field in Config */
    const char *def;            /* default, as text: config_defaults parses it */
    double min, max;            /* K_INT, K_REAL: the allowed range */
    unsigned flags;             /* OPEN_*: bound excluded; NONEMPTY: path required */
    const char *const *words;   /* K_ENUM: value i is words[i] */
    const char *auto_is;        /* a key whose default is "auto": what
                                   config_load makes of it (the guide's
                                   table says so); else NULL */
} KeyDef;

/* Every key, in the order of jobs/configs/tiny.ini; config_key_count()
 * rows. */
extern const KeyDef config_keys[];

/* The number of keys, and a key's index below it (-1: no such key). */
int config_key_count(void);
int config_key_index(const char *section, const char *key);

/* The row of [section] name, or NULL. */
const KeyDef *config_key_find(const char *section, const char *name);

/* Whether any key lives in this section. */
int config_section_known(const char *section);

#endif
