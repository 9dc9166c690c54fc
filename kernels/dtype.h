/*
 * dtype.h - the element types a tensor can hold, their sizes and names.
 *
 * Its own file so that the backends (kernels/cpu/, kernels/cuda/) size and
 * name elements without depending on ops.c and the ops_*.c, the
 * dispatchers that call them. ops.h includes it.
 *
 * Not collective.
 */
#ifndef TRI_KERNELS_DTYPE_H
#define TRI_KERNELS_DTYPE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* OPS_F64 is for accumulators (norms), never for model tensors. */
typedef enum { OPS_F32 = 0, OPS_BF16 = 1, OPS_F16 = 2, OPS_I32 = 3, OPS_F64 = 4 } ops_dtype;

/* Bytes per element of dtype; an unknown dtype goes to ops_fatal. */
size_t ops_dtype_size(ops_dtype dtype);
/* "fp32", "bf16", "fp16", "int32", "fp64"; "unknown" for anything else. */
const char *ops_dtype_name(ops_dtype dtype);
/* Parses "fp32", "bf16", "fp16"; returns 0 on success, else -1 and leaves
 * *out alone. */
int ops_dtype_parse(const char *s, ops_dtype *out);

#ifdef __cplusplus
}
#endif
#endif
