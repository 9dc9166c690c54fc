/*
 * comm.h - collectives on the grid's named groups.
 *
 * Callers say which group (tp, dp, ...) and pass ops_tensor buffers; comm
 * decides how to move them. The CPU build moves host buffers over MPI.
 * Keeping the group a name rather than an MPI_Comm is what lets a GPU build
 * route the same call to NCCL without touching the model code.
 *
 * Every function is collective on the group it names (point-to-point ones
 * involve the two peers), and all ranks of the group must call it in the
 * same order with the same n.
 */
#ifndef TRI_SRC_COMM_H
#define TRI_SRC_COMM_H

#include <mpi.h>
#include <stdint.h>

#include "grid.h"
#include "kernels/ops.h"

typedef enum {
    COMM_WORLD, COMM_TP, COMM_DP, COMM_PP, COMM_DP_NODE, COMM_DP_CROSS,
    COMM_EMBED
} CommGroup;

typedef enum { COMM_SUM, COMM_MAX } CommOp;

MPI_Comm comm_mpi(const Grid *g, CommGroup group);
int comm_size(const Grid *g, CommGroup group);

/* In place. A group of one rank returns at once. */
void comm_allreduce(const Grid *g, CommGroup group, ops_tensor buf, int64_t n,
                    CommOp op);
/* Sums send (sum of counts elements, rank-major) over the group; this rank
 * receives its block of counts[rank] elements into recv. */
void comm_reduce_scatter(const Grid *g, CommGroup group, ops_tensor send,
                         ops_tensor recv, const int *counts);
/* Gathers every rank's counts[r] elements of send into recv, rank-major. */
void comm_allgather(const Grid *g, CommGroup group, ops_tensor send,
                    ops_tensor recv, const int *counts);
void comm_bcast(const Grid *g, CommGroup group, ops_tensor buf, int64_t n,
                int root);

/* Nonblocking forms (host fp32 buffers), for overlapping the DP reduction
 * with the backward pass: same arguments plus a request that comm_wait or
 * comm_test completes; the buffers must stay untouched until then. */
void comm_iallreduce(const Grid *g, CommGroup group, ops_tensor buf, int64_t n,
                     MPI_Request *req);
void comm_ireduce_scatter(const Grid *g, CommGroup group, ops_tensor send,
                          ops_tensor recv, const int *counts, MPI_Request *req);
/* Lets MPI advance the request; returns 1 once it has completed (req then
 * is MPI_REQUEST_NULL). Not collective. */
int comm_test(MPI_Request *req);
void comm_barrier(const Grid *g, CommGroup group);

/* Nonblocking point-to-point inside a group (pipeline neighbours). */
void comm_isend(const Grid *g, CommGroup group, ops_tensor buf, int64_t n,
                int peer, int tag, MPI_Request *req);
void comm_irecv(const Grid *g, CommGroup group, ops_tensor buf, int64_t n,
                int peer, int tag, MPI_Request *req);
/* Waits; returns the seconds spent waiting. req may be MPI_REQUEST_NULL. */
double comm_wait(MPI_Request *req);

/* Seconds spent inside comm calls since the last reset, per group, for the
 * communication share in the metrics. Not collective. */
double comm_seconds(CommGroup group);
void comm_reset_seconds(void);

#endif
