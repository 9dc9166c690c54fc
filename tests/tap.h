/*
 * tap.h - a small TAP producer for MPI test programs.
 *
 * tap_ok is collective on MPI_COMM_WORLD: every rank passes its own verdict,
 * the verdicts are reduced with MIN, and only rank 0 prints, so the TAP
 * stream stays clean however many ranks run. Diagnostics from other ranks go
 * to stderr, which the tap driver logs without parsing. The exit status of
 * tap_done agrees with the TAP verdict. It also holds the tests' one random
 * number generator, tap_uniform.
 */
#ifndef TRI_TESTS_TAP_H
#define TRI_TESTS_TAP_H

#include <stdint.h>

/* MPI_Init plus bookkeeping. Collective on world. */
void tap_init(int *argc, char ***argv);
/* Prints the plan. Not collective, but call it on every rank. */
void tap_plan(int n);
/* Collective on world: all ranks must call it in the same order. Returns
 * the agreed verdict (1 = ok). */
int tap_ok(int ok, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Prints "1..0 # SKIP why", finalizes MPI and exits 0. Collective. */
void tap_skip_all(const char *why);
/* "# message" on rank 0 (stdout), or "[rank r] message" on stderr elsewhere. */
void tap_diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Finalizes MPI; returns the exit status (0 if every test passed). */
int tap_done(void);
/* World rank and size, for tests. */
int tap_rank(void);
int tap_size(void);

/* Uniform in [lo, hi) from xorshift64* on *state: the same numbers on
 * every platform. Each test program keeps its own state (and seed), so
 * its inputs do not depend on another's draws. */
float tap_uniform(uint64_t *state, float lo, float hi);

/* Largest |a-b| / max(|b|, floor) over n floats. */
double tap_max_rel_diff(const float *a, const float *b, long n, double floor);
double tap_max_abs_diff(const float *a, const float *b, long n);

#endif
