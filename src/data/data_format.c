/*
 * data_format.c - token files read with pread: plain text (bytes), llm.c
 * token shards, and Megatron-LM indexed datasets; each opened, checked and
 * read back (see data_format.h).
 *
 * Why this shape:
 * - Files stay open and every sample is read with pread, not through a
 *   memory map. The page cache still holds one copy per node, however many
 *   ranks share the file, and the loader copies each sample once either way
 *   (it widens tokens to int32). But a file truncated under a mapping kills
 *   every rank with SIGBUS and a core, and a SIGBUS handler would have to
 *   siglongjmp out of a copy in the loader thread of a process where MPI and
 *   CUDA install handlers of their own; a short pread is an ordinary return
 *   value, turned into a message naming the file and the offset. After open
 *   a TokenFile is immutable (pread takes its offset as an argument), so the
 *   loader thread and the main thread read it without locks.
 * - Everything is checked at open (header, size, every token id), so a bad
 *   file fails before the first step with one line naming the key, the file
 *   and the reason, never as a garbage loss or a crash at step 10000.
 * - And again where a sample is read (one compare per token): a file
 *   rewritten during the run must not feed ids past the vocabulary to the
 *   model, whose embedding would give them zeros and its loss no target, so
 *   that the loss goes wrong and damaged checkpoints look sound.
 * - An indexed dataset is one more token file: its index is checked once
 *   (indexed.c) and its .bin read as a stream, since samples may cross
 *   document boundaries.
 */
#include "data_format.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file_check.h"
#include "indexed.h"

#define SHARD_MAGIC 20240520
#define SHARD_VERSION 1
#define SHARD_HEADER_INTS 256
#define SHARD_HEADER_BYTES (SHARD_HEADER_INTS * 4)

/* Error reporting. */

int data_format_report(FILE *err, const char *key, const char *value,
                       const char *fmt, ...)
{
    FILE *f = err ? err : stderr;
    va_list ap;
    va_start(ap, fmt);
    fprintf(f, "trident: %s = %s: ", key, value);
    vfprintf(f, fmt, ap);
    fputc('\n', f);
    fflush(f);
    va_end(ap);
    return 1;
}

/* Reading and checking files. */

static int32_t le_i32(const uint8_t *p)
{
    uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 |
                 (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    return (int32_t)u;
}

static int32_t token_at(const uint8_t *tok, int width, int64_t i)
{
    if (width == 1)
        return tok[i];
    if (width == 4)
        return le_i32(tok + 4 * i);
    const uint8_t *p = tok + 2 * i;
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8);
}

/* Whether id is no token of a vocab_size-word vocabulary: int32 files may
 * hold negative ids, which are as wrong as ids past the end. */
static int outside(int32_t id, int vocab)
{
    return (uint32_t)id >= (uint32_t)vocab;
}

void data_format_close(TokenFile *tf)
{
    if (tf->fd >= 0)
        close(tf->fd);
    memset(tf, 0, sizeof *tf);
    tf->fd = -1;
}

/* Reads n bytes at off. Returns the bytes read: fewer than n at the end of
 * the file, -1 on an error (errno says which). */
static int64_t read_at(int fd, void *buf, int64_t n, int64_t off)
{
    int64_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, (uint8_t *)buf + got, (size_t)(n - got), (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        got += r;
    }
    return got;
}

/* Whether a file whose size is 0 yields bytes when read: /proc and /sys
 * files do, and are not token files (their content changes as it is
 * read). */
static int has_unsized_content(int fd)
{
    char byte;
    return pread(fd, &byte, 1, 0) == 1;
}

/* Opens and checks a non-empty regular file, and keeps it open
 * (file_open_regular: a FIFO is refused, not waited on). */
static int open_file(TokenFile *tf, const char *key, const char *path,
                     FILE *err)
{
    memset(tf, 0, sizeof *tf);
    tf->fd = -1;
    char why[128];
    int fd = file_open_regular(path, O_RDONLY, why, sizeof why);
    if (fd < 0)
        return data_format_report(err, key, path, "%s", errno == EISDIR ? "is a directory" : why);
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) != 0)
        rc = data_format_report(err, key, path, "%s", strerror(errno));
    else if (st.st_size == 0 && has_unsized_content(fd))
        rc = data_format_report(err, key, path, "the system reports a size of 0 for a file that has content "
                                "(a file of /proc or /sys, made as it is read): copy it to a regular file "
                                "first, e.g. cp %s data.txt", path);
    else if (st.st_size == 0)
        rc = data_format_report(err, key, path, "empty file");
    if (rc) {
        close(fd);
        return rc;
    }
    tf->fd = fd;
    tf->size = (int64_t)st.st_size;
    tf->key = key;
    snprintf(tf->path, sizeof tf->path, "%s", path);
    return 0;
}

/* llm.c shard: 256 little-endian int32 (magic, version, count, unused),
 * then exactly count uint16 tokens. */
static int parse_shard(TokenFile *tf, const char *key, const char *path,
                       FILE *err)
{
    uint8_t b[SHARD_HEADER_BYTES];
    if (tf->size < SHARD_HEADER_BYTES)
        return data_format_report(err, key, path,
                                  "too small for a token shard: %lld bytes, the header alone is %d",
                                  (long long)tf->size, SHARD_HEADER_BYTES);
    int64_t got = read_at(tf->fd, b, SHARD_HEADER_BYTES, 0);
    if (got != SHARD_HEADER_BYTES)
        return data_format_report(err, key, path, "cannot read the shard header: %s",
                                  got < 0 ? strerror(errno) : "the file shrank while it was opened");
    int32_t magic = le_i32(b), version = le_i32(b + 4), count = le_i32(b + 8);
    if (magic != SHARD_MAGIC)
        return data_format_report(err, key, path, "not a token shard: magic %d (expected %d)",
                                  (int)magic, SHARD_MAGIC);
    if (version != SHARD_VERSION)
        return data_format_report(err, key, path, "unsupported version %d (expected %d)",
                                  (int)version, SHARD_VERSION);
    if (count < 0)
        return data_format_report(err, key, path, "negative token count %d in the header",
                                  (int)count);
    uint64_t want = SHARD_HEADER_BYTES + 2 * (uint64_t)count;
    uint64_t have = (uint64_t)tf->size;
    if (have < want)
        return data_format_report(err, key, path,
                                  "truncated: header says %d tokens but the file holds %llu",
                                  (int)count,
                                  (unsigned long long)((have - SHARD_HEADER_BYTES) / 2));
    if (have > want)
        return data_format_report(err, key, path,
                                  "trailing bytes: header says %d tokens (%llu bytes) but the file has %llu bytes",
                                  (int)count, (unsigned long long)want,
                                  (unsigned long long)have);
    tf->first = SHARD_HEADER_BYTES;
    tf->count = count;
    return 0;
}

/* First position whose token is >= vocab, or -1. The scan is parallel but
 * a MIN reduction makes the answer the first offender, whatever the thread
 * count. */
static int64_t first_out_of_vocab(const uint8_t *tok, int width, int64_t n,
                                  int vocab)
{
    if (width < 4 && vocab >= (width == 1 ? 256 : 65536))
        return -1;
    int64_t first = INT64_MAX;
#ifdef _OPENMP
#pragma omp parallel for reduction(min : first) schedule(static)
#endif
    for (int64_t i = 0; i < n; i++)
        if (outside(token_at(tok, width, i), vocab) && i < first)
            first = i;
    return first == INT64_MAX ? -1 : first;
}

/* Reads the whole file once, in order, and checks every token. Sequential
 * advice for the scan; afterwards the sampler jumps around, and readahead
 * would only waste page cache. */
#define SCAN_CHUNK_BYTES (4 << 20)

static int scan_tokens(const TokenFile *tf, int vocab, FILE *err)
{
    int width = tf->width;
    uint8_t *buf = malloc(SCAN_CHUNK_BYTES);
    if (!buf)
        return data_format_report(err, tf->key, tf->path, "out of memory");
    posix_fadvise(tf->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    int rc = 0;
    int64_t per_chunk = SCAN_CHUNK_BYTES / width;
    for (int64_t i = 0; i < tf->count && !rc; i += per_chunk) {
        int64_t n = tf->count - i < per_chunk ? tf->count - i : per_chunk;
        int64_t off = tf->first + i * width;
        int64_t got = read_at(tf->fd, buf, n * width, off);
        if (got != n * width) {
            rc = data_format_report(err, tf->key, tf->path, "cannot read tokens at byte %lld: %s",
                                    (long long)(off + (got > 0 ? got : 0)),
                                    got < 0 ? strerror(errno) : "the file shrank while it was checked");
            break;
        }
        int64_t bad = first_out_of_vocab(buf, width, n, vocab);
        if (bad >= 0)
            rc = data_format_report(err, tf->key, tf->path,
                                    "token %d at position %lld is outside the vocabulary (vocab_size %d)",
                                    (int)token_at(buf, width, bad), (long long)(i + bad), vocab);
    }
    posix_fadvise(tf->fd, 0, 0, POSIX_FADV_RANDOM);
    free(buf);
    return rc;
}

/* An indexed dataset: PREFIX.idx read and checked (indexed.c), then
 * PREFIX.bin kept open as the token file, exactly as long as the index
 * says. Megatron's reader allows more, but bytes the index does not cover
 * are tokens no sample would ever read (two shards concatenated under one
 * index, say): a run would train on part of its data without a word. */
static int open_indexed(TokenFile *tf, const char *key, const char *prefix, FILE *err)
{
    char idx[CONFIG_PATH_MAX + 8], why[512];
    snprintf(idx, sizeof idx, "%s.idx", prefix);
    if (access(idx, F_OK) != 0 && errno == ENOENT)
        return data_format_report(err, key, idx, "no such file (format = indexed names a dataset by the "
                                  "prefix of its .idx and .bin: %s names %s.idx and %s.bin)",
                                  prefix, prefix, prefix);
    TokenFile f;
    if (open_file(&f, key, idx, err))
        return 1;
    IndexedIndex ix;
    int rc = indexed_read(f.fd, f.size, &ix, why, sizeof why);
    data_format_close(&f);
    if (rc)
        return data_format_report(err, key, idx, "%s", why);
    char bin[CONFIG_PATH_MAX + 8];
    snprintf(bin, sizeof bin, "%s.bin", prefix);
    if (open_file(tf, key, bin, err))
        return 1;
    tf->first = 0;
    tf->count = ix.tokens;
    tf->width = ix.width;
    if (tf->size / ix.width < ix.tokens)
        return data_format_report(err, key, bin, "shorter than its index says: %s lists %lld %s tokens "
                                  "(%lld bytes), the file has %lld bytes",
                                  idx, (long long)ix.tokens, indexed_dtype_name(ix.dtype),
                                  (long long)ix.tokens * ix.width, (long long)tf->size);
    if (tf->size > ix.tokens * ix.width)
        return data_format_report(err, key, bin, "longer than its index says: %s covers %lld %s "
                                  "tokens (%lld bytes), the file has %lld bytes: its last %lld "
                                  "bytes would never be read (two datasets concatenated under "
                                  "one index?): give each dataset its own index, and blend them",
                                  idx, (long long)ix.tokens, indexed_dtype_name(ix.dtype),
                                  (long long)ix.tokens * ix.width, (long long)tf->size,
                                  (long long)(tf->size - ix.tokens * ix.width));
    return 0;
}

int data_format_open(TokenFile *tf, const char *key, const char *path,
                     DataFormat format, int vocab, FILE *err)
{
    if (format == DATA_INDEXED) {
        if (open_indexed(tf, key, path, err))
            return 1;
    } else {
        if (open_file(tf, key, path, err))
            return 1;
        if (format == DATA_TOKENS) {
            tf->width = 2;
            if (parse_shard(tf, key, path, err))
                return 1;
        } else {
            tf->width = 1;
            tf->first = 0;
            tf->count = tf->size;
        }
    }
    return scan_tokens(tf, vocab, err);
}

int data_format_check_model(DataFormat format, int seq_len, int vocab, FILE *err)
{
    char value[32];
    if (seq_len < 1) {
        snprintf(value, sizeof value, "%d", seq_len);
        return data_format_report(err, "[model] seq_len", value, "must be at least 1");
    }
    snprintf(value, sizeof value, "%d", vocab);
    if (format == DATA_TEXT && vocab < 256)
        return data_format_report(err, "[model] vocab_size", value,
                                  "format=text reads bytes, which needs vocab_size >= 256");
    if (format == DATA_TOKENS && (vocab < 1 || vocab > 65536))
        return data_format_report(err, "[model] vocab_size", value,
                                  "format=tokens stores uint16 ids, which needs 1 <= vocab_size <= 65536");
    if (vocab < 1)
        return data_format_report(err, "[model] vocab_size", value, "must be at least 1");
    return 0;
}

/* Reading samples back. */

int data_format_read(const Split *sp, int vocab, int64_t at, int64_t n,
                     int32_t *out, DataError *why)
{
    const TokenFile *tf = sp->file;
    int w = tf->width;
    int64_t pos = sp->start + at, byte = tf->first + pos * w, bytes = n * w;
    /* out holds 4 bytes a token: read the w-byte tokens into its tail and
     * widen from the front, which never overtakes the token it reads */
    uint8_t *raw = (uint8_t *)out + (4 - w) * n;
    int64_t got = read_at(tf->fd, raw, bytes, byte);
    if (got != bytes) {
        int e = errno;
        struct stat st;
        long long now = fstat(tf->fd, &st) == 0 ? (long long)st.st_size : -1;
        if (got < 0)
            snprintf(why->msg, sizeof why->msg,
                     "trident: %s = %s: cannot read tokens at byte %lld: %s",
                     tf->key, tf->path, (long long)byte, strerror(e));
        else
            snprintf(why->msg, sizeof why->msg,
                     "trident: %s = %s: the file shrank during the run: tokens at bytes %lld-%lld are past its end (%lld bytes now, %lld when training started)",
                     tf->key, tf->path, (long long)byte, (long long)(byte + bytes - 1), now,
                     (long long)tf->size);
        return 1;
    }
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        out[i] = token_at(raw, w, i);
        bad |= outside(out[i], vocab);
    }
    if (!bad)
        return 0;
    int64_t i = 0;
    while (!outside(out[i], vocab))
        i++;
    snprintf(why->msg, sizeof why->msg,
             "trident: %s = %s: token %d at position %lld (byte %lld) is outside the vocabulary (vocab_size %d): the file changed after the check at start-up",
             tf->key, tf->path, (int)out[i], (long long)(pos + i), (long long)(byte + i * w),
             vocab);
    return 1;
}
