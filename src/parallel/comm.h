/*
 * comm.h - collectives on the grid's named groups.
 *
 * Callers say which group (tp, dp, ...) and pass ops_tensor buffers; comm
 * decides how to move them. The CPU build moves host buffers over MPI.
 * Keeping the group a name rather than an MPI_Comm is what lets a GPU build
 * route the same call to NCCL without touching the model code. Every
 * collective of src/ goes through here, except the building of
 * communicators (grid.c, affinity.c), fail.c's agreement on failure and
 * HDF5's collective I/O; the reduction over DP, flat or in two levels, is
 * comm_dp.h's.
 *
 * The groups, the reductions and the kinds of pipeline message are
 * comm_group.h's, which this header includes: comm_nccl.h takes them from
 * there too, so comm_nccl.c needs nothing of this file.
 *
 * Every blocking call names itself to the watchdog (watchdog.h) while it
 * runs, so a rank left waiting for a stopped peer says where it waits.
 * Every call (collectives, host values, pipeline messages) records itself
 * in the communication trace when TRIDENT_COMM_TRACE names a directory
 * (comm_trace.h), on the MPI and the NCCL path alike.
 *
 * A collective must be called by all ranks of its group in the same order
 * with the same n. Before the layout is known (the config is still to be
 * shared), grid_world_only gives a grid on which COMM_WORLD may be named.
 */
#ifndef TRI_SRC_COMM_H
#define TRI_SRC_COMM_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "comm_group.h"
#include "grid.h"
#include "ops.h"

/* The C type of the host values comm_allreduce_scalars reduces. */
typedef enum { COMM_INT, COMM_INT64, COMM_UINT64, COMM_DOUBLE } CommScalar;

/* The group's communicator (MPI_COMM_NULL when this rank has none), and
 * its size (0 then). Not collective. */
MPI_Comm comm_mpi(const Grid *g, CommGroup group);
int comm_size(const Grid *g, CommGroup group);

/* ---- tensors ------------------------------------------------------------ */

/* In place. A group of one rank returns at once. Collective on group. */
void comm_allreduce(const Grid *g, CommGroup group, ops_tensor buf, int64_t n,
                    CommOp op);
/* Sums send (sum of counts elements, rank-major) over the group; this rank
 * receives its block of counts[rank] elements into recv (bf16 and fp16
 * summed in fp32 and rounded once, as comm_allreduce does). Collective on
 * group. */
void comm_reduce_scatter(const Grid *g, CommGroup group, ops_tensor send,
                         ops_tensor recv, const int *counts);
/* Gathers every rank's counts[r] elements of send into recv, rank-major.
 * send may be this rank's own block of recv (in place: ZeRO's weights
 * gathered where they live). Collective on group. */
void comm_allgather(const Grid *g, CommGroup group, ops_tensor send,
                    ops_tensor recv, const int *counts);

/* ---- all-to-all ----------------------------------------------------------- */

/* Every rank sends send_counts[j] elements to group rank j and receives
 * recv_counts[j] from it: both buffers packed in group-rank order, each
 * peer's block at the prefix sum of the counts before it (expert
 * parallelism's rows to their experts and back). recv_counts[j] must be
 * what rank j sends this rank (comm_alltoall_int64 exchanges the counts
 * first). Any dtype, moved as it is (nothing is summed); send and recv
 * share it and may not overlap. Host buffers over MPI, device buffers
 * over NCCL (a group of sends and receives on the group's stream); a
 * group of one rank copies its block. Traced with each rank's counts, so
 * that tests/trace_check can pair rank i's send to j with j's receive
 * from i. Collective on group. */
void comm_alltoallv(const Grid *g, CommGroup group, ops_tensor send,
                    const int64_t *send_counts, ops_tensor recv, const int64_t *recv_counts);
/* Host values: per_peer of send (group size x per_peer, rank-major) to
 * each group rank, so recv[j * per_peer ...] is rank j's block for this
 * rank; per_peer alike on every rank. Always over MPI. Collective on
 * group. */
void comm_alltoall_int64(const Grid *g, CommGroup group, const int64_t *send, int64_t *recv,
                         int per_peer);

/* ---- nonblocking ------------------------------------------------------- */

/* An operation in flight. Host buffers: an MPI request. Device buffers:
 * an event the GPU records on the group's stream right after the
 * operation (comm_nccl.h), so nothing waits until someone asks. */
typedef struct {
    MPI_Request mpi;
    int event;          /* comm_nccl's event slot, or -1 */
    /* what comm_wait waits for, so that the watchdog's line names it when
     * a peer never comes ("comm_wait for a receive of activations on pp,
     * peer pp rank 0"): the operation (a string literal), its group, and
     * a pipeline message's other end (pp rank; -1 for a collective) */
    const char *waits_for;
    CommGroup group;
    int peer;
} CommRequest;

#define COMM_REQUEST_NULL ((CommRequest){MPI_REQUEST_NULL, -1, NULL, COMM_WORLD, -1})

/* 1 when req has nothing in flight. Not collective. */
int comm_request_done(const CommRequest *req);

/* Nonblocking forms of comm_allreduce (SUM) and comm_reduce_scatter, for
 * overlapping the DP reduction with the backward pass: fp32 buffers, on
 * the host (MPI) or a GPU (NCCL, on the group's own stream, after the
 * compute stream's work queued so far, so the backward that follows runs
 * beside it). The buffers must stay untouched until comm_wait. Collective
 * on group (each rank completes its own request). */
void comm_iallreduce(const Grid *g, CommGroup group, ops_tensor buf, int64_t n,
                     CommRequest *req);
void comm_ireduce_scatter(const Grid *g, CommGroup group, ops_tensor send,
                          ops_tensor recv, const int *counts, CommRequest *req);
/* Lets the operation advance (MPI moves nonblocking collectives only
 * inside its calls); returns 1 once it has completed, and req is then
 * null. Not collective. */
int comm_test(CommRequest *req);
/* Collective on group. */
void comm_barrier(const Grid *g, CommGroup group);

/* ---- host values ---------------------------------------------------------- */

/* Counts, sums, flags and texts the host reads: plain host memory, always
 * over MPI, never timed in comm_seconds. */

/* n values of type, in place: every rank ends with the reduction over the
 * group. Integer sums are exact (uint64 wraps), so checksums may be
 * summed. Collective on group. */
void comm_allreduce_scalars(const Grid *g, CommGroup group, void *v, int n,
                            CommScalar type, CommOp op);
/* bytes of buf from the group's rank root to every rank. Collective on
 * group. */
void comm_bcast_bytes(const Grid *g, CommGroup group, void *buf, size_t bytes,
                      int root);
/* Rank root receives every rank's `bytes` of send in recv (group size x
 * bytes, rank-major); recv is not used elsewhere and may be NULL there.
 * Collective on group. */
void comm_gather_bytes(const Grid *g, CommGroup group, const void *send,
                       size_t bytes, void *recv, int root);

/* ---- pipeline links ------------------------------------------------------ */

/* Nonblocking point-to-point between pipeline stages: n elements of buf
 * to or from pp rank peer. Messages of one kind from one stage to another
 * match in the order they are posted, with no tags, as NCCL's do: the
 * receiver must post its receives of each kind in the order its sender
 * posts the sends (pipeline.c does, and t_schedule checks every schedule
 * allows it). Device buffers go device to device over NCCL, each kind
 * and direction on its own communicator and stream; host buffers over
 * MPI, the kind as the tag. Not collective: the two peers each post their
 * side. */
void comm_link_send(const Grid *g, CommLink kind, ops_tensor buf, int64_t n, int peer,
                    CommRequest *req);
void comm_link_recv(const Grid *g, CommLink kind, ops_tensor buf, int64_t n, int peer,
                    CommRequest *req);

/* Completes req. Host buffers: blocks until MPI is done with them and
 * returns the seconds spent waiting. Device buffers: makes the GPU's
 * compute stream wait for the operation, so the work queued after this
 * call sees its result (or may overwrite its buffer), and returns 0 at
 * once: the wait happens on the GPU, where ops timers (ops.h) see it. req
 * may be null. Not collective. */
double comm_wait(CommRequest *req);

/* Seconds spent inside comm calls since the last reset, per group, for the
 * communication share in the metrics. Not collective. */
double comm_seconds(CommGroup group);
/* Seconds spent blocked in any call above (collectives of every group,
 * host values, comm_wait) since the last reset: what a rank did not
 * spend computing, for the straggler report. Not collective. */
double comm_blocked_seconds(void);
/* Resets both. Not collective. */
void comm_reset_seconds(void);

#endif
