/*
 * data.c - a Dataset: the token files of [data] train and [data] val (and
 * their blends) opened, their train/validation splits, the training
 * windows of each part, and the sizes the trainer prints (see data.h).
 * The formats are data_format.c's, the sampler data_sampler.c's, the
 * prefetch thread data_loader.c's.
 *
 * Why this shape:
 * - The splits never overlap: a held-out validation split is the tail of the
 *   train file, and the window count reserves room for the largest shift, so
 *   no training window ever reaches a validation token.
 * - After data_open the Dataset is immutable, so the loader thread and the
 *   main thread share it without locks.
 */
#include "data.h"

#include <stdlib.h>

#include "blend.h"
#include "data_format.h"
#include "data_impl.h"

void data_bug(const char *what)
{
    fprintf(stderr, "trident: data.c: programming error: %s\n", what);
    fflush(stderr);
    abort();
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
            return data_format_report(err, "[data] train", ds->train_blend.prefix[j],
                                      "too short: %lld tokens in the train split, a sample needs seq_len+1 = %d",
                                      (long long)ds->train[j].split.count, need);
    for (int j = 0; j < ds->val_of->n; j++) {
        if (ds->val[j].split.count >= need)
            continue;
        if (cfg->val[0])
            return data_format_report(err, "[data] val", ds->val_of->prefix[j],
                                      "too short: %lld tokens in the val split, a sample needs seq_len+1 = %d",
                                      (long long)ds->val[j].split.count, need);
        return data_format_report(err, "[data] train", ds->val_of->prefix[j],
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
        ds->train[j].seed_salt = (uint64_t)j * DATA_GOLDEN;
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
        return data_format_report(err, "[data] train", cfg->train, "%s", why);
    ds->val_of = &ds->train_blend;
    if (cfg->val[0]) {
        if (blend_parse(cfg->val, &ds->val_blend, why, sizeof why))
            return data_format_report(err, "[data] val", cfg->val, "%s", why);
        ds->val_of = &ds->val_blend;
    }
    ds->n_files = ds->train_blend.n + ds->val_blend.n;
    ds->files = calloc((size_t)ds->n_files, sizeof *ds->files);
    ds->train = calloc((size_t)ds->train_blend.n, sizeof *ds->train);
    ds->val = calloc((size_t)ds->val_of->n, sizeof *ds->val);
    if (!ds->files || !ds->train || !ds->val)
        return data_format_report(err, "[data] train", cfg->train, "out of memory");
    for (int i = 0; i < ds->n_files; i++)
        ds->files[i].fd = -1;
    return 0;
}

int data_open(Dataset **out, const DataConfig *cfg, int seq_len,
              int vocab_size, FILE *err)
{
    *out = NULL;
    if (data_format_check_model(cfg->format, seq_len, vocab_size, err))
        return 1;
    Dataset *ds = calloc(1, sizeof *ds);
    if (!ds)
        return data_format_report(err, "[data] train", cfg->train, "out of memory");
    ds->seq_len = seq_len;
    ds->vocab = vocab_size;
    int rc = parse_blends(ds, cfg, err);
    for (int i = 0; i < ds->n_files && !rc; i++) {
        int is_train = i < ds->train_blend.n;
        const char *prefix = is_train ? ds->train_blend.prefix[i]
                                      : ds->val_blend.prefix[i - ds->train_blend.n];
        rc = data_format_open(&ds->files[i], is_train ? "[data] train" : "[data] val", prefix,
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
        data_format_close(&ds->files[i]);
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
