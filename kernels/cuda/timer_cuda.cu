/*
 * timer_cuda.cu - the device timers of ops.h on a GPU: CUDA events on the
 * compute stream, read with cudaEventElapsedTime.
 *
 * A timer keeps its pool of events and reuses it from the first mark at
 * every read, so a step records marks without creating events once the
 * pool has grown to the step's count (two per microbatch and action, a few
 * hundred at most). Reading waits only for the last mark, through the
 * backend's host wait, so it cannot hang on a dead peer either.
 */
#include "cuda_common.h"

#include <stdlib.h>

static void grow(ops_timer *t)
{
    int capacity = t->capacity ? 2 * t->capacity : 16;
    cudaEvent_t *marks = (cudaEvent_t *)realloc(t->marks, sizeof *marks * (size_t)capacity);
    if (!marks)
        ops_fatal("out of host memory for a device timer's events", __FILE__, __LINE__);
    for (int i = t->capacity; i < capacity; i++)
        TRI_CHECK_CUDA(cudaEventCreate(&marks[i]));
    t->marks = marks;
    t->capacity = capacity;
}

void timer_mark_cuda(ops_timer *t)
{
    if (t->n_marks == t->capacity)
        grow(t);
    cudaEvent_t *marks = (cudaEvent_t *)t->marks;
    TRI_CHECK_CUDA(cudaEventRecord(marks[t->n_marks++], stream_cuda()));
}

double timer_elapsed_cuda(ops_timer *t)
{
    const cudaEvent_t *marks = (const cudaEvent_t *)t->marks;
    /* the stream runs marks in order: the last one done means all are */
    wait_event_cuda(marks[t->n_marks - 1], "a device timer's marks");
    double seconds = 0.0;
    for (int i = 0; i + 1 < t->n_marks; i += 2) {
        float ms = 0.0f;
        TRI_CHECK_CUDA(cudaEventElapsedTime(&ms, marks[i], marks[i + 1]));
        seconds += 1e-3 * (double)ms;
    }
    return seconds;
}

void timer_free_cuda(ops_timer *t)
{
    cudaEvent_t *marks = (cudaEvent_t *)t->marks;
    for (int i = 0; i < t->capacity; i++)
        TRI_CHECK_CUDA(cudaEventDestroy(marks[i]));
    free(marks);
    t->marks = NULL;
    t->capacity = 0;
}
