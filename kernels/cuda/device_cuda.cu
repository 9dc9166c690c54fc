/*
 * device_cuda.cu - one GPU per rank: choosing it, its compute stream, the
 * cuBLAS handle, the scratch buffers, and the checks every call goes
 * through. The backend's other parts use these and this file uses none of
 * them: setup_cuda.cu, above both, starts and stops them in order
 * (tests/t_deps.sh proves kernels/ has no call circle).
 *
 * Every op runs on the compute stream, in program order, so ops never
 * need to wait for each other on the host. NCCL runs on streams of its
 * own, one per communicator, which src/parallel/comm_nccl.c makes and orders
 * against this one with events. The stream is non-blocking: nothing of
 * ours uses the legacy default stream, and it must not serialise against
 * a library that does.
 */
#include "cuda_common.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

static struct {
    int ready;
    int device;
    cudaDeviceProp prop;
    cudaStream_t compute;
    cublasHandle_t blas;
    void *scratch[SCRATCH_CUDA_SLOTS];   /* see scratch_cuda */
    size_t scratch_bytes[SCRATCH_CUDA_SLOTS];
    int64_t scratch_growths;             /* see cuda_scratch_growths */
} ctx;

/* Outside ctx: installed before or after cuda_device_init, and kept. */
static cuda_wait_fn wait_hook;

/* ---- checks ------------------------------------------------------------ */

void check_cuda_(cudaError_t err, const char *call, const char *file, int line)
{
    if (err == cudaSuccess)
        return;
    char msg[640];
    snprintf(msg, sizeof msg, "%s failed: %s (%s)", call,
             cudaGetErrorString(err), cudaGetErrorName(err));
    ops_fatal(msg, file, line);
}

static const char *cublas_status_name(cublasStatus_t st)
{
    switch (st) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    }
    return "unknown cuBLAS status";
}

void check_cublas_(cublasStatus_t st, const char *call, const char *file,
                   int line)
{
    if (st == CUBLAS_STATUS_SUCCESS)
        return;
    char msg[640];
    snprintf(msg, sizeof msg, "%s failed: %s (%d)", call,
             cublas_status_name(st), (int)st);
    ops_fatal(msg, file, line);
}

void check_launch_(const char *kernel, const char *file, int line)
{
    char msg[320];
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) {
        snprintf(msg, sizeof msg, "launch of %s failed: %s (%s)", kernel,
                 cudaGetErrorString(err), cudaGetErrorName(err));
        ops_fatal(msg, file, line);
    }
    if (TRI_DEBUG) {
        err = cudaStreamSynchronize(ctx.compute);
        if (err != cudaSuccess) {
            snprintf(msg, sizeof msg, "%s (or work before it) failed: %s (%s)",
                     kernel, cudaGetErrorString(err), cudaGetErrorName(err));
            ops_fatal(msg, file, line);
        }
    }
}

/* ---- context ----------------------------------------------------------- */

static void require_ready(void)
{
    if (!ctx.ready)
        ops_fatal("a CUDA op ran before cuda_device_init (call it once per "
                  "rank, after MPI_Init, before allocating CUDA tensors)",
                  __FILE__, __LINE__);
}

cudaStream_t stream_cuda(void)
{
    require_ready();
    return ctx.compute;
}

cublasHandle_t cublas_cuda(void)
{
    require_ready();
    return ctx.blas;
}

void *scratch_cuda(scratch_slot_cuda slot, size_t bytes)
{
    require_ready();
    if (bytes <= ctx.scratch_bytes[slot])
        return ctx.scratch[slot];
    /* Stream-ordered: the old buffer goes back to the pool behind the work
     * queued that may still use it, and the new one comes from the pool in
     * stream order, so growing waits for nothing. cudaFree would wait for
     * the whole device, NCCL's kernels on other streams included, inside
     * the driver where the watchdog cannot see (issue 35). */
    if (ctx.scratch[slot])
        TRI_CHECK_CUDA(cudaFreeAsync(ctx.scratch[slot], ctx.compute));
    ctx.scratch[slot] = NULL;
    ctx.scratch_bytes[slot] = 0;
    ctx.scratch_growths++;
    /* grow by a quarter more than asked, so growing stops after a few calls */
    size_t want = bytes + bytes / 4;
    if (cudaMallocAsync(&ctx.scratch[slot], want, ctx.compute) != cudaSuccess) {
        (void)cudaGetLastError();
        want = bytes;
        TRI_CHECK_CUDA(cudaMallocAsync(&ctx.scratch[slot], want, ctx.compute));
    }
    ctx.scratch_bytes[slot] = want;
    return ctx.scratch[slot];
}

void *wide_scratch_cuda(size_t bytes)
{
    return scratch_cuda(SCRATCH_CUDA_COMM_WIDE, bytes);
}

int64_t cuda_scratch_growths(void)
{
    return ctx.scratch_growths;
}

/* ---- device selection ---------------------------------------------------- */

/* Whether an NVIDIA driver is installed: its user-space library loads. */
static int driver_installed(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (lib)
        dlclose(lib);
    return lib != NULL;
}

int cuda_count_means_no_gpu(int error, int driver_present)
{
    /* no device, or no driver at all (the runtime then reports an
     * insufficient driver): a CPU node. A driver that is there but older
     * than this build's runtime is a broken GPU node, not a CPU one. */
    return error == (int)cudaErrorNoDevice ||
           (error == (int)cudaErrorInsufficientDriver && !driver_present);
}

static char count_error[256];

int cuda_device_count(void)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaSuccess)
        return n > 0 ? n : 0;
    (void)cudaGetLastError();
    if (cuda_count_means_no_gpu((int)e, driver_installed()))
        return 0;
    snprintf(count_error, sizeof count_error, "cudaGetDeviceCount: %s (%s)",
             cudaGetErrorString(e), cudaGetErrorName(e));
    return -1;
}

const char *cuda_device_count_error(void)
{
    return count_error;
}

/* An empty kernel: cudaFuncGetAttributes on it fails when this build holds
 * no kernel image the selected GPU can run. */
static __global__ void probe_kernel(void)
{
}

static int fail_msg(char *err, size_t err_size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail_msg(char *err, size_t err_size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (err && err_size)
        vsnprintf(err, err_size, fmt, ap);
    va_end(ap);
    return 1;
}

int device_select_cuda(int local_rank, int local_size, char *err,
                       size_t err_size)
{
    if (ctx.ready)
        return fail_msg(err, err_size, "cuda_device_init called twice");
    if (local_size < 1 || local_rank < 0 || local_rank >= local_size)
        return fail_msg(err, err_size, "bad local rank %d of %d", local_rank,
                        local_size);
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count < 1) {
        (void)cudaGetLastError();
        return fail_msg(err, err_size,
                        "no CUDA device visible to this rank (%s); check the "
                        "job's GPU allocation and CUDA_VISIBLE_DEVICES",
                        e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    }
    int device;
    if (count >= local_size)
        device = local_rank;
    else if (count == 1)
        device = 0; /* the launcher bound one GPU to each rank */
    else
        return fail_msg(err, err_size,
                        "node has %d ranks but %d visible GPUs; run one rank "
                        "per GPU (CUDA_VISIBLE_DEVICES)", local_size, count);
    e = cudaSetDevice(device);
    if (e == cudaSuccess)
        e = cudaGetDeviceProperties(&ctx.prop, device);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return fail_msg(err, err_size, "cannot use CUDA device %d: %s", device,
                        cudaGetErrorString(e));
    }
    cudaFuncAttributes attr;
    e = cudaFuncGetAttributes(&attr, probe_kernel);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return fail_msg(err, err_size,
                        "trident has no kernels for %s (sm_%d%d): %s; "
                        "reconfigure with --with-cuda-arch=\"%d%d\"",
                        ctx.prop.name, ctx.prop.major, ctx.prop.minor,
                        cudaGetErrorString(e), ctx.prop.major, ctx.prop.minor);
    }
    ctx.device = device;
    return 0;
}

void device_open_cuda(void)
{
    TRI_CHECK_CUDA(cudaStreamCreateWithFlags(&ctx.compute, cudaStreamNonBlocking));
    TRI_CHECK_CUBLAS(cublasCreate(&ctx.blas));
    TRI_CHECK_CUBLAS(cublasSetStream(ctx.blas, ctx.compute));
    /* no atomics: the same bits on every run (cuBLAS's default, made explicit) */
    TRI_CHECK_CUBLAS(cublasSetAtomicsMode(ctx.blas, CUBLAS_ATOMICS_NOT_ALLOWED));
    /* bf16 and fp16 GEMMs may otherwise sum split-K partials in 16 bits;
     * trident's contract is fp32 accumulation throughout (ops.h) */
    TRI_CHECK_CUBLAS(cublasSetMathMode(
        ctx.blas, (cublasMath_t)(CUBLAS_DEFAULT_MATH |
                                 CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
    /* the pool behind scratch_cuda keeps what is freed into it: by default
     * it would hand memory back to the driver at every synchronisation and
     * map it again on the next growth */
    cudaMemPool_t pool;
    TRI_CHECK_CUDA(cudaDeviceGetDefaultMemPool(&pool, ctx.device));
    uint64_t keep_all = UINT64_MAX;
    TRI_CHECK_CUDA(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all));
    ctx.ready = 1;
}

void device_release_scratch_cuda(void)
{
    for (int i = 0; i < SCRATCH_CUDA_SLOTS; i++)
        if (ctx.scratch[i])
            TRI_CHECK_CUDA(cudaFreeAsync(ctx.scratch[i], ctx.compute));
    cuda_synchronize();
}

void device_close_cuda(void)
{
    TRI_CHECK_CUBLAS(cublasDestroy(ctx.blas));
    TRI_CHECK_CUDA(cudaStreamDestroy(ctx.compute));
    memset(&ctx, 0, sizeof ctx);
}

int cuda_device_index(void)
{
    return ctx.ready ? ctx.device : -1;
}

void cuda_device_uuid(unsigned char uuid[16])
{
    require_ready();
    memcpy(uuid, ctx.prop.uuid.bytes, 16);
}

int64_t cuda_device_memory_bytes(void)
{
    require_ready();
    return (int64_t)ctx.prop.totalGlobalMem;
}

void *cuda_compute_stream(void)
{
    require_ready();
    return (void *)ctx.compute;
}

void cuda_synchronize(void)
{
    require_ready();
    cuda_wait_stream(ctx.compute, "the compute stream's work");
}

/* ---- host waits ----------------------------------------------------------- */

void cuda_set_wait(cuda_wait_fn wait)
{
    wait_hook = wait;
}

void wait_event_cuda(cudaEvent_t event, const char *what)
{
    if (wait_hook)
        wait_hook((void *)event, what);
    else
        TRI_CHECK_CUDA(cudaEventSynchronize(event));
}

void cuda_wait_stream(void *stream, const char *what)
{
    /* an event per wait, not one shared: any thread may wait, and
     * creating one costs a few microseconds, a few times per step */
    cudaEvent_t done;
    TRI_CHECK_CUDA(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    TRI_CHECK_CUDA(cudaEventRecord(done, (cudaStream_t)stream));
    wait_event_cuda(done, what);
    TRI_CHECK_CUDA(cudaEventDestroy(done));
}

const cudaDeviceProp *device_prop_cuda(void)
{
    return ctx.ready ? &ctx.prop : NULL;
}
