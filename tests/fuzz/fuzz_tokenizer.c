/*
 * fuzz_tokenizer.c - fuzz target for the tokenizer-file loaders
 * (src/tokenizer/tokenizer_load.c) and the encoder they feed (src/tokenizer/bpe.c).
 *
 * Input: a tokenizer file (tokenizer.json, GPT-2's encoder.json, a tiktoken
 * rank file, or anything); a line "%%merges" ends it, and what follows is
 * the vocab.bpe that an encoder.json takes. A tokenizer that loads encodes
 * a fixed text of mixed scripts, one of pieces longer than 256 bytes (the
 * heap path of bpe.c) and the input's own first bytes, and one
 * property is checked: byte-level BPE loses nothing, so the bytes of the
 * ids are the text (valid UTF-8 text; invalid bytes become U+FFFD first).
 */
#include <stdlib.h>
#include <string.h>

#include "bpe.h"
#include "fuzz.h"
#include "tokenizer_load.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

typedef struct {
    const Bpe *bpe;
    char out[4096];
    size_t len;
    int lost; /* an id without bytes, or more than out holds */
} Decoded;

static void decode(void *ctx, const int32_t *ids, size_t n)
{
    Decoded *d = ctx;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *bytes = bpe_token_bytes(d->bpe, ids[i], &len);
        if (!bytes || d->len + len > sizeof d->out) {
            d->lost = 1;
            continue;
        }
        memcpy(d->out + d->len, bytes, len);
        d->len += len;
    }
}

static void round_trip(Bpe *b, const char *text, size_t n)
{
    static Decoded d;
    d.bpe = b;
    d.len = 0;
    d.lost = 0;
    bpe_doc_begin(b);
    bpe_doc_feed(b, text, n, decode, &d);
    if (bpe_doc_end(b, decode, &d))
        return; /* a pattern beyond PCRE2's match limit: refused, not lost */
    if (d.lost || d.len != n || memcmp(d.out, text, n) != 0)
        fuzz_fail("the ids' bytes are not the text they encode");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char sample[] = "Hello, world! It's 2024: 3.14159 \xce\xb1\xce\xb2\xce\xb3 \xe4\xb8\xad\xe6\x96\x87 "
                                 "\xf0\x9f\x8e\x89  \t\n\n   spaces\r\n don't STOP";
    const char *text = (const char *)data, *merges = NULL;
    size_t n = size, mn = 0;
    for (size_t i = 0; i + 8 <= size; i++) {
        if ((i == 0 || data[i - 1] == '\n') && memcmp(data + i, "%%merges", 8) == 0) {
            n = i;
            merges = text + i + 8 + (i + 8 < size && data[i + 8] == '\n');
            mn = size - (size_t)(merges - text);
            break;
        }
    }
    Bpe *b;
    char eod[256], err[1024];
    if (tokenizer_load_bytes(text, n, "fuzz", merges, mn, &b, eod, sizeof eod, err, sizeof err))
        return 0;
    round_trip(b, sample, sizeof sample - 1);
    /* pieces long enough for bpe.c's heap path */
    static char longer[1200];
    if (!longer[0]) {
        memset(longer, 'a', 400);
        memcpy(longer + 400, "the", 3);
        memset(longer + 403, ' ', 397);
        memset(longer + 800, '=', 399);
    }
    round_trip(b, longer, sizeof longer - 1);
    /* the input itself as text, where it is valid UTF-8 (ASCII here) */
    size_t k = 0;
    while (k < size && k < 256 && data[k] < 0x80)
        k++;
    round_trip(b, text, k);
    bpe_free(b);
    return 0;
}
