/*
 * inspect.c - `trident inspect`; see inspect.h.
 *
 * The file is untrusted: a damaged header may claim any shape or type, so
 * every dataset is checked against the file's size before it is read, and
 * a bad one is reported and skipped rather than trusted.
 */
#include "inspect.h"

#include <hdf5.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt_format.h"

/* HDF5 1.12 renamed H5Ovisit; keep building against 1.10 (Debian 12) and
 * newer releases (cluster modules). */
#if H5_VERSION_GE(1, 12, 0)
typedef H5O_info2_t tri_h5_info_t;
#define tri_h5_visit(obj, fn, data) H5Ovisit3(obj, H5_INDEX_NAME, H5_ITER_INC, fn, data, H5O_INFO_BASIC)
#else
typedef H5O_info_t tri_h5_info_t;
#define tri_h5_visit(obj, fn, data) H5Ovisit2(obj, H5_INDEX_NAME, H5_ITER_INC, fn, data, H5O_INFO_BASIC)
#endif

typedef struct {
    FILE *out;
    int64_t elements;
    int datasets, bad;
    int64_t file_bytes;      /* no dataset can hold more than its file */
} InspectState;

/* The dataset's rank and dims when it is 1-D or 2-D (the only shapes a
 * checkpoint holds), else -1: dims has room for two. */
static int dataset_shape(hid_t d, hsize_t dims[2])
{
    hid_t space = H5Dget_space(d);
    int ndim = space < 0 ? -1 : H5Sget_simple_extent_ndims(space);
    dims[0] = 0;
    dims[1] = 1;
    if (ndim >= 1 && ndim <= 2)
        H5Sget_simple_extent_dims(space, dims, NULL);
    else
        ndim = -1;
    if (space >= 0)
        H5Sclose(space);
    return ndim;
}

/* Reads a whole fp32 dataset and checks its checksum attribute: 1 good,
 * 0 mismatch, -1 unreadable or not a checkpoint tensor. */
static int verify_whole(hid_t d, int ndim, const hsize_t dims[2], int64_t file_bytes,
                        int64_t *count)
{
    hsize_t cols = ndim == 2 ? dims[1] : 1;
    /* a damaged header may claim any extent: what does not fit in the
     * file is refused, not allocated */
    hsize_t max_elements = (hsize_t)file_bytes / sizeof(float);
    if (ndim < 0 || dims[0] > max_elements || cols > max_elements
        || (cols && dims[0] > max_elements / cols))
        return -1;
    int64_t n = (int64_t)(dims[0] * cols);
    *count = n;
    uint64_t want;
    float *buf = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    if (!buf || ckpt_attr_read(d, CKPT_CHECKSUM_ATTR, H5T_NATIVE_UINT64, &want)
        || H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
        free(buf);
        return -1;
    }
    uint64_t got = ckpt_checksum(buf, 0, (int64_t)dims[0], 0, (int64_t)cols, (int64_t)cols);
    free(buf);
    return got == want;
}

static herr_t inspect_object(hid_t obj, const char *name, const tri_h5_info_t *info,
                             void *data)
{
    InspectState *s = data;
    if (info->type != H5O_TYPE_DATASET)
        return 0;
    hid_t d = H5Dopen2(obj, name, H5P_DEFAULT);
    hsize_t dims[2];
    int ndim = d < 0 ? -1 : dataset_shape(d, dims);
    int64_t count = 0;
    int ok = ndim < 0 ? -1 : verify_whole(d, ndim, dims, s->file_bytes, &count);
    if (d >= 0)
        H5Dclose(d);
    char shape[64];
    if (ndim == 2)
        snprintf(shape, sizeof shape, "%llu x %llu", (unsigned long long)dims[0],
                 (unsigned long long)dims[1]);
    else if (ndim == 1)
        snprintf(shape, sizeof shape, "%llu", (unsigned long long)dims[0]);
    else
        snprintf(shape, sizeof shape, "?");
    fprintf(s->out, "  /%-36s %-16s %s\n", name, shape,
            ok == 1 ? "ok" : ok == 0 ? "CORRUPT (checksum mismatch)" : "UNREADABLE");
    s->datasets++;
    s->bad += ok != 1;
    if (strncmp(name, "model/", 6) == 0)
        s->elements += count;
    return 0;
}

/* The groups root attributes are listed in: texts, integers, reals. */
enum { SHOW_TEXT, SHOW_INTEGER, SHOW_REAL, SHOW_GROUPS };

static int show_group(const CkptRootAttr *a)
{
    return a->type == CKPT_STRING ? SHOW_TEXT : a->type == CKPT_F64 ? SHOW_REAL : SHOW_INTEGER;
}

/* The config text is printed last, whole, and holds the seed. */
static int shown_with_attrs(const CkptRootAttr *a)
{
    return a->source != CKPT_FROM_CONFIG && a->source != CKPT_FROM_SEED;
}

/* A missing text shows as "?"; a missing number is left out. */
static void print_attr(hid_t file, const CkptRootAttr *a, FILE *out)
{
    if (a->type == CKPT_STRING) {
        char *s = ckpt_attr_read_string(file, a->name);
        fprintf(out, "  %-26s %s\n", a->name, s ? s : "?");
        free(s);
    } else if (a->type == CKPT_F64) {
        double v = 0;
        if (!ckpt_attr_read(file, a->name, H5T_NATIVE_DOUBLE, &v))
            fprintf(out, "  %-26s %g\n", a->name, v);
    } else {
        long long v = 0;
        if (!ckpt_attr_read(file, a->name, H5T_NATIVE_LLONG, &v))
            fprintf(out, "  %-26s %lld\n", a->name, v);
    }
}

static void print_attrs(hid_t file, FILE *out)
{
    for (int group = 0; group < SHOW_GROUPS; group++)
        for (int i = 0; i < ckpt_n_root_attrs; i++)
            if (shown_with_attrs(&ckpt_root_attrs[i]) && show_group(&ckpt_root_attrs[i]) == group)
                print_attr(file, &ckpt_root_attrs[i], out);
}

int inspect_checkpoint(const char *path, FILE *out, FILE *err)
{
    CkptFile f = {.id = -1, .path = path};
    f.id = ckpt_open_serial(&f, path);
    if (f.rc) {
        fputs(f.msg, err);
        return 1;
    }
    fprintf(out, "%s\nattributes:\n", path);
    print_attrs(f.id, out);
    fprintf(out, "datasets (checksums verified):\n");
    struct stat sb;
    InspectState s = {.out = out, .file_bytes = stat(path, &sb) == 0 ? (int64_t)sb.st_size : 0};
    tri_h5_visit(f.id, inspect_object, &s);
    fprintf(out, "%d datasets, %.3fM model parameters, %d bad\n", s.datasets,
            s.elements / 1e6, s.bad);
    char *config = ckpt_attr_read_string(f.id, ckpt_root_attr(CKPT_FROM_CONFIG)->name);
    if (config) {
        fprintf(out, "config:\n%s", config);
        free(config);
    }
    H5Fclose(f.id);
    if (s.bad || s.datasets == 0) {
        fprintf(err, "trident: checkpoint %s: %s\n", path,
                s.datasets ? "some datasets are corrupt or unreadable" : "no datasets");
        return 1;
    }
    return 0;
}
