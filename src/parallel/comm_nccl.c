/*
 * comm_nccl.c - the NCCL implementation of comm.h, for device buffers.
 *
 * A channel is a communicator and the stream its operations run on: one
 * per grid group, and one per pipeline link (comm_nccl.h). All are made
 * once at start-up: NCCL's set-up (topology search, buffers, proxy
 * threads) costs seconds and memory, so nothing is created per call, and a
 * group of one rank gets none. The state is process-wide, like comm.c's
 * timers: one rank, one GPU, one set of channels.
 *
 * Compiled only in NCCL builds. With comm_nccl_events.c (the events of
 * its nonblocking operations) the only file of src/ that names CUDA or
 * NCCL types, and the only one that includes a kernels/ header besides
 * ops.h: kernels/cuda/cuda.h, for the compute stream the kernels run on.
 *
 * Below comm.c, which routes device buffers here: nothing here calls
 * comm.c (the groups' names come from comm_group.c), so the two make no
 * circle (tests/t_deps.sh).
 */
#include "comm_nccl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* CUDA's and NCCL's headers declare `f()` without `void`, which
 * -Wstrict-prototypes flags in C; they are not ours to fix. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cuda_runtime_api.h>
#include <nccl.h>
#pragma GCC diagnostic pop

#include "alloc.h"
#include "comm_link.h"
#include "comm_nccl_events.h"
#include "fail.h"
#include "gpu_wait.h"
#include "nccl_env.h"
#include "cuda/cuda.h"
#include "watchdog.h"

#define N_GROUPS COMM_GROUP_COUNT

#define N_CHANNELS (N_GROUPS + N_LINKS)
#define LINK_CHANNEL(link) (N_GROUPS + (int)(link))

typedef struct {
    ncclComm_t comm;     /* NULL: none (a group of one rank) */
    int owner;           /* the channel whose comm and stream these are:
                            itself, or DP_NODE's or DP_CROSS's for DP */
    int size, rank;
    cudaStream_t stream; /* made when comm is, by its owner */
    int peer;            /* links: the pp rank at the other end */
    char last_op[96];    /* the latest operation queued, for a stopped wait */
} Channel;

static struct {
    int ready;
    Channel ch[N_CHANNELS];
    int last_channel;           /* the latest operation of all, for a timeout */
    int pp, pp_rank;
    cudaEvent_t compute_done, comm_done;
} nc;

static const char *channel_name(int c)
{
    static const char *const links[N_LINKS] = {
        [LINK_ACT_OUT] = "the link of activations to the next stage",
        [LINK_ACT_IN] = "the link of activations from the previous stage",
        [LINK_GRAD_OUT] = "the link of gradients to the previous stage",
        [LINK_GRAD_IN] = "the link of gradients from the next stage",
    };
    if (c >= 0 && c < N_GROUPS)
        return comm_group_name((CommGroup)c);
    return c >= N_GROUPS && c < N_CHANNELS ? links[c - N_GROUPS] : "unknown";
}

static int owns(int c) { return nc.ch[c].comm && nc.ch[c].owner == c; }

/* ---- errors ------------------------------------------------------------ */

void comm_nccl_abort(void)
{
    for (int c = 0; c < N_CHANNELS; c++)
        if (owns(c))
            (void)ncclCommAbort(nc.ch[c].comm);
    for (int c = 0; c < N_CHANNELS; c++)
        nc.ch[c].comm = NULL;
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
/* ops_fatalf reaches nccl_fail: comm_nccl_init installs it as the fatal
 * handler (before that there is nothing to abort) */
#define FAILF(...) ops_fatalf(__FILE__, __LINE__, __VA_ARGS__)

/* The first channel whose communicator holds an asynchronous error (a
 * peer or the network failed), or -1; *result receives the error. */
static int failed_channel(ncclResult_t *result)
{
    for (int c = 0; c < N_CHANNELS; c++) {
        if (!owns(c))
            continue;
        ncclResult_t async = ncclSuccess;
        TRI_CHECK_NCCL(ncclCommGetAsyncError(nc.ch[c].comm, &async));
        if (async != ncclSuccess && async != ncclInProgress) {
            *result = async;
            return c;
        }
    }
    return -1;
}

/* ---- waiting for the GPU ------------------------------------------------- */

typedef struct {
    cudaEvent_t event;
    int channel;            /* failed_channel's answer */
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
    w->channel = failed_channel(&w->result);
    return w->channel >= 0;
}

/* The NCCL operation a stopped run was waiting behind, for its message. */
static void describe_op(char *buf, size_t size, int c)
{
    if (c < 0)
        snprintf(buf, size, "no NCCL operation yet");
    else if (nc.ch[c].last_op[0])
        snprintf(buf, size, "NCCL %s", nc.ch[c].last_op);
    else
        snprintf(buf, size, "the NCCL communicator of %s", channel_name(c));
}

/* cuda_set_wait's hook: cudaEventSynchronize, but a peer's failure or
 * [fault] timeout without progress aborts the communicators and ends the
 * run (gpu_wait.h) instead of waiting for ever. The message goes first:
 * ncclCommAbort may take seconds, and the watchdog, at its limit too,
 * would end the rank meanwhile with a line that cannot name the op. */
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
    char op[160], msg[1024];
    if (v == GPU_WAIT_PEER_FAILED) {
        describe_op(op, sizeof op, w.channel);
        snprintf(msg, sizeof msg, "trident: %s: a peer failed: %s (%s); the host was waiting "
                 "for %s; aborting the NCCL communicators", op, ncclGetErrorString(w.result),
                 ncclGetLastError(NULL), what);
    } else {
        describe_op(op, sizeof op, nc.last_channel);
        snprintf(msg, sizeof msg, "trident: waited %.0f s for the GPU (%s; the latest "
                 "operation queued: %s) without progress: a peer may be stopped or its "
                 "node dead; aborting the NCCL communicators, then ending the job with "
                 "exit %d ([fault] timeout)", waited, what, op, TRI_EXIT_WATCHDOG);
    }
    fprintf(stderr, "[rank %d %s] %s\n", fail_rank(), fail_host(), msg);
    fflush(stderr);
    comm_nccl_abort();
    int status = v == GPU_WAIT_PEER_FAILED ? TRI_EXIT_ERROR : TRI_EXIT_WATCHDOG;
    snprintf(msg, sizeof msg, "trident: NCCL communicators aborted; ending the job with exit %d",
             status);
    fail_stop(status, msg);
}

/* ---- events of nonblocking operations (comm_nccl_events.c) --------------- */

void comm_nccl_wait(int event)
{
    cudaEvent_t ev = nccl_event_of(event, "comm_nccl_wait");
    CHECK_CUDA(cudaStreamWaitEvent((cudaStream_t)cuda_compute_stream(), ev, 0));
    nccl_event_give(event);
}

int comm_nccl_test(int event)
{
    cudaError_t e = cudaEventQuery(nccl_event_of(event, "comm_nccl_test"));
    if (e == cudaErrorNotReady)
        return 0;
    CHECK_CUDA(e);
    nccl_event_give(event);
    return 1;
}

/* ---- set-up ------------------------------------------------------------- */

/* Channels on the critical path (the next kernel needs their result: TP's
 * and KV's all-reduces, CP's all-gathers, the pipeline's messages) get the
 * GPU's highest stream priority, so their kernels are scheduled ahead of a
 * DP reduction running beside the backward. Non-blocking streams: they must not
 * serialise against the legacy default stream of a library. */
static void make_stream(int c, int urgent)
{
    int least, greatest;
    CHECK_CUDA(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    CHECK_CUDA(cudaStreamCreateWithPriority(&nc.ch[c].stream, cudaStreamNonBlocking,
                                            urgent ? greatest : least));
}

/* The size of a group and this rank's place in it (one rank alone when
 * it has no communicator). */
static int record(int c, MPI_Comm mpi)
{
    nc.ch[c].owner = c;
    nc.ch[c].size = 1;
    nc.ch[c].rank = 0;
    if (mpi == MPI_COMM_NULL)
        return 0;
    TRI_CHECK_MPI(MPI_Comm_size(mpi, &nc.ch[c].size));
    TRI_CHECK_MPI(MPI_Comm_rank(mpi, &nc.ch[c].rank));
    return nc.ch[c].size > 1;
}

/* One communicator over the members of `mpi`, in its rank order, and its
 * stream. */
static void create(CommGroup group, MPI_Comm mpi, int urgent)
{
    if (!record(group, mpi))
        return;
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (nc.ch[group].rank == 0)
        TRI_CHECK_NCCL(ncclGetUniqueId(&id));
    TRI_CHECK_MPI(MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, mpi));
    TRI_CHECK_NCCL(ncclCommInitRank(&nc.ch[group].comm, nc.ch[group].size, id,
                                    nc.ch[group].rank));
    make_stream(group, urgent);
}

/* DP as an alias of a group with the same members in the same order: the
 * same communicator, so the same stream (a communicator's operations must
 * be queued on one stream, in one order, on every rank). */
static void share(CommGroup group, CommGroup with)
{
    nc.ch[group] = nc.ch[with];
    nc.ch[group].owner = nc.ch[with].owner; /* EDP shares DP, itself perhaps shared */
    nc.ch[group].last_op[0] = '\0';
}

/* The four links of a stage in a pipeline of pp > 1 stages (with pp = 2
 * both neighbours are one rank, but its two kinds and two directions are
 * still four communicators). Each out-link's sender makes the id and hands
 * it to its receiver over pp_comm, the kind as the tag. The four
 * ncclCommInitRank run in one group, as NCCL asks of a rank creating
 * several communicators at once: each waits for its peer, and a ring of
 * ranks each waiting in a different communicator would otherwise never
 * complete. The activation in-link of stage 0 and out-link of the last
 * stage carry messages only when the ring closes (virtual_stages > 1);
 * they are made (and connected) anyway, for simplicity, at the cost of
 * two idle communicators on those stages: NCCL's buffers for one peer,
 * with its defaults a few MiB per channel. */
static void create_links(const Grid *g)
{
    nc.pp = g->layout.pp;
    nc.pp_rank = g->layout.pp_stage;
    if (g->layout.pp <= 1)
        return;
    ncclUniqueId id[N_LINKS];
    MPI_Request req[N_LINKS];
    memset(id, 0, sizeof id);
    for (int l = 0; l < N_LINKS; l++) {
        LinkEnd e = comm_link_end((Link)l, g->layout.pp_stage, g->layout.pp);
        Channel *ch = &nc.ch[LINK_CHANNEL(l)];
        ch->owner = LINK_CHANNEL(l);
        ch->size = 2;
        ch->rank = e.sends ? 0 : 1;
        ch->peer = e.peer;
        if (e.sends) {
            TRI_CHECK_NCCL(ncclGetUniqueId(&id[l]));
            TRI_CHECK_MPI(MPI_Isend(&id[l], (int)sizeof id[l], MPI_BYTE, e.peer, (int)e.kind,
                                    g->pp_comm, &req[l]));
        } else {
            TRI_CHECK_MPI(MPI_Irecv(&id[l], (int)sizeof id[l], MPI_BYTE, e.peer, (int)e.kind,
                                    g->pp_comm, &req[l]));
        }
    }
    TRI_CHECK_MPI(MPI_Waitall(N_LINKS, req, MPI_STATUSES_IGNORE));
    TRI_CHECK_NCCL(ncclGroupStart());
    for (int l = 0; l < N_LINKS; l++) {
        Channel *ch = &nc.ch[LINK_CHANNEL(l)];
        TRI_CHECK_NCCL(ncclCommInitRank(&ch->comm, 2, id[l], ch->rank));
    }
    TRI_CHECK_NCCL(ncclGroupEnd());
    for (int l = 0; l < N_LINKS; l++)
        make_stream(LINK_CHANNEL(l), 1);
}

static void connect_links(void);

int comm_nccl_init(const Grid *g, char *err, size_t err_size)
{
    if (nc.ready || cuda_device_index() < 0) {
        snprintf(err, err_size, "%s", nc.ready ? "comm_nccl_init called twice"
                 : "comm_nccl_init needs a GPU: call cuda_device_init first");
        return 1;
    }
    memset(&nc, 0, sizeof nc);
    nc.last_channel = -1;
    CHECK_CUDA(cudaEventCreateWithFlags(&nc.compute_done, cudaEventDisableTiming));
    CHECK_CUDA(cudaEventCreateWithFlags(&nc.comm_done, cudaEventDisableTiming));
    ops_set_fatal_handler(nccl_fail);
    cuda_set_wait(wait_event);
    int order_set = nccl_env_defaults(), loaded = 0; /* before NCCL reads its settings */
    TRI_CHECK_NCCL(ncclGetVersion(&loaded));
    if (g->layout.rank == 0) /* the library path decides which NCCL runs */
        nccl_env_print(stdout, loaded, NCCL_VERSION_CODE, order_set);

    create(COMM_TP, g->tp_comm, 1);
    create(COMM_CP, g->cp_comm, 1); /* attention waits for its all-gathers */
    create(COMM_DP_NODE, g->dp_node, 0);
    create(COMM_DP_CROSS, g->dp_cross, 0);
    /* dp_node and dp_cross are split from dp_comm keyed by replica rank,
     * so a group spanning all of DP has DP's members in DP's order */
    if (g->dp_node_size == layout_replicas(&g->layout))
        share(COMM_DP, COMM_DP_NODE);
    else if (g->dp_cross_size == layout_replicas(&g->layout))
        share(COMM_DP, COMM_DP_CROSS);
    else
        create(COMM_DP, g->dp_comm, 0);
    /* pipeline messages go over the links; the group itself has no
     * collective on device buffers */
    record(COMM_PP, g->pp_comm);
    create(COMM_EMBED, g->embed_comm, 0);
    create(COMM_KV, g->kv_comm, 1);
    /* expert parallelism: the all-to-all is waited for like TP's; at ep = 1
     * the experts' replicas are DP's, in its order (layout.h) */
    create(COMM_EP, g->ep_comm, 1);
    if (g->layout.ep > 1)
        create(COMM_EDP, g->edp_comm, 0);
    else
        share(COMM_EDP, COMM_DP);
    create_links(g);
    record(COMM_WORLD, MPI_COMM_NULL);
    nc.ch[COMM_WORLD].size = g->layout.size;
    nc.ch[COMM_WORLD].rank = g->layout.rank;
    nc.ready = 1;
    connect_links();
    return 0;
}

static void finalize_channel(int c)
{
    if (!owns(c))
        return;
    TRI_CHECK_NCCL(ncclCommFinalize(nc.ch[c].comm));
    TRI_CHECK_NCCL(ncclCommDestroy(nc.ch[c].comm));
    CHECK_CUDA(cudaStreamDestroy(nc.ch[c].stream));
}

void comm_nccl_finalize(void)
{
    if (!nc.ready)
        return;
    for (int c = 0; c < N_CHANNELS; c++) {
        if (!owns(c))
            continue;
        char what[128];
        snprintf(what, sizeof what, "the last communication on %s", channel_name(c));
        cuda_wait_stream(nc.ch[c].stream, what);
    }
    cuda_set_wait(NULL);
    /* NCCL may synchronise a communicator's ranks as they destroy it, so
     * every rank takes them in one global order: the groups by kind (each
     * rank is in one group of each kind), then the links by key
     * (comm_link.h) */
    for (int c = 0; c < N_GROUPS; c++)
        finalize_channel(c);
    Link order[N_LINKS];
    comm_link_order(nc.pp_rank, nc.pp, order);
    for (int i = 0; i < N_LINKS && nc.pp > 1; i++)
        finalize_channel(LINK_CHANNEL(order[i]));
    for (int c = 0; c < N_CHANNELS; c++)
        nc.ch[c].comm = NULL;
    nccl_events_destroy();
    CHECK_CUDA(cudaEventDestroy(nc.compute_done));
    CHECK_CUDA(cudaEventDestroy(nc.comm_done));
    ops_set_fatal_handler(fail_abort);
    nc.ready = 0;
}

/* ---- helpers ------------------------------------------------------------ */

/* The channel of a group; its comm is NULL when the group is this rank
 * alone. Fatal when the group has peers but no NCCL communicator. */
static Channel *group_channel(CommGroup group, const char *fn)
{
    if (!nc.ready)
        FAILF("%s before comm_nccl_init", fn);
    if ((int)group < 0 || (int)group >= N_GROUPS)
        FAILF("%s: unknown group %d", fn, (int)group);
    Channel *ch = &nc.ch[group];
    if (!ch->comm && ch->size > 1)
        FAILF("%s: the %s group has no NCCL communicator (host buffers and world "
              "reductions go through comm.c, pipeline messages through "
              "comm_link_send and comm_link_recv)", fn, channel_name(group));
    return ch;
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
    if (t.device != OPS_CUDA || !t.data)
        FAILF("%s: %s must be a CUDA tensor (host buffers go through comm.c)", fn, name);
    if (t.n < need)
        FAILF("%s: %s holds %lld elements but %lld are moved", fn, name,
              (long long)t.n, (long long)need);
}

/* The channel's stream, after the compute stream's work queued so far
 * (the kernels that wrote what is sent, and the last readers of what is
 * overwritten); the operation, named as printf's format, is what a
 * stopped wait will report. */
static cudaStream_t begin(Channel *ch, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static cudaStream_t begin(Channel *ch, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ch->last_op, sizeof ch->last_op, fmt, ap);
    va_end(ap);
    Channel *owner = &nc.ch[ch->owner];
    if (owner != ch) /* a failure is found on the owner's communicator */
        memcpy(owner->last_op, ch->last_op, sizeof owner->last_op);
    nc.last_channel = ch->owner;
    CHECK_CUDA(cudaEventRecord(nc.compute_done, (cudaStream_t)cuda_compute_stream()));
    CHECK_CUDA(cudaStreamWaitEvent(ch->stream, nc.compute_done, 0));
    return ch->stream;
}

/* Later compute-stream work waits for the channel's communication queued
 * so far: a blocking collective's result is there for the next kernel,
 * and the compute stream waits for this channel only. */
static void end(const Channel *ch)
{
    CHECK_CUDA(cudaEventRecord(nc.comm_done, ch->stream));
    CHECK_CUDA(cudaStreamWaitEvent((cudaStream_t)cuda_compute_stream(), nc.comm_done, 0));
}

/* A nonblocking operation's end: an event recorded behind it on the
 * channel's stream, whose slot the request keeps. */
static void end_async(const Channel *ch, int *event)
{
    *event = nccl_event_take();
    CHECK_CUDA(cudaEventRecord(nccl_event_of(*event, "end_async"), ch->stream));
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

/* Each checks its arguments and queues the operation on its group's
 * stream (begin), returning the channel, or NULL when there is nothing to
 * queue (the group is this rank alone, or n = 0); the caller ends it:
 * end() for the blocking forms, end_async() for the nonblocking ones. */

static Channel *queue_allreduce(CommGroup group, ops_tensor buf, int64_t n, CommOp op,
                                const char *fn)
{
    Channel *ch = group_channel(group, fn);
    if (!ch->comm || n == 0)
        return NULL;
    check_buf(buf, n, fn, "buf");
    cudaStream_t s = begin(ch, "all-reduce of %lld elements on %s", (long long)n,
                           channel_name(group));
    TRI_CHECK_NCCL(ncclAllReduce(buf.data, buf.data, (size_t)n, nccl_type(buf.dtype),
                                 nccl_op(op), ch->comm, s));
    return ch;
}

/* A group of one rank copies its block, on the compute stream. */
static Channel *queue_reduce_scatter(CommGroup group, ops_tensor send, ops_tensor recv,
                                     const int *counts, const char *fn)
{
    Channel *ch = group_channel(group, fn);
    int equal;
    int64_t total = sum_counts(counts, ch->size, &equal);
    check_buf(send, total, fn, "send");
    check_buf(recv, counts[ch->rank], fn, "recv");
    if (send.dtype != recv.dtype)
        FAILF("%s: send and recv differ in dtype", fn);
    if (!ch->comm) {
        copy_cuda(recv.data, OPS_CUDA, send.data, OPS_CUDA,
                  (size_t)counts[0] * ops_dtype_size(send.dtype));
        return NULL;
    }
    ncclDataType_t type = nccl_type(send.dtype);
    cudaStream_t s = begin(ch, "reduce-scatter on %s", channel_name(group));
    if (equal) {
        TRI_CHECK_NCCL(ncclReduceScatter(send.data, recv.data, (size_t)counts[0],
                                         type, ncclSum, ch->comm, s));
        return ch;
    }
    /* block r reduced onto rank r; non-roots' recv is not touched */
    int64_t off = 0;
    TRI_CHECK_NCCL(ncclGroupStart());
    for (int r = 0; r < ch->size; r++) {
        TRI_CHECK_NCCL(ncclReduce(elem_at(send, off), recv.data, (size_t)counts[r],
                                  type, ncclSum, r, ch->comm, s));
        off += counts[r];
    }
    TRI_CHECK_NCCL(ncclGroupEnd());
    return ch;
}

void comm_nccl_allreduce(const Grid *g, CommGroup group, ops_tensor buf,
                         int64_t n, CommOp op)
{
    (void)g;
    Channel *ch = queue_allreduce(group, buf, n, op, "comm_nccl_allreduce");
    if (ch)
        end(ch);
}

void comm_nccl_reduce_scatter(const Grid *g, CommGroup group, ops_tensor send,
                              ops_tensor recv, const int *counts)
{
    (void)g;
    Channel *ch = queue_reduce_scatter(group, send, recv, counts,
                                       "comm_nccl_reduce_scatter");
    if (ch)
        end(ch);
}

void comm_nccl_allgather(const Grid *g, CommGroup group, ops_tensor send,
                         ops_tensor recv, const int *counts)
{
    static const char fn[] = "comm_nccl_allgather";
    (void)g;
    Channel *ch = group_channel(group, fn);
    int equal;
    int64_t total = sum_counts(counts, ch->size, &equal);
    check_buf(send, counts[ch->rank], fn, "send");
    check_buf(recv, total, fn, "recv");
    if (send.dtype != recv.dtype)
        FAILF("%s: send and recv differ in dtype", fn);
    if (!ch->comm) {
        if (send.data != recv.data) /* else in place already */
            copy_cuda(recv.data, OPS_CUDA, send.data, OPS_CUDA,
                      (size_t)counts[0] * ops_dtype_size(send.dtype));
        return;
    }
    /* in place (send is this rank's block of recv) needs nothing more:
     * ncclAllGather takes it at recv + rank * count, ncclBroadcast's
     * root may send from its own receive buffer */
    ncclDataType_t type = nccl_type(send.dtype);
    cudaStream_t s = begin(ch, "all-gather on %s", channel_name(group));
    if (equal) {
        TRI_CHECK_NCCL(ncclAllGather(send.data, recv.data, (size_t)counts[0],
                                     type, ch->comm, s));
    } else {
        /* rank r broadcasts its block into place; only the root reads send */
        int64_t off = 0;
        TRI_CHECK_NCCL(ncclGroupStart());
        for (int r = 0; r < ch->size; r++) {
            TRI_CHECK_NCCL(ncclBroadcast(send.data, elem_at(recv, off),
                                         (size_t)counts[r], type, r, ch->comm, s));
            off += counts[r];
        }
        TRI_CHECK_NCCL(ncclGroupEnd());
    }
    end(ch);
}

void comm_nccl_alltoallv(const Grid *g, CommGroup group, ops_tensor send,
                         const int64_t *send_counts, ops_tensor recv,
                         const int64_t *recv_counts)
{
    static const char fn[] = "comm_nccl_alltoallv";
    (void)g;
    Channel *ch = group_channel(group, fn);
    int64_t out = 0, in = 0;
    for (int r = 0; r < ch->size; r++) {
        out += send_counts[r];
        in += recv_counts[r];
    }
    check_buf(send, out, fn, "send");
    check_buf(recv, in, fn, "recv");
    if (!ch->comm) /* comm.c copies a group of one rank's block */
        FAILF("%s: a group of one rank", fn);
    ncclDataType_t type = nccl_type(send.dtype);
    cudaStream_t s = begin(ch, "all-to-all of %lld elements out, %lld in on %s",
                           (long long)out, (long long)in, channel_name(group));
    out = in = 0;
    TRI_CHECK_NCCL(ncclGroupStart());
    for (int r = 0; r < ch->size; r++) {
        if (send_counts[r] > 0)
            TRI_CHECK_NCCL(ncclSend(elem_at(send, out), (size_t)send_counts[r], type, r,
                                    ch->comm, s));
        if (recv_counts[r] > 0)
            TRI_CHECK_NCCL(ncclRecv(elem_at(recv, in), (size_t)recv_counts[r], type, r,
                                    ch->comm, s));
        out += send_counts[r];
        in += recv_counts[r];
    }
    TRI_CHECK_NCCL(ncclGroupEnd());
    end(ch);
}

/* ---- nonblocking ------------------------------------------------------------ */

void comm_nccl_iallreduce(const Grid *g, CommGroup group, ops_tensor buf, int64_t n,
                          int *event)
{
    (void)g;
    *event = -1;
    Channel *ch = queue_allreduce(group, buf, n, COMM_SUM, "comm_nccl_iallreduce");
    if (ch)
        end_async(ch, event);
}

void comm_nccl_ireduce_scatter(const Grid *g, CommGroup group, ops_tensor send,
                               ops_tensor recv, const int *counts, int *event)
{
    (void)g;
    *event = -1;
    Channel *ch = queue_reduce_scatter(group, send, recv, counts,
                                       "comm_nccl_ireduce_scatter");
    if (ch)
        end_async(ch, event);
}

/* ---- pipeline links ------------------------------------------------------ */

/* The link for messages of `kind` going out (send) or coming in, checked
 * against the pp rank the caller names. */
static Channel *link_channel(CommLink kind, int out, int peer, const char *fn)
{
    if (!nc.ready)
        FAILF("%s before comm_nccl_init", fn);
    if (kind != LINK_ACTIVATION && kind != LINK_GRADIENT)
        FAILF("%s: unknown message kind %d", fn, (int)kind);
    int c = LINK_CHANNEL(comm_link_of(kind, out));
    Channel *ch = &nc.ch[c];
    if (!ch->comm)
        FAILF("%s: pp rank %d has no pipeline links (pp = %d)", fn, nc.pp_rank, nc.pp);
    if (peer != ch->peer)
        FAILF("%s: %s pp rank %d, but on pp rank %d %s is pp rank %d's", fn,
              out ? "to" : "from", peer, nc.pp_rank, channel_name(c), ch->peer);
    return ch;
}

static const char *kind_name(CommLink kind)
{
    return kind == LINK_ACTIVATION ? "activations" : "gradients";
}

/* A message of kind on its link, out to or in from pp rank peer. */
static void queue_link(CommLink kind, int out, ops_tensor buf, int64_t n, int peer,
                       int *event, const char *fn)
{
    *event = -1;
    Channel *ch = link_channel(kind, out, peer, fn);
    if (n == 0)
        return;
    check_buf(buf, n, fn, "buf");
    cudaStream_t s = out ? begin(ch, "send of %s to pp rank %d", kind_name(kind), peer)
                         : begin(ch, "receive of %s from pp rank %d", kind_name(kind), peer);
    /* the other end of a two-rank communicator is rank 1 - ours */
    if (out)
        TRI_CHECK_NCCL(ncclSend(buf.data, (size_t)n, nccl_type(buf.dtype), 1 - ch->rank,
                                ch->comm, s));
    else
        TRI_CHECK_NCCL(ncclRecv(buf.data, (size_t)n, nccl_type(buf.dtype), 1 - ch->rank,
                                ch->comm, s));
    end_async(ch, event);
}

void comm_nccl_link_send(const Grid *g, CommLink kind, ops_tensor buf, int64_t n,
                         int peer, int *event)
{
    (void)g;
    queue_link(kind, 1, buf, n, peer, event, "comm_nccl_link_send");
}

void comm_nccl_link_recv(const Grid *g, CommLink kind, ops_tensor buf, int64_t n,
                         int peer, int *event)
{
    (void)g;
    queue_link(kind, 0, buf, n, peer, event, "comm_nccl_link_recv");
}

/* NCCL connects the two ranks of a send and receive at their first one,
 * and a host may wait in that handshake until its peer makes its own
 * first call on the link. In a step the executor posts receives ahead of
 * sends, so two stages could each wait there for the other's first call
 * on another link. So each link carries one element at start-up, link by
 * link in comm_link_order's order, in which the first calls meet without a
 * cycle; the step's messages then find their links connected. */
static void connect_links(void)
{
    if (nc.pp <= 1)
        return;
    Link order[N_LINKS];
    comm_link_order(nc.pp_rank, nc.pp, order);
    ops_tensor one = ops_alloc(OPS_F32, OPS_CUDA, 1);
    for (int i = 0; i < N_LINKS; i++) {
        LinkEnd e = comm_link_end(order[i], nc.pp_rank, nc.pp);
        int event;
        queue_link(e.kind, e.sends, one, 1, e.peer, &event,
                   "comm_nccl_init (connecting the pipeline links)");
        comm_nccl_wait(event);
    }
    cuda_wait_stream(cuda_compute_stream(), "connecting the pipeline links");
    ops_free(&one);
}
