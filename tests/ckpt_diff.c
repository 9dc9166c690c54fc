/*
 * ckpt_diff.c - compares the /model tensors of two checkpoints: the whole
 * model's relative difference ||A - B|| / ||A|| (L2 over every tensor),
 * which must stay within the tolerance (exit 1 otherwise). It also prints
 * the worst tensor and the largest single-element difference, for
 * information: Adam divides each update by
 * sqrt(v), so an element whose gradients nearly cancel turns fp32
 * reassociation noise into visible differences even when whole tensors
 * agree to 1e-7. A test helper for the layout-equivalence tests; the
 * checkpoints' layouts may differ (the files hold logical tensors).
 *
 * With "optim" after TOL, the Adam moments /optim/<name>/m and /v are
 * compared too (the asynchronous saves' test wants every dataset).
 *
 *   ckpt_diff A.h5 B.h5 [TOL [optim]]       (default 1e-5)
 */
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    hid_t other;
    double tol, worst, worst_elem;
    double diff2, norm2;               /* over all tensors */
    char worst_name[256], worst_elem_name[300];
    int count, missing;
    int optim;                         /* also the Adam moments */
    hid_t self;                        /* A, for the moments */
} Diff;

static float *read_all(hid_t file, const char *name, hssize_t *n)
{
    hid_t d = H5Dopen2(file, name, H5P_DEFAULT);
    if (d < 0)
        return NULL;
    hid_t space = H5Dget_space(d);
    *n = H5Sget_simple_extent_npoints(space);
    H5Sclose(space);
    float *buf = malloc((size_t)(*n > 0 ? *n : 1) * sizeof *buf);
    if (buf && H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
        free(buf);
        buf = NULL;
    }
    H5Dclose(d);
    return buf;
}

static void compare_dataset(Diff *d, const char *path)
{
    hssize_t na = 0, nb = 0;
    float *a = read_all(d->self, path, &na);
    float *b = read_all(d->other, path, &nb);
    if (!a || !b || na != nb) {
        fprintf(stderr, "ckpt_diff: %s missing or of another size\n", path);
        d->missing++;
    } else {
        double diff2 = 0.0, norm2 = 0.0;
        for (hssize_t i = 0; i < na; i++) {
            double e = fabs((double)a[i] - b[i]);
            diff2 += e * e;
            norm2 += (double)a[i] * a[i];
            if (!(e <= d->worst_elem)) {
                d->worst_elem = isnan(e) ? INFINITY : e;
                snprintf(d->worst_elem_name, sizeof d->worst_elem_name, "%s[%lld]", path,
                         (long long)i);
            }
        }
        d->diff2 += diff2;
        d->norm2 += norm2;
        double rel = sqrt(diff2) / fmax(sqrt(norm2), 1e-30);
        if (!(rel <= d->worst)) {
            d->worst = isnan(rel) ? INFINITY : rel;
            snprintf(d->worst_name, sizeof d->worst_name, "%s", path);
        }
        d->count++;
    }
    free(a);
    free(b);
}

static herr_t compare(hid_t group, const char *name, const H5L_info_t *info, void *data)
{
    Diff *d = data;
    (void)group;
    (void)info;
    static const char *const parts[] = {"/model/%s", "/optim/%s/m", "/optim/%s/v"};
    char path[256];
    for (int part = 0; part < (d->optim ? 3 : 1); part++) {
        snprintf(path, sizeof path, parts[part], name);
        compare_dataset(d, path);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: ckpt_diff A.h5 B.h5 [TOL]\n");
        return 2;
    }
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    Diff d = {.tol = argc > 3 ? atof(argv[3]) : 1e-5,
              .optim = argc > 4 && strcmp(argv[4], "optim") == 0};
    hid_t fa = H5Fopen(argv[1], H5F_ACC_RDONLY, H5P_DEFAULT);
    d.other = H5Fopen(argv[2], H5F_ACC_RDONLY, H5P_DEFAULT);
    if (fa < 0 || d.other < 0) {
        fprintf(stderr, "ckpt_diff: cannot open %s\n", fa < 0 ? argv[1] : argv[2]);
        return 2;
    }
    d.self = fa;
    hid_t model = H5Gopen2(fa, "/model", H5P_DEFAULT);
    H5Literate(model, H5_INDEX_NAME, H5_ITER_INC, NULL, compare, &d);
    H5Gclose(model);
    H5Fclose(fa);
    H5Fclose(d.other);
    printf("%d tensors, ||A-B||/||A|| %.2e, per tensor max %.2e in %s; max |a-b| %.1e at %s\n",
           d.count, sqrt(d.diff2 / d.norm2), d.worst, d.worst_name[0] ? d.worst_name : "-",
           d.worst_elem,
           d.worst_elem_name[0] ? d.worst_elem_name : "-");
    return d.missing || d.count == 0 || !(sqrt(d.diff2 / d.norm2) <= d.tol);
}
