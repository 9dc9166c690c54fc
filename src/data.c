/*
 * data.c - token files read with pread (text, llm.c shards, Megatron
 * indexed datasets; blends of them), the seeded window sampler and the
 * prefetching loader (see data.h).
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
 *   the Dataset is immutable (pread takes its offset as an argument), so the
 *   loader thread and the main thread read it without locks.
 * - Everything is checked at open (header, size, every token id), so a bad
 *   file fails before the first step with one line naming the key, the file
 *   and the reason, never as a garbage loss or a crash at step 10000.
 * - And again where a sample is read (one compare per token): a file
 *   rewritten during the run must not feed ids past the vocabulary to the
 *   model, whose embedding would give them zeros and its loss no target, so
 *   that the loss goes wrong and damaged checkpoints look sound.
 * - Training sample g is a pure function of (seed, g) (doc/design.md, invariant 1):
 *   epoch e = g / W picks a seeded shift and a seeded permutation of the W
 *   windows, computed in O(1) memory by a Feistel network, so no rank stores
 *   or communicates an order, and resuming at any g needs only g.
 * - The splits never overlap: a held-out validation split is the tail of the
 *   train file, and the window count reserves room for the largest shift, so
 *   no training window ever reaches a validation token.
 * - An indexed dataset is one more token file: its index is checked once
 *   (indexed.c) and its .bin read as a stream, since samples may cross
 *   document boundaries. A blend is a list of such parts; the blend walk
 *   (which part sample g comes from) is the loader thread's own state, so
 *   the Dataset stays immutable and shared without locks.
 */
#include "data.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "blend.h"
#include "file_check.h"
#include "indexed.h"
#include "rng.h"

#define SHARD_MAGIC 20240520
#define SHARD_VERSION 1
#define SHARD_HEADER_INTS 256
#define SHARD_HEADER_BYTES (SHARD_HEADER_INTS * 4)

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

/* One dataset of the training blend (the only one without a blend). */
typedef struct {
    Split split;
    int64_t windows;          /* W: training windows per epoch */
    int shifted;              /* 1: per-epoch shift in [0, seq_len); 0: no room, shift 0 */
    uint64_t seed_salt;       /* j * GOLDEN for dataset j: their orders differ; 0 for the first */
} TrainPart;

/* One validation dataset: its held-out tail, or a [data] val file. */
typedef struct {
    Split split;
    int64_t windows;          /* V */
} ValPart;

struct Dataset {
    TokenFile *files;         /* the train datasets', then [data] val's if set */
    int n_files;
    Blend train_blend;        /* [data] train: one dataset, or weights and names */
    Blend val_blend;          /* [data] val; n = 0 when the tails of train are held out */
    const Blend *val_of;      /* the blend that names the validation parts */
    TrainPart *train;         /* train_blend.n */
    ValPart *val;             /* val_of->n */
    int vocab;                /* every id read must be below it */
    int seq_len;
    int64_t n_train, n_val;   /* tokens in all train / val parts */
};

/* Error reporting. */

/* One line: "trident: <key> = <value>: <reason>". */
static int report(FILE *err, const char *key, const char *value,
                  const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int report(FILE *err, const char *key, const char *value,
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

/* A caller broke the API contract: no sane way on, so say what and stop. */
static void bug(const char *what)
{
    fprintf(stderr, "trident: data.c: programming error: %s\n", what);
    fflush(stderr);
    abort();
}

/* Hashing and the permutation. */

#define GOLDEN 0x9e3779b97f4a7c15ULL
#define TAG_SHIFT 0x5348494654ULL  /* "SHIFT": keeps the two streams apart */
#define TAG_PERM 0x5045524dULL     /* "PERM" */

/* Folds v into the running hash h; distinct v give distinct inputs to the
 * final mix for a fixed h, because rng_mix64 is a bijection. */
static uint64_t hash_combine(uint64_t h, uint64_t v)
{
    return rng_mix64(h + GOLDEN + rng_mix64(v));
}

static uint64_t epoch_key(uint64_t seed, uint64_t tag, int64_t epoch)
{
    return hash_combine(hash_combine(seed, tag), (uint64_t)epoch);
}

/* Smallest h with 4^h >= w (w >= 2): the Feistel network is balanced, so
 * its domain is 2^(2h) values, less than 4w, which bounds cycle-walking. */
static int half_bits(int64_t w)
{
    int h = 1;
    while (h < 32 && (((uint64_t)1 << (2 * h)) < (uint64_t)w))
        h++;
    return h;
}

/* Four Feistel rounds on (l, r), h bits each. Each round maps (l, r) to
 * (r, l ^ F(r)), which is undone by (l, r) = (r' ^ F(l'), l'), so the
 * network is a bijection of [0, 4^h) whatever the round function F. */
static uint64_t feistel(uint64_t x, int h, const uint64_t key[4])
{
    uint64_t mask = ((uint64_t)1 << h) - 1;
    uint64_t l = x >> h, r = x & mask;
    for (int i = 0; i < 4; i++) {
        uint64_t t = l ^ (rng_mix64(key[i] ^ r) & mask);
        l = r;
        r = t;
    }
    return (l << h) | r;
}

/* A seeded bijection of [0, w): apply the Feistel permutation of [0, 4^h)
 * until the value falls back into [0, w) ("cycle-walking"). It terminates:
 * p lies on a finite cycle of the permutation, and that cycle comes back to
 * p < w. It is a bijection: walking the cycles backwards from the result
 * recovers p, so two starting points cannot meet. Since 4^h < 4w, it takes
 * fewer than 4 steps on average. */
static int64_t permute(int64_t p, int64_t w, uint64_t key)
{
    if (w <= 1)
        return 0;
    uint64_t round_key[4];
    for (int i = 0; i < 4; i++)
        round_key[i] = hash_combine(key, (uint64_t)i);
    int h = half_bits(w);
    uint64_t x = (uint64_t)p;
    do
        x = feistel(x, h, round_key);
    while (x >= (uint64_t)w);
    return (int64_t)x;
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

static void close_file(TokenFile *tf)
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
        return report(err, key, path, "%s", errno == EISDIR ? "is a directory" : why);
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) != 0)
        rc = report(err, key, path, "%s", strerror(errno));
    else if (st.st_size == 0 && has_unsized_content(fd))
        rc = report(err, key, path, "the system reports a size of 0 for a file that has content "
                    "(a file of /proc or /sys, made as it is read): copy it to a regular file "
                    "first, e.g. cp %s data.txt", path);
    else if (st.st_size == 0)
        rc = report(err, key, path, "empty file");
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
        return report(err, key, path,
                      "too small for a token shard: %lld bytes, the header alone is %d",
                      (long long)tf->size, SHARD_HEADER_BYTES);
    int64_t got = read_at(tf->fd, b, SHARD_HEADER_BYTES, 0);
    if (got != SHARD_HEADER_BYTES)
        return report(err, key, path, "cannot read the shard header: %s",
                      got < 0 ? strerror(errno) : "the file shrank while it was opened");
    int32_t magic = le_i32(b), version = le_i32(b + 4), count = le_i32(b + 8);
    if (magic != SHARD_MAGIC)
        return report(err, key, path, "not a token shard: magic %d (expected %d)",
                      (int)magic, SHARD_MAGIC);
    if (version != SHARD_VERSION)
        return report(err, key, path, "unsupported version %d (expected %d)",
                      (int)version, SHARD_VERSION);
    if (count < 0)
        return report(err, key, path, "negative token count %d in the header",
                      (int)count);
    uint64_t want = SHARD_HEADER_BYTES + 2 * (uint64_t)count;
    uint64_t have = (uint64_t)tf->size;
    if (have < want)
        return report(err, key, path,
                      "truncated: header says %d tokens but the file holds %llu",
                      (int)count,
                      (unsigned long long)((have - SHARD_HEADER_BYTES) / 2));
    if (have > want)
        return report(err, key, path,
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
        return report(err, tf->key, tf->path, "out of memory");
    posix_fadvise(tf->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    int rc = 0;
    int64_t per_chunk = SCAN_CHUNK_BYTES / width;
    for (int64_t i = 0; i < tf->count && !rc; i += per_chunk) {
        int64_t n = tf->count - i < per_chunk ? tf->count - i : per_chunk;
        int64_t off = tf->first + i * width;
        int64_t got = read_at(tf->fd, buf, n * width, off);
        if (got != n * width) {
            rc = report(err, tf->key, tf->path, "cannot read tokens at byte %lld: %s",
                        (long long)(off + (got > 0 ? got : 0)),
                        got < 0 ? strerror(errno) : "the file shrank while it was checked");
            break;
        }
        int64_t bad = first_out_of_vocab(buf, width, n, vocab);
        if (bad >= 0)
            rc = report(err, tf->key, tf->path,
                        "token %d at position %lld is outside the vocabulary (vocab_size %d)",
                        (int)token_at(buf, width, bad), (long long)(i + bad), vocab);
    }
    posix_fadvise(tf->fd, 0, 0, POSIX_FADV_RANDOM);
    free(buf);
    return rc;
}

/* An indexed dataset: PREFIX.idx read and checked (indexed.c), then
 * PREFIX.bin kept open as the token file, at least as long as the index
 * says (Megatron's reader allows more, and so does trident). */
static int open_indexed(TokenFile *tf, const char *key, const char *prefix, FILE *err)
{
    char idx[CONFIG_PATH_MAX + 8], why[512];
    snprintf(idx, sizeof idx, "%s.idx", prefix);
    if (access(idx, F_OK) != 0 && errno == ENOENT)
        return report(err, key, idx, "no such file (format = indexed names a dataset by the "
                      "prefix of its .idx and .bin: %s names %s.idx and %s.bin)",
                      prefix, prefix, prefix);
    TokenFile f;
    if (open_file(&f, key, idx, err))
        return 1;
    IndexedIndex ix;
    int rc = indexed_read(f.fd, f.size, &ix, why, sizeof why);
    close_file(&f);
    if (rc)
        return report(err, key, idx, "%s", why);
    char bin[CONFIG_PATH_MAX + 8];
    snprintf(bin, sizeof bin, "%s.bin", prefix);
    if (open_file(tf, key, bin, err))
        return 1;
    tf->first = 0;
    tf->count = ix.tokens;
    tf->width = ix.width;
    if (tf->size / ix.width < ix.tokens)
        return report(err, key, bin, "shorter than its index says: %s lists %lld %s tokens "
                      "(%lld bytes), the file has %lld bytes",
                      idx, (long long)ix.tokens, indexed_dtype_name(ix.dtype),
                      (long long)ix.tokens * ix.width, (long long)tf->size);
    return 0;
}

/* Opens one file (or indexed dataset) of the configured format and checks
 * every token. */
static int load_file(TokenFile *tf, const char *key, const char *path,
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

/* Checks that need no file: the model's vocabulary must hold every id the
 * format can produce (text) or can be stored in a shard (tokens). */
static int check_model(DataFormat format, int seq_len, int vocab, FILE *err)
{
    char value[32];
    if (seq_len < 1) {
        snprintf(value, sizeof value, "%d", seq_len);
        return report(err, "[model] seq_len", value, "must be at least 1");
    }
    snprintf(value, sizeof value, "%d", vocab);
    if (format == DATA_TEXT && vocab < 256)
        return report(err, "[model] vocab_size", value,
                      "format=text reads bytes, which needs vocab_size >= 256");
    if (format == DATA_TOKENS && (vocab < 1 || vocab > 65536))
        return report(err, "[model] vocab_size", value,
                      "format=tokens stores uint16 ids, which needs 1 <= vocab_size <= 65536");
    if (vocab < 1)
        return report(err, "[model] vocab_size", value, "must be at least 1");
    return 0;
}

/* Opening. */

/* Windows of a training part. W reserves seq_len - 1 tokens of room so
 * that every shift in [0, seq_len) keeps the last window inside the split:
 * the last token read is at most (seq_len - 1) + W * seq_len <= n - 1. A
 * split shorter than 2 * seq_len has no room for that; it then has exactly
 * one window, at offset 0, and the shift is always 0. */
static void set_windows(TrainPart *tp, int seq_len)
{
    int64_t n = tp->split.count, t = seq_len;
    int64_t w = (n - 1 - (t - 1)) / t;
    tp->shifted = w >= 1;
    tp->windows = tp->shifted ? w : (n - 1) / t;
}

static int check_split_sizes(const Dataset *ds, const DataConfig *cfg, FILE *err)
{
    int need = ds->seq_len + 1;
    for (int j = 0; j < ds->train_blend.n; j++)
        if (ds->train[j].split.count < need)
            return report(err, "[data] train", ds->train_blend.prefix[j],
                          "too short: %lld tokens in the train split, a sample needs seq_len+1 = %d",
                          (long long)ds->train[j].split.count, need);
    for (int j = 0; j < ds->val_of->n; j++) {
        if (ds->val[j].split.count >= need)
            continue;
        if (cfg->val[0])
            return report(err, "[data] val", ds->val_of->prefix[j],
                          "too short: %lld tokens in the val split, a sample needs seq_len+1 = %d",
                          (long long)ds->val[j].split.count, need);
        return report(err, "[data] train", ds->val_of->prefix[j],
                      "too short: %lld tokens in the held-out validation split (last %g%% of [data] train), a sample needs seq_len+1 = %d",
                      (long long)ds->val[j].split.count, cfg->val_fraction * 100.0, need);
    }
    return 0;
}

/* Uses the val files, or holds out the last floor(count * val_fraction)
 * tokens of each train file; the train split is everything before them. */
static void set_splits(Dataset *ds, const DataConfig *cfg)
{
    int n = ds->train_blend.n;
    for (int j = 0; j < n; j++) {
        const TokenFile *tf = &ds->files[j];
        int64_t held = 0;
        if (!cfg->val[0]) {
            double f = cfg->val_fraction;
            if (f >= 1.0)
                held = tf->count;
            else if (f > 0.0)
                held = (int64_t)((double)tf->count * f);
            ds->val[j].split = (Split){tf, tf->count - held, held};
        }
        ds->train[j].split = (Split){tf, 0, tf->count - held};
        ds->train[j].seed_salt = (uint64_t)j * GOLDEN;
        ds->n_train += ds->train[j].split.count;
    }
    if (cfg->val[0])
        for (int j = 0; j < ds->val_of->n; j++) {
            const TokenFile *tf = &ds->files[n + j];
            ds->val[j].split = (Split){tf, 0, tf->count};
        }
    for (int j = 0; j < ds->val_of->n; j++) {
        ds->val[j].windows = (ds->val[j].split.count - 1) / ds->seq_len;
        ds->n_val += ds->val[j].split.count;
    }
}

/* Parses [data] train and [data] val into blends, and makes room for their
 * files and parts. */
static int parse_blends(Dataset *ds, const DataConfig *cfg, FILE *err)
{
    char why[512];
    if (blend_parse(cfg->train, &ds->train_blend, why, sizeof why))
        return report(err, "[data] train", cfg->train, "%s", why);
    ds->val_of = &ds->train_blend;
    if (cfg->val[0]) {
        if (blend_parse(cfg->val, &ds->val_blend, why, sizeof why))
            return report(err, "[data] val", cfg->val, "%s", why);
        ds->val_of = &ds->val_blend;
    }
    ds->n_files = ds->train_blend.n + ds->val_blend.n;
    ds->files = calloc((size_t)ds->n_files, sizeof *ds->files);
    ds->train = calloc((size_t)ds->train_blend.n, sizeof *ds->train);
    ds->val = calloc((size_t)ds->val_of->n, sizeof *ds->val);
    if (!ds->files || !ds->train || !ds->val)
        return report(err, "[data] train", cfg->train, "out of memory");
    for (int i = 0; i < ds->n_files; i++)
        ds->files[i].fd = -1;
    return 0;
}

int data_open(Dataset **out, const DataConfig *cfg, int seq_len,
              int vocab_size, FILE *err)
{
    *out = NULL;
    if (check_model(cfg->format, seq_len, vocab_size, err))
        return 1;
    Dataset *ds = calloc(1, sizeof *ds);
    if (!ds)
        return report(err, "[data] train", cfg->train, "out of memory");
    ds->seq_len = seq_len;
    ds->vocab = vocab_size;
    int rc = parse_blends(ds, cfg, err);
    for (int i = 0; i < ds->n_files && !rc; i++) {
        int is_train = i < ds->train_blend.n;
        const char *prefix = is_train ? ds->train_blend.prefix[i]
                                      : ds->val_blend.prefix[i - ds->train_blend.n];
        rc = load_file(&ds->files[i], is_train ? "[data] train" : "[data] val", prefix,
                       cfg->format, vocab_size, err);
    }
    if (rc == 0) {
        set_splits(ds, cfg);
        rc = check_split_sizes(ds, cfg, err);
    }
    if (rc) {
        data_close(ds);
        return rc;
    }
    for (int j = 0; j < ds->train_blend.n; j++)
        set_windows(&ds->train[j], seq_len);
    *out = ds;
    return 0;
}

void data_close(Dataset *ds)
{
    if (!ds)
        return;
    for (int i = 0; i < ds->n_files; i++)
        close_file(&ds->files[i]);
    free(ds->files);
    free(ds->train);
    free(ds->val);
    blend_free(&ds->train_blend);
    blend_free(&ds->val_blend);
    free(ds);
}

int64_t data_train_tokens(const Dataset *ds) { return ds->n_train; }
int64_t data_val_tokens(const Dataset *ds) { return ds->n_val; }

int64_t data_train_windows(const Dataset *ds)
{
    int64_t w = 0;
    for (int j = 0; j < ds->train_blend.n; j++)
        w += ds->train[j].windows;
    return w;
}

int64_t data_val_windows(const Dataset *ds) { return ds->val[0].windows; }

int data_train_parts(const Dataset *ds) { return ds->train_blend.n; }
const char *data_train_name(const Dataset *ds, int j) { return ds->train_blend.name[j]; }
double data_train_weight(const Dataset *ds, int j) { return ds->train_blend.weight[j]; }
int64_t data_train_part_tokens(const Dataset *ds, int j) { return ds->train[j].split.count; }
int data_val_parts(const Dataset *ds) { return ds->val_of->n; }
const char *data_val_name(const Dataset *ds, int j) { return ds->val_of->name[j]; }
double data_val_weight(const Dataset *ds, int j) { return ds->val_of->weight[j]; }
int64_t data_val_part_tokens(const Dataset *ds, int j) { return ds->val[j].split.count; }

/* Sampling. */

/* Start offset of sample k of training part tp. */
static int64_t part_offset(const Dataset *ds, const TrainPart *tp, uint64_t seed, int64_t k)
{
    uint64_t s = seed ^ tp->seed_salt;
    int64_t w = tp->windows, e = k / w, p = k % w;
    int64_t shift = 0;
    if (tp->shifted)
        shift = (int64_t)(epoch_key(s, TAG_SHIFT, e) % (uint64_t)ds->seq_len);
    int64_t window = permute(p, w, epoch_key(s, TAG_PERM, e));
    return shift + window * ds->seq_len;
}

/* The part and offset of training sample g, walking the blend with walk. */
static int locate(const Dataset *ds, BlendWalk *walk, uint64_t seed, int64_t g, int64_t *offset)
{
    if (g < 0)
        bug("data_train_offset: negative sample index");
    int64_t k;
    int j = blend_locate(&ds->train_blend, walk, g, &k);
    *offset = part_offset(ds, &ds->train[j], seed, k);
    return j;
}

/* A walk of its own for a call that has none: from sample 0. */
static int locate_once(const Dataset *ds, uint64_t seed, int64_t g, int64_t *offset)
{
    BlendWalk walk;
    if (blend_walk_init(&walk, &ds->train_blend))
        bug("out of memory for a blend walk");
    int j = locate(ds, &walk, seed, g, offset);
    blend_walk_free(&walk);
    return j;
}

int64_t data_train_offset(const Dataset *ds, uint64_t seed, int64_t g)
{
    int64_t offset;
    locate_once(ds, seed, g, &offset);
    return offset;
}

int data_train_part(const Dataset *ds, int64_t g)
{
    int64_t offset;
    return locate_once(ds, 0, g, &offset);
}

/* Reads n tokens of split sp from token `at` of the split into out as
 * int32, checking each id against the vocabulary. Returns 0, or 1 with a
 * line in why naming the file, the offset and what is wrong: the file
 * changed after data_open checked it (rewritten, or truncated). */
static int read_tokens(const Dataset *ds, const Split *sp, int64_t at, int64_t n,
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
        bad |= outside(out[i], ds->vocab);
    }
    if (!bad)
        return 0;
    int64_t i = 0;
    while (!outside(out[i], ds->vocab))
        i++;
    snprintf(why->msg, sizeof why->msg,
             "trident: %s = %s: token %d at position %lld (byte %lld) is outside the vocabulary (vocab_size %d): the file changed after the check at start-up",
             tf->key, tf->path, (int)out[i], (long long)(pos + i), (long long)(byte + i * w),
             ds->vocab);
    return 1;
}

/* Training sample g, located with walk. */
static int train_sample(const Dataset *ds, BlendWalk *walk, uint64_t seed, int64_t g,
                        int32_t *out, DataError *why)
{
    DataError ignored;
    int64_t offset;
    int j = locate(ds, walk, seed, g, &offset);
    return read_tokens(ds, &ds->train[j].split, offset, ds->seq_len + 1, out,
                       why ? why : &ignored);
}

int data_train_sample(const Dataset *ds, uint64_t seed, int64_t g, int32_t *out,
                      DataError *why)
{
    BlendWalk walk;
    if (blend_walk_init(&walk, &ds->train_blend))
        bug("out of memory for a blend walk");
    int rc = train_sample(ds, &walk, seed, g, out, why);
    blend_walk_free(&walk);
    return rc;
}

int data_val_part_sample(const Dataset *ds, int j, int64_t i, int32_t *out, DataError *why)
{
    DataError ignored;
    if (j < 0 || j >= ds->val_of->n)
        bug("data_val_part_sample: no such validation dataset");
    const ValPart *vp = &ds->val[j];
    int64_t v = vp->windows, k = i % v;
    if (k < 0)
        k += v;
    return read_tokens(ds, &vp->split, k * ds->seq_len, ds->seq_len + 1, out,
                       why ? why : &ignored);
}

int data_val_sample(const Dataset *ds, int64_t i, int32_t *out, DataError *why)
{
    return data_val_part_sample(ds, 0, i, out, why);
}

/* The prefetching loader. */

/* One job at a time, in two buffers used alternately: request N fills
 * buf[N % 2] while the caller still reads buf[(N - 1) % 2], the batch that
 * wait N-1 returned. So a batch stays valid until the next-but-one request,
 * which is what lets a caller request N+1 before computing on N.
 * state: IDLE (no job), QUEUED (requested, thread not done), READY (done,
 * not yet taken by loader_wait). */
enum { LOADER_IDLE, LOADER_QUEUED, LOADER_READY };

struct Loader {
    const Dataset *ds;
    uint64_t seed;
    BlendWalk walk;         /* the loader thread's place in the blend */
    int rows;
    int32_t *buf[2];
    int64_t *index;         /* the job's sample indices, rows entries */
    int job_buf;            /* buffer of the current job */
    int next_buf;           /* buffer the next request fills */
    int state;
    int failed;             /* the job's batch could not be read: see error */
    DataError error;
    int stop;
    pthread_mutex_t lock;
    pthread_cond_t queued;  /* signals the thread: a job or stop */
    pthread_cond_t ready;   /* signals the caller: the job is done */
    pthread_t thread;
};

/* Returns 1, with ld->error set, at the first sample that cannot be read. */
static int fill_batch(Loader *ld, int32_t *dst)
{
    size_t row = (size_t)ld->ds->seq_len + 1;
    for (int i = 0; i < ld->rows; i++)
        if (train_sample(ld->ds, &ld->walk, ld->seed, ld->index[i], dst + (size_t)i * row,
                         &ld->error))
            return 1;
    return 0;
}

/* The index array and the job's buffer are the thread's alone between
 * QUEUED and READY (loader_request refuses to overwrite them meanwhile), so
 * the copy runs without the lock. */
static void *loader_main(void *arg)
{
    Loader *ld = arg;
    pthread_mutex_lock(&ld->lock);
    for (;;) {
        while (!ld->stop && ld->state != LOADER_QUEUED)
            pthread_cond_wait(&ld->queued, &ld->lock);
        if (ld->stop)
            break;
        int32_t *dst = ld->buf[ld->job_buf];
        pthread_mutex_unlock(&ld->lock);
        int failed = fill_batch(ld, dst);
        pthread_mutex_lock(&ld->lock);
        ld->failed = failed;
        ld->state = LOADER_READY;
        pthread_cond_signal(&ld->ready);
    }
    pthread_mutex_unlock(&ld->lock);
    return NULL;
}

static void loader_free(Loader *ld)
{
    free(ld->buf[0]);
    free(ld->buf[1]);
    free(ld->index);
    blend_walk_free(&ld->walk);
    free(ld);
}

Loader *loader_create(const Dataset *ds, uint64_t seed, int rows)
{
    if (rows < 1)
        bug("loader_create: rows must be at least 1");
    Loader *ld = calloc(1, sizeof *ld);
    if (!ld)
        return NULL;
    size_t n = (size_t)rows * ((size_t)ds->seq_len + 1);
    ld->ds = ds;
    ld->seed = seed;
    ld->rows = rows;
    ld->buf[0] = malloc(n * sizeof(int32_t));
    ld->buf[1] = malloc(n * sizeof(int32_t));
    ld->index = malloc((size_t)rows * sizeof(int64_t));
    int no_walk = blend_walk_init(&ld->walk, &ds->train_blend);
    if (!ld->buf[0] || !ld->buf[1] || !ld->index || no_walk) {
        loader_free(ld);
        return NULL;
    }
    pthread_mutex_init(&ld->lock, NULL);
    pthread_cond_init(&ld->queued, NULL);
    pthread_cond_init(&ld->ready, NULL);
    if (pthread_create(&ld->thread, NULL, loader_main, ld) != 0) {
        pthread_cond_destroy(&ld->ready);
        pthread_cond_destroy(&ld->queued);
        pthread_mutex_destroy(&ld->lock);
        loader_free(ld);
        return NULL;
    }
    return ld;
}

/* A queued job is abandoned or finished, whichever comes first; either way
 * the thread sees stop before it would wait again, so join returns. */
void loader_destroy(Loader *ld)
{
    if (!ld)
        return;
    pthread_mutex_lock(&ld->lock);
    ld->stop = 1;
    pthread_cond_signal(&ld->queued);
    pthread_mutex_unlock(&ld->lock);
    pthread_join(ld->thread, NULL);
    pthread_cond_destroy(&ld->ready);
    pthread_cond_destroy(&ld->queued);
    pthread_mutex_destroy(&ld->lock);
    loader_free(ld);
}

void loader_request(Loader *ld, const int64_t *index)
{
    pthread_mutex_lock(&ld->lock);
    if (ld->state != LOADER_IDLE)
        bug("loader_request: the previous batch was not taken by loader_wait");
    memcpy(ld->index, index, (size_t)ld->rows * sizeof(int64_t));
    ld->job_buf = ld->next_buf;
    ld->next_buf ^= 1;
    ld->state = LOADER_QUEUED;
    pthread_cond_signal(&ld->queued);
    pthread_mutex_unlock(&ld->lock);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

const int32_t *loader_wait(Loader *ld, double *wait_s, DataError *why)
{
    double t0 = now_s();
    pthread_mutex_lock(&ld->lock);
    if (ld->state == LOADER_IDLE)
        bug("loader_wait: no batch was requested");
    while (ld->state != LOADER_READY)
        pthread_cond_wait(&ld->ready, &ld->lock);
    ld->state = LOADER_IDLE;
    const int32_t *batch = ld->failed ? NULL : ld->buf[ld->job_buf];
    if (ld->failed && why)
        *why = ld->error;
    pthread_mutex_unlock(&ld->lock);
    if (wait_s)
        *wait_s = now_s() - t0;
    return batch;
}
