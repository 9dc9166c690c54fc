/*
 * gemm_bf16_pairs.h - trident's own bf16 GEMM, written once for every
 * vector ISA that multiplies bf16 in pairs.
 *
 *   C(M,N) fp32 [+]= op(A)(M,K) . op(B)(K,N),  A and B bf16, op = transpose
 *   or not, every product exact and accumulated in fp32.
 *
 * AVX512_BF16's vdpbf16ps adds to each fp32 lane two bf16 products, of
 * elements k and k+1. So both operands are packed in k-pairs: one 32-bit
 * word holds elements 2p (low half) and 2p+1 (high half) of a row of op(A)
 * or a column of op(B). The loops are the usual ones of a blocked GEMM
 * (BLIS's): a panel of op(B) of KC x NC is packed into slivers NR columns
 * wide, every thread packs blocks of MC rows of op(A) into slivers MR rows
 * tall, and a micro-tile of MR x NR keeps its accumulators in registers for
 * the whole panel depth. Odd K and ragged edges are packed as zeros, and
 * the micro-tile of an edge runs into a local tile whose valid part is
 * copied out.
 *
 * Each element's products are summed from zero over a panel of KC, in k
 * order, the high product of a pair before the low one, and the panel's
 * sum is added to C once: a sum of small gradients lands on a large
 * accumulated weight gradient with one rounding, not one per product, as
 * an sgemm's beta = 1 does. Nothing depends on the thread count, and the
 * portable twins compute the same bits as a plain loop with the same KC
 * (t_gemm_bf16).
 *
 * The including file first defines the ISA's layer (gemm_bf16_avx512.c,
 * which t_gemm_bf16 also compiles on plain-C intrinsics, and
 * gemm_bf16_avx2.c):
 *   BF16_VW            fp32 lanes in a vector
 *   BF16_MR, BF16_NV   the micro-tile: MR rows, NV vectors across
 *   bf16_acc           VW fp32 accumulators
 *   bf16_bvec          VW k-pairs of op(B), as the ISA multiplies them
 *   bf16_apair         one k-pair of op(A), broadcast
 *   acc_zero, acc_load, acc_store, acc_add, bvec_load, apair_bcast,
 *   acc_dot(c, a, b)   c[i] += a.hi * b[i].hi, then += a.lo * b[i].lo
 * and BF16_GEMM_FN, the name of the function this file defines.
 *
 * Not collective. Call from outside parallel regions (inside one it runs
 * on the calling thread), like the rest of gemm_cpu: the packed panels
 * live in scratch_cpu's GEMM slots.
 */
#include <omp.h>
#include <stdint.h>
#include <string.h>

#include "cpu.h"

#define BF16_NR (BF16_VW * BF16_NV)
/* Block sizes. KC elements of K (KC / 2 pairs) keep an NR-wide sliver of
 * op(B) and an MC x KC block of op(A) in the core's caches; NC columns of
 * op(B) are one packed panel. The test shrinks them to reach every loop. */
#ifndef BF16_KC
#define BF16_KC 256
#endif
#ifndef BF16_MC
#define BF16_MC (BF16_MR * 24)
#endif
#ifndef BF16_NC
#define BF16_NC 4096
#endif
#define BF16_KP (BF16_KC / 2)

/* Pairs [p0, p0+kp) that have both halves inside K; a last one past
 * them (odd K) has element K-1 alone. */
static inline int full_pairs(int K, int p0, int kp)
{
    int full = K / 2 - p0;
    return full < kp ? full : kp;
}

/* Along memory: out[p * stride] = the pair (x[2p], x[2p+1]) for p in
 * [0, kp), x[2p+1] taken as zero past K (x starts at element 2*p0). */
static inline void pairs_along(uint32_t *out, int stride, const uint16_t *x,
                               int K, int p0, int kp)
{
    int full = full_pairs(K, p0, kp);
    for (int p = 0; p < full; p++)
        out[p * stride] = (uint32_t)x[2 * p] | (uint32_t)x[2 * p + 1] << 16;
    if (full < kp)
        out[full * stride] = x[2 * full];
}

/* Across two rows of X: out[j] = the pair (lo[j], hi[j]) for j < n, or
 * lo[j] alone when hi is NULL (the row past K). */
static inline void pairs_across(uint32_t *out, const uint16_t *lo,
                                const uint16_t *hi, int n)
{
    if (hi) {
        for (int j = 0; j < n; j++)
            out[j] = (uint32_t)lo[j] | (uint32_t)hi[j] << 16;
    } else {
        for (int j = 0; j < n; j++)
            out[j] = lo[j];
    }
}

/* Slivers of op(B): pairs [p0, p0+kp) of columns [j0, j0+nc) into dst,
 * sliver s (columns j0 + s*NR ...) at dst + s*kp*NR, pair p of column j
 * at [p*NR + j]. Beyond K or the panel's columns: zeros. Each loop runs
 * along memory: down a column of op(B) when it is a row of B (tb), across
 * two rows of B otherwise. Slivers are shared out among the calling team's
 * threads. */
static void pack_b(uint32_t *dst, const uint16_t *B, int ldb, int tb, int K,
                   int p0, int kp, int j0, int nc)
{
    int slivers = (nc + BF16_NR - 1) / BF16_NR;
    #pragma omp for schedule(static)
    for (int s = 0; s < slivers; s++) {
        uint32_t *out = dst + (int64_t)s * kp * BF16_NR;
        int n0 = j0 + s * BF16_NR;
        int width = nc - s * BF16_NR < BF16_NR ? nc - s * BF16_NR : BF16_NR;
        if (width < BF16_NR)
            memset(out, 0, (size_t)kp * BF16_NR * sizeof *out);
        for (int j = 0; tb && j < width; j++)
            pairs_along(out + j, BF16_NR, B + (int64_t)(n0 + j) * ldb + 2 * p0,
                        K, p0, kp);
        for (int p = 0; !tb && p < kp; p++) {
            int k = 2 * (p0 + p);
            const uint16_t *row = B + (int64_t)k * ldb + n0;
            pairs_across(out + p * BF16_NR, row, k + 1 < K ? row + ldb : NULL,
                         width);
        }
    }
}

/* Slivers of op(A): rows [i0, i0+mc), pairs [p0, p0+kp), sliver s (rows
 * i0 + s*MR ...) at dst + s*kp*MR, pair p of row r at [p*MR + r]; along
 * a row of A, or across two rows of A when op transposes it (ta). */
static void pack_a(uint32_t *dst, const uint16_t *A, int lda, int ta, int K,
                   int p0, int kp, int i0, int mc)
{
    for (int s = 0; s * BF16_MR < mc; s++) {
        uint32_t *out = dst + (int64_t)s * kp * BF16_MR;
        int m0 = i0 + s * BF16_MR;
        int height = mc - s * BF16_MR < BF16_MR ? mc - s * BF16_MR : BF16_MR;
        if (height < BF16_MR)
            memset(out, 0, (size_t)kp * BF16_MR * sizeof *out);
        for (int r = 0; !ta && r < height; r++)
            pairs_along(out + r, BF16_MR, A + (int64_t)(m0 + r) * lda + 2 * p0,
                        K, p0, kp);
        for (int p = 0; ta && p < kp; p++) {
            int k = 2 * (p0 + p);
            const uint16_t *row = A + (int64_t)k * lda + m0;
            pairs_across(out + p * BF16_MR, row, k + 1 < K ? row + lda : NULL,
                         height);
        }
    }
}

/* The MR x NR tile at c (row stride ldc) = [c +] sliver a . sliver b over
 * kp pairs, the sum in registers from zero, added to c at the end. */
static void micro_tile(int kp, const uint32_t *a, const uint32_t *b,
                       float *c, int ldc, int load_c)
{
    bf16_acc acc[BF16_MR][BF16_NV];
    #pragma GCC unroll 16
    for (int r = 0; r < BF16_MR; r++)
        #pragma GCC unroll 8
        for (int v = 0; v < BF16_NV; v++)
            acc[r][v] = acc_zero();
    for (int p = 0; p < kp; p++) {
        bf16_bvec bv[BF16_NV];
        #pragma GCC unroll 8
        for (int v = 0; v < BF16_NV; v++)
            bv[v] = bvec_load(b + p * BF16_NR + v * BF16_VW);
        #pragma GCC unroll 16
        for (int r = 0; r < BF16_MR; r++) {
            bf16_apair ap = apair_bcast(a + p * BF16_MR + r);
            #pragma GCC unroll 8
            for (int v = 0; v < BF16_NV; v++)
                acc[r][v] = acc_dot(acc[r][v], ap, bv[v]);
        }
    }
    #pragma GCC unroll 16
    for (int r = 0; r < BF16_MR; r++)
        #pragma GCC unroll 8
        for (int v = 0; v < BF16_NV; v++)
        {
            float *cv = c + (int64_t)r * ldc + v * BF16_VW;
            acc_store(cv, load_c ? acc_add(acc_load(cv), acc[r][v]) : acc[r][v]);
        }
}

/* A tile cut by C's edge (rows x cols of it are real): run in a local
 * full tile and copy the real part in and out. */
static void edge_tile(int kp, const uint32_t *a, const uint32_t *b, float *c,
                      int ldc, int load_c, int rows, int cols)
{
    float tile[BF16_MR * BF16_NR];
    for (int r = 0; r < rows && load_c; r++)
        memcpy(tile + r * BF16_NR, c + (int64_t)r * ldc, cols * sizeof(float));
    micro_tile(kp, a, b, tile, BF16_NR, load_c);
    for (int r = 0; r < rows; r++)
        memcpy(c + (int64_t)r * ldc, tile + r * BF16_NR, cols * sizeof(float));
}

/* C rows [i0, i0+mc) x columns [j0, j0+nc) [+]= packed A block . packed B
 * panel over kp pairs. */
static void block_product(int kp, const uint32_t *apack, const uint32_t *bpack,
                          float *C, int ldc, int i0, int mc, int j0, int nc,
                          int load_c)
{
    for (int jr = 0; jr < nc; jr += BF16_NR) {
        const uint32_t *b = bpack + (int64_t)(jr / BF16_NR) * kp * BF16_NR;
        int cols = nc - jr < BF16_NR ? nc - jr : BF16_NR;
        for (int ir = 0; ir < mc; ir += BF16_MR) {
            const uint32_t *a = apack + (int64_t)(ir / BF16_MR) * kp * BF16_MR;
            int rows = mc - ir < BF16_MR ? mc - ir : BF16_MR;
            float *c = C + (int64_t)(i0 + ir) * ldc + j0 + jr;
            if (rows == BF16_MR && cols == BF16_NR)
                micro_tile(kp, a, b, c, ldc, load_c);
            else
                edge_tile(kp, a, b, c, ldc, load_c, rows, cols);
        }
    }
}

/* Rows of op(A) per block: at most MC, a multiple of MR, and as even as
 * that allows over a number of blocks the team shares out in whole rounds
 * (M = 1024 on 2 threads: 8 blocks of 132 or 128 rows, not 7 of 144 and
 * one of 16, which left one thread idle for an eighth of the product). */
static int block_rows(int M, int threads)
{
    int blocks = (M + BF16_MC - 1) / BF16_MC;
    blocks = (blocks + threads - 1) / threads * threads;
    int rows = (M + blocks - 1) / blocks;
    return (rows + BF16_MR - 1) / BF16_MR * BF16_MR;
}

/* C (fp32, M x N, row stride ldc) = [C +] op(A) . op(B), for M, N, K > 0. */
void BF16_GEMM_FN(int ta, int tb, int M, int N, int K, const uint16_t *A,
                  int lda, const uint16_t *B, int ldb, float *C, int ldc,
                  int accumulate)
{
    int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
    int pairs = (K + 1) / 2;
    int kpmax = pairs < BF16_KP ? pairs : BF16_KP;
    int ncmax = N < BF16_NC ? N : BF16_NC;
    int mc = block_rows(M, threads);
    size_t bslivers = (size_t)(ncmax + BF16_NR - 1) / BF16_NR;
    size_t aslivers = (size_t)(mc + BF16_MR - 1) / BF16_MR;
    size_t a_each = aslivers * kpmax * BF16_MR;
    uint32_t *bpack = scratch_cpu(SCRATCH_GEMM_B,
                                  bslivers * kpmax * BF16_NR * sizeof(uint32_t));
    uint32_t *apacks = scratch_cpu(SCRATCH_GEMM_A,
                                   threads * a_each * sizeof(uint32_t));
    #pragma omp parallel num_threads(threads)
    {
        uint32_t *apack = apacks + (size_t)omp_get_thread_num() * a_each;
        for (int j0 = 0; j0 < N; j0 += BF16_NC) {
            int nc = N - j0 < BF16_NC ? N - j0 : BF16_NC;
            for (int p0 = 0; p0 < pairs; p0 += BF16_KP) {
                int kp = pairs - p0 < BF16_KP ? pairs - p0 : BF16_KP;
                int load_c = p0 > 0 || accumulate;
                pack_b(bpack, B, ldb, tb, K, p0, kp, j0, nc);
                /* the implicit barriers: B is packed before any product
                 * and not repacked before every product is done */
                #pragma omp for schedule(dynamic, 1)
                for (int i0 = 0; i0 < M; i0 += mc) {
                    int rows = M - i0 < mc ? M - i0 : mc;
                    pack_a(apack, A, lda, ta, K, p0, kp, i0, rows);
                    block_product(kp, apack, bpack, C, ldc, i0, rows, j0, nc,
                                  load_c);
                }
            }
        }
    }
}
