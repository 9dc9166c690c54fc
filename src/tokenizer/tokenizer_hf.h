/*
 * tokenizer_hf.h - a Bpe (bpe.h) as the files a HuggingFace model
 * directory carries, so that `AutoTokenizer.from_pretrained(DIR)` encodes
 * as trident does: tokenizer.json (a byte-level BPE: the vocabulary in
 * GPT-2's byte spelling, the merges in the order they apply, the
 * pre-tokenising pattern as a Split before ByteLevel, the special tokens
 * as added tokens, no BOS added), tokenizer_config.json
 * (PreTrainedTokenizerFast, which reads tokenizer.json for any model type)
 * and special_tokens_map.json. The same form serves GPT-2's files,
 * tiktoken rank files (Llama 3, cl100k_base, o200k_base) and tokenizer.json
 * files alike: trident's tokenizer_load reads it back token for token.
 */
#ifndef TRI_SRC_TOKENIZER_HF_H
#define TRI_SRC_TOKENIZER_HF_H

#include <jansson.h>

#include "bpe.h"

/* tokenizer.json's object. Not collective. */
json_t *tokenizer_hf_json(const Bpe *b);

/* tokenizer_config.json's object: eod (the end-of-document token's name,
 * "" for none) as eos_token, model_max_length the model's context. Not
 * collective. */
json_t *tokenizer_hf_config_json(const char *eod, int model_max_length);

/* special_tokens_map.json's object. Not collective. */
json_t *tokenizer_hf_special_map_json(const char *eod);

#endif
