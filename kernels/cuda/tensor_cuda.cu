/*
 * tensor_cuda.cu - allocate, free, zero, copy and cast device memory.
 *
 * The twin of tensor_cpu.c. Everything is enqueued on the compute stream,
 * so a buffer zeroed or filled here is ready for the next op without a
 * host wait. The exception is a copy with a host side: ops.h promises
 * dst = src when ops_copy returns, so the host may read a downloaded
 * buffer or overwrite an uploaded one (pinned host memory is not staged by
 * the driver), and copy_cuda waits for the stream. Casts round through
 * elem.h on the raw 16-bit storage, bit-identical to cast_cpu.
 */
#include "cuda_common.h"

#include <stdio.h>
#include <string.h>

void *alloc_cuda(size_t bytes)
{
    void *p = NULL;
    /* a zero-length tensor still gets a real pointer, as on the host */
    size_t want = bytes ? bytes : 256;
    cudaStream_t s = stream_cuda();
    cudaError_t err = cudaMalloc(&p, want);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        size_t free_b = 0, total_b = 0;
        (void)cudaMemGetInfo(&free_b, &total_b);
        (void)cudaGetLastError();
        char msg[256];
        snprintf(msg, sizeof msg,
                 "out of GPU memory allocating %zu bytes (%.2f GiB free of "
                 "%.2f GiB): %s", want, free_b / 1073741824.0,
                 total_b / 1073741824.0, cudaGetErrorString(err));
        ops_fatal(msg, __FILE__, __LINE__);
    }
    TRI_CHECK_CUDA(cudaMemsetAsync(p, 0, want, s));
    return p;
}

void free_cuda(void *p)
{
    if (!p)
        return;
    /* no op queued may still use p: the compute stream's work, and the
     * communication joined into it (cuda_synchronize); cudaFree waits for
     * the device anyway, this says so instead of relying on it */
    if (cuda_device_index() >= 0)
        cuda_synchronize();
    TRI_CHECK_CUDA(cudaFree(p));
}

void *alloc_pinned_cuda(size_t bytes)
{
    void *p = NULL;
    cudaError_t err = cudaMallocHost(&p, bytes);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        char msg[256];
        snprintf(msg, sizeof msg, "cannot allocate %zu bytes of pinned host memory: %s",
                 bytes, cudaGetErrorString(err));
        ops_fatal(msg, __FILE__, __LINE__);
    }
    memset(p, 0, bytes);
    return p;
}

void free_pinned_cuda(void *p)
{
    if (p)
        TRI_CHECK_CUDA(cudaFreeHost(p));
}

void zero_cuda(void *p, size_t bytes)
{
    if (bytes)
        TRI_CHECK_CUDA(cudaMemsetAsync(p, 0, bytes, stream_cuda()));
}

void copy_cuda(void *dst, ops_device ddev, const void *src, ops_device sdev,
               size_t bytes)
{
    if (bytes == 0 || dst == src)
        return;
    if (ddev == OPS_CPU && sdev == OPS_CPU) {
        memcpy(dst, src, bytes);
        return;
    }
    cudaMemcpyKind kind = ddev == OPS_CUDA && sdev == OPS_CUDA ? cudaMemcpyDeviceToDevice
                        : ddev == OPS_CUDA ? cudaMemcpyHostToDevice
                                           : cudaMemcpyDeviceToHost;
    cudaStream_t s = stream_cuda();
    TRI_CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, kind, s));
    if (kind != cudaMemcpyDeviceToDevice)
        cuda_wait_stream(s, "a copy between host and GPU");
}

void copy_rows_cuda(void *dst, const void *src, int64_t rows, size_t row_bytes,
                    size_t src_stride)
{
    /* destination rows packed: its pitch is the row's width */
    TRI_CHECK_CUDA(cudaMemcpy2DAsync(dst, row_bytes, src, src_stride, row_bytes,
                                     (size_t)rows, cudaMemcpyDeviceToDevice, stream_cuda()));
}

/* The offload's copy streams (device to host, host to device) and events,
 * made on first use: only a run with [train] offload = optimizer needs
 * them, and they live as long as the process. */
static cudaStream_t copy_stream[2];
static cudaEvent_t lane_done[OPS_COPY_LANES], compute_ready;

static void copy_streams_create(void)
{
    if (copy_stream[0])
        return;
    for (int d = 0; d < 2; d++)
        TRI_CHECK_CUDA(cudaStreamCreateWithFlags(&copy_stream[d], cudaStreamNonBlocking));
    for (int l = 0; l < OPS_COPY_LANES; l++)
        TRI_CHECK_CUDA(cudaEventCreateWithFlags(&lane_done[l], cudaEventDisableTiming));
    TRI_CHECK_CUDA(cudaEventCreateWithFlags(&compute_ready, cudaEventDisableTiming));
}

void copy_async_cuda(void *dst, ops_device ddev, const void *src, ops_device sdev,
                     size_t bytes, int lane)
{
    copy_streams_create();
    int up = ddev == OPS_CUDA;
    cudaMemcpyKind kind = ddev == OPS_CUDA && sdev == OPS_CUDA ? cudaMemcpyDeviceToDevice
                        : up ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
    cudaStream_t s = copy_stream[up];
    /* the gradients were written, and the weights are read, on the compute
     * stream: the copy starts after what is queued there now */
    TRI_CHECK_CUDA(cudaEventRecord(compute_ready, stream_cuda()));
    TRI_CHECK_CUDA(cudaStreamWaitEvent(s, compute_ready, 0));
    if (bytes)
        TRI_CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, kind, s));
    TRI_CHECK_CUDA(cudaEventRecord(lane_done[lane], s));
}

void copy_wait_cuda(int lane)
{
    if (copy_stream[0])
        TRI_CHECK_CUDA(cudaEventSynchronize(lane_done[lane]));
}

static __global__ void cast_kernel(void *dst, ops_dtype ddt, const void *src,
                                   ops_dtype sdt, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        store_f32_cuda(dst, ddt, i, load_f32_cuda(src, sdt, i));
}

void cast_cuda(void *dst, ops_dtype ddt, const void *src, ops_dtype sdt,
               int64_t n)
{
    if (n <= 0)
        return;
    cudaStream_t s = stream_cuda();
    if (ddt == sdt) {
        if (dst != src)
            TRI_CHECK_CUDA(cudaMemcpyAsync(dst, src, (size_t)n * esize_cuda(ddt),
                                           cudaMemcpyDeviceToDevice, s));
        return;
    }
    /* every pair goes through fp32, which holds bf16 and fp16 exactly, so
     * bf16 <-> fp16 rounds once, as in cast_cpu */
    cast_kernel<<<grid_for(n, TRI_THREADS), TRI_THREADS, 0, s>>>(dst, ddt, src,
                                                                 sdt, n);
    TRI_CHECK_LAUNCH(cast_kernel);
}

static __global__ void cast_2d_kernel(void *dst, ops_dtype ddt, int64_t ldd,
                                      const void *src, ops_dtype sdt,
                                      int64_t lds, int rows, int cols)
{
    int64_t total = (int64_t)rows * cols;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < total;
         k += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = k / cols, c = k % cols;
        store_f32_cuda(dst, ddt, r * ldd + c, load_f32_cuda(src, sdt, r * lds + c));
    }
}

void cast_2d_cuda(void *dst, ops_dtype ddt, int64_t ldd, const void *src,
                  ops_dtype sdt, int64_t lds, int rows, int cols)
{
    int64_t total = (int64_t)rows * cols;
    if (total <= 0)
        return;
    cast_2d_kernel<<<grid_for(total, TRI_THREADS), TRI_THREADS, 0, stream_cuda()>>>(
        dst, ddt, ldd, src, sdt, lds, rows, cols);
    TRI_CHECK_LAUNCH(cast_2d_kernel);
}
