/*
 * data.h - training data: token files read with pread, a seeded sampler that is a
 * pure function of (seed, sample index), and a prefetching loader.
 *
 * Three formats: plain text read as bytes (vocab 256), llm.c token shards
 * (a 256 x int32 header: magic 20240520, version 1, token count; then uint16
 * tokens), and Megatron-LM indexed datasets (PREFIX.idx + PREFIX.bin,
 * uint16 or int32 tokens: indexed.h), whose sequences are read as one
 * stream of tokens. A sample is seq_len+1 consecutive tokens, and may cross
 * a document boundary. Training samples are windows of the train split
 * taken in the order of a seeded per-epoch permutation, so sample g depends
 * only on (seed, g): any data-parallel layout, and any resume, sees the
 * same samples. Validation windows are read in order from a held-out split
 * that never overlaps the training windows.
 *
 * [data] train may blend several datasets ("0.7 web 0.3 code", blend.h):
 * global sample g is sample k of dataset j, both pure functions of g, and
 * each dataset has its own seeded order over its own windows and its own
 * validation part (its held-out tail, or the datasets of [data] val, which
 * may be a blend too). Without a blend there is one part of each.
 */
#ifndef TRI_SRC_DATA_H
#define TRI_SRC_DATA_H

#include <stdint.h>
#include <stdio.h>

#include "config.h"
#include "data_error.h"

typedef struct Dataset Dataset;


/* Opens cfg->train (and cfg->val, or holds out the last
 * cfg->val_fraction of train when val is empty) and keeps them open for the
 * samples. Checks: the blend parses (blend.h); each file exists, is a
 * regular file (a FIFO is refused without waiting on it) and is readable,
 * non-empty, token-shard header (magic, version, count matching the file
 * size) or indexed dataset's index (indexed.h) and .bin size, every token
 * id < vocab_size, and each split of each dataset holds at least one
 * window of seq_len+1 tokens. On failure writes one line naming the key
 * ("[data] train"), the file and the reason to err, and returns non-zero.
 * Not collective. */
int data_open(Dataset **out, const DataConfig *cfg, int seq_len,
              int vocab_size, FILE *err);
void data_close(Dataset *ds);

/* Number of tokens in each split (all parts), of training windows (all
 * parts), and of the first validation part's windows. Not collective. */
int64_t data_train_tokens(const Dataset *ds);
int64_t data_val_tokens(const Dataset *ds);
int64_t data_train_windows(const Dataset *ds);
int64_t data_val_windows(const Dataset *ds);

/* The datasets of the training blend (1 without a blend): their names (the
 * base name of the prefix, for val_loss/<name>), normalised weights and
 * train-split tokens; and the same of the validation parts. Not
 * collective. */
int data_train_parts(const Dataset *ds);
const char *data_train_name(const Dataset *ds, int j);
double data_train_weight(const Dataset *ds, int j);
int64_t data_train_part_tokens(const Dataset *ds, int j);
int data_val_parts(const Dataset *ds);
const char *data_val_name(const Dataset *ds, int j);
double data_val_weight(const Dataset *ds, int j);
int64_t data_val_part_tokens(const Dataset *ds, int j);

/* The training dataset (blend part) global sample g >= 0 comes from. Pure;
 * O(g * parts) for a blend. Not collective. */
int data_train_part(const Dataset *ds, int64_t g);

/* Start offset (in tokens, within its part's train split) of global
 * training sample g >= 0, sample k of its part: epoch e = k / windows, then
 * a seeded bijection of [0, windows) picks the window, plus a seeded
 * per-epoch shift in [0, seq_len). A split shorter than 2*seq_len has one
 * window and no shift. Each part of a blend has its own order (the seed
 * salted with the part's index; part 0's is the unblended order). Pure. */
int64_t data_train_offset(const Dataset *ds, uint64_t seed, int64_t g);

/* Reads seq_len+1 tokens of training sample g / validation window i
 * (i wraps around the val split) as int32, and checks every id against
 * vocab_size again: the file may have been rewritten or truncated since
 * data_open checked it. Returns 0, or 1 with the reason in *why (which may
 * be NULL); out is then undefined. Not collective. */
int data_train_sample(const Dataset *ds, uint64_t seed, int64_t g,
                      int32_t *out, DataError *why);
int data_val_sample(const Dataset *ds, int64_t i, int32_t *out, DataError *why);
/* Validation window i of validation part j (data_val_sample is part 0).
 * Not collective. */
int data_val_part_sample(const Dataset *ds, int j, int64_t i, int32_t *out, DataError *why);

/* A background thread that builds the next batch while a step computes.
 * A batch is `rows` samples of seq_len+1 tokens; row i is training sample
 * index[i] (see loader_request). Two buffers alternate. loader_create
 * returns NULL if memory or the thread cannot be had. Not collective. */
typedef struct Loader Loader;

Loader *loader_create(const Dataset *ds, uint64_t seed, int rows);
void loader_destroy(Loader *ld);
/* Asks for the batch whose row i is training sample index[i] (rows
 * entries, copied). Returns at once; the thread fills it in the background. */
void loader_request(Loader *ld, const int64_t *index);
/* Waits for the requested batch and returns it (rows x (seq_len+1) int32),
 * or NULL when a sample of it could not be read (data_train_sample's
 * failure; the reason goes to *why, which may be NULL),
 * valid until the next-but-one loader_request: the buffers alternate, so
 * the caller may request batch N+1 before it reads batch N. Calling
 * loader_request again before loader_wait has returned the previous batch
 * is a programming error and aborts. *wait_s receives the time spent
 * waiting, which is ~0 when prefetch keeps up. */
const int32_t *loader_wait(Loader *ld, double *wait_s, DataError *why);

#endif
