/*
 * safetensors.c - safetensors files; see safetensors.h.
 *
 * Validation follows the specification and the reference reader: the
 * header length fits the file and ST_MAX_HEADER, the header is one JSON
 * object without duplicate keys, every entry has a known dtype, a shape of
 * non-negative integers whose byte size is end - begin, and the entries'
 * [begin, end) ranges tile the data area exactly (sorted by begin, each
 * starting where the previous ended, the last ending at the file's end).
 * Anything else is refused before any data is read.
 */
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file_check.h"
#include "reason.h"

#define ST_INDEX_NAME "model.safetensors.index.json"
#define ST_SINGLE_NAME "model.safetensors"

/* The specification's dtypes and their sizes. */
static int dtype_size(const char *d)
{
    static const struct { const char *name; int size; } known[] = {
        {"BOOL", 1}, {"U8", 1}, {"I8", 1}, {"F8_E5M2", 1}, {"F8_E4M3", 1},
        {"I16", 2}, {"U16", 2}, {"F16", 2}, {"BF16", 2},
        {"I32", 4}, {"U32", 4}, {"F32", 4},
        {"I64", 8}, {"U64", 8}, {"F64", 8},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (!strcmp(d, known[i].name))
            return known[i].size;
    return 0;
}

int64_t st_numel(const StTensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    return n;
}

void st_matrix(const StTensor *t, int64_t *rows, int64_t *cols)
{
    *rows = t->ndim ? t->shape[0] : 1;
    *cols = 1;
    for (int i = 1; i < t->ndim; i++)
        *cols *= t->shape[i];
}

/* Fills t from one header entry; 0, or 1 with the reason in why. */
static int parse_entry(StTensor *t, const char *name, json_t *v, uint64_t data_bytes,
                       char *why, size_t n)
{
    if (!json_is_object(v))
        return reason_set(why, n, "tensor %s: its entry is not a JSON object", name);
    json_t *dtype = json_object_get(v, "dtype"), *shape = json_object_get(v, "shape");
    json_t *offs = json_object_get(v, "data_offsets");
    if (!json_is_string(dtype) || !json_is_array(shape) || !json_is_array(offs))
        return reason_set(why, n, "tensor %s: needs a string dtype, an array shape and an array "
                          "data_offsets", name);
    if (json_object_size(v) != 3)
        return reason_set(why, n, "tensor %s: has keys other than dtype, shape and data_offsets", name);
    const char *d = json_string_value(dtype);
    t->elem_size = dtype_size(d);
    if (!t->elem_size)
        return reason_set(why, n, "tensor %s: unknown dtype \"%.20s\"", name, d);
    snprintf(t->dtype, sizeof t->dtype, "%s", d);
    if (json_array_size(shape) > ST_MAX_DIMS)
        return reason_set(why, n, "tensor %s: %zu dimensions, at most %d are read", name,
                          json_array_size(shape), ST_MAX_DIMS);
    t->ndim = (int)json_array_size(shape);
    uint64_t bytes = (uint64_t)t->elem_size;
    int overflow = 0;
    for (int i = 0; i < t->ndim; i++) {
        json_t *s = json_array_get(shape, (size_t)i);
        if (!json_is_integer(s) || json_integer_value(s) < 0)
            return reason_set(why, n, "tensor %s: shape[%d] is not a non-negative integer", name, i);
        t->shape[i] = json_integer_value(s);
        overflow |= __builtin_mul_overflow(bytes, (uint64_t)t->shape[i], &bytes);
    }
    json_t *b = json_array_get(offs, 0), *e = json_array_get(offs, 1);
    if (json_array_size(offs) != 2 || !json_is_integer(b) || !json_is_integer(e)
        || json_integer_value(b) < 0 || json_integer_value(e) < json_integer_value(b))
        return reason_set(why, n, "tensor %s: data_offsets must be two integers 0 <= begin <= end",
                          name);
    t->begin = (uint64_t)json_integer_value(b);
    t->end = (uint64_t)json_integer_value(e);
    if (t->end > data_bytes)
        return reason_set(why, n, "tensor %s: data_offsets [%llu, %llu] run past the data area "
                          "(%llu bytes)", name, (unsigned long long)t->begin,
                          (unsigned long long)t->end, (unsigned long long)data_bytes);
    if (overflow)
        return reason_set(why, n, "tensor %s: its shape holds more than 2^64 bytes", name);
    if (bytes != t->end - t->begin)
        return reason_set(why, n, "tensor %s: its shape and dtype %s need %llu bytes, its "
                          "data_offsets give %llu", name, t->dtype, (unsigned long long)bytes,
                          (unsigned long long)(t->end - t->begin));
    return 0;
}

static int by_begin(const void *a, const void *b)
{
    const StTensor *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* The entries, sorted by begin, must tile [0, data_bytes). */
static int check_tiling(StFile *f, uint64_t data_bytes, char *why, size_t n)
{
    qsort(f->t, (size_t)f->n, sizeof *f->t, by_begin);
    uint64_t at = 0;
    for (int i = 0; i < f->n; i++) {
        StTensor *t = &f->t[i];
        if (t->begin < at)
            return reason_set(why, n, "tensor %s: data_offsets [%llu, %llu] overlap tensor %s's",
                              t->name, (unsigned long long)t->begin, (unsigned long long)t->end,
                              f->t[i - 1].name);
        if (t->begin > at)
            return reason_set(why, n, "tensor %s: data_offsets begin at %llu, leaving a gap after "
                              "byte %llu", t->name, (unsigned long long)t->begin,
                              (unsigned long long)at);
        at = t->end;
    }
    if (at != data_bytes)
        return reason_set(why, n, "the tensors' data ends at byte %llu of a %llu-byte data area",
                          (unsigned long long)at, (unsigned long long)data_bytes);
    return 0;
}

static int parse_metadata(StFile *f, json_t *v, char *why, size_t n)
{
    if (!json_is_object(v))
        return reason_set(why, n, "__metadata__ is not a JSON object");
    const char *key;
    json_t *s;
    json_object_foreach(v, key, s) {
        if (!json_is_string(s))
            return reason_set(why, n, "__metadata__ value \"%.64s\" is not a string", key);
    }
    json_t *format = json_object_get(v, "format");
    if (format && !(f->format = strdup(json_string_value(format))))
        return reason_set(why, n, "out of memory");
    return 0;
}

int st_parse_header(StFile *f, const char *json, size_t len, uint64_t data_bytes, char *why,
                    size_t n)
{
    json_error_t err;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES | JSON_DISABLE_EOF_CHECK, &err);
    if (!root)
        return reason_set(why, n, "header is not JSON: %s (at byte %d)", err.text, err.position);
    int rc = 0;
    /* the header may be padded with spaces after the object */
    for (size_t i = (size_t)err.position; i < len && !rc; i++)
        if (json[i] != ' ')
            rc = reason_set(why, n, "header has bytes other than space padding after its JSON "
                            "object (at byte %zu)", i);
    if (!rc && !json_is_object(root))
        rc = reason_set(why, n, "header is not a JSON object");
    size_t cap = rc ? 0 : json_object_size(root);
    f->t = calloc(cap ? cap : 1, sizeof *f->t);
    if (!rc && !f->t)
        rc = reason_set(why, n, "out of memory");
    const char *key;
    json_t *v;
    if (!rc)
        json_object_foreach(root, key, v) {
            if (!strcmp(key, "__metadata__")) {
                rc = parse_metadata(f, v, why, n);
            } else {
                StTensor *t = &f->t[f->n];
                if (!(t->name = strdup(key)))
                    rc = reason_set(why, n, "out of memory");
                else
                    f->n++;
                rc = rc ? rc : parse_entry(t, key, v, data_bytes, why, n);
            }
            if (rc)
                break;
        }
    json_decref(root);
    return rc ? rc : check_tiling(f, data_bytes, why, n);
}

static int read_exact(int fd, void *buf, size_t len, uint64_t off)
{
    char *p = buf;
    while (len) {
        ssize_t got = pread(fd, p, len, (off_t)off);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return got < 0 ? -1 : (errno = 0, -1);
        p += got;
        len -= (size_t)got;
        off += (uint64_t)got;
    }
    return 0;
}

static int open_file(StFile *f, const char *path, char *why, size_t n)
{
    memset(f, 0, sizeof *f);
    f->fd = -1;
    if (!(f->path = strdup(path)))
        return reason_set(why, n, "out of memory");
    char reason[256];
    f->fd = file_open_regular(path, O_RDONLY, reason, sizeof reason);
    if (f->fd < 0)
        return reason_set(why, n, "%s", reason);
    struct stat sb;
    if (fstat(f->fd, &sb))
        return reason_set(why, n, "%s", strerror(errno));
    uint64_t size = (uint64_t)sb.st_size;
    unsigned char len8[8];
    if (size < 8 || read_exact(f->fd, len8, 8, 0))
        return reason_set(why, n, "%llu bytes, shorter than the 8-byte header length",
                          (unsigned long long)size);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | len8[i];
    if (hlen > size - 8)
        return reason_set(why, n, "header length %llu is longer than the %llu bytes after it",
                          (unsigned long long)hlen, (unsigned long long)(size - 8));
    if (hlen > ST_MAX_HEADER)
        return reason_set(why, n, "header length %llu is over the %u-byte limit",
                          (unsigned long long)hlen, ST_MAX_HEADER);
    char *json = malloc(hlen ? hlen : 1);
    if (!json)
        return reason_set(why, n, "out of memory");
    int rc = read_exact(f->fd, json, hlen, 8) ? reason_set(why, n, "cannot read the header: %s",
                                                  errno ? strerror(errno) : "short file")
                                           : st_parse_header(f, json, hlen, size - 8 - hlen,
                                                             why, n);
    free(json);
    f->data_start = 8 + hlen;
    return rc;
}

int st_open(StFile *f, const char *path, char *why, size_t n)
{
    char reason[ST_WHY_MAX];
    if (!open_file(f, path, reason, sizeof reason))
        return 0;
    st_close(f);
    return reason_set(why, n, "%s: %s", path, reason);
}

void st_close(StFile *f)
{
    if (f->fd >= 0)
        close(f->fd);
    for (int i = 0; i < f->n; i++)
        free(f->t[i].name);
    free(f->t);
    free(f->format);
    free(f->path);
    memset(f, 0, sizeof *f);
    f->fd = -1;
}

const StTensor *st_find(const StFile *f, const char *name)
{
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->t[i].name, name))
            return &f->t[i];
    return NULL;
}

static int float_dtype(const char *d, ops_dtype *out)
{
    if (!strcmp(d, "F32"))
        *out = OPS_F32;
    else if (!strcmp(d, "BF16"))
        *out = OPS_BF16;
    else if (!strcmp(d, "F16"))
        *out = OPS_F16;
    else
        return -1;
    return 0;
}

int st_read_f32(const StFile *f, const StTensor *t, int64_t r0, int64_t nr, int64_t c0,
                int64_t nc, float *out, char *why, size_t n)
{
    ops_dtype dt;
    int64_t rows, cols;
    st_matrix(t, &rows, &cols);
    if (float_dtype(t->dtype, &dt))
        return reason_set(why, n, "%s: tensor %s: dtype %s, trident reads F32, F16 or BF16",
                          f->path, t->name, t->dtype);
    if (r0 < 0 || nr < 0 || c0 < 0 || nc < 0 || r0 + nr > rows || c0 + nc > cols)
        return reason_set(why, n, "%s: tensor %s: block outside its %lld x %lld elements", f->path,
                          t->name, (long long)rows, (long long)cols);
    size_t es = (size_t)t->elem_size;
    char *raw = dt == OPS_F32 ? NULL : malloc((size_t)(nc ? nc : 1) * es);
    if (dt != OPS_F32 && !raw)
        return reason_set(why, n, "%s: tensor %s: out of memory", f->path, t->name);
    int rc = 0;
    for (int64_t r = 0; r < nr && !rc; r++) {
        float *row = out + r * nc;
        uint64_t off = f->data_start + t->begin + ((uint64_t)(r0 + r) * (uint64_t)cols
                                                   + (uint64_t)c0) * es;
        if (read_exact(f->fd, raw ? (void *)raw : (void *)row, (size_t)nc * es, off))
            rc = reason_set(why, n, "%s: tensor %s: read failed: %s", f->path, t->name,
                            errno ? strerror(errno) : "short file");
        else if (raw) {
            ops_tensor src = {raw, nc, dt, OPS_CPU}, dst = {row, nc, OPS_F32, OPS_CPU};
            ops_cast(dst, src);
        }
    }
    free(raw);
    return rc;
}

/* ---- writing ---------------------------------------------------------- */

static const char *st_dtype_name(ops_dtype d)
{
    return d == OPS_BF16 ? "BF16" : d == OPS_F16 ? "F16" : "F32";
}

uint64_t st_data_bytes(const StEntry *e, int n)
{
    uint64_t bytes = 0;
    for (int i = 0; i < n; i++)
        bytes += (uint64_t)(e[i].shape[0] * (e[i].ndim == 2 ? e[i].shape[1] : 1))
                 * ops_dtype_size(e[i].dtype);
    return bytes;
}

static int write_exact(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len) {
        ssize_t put = write(fd, p, len);
        if (put < 0 && errno == EINTR)
            continue;
        if (put <= 0)
            return -1;
        p += put;
        len -= (size_t)put;
    }
    return 0;
}

/* The header's JSON: metadata first, then the entries in order. */
static char *header_json(const StEntry *e, int n)
{
    json_t *root = json_object(), *meta = json_object();
    json_object_set_new(meta, "format", json_string("pt"));
    json_object_set_new(root, "__metadata__", meta);
    uint64_t at = 0;
    for (int i = 0; i < n; i++) {
        json_t *shape = json_array();
        for (int d = 0; d < e[i].ndim; d++)
            json_array_append_new(shape, json_integer(e[i].shape[d]));
        uint64_t bytes = st_data_bytes(&e[i], 1);
        json_t *t = json_pack("{s:s, s:o, s:[I, I]}", "dtype", st_dtype_name(e[i].dtype),
                              "shape", shape, "data_offsets", (json_int_t)at,
                              (json_int_t)(at + bytes));
        json_object_set_new(root, e[i].name, t);
        at += bytes;
    }
    char *text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return text;
}

int st_write_begin(StWriter *w, const char *path, const StEntry *e, int n, char *why,
                   size_t why_n)
{
    memset(w, 0, sizeof *w);
    w->fd = -1;
    w->e = e;
    w->n = n;
    w->data_bytes = st_data_bytes(e, n);
    if (!(w->path = strdup(path)))
        return reason_set(why, why_n, "%s: out of memory", path);
    char *json = header_json(e, n);
    if (!json)
        return reason_set(why, why_n, "%s: cannot build the header", path);
    size_t len = strlen(json), padded = (len + 7) & ~(size_t)7;
    char *head = malloc(8 + padded);
    int rc = 0;
    if (!head) {
        rc = reason_set(why, why_n, "%s: out of memory", path);
    } else {
        for (int i = 0; i < 8; i++)
            head[i] = (char)((uint64_t)padded >> (8 * i) & 0xff);
        memcpy(head + 8, json, len);
        memset(head + 8 + len, ' ', padded - len);
        w->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (w->fd < 0 || write_exact(w->fd, head, 8 + padded))
            rc = reason_set(why, why_n, "%s: %s", path, strerror(errno));
    }
    free(head);
    free(json);
    if (rc)
        st_write_abort(w);
    return rc;
}

int st_write_tensor(StWriter *w, const float *data, char *why, size_t n)
{
    if (w->next >= w->n)
        return reason_set(why, n, "%s: more tensors than its header holds", w->path);
    const StEntry *e = &w->e[w->next++];
    int64_t numel = e->shape[0] * (e->ndim == 2 ? e->shape[1] : 1);
    if (e->dtype == OPS_F32) {
        if (write_exact(w->fd, data, (size_t)numel * sizeof(float)))
            return reason_set(why, n, "%s: tensor %s: %s", w->path, e->name, strerror(errno));
        return 0;
    }
    /* converted a chunk at a time: a big tensor needs no second copy */
    enum { CHUNK = 1 << 20 };
    uint16_t *buf = malloc(CHUNK * sizeof *buf);
    if (!buf)
        return reason_set(why, n, "%s: out of memory", w->path);
    int rc = 0;
    for (int64_t at = 0; at < numel && !rc; at += CHUNK) {
        int64_t k = numel - at < CHUNK ? numel - at : CHUNK;
        ops_tensor src = {(void *)(data + at), k, OPS_F32, OPS_CPU};
        ops_tensor dst = {buf, k, e->dtype, OPS_CPU};
        ops_cast(dst, src);
        if (write_exact(w->fd, buf, (size_t)k * sizeof *buf))
            rc = reason_set(why, n, "%s: tensor %s: %s", w->path, e->name, strerror(errno));
    }
    free(buf);
    return rc;
}

int st_write_end(StWriter *w, char *why, size_t n)
{
    int rc = 0;
    if (w->next != w->n)
        rc = reason_set(why, n, "%s: %d of %d tensors written", w->path, w->next, w->n);
    else if (fsync(w->fd) || close(w->fd))
        rc = reason_set(why, n, "%s: %s", w->path, strerror(errno));
    else
        w->fd = -1;
    if (rc)
        st_write_abort(w);
    free(w->path);
    w->path = NULL;
    return rc;
}

void st_write_abort(StWriter *w)
{
    if (w->fd >= 0)
        close(w->fd);
    if (w->path)
        unlink(w->path);
    w->fd = -1;
}

/* ---- model directories ------------------------------------------------ */

static char *join(const char *dir, const char *name)
{
    size_t len = strlen(dir) + strlen(name) + 2;
    char *p = malloc(len);
    if (p)
        snprintf(p, len, "%s/%s", dir, name);
    return p;
}

/* A shard name from an index must be a file beside it, not a path. */
static int plain_name(const char *s)
{
    return s[0] && s[0] != '.' && !strchr(s, '/') && strlen(s) < 256;
}

static int open_shard(StModel *m, const char *name, char *why, size_t n)
{
    for (int i = 0; i < m->n_files; i++)
        if (!strcmp(strrchr(m->files[i].path, '/') + 1, name))
            return 0;
    StFile *f = realloc(m->files, (size_t)(m->n_files + 1) * sizeof *f);
    char *path = join(m->dir, name);
    if (f)
        m->files = f;
    if (!f || !path) {
        free(path);
        return reason_set(why, n, "%s: out of memory", m->dir);
    }
    int rc = st_open(&m->files[m->n_files], path, why, n);
    free(path);
    if (!rc)
        m->n_files++;
    return rc;
}

/* Checks that index names each shard's tensors where they are. */
static int check_weight_map(const StModel *m, json_t *map, char *why, size_t n)
{
    const char *key;
    json_t *v;
    json_object_foreach(map, key, v) {
        const StFile *f = NULL;
        const StTensor *t = st_model_find(m, key, &f);
        if (!t)
            return reason_set(why, n, "%s: weight_map names tensor %s in %s, which does not hold it",
                              m->index_path, key, json_string_value(v));
        if (strcmp(strrchr(f->path, '/') + 1, json_string_value(v)))
            return reason_set(why, n, "%s: weight_map names tensor %s in %s, but it is in %s",
                              m->index_path, key, json_string_value(v), f->path);
    }
    for (int i = 0; i < m->n_files; i++)
        for (int j = 0; j < m->files[i].n; j++)
            if (!json_object_get(map, m->files[i].t[j].name))
                return reason_set(why, n, "%s: tensor %s of %s is not in its weight_map",
                                  m->index_path, m->files[i].t[j].name, m->files[i].path);
    return 0;
}

static int open_index(StModel *m, char *why, size_t n)
{
    json_error_t err;
    json_t *root = json_load_file(m->index_path, JSON_REJECT_DUPLICATES, &err);
    if (!root)
        return reason_set(why, n, "%s: not JSON: %s (line %d)", m->index_path, err.text, err.line);
    json_t *map = json_object_get(root, "weight_map");
    int rc = json_is_object(map) && json_object_size(map) ? 0
             : reason_set(why, n, "%s: no weight_map object naming the tensors", m->index_path);
    const char *key;
    json_t *v;
    if (!rc)
        json_object_foreach(map, key, v) {
            if (!json_is_string(v) || !plain_name(json_string_value(v)))
                rc = reason_set(why, n, "%s: weight_map entry %s: not the name of a file beside "
                                "the index", m->index_path, key);
            rc = rc ? rc : open_shard(m, json_string_value(v), why, n);
            if (rc)
                break;
        }
    rc = rc ? rc : check_weight_map(m, map, why, n);
    json_decref(root);
    return rc;
}

int st_model_open(StModel *m, const char *dir, char *why, size_t n)
{
    memset(m, 0, sizeof *m);
    struct stat sb;
    if (stat(dir, &sb))
        return reason_set(why, n, "%s: %s", dir, strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return reason_set(why, n, "%s: not a directory", dir);
    if (!(m->dir = strdup(dir)) || !(m->index_path = join(dir, ST_INDEX_NAME))) {
        st_model_close(m);
        return reason_set(why, n, "%s: out of memory", dir);
    }
    int rc;
    if (!access(m->index_path, F_OK)) {
        rc = open_index(m, why, n);
    } else {
        free(m->index_path);
        m->index_path = NULL;
        rc = open_shard(m, ST_SINGLE_NAME, why, n);
    }
    if (rc)
        st_model_close(m);
    return rc;
}

void st_model_close(StModel *m)
{
    for (int i = 0; i < m->n_files; i++)
        st_close(&m->files[i]);
    free(m->files);
    free(m->dir);
    free(m->index_path);
    memset(m, 0, sizeof *m);
}

const StTensor *st_model_find(const StModel *m, const char *name, const StFile **file)
{
    for (int i = 0; i < m->n_files; i++) {
        const StTensor *t = st_find(&m->files[i], name);
        if (t) {
            if (file)
                *file = &m->files[i];
            return t;
        }
    }
    return NULL;
}
