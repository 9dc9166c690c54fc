/*
 * fuzz_indexed.c - fuzz target for the reader of Megatron indexed
 * datasets' .idx files (src/data/indexed.c): indexed_read over a file holding
 * the input.
 *
 * Differential: this file holds a second reader of the format, written
 * apart and as plainly as possible (the whole input in memory, one pass
 * per array), and the two must agree on every input: the same verdict,
 * and for an index both accept the same token size, sequence, document
 * and token counts. A reader that crashes, reads out of bounds, accepts a
 * damaged index or refuses a sound one is a finding.
 */
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "fuzz.h"
#include "indexed.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

static uint64_t u64_at(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* The plain reader: 1 and the counts when the index is sound. */
static int plain_read(const uint8_t *d, size_t size, IndexedIndex *ix)
{
    if (size < 34 || memcmp(d, "MMIDIDX\0\0", 9) || u64_at(d + 9) != 1)
        return 0;
    if (d[17] != 4 && d[17] != 8)
        return 0;
    uint64_t s = u64_at(d + 18), n = u64_at(d + 26);
    /* the input is small: a count that does not fit it cannot be sound */
    if (s > size || n > size || n < 1 || 34 + 12 * s + 8 * n != size)
        return 0;
    uint64_t w = d[17] == 8 ? 2 : 4, tokens = 0;
    const uint8_t *len = d + 34, *ptr = len + 4 * s, *doc = ptr + 8 * s;
    for (uint64_t i = 0; i < s; i++) {
        int32_t l = (int32_t)(uint32_t)(len[4 * i] | len[4 * i + 1] << 8 | len[4 * i + 2] << 16 |
                                        (uint32_t)len[4 * i + 3] << 24);
        if (l < 0 || u64_at(ptr + 8 * i) != tokens * w)
            return 0;
        tokens += (uint64_t)l;
    }
    for (uint64_t i = 0; i < n; i++) {
        uint64_t v = u64_at(doc + 8 * i);
        if ((i == 0 && v != 0) || v > s || (i > 0 && v < u64_at(doc + 8 * (i - 1))))
            return 0;
    }
    if (u64_at(doc + 8 * (n - 1)) != s)
        return 0;
    ix->width = (int)w;
    ix->sequences = (int64_t)s;
    ix->documents = (int64_t)n - 1;
    ix->tokens = (int64_t)tokens;
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_scratch(0, data, size);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        abort();
    IndexedIndex ix, want;
    char why[512];
    int accepted = indexed_read(fd, (int64_t)size, &ix, why, sizeof why) == 0;
    close(fd);
    int sound = plain_read(data, size, &want);
    if (accepted && !sound)
        fuzz_fail("indexed_read accepted an index the plain reader refuses");
    if (!accepted && sound)
        fuzz_fail("indexed_read refused an index the plain reader accepts");
    if (accepted && (ix.width != want.width || ix.sequences != want.sequences ||
                     ix.documents != want.documents || ix.tokens != want.tokens))
        fuzz_fail("indexed_read's counts differ from the plain reader's");
    if (!accepted && !why[0])
        fuzz_fail("indexed_read refused an index without a reason");
    return 0;
}
