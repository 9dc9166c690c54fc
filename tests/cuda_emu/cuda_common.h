/*
 * cuda_emu/cuda_common.h - just enough of CUDA, on the host, to run
 * kernels/cuda/attention_cuda.cu's kernels as written (tests/t_attention_emu).
 *
 * It stands in for kernels/cuda/cuda_common.h: the test compiles a copy of
 * the kernel file's device code (up to its launches) with this directory
 * first on the include path. Each CUDA thread of a block is a host thread;
 * __syncthreads is a barrier of the block's threads, __shfl_sync an
 * exchange through one slot per lane between two barriers of the warp's,
 * __shared__ a static (one block runs at a time). The loads, stores and
 * warp reductions are cuda_common.h's, on the host. So every index, mask,
 * tile bound and synchronisation of the kernels runs; what does not is
 * the hardware: a race that a barrier here hides, warp-synchronous
 * assumptions, nvcc's fused multiply-adds.
 */
#ifndef TRI_TESTS_CUDA_EMU_CUDA_COMMON_H
#define TRI_TESTS_CUDA_EMU_CUDA_COMMON_H

#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdint>

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
using std::min;

struct EmuDim {
    unsigned x;
};
extern thread_local EmuDim threadIdx, blockIdx;
extern EmuDim blockDim;
/* the running block's barriers: the block, and each of its 4 warps */
extern std::barrier<> *emu_block_barrier;
extern std::barrier<> *emu_warp_barrier[4];
extern float emu_warp_slot[4][32];

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
