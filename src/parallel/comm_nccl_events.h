/*
 * comm_nccl_events.h - the CUDA events that mark the end of comm_nccl.c's
 * nonblocking operations (a CommRequest's event): slots handed out and
 * returned, the pool grown as needed, so a step's requests neither create
 * nor destroy events.
 *
 * Compiled only in NCCL builds, for comm_nccl.c alone. A failing CUDA
 * call or a slot that is not in flight goes to the kernels' fatal handler
 * (ops_fatalf), which comm_nccl_init points at the abort of every NCCL
 * communicator: so this file calls nothing of comm_nccl.c, and the two
 * make no circle (tests/t_deps.sh). Process-wide state, as comm_nccl.c's.
 * Not collective.
 */
#ifndef TRI_SRC_COMM_NCCL_EVENTS_H
#define TRI_SRC_COMM_NCCL_EVENTS_H

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cuda_runtime_api.h>
#pragma GCC diagnostic pop

/* A free slot, marked busy (new events are made when none is free). */
int nccl_event_take(void);

/* The event of busy slot `slot`; fn names the caller in the message
 * when the slot is not in flight (completed twice?). */
cudaEvent_t nccl_event_of(int slot, const char *fn);

/* Returns slot to the pool. */
void nccl_event_give(int slot);

/* Destroys every event and empties the pool (at comm_nccl_finalize). */
void nccl_events_destroy(void);

#endif
