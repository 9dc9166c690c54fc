/*
 * data_format.h - token files in the three formats of [data] format: plain
 * text read as bytes, llm.c token shards and Megatron-LM indexed datasets.
 * Opened and checked down to every token id, then read back with the same
 * check. The data module's private seam between its file formats and its
 * splits (data.c) and samples (data_sampler.c); everything else goes
 * through data.h. Not collective.
 */
#ifndef TRI_SRC_DATA_FORMAT_H
#define TRI_SRC_DATA_FORMAT_H

#include <stdint.h>
#include <stdio.h>

#include "config.h"
#include "data_error.h"

typedef struct {
    int fd;             /* -1 when not open */
    int64_t size;       /* bytes at open */
    int64_t first;      /* byte offset of the first token: after a shard's header */
    int64_t count;      /* tokens in the file */
    int width;          /* bytes per token: 1 (text), 2 (shards, uint16 indexed), 4 (int32) */
    const char *key;    /* "[data] train" or "[data] val" */
    char path[CONFIG_PATH_MAX + 8];  /* + ".bin" of an indexed dataset's prefix */
} TokenFile;

/* A split: `count` tokens of a file from token `start` on. */
typedef struct {
    const TokenFile *file;
    int64_t start, count;
} Split;

/* One line: "trident: <key> = <value>: <reason>", to err (stderr when
 * NULL). Returns 1, so that a check can return it. */
int data_format_report(FILE *err, const char *key, const char *value,
                       const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Checks that need no file: seq_len >= 1, and the model's vocabulary holds
 * every id the format can produce (text) or can be stored in a shard
 * (tokens). Returns 0, or 1 with a line on err. */
int data_format_check_model(DataFormat format, int seq_len, int vocab, FILE *err);

/* Opens one file (or indexed dataset, named by its prefix) of the format,
 * keeps it open in *tf and checks every token against vocab. key
 * ("[data] train" or "[data] val") names it in the line written to err on
 * failure, when it returns 1; tf must then still be closed. */
int data_format_open(TokenFile *tf, const char *key, const char *path,
                     DataFormat format, int vocab, FILE *err);
/* Closes tf (a no-op on one that is not open) and clears it. */
void data_format_close(TokenFile *tf);

/* Reads n tokens of split sp from token `at` of the split into out as
 * int32, checking each id against vocab. Returns 0, or 1 with a line in
 * why naming the file, the offset and what is wrong: the file changed
 * after it was opened (rewritten, or truncated). */
int data_format_read(const Split *sp, int vocab, int64_t at, int64_t n,
                     int32_t *out, DataError *why);

#endif
