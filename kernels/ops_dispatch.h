/*
 * ops_dispatch.h - what every ops_*.c shares to check a call and send it
 * to its backend. Internal to kernels/: src/ and the tests use ops.h.
 *
 * Each ops_* call describes its arguments once (ops_arg: name, tensor,
 * elements the shapes need, which dtypes it may have), CHECK_ARGS checks
 * them all and returns their device, and a two-line `if` sends the call to
 * the CPU backend (cpu/cpu.h) or, through ON_CUDA, to its CUDA twin
 * (cuda/cuda.h). ops.c defines the checks; the op families live one a
 * file (ops_matmul.c, ops_attention.c, ...: doc/design.md's map).
 *
 * Not collective.
 */
#ifndef TRI_KERNELS_OPS_DISPATCH_H
#define TRI_KERNELS_OPS_DISPATCH_H

#include "ops.h"

#include "cpu/cpu.h"

#if TRI_HAVE_CUDA
#include "cuda/cuda.h"
#define ON_CUDA(call) ((void)fn, (void)dev, (call))
#else
/* Unreachable: check_device has refused CUDA tensors. A macro rather than
 * `if (TRI_HAVE_CUDA)` so a CPU build never names a *_cuda symbol, even
 * at -O0. */
#define ON_CUDA(call) no_backend(fn, dev)
/* The else branch of every dispatch in a CPU-only build; check_device
 * has already refused such tensors, so this only guards against a bug. */
void no_backend(const char *fn, ops_device dev) __attribute__((noreturn));
#endif

/* Bad calls name the op, the argument and what is wrong, at the line of
 * the ops_*.c that caught it. */
#define FAIL(...) ops_fatalf(__FILE__, __LINE__, __VA_ARGS__)

/* What dtypes an argument may have (ops.h, "Precision"):
 *  ARG_D         the call's compute dtype D: fp32, bf16 or fp16, one dtype
 *                shared by every ARG_D argument of the call (activations,
 *                weight copies, activation gradients);
 *  ARG_D_OR_F32  D or fp32 (matmul_fwd's out, for fp32 logits; matmul_bwd's
 *                dout, for fp32 dlogits);
 *  ARG_F32       always fp32 (statistics, probabilities, master weights,
 *                Adam moments);
 *  ARG_GRAD      a parameter gradient: always fp32, accumulated in fp32;
 *  ARG_ANY_FLOAT fp32, bf16 or fp16, each converted by the backend;
 *  ARG_ANY       raw memory (zero, copy). */
typedef enum {
    ARG_D, ARG_D_OR_F32, ARG_F32, ARG_GRAD, ARG_ANY_FLOAT, ARG_I32, ARG_ANY
} arg_kind;

typedef struct {
    const char *name;
    ops_tensor t;
    int64_t need;     /* elements the shapes address */
    arg_kind kind;
    int optional;     /* 1: data == NULL means absent and is skipped */
} ops_arg;

/* "cpu", "cuda" or "unknown", for messages. */
const char *device_name(ops_device dev);

/* Fails unless a's device is the CPU, or CUDA in a CUDA build. */
void check_device(const char *fn, const ops_arg *a);

/* Checks presence, size, device and dtype of every argument and returns the
 * device they all live on. The call's compute dtype D is that of its first
 * present ARG_D argument, else of its first present ARG_D_OR_F32 one (a
 * matmul_bwd asked for dbias alone), else fp32; it goes to *compute when
 * compute is not NULL. */
ops_device check_args(const char *fn, ops_dtype *compute, const ops_arg *args, int n);

/* check_args on the ops_arg initializers given after compute. */
#define CHECK_ARGS(fn, compute, ...)                                        \
    check_args(fn, compute, (const ops_arg[]){ __VA_ARGS__ },               \
               (int)(sizeof((const ops_arg[]){ __VA_ARGS__ }) / sizeof(ops_arg)))

/* Fails when a shape is negative; names lists the three, "M, N, K". */
void check_dims(const char *fn, const char *names, int a, int b, int c);

/* Fails on a vocabulary shard [v0, v0 + Vl) that starts or runs below 0
 * (the embedding and the cross-entropy's shards). */
void check_shard(const char *fn, int v0, int Vl);

#endif
