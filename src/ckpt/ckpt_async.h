/*
 * ckpt_async.h - asynchronous checkpoints ([checkpoint] async = true): at
 * a step boundary every rank copies the state it writes into a host
 * snapshot (through the ops layer: a memcpy on the CPU, a device-to-host
 * copy on a GPU), and a background thread writes the snapshot with
 * ckpt_save_from while training goes on. The file, its atomic publication,
 * `latest` and pruning are those of a synchronous save (ckpt.h,
 * ckpt_files.h); the files are the same bit for bit.
 *
 * One save at a time: a save waits for the one in flight. The writer's
 * collectives (MPI-IO, the checksums, the agreement on failure) run on its
 * own duplicate of the world, so they never meet the training thread's;
 * this needs MPI_THREAD_MULTIPLE. HDF5 is not thread-safe: between a
 * snapshot and its wait the writer is the only thread that may call it
 * (ckpt.c makes a second entry fatal); training never does.
 *
 * The snapshot doubles the host memory of the written state: 12 bytes per
 * parameter element this rank writes (fp32 weights and two Adam moments),
 * allocated at the first save and kept.
 */
#ifndef TRI_SRC_CKPT_ASYNC_H
#define TRI_SRC_CKPT_ASYNC_H

#include <stdint.h>
#include <stdio.h>

#include "ckpt.h"
#include "config.h"
#include "grid.h"
#include "model.h"
#include "zero.h"

typedef struct CkptAsync CkptAsync;

/* How a finished save went; the same on every rank. */
typedef struct {
    int rc;                  /* 0: published */
    int64_t step;            /* the step it saved */
    double seconds;          /* the writer's time, snapshot excluded */
    double snapshot_seconds; /* the time training stopped for the copy */
    int64_t bytes;           /* written over the world */
} CkptAsyncResult;

/* The writer's state for a run on grid g (kept: g must outlive it). Fails,
 * with the reason on err (rank 0), when MPI gives less than
 * MPI_THREAD_MULTIPLE. Collective on world. */
int ckpt_async_create(CkptAsync **out, const Grid *g, FILE *err);

/* Copies this rank's state into the snapshot and starts writing the
 * checkpoint of st->step in the background. The save in flight, if any,
 * must have been waited for. Collective on world. */
void ckpt_async_start(CkptAsync *a, Model *m, Zero *z, const Config *cfg, const TrainState *st);

/* Whether a save is in flight (started and not yet waited for).
 * Not collective. */
int ckpt_async_pending(const CkptAsync *a);

/* At a step boundary: returns 1 and fills r when every rank's writer has
 * finished (the save is then waited for), 0 while one still writes or none
 * is in flight. Costs one small all-reduce while a save is in flight.
 * Collective on world. */
int ckpt_async_poll(CkptAsync *a, CkptAsyncResult *r);

/* Waits for the save in flight and fills r (r->rc = 0 and r->step = -1
 * when there was none). Every rank gets the same result. Collective on
 * world. */
void ckpt_async_wait(CkptAsync *a, CkptAsyncResult *r);

/* Waits for any save in flight, then frees the snapshot and the writer's
 * communicator. Collective on world. */
void ckpt_async_destroy(CkptAsync *a);

/* The snapshot's size on this rank, in bytes, for the memory report.
 * Not collective. */
int64_t ckpt_async_snapshot_bytes(Model *m, Zero *z);

#endif
