/*
 * ckpt_resume.c - claiming the checkpoint directory and choosing what a
 * run starts from; see ckpt_resume.h.
 *
 * The files are looked at by rank 0 alone (a shared file system may show
 * ranks different states mid-rename); what it decides travels by
 * broadcast, and every load is collective and agreed (ckpt_load), so a
 * checkpoint that fails to verify moves every rank on to the next one.
 */
#include "ckpt_resume.h"

#include <stdio.h>
#include <string.h>

#include "comm.h"
#include "fail.h"

int ckpt_resume_claim(const Grid *g, const Config *cfg, CkptLock *lock)
{
    const char *dir = cfg->checkpoint.dir;
    lock->fd = -1;
    if (!dir[0])
        return 0;
    char tag[64] = "", msg[1024] = "";
    int rc = 0;
    if (g->layout.rank == 0) {
        FILE *err = fmemopen(msg, sizeof msg, "w");
        rc = ckpt_files_prepare_dir(dir, err) || ckpt_files_lock(dir, lock, err, stdout);
        fclose(err);
        /* only a run that holds the lock knows no other is writing there */
        if (!rc && lock->fd >= 0)
            ckpt_files_clean_stale(dir);
        ckpt_files_make_tag(tag, sizeof tag);
    }
    TRI_TRY(fail_report(g->world, rc, msg));
    comm_bcast_bytes(g, COMM_WORLD, tag, sizeof tag, 0);
    ckpt_files_set_tag(tag);
    return 0;
}

/* ckpt_load's message without "trident: " and the newline. */
static const char *reason_of(char *msg)
{
    msg[strcspn(msg, "\n")] = '\0';
    return strncmp(msg, "trident: ", 9) == 0 ? msg + 9 : msg;
}

/* Tries the candidates of r (rank 0's; n and scanned on every rank) in
 * turn; returns 0 with path set at the first that loads and verifies. */
static int load_first_good(Model *m, Zero *z, const Config *cfg, TrainState *st,
                           const CkptResume *r, int n, int scanned, char *path, size_t size)
{
    const Grid *g = m->grid;
    int root = g->layout.rank == 0;
    char cand[CONFIG_PATH_MAX + 80], newest_why[1024] = "";
    for (int i = 0; i < n; i++) {
        if (root)
            ckpt_files_candidate(r, i, cand, sizeof cand);
        comm_bcast_bytes(g, COMM_WORLD, cand, sizeof cand, 0);
        if (!scanned) {
            TRI_TRY(ckpt_load(m, z, cfg, cand, 1, st, fail_stream(root)));
            snprintf(path, size, "%s", cand);
            return 0;
        }
        char why[1024] = "";
        FILE *err = root ? fmemopen(why, sizeof why, "w") : fail_stream(0);
        int rc = ckpt_load(m, z, cfg, cand, 1, st, err);
        if (root)
            fclose(err);
        if (!rc) {
            if (root)
                printf("warning: %s; resuming from %s, the newest checkpoint in %s that "
                       "verifies\n", r->why, cand, cfg->checkpoint.dir);
            snprintf(path, size, "%s", cand);
            return 0;
        }
        if (root && i == 0)
            snprintf(newest_why, sizeof newest_why, "%s", reason_of(why));
        if (root && i + 1 < n)
            printf("warning: %s does not verify (%s); trying the checkpoint before it\n", cand,
                   reason_of(why));
    }
    char msg[sizeof r->why + 2 * CONFIG_PATH_MAX + 1400] = "";
    if (root)
        snprintf(msg, sizeof msg, "trident: %s, and none of the %d checkpoint%s in %s "
                 "verifies (the newest: %s): nothing to resume; choose another [checkpoint] "
                 "dir, or name a file with resume\n", r->why, n, n > 1 ? "s" : "",
                 cfg->checkpoint.dir, newest_why);
    return fail_report(g->world, 1, msg);
}

int ckpt_resume_load(Model *m, Zero *z, const Config *cfg, TrainState *st, char *path,
                     size_t size)
{
    const Grid *g = m->grid;
    int root = g->layout.rank == 0;
    CkptResume r = {0};
    char msg[2048] = "";
    int rc = 0, head[2] = {0, 0}; /* candidates, scanned */
    path[0] = '\0';
    if (root) {
        FILE *err = fmemopen(msg, sizeof msg, "w");
        rc = ckpt_files_resolve(&cfg->checkpoint, &r, err);
        fclose(err);
        head[0] = r.n;
        head[1] = r.scanned;
    }
    rc = fail_report(g->world, rc, msg);
    comm_bcast_bytes(g, COMM_WORLD, head, sizeof head, 0);
    if (!rc && head[0] > 0)
        rc = load_first_good(m, z, cfg, st, &r, head[0], head[1], path, size);
    ckpt_files_resume_free(&r);
    return rc;
}
