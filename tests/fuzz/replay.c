/*
 * replay.c - runs a fuzz target over files without libFuzzer, for make
 * check: `replay_X FILE|DIR...` feeds every file (a directory's files in
 * name order) to LLVMFuzzerTestOneInput once and prints one line per file.
 * A crash, a sanitizer report or a fuzz_fail() aborts, and the test fails.
 * Built with the normal toolchain, so `make check` needs no clang.
 */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return 1;
    }
    uint8_t *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? 2 * cap : 65536;
            uint8_t *bigger = realloc(buf, cap);
            if (!bigger) {
                perror("replay: realloc");
                exit(1);
            }
            buf = bigger;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        if (got == 0)
            break;
        n += got;
    }
    fclose(f);
    /* libFuzzer hands a target its own copy of exactly size bytes */
    uint8_t *exact = malloc(n ? n : 1);
    if (!exact) {
        perror("replay: malloc");
        exit(1);
    }
    memcpy(exact, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    printf("replayed %s (%zu bytes)\n", path, n);
    fflush(stdout);
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int replay_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) {
        perror(dir);
        return 1;
    }
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char **more = realloc(names, (n + 1) * sizeof *names);
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        if (!more || !(more[n] = malloc(len))) {
            perror("replay");
            exit(1);
        }
        names = more;
        snprintf(names[n++], len, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, by_name);
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        rc |= replay_file(names[i]);
        free(names[i]);
    }
    free(names);
    if (n == 0) {
        fprintf(stderr, "replay: %s holds no files\n", dir);
        rc = 1;
    }
    return rc;
}

int main(int argc, char **argv)
{
    LLVMFuzzerInitialize(&argc, &argv);
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            perror(argv[i]);
            rc = 1;
        } else {
            rc |= S_ISDIR(st.st_mode) ? replay_dir(argv[i]) : replay_file(argv[i]);
        }
    }
    return rc;
}
