/*
 * comm_nccl.c - the NCCL implementation of comm.h, for device buffers.
 *
 * One communicator per grid group, made once at start-up: NCCL's set-up
 * (topology search, buffers, proxy threads) costs seconds and memory, so
 * groups are not created per call, and a group of one rank gets none. The
 * state is process-wide, like comm.c's timers: one rank, one GPU, one set
 * of communicators. Streams and ordering are described in comm_nccl.h.
 *
 * Compiled only in NCCL builds. The only file of src/ that names CUDA or
 * NCCL types, and the only one that includes a kernels/ header besides
 * ops.h: kernels/cuda/cuda.h, for the streams the kernels run on.
 */
#include "comm_nccl.h"

#include <stdio.h>
#include <string.h>

/* CUDA's and NCCL's headers declare `f()` without `void`, which
 * -Wstrict-prototypes flags in C; they are not ours to fix. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cuda_runtime_api.h>
#include <nccl.h>
#pragma GCC diagnostic pop

#include "fail.h"
#include "gpu_wait.h"
#include "kernels/cuda/cuda.h"
#include "watchdog.h"

#define N_GROUPS (COMM_KV + 1)

static struct {
    int ready;
    ncclComm_t comm[N_GROUPS];  /* NULL: no communicator (one rank) */
    int owned[N_GROUPS];        /* 0 for DP when it shares another's */
    int size[N_GROUPS], rank[N_GROUPS];
    const char *last_op[N_GROUPS];  /* the latest collective queued on each */
    CommGroup last_group;           /* ... and the group of the latest of all */
    cudaEvent_t compute_done, comm_done;
} nc;

static const char *group_name(CommGroup group)
{
    switch (group) {
    case COMM_WORLD: return "world";
    case COMM_TP: return "tp";
    case COMM_DP: return "dp";
    case COMM_PP: return "pp";
    case COMM_DP_NODE: return "dp_node";
    case COMM_DP_CROSS: return "dp_cross";
    case COMM_EMBED: return "embed";
    case COMM_KV: return "kv";
    }
    return "unknown";
}

/* ---- errors ------------------------------------------------------------ */

void comm_nccl_abort(void)
{
    for (int i = 0; i < N_GROUPS; i++) {
        if (nc.comm[i] && nc.owned[i])
            (void)ncclCommAbort(nc.comm[i]);
        nc.comm[i] = NULL;
    }
}

static void nccl_fail(const char *what, const char *file, int line)
    __attribute__((noreturn));

static void nccl_fail(const char *what, const char *file, int line)
{
    comm_nccl_abort();
    fail_abort(what, file, line);
}

static void check_nccl_(ncclResult_t r, const char *call, const char *file,
                        int line)
{
    if (r == ncclSuccess)
        return;
    char msg[768];
    snprintf(msg, sizeof msg, "%s failed: %s (%s); NCCL_DEBUG=WARN says more",
             call, ncclGetErrorString(r), ncclGetLastError(NULL));
    nccl_fail(msg, file, line);
}

static void check_cuda_(cudaError_t err, const char *call, const char *file,
                        int line)
{
    if (err == cudaSuccess)
        return;
    char msg[512];
    snprintf(msg, sizeof msg, "%s failed: %s (%s)", call,
             cudaGetErrorString(err), cudaGetErrorName(err));
    nccl_fail(msg, file, line);
}

#define TRI_CHECK_NCCL(call) check_nccl_((call), #call, __FILE__, __LINE__)
#define CHECK_CUDA(call) check_cuda_((call), #call, __FILE__, __LINE__)
#define FAIL(msg) nccl_fail((msg), __FILE__, __LINE__)

/* The first group whose communicator holds an asynchronous error (a peer
 * or the network failed), or -1; *result receives the error. */
static int failed_group(ncclResult_t *result)
{
    for (int i = 0; i < N_GROUPS; i++) {
        if (!nc.comm[i] || !nc.owned[i])
            continue;
        ncclResult_t async = ncclSuccess;
        TRI_CHECK_NCCL(ncclCommGetAsyncError(nc.comm[i], &async));
        if (async != ncclSuccess && async != ncclInProgress) {
            *result = async;
            return i;
        }
    }
    return -1;
}

/* ---- waiting for the GPU ------------------------------------------------- */

typedef struct {
    cudaEvent_t event;
    int group;              /* failed_group's answer */
    ncclResult_t result;
} WaitState;

static int probe_done(void *user)
{
    cudaError_t e = cudaEventQuery(((WaitState *)user)->event);
    if (e == cudaErrorNotReady)
        return 0;
    CHECK_CUDA(e);
    return 1;
}

static int probe_failed(void *user)
{
    WaitState *w = user;
    w->group = failed_group(&w->result);
    return w->group >= 0;
}

/* The NCCL operation a stopped run was waiting behind, for its message. */
static void describe_op(char *buf, size_t size, int group)
{
    const char *op = nc.last_op[group];
    if (op)
        snprintf(buf, size, "NCCL %s on %s", op, group_name((CommGroup)group));
    else if (group == COMM_WORLD) /* nothing queued yet */
        snprintf(buf, size, "no NCCL operation yet");
    else
        snprintf(buf, size, "the NCCL communicator of %s", group_name((CommGroup)group));
}

/* cuda_set_wait's hook: cudaEventSynchronize, but a peer's failure or
 * [fault] timeout without progress aborts the communicators and ends the
 * run (gpu_wait.h) instead of waiting for ever. */
static void wait_event(void *event, const char *what)
{
    WaitState w = {(cudaEvent_t)event, -1, ncclSuccess};
    GpuWaitProbe probe = {probe_done, probe_failed, &w};
    double timeout = watchdog_limit_s(), waited;
    WatchdogPhase outer = watchdog_enter("waiting for the GPU", what);
    GpuWaitVerdict v = gpu_wait_poll(&probe, timeout, &waited);
    if (v == GPU_WAIT_DONE) {
        watchdog_leave(outer);
        return;
    }
    char op[96], msg[1024];
    if (v == GPU_WAIT_PEER_FAILED) {
        describe_op(op, sizeof op, w.group);
        snprintf(msg, sizeof msg, "trident: %s: a peer failed: %s (%s); the host was waiting "
                 "for %s; NCCL communicators aborted", op, ncclGetErrorString(w.result),
                 ncclGetLastError(NULL), what);
    } else {
        describe_op(op, sizeof op, nc.last_group);
        snprintf(msg, sizeof msg, "trident: waited %.0f s for the GPU (%s; the latest "
                 "operation queued: %s) without progress: a peer may be stopped or its "
                 "node dead; NCCL communicators aborted, ending the job with exit %d "
                 "([fault] timeout)", waited, what, op, TRI_EXIT_WATCHDOG);
    }
    comm_nccl_abort();
    fail_stop(v == GPU_WAIT_PEER_FAILED ? TRI_EXIT_ERROR : TRI_EXIT_WATCHDOG, msg);
}

/* ---- set-up ------------------------------------------------------------- */

/* One communicator over the members of `mpi`, in its rank order. */
static void create(CommGroup group, MPI_Comm mpi)
{
    nc.size[group] = 1;
    nc.rank[group] = 0;
    if (mpi == MPI_COMM_NULL)
        return;
    int size, rank;
    TRI_CHECK_MPI(MPI_Comm_size(mpi, &size));
    TRI_CHECK_MPI(MPI_Comm_rank(mpi, &rank));
    nc.size[group] = size;
    nc.rank[group] = rank;
    if (size <= 1)
        return;
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (rank == 0)
        TRI_CHECK_NCCL(ncclGetUniqueId(&id));
    TRI_CHECK_MPI(MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, mpi));
    TRI_CHECK_NCCL(ncclCommInitRank(&nc.comm[group], size, id, rank));
    nc.owned[group] = 1;
}

/* DP as an alias of a group with the same members in the same order. */
static void share(CommGroup group, CommGroup with)
{
    nc.comm[group] = nc.comm[with];
    nc.owned[group] = 0;
    nc.size[group] = nc.size[with];
    nc.rank[group] = nc.rank[with];
}

int comm_nccl_init(const Grid *g, char *err, size_t err_size)
{
    if (nc.ready) {
        snprintf(err, err_size, "comm_nccl_init called twice");
        return 1;
    }
    if (cuda_device_index() < 0) {
        snprintf(err, err_size, "comm_nccl_init needs a GPU: call "
                 "cuda_device_init first");
        return 1;
    }
    memset(&nc, 0, sizeof nc);
    CHECK_CUDA(cudaEventCreateWithFlags(&nc.compute_done, cudaEventDisableTiming));
    CHECK_CUDA(cudaEventCreateWithFlags(&nc.comm_done, cudaEventDisableTiming));
    ops_set_fatal_handler(nccl_fail);
    cuda_set_wait(wait_event);

    create(COMM_TP, g->tp_comm);
    create(COMM_DP_NODE, g->dp_node);
    create(COMM_DP_CROSS, g->dp_cross);
    /* dp_node and dp_cross are split from dp_comm keyed by dp_rank, so a
     * group spanning all of DP has DP's members in DP's order */
    if (g->dp_node_size == g->dp)
        share(COMM_DP, COMM_DP_NODE);
    else if (g->dp_cross_size == g->dp)
        share(COMM_DP, COMM_DP_CROSS);
    else
        create(COMM_DP, g->dp_comm);
    create(COMM_PP, g->pp_comm);
    create(COMM_EMBED, g->embed_comm);
    create(COMM_KV, g->kv_comm);
    nc.size[COMM_WORLD] = g->size;
    nc.rank[COMM_WORLD] = g->rank;
    nc.ready = 1;
    return 0;
}

void comm_nccl_finalize(void)
{
    if (!nc.ready)
        return;
    cuda_wait_stream(cuda_comm_stream(), "the last communication");
    cuda_set_wait(NULL);
    for (int i = 0; i < N_GROUPS; i++) {
        if (nc.comm[i] && nc.owned[i]) {
            TRI_CHECK_NCCL(ncclCommFinalize(nc.comm[i]));
            TRI_CHECK_NCCL(ncclCommDestroy(nc.comm[i]));
        }
        nc.comm[i] = NULL;
    }
    CHECK_CUDA(cudaEventDestroy(nc.compute_done));
    CHECK_CUDA(cudaEventDestroy(nc.comm_done));
    ops_set_fatal_handler(fail_abort);
    nc.ready = 0;
}

/* ---- helpers ------------------------------------------------------------ */

/* The communicator of a group, or NULL when the group is this rank alone;
 * fatal when the group has peers but no NCCL communicator. */
static ncclComm_t group_comm(CommGroup group, const char *fn)
{
    char msg[256];
    if (!nc.ready) {
        snprintf(msg, sizeof msg, "%s before comm_nccl_init", fn);
        FAIL(msg);
    }
    if (group < 0 || group >= N_GROUPS) {
        snprintf(msg, sizeof msg, "%s: unknown group %d", fn, (int)group);
        FAIL(msg);
    }
    if (!nc.comm[group] && nc.size[group] > 1) {
        snprintf(msg, sizeof msg, "%s: the %s group has no NCCL communicator "
                 "(host buffers and world reductions go through comm.c)", fn,
                 group_name(group));
        FAIL(msg);
    }
    return nc.comm[group];
}

static ncclDataType_t nccl_type(ops_dtype dt)
{
    switch (dt) {
    case OPS_F32: return ncclFloat32;
    case OPS_BF16: return ncclBfloat16;
    case OPS_F16: return ncclFloat16;
    case OPS_I32: return ncclInt32;
    case OPS_F64: return ncclFloat64;
    }
    FAIL("comm_nccl: unknown dtype");
}

static ncclRedOp_t nccl_op(CommOp op)
{
    switch (op) {
    case COMM_SUM: return ncclSum;
    case COMM_MAX: return ncclMax;
    case COMM_MIN: return ncclMin;
    }
    FAIL("comm_nccl: unknown reduction");
}

static void check_buf(ops_tensor t, int64_t need, const char *fn,
                      const char *name)
{
    char msg[256];
    if (t.device != OPS_CUDA || !t.data) {
        snprintf(msg, sizeof msg, "%s: %s must be a CUDA tensor (host buffers "
                 "go through comm.c)", fn, name);
        FAIL(msg);
    }
    if (t.n < need) {
        snprintf(msg, sizeof msg, "%s: %s holds %lld elements but %lld are "
                 "moved", fn, name, (long long)t.n, (long long)need);
        FAIL(msg);
    }
}

/* The communication stream, after the compute stream's queued work;
 * op on group is what a stopped wait will name. */
static cudaStream_t begin(CommGroup group, const char *op)
{
    nc.last_op[group] = op;
    nc.last_group = group;
    cudaStream_t compute = (cudaStream_t)cuda_compute_stream();
    cudaStream_t comm = (cudaStream_t)cuda_comm_stream();
    CHECK_CUDA(cudaEventRecord(nc.compute_done, compute));
    CHECK_CUDA(cudaStreamWaitEvent(comm, nc.compute_done, 0));
    return comm;
}

/* Later compute-stream work waits for the communication queued so far. */
static void end(void)
{
    cudaStream_t compute = (cudaStream_t)cuda_compute_stream();
    cudaStream_t comm = (cudaStream_t)cuda_comm_stream();
    CHECK_CUDA(cudaEventRecord(nc.comm_done, comm));
    CHECK_CUDA(cudaStreamWaitEvent(compute, nc.comm_done, 0));
}

static char *elem_at(ops_tensor t, int64_t i)
{
    return (char *)t.data + (size_t)i * ops_dtype_size(t.dtype);
}

static int64_t sum_counts(const int *counts, int size, int *all_equal)
{
    int64_t total = 0;
    *all_equal = 1;
    for (int r = 0; r < size; r++) {
        if (counts[r] < 0)
            FAIL("comm_nccl: negative count");
        total += counts[r];
        if (counts[r] != counts[0])
            *all_equal = 0;
    }
    return total;
}

/* ---- collectives ----------------------------------------------------------- */

void comm_nccl_allreduce(const Grid *g, CommGroup group, ops_tensor buf,
                         int64_t n, CommOp op)
{
    static const char fn[] = "comm_nccl_allreduce";
    ncclComm_t comm = group_comm(group, fn);
    if (!comm || n == 0)
        return;
    check_buf(buf, n, fn, "buf");
    cudaStream_t s = begin(group, "all-reduce");
    TRI_CHECK_NCCL(ncclAllReduce(buf.data, buf.data, (size_t)n,
                                 nccl_type(buf.dtype),
                                 nccl_op(op), comm, s));
    end();
}

void comm_nccl_reduce_scatter(const Grid *g, CommGroup group, ops_tensor send,
                              ops_tensor recv, const int *counts)
{
    static const char fn[] = "comm_nccl_reduce_scatter";
    ncclComm_t comm = group_comm(group, fn);
    int size = nc.size[group], rank = nc.rank[group], equal;
    int64_t total = sum_counts(counts, size, &equal);
    check_buf(send, total, fn, "send");
    check_buf(recv, counts[rank], fn, "recv");
    if (send.dtype != recv.dtype)
        FAIL("comm_nccl_reduce_scatter: send and recv differ in dtype");
    if (!comm) {
        copy_cuda(recv.data, OPS_CUDA, send.data, OPS_CUDA,
                  (size_t)counts[0] * ops_dtype_size(send.dtype));
        return;
    }
    ncclDataType_t type = nccl_type(send.dtype);
    cudaStream_t s = begin(group, "reduce-scatter");
    if (equal) {
        TRI_CHECK_NCCL(ncclReduceScatter(send.data, recv.data, (size_t)counts[0],
                                         type, ncclSum, comm, s));
    } else {
        /* block r reduced onto rank r; non-roots' recv is not touched */
        int64_t off = 0;
        TRI_CHECK_NCCL(ncclGroupStart());
        for (int r = 0; r < size; r++) {
            TRI_CHECK_NCCL(ncclReduce(elem_at(send, off), recv.data,
                                      (size_t)counts[r], type, ncclSum, r,
                                      comm, s));
            off += counts[r];
        }
        TRI_CHECK_NCCL(ncclGroupEnd());
    }
    end();
}

void comm_nccl_allgather(const Grid *g, CommGroup group, ops_tensor send,
                         ops_tensor recv, const int *counts)
{
    static const char fn[] = "comm_nccl_allgather";
    ncclComm_t comm = group_comm(group, fn);
    int size = nc.size[group], rank = nc.rank[group], equal;
    int64_t total = sum_counts(counts, size, &equal);
    check_buf(send, counts[rank], fn, "send");
    check_buf(recv, total, fn, "recv");
    if (send.dtype != recv.dtype)
        FAIL("comm_nccl_allgather: send and recv differ in dtype");
    if (!comm) {
        copy_cuda(recv.data, OPS_CUDA, send.data, OPS_CUDA,
                  (size_t)counts[0] * ops_dtype_size(send.dtype));
        return;
    }
    ncclDataType_t type = nccl_type(send.dtype);
    cudaStream_t s = begin(group, "all-gather");
    if (equal) {
        TRI_CHECK_NCCL(ncclAllGather(send.data, recv.data, (size_t)counts[0],
                                     type, comm, s));
    } else {
        /* rank r broadcasts its block into place; only the root reads send */
        int64_t off = 0;
        TRI_CHECK_NCCL(ncclGroupStart());
        for (int r = 0; r < size; r++) {
            TRI_CHECK_NCCL(ncclBroadcast(send.data, elem_at(recv, off),
                                         (size_t)counts[r], type, r, comm, s));
            off += counts[r];
        }
        TRI_CHECK_NCCL(ncclGroupEnd());
    }
    end();
}
