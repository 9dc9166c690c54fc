/*
 * fatal.h - where a kernel goes when it cannot go on.
 *
 * A library error inside a kernel (CUDA, cuBLAS, oneDNN, malloc) or a bad
 * call caught by ops.c is not something a caller could handle, so it is
 * reported through one hook rather than returned. The hook is replaceable
 * because kernels/ knows nothing of MPI: main.c installs a handler that
 * calls MPI_Abort, tests install one that longjmps. Its own file so that
 * the backends report failures without depending on ops.c. ops.h includes
 * it.
 *
 * Not collective (the handler that main.c installs aborts the world).
 */
#ifndef TRI_KERNELS_FATAL_H
#define TRI_KERNELS_FATAL_H

#ifdef __cplusplus
extern "C" {
#endif

/* Called with the message and the file:line that failed; the default
 * prints "trident: fatal: WHAT at FILE:LINE" to stderr. */
typedef void (*ops_fatal_fn)(const char *what, const char *file, int line);
/* Installs fn (NULL: the default). */
void ops_set_fatal_handler(ops_fatal_fn fn);
/* Calls the handler. Handlers must not return; if one does, ops_fatal
 * abort()s. */
void ops_fatal(const char *what, const char *file, int line) __attribute__((noreturn));
/* ops_fatal with a printf-style message (at most 511 characters kept). */
void ops_fatalf(const char *file, int line, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 3, 4)));

#ifdef __cplusplus
}
#endif
#endif
