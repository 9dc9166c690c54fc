/*
 * offload.h - [train] offload = optimizer (ZeRO-Offload): on a GPU, the fp32
 * master weights and Adam moments of the rows a rank updates live in
 * page-locked host memory, and AdamW runs on the host.
 *
 * After the DP reduction the owned gradient rows travel down in chunks,
 * the host updates each chunk as soon as it has arrived (the CPU kernel:
 * OpenMP, vectorised, the same elem_adamw as the GPU's), and the new
 * weights, in the compute dtype, travel up, chunk by chunk. Two staging
 * slots alternate, so chunk k+1 comes down and chunk k-1 goes up while the
 * host updates chunk k.
 *
 * The order is data (offload_schedule: a pure function, tested without a
 * GPU), and one executor runs it (offload_adamw) through ops_copy_async,
 * which is a memcpy on the CPU and a copy-stream transfer on a GPU. The
 * norm, the clipping and the loss scaler act on the gradients on the
 * device before the step, as without offload, so the step's inputs are
 * the same and only where AdamW runs changes.
 */
#ifndef TRI_SRC_OFFLOAD_H
#define TRI_SRC_OFFLOAD_H

#include <stdint.h>

#include "config.h"
#include "ops.h"

/* Elements per chunk in training: 4 MiB of fp32 gradient, large enough to
 * run copies near the PCIe rate, small enough that the first download and
 * the last upload, which nothing hides, are short. */
#define OFFLOAD_CHUNK (1 << 20)
#define OFFLOAD_SLOTS 2

/* Whether a run offloads: [train] offload = optimizer on a GPU. On the
 * CPU the state is in host memory already and nothing changes. Pure. */
int offload_active(OffloadKind kind, ops_device device);

typedef enum {
    OFFLOAD_DOWN,        /* start the gradient chunk's copy into the slot */
    OFFLOAD_WAIT_DOWN,   /* wait until the slot's gradients have arrived */
    OFFLOAD_WAIT_UP,     /* wait until the slot's last weights have left */
    OFFLOAD_UPDATE,      /* AdamW on the chunk, new weights into the slot */
    OFFLOAD_UP           /* start the slot's weights' copy to the device */
} OffloadAct;

/* One action on chunk [off, off + n) of segment seg, in staging slot slot. */
typedef struct {
    OffloadAct act;
    int slot, seg;
    int64_t off, n;
} OffloadStep;

/* The pipelined order of a step over segments of seg_n[i] elements cut in
 * chunks of at most `chunk` (a chunk never spans two segments): chunk k
 * uses slot k % 2; chunk k+1's download starts before chunk k's update;
 * a slot's update waits for the upload of the chunk two before it.
 * Writes the actions to out (NULL: only counts) and returns how many.
 * Pure. */
int64_t offload_schedule(const int64_t *seg_n, int n_seg, int64_t chunk, OffloadStep *out);

/* One parameter's rows: fp32 master, m and v in host memory; the fp32
 * gradient rows and the compute copy's rows (OPS_NONE: none) where the
 * model keeps them. */
typedef ops_adamw_seg OffloadSeg; /* ops.h: the same rows ops_adamw_multi takes */

typedef struct Offload Offload;

/* The staging slots for chunks of `chunk` elements, page-locked near dev,
 * with weights in wdt. Not collective. */
Offload *offload_create(ops_device dev, ops_dtype wdt, int64_t chunk);
/* Not collective. */
void offload_destroy(Offload *o);
/* Bytes of host memory offload_create allocates. Pure. */
int64_t offload_staging_bytes(ops_dtype wdt, int64_t chunk);

/* One AdamW step (a's weight_decay replaced by each segment's) over the
 * segments, in offload_schedule's order; returns when the new weights are
 * on the device. Bitwise ops_adamw's result on the same rows.
 * Not collective. */
void offload_adamw(Offload *o, const OffloadSeg *seg, int n_seg, const ops_adamw_args *a);

#endif
