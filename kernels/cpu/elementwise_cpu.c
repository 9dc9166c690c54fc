/*
 * elementwise_cpu.c - GELU, add, accumulate, scale, clip and sum of squares.
 *
 * Memory-bound loops over flat arrays, split across threads with static
 * schedules; the math of GELU comes from elem.h so the GPU computes the
 * same numbers. The only reduction, the sum of squares behind the gradient
 * norm, adds fixed blocks and then the block sums in order, so its result
 * does not depend on the thread count (DESIGN.md invariant 5).
 */
#include "cpu.h"

/* Elements per partial sum of sumsq, and partial sums per parallel region
 * (kept on the stack: 2048 doubles = 16 KiB). */
#define SUMSQ_BLOCK 4096
#define SUMSQ_GROUP 2048

void gelu_fwd_cpu(float *out, const float *inp, int64_t n)
{
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++)
        out[i] = elem_gelu(inp[i]);
}

void gelu_bwd_cpu(float *dinp, const float *inp, const float *dout, int64_t n)
{
    // dinp may alias dout: each element is read before it is written
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++)
        dinp[i] = elem_gelu_grad(inp[i]) * dout[i];
}

void add_cpu(float *out, const float *a, const float *b, int64_t n)
{
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++)
        out[i] = a[i] + b[i];
}

void accumulate_cpu(float *y, const float *x, int64_t n)
{
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++)
        y[i] += x[i];
}

void scale_cpu(float *x, float s, int64_t n)
{
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++)
        x[i] *= s;
}

void clip_value_cpu(float *x, float c, int64_t n)
{
    // comparisons, not fminf/fmaxf: those would turn a NaN into +-c and
    // hide it from the overflow check that runs after clipping
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        x[i] = v > c ? c : v < -c ? -c : v;
    }
}

/* Eight independent lanes in a fixed pattern: the compiler can vectorize
 * them without reassociating, and the add latency chain is 8x shorter. */
static double block_sum(const float *x, int64_t n, int square)
{
    double lane[8] = { 0 };
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++)
            lane[j] += square ? (double)x[i + j] * (double)x[i + j] : (double)x[i + j];
    double s = 0.0;
    for (int j = 0; j < 8; j++)
        s += lane[j];
    for (; i < n; i++)
        s += square ? (double)x[i] * (double)x[i] : (double)x[i];
    return s;
}

/* Fixed blocks summed in order: the same bits whatever the thread count. */
static void reduce_into(double *acc, const float *x, int64_t n, int square)
{
    int64_t blocks = (n + SUMSQ_BLOCK - 1) / SUMSQ_BLOCK;
    double total = *acc;
    for (int64_t g0 = 0; g0 < blocks; g0 += SUMSQ_GROUP) {
        int ng = blocks - g0 < SUMSQ_GROUP ? (int)(blocks - g0) : SUMSQ_GROUP;
        double part[SUMSQ_GROUP];
        #pragma omp parallel for schedule(static)
        for (int b = 0; b < ng; b++) {
            int64_t i0 = (g0 + b) * SUMSQ_BLOCK;
            int64_t len = n - i0 < SUMSQ_BLOCK ? n - i0 : SUMSQ_BLOCK;
            part[b] = block_sum(x + i0, len, square);
        }
        for (int b = 0; b < ng; b++)
            total += part[b];
    }
    *acc = total;
}

void sumsq_accumulate_cpu(double *acc, const float *x, int64_t n)
{
    reduce_into(acc, x, n, 1);
}

void sum_accumulate_cpu(double *acc, const float *x, int64_t n)
{
    reduce_into(acc, x, n, 0);
}
