/*
 * comm_nccl.h - comm.h's collectives for device buffers, over NCCL.
 *
 * GPU builds (TRI_HAVE_NCCL) move CUDA tensors with NCCL, host tensors with
 * comm.c's MPI. Each grid group this rank belongs to gets one NCCL
 * communicator with the same members in the same rank order as its MPI
 * communicator (the ncclUniqueId comes from the group's rank 0 by
 * MPI_Bcast): TP, DP, DP_NODE, DP_CROSS, PP (pipeline neighbours; no call
 * uses it yet, as pipeline messages go through host memory over MPI:
 * comm.c) and EMBED (first and last stage, tied embeddings). A group of
 * one rank gets none, and its collectives are local. DP shares DP_NODE's
 * or DP_CROSS's communicator when one of them spans all of DP. WORLD has
 * no NCCL communicator: the world-wide reductions (loss scale, inf check)
 * are single values the host reads anyway, so they stay on MPI.
 *
 * Streams. NCCL runs on the communication stream (cuda_comm_stream()).
 * Every call first makes that stream wait for the work already queued on
 * the compute stream (an event), so NCCL sees the buffers the kernels
 * wrote, and afterwards makes the compute stream wait for the
 * communication, so later kernels see its result. Neither the host nor the
 * GPU's other work waits: a call returns as soon as NCCL has the operation
 * queued.
 *
 * Errors. A failing NCCL or CUDA call aborts every NCCL communicator of
 * this rank (ncclCommAbort, so no peer is left spinning on a GPU) and then
 * calls fail_abort, which MPI_Aborts. comm_nccl_init installs the same
 * abort-then-fail_abort as the kernels' fatal handler.
 *
 * Waiting. A peer that dies or stops would leave this rank's host blocked
 * for ever in the first wait on work behind a collective (the step's read
 * of the loss, say). So comm_nccl_init also installs the backend's host
 * wait (cuda_set_wait): it polls the work's event together with
 * ncclCommGetAsyncError on every communicator (gpu_wait.h), and on an
 * asynchronous error, or after [fault] timeout seconds (the watchdog's
 * limit, 3 x before the first step is done; 0: none) without the work
 * completing, aborts the communicators and stops the run with a message
 * naming this rank, its host and the NCCL operation: exit 1 for a peer's
 * failure, TRI_EXIT_WATCHDOG (76) for the timeout (doc/errors.md).
 *
 * Collectivity: each function is collective on the group it names, and all
 * of that group's ranks must call it in the same order with the same counts
 * and dtype; buffers are CUDA tensors of fp32, bf16, fp16, int32 or fp64.
 */
#ifndef TRI_SRC_COMM_NCCL_H
#define TRI_SRC_COMM_NCCL_H

#include <stddef.h>
#include <stdint.h>

#include "comm.h"
#include "grid.h"
#include "kernels/ops.h"

/* Creates the NCCL communicators of this rank's groups (in the fixed order
 * TP, DP_NODE, DP_CROSS, DP, PP, EMBED, so no two ranks wait on each other
 * in opposite orders). Needs cuda_device_init first. Returns non-zero with
 * a message in err when CUDA is not set up; NCCL failing is fatal.
 * Collective on world, after grid_create. */
int comm_nccl_init(const Grid *g, char *err, size_t err_size);
/* Waits for the communication stream, restores the backend's plain host
 * wait and destroys the communicators. Collective on world. */
void comm_nccl_finalize(void);
/* ncclCommAbort on every communicator of this rank. For fatal paths: safe
 * to call twice, and from a fatal handler. Not collective. */
void comm_nccl_abort(void);

/* In place; SUM, MAX or MIN. Collective on group. */
void comm_nccl_allreduce(const Grid *g, CommGroup group, ops_tensor buf,
                         int64_t n, CommOp op);
/* send holds sum(counts) elements, rank-major; this rank receives the sum
 * over the group of its block (counts[rank] elements) in recv. Equal counts
 * run as one ncclReduceScatter, unequal ones as a group of ncclReduce.
 * Collective on group. */
void comm_nccl_reduce_scatter(const Grid *g, CommGroup group, ops_tensor send,
                              ops_tensor recv, const int *counts);
/* recv (sum(counts), rank-major) = every rank's counts[r] elements of send.
 * Equal counts run as one ncclAllGather, unequal ones as a group of
 * ncclBroadcast. Collective on group. */
void comm_nccl_allgather(const Grid *g, CommGroup group, ops_tensor send,
                         ops_tensor recv, const int *counts);

/* ---- nonblocking ---------------------------------------------------------- */

/* comm.h's nonblocking forms on a GPU. Each is queued on its group's (or
 * link's) stream after the compute stream's work queued so far, and
 * *event receives the slot of an event recorded right after it; the
 * compute stream does not wait for it until comm_nccl_wait. fp32 sums
 * for the collectives. Collective on group for the collectives; the link
 * calls are point to point (comm_link_send/recv: each kind and direction
 * has its own communicator of two ranks and its own stream, so messages
 * match in posting order and a receive posted ahead blocks nothing but
 * its own link). */
void comm_nccl_iallreduce(const Grid *g, CommGroup group, ops_tensor buf, int64_t n,
                          int *event);
void comm_nccl_ireduce_scatter(const Grid *g, CommGroup group, ops_tensor send,
                               ops_tensor recv, const int *counts, int *event);
void comm_nccl_link_send(const Grid *g, CommLink kind, ops_tensor buf, int64_t n,
                         int peer, int *event);
void comm_nccl_link_recv(const Grid *g, CommLink kind, ops_tensor buf, int64_t n,
                         int peer, int *event);
/* Makes the compute stream wait for the event's operation, and frees the
 * slot. Not collective. */
void comm_nccl_wait(int event);
/* 1 once the event's operation has completed on the GPU; the slot is then
 * free. Not collective. */
int comm_nccl_test(int event);

#endif
