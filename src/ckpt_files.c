/*
 * ckpt_files.c - the checkpoint files' life: names, publishing, `latest`,
 * pruning, resuming; see ckpt_files.h.
 *
 * Every step that makes a save visible is a rename, fsynced before and
 * after, so a crash or a kill at any instant leaves `latest` naming a
 * complete file: the data reaches the disk before the name does, and the
 * new name before `latest` points at it.
 */
#include "ckpt_files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "file_check.h"
#include "metrics.h"

static void join(char *out, size_t size, const char *dir, const char *name)
{
    snprintf(out, size, "%s/%s", dir, name);
}

static void fsync_path(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

void ckpt_files_paths(CkptPaths *p, const char *dir, int64_t step)
{
    p->dir = dir;
    snprintf(p->name, sizeof p->name, "step_%08lld.h5", (long long)step);
    join(p->final, sizeof p->final, dir, p->name);
    snprintf(p->tmp, sizeof p->tmp, "%s.tmp", p->final);
}

int ckpt_files_prepare_dir(const char *dir, FILE *err)
{
    char probe[CONFIG_PATH_MAX + 16];
    join(probe, sizeof probe, dir, "x");
    int e = metrics_mkdirs_for(probe);
    if (e) {
        fprintf(err, "trident: [checkpoint] dir = %s: %s\n", dir, strerror(e));
        return 1;
    }
    if (access(dir, W_OK) != 0) {
        fprintf(err, "trident: [checkpoint] dir = %s: %s\n", dir, strerror(errno));
        return 1;
    }
    return 0;
}

int ckpt_files_check_space(const char *dir, int64_t need, FILE *err)
{
    struct statvfs fs;
    if (statvfs(dir, &fs) != 0)
        return 0; /* unknown: let the write itself report */
    double free_bytes = (double)fs.f_bavail * (double)fs.f_frsize;
    if (free_bytes >= (double)need)
        return 0;
    fprintf(err, "trident: checkpoint: %s has %.1f MB free, but a checkpoint needs about "
            "%.1f MB (%s): free some space, or lower [checkpoint] keep\n", dir,
            free_bytes / 1e6, (double)need / 1e6, strerror(ENOSPC));
    return 1;
}

int ckpt_files_point_latest(const char *dir, const char *name, FILE *err)
{
    char tmp[CONFIG_PATH_MAX + 32], final[CONFIG_PATH_MAX + 32];
    join(tmp, sizeof tmp, dir, "latest.tmp");
    join(final, sizeof final, dir, "latest");
    FILE *f = fopen(tmp, "w");
    int ok = f && fprintf(f, "%s\n", name) > 0;
    if (f && fclose(f) != 0)
        ok = 0;
    if (ok) {
        fsync_path(tmp);
        ok = rename(tmp, final) == 0;
    }
    if (!ok) {
        fprintf(err, "trident: checkpoint: cannot update %s: %s\n", final, strerror(errno));
        unlink(tmp);
        return 1;
    }
    fsync_path(dir);
    return 0;
}

static int is_checkpoint_name(const char *name, long *step)
{
    char tail[8];
    return sscanf(name, "step_%ld.h5%7s", step, tail) == 1 && strlen(name) == 16;
}

static int is_stale_tmp(const char *name)
{
    size_t len = strlen(name);
    return len > 7 && strcmp(name + len - 7, ".h5.tmp") == 0 && strncmp(name, "step_", 5) == 0;
}

static int compare_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

void ckpt_files_prune(const char *dir, int keep)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    long steps[4096];
    int n = 0;
    struct dirent *e;
    char path[CONFIG_PATH_MAX + 300];
    while ((e = readdir(d)) != NULL) {
        long step;
        if (is_stale_tmp(e->d_name)) {
            join(path, sizeof path, dir, e->d_name);
            unlink(path);
        } else if (is_checkpoint_name(e->d_name, &step) && n < 4096) {
            steps[n++] = step;
        }
    }
    closedir(d);
    qsort(steps, (size_t)n, sizeof *steps, compare_long);
    for (int i = 0; i < n - keep; i++) {
        char name[64];
        snprintf(name, sizeof name, "step_%08ld.h5", steps[i]);
        join(path, sizeof path, dir, name);
        unlink(path);
    }
}

int ckpt_files_publish(const CkptPaths *p, int keep, FILE *err)
{
    fsync_path(p->tmp);
    if (rename(p->tmp, p->final) != 0) {
        fprintf(err, "trident: checkpoint: cannot rename %s: %s\n", p->tmp, strerror(errno));
        unlink(p->tmp);
        return 1;
    }
    fsync_path(p->dir);
    if (ckpt_files_point_latest(p->dir, p->name, err))
        return 1;
    ckpt_files_prune(p->dir, keep);
    return 0;
}

void ckpt_files_discard(const CkptPaths *p)
{
    unlink(p->tmp);
}

int ckpt_files_resolve(const CheckpointConfig *c, char *path, size_t size, FILE *err)
{
    path[0] = '\0';
    if (strcmp(c->resume, "none") == 0)
        return 0;
    if (strcmp(c->resume, "auto") != 0) {
        snprintf(path, size, "%s", c->resume);
        if (access(path, R_OK) != 0) {
            fprintf(err, "trident: [checkpoint] resume = %s: %s\n", c->resume, strerror(errno));
            return 1;
        }
        return 0;
    }
    if (!c->dir[0])
        return 0;
    char latest[CONFIG_PATH_MAX + 16], name[256] = "";
    join(latest, sizeof latest, c->dir, "latest");
    char why[128];
    if (file_is_special(latest, why, sizeof why)) { /* a FIFO would block fopen */
        fprintf(err, "trident: %s: %s\n", latest, why);
        return 1;
    }
    FILE *f = fopen(latest, "r");
    if (!f)
        return 0; /* a fresh run */
    int got = fscanf(f, "%255s", name) == 1;
    fclose(f);
    if (!got || strchr(name, '/')) {
        fprintf(err, "trident: %s: does not name a checkpoint file\n", latest);
        return 1;
    }
    snprintf(path, size, "%s/%s", c->dir, name);
    if (access(path, R_OK) != 0) {
        fprintf(err, "trident: %s names %s, which cannot be read: %s\n", latest, path,
                strerror(errno));
        return 1;
    }
    return 0;
}
