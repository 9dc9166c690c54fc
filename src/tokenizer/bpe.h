/*
 * bpe.h - byte-level BPE: the vocabulary, the merge ranks, the
 * pre-tokenising regular expression, and encoding and decoding with them.
 *
 * One model covers GPT-2's encoder.json + vocab.bpe, tiktoken rank files
 * and HuggingFace tokenizer.json files of the BPE kind: every merge is a
 * pair of token ids with a priority and a result (tiktoken's "rank of the
 * concatenation" is turned into such pairs at load), and encoding merges
 * the adjacent pair of lowest priority, leftmost first, until none is left,
 * as all three references do. tokenizer_load.h fills a Bpe from a file.
 *
 * Text is taken as UTF-8; invalid bytes become U+FFFD first, replaced as
 * the WHATWG decoder (and Python's errors="replace") replaces them, since
 * every reference encoder works on decoded text. Special tokens written in
 * the text are ordinary text: only the caller adds them (bpe_special).
 */
#ifndef TRI_SRC_BPE_H
#define TRI_SRC_BPE_H

#include <stddef.h>
#include <stdint.h>

typedef struct Bpe Bpe;

/* Receives the ids of a stretch of text, in order. */
typedef void (*BpeEmit)(void *ctx, const int32_t *ids, size_t n);

/* ---- building (tokenizer_load.c) ---- Not collective, none of these. */

Bpe *bpe_new(void);
void bpe_free(Bpe *b);
/* Token id has these bytes. Returns 1 when id is negative, 2^24 or more,
 * or already taken, 0 otherwise. */
int bpe_add_token(Bpe *b, const void *bytes, size_t len, int32_t id);
/* The id of these bytes, or -1. */
int32_t bpe_find(const Bpe *b, const void *bytes, size_t len);
/* Merging left and right gives result; lower priority merges first. */
void bpe_add_merge(Bpe *b, int32_t left, int32_t right, int32_t result,
                   int32_t priority);
/* tiktoken's rule: every token whose bytes split into two tokens is a
 * merge of them, its rank the priority. */
void bpe_merges_from_ranks(Bpe *b);
/* A special token: never produced from text, decoded as its name. */
int bpe_add_special(Bpe *b, const char *name, int32_t id);
/* Whole pieces found in the vocabulary are one token without merging
 * (tiktoken's and Llama 3's rule). */
void bpe_set_ignore_merges(Bpe *b, int on);
/* Compiles the pre-tokenising pattern (Rust/Oniguruma syntax as the
 * tokenizer files write it; \s means Unicode White_Space as there).
 * Returns 0, or 1 with a message in err. */
int bpe_set_pattern(Bpe *b, const char *pattern, char *err, size_t errlen);
/* Checks that every byte is a token and that merges name tokens. Returns
 * 0, or 1 with a message in err. */
int bpe_finish(Bpe *b, char *err, size_t errlen);

/* ---- using ---- Not collective, none of these; a Bpe is not shared
 * between threads while encoding (its cache and buffers are its own). */

/* One past the largest id, specials included. */
int32_t bpe_vocab_size(const Bpe *b);
/* The id of a special token by name, or -1. */
int32_t bpe_special(const Bpe *b, const char *name);
/* The bytes of id (a special's name for specials); NULL for an unused id. */
const char *bpe_token_bytes(const Bpe *b, int32_t id, size_t *len);

/* What a tokenizer file is made of, for writing one (tokenizer_hf.h): the
 * pattern as given to bpe_set_pattern (NULL: none), whether whole pieces
 * skip merging, the special tokens (i < bpe_n_specials), and the merges in
 * the order they apply (a malloc'd array of *n; free it). */
typedef struct {
    int32_t left, right;
} BpeMerge;
const char *bpe_pattern(const Bpe *b);
int bpe_ignores_merges(const Bpe *b);
int bpe_n_specials(const Bpe *b);
const char *bpe_special_at(const Bpe *b, int i, int32_t *id);
BpeMerge *bpe_merges(const Bpe *b, size_t *n);

/* Streaming encoding of one document: feed its bytes in pieces of any
 * size, then end it. Memory is bounded by the longest pre-tokenised piece
 * (a run of spaces, a word), not by the document. */
void bpe_doc_begin(Bpe *b);
void bpe_doc_feed(Bpe *b, const void *bytes, size_t len, BpeEmit emit, void *ctx);
/* Returns 0, or 1 when the pattern needed more backtracking than PCRE2's
 * match limit on some piece (a pathological pattern in the tokenizer
 * file): the ids emitted for this document are then incomplete. */
int bpe_doc_end(Bpe *b, BpeEmit emit, void *ctx);

#endif
