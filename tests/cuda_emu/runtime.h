/*
 * cuda_emu/runtime.h - the CUDA runtime calls of the backend's host code,
 * on the host, for the tests that run a .cu file's host functions as
 * written (t_optim_emu.cpp: copy_cuda, cast_cuda, multi_cuda.cu's tables,
 * the launches of adamw_cuda.cu and elementwise_cuda.cu). Included once
 * per test program, after fibers.h.
 *
 * One stream, the compute stream, and stream order as the GPU keeps it:
 * a cudaMemcpyAsync is queued, not done, and the queue runs, oldest
 * first, before the next launch and at a host wait (cuda_wait_stream).
 * The source of a copy from the host is read when the copy runs, as a DMA
 * from pinned memory is, and compared then with what it held when the
 * copy was queued: a host buffer changed or freed before the wait that
 * covers its copy stops the test. cuda_wait_stream counts the host
 * waits; scratch_cuda is device_cuda.cu's (a slot grows by a quarter more
 * than asked, and its old contents are lost: the new buffer is 0xff
 * bytes, NaN in every float dtype). A launch is
 * emu_launch(kernel, grid, threads, shmem, stream)(args), which the test's
 * script writes for kernel<<<grid, threads, shmem, stream>>>(args): the
 * blocks are the emulator's 128 fibers whatever `threads` says (the
 * kernels read blockDim.x), and a grid of 0 or of more than 2^31 - 1
 * blocks, or a block of more than 1024 threads or not whole warps,
 * stops the test, as the GPU would refuse the launch.
 */
#ifndef TRI_TESTS_CUDA_EMU_RUNTIME_H
#define TRI_TESTS_CUDA_EMU_RUNTIME_H

#include "fibers.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

typedef struct EmuStream *cudaStream_t;
typedef int cudaError_t;
enum { cudaSuccess = 0 };
enum cudaMemcpyKind { cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice };

#define TRI_CHECK_CUDA(call) ((void)(call))
#define TRI_CHECK_LAUNCH(kernel) ((void)0)

static inline cudaStream_t stream_cuda(void)
{
    return (cudaStream_t)nullptr;
}

/* A queued copy, with the bytes its source held when it was queued. */
struct EmuQueued {
    void *dst;
    const void *src;
    size_t bytes;
    cudaMemcpyKind kind;
    std::vector<char> at_queue;
};
static std::vector<EmuQueued> emu_queue;
static long emu_host_waits, emu_uploads, emu_scratch_growths;

/* Runs the queued copies, oldest first (stream order). */
static void emu_stream_drain(void)
{
    for (EmuQueued &q : emu_queue) {
        if (q.kind != cudaMemcpyDeviceToDevice
            && memcmp(q.src, q.at_queue.data(), q.bytes) != 0) {
            fprintf(stderr, "cuda_emu: a host buffer of %zu bytes changed (or was freed) "
                            "before the wait that covers its asynchronous copy\n", q.bytes);
            exit(1);
        }
        memmove(q.dst, q.src, q.bytes);
    }
    emu_queue.clear();
}

static inline cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes,
                                          cudaMemcpyKind kind, cudaStream_t)
{
    emu_uploads += kind == cudaMemcpyHostToDevice;
    EmuQueued q{ dst, src, bytes, kind, std::vector<char>((const char *)src,
                                                          (const char *)src + bytes) };
    emu_queue.push_back(std::move(q));
    return cudaSuccess;
}

/* device_cuda.cu's: returns once the stream's work is done (a host wait). */
void cuda_wait_stream(void *stream, const char *what)
{
    (void)stream;
    (void)what;
    emu_host_waits++;
    emu_stream_drain();
}

/* device_cuda.cu's scratch slots, on the host. */
static struct {
    void *p;
    size_t bytes;
} emu_scratch[32];

void *scratch_cuda(int slot, size_t bytes)
{
    if (bytes <= emu_scratch[slot].bytes)
        return emu_scratch[slot].p;
    emu_stream_drain(); /* cudaFreeAsync: after the work queued */
    free(emu_scratch[slot].p);
    emu_scratch_growths++;
    size_t want = bytes + bytes / 4;
    emu_scratch[slot].p = aligned_alloc(256, (want + 255) / 256 * 256);
    if (!emu_scratch[slot].p) {
        fprintf(stderr, "cuda_emu: out of host memory for scratch (%zu bytes)\n", want);
        exit(1);
    }
    memset(emu_scratch[slot].p, 0xff, want);
    emu_scratch[slot].bytes = want;
    return emu_scratch[slot].p;
}

/* A grid-stride kernel's grid capped at this many blocks when non-zero
 * (set by the test around launches that take any grid), so that each
 * thread strides over several elements, as at real sizes when grid_for
 * caps the grid at TRI_MAX_BLOCKS. */
static unsigned emu_grid_cap;

/* kernel<<<grid, threads, shmem, stream>>>(args), on the host. */
template <typename K>
static auto emu_launch(K kernel, long long grid, long long threads, size_t shmem,
                       cudaStream_t stream)
{
    (void)shmem;
    (void)stream;
    return [=](auto... args) {
        if (grid < 1 || grid > 0x7fffffffLL || threads < 32 || threads > 1024
            || threads % 32) {
            fprintf(stderr, "cuda_emu: a launch of %lld blocks of %lld threads, which "
                            "the GPU refuses\n", grid, threads);
            exit(1);
        }
        emu_stream_drain();
        unsigned g = (unsigned)grid;
        if (emu_grid_cap && g > emu_grid_cap)
            g = emu_grid_cap;
        gridDim.x = g;
        launch(g, [&] { kernel(args...); });
        gridDim.x = 1;
    };
}

#endif
