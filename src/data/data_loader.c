/*
 * data_loader.c - the prefetching loader: a thread that reads the next
 * batch of training samples while a step computes (loader_* in data.h).
 *
 * Why this shape: the Dataset is immutable after data_open, so the thread
 * reads it without locks; the only state it changes is its own (its walk
 * of the blend, which part sample g comes from, and the job's buffer),
 * handed over under one mutex at request and wait. The functions are
 * loader_* rather than data_loader_*: data.h's names, which callers have
 * always used.
 */
#include "data.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "blend.h"
#include "data_impl.h"
#include "data_sampler.h"

/* One job at a time, in two buffers used alternately: request N fills
 * buf[N % 2] while the caller still reads buf[(N - 1) % 2], the batch that
 * wait N-1 returned. So a batch stays valid until the next-but-one request,
 * which is what lets a caller request N+1 before computing on N.
 * state: IDLE (no job), QUEUED (requested, thread not done), READY (done,
 * not yet taken by loader_wait). */
enum { LOADER_IDLE, LOADER_QUEUED, LOADER_READY };

struct Loader {
    const Dataset *ds;
    uint64_t seed;
    BlendWalk walk;         /* the loader thread's place in the blend */
    int rows;
    int32_t *buf[2];
    int64_t *index;         /* the job's sample indices, rows entries */
    int job_buf;            /* buffer of the current job */
    int next_buf;           /* buffer the next request fills */
    int state;
    int failed;             /* the job's batch could not be read: see error */
    DataError error;
    int stop;
    pthread_mutex_t lock;
    pthread_cond_t queued;  /* signals the thread: a job or stop */
    pthread_cond_t ready;   /* signals the caller: the job is done */
    pthread_t thread;
};

/* Returns 1, with ld->error set, at the first sample that cannot be read. */
static int fill_batch(Loader *ld, int32_t *dst)
{
    size_t row = (size_t)ld->ds->seq_len + 1;
    for (int i = 0; i < ld->rows; i++)
        if (data_sampler_read(ld->ds, &ld->walk, ld->seed, ld->index[i], dst + (size_t)i * row,
                              &ld->error))
            return 1;
    return 0;
}

/* The index array and the job's buffer are the thread's alone between
 * QUEUED and READY (loader_request refuses to overwrite them meanwhile), so
 * the copy runs without the lock. */
static void *loader_main(void *arg)
{
    Loader *ld = arg;
    pthread_mutex_lock(&ld->lock);
    for (;;) {
        while (!ld->stop && ld->state != LOADER_QUEUED)
            pthread_cond_wait(&ld->queued, &ld->lock);
        if (ld->stop)
            break;
        int32_t *dst = ld->buf[ld->job_buf];
        pthread_mutex_unlock(&ld->lock);
        int failed = fill_batch(ld, dst);
        pthread_mutex_lock(&ld->lock);
        ld->failed = failed;
        ld->state = LOADER_READY;
        pthread_cond_signal(&ld->ready);
    }
    pthread_mutex_unlock(&ld->lock);
    return NULL;
}

static void loader_free(Loader *ld)
{
    free(ld->buf[0]);
    free(ld->buf[1]);
    free(ld->index);
    blend_walk_free(&ld->walk);
    free(ld);
}

Loader *loader_create(const Dataset *ds, uint64_t seed, int rows)
{
    if (rows < 1)
        data_bug("loader_create: rows must be at least 1");
    Loader *ld = calloc(1, sizeof *ld);
    if (!ld)
        return NULL;
    size_t n = (size_t)rows * ((size_t)ds->seq_len + 1);
    ld->ds = ds;
    ld->seed = seed;
    ld->rows = rows;
    ld->buf[0] = malloc(n * sizeof(int32_t));
    ld->buf[1] = malloc(n * sizeof(int32_t));
    ld->index = malloc((size_t)rows * sizeof(int64_t));
    int no_walk = blend_walk_init(&ld->walk, &ds->train_blend);
    if (!ld->buf[0] || !ld->buf[1] || !ld->index || no_walk) {
        loader_free(ld);
        return NULL;
    }
    pthread_mutex_init(&ld->lock, NULL);
    pthread_cond_init(&ld->queued, NULL);
    pthread_cond_init(&ld->ready, NULL);
    if (pthread_create(&ld->thread, NULL, loader_main, ld) != 0) {
        pthread_cond_destroy(&ld->ready);
        pthread_cond_destroy(&ld->queued);
        pthread_mutex_destroy(&ld->lock);
        loader_free(ld);
        return NULL;
    }
    return ld;
}

/* A queued job is abandoned or finished, whichever comes first; either way
 * the thread sees stop before it would wait again, so join returns. */
void loader_destroy(Loader *ld)
{
    if (!ld)
        return;
    pthread_mutex_lock(&ld->lock);
    ld->stop = 1;
    pthread_cond_signal(&ld->queued);
    pthread_mutex_unlock(&ld->lock);
    pthread_join(ld->thread, NULL);
    pthread_cond_destroy(&ld->ready);
    pthread_cond_destroy(&ld->queued);
    pthread_mutex_destroy(&ld->lock);
    loader_free(ld);
}

void loader_request(Loader *ld, const int64_t *index)
{
    pthread_mutex_lock(&ld->lock);
    if (ld->state != LOADER_IDLE)
        data_bug("loader_request: the previous batch was not taken by loader_wait");
    memcpy(ld->index, index, (size_t)ld->rows * sizeof(int64_t));
    ld->job_buf = ld->next_buf;
    ld->next_buf ^= 1;
    ld->state = LOADER_QUEUED;
    pthread_cond_signal(&ld->queued);
    pthread_mutex_unlock(&ld->lock);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

const int32_t *loader_wait(Loader *ld, double *wait_s, DataError *why)
{
    double t0 = now_s();
    pthread_mutex_lock(&ld->lock);
    if (ld->state == LOADER_IDLE)
        data_bug("loader_wait: no batch was requested");
    while (ld->state != LOADER_READY)
        pthread_cond_wait(&ld->ready, &ld->lock);
    ld->state = LOADER_IDLE;
    const int32_t *batch = ld->failed ? NULL : ld->buf[ld->job_buf];
    if (ld->failed && why)
        *why = ld->error;
    pthread_mutex_unlock(&ld->lock);
    if (wait_s)
        *wait_s = now_s() - t0;
    return batch;
}
