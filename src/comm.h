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
 * Every blocking call names itself to the watchdog (watchdog.h) while it
 * runs, so a rank left waiting for a stopped peer says where it waits.
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

#include "grid.h"
#include "kernels/ops.h"

typedef enum {
    COMM_WORLD, COMM_TP, COMM_DP, COMM_PP, COMM_DP_NODE, COMM_DP_CROSS,
    COMM_EMBED,
    COMM_KV      /* TP ranks that hold the same key/value heads (llama, arch.h) */
} CommGroup;

typedef enum { COMM_SUM, COMM_MAX, COMM_MIN } CommOp;

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
 * Collective on group. */
void comm_allgather(const Grid *g, CommGroup group, ops_tensor send,
                    ops_tensor recv, const int *counts);

/* Nonblocking forms (host fp32 buffers), for overlapping the DP reduction
 * with the backward pass: same arguments plus a request that comm_wait or
 * comm_test completes; the buffers must stay untouched until then.
 * Collective on group (each rank completes its own request). */
void comm_iallreduce(const Grid *g, CommGroup group, ops_tensor buf, int64_t n,
                     MPI_Request *req);
void comm_ireduce_scatter(const Grid *g, CommGroup group, ops_tensor send,
                          ops_tensor recv, const int *counts, MPI_Request *req);
/* Lets MPI advance the request; returns 1 once it has completed (req then
 * is MPI_REQUEST_NULL). Not collective. */
int comm_test(MPI_Request *req);
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

/* ---- point to point ------------------------------------------------------- */

/* Nonblocking sends and receives inside a group (pipeline neighbours).
 * Not collective: the two peers each post their side. */
void comm_isend(const Grid *g, CommGroup group, ops_tensor buf, int64_t n,
                int peer, int tag, MPI_Request *req);
void comm_irecv(const Grid *g, CommGroup group, ops_tensor buf, int64_t n,
                int peer, int tag, MPI_Request *req);
/* Waits; returns the seconds spent waiting. req may be MPI_REQUEST_NULL.
 * Not collective. */
double comm_wait(MPI_Request *req);

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
