/*
 * adamw_cpu.c - one AdamW step on a flat block of fp32 master weights.
 *
 * The per-element update is elem_adamw, shared with the GPU. Here we only
 * compute the bias corrections once per call (in fp64: 1 - beta^step
 * cancels when beta^step is near 1, as beta2 = 0.999 is for the first
 * thousand steps, and fp32 would keep few correct digits), unscale the
 * gradient, and refresh the low-precision weight copy the next forward pass
 * reads, in the same sweep so the weights are read once.
 */
#include "cpu.h"

#include <math.h>

/* The fp32 case without a separate copy, the one fp32 training runs. */
TRI_CLONES static void adamw_span(float *master, const float *grad, float *m, float *v,
                                  int64_t n, const ops_adamw_args *a, float bc1, float bc2)
{
    for (int64_t i = 0; i < n; i++)
        master[i] = elem_adamw(master[i], grad[i] * a->grad_scale, &m[i], &v[i], a->lr,
                               a->beta1, a->beta2, a->eps, a->weight_decay, bc1, bc2);
}

void adamw_cpu(float *master, const void *grad, ops_dtype gdt, float *m,
               float *v, void *wcopy, ops_dtype wdt, int64_t n,
               const ops_adamw_args *a)
{
    float bc1 = (float)(1.0 - pow((double)a->beta1, a->step));
    float bc2 = (float)(1.0 - pow((double)a->beta2, a->step));
    if (gdt == OPS_F32 && !wcopy) {
        #pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; i += TRI_SPAN)
            adamw_span(master + i, (const float *)grad + i, m + i, v + i,
                       n - i < TRI_SPAN ? n - i : TRI_SPAN, a, bc1, bc2);
        return;
    }
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float g = load_f32_cpu(grad, gdt, i) * a->grad_scale;
        float w = elem_adamw(master[i], g, &m[i], &v[i], a->lr, a->beta1,
                             a->beta2, a->eps, a->weight_decay, bc1, bc2);
        master[i] = w;
        if (wcopy)
            store_f32_cpu(wcopy, wdt, i, w);
    }
}
