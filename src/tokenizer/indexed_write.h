/*
 * indexed_write.h - writes Megatron-LM's indexed dataset (PREFIX.bin +
 * PREFIX.idx) from the parts that several ranks tokenized.
 *
 * The format, as megatron/core/datasets/indexed_dataset.py writes it:
 * PREFIX.idx is the 9 bytes "MMIDIDX\0\0", a little-endian uint64 version
 * (1), a uint8 dtype code (1 uint8, 2 int8, 3 int16, 4 int32, 5 int64,
 * 6 float64, 7 float32, 8 uint16), a uint64 sequence count N, a uint64
 * count of document-index entries (documents + 1), then N int32 sequence
 * lengths, N int64 byte offsets of the sequences in PREFIX.bin, and the
 * document indices (int64, starting at 0, each the sequence number after a
 * document). PREFIX.bin is the tokens. trident writes one sequence per
 * document, so the document indices are 0, 1, ..., N.
 *
 * Each rank brings its tokens and its documents' lengths in two temporary
 * files in order; the ranks learn their offsets from one another and write
 * their parts in place, so the dataset is the same bytes whatever the
 * number of ranks. It is written under temporary names and renamed once
 * complete; an existing dataset is replaced only when asked.
 */
#ifndef TRI_SRC_INDEXED_WRITE_H
#define TRI_SRC_INDEXED_WRITE_H

#include <stdint.h>
#include <stdio.h>

#include "grid.h"

enum { INDEXED_UINT16 = 8, INDEXED_INT32 = 4 };

/* The dtype code for token ids below vocab: uint16 when they fit, else
 * int32. Not collective. */
int indexed_dtype_for_vocab(int32_t vocab);
/* Bytes of one token of the dtype code (2 or 4). Not collective. */
int indexed_dtype_size(int code);

/* One rank's share: its tokens in the dtype, its documents' lengths
 * (int32), both in files positioned anywhere (they are rewound). */
typedef struct {
    FILE *tokens;
    FILE *lengths;
    int64_t n_tokens;
    int64_t n_docs;
} IndexedPart;

/* Writes PREFIX.bin and PREFIX.idx from every rank's part, in rank order.
 * Returns 0, or 1 on every rank after a message (rank 0, or the rank
 * that failed). The output files must be reachable by every rank at the
 * same path (a shared file system). Collective on world. */
int indexed_write(const Grid *g, const char *prefix, int dtype_code, const IndexedPart *part,
                  int force);

#endif
