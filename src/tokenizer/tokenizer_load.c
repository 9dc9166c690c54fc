/*
 * tokenizer_load.c - tokenizer files into a Bpe; see tokenizer_load.h.
 *
 * JSON is read with jansson. Every check here is about a file someone
 * handed us, so each failure is a message naming the file and what is
 * wrong in it, never an abort: a truncated download or the wrong file is
 * the common case.
 */
#include "tokenizer_load.h"

#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "byte_level.h"
#include "reason.h"

/* GPT-2's pattern (also r50k_base's), cl100k_base's (Llama 3 uses the same)
 * and o200k_base's, as OpenAI's tiktoken and the model files write them. */
static const char PATTERN_GPT2[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
static const char PATTERN_CL100K[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}|"
    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char PATTERN_O200K[] =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

enum { MAX_TOKENIZER_BYTES = 1 << 30 };

/* ---- reading files ---- */

static char *read_whole(const char *path, size_t *n, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        reason_set(err, errlen, "tokenizer file %s: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 20, len = 0;
    char *buf = malloc(cap + 1);
    for (;;) {
        if (!buf) {
            fclose(f);
            reason_set(err, errlen, "tokenizer file %s: out of memory", path);
            return NULL;
        }
        len += fread(buf + len, 1, cap - len, f);
        if (len < cap)
            break;
        if (cap >= MAX_TOKENIZER_BYTES) {
            free(buf);
            fclose(f);
            reason_set(err, errlen, "tokenizer file %s: larger than 1 GiB, which is not a tokenizer", path);
            return NULL;
        }
        cap *= 2;
        char *more = realloc(buf, cap + 1);
        if (!more)
            free(buf);
        buf = more;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        reason_set(err, errlen, "tokenizer file %s: read error", path);
        return NULL;
    }
    buf[len] = 0;
    *n = len;
    return buf;
}

/* The file named leaf in path's directory. */
static void sibling(const char *path, const char *leaf, char *out, size_t cap)
{
    const char *slash = strrchr(path, '/');
    int dir = slash ? (int)(slash - path + 1) : 0;
    snprintf(out, cap, "%.*s%s", dir, path, leaf);
}

/* ---- vocabularies and merges in GPT-2's byte-level spelling ---- */

static int add_byte_level_token(Bpe *b, const char *name, const char *key, json_int_t id,
                                char *err, size_t errlen)
{
    size_t n = strlen(key);
    unsigned char *bytes = malloc(n + 1);
    long len = bytes ? byte_level_decode(key, n, bytes) : -1;
    int rc = 0;
    if (len <= 0)
        rc = reason_set(err, errlen, "tokenizer file %s: token \"%.40s\" is not in GPT-2's byte-level spelling", name, key);
    else if (id < 0 || id > INT32_MAX - 1 || bpe_add_token(b, bytes, (size_t)len, (int32_t)id))
        rc = reason_set(err, errlen, "tokenizer file %s: token \"%.40s\" has a bad or repeated id %lld (or its bytes repeat)",
                        name, key, (long long)id);
    free(bytes);
    return rc;
}

static int load_vocab_object(Bpe *b, const char *name, json_t *vocab, char *err, size_t errlen)
{
    const char *key;
    json_t *value;
    if (!json_is_object(vocab) || json_object_size(vocab) == 0)
        return reason_set(err, errlen, "tokenizer file %s: the vocabulary is not a non-empty object", name);
    json_object_foreach(vocab, key, value) {
        if (!json_is_integer(value))
            return reason_set(err, errlen, "tokenizer file %s: token \"%.40s\" has no integer id", name, key);
        if (add_byte_level_token(b, name, key, json_integer_value(value), err, errlen))
            return 1;
    }
    return 0;
}

static int32_t find_byte_level(const Bpe *b, const char *s, size_t n)
{
    unsigned char buf[1024];
    if (n > sizeof buf)
        return -1;
    long len = byte_level_decode(s, n, buf);
    return len > 0 ? bpe_find(b, buf, (size_t)len) : -1;
}

/* One merge "left right" (byte-level spelling) at priority. */
static int add_merge_strings(Bpe *b, const char *name, const char *left, size_t ln,
                             const char *right, size_t rn, int32_t priority, char *err, size_t errlen)
{
    char both[2048];
    if (ln + rn >= sizeof both)
        return reason_set(err, errlen, "tokenizer file %s: merge %d is too long", name, priority + 1);
    memcpy(both, left, ln);
    memcpy(both + ln, right, rn);
    int32_t l = find_byte_level(b, left, ln), r = find_byte_level(b, right, rn);
    int32_t result = find_byte_level(b, both, ln + rn);
    if (l < 0 || r < 0 || result < 0)
        return reason_set(err, errlen, "tokenizer file %s: merge %d (\"%.*s\" \"%.*s\") names a token the vocabulary lacks",
                          name, priority + 1, (int)ln < 40 ? (int)ln : 40, left, (int)rn < 40 ? (int)rn : 40, right);
    bpe_add_merge(b, l, r, result, priority);
    return 0;
}

/* "left right", split at its one space (byte-level tokens hold none). */
static int add_merge_line(Bpe *b, const char *name, const char *line, size_t n, int32_t priority,
                          char *err, size_t errlen)
{
    const char *space = memchr(line, ' ', n);
    if (!space || space == line || space + 1 == line + n || memchr(space + 1, ' ', (size_t)(line + n - space - 1)))
        return reason_set(err, errlen, "tokenizer file %s: merge %d is not two tokens separated by one space",
                          name, priority + 1);
    return add_merge_strings(b, name, line, (size_t)(space - line), space + 1,
                             (size_t)(line + n - space - 1), priority, err, errlen);
}

/* ---- GPT-2: encoder.json + vocab.bpe ---- */

static int load_gpt2(Bpe *b, const char *name, json_t *encoder, const char *merges, size_t mn,
                     char *eod, size_t cap, char *err, size_t errlen)
{
    if (load_vocab_object(b, name, encoder, err, errlen))
        return 1;
    if (!merges)
        return reason_set(err, errlen, "tokenizer file %s: GPT-2's encoder.json needs its vocab.bpe beside it", name);
    const char *p = merges, *end = merges + mn;
    const char *nl = memchr(p, '\n', mn);
    if (mn < 8 || memcmp(p, "#version", 8) != 0 || !nl)
        return reason_set(err, errlen, "tokenizer file %s: vocab.bpe does not start with a #version line", name);
    p = nl + 1;
    int32_t priority = 0;
    while (p < end) {
        nl = memchr(p, '\n', (size_t)(end - p));
        const char *stop = nl ? nl : end;
        size_t n = (size_t)(stop - p);
        if (n && p[n - 1] == '\r')
            n--;
        if (n && add_merge_line(b, name, p, n, priority++, err, errlen))
            return 1;
        p = stop + 1;
    }
    if (bpe_add_special(b, "<|endoftext|>", bpe_find(b, "<|endoftext|>", 13)))
        return reason_set(err, errlen, "tokenizer file %s: encoder.json has no <|endoftext|>", name);
    snprintf(eod, cap, "<|endoftext|>");
    return bpe_set_pattern(b, PATTERN_GPT2, err, errlen);
}

/* ---- HuggingFace tokenizer.json ---- */

static const char *type_of(json_t *obj)
{
    const char *t = json_string_value(json_object_get(obj, "type"));
    return t ? t : "";
}

static int set_pre_tokenizer(Bpe *b, const char *name, json_t *pre, char *err, size_t errlen)
{
    if (strcmp(type_of(pre), "ByteLevel") == 0) {
        if (json_is_true(json_object_get(pre, "add_prefix_space")))
            return reason_set(err, errlen, "tokenizer file %s: ByteLevel add_prefix_space = true is not supported", name);
        if (json_is_false(json_object_get(pre, "use_regex")))
            return reason_set(err, errlen, "tokenizer file %s: a ByteLevel pre-tokenizer without a regex is not supported", name);
        return bpe_set_pattern(b, PATTERN_GPT2, err, errlen);
    }
    json_t *list = json_object_get(pre, "pretokenizers");
    if (strcmp(type_of(pre), "Sequence") != 0 || json_array_size(list) != 2)
        return reason_set(err, errlen, "tokenizer file %s: pre_tokenizer %s is not supported (ByteLevel, or a Sequence of Split and ByteLevel)",
                          name, pre ? type_of(pre) : "null");
    json_t *split = json_array_get(list, 0), *level = json_array_get(list, 1);
    const char *regex = json_string_value(json_object_get(json_object_get(split, "pattern"), "Regex"));
    const char *behavior = json_string_value(json_object_get(split, "behavior"));
    if (strcmp(type_of(split), "Split") != 0 || !regex || !behavior || strcmp(behavior, "Isolated") != 0 ||
        json_is_true(json_object_get(split, "invert")) || strcmp(type_of(level), "ByteLevel") != 0 ||
        json_is_true(json_object_get(level, "use_regex")) ||
        json_is_true(json_object_get(level, "add_prefix_space")))
        return reason_set(err, errlen, "tokenizer file %s: the pre_tokenizer Sequence is not Split(Regex, Isolated) then ByteLevel(use_regex = false)", name);
    if (bpe_set_pattern(b, regex, err, errlen)) {
        char inner[256];
        snprintf(inner, sizeof inner, "%s", err);
        return reason_set(err, errlen, "tokenizer file %s: %s", name, inner);
    }
    return 0;
}

static int load_hf_merges(Bpe *b, const char *name, json_t *merges, char *err, size_t errlen)
{
    if (!json_is_array(merges))
        return reason_set(err, errlen, "tokenizer file %s: model.merges is not a list", name);
    size_t i;
    json_t *m;
    json_array_foreach(merges, i, m) {
        if (i >= INT32_MAX)
            return reason_set(err, errlen, "tokenizer file %s: too many merges", name);
        if (json_is_string(m)) {
            if (add_merge_line(b, name, json_string_value(m), json_string_length(m), (int32_t)i, err, errlen))
                return 1;
        } else if (json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
                   json_is_string(json_array_get(m, 1))) {
            json_t *l = json_array_get(m, 0), *r = json_array_get(m, 1);
            if (add_merge_strings(b, name, json_string_value(l), json_string_length(l), json_string_value(r),
                                  json_string_length(r), (int32_t)i, err, errlen))
                return 1;
        } else {
            return reason_set(err, errlen, "tokenizer file %s: merge %zu is neither \"a b\" nor [\"a\", \"b\"]", name, i + 1);
        }
    }
    return 0;
}

static int load_hf(Bpe *b, const char *name, json_t *root, char *eod, size_t cap, char *err, size_t errlen)
{
    json_t *model = json_object_get(root, "model");
    if (strcmp(type_of(model), "BPE") != 0)
        return reason_set(err, errlen, "tokenizer file %s: model type \"%s\" is not BPE", name, type_of(model));
    if (json_is_true(json_object_get(model, "byte_fallback")))
        return reason_set(err, errlen, "tokenizer file %s: byte_fallback BPE (SentencePiece style) is not supported", name);
    const char *prefix = json_string_value(json_object_get(model, "continuing_subword_prefix"));
    const char *suffix = json_string_value(json_object_get(model, "end_of_word_suffix"));
    if ((prefix && *prefix) || (suffix && *suffix))
        return reason_set(err, errlen, "tokenizer file %s: subword prefixes and suffixes are not byte-level BPE", name);
    json_t *normalizer = json_object_get(root, "normalizer");
    if (normalizer && !json_is_null(normalizer))
        return reason_set(err, errlen, "tokenizer file %s: normalizer %s is not supported", name, type_of(normalizer));
    if (load_vocab_object(b, name, json_object_get(model, "vocab"), err, errlen) ||
        load_hf_merges(b, name, json_object_get(model, "merges"), err, errlen) ||
        set_pre_tokenizer(b, name, json_object_get(root, "pre_tokenizer"), err, errlen))
        return 1;
    bpe_set_ignore_merges(b, json_is_true(json_object_get(model, "ignore_merges")));
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(root, "added_tokens"), i, t) {
        const char *content = json_string_value(json_object_get(t, "content"));
        json_t *id = json_object_get(t, "id");
        if (!content || !json_is_integer(id) || json_integer_value(id) < 0 ||
            json_integer_value(id) > INT32_MAX - 1 ||
            bpe_add_special(b, content, (int32_t)json_integer_value(id)))
            return reason_set(err, errlen, "tokenizer file %s: added token %zu has no content, a bad id, or an id of another token", name, i + 1);
    }
    static const char *const eods[] = {"<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>"};
    eod[0] = 0;
    for (size_t k = 0; k < sizeof eods / sizeof eods[0] && !eod[0]; k++)
        if (bpe_special(b, eods[k]) >= 0)
            snprintf(eod, cap, "%s", eods[k]);
    return 0;
}

/* ---- tiktoken rank files ---- */

static int base64_value(int c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/* Returns the decoded length, or -1 for text that is not base64. */
static long base64_decode(const char *s, size_t n, unsigned char *out)
{
    if (n == 0 || n % 4)
        return -1;
    long o = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4], pad = 0;
        for (int k = 0; k < 4; k++) {
            if (s[i + k] == '=' && i + 4 == n && k >= 2) {
                v[k] = 0, pad++;
            } else {
                v[k] = base64_value((unsigned char)s[i + k]);
                if (v[k] < 0 || pad)
                    return -1;
            }
        }
        uint32_t w = (uint32_t)(v[0] << 18 | v[1] << 12 | v[2] << 6 | v[3]);
        out[o++] = (unsigned char)(w >> 16);
        if (pad < 2)
            out[o++] = (unsigned char)(w >> 8);
        if (pad < 1)
            out[o++] = (unsigned char)w;
    }
    return o;
}

static int looks_like_tiktoken(const char *data, size_t n)
{
    size_t i = 0;
    while (i < n && base64_value((unsigned char)data[i]) >= 0)
        i++;
    while (i < n && data[i] == '=')
        i++;
    if (i == 0 || i >= n || data[i] != ' ')
        return 0;
    return i + 1 < n && data[i + 1] >= '0' && data[i + 1] <= '9';
}

typedef struct {
    int32_t ranks;
    const char *pattern;
    const char *eod;
    const char *specials[8];
    int32_t special_ids[8];
} TiktokenKind;

static const TiktokenKind TIKTOKEN_KINDS[] = {
    {50256, PATTERN_GPT2, "<|endoftext|>", {"<|endoftext|>"}, {50256}},
    {100256, PATTERN_CL100K, "<|endoftext|>",
     {"<|endoftext|>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|endofprompt|>"},
     {100257, 100258, 100259, 100260, 100276}},
    {199998, PATTERN_O200K, "<|endoftext|>", {"<|endoftext|>", "<|endofprompt|>"}, {199999, 200018}},
    {128000, PATTERN_CL100K, "<|end_of_text|>",
     {"<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"},
     {128000, 128001, 128006, 128007, 128009}},
};

/* Llama 3's 256 special ids: the named ones above, the rest reserved in
 * order (<|reserved_special_token_0|> is 128002). */
static int add_llama3_reserved(Bpe *b)
{
    int reserved = 0;
    for (int32_t id = 128002; id < 128256; id++) {
        if (id == 128006 || id == 128007 || id == 128009)
            continue;
        char name[64];
        snprintf(name, sizeof name, "<|reserved_special_token_%d|>", reserved++);
        if (bpe_add_special(b, name, id))
            return 1;
    }
    return 0;
}

static int load_tiktoken(Bpe *b, const char *name, const char *data, size_t n, char *eod, size_t cap,
                         char *err, size_t errlen)
{
    const char *p = data, *end = data + n;
    unsigned char bytes[1024];
    int32_t count = 0;
    for (long line = 1; p < end; line++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *stop = nl ? nl : end;
        const char *space = memchr(p, ' ', (size_t)(stop - p));
        if (stop == p) {
            p = stop + 1;
            continue;
        }
        long len = space && (size_t)(space - p) <= 4 * sizeof bytes / 3 ? base64_decode(p, (size_t)(space - p), bytes) : -1;
        /* the rank by hand: the bytes need not end in a NUL (the fuzz
         * target's do not), so no strtol */
        const char *d = space ? space + 1 : stop, *digits_end = stop;
        if (digits_end > d && digits_end[-1] == '\r')
            digits_end--;
        long long rank = d < digits_end ? 0 : -1;
        for (; d < digits_end && rank >= 0; d++)
            rank = *d >= '0' && *d <= '9' && rank < INT32_MAX ? rank * 10 + (*d - '0') : -1;
        if (len <= 0 || rank < 0 || rank >= INT32_MAX - 1)
            return reason_set(err, errlen, "tokenizer file %s: line %ld is not a base64 token and a rank", name, line);
        if (bpe_add_token(b, bytes, (size_t)len, (int32_t)rank))
            return reason_set(err, errlen, "tokenizer file %s: line %ld: rank %lld is above 16777215 or repeats a rank or its token",
                              name, line, rank);
        count++;
        p = stop + 1;
    }
    const TiktokenKind *kind = NULL;
    for (size_t k = 0; k < sizeof TIKTOKEN_KINDS / sizeof TIKTOKEN_KINDS[0]; k++)
        if (TIKTOKEN_KINDS[k].ranks == count && bpe_vocab_size(b) == count)
            kind = &TIKTOKEN_KINDS[k];
    if (!kind)
        return reason_set(err, errlen, "tokenizer file %s: a tiktoken file of %d ranks (0 to %d), which is none of the known "
                          "ones (GPT-2 50256, cl100k_base 100256, o200k_base 199998, Llama 3 128000): its pattern is unknown",
                          name, count, bpe_vocab_size(b) - 1);
    for (int k = 0; k < 8 && kind->specials[k]; k++)
        if (bpe_add_special(b, kind->specials[k], kind->special_ids[k]))
            return reason_set(err, errlen, "tokenizer file %s: special token %s collides with a rank", name, kind->specials[k]);
    if (kind->ranks == 128000 && add_llama3_reserved(b))
        return reason_set(err, errlen, "tokenizer file %s: Llama 3's reserved tokens collide with ranks", name);
    bpe_merges_from_ranks(b);
    bpe_set_ignore_merges(b, 1);
    snprintf(eod, cap, "%s", kind->eod);
    return bpe_set_pattern(b, kind->pattern, err, errlen);
}

/* ---- entry points ---- */

static int load_json(Bpe *b, const char *name, const char *data, size_t n, const char *merges, size_t mn,
                     char *eod, size_t cap, char *err, size_t errlen)
{
    json_error_t jerr;
    json_t *root = json_loadb(data, n, 0, &jerr);
    if (!root)
        return reason_set(err, errlen, "tokenizer file %s: not valid JSON at line %d column %d: %s", name, jerr.line,
                          jerr.column, jerr.text);
    int rc;
    if (!json_is_object(root))
        rc = reason_set(err, errlen, "tokenizer file %s: JSON but not an object, so not a tokenizer", name);
    else if (json_is_object(json_object_get(root, "model"))) /* "model" is also a GPT-2 token */
        rc = load_hf(b, name, root, eod, cap, err, errlen);
    else
        rc = load_gpt2(b, name, root, merges, mn, eod, cap, err, errlen);
    json_decref(root);
    return rc;
}

int tokenizer_load_bytes(const char *data, size_t n, const char *name, const char *merges, size_t merges_n,
                         Bpe **out, char *eod, size_t cap, char *err, size_t errlen)
{
    size_t i = 0;
    while (i < n && (data[i] == ' ' || data[i] == '\n' || data[i] == '\r' || data[i] == '\t'))
        i++;
    Bpe *b = bpe_new();
    int rc;
    eod[0] = 0;
    if (i < n && data[i] == '{')
        rc = load_json(b, name, data, n, merges, merges_n, eod, cap, err, errlen);
    else if (looks_like_tiktoken(data, n))
        rc = load_tiktoken(b, name, data, n, eod, cap, err, errlen);
    else if (n == 0)
        rc = reason_set(err, errlen, "tokenizer file %s: empty", name);
    else
        rc = reason_set(err, errlen, "tokenizer file %s: of an unknown kind (not tokenizer.json, GPT-2's encoder.json "
                        "or vocab.bpe, nor a tiktoken rank file)", name);
    if (!rc)
        rc = bpe_finish(b, err, errlen);
    if (rc) {
        bpe_free(b);
        return 1;
    }
    *out = b;
    return 0;
}

int tokenizer_load(const char *path, Bpe **out, char *eod, size_t cap, char *err, size_t errlen)
{
    size_t n, mn = 0;
    char *data = read_whole(path, &n, err, errlen);
    if (!data)
        return 1;
    char other[4096];
    char *merges = NULL;
    const char *json_path = path;
    if (n >= 8 && memcmp(data, "#version", 8) == 0) {
        /* vocab.bpe named: encoder.json is beside it */
        merges = data, mn = n;
        sibling(path, "encoder.json", other, sizeof other);
        json_path = other;
        data = read_whole(other, &n, err, errlen);
        if (!data) {
            free(merges);
            return 1;
        }
    } else {
        size_t i = 0;
        while (i < n && data[i] != '{' && (data[i] == ' ' || data[i] == '\n'))
            i++;
        /* JSON: an encoder.json takes the vocab.bpe beside it, a
         * tokenizer.json leaves it unread (the parse tells them apart) */
        if (i < n && data[i] == '{') {
            sibling(path, "vocab.bpe", other, sizeof other);
            FILE *f = fopen(other, "rb");
            if (f) {
                fclose(f);
                merges = read_whole(other, &mn, err, errlen);
                if (!merges) {
                    free(data);
                    return 1;
                }
            }
        }
    }
    int rc = tokenizer_load_bytes(data, n, json_path, merges, mn, out, eod, cap, err, errlen);
    free(data);
    free(merges);
    return rc;
}

int tokenizer_for_model(const char *path, int vocab_size, const char *setting, Bpe **out,
                        int32_t *eod, char *msg, size_t cap)
{
    char eod_name[256], err[1024];
    Bpe *b;
    if (tokenizer_load(path, &b, eod_name, sizeof eod_name, err, sizeof err))
        return reason_set(msg, cap, "trident: %s%s: %s\n", setting, path, err);
    int32_t n = bpe_vocab_size(b);
    if (n > vocab_size) {
        bpe_free(b);
        return reason_set(msg, cap, "trident: %s%s: its vocabulary of %d tokens exceeds [model] vocab_size = %d "
                          "(set vocab_size to at least %d; padded to a multiple of 128, %d)\n",
                          setting, path, n, vocab_size, n, (n + 127) / 128 * 128);
    }
    if (eod)
        *eod = eod_name[0] ? bpe_special(b, eod_name) : 0;
    if (out)
        *out = b;
    else
        bpe_free(b);
    return 0;
}
