/*
 * comm.c - collectives on the grid's groups: MPI for host buffers, NCCL
 * (comm_nccl.c) for device buffers.
 *
 * Pipeline messages of device buffers go device to device over NCCL
 * (comm_nccl.c); of host buffers over MPI, with the message's kind as its
 * tag, so that both paths match messages the same way, in posting order
 * per kind and pair of stages (comm.h), and the CPU runs the very posting
 * order the GPU relies on.
 *
 * The calls go one way: comm.c routes device buffers down to comm_nccl.c,
 * which never calls back here (what both name, the groups and their
 * names, is comm_group.c's, below both).
 */
#include "comm.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "comm_trace.h"
#include "fail.h"
#include "timer.h"
#include "watchdog.h"
#if TRI_HAVE_NCCL
#include "comm_nccl.h"
#endif

static int on_device(ops_tensor t) { return t.device != OPS_CPU; }

/* A device buffer, in a collective or a pipeline message: NCCL's job
 * (call, then return). */
#if TRI_HAVE_NCCL
#define DEVICE_TO_NCCL(buf, call) \
    do { if (on_device(buf)) { call; return; } } while (0)
#else
#define DEVICE_TO_NCCL(buf, call) \
    do { if (on_device(buf)) fail_abort("device buffers need the NCCL build; reconfigure with --with-nccl", __FILE__, __LINE__); } while (0)
#endif

static double comm_time[COMM_GROUP_COUNT];
static double blocked_time;   /* in any blocking call below, every group */

/* Every blocking call is a named phase for the watchdog (a rank that
 * waits in it for a stopped peer says where), and its time counts as
 * blocked, so the straggler report can tell computing from waiting. */
typedef struct {
    WatchdogPhase outer;
    double t0;
} Blocking;

static Blocking blocking_begin_peer(const char *operation, const char *detail, int peer)
{
    return (Blocking){watchdog_enter_peer(operation, detail, peer), timer_now()};
}

static Blocking blocking_begin(const char *operation, const char *detail)
{
    return blocking_begin_peer(operation, detail, -1);
}

static void blocking_end(Blocking b)
{
    blocked_time += timer_now() - b.t0;
    watchdog_leave(b.outer);
}

MPI_Comm comm_mpi(const Grid *g, CommGroup group)
{
    switch (group) {
    case COMM_WORLD: return g->world;
    case COMM_TP: return g->tp_comm;
    case COMM_DP: return g->dp_comm;
    case COMM_PP: return g->pp_comm;
    case COMM_DP_NODE: return g->dp_node;
    case COMM_DP_CROSS: return g->dp_cross;
    case COMM_EMBED: return g->embed_comm;
    case COMM_KV: return g->kv_comm;
    case COMM_CP: return g->cp_comm;
    case COMM_EP: return g->ep_comm;
    case COMM_EDP: return g->edp_comm;
    }
    return MPI_COMM_NULL;
}

int comm_size(const Grid *g, CommGroup group)
{
    MPI_Comm c = comm_mpi(g, group);
    int size = 0;
    if (c != MPI_COMM_NULL)
        MPI_Comm_size(c, &size);
    return size;
}

static MPI_Datatype mpi_type(ops_dtype dtype)
{
    switch (dtype) {
    case OPS_F32: return MPI_FLOAT;
    case OPS_I32: return MPI_INT;
    case OPS_F64: return MPI_DOUBLE;
    case OPS_BF16:
    case OPS_F16: return MPI_UINT16_T; /* moved, never reduced over MPI */
    }
    return MPI_DATATYPE_NULL;
}

static MPI_Op mpi_op(CommOp op)
{
    switch (op) {
    case COMM_SUM: return MPI_SUM;
    case COMM_MAX: return MPI_MAX;
    case COMM_MIN: return MPI_MIN;
    }
    return MPI_OP_NULL;
}

/* ---- the trace (comm_trace.h): each public call records itself first,
 * on both paths, so the CPU's trace is the GPU's; one branch when off --- */

static const char *op_name(CommOp op)
{
    static const char *const names[] = {[COMM_SUM] = "sum", [COMM_MAX] = "max",
                                        [COMM_MIN] = "min"};
    return names[op];
}

static void trace(const Grid *g, CommGroup group, const char *operation, int64_t n,
                  const char *dtype, int root, const char *detail)
{
    if (comm_tracing())
        comm_trace_collective(comm_mpi(g, group), comm_group_name(group), operation, n,
                              dtype, root, detail);
}

/* A reduce-scatter or all-gather: its total count, and its counts' digest,
 * which every member must share. */
static void trace_split(const Grid *g, CommGroup group, const char *operation,
                        ops_dtype dtype, const int *counts)
{
    if (!comm_tracing())
        return;
    int size = comm_size(g, group);
    int64_t total = 0;
    for (int r = 0; r < size; r++)
        total += counts[r];
    char split[32];
    comm_trace_split(counts, size, split, sizeof split);
    trace(g, group, operation, total, ops_dtype_name(dtype), -1, split);
}

static void trace_message(const Grid *g, int sends, CommLink kind, ops_tensor buf,
                          int64_t n, int peer)
{
    if (comm_tracing())
        comm_trace_message(comm_mpi(g, COMM_PP), sends, kind, n, ops_dtype_name(buf.dtype),
                           peer);
}

/* bf16 and fp16 buffers are reduced in fp32: cast into ops_wide_scratch
 * on their device (grown, never shrunk, so steps do not allocate; on a GPU
 * grown in stream order, as a cudaFree would wait for the whole device,
 * NCCL included), sum, cast back. One rounding, as a reduction in fp32
 * would give, whatever the group's size: MPI has no 16-bit sum, and
 * NCCL's would round at every hop of its ring (doc/gpu.md), so both paths
 * widen. */

static void reduce_wide(const Grid *g, CommGroup group, ops_tensor wide, int64_t n,
                        CommOp op)
{
    DEVICE_TO_NCCL(wide, comm_nccl_allreduce(g, group, wide, n, op));
    double t0 = timer_now();
    TRI_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, wide.data, (int)n, MPI_FLOAT,
                                mpi_op(op), comm_mpi(g, group)));
    comm_time[group] += timer_now() - t0;
}

static void run_allreduce(const Grid *g, CommGroup group, ops_tensor buf, int64_t n,
                          CommOp op)
{
    if (comm_size(g, group) <= 1 || n == 0)
        return;
    int narrow = buf.dtype == OPS_BF16 || buf.dtype == OPS_F16;
    if (!narrow && on_device(buf)) { /* fp32, int32, fp64: NCCL reduces them as they are */
        DEVICE_TO_NCCL(buf, comm_nccl_allreduce(g, group, buf, n, op));
    }
    ops_tensor t = ops_view(buf, 0, n), wide = t;
    if (buf.dtype != OPS_F32) {
        wide = ops_wide_scratch(buf.device, n);
        ops_cast(wide, t);
    }
    reduce_wide(g, group, wide, n, op);
    if (buf.dtype != OPS_F32)
        ops_cast(t, wide);
}

void comm_allreduce(const Grid *g, CommGroup group, ops_tensor buf, int64_t n,
                    CommOp op)
{
    Blocking b = blocking_begin("comm_allreduce", comm_group_name(group));
    trace(g, group, "allreduce", n, ops_dtype_name(buf.dtype), -1, op_name(op));
    run_allreduce(g, group, buf, n, op);
    blocking_end(b);
}

static void run_reduce_scatter(const Grid *g, CommGroup group, ops_tensor send,
                               ops_tensor recv, const int *counts)
{
    if (send.dtype != OPS_BF16 && send.dtype != OPS_F16) {
        DEVICE_TO_NCCL(send, comm_nccl_reduce_scatter(g, group, send, recv, counts));
        double t0 = timer_now();
        TRI_CHECK_MPI(MPI_Reduce_scatter(send.data, recv.data, counts, MPI_FLOAT,
                                         MPI_SUM, comm_mpi(g, group)));
        comm_time[group] += timer_now() - t0;
        return;
    }
    /* bf16 and fp16 as run_allreduce does them, on either path: summed in
     * fp32, rounded once. The scratch holds the widened input, then (NCCL,
     * out of place) this rank's block; MPI, in place, leaves the block at
     * the scratch's start. */
    int size = comm_size(g, group), rank;
    int64_t total = 0;
    for (int r = 0; r < size; r++)
        total += counts[r];
    MPI_Comm_rank(comm_mpi(g, group), &rank);
    ops_tensor wide = ops_wide_scratch(send.device, total + counts[rank]);
    ops_tensor all = ops_view(wide, 0, total);
    ops_tensor out = ops_view(recv, 0, counts[rank]);
    ops_cast(all, ops_view(send, 0, total));
    DEVICE_TO_NCCL(send, {
        ops_tensor mine = ops_view(wide, total, counts[rank]);
        comm_nccl_reduce_scatter(g, group, all, mine, counts);
        ops_cast(out, mine);
    });
    double t0 = timer_now();
    TRI_CHECK_MPI(MPI_Reduce_scatter(MPI_IN_PLACE, all.data, counts, MPI_FLOAT, MPI_SUM,
                                     comm_mpi(g, group)));
    comm_time[group] += timer_now() - t0;
    ops_cast(out, ops_view(all, 0, counts[rank]));
}

void comm_reduce_scatter(const Grid *g, CommGroup group, ops_tensor send,
                         ops_tensor recv, const int *counts)
{
    Blocking b = blocking_begin("comm_reduce_scatter", comm_group_name(group));
    trace_split(g, group, "reduce_scatter", send.dtype, counts);
    run_reduce_scatter(g, group, send, recv, counts);
    blocking_end(b);
}

static void run_allgather(const Grid *g, CommGroup group, ops_tensor send,
                          ops_tensor recv, const int *counts)
{
    DEVICE_TO_NCCL(send, comm_nccl_allgather(g, group, send, recv, counts));
    int size = comm_size(g, group);
    int displs[size];
    int off = 0;
    for (int r = 0; r < size; r++) {
        displs[r] = off;
        off += counts[r];
    }
    int rank;
    MPI_Comm_rank(comm_mpi(g, group), &rank);
    /* send may be this rank's own block of recv: MPI wants that said */
    const void *sendbuf = send.data;
    if ((char *)send.data == (char *)recv.data + (size_t)displs[rank] * ops_dtype_size(recv.dtype))
        sendbuf = MPI_IN_PLACE;
    double t0 = timer_now();
    TRI_CHECK_MPI(MPI_Allgatherv(sendbuf, counts[rank], mpi_type(send.dtype),
                                 recv.data, counts, displs, mpi_type(recv.dtype),
                                 comm_mpi(g, group)));
    comm_time[group] += timer_now() - t0;
}

void comm_allgather(const Grid *g, CommGroup group, ops_tensor send,
                    ops_tensor recv, const int *counts)
{
    Blocking b = blocking_begin("comm_allgather", comm_group_name(group));
    trace_split(g, group, "allgather", send.dtype, counts);
    run_allgather(g, group, send, recv, counts);
    blocking_end(b);
}

/* ---- all-to-all ------------------------------------------------------------- */

/* MPI counts are ints; what says which call's count is too large. */
static int mpi_count(size_t n, const char *what)
{
    if (n > INT_MAX)
        fail_abort(what, __FILE__, __LINE__);
    return (int)n;
}

/* A peer's count as MPI's int, naming the call when it is too large. */
static int peer_count(int64_t n, const char *what)
{
    if (n < 0)
        fail_abort("comm_alltoallv: a negative count", __FILE__, __LINE__);
    return mpi_count((size_t)n, what);
}

/* Both sides' totals fit their buffers, of one dtype. */
static void check_alltoallv(int size, ops_tensor send, const int64_t *send_counts,
                            ops_tensor recv, const int64_t *recv_counts)
{
    int64_t out = 0, in = 0;
    for (int r = 0; r < size; r++) {
        out += send_counts[r];
        in += recv_counts[r];
    }
    if (send.dtype != recv.dtype || out > send.n || in > recv.n || send.device != recv.device)
        fail_abort("comm_alltoallv: the counts exceed the buffers, or send and recv differ "
                   "in dtype or device", __FILE__, __LINE__);
}

static void run_alltoallv(const Grid *g, CommGroup group, ops_tensor send,
                          const int64_t *send_counts, ops_tensor recv,
                          const int64_t *recv_counts)
{
    int size = comm_size(g, group);
    if (size < 1)
        fail_abort("comm_alltoallv on a group this rank is not in", __FILE__, __LINE__);
    check_alltoallv(size, send, send_counts, recv, recv_counts);
    if (size == 1) {
        if (send_counts[0] > 0)
            ops_copy(ops_view(recv, 0, recv_counts[0]), ops_view(send, 0, send_counts[0]));
        return;
    }
    DEVICE_TO_NCCL(send, comm_nccl_alltoallv(g, group, send, send_counts, recv, recv_counts));
    int sc[size], sd[size], rc[size], rd[size];
    int64_t so = 0, ro = 0;
    for (int r = 0; r < size; r++) {
        sc[r] = peer_count(send_counts[r], "comm_alltoallv: over 2^31 elements to a peer");
        rc[r] = peer_count(recv_counts[r], "comm_alltoallv: over 2^31 elements from a peer");
        sd[r] = peer_count(so, "comm_alltoallv: over 2^31 elements sent");
        rd[r] = peer_count(ro, "comm_alltoallv: over 2^31 elements received");
        so += sc[r];
        ro += rc[r];
    }
    double t0 = timer_now();
    TRI_CHECK_MPI(MPI_Alltoallv(send.data, sc, sd, mpi_type(send.dtype), recv.data, rc, rd,
                                mpi_type(recv.dtype), comm_mpi(g, group)));
    comm_time[group] += timer_now() - t0;
}

void comm_alltoallv(const Grid *g, CommGroup group, ops_tensor send,
                    const int64_t *send_counts, ops_tensor recv, const int64_t *recv_counts)
{
    Blocking b = blocking_begin("comm_alltoallv", comm_group_name(group));
    if (comm_tracing())
        comm_trace_exchange(comm_mpi(g, group), comm_group_name(group), "alltoallv",
                            ops_dtype_name(send.dtype), send_counts, recv_counts);
    run_alltoallv(g, group, send, send_counts, recv, recv_counts);
    blocking_end(b);
}

void comm_alltoall_int64(const Grid *g, CommGroup group, const int64_t *send, int64_t *recv,
                         int per_peer)
{
    Blocking b = blocking_begin("comm_alltoall_int64", comm_group_name(group));
    trace(g, group, "alltoall", per_peer, "int64", -1, NULL);
    TRI_CHECK_MPI(MPI_Alltoall(send, per_peer, MPI_INT64_T, recv, per_peer, MPI_INT64_T,
                               comm_mpi(g, group)));
    blocking_end(b);
}

int comm_request_done(const CommRequest *req)
{
    return req->mpi == MPI_REQUEST_NULL && req->event < 0;
}

void comm_iallreduce(const Grid *g, CommGroup group, ops_tensor buf, int64_t n,
                     CommRequest *req)
{
    *req = (CommRequest){MPI_REQUEST_NULL, -1, "comm_wait for an overlapped all-reduce", group,
                         -1};
    trace(g, group, "iallreduce", n, ops_dtype_name(buf.dtype), -1, op_name(COMM_SUM));
    if (buf.dtype != OPS_F32)
        fail_abort("comm_iallreduce: fp32 buffers only", __FILE__, __LINE__);
    DEVICE_TO_NCCL(buf, comm_nccl_iallreduce(g, group, buf, n, &req->event));
    TRI_CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, buf.data, (int)n, MPI_FLOAT, MPI_SUM,
                                 comm_mpi(g, group), &req->mpi));
}

void comm_ireduce_scatter(const Grid *g, CommGroup group, ops_tensor send,
                          ops_tensor recv, const int *counts, CommRequest *req)
{
    *req = (CommRequest){MPI_REQUEST_NULL, -1, "comm_wait for an overlapped reduce-scatter",
                         group, -1};
    trace_split(g, group, "ireduce_scatter", send.dtype, counts);
    if (send.dtype != OPS_F32 || recv.dtype != OPS_F32)
        fail_abort("comm_ireduce_scatter: fp32 buffers only", __FILE__, __LINE__);
    DEVICE_TO_NCCL(send, comm_nccl_ireduce_scatter(g, group, send, recv, counts,
                                                   &req->event));
    TRI_CHECK_MPI(MPI_Ireduce_scatter(send.data, recv.data, counts, MPI_FLOAT, MPI_SUM,
                                      comm_mpi(g, group), &req->mpi));
}

int comm_test(CommRequest *req)
{
#if TRI_HAVE_NCCL
    if (req->event >= 0 && comm_nccl_test(req->event))
        req->event = -1;
#endif
    int done = 1;
    if (req->mpi != MPI_REQUEST_NULL)
        TRI_CHECK_MPI(MPI_Test(&req->mpi, &done, MPI_STATUS_IGNORE));
    return comm_request_done(req);
}

void comm_barrier(const Grid *g, CommGroup group)
{
    Blocking b = blocking_begin("comm_barrier", comm_group_name(group));
    trace(g, group, "barrier", 0, "-", -1, NULL);
    TRI_CHECK_MPI(MPI_Barrier(comm_mpi(g, group)));
    blocking_end(b);
}

/* ---- host values ---------------------------------------------------------- */

static const char *scalar_name(CommScalar type)
{
    static const char *const names[] = {
        [COMM_INT] = "int", [COMM_INT64] = "int64", [COMM_UINT64] = "uint64",
        [COMM_DOUBLE] = "double",
    };
    return names[type];
}

static MPI_Datatype scalar_type(CommScalar type, size_t *size)
{
    switch (type) {
    case COMM_INT: *size = sizeof(int); return MPI_INT;
    case COMM_INT64: *size = sizeof(int64_t); return MPI_INT64_T;
    case COMM_UINT64: *size = sizeof(uint64_t); return MPI_UINT64_T;
    case COMM_DOUBLE: *size = sizeof(double); return MPI_DOUBLE;
    }
    *size = 0;
    return MPI_DATATYPE_NULL;
}

static void run_allreduce_scalars(const Grid *g, CommGroup group, void *v, int n,
                                  CommScalar type, CommOp op)
{
    if (n <= 0)
        return;
    size_t size;
    MPI_Datatype dt = scalar_type(type, &size);
    /* From a copy rather than MPI_IN_PLACE: the world's sums of doubles
     * (loss, gradient norm) keep the call they were always made with. */
    void *mine = TRI_MALLOC((size_t)n * size, "a copy to all-reduce");
    memcpy(mine, v, (size_t)n * size);
    TRI_CHECK_MPI(MPI_Allreduce(mine, v, n, dt, mpi_op(op), comm_mpi(g, group)));
    free(mine);
}

void comm_allreduce_scalars(const Grid *g, CommGroup group, void *v, int n,
                            CommScalar type, CommOp op)
{
    Blocking b = blocking_begin("comm_allreduce_scalars", comm_group_name(group));
    trace(g, group, "allreduce_scalars", n, scalar_name(type), -1, op_name(op));
    run_allreduce_scalars(g, group, v, n, type, op);
    blocking_end(b);
}

static void run_bcast_bytes(const Grid *g, CommGroup group, void *buf, size_t bytes,
                            int root)
{
    TRI_CHECK_MPI(MPI_Bcast(buf, mpi_count(bytes, "comm_bcast_bytes: over 2 GiB"),
                            MPI_BYTE, root, comm_mpi(g, group)));
}

void comm_bcast_bytes(const Grid *g, CommGroup group, void *buf, size_t bytes,
                      int root)
{
    Blocking b = blocking_begin("comm_bcast_bytes", comm_group_name(group));
    trace(g, group, "bcast_bytes", (int64_t)bytes, "byte", root, NULL);
    run_bcast_bytes(g, group, buf, bytes, root);
    blocking_end(b);
}

static void run_gather_bytes(const Grid *g, CommGroup group, const void *send,
                             size_t bytes, void *recv, int root)
{
    int n = mpi_count(bytes, "comm_gather_bytes: over 2 GiB per rank");
    TRI_CHECK_MPI(MPI_Gather(send, n, MPI_BYTE, recv, n, MPI_BYTE, root,
                             comm_mpi(g, group)));
}

void comm_gather_bytes(const Grid *g, CommGroup group, const void *send,
                       size_t bytes, void *recv, int root)
{
    Blocking b = blocking_begin("comm_gather_bytes", comm_group_name(group));
    trace(g, group, "gather_bytes", (int64_t)bytes, "byte", root, NULL);
    run_gather_bytes(g, group, send, bytes, recv, root);
    blocking_end(b);
}

/* ---- pipeline links ----------------------------------------------------- */

/* A request for a message of kind to (sends) or from pp rank peer, named
 * for the watchdog. */
static CommRequest link_request(CommLink kind, int sends, int peer)
{
    static const char *const waits_for[2][2] = {
        [LINK_ACTIVATION] = {"comm_wait for a receive of activations",
                             "comm_wait for a send of activations"},
        [LINK_GRADIENT] = {"comm_wait for a receive of gradients",
                           "comm_wait for a send of gradients"},
    };
    return (CommRequest){MPI_REQUEST_NULL, -1, waits_for[kind][sends != 0], COMM_PP, peer};
}

void comm_link_send(const Grid *g, CommLink kind, ops_tensor buf, int64_t n, int peer,
                    CommRequest *req)
{
    *req = link_request(kind, 1, peer);
    trace_message(g, 1, kind, buf, n, peer);
    DEVICE_TO_NCCL(buf, comm_nccl_link_send(g, kind, buf, n, peer, &req->event));
    TRI_CHECK_MPI(MPI_Isend(buf.data, (int)n, mpi_type(buf.dtype), peer, (int)kind,
                            comm_mpi(g, COMM_PP), &req->mpi));
}

void comm_link_recv(const Grid *g, CommLink kind, ops_tensor buf, int64_t n, int peer,
                    CommRequest *req)
{
    *req = link_request(kind, 0, peer);
    trace_message(g, 0, kind, buf, n, peer);
    DEVICE_TO_NCCL(buf, comm_nccl_link_recv(g, kind, buf, n, peer, &req->event));
    TRI_CHECK_MPI(MPI_Irecv(buf.data, (int)n, mpi_type(buf.dtype), peer, (int)kind,
                            comm_mpi(g, COMM_PP), &req->mpi));
}

double comm_wait(CommRequest *req)
{
#if TRI_HAVE_NCCL
    if (req->event >= 0) {
        comm_nccl_wait(req->event);
        req->event = -1;
    }
#endif
    if (req->mpi == MPI_REQUEST_NULL)
        return 0.0;
    Blocking b = req->waits_for ? blocking_begin_peer(req->waits_for,
                                                      comm_group_name(req->group), req->peer)
                                : blocking_begin("comm_wait", NULL);
    TRI_CHECK_MPI(MPI_Wait(&req->mpi, MPI_STATUS_IGNORE));
    double dt = timer_now() - b.t0;
    blocking_end(b);
    comm_time[COMM_PP] += dt;
    return dt;
}

double comm_seconds(CommGroup group) { return comm_time[group]; }

double comm_blocked_seconds(void) { return blocked_time; }

void comm_reset_seconds(void)
{
    for (int i = 0; i < COMM_GROUP_COUNT; i++)
        comm_time[i] = 0.0;
    blocked_time = 0.0;
}
