/*
 * dtype.c - sizes and names of the ops_dtype values (dtype.h).
 *
 * Not collective.
 */
#include "dtype.h"

#include <string.h>

#include "fatal.h"

/* Bytes per element, 0 for a value that is not an ops_dtype. */
static size_t dtype_bytes(ops_dtype dtype)
{
    switch (dtype) {
    case OPS_F32: return 4;
    case OPS_BF16: return 2;
    case OPS_F16: return 2;
    case OPS_I32: return 4;
    case OPS_F64: return 8;
    }
    return 0;
}

size_t ops_dtype_size(ops_dtype dtype)
{
    size_t size = dtype_bytes(dtype);
    if (!size)
        ops_fatalf(__FILE__, __LINE__, "ops_dtype_size: unknown dtype %d", (int)dtype);
    return size;
}

const char *ops_dtype_name(ops_dtype dtype)
{
    switch (dtype) {
    case OPS_F32: return "fp32";
    case OPS_BF16: return "bf16";
    case OPS_F16: return "fp16";
    case OPS_I32: return "int32";
    case OPS_F64: return "fp64";
    }
    return "unknown";
}

int ops_dtype_parse(const char *s, ops_dtype *out)
{
    static const ops_dtype floats[] = { OPS_F32, OPS_BF16, OPS_F16 };
    for (size_t i = 0; s && i < sizeof floats / sizeof floats[0]; i++) {
        if (strcmp(s, ops_dtype_name(floats[i])) == 0) {
            *out = floats[i];
            return 0;
        }
    }
    return -1;
}
