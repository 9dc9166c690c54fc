/*
 * ops_tensor.c - a tensor's memory: allocation on a device (zero-filled) or
 * pinned on the host beside one, and the count of allocations that
 * ops_device_allocations reports; views; zero; copies whole, by rows or
 * asynchronously on a copy lane; casts between float dtypes. Dispatches
 * to cpu/tensor_cpu.c and cuda/tensor_cuda.cu.
 *
 * Not collective.
 */
#include "ops_dispatch.h"

#include <stdint.h>
#include <stdlib.h>

/* ops_alloc's and ops_alloc_host's calls per device (ops_device_allocations);
 * atomic: an asynchronous checkpoint save allocates on its own thread. */
static _Atomic int64_t allocations[2];

static void count_allocation(ops_device dev)
{
    allocations[dev == OPS_CUDA]++;
}

int64_t ops_device_allocations(ops_device dev)
{
    if (dev == OPS_CPU)
        return allocations[0] + scratch_cpu_growths();
#if TRI_HAVE_CUDA
    return allocations[1] + cuda_scratch_growths();
#else
    return allocations[1];
#endif
}

ops_tensor ops_alloc(ops_dtype dtype, ops_device device, int64_t n)
{
    ops_tensor t = { NULL, n, dtype, device };
    ops_arg a = { "the allocation", t, 0, ARG_ANY, 0 };
    if (n < 0)
        FAIL("ops_alloc: negative element count %lld", (long long)n);
    check_device("ops_alloc", &a);
    size_t esize = ops_dtype_size(dtype);
    if ((uint64_t)n > (SIZE_MAX - 64) / esize)
        FAIL("ops_alloc: %lld elements of %s overflow size_t", (long long)n,
             ops_dtype_name(dtype));
    /* aligned_alloc wants a multiple of the alignment; n == 0 still gets a
     * real pointer so the tensor does not read as absent. */
    size_t bytes = ((size_t)n * esize + 63) & ~(size_t)63;
    if (bytes == 0)
        bytes = 64;
    count_allocation(device);
#if TRI_HAVE_CUDA
    if (device == OPS_CUDA) {
        t.data = alloc_cuda(bytes); /* zero-filled; fails through the fatal hook */
        return t;
    }
#endif
    t.data = aligned_alloc(64, bytes);
    if (!t.data)
        FAIL("ops_alloc: out of memory allocating %zu bytes (%lld x %s)",
             bytes, (long long)n, ops_dtype_name(dtype));
    zero_cpu(t.data, bytes);
    return t;
}

void ops_free(ops_tensor *t)
{
    if (!t || !t->data)
        return;
    if (t->device == OPS_CPU)
        free(t->data);
#if TRI_HAVE_CUDA
    else
        free_cuda(t->data);
#endif
    *t = OPS_NONE;
}

ops_tensor ops_wide_scratch(ops_device dev, int64_t n)
{
    static ops_tensor host;
    if (n < 0 || (uint64_t)n > (SIZE_MAX - 64) / sizeof(float))
        FAIL("ops_wide_scratch: %lld elements", (long long)n);
#if TRI_HAVE_CUDA
    if (dev == OPS_CUDA) {
        size_t bytes = (size_t)(n ? n : 1) * sizeof(float);
        return (ops_tensor){ wide_scratch_cuda(bytes), n, OPS_F32, OPS_CUDA };
    }
#endif
    (void)dev;
    if (!host.data || host.n < n) {
        ops_free(&host);
        host = ops_alloc(OPS_F32, OPS_CPU, n);
    }
    return ops_view(host, 0, n);
}

ops_tensor ops_alloc_host(ops_dtype dtype, int64_t n, ops_device near)
{
#if TRI_HAVE_CUDA
    if (near == OPS_CUDA) {
        if (n < 0 || (uint64_t)n > (SIZE_MAX - 64) / ops_dtype_size(dtype))
            FAIL("ops_alloc_host: %lld elements of %s", (long long)n, ops_dtype_name(dtype));
        size_t bytes = (size_t)n * ops_dtype_size(dtype);
        count_allocation(OPS_CUDA); /* cudaMallocHost: the driver's, like a device buffer */
        return (ops_tensor){ alloc_pinned_cuda(bytes ? bytes : 64), n, dtype, OPS_CPU };
    }
#endif
    (void)near;
    return ops_alloc(dtype, OPS_CPU, n);
}

void ops_free_host(ops_tensor *t, ops_device near)
{
#if TRI_HAVE_CUDA
    if (near == OPS_CUDA && t && t->data) {
        free_pinned_cuda(t->data);
        *t = OPS_NONE;
        return;
    }
#endif
    (void)near;
    ops_free(t);
}

ops_tensor ops_view(ops_tensor t, int64_t off, int64_t n)
{
    if (!t.data)
        FAIL("ops_view: view of an absent tensor");
    if (off < 0 || n < 0 || off > t.n || n > t.n - off)
        FAIL("ops_view: [%lld, %lld) is outside a tensor of %lld elements",
             (long long)off, (long long)(off + n), (long long)t.n);
    ops_tensor v = t;
    v.data = (char *)t.data + (size_t)off * ops_dtype_size(t.dtype);
    v.n = n;
    return v;
}

void ops_zero(ops_tensor t)
{
    if (t.n == 0)
        return;
    ops_device dev = CHECK_ARGS("ops_zero", NULL, { "t", t, t.n, ARG_ANY, 0 });
    const char *fn = "ops_zero";
    if (dev == OPS_CPU)
        zero_cpu(t.data, (size_t)t.n * ops_dtype_size(t.dtype));
    else
        ON_CUDA(zero_cuda(t.data, (size_t)t.n * ops_dtype_size(t.dtype)));
}

/* Any devices: host to host here, anything involving a GPU in
 * copy_cuda (which returns when the copy is done). */
void ops_copy(ops_tensor dst, ops_tensor src)
{
    static const char fn[] = "ops_copy";
    if (dst.dtype != src.dtype)
        FAIL("%s: dst is %s but src is %s (use ops_cast)", fn,
             ops_dtype_name(dst.dtype), ops_dtype_name(src.dtype));
    if (dst.n != src.n)
        FAIL("%s: dst holds %lld elements but src %lld", fn,
             (long long)dst.n, (long long)src.n);
    if (dst.n == 0)
        return;
    ops_arg a[2] = { { "dst", dst, dst.n, ARG_ANY, 0 },
                     { "src", src, src.n, ARG_ANY, 0 } };
    check_args(fn, NULL, &a[0], 1);
    check_args(fn, NULL, &a[1], 1);
    ops_device dev = OPS_CUDA;
    if (dst.device == OPS_CPU && src.device == OPS_CPU)
        copy_cpu(dst.data, src.data, (size_t)dst.n * ops_dtype_size(dst.dtype));
    else
        ON_CUDA(copy_cuda(dst.data, dst.device, src.data, src.device,
                          (size_t)dst.n * ops_dtype_size(dst.dtype)));
}

void ops_copy_rows(ops_tensor dst, ops_tensor src, int64_t rows, int64_t cols,
                   int64_t src_stride)
{
    static const char fn[] = "ops_copy_rows";
    if (rows < 0 || cols < 0 || src_stride < cols)
        FAIL("%s: %lld rows of %lld elements %lld apart: rows and cols must be "
             ">= 0 and the stride >= cols", fn, (long long)rows, (long long)cols,
             (long long)src_stride);
    if (dst.dtype != src.dtype)
        FAIL("%s: dst is %s but src is %s", fn, ops_dtype_name(dst.dtype),
             ops_dtype_name(src.dtype));
    if (rows == 0 || cols == 0)
        return;
    ops_device dev = CHECK_ARGS(fn, NULL,
        { "dst", dst, rows * cols, ARG_ANY, 0 },
        { "src", src, (rows - 1) * src_stride + cols, ARG_ANY, 0 });
    size_t size = ops_dtype_size(dst.dtype);
    if (dev == OPS_CPU)
        copy_rows_cpu(dst.data, src.data, rows, (size_t)cols * size,
                      (size_t)src_stride * size);
    else
        ON_CUDA(copy_rows_cuda(dst.data, src.data, rows, (size_t)cols * size,
                               (size_t)src_stride * size));
}

void ops_copy_async(ops_tensor dst, ops_tensor src, int lane)
{
    static const char fn[] = "ops_copy_async";
    if (lane < 0 || lane >= OPS_COPY_LANES)
        FAIL("%s: lane %d is not in [0, %d)", fn, lane, OPS_COPY_LANES);
    if (dst.device == OPS_CPU && src.device == OPS_CPU) {
        ops_copy(dst, src);
        return;
    }
    if (dst.dtype != src.dtype || dst.n != src.n)
        FAIL("%s: dst is %lld of %s but src %lld of %s", fn, (long long)dst.n,
             ops_dtype_name(dst.dtype), (long long)src.n, ops_dtype_name(src.dtype));
    ops_arg a[2] = { { "dst", dst, dst.n, ARG_ANY, 0 },
                     { "src", src, src.n, ARG_ANY, 0 } };
    check_args(fn, NULL, &a[0], 1);
    check_args(fn, NULL, &a[1], 1);
    ops_device dev = OPS_CUDA;
    ON_CUDA(copy_async_cuda(dst.data, dst.device, src.data, src.device,
                            (size_t)dst.n * ops_dtype_size(dst.dtype), lane));
}

void ops_copy_wait(ops_device dev, int lane)
{
    static const char fn[] = "ops_copy_wait";
    if (lane < 0 || lane >= OPS_COPY_LANES)
        FAIL("%s: lane %d is not in [0, %d)", fn, lane, OPS_COPY_LANES);
    if (dev == OPS_CUDA)
        ON_CUDA(copy_wait_cuda(lane));
}

void ops_cast(ops_tensor dst, ops_tensor src)
{
    if (dst.n != src.n)
        FAIL("ops_cast: dst holds %lld elements but src %lld",
             (long long)dst.n, (long long)src.n);
    if (dst.n == 0)
        return;
    if (dst.device != src.device) {
        /* across devices: move first, then cast where dst lives */
        ops_tensor moved = ops_alloc(src.dtype, dst.device, src.n);
        ops_copy(moved, src);
        ops_cast(dst, moved);
        ops_free(&moved);
        return;
    }
    ops_device dev = CHECK_ARGS("ops_cast", NULL,
        { "dst", dst, dst.n, ARG_ANY_FLOAT, 0 },
        { "src", src, src.n, ARG_ANY_FLOAT, 0 });
    const char *fn = "ops_cast";
    if (dev == OPS_CPU)
        cast_cpu(dst.data, dst.dtype, src.data, src.dtype, dst.n);
    else
        ON_CUDA(cast_cuda(dst.data, dst.dtype, src.data, src.dtype, dst.n));
}
