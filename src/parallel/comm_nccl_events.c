/*
 * comm_nccl_events.c - the pool of events for comm_nccl.c's nonblocking
 * operations; see comm_nccl_events.h.
 */
#include "comm_nccl_events.h"

#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "ops.h"

static struct {
    cudaEvent_t *event;
    char *busy;
    int n;
} pool;

/* A failed CUDA call ends the run through the fatal handler (comm_nccl_init
 * installs the one that aborts the NCCL communicators first). */
static void check_cuda_(cudaError_t err, const char *call, const char *file, int line)
{
    if (err != cudaSuccess)
        ops_fatalf(file, line, "%s failed: %s (%s)", call, cudaGetErrorString(err),
                   cudaGetErrorName(err));
}

#define CHECK_CUDA(call) check_cuda_((call), #call, __FILE__, __LINE__)

int nccl_event_take(void)
{
    for (int i = 0; i < pool.n; i++) {
        if (!pool.busy[i]) {
            pool.busy[i] = 1;
            return i;
        }
    }
    int n = pool.n ? 2 * pool.n : 16, slot = pool.n;
    pool.event = TRI_REALLOC(pool.event, sizeof *pool.event * (size_t)n, "the communication events");
    pool.busy = TRI_REALLOC(pool.busy, (size_t)n, "the communication events");
    for (int i = pool.n; i < n; i++) {
        CHECK_CUDA(cudaEventCreateWithFlags(&pool.event[i], cudaEventDisableTiming));
        pool.busy[i] = 0;
    }
    pool.n = n;
    pool.busy[slot] = 1;
    return slot;
}

cudaEvent_t nccl_event_of(int slot, const char *fn)
{
    if (slot < 0 || slot >= pool.n || !pool.busy[slot])
        ops_fatalf(__FILE__, __LINE__, "%s: %d is not an operation in flight (completed twice?)",
                   fn, slot);
    return pool.event[slot];
}

void nccl_event_give(int slot)
{
    pool.busy[slot] = 0;
}

void nccl_events_destroy(void)
{
    for (int i = 0; i < pool.n; i++)
        CHECK_CUDA(cudaEventDestroy(pool.event[i]));
    free(pool.event);
    free(pool.busy);
    memset(&pool, 0, sizeof pool);
}
