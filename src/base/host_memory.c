/*
 * host_memory.c - the memory a job can still allocate on this node; see
 * host_memory.h.
 */
#include "host_memory.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The value of `key:` in /proc/meminfo text, in bytes (it reports kB);
 * -1 when absent. */
static int64_t meminfo_field(const char *text, const char *key)
{
    size_t len = strlen(key);
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, key, len) == 0 && p[len] == ':')
            return strtoll(p + len + 1, NULL, 10) * 1024;
    }
    return -1;
}

/* A cgroup file's number; -1 for "max", an absurd v1 "no limit" value
 * (close to 2^63), or nothing. */
static int64_t cgroup_number(const char *text)
{
    if (!text || !*text || strncmp(text, "max", 3) == 0)
        return -1;
    char *end;
    long long v = strtoll(text, &end, 10);
    if (end == text || v <= 0 || v > (1LL << 60))
        return -1;
    return v;
}

int64_t host_memory_parse(const char *meminfo, const char *limit, const char *usage)
{
    int64_t avail = meminfo_field(meminfo, "MemAvailable");
    if (avail < 0)
        return -1;
    int64_t swap = meminfo_field(meminfo, "SwapFree");
    if (swap > 0)
        avail += swap;
    int64_t cap = cgroup_number(limit);
    if (cap > 0) {
        int64_t used = cgroup_number(usage);
        int64_t left = used > 0 && used < cap ? cap - used : cap;
        if (left < avail)
            avail = left;
    }
    return avail;
}

/* Reads a small text file whole into buf; "" when it cannot. */
static const char *slurp(const char *path, char *buf, size_t size)
{
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return buf;
    size_t n = fread(buf, 1, size - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* This process's memory cgroup directory: "0::/path" (v2) or
 * "N:memory:/path" (v1) in /proc/self/cgroup; *v2 says which. "" when
 * there is none. */
static void cgroup_dir(char *dir, size_t size, int *v2)
{
    char text[4096];
    slurp("/proc/self/cgroup", text, sizeof text);
    dir[0] = '\0';
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        const char *rest = NULL, *memory = strstr(p, ":memory:");
        if (strncmp(p, "0::", 3) == 0) {
            rest = p + 3;
            *v2 = 1;
        } else if (memory && memory < p + strcspn(p, "\n")) {
            rest = memory + 8;
            *v2 = 0;
        }
        if (rest) {
            snprintf(dir, size, "/sys/fs/cgroup%s%.*s", *v2 ? "" : "/memory",
                     (int)strcspn(rest, "\n"), rest);
            if (!*v2)
                return;   /* v1's memory line wins over a hybrid's v2 line */
        }
    }
}

int64_t host_memory_available(void)
{
    char meminfo[16384], limit[64] = "", usage[64] = "", dir[2048], path[2200];
    int v2 = 0;
    slurp("/proc/meminfo", meminfo, sizeof meminfo);
    cgroup_dir(dir, sizeof dir, &v2);
    if (dir[0]) {
        snprintf(path, sizeof path, "%s/%s", dir, v2 ? "memory.max" : "memory.limit_in_bytes");
        slurp(path, limit, sizeof limit);
        snprintf(path, sizeof path, "%s/%s", dir, v2 ? "memory.current" : "memory.usage_in_bytes");
        slurp(path, usage, sizeof usage);
    }
    return host_memory_parse(meminfo, limit, usage);
}
