/*
 * elementwise_cuda.cu - GELU, add, accumulate, scale, clip, and the sums
 * (of squares) into an fp64 accumulator on the device.
 *
 * Run on an NVIDIA H100 on 2026-11-27 (bench/gpu_check.sh, the code of
 * commit ac94e32): t_ops_cuda 644 ok, t_gpu 5 ok. Not run on a GPU since:
 * sumsq_multi_cuda and sum_finish_kernel's loop over more than
 * SUM_MAX_BLOCKS partials (tests/t_optim_emu runs them on the host).
 *
 * The twin of elementwise_cpu.c: math from elem.h, loads and stores in
 * the tensor's dtype with fp32 in between. Every op but the sums is one
 * map over flat arrays, out[i] = f(a[i]) or f(a[i], b[i]): a grid-stride
 * loop over 16-byte packs (cuda_common.h) when every pointer is 16-byte
 * aligned, then the last n % 8 (or % 4) elements one at a time; one
 * element at a time throughout otherwise. The bytes are the floor:
 * GELU's forward reads inp and writes out, its backward reads inp and
 * dout and writes dinp, 4 and 6 bytes an element in bf16; a pack per
 * instruction lets a 16-bit tensor reach the bandwidth that 2-byte loads
 * through a dtype switch could not. Aliasing that ops.h allows
 * (gelu_bwd's dinp = dout, add's out = a or b) is safe because each pack
 * is read and then written by the same thread; no pointer here is
 * __restrict__.
 *
 * The sums run in two passes, deterministically: a grid whose size depends
 * only on n writes one fp64 partial per block (a fixed grid-stride share,
 * reduced by a fixed butterfly), then one block adds the partials in a
 * fixed tree and adds the total to *acc. Like block_sum on the CPU, a
 * non-finite element makes the sum non-finite: the overflow check.
 */
#include "cuda_common.h"

#include <stdlib.h>

/* out = f(a) over n elements: the whole packs, then the tail alone. */
template <ops_dtype DT, int VEC, typename F>
static __global__ void map1_kernel(void *out, const void *a, int64_t n, F f)
{
    GRID_STRIDE(k, n / VEC) {
        float x[VEC];
        load_pack<DT, VEC>(x, a, k);
#pragma unroll
        for (int e = 0; e < VEC; e++)
            x[e] = f(x[e]);
        store_pack<DT, VEC>(out, k, x);
    }
    GRID_STRIDE(r, n % VEC) {
        int64_t i = n / VEC * VEC + r;
        float x[1];
        load_pack<DT, 1>(x, a, i);
        x[0] = f(x[0]);
        store_pack<DT, 1>(out, i, x);
    }
}

/* out = f(a, b) over n elements, the same way. */
template <ops_dtype DT, int VEC, typename F>
static __global__ void map2_kernel(void *out, const void *a, const void *b,
                                   int64_t n, F f)
{
    GRID_STRIDE(k, n / VEC) {
        float x[VEC], y[VEC];
        load_pack<DT, VEC>(x, a, k);
        load_pack<DT, VEC>(y, b, k);
#pragma unroll
        for (int e = 0; e < VEC; e++)
            x[e] = f(x[e], y[e]);
        store_pack<DT, VEC>(out, k, x);
    }
    GRID_STRIDE(r, n % VEC) {
        int64_t i = n / VEC * VEC + r;
        float x[1], y[1];
        load_pack<DT, 1>(x, a, i);
        load_pack<DT, 1>(y, b, i);
        x[0] = f(x[0], y[0]);
        store_pack<DT, 1>(out, i, x);
    }
}

template <typename F>
static void map1(void *out, const void *a, ops_dtype dt, int64_t n, F f)
{
    if (n <= 0)
        return;
#define MAP1(DT, VEC)                                                         \
    map1_kernel<DT, VEC><<<grid_for((n + (VEC) - 1) / (VEC), TRI_THREADS),    \
                           TRI_THREADS, 0, stream_cuda()>>>(out, a, n, f)
    DISPATCH_PACKED(dt, aligned16(out, a), MAP1);
#undef MAP1
    TRI_CHECK_LAUNCH(map1_kernel);
}

template <typename F>
static void map2(void *out, const void *a, const void *b, ops_dtype dt,
                 int64_t n, F f)
{
    if (n <= 0)
        return;
#define MAP2(DT, VEC)                                                         \
    map2_kernel<DT, VEC><<<grid_for((n + (VEC) - 1) / (VEC), TRI_THREADS),    \
                           TRI_THREADS, 0, stream_cuda()>>>(out, a, b, n, f)
    DISPATCH_PACKED(dt, aligned16(out, a, b), MAP2);
#undef MAP2
    TRI_CHECK_LAUNCH(map2_kernel);
}

/* The element functions, as functors (a kernel's template argument). */
struct GeluFwd {
    __device__ float operator()(float x) const { return elem_gelu(x); }
};
struct GeluBwd { /* (inp, dout) */
    __device__ float operator()(float x, float g) const { return elem_gelu_grad(x) * g; }
};
struct Add {
    __device__ float operator()(float a, float b) const { return a + b; }
};
struct Scale {
    float s;
    __device__ float operator()(float x) const { return x * s; }
};
struct Clip {
    float c;
    /* comparisons, not fminf/fmaxf: a NaN must survive for the overflow check */
    __device__ float operator()(float v) const { return v > c ? c : v < -c ? -c : v; }
};

void gelu_fwd_cuda(void *out, const void *inp, ops_dtype dt, int64_t n)
{
    map1(out, inp, dt, n, GeluFwd());
}

void gelu_bwd_cuda(void *dinp, const void *inp, const void *dout,
                   ops_dtype dt, int64_t n)
{
    // dinp may alias dout: each pack is read before it is written
    map2(dinp, inp, dout, dt, n, GeluBwd());
}

void add_cuda(void *out, const void *a, const void *b, ops_dtype dt,
              int64_t n)
{
    map2(out, a, b, dt, n, Add());
}

void accumulate_cuda(void *y, const void *x, ops_dtype dt, int64_t n)
{
    map2(y, y, x, dt, n, Add());
}

void scale_cuda(void *x, float s, ops_dtype dt, int64_t n)
{
    map1(x, x, dt, n, Scale{ s });
}

void clip_value_cuda(void *x, float c, ops_dtype dt, int64_t n)
{
    map1(x, x, dt, n, Clip{ c });
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

/* *acc += the sum of partial[0..blocks), one block of SUM_MAX_BLOCKS:
 * thread t adds partials t, t + SUM_MAX_BLOCKS, ... in order (one, for
 * reduce_into's grids), then the block's fixed tree adds the threads. */
static __global__ void sum_finish_kernel(double *acc, const double *partial,
                                         int64_t blocks)
{
    double s = (int64_t)threadIdx.x < blocks ? partial[threadIdx.x] : 0.0;
    for (int64_t k = threadIdx.x + blockDim.x; k < blocks; k += blockDim.x)
        s += partial[k];
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

/* ---- the sum of squares of many tensors in one launch ---------------------- */

/* One tensor of sumsq_multi_cuda's table, on the device; no padding
 * bytes, as AdamwRecord (the table is compared byte for byte). */
struct SumsqRecord {
    const void *x;
    ops_dtype dt;
    int32_t zero;
};
static_assert(sizeof(SumsqRecord) == sizeof(void *) + 8, "SumsqRecord has padding");

/* partial[c] = the sum of squares of chunk c, in fp64; one block a chunk. */
static __global__ void sumsq_multi_partial_kernel(double *partial, const SumsqRecord *rec,
                                                  const multi_chunk *chunks)
{
    multi_chunk ch = chunks[blockIdx.x];
    SumsqRecord r = rec[ch.t];
    double s = 0.0;
    for (int64_t i = ch.start + threadIdx.x; i < ch.start + ch.n; i += blockDim.x) {
        double v = (double)load_f32_cuda(r.x, r.dt, i);
        s += v * v;
    }
    s = block_allreduce(s, SumOp(), 0.0);
    if (threadIdx.x == 0)
        partial[blockIdx.x] = s;
}

void sumsq_multi_cuda(double *acc, const ops_tensor *x, int count)
{
    SumsqRecord *rec = (SumsqRecord *)calloc((size_t)count, sizeof *rec);
    int64_t *n = (int64_t *)calloc((size_t)count, sizeof *n);
    if (!rec || !n)
        ops_fatalf(__FILE__, __LINE__, "sumsq_multi_cuda: out of host memory (%d tensors)", count);
    for (int i = 0; i < count; i++) {
        rec[i] = SumsqRecord{ x[i].data, x[i].dtype, 0 };
        n[i] = x[i].n;
    }
    multi_table t = multi_table_cuda(SCRATCH_CUDA_SUMSQ_TABLE, rec, sizeof *rec, n, count);
    free(rec);
    free(n);
    if (t.nchunks == 0)
        return;
    double *partial = (double *)scratch_cuda(SCRATCH_CUDA_REDUCE,
                                              (size_t)t.nchunks * sizeof(double));
    cudaStream_t s = stream_cuda();
    sumsq_multi_partial_kernel<<<(unsigned)t.nchunks, TRI_THREADS, 0, s>>>(
        partial, (const SumsqRecord *)t.records, t.chunks);
    TRI_CHECK_LAUNCH(sumsq_multi_partial_kernel);
    sum_finish_kernel<<<1, SUM_MAX_BLOCKS, 0, s>>>(acc, partial, t.nchunks);
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
