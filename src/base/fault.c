/*
 * fault.c - test-only fault injection; see fault.h.
 */
#include "fault.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int fault_at(const char *point, int rank, long step)
{
    static const char *spec;
    static int read;
    if (!read) {
        spec = getenv("TRIDENT_FAULT");
        read = 1;
    }
    if (!spec || !*spec)
        return 0;
    size_t len = strlen(point);
    for (const char *p = spec; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
        int r;
        long s;
        if (strncmp(p, point, len) == 0 && p[len] == ':'
            && sscanf(p + len + 1, "%d:%ld", &r, &s) == 2 && r == rank
            && (s == 0 || s == step))
            return 1;
    }
    return 0;
}
