/*
 * gpu_wait.h - how the host waits for the GPU without hanging on a peer.
 *
 * A blocking wait (cudaStreamSynchronize) on work that depends on a
 * collective never returns when a peer of that collective has died or
 * stopped: NCCL's kernels spin for ever. So the host polls instead: is
 * the work done, has NCCL reported an asynchronous error (a peer or the
 * network failed), has the wait outlasted its timeout? The first
 * GPU_WAIT_SPIN_POLLS polls follow each other at once (on a GPU, a few
 * hundred microseconds of event and NCCL queries), so a wait for one
 * kernel ends when the kernel does; then it sleeps between polls, backing
 * off from GPU_WAIT_FIRST_PAUSE_NS to GPU_WAIT_MAX_PAUSE_NS, so a long
 * wait costs a thousandth of a core. (Sleeping from the first poll made
 * `[log] profile`, which waits around every op, read short ops late by up
 * to the last pause: Linux also adds 50 us of timer slack to each.) The decision is a pure function, and the loop takes its probes
 * as callbacks, so both are tested on the CPU (tests/t_gpu_wait.c);
 * src/parallel/comm_nccl.c supplies the CUDA event and NCCL probes.
 */
#ifndef TRI_SRC_GPU_WAIT_H
#define TRI_SRC_GPU_WAIT_H

typedef enum {
    GPU_WAIT_POLL,         /* not done yet: sleep, poll again */
    GPU_WAIT_DONE,         /* the work is done */
    GPU_WAIT_PEER_FAILED,  /* NCCL reported an asynchronous error */
    GPU_WAIT_TIMED_OUT     /* waited timeout_s without either */
} GpuWaitVerdict;

#define GPU_WAIT_SPIN_POLLS 100            /* polls before the first pause */
#define GPU_WAIT_FIRST_PAUSE_NS 10000L     /* 10 us */
#define GPU_WAIT_MAX_PAUSE_NS 1000000L     /* 1 ms */

/* The verdict after waiting waited_s: a peer's failure wins over the work
 * being done (a collective that NCCL gave up on may complete with garbage),
 * and the timeout applies only when timeout_s > 0 (0: none). Pure; not
 * collective. */
GpuWaitVerdict gpu_wait_decide(double waited_s, int gpu_done, int peer_failed,
                               double timeout_s);

/* The pause after one of pause_ns: twice as long, within
 * [GPU_WAIT_FIRST_PAUSE_NS, GPU_WAIT_MAX_PAUSE_NS]. Pure; not collective. */
long gpu_wait_next_pause_ns(long pause_ns);

/* What the loop polls; each returns non-zero for yes. */
typedef struct {
    int (*gpu_done)(void *user);
    int (*peer_failed)(void *user);
    void *user;
} GpuWaitProbe;

/* Polls the probe (at once, then after each pause) until the verdict is
 * not GPU_WAIT_POLL, and returns it; *waited_s (may be NULL) receives the
 * seconds waited. Not collective. */
GpuWaitVerdict gpu_wait_poll(const GpuWaitProbe *probe, double timeout_s,
                             double *waited_s);

#endif
