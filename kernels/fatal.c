/*
 * fatal.c - the fatal hook of fatal.h.
 *
 * Not collective.
 */
#include "fatal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static void default_fatal(const char *what, const char *file, int line)
{
    fprintf(stderr, "trident: fatal: %s at %s:%d\n", what, file, line);
    fflush(stderr);
}

static ops_fatal_fn fatal_handler = default_fatal;

void ops_set_fatal_handler(ops_fatal_fn fn)
{
    fatal_handler = fn ? fn : default_fatal;
}

/* The handler is not expected to return (main.c's calls MPI_Abort, a test's
 * may longjmp); if it does, abort anyway: no caller is written to continue
 * after a failed op. */
void ops_fatal(const char *what, const char *file, int line)
{
    fatal_handler(what, file, line);
    abort();
}

void ops_fatalf(const char *file, int line, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ops_fatal(msg, file, line);
}
