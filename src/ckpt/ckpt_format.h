/*
 * ckpt_format.h - what a checkpoint file holds, for the code that writes
 * and loads it (ckpt.c) and the code that shows it (inspect.c): the table
 * of root attributes, the dataset checksum, and HDF5 attribute I/O that a
 * damaged file cannot make overrun. doc/checkpoint-format.md describes the
 * same format for people.
 *
 * HDF5 failures are input errors here (a full disk, a damaged file), not
 * fatal ones: each is recorded in the CkptFile, and the first one is what
 * the caller reports.
 */
#ifndef TRI_SRC_CKPT_FORMAT_H
#define TRI_SRC_CKPT_FORMAT_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "params.h"
#include "train_state.h"

/* Version 2 added attrs_checksum. Version 1 files still load: their root
 * attributes are range-checked but have no checksum to verify. */
#define CKPT_FORMAT_VERSION 2
#define CKPT_FORMAT_OLDEST 1
#define CKPT_CHECKSUM_ATTR "checksum"  /* every dataset's: see ckpt_checksum */
#define CKPT_MSG_MAX 1024

/* A checkpoint file being written or read, and this rank's first failure. */
typedef struct {
    hid_t id;
    const char *path;
    int rc;
    char msg[CKPT_MSG_MAX];  /* "trident: checkpoint PATH: what\n" */
} CkptFile;

/* Records a failure unless one is recorded already. Not collective. */
void ckpt_fail(CkptFile *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Opens path read-only with fapl after checking that it exists and is an
 * HDF5 file; returns the file, or -1 with the reason recorded in f.
 * Collective on the communicator of an MPI-IO fapl, else not collective. */
hid_t ckpt_open(CkptFile *f, const char *path, hid_t fapl);

/* ckpt_open on one rank, without MPI-IO. Not collective. */
hid_t ckpt_open_serial(CkptFile *f, const char *path);

/* ---- root attributes -------------------------------------------------- */

typedef enum { CKPT_I32, CKPT_I64, CKPT_U64, CKPT_F64, CKPT_STRING } CkptAttrType;

/* Where a root attribute's value comes from, and what loading does with it. */
typedef enum {
    CKPT_FROM_VERSION,  /* CKPT_FORMAT_VERSION: a reader refuses any other */
    CKPT_FROM_PROGRAM,  /* "trident VERSION" */
    CKPT_FROM_STATE,    /* a TrainState field: restored on load */
    CKPT_FROM_SHAPE,    /* a [model] key: must match the config on load */
    CKPT_FROM_SEED,     /* train.seed, for the record (the config holds it too) */
    CKPT_FROM_LAYOUT,   /* "world=8 dp=2 pp=2 tp=2 zero=1 schedule=1f1b" */
    CKPT_FROM_CONFIG,   /* the effective config as INI text: what `sample` runs */
    CKPT_FROM_CHECKSUM, /* ckpt_root_checksum of all the others (version >= 2) */
} CkptAttrSource;

typedef struct CkptRoot CkptRoot;

/* 0 when the attribute's value in r is one a save can write; else writes
 * why not ("must be ...") to why. */
typedef int (*CkptRangeCheck)(const CkptRoot *r, char *why, size_t n);

typedef struct {
    const char *name;
    CkptAttrType type;
    CkptAttrSource source;
    size_t offset;      /* of the value in CkptRoot */
    CkptRangeCheck check;
} CkptRootAttr;

/* Every root attribute once, in the order a save writes them. */
extern const CkptRootAttr ckpt_root_attrs[];
extern const int ckpt_n_root_attrs;

/* The first root attribute from source (the one, for all but STATE and
 * SHAPE). Not collective. */
const CkptRootAttr *ckpt_root_attr(CkptAttrSource source);

#define CKPT_MAX_ROOT_ATTRS 32

/* Every root attribute's value: what a save writes, what a load reads. */
struct CkptRoot {
    int32_t format_version;
    char *program_version;
    TrainState st;
    Config cfg;             /* the shape attributes and rng_seed, in their places */
    char *layout;
    char *config;           /* the stored config text */
    uint64_t attrs_checksum;
    /* filled by ckpt_root_read: */
    unsigned char present[CKPT_MAX_ROOT_ATTRS]; /* by table index */
    Config stored;          /* the stored config text, parsed */
    int stored_ok;
    char stored_why[256];   /* why the text does not parse */
};

/* The checksum of every root attribute but attrs_checksum, in table order:
 * FNV-1a (64 bit) over each one's name, a NUL, and its value as stored
 * (integers and reals little-endian in their stored width, a text as its
 * length in 8 little-endian bytes and its bytes). doc/checkpoint-format.md
 * spells it out. Not collective. */
uint64_t ckpt_root_checksum(const CkptRoot *r);

/* Writes every root attribute of r, in table order, with the current
 * format and program version and the checksum. Collective as
 * ckpt_attr_write. */
void ckpt_root_write(CkptFile *f, CkptRoot *r);

/* Reads every root attribute the file holds into r (zeroed first) and
 * parses the stored config text; free with ckpt_root_free. Not collective. */
void ckpt_root_read(hid_t file, CkptRoot *r);
void ckpt_root_free(CkptRoot *r);

/* 0 when table attribute i was read and lies in its range; else writes why
 * not ("missing", "must be ...") to why. Not collective. */
int ckpt_root_problem(const CkptRoot *r, int i, char *why, size_t n);

/* The value of table attribute i as text (a long text shortened); "?"
 * when missing. Not collective. */
void ckpt_root_format(const CkptRoot *r, int i, char *out, size_t n);

typedef enum {
    CKPT_SUM_VERIFIED,  /* attrs_checksum matches */
    CKPT_SUM_MISMATCH,  /* it does not: an attribute was changed */
    CKPT_SUM_MISSING,   /* a version >= 2 file without it */
    CKPT_SUM_NONE,      /* version 1: there is none to verify */
} CkptSumState;

CkptSumState ckpt_root_sum_state(const CkptRoot *r);

/* Records in f the first reason r cannot be trusted: no or an unknown
 * format version, a missing or out-of-range attribute (named), a checksum
 * that does not verify. Returns f->rc. Not collective. */
int ckpt_root_verify(CkptFile *f, const CkptRoot *r);

/* The HDF5 memory type of a numeric attribute type. Not collective. */
hid_t ckpt_attr_native(CkptAttrType type);

/* ---- attribute I/O ---------------------------------------------------- */

/* Writes a scalar attribute of memory type `type` (the file gets the same
 * type); a failure is recorded in f. Collective on the file's communicator
 * when it was opened through MPI-IO, else not collective. */
void ckpt_attr_write(CkptFile *f, hid_t obj, const char *name, hid_t type, const void *v);

/* Writes a fixed-length string attribute, as ckpt_attr_write. */
void ckpt_attr_write_string(CkptFile *f, hid_t obj, const char *name, const char *s);

/* Writes root attribute a with the value at v (a C string for CKPT_STRING),
 * as ckpt_attr_write. */
void ckpt_attr_write_root(CkptFile *f, const CkptRootAttr *a, const void *v);

/* Reads a one-element attribute into v as `type`; non-zero when it is
 * missing, not a single element, or unreadable. Not collective. */
int ckpt_attr_read(hid_t obj, const char *name, hid_t type, void *v);

/* Reads a fixed-length string attribute into a malloc'd buffer; NULL when
 * it is missing or not one such string. Not collective. */
char *ckpt_attr_read_string(hid_t obj, const char *name);

/* ---- datasets --------------------------------------------------------- */

/* Every tensor of the model cfg describes once, in its full logical shape
 * (the parameter table of a one-stage, one-TP-rank layout, ep = 1: every
 * routed expert by name): what a checkpoint holds, whatever layout wrote
 * it. Free with params_free.
 * Not collective. */
void ckpt_logical_tensors(const Config *cfg, ParamSet *out);

/* The path of part 0 (weights), 1 (Adam m) or 2 (Adam v) of tensor name:
 * "/model/NAME", "/optim/NAME/m", "/optim/NAME/v". Not collective. */
void ckpt_dataset_path(char *out, size_t size, const char *name, int part);

/* Opens dataset path and checks that it is fp32 with lp's logical shape.
 * why is "" when it is; else says what is wrong ("is missing", "has shape
 * 96 x 32, the model needs 32 x 32", ...). Returns the dataset when it
 * opened (close it), else -1. Collective as H5Dopen2 on file. */
hid_t ckpt_dataset_open(hid_t file, const char *path, const Param *lp, char *why, size_t n);

/* ---- checksums -------------------------------------------------------- */

/* The sum of element hashes of rows [r0, r0+nr) x cols [c0, c0+nc) of a
 * tensor with `cols` columns; data holds those elements row-major. The
 * hash takes each element's row-major index in the whole tensor, so the
 * parts any layout writes sum to the whole tensor's checksum. Not
 * collective. */
uint64_t ckpt_checksum(const float *data, int64_t r0, int64_t nr, int64_t c0, int64_t nc,
                       int64_t cols);

#endif
