/*
 * bpe.c - byte-level BPE encoding; see bpe.h.
 *
 * Speed comes from three tables: the merges are an open-addressing hash
 * keyed by the pair of ids (one multiply per lookup), the vocabulary a
 * hash keyed by the bytes, and a direct-mapped cache remembers the ids of
 * short pieces, which in real text repeat far more often than not (" the",
 * ","). The regular expression is PCRE2's, JIT-compiled where the platform
 * has it, matched with PCRE2_PARTIAL_HARD while a document streams in, so
 * that a piece is cut only once the text after it can no longer change it.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "bpe.h"

#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "fail.h"

enum {
    CACHE_SLOTS = 1 << 16,
    CACHE_BYTES = 24, /* pieces longer than this are not cached */
    CACHE_IDS = 12,
    STREAM_CHUNK = 1 << 16, /* text matched at a time while streaming */
    MAX_ID = 1 << 24,       /* ids beyond this are a damaged file, not a vocabulary */
    MATCH_LIMIT = 10000000  /* PCRE2's backtracking steps per piece */
};

typedef struct {
    uint64_t key; /* left << 32 | right; 0 = empty (pair 0,0 stored +1) */
    int32_t result, priority;
} MergeSlot;

typedef struct {
    uint8_t len, n_ids;
    char bytes[CACHE_BYTES];
    int32_t ids[CACHE_IDS];
} CacheSlot;

typedef struct {
    char *name;
    int32_t id;
} Special;

/* A candidate merge of the part starting at left with its right neighbour,
 * valid while both parts keep the versions they had when it was pushed. */
struct HeapEntry {
    int32_t priority, left, right, left_version, right_version;
};

struct Bpe {
    /* tokens by id: bytes in blob at off[id], len[id]; len -1 = unused */
    int64_t *off;
    int32_t *len;
    int32_t n_ids;
    char *blob;
    size_t blob_len, blob_cap;
    /* bytes -> id */
    int32_t *vocab_slots; /* id, or -1 */
    size_t vocab_cap, vocab_used;
    MergeSlot *merges;
    size_t merge_cap, merge_used;
    int32_t byte_id[256];
    Special *specials;
    int n_specials;
    int ignore_merges;
    char *pattern; /* as given: what an exported tokenizer.json carries */
    pcre2_code *re;
    pcre2_match_data *md;
    pcre2_match_context *mctx;
    int pattern_failed; /* a piece needed more than MATCH_LIMIT steps */
    CacheSlot *cache;
    /* the document being streamed: clean UTF-8 text not yet cut */
    char *text;
    size_t text_len, text_cap;
    unsigned char utf8_seq[4];
    int utf8_have, utf8_need;
    unsigned char utf8_lo, utf8_hi;
    /* one piece's parts while merging */
    int32_t *parts, *prio;
    size_t parts_cap;
    /* long pieces: a heap of candidate merges over a linked list */
    struct HeapEntry *heap;
    int32_t *next, *prev, *version;
    size_t heap_cap, list_cap;
};

static uint64_t hash_bytes(const void *p, size_t n)
{
    const unsigned char *s = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

static uint64_t hash_pair(uint64_t key)
{
    key *= 0x9E3779B97F4A7C15ull;
    return key ^ (key >> 31);
}

Bpe *bpe_new(void)
{
    Bpe *b = TRI_MALLOC(sizeof *b, "the tokenizer");
    memset(b, 0, sizeof *b);
    for (int i = 0; i < 256; i++)
        b->byte_id[i] = -1;
    b->vocab_cap = 1024;
    b->vocab_slots = TRI_MALLOC(b->vocab_cap * sizeof *b->vocab_slots, "the tokenizer");
    memset(b->vocab_slots, 0xff, b->vocab_cap * sizeof *b->vocab_slots);
    b->merge_cap = 1024;
    b->merges = TRI_MALLOC(b->merge_cap * sizeof *b->merges, "the tokenizer");
    memset(b->merges, 0, b->merge_cap * sizeof *b->merges);
    return b;
}

void bpe_free(Bpe *b)
{
    if (!b)
        return;
    for (int i = 0; i < b->n_specials; i++)
        free(b->specials[i].name);
    free(b->specials);
    free(b->pattern);
    free(b->off);
    free(b->len);
    free(b->blob);
    free(b->vocab_slots);
    free(b->merges);
    free(b->cache);
    free(b->text);
    free(b->parts);
    free(b->prio);
    free(b->heap);
    free(b->next);
    free(b->prev);
    free(b->version);
    if (b->md)
        pcre2_match_data_free(b->md);
    if (b->mctx)
        pcre2_match_context_free(b->mctx);
    if (b->re)
        pcre2_code_free(b->re);
    free(b);
}

static const char *token_bytes(const Bpe *b, int32_t id)
{
    return b->blob + b->off[id];
}

static size_t vocab_probe(const Bpe *b, const void *bytes, size_t len)
{
    size_t mask = b->vocab_cap - 1;
    size_t i = hash_bytes(bytes, len) & mask;
    for (;;) {
        int32_t id = b->vocab_slots[i];
        if (id < 0 || ((size_t)b->len[id] == len && memcmp(token_bytes(b, id), bytes, len) == 0))
            return i;
        i = (i + 1) & mask;
    }
}

int32_t bpe_find(const Bpe *b, const void *bytes, size_t len)
{
    return b->vocab_slots[vocab_probe(b, bytes, len)];
}

static void vocab_grow(Bpe *b)
{
    int32_t *old = b->vocab_slots;
    size_t old_cap = b->vocab_cap;
    b->vocab_cap *= 2;
    b->vocab_slots = TRI_MALLOC(b->vocab_cap * sizeof *b->vocab_slots, "the tokenizer");
    memset(b->vocab_slots, 0xff, b->vocab_cap * sizeof *b->vocab_slots);
    for (size_t i = 0; i < old_cap; i++)
        if (old[i] >= 0)
            b->vocab_slots[vocab_probe(b, token_bytes(b, old[i]), (size_t)b->len[old[i]])] = old[i];
    free(old);
}

static void ensure_id(Bpe *b, int32_t id)
{
    if (id < b->n_ids)
        return;
    int32_t n = b->n_ids ? b->n_ids : 256;
    while (n <= id)
        n *= 2;
    b->off = TRI_REALLOC(b->off, (size_t)n * sizeof *b->off, "the tokenizer");
    b->len = TRI_REALLOC(b->len, (size_t)n * sizeof *b->len, "the tokenizer");
    for (int32_t i = b->n_ids; i < n; i++)
        b->len[i] = -1;
    b->n_ids = n;
}

static void blob_append(Bpe *b, const void *bytes, size_t len, int32_t id)
{
    if (b->blob_len + len > b->blob_cap) {
        b->blob_cap = (b->blob_len + len) * 2 + 4096;
        b->blob = TRI_REALLOC(b->blob, b->blob_cap, "the tokenizer");
    }
    if (len)
        memcpy(b->blob + b->blob_len, bytes, len);
    b->off[id] = (int64_t)b->blob_len;
    b->len[id] = (int32_t)len;
    b->blob_len += len;
}

int bpe_add_token(Bpe *b, const void *bytes, size_t len, int32_t id)
{
    if (id < 0 || id >= MAX_ID || len == 0 || len > INT32_MAX)
        return 1;
    ensure_id(b, id);
    if (b->len[id] >= 0)
        return 1;
    if ((b->vocab_used + 1) * 2 > b->vocab_cap)
        vocab_grow(b);
    size_t slot = vocab_probe(b, bytes, len);
    if (b->vocab_slots[slot] >= 0)
        return 1; /* the same bytes twice */
    blob_append(b, bytes, len, id);
    b->vocab_slots[slot] = id;
    b->vocab_used++;
    if (len == 1)
        b->byte_id[*(const unsigned char *)bytes] = id;
    return 0;
}

static size_t merge_probe(const Bpe *b, uint64_t key)
{
    size_t mask = b->merge_cap - 1;
    size_t i = hash_pair(key) & mask;
    while (b->merges[i].key && b->merges[i].key != key)
        i = (i + 1) & mask;
    return i;
}

static uint64_t pair_key(int32_t left, int32_t right)
{
    return ((uint64_t)(uint32_t)left << 32 | (uint32_t)right) + 1;
}

void bpe_add_merge(Bpe *b, int32_t left, int32_t right, int32_t result, int32_t priority)
{
    if ((b->merge_used + 1) * 2 > b->merge_cap) {
        MergeSlot *old = b->merges;
        size_t old_cap = b->merge_cap;
        b->merge_cap *= 2;
        b->merges = TRI_MALLOC(b->merge_cap * sizeof *b->merges, "the tokenizer");
        memset(b->merges, 0, b->merge_cap * sizeof *b->merges);
        for (size_t i = 0; i < old_cap; i++)
            if (old[i].key)
                b->merges[merge_probe(b, old[i].key)] = old[i];
        free(old);
    }
    uint64_t key = pair_key(left, right);
    size_t i = merge_probe(b, key);
    if (b->merges[i].key) {
        /* a pair listed twice: its first (lowest) priority rules, as in
         * the references' dictionaries built in file order */
        if (b->merges[i].priority <= priority)
            return;
    } else {
        b->merge_used++;
    }
    b->merges[i] = (MergeSlot){key, result, priority};
}

void bpe_merges_from_ranks(Bpe *b)
{
    for (int32_t id = 0; id < b->n_ids; id++) {
        int32_t len = b->len[id];
        for (int32_t k = 1; k < len; k++) {
            const char *s = token_bytes(b, id);
            int32_t left = bpe_find(b, s, (size_t)k);
            int32_t right = left >= 0 ? bpe_find(b, s + k, (size_t)(len - k)) : -1;
            if (right >= 0)
                bpe_add_merge(b, left, right, id, id);
        }
    }
}

int bpe_add_special(Bpe *b, const char *name, int32_t id)
{
    if (id < 0 || id >= MAX_ID || !name[0])
        return 1;
    ensure_id(b, id);
    size_t n = strlen(name);
    /* GPT-2's <|endoftext|> is also an ordinary entry of encoder.json */
    if (b->len[id] >= 0 && ((size_t)b->len[id] != n || memcmp(token_bytes(b, id), name, n) != 0))
        return 1;
    if (b->len[id] < 0)
        blob_append(b, name, n, id);
    b->specials = TRI_REALLOC(b->specials, (size_t)(b->n_specials + 1) * sizeof *b->specials,
                              "the tokenizer");
    b->specials[b->n_specials].name = TRI_MALLOC(n + 1, "the tokenizer");
    memcpy(b->specials[b->n_specials].name, name, n + 1);
    b->specials[b->n_specials++].id = id;
    return 0;
}

void bpe_set_ignore_merges(Bpe *b, int on)
{
    b->ignore_merges = on;
}

/* The tokenizer files' regexes come from Rust's regex crate, fancy-regex
 * and Oniguruma, where \s is Unicode's White_Space; PCRE2's \s with UCP
 * lacks U+0085 of it. So \s and \S are spelled out: White_Space is exactly
 * \t-\r, U+0085 and the Z category. */
static int rewrite_spaces(const char *pattern, char *out, size_t cap)
{
    static const char ws[] = "\\x{09}-\\x{0D}\\x{85}\\p{Z}";
    size_t o = 0;
    int in_class = 0;
    for (const char *p = pattern; *p; p++) {
        char piece[64];
        if (p[0] == '\\' && (p[1] == 's' || p[1] == 'S')) {
            if (in_class && p[1] == 'S')
                return 1;
            snprintf(piece, sizeof piece, in_class ? "%s" : p[1] == 's' ? "[%s]" : "[^%s]", ws);
            p++;
        } else if (p[0] == '\\' && p[1]) {
            piece[0] = p[0];
            piece[1] = p[1];
            piece[2] = 0;
            p++;
        } else {
            if (*p == '[' && !in_class)
                in_class = 1;
            else if (*p == ']' && in_class)
                in_class = 0;
            piece[0] = *p;
            piece[1] = 0;
        }
        size_t n = strlen(piece);
        if (o + n + 1 > cap)
            return 1;
        memcpy(out + o, piece, n);
        o += n;
    }
    out[o] = 0;
    return 0;
}

int bpe_set_pattern(Bpe *b, const char *pattern, char *err, size_t errlen)
{
    size_t cap = strlen(pattern) * 12 + 64;
    char *rewritten = TRI_MALLOC(cap, "the tokenizer");
    if (rewrite_spaces(pattern, rewritten, cap)) {
        free(rewritten);
        snprintf(err, errlen, "pre-tokenising pattern uses \\S inside a character class, which trident cannot translate");
        return 1;
    }
    int code;
    PCRE2_SIZE at;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)rewritten, PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK | PCRE2_DOLLAR_ENDONLY,
                                   &code, &at, NULL);
    free(rewritten);
    if (!re) {
        char msg[256];
        pcre2_get_error_message(code, (PCRE2_UCHAR *)msg, sizeof msg);
        snprintf(err, errlen, "pre-tokenising pattern does not compile: %s", msg);
        return 1;
    }
    /* JIT is a speed-up, not a requirement: where it is missing the
     * interpreter gives the same matches */
    (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE | PCRE2_JIT_PARTIAL_HARD);
    if (b->re)
        pcre2_code_free(b->re);
    if (b->md)
        pcre2_match_data_free(b->md);
    free(b->pattern);
    b->pattern = TRI_MALLOC(strlen(pattern) + 1, "the tokenizer");
    memcpy(b->pattern, pattern, strlen(pattern) + 1);
    b->re = re;
    b->md = pcre2_match_data_create_from_pattern(re, NULL);
    /* a tokenizer file may carry a pattern that backtracks for ever */
    if (!b->mctx) {
        b->mctx = pcre2_match_context_create(NULL);
        pcre2_set_match_limit(b->mctx, MATCH_LIMIT);
    }
    return 0;
}

int bpe_finish(Bpe *b, char *err, size_t errlen)
{
    for (int i = 0; i < 256; i++) {
        if (b->byte_id[i] < 0) {
            snprintf(err, errlen, "the vocabulary has no token for byte 0x%02x, which byte-level BPE needs", i);
            return 1;
        }
    }
    if (!b->re) {
        snprintf(err, errlen, "no pre-tokenising pattern");
        return 1;
    }
    if (!b->cache) {
        b->cache = TRI_MALLOC(CACHE_SLOTS * sizeof *b->cache, "the tokenizer");
        memset(b->cache, 0, CACHE_SLOTS * sizeof *b->cache);
    }
    return 0;
}

int32_t bpe_vocab_size(const Bpe *b)
{
    int32_t n = 0;
    for (int32_t id = 0; id < b->n_ids; id++)
        if (b->len[id] >= 0)
            n = id + 1;
    return n;
}

int32_t bpe_special(const Bpe *b, const char *name)
{
    for (int i = 0; i < b->n_specials; i++)
        if (strcmp(b->specials[i].name, name) == 0)
            return b->specials[i].id;
    return -1;
}

const char *bpe_pattern(const Bpe *b) { return b->pattern; }
int bpe_ignores_merges(const Bpe *b) { return b->ignore_merges; }
int bpe_n_specials(const Bpe *b) { return b->n_specials; }

const char *bpe_special_at(const Bpe *b, int i, int32_t *id)
{
    *id = b->specials[i].id;
    return b->specials[i].name;
}

static int by_priority(const void *x, const void *y)
{
    const MergeSlot *a = x, *c = y;
    return (a->priority > c->priority) - (a->priority < c->priority);
}

BpeMerge *bpe_merges(const Bpe *b, size_t *n)
{
    MergeSlot *used = TRI_MALLOC((b->merge_used + 1) * sizeof *used, "the merges");
    *n = 0;
    for (size_t i = 0; i < b->merge_cap; i++)
        if (b->merges[i].key)
            used[(*n)++] = b->merges[i];
    qsort(used, *n, sizeof *used, by_priority);
    BpeMerge *out = TRI_MALLOC((*n + 1) * sizeof *out, "the merges");
    for (size_t i = 0; i < *n; i++) {
        uint64_t key = used[i].key - 1; /* stored +1: see MergeSlot */
        out[i] = (BpeMerge){(int32_t)(key >> 32), (int32_t)(key & 0xffffffffu)};
    }
    free(used);
    return out;
}

const char *bpe_token_bytes(const Bpe *b, int32_t id, size_t *len)
{
    if (id < 0 || id >= b->n_ids || b->len[id] < 0)
        return NULL;
    *len = (size_t)b->len[id];
    return token_bytes(b, id);
}

/* ---- merging one piece ---- */

static int32_t merge_priority(const Bpe *b, int32_t left, int32_t right, int32_t *result)
{
    const MergeSlot *m = &b->merges[merge_probe(b, pair_key(left, right))];
    if (!m->key)
        return INT32_MAX;
    *result = m->result;
    return m->priority;
}

/* parts[0..n) start as the bytes' ids; prio[i] is the priority of merging
 * parts i and i+1. Each round merges the lowest, leftmost on ties. */
static size_t merge_piece(Bpe *b, const unsigned char *s, size_t n)
{
    if (n > b->parts_cap) {
        b->parts_cap = n * 2;
        b->parts = TRI_REALLOC(b->parts, b->parts_cap * sizeof *b->parts, "the tokenizer");
        b->prio = TRI_REALLOC(b->prio, b->parts_cap * sizeof *b->prio, "the tokenizer");
    }
    int32_t *parts = b->parts, *prio = b->prio, result;
    for (size_t i = 0; i < n; i++)
        parts[i] = b->byte_id[s[i]];
    for (size_t i = 0; i + 1 < n; i++)
        prio[i] = merge_priority(b, parts[i], parts[i + 1], &result);
    while (n > 1) {
        size_t best = 0;
        for (size_t i = 1; i + 1 < n; i++)
            if (prio[i] < prio[best])
                best = i;
        if (prio[best] == INT32_MAX)
            break;
        merge_priority(b, parts[best], parts[best + 1], &result);
        parts[best] = result;
        memmove(parts + best + 1, parts + best + 2, (n - best - 2) * sizeof *parts);
        memmove(prio + best + 1, prio + best + 2, (n - best - 2) * sizeof *prio);
        n--;
        if (best + 1 < n)
            prio[best] = merge_priority(b, parts[best], parts[best + 1], &result);
        else
            prio[best] = INT32_MAX;
        if (best > 0)
            prio[best - 1] = merge_priority(b, parts[best - 1], parts[best], &result);
    }
    return n;
}

/* ---- merging a long piece ----
 *
 * The scan above costs O(n^2) for a piece of n bytes, which a corpus
 * makes long now and then (a run of spaces, a line of "====", a base64
 * blob read as one word). Past LONG_PIECE bytes the same merges are made
 * from a heap ordered by (priority, position): the lowest priority first
 * and, among equals, the leftmost, which is the scan's choice, so the ids
 * are the same in O(n log n). */
enum { LONG_PIECE = 256 };

static int heap_less(const struct HeapEntry *a, const struct HeapEntry *b)
{
    return a->priority < b->priority || (a->priority == b->priority && a->left < b->left);
}

static void heap_push(Bpe *b, size_t *len, struct HeapEntry e)
{
    if (*len == b->heap_cap) {
        b->heap_cap = b->heap_cap ? 2 * b->heap_cap : 1024;
        b->heap = TRI_REALLOC(b->heap, b->heap_cap * sizeof *b->heap, "the tokenizer");
    }
    size_t i = (*len)++;
    while (i > 0 && heap_less(&e, &b->heap[(i - 1) / 2])) {
        b->heap[i] = b->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    b->heap[i] = e;
}

static struct HeapEntry heap_pop(Bpe *b, size_t *len)
{
    struct HeapEntry top = b->heap[0], last = b->heap[--(*len)];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *len)
            break;
        if (c + 1 < *len && heap_less(&b->heap[c + 1], &b->heap[c]))
            c++;
        if (!heap_less(&b->heap[c], &last))
            break;
        b->heap[i] = b->heap[c];
        i = c;
    }
    if (*len)
        b->heap[i] = last;
    return top;
}

/* Pushes the merge of part left with its right neighbour, if there is one. */
static void push_pair(Bpe *b, size_t *len, int32_t left)
{
    if (left < 0 || b->next[left] < 0)
        return;
    int32_t right = b->next[left], result;
    int32_t prio = merge_priority(b, b->parts[left], b->parts[right], &result);
    if (prio != INT32_MAX)
        heap_push(b, len, (struct HeapEntry){prio, left, right, b->version[left], b->version[right]});
}

/* Parts are indexed by their first byte; next/prev link the live ones. */
static size_t merge_long_piece(Bpe *b, const unsigned char *s, size_t n)
{
    if (n > b->list_cap) {
        b->list_cap = n * 2;
        b->next = TRI_REALLOC(b->next, b->list_cap * sizeof *b->next, "the tokenizer");
        b->prev = TRI_REALLOC(b->prev, b->list_cap * sizeof *b->prev, "the tokenizer");
        b->version = TRI_REALLOC(b->version, b->list_cap * sizeof *b->version, "the tokenizer");
    }
    int32_t *parts = b->parts;
    for (size_t i = 0; i < n; i++) {
        parts[i] = b->byte_id[s[i]];
        b->next[i] = i + 1 < n ? (int32_t)(i + 1) : -1;
        b->prev[i] = (int32_t)i - 1;
        b->version[i] = 0;
    }
    size_t len = 0;
    for (size_t i = 0; i + 1 < n; i++)
        push_pair(b, &len, (int32_t)i);
    while (len) {
        struct HeapEntry e = heap_pop(b, &len);
        if (b->version[e.left] != e.left_version || b->version[e.right] != e.right_version ||
            b->next[e.left] != e.right)
            continue; /* stale: one of the two has merged since */
        int32_t result;
        merge_priority(b, parts[e.left], parts[e.right], &result);
        parts[e.left] = result;
        b->version[e.left]++;
        b->version[e.right] = -1; /* gone */
        b->next[e.left] = b->next[e.right];
        if (b->next[e.left] >= 0)
            b->prev[b->next[e.left]] = e.left;
        push_pair(b, &len, b->prev[e.left]);
        push_pair(b, &len, e.left);
    }
    size_t out = 0;
    for (int32_t i = 0; i >= 0; i = b->next[i])
        parts[out++] = parts[i];
    return out;
}

static void encode_piece(Bpe *b, const char *s, size_t n, BpeEmit emit, void *ctx)
{
    CacheSlot *slot = NULL;
    if (n <= CACHE_BYTES) {
        slot = &b->cache[hash_bytes(s, n) & (CACHE_SLOTS - 1)];
        if (slot->len == n && slot->n_ids && memcmp(slot->bytes, s, n) == 0) {
            emit(ctx, slot->ids, slot->n_ids);
            return;
        }
    }
    int32_t whole = b->ignore_merges ? bpe_find(b, s, n) : -1;
    const int32_t *ids = &whole;
    size_t n_ids = 1;
    if (whole < 0 && n > LONG_PIECE) {
        if (n > b->parts_cap) {
            b->parts_cap = n * 2;
            b->parts = TRI_REALLOC(b->parts, b->parts_cap * sizeof *b->parts, "the tokenizer");
            b->prio = TRI_REALLOC(b->prio, b->parts_cap * sizeof *b->prio, "the tokenizer");
        }
        n_ids = merge_long_piece(b, (const unsigned char *)s, n);
        ids = b->parts;
    } else if (whole < 0) {
        n_ids = merge_piece(b, (const unsigned char *)s, n);
        ids = b->parts;
    }
    if (slot && n_ids <= CACHE_IDS) {
        slot->len = (uint8_t)n;
        slot->n_ids = (uint8_t)n_ids;
        memcpy(slot->bytes, s, n);
        memcpy(slot->ids, ids, n_ids * sizeof *ids);
    }
    emit(ctx, ids, n_ids);
}

/* ---- streaming a document ---- */

static void text_reserve(Bpe *b, size_t more)
{
    if (b->text_len + more > b->text_cap) {
        b->text_cap = (b->text_len + more) * 2;
        b->text = TRI_REALLOC(b->text, b->text_cap, "the tokenizer");
    }
}

static void text_put_replacement(Bpe *b)
{
    text_reserve(b, 3);
    memcpy(b->text + b->text_len, "\xEF\xBF\xBD", 3);
    b->text_len += 3;
}

/* The WHATWG UTF-8 decoder, writing valid UTF-8 back: a maximal invalid
 * subpart becomes one U+FFFD, and the byte that broke a sequence starts
 * over. The state survives between feeds. */
static void clean_utf8(Bpe *b, const unsigned char *s, size_t n)
{
    text_reserve(b, n * 3 + 8);
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        if (b->utf8_need == 0) {
            if (c < 0x80) {
                b->text[b->text_len++] = (char)c;
            } else if (c >= 0xC2 && c <= 0xDF) {
                b->utf8_need = 1, b->utf8_lo = 0x80, b->utf8_hi = 0xBF;
            } else if (c >= 0xE0 && c <= 0xEF) {
                b->utf8_need = 2;
                b->utf8_lo = c == 0xE0 ? 0xA0 : 0x80;
                b->utf8_hi = c == 0xED ? 0x9F : 0xBF;
            } else if (c >= 0xF0 && c <= 0xF4) {
                b->utf8_need = 3;
                b->utf8_lo = c == 0xF0 ? 0x90 : 0x80;
                b->utf8_hi = c == 0xF4 ? 0x8F : 0xBF;
            } else {
                text_put_replacement(b);
            }
            if (b->utf8_need) {
                b->utf8_seq[0] = c;
                b->utf8_have = 1;
            }
            i++;
            continue;
        }
        if (c < b->utf8_lo || c > b->utf8_hi) {
            b->utf8_need = 0;
            text_put_replacement(b);
            continue; /* c starts over */
        }
        b->utf8_lo = 0x80, b->utf8_hi = 0xBF;
        b->utf8_seq[b->utf8_have++] = c;
        i++;
        if (--b->utf8_need == 0) {
            memcpy(b->text + b->text_len, b->utf8_seq, (size_t)b->utf8_have);
            b->text_len += (size_t)b->utf8_have;
        }
    }
}

/* Cuts pieces from the text; while streaming (!last) stops at the first
 * match that reached the end of the text, which more text could change. */
static void cut_pieces(Bpe *b, int last, BpeEmit emit, void *ctx)
{
    size_t pos = 0;
    uint32_t opts = PCRE2_NO_UTF_CHECK | (last ? 0 : PCRE2_PARTIAL_HARD);
    while (pos < b->text_len && !b->pattern_failed) {
        int rc = pcre2_match(b->re, (PCRE2_SPTR)b->text, b->text_len, pos, opts, b->md, b->mctx);
        if (rc == PCRE2_ERROR_PARTIAL)
            break;
        if (rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT || rc == PCRE2_ERROR_HEAPLIMIT ||
            rc == PCRE2_ERROR_JIT_STACKLIMIT) {
            b->pattern_failed = 1;
            pos = b->text_len;
            break;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(b->md);
        size_t start = rc > 0 ? ov[0] : b->text_len, end = rc > 0 ? ov[1] : b->text_len;
        if (rc < 0 && !last)
            break; /* no match yet: the rest may still become one */
        if (rc < 0 && rc != PCRE2_ERROR_NOMATCH)
            fail_abort("PCRE2 match failed in the tokenizer", __FILE__, __LINE__);
        if (start > pos) /* text the pattern skips is a piece too, as in HF's Split */
            encode_piece(b, b->text + pos, start - pos, emit, ctx);
        if (end > start) {
            encode_piece(b, b->text + start, end - start, emit, ctx);
            pos = end;
        } else if (end == start && rc > 0) {
            /* an empty match: step one character */
            size_t step = 1;
            while (end + step < b->text_len && ((unsigned char)b->text[end + step] & 0xC0) == 0x80)
                step++;
            if (end >= b->text_len)
                break;
            encode_piece(b, b->text + end, step, emit, ctx);
            pos = end + step;
        } else {
            pos = end;
        }
    }
    memmove(b->text, b->text + pos, b->text_len - pos);
    b->text_len -= pos;
}

void bpe_doc_begin(Bpe *b)
{
    b->text_len = 0;
    b->utf8_need = 0;
    b->pattern_failed = 0;
}

void bpe_doc_feed(Bpe *b, const void *bytes, size_t len, BpeEmit emit, void *ctx)
{
    const unsigned char *s = bytes;
    while (len) {
        size_t n = len < STREAM_CHUNK ? len : STREAM_CHUNK;
        clean_utf8(b, s, n);
        s += n;
        len -= n;
        if (b->text_len >= STREAM_CHUNK)
            cut_pieces(b, 0, emit, ctx);
    }
}

int bpe_doc_end(Bpe *b, BpeEmit emit, void *ctx)
{
    if (b->utf8_need) {
        b->utf8_need = 0;
        text_put_replacement(b);
    }
    cut_pieces(b, 1, emit, ctx);
    return b->pattern_failed;
}
