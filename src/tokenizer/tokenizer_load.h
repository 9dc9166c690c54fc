/*
 * tokenizer_load.h - reads a tokenizer file into a Bpe (bpe.h).
 *
 * The kind is found from the bytes, not the name: a JSON object with a
 * "model" is a HuggingFace tokenizer.json; any other JSON object is GPT-2's
 * encoder.json (its vocab.bpe must sit beside it), and a file starting
 * "#version" is that vocab.bpe (encoder.json beside it); lines of base64
 * and a rank are a tiktoken file, whose pattern and special tokens follow
 * from its number of ranks (GPT-2's 50256, cl100k_base's 100256,
 * o200k_base's 199998, Llama 3's 128000), since the file does not carry
 * them.
 */
#ifndef TRI_SRC_TOKENIZER_LOAD_H
#define TRI_SRC_TOKENIZER_LOAD_H

#include <stddef.h>
#include <stdint.h>

#include "bpe.h"

/* Loads path. On success *out is the tokenizer and eod (cap bytes) the
 * name of its end-of-document token; returns 0. Otherwise returns 1 with a
 * one-line message in err naming the file. Not collective. */
int tokenizer_load(const char *path, Bpe **out, char *eod, size_t cap,
                   char *err, size_t errlen);

/* The same from bytes already in memory (the fuzz target's entry): name
 * is used in messages, and merges (may be NULL) is vocab.bpe's text when
 * data is an encoder.json. Not collective. */
int tokenizer_load_bytes(const char *data, size_t n, const char *name,
                         const char *merges, size_t merges_n, Bpe **out,
                         char *eod, size_t cap, char *err, size_t errlen);

/* A tokenizer for a model of vocab_size ids ([data] tokenizer, `sample
 * --tokenizer`): loads path and checks that its vocabulary (special tokens
 * included) fits vocab_size. Returns 0 with the tokenizer in *out (NULL:
 * only checked, freed) and its end-of-document id in *eod (may be NULL);
 * or 1 with a line ("trident: SETTINGPATH: ...\n", setting being e.g.
 * "[data] tokenizer = ") naming the file, and
 * for a vocabulary too large both numbers, in msg. Not collective. */
int tokenizer_for_model(const char *path, int vocab_size, const char *setting, Bpe **out,
                        int32_t *eod, char *msg, size_t cap);

#endif
