/*
 * kernel_times.h - the model's own kernels timed on this CPU, for the
 * "cpu" profile of `trident plan --hw`.
 *
 * A roofline from a square GEMM's rate and a stream's bandwidth misses
 * what a small model spends in skinny GEMMs, in GELU's tanh and in
 * attention's T x T softmax. The CPU profile can do better because it
 * runs on the machine it predicts: it times one layer's kernels and the
 * LM head at the run's shapes and sums them.
 *
 * Not collective: each process times its own kernels (plan runs on one
 * process; its caller divides the machine among the ranks).
 */
#ifndef TRI_SRC_KERNEL_TIMES_H
#define TRI_SRC_KERNEL_TIMES_H

#include "arch.h"
#include "config.h"
#include "ops.h"

/* A layer's shape, as its architecture's descriptor gives it (arch.h):
 * its GEMMs, and the features that decide its elementwise work. */
typedef struct {
    ops_dtype dtype;
    int B, T, C, NH, V;   /* microbatch rows, sequence, width, heads, vocabulary */
    int tp;               /* the layer's share: C/tp columns, NH/tp heads, V/tp words */
    int n_linears;
    ArchLinear linears[ARCH_MAX_LINEARS];
    int layer_norm;       /* LayerNorm (else RMSNorm) */
    int rotary;           /* q and k rotated, NKVl key/value heads expanded */
    int gated_mlp;        /* SwiGLU (else GELU), Fl wide */
    int NKVl, Fl;         /* key/value heads and MLP width on one TP rank */
} KernelShape;

typedef struct {
    double gemm_fwd, gemm_bwd;   /* seconds, one microbatch on one TP rank */
    double elem_fwd, elem_bwd;
} KernelTimes;

/* One transformer layer's and the LM head's kernels, as the
 * architecture's block runs them (the head in model.c's chunks of logit
 * rows, with its fused loss). Cached by shape. */
void kernel_times_measure(const KernelShape *shape, KernelTimes *layer, KernelTimes *head);

/* The shape of m's layer `layer` (global index: dense and MoE layers
 * differ), as its architecture's descriptor gives it: microbatches of B
 * rows in dtype d, on one of tp ranks. A MoE layer's experts are timed as
 * top_k GEMMs of all the rows (arch_llama.c's linears). */
KernelShape kernel_times_shape(const ModelConfig *m, int layer, ops_dtype d, int B, int tp);

/* Seconds per parameter of the optimizer step: the clipping norm's pass
 * over the fp32 gradient, then AdamW on fp32 master, m and v from that
 * gradient, writing the compute copy in dtype when it is not fp32. */
double kernel_times_adamw(ops_dtype dtype);

#endif
