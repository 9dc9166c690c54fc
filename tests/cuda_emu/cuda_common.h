/*
 * cuda_emu/cuda_common.h - just enough of CUDA, on the host, to run
 * kernels/cuda/attention_cuda.cu's and attention_mma_cuda.cu's kernels as
 * written (tests/t_attention_emu; t_fused_emu runs xent_cuda.cu's and
 * embedding_cuda.cu's).
 *
 * It stands in for kernels/cuda/cuda_common.h: the test compiles a copy of
 * the kernel file's device code (up to its launches) with this directory
 * first on the include path. Each CUDA thread of a block is a fiber (its
 * own stack and registers) on one host thread, and the fibers take turns:
 * one runs until it waits at a barrier, then the next (in a fixed order,
 * so a run is reproducible; on 2 shared cores, 128 host threads per block
 * spent most of the test's time waking each other up). __syncthreads is a
 * barrier of the block's threads, __shfl_sync an
 * exchange through one slot per lane between two barriers of the warp's,
 * __shared__ a static (one block runs at a time). The loads, stores and
 * warp reductions are cuda_common.h's, on the host. A tensor-core mma is
 * an exchange too: every lane of the warp posts its fragments, and each
 * computes its four results from the whole 16x16 and 16x8 operands it
 * reads back by the PTX manual's fragment layouts (those cuda_common.h
 * states), summing in fp32; an ldmatrix likewise, each lane posting its
 * row's address and reading its elements from the rows posted; a
 * cp.async copy is deferred to its thread's wait (below). So every
 * index, mask, tile bound, fragment
 * layout and synchronisation of the kernels runs; what does not is the
 * hardware: a race that a barrier here hides (between two barriers the
 * fibers run one after another, in turn), warp-synchronous
 * assumptions, nvcc's fused multiply-adds, the tensor cores' own order of
 * additions.
 */
#ifndef TRI_TESTS_CUDA_EMU_CUDA_COMMON_H
#define TRI_TESTS_CUDA_EMU_CUDA_COMMON_H

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <vector>

extern "C" {
#include "kernels/elem.h"
#include "kernels/ops.h"
}

#define ATTENTION_MAX_HS_CUDA 128
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(threads)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
using std::max;
using std::min;

struct uint4 {
    unsigned x, y, z, w;
};
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w)
{
    return uint4{ x, y, z, w };
}

struct EmuDim {
    unsigned x, y; /* y: 0, grids of one row of blocks (t_fused_emu) */
};
/* the running fiber's thread (the switch sets it) and the block */
extern EmuDim threadIdx, blockIdx;
extern EmuDim blockDim;
/* A barrier of `expected` fibers: each arrival but the last lets the
 * other fibers run until the last one arrives (fibers.h). */
struct EmuBarrier {
    int expected, arrived;
    unsigned phase;
    void arrive_and_wait();
};
/* the running block's barriers: the block, and each of its 4 warps */
extern EmuBarrier *emu_block_barrier;
extern EmuBarrier *emu_warp_barrier[4];
extern float emu_warp_slot[4][32];
/* each warp's posted mma fragments, per lane */
struct EmuMma {
    uint32_t a[32][4], b[32][2];
};
extern EmuMma emu_mma[4];
/* each warp's posted ldmatrix row addresses, per lane */
struct EmuLdm {
    const uint16_t *row[32];
};
extern EmuLdm emu_ldm[4];

inline void __syncthreads()
{
    emu_block_barrier->arrive_and_wait();
}

inline float __shfl_sync(unsigned mask, float v, int src_lane)
{
    (void)mask;
    int w = threadIdx.x / 32;
    emu_warp_barrier[w]->arrive_and_wait(); /* the previous exchange is read */
    emu_warp_slot[w][threadIdx.x % 32] = v;
    emu_warp_barrier[w]->arrive_and_wait();
    return emu_warp_slot[w][src_lane];
}

inline float __shfl_xor_sync(unsigned mask, float v, int lane_mask)
{
    return __shfl_sync(mask, v, (int)(threadIdx.x % 32) ^ lane_mask);
}

/* A double (block_allreduce's fp64 sums) as two exchanges of its halves'
 * bits: declared before warp_allreduce, which would otherwise round it to
 * float. */
inline double __shfl_xor_sync(unsigned mask, double v, int lane_mask)
{
    float half[2];
    memcpy(half, &v, sizeof v);
    half[0] = __shfl_xor_sync(mask, half[0], lane_mask);
    half[1] = __shfl_xor_sync(mask, half[1], lane_mask);
    memcpy(&v, half, sizeof v);
    return v;
}

static inline float load_f32_cuda(const void *p, ops_dtype dt, int64_t i)
{
    switch (dt) {
    case OPS_BF16: return elem_bf16_to_f32(((const uint16_t *)p)[i]);
    case OPS_F16: return elem_f16_to_f32(((const uint16_t *)p)[i]);
    default: return ((const float *)p)[i];
    }
}

static inline void store_f32_cuda(void *p, ops_dtype dt, int64_t i, float x)
{
    switch (dt) {
    case OPS_BF16: ((uint16_t *)p)[i] = elem_f32_to_bf16(x); break;
    case OPS_F16: ((uint16_t *)p)[i] = elem_f32_to_f16(x); break;
    default: ((float *)p)[i] = x; break;
    }
}

/* ---- tensor cores, as kernels/cuda/cuda_common.h's ---- */

static inline uint32_t load_16x2(const uint16_t *p)
{
    uint32_t r;
    memcpy(&r, p, sizeof r);
    return r;
}

template <bool BF16> static inline uint32_t pack_16x2(float lo, float hi)
{
    uint16_t l = BF16 ? elem_f32_to_bf16(lo) : elem_f32_to_f16(lo);
    uint16_t h = BF16 ? elem_f32_to_bf16(hi) : elem_f32_to_f16(hi);
    return (uint32_t)l | (uint32_t)h << 16;
}

template <bool BF16> static inline void unpack_16x2(uint32_t r, float *lo, float *hi)
{
    uint16_t l = (uint16_t)(r & 0xffffu), h = (uint16_t)(r >> 16);
    *lo = BF16 ? elem_bf16_to_f32(l) : elem_f16_to_f32(l);
    *hi = BF16 ? elem_bf16_to_f32(h) : elem_f16_to_f32(h);
}

/* ldmatrix .x2 .trans as the PTX manual distributes it
 * (kernels/cuda/cuda_common.h): every lane posts its row address, then
 * takes its elements from the rows lanes 0-15 posted. */
static inline void ldmatrix_x2_trans(uint32_t r[2], const uint16_t *row)
{
    int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    EmuLdm &x = emu_ldm[w];
    emu_warp_barrier[w]->arrive_and_wait(); /* the previous exchange is read */
    x.row[lane] = row;
    emu_warp_barrier[w]->arrive_and_wait();
    for (int m = 0; m < 2; m++) {
        const uint16_t *const *rows = x.row + 8 * m;
        uint16_t lo = rows[2 * (lane % 4)][lane / 4], hi = rows[2 * (lane % 4) + 1][lane / 4];
        r[m] = (uint32_t)lo | (uint32_t)hi << 16;
    }
}

/* ---- cp.async, as kernels/cuda/cuda_common.h's, deferred ----
 * A copy is queued in its thread's open group and its destination filled
 * with 0xff bytes (NaN in fp32, bf16 and fp16: undefined until the wait);
 * cp_async_commit closes the group; cp_async_wait<N> performs all of the
 * thread's groups but the newest N, oldest first (fill false: zeros). So
 * a tile read before its thread waited, or before the barrier after every
 * thread's wait, is NaN or an older tile, and a buffer refilled while
 * another warp still reads it is NaN there: the check fails either way.
 * launch (t_attention_emu.cpp) empties the queues of each block and fails
 * a block that ends with a copy it never waited for. */
struct EmuCopy {
    void *dst;
    const void *src;
    int bytes, src_bytes;
};
struct EmuAsync {
    std::vector<EmuCopy> open;
    std::deque<std::vector<EmuCopy>> groups;
};
extern EmuAsync emu_async[128];

template <int N> static inline void cp_async(void *dst, const void *src, bool fill)
{
    static_assert(N == 16 || N == 4, "cp.async copies 16 or 4 bytes here");
    memset(dst, 0xff, N);
    emu_async[threadIdx.x].open.push_back(EmuCopy{ dst, src, N, fill ? N : 0 });
}

static inline void cp_async_commit()
{
    EmuAsync &q = emu_async[threadIdx.x];
    q.groups.push_back(std::move(q.open));
    q.open.clear();
}

template <int N> static inline void cp_async_wait()
{
    EmuAsync &q = emu_async[threadIdx.x];
    while ((int)q.groups.size() > N) {
        for (const EmuCopy &c : q.groups.front()) {
            memcpy(c.dst, c.src, (size_t)c.src_bytes);
            memset((char *)c.dst + c.src_bytes, 0, (size_t)(c.bytes - c.src_bytes));
        }
        q.groups.pop_front();
    }
}

/* half `k % 2` of register r of lane `lane`'s posted fragment, widened */
template <bool BF16> static inline float emu_frag(uint32_t reg, int k)
{
    uint16_t h = (uint16_t)(k % 2 ? reg >> 16 : reg & 0xffffu);
    return BF16 ? elem_bf16_to_f32(h) : elem_f16_to_f32(h);
}

template <bool BF16>
static inline void mma_16816(float d[4], const uint32_t a[4], const uint32_t b[2])
{
    int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    EmuMma &x = emu_mma[w];
    emu_warp_barrier[w]->arrive_and_wait(); /* the previous exchange is read */
    memcpy(x.a[lane], a, sizeof x.a[lane]);
    memcpy(x.b[lane], b, sizeof x.b[lane]);
    emu_warp_barrier[w]->arrive_and_wait();
    for (int e = 0; e < 4; e++) {
        int row = lane / 4 + 8 * (e / 2), col = 2 * (lane % 4) + e % 2;
        float sum = 0.0f;
        for (int k = 0; k < 16; k++) {
            /* A (row, k): lane (row % 8) * 4 + (k % 8) / 2, register
             * (row >= 8) + 2 (k >= 8); B (k, col): lane col * 4 + (k % 8) / 2,
             * register k >= 8 */
            float av = emu_frag<BF16>(x.a[row % 8 * 4 + k % 8 / 2][(row >= 8) + 2 * (k >= 8)], k);
            float bv = emu_frag<BF16>(x.b[col * 4 + k % 8 / 2][k >= 8], k);
            sum += av * bv;
        }
        d[e] += sum;
    }
}

struct SumOp {
    template <typename T> T operator()(T a, T b) const { return a + b; }
};
struct MaxOp {
    template <typename T> T operator()(T a, T b) const { return b > a ? b : a; }
};

template <typename T, typename Op> static inline T warp_allreduce(T v, Op op)
{
    for (int off = 16; off > 0; off >>= 1)
        v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}

#endif
