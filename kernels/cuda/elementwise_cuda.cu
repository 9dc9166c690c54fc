/*
 * elementwise_cuda.cu - GELU, add, accumulate, scale, clip, and the sums
 * (of squares) into an fp64 accumulator on the device.
 *
 * The twin of elementwise_cpu.c: grid-stride loops over flat arrays, math
 * from elem.h, loads and stores in the tensor's dtype with fp32 in
 * between. Aliasing that ops.h allows (gelu_bwd's dinp = dout, add's out =
 * a or b) is safe because each element is read and then written by the
 * same thread; no pointer here is __restrict__.
 *
 * The sums run in two passes, deterministically: a grid whose size depends
 * only on n writes one fp64 partial per block (a fixed grid-stride share,
 * reduced by a fixed butterfly), then one block adds the partials in a
 * fixed tree and adds the total to *acc. Like block_sum on the CPU, a
 * non-finite element makes the sum non-finite: the overflow check.
 */
#include "cuda_common.h"

#define GRID_STRIDE(i, n)                                                     \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); \
         i += (int64_t)gridDim.x * blockDim.x)

#define LAUNCH(kernel, n, ...)                                                \
    do {                                                                      \
        kernel<<<grid_for((n), TRI_THREADS), TRI_THREADS, 0, stream_cuda()>>>( \
            __VA_ARGS__);                                                     \
        TRI_CHECK_LAUNCH(kernel);                                             \
    } while (0)

static __global__ void gelu_fwd_kernel(void *out, const void *inp, int64_t n,
                                       ops_dtype dt)
{
    GRID_STRIDE(i, n)
        store_f32_cuda(out, dt, i, elem_gelu(load_f32_cuda(inp, dt, i)));
}

void gelu_fwd_cuda(void *out, const void *inp, ops_dtype dt, int64_t n)
{
    if (n > 0)
        LAUNCH(gelu_fwd_kernel, n, out, inp, n, dt);
}

static __global__ void gelu_bwd_kernel(void *dinp, const void *inp,
                                       const void *dout, int64_t n, ops_dtype dt)
{
    // dinp may alias dout: each element is read before it is written
    GRID_STRIDE(i, n) {
        float g = elem_gelu_grad(load_f32_cuda(inp, dt, i)) * load_f32_cuda(dout, dt, i);
        store_f32_cuda(dinp, dt, i, g);
    }
}

void gelu_bwd_cuda(void *dinp, const void *inp, const void *dout,
                   ops_dtype dt, int64_t n)
{
    if (n > 0)
        LAUNCH(gelu_bwd_kernel, n, dinp, inp, dout, n, dt);
}

static __global__ void add_kernel(void *out, const void *a, const void *b,
                                  int64_t n, ops_dtype dt)
{
    GRID_STRIDE(i, n)
        store_f32_cuda(out, dt, i, load_f32_cuda(a, dt, i) + load_f32_cuda(b, dt, i));
}

void add_cuda(void *out, const void *a, const void *b, ops_dtype dt,
              int64_t n)
{
    if (n > 0)
        LAUNCH(add_kernel, n, out, a, b, n, dt);
}

static __global__ void accumulate_kernel(void *y, const void *x, int64_t n,
                                         ops_dtype dt)
{
    GRID_STRIDE(i, n)
        store_f32_cuda(y, dt, i, load_f32_cuda(y, dt, i) + load_f32_cuda(x, dt, i));
}

void accumulate_cuda(void *y, const void *x, ops_dtype dt, int64_t n)
{
    if (n > 0)
        LAUNCH(accumulate_kernel, n, y, x, n, dt);
}

static __global__ void scale_kernel(void *x, float s, int64_t n, ops_dtype dt)
{
    GRID_STRIDE(i, n)
        store_f32_cuda(x, dt, i, load_f32_cuda(x, dt, i) * s);
}

void scale_cuda(void *x, float s, ops_dtype dt, int64_t n)
{
    if (n > 0)
        LAUNCH(scale_kernel, n, x, s, n, dt);
}

static __global__ void clip_value_kernel(void *x, float c, int64_t n,
                                         ops_dtype dt)
{
    // comparisons, not fminf/fmaxf: a NaN must survive for the overflow check
    GRID_STRIDE(i, n) {
        float v = load_f32_cuda(x, dt, i);
        store_f32_cuda(x, dt, i, v > c ? c : v < -c ? -c : v);
    }
}

void clip_value_cuda(void *x, float c, ops_dtype dt, int64_t n)
{
    if (n > 0)
        LAUNCH(clip_value_kernel, n, x, c, n, dt);
}

/* ---- sums into an fp64 accumulator ------------------------------------- */

/* elements per thread in the first pass, and the most partials (= the
 * threads of the second pass's single block) */
#define SUM_PER_THREAD 8
#define SUM_MAX_BLOCKS 1024

/* partial[blockIdx.x] = this block's share of sum x (or x^2), in fp64 */
static __global__ void sum_partial_kernel(double *partial, const void *x,
                                          int64_t n, ops_dtype dt, int square)
{
    double s = 0.0;
    GRID_STRIDE(i, n) {
        double v = (double)load_f32_cuda(x, dt, i);
        s += square ? v * v : v;
    }
    s = block_allreduce(s, SumOp(), 0.0);
    if (threadIdx.x == 0)
        partial[blockIdx.x] = s;
}

/* *acc += the sum of partial[0..blocks), one block of SUM_MAX_BLOCKS */
static __global__ void sum_finish_kernel(double *acc, const double *partial,
                                         int blocks)
{
    double s = (int)threadIdx.x < blocks ? partial[threadIdx.x] : 0.0;
    s = block_allreduce(s, SumOp(), 0.0);
    if (threadIdx.x == 0)
        *acc += s;
}

static void reduce_into(double *acc, const void *x, int64_t n, ops_dtype dt,
                        int square)
{
    if (n <= 0)
        return;
    /* the grid depends on n alone, so the bits do not depend on the GPU */
    int64_t want = (n + TRI_THREADS * SUM_PER_THREAD - 1) / (TRI_THREADS * SUM_PER_THREAD);
    int blocks = want < SUM_MAX_BLOCKS ? (int)want : SUM_MAX_BLOCKS;
    double *partial = (double *)scratch_cuda(SCRATCH_CUDA_REDUCE,
                                              (size_t)blocks * sizeof(double));
    cudaStream_t s = stream_cuda();
    sum_partial_kernel<<<blocks, TRI_THREADS, 0, s>>>(partial, x, n, dt, square);
    TRI_CHECK_LAUNCH(sum_partial_kernel);
    sum_finish_kernel<<<1, SUM_MAX_BLOCKS, 0, s>>>(acc, partial, blocks);
    TRI_CHECK_LAUNCH(sum_finish_kernel);
}

void sumsq_accumulate_cuda(double *acc, const void *x, ops_dtype dt, int64_t n)
{
    reduce_into(acc, x, n, dt, 1);
}

void sum_accumulate_cuda(double *acc, const void *x, ops_dtype dt, int64_t n)
{
    reduce_into(acc, x, n, dt, 0);
}
