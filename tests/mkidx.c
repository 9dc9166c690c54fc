/*
 * mkidx.c - a test helper: writes a Megatron-LM indexed dataset
 * (PREFIX.idx + PREFIX.bin) from the bytes of a file, one token per byte
 * plus an offset, so the tests can train on the same tokens as format =
 * text, or on datasets whose ids do not overlap.
 *
 *   mkidx [-t uint16|int32] [-a OFFSET] INPUT PREFIX
 *
 * Written from the format (megatron/core/datasets/indexed_dataset.py:
 * magic "MMIDIDX\0\0", uint64 version 1, uint8 dtype code, uint64 sequence
 * count, uint64 document-index count, int32 lengths, int64 byte pointers,
 * int64 document indices), independently of src/data/indexed.c, so a reader that
 * misreads the format fails against it. Documents have lengths from a fixed
 * pseudo-random sequence (1 to 300 tokens) and every third document is two
 * sequences, as Megatron's sentence splitting makes them.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static void put(FILE *f, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        if (fputc((int)(v >> (8 * i) & 0xff), f) == EOF)
            die("mkidx: write");
}

int main(int argc, char **argv)
{
    int width = 2, offset = 0, opt;
    while ((opt = getopt(argc, argv, "t:a:")) != -1) {
        if (opt == 't' && !strcmp(optarg, "int32"))
            width = 4;
        else if (opt == 't' && strcmp(optarg, "uint16"))
            return fprintf(stderr, "mkidx: -t uint16 or int32\n"), 2;
        else if (opt == 'a')
            offset = atoi(optarg);
    }
    if (argc - optind != 2)
        return fprintf(stderr, "usage: mkidx [-t uint16|int32] [-a OFFSET] INPUT PREFIX\n"), 2;
    FILE *in = fopen(argv[optind], "rb");
    if (!in)
        die(argv[optind]);
    char path[4096];
    snprintf(path, sizeof path, "%s.bin", argv[optind + 1]);
    FILE *bin = fopen(path, "wb");
    if (!bin)
        die(path);
    int64_t n = 0;
    int c;
    while ((c = fgetc(in)) != EOF) {
        put(bin, (uint64_t)(c + offset), width);
        n++;
    }
    fclose(in);
    if (fclose(bin))
        die(path);

    /* sequences: cut the n tokens into documents, some of two sequences */
    int64_t cap = n + 2, s = 0, d = 0;
    int32_t *len = malloc((size_t)cap * sizeof *len);
    int64_t *doc = malloc((size_t)(cap + 1) * sizeof *doc);
    if (!len || !doc)
        die("mkidx: malloc");
    doc[d++] = 0;
    uint32_t rng = 12345;
    for (int64_t at = 0, k = 0; at < n; k++) {
        rng = rng * 1103515245u + 12345u;
        int64_t dl = 1 + (rng >> 16) % 300;
        if (dl > n - at)
            dl = n - at;
        if (k % 3 == 2 && dl >= 2) {
            len[s++] = (int32_t)(dl / 2);
            len[s++] = (int32_t)(dl - dl / 2);
        } else {
            len[s++] = (int32_t)dl;
        }
        at += dl;
        doc[d++] = s;
    }
    snprintf(path, sizeof path, "%s.idx", argv[optind + 1]);
    FILE *idx = fopen(path, "wb");
    if (!idx)
        die(path);
    fwrite("MMIDIDX\0\0", 1, 9, idx);
    put(idx, 1, 8);
    put(idx, width == 2 ? 8 : 4, 1);
    put(idx, (uint64_t)s, 8);
    put(idx, (uint64_t)d, 8);
    for (int64_t i = 0; i < s; i++)
        put(idx, (uint32_t)len[i], 4);
    int64_t ptr = 0;
    for (int64_t i = 0; i < s; i++) {
        put(idx, (uint64_t)ptr, 8);
        ptr += (int64_t)len[i] * width;
    }
    for (int64_t i = 0; i < d; i++)
        put(idx, (uint64_t)doc[i], 8);
    if (fclose(idx))
        die(path);
    free(len);
    free(doc);
    return 0;
}
