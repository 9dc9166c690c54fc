/*
 * gemm_cuda.cu - the GEMMs every CUDA op calls, and what they run on.
 *
 * The twin of gemm_cpu.c: gemm_cuda takes row-major operands with the
 * arguments of gemm_f32_cpu, so matmul and attention read like their CPU
 * twins. cuBLAS is column-major; a row-major matrix is its transpose in
 * column-major, so C = op(A) op(B) is computed as C^T = op(B)^T op(A)^T,
 * i.e. cuBLAS gets B first and the dimensions swapped, and nothing is
 * copied. All GEMMs accumulate in fp32 (CUBLAS_COMPUTE_32F): bf16 and fp16
 * run on tensor cores, fp32 stays true fp32 (no TF32), so the fp32 backend
 * matches the CPU to reassociation.
 */
#include "cuda_common.h"

#include <stdio.h>
#include <string.h>

/* C(M,N) (ldc) = beta C: what a GEMM with K == 0 means, done by hand
 * since libraries disagree (as scale_c in gemm_cpu.c). */
static __global__ void scale_matrix_kernel(void *C, ops_dtype ct, int M, int N,
                                           int ldc, float beta)
{
    int64_t total = (int64_t)M * N;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < total;
         k += (int64_t)gridDim.x * blockDim.x) {
        int64_t i = k / N, j = k % N, at = i * ldc + j;
        store_f32_cuda(C, ct, at, beta == 0.0f ? 0.0f : beta * load_f32_cuda(C, ct, at));
    }
}

static void scale_matrix(void *C, ops_dtype ct, int M, int N, int ldc, float beta)
{
    scale_matrix_kernel<<<grid_for((int64_t)M * N, TRI_THREADS), TRI_THREADS, 0,
                          stream_cuda()>>>(C, ct, M, N, ldc, beta);
    TRI_CHECK_LAUNCH(scale_matrix_kernel);
}

void gemm_cuda(int trans_a, int trans_b, int M, int N, int K, float alpha,
               const void *A, int lda, const void *B, int ldb, float beta,
               void *C, int ldc, ops_dtype abt, ops_dtype ct)
{
    if (M <= 0 || N <= 0)
        return;
    if (K <= 0) {
        scale_matrix(C, ct, M, N, ldc, beta);
        return;
    }
    TRI_CHECK_CUBLAS(cublasGemmEx(cublas_cuda(),
        trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
        N, M, K, &alpha, B, blas_type_cuda(abt), ldb, A, blas_type_cuda(abt), lda,
        &beta, C, blas_type_cuda(ct), ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void gemm_batched_cuda(int trans_a, int trans_b, int M, int N, int K,
                       float alpha, const void *A, int lda, int64_t stride_a,
                       const void *B, int ldb, int64_t stride_b, float beta,
                       void *C, int ldc, int64_t stride_c, int batch,
                       ops_dtype abt, ops_dtype ct)
{
    if (M <= 0 || N <= 0 || batch <= 0)
        return;
    if (K <= 0) {
        for (int i = 0; i < batch; i++)
            scale_matrix((char *)C + (size_t)(i * stride_c) * esize_cuda(ct), ct,
                         M, N, ldc, beta);
        return;
    }
    TRI_CHECK_CUBLAS(cublasGemmStridedBatchedEx(cublas_cuda(),
        trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
        N, M, K, &alpha, B, blas_type_cuda(abt), ldb, (long long)stride_b,
        A, blas_type_cuda(abt), lda, (long long)stride_a, &beta,
        C, blas_type_cuda(ct), ldc, (long long)stride_c, batch,
        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* ---- what runs, and how fast ------------------------------------------- */

static char info[1024];
static char warn[1024];

const char *gemm_info_cuda(const char **warning)
{
    int major = 0, minor = 0, patch = 0;
    TRI_CHECK_CUBLAS(cublasGetProperty(MAJOR_VERSION, &major));
    TRI_CHECK_CUBLAS(cublasGetProperty(MINOR_VERSION, &minor));
    TRI_CHECK_CUBLAS(cublasGetProperty(PATCH_LEVEL, &patch));
    if (warning)
        *warning = NULL;
    const cudaDeviceProp *p = device_prop_cuda();
    if (!p) {
        snprintf(info, sizeof info, "cuBLAS %d.%d.%d cublasGemmEx, no GPU "
                 "selected yet", major, minor, patch);
        return info;
    }
    snprintf(info, sizeof info,
             "cuBLAS %d.%d.%d cublasGemmEx (fp32 accumulation), %s (sm_%d%d, "
             "%d SMs, %.0f GiB); cuBLASLt epilogues: %s (TRIDENT_LT_EPILOGUE)", major, minor,
             patch, p->name, p->major, p->minor, p->multiProcessorCount,
             (double)p->totalGlobalMem / (1024.0 * 1024.0 * 1024.0),
             lt_epilogue_name(lt_epilogue_cuda()));
    if (warning && p->major < 8) {
        snprintf(warn, sizeof warn,
                 "%s (sm_%d%d) has no bf16 tensor cores; bf16 GEMMs run far "
                 "below its fp16 rate: use precision=fp16 or fp32", p->name,
                 p->major, p->minor);
        *warning = warn;
    }
    return info;
}

/* Dense datasheet peaks (no sparsity), FLOP/s: fp32 without TF32 (what
 * CUBLAS_COMPUTE_32F runs), bf16 and fp16 on the tensor cores. Matched on
 * the device name; the more specific names come first. */
static const struct {
    const char *name;
    double fp32, half;
} datasheet[] = {
    {"H100 PCIe", 51.2e12, 756e12},
    {"H100 NVL", 60e12, 835e12},
    {"GH200", 67e12, 989e12},
    {"H200", 67e12, 989e12},
    {"H100", 67e12, 989e12},  /* SXM5 */
    {"H800", 67e12, 989e12},
    {"A100", 19.5e12, 312e12},
    {"A800", 19.5e12, 312e12},
    {"L40S", 91.6e12, 362e12},
};

double hardware_peak_cuda(ops_dtype dt, char *how, size_t how_size)
{
    const cudaDeviceProp *p = device_prop_cuda();
    if (!p) {
        snprintf(how, how_size, "no GPU selected");
        return 0.0;
    }
    for (size_t i = 0; i < sizeof datasheet / sizeof datasheet[0]; i++) {
        if (strstr(p->name, datasheet[i].name)) {
            double f = dt == OPS_F32 ? datasheet[i].fp32 : datasheet[i].half;
            snprintf(how, how_size, "%s datasheet, dense %s", p->name, ops_dtype_name(dt));
            return f;
        }
    }
    snprintf(how, how_size, "%s: not in trident's datasheet table", p->name);
    return 0.0;
}

/* Matrix `which` of the probe: hashed values, as on the CPU (elem.h). */
static __global__ void fill_probe_kernel(void *x, ops_dtype dt, int64_t n,
                                         uint32_t which)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        store_f32_cuda(x, dt, i, elem_probe_value((uint64_t)i, which));
}

double gemm_peak_cuda(ops_dtype dt, double seconds)
{
    /* 4096^3: large enough to reach the sustained rate on any GPU of the
     * last generations, small enough (3 x 64 MiB) to fit next to a model */
    const int n = 4096;
    const int reps = 4;
    int64_t elems = (int64_t)n * n;
    size_t bytes = (size_t)elems * esize_cuda(dt);
    void *a, *b, *c;
    TRI_CHECK_CUDA(cudaMalloc(&a, bytes));
    TRI_CHECK_CUDA(cudaMalloc(&b, bytes));
    TRI_CHECK_CUDA(cudaMalloc(&c, bytes));
    cudaStream_t s = stream_cuda();
    fill_probe_kernel<<<grid_for(elems, TRI_THREADS), TRI_THREADS, 0, s>>>(
        a, dt, elems, 0);
    TRI_CHECK_LAUNCH(fill_probe_kernel);
    fill_probe_kernel<<<grid_for(elems, TRI_THREADS), TRI_THREADS, 0, s>>>(
        b, dt, elems, 1);
    TRI_CHECK_LAUNCH(fill_probe_kernel);
    /* a linear layer's forward GEMM, c = a . b^T, as the model runs it */
    gemm_cuda(0, 1, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n, dt, dt); /* warm up */
    cudaEvent_t t0, t1;
    TRI_CHECK_CUDA(cudaEventCreate(&t0));
    TRI_CHECK_CUDA(cudaEventCreate(&t1));
    double best = INFINITY, spent = 0.0;
    do {
        TRI_CHECK_CUDA(cudaEventRecord(t0, s));
        for (int r = 0; r < reps; r++)
            gemm_cuda(0, 1, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n, dt, dt);
        TRI_CHECK_CUDA(cudaEventRecord(t1, s));
        TRI_CHECK_CUDA(cudaEventSynchronize(t1));
        float ms = 0.0f;
        TRI_CHECK_CUDA(cudaEventElapsedTime(&ms, t0, t1));
        double dt_s = ms * 1e-3 / reps;
        if (dt_s < best)
            best = dt_s;
        spent += ms * 1e-3;
    } while (spent < seconds);
    TRI_CHECK_CUDA(cudaEventDestroy(t0));
    TRI_CHECK_CUDA(cudaEventDestroy(t1));
    TRI_CHECK_CUDA(cudaFree(a));
    TRI_CHECK_CUDA(cudaFree(b));
    TRI_CHECK_CUDA(cudaFree(c));
    return 2.0 * n * (double)n * n / best;
}
