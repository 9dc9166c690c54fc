/*
 * indexed.c - reading and checking a Megatron indexed dataset's .idx (see
 * indexed.h).
 *
 * Why this shape: the index of a large corpus lists hundreds of millions of
 * sequences, so it is streamed through a fixed buffer with pread (as data_format.c
 * reads tokens) rather than loaded or mapped; what training needs from it is
 * small (the token size and the token count), because the sequences lie back
 * to back and a sample may cross their boundaries. Every count is checked
 * against the file's size before anything is read by it, so a damaged or
 * hostile index is refused with the reason, never read past its end.
 */
#include "indexed.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "reason.h"

static const uint8_t MAGIC[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0};

#define CHUNK 8192 /* entries read at a time */

const char *indexed_dtype_name(int code)
{
    static const char *const names[] = {NULL,      "uint8",   "int8",    "int16", "int32",
                                        "int64",   "float64", "float32", "uint16"};
    return code >= 1 && code <= 8 ? names[code] : NULL;
}

static uint64_t le_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static int32_t le_i32(const uint8_t *p)
{
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                     (uint32_t)p[3] << 24);
}

/* Reads exactly n bytes at off, or says why not. */
static int read_exact(int fd, void *buf, size_t n, int64_t off, char *why, size_t wn)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, (uint8_t *)buf + got, n - got, (off_t)(off + (int64_t)got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return reason_set(why, wn, "cannot read bytes %lld-%lld: %s", (long long)off,
                              (long long)(off + (int64_t)n - 1), strerror(errno));
        if (r == 0)
            return reason_set(why, wn, "the file shrank while it was read (bytes %lld-%lld are gone)",
                              (long long)off, (long long)(off + (int64_t)n - 1));
        got += (size_t)r;
    }
    return 0;
}

static int read_header(int fd, int64_t size, IndexedIndex *ix, uint64_t *n_doc_idx,
                       char *why, size_t wn)
{
    uint8_t h[INDEXED_HEADER_BYTES];
    if (size < INDEXED_HEADER_BYTES)
        return reason_set(why, wn, "truncated: %lld bytes, the header of an index alone is %d",
                          (long long)size, INDEXED_HEADER_BYTES);
    if (read_exact(fd, h, sizeof h, 0, why, wn))
        return 1;
    if (memcmp(h, MAGIC, sizeof MAGIC))
        return reason_set(why, wn, "not the index of a Megatron indexed dataset: its first 9 bytes "
                          "are not \"MMIDIDX\\0\\0\"");
    uint64_t version = le_u64(h + 9);
    if (version != 1)
        return reason_set(why, wn, "unsupported index version %llu (trident reads version 1)",
                          (unsigned long long)version);
    int code = h[17];
    const char *name = indexed_dtype_name(code);
    if (code != 8 && code != 4)
        return reason_set(why, wn, "tokens of dtype %s (code %d) are not supported: trident reads "
                          "uint16 (code 8) and int32 (code 4) tokens",
                          name ? name : "unknown", code);
    ix->dtype = code;
    ix->width = code == 8 ? 2 : 4;
    uint64_t s = le_u64(h + 18), d = le_u64(h + 26);
    /* compared by division, so no product of the counts can overflow */
    uint64_t room = (uint64_t)(size - INDEXED_HEADER_BYTES);
    if (s > room / 12 || d > (room - 12 * s) / 8)
        return reason_set(why, wn, "truncated: the header lists %llu sequences and %llu document "
                          "indices, which need more than the %lld bytes the file has",
                          (unsigned long long)s, (unsigned long long)d, (long long)size);
    uint64_t want = INDEXED_HEADER_BYTES + 12 * s + 8 * d;
    if ((uint64_t)size != want)
        return reason_set(why, wn, "%lld bytes, but the header's %llu sequences and %llu document "
                          "indices make %llu: trailing bytes (a multimodal index's sequence modes "
                          "are not supported)",
                          (long long)size, (unsigned long long)s, (unsigned long long)d,
                          (unsigned long long)want);
    if (d < 1)
        return reason_set(why, wn, "no document indices: there must be at least one, the 0 that "
                          "starts the first document");
    ix->sequences = (int64_t)s;
    ix->documents = (int64_t)d - 1;
    *n_doc_idx = d;
    return 0;
}

/* Lengths and pointers, a chunk of each at a time: every length >= 0, the
 * pointers back to back from 0, the token count's bytes within int64. */
static int read_sequences(int fd, IndexedIndex *ix, char *why, size_t wn)
{
    int64_t s = ix->sequences, w = ix->width;
    int64_t len_at = INDEXED_HEADER_BYTES, ptr_at = len_at + 4 * s;
    int64_t tokens = 0;
    uint8_t lens[4 * CHUNK], ptrs[8 * CHUNK];
    for (int64_t i0 = 0; i0 < s; i0 += CHUNK) {
        int64_t n = s - i0 < CHUNK ? s - i0 : CHUNK;
        if (read_exact(fd, lens, (size_t)(4 * n), len_at + 4 * i0, why, wn) ||
            read_exact(fd, ptrs, (size_t)(8 * n), ptr_at + 8 * i0, why, wn))
            return 1;
        for (int64_t k = 0; k < n; k++) {
            int64_t i = i0 + k;
            int32_t len = le_i32(lens + 4 * k);
            uint64_t ptr = le_u64(ptrs + 8 * k);
            if (len < 0)
                return reason_set(why, wn, "sequence %lld has a negative length (%d)", (long long)i,
                                  (int)len);
            if (ptr != (uint64_t)(tokens * w))
                return reason_set(why, wn, "sequence %lld starts at byte %llu of the .bin, but the "
                                  "sequences before it end at byte %lld: trident needs the "
                                  "sequences stored back to back from byte 0, as Megatron writes "
                                  "them", (long long)i, (unsigned long long)ptr,
                                  (long long)(tokens * w));
            if (tokens > (INT64_MAX / w) - len)
                return reason_set(why, wn, "the sequence lengths add up to more tokens than a "
                                  "file can hold (at sequence %lld)", (long long)i);
            tokens += len;
        }
    }
    ix->tokens = tokens;
    return 0;
}

/* Document indices: the first 0, the last S, never decreasing. */
static int read_documents(int fd, const IndexedIndex *ix, uint64_t d, char *why, size_t wn)
{
    int64_t at = INDEXED_HEADER_BYTES + 12 * ix->sequences;
    uint8_t buf[8 * CHUNK];
    uint64_t prev = 0;
    for (uint64_t i0 = 0; i0 < d; i0 += CHUNK) {
        uint64_t n = d - i0 < CHUNK ? d - i0 : CHUNK;
        if (read_exact(fd, buf, (size_t)(8 * n), at + 8 * (int64_t)i0, why, wn))
            return 1;
        for (uint64_t k = 0; k < n; k++) {
            uint64_t i = i0 + k, v = le_u64(buf + 8 * k);
            if (i == 0 && v != 0)
                return reason_set(why, wn, "the first document index is %lld, not 0", (long long)v);
            if (v < prev || v > (uint64_t)ix->sequences)
                return reason_set(why, wn, "document index %llu is %lld: the indices must rise "
                                  "from 0 to the sequence count (%lld) and never fall",
                                  (unsigned long long)i, (long long)v, (long long)ix->sequences);
            prev = v;
        }
    }
    if (prev != (uint64_t)ix->sequences)
        return reason_set(why, wn, "the last document index is %llu, not the sequence count %lld: "
                          "sequences after it belong to no document",
                          (unsigned long long)prev, (long long)ix->sequences);
    return 0;
}

int indexed_read(int fd, int64_t size, IndexedIndex *ix, char *why, size_t why_size)
{
    memset(ix, 0, sizeof *ix);
    uint64_t d = 0;
    if (read_header(fd, size, ix, &d, why, why_size) || read_sequences(fd, ix, why, why_size))
        return 1;
    return read_documents(fd, ix, d, why, why_size);
}
