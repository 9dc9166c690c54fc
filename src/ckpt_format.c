/*
 * ckpt_format.c - the checkpoint format shared by ckpt.c and inspect.c:
 * the root attribute table, attribute I/O, the checksum; see
 * ckpt_format.h.
 */
#include "ckpt_format.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt.h"
#include "config.h"
#include "file_check.h"
#include "rng.h"

/* HDF5 1.12 renamed a few calls; keep building against 1.10 (Debian 12)
 * and newer releases (cluster modules). */
#if H5_VERSION_GE(1, 12, 0)
#define tri_h5_is_hdf5(path, fapl) H5Fis_accessible(path, fapl)
#else
#define tri_h5_is_hdf5(path, fapl) ((void)(fapl), H5Fis_hdf5(path))
#endif

/* SHAPE and SEED values are read in place from Config's fields. */
_Static_assert(sizeof(int) == sizeof(int32_t), "the model's shape is stored as int32");
_Static_assert(sizeof(unsigned long long) == sizeof(uint64_t), "the seed is stored as uint64");

#define STATE(name, type, field) { name, type, CKPT_FROM_STATE, offsetof(TrainState, field) }
#define SHAPE(key) { #key, CKPT_I32, CKPT_FROM_SHAPE, offsetof(Config, model.key) }

const CkptRootAttr ckpt_root_attrs[] = {
    { "format_version", CKPT_I32, CKPT_FROM_VERSION, 0 },
    { "program_version", CKPT_STRING, CKPT_FROM_PROGRAM, 0 },
    STATE("step", CKPT_I64, step),
    STATE("tokens_seen", CKPT_I64, tokens),
    STATE("data_cursor", CKPT_I64, cursor),
    STATE("optimizer_updates", CKPT_I64, updates),
    STATE("loss_scale", CKPT_F64, loss_scale),
    STATE("loss_scale_good_steps", CKPT_I64, scale_good_steps),
    STATE("loss_scale_overflows", CKPT_I32, scale_overflows),
    STATE("best_val_loss", CKPT_F64, best_val),
    STATE("evals_without_improvement", CKPT_I32, evals_bad),
    { "rng_seed", CKPT_U64, CKPT_FROM_SEED, offsetof(Config, train.seed) },
    SHAPE(n_layer),
    SHAPE(n_embd),
    SHAPE(n_head),
    SHAPE(seq_len),
    SHAPE(vocab_size),
    SHAPE(tie_embeddings),
    { "layout", CKPT_STRING, CKPT_FROM_LAYOUT, 0 },
    { "config", CKPT_STRING, CKPT_FROM_CONFIG, 0 },
};
const int ckpt_n_root_attrs = (int)(sizeof ckpt_root_attrs / sizeof ckpt_root_attrs[0]);

const CkptRootAttr *ckpt_root_attr(CkptAttrSource source)
{
    for (int i = 0; i < ckpt_n_root_attrs; i++)
        if (ckpt_root_attrs[i].source == source)
            return &ckpt_root_attrs[i];
    return NULL;
}

hid_t ckpt_attr_native(CkptAttrType type)
{
    switch (type) {
    case CKPT_I32:
        return H5T_NATIVE_INT32;
    case CKPT_I64:
        return H5T_NATIVE_INT64;
    case CKPT_U64:
        return H5T_NATIVE_UINT64;
    case CKPT_F64:
        return H5T_NATIVE_DOUBLE;
    case CKPT_STRING:
        break;
    }
    return -1;
}

void ckpt_fail(CkptFile *f, const char *fmt, ...)
{
    if (f->rc)
        return;
    f->rc = 1;
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(f->msg, sizeof f->msg, "trident: checkpoint %s: ", f->path);
    vsnprintf(f->msg + n, sizeof f->msg - (size_t)n, fmt, ap);
    va_end(ap);
    strncat(f->msg, "\n", sizeof f->msg - strlen(f->msg) - 1);
}

hid_t ckpt_open(CkptFile *f, const char *path, hid_t fapl)
{
    struct stat sb;
    if (stat(path, &sb) != 0) {
        ckpt_fail(f, "%s", strerror(errno));
        return -1;
    }
    /* HDF5's open() would block on a FIFO; a directory gets its own answer */
    if (!S_ISREG(sb.st_mode) && !S_ISDIR(sb.st_mode)) {
        ckpt_fail(f, "%s, not a regular file", file_kind(sb.st_mode));
        return -1;
    }
    if (tri_h5_is_hdf5(path, fapl) <= 0) {
        ckpt_fail(f, "not an HDF5 file, or truncated");
        return -1;
    }
    hid_t id = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    if (id < 0)
        ckpt_fail(f, "cannot open (truncated or corrupt HDF5 file?)");
    return id;
}

hid_t ckpt_open_serial(CkptFile *f, const char *path)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    hid_t id = ckpt_open(f, path, fapl);
    H5Pclose(fapl);
    return id;
}

void ckpt_attr_write(CkptFile *f, hid_t obj, const char *name, hid_t type, const void *v)
{
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    if (a < 0 || H5Awrite(a, type, v) < 0)
        ckpt_fail(f, "cannot write attribute %s", name);
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(space);
}

void ckpt_attr_write_string(CkptFile *f, hid_t obj, const char *name, const char *s)
{
    hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, strlen(s) + 1);
    ckpt_attr_write(f, obj, name, type, s);
    H5Tclose(type);
}

void ckpt_attr_write_root(CkptFile *f, const CkptRootAttr *a, const void *v)
{
    if (a->type == CKPT_STRING)
        ckpt_attr_write_string(f, f->id, a->name, v);
    else
        ckpt_attr_write(f, f->id, a->name, ckpt_attr_native(a->type), v);
}

/* A damaged or foreign file may hold an array under the same name:
 * H5Aread would then write past v. */
int ckpt_attr_read(hid_t obj, const char *name, hid_t type, void *v)
{
    if (H5Aexists(obj, name) <= 0)
        return 1;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    if (a < 0)
        return 1;
    hid_t space = H5Aget_space(a);
    int rc = space < 0 || H5Sget_simple_extent_npoints(space) != 1 || H5Aread(a, type, v) < 0;
    if (space >= 0)
        H5Sclose(space);
    H5Aclose(a);
    return rc;
}

char *ckpt_attr_read_string(hid_t obj, const char *name)
{
    if (H5Aexists(obj, name) <= 0)
        return NULL;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    if (a < 0)
        return NULL;
    /* one fixed-length string, or the read would overrun the buffer */
    hid_t ftype = H5Aget_type(a), space = H5Aget_space(a);
    char *s = NULL;
    if (ftype >= 0 && space >= 0 && H5Tget_class(ftype) == H5T_STRING
        && H5Tis_variable_str(ftype) == 0 && H5Sget_simple_extent_npoints(space) == 1) {
        size_t size = H5Tget_size(ftype);
        s = calloc(size + 1, 1);
        hid_t mtype = H5Tcopy(H5T_C_S1);
        H5Tset_size(mtype, size + 1);
        if (!s || H5Aread(a, mtype, s) < 0) {
            free(s);
            s = NULL;
        }
        H5Tclose(mtype);
    }
    if (space >= 0)
        H5Sclose(space);
    if (ftype >= 0)
        H5Tclose(ftype);
    H5Aclose(a);
    return s;
}

static uint64_t element_hash(uint64_t index, float v)
{
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    return rng_mix64(((uint64_t)bits << 32) ^ (index * 0x9e3779b97f4a7c15ULL));
}

uint64_t ckpt_checksum(const float *data, int64_t r0, int64_t nr, int64_t c0, int64_t nc,
                       int64_t cols)
{
    uint64_t sum = 0;
    #pragma omp parallel for reduction(+ : sum) schedule(static)
    for (int64_t r = 0; r < nr; r++)
        for (int64_t c = 0; c < nc; c++)
            sum += element_hash((uint64_t)((r0 + r) * cols + c0 + c), data[r * nc + c]);
    return sum;
}
