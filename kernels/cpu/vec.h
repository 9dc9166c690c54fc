/*
 * vec.h - fixed-width float vectors for the CPU reductions (row max, row
 * sums), through GCC/clang vector extensions.
 *
 * A reduction in a plain loop either stays scalar (the compiler may not
 * reassociate it) or, with reassociation allowed, depends on the vector
 * width of the machine. Sixteen explicit lanes give one order of
 * operations everywhere: each target_clones variant lowers the 16-lane
 * type to what the CPU has (one AVX-512 register, two AVX2 ones, four
 * SSE ones), and the results are the same bits.
 */
#ifndef TRI_KERNELS_CPU_VEC_H
#define TRI_KERNELS_CPU_VEC_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#define TRI_VEC_INLINE static inline __attribute__((always_inline))

typedef float vec16 __attribute__((vector_size(64)));
typedef int32_t vec16i __attribute__((vector_size(64)));

TRI_VEC_INLINE vec16 vec16_load(const float *p)
{
    vec16 v;
    memcpy(&v, p, sizeof v);
    return v;
}

TRI_VEC_INLINE vec16 vec16_set(float x)
{
    vec16 v = {x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x};
    return v;
}

/* Lane-wise max; a NaN in x is ignored (softmax propagates it through the
 * exponentials instead). */
TRI_VEC_INLINE vec16 vec16_max(vec16 acc, vec16 x)
{
    vec16i gt = x > acc;
    return (vec16)(((vec16i)x & gt) | ((vec16i)acc & ~gt));
}

/* max of x[0..n), 16 lanes then across them */
TRI_VEC_INLINE float vec_row_max(const float *x, int n)
{
    vec16 acc = vec16_set(-INFINITY);
    int j = 0;
    for (; j + 16 <= n; j += 16)
        acc = vec16_max(acc, vec16_load(x + j));
    float m = acc[0];
    for (int k = 1; k < 16; k++)
        m = acc[k] > m ? acc[k] : m;
    for (; j < n; j++)
        m = x[j] > m ? x[j] : m;
    return m;
}

/* sum of x[0..n) in 16 lanes, then the lanes in order */
TRI_VEC_INLINE float vec_row_sum(const float *x, int n)
{
    vec16 acc = vec16_set(0.0f);
    int j = 0;
    for (; j + 16 <= n; j += 16)
        acc += vec16_load(x + j);
    float s = 0.0f;
    for (int k = 0; k < 16; k++)
        s += acc[k];
    for (; j < n; j++)
        s += x[j];
    return s;
}

#endif
