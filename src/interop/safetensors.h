/*
 * safetensors.h - HuggingFace's safetensors files, read and written as the
 * specification (github.com/huggingface/safetensors, README "Format")
 * defines them: an 8-byte little-endian unsigned header length N, N bytes
 * of UTF-8 JSON mapping each tensor's name to its dtype, shape and
 * data_offsets [begin, end) (relative to the byte after the header;
 * optionally "__metadata__", a map of strings), then the data, row-major,
 * covering the data area exactly: no gaps, no overlaps.
 *
 * The file is untrusted: every field is checked before anything is
 * allocated from it or read, and data is read with pread, tensor block by
 * tensor block, so a model larger than memory is never mapped or read at
 * once. The JSON is jansson's to parse and write.
 *
 * A model directory (`st_model_open`) is either DIR/model.safetensors or
 * the shards DIR/model.safetensors.index.json's weight_map names.
 *
 * Nothing here is collective.
 */
#ifndef TRI_SRC_SAFETENSORS_H
#define TRI_SRC_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "ops.h"

#define ST_MAX_DIMS 8
#define ST_MAX_HEADER (100u << 20)  /* the reference implementation's limit */
#define ST_WHY_MAX 1024

typedef struct {
    char *name;
    char dtype[16];              /* as stored: "F32", "BF16", "I64", ... */
    int elem_size;               /* bytes per element of that dtype */
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    uint64_t begin, end;         /* data_offsets, from the data area's start */
} StTensor;

typedef struct {
    char *path;
    int fd;
    uint64_t data_start;         /* 8 + N */
    StTensor *t;
    int n;
    char *format;                /* __metadata__.format, or NULL */
} StFile;

/* Parses and validates a header (the N bytes after the length) for a file
 * whose data area holds data_bytes bytes; fills f->t, f->n, f->format.
 * Returns 0, or 1 with the reason in why (naming the tensor where one is
 * at fault). Frees nothing on failure: call st_close. */
int st_parse_header(StFile *f, const char *json, size_t len, uint64_t data_bytes, char *why,
                    size_t n);

/* Opens path and validates its header against the file's size. Returns 0,
 * or 1 with "PATH: reason" in why (the file is then closed). */
int st_open(StFile *f, const char *path, char *why, size_t n);
void st_close(StFile *f);
const StTensor *st_find(const StFile *f, const char *name);

/* Elements of t, and t seen as a matrix: rows = shape[0] (1 for a
 * scalar), cols = the product of the other dimensions. */
int64_t st_numel(const StTensor *t);
void st_matrix(const StTensor *t, int64_t *rows, int64_t *cols);

/* Reads rows [r0, r0+nr) x cols [c0, c0+nc) of t (as st_matrix sees it),
 * converted to fp32, into out (nr x nc, row-major). t must be F32, F16 or
 * BF16. Returns 0, or 1 with "PATH: tensor NAME: reason" in why. */
int st_read_f32(const StFile *f, const StTensor *t, int64_t r0, int64_t nr, int64_t c0,
                int64_t nc, float *out, char *why, size_t n);

/* ---- writing ---------------------------------------------------------- */

typedef struct {
    const char *name;            /* the writer copies nothing: keep alive */
    ops_dtype dtype;             /* OPS_F32, OPS_BF16 or OPS_F16 */
    int ndim;                    /* 1 or 2 */
    int64_t shape[2];
} StEntry;

typedef struct {
    char *path;
    int fd;
    const StEntry *e;
    int n, next;
    uint64_t data_bytes;
} StWriter;

/* Bytes a file holding e[0..n) takes: its data only (the header aside). */
uint64_t st_data_bytes(const StEntry *e, int n);

/* Creates path (which must not exist: O_EXCL) and writes the header of
 * e[0..n), in that order, with {"__metadata__": {"format": "pt"}}.
 * Returns 0, or 1 with "PATH: reason" in why. */
int st_write_begin(StWriter *w, const char *path, const StEntry *e, int n, char *why,
                   size_t why_n);

/* Writes tensor w->next's data, given as fp32 row-major and rounded to its
 * dtype (to nearest even). Call once per entry, in order. */
int st_write_tensor(StWriter *w, const float *data, char *why, size_t n);

/* Checks every tensor was written, fsyncs and closes. On failure (here or
 * earlier) the file is removed. */
int st_write_end(StWriter *w, char *why, size_t n);
void st_write_abort(StWriter *w);

/* ---- model directories ------------------------------------------------ */

typedef struct {
    char *dir;
    StFile *files;
    int n_files;
    char *index_path;            /* NULL: one model.safetensors */
} StModel;

/* Opens DIR/model.safetensors.index.json's shards, or else
 * DIR/model.safetensors, validating each; with an index, every tensor its
 * weight_map names must be in the shard it names, and every shard's tensor
 * in the map. Returns 0, or 1 with the file and reason in why. */
int st_model_open(StModel *m, const char *dir, char *why, size_t n);
void st_model_close(StModel *m);

/* The tensor called name in any of the model's files, and its file. */
const StTensor *st_model_find(const StModel *m, const char *name, const StFile **file);

#endif
