/*
 * ckpt_async.c - the snapshot and the background writer of asynchronous
 * checkpoints; see ckpt_async.h.
 *
 * The writer is ckpt_save_from with a snapshot as its source, so an
 * asynchronous save writes the same file through the same code as a
 * synchronous one. Everything the save reads is either the snapshot (the
 * rows, a copy of the config and of the training state) or fixed for the
 * whole run (the parameter table's names and blocks, the grid's ranks), so
 * training may change its weights, moments, cursor and step meanwhile.
 *
 * Only the writer's collectives need their own communicator: the
 * training thread keeps using the grid's. The agreement on how a save went
 * is the writer's own last collective (ckpt_save_from agrees before it
 * returns); the training thread then learns that every writer has finished
 * with one all-reduce of "still writing" flags at each step boundary
 * (ckpt_async_poll) or by waiting (ckpt_async_wait).
 */
#include "ckpt_async.h"

#include <omp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "fail.h"
#include "fault.h"
#include "timer.h"
#include "watchdog.h"
#include "ops.h"

struct CkptAsync {
    Grid grid;               /* the writer's world alone, with the run's layout and device */
    MPI_Comm train_world;    /* the training thread's world: polls and waits agree on it */
    ParamSet *ps;            /* the run's parameter table (its shape is fixed) */
    ops_tensor buf;          /* the snapshot: every written part of every parameter */
    int64_t *offset;         /* [3 * i + part]: where ps->p[i]'s part starts in buf */
    Config cfg;              /* copies, so training may go on changing its own */
    TrainState st;
    pthread_t thread;
    int pending;             /* started, not yet waited for */
    atomic_int finished;     /* the writer has returned */
    CkptAsyncResult result;
    int64_t rows_calls;      /* the writer's reads of the snapshot (test faults) */
    int64_t die_at_call;     /* async_kill: the read that ends the process */
};

int ckpt_async_create(CkptAsync **out, const Grid *g, FILE *err)
{
    *out = NULL;
    int provided = MPI_THREAD_SINGLE;
    TRI_CHECK_MPI(MPI_Query_thread(&provided));
    if (provided < MPI_THREAD_MULTIPLE) {
        if (g->layout.rank == 0)
            fprintf(err, "trident: [checkpoint] async = true: this MPI library gives no MPI_THREAD_MULTIPLE, which the background writer needs; set async = false\n");
        return 1;
    }
    CkptAsync *a = TRI_CALLOC(1, sizeof *a, "the checkpoint writer");
    a->train_world = g->world;
    MPI_Comm world;
    TRI_CHECK_MPI(MPI_Comm_dup(g->world, &world));
    TRI_CHECK_MPI(MPI_Comm_set_errhandler(world, MPI_ERRORS_RETURN));
    grid_world_only(&a->grid, world);
    a->grid.layout = g->layout;
    a->grid.device = g->device;
    *out = a;
    return 0;
}

int64_t ckpt_async_snapshot_bytes(Model *m, Zero *z)
{
    int64_t n = 0;
    for (int i = 0; i < m->ps.n; i++)
        for (int part = 0; part < 3; part++)
            n += ckpt_written_rows(z, &m->ps.p[i], part).n;
    return n * (int64_t)sizeof(float);
}

/* The snapshot's layout, fixed for the run: made at the first save. */
static void snapshot_alloc(CkptAsync *a, Model *m, Zero *z)
{
    a->ps = &m->ps;
    a->offset = TRI_CALLOC((size_t)(3 * m->ps.n) + 1, sizeof *a->offset, "the snapshot's offsets");
    int64_t n = 0;
    for (int i = 0; i < m->ps.n; i++)
        for (int part = 0; part < 3; part++) {
            a->offset[3 * i + part] = n;
            n += ckpt_written_rows(z, &m->ps.p[i], part).n;
        }
    /* pinned on a GPU: the snapshot's downloads run at full bus speed */
    a->buf = ops_alloc_host(OPS_F32, n, a->grid.device);
}

/* The copy training waits for. On a GPU each part comes down from the
 * device (ops_copy synchronises); on the CPU it is a memcpy. */
static void snapshot_take(CkptAsync *a, Zero *z)
{
    for (int i = 0; i < a->ps->n; i++)
        for (int part = 0; part < 3; part++) {
            ops_tensor rows = ckpt_written_rows(z, &a->ps->p[i], part);
            if (rows.n > 0)
                ops_copy(ops_view(a->buf, a->offset[3 * i + part], rows.n), rows);
        }
}

/* Test faults (fault.h): save_slow makes every read of the snapshot take
 * 20 ms, so a save stays in flight long enough to be signalled or killed;
 * async_kill ends the process with SIGKILL halfway through writing the
 * tensors, as a kill -9 would. */
static const float *snapshot_rows(const CkptSource *s, int i, int part)
{
    CkptAsync *a = s->ctx;
    a->rows_calls++;
    if (a->die_at_call > 0 && a->rows_calls == a->die_at_call)
        raise(SIGKILL);
    if (fault_at("save_slow", a->grid.layout.rank, (long)a->st.step))
        nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
    return (const float *)a->buf.data + a->offset[3 * i + part];
}

/* The save reads the snapshot twice: for the writes (the three parts of
 * every local tensor), then for the checksums, which are computed once the
 * data is in the file (ckpt.c). Halfway through the writes is the middle
 * of the first pass. */
static int64_t halfway_through_writes(const CkptAsync *a)
{
    return 3 * a->ps->n / 2 + 1;
}

static void *write_snapshot(void *arg)
{
    CkptAsync *a = arg;
    /* the writer's collectives and datasets are not the rank's progress: a
     * stall of the training thread must still trip the watchdog */
    watchdog_ignore_this_thread();
    /* the checksums' OpenMP loop gets this thread alone: training keeps
     * its cores */
    omp_set_num_threads(1);
    CkptSource src = {.grid = &a->grid, .ps = a->ps, .rows = snapshot_rows, .ctx = a,
                      .cfg = &a->cfg, .st = &a->st};
    a->result.rc = ckpt_save_from(&src, &a->result.seconds, &a->result.bytes, stderr);
    atomic_store(&a->finished, 1);
    return NULL;
}

void ckpt_async_start(CkptAsync *a, Model *m, Zero *z, const Config *cfg, const TrainState *st)
{
    if (a->pending)
        fail_abort("ckpt_async_start: a save is still in flight", __FILE__, __LINE__);
    double t0 = timer_now();
    if (!a->offset)
        snapshot_alloc(a, m, z);
    snapshot_take(a, z);
    a->cfg = *cfg;
    a->st = *st;
    a->rows_calls = 0;
    a->die_at_call = fault_at("async_kill", a->grid.layout.rank, (long)st->step)
                         ? halfway_through_writes(a) : 0;
    a->result = (CkptAsyncResult){.step = st->step, .snapshot_seconds = timer_now() - t0};
    atomic_store(&a->finished, 0);
    if (pthread_create(&a->thread, NULL, write_snapshot, a) != 0)
        fail_abort("cannot start the checkpoint writer thread", __FILE__, __LINE__);
    a->pending = 1;
}

int ckpt_async_pending(const CkptAsync *a) { return a && a->pending; }

static void join(CkptAsync *a, CkptAsyncResult *r)
{
    pthread_join(a->thread, NULL);
    a->pending = 0;
    *r = a->result;
}

int ckpt_async_poll(CkptAsync *a, CkptAsyncResult *r)
{
    if (!ckpt_async_pending(a))
        return 0;
    if (fail_agree(a->train_world, !atomic_load(&a->finished)))
        return 0;
    join(a, r);
    return 1;
}

void ckpt_async_wait(CkptAsync *a, CkptAsyncResult *r)
{
    *r = (CkptAsyncResult){.step = -1};
    if (!ckpt_async_pending(a))
        return;
    join(a, r);
    /* the writers agreed before returning; this makes the wait itself the
     * collective point the caller can rely on */
    r->rc = fail_agree(a->train_world, r->rc);
}

void ckpt_async_destroy(CkptAsync *a)
{
    if (!a)
        return;
    CkptAsyncResult ignored;
    ckpt_async_wait(a, &ignored);
    ops_free_host(&a->buf, a->grid.device);
    free(a->offset);
    MPI_Comm_free(&a->grid.world);
    free(a);
}
