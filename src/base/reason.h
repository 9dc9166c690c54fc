/*
 * reason.h - the one way a check writes why it failed: a formatted line
 * into the caller's (why, n) buffer, returning 1 so that a check can end
 * with `return reason_set(why, n, ...)`. Not collective.
 */
#ifndef TRI_SRC_REASON_H
#define TRI_SRC_REASON_H

#include <stddef.h>

/* Writes the message (cut to n bytes) and returns 1. */
int reason_set(char *why, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
