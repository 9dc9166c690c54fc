/*
 * fault.h - fault injection for tests: TRIDENT_FAULT="point:rank:step,..."
 * makes world rank `rank` take the faulty branch at `point` on step `step`
 * (1-based; 0 = any step). Points: grad_inf (puts inf into one of the
 * rank's gradients), nan_loss (a weight turns NaN, so the loss does), die
 * (the rank exits abruptly mid-step), save_fail (the checkpoint write
 * fails, as on a full disk), save_pause (the rank stops itself with
 * SIGSTOP once its tensors of the step's checkpoint are in the temporary
 * file, before the checksums and the close: a test fills the disk then,
 * in mid-save), close_fast (the save's close gets a 2 s deadline instead
 * of 30 s: a test that fills the disk mid-save need not wait out the real
 * one; see ckpt.c, close_with_deadline), save_slow (an asynchronous save reads its
 * snapshot slowly, 20 ms per read, so it stays in flight), async_kill
 * (the rank kills itself with SIGKILL halfway through writing the tensors
 * of an asynchronous save), data_open (this rank alone cannot read the
 * data: a failure only one rank sees), slow_stop (the save on a stop
 * signal starts 3 s late, as a large model's takes long), slow (the rank
 * sleeps 50 ms in each such step: a straggler), stall (the rank stops
 * itself with SIGSTOP, as a hung node would: the watchdog's case),
 * offload_cpu (with [train] offload = optimizer, the rank takes the GPU's
 * offload path on the CPU: host arenas, a separate master, the chunked
 * executor with memcpy copies; arm it on every rank, at step 0),
 * low_peak (the start-up probe of the CPU's peak reads 100x low, as on a
 * busy machine; at step 0), sigterm (the rank sends SIGTERM to its own
 * process as the step starts, as scancel would: a stop at a known step).
 * Unset
 * in normal runs: a getenv at start-up is the whole cost.
 */
#ifndef TRI_SRC_FAULT_H
#define TRI_SRC_FAULT_H

/* Whether the fault `point` is armed for this world rank at this step.
 * Not collective. */
int fault_at(const char *point, int rank, long step);

#endif
