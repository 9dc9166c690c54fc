/*
 * cuda_common.h - what every .cu file of the backend shares: the checks on
 * CUDA and cuBLAS calls, the device context (stream, cuBLAS handle,
 * scratch workspace), dtype loads and stores, launch sizes, and warp and
 * block reductions. Included by the .cu files only (nvcc), never by C.
 *
 * Errors: a failing CUDA or cuBLAS call is fatal (the peers are already
 * inside collectives): the message names the call, CUDA's description and
 * file:line, and goes to ops_fatal, whose handler main.c points at
 * MPI_Abort. Kernels are asynchronous, so a fault inside one is reported
 * by a later call; configure --enable-debug (TRI_DEBUG) synchronises after
 * every launch so the report names the kernel that failed.
 *
 * Reductions are deterministic: shuffles in a fixed butterfly, block
 * partials combined in index order, no floating-point atomics anywhere.
 */
#ifndef TRI_KERNELS_CUDA_CUDA_COMMON_H
#define TRI_KERNELS_CUDA_CUDA_COMMON_H

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../elem.h"
#include "../ops.h"
#include "cuda.h"

#ifndef TRI_DEBUG
#define TRI_DEBUG 0
#endif

/* ---- checks (device_cuda.cu) --------------------------------------------- */

void check_cuda_(cudaError_t err, const char *call, const char *file, int line);
void check_cublas_(cublasStatus_t st, const char *call, const char *file,
                   int line);
void check_launch_(const char *kernel, const char *file, int line);

#define TRI_CHECK_CUDA(call) check_cuda_((call), #call, __FILE__, __LINE__)
#define TRI_CHECK_CUBLAS(call) check_cublas_((call), #call, __FILE__, __LINE__)
/* After every <<<...>>>: cudaGetLastError, and with TRI_DEBUG a
 * synchronisation so that a fault is pinned on this kernel. */
#define TRI_CHECK_LAUNCH(kernel) check_launch_(#kernel, __FILE__, __LINE__)

/* ---- context (device_cuda.cu) --------------------------------------------- */

/* The steps of cuda_device_init and cuda_device_finalize (setup_cuda.cu
 * calls them in order, around the other parts' own set-up):
 * device_select_cuda chooses and checks this rank's GPU (0, or non-zero
 * with err: cuda.h's cuda_device_init says when); device_open_cuda creates
 * its compute stream and cuBLAS handle and makes the context ready;
 * device_release_scratch_cuda frees the scratch and waits for the compute
 * stream; device_close_cuda destroys the handle and the stream and forgets
 * the device. */
int device_select_cuda(int local_rank, int local_size, char *err, size_t err_size);
void device_open_cuda(void);
void device_release_scratch_cuda(void);
void device_close_cuda(void);

/* The compute stream and the cuBLAS handle bound to it; fatal before
 * cuda_device_init. */
cudaStream_t stream_cuda(void);
cublasHandle_t cublas_cuda(void);
/* The selected GPU's properties (name, sm, SM count); NULL before
 * cuda_device_init. */
const cudaDeviceProp *device_prop_cuda(void);
/* Device scratch kept for the life of the process, as scratch_cpu: each
 * slot is one buffer that only grows (its contents are not kept when it
 * does). All users run on the compute stream, so a slot is free again as
 * soon as the op that used it has been enqueued; growing one (the first
 * step only) is stream-ordered (cudaFreeAsync, cudaMallocAsync on the
 * compute stream) and waits for nothing. */
typedef enum {
    SCRATCH_CUDA_REDUCE,      /* partial sums: column sums, fp64 sums */
    SCRATCH_CUDA_MATMUL_DOUT, /* matmul_bwd: an fp32 dout block rounded to D */
    SCRATCH_CUDA_MATMUL_ACC,  /* matmul_bwd: dinp accumulating in fp32 */
    SCRATCH_CUDA_ATTENTION,   /* the exact attention: P and dS of one sequence */
    SCRATCH_CUDA_ATTENTION_D, /* the fused attention's backward: D, (B,NH,T) fp32 */
    SCRATCH_CUDA_SORT,        /* embedding_bwd: tokens sorted with positions */
    SCRATCH_CUDA_ADAMW_TABLE, /* adamw_multi_cuda's table (multi_cuda.cu) */
    SCRATCH_CUDA_SUMSQ_TABLE, /* sumsq_multi_cuda's table (multi_cuda.cu) */
    SCRATCH_CUDA_BIAS_GRAD,   /* matmul_bwd: cuBLASLt's bias gradient, before += */
    SCRATCH_CUDA_ATTENTION_CUDNN, /* cuDNN's attention graphs' workspace */
    SCRATCH_CUDA_COMM_WIDE,   /* comm.c's 16-bit reductions widened to fp32 */
    SCRATCH_CUDA_SLOTS
} scratch_slot_cuda;
void *scratch_cuda(scratch_slot_cuda slot, size_t bytes);
/* Returns once event has completed, through cuda_set_wait's hook. */
void wait_event_cuda(cudaEvent_t event, const char *what);

/* Bytes rounded up to the 256 that carve a workspace into aligned parts. */
static inline size_t align256(size_t bytes)
{
    return (bytes + 255) & ~(size_t)255;
}

/* ---- memory (tensor_cuda.cu) ---------------------------------------------- */

/* cast_cuda on a (rows, cols) block: row r of dst starts at element r*ldd,
 * of src at r*lds (as cast_2d_cpu). */
void cast_2d_cuda(void *dst, ops_dtype ddt, int64_t ldd, const void *src,
                  ops_dtype sdt, int64_t lds, int rows, int cols);

/* ---- GEMM (gemm_cuda.cu) --------------------------------------------------- */

/* Row-major C(M,N) = alpha op(A) op(B) + beta C, as gemm_f32_cpu: op(A) is
 * (M,K), op(B) (K,N), trans_* non-zero when the stored matrix is the
 * transpose. A and B have dtype abt, C has ct (abt or fp32); fp32
 * accumulation. With beta == 0 C is not read. */
void gemm_cuda(int trans_a, int trans_b, int M, int N, int K, float alpha,
               const void *A, int lda, const void *B, int ldb, float beta,
               void *C, int ldc, ops_dtype abt, ops_dtype ct);
/* The same for `batch` GEMMs, matrix i at A + i*stride_a elements, etc. */
void gemm_batched_cuda(int trans_a, int trans_b, int M, int N, int K,
                       float alpha, const void *A, int lda, int64_t stride_a,
                       const void *B, int ldb, int64_t stride_b, float beta,
                       void *C, int ldc, int64_t stride_c, int batch,
                       ops_dtype abt, ops_dtype ct);

/* cuBLAS's name for a compute dtype. */
static inline cudaDataType_t blas_type_cuda(ops_dtype dt)
{
    switch (dt) {
    case OPS_BF16: return CUDA_R_16BF;
    case OPS_F16: return CUDA_R_16F;
    default: return CUDA_R_32F;
    }
}

/* ---- GEMMs with an epilogue (gemm_lt_cuda.cu) --------------------------------
 * gemm_cuda's row-major C(M,N) = op(A) op(B) + beta C (alpha 1), with
 * what cuBLASLt applies to the fp32 sum before C is rounded:
 *  LT_BIAS   + bias[j] (N, dtype ct, which must then be abt);
 *  LT_GELU   C = gelu(op(A) op(B) + bias[j]), bias optional, and
 *            aux(M,N) (dtype ct, row stride ldc) = the GELU's input;
 *  LT_DGELU  C = op(A) op(B) * gelu'(aux[i,j]), aux as LT_GELU's;
 *  LT_BGRAD  bias[i] (M, fp32 like C: a gradient) = sum over k of
 *            op(A)[i,k], overwritten: a linear layer's bias gradient
 *            read off the weight gradient's dout^T.
 * Returns 1 when it ran, 0 when cuBLASLt has no algorithm for the case
 * (or before lt_init_cuda): the caller then runs the unfused kernels. */
typedef enum { LT_BIAS, LT_GELU, LT_DGELU, LT_BGRAD } lt_epilogue_kind;
int gemm_lt_cuda(int trans_a, int trans_b, int M, int N, int K, const void *A, int lda,
                 const void *B, int ldb, float beta, void *C, int ldc, ops_dtype abt,
                 ops_dtype ct, lt_epilogue_kind epi, const void *bias, void *aux);
/* The handle and the fixed workspace: by cuda_device_init, and freed with
 * the cached plans by cuda_device_finalize. */
void lt_init_cuda(void);
void lt_finalize_cuda(void);

/* ---- column sums (matmul_cuda.cu) ------------------------------------------ */

/* Deterministic sums over rows, in two passes: pass 1 (per op) writes
 * partial[r*N + j] = sum over the rows of chunk r of column j, rows in
 * order; colsum_chunks gives the number of chunks and the rows per chunk
 * for M rows. colsum_finish_cuda then adds sum_r partial[r*N + j] (r in
 * order) into dst[j]. */
int colsum_chunks(int M, int *rows_per_chunk);
void colsum_finish_cuda(float *dst, const float *partial, int chunks, int N);

/* ---- tables of tensors (multi_cuda.cu) ------------------------------------- */

/* A multi-tensor kernel runs one block per chunk: at most MULTI_CHUNK
 * elements of tensor t from element start. The chunks depend on the
 * tensors' sizes alone, so a sum's partials (and its bits) do not depend
 * on the GPU. */
#define MULTI_CHUNK 32768
typedef struct {
    int64_t start;
    int32_t t, n;
} multi_chunk;
/* A table on the device: the caller's records (one per tensor) and the
 * chunks of all of them, tensor by tensor, in order. */
typedef struct {
    const void *records;
    const multi_chunk *chunks;
    int64_t nchunks;
} multi_table;
/* The device table of `count` records of record_size bytes, tensor i of
 * n[i] elements, kept in scratch slot `slot`: uploaded (one host wait)
 * only when it differs from the last one there, so a training run sends
 * its parameters' table once, on the first step. The records are
 * compared byte for byte: a record type must have no padding. */
multi_table multi_table_cuda(scratch_slot_cuda slot, const void *records,
                             size_t record_size, const int64_t *n, int count);
/* Drops the kept tables (cuda_device_finalize frees the scratch): the
 * next call uploads again, even should a new buffer get the same address. */
void multi_tables_forget_cuda(void);

/* ---- launch sizes ------------------------------------------------------------ */

#define TRI_THREADS 256

/* Threads per block of a column sums' pass-1 kernel (above) whose threads
 * own one of `units` columns or packs of columns each: whole warps, at
 * most TRI_THREADS, so C = 768 in bf16 (96 packs) is one block of 3
 * warps, not 8 with 5 idle. */
static inline unsigned colsum_threads(int units)
{
    int t = (units + 31) / 32 * 32;
    return (unsigned)(t < TRI_THREADS ? (t > 0 ? t : 32) : TRI_THREADS);
}

/* Grid-stride loops cap their grid: enough blocks to fill any GPU. */
#define TRI_MAX_BLOCKS 8192

static inline unsigned grid_for(int64_t n, int threads)
{
    int64_t blocks = (n + threads - 1) / threads;
    if (blocks > TRI_MAX_BLOCKS)
        blocks = TRI_MAX_BLOCKS;
    return (unsigned)(blocks > 0 ? blocks : 1);
}

/* A loop over i in [0, n) that any grid covers, and a launch of kernel on
 * the compute stream with enough blocks for n such iterations. */
#define GRID_STRIDE(i, n)                                                     \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); \
         i += (int64_t)gridDim.x * blockDim.x)

#define LAUNCH(kernel, n, ...)                                                \
    do {                                                                      \
        kernel<<<grid_for((n), TRI_THREADS), TRI_THREADS, 0, stream_cuda()>>>( \
            __VA_ARGS__);                                                     \
        TRI_CHECK_LAUNCH(kernel);                                             \
    } while (0)

/* ---- dtypes ------------------------------------------------------------------ */

/* Element i of a float-family buffer as fp32, and the reverse, through
 * elem.h on the raw 16-bit storage: the same bits as load_f32_cpu and
 * store_f32_cpu. The switch is uniform across a launch. */
static __device__ __forceinline__ float load_f32_cuda(const void *p,
                                                      ops_dtype dt, int64_t i)
{
    switch (dt) {
    case OPS_BF16: return elem_bf16_to_f32(((const uint16_t *)p)[i]);
    case OPS_F16: return elem_f16_to_f32(((const uint16_t *)p)[i]);
    default: return ((const float *)p)[i];
    }
}

static __device__ __forceinline__ void store_f32_cuda(void *p, ops_dtype dt,
                                                      int64_t i, float x)
{
    switch (dt) {
    case OPS_BF16: ((uint16_t *)p)[i] = elem_f32_to_bf16(x); break;
    case OPS_F16: ((uint16_t *)p)[i] = elem_f32_to_f16(x); break;
    default: ((float *)p)[i] = x; break;
    }
}

/* Element size of a float-family dtype, on the host. */
static inline size_t esize_cuda(ops_dtype dt)
{
    return dt == OPS_F32 ? 4 : 2;
}

/* ---- tensor cores -------------------------------------------------------------
 * One warp's 16x8x16 product on the tensor cores (PTX mma.sync m16n8k16,
 * sm_80 and later), 16-bit inputs, fp32 accumulators. The fragments, per
 * lane (g = lane / 4, c = lane % 4; each 32-bit register holds two
 * 16-bit elements, the lower column or row in the low half):
 *   a (16x16, 4 registers): (g, 2c), (g+8, 2c), (g, 2c+8), (g+8, 2c+8),
 *     each with the next column;
 *   b (16x8, 2 registers): rows 2c and 2c+1, then 2c+8 and 2c+9, column g;
 *   d (16x8 fp32, 4 values): (g, 2c), (g, 2c+1), (g+8, 2c), (g+8, 2c+1).
 * tests/cuda_emu/cuda_common.h computes the same product on the host. */

/* d += a b; BF16 picks bf16 inputs, else fp16. */
template <bool BF16>
static __device__ __forceinline__ void mma_16816(float d[4], const uint32_t a[4],
                                                 const uint32_t b[2])
{
    if (BF16)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* lo and hi rounded to the 16-bit dtype (to nearest even, as elem.h),
 * packed as a fragment register: lo in the low half. */
template <bool BF16>
static __device__ __forceinline__ uint32_t pack_16x2(float lo, float hi)
{
    uint32_t r;
    if (BF16) {
        __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
        memcpy(&r, &v, sizeof r);
    } else {
        __half2 v = __floats2half2_rn(lo, hi);
        memcpy(&r, &v, sizeof r);
    }
    return r;
}

/* Two consecutive 16-bit elements at p (4-byte aligned) as a fragment
 * register. */
static __device__ __forceinline__ uint32_t load_16x2(const uint16_t *p)
{
    return *(const uint32_t *)p;
}

/* Two 8x8 matrices of 16-bit elements from shared memory, transposed,
 * one register each, by the warp-collective ldmatrix: lanes 0-7 give the
 * addresses of matrix 0's rows, lanes 8-15 matrix 1's (16-byte aligned;
 * the other lanes' are unused). Lane l receives rows 2*(l%4) and
 * 2*(l%4) + 1 of column l/4 of each (the low half first): an mma B
 * fragment of a matrix stored k-major. Every lane of the warp calls it. */
static __device__ __forceinline__ void ldmatrix_x2_trans(uint32_t r[2], const uint16_t *row)
{
    unsigned a = (unsigned)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(a));
}

/* ---- asynchronous copies to shared memory (sm_80 and up) ------------------
 * cp.async starts a copy of N bytes (16, or 4) from global memory src to
 * shared memory dst without holding the thread: it goes on computing
 * while the copy is in flight. With fill false no byte is read and dst is
 * zeroed (src-size 0; src must still be a valid address). A thread's
 * copies are grouped: cp_async_commit closes the group of those started
 * since the last; cp_async_wait<N> returns once all but its newest N
 * groups have landed in shared memory. Until then dst's contents are
 * undefined, and another thread sees them only after a barrier that
 * follows the wait. 16 bytes go through L2 only (.cg: a streamed tile is
 * not read twice by this SM), 4 bytes through L1 too (.ca, the only kind
 * for them). tests/cuda_emu/cuda_common.h defers the copies to the wait
 * on the host, so that a kernel that reads a tile before waiting for it
 * fails there. */
template <int N>
static __device__ __forceinline__ void cp_async(void *dst, const void *src, bool fill)
{
    static_assert(N == 16 || N == 4, "cp.async copies 16 or 4 bytes here");
    unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    int src_size = fill ? N : 0;
    if (N == 16)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                     :
                     : "r"(d), "l"(src), "r"(src_size)
                     : "memory");
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n"
                     :
                     : "r"(d), "l"(src), "r"(src_size)
                     : "memory");
}

static __device__ __forceinline__ void cp_async_commit(void)
{
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int N>
static __device__ __forceinline__ void cp_async_wait(void)
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/* The two 16-bit elements of a register, widened to fp32: lo the low
 * half (pack_16x2's inverse, exact). */
template <bool BF16>
static __device__ __forceinline__ void unpack_16x2(uint32_t r, float *lo, float *hi)
{
    if (BF16) {
        *lo = __uint_as_float(r << 16);
        *hi = __uint_as_float(r & 0xffff0000u);
    } else {
        __half2 v;
        memcpy(&v, &r, sizeof v);
        float2 f = __half22float2(v);
        *lo = f.x;
        *hi = f.y;
    }
}

/* ---- 16-byte packs -------------------------------------------------------------
 * The bandwidth-bound kernels (cross-entropy, GELU and the other
 * elementwise ops, LayerNorm) move 16 bytes per load or store, 4 fp32 or
 * 8 bf16/fp16 elements, instead of one element through load_f32_cuda's
 * dtype switch: an eighth of the memory instructions for a 16-bit tensor,
 * so the memory system, not the instruction issue, sets the pace. Such a
 * kernel is a template on <DT, VEC>: the dtype is a constant (no switch
 * per element), and VEC is PACK_ELEMS(DT) where packs_fit says the
 * pointers allow, else 1, the scalar fallback, the same code one element
 * at a time. */

/* The storage type of a float-family dtype, widened to fp32 and rounded
 * back as load_f32_cuda and store_f32_cuda do (the same bits). */
template <ops_dtype DT> struct Storage {
    typedef float T;
    static __device__ __forceinline__ float load(T x) { return x; }
    static __device__ __forceinline__ T store(float x) { return x; }
};
template <> struct Storage<OPS_BF16> {
    typedef uint16_t T;
    static __device__ __forceinline__ float load(T x) { return elem_bf16_to_f32(x); }
    static __device__ __forceinline__ T store(float x) { return elem_f32_to_bf16(x); }
};
template <> struct Storage<OPS_F16> {
    typedef uint16_t T;
    static __device__ __forceinline__ float load(T x) { return elem_f16_to_f32(x); }
    static __device__ __forceinline__ T store(float x) { return elem_f32_to_f16(x); }
};

/* VEC elements that one instruction loads or stores: aligned to their
 * size, so a 16-byte pack is one ld.global.v4 / st.global.v4. */
template <ops_dtype DT, int VEC>
struct alignas(VEC * sizeof(typename Storage<DT>::T)) Pack {
    typename Storage<DT>::T e[VEC];
};

/* x = elements [k*VEC, k*VEC + VEC) of p, widened to fp32. */
template <ops_dtype DT, int VEC>
static __device__ __forceinline__ void load_pack(float (&x)[VEC], const void *p, int64_t k)
{
    Pack<DT, VEC> v = ((const Pack<DT, VEC> *)p)[k];
#pragma unroll
    for (int e = 0; e < VEC; e++)
        x[e] = Storage<DT>::load(v.e[e]);
}

/* Elements [k*VEC, k*VEC + VEC) of p = x, rounded to DT. */
template <ops_dtype DT, int VEC>
static __device__ __forceinline__ void store_pack(void *p, int64_t k, const float (&x)[VEC])
{
    Pack<DT, VEC> v;
#pragma unroll
    for (int e = 0; e < VEC; e++)
        v.e[e] = Storage<DT>::store(x[e]);
    ((Pack<DT, VEC> *)p)[k] = v;
}

/* Pack k of a norm's row (layernorm_cuda.cu, llama_cuda.cu) into x: inp's,
 * or with ADD (the residual add inside the norm) the sum inp + addend
 * rounded to DT, stored at pack k of resid and read back, so x is what a
 * norm of resid would read. resid may be inp or addend: the thread reads
 * their pack k before it writes it. */
template <ops_dtype DT, int VEC, bool ADD>
static __device__ __forceinline__ void load_pack_added(float (&x)[VEC], const void *inp,
                                                       const void *addend, void *resid,
                                                       int64_t k)
{
    load_pack<DT, VEC>(x, inp, k);
    if (ADD) {
        float y[VEC];
        load_pack<DT, VEC>(y, addend, k);
#pragma unroll
        for (int e = 0; e < VEC; e++)
            x[e] += y[e];
        store_pack<DT, VEC>(resid, k, x);
        load_pack<DT, VEC>(x, resid, k);
    }
}

/* Pass 1 of the packed column sums (LayerNorm's dw, db, the bias
 * gradient, RMSNorm's dw): the share of thread k of the grid's x, which
 * owns pack k of VEC columns, over the rows of chunk blockIdx.y (rpc
 * rows, the last chunk ending at row N). For each of those rows i, in
 * order, add_row(i, k, sums) adds row i's terms into the thread's S sums
 * of VEC columns (float (&)[S][VEC], from zero); then sum s of column
 * k * VEC + e lands at partial[s][blockIdx.y * ncols + k * VEC + e]. A
 * thread past the last pack does nothing. So every column's sums run
 * over the same rows in the same order as a kernel a column a thread:
 * the same bits, whatever VEC. */
template <int VEC, int S, typename AddRow>
static __device__ __forceinline__ void colsum_pack_pass(float *const (&partial)[S], int ncols,
                                                        int N, int rpc, AddRow add_row)
{
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= ncols / VEC)
        return;
    int i0 = blockIdx.y * rpc;
    int i1 = i0 + rpc < N ? i0 + rpc : N;
    float sums[S][VEC];
#pragma unroll
    for (int s = 0; s < S; s++)
#pragma unroll
        for (int e = 0; e < VEC; e++)
            sums[s][e] = 0.0f;
#pragma unroll 4
    for (int i = i0; i < i1; i++)
        add_row(i, k, sums);
    int64_t at = (int64_t)blockIdx.y * ncols + (int64_t)k * VEC;
#pragma unroll
    for (int s = 0; s < S; s++)
#pragma unroll
        for (int e = 0; e < VEC; e++)
            partial[s][at + e] = sums[s][e];
}

/* Elements of dtype dt in 16 bytes, on the host. */
static inline int pack_elems(ops_dtype dt)
{
    return (int)(16 / esize_cuda(dt));
}

/* Whether every pointer given is 16-byte aligned (NULL passes), on the host. */
static inline int aligned16(const void *a, const void *b = NULL,
                            const void *c = NULL, const void *d = NULL)
{
    uintptr_t bits = (uintptr_t)a | (uintptr_t)b | (uintptr_t)c | (uintptr_t)d;
    return (bits & 15) == 0;
}

/* Whether rows of `row` elements of dtype dt, laid end to end from each
 * pointer, can all be read in 16-byte packs: the pointers aligned and a
 * row a whole number of packs, so every row starts aligned too. */
static inline int packs_fit(ops_dtype dt, int64_t row, const void *a,
                            const void *b = NULL, const void *c = NULL,
                            const void *d = NULL)
{
    return aligned16(a, b, c, d) && row % pack_elems(dt) == 0;
}

/* Runs LAUNCH(DT, VEC), a launch macro of the caller's, with the dtype dt
 * as a template constant, and VEC 16 bytes of elements when `packed`,
 * else 1. */
#define DISPATCH_PACKED(dt, packed, LAUNCH)                                   \
    do {                                                                      \
        switch (dt) {                                                         \
        case OPS_BF16:                                                        \
            if (packed) { LAUNCH(OPS_BF16, 8); } else { LAUNCH(OPS_BF16, 1); } \
            break;                                                            \
        case OPS_F16:                                                         \
            if (packed) { LAUNCH(OPS_F16, 8); } else { LAUNCH(OPS_F16, 1); }  \
            break;                                                            \
        default:                                                              \
            if (packed) { LAUNCH(OPS_F32, 4); } else { LAUNCH(OPS_F32, 1); }  \
            break;                                                            \
        }                                                                     \
    } while (0)

/* ---- reductions ---------------------------------------------------------------- */

struct SumOp {
    template <typename T> __device__ T operator()(T a, T b) const { return a + b; }
};
/* Comparison, not fmaxf, as the CPU's `row[j] > m ? row[j] : m`. */
struct MaxOp {
    template <typename T> __device__ T operator()(T a, T b) const { return b > a ? b : a; }
};

/* Every lane gets op over the warp's 32 values (xor butterfly). */
template <typename T, typename Op>
static __device__ __forceinline__ T warp_allreduce(T v, Op op)
{
    for (int off = 16; off > 0; off >>= 1)
        v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}

/* Every thread gets op over the block's values. blockDim.x must be a
 * multiple of 32 and every thread of the block must call it. */
template <typename T, typename Op>
static __device__ T block_allreduce(T v, Op op, T identity)
{
    __shared__ T part[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int nwarps = blockDim.x >> 5;
    v = warp_allreduce(v, op);
    __syncthreads(); /* part[] may still be read by a previous call */
    if (lane == 0)
        part[warp] = v;
    __syncthreads();
    v = lane < nwarps ? part[lane] : identity;
    return warp_allreduce(v, op);
}

#endif
