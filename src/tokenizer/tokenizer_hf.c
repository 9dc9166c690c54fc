/*
 * tokenizer_hf.c - a tokenizer as HuggingFace's files; see tokenizer_hf.h.
 */
#include "tokenizer_hf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "byte_level.h"

static int is_special(const Bpe *b, int32_t id)
{
    int32_t sid;
    for (int i = 0; i < bpe_n_specials(b); i++)
        if (bpe_special_at(b, i, &sid) && sid == id)
            return 1;
    return 0;
}

/* The id's spelling, or NULL (unused ids, specials); *buf grows to fit. */
static const char *spelled(const Bpe *b, int32_t id, char **buf, size_t *cap)
{
    size_t len;
    const char *bytes = is_special(b, id) ? NULL : bpe_token_bytes(b, id, &len);
    if (!bytes)
        return NULL;
    if (2 * len + 1 > *cap) {
        *cap = 2 * len + 1;
        *buf = TRI_REALLOC(*buf, *cap, "the tokenizer's spelling");
    }
    byte_level_spell(bytes, len, *buf);
    return *buf;
}

static json_t *vocab_and_merges(const Bpe *b, json_t **merges)
{
    json_t *vocab = json_object();
    char *lbuf = NULL, *rbuf = NULL, *pair = NULL;
    size_t lcap = 0, rcap = 0, pair_cap = 0;
    for (int32_t id = 0; id < bpe_vocab_size(b); id++) {
        const char *s = spelled(b, id, &lbuf, &lcap);
        if (s)
            json_object_set_new(vocab, s, json_integer(id));
    }
    size_t n;
    BpeMerge *m = bpe_merges(b, &n);
    *merges = json_array();
    for (size_t i = 0; i < n; i++) {
        const char *left = spelled(b, m[i].left, &lbuf, &lcap);
        const char *right = spelled(b, m[i].right, &rbuf, &rcap);
        if (!left || !right)
            continue; /* a merge of a special: none is written */
        size_t need = strlen(left) + strlen(right) + 2;
        if (need > pair_cap) {
            pair_cap = 2 * need;
            pair = TRI_REALLOC(pair, pair_cap, "the tokenizer's merges");
        }
        snprintf(pair, pair_cap, "%s %s", left, right); /* spellings hold no space */
        json_array_append_new(*merges, json_string(pair));
    }
    free(m);
    free(lbuf);
    free(rbuf);
    free(pair);
    return vocab;
}

json_t *tokenizer_hf_json(const Bpe *b)
{
    json_t *merges;
    json_t *vocab = vocab_and_merges(b, &merges);
    json_t *added = json_array();
    for (int i = 0; i < bpe_n_specials(b); i++) {
        int32_t id;
        const char *name = bpe_special_at(b, i, &id);
        json_array_append_new(added, json_pack("{s:i, s:s, s:b, s:b, s:b, s:b, s:b}", "id", id,
                                               "content", name, "single_word", 0, "lstrip", 0,
                                               "rstrip", 0, "normalized", 0, "special", 1));
    }
    json_t *byte_level = json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel",
                                   "add_prefix_space", 0, "trim_offsets", 1, "use_regex", 0);
    json_t *pre = json_pack("{s:s, s:[{s:s, s:{s:s}, s:s, s:b}, o]}", "type", "Sequence",
                            "pretokenizers", "type", "Split", "pattern", "Regex",
                            bpe_pattern(b) ? bpe_pattern(b) : "", "behavior", "Isolated",
                            "invert", 0, byte_level);
    json_t *model = json_pack("{s:s, s:n, s:n, s:n, s:n, s:b, s:b, s:b, s:o, s:o}", "type", "BPE",
                              "dropout", "unk_token", "continuing_subword_prefix",
                              "end_of_word_suffix", "fuse_unk", 0, "byte_fallback", 0,
                              "ignore_merges", bpe_ignores_merges(b), "vocab", vocab,
                              "merges", merges);
    return json_pack("{s:s, s:n, s:n, s:o, s:n, s:o, s:n, s:{s:s, s:b, s:b, s:b}, s:o}",
                     "version", "1.0", "truncation", "padding", "added_tokens", added,
                     "normalizer", "pre_tokenizer", pre, "post_processor", "decoder", "type",
                     "ByteLevel", "add_prefix_space", 0, "trim_offsets", 1, "use_regex", 0,
                     "model", model);
}

json_t *tokenizer_hf_config_json(const char *eod, int model_max_length)
{
    json_t *c = json_pack("{s:s, s:i, s:b, s:b, s:b}", "tokenizer_class",
                          "PreTrainedTokenizerFast", "model_max_length", model_max_length,
                          "clean_up_tokenization_spaces", 0, "add_bos_token", 0,
                          "add_eos_token", 0);
    if (eod[0])
        json_object_set_new(c, "eos_token", json_string(eod));
    return c;
}

json_t *tokenizer_hf_special_map_json(const char *eod)
{
    json_t *m = json_object();
    if (eod[0])
        json_object_set_new(m, "eos_token", json_string(eod));
    return m;
}
