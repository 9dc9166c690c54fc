/*
 * host_memory.h - how much memory this node can still give a job: the
 * kernel's MemAvailable plus free swap, capped by the job's cgroup limit
 * (Slurm confines jobs to a cgroup of --mem bytes). The trainer compares
 * it with the plan's estimate before it allocates, so a run that cannot
 * fit fails at once with the estimate, instead of after minutes of page
 * faults, or by the OOM killer.
 */
#ifndef TRI_SRC_HOST_MEMORY_H
#define TRI_SRC_HOST_MEMORY_H

#include <stdint.h>

/* Bytes available to this process's job on this node, or -1 where it
 * cannot be told (no /proc/meminfo). Not collective. */
int64_t host_memory_available(void);

/* The same from given texts: a /proc/meminfo and the cgroup's limit file
 * (cgroup v2 memory.max, v1 memory.limit_in_bytes; NULL or "max" when
 * there is none) and its current usage (NULL when unknown). For tests.
 * Not collective. */
int64_t host_memory_parse(const char *meminfo, const char *limit, const char *usage);

#endif
