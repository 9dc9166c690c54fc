/*
 * ckpt_bench.c - checkpoint saves through ckpt_save, the code path a
 * training run takes, without the training, each followed by `dd` writing
 * as many bytes to the same directory with an fsync: the disk's speed for
 * one sequential writer, measured at the same moment.
 *
 *   mpirun -n RANKS bench/ckpt_bench DIR REPS [section.key=value ...]
 *
 * The config is the built-in tiny.ini with the overrides applied (the
 * bench script passes the mid model's shape). The model's state is built
 * and initialised as a run's first step finds it, then saved REPS times
 * (keep = 1, so the disk holds one checkpoint). After each save rank 0
 * runs `dd if=/dev/zero of=DIR/dd.out bs=1M count=<the file's MiB>
 * conv=fsync` while the other ranks sleep (a spinning barrier would take
 * the cores dd needs). Like a save, which prunes the checkpoint before it,
 * dd replaces its previous output. A save's time is what ckpt_save reports: the
 * checksums, the file, the fsync, the rename and `latest`, as the
 * `checkpoint:` line of a run. The pruning runs on after ckpt_save returns
 * (as in a run, where training goes on meanwhile); rank 0 waits for it
 * before dd, outside both timings, so that dd never shares the disk with
 * it. Rank 0 prints each repetition and the
 * medians:
 *   ckpt_bench: median of REPS: save S s (G GB/s), dd D s (G GB/s), save/dd F
 * Interleaving matters on a shared machine, where the disk's speed moves
 * by 2x within a minute. Printed, never asserted.
 */
#include <mpi.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ckpt.h"
#include "ckpt_files.h"
#include "config.h"
#include "config_load.h"
#include "fail.h"
#include "grid.h"
#include "model.h"
#include "timer.h"
#include "zero.h"

extern char **environ;

/* A barrier that sleeps while it waits. */
static void quiet_barrier(void)
{
    MPI_Request req;
    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    int done = 0;
    while (!done) {
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (!done)
            nanosleep(&(struct timespec){0, 2000000}, NULL);
    }
}

/* Seconds `dd` takes to write mib MiB into dir with an fsync; < 0 on failure. */
static double dd_seconds(const char *dir, long long mib)
{
    char of[CONFIG_PATH_MAX + 16], count[32];
    snprintf(of, sizeof of, "of=%s/dd.out", dir);
    snprintf(count, sizeof count, "count=%lld", mib);
    char *argv[] = {"dd", "if=/dev/zero", of, "bs=1M", count, "conv=fsync", "status=none", NULL};
    double t0 = timer_now();
    pid_t pid;
    int status;
    if (posix_spawnp(&pid, "dd", NULL, NULL, argv, environ) != 0
        || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
        return -1;
    return timer_now() - t0;
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, compare_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int load_config(Config *cfg, int argc, char **argv, int rank)
{
    char dir_set[CONFIG_PATH_MAX + 32];
    snprintf(dir_set, sizeof dir_set, "checkpoint.dir=%s", argv[1]);
    const char **sets = calloc((size_t)argc, sizeof *sets);
    if (!sets)
        fail_abort("out of memory", __FILE__, __LINE__);
    int n = 0;
    sets[n++] = dir_set;
    sets[n++] = "checkpoint.keep=1";
    for (int i = 3; i < argc; i++)
        sets[n++] = argv[i];
    int rc = config_load(cfg, NULL, sets, n, fail_stream(rank == 0));
    free(sets);
    return rc;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    fail_init();
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    Config cfg;
    int reps = argc >= 3 ? atoi(argv[2]) : 0;
    if (reps < 1 || reps > 1000) {
        if (rank == 0)
            fprintf(stderr, "usage: ckpt_bench DIR REPS [section.key=value ...]\n");
        MPI_Finalize();
        return 2;
    }
    if (load_config(&cfg, argc, argv, rank)) {
        MPI_Finalize();
        return 1;
    }
    Grid g;
    Model m;
    grid_create(&g, &cfg, MPI_COMM_WORLD);
    model_create(&m, &cfg, &g, 1);
    Zero *z = zero_create(&m, &cfg, &g);
    zero_init_weights(z);

    double *save = calloc((size_t)reps, sizeof *save), *dd = calloc((size_t)reps, sizeof *dd);
    long long size = 0;
    int rc = 0;
    for (int r = 0; r < reps && !rc; r++) {
        TrainState st = {.step = r + 1, .loss_scale = 1.0};
        int64_t bytes = 0;
        quiet_barrier();
        rc = ckpt_save(&m, z, &cfg, &st, &save[r], &bytes, fail_stream(rank == 0));
        if (rank == 0) /* dd competes with no deletion that a save left running */
            ckpt_files_prune_wait();
        if (!rc && rank == 0) {
            CkptPaths names;
            struct stat sb;
            ckpt_files_paths(&names, cfg.checkpoint.dir, st.step);
            size = stat(names.final, &sb) == 0 ? (long long)sb.st_size : 0;
            dd[r] = dd_seconds(cfg.checkpoint.dir, (size + (1 << 20) - 1) >> 20);
            if (dd[r] < 0) {
                fprintf(stderr, "ckpt_bench: dd failed\n");
                rc = 1;
            } else {
                printf("ckpt_bench: %lld bytes: save %.3f s, dd %.3f s\n", size, save[r], dd[r]);
                fflush(stdout);
            }
        }
        quiet_barrier();
        MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    }
    if (rank == 0) {
        char out[CONFIG_PATH_MAX + 16];
        snprintf(out, sizeof out, "%s/dd.out", cfg.checkpoint.dir);
        unlink(out);
    }
    if (!rc && rank == 0) {
        double s = median(save, reps), d = median(dd, reps);
        printf("ckpt_bench: median of %d: save %.3f s (%.2f GB/s), dd %.3f s (%.2f GB/s), "
               "save/dd %.2f\n", reps, s, (double)size / s / 1e9, d, (double)size / d / 1e9,
               d / s);
    }
    free(save);
    free(dd);
    zero_destroy(z);
    model_destroy(&m);
    grid_destroy(&g);
    MPI_Finalize();
    return rc;
}
