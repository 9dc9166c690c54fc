/*
 * indexed.h - the index of a Megatron-LM indexed dataset (PREFIX.idx of
 * PREFIX.idx + PREFIX.bin), read and checked without trusting a byte of it.
 *
 * The format, as megatron/core/datasets/indexed_dataset.py writes it (all
 * little-endian):
 *   9 bytes   magic "MMIDIDX\0\0"
 *   uint64    version, 1
 *   uint8     dtype code of the tokens in .bin (1 uint8, 2 int8, 3 int16,
 *             4 int32, 5 int64, 6 float64, 7 float32, 8 uint16)
 *   uint64    S, the number of sequences
 *   uint64    D, the number of document indices
 *   int32[S]  sequence lengths, in tokens
 *   int64[S]  sequence pointers, byte offsets into .bin
 *   int64[D]  document indices: document d is sequences [idx[d], idx[d+1]);
 *             the first is 0 and the last is S
 * trident reads uint16 and int32 tokens, and needs the sequences stored back
 * to back from byte 0 (pointer[i+1] = pointer[i] + length[i] * token size),
 * which is how Megatron's writer and its merge lay them out: .bin is then one
 * stream of tokens, read like an llm.c shard's.
 */
#ifndef TRI_SRC_INDEXED_H
#define TRI_SRC_INDEXED_H

#include <stddef.h>
#include <stdint.h>

#define INDEXED_HEADER_BYTES 34

typedef struct {
    int dtype;            /* Megatron's dtype code: 8 (uint16) or 4 (int32) */
    int width;            /* bytes per token: 2 or 4 */
    int64_t sequences;    /* S */
    int64_t documents;    /* D - 1: documents between the D indices */
    int64_t tokens;       /* sum of the sequence lengths: .bin's tokens */
} IndexedIndex;

/* Reads the index from fd (a file of `size` bytes, read with pread in
 * chunks, so memory stays bounded however many sequences it lists) and
 * checks everything: magic, version, dtype, the file's size against the
 * counts, every length >= 0, the pointers back to back from 0, the document
 * indices from 0 to S and never decreasing, and the token count's bytes
 * within int64. Returns 0, or 1 with the reason in why (no file name, no
 * newline). Not collective. */
int indexed_read(int fd, int64_t size, IndexedIndex *ix, char *why, size_t why_size);

/* Megatron's name of a dtype code ("uint16", ...), or NULL if none. Not
 * collective. */
const char *indexed_dtype_name(int code);

#endif
