/*
 * reason.c - a failed check's message into the caller's buffer (reason.h).
 */
#include "reason.h"

#include <stdarg.h>
#include <stdio.h>

int reason_set(char *why, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, n, fmt, ap);
    va_end(ap);
    return 1;
}
