/*
 * t_ckpt_files.c - ckpt_files.c on its own, in a scratch directory: a
 * save's names, publishing (rename, `latest`), pruning to `keep` without
 * touching other files, and finding the checkpoint to resume from,
 * including a missing or damaged `latest`. No HDF5: the "checkpoints" are
 * small text files. Pins today's behaviour, quirks included.
 */
#ifndef _XOPEN_SOURCE
#define _XOPEN_SOURCE 700       /* mkdtemp, open_memstream, nftw */
#endif
#include "src/ckpt_files.h"

#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
        "step_00000001.h5", "step_00000002.h5", "step_00000003.h5", "step_00000004.h5",
        "step_00000005.h5",
        "step_00000006.h5.tmp",     /* a killed save's */
        "latest", "notes.txt", "step_00000002.h5.bak", "other.h5.tmp", "step_1.h5",
        "step_123456789.h5",        /* 9 digits: not taken for a checkpoint */
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        put_file(names[i], names[i]);
    ckpt_files_prune(work, 2);
    tap_ok(!strcmp(listing(work), "latest notes.txt other.h5.tmp step_00000002.h5.bak "
                                  "step_00000004.h5 step_00000005.h5 step_1.h5 "
                                  "step_123456789.h5"),
           "prune keeps the newest 2, deletes the stale step_*.h5.tmp and touches nothing "
           "else: %s", listing(work));
    tap_ok(!strcmp(file_text("step_00000005.h5"), "step_00000005.h5")
           && !strcmp(file_text("latest"), "latest"),
           "the kept files are untouched");

    ckpt_files_prune(work, 5);
    tap_ok(!strcmp(listing(work), "latest notes.txt other.h5.tmp step_00000002.h5.bak "
                                  "step_00000004.h5 step_00000005.h5 step_1.h5 "
                                  "step_123456789.h5"),
           "keep larger than the number of checkpoints deletes none");

    char missing[1024];
    path_of(missing, sizeof missing, "missing");
    ckpt_files_prune(missing, 1);
    tap_ok(!exists("missing"), "prune of a missing directory does nothing");
    clear_work();
}

static int resolve(const char *dir, const char *resume, char *path, size_t size, Err *e)
{
    CheckpointConfig c;
    memset(&c, 0, sizeof c);
    snprintf(c.dir, sizeof c.dir, "%s", dir);
    snprintf(c.resume, sizeof c.resume, "%s", resume);
    return ckpt_files_resolve(&c, path, size, err_open(e));
}

static void test_resolve(void)
{
    char path[2048], want[2048], ckpt[1024];
    Err e;
    put_file("step_00000005.h5", "five");
    path_of(ckpt, sizeof ckpt, "step_00000005.h5");

    int rc = resolve(work, "none", path, sizeof path, &e);
    const char *msg = err_text(&e);
    tap_ok(rc == 0 && !path[0] && !*msg, "resume = none: no path");
    free(e.msg);

    rc = resolve(work, ckpt, path, sizeof path, &e);
    msg = err_text(&e);
    tap_ok(rc == 0 && !strcmp(path, ckpt) && !*msg, "resume = a readable path: that path");
    free(e.msg);

    path_of(want, sizeof want, "step_00000099.h5");
    rc = resolve(work, want, path, sizeof path, &e);
    msg = err_text(&e);
    char line[4200];
    snprintf(line, sizeof line, "trident: [checkpoint] resume = %s: No such file or directory\n",
             want);
    tap_ok(rc != 0 && !strcmp(msg, line), "resume = a missing path fails, naming it");
    free(e.msg);

    rc = resolve("", "auto", path, sizeof path, &e);
    msg = err_text(&e);
    tap_ok(rc == 0 && !path[0] && !*msg, "resume = auto without a dir: no path");
    free(e.msg);

    rc = resolve(work, "auto", path, sizeof path, &e);
    msg = err_text(&e);
    tap_ok(rc == 0 && !path[0] && !*msg, "resume = auto without latest: a fresh run");
    free(e.msg);

    put_file("latest", "step_00000005.h5\n");
    rc = resolve(work, "auto", path, sizeof path, &e);
    msg = err_text(&e);
    tap_ok(rc == 0 && !strcmp(path, ckpt) && !*msg, "resume = auto: the file latest names");
    free(e.msg);

    put_file("latest", "  step_00000005.h5 and more");
    rc = resolve(work, "auto", path, sizeof path, &e);
    msg = err_text(&e);
    tap_ok(rc == 0 && !strcmp(path, ckpt) && !*msg,
           "latest: blanks around the name, no newline and words after it are ignored");
    free(e.msg);

    char latest[1100];
    path_of(latest, sizeof latest, "latest");
    snprintf(line, sizeof line, "trident: %s: does not name a checkpoint file\n", latest);
    put_file("latest", "");
    rc = resolve(work, "auto", path, sizeof path, &e);
    msg = err_text(&e);
    tap_ok(rc != 0 && !strcmp(msg, line), "an empty latest fails");
    free(e.msg);

    put_file("latest", "../elsewhere/step_00000005.h5\n");
    rc = resolve(work, "auto", path, sizeof path, &e);
    msg = err_text(&e);
    tap_ok(rc != 0 && !strcmp(msg, line), "a latest naming a path, not a file in dir, fails");
    free(e.msg);

    put_file("latest", "step_00000042.h5\n");
    rc = resolve(work, "auto", path, sizeof path, &e);
    msg = err_text(&e);
    path_of(want, sizeof want, "step_00000042.h5");
    snprintf(line, sizeof line, "trident: %s names %s, which cannot be read: "
             "No such file or directory\n", latest, want);
    tap_ok(rc != 0 && !strcmp(msg, line), "a latest naming a missing file fails, naming both");
    free(e.msg);
    clear_work();
}

int main(int argc, char **argv)
{
    tap_init(&argc, &argv);
    tap_plan(29);
    const char *tmp = getenv("TMPDIR");
    snprintf(work, sizeof work, "%s/t_ckpt_files_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(work)) {
        perror(work);
        return 1;
    }
    test_paths();
    test_prepare_dir();
    clear_work();
    test_check_space();
    test_publish();
    test_point_latest();
    test_prune();
    test_resolve();
    nftw(work, remove_one, 16, FTW_DEPTH | FTW_PHYS);
    return tap_done();
}
