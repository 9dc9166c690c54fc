/*
 * adamw_cuda.cu - one AdamW step on a flat block of fp32 master weights.
 *
 * The twin of adamw_cpu.c: the per-element update is elem_adamw, the bias
 * corrections are computed once per call on the host in fp64 (1 - beta^t
 * cancels badly in fp32 while beta2^t is near 1), the gradient is widened
 * and unscaled as it is read, and the weight copy the next forward pass
 * reads is refreshed in the same sweep. nvcc fuses multiply-adds where the
 * CPU build does not, so the updated weights agree with the CPU's to a few
 * ulp, not bit for bit.
 */
#include "cuda_common.h"

static __global__ void adamw_kernel(float *master, const void *grad,
                                    ops_dtype gdt, float *m, float *v,
                                    void *wcopy, ops_dtype wdt, int64_t n,
                                    float lr, float beta1, float beta2,
                                    float eps, float wd, float grad_scale,
                                    float bc1, float bc2)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        float g = load_f32_cuda(grad, gdt, i) * grad_scale;
        float mi = m[i], vi = v[i];
        float w = elem_adamw(master[i], g, &mi, &vi, lr, beta1, beta2, eps, wd,
                             bc1, bc2);
        master[i] = w;
        m[i] = mi;
        v[i] = vi;
        if (wcopy)
            store_f32_cuda(wcopy, wdt, i, w);
    }
}

void adamw_cuda(float *master, const void *grad, ops_dtype gdt, float *m,
                float *v, void *wcopy, ops_dtype wdt, int64_t n,
                const ops_adamw_args *a)
{
    if (n <= 0)
        return;
    float bc1 = (float)(1.0 - pow((double)a->beta1, a->step));
    float bc2 = (float)(1.0 - pow((double)a->beta2, a->step));
    adamw_kernel<<<grid_for(n, TRI_THREADS), TRI_THREADS, 0, stream_cuda()>>>(
        master, grad, gdt, m, v, wcopy, wdt, n, a->lr, a->beta1, a->beta2,
        a->eps, a->weight_decay, a->grad_scale, bc1, bc2);
    TRI_CHECK_LAUNCH(adamw_kernel);
}
