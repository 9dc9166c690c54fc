/*
 * gen_hostile.c - writes HDF5 files that are valid HDF5 but hostile to a
 * checkpoint reader, as seeds for fuzz_ckpt (make-corpus.sh builds and
 * runs it): gen_hostile OUTDIR. Each file is a copy of a real checkpoint
 * (OUTDIR/good.h5) with one thing made wrong, or a foreign file:
 *   attr_array.h5   format_version is an array of 64 int32, not a scalar
 *   rank3.h5        a 3-D dataset among the tensors
 *   zero_cols.h5    a 2-D dataset of shape 4 x 0
 *   huge.h5         a dataset claiming 2^46 fp32 elements (chunked, no
 *                   storage allocated: the file stays small)
 */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static hid_t copy_of_good(const char *dir, const char *name)
{
    char src[1024], dst[1024];
    snprintf(src, sizeof src, "%s/good.h5", dir);
    snprintf(dst, sizeof dst, "%s/%s", dir, name);
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    if (!in || !out) {
        perror(name);
        exit(1);
    }
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        fwrite(buf, 1, n, out);
    fclose(in);
    fclose(out);
    hid_t f = H5Fopen(dst, H5F_ACC_RDWR, H5P_DEFAULT);
    if (f < 0)
        exit(1);
    return f;
}

static void dataset(hid_t f, const char *name, int rank, const hsize_t *dims, hid_t dcpl)
{
    hid_t space = H5Screate_simple(rank, dims, NULL);
    hid_t d = H5Dcreate2(f, name, H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    uint64_t sum = 0;
    hid_t s1 = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(d, "checksum", H5T_NATIVE_UINT64, s1, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_UINT64, &sum);
    H5Aclose(a);
    H5Sclose(s1);
    H5Dclose(d);
    H5Sclose(space);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gen_hostile OUTDIR (holding good.h5)\n");
        return 2;
    }
    const char *dir = argv[1];

    hid_t f = copy_of_good(dir, "attr_array.h5");
    H5Adelete(f, "format_version");
    hsize_t n = 64;
    int32_t v[64];
    for (int i = 0; i < 64; i++)
        v[i] = 1;
    hid_t space = H5Screate_simple(1, &n, NULL);
    hid_t a = H5Acreate2(f, "format_version", H5T_NATIVE_INT32, space, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_INT32, v);
    H5Aclose(a);
    H5Sclose(space);
    H5Fclose(f);

    f = copy_of_good(dir, "rank3.h5");
    hsize_t d3[3] = {2, 3, 4};
    dataset(f, "/model/extra3d", 3, d3, H5P_DEFAULT);
    H5Fclose(f);

    f = copy_of_good(dir, "zero_cols.h5");
    hsize_t d0[2] = {4, 0};
    dataset(f, "/model/empty", 2, d0, H5P_DEFAULT);
    H5Fclose(f);

    f = copy_of_good(dir, "huge.h5");
    hsize_t big[2] = {(hsize_t)1 << 23, (hsize_t)1 << 23}, chunk[2] = {64, 64};
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 2, chunk);
    dataset(f, "/model/huge", 2, big, dcpl);
    H5Pclose(dcpl);
    H5Fclose(f);
    return 0;
}
