/*
 * alloc.c - allocations whose failure ends the job (alloc.h).
 *
 * One message for all of them, "out of memory for WHAT" at the caller's
 * file:line, where each caller used to write its own check and wording.
 */
#include "alloc.h"

#include <stdio.h>
#include <stdlib.h>

#include "fail.h"

static void out_of_memory(const char *what, const char *file, int line)
    __attribute__((noreturn));

static void out_of_memory(const char *what, const char *file, int line)
{
    char msg[256];
    snprintf(msg, sizeof msg, "out of memory for %s", what);
    fail_abort(msg, file, line);
}

void *alloc_bytes_(size_t size, const char *what, const char *file, int line)
{
    void *p = malloc(size ? size : 1);
    if (!p)
        out_of_memory(what, file, line);
    return p;
}

void *alloc_zeroed_(size_t n, size_t size, const char *what, const char *file, int line)
{
    void *p = n && size ? calloc(n, size) : calloc(1, 1);
    if (!p)
        out_of_memory(what, file, line);
    return p;
}

void *alloc_resize_(void *p, size_t size, const char *what, const char *file, int line)
{
    void *q = realloc(p, size ? size : 1);
    if (!q)
        out_of_memory(what, file, line);
    return q;
}
