/*
 * ckpt_files.c - the checkpoint files' life: names, publishing, `latest`,
 * pruning, the directory's lock, resuming; see ckpt_files.h.
 *
 * Every step that makes a save visible is a rename, fsynced before and
 * after, so a crash or a kill at any instant leaves `latest` naming a
 * complete file: the data reaches the disk before the name does, and the
 * new name before `latest` points at it.
 *
 * A directory holding completed checkpoints belongs to the run that wrote
 * them: a run locks it for its lifetime, and resumes from it or refuses to
 * start, so no run overwrites or prunes another's completed files.
 */
#include "ckpt_files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "file_check.h"

static char run_tag[64];

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

void ckpt_files_set_tag(const char *tag)
{
    snprintf(run_tag, sizeof run_tag, "%s", tag);
}

void ckpt_files_make_tag(char *tag, size_t size)
{
    char host[256] = "";
    if (gethostname(host, sizeof host - 1) != 0)
        host[0] = '\0';
    char clean[25];
    size_t n = 0;
    for (const char *h = host; *h && *h != '.' && n < sizeof clean - 1; h++)
        if ((*h >= 'a' && *h <= 'z') || (*h >= 'A' && *h <= 'Z') || (*h >= '0' && *h <= '9')
            || *h == '-')
            clean[n++] = *h;
    clean[n] = '\0';
    snprintf(tag, size, "%ld.%s", (long)getpid(), n ? clean : "host");
}

/* name + ".tmp" + ".TAG" when the run has a tag. */
static void tmp_name(char *out, size_t size, const char *path)
{
    snprintf(out, size, "%s.tmp%s%s", path, run_tag[0] ? "." : "", run_tag);
}

void ckpt_files_paths(CkptPaths *p, const char *dir, int64_t step)
{
    p->dir = dir;
    snprintf(p->name, sizeof p->name, "step_%08lld.h5", (long long)step);
    join(p->final, sizeof p->final, dir, p->name);
    tmp_name(p->tmp, sizeof p->tmp, p->final);
}

int ckpt_files_parse_name(const char *name, int64_t *step)
{
    if (strncmp(name, "step_", 5) != 0)
        return 0;
    const char *d = name + 5, *e = d;
    while (*e >= '0' && *e <= '9')
        e++;
    if (e - d < 8 || e - d > 18 || strcmp(e, ".h5") != 0)
        return 0;
    long long v = strtoll(d, NULL, 10);
    char canonical[64];
    snprintf(canonical, sizeof canonical, "step_%08lld.h5", v);
    if (strcmp(canonical, name) != 0)
        return 0; /* step_000000042.h5: not a name a save writes */
    *step = v;
    return 1;
}

static int newest_first(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x < y) - (x > y);
}

int ckpt_files_list(const char *dir, int64_t **steps)
{
    *steps = NULL;
    DIR *d = dir[0] ? opendir(dir) : NULL;
    if (!d)
        return 0;
    int n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int64_t step;
        if (!ckpt_files_parse_name(e->d_name, &step))
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            int64_t *grown = realloc(*steps, (size_t)cap * sizeof **steps);
            if (!grown)
                break;
            *steps = grown;
        }
        (*steps)[n++] = step;
    }
    closedir(d);
    if (n)
        qsort(*steps, (size_t)n, sizeof **steps, newest_first);
    return n;
}

int ckpt_files_prepare_dir(const char *dir, FILE *err)
{
    char probe[CONFIG_PATH_MAX + 64];
    join(probe, sizeof probe, dir, "x");
    int e = file_make_parents(probe);
    if (!e) {
        /* access(W_OK) passes for root on a mode 555 directory and says
         * nothing of quotas: creating a file is the test that counts */
        snprintf(probe, sizeof probe, "%s/.trident.probe.%ld", dir, (long)getpid());
        int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL, 0666);
        e = fd < 0 ? errno : 0;
        if (fd >= 0) {
            close(fd);
            unlink(probe);
        }
    }
    if (e) {
        fprintf(err, "trident: [checkpoint] dir = %s: %s\n", dir, strerror(e));
        return 1;
    }
    return 0;
}

/* ---- the directory's lock ------------------------------------------------ */

/* Open file description locks belong to the open file, not the process:
 * no other open and close of the file in this process can drop them, and
 * a second lock in one process conflicts as between two processes. */
#ifdef F_OFD_SETLK
#define TRI_SETLK F_OFD_SETLK
#else
#define TRI_SETLK F_SETLK
#endif

static int lock_unsupported(int e)
{
    return e == ENOLCK || e == EOPNOTSUPP || e == ENOSYS || e == EINVAL;
}

int ckpt_files_lock(const char *dir, CkptLock *lock, FILE *err, FILE *warn)
{
    char path[CONFIG_PATH_MAX + 32];
    join(path, sizeof path, dir, ".trident.lock");
    lock->fd = -1;
    int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0) {
        fprintf(err, "trident: [checkpoint] dir = %s: cannot create its lock file %s: %s\n",
                dir, path, strerror(errno));
        return 1;
    }
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (fcntl(fd, TRI_SETLK, &fl) != 0) {
        int e = errno;
        if (lock_unsupported(e)) {
            fprintf(warn, "warning: [checkpoint] dir = %s: this file system cannot lock %s (%s): "
                    "nothing stops a second run from writing into the same directory\n",
                    dir, path, strerror(e));
            close(fd);
            return 0;
        }
        char holder[128] = "";
        ssize_t got = pread(fd, holder, sizeof holder - 1, 0);
        holder[got > 0 ? got : 0] = '\0';
        holder[strcspn(holder, "\n")] = '\0';
        close(fd);
        if (e == EAGAIN || e == EACCES)
            fprintf(err, "trident: [checkpoint] dir = %s is in use by another run (%s, the lock "
                    "on %s): two runs in one directory would overwrite each other's "
                    "checkpoints; wait until it ends, or choose another dir\n",
                    dir, holder[0] ? holder : "holder unknown", path);
        else
            fprintf(err, "trident: [checkpoint] dir = %s: cannot lock %s: %s\n", dir, path,
                    strerror(e));
        return 1;
    }
    char host[256] = "";
    if (gethostname(host, sizeof host - 1) != 0)
        snprintf(host, sizeof host, "?");
    char who[300];
    int len = snprintf(who, sizeof who, "pid %ld host %s\n", (long)getpid(), host);
    /* who holds it is a courtesy to the next run's message: no failure here matters */
    if (ftruncate(fd, 0) == 0 && pwrite(fd, who, (size_t)len, 0) < 0)
        (void)0;
    lock->fd = fd;
    return 0;
}

void ckpt_files_unlock(CkptLock *lock)
{
    ckpt_files_prune_wait(); /* the run's pruning ends while it owns dir */
    if (lock->fd >= 0)
        close(lock->fd);
    lock->fd = -1;
}

static int is_temporary(const char *name)
{
    if (strncmp(name, "latest.tmp", 10) == 0)
        return 1;
    return strncmp(name, "step_", 5) == 0 && strstr(name, ".h5.tmp") != NULL;
}

void ckpt_files_clean_stale(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    char path[CONFIG_PATH_MAX + 300];
    while ((e = readdir(d)) != NULL) {
        if (is_temporary(e->d_name)) {
            join(path, sizeof path, dir, e->d_name);
            unlink(path);
        }
    }
    closedir(d);
}

/* ---- saving ---------------------------------------------------------------- */

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
    char tmp[CONFIG_PATH_MAX + 128], final[CONFIG_PATH_MAX + 32];
    join(final, sizeof final, dir, "latest");
    tmp_name(tmp, sizeof tmp, final);
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

void ckpt_files_prune(const char *dir, int keep, const char *published)
{
    int64_t *steps;
    int n = ckpt_files_list(dir, &steps);
    int kept = 0;
    char path[CONFIG_PATH_MAX + 100];
    for (int i = 0; i < n; i++) {
        CkptPaths p;
        ckpt_files_paths(&p, dir, steps[i]);
        if (published && strcmp(p.name, published) == 0)
            continue; /* counted first, below */
        if (kept + (published != NULL) < keep) {
            kept++;
            continue;
        }
        join(path, sizeof path, dir, p.name);
        unlink(path);
    }
    free(steps);
}

static void *flush_thread(void *arg)
{
    const CkptFlush *f = arg;
    int fd = open(f->path, O_RDONLY);
    if (fd >= 0) {
        fdatasync(fd);
        close(fd);
    }
    return NULL;
}

void ckpt_files_flush_start(CkptFlush *f, const char *path)
{
    snprintf(f->path, sizeof f->path, "%s", path);
    f->started = pthread_create(&f->thread, NULL, flush_thread, f) == 0;
}

void ckpt_files_flush_wait(CkptFlush *f)
{
    if (!f->started)
        return;
    pthread_join(f->thread, NULL);
    f->started = 0;
}

/* The pruning after a publication runs on a thread of its own: deleting a
 * 400 MB checkpoint took 0.09 s on an idle machine and 0.3 s under load
 * (ext4 mounted with `discard` frees and trims every extent before
 * unlink returns), time the training would wait for though the new
 * checkpoint and `latest` are already on the disk. One pruning at a time;
 * the next save and the lock's release wait for it. */
static struct {
    pthread_mutex_t lock;
    pthread_t thread;
    int running;
    char dir[CONFIG_PATH_MAX];
    char published[64];
    int keep;
} pruning = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void *prune_thread(void *arg)
{
    (void)arg;
    ckpt_files_prune(pruning.dir, pruning.keep, pruning.published);
    return NULL;
}

void ckpt_files_prune_wait(void)
{
    pthread_mutex_lock(&pruning.lock);
    if (pruning.running)
        pthread_join(pruning.thread, NULL);
    pruning.running = 0;
    pthread_mutex_unlock(&pruning.lock);
}

static void prune_in_background(const char *dir, int keep, const char *published)
{
    ckpt_files_prune_wait();
    pthread_mutex_lock(&pruning.lock);
    snprintf(pruning.dir, sizeof pruning.dir, "%s", dir);
    snprintf(pruning.published, sizeof pruning.published, "%s", published);
    pruning.keep = keep;
    int started = pthread_create(&pruning.thread, NULL, prune_thread, NULL) == 0;
    pruning.running = started;
    pthread_mutex_unlock(&pruning.lock);
    if (!started) /* no thread to be had: prune here, as trident first did */
        ckpt_files_prune(dir, keep, published);
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
    /* only now, with the new file and `latest` durable, may an older
     * checkpoint go */
    prune_in_background(p->dir, keep, p->name);
    return 0;
}

void ckpt_files_discard(const CkptPaths *p)
{
    unlink(p->tmp);
}

/* ---- resuming ---------------------------------------------------------------- */

void ckpt_files_candidate(const CkptResume *r, int i, char *path, size_t size)
{
    if (!r->scanned) {
        snprintf(path, size, "%s", r->file);
        return;
    }
    CkptPaths p;
    ckpt_files_paths(&p, r->dir, r->steps[i]);
    snprintf(path, size, "%s", p.final);
}

void ckpt_files_resume_free(CkptResume *r)
{
    free(r->steps);
    r->steps = NULL;
}

/* The canonical directory of path (its dirname, symbolic links resolved),
 * or "" when it cannot be learned. */
static void real_dir_of(const char *path, char *out)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    if (!realpath(dir, out))
        out[0] = '\0';
}

static int in_dir(const char *path, const char *dir)
{
    char a[PATH_MAX], b[PATH_MAX];
    real_dir_of(path, a);
    if (!realpath(dir, b))
        return 0;
    return a[0] && strcmp(a, b) == 0;
}

/* What dir/latest says: 0 and the file it names in r->file; 1 and the
 * reason in r->why when it cannot be used but dir's checkpoints may be
 * tried; 2 (the reason on err) when it must not be worked around; 3 when
 * there is no latest. */
static int read_latest(const char *dir, CkptResume *r, FILE *err)
{
    char latest[CONFIG_PATH_MAX + 16], name[256] = "";
    join(latest, sizeof latest, dir, "latest");
    struct stat sb;
    if (lstat(latest, &sb) != 0) {
        if (errno == ENOENT)
            return 3;
        snprintf(r->why, sizeof r->why, "%s: %s", latest, strerror(errno));
        return 1;
    }
    if (S_ISLNK(sb.st_mode)) {
        char target[PATH_MAX] = "";
        ssize_t n = readlink(latest, target, sizeof target - 1);
        target[n > 0 ? n : 0] = '\0';
        fprintf(err, "trident: %s is a symbolic link (to %s): trident writes latest as a plain "
                "file, and a link to another run's latest would resume that run's checkpoint; "
                "remove the link (resume = auto then takes the newest checkpoint in %s), or "
                "name a file with [checkpoint] resume\n", latest, target, dir);
        return 2;
    }
    if (!S_ISREG(sb.st_mode)) {
        fprintf(err, "trident: %s: %s, not a regular file: trident writes latest as a "
                "one-line text file; remove it (resume = auto then takes the newest checkpoint "
                "in %s)\n", latest, file_kind(sb.st_mode), dir);
        return 2;
    }
    /* O_NONBLOCK: a FIFO slipped in after lstat must not hang rank 0 */
    int fd = open(latest, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
    FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
    if (!f) {
        snprintf(r->why, sizeof r->why, "%s: %s", latest, strerror(errno));
        if (fd >= 0)
            close(fd);
        return 1;
    }
    int got = fscanf(f, "%255s", name) == 1;
    fclose(f);
    if (got && strchr(name, '/')) {
        fprintf(err, "trident: %s: does not name a checkpoint file in %s (it holds %s, a path): "
                "a latest naming another directory's file would resume another run\n",
                latest, dir, name);
        return 2;
    }
    if (!got) {
        snprintf(r->why, sizeof r->why, "%s: does not name a checkpoint file", latest);
        return 1;
    }
    snprintf(r->file, sizeof r->file, "%s/%s", dir, name);
    if (access(r->file, R_OK) != 0) {
        snprintf(r->why, sizeof r->why, "%s names %s, which cannot be read: %s", latest,
                 r->file, strerror(errno));
        return 1;
    }
    return 0;
}

static int resolve_auto(const CheckpointConfig *c, CkptResume *r, int n_ckpt, FILE *err)
{
    int state = read_latest(c->dir, r, err);
    if (state == 2)
        return 1;
    if (state == 0) {
        r->n = 1;
        return 0;
    }
    if (n_ckpt > 0) {
        if (state == 3)
            snprintf(r->why, sizeof r->why, "%s/latest: %s", c->dir, strerror(ENOENT));
        r->scanned = 1;
        r->n = n_ckpt;
        return 0;
    }
    if (state == 3)
        return 0; /* a fresh run */
    fprintf(err, "trident: %s, and %s holds no checkpoint to resume instead: remove latest to "
            "start afresh there, or choose another [checkpoint] dir\n", r->why, c->dir);
    return 1;
}

int ckpt_files_resolve(const CheckpointConfig *c, CkptResume *r, FILE *err)
{
    memset(r, 0, sizeof *r);
    r->dir = c->dir;
    int n_ckpt = ckpt_files_list(c->dir, &r->steps);
    CkptPaths newest;
    ckpt_files_paths(&newest, c->dir, n_ckpt ? r->steps[0] : 0);
    if (strcmp(c->resume, "none") == 0) {
        if (n_ckpt == 0)
            return 0;
        fprintf(err, "trident: [checkpoint] resume = none, but [checkpoint] dir = %s holds %d "
                "completed checkpoint%s of a run (the newest: %s): set resume = auto to "
                "continue it, or choose another dir; trident does not overwrite them\n",
                c->dir, n_ckpt, n_ckpt > 1 ? "s" : "", newest.final);
        return 1;
    }
    if (strcmp(c->resume, "auto") != 0) {
        snprintf(r->file, sizeof r->file, "%s", c->resume);
        if (access(r->file, R_OK) != 0) {
            fprintf(err, "trident: [checkpoint] resume = %s: %s\n", c->resume, strerror(errno));
            return 1;
        }
        if (n_ckpt > 0 && !in_dir(r->file, c->dir)) {
            fprintf(err, "trident: [checkpoint] resume = %s, but [checkpoint] dir = %s holds %d "
                    "completed checkpoint%s of another run (the newest: %s): choose another dir, "
                    "or set resume = auto to continue that run; trident does not overwrite "
                    "them\n", c->resume, c->dir, n_ckpt, n_ckpt > 1 ? "s" : "", newest.final);
            return 1;
        }
        r->n = 1;
        return 0;
    }
    if (!c->dir[0])
        return 0;
    return resolve_auto(c, r, n_ckpt, err);
}
