/*
 * adamw_cpu.c - one AdamW step on a flat block of fp32 master weights.
 *
 * The per-element update is elem_adamw, shared with the GPU. Here we only
 * compute the bias corrections once per call (in fp64: 1 - beta^step
 * cancels when beta^step is near 1, as beta2 = 0.999 is for the first
 * thousand steps, and fp32 would keep few correct digits), unscale the
 * gradient, and refresh the low-precision weight copy the next forward pass
 * reads, in the same sweep so the weights are read once.
 *
 * Not collective.
 */
#include "cpu.h"

#include <math.h>

/* The update of n elements with fp32 gradients, and the compute copy of
 * dtype cdt refreshed in the same sweep when copy is set. Inlined with cdt
 * and copy constants, so that each loop vectorizes (the sqrt and divides
 * too: the kernels are built without errno for math) over arrays the
 * caller guarantees do not overlap; every lane computes elem_adamw's bits,
 * as the GPU does. */
static inline __attribute__((always_inline)) void
adamw_loop(float *master, const float *grad, float *m, float *v, void *wcopy,
           ops_dtype cdt, int copy, int64_t n, const ops_adamw_args *a, float bc1,
           float bc2)
{
    const float scale = a->grad_scale, lr = a->lr, beta1 = a->beta1, beta2 = a->beta2;
    const float eps = a->eps, wd = a->weight_decay;
    #pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        master[i] = elem_adamw(master[i], grad[i] * scale, &m[i], &v[i], lr, beta1, beta2,
                               eps, wd, bc1, bc2);
        if (copy)
            store_f32_cpu(wcopy, cdt, i, master[i]);
    }
}

/* One thread's span: no copy, or a bf16 or fp16 one. */
TRI_CLONES static void adamw_span(float *master, const float *grad, float *m, float *v,
                                  void *wcopy, ops_dtype wdt, int64_t n,
                                  const ops_adamw_args *a, float bc1, float bc2)
{
    if (!wcopy)
        adamw_loop(master, grad, m, v, NULL, OPS_F32, 0, n, a, bc1, bc2);
    else if (wdt == OPS_BF16)
        adamw_loop(master, grad, m, v, wcopy, OPS_BF16, 1, n, a, bc1, bc2);
    else
        adamw_loop(master, grad, m, v, wcopy, OPS_F16, 1, n, a, bc1, bc2);
}

void adamw_cpu(float *master, const void *grad, ops_dtype gdt, float *m,
               float *v, void *wcopy, ops_dtype wdt, int64_t n,
               const ops_adamw_args *a)
{
    float bc1 = (float)(1.0 - pow((double)a->beta1, a->step));
    float bc2 = (float)(1.0 - pow((double)a->beta2, a->step));
    size_t cs = wcopy ? ops_dtype_size(wdt) : 0;
    if (gdt == OPS_F32 && (!wcopy || wdt != OPS_F32)) {
        #pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; i += TRI_SPAN)
            adamw_span(master + i, (const float *)grad + i, m + i, v + i,
                       wcopy ? (char *)wcopy + (size_t)i * cs : NULL, wdt,
                       n - i < TRI_SPAN ? n - i : TRI_SPAN, a, bc1, bc2);
        return;
    }
    /* low-precision gradients or an fp32 copy: element by element */
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
