/*
 * rope_cpu.c - rotary position embeddings, in place, HuggingFace layout.
 *
 * x (B,T,H,hs): in every head at position t, channel i and channel
 * i + hs/2 form a pair rotated by t * theta^(-2i/hs) (elem.h); the
 * backward rotates the gradient back by the same angle. Each (row, pair)
 * is independent, so rows go to threads.
 */
#include "cpu.h"

void rope_cpu(void *x, ops_dtype dt, int B, int T, int H, int hs, double theta,
              int inverse)
{
    int half = hs / 2;
    #pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < (int64_t)B * T; n++) {
        int t = (int)(n % T);
        for (int i = 0; i < half; i++) {
            float c, s;
            elem_rope_cos_sin(t, i, hs, theta, &c, &s);
            if (inverse)
                s = -s;
            for (int h = 0; h < H; h++) {
                int64_t at = (n * H + h) * hs + i;
                float a = load_f32_cpu(x, dt, at), b = load_f32_cpu(x, dt, at + half);
                elem_rope_rotate(&a, &b, c, s);
                store_f32_cpu(x, dt, at, a);
                store_f32_cpu(x, dt, at + half, b);
            }
        }
    }
}
