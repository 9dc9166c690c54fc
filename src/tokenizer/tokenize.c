/*
 * tokenize.c - `trident tokenize`; see tokenize.h.
 *
 * Where documents start. A document starts at the start of a file and
 * after each separator: a newline in JSON Lines, the --delimiter in text
 * (none: a file is one document). Rank r takes the global byte range
 * [S r / P, S (r + 1) / P) and tokenizes the documents that start between
 * anchor(its start) and anchor(the next rank's start), where anchor(x) is
 * the first place at or after x where a document surely starts: a file
 * start, or the end of a separator that no other occurrence overlaps from
 * the left. A separator cut leftmost first from the file's start (as
 * str.split cuts) can be overlapped by another ("\n\n" in "\n\n\n"), so a
 * rank starting mid-file could not tell which occurrences count; one that
 * nothing overlaps from the left counts whatever came before. Every rank
 * finds the same anchors, so the documents, and the dataset, do not
 * depend on the number of ranks.
 *
 * Memory: a read buffer, the tokenizer's (bpe.h), and for JSON Lines the
 * longest line; tokens go to a temporary file per rank (in $TMPDIR), which
 * indexed_write copies into place.
 */
#include "tokenize.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "bpe.h"
#include "cli_options.h"
#include "comm.h"
#include "fail.h"
#include "file_check.h"
#include "grid.h"
#include "indexed_write.h"
#include "timer.h"
#include "tokenizer_load.h"

enum { READ_BUF = 1 << 20, MAX_INPUTS = 65536, MAX_DELIM = 256, BAD_LINES_NAMED = 10 };

typedef struct {
    const char *tokenizer, *output, *key, *eod;
    char delim[MAX_DELIM];
    size_t delim_len;
    const char **inputs;
    int n_inputs, skip_bad, force, jsonl_forced;
    double progress; /* seconds between progress lines */
} Args;

typedef struct {
    const char *path;
    int fd;
    int64_t start, size; /* in the global stream */
    int jsonl;
} Input;

typedef struct {
    Args *args;
    Bpe *bpe;
    int32_t eod;
    int dtype;
    Input *in;
    int n_in;
    int64_t total_bytes;
    /* output of this rank */
    FILE *tokens, *lengths;
    int64_t n_tokens, n_docs, doc_tokens, bad_lines;
    unsigned char *out_buf;
    size_t out_len;
    /* progress */
    int rank, size;
    int64_t range_bytes, done_bytes;
    double started, last_report;
    char *line;
    size_t line_len, line_cap;
    char msg[8192];
} Job;

/* ---- options ---- */

/* --delimiter takes C's escapes, since a shell makes "\n\n" awkward. */
static int unescape(const char *s, char *out, size_t cap, size_t *len)
{
    size_t o = 0;
    for (; *s; s++) {
        char c = *s;
        if (c == '\\' && s[1]) {
            s++;
            switch (*s) {
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case 'r': c = '\r'; break;
            case '\\': c = '\\'; break;
            case 'x': {
                char hex[3] = {s[1], s[1] ? s[2] : 0, 0}, *end;
                long v = strtol(hex, &end, 16);
                if (end != hex + 2)
                    return 1;
                c = (char)v;
                s += 2;
                break;
            }
            default: return 1;
            }
        }
        if (o + 1 >= cap)
            return 1;
        out[o++] = c;
    }
    *len = o;
    return o == 0;
}

static int ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), t = strlen(tail);
    return n >= t && strcmp(s + n - t, tail) == 0;
}

static int parse_delimiter(const char *value, void *args)
{
    Args *a = args;
    return unescape(value, a->delim, sizeof a->delim, &a->delim_len);
}

static int parse_args(Args *a, int argc, char **argv, int speak)
{
    memset(a, 0, sizeof *a);
    a->progress = 5.0;
    a->inputs = TRI_CALLOC((size_t)argc + 1, sizeof *a->inputs, "the input list");
    CliOption options[] = {
        {.name = "tokenizer", .takes = CLI_ONE, .to = &a->tokenizer, .needed = "FILE"},
        {.name = "input", .takes = CLI_WORDS, .to = a->inputs, .count = &a->n_inputs,
         .max = MAX_INPUTS, .invalid = "too many --input files (at most 65536)",
         .needed = "FILE..."},
        {.name = "output", .takes = CLI_ONE, .to = &a->output, .needed = "PREFIX"},
        {.name = "jsonl-key", .takes = CLI_ONE, .to = &a->key},
        {.name = "delimiter", .takes = CLI_ONE, .check = CLI_CUSTOM, .parse = parse_delimiter,
         .to = a, .invalid = "--delimiter '%s': expected 1 to 255 bytes (escapes \\n \\t \\r \\\\ \\xHH)"},
        {.name = "eod", .takes = CLI_ONE, .to = &a->eod},
        {.name = "skip-bad", .takes = CLI_FLAG, .to = &a->skip_bad},
        {.name = "force", .takes = CLI_FLAG, .to = &a->force},
        {.name = "progress", .takes = CLI_ONE, .check = CLI_REAL, .most = 1e9, .to = &a->progress,
         .invalid = "--progress %s: expected seconds between progress lines (> 0)"},
    };
    CliSpec spec = {.command = "tokenize", .options = options,
                    .n_options = (int)(sizeof options / sizeof options[0])};
    int rc = cli_options_parse(&spec, argc, argv, fail_stream(speak));
    /* --jsonl-key reads every input as JSON Lines */
    a->jsonl_forced = a->key != NULL;
    if (!a->key)
        a->key = "text";
    return rc;
}

/* ---- inputs and anchors ---- */

static int open_inputs(Job *j)
{
    int64_t at = 0;
    for (int i = 0; i < j->n_in; i++) {
        Input *in = &j->in[i];
        char why[256];
        in->path = j->args->inputs[i];
        in->jsonl = j->args->jsonl_forced || ends_with(in->path, ".jsonl") || ends_with(in->path, ".json");
        in->fd = file_open_regular(in->path, O_RDONLY, why, sizeof why);
        struct stat st;
        if (in->fd < 0 || fstat(in->fd, &st)) {
            snprintf(j->msg, sizeof j->msg, "trident: tokenize --input %s: %s\n", in->path,
                     in->fd < 0 ? why : strerror(errno));
            return 1;
        }
        in->start = at;
        in->size = st.st_size;
        at += st.st_size;
    }
    j->total_bytes = at;
    return 0;
}

static const char *separator(const Job *j, const Input *in, size_t *len)
{
    if (in->jsonl) {
        *len = 1;
        return "\n";
    }
    *len = j->args->delim_len;
    return j->args->delim_len ? j->args->delim : NULL;
}

static int read_at(const Input *in, void *buf, size_t n, int64_t at)
{
    char *p = buf;
    while (n) {
        ssize_t r = pread(in->fd, p, n, (off_t)at);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return 1;
        p += r, n -= (size_t)r, at += r;
    }
    return 0;
}

static void input_changed(const Input *in)
{
    char m[4200];
    snprintf(m, sizeof m, "trident: tokenize --input %s: cannot read it any more (changed or truncated while being read)\n",
             in->path);
    fail_input_abort(m);
}

/* The first sure document start at or after global offset x (see the
 * top of this file); total_bytes when there is none. */
static int64_t anchor(const Job *j, int64_t x, char *buf)
{
    int f = 0;
    while (f < j->n_in && j->in[f].start + j->in[f].size <= x)
        f++;
    if (f == j->n_in)
        return j->total_bytes;
    const Input *in = &j->in[f];
    int64_t local = x - in->start;
    if (local == 0)
        return x;
    size_t L;
    const char *sep = separator(j, in, &L);
    if (!sep)
        return in->start + in->size;
    /* scan from L - 1 bytes before x: an occurrence there would overlap
     * one at x */
    int64_t from = local - (int64_t)(L - 1) > 0 ? local - (int64_t)(L - 1) : 0;
    int64_t last_occ = INT64_MIN / 2;
    while (from < in->size) {
        size_t n = in->size - from < READ_BUF ? (size_t)(in->size - from) : READ_BUF;
        if (read_at(in, buf, n, from))
            input_changed(in);
        for (size_t k = 0; k + L <= n; k++) {
            if (memcmp(buf + k, sep, L) != 0)
                continue;
            int64_t q = from + (int64_t)k;
            if (q >= local && q - last_occ >= (int64_t)L)
                return in->start + q + (int64_t)L;
            last_occ = q;
        }
        if (from + (int64_t)n >= in->size)
            break;
        from += (int64_t)n - (int64_t)(L - 1); /* the next read sees occurrences across the cut */
        /* occurrences already seen stay in last_occ; re-seeing the overlap
         * bytes finds them again at the same q, which is harmless */
    }
    return in->start + in->size;
}

/* ---- output ---- */

static void emit(void *ctx, const int32_t *ids, size_t n)
{
    Job *j = ctx;
    int size = indexed_dtype_size(j->dtype);
    for (size_t i = 0; i < n; i++) {
        if (j->out_len + 4 > READ_BUF) {
            if (fwrite(j->out_buf, 1, j->out_len, j->tokens) != j->out_len)
                fail_abort("cannot write the temporary token file (is $TMPDIR full?)", __FILE__, __LINE__);
            j->out_len = 0;
        }
        if (size == 2) {
            uint16_t v = (uint16_t)ids[i];
            memcpy(j->out_buf + j->out_len, &v, 2);
        } else {
            memcpy(j->out_buf + j->out_len, &ids[i], 4);
        }
        j->out_len += (size_t)size;
    }
    j->doc_tokens += (int64_t)n;
}

static void doc_end(Job *j)
{
    if (bpe_doc_end(j->bpe, emit, j)) {
        snprintf(j->msg, sizeof j->msg, "trident: tokenize --tokenizer %s: its pre-tokenising pattern backtracks "
                 "beyond PCRE2's match limit on this input: the pattern is pathological\n", j->args->tokenizer);
        fail_input_abort(j->msg);
    }
    emit(j, &j->eod, 1);
    if (j->doc_tokens > INT32_MAX) {
        snprintf(j->msg, sizeof j->msg, "a document of more than 2^31 - 1 tokens, which the .idx format cannot index");
        fail_input_abort(j->msg);
    }
    int32_t len = (int32_t)j->doc_tokens;
    if (fwrite(&len, 4, 1, j->lengths) != 1)
        fail_abort("cannot write the temporary lengths file (is $TMPDIR full?)", __FILE__, __LINE__);
    j->n_tokens += j->doc_tokens;
    j->doc_tokens = 0;
    j->n_docs++;
}

static FILE *temp_file(void)
{
    const char *dir = getenv("TMPDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/trident-tokenize-XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(path);
    if (fd < 0)
        return NULL;
    unlink(path);
    return fdopen(fd, "w+b");
}

/* ---- progress ---- */

static void progress(Job *j, int final)
{
    double now = timer_now();
    if (j->rank != 0 || (!final && now - j->last_report < j->args->progress))
        return;
    j->last_report = now;
    double secs = now - j->started > 1e-9 ? now - j->started : 1e-9;
    double frac = j->range_bytes > 0 ? (double)j->done_bytes / (double)j->range_bytes : 1.0;
    double eta = frac > 0 ? secs / frac - secs : 0;
    printf("tokenize: rank 0 %.1f%% of its share: %lld docs (%.0f/s), %.1f MB (%.2f MB/s), %lld tokens; "
           "all %d ranks about %.2f MB/s; ETA %.0f s\n",
           100.0 * frac, (long long)j->n_docs, (double)j->n_docs / secs, (double)j->done_bytes / 1e6,
           (double)j->done_bytes / 1e6 / secs, (long long)(j->n_tokens + j->doc_tokens), j->size,
           (double)j->done_bytes / 1e6 / secs * j->size, eta);
    fflush(stdout);
}

/* ---- JSON Lines ---- */

/* 1 + the newlines before byte at of in: only for messages. */
static long line_number(const Input *in, int64_t at, char *buf)
{
    long line = 1;
    for (int64_t from = 0; from < at;) {
        size_t n = at - from < READ_BUF ? (size_t)(at - from) : READ_BUF;
        if (read_at(in, buf, n, from))
            return 0;
        for (size_t k = 0; k < n; k++)
            line += buf[k] == '\n';
        from += (int64_t)n;
    }
    return line;
}

static int bad_line(Job *j, const Input *in, int64_t at, const char *why, char *buf)
{
    long line = line_number(in, at, buf);
    if (!j->args->skip_bad) {
        snprintf(j->msg, sizeof j->msg, "trident: tokenize --input %s: line %ld: %s (--skip-bad skips such lines)\n",
                 in->path, line, why);
        return 1;
    }
    if (j->bad_lines < BAD_LINES_NAMED)
        fprintf(stderr, "trident: tokenize: skipping %s line %ld: %s\n", in->path, line, why);
    j->bad_lines++;
    return 0;
}

/* One line of JSON Lines, at byte at of in. */
static int json_line(Job *j, const Input *in, int64_t at, char *buf)
{
    size_t n = j->line_len;
    while (n && (j->line[n - 1] == '\r' || j->line[n - 1] == ' ' || j->line[n - 1] == '\t'))
        n--;
    size_t lead = 0;
    while (lead < n && (j->line[lead] == ' ' || j->line[lead] == '\t'))
        lead++;
    if (lead == n)
        return 0; /* a blank line is no document */
    json_error_t err;
    json_t *root = json_loadb(j->line + lead, n - lead, JSON_ALLOW_NUL, &err);
    char why[512];
    int rc = 0;
    if (!root) {
        snprintf(why, sizeof why, "not valid JSON at column %d: %s", err.column, err.text);
        return bad_line(j, in, at, why, buf);
    }
    json_t *v = json_object_get(root, j->args->key);
    if (!json_is_object(root)) {
        rc = bad_line(j, in, at, "not a JSON object", buf);
    } else if (!v) {
        snprintf(why, sizeof why, "no key \"%.200s\" (--jsonl-key names the text's key)", j->args->key);
        rc = bad_line(j, in, at, why, buf);
    } else if (!json_is_string(v)) {
        snprintf(why, sizeof why, "\"%.200s\" is not a string", j->args->key);
        rc = bad_line(j, in, at, why, buf);
    } else {
        bpe_doc_begin(j->bpe);
        bpe_doc_feed(j->bpe, json_string_value(v), json_string_length(v), emit, j);
        doc_end(j);
    }
    json_decref(root);
    return rc;
}

static void line_append(Job *j, const char *s, size_t n)
{
    if (j->line_len + n > j->line_cap) {
        j->line_cap = (j->line_len + n) * 2;
        j->line = TRI_REALLOC(j->line, j->line_cap, "a JSON line");
    }
    memcpy(j->line + j->line_len, s, n);
    j->line_len += n;
}

/* ---- the documents of one file's range ---- */

typedef struct {
    int open; /* a document has begun */
    int64_t bytes, start;
} Doc;

static void doc_bytes(Job *j, Doc *d, const char *s, size_t n, int jsonl)
{
    if (!n)
        return;
    if (jsonl) {
        line_append(j, s, n);
    } else {
        if (!d->open)
            bpe_doc_begin(j->bpe);
        bpe_doc_feed(j->bpe, s, n, emit, j);
    }
    d->open = 1;
    d->bytes += (int64_t)n;
}

static int doc_close(Job *j, Doc *d, const Input *in, int jsonl, char *scratch)
{
    int rc = 0;
    if (jsonl)
        rc = j->line_len ? json_line(j, in, d->start, scratch) : 0;
    else if (d->open)
        doc_end(j);
    j->line_len = 0;
    d->open = 0;
    d->bytes = 0;
    progress(j, 0);
    return rc;
}

/* Documents of in between local offsets from and to (both document
 * starts, or the file's end). */
static int tokenize_range(Job *j, const Input *in, int64_t from, int64_t to, char *buf, char *scratch)
{
    size_t L;
    const char *sep = separator(j, in, &L);
    Doc d = {0, 0, from};
    size_t have = 0; /* bytes of buf not yet consumed, read from pos - have */
    int64_t pos = from;
    while (pos < to || have) {
        size_t n = to - pos < (int64_t)(READ_BUF - have) ? (size_t)(to - pos) : READ_BUF - have;
        if (n && read_at(in, buf + have, n, pos))
            input_changed(in);
        pos += (int64_t)n;
        j->done_bytes += (int64_t)n;
        size_t len = have + n, p = 0;
        int64_t base = pos - (int64_t)len; /* file offset of buf[0] */
        int last = pos >= to;
        if (sep) {
            for (;;) {
                const char *q = memmem(buf + p, len - p, sep, L);
                if (!q)
                    break;
                doc_bytes(j, &d, buf + p, (size_t)(q - (buf + p)), in->jsonl);
                if (doc_close(j, &d, in, in->jsonl, scratch))
                    return 1;
                p = (size_t)(q - buf) + L;
                d.start = base + (int64_t)p;
            }
        }
        /* keep L - 1 bytes that may begin a separator, unless at the end */
        size_t keep = !sep || last ? 0 : (len - p < L - 1 ? len - p : L - 1);
        doc_bytes(j, &d, buf + p, len - p - keep, in->jsonl);
        memmove(buf, buf + len - keep, keep);
        have = keep;
        if (last)
            break;
    }
    return doc_close(j, &d, in, in->jsonl, scratch);
}

static int tokenize_share(Job *j, int64_t start, int64_t end)
{
    char *buf = TRI_MALLOC(READ_BUF, "the read buffers"), *scratch = TRI_MALLOC(READ_BUF, "the read buffers");
    int rc = 0;
    for (int f = 0; f < j->n_in && !rc; f++) {
        const Input *in = &j->in[f];
        int64_t lo = start > in->start ? start : in->start;
        int64_t hi = end < in->start + in->size ? end : in->start + in->size;
        if (lo < hi)
            rc = tokenize_range(j, in, lo - in->start, hi - in->start, buf, scratch);
    }
    free(buf);
    free(scratch);
    if (!rc && j->out_len && fwrite(j->out_buf, 1, j->out_len, j->tokens) != j->out_len)
        fail_abort("cannot write the temporary token file (is $TMPDIR full?)", __FILE__, __LINE__);
    j->out_len = 0;
    if (!rc && (fflush(j->tokens) || fflush(j->lengths)))
        fail_abort("cannot write the temporary files (is $TMPDIR full?)", __FILE__, __LINE__);
    return rc;
}

/* ---- the command ---- */

static int load(Job *j)
{
    char eod[256], err[1024];
    if (tokenizer_load(j->args->tokenizer, &j->bpe, eod, sizeof eod, err, sizeof err)) {
        snprintf(j->msg, sizeof j->msg, "trident: tokenize --tokenizer: %s\n", err);
        return 1;
    }
    const char *name = j->args->eod ? j->args->eod : eod;
    j->eod = name[0] ? bpe_special(j->bpe, name) : -1;
    if (j->eod < 0) {
        snprintf(j->msg, sizeof j->msg, name[0] ? "trident: tokenize --eod %s: not a special token of %s\n"
                                                : "trident: tokenize: %s has no end-of-document token trident knows; name one with --eod\n",
                 name[0] ? name : j->args->tokenizer, j->args->tokenizer);
        return 1;
    }
    j->dtype = indexed_dtype_for_vocab(bpe_vocab_size(j->bpe));
    return 0;
}

static int run(Job *j, const Grid *g)
{
    MPI_Comm world = comm_mpi(g, COMM_WORLD);
    if (fail_report(world, load(j), j->msg))
        return 1;
    if (fail_report(world, open_inputs(j), j->msg))
        return 1;
    char *buf = TRI_MALLOC(READ_BUF, "the read buffer");
    int64_t a = j->total_bytes * j->rank / j->size, b = j->total_bytes * (j->rank + 1) / j->size;
    int64_t start = j->rank == 0 ? 0 : anchor(j, a, buf);
    int64_t end = j->rank == j->size - 1 ? j->total_bytes : anchor(j, b, buf);
    free(buf);
    if (end < start)
        end = start;
    j->range_bytes = end - start;
    j->tokens = temp_file();
    j->lengths = temp_file();
    j->out_buf = malloc(READ_BUF);
    int rc = 0;
    if (!j->tokens || !j->lengths || !j->out_buf) {
        snprintf(j->msg, sizeof j->msg, "trident: tokenize: cannot create temporary files in %s: %s\n",
                 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", strerror(errno));
        rc = 1;
    }
    if (!rc)
        rc = tokenize_share(j, start, end);
    if (fail_report(world, rc, j->msg))
        return 1;
    int64_t sums[3] = {j->n_docs, j->n_tokens, j->bad_lines};
    comm_allreduce_scalars(g, COMM_WORLD, sums, 3, COMM_INT64, COMM_SUM);
    if (sums[0] == 0) {
        snprintf(j->msg, sizeof j->msg, "trident: tokenize: no documents in the input (%lld bytes in %d file%s%s): nothing to write\n",
                 (long long)j->total_bytes, j->n_in, j->n_in == 1 ? "" : "s",
                 sums[2] ? ", every line skipped as bad" : "");
        return fail_report(world, 1, j->msg);
    }
    IndexedPart part = {j->tokens, j->lengths, j->n_tokens, j->n_docs};
    TRI_TRY(indexed_write(g, j->args->output, j->dtype, &part, j->args->force));
    double secs = timer_now() - j->started;
    if (j->rank == 0) {
        printf("tokenize: wrote %s.bin and %s.idx: %lld document%s, %lld token%s (%s, vocabulary %d, end of document %d), "
               "%.1f MB of input in %.1f s (%.2f MB/s, %.0f tokens/s on %d rank%s)",
               j->args->output, j->args->output, (long long)sums[0], sums[0] == 1 ? "" : "s",
               (long long)sums[1], sums[1] == 1 ? "" : "s",
               j->dtype == INDEXED_UINT16 ? "uint16" : "int32", bpe_vocab_size(j->bpe), j->eod,
               (double)j->total_bytes / 1e6, secs, (double)j->total_bytes / 1e6 / secs, (double)sums[1] / secs,
               j->size, j->size == 1 ? "" : "s");
        if (sums[2])
            printf("; skipped %lld bad line%s", (long long)sums[2], sums[2] == 1 ? "" : "s");
        printf("\n");
        fflush(stdout);
    }
    return 0;
}

int tokenize_main(int argc, char **argv, MPI_Comm world)
{
    Grid g;
    grid_world_only(&g, world);
    Args args;
    int rc = parse_args(&args, argc, argv, g.layout.rank == 0);
    if (rc) {
        free(args.inputs);
        return rc;
    }
    Job j;
    memset(&j, 0, sizeof j);
    j.args = &args;
    j.rank = g.layout.rank;
    j.size = g.layout.size;
    j.n_in = args.n_inputs;
    j.in = TRI_CALLOC((size_t)j.n_in, sizeof *j.in, "the inputs");
    j.started = j.last_report = timer_now();
    for (int i = 0; i < j.n_in; i++)
        j.in[i].fd = -1;
    rc = run(&j, &g) ? TRI_EXIT_ERROR : TRI_EXIT_OK;
    for (int i = 0; i < j.n_in; i++)
        if (j.in[i].fd >= 0)
            close(j.in[i].fd);
    if (j.tokens)
        fclose(j.tokens);
    if (j.lengths)
        fclose(j.lengths);
    free(j.in);
    free(j.out_buf);
    free(j.line);
    bpe_free(j.bpe);
    free(args.inputs);
    return rc;
}
