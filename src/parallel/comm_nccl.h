/*
 * comm_nccl.h - comm.h's collectives for device buffers, over NCCL.
 *
 * GPU builds (TRI_HAVE_NCCL) move CUDA tensors with NCCL, host tensors with
 * comm.c's MPI. Each grid group this rank belongs to gets one NCCL
 * communicator with the same members in the same rank order as its MPI
 * communicator (the ncclUniqueId comes from the group's rank 0 by
 * MPI_Bcast): TP, CP, DP, DP_NODE, DP_CROSS, EMBED (first and last stage,
 * tied embeddings), KV, and with ep > 1 EP and EDP (expert parallelism's
 * all-to-all and its experts' DP reduction). A group of one rank gets
 * none, and its collectives are local. DP shares DP_NODE's or DP_CROSS's
 * communicator when one of them spans all of DP; at ep = 1 EDP is DP
 * (the same members in the same order) and shares its communicator. WORLD has no NCCL communicator: the
 * world-wide reductions (loss scale, inf check) are single values the
 * host reads anyway, so they stay on MPI. PP has none either: pipeline
 * messages go device to device over links (below).
 *
 * Pipeline links. With pp > 1 each stage has four communicators of two
 * ranks: activations out (to the next stage in the ring) and in (from the
 * previous), gradients out (to the previous) and in (from the next); with
 * pp = 2 both neighbours are one rank, on four communicators still. An
 * out-link carries only ncclSend, an in-link only ncclRecv, each on its
 * own stream, so each link is a FIFO: messages match in posting order
 * without tags (comm.h), and a receive posted ahead blocks nothing but
 * its own link. The four are created together (ncclGroupStart/End), so no
 * order of creation across the ranks of the ring can deadlock.
 *
 * Streams. Each communicator runs on a stream of its own (DP and EDP on
 * their owner's when they share one: a communicator's operations must be
 * queued on one stream), non-blocking; TP's, KV's, CP's, EP's and the
 * links' at the GPU's highest priority, as the next kernel waits for them. Every operation
 * first makes its stream wait for the work already queued on the compute
 * stream (an event), so NCCL sees the buffers the kernels wrote and
 * overwrites none that a queued kernel still reads. The blocking
 * collectives then make the compute stream wait for their stream alone,
 * so later kernels see the result, and a TP all-reduce never waits behind
 * a DP reduction in flight. The nonblocking ones (comm_nccl_iallreduce,
 * _ireduce_scatter, the links) record an event instead, and the compute
 * stream waits for it only at comm_nccl_wait. Neither the host nor the
 * GPU's other work waits: a call returns as soon as NCCL has the operation
 * queued. Every operation is joined into the compute stream (a blocking
 * collective's end, comm_nccl_wait) or seen complete (comm_nccl_test)
 * before its buffers are reused, so waiting for the compute stream waits
 * for all communication that matters (cuda_synchronize).
 *
 * Concurrency. NCCL's kernels wait on the GPU for their peers, and NCCL
 * documents that operations of several communicators in flight at once
 * rely on all their kernels fitting on the GPU together (Megatron-LM and
 * PyTorch rely on the same: a few channels per communicator, far below an
 * H100's 132 SMs). A GPU where they did not fit could hang; the wait
 * below would then stop the run.
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

#include "comm_group.h"
#include "grid.h"
#include "ops.h"

/* Creates the NCCL communicators of this rank's groups (in the fixed order
 * TP, CP, DP_NODE, DP_CROSS, DP, EMBED, KV, EP, EDP, so no two ranks wait
 * on each other in opposite orders), then its pipeline links, and their streams. Needs
 * cuda_device_init first. Returns non-zero with
 * a message in err when CUDA is not set up; NCCL failing is fatal.
 * Collective on world, after grid_create. */
int comm_nccl_init(const Grid *g, char *err, size_t err_size);
/* Waits for every communicator's stream, restores the backend's plain
 * host wait and destroys the communicators (in one order over the world,
 * as NCCL may synchronise their ranks) and streams. Collective on world. */
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
/* recv (sum(counts), rank-major) = every rank's counts[r] elements of send,
 * which may be this rank's block of recv (in place). Equal counts run as
 * one ncclAllGather, unequal ones as a group of ncclBroadcast. Collective
 * on group. */
void comm_nccl_allgather(const Grid *g, CommGroup group, ops_tensor send,
                         ops_tensor recv, const int *counts);

/* comm_alltoallv on device buffers: send_counts[r] elements of send (packed
 * in group-rank order) to group rank r, recv_counts[r] from it into recv
 * (packed alike), as one group of ncclSend and ncclRecv on the group's
 * stream; zero counts post nothing. Collective on group. */
void comm_nccl_alltoallv(const Grid *g, CommGroup group, ops_tensor send,
                         const int64_t *send_counts, ops_tensor recv,
                         const int64_t *recv_counts);

/* ---- nonblocking ---------------------------------------------------------- */

/* comm.h's nonblocking forms on a GPU. Each is queued on its group's (or
 * link's) stream after the compute stream's work queued so far, and
 * *event receives the slot of an event recorded right after it; the
 * compute stream does not wait for it until comm_nccl_wait. fp32 sums
 * for the collectives. Collective on group for the collectives; the link
 * calls are point to point (comm_link_send/recv: each kind and direction
 * has its own communicator of two ranks and its own stream, so messages
 * match in posting order and a receive posted ahead blocks nothing but
 * its own link; peer must be the link's, the next or previous pp rank,
 * or the call is fatal). *event is -1 when nothing was queued (a group of
 * one rank, n = 0). */
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
