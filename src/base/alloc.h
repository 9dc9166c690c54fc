/*
 * alloc.h - host memory that is there or ends the job: malloc, calloc and
 * realloc whose failure is fatal (fail.h's second kind), so that a caller
 * needs no check of its own. Each aborts through fail_abort with "out of
 * memory for WHAT" and the caller's file:line (the macros pass them), and
 * never returns NULL: a size of 0 asks for 1 byte, as glibc's malloc(0)
 * gives a live pointer too.
 *
 * Only for memory the run cannot go on without. Where a file's contents
 * size an allocation (a header, a JSON index), failing is bad input and is
 * returned as a message instead (reason.h), so that a hostile file makes
 * a clean error rather than an abort.
 *
 * Below everything but fail.c, which it calls and which calls nothing
 * here (tests/t_deps.sh). Not collective.
 */
#ifndef TRI_SRC_ALLOC_H
#define TRI_SRC_ALLOC_H

#include <stddef.h>

#define TRI_MALLOC(size, what) alloc_bytes_((size), (what), __FILE__, __LINE__)
#define TRI_CALLOC(n, size, what) alloc_zeroed_((n), (size), (what), __FILE__, __LINE__)
#define TRI_REALLOC(p, size, what) alloc_resize_((p), (size), (what), __FILE__, __LINE__)

/* malloc(size), calloc(n, size) and realloc(p, size); what names the
 * memory in the message ("the parameter table"). */
void *alloc_bytes_(size_t size, const char *what, const char *file, int line);
void *alloc_zeroed_(size_t n, size_t size, const char *what, const char *file, int line);
void *alloc_resize_(void *p, size_t size, const char *what, const char *file, int line);

#endif
