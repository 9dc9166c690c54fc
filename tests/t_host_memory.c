/*
 * t_host_memory.c - host_memory.c's reading of /proc/meminfo and cgroup
 * limits, from fixed texts; and that this machine reports something sane.
 */
#include "host_memory.h"

#include <stddef.h>
#include <stdint.h>

#include "tap.h"

static const char meminfo[] = "MemTotal:       24000000 kB\n"
                              "MemFree:         1000000 kB\n"
                              "MemAvailable:   20000000 kB\n"
                              "SwapTotal:       2000000 kB\n"
                              "SwapFree:        1000000 kB\n";

int main(int argc, char **argv)
{
    tap_init(&argc, &argv);
    tap_plan(8);
    const int64_t k = 1024;
    tap_ok(host_memory_parse(meminfo, NULL, NULL) == 21000000 * k,
           "no cgroup limit: MemAvailable + SwapFree");
    tap_ok(host_memory_parse(meminfo, "max\n", "123\n") == 21000000 * k,
           "cgroup v2 memory.max = max: no limit");
    tap_ok(host_memory_parse(meminfo, "9223372036854771712\n", NULL) == 21000000 * k,
           "cgroup v1's 'no limit' (about 2^63): no limit");
    tap_ok(host_memory_parse(meminfo, "8589934592\n", "2147483648\n") == 6442450944LL,
           "a Slurm --mem cgroup of 8 GiB with 2 GiB used leaves 6 GiB");
    tap_ok(host_memory_parse(meminfo, "8589934592\n", NULL) == 8589934592LL,
           "a cgroup limit with unknown usage caps at the limit");
    tap_ok(host_memory_parse(meminfo, "1099511627776\n", "0\n") == 21000000 * k,
           "a cgroup limit above what the node has: the node's figure");
    tap_ok(host_memory_parse("MemTotal: 100 kB\n", NULL, NULL) == -1,
           "no MemAvailable line (a kernel before 3.14): unknown, -1");
    int64_t here = host_memory_available();
    tap_ok(here == -1 || here > 16 * 1048576LL, "this machine: %lld bytes available",
           (long long)here);
    return tap_done();
}
