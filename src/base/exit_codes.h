/*
 * exit_codes.h - trident's exit statuses, documented in doc/guide.md and
 * trident(1).
 *
 * A header of their own, below every file of src/: fail.h includes it for
 * its callers, and watchdog.c, which ends a stalled job with
 * TRI_EXIT_WATCHDOG, takes it from here, so the watchdog needs nothing of
 * fail.c (which is above it: fail_agree is a named phase of its record).
 */
#ifndef TRI_SRC_EXIT_CODES_H
#define TRI_SRC_EXIT_CODES_H

enum {
    TRI_EXIT_OK = 0,
    TRI_EXIT_ERROR = 1,      /* bad input or a failed run */
    TRI_EXIT_USAGE = 2,      /* bad command line */
    TRI_EXIT_REQUEUE = 75,   /* stopped by SIGTERM/SIGUSR1 after a checkpoint
                                (EX_TEMPFAIL): batch scripts requeue on it */
    TRI_EXIT_WATCHDOG = 76,  /* no progress for [fault] timeout seconds: a
                                rank stopped (watchdog.h); not a requeue */
    TRI_EXIT_STOPPED = 77    /* stopped by a signal with no [checkpoint] dir:
                                nothing to resume, so not a requeue */
};

#endif
