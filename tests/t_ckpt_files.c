/*
 * t_ckpt_files.c - ckpt_files.c on its own, in a scratch directory: a
 * save's names (steps of any length, a run's tag on temporary names),
 * publishing (rename, `latest`), pruning to `keep` without touching other
 * files, the directory's lock, clearing a dead run's temporary files, and
 * deciding what a run resumes from, including a missing, damaged or linked
 * `latest`. No HDF5: the "checkpoints" are small text files.
 */
#ifndef _XOPEN_SOURCE
#define _XOPEN_SOURCE 700       /* mkdtemp, open_memstream, nftw */
#endif
#include "ckpt_files.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tap.h"

static char work[512];

static void path_of(char *out, size_t size, const char *name)
{
    snprintf(out, size, "%s/%s", work, name);
}

static void put_file(const char *name, const char *text)
{
    char p[1024];
    path_of(p, sizeof p, name);
    FILE *f = fopen(p, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
        perror(p);
        exit(1);
    }
}

/* The whole file (at most 255 bytes), or "(none)". */
static const char *file_text(const char *name)
{
    static char text[256];
    char p[1024];
    path_of(p, sizeof p, name);
    FILE *f = fopen(p, "r");
    if (!f)
        return "(none)";
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    return text;
}

static int exists(const char *name)
{
    char p[1024];
    struct stat sb;
    path_of(p, sizeof p, name);
    return stat(p, &sb) == 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in dir, sorted, space-separated. */
static const char *listing(const char *dir)
{
    static char out[2048];
    char *names[64];
    int n = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL && n < 64)
        if (e->d_name[0] != '.')
            names[n++] = strdup(e->d_name);
    if (d)
        closedir(d);
    qsort(names, (size_t)n, sizeof *names, by_name);
    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (i)
            strcat(out, " ");
        strncat(out, names[i], sizeof out - strlen(out) - 2);
        free(names[i]);
    }
    return out;
}

static int remove_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* Empties the scratch directory. */
static void clear_work(void)
{
    nftw(work, remove_one, 16, FTW_DEPTH | FTW_PHYS);
    mkdir(work, 0777);
}

/* What a call wrote on err. */
typedef struct {
    char *msg;
    size_t len;
    FILE *f;
} Err;

static FILE *err_open(Err *e)
{
    e->msg = NULL;
    e->len = 0;
    e->f = open_memstream(&e->msg, &e->len);
    return e->f;
}

/* Closes e and returns its text (valid until the next err_open of e). */
static const char *err_text(Err *e)
{
    fclose(e->f);
    if (e->len)
        tap_diag("%.*s", (int)(e->msg[e->len - 1] == '\n' ? e->len - 1 : e->len), e->msg);
    return e->msg;
}

static void test_paths(void)
{
    CkptPaths p;
    ckpt_files_paths(&p, "run/ck", 42);
    tap_ok(!strcmp(p.name, "step_00000042.h5") && !strcmp(p.final, "run/ck/step_00000042.h5")
           && !strcmp(p.tmp, "run/ck/step_00000042.h5.tmp") && !strcmp(p.dir, "run/ck"),
           "a save of step 42 writes run/ck/step_00000042.h5.tmp and renames it to "
           "step_00000042.h5");
    ckpt_files_paths(&p, "ck", 123456789);
    tap_ok(!strcmp(p.name, "step_123456789.h5"), "a step of 9 digits makes a longer name (%s)",
           p.name);
    ckpt_files_set_tag("4242.node7");
    ckpt_files_paths(&p, "run/ck", 42);
    tap_ok(!strcmp(p.tmp, "run/ck/step_00000042.h5.tmp.4242.node7")
           && !strcmp(p.final, "run/ck/step_00000042.h5"),
           "with a run's tag, the temporary name ends with it (%s)", p.tmp);
    ckpt_files_set_tag("");
    char tag[64];
    ckpt_files_make_tag(tag, sizeof tag);
    char pid[32];
    snprintf(pid, sizeof pid, "%ld.", (long)getpid());
    tap_ok(!strncmp(tag, pid, strlen(pid)) && strlen(tag) > strlen(pid)
           && strcspn(tag, "/ \t\n") == strlen(tag),
           "a run's tag is PID.HOST, nothing a file name cannot hold (%s)", tag);
}

static void test_parse_name(void)
{
    static const struct {
        const char *name;
        int ok;
        int64_t step;
    } cases[] = {
        {"step_00000042.h5", 1, 42},
        {"step_99999999.h5", 1, 99999999},
        {"step_100000000.h5", 1, 100000000},
        {"step_123456789012.h5", 1, 123456789012LL},
        {"step_1.h5", 0, 0},                 /* fewer than 8 digits */
        {"step_000000042.h5", 0, 0},         /* a leading zero too many */
        {"step_-0000042.h5", 0, 0},
        {"step_00000042.h5.tmp", 0, 0},
        {"step_00000042.h5.tmp.1.x", 0, 0},
        {"step_00000042.h5x", 0, 0},
        {"step_0000004x.h5", 0, 0},
        {"latest", 0, 0},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t step = -1;
        int ok = ckpt_files_parse_name(cases[i].name, &step);
        if (ok != cases[i].ok || (ok && step != cases[i].step)) {
            tap_diag("%s: parsed %d, step %lld", cases[i].name, ok, (long long)step);
            bad++;
        }
    }
    tap_ok(bad == 0, "checkpoint names: 8 digits or more, as ckpt_files_paths writes them; "
           "nothing else (%d wrong)", bad);
}

static void test_prepare_dir(void)
{
    char dir[1024], msg_dir[1024];
    Err e;
    path_of(dir, sizeof dir, "a/b/c");
    int rc = ckpt_files_prepare_dir(dir, err_open(&e));
    struct stat sb;
    const char *msg = err_text(&e);
    tap_ok(rc == 0 && !*msg && stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode),
           "prepare_dir creates the directory and its parents");
    free(e.msg);
    char probe[128];
    snprintf(probe, sizeof probe, "a/b/c/.trident.probe.%ld", (long)getpid());
    tap_ok(!exists(probe), "and removes the file it tried creating there");

    put_file("plain", "x");
    path_of(msg_dir, sizeof msg_dir, "plain/sub");
    rc = ckpt_files_prepare_dir(msg_dir, err_open(&e));
    msg = err_text(&e);
    char want[1200];
    snprintf(want, sizeof want, "trident: [checkpoint] dir = %s: Not a directory\n", msg_dir);
    tap_ok(rc != 0 && !strcmp(msg, want), "prepare_dir under a regular file fails, naming it");
    free(e.msg);
}

static void test_check_space(void)
{
    Err e;
    int rc = ckpt_files_check_space(work, 1, err_open(&e));
    const char *msg = err_text(&e);
    tap_ok(rc == 0 && !*msg, "a byte fits");
    free(e.msg);

    rc = ckpt_files_check_space(work, INT64_MAX / 2, err_open(&e));
    msg = err_text(&e);
    tap_ok(rc != 0 && strstr(msg, "No space left on device): free some space, or lower "
                             "[checkpoint] keep") != NULL,
           "4 EB do not fit, and the message says what to do");
    free(e.msg);

    char missing[1024];
    path_of(missing, sizeof missing, "missing");
    rc = ckpt_files_check_space(missing, INT64_MAX / 2, err_open(&e));
    msg = err_text(&e);
    tap_ok(rc == 0 && !*msg, "free space that cannot be learned passes (the write reports)");
    free(e.msg);
}

static void test_publish(void)
{
    CkptPaths p;
    Err e;
    ckpt_files_paths(&p, work, 7);
    put_file("step_00000007.h5.tmp", "seven");
    int rc = ckpt_files_publish(&p, 3, err_open(&e));
    const char *msg = err_text(&e);
    tap_ok(rc == 0 && !*msg && !exists("step_00000007.h5.tmp")
           && !strcmp(file_text("step_00000007.h5"), "seven"),
           "publish renames the temporary file to its final name");
    tap_ok(!strcmp(file_text("latest"), "step_00000007.h5\n") && !exists("latest.tmp"),
           "publish points latest at it (one line), leaving no latest.tmp");
    free(e.msg);

    ckpt_files_paths(&p, work, 8);
    put_file("step_00000008.h5.tmp", "eight");
    rc = ckpt_files_publish(&p, 3, err_open(&e));
    err_text(&e);
    tap_ok(rc == 0 && !strcmp(file_text("latest"), "step_00000008.h5\n")
           && exists("step_00000007.h5"),
           "the next save moves latest on and keeps the one before (keep = 3)");
    free(e.msg);

    ckpt_files_paths(&p, work, 9);
    rc = ckpt_files_publish(&p, 3, err_open(&e));
    msg = err_text(&e);
    tap_ok(rc != 0 && strstr(msg, "trident: checkpoint: cannot rename ")
           && strstr(msg, "step_00000009.h5.tmp: No such file or directory")
           && !strcmp(file_text("latest"), "step_00000008.h5\n") && !exists("step_00000009.h5"),
           "a failed rename is reported and leaves latest alone");
    free(e.msg);

    ckpt_files_paths(&p, work, 10);
    put_file("step_00000010.h5.tmp", "ten");
    rc = ckpt_files_publish(&p, 1, err_open(&e));
    err_text(&e);
    ckpt_files_prune_wait(); /* the pruning runs on a thread of its own */
    tap_ok(rc == 0 && !strcmp(listing(work), "latest step_00000010.h5"),
           "publish prunes to keep = 1: %s", listing(work));
    free(e.msg);

    ckpt_files_paths(&p, work, 11);
    put_file("step_00000011.h5.tmp", "eleven");
    ckpt_files_discard(&p);
    tap_ok(!exists("step_00000011.h5.tmp") && !strcmp(file_text("latest"), "step_00000010.h5\n"),
           "discard removes a failed save's temporary file, and latest stays");
    clear_work();
}

static void test_point_latest(void)
{
    Err e;
    int rc = ckpt_files_point_latest(work, "step_00000100.h5", err_open(&e));
    err_text(&e);
    free(e.msg);
    rc |= ckpt_files_point_latest(work, "x.h5", err_open(&e));
    err_text(&e);
    tap_ok(rc == 0 && !strcmp(file_text("latest"), "x.h5\n"),
           "latest is replaced whole: a shorter name leaves nothing of the longer one");
    free(e.msg);

    char missing[1024];
    path_of(missing, sizeof missing, "missing");
    rc = ckpt_files_point_latest(missing, "x.h5", err_open(&e));
    const char *msg = err_text(&e);
    char want[1200];
    snprintf(want, sizeof want, "trident: checkpoint: cannot update %s/latest: "
             "No such file or directory\n", missing);
    tap_ok(rc != 0 && !strcmp(msg, want), "latest in a missing directory fails, naming it");
    free(e.msg);
    clear_work();
}

static void test_prune(void)
{
    static const char *const names[] = {
        "step_00000001.h5", "step_00000002.h5", "step_00000003.h5", "step_99999999.h5",
        "step_100000000.h5",        /* 9 digits: newer than any of 8 */
        "step_00000006.h5.tmp",     /* a killed save's: ckpt_files_clean_stale's business */
        "latest", "notes.txt", "step_00000002.h5.bak", "other.h5.tmp", "step_1.h5",
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        put_file(names[i], names[i]);
    ckpt_files_prune(work, 2, NULL);
    tap_ok(!strcmp(listing(work), "latest notes.txt other.h5.tmp step_00000002.h5.bak "
                                  "step_00000006.h5.tmp step_1.h5 step_100000000.h5 "
                                  "step_99999999.h5"),
           "prune keeps the newest 2 (a 9-digit step is the newest) and touches nothing "
           "else: %s", listing(work));
    tap_ok(!strcmp(file_text("step_100000000.h5"), "step_100000000.h5")
           && !strcmp(file_text("latest"), "latest"),
           "the kept files are untouched");

    ckpt_files_prune(work, 5, NULL);
    tap_ok(!strcmp(listing(work), "latest notes.txt other.h5.tmp step_00000002.h5.bak "
                                  "step_00000006.h5.tmp step_1.h5 step_100000000.h5 "
                                  "step_99999999.h5"),
           "keep larger than the number of checkpoints deletes none");

    put_file("step_00000050.h5", "a run resumed from step 40 saved step 50");
    ckpt_files_prune(work, 2, "step_00000050.h5");
    tap_ok(!strcmp(listing(work), "latest notes.txt other.h5.tmp step_00000002.h5.bak "
                                  "step_00000006.h5.tmp step_00000050.h5 step_1.h5 "
                                  "step_100000000.h5"),
           "the checkpoint just published is kept, below newer steps: %s", listing(work));

    char missing[1024];
    path_of(missing, sizeof missing, "missing");
    ckpt_files_prune(missing, 1, NULL);
    tap_ok(!exists("missing"), "prune of a missing directory does nothing");
    clear_work();
}

static void test_clean_stale(void)
{
    static const char *const names[] = {
        "step_00000006.h5.tmp", "step_00000007.h5.tmp.77.nodeA", "latest.tmp",
        "latest.tmp.77.nodeA", "step_00000005.h5", "latest", "notes.tmp", "other.h5.tmp",
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        put_file(names[i], names[i]);
    ckpt_files_clean_stale(work);
    tap_ok(!strcmp(listing(work), "latest notes.tmp other.h5.tmp step_00000005.h5"),
           "clean_stale deletes the temporary files of saves and of latest, tagged or not, "
           "and nothing else: %s", listing(work));
    clear_work();
}

static void test_list(void)
{
    put_file("step_00000003.h5", "");
    put_file("step_100000000.h5", "");
    put_file("step_00000020.h5", "");
    put_file("step_00000009.h5.tmp", "");
    int64_t *steps;
    int n = ckpt_files_list(work, &steps);
    tap_ok(n == 3 && steps[0] == 100000000 && steps[1] == 20 && steps[2] == 3,
           "list: the checkpoints, newest first (%d)", n);
    free(steps);
    char missing[1024];
    path_of(missing, sizeof missing, "missing");
    n = ckpt_files_list(missing, &steps);
    tap_ok(n == 0 && !steps, "list of a missing directory: none");
    clear_work();
}

/* Holds dir's lock in a child process until told (a byte on *release). */
static pid_t lock_in_child(const char *dir, int *release)
{
    int ready[2], go[2];
    if (pipe(ready) || pipe(go))
        exit(1);
    pid_t pid = fork();
    if (pid == 0) {
        CkptLock l;
        FILE *null = fopen("/dev/null", "w");
        char c = ckpt_files_lock(dir, &l, null, null) == 0 && l.fd >= 0 ? 'y' : 'n';
        if (write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) < 0)
            _exit(1);
        _exit(0);
    }
    char c = 'n';
    if (read(ready[0], &c, 1) != 1 || c != 'y')
        tap_diag("the child could not lock %s", dir);
    close(ready[0]);
    close(ready[1]);
    close(go[0]);
    *release = go[1];
    return pid;
}

static void test_lock(void)
{
    Err e, w;
    CkptLock mine;
    int rc = ckpt_files_lock(work, &mine, err_open(&e), err_open(&w));
    const char *msg = err_text(&e), *warn = err_text(&w);
    char lock_text[256];
    snprintf(lock_text, sizeof lock_text, "%s", file_text(".trident.lock"));
    char want[64];
    snprintf(want, sizeof want, "pid %ld host ", (long)getpid());
    tap_ok(rc == 0 && mine.fd >= 0 && !*msg && !*warn && !strncmp(lock_text, want, strlen(want)),
           "a free directory is locked, and the lock file says who holds it (%.*s)",
           (int)strcspn(lock_text, "\n"), lock_text);
    free(e.msg);
    free(w.msg);
    ckpt_files_unlock(&mine);
    tap_ok(mine.fd == -1 && exists(".trident.lock"), "unlock lets go and leaves the file");

    int release;
    pid_t child = lock_in_child(work, &release);
    rc = ckpt_files_lock(work, &mine, err_open(&e), err_open(&w));
    msg = err_text(&e);
    err_text(&w);
    char holder[96];
    snprintf(holder, sizeof holder, "is in use by another run (pid %ld host ", (long)child);
    tap_ok(rc != 0 && mine.fd == -1 && strstr(msg, work) && strstr(msg, holder)
           && strstr(msg, "choose another dir"),
           "a directory another process holds is refused, naming it and the holder");
    free(e.msg);
    free(w.msg);
    if (write(release, "x", 1) != 1)
        tap_diag("cannot release the child");
    close(release);
    waitpid(child, NULL, 0);
    rc = ckpt_files_lock(work, &mine, err_open(&e), err_open(&w));
    err_text(&e);
    err_text(&w);
    tap_ok(rc == 0 && mine.fd >= 0, "once the holder has ended, the lock is free again "
           "(the kernel released it)");
    free(e.msg);
    free(w.msg);
    ckpt_files_unlock(&mine);

    char under_file[1024];
    put_file("plain", "x");
    path_of(under_file, sizeof under_file, "plain");
    rc = ckpt_files_lock(under_file, &mine, err_open(&e), err_open(&w));
    msg = err_text(&e);
    err_text(&w);
    tap_ok(rc != 0 && strstr(msg, "cannot create its lock file") && strstr(msg, "Not a directory"),
           "a lock file that cannot be made fails, naming it");
    free(e.msg);
    free(w.msg);
    clear_work();
}

/* Resolves resume in dir; path gets candidate 0 ("" for none), list the
 * candidates separated by spaces (names only). */
static int resolve(const char *dir, const char *resume, char *path, size_t size, Err *e,
                   CkptResume *r)
{
    CheckpointConfig c;
    memset(&c, 0, sizeof c);
    snprintf(c.dir, sizeof c.dir, "%s", dir);
    snprintf(c.resume, sizeof c.resume, "%s", resume);
    int rc = ckpt_files_resolve(&c, r, err_open(e));
    path[0] = '\0';
    if (!rc && r->n > 0)
        ckpt_files_candidate(r, 0, path, size);
    return rc;
}

static const char *candidates(const CkptResume *r)
{
    static char out[1024];
    out[0] = '\0';
    for (int i = 0; i < r->n; i++) {
        char p[2048];
        ckpt_files_candidate(r, i, p, sizeof p);
        const char *slash = strrchr(p, '/');
        strncat(out, slash ? slash + 1 : p, sizeof out - strlen(out) - 2);
        if (i + 1 < r->n)
            strcat(out, " ");
    }
    return out;
}

static void test_resolve(void)
{
    char path[2048], want[2048], ckpt[1024], other[1024];
    CkptResume r;
    Err e;

    int rc = resolve(work, "none", path, sizeof path, &e, &r);
    const char *msg = err_text(&e);
    tap_ok(rc == 0 && r.n == 0 && !*msg, "resume = none in an empty dir: a fresh start");
    free(e.msg);
    ckpt_files_resume_free(&r);

    rc = resolve(work, "auto", path, sizeof path, &e, &r);
    msg = err_text(&e);
    tap_ok(rc == 0 && r.n == 0 && !*msg, "resume = auto without latest or checkpoints: a fresh run");
    free(e.msg);
    ckpt_files_resume_free(&r);

    rc = resolve("", "auto", path, sizeof path, &e, &r);
    msg = err_text(&e);
    tap_ok(rc == 0 && r.n == 0 && !*msg, "resume = auto without a dir: no path");
    free(e.msg);
    ckpt_files_resume_free(&r);

    put_file("step_00000005.h5", "five");
    path_of(ckpt, sizeof ckpt, "step_00000005.h5");
    rc = resolve(work, "none", path, sizeof path, &e, &r);
    msg = err_text(&e);
    char line[4200];
    snprintf(line, sizeof line, "trident: [checkpoint] resume = none, but [checkpoint] dir = %s "
             "holds 1 completed checkpoint of a run (the newest: %s): set resume = auto to "
             "continue it, or choose another dir; trident does not overwrite them\n", work, ckpt);
    tap_ok(rc != 0 && !strcmp(msg, line),
           "resume = none in a dir holding a checkpoint is refused, naming it and resume = auto");
    free(e.msg);
    ckpt_files_resume_free(&r);

    rc = resolve(work, ckpt, path, sizeof path, &e, &r);
    msg = err_text(&e);
    tap_ok(rc == 0 && !strcmp(path, ckpt) && !*msg,
           "resume = a checkpoint of dir itself: that path");
    free(e.msg);
    ckpt_files_resume_free(&r);

    mkdir(strcat(strcpy(other, work), "/elsewhere"), 0777);
    put_file("elsewhere/step_00000009.h5", "nine");
    path_of(want, sizeof want, "elsewhere/step_00000009.h5");
    rc = resolve(work, want, path, sizeof path, &e, &r);
    msg = err_text(&e);
    tap_ok(rc != 0 && strstr(msg, "holds 1 completed checkpoint of another run (the newest: ")
           && strstr(msg, "step_00000005.h5): choose another dir, or set resume = auto"),
           "resume = a file of another directory into a dir holding checkpoints is refused");
    free(e.msg);
    ckpt_files_resume_free(&r);

    rc = resolve(other, want, path, sizeof path, &e, &r);
    msg = err_text(&e);
    tap_ok(rc == 0 && !strcmp(path, want) && !*msg, "resume = a readable path: that path");
    free(e.msg);
    ckpt_files_resume_free(&r);

    path_of(want, sizeof want, "step_00000099.h5");
    rc = resolve(work, want, path, sizeof path, &e, &r);
    msg = err_text(&e);
    snprintf(line, sizeof line, "trident: [checkpoint] resume = %s: No such file or directory\n",
             want);
    tap_ok(rc != 0 && !strcmp(msg, line), "resume = a missing path fails, naming it");
    free(e.msg);
    ckpt_files_resume_free(&r);

    put_file("latest", "step_00000005.h5\n");
    rc = resolve(work, "auto", path, sizeof path, &e, &r);
    msg = err_text(&e);
    tap_ok(rc == 0 && r.n == 1 && !r.scanned && !strcmp(path, ckpt) && !*msg,
           "resume = auto: the file latest names");
    free(e.msg);
    ckpt_files_resume_free(&r);

    put_file("latest", "  step_00000005.h5 and more");
    rc = resolve(work, "auto", path, sizeof path, &e, &r);
    msg = err_text(&e);
    tap_ok(rc == 0 && !strcmp(path, ckpt) && !*msg,
           "latest: blanks around the name, no newline and words after it are ignored");
    free(e.msg);
    ckpt_files_resume_free(&r);

    char latest[1100];
    path_of(latest, sizeof latest, "latest");
    put_file("step_00000003.h5", "three");
    put_file("step_100000000.h5", "big");
    put_file("latest", "");
    rc = resolve(work, "auto", path, sizeof path, &e, &r);
    msg = err_text(&e);
    snprintf(line, sizeof line, "%s: does not name a checkpoint file", latest);
    tap_ok(rc == 0 && r.scanned && !*msg && !strcmp(r.why, line)
           && !strcmp(candidates(&r), "step_100000000.h5 step_00000005.h5 step_00000003.h5"),
           "an empty latest beside checkpoints: they are the candidates, newest first (%s)",
           candidates(&r));
    free(e.msg);
    ckpt_files_resume_free(&r);

    put_file("latest", "step_00000042.h5\n");
    rc = resolve(work, "auto", path, sizeof path, &e, &r);
    msg = err_text(&e);
    path_of(want, sizeof want, "step_00000042.h5");
    snprintf(line, sizeof line, "%s names %s, which cannot be read: No such file or directory",
             latest, want);
    tap_ok(rc == 0 && r.scanned && r.n == 3 && !strcmp(r.why, line) && !*msg,
           "a latest naming a missing file beside checkpoints: they are the candidates");
    free(e.msg);
    ckpt_files_resume_free(&r);

    unlink(latest);
    rc = resolve(work, "auto", path, sizeof path, &e, &r);
    msg = err_text(&e);
    snprintf(line, sizeof line, "%s: No such file or directory", latest);
    tap_ok(rc == 0 && r.scanned && r.n == 3 && !strcmp(r.why, line) && !*msg
           && strstr(path, "step_100000000.h5"),
           "no latest beside checkpoints: they are the candidates, newest first");
    free(e.msg);
    ckpt_files_resume_free(&r);

    put_file("latest", "../elsewhere/step_00000009.h5\n");
    rc = resolve(work, "auto", path, sizeof path, &e, &r);
    msg = err_text(&e);
    snprintf(line, sizeof line, "trident: %s: does not name a checkpoint file in %s", latest, work);
    tap_ok(rc != 0 && !strncmp(msg, line, strlen(line)),
           "a latest naming a path, not a file in dir, is refused");
    free(e.msg);
    ckpt_files_resume_free(&r);

    unlink(latest);
    if (symlink("elsewhere/latest", latest) != 0)
        tap_diag("symlink: %s", strerror(errno));
    rc = resolve(work, "auto", path, sizeof path, &e, &r);
    msg = err_text(&e);
    snprintf(line, sizeof line, "trident: %s is a symbolic link (to elsewhere/latest)", latest);
    tap_ok(rc != 0 && !strncmp(msg, line, strlen(line)),
           "a latest that is a symbolic link (to another run's latest) is refused");
    free(e.msg);
    ckpt_files_resume_free(&r);

    unlink(latest);
    if (symlink("latest", latest) != 0)
        tap_diag("symlink: %s", strerror(errno));
    rc = resolve(work, "auto", path, sizeof path, &e, &r);
    msg = err_text(&e);
    tap_ok(rc != 0 && strstr(msg, "is a symbolic link (to latest)"),
           "a latest that is a symbolic link loop is refused");
    free(e.msg);
    ckpt_files_resume_free(&r);

    unlink(latest);
    mkdir(latest, 0777);
    rc = resolve(work, "auto", path, sizeof path, &e, &r);
    msg = err_text(&e);
    tap_ok(rc != 0 && strstr(msg, "latest: a directory, not a regular file"),
           "a latest that is a directory is refused, saying so");
    free(e.msg);
    ckpt_files_resume_free(&r);
    rmdir(latest);
    clear_work();

    put_file("latest", "step_00000042.h5\n");
    rc = resolve(work, "auto", path, sizeof path, &e, &r);
    msg = err_text(&e);
    path_of(want, sizeof want, "step_00000042.h5");
    snprintf(line, sizeof line, "trident: %s names %s, which cannot be read: "
             "No such file or directory, and %s holds no checkpoint to resume instead", latest,
             want, work);
    tap_ok(rc != 0 && !strncmp(msg, line, strlen(line)),
           "a latest naming a missing file, and no checkpoint: refused, naming both");
    free(e.msg);
    ckpt_files_resume_free(&r);
    clear_work();
}

int main(int argc, char **argv)
{
    tap_init(&argc, &argv);
    tap_plan(50);
    const char *tmp = getenv("TMPDIR");
    snprintf(work, sizeof work, "%s/t_ckpt_files_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(work)) {
        perror(work);
        return 1;
    }
    test_paths();
    test_parse_name();
    test_prepare_dir();
    clear_work();
    test_check_space();
    test_publish();
    test_point_latest();
    test_prune();
    test_clean_stale();
    test_list();
    test_lock();
    test_resolve();
    nftw(work, remove_one, 16, FTW_DEPTH | FTW_PHYS);
    return tap_done();
}
