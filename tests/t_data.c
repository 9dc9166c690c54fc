/*
 * t_data.c - TAP test of data.c: file checks and their one-line messages,
 * the sampler's purity, coverage and split separation, sample contents,
 * and the prefetching loader.
 *
 * Every rank runs the same checks on its own temporary files (mkstemp in
 * $TMPDIR or /tmp), so the test means the same at any rank count; tap_ok
 * agrees the verdicts across ranks.
 */
#include "data.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tap.h"

#define MAX_TMP 64
#define PATH_LEN 512
#define LOADER_T 64 /* seq_len of the loader tests' dataset */

static char tmp_paths[MAX_TMP][PATH_LEN];
static int n_tmp;

/* Writes bytes to a new temporary file; its name goes to path and it is
 * removed by remove_tmp_files at the end. */
static void write_tmp(char *path, const void *bytes, size_t n)
{
    const char *dir = getenv("TMPDIR");
    snprintf(path, PATH_LEN, "%s/trident-t_data-XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(path);
    if (fd < 0 || n_tmp == MAX_TMP) {
        perror("t_data: mkstemp");
        exit(1);
    }
    const char *p = bytes;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w <= 0) {
            perror("t_data: write");
            exit(1);
        }
        p += w;
        n -= (size_t)w;
    }
    close(fd);
    snprintf(tmp_paths[n_tmp++], PATH_LEN, "%s", path);
}

static void remove_tmp_files(void)
{
    for (int i = 0; i < n_tmp; i++)
        unlink(tmp_paths[i]);
}

static void put_le32(uint8_t *p, int32_t v)
{
    uint32_t u = (uint32_t)v;
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(u >> (8 * i));
}

/* An llm.c shard with the given header fields, n tokens and `extra` junk
 * bytes after them. */
static void write_shard(char *path, int32_t magic, int32_t version,
                        int32_t count, const uint16_t *tok, size_t n,
                        size_t extra)
{
    size_t size = 1024 + 2 * n + extra;
    uint8_t *b = calloc(size, 1);
    put_le32(b, magic);
    put_le32(b + 4, version);
    put_le32(b + 8, count);
    for (size_t i = 0; i < n; i++) {
        b[1024 + 2 * i] = (uint8_t)(tok[i] & 0xff);
        b[1024 + 2 * i + 1] = (uint8_t)(tok[i] >> 8);
    }
    write_tmp(path, b, size);
    free(b);
}

static void write_valid_shard(char *path, const uint16_t *tok, size_t n)
{
    write_shard(path, 20240520, 1, (int32_t)n, tok, n, 0);
}

static DataConfig data_config(const char *train, const char *val,
                              DataFormat format, double val_fraction)
{
    DataConfig c;
    memset(&c, 0, sizeof c);
    snprintf(c.train, sizeof c.train, "%s", train);
    snprintf(c.val, sizeof c.val, "%s", val ? val : "");
    c.format = format;
    c.val_fraction = val_fraction;
    return c;
}

/* Opens and captures what data_open writes to err (caller frees *msg). */
static int open_capture(Dataset **ds, const DataConfig *c, int seq_len,
                        int vocab, char **msg)
{
    size_t len = 0;
    *msg = NULL;
    FILE *err = open_memstream(msg, &len);
    int rc = data_open(ds, c, seq_len, vocab, err);
    fclose(err);
    return rc;
}

/* data_open fails, returns no Dataset, and writes exactly the line
 * "trident: <expected>\n". */
static void expect_error(const DataConfig *c, int seq_len, int vocab,
                         const char *what, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static void expect_error(const DataConfig *c, int seq_len, int vocab,
                         const char *what, const char *fmt, ...)
{
    char want[2048] = "trident: ";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(want + 9, sizeof want - 10, fmt, ap);
    va_end(ap);
    strcat(want, "\n");
    Dataset *ds = (Dataset *)1;
    char *msg;
    int rc = open_capture(&ds, c, seq_len, vocab, &msg);
    int ok = rc != 0 && ds == NULL && strcmp(msg, want) == 0;
    if (!ok)
        tap_diag("%s: rc %d, got \"%s\", want \"%s\"", what, rc, msg, want);
    tap_ok(ok, "%s: %.*s", what, (int)strcspn(msg, "\n"), msg);
    if (ds && ds != (Dataset *)1)
        data_close(ds);
    free(msg);
}

static Dataset *open_ok(const DataConfig *c, int seq_len, int vocab)
{
    Dataset *ds = NULL;
    char *msg;
    if (open_capture(&ds, c, seq_len, vocab, &msg))
        tap_diag("unexpected failure: %s", msg);
    free(msg);
    return ds;
}

/* Text whose train part (the first n_train bytes) is in 0..127 and whose
 * tail is in 128..255, so a training sample that touched the tail shows. */
static uint8_t *marked_text(size_t n, size_t n_train)
{
    uint8_t *t = malloc(n);
    for (size_t i = 0; i < n; i++)
        t[i] = (uint8_t)(i < n_train ? (i * 7 + 3) % 128 : 128 + (i * 5) % 128);
    return t;
}

static void test_open_text(void)
{
    char path[PATH_LEN];
    uint8_t *t = marked_text(10000, 9000);
    write_tmp(path, t, 10000);
    free(t);
    DataConfig c = data_config(path, NULL, DATA_TEXT, 0.1);
    Dataset *ds = open_ok(&c, 64, 256);
    int ok = ds && data_train_tokens(ds) == 9000 && data_val_tokens(ds) == 1000 &&
             data_train_windows(ds) == (9000 - 64) / 64 &&
             data_val_windows(ds) == 999 / 64;
    tap_ok(ok, "text opens: 10000 bytes -> 9000 train + 1000 held-out val tokens, 139 + 15 windows");
    data_close(ds);
}

static void test_open_shard(void)
{
    enum { N = 5000 };
    uint16_t tok[N];
    for (int i = 0; i < N; i++)
        tok[i] = (uint16_t)((i * 7919) % 50257);
    char train[PATH_LEN], val[PATH_LEN];
    write_valid_shard(train, tok, N);
    write_valid_shard(val, tok, 300);
    DataConfig c = data_config(train, val, DATA_TOKENS, 0.1);
    Dataset *ds = open_ok(&c, 32, 50304);
    int ok = ds && data_train_tokens(ds) == N && data_val_tokens(ds) == 300 &&
             data_train_windows(ds) == (N - 32) / 32 && data_val_windows(ds) == 299 / 32;
    tap_ok(ok, "token shard opens with a val shard: 5000 + 300 tokens");
    data_close(ds);
}

static void test_bad_files(void)
{
    char dir[PATH_LEN], missing[PATH_LEN + 64], path[PATH_LEN];
    const char *env = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s", env && *env ? env : "/tmp");
    snprintf(missing, sizeof missing, "%s/trident-t_data-missing-%ld-%d",
             dir, (long)getpid(), tap_rank());
    DataConfig c = data_config(missing, NULL, DATA_TEXT, 0.1);
    expect_error(&c, 8, 256, "missing file",
                 "[data] train = %s: No such file or directory", missing);

    write_tmp(path, "", 0);
    c = data_config(path, NULL, DATA_TOKENS, 0.1);
    expect_error(&c, 8, 50304, "empty file", "[data] train = %s: empty file", path);

    uint16_t tok[100] = {0};
    write_shard(path, 123, 1, 100, tok, 100, 0);
    c = data_config(path, NULL, DATA_TOKENS, 0.1);
    expect_error(&c, 8, 50304, "wrong magic",
                 "[data] train = %s: not a token shard: magic 123 (expected 20240520)", path);

    write_shard(path, 20240520, 2, 100, tok, 100, 0);
    c = data_config(path, NULL, DATA_TOKENS, 0.1);
    expect_error(&c, 8, 50304, "wrong version",
                 "[data] train = %s: unsupported version 2 (expected 1)", path);

    write_shard(path, 20240520, 1, 100, tok, 50, 0);
    c = data_config(path, NULL, DATA_TOKENS, 0.1);
    expect_error(&c, 8, 50304, "truncated shard",
                 "[data] train = %s: truncated: header says 100 tokens but the file holds 50", path);

    write_shard(path, 20240520, 1, 50, tok, 50, 3);
    c = data_config(path, NULL, DATA_TOKENS, 0.1);
    expect_error(&c, 8, 50304, "trailing bytes",
                 "[data] train = %s: trailing bytes: header says 50 tokens (1124 bytes) but the file has 1127 bytes", path);

    /* a FIFO: open() would wait for a writer for ever */
    char fifo[PATH_LEN + 64];
    snprintf(fifo, sizeof fifo, "%s/trident-t_data-fifo-%ld-%d", dir, (long)getpid(),
             tap_rank());
    unlink(fifo);
    if (mkfifo(fifo, 0600) != 0) {
        perror("t_data: mkfifo");
        exit(1);
    }
    c = data_config(fifo, NULL, DATA_TEXT, 0.1);
    expect_error(&c, 8, 256, "a FIFO, refused without waiting for a writer",
                 "[data] train = %s: a FIFO, not a regular file", fifo);
    unlink(fifo);
}

/* Overwrites `n` bytes at `off` of path in place (same inode, as a job
 * that rewrites the file would), or truncates it to `off` when n is 0. */
static void change_file(const char *path, int64_t off, const void *bytes, size_t n)
{
    int fd = open(path, O_WRONLY);
    int bad = fd < 0 || (n ? pwrite(fd, bytes, n, off) != (ssize_t)n : ftruncate(fd, off) != 0);
    if (bad) {
        perror("t_data: change_file");
        exit(1);
    }
    close(fd);
}

/* The file changes after data_open checked it: every sample read checks
 * again, and fails naming the file and the offset instead of handing the
 * model an id past the vocabulary, or dying of SIGBUS. */
static void test_changed_under_run(void)
{
    enum { N = 4000, T = 16 };
    uint16_t tok[N];
    for (int i = 0; i < N; i++)
        tok[i] = (uint16_t)(i % 100);
    char path[PATH_LEN];
    write_valid_shard(path, tok, N);
    DataConfig c = data_config(path, NULL, DATA_TOKENS, 0.1);
    Dataset *ds = open_ok(&c, T, 128);
    int32_t s[T + 1];
    DataError why;
    int64_t off = ds ? data_train_offset(ds, 3, 0) : 0;
    int before = ds && data_train_sample(ds, 3, 0, s, &why) == 0;
    uint8_t big[2] = {200, 0}; /* id 200 >= vocab_size 128 */
    change_file(path, 1024 + 2 * (off + 5), big, 2);
    char want[2 * PATH_LEN];
    snprintf(want, sizeof want,
             "trident: [data] train = %s: token 200 at position %lld (byte %lld) is outside the vocabulary (vocab_size 128)",
             path, (long long)(off + 5), (long long)(1024 + 2 * (off + 5)));
    int after = ds ? data_train_sample(ds, 3, 0, s, &why) : 0;
    tap_ok(before && after == 1 && strncmp(why.msg, want, strlen(want)) == 0,
           "a token rewritten past the vocabulary after open is caught where the sample is read");
    if (after && strncmp(why.msg, want, strlen(want)) != 0)
        tap_diag("got:  %s\nwant: %s", why.msg, want);

    int64_t v = ds ? data_val_windows(ds) : 0;
    int val_before = ds && data_val_sample(ds, v - 1, s, NULL) == 0;
    change_file(path, 2048, NULL, 0);
    snprintf(want, sizeof want, "trident: [data] train = %s: the file shrank during the run", path);
    int val_after = ds ? data_val_sample(ds, v - 1, s, &why) : 0;
    tap_ok(val_before && val_after == 1 && strncmp(why.msg, want, strlen(want)) == 0
           && strstr(why.msg, "(2048 bytes now, 9024 when training started)"),
           "a file truncated after open fails the read, naming the file and its sizes");
    if (val_after && strncmp(why.msg, want, strlen(want)) != 0)
        tap_diag("got:  %s", why.msg);

    /* the loader hands the failure to its caller instead of a batch */
    Loader *ld = ds ? loader_create(ds, 3, 4) : NULL;
    int64_t index[4] = {0, 1, 2, 3};
    const int32_t *b = (const int32_t *)1;
    memset(&why, 0, sizeof why);
    if (ld) {
        loader_request(ld, index);
        b = loader_wait(ld, NULL, &why);
        loader_destroy(ld);
    }
    tap_ok(ld && !b && strstr(why.msg, path), "loader_wait returns no batch and the reason");
    data_close(ds);
}

/* Several offenders in a file long enough to be split across threads: the
 * first must be named, every time. */
static void test_out_of_vocab(void)
{
    enum { N = 200000 };
    uint16_t *tok = calloc(N, sizeof *tok);
    tok[12] = 60000;
    tok[100] = 50304;
    tok[150000] = 65535;
    char train[PATH_LEN], val[PATH_LEN], good[PATH_LEN];
    write_valid_shard(train, tok, N);
    DataConfig c = data_config(train, NULL, DATA_TOKENS, 0.1);
    expect_error(&c, 8, 50304, "first out-of-vocabulary token",
                 "[data] train = %s: token 60000 at position 12 is outside the vocabulary (vocab_size 50304)", train);

    tok[12] = tok[100] = tok[150000] = 0;
    write_valid_shard(good, tok, N);
    tok[N - 1] = 50304;
    write_valid_shard(val, tok, N);
    c = data_config(good, val, DATA_TOKENS, 0.1);
    expect_error(&c, 8, 50304, "out-of-vocabulary token in the val file",
                 "[data] val = %s: token 50304 at position %d is outside the vocabulary (vocab_size 50304)", val, N - 1);
    free(tok);
}

static void test_too_short(void)
{
    char train[PATH_LEN], val[PATH_LEN], small[PATH_LEN];
    uint8_t *t = marked_text(1000, 1000);
    write_tmp(train, t, 1000);
    write_tmp(small, t, 50);
    write_tmp(val, t, 20);
    free(t);

    DataConfig c = data_config(small, train, DATA_TEXT, 0.1);
    expect_error(&c, 128, 256, "train split too short",
                 "[data] train = %s: too short: 50 tokens in the train split, a sample needs seq_len+1 = 129", small);
    c = data_config(train, NULL, DATA_TEXT, 0.1);
    expect_error(&c, 128, 256, "held-out val split too short",
                 "[data] train = %s: too short: 100 tokens in the held-out validation split (last 10%% of [data] train), a sample needs seq_len+1 = 129", train);
    c = data_config(train, val, DATA_TEXT, 0.1);
    expect_error(&c, 128, 256, "val file too short",
                 "[data] val = %s: too short: 20 tokens in the val split, a sample needs seq_len+1 = 129", val);
}

static void test_vocab_size(void)
{
    char path[PATH_LEN];
    uint8_t *t = marked_text(1000, 1000);
    write_tmp(path, t, 1000);
    free(t);
    DataConfig c = data_config(path, NULL, DATA_TEXT, 0.1);
    expect_error(&c, 8, 200, "text needs vocab_size >= 256",
                 "[model] vocab_size = 200: format=text reads bytes, which needs vocab_size >= 256");
    c = data_config(path, NULL, DATA_TOKENS, 0.1);
    expect_error(&c, 8, 70000, "tokens need vocab_size <= 65536",
                 "[model] vocab_size = 70000: format=tokens stores uint16 ids, which needs 1 <= vocab_size <= 65536");
}

/* A text Dataset with exactly w training windows (explicit val file, so the
 * whole file is the train split): n = (w + 1) * seq_len. */
static Dataset *open_windows(int64_t n_tokens, int seq_len)
{
    char train[PATH_LEN], val[PATH_LEN];
    uint8_t *t = marked_text((size_t)n_tokens, (size_t)n_tokens);
    write_tmp(train, t, (size_t)n_tokens);
    write_tmp(val, t, (size_t)seq_len + 1);
    free(t);
    DataConfig c = data_config(train, val, DATA_TEXT, 0.1);
    return open_ok(&c, seq_len, 256);
}

/* Within epoch e, every offset has the same shift (< seq_len) and the
 * windows form a permutation of [0, W). Fills windows[] when given. */
static int epoch_is_permutation(const Dataset *ds, uint64_t seed, int64_t e,
                                int seq_len, int64_t *windows)
{
    int64_t w = data_train_windows(ds);
    char *seen = calloc((size_t)w, 1);
    int ok = 1;
    int64_t shift = data_train_offset(ds, seed, e * w) % seq_len;
    for (int64_t p = 0; p < w && ok; p++) {
        int64_t off = data_train_offset(ds, seed, e * w + p);
        int64_t win = off / seq_len;
        ok = off >= 0 && off % seq_len == shift && win < w && !seen[win];
        if (ok)
            seen[win] = 1;
        if (windows)
            windows[p] = win;
    }
    free(seen);
    return ok;
}

static void test_coverage(void)
{
    const int64_t ws[] = {1, 2, 7, 1000, 1024, 1025};
    const int seq_len = 8;
    for (size_t k = 0; k < sizeof ws / sizeof ws[0]; k++) {
        Dataset *ds = open_windows((ws[k] + 1) * seq_len, seq_len);
        int ok = ds && data_train_windows(ds) == ws[k];
        for (int64_t e = 0; e < 3 && ok; e++)
            ok = epoch_is_permutation(ds, 1234, e, seq_len, NULL);
        tap_ok(ok, "W = %lld: each of epochs 0..2 visits every window exactly once",
               (long long)ws[k]);
        data_close(ds);
    }
    /* 12 tokens < 2 * seq_len: no room for a shift, one window at 0. */
    Dataset *ds = open_windows(12, seq_len);
    int ok = ds && data_train_windows(ds) == 1;
    for (int64_t g = 0; g < 50 && ok; g++)
        ok = data_train_offset(ds, (uint64_t)g, g) == 0;
    tap_ok(ok, "a split shorter than 2*seq_len has one window at offset 0, never shifted");
    data_close(ds);
}

static int64_t count_differences(const int64_t *a, const int64_t *b, int64_t n)
{
    int64_t d = 0;
    for (int64_t i = 0; i < n; i++)
        d += a[i] != b[i];
    return d;
}

static void test_order(void)
{
    const int seq_len = 8, w = 1000;
    Dataset *ds = open_windows((w + 1) * seq_len, seq_len);
    Dataset *again = open_windows((w + 1) * seq_len, seq_len);
    int ok = ds && again;
    for (int64_t g = 0; g < 5 * w && ok; g++) {
        int64_t o = data_train_offset(ds, 42, g);
        ok = o == data_train_offset(ds, 42, g) && o == data_train_offset(again, 42, g);
    }
    tap_ok(ok, "data_train_offset is pure: same (seed, g) -> same offset, across calls and opens");

    int64_t *e0 = malloc(3 * w * sizeof *e0), *e1 = e0 + w, *other = e0 + 2 * w;
    ok = ds && epoch_is_permutation(ds, 42, 0, seq_len, e0) &&
         epoch_is_permutation(ds, 43, 0, seq_len, other);
    int64_t diff_seed = ok ? count_differences(e0, other, w) : 0;
    tap_ok(ok && diff_seed > w * 9 / 10,
           "a different seed gives a different order (%lld of %d positions differ)",
           (long long)diff_seed, w);

    ok = ds && epoch_is_permutation(ds, 42, 1, seq_len, e1);
    int64_t diff_epoch = ok ? count_differences(e0, e1, w) : 0;
    int64_t identity = 0, shifts = 0;
    for (int64_t i = 0; i < w; i++)
        identity += e0[i] == i;
    for (int64_t e = 0; ds && e < 16; e++)
        shifts |= (int64_t)1 << (data_train_offset(ds, 42, e * w) % seq_len);
    tap_ok(ok && diff_epoch > w * 9 / 10 && identity < w / 10 && __builtin_popcountll((unsigned long long)shifts) > 1,
           "successive epochs differ (%lld of %d positions), no identity order (%lld fixed points), shifts vary",
           (long long)diff_epoch, w, (long long)identity);
    free(e0);
    data_close(ds);
    data_close(again);
}

/* Every training sample of a few epochs lies in [0, n_train) and, with the
 * marked file, holds only train-part bytes. */
static int samples_stay_in_train(const Dataset *ds, int seq_len)
{
    int32_t *s = malloc(((size_t)seq_len + 1) * sizeof *s);
    int64_t n = data_train_tokens(ds), w = data_train_windows(ds);
    int ok = 1;
    for (int64_t g = 0; g < 4 * w && ok; g++) {
        int64_t off = data_train_offset(ds, 7, g);
        ok = off >= 0 && off + seq_len + 1 <= n;
        ok = ok && data_train_sample(ds, 7, g, s, NULL) == 0;
        for (int i = 0; i <= seq_len && ok; i++)
            ok = s[i] < 128;
    }
    free(s);
    return ok;
}

static void test_splits(void)
{
    const int seq_len = 16;
    char train[PATH_LEN], val[PATH_LEN];
    uint8_t *t = marked_text(10000, 9000);
    write_tmp(train, t, 10000);
    DataConfig c = data_config(train, NULL, DATA_TEXT, 0.1);
    Dataset *ds = open_ok(&c, seq_len, 256);
    tap_ok(ds && samples_stay_in_train(ds, seq_len),
           "held-out tail: every training window of 4 epochs ends inside the train split");
    data_close(ds);

    uint8_t *v = marked_text(500, 0);
    write_tmp(train, t, 9000);
    write_tmp(val, v, 500);
    c = data_config(train, val, DATA_TEXT, 0.1);
    ds = open_ok(&c, seq_len, 256);
    tap_ok(ds && data_train_tokens(ds) == 9000 && samples_stay_in_train(ds, seq_len),
           "explicit val file: every training window of 4 epochs lies in the train file");
    data_close(ds);
    free(t);
    free(v);
}

static void test_contents(void)
{
    const int seq_len = 16;
    char train[PATH_LEN];
    uint8_t *t = marked_text(10000, 9000);
    write_tmp(train, t, 10000);
    DataConfig c = data_config(train, NULL, DATA_TEXT, 0.1);
    Dataset *ds = open_ok(&c, seq_len, 256);
    int32_t s[17];
    int ok = ds != NULL;
    for (int64_t g = 0; g < 3000 && ok; g += 7) {
        int64_t off = data_train_offset(ds, 5, g);
        ok = data_train_sample(ds, 5, g, s, NULL) == 0;
        for (int i = 0; i <= seq_len && ok; i++)
            ok = s[i] == t[off + i];
    }
    tap_ok(ok, "text training samples equal the file bytes at their offsets");

    int64_t v = ds ? data_val_windows(ds) : 0;
    ok = ds && v == 999 / seq_len;
    for (int64_t i = 0; i < 2 * v && ok; i++) {
        ok = data_val_sample(ds, i, s, NULL) == 0;
        for (int k = 0; k <= seq_len && ok; k++)
            ok = s[k] == t[9000 + (i % v) * seq_len + k];
    }
    tap_ok(ok, "held-out val windows come in order from the tail, wrapping after %lld",
           (long long)v);
    data_close(ds);
    free(t);
}

static void test_shard_contents(void)
{
    enum { N = 3000, NV = 700, T = 32 };
    uint16_t tok[N], vtok[NV];
    for (int i = 0; i < N; i++)
        tok[i] = (uint16_t)((i * 40503u) % 65536);
    for (int i = 0; i < NV; i++)
        vtok[i] = (uint16_t)(65535 - i * 3);
    char train[PATH_LEN], val[PATH_LEN];
    write_valid_shard(train, tok, N);
    write_valid_shard(val, vtok, NV);
    DataConfig c = data_config(train, val, DATA_TOKENS, 0.1);
    Dataset *ds = open_ok(&c, T, 65536);
    int32_t s[T + 1];
    int ok = ds != NULL;
    for (int64_t g = 0; g < 500 && ok; g++) {
        int64_t off = data_train_offset(ds, 9, g);
        ok = data_train_sample(ds, 9, g, s, NULL) == 0;
        for (int i = 0; i <= T && ok; i++)
            ok = s[i] == tok[off + i];
    }
    tap_ok(ok, "shard training samples equal the uint16 tokens (ids up to 65535, little-endian)");

    int64_t v = ds ? data_val_windows(ds) : 0;
    ok = ds && v == (NV - 1) / T;
    for (int64_t i = 0; i < 3 * v && ok; i++) {
        ok = data_val_sample(ds, i, s, NULL) == 0;
        for (int k = 0; k <= T && ok; k++)
            ok = s[k] == vtok[(i % v) * T + k];
    }
    tap_ok(ok, "val shard windows come in order, wrapping after %lld", (long long)v);
    data_close(ds);
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void batch_index(int64_t step, int rows, int64_t *index)
{
    for (int i = 0; i < rows; i++)
        index[i] = step * rows + (i * 3) % rows;
}

/* The batch equals data_train_sample row by row. */
static int batch_matches(const Dataset *ds, uint64_t seed, const int32_t *b,
                         int64_t step, int rows)
{
    int32_t s[LOADER_T + 1];
    int64_t *index = malloc((size_t)rows * sizeof *index);
    int ok = 1;
    batch_index(step, rows, index);
    for (int i = 0; i < rows && ok; i++) {
        ok = b && data_train_sample(ds, seed, index[i], s, NULL) == 0
             && memcmp(s, b + (size_t)i * (LOADER_T + 1), sizeof s) == 0;
    }
    free(index);
    return ok;
}

static void test_loader(const Dataset *ds)
{
    enum { ROWS = 16, STEPS = 12 };
    int64_t index[ROWS];
    Loader *ld = loader_create(ds, 11, ROWS);
    int ok = ld != NULL;
    double w;
    for (int64_t s = 0; s < STEPS && ok; s++) {
        batch_index(s, ROWS, index);
        loader_request(ld, index);
        ok = batch_matches(ds, 11, loader_wait(ld, &w, NULL), s, ROWS);
    }
    tap_ok(ok, "loader: request/wait returns exactly data_train_sample's rows");

    /* Request N+1 before reading batch N: N must survive the fill of N+1. */
    batch_index(0, ROWS, index);
    loader_request(ld, index);
    const int32_t *cur = loader_wait(ld, &w, NULL);
    for (int64_t s = 0; s < STEPS && ok; s++) {
        batch_index(s + 1, ROWS, index);
        loader_request(ld, index);
        sleep_ms(2);
        ok = batch_matches(ds, 11, cur, s, ROWS);
        cur = loader_wait(ld, &w, NULL);
    }
    ok = ok && batch_matches(ds, 11, cur, STEPS, ROWS);
    tap_ok(ok, "loader: a batch stays intact while the next one is prefetched");
    loader_destroy(ld);
}

/* The caller "computes" 20 ms per step, far longer than the loader needs,
 * so waits should be ~0. */
static void test_loader_overlap(const Dataset *ds)
{
    enum { ROWS = 16, STEPS = 10 };
    int64_t index[ROWS];
    Loader *ld = loader_create(ds, 3, ROWS);
    double w, total = 0, worst = 0;
    int ok = ld != NULL;
    for (int64_t s = 0; s < STEPS && ok; s++) {
        batch_index(s, ROWS, index);
        loader_request(ld, index);
        sleep_ms(20);
        ok = batch_matches(ds, 3, loader_wait(ld, &w, NULL), s, ROWS);
        total += w;
        worst = w > worst ? w : worst;
    }
    tap_diag("loader wait with 20 ms of compute per step: mean %.1f us, max %.1f us",
             1e6 * total / STEPS, 1e6 * worst);
    tap_ok(ok && worst < 0.005, "loader: prefetch hides the load (max wait %.1f us < 5 ms)",
           1e6 * worst);
    loader_destroy(ld);
}

static void test_loader_destroy(const Dataset *ds)
{
    enum { ROWS = 4096 };
    int64_t *index = malloc(ROWS * sizeof *index);
    batch_index(0, ROWS, index);
    double t0 = now_s();
    loader_destroy(loader_create(ds, 1, ROWS));
    Loader *ld = loader_create(ds, 1, ROWS);
    loader_request(ld, index);
    loader_destroy(ld);
    ld = loader_create(ds, 1, 4);
    loader_request(ld, index);
    sleep_ms(5);
    loader_destroy(ld);
    double dt = now_s() - t0;
    tap_ok(dt < 2.0, "loader_destroy returns when idle, with a queued request and with an untaken batch (%.1f ms)",
           1e3 * dt);
    free(index);
}

static void test_loaders(void)
{
    char train[PATH_LEN];
    uint8_t *t = marked_text(100000, 90000);
    write_tmp(train, t, 100000);
    free(t);
    DataConfig c = data_config(train, NULL, DATA_TEXT, 0.1);
    Dataset *ds = open_ok(&c, LOADER_T, 256);
    if (!tap_ok(ds != NULL, "the loader tests' dataset opens")) {
        for (int i = 0; i < 4; i++)
            tap_ok(0, "loader test not run");
        return;
    }
    test_loader(ds);
    test_loader_overlap(ds);
    test_loader_destroy(ds);
    data_close(ds);
}

int main(int argc, char **argv)
{
    tap_init(&argc, &argv);
    tap_plan(40);
    test_open_text();
    test_open_shard();
    test_bad_files();
    test_changed_under_run();
    test_out_of_vocab();
    test_too_short();
    test_vocab_size();
    test_coverage();
    test_order();
    test_splits();
    test_contents();
    test_shard_contents();
    test_loaders();
    remove_tmp_files();
    return tap_done();
}
