/*
 * ops.c - what every op of ops.h shares: the checks of its arguments
 * against its shapes, its device and the precision contract; whether a
 * device runs the fused GPU kernels; and the devices themselves (count,
 * set-up, memory, UUID, GEMM and hardware peaks).
 *
 * The ops live one family a file beside it (ops_matmul.c, ops_attention.c,
 * ...; doc/design.md's map). Each ops_* call describes its arguments once
 * (name, tensor, elements the shapes need, which dtypes it may have),
 * check_args here checks them all, and a two-line `if` sends the call to
 * its backend (ops_dispatch.h). Bad calls are programming errors of the
 * caller, so they go to the fatal handler with the op, the argument and
 * what is wrong, rather than an error code nobody checks.
 * The dtype checks are the precision contract of ops.h: each argument is
 * of a kind (compute dtype D, D or fp32, always fp32, parameter gradient,
 * ...), the call's D is read off its first D argument, and every other
 * argument is checked against it, so a mixed-up tensor fails at the call
 * with both names rather than as garbage three layers later.
 *
 * Each op's CPU call and its CUDA twin (kernels/cuda/, same arguments) sit
 * side by side in its family's file. A CUDA tensor in a CPU-only build
 * fails in check_device with "built without CUDA; reconfigure with
 * --with-cuda".
 *
 * Not collective.
 */
#include "ops_dispatch.h"

#include <stdio.h>

const ops_tensor OPS_NONE = { NULL, 0, OPS_F32, OPS_CPU };

const char *device_name(ops_device dev)
{
    return dev == OPS_CPU ? "cpu" : dev == OPS_CUDA ? "cuda" : "unknown";
}

/* Whether dev runs issue 34's fused GPU kernels: a GPU, and TRIDENT_FUSED
 * not 0 (fused_cuda.cu). The CPU's kernels are what they are. */
int ops_fused(ops_device dev)
{
#if TRI_HAVE_CUDA
    return dev == OPS_CUDA && fused_enabled_cuda();
#else
    (void)dev;
    return 0;
#endif
}

/* ---- argument checks ------------------------------------------------- */

static int is_float_dtype(ops_dtype d)
{
    return d == OPS_F32 || d == OPS_BF16 || d == OPS_F16;
}

/* Whether `dev`'s backend implements this dtype for this kind. The CPU
 * backend does every compute dtype; a backend without bf16 or fp16 yet
 * returns 0 for them here and callers get "not supported by the ...
 * backend yet". */
static int dtype_ok(ops_device dev, arg_kind kind, ops_dtype d)
{
    (void)dev;
    switch (kind) {
    case ARG_D: return is_float_dtype(d);
    case ARG_D_OR_F32: return is_float_dtype(d);
    case ARG_F32: return d == OPS_F32;
    case ARG_GRAD: return d == OPS_F32;
    case ARG_ANY_FLOAT: return is_float_dtype(d);
    case ARG_I32: return d == OPS_I32;
    case ARG_ANY: return is_float_dtype(d) || d == OPS_I32 || d == OPS_F64;
    }
    return 0;
}

static const char *kind_dtypes(arg_kind kind)
{
    switch (kind) {
    case ARG_D:
    case ARG_D_OR_F32:
    case ARG_ANY_FLOAT: return "fp32, bf16 or fp16";
    case ARG_F32: return "fp32";
    case ARG_GRAD: return "fp32 (parameter gradients are fp32 in every "
                          "precision)";
    case ARG_I32: return "int32";
    case ARG_ANY: return "fp32, bf16, fp16, int32 or fp64";
    }
    return "?";
}

void check_device(const char *fn, const ops_arg *a)
{
    if (a->t.device == OPS_CPU)
        return;
    if (a->t.device != OPS_CUDA)
        FAIL("%s: %s has unknown device %d", fn, a->name, (int)a->t.device);
    if (!TRI_HAVE_CUDA)
        FAIL("%s: %s is on a CUDA device, but trident was built without "
             "CUDA; reconfigure with --with-cuda", fn, a->name);
}

/* d is the argument that sets the call's compute dtype (NULL: none). */
static void check_dtype(const char *fn, const ops_arg *a, ops_device dev,
                        const ops_arg *d)
{
    ops_dtype t = a->t.dtype;
    if (!dtype_ok(dev, a->kind, t)) {
        if ((a->kind == ARG_D || a->kind == ARG_D_OR_F32) && is_float_dtype(t))
            FAIL("%s: %s not supported by the %s backend yet (argument %s)",
                 fn, ops_dtype_name(t), dev == OPS_CPU ? "CPU" : "CUDA",
                 a->name);
        FAIL("%s: %s is %s but must be %s", fn, a->name, ops_dtype_name(t),
             kind_dtypes(a->kind));
    }
    if (!d || a == d)
        return;
    if (a->kind == ARG_D && t != d->t.dtype)
        FAIL("%s: %s is %s but %s is %s; the activations, weights and "
             "activation gradients of one call share one compute dtype", fn,
             a->name, ops_dtype_name(t), d->name, ops_dtype_name(d->t.dtype));
    if (a->kind == ARG_D_OR_F32 && t != OPS_F32 && t != d->t.dtype)
        FAIL("%s: %s is %s but must be fp32 or the compute dtype, %s (that "
             "of %s)", fn, a->name, ops_dtype_name(t),
             ops_dtype_name(d->t.dtype), d->name);
}

ops_device check_args(const char *fn, ops_dtype *compute, const ops_arg *args, int n)
{
    const ops_arg *first = NULL, *d = NULL, *d_or_f32 = NULL;
    for (int i = 0; i < n; i++) {
        const ops_arg *a = &args[i];
        if (!a->t.data) {
            if (a->optional)
                continue;
            FAIL("%s: required argument %s is missing", fn, a->name);
        }
        if (a->need < 0)
            FAIL("%s: negative shape for %s", fn, a->name);
        if (a->t.n < a->need)
            FAIL("%s: %s holds %lld elements but the shapes need %lld", fn,
                 a->name, (long long)a->t.n, (long long)a->need);
        check_device(fn, a);
        if (!first)
            first = a;
        else if (a->t.device != first->t.device)
            FAIL("%s: %s is on %s but %s is on %s", fn, a->name,
                 device_name(a->t.device), first->name,
                 device_name(first->t.device));
        if (a->kind == ARG_D && !d)
            d = a;
        if (a->kind == ARG_D_OR_F32 && !d_or_f32)
            d_or_f32 = a;
    }
    ops_device dev = first ? first->t.device : OPS_CPU;
    if (!d)
        d = d_or_f32;
    for (int i = 0; i < n; i++)
        if (args[i].t.data)
            check_dtype(fn, &args[i], dev, d);
    if (compute)
        *compute = d ? d->t.dtype : OPS_F32;
    return dev;
}

#if !TRI_HAVE_CUDA
void no_backend(const char *fn, ops_device dev)
{
    FAIL("%s: no %s backend in this build", fn, device_name(dev));
}
#endif

void check_dims(const char *fn, const char *names, int a, int b, int c)
{
    if (a < 0 || b < 0 || c < 0)
        FAIL("%s: negative shape (%s = %d, %d, %d)", fn, names, a, b, c);
}

void check_shard(const char *fn, int v0, int Vl)
{
    if (v0 < 0 || Vl < 0)
        FAIL("%s: bad vocabulary shard v0 = %d, Vl = %d", fn, v0, Vl);
}

/* ---- devices -------------------------------------------------------------- */

int ops_device_count(ops_device dev)
{
    if (dev == OPS_CPU)
        return 1;
#if TRI_HAVE_CUDA
    return cuda_device_count();
#else
    return 0;
#endif
}

const char *ops_device_count_error(ops_device dev)
{
    (void)dev;
#if TRI_HAVE_CUDA
    return cuda_device_count_error();
#else
    return "";
#endif
}

int ops_device_init(ops_device dev, int local_rank, int local_size, char *err,
                    size_t err_size)
{
    if (dev == OPS_CPU)
        return 0;
#if TRI_HAVE_CUDA
    return cuda_device_init(local_rank, local_size, err, err_size);
#else
    (void)local_rank;
    (void)local_size;
    snprintf(err, err_size, "trident was built without CUDA; reconfigure with --with-cuda");
    return 1;
#endif
}

int64_t ops_device_memory_bytes(ops_device dev)
{
#if TRI_HAVE_CUDA
    if (dev == OPS_CUDA)
        return cuda_device_memory_bytes();
#endif
    (void)dev;
    return 0;
}

int ops_device_uuid(ops_device dev, unsigned char uuid[16])
{
#if TRI_HAVE_CUDA
    if (dev == OPS_CUDA) {
        cuda_device_uuid(uuid);
        return 1;
    }
#else
    (void)uuid;
#endif
    (void)dev;
    return 0;
}

void ops_device_finalize(ops_device dev)
{
#if TRI_HAVE_CUDA
    if (dev == OPS_CUDA)
        cuda_device_finalize();
#else
    (void)dev;
#endif
}

const char *ops_gemm_info_on(ops_device dev, const char **warning)
{
#if TRI_HAVE_CUDA
    if (dev == OPS_CUDA)
        return gemm_info_cuda(warning);
#endif
    (void)dev;
    return ops_gemm_info(warning);
}

double ops_gemm_peak_on(ops_device dev, ops_dtype dtype, double seconds)
{
#if TRI_HAVE_CUDA
    if (dev == OPS_CUDA)
        return gemm_peak_cuda(dtype, seconds);
#endif
    (void)dev;
    return ops_gemm_peak_dtype(dtype, seconds);
}

double ops_hardware_peak_on(ops_device dev, ops_dtype dtype, double seconds, char *how,
                            size_t how_size)
{
#if TRI_HAVE_CUDA
    if (dev == OPS_CUDA)
        return hardware_peak_cuda(dtype, how, how_size);
#endif
    (void)dev;
    return cpu_peak_flops(dtype, seconds, how, how_size);
}

const char *ops_cpu_name(void)
{
    return cpu_model_name();
}

int ops_cpu_native_bf16(void)
{
    return cpu_has_native_bf16();
}
