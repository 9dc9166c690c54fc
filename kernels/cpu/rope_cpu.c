/*
 * rope_cpu.c - rotary position embeddings, in place, HuggingFace layout.
 *
 * x (B,T,H,hs): in every head at position t, channel i and channel
 * i + hs/2 form a pair rotated by (t0 + t) * theta^(-2i/hs) (elem.h:
 * rows of a sequence that start at position t0, for context parallelism's
 * chunks; t0 = 0 for a whole sequence); the
 * backward rotates the gradient back by the same angles. The cosines and
 * sines of the T x hs/2 angles are computed once per call into a scratch
 * table (not once per row of the batch and per head); then rows go to
 * threads.
 */
#include "cpu.h"

void rope_cpu(void *x, ops_dtype dt, int B, int T, int t0, int H, int hs, double theta,
              int inverse)
{
    int half = hs / 2;
    float *cs = scratch_cpu(SCRATCH_ROPE, 2 * (size_t)T * half * sizeof(float));
    #pragma omp parallel for schedule(static)
    for (int t = 0; t < T; t++)
        for (int i = 0; i < half; i++) {
            float c, s;
            elem_rope_cos_sin(t0 + t, i, hs, theta, &c, &s);
            cs[2 * ((int64_t)t * half + i)] = c;
            cs[2 * ((int64_t)t * half + i) + 1] = inverse ? -s : s;
        }
    #pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < (int64_t)B * T; n++) {
        const float *row = cs + 2 * (n % T) * half;
        for (int h = 0; h < H; h++)
            for (int i = 0; i < half; i++) {
                int64_t at = (n * H + h) * hs + i;
                float a = load_f32_cpu(x, dt, at), b = load_f32_cpu(x, dt, at + half);
                elem_rope_rotate(&a, &b, row[2 * i], row[2 * i + 1]);
                store_f32_cpu(x, dt, at, a);
                store_f32_cpu(x, dt, at + half, b);
            }
    }
}
