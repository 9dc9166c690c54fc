/*
 * fuzz_util.c - scratch files and failure reporting for the fuzz targets;
 * see fuzz.h.
 */
#include "fuzz.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char scratch_path[2][512];

static void remove_scratch(void)
{
    for (int i = 0; i < 2; i++)
        if (scratch_path[i][0])
            unlink(scratch_path[i]);
}

const char *fuzz_scratch(int slot, const void *data, size_t size)
{
    char *path = scratch_path[slot];
    if (!path[0]) {
        /* /dev/shm when there is one: the inputs never touch a disk */
        const char *dir = getenv("TMPDIR");
        if (!dir || !*dir)
            dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(path, sizeof scratch_path[slot], "%s/trident-fuzz-XXXXXX", dir);
        int fd = mkstemp(path);
        if (fd < 0) {
            perror("fuzz: mkstemp");
            abort();
        }
        close(fd);
        if (!scratch_path[!slot][0])
            atexit(remove_scratch);
    }
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
        perror("fuzz: writing the scratch file");
        abort();
    }
    return path;
}

FILE *fuzz_quiet(void)
{
    static FILE *null_stream;
    if (!null_stream)
        null_stream = fopen("/dev/null", "w");
    if (!null_stream)
        abort();
    return null_stream;
}

void fuzz_fail(const char *why)
{
    fprintf(stderr, "fuzz: FINDING: %s\n", why);
    fflush(stderr);
    abort();
}
