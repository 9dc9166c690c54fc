/*
 * fuzz_data.c - fuzz target for the token-shard and text reader
 * (src/data/data.c): data_open over a file holding the input, then the sampler.
 *
 * Input: a 4-byte prefix choosing the run, then the file's bytes.
 *   byte 0  bit 0: format (0 text, 1 tokens); bit 1: a separate val file
 *           (the same bytes) instead of the held-out tail; bit 2: train
 *           is a blend, 0.6 of the file and 0.4 of a copy of it
 *   byte 1  seq_len = 1 + byte % 64
 *   bytes 2-3  vocab_size = 1 + little-endian uint16 (1..65536)
 * A file that opens must keep the sampler's promises: every training and
 * validation window lies inside its split and every token id is below
 * vocab_size (data_open checked them all).
 */
#include <stdlib.h>
#include <string.h>

#include "data.h"
#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

static void check_tokens(const int32_t *tok, int n, int vocab, const char *what)
{
    for (int i = 0; i < n; i++)
        if (tok[i] < 0 || tok[i] >= vocab)
            fuzz_fail(what);
}

static int by_value(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    DataConfig dc;
    memset(&dc, 0, sizeof dc);
    dc.format = (data[0] & 1) ? DATA_TOKENS : DATA_TEXT;
    dc.val_fraction = 0.1;
    int seq_len = 1 + data[1] % 64;
    int vocab = 1 + (int)(data[2] | data[3] << 8);
    const char *path = fuzz_scratch(0, data + 4, size - 4);
    int blend = (data[0] & 4) != 0;
    if (blend)
        snprintf(dc.train, sizeof dc.train, "0.6 %s 0.4 %s", path,
                 fuzz_scratch(1, data + 4, size - 4));
    else
        snprintf(dc.train, sizeof dc.train, "%s", path);
    if (data[0] & 2)
        snprintf(dc.val, sizeof dc.val, "%s", path);
    Dataset *ds = NULL;
    if (data_open(&ds, &dc, seq_len, vocab, fuzz_quiet()) != 0) {
        if (ds)
            fuzz_fail("data_open failed but returned a dataset");
        return 0;
    }
    int64_t n = data_train_tokens(ds), w = data_train_windows(ds);
    if (blend ? data_train_parts(ds) != 2 || n != 2 * data_train_part_tokens(ds, 0)
              : data_train_parts(ds) != 1)
        fuzz_fail("a blend of two copies did not open as two equal datasets");
    if (n < seq_len + 1 || w < 1 || data_val_tokens(ds) < seq_len + 1
        || data_val_windows(ds) < 1)
        fuzz_fail("data_open accepted a split shorter than one window");
    int32_t *tok = malloc((size_t)(seq_len + 1) * sizeof *tok);
    if (!tok)
        abort();
    /* the first and last windows of two epochs, and a few in between */
    int64_t gs[] = {0, w - 1, w, 2 * w - 1, w / 2, 7 * w + 3};
    for (size_t i = 0; i < sizeof gs / sizeof gs[0]; i++) {
        int64_t off = data_train_offset(ds, 1337, gs[i]);
        int part = data_train_part(ds, gs[i]);
        if (part < 0 || part >= data_train_parts(ds))
            fuzz_fail("a training sample comes from no dataset of the blend");
        if (off < 0 || off + seq_len + 1 > data_train_part_tokens(ds, part))
            fuzz_fail("a training window reaches outside the train split");
        if (data_train_sample(ds, 1337, gs[i], tok, NULL))
            fuzz_fail("a training window of a file that did not change cannot be read");
        check_tokens(tok, seq_len + 1, vocab, "a training token is outside the vocabulary");
        for (int j = 0; j < data_val_parts(ds); j++) {
            if (data_val_part_sample(ds, j, gs[i], tok, NULL))
                fuzz_fail("a validation window of a file that did not change cannot be read");
            check_tokens(tok, seq_len + 1, vocab, "a validation token is outside the vocabulary");
        }
    }
    /* one epoch visits each window once: the offsets are distinct (they
     * share the epoch's shift); checked where that is cheap */
    if (!blend && w <= 4096) {
        int64_t *offs = malloc((size_t)w * sizeof *offs);
        if (!offs)
            abort();
        for (int64_t g = 0; g < w; g++)
            offs[g] = data_train_offset(ds, 42, w + g);
        qsort(offs, (size_t)w, sizeof *offs, by_value);
        for (int64_t g = 1; g < w; g++)
            if (offs[g] == offs[g - 1])
                fuzz_fail("an epoch visits a training window twice");
        free(offs);
    }
    free(tok);
    data_close(ds);
    return 0;
}
