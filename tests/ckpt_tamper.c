/*
 * ckpt_tamper.c - damages checkpoints on purpose, for the tests of
 * checkpoint validation (a test helper, not part of trident):
 *
 *   ckpt_tamper FILE version N          set the format_version attribute
 *   ckpt_tamper FILE config TEXT        replace the stored config text
 *   ckpt_tamper FILE flip DATASET I     change element I of a dataset
 *   ckpt_tamper FILE delete DATASET     unlink a dataset
 *   ckpt_tamper FILE bit ATTR N         flip bit N (0 = least significant)
 *                                       of a numeric root attribute
 *   ckpt_tamper FILE set ATTR V         set a numeric root attribute to
 *                                       the integer V
 *   ckpt_tamper FILE unset ATTR         delete a root attribute
 *   ckpt_tamper FILE foreign            create a foreign HDF5 file
 */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int set_version(hid_t f, int v)
{
    hid_t a = H5Aopen(f, "format_version", H5P_DEFAULT);
    int rc = a < 0 || H5Awrite(a, H5T_NATIVE_INT, &v) < 0;
    if (a >= 0)
        H5Aclose(a);
    return rc;
}

static int set_config(hid_t f, const char *text)
{
    if (H5Adelete(f, "config") < 0)
        return 1;
    hid_t type = H5Tcopy(H5T_C_S1), space = H5Screate(H5S_SCALAR);
    H5Tset_size(type, strlen(text) + 1);
    hid_t a = H5Acreate2(f, "config", type, space, H5P_DEFAULT, H5P_DEFAULT);
    int rc = a < 0 || H5Awrite(a, type, text) < 0;
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(space);
    H5Tclose(type);
    return rc;
}

static int flip(hid_t f, const char *name, hsize_t i)
{
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    if (d < 0)
        return 1;
    hid_t space = H5Dget_space(d);
    int ndim = H5Sget_simple_extent_ndims(space);
    hsize_t dims[2] = {1, 1}, start[2], count[2] = {1, 1};
    H5Sget_simple_extent_dims(space, dims, NULL);
    start[0] = ndim == 2 ? i / dims[1] : i;
    start[1] = ndim == 2 ? i % dims[1] : 0;
    H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count, NULL);
    hsize_t one = 1;
    hid_t mem = H5Screate_simple(1, &one, NULL);
    float v;
    int rc = H5Dread(d, H5T_NATIVE_FLOAT, mem, space, H5P_DEFAULT, &v) < 0;
    v = v * 1.5f + 0.25f;
    rc |= H5Dwrite(d, H5T_NATIVE_FLOAT, mem, space, H5P_DEFAULT, &v) < 0;
    H5Sclose(mem);
    H5Sclose(space);
    H5Dclose(d);
    return rc;
}

/* Flips one bit of the attribute's stored bytes, whatever its type: what
 * a bad disk block or a cosmic ray does. */
static int flip_attr_bit(hid_t f, const char *name, unsigned bit)
{
    hid_t a = H5Aopen(f, name, H5P_DEFAULT);
    if (a < 0)
        return 1;
    hid_t type = H5Aget_type(a);
    unsigned char bytes[16] = {0};
    size_t size = H5Tget_size(type);
    int rc = size > sizeof bytes || bit >= 8 * size || H5Aread(a, type, bytes) < 0;
    if (!rc) {
        /* the file's types are little-endian: bit 0 is in byte 0 */
        bytes[bit / 8] ^= (unsigned char)(1u << (bit % 8));
        rc = H5Awrite(a, type, bytes) < 0;
    }
    H5Tclose(type);
    H5Aclose(a);
    return rc;
}

static int set_attr(hid_t f, const char *name, long long v)
{
    hid_t a = H5Aopen(f, name, H5P_DEFAULT);
    int rc = a < 0 || H5Awrite(a, H5T_NATIVE_LLONG, &v) < 0;
    if (a >= 0)
        H5Aclose(a);
    return rc;
}

static int foreign(const char *path)
{
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t n = 4;
    hid_t space = H5Screate_simple(1, &n, NULL);
    hid_t d = H5Dcreate2(f, "temperature", H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT,
                         H5P_DEFAULT);
    double v[4] = {1, 2, 3, 4};
    int rc = f < 0 || d < 0 || H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) < 0;
    H5Dclose(d);
    H5Sclose(space);
    H5Fclose(f);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: ckpt_tamper FILE version N | config TEXT | flip DATASET I | "
                "delete DATASET | bit ATTR N | set ATTR V | unset ATTR | foreign\n");
        return 2;
    }
    if (strcmp(argv[2], "foreign") == 0)
        return foreign(argv[1]);
    hid_t f = H5Fopen(argv[1], H5F_ACC_RDWR, H5P_DEFAULT);
    if (f < 0)
        return 1;
    int rc = 2;
    if (strcmp(argv[2], "version") == 0 && argc == 4)
        rc = set_version(f, atoi(argv[3]));
    else if (strcmp(argv[2], "config") == 0 && argc == 4)
        rc = set_config(f, argv[3]);
    else if (strcmp(argv[2], "flip") == 0 && argc == 5)
        rc = flip(f, argv[3], (hsize_t)atoll(argv[4]));
    else if (strcmp(argv[2], "delete") == 0 && argc == 4)
        rc = H5Ldelete(f, argv[3], H5P_DEFAULT) < 0;
    else if (strcmp(argv[2], "bit") == 0 && argc == 5)
        rc = flip_attr_bit(f, argv[3], (unsigned)atoi(argv[4]));
    else if (strcmp(argv[2], "set") == 0 && argc == 5)
        rc = set_attr(f, argv[3], atoll(argv[4]));
    else if (strcmp(argv[2], "unset") == 0 && argc == 4)
        rc = H5Adelete(f, argv[3]) < 0;
    H5Fclose(f);
    return rc;
}
