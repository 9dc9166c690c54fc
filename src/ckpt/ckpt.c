/*
 * ckpt.c - saving and loading a run's state through parallel HDF5; see
 * ckpt.h for the file layout, ckpt_format.h for its root attributes and
 * checksums, and ckpt_files.h for the files' names and life.
 *
 * Every rank takes part in every collective HDF5 call in the same order:
 * all ranks walk the same list of logical tensors (built from the config,
 * not from what this rank holds) and create or open every dataset, and
 * each rank then writes or reads only its own hyperslab, or an empty
 * selection. Which rank writes what is the sharding rule: the TP block's
 * ZeRO rows, on TP rank 0 for replicated tensors, never the last stage's
 * copy of a tied embedding; so every element is written exactly once.
 *
 * HDF5 failures here are input errors, not fatal ones: a full disk or a
 * corrupt file must leave the previous checkpoint and the run's state
 * alone, so each call's status is recorded (ckpt_fail) and the ranks agree
 * on it at the next collective point.
 */
#include "ckpt.h"

#include <errno.h>
#include <hdf5.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <unistd.h>

#include "alloc.h"
#include "arch.h"
#include "ckpt_files.h"
#include "ckpt_format.h"
#include "ckpt_io.h"
#include "comm.h"
#include "config_ini.h"
#include "config_load.h"
#include "fail.h"
#include "fault.h"
#include "grid.h"
#include "params.h"
#include "schedule.h"
#include "timer.h"
#include "watchdog.h"

typedef struct {
    CkptFile f;                      /* the file and this rank's first failure */
    hid_t independent, collective;   /* transfer property lists */
    const Grid *g;           /* its TP size decides strided or contiguous */
} H5Ctx;

/* Agrees on failure across the world; rank 0 (or the failing rank) prints. */
static int agree(H5Ctx *c, FILE *err)
{
    int all = fail_agree(c->g->world, c->f.rc);
    if (!all)
        return 0;
    int root_rc = c->f.rc;
    comm_bcast_bytes(c->g, COMM_WORLD, &root_rc, sizeof root_rc, 0);
    if (c->f.rc && (c->g->layout.rank == 0 || !root_rc))
        fputs(c->f.msg, err);
    return all;
}

/* ---- the logical tensor list ------------------------------------------ */

/* The rows of p this rank writes (and verifies): its ZeRO partition of its
 * TP block, unless another rank holds the same elements. */
static int64_t written_rows(const Param *p, int64_t *row0)
{
    *row0 = p ? p->zrow0 : 0;
    return p && p->writes_ckpt ? p->zrows : 0;
}

/* HDF5 is built without thread safety: one thread at a time. While a
 * background writer saves (ckpt_async.h), it is the only thread in here;
 * a second entry means a caller broke that rule, so it is fatal rather
 * than a silent corruption of HDF5's state. */
static atomic_int hdf5_users;

static void hdf5_enter(void)
{
    if (atomic_fetch_add(&hdf5_users, 1) != 0)
        fail_abort("two threads in the checkpoint code at once (HDF5 is not thread-safe)",
                   __FILE__, __LINE__);
}

static void hdf5_leave(void) { atomic_fetch_sub(&hdf5_users, 1); }

/* HDF5 wants a buffer even for an empty selection. */
static float empty_selection_buffer[1];

/* ---- transfers --------------------------------------------------------- */

/* Each rank's block is a run of whole rows, contiguous in the file, except
 * for row-parallel tensors under TP, whose blocks are column slices. The
 * contiguous ones go out as independent writes (no synchronisation, one
 * large request each); the strided ones collectively, so MPI-IO's
 * collective buffering turns the slices into large contiguous writes.
 * Measured on 8 ranks for a 172 MB checkpoint: 0.07 GB/s all collective,
 * 0.5 GB/s this way (`make bench`, its ckpt section). */
static hid_t transfer_for(const H5Ctx *c, const Param *logical, int tp)
{
    return logical->split == SPLIT_COLS && tp > 1 ? c->collective : c->independent;
}

static void transfers_open(H5Ctx *c)
{
    c->independent = H5Pcreate(H5P_DATASET_XFER);
    H5Pset_dxpl_mpio(c->independent, H5FD_MPIO_INDEPENDENT);
    c->collective = H5Pcreate(H5P_DATASET_XFER);
    H5Pset_dxpl_mpio(c->collective, H5FD_MPIO_COLLECTIVE);
}

static void transfers_close(H5Ctx *c)
{
    H5Pclose(c->independent);
    H5Pclose(c->collective);
}

/* ---- selections ------------------------------------------------------- */

/* Selects rows [r0, r0+nr) x cols [c0, c0+nc) of the dataset's space, or
 * nothing when nr == 0; returns the matching memory space. */
static hid_t select_block(hid_t fspace, const Param *p, int64_t r0, int64_t nr, int64_t c0,
                          int64_t nc)
{
    hsize_t n = (hsize_t)(nr * nc);
    hid_t mspace = H5Screate_simple(1, n ? &n : (hsize_t[]){1}, NULL);
    if (nr == 0) {
        H5Sselect_none(fspace);
        H5Sselect_none(mspace);
        return mspace;
    }
    hsize_t start[2] = {(hsize_t)r0, (hsize_t)c0}, count[2] = {(hsize_t)nr, (hsize_t)nc};
    H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL);
    return mspace;
}

/* ---- root attributes -------------------------------------------------- */

static void write_root_attrs(H5Ctx *c, const Config *cfg, const Grid *g, const TrainState *st)
{
    CkptRoot root;
    char layout[160], cp[24] = "";
    /* cp only where it is more than 1: the attribute of a run without
     * context parallelism is what it always was */
    if (g->layout.cp > 1)
        snprintf(cp, sizeof cp, " cp=%d", g->layout.cp);
    snprintf(layout, sizeof layout,
             "world=%d dp=%d pp=%d tp=%d%s zero=%d schedule=%s virtual_stages=%d", g->layout.size,
             g->layout.dp, g->layout.pp, g->layout.tp, cp, cfg->parallel.zero,
             schedule_name(cfg->parallel.schedule), cfg->parallel.virtual_stages);
    char *text = malloc(1 << 16);
    if (!text) {
        ckpt_fail(&c->f, "out of memory for the config text");
        return;
    }
    config_to_ini(cfg, text, 1 << 16);
    memset(&root, 0, sizeof root);
    root.st = *st;
    root.cfg = *cfg;
    root.layout = layout;
    root.config = text;
    ckpt_root_write(&c->f, &root);
    free(text);
}

/* ---- save ------------------------------------------------------------- */

typedef enum { PART_WEIGHTS, PART_M, PART_V } Part;

/* This rank's written rows of part, in host memory: the source's own
 * (a snapshot), or where they live on the CPU, else copied from the
 * device into `stage` (which holds the largest block). */
ops_tensor ckpt_written_rows(Zero *z, const Param *p, int part)
{
    int64_t r0, nr, w0;
    zero_update_rows(z, p, &r0, &nr);
    ops_tensor t = part == PART_WEIGHTS ? p->master : part == PART_M ? p->m : p->v;
    int64_t n = written_rows(p, &w0) * p->lcols;
    return ops_view(t, (w0 - r0) * p->lcols, n);
}

static const float *part_rows(const CkptSource *src, const Param *p, Part part, float *stage)
{
    if (src->rows)
        return src->rows(src, (int)(p - src->ps->p), (int)part);
    ops_tensor rows = ckpt_written_rows(src->zero, p, (int)part);
    if (rows.device == OPS_CPU)
        return rows.data;
    ops_copy((ops_tensor){stage, rows.n, OPS_F32, OPS_CPU}, rows);
    return stage;
}

/* A host buffer for part_rows when the live state lives on a device. */
static float *host_stage(const CkptSource *src)
{
    if (src->rows || src->grid->device == OPS_CPU)
        return NULL;
    int64_t most = 1;
    for (int i = 0; i < src->ps->n; i++)
        if (params_local_numel(&src->ps->p[i]) > most)
            most = params_local_numel(&src->ps->p[i]);
    return TRI_MALLOC((size_t)most * sizeof(float), "a checkpoint's staging buffer");
}

/* The checksums of every dataset, summed over the world in one call.
 * Collective on world. */
static uint64_t *save_checksums(const CkptSource *src, const ParamSet *all, float *stage)
{
    uint64_t *sums = TRI_CALLOC((size_t)(3 * all->n) + 1, sizeof *sums, "a checkpoint's checksums");
    for (int i = 0; i < all->n; i++) {
        Param *p = params_find(src->ps, all->p[i].name);
        int64_t r0, nr = p ? written_rows(p, &r0) : 0;
        for (int part = 0; part < 3 && nr > 0; part++)
            sums[3 * i + part] = ckpt_checksum(part_rows(src, p, (Part)part, stage), p->row0 + r0,
                                                nr, p->col0, p->lcols, p->cols);
    }
    comm_allreduce_scalars(src->grid, COMM_WORLD, sums, 3 * all->n, COMM_UINT64, COMM_SUM);
    return sums;
}

static void write_dataset(H5Ctx *c, hid_t group, const char *name, const Param *logical,
                          const Param *p, const float *rows)
{
    hsize_t dims[2] = {(hsize_t)logical->rows, (hsize_t)logical->cols};
    hid_t space = H5Screate_simple(logical->ndim, dims, NULL);
    hid_t d = H5Dcreate2(group, name, H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT,
                         H5P_DEFAULT);
    if (d < 0) {
        ckpt_fail(&c->f, "cannot create dataset %s", logical->name);
        H5Sclose(space);
        return;
    }
    int64_t r0 = 0, nr = p ? written_rows(p, &r0) : 0;
    hid_t mspace = select_block(space, logical, p ? p->row0 + r0 : 0, nr, p ? p->col0 : 0,
                                p ? p->lcols : 0);
    errno = 0;
    if (H5Dwrite(d, H5T_NATIVE_FLOAT, mspace, space, transfer_for(c, logical, c->g->layout.tp),
                 nr ? rows : empty_selection_buffer) < 0) {
        int err = errno;
        haddr_t at = H5Dget_offset(d);
        int64_t reach = at == HADDR_UNDEF ? 0
                        : (int64_t)at + logical->rows * logical->cols * (int64_t)sizeof(float);
        ckpt_fail(&c->f, "cannot write dataset %s (%s)", logical->name,
                  ckpt_io_failure(err, reach));
    }
    H5Sclose(mspace);
    H5Sclose(space);
    H5Dclose(d);
    watchdog_progress(); /* a long save on a slow disk is not a stall */
}

static void write_tensors(H5Ctx *c, const CkptSource *src, const ParamSet *all, float *stage)
{
    hid_t model = H5Gcreate2(c->f.id, "model", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t optim = H5Gcreate2(c->f.id, "optim", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (model < 0 || optim < 0)
        ckpt_fail(&c->f, "cannot create groups");
    for (int i = 0; i < all->n && model >= 0 && optim >= 0; i++) {
        const Param *lp = &all->p[i];
        Param *p = params_find(src->ps, lp->name);
        write_dataset(c, model, lp->name, lp, p,
                      p ? part_rows(src, p, PART_WEIGHTS, stage) : NULL);
        hid_t g = H5Gcreate2(optim, lp->name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        if (g < 0) {
            ckpt_fail(&c->f, "cannot create group /optim/%s", lp->name);
            continue;
        }
        write_dataset(c, g, "m", lp, p, p ? part_rows(src, p, PART_M, stage) : NULL);
        write_dataset(c, g, "v", lp, p, p ? part_rows(src, p, PART_V, stage) : NULL);
        H5Gclose(g);
    }
    if (model >= 0)
        H5Gclose(model);
    if (optim >= 0)
        H5Gclose(optim);
}

/* Every dataset's checksum attribute, once the data is in the file: the
 * checksums are summed over the world first, as every rank must write
 * each attribute with the same value (HDF5's metadata is collective).
 * Hashing after the writes, not before the file exists as trident first
 * did, lets the disk write the data meanwhile (ckpt_files_flush_start).
 * Collective on world. */
static void write_checksums(H5Ctx *c, const CkptSource *src, const ParamSet *all, float *stage)
{
    uint64_t *sums = save_checksums(src, all, stage);
    char path[128];
    for (int i = 0; i < all->n; i++) {
        for (int part = 0; part < 3; part++) {
            ckpt_dataset_path(path, sizeof path, all->p[i].name, part);
            hid_t d = H5Dopen2(c->f.id, path, H5P_DEFAULT);
            if (d < 0) {
                ckpt_fail(&c->f, "cannot open dataset %s", path);
                continue;
            }
            ckpt_attr_write(&c->f, d, CKPT_CHECKSUM_ATTR, H5T_NATIVE_UINT64, &sums[3 * i + part]);
            H5Dclose(d);
        }
    }
    free(sums);
}

/* The file's size to expect: every logical tensor's weights and both
 * Adam moments in fp32, plus room for HDF5's headers and the attributes
 * (the config text among them), and the holes the alignment of large
 * datasets may leave (ckpt_io.c), which take no space but count in the
 * file's length. */
static int64_t expected_file_bytes(const ParamSet *all)
{
    int64_t b = 64 << 10;
    for (int i = 0; i < all->n; i++)
        b += 3 * (ckpt_io_span(all->p[i].rows * all->p[i].cols * (int64_t)sizeof(float)) + 512);
    return b;
}

/* Every rank writes into the file, and each has its own `ulimit -f`: a
 * limit below the file's length would stop the save at a write, and a
 * write that fails inside HDF5's collective close can leave the ranks out
 * of step (see close_with_deadline). So it is checked before the file
 * exists. */
static void check_file_limit(H5Ctx *c, int64_t length)
{
    int64_t limit;
    if (ckpt_io_over_file_limit(length, &limit))
        ckpt_fail(&c->f, "the file needs about %.1f MB, but this process may write files of "
                  "at most %.1f MB: file size limit exceeded (ulimit -f)", (double)length / 1e6,
                  (double)limit / 1e6);
}

/* HDF5's collective close flushes the metadata, and a write that fails
 * there (the disk filled up just then) can leave the ranks out of step: one
 * skips a barrier the others wait in, and the job would hang. So a close
 * gets a deadline, well above what writing a few MB of metadata takes;
 * past it this rank removes the temporary file (rank 0) and exits, and
 * mpiexec ends the others. Completed checkpoints are untouched: only the
 * temporary file was being written. */
static char close_tmp_path[sizeof ((CkptPaths *)0)->tmp];

static void close_deadline_passed(int sig)
{
    (void)sig;
    static const char msg[] = "trident: checkpoint: closing the file did not finish in time "
                              "(a full disk?); ending the job\n";
    ssize_t ignored = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)ignored;
    if (close_tmp_path[0])
        unlink(close_tmp_path);
    _exit(1);
}

static herr_t close_with_deadline(hid_t file, unsigned seconds, const char *tmp, int rank)
{
    snprintf(close_tmp_path, sizeof close_tmp_path, "%s", rank == 0 ? tmp : "");
    struct sigaction on_alarm = {.sa_handler = close_deadline_passed}, saved;
    sigemptyset(&on_alarm.sa_mask);
    sigaction(SIGALRM, &on_alarm, &saved);
    unsigned pending = alarm(seconds);
    herr_t rc = H5Fclose(file);
    alarm(pending);
    sigaction(SIGALRM, &saved, NULL);
    return rc;
}

static int64_t written_bytes(const CkptSource *src)
{
    int64_t b = 0;
    for (int i = 0; i < src->ps->n; i++) {
        int64_t r0;
        b += 3 * written_rows(&src->ps->p[i], &r0) * src->ps->p[i].lcols * (int64_t)sizeof(float);
    }
    comm_allreduce_scalars(src->grid, COMM_WORLD, &b, 1, COMM_INT64, COMM_SUM);
    return b;
}

int ckpt_save(Model *m, Zero *z, const Config *cfg, const TrainState *st,
              double *seconds, int64_t *bytes, FILE *err)
{
    CkptSource live = {.grid = m->grid, .ps = &m->ps, .zero = z, .cfg = cfg, .st = st};
    return ckpt_save_from(&live, seconds, bytes, err);
}

static int save_from(const CkptSource *src, double *seconds, int64_t *bytes, FILE *err)
{
    const Config *cfg = src->cfg;
    const TrainState *st = src->st;
    const Grid *grid = src->grid;
    const char *dir = cfg->checkpoint.dir;
    int rank = grid->layout.rank;
    double t0 = timer_now();
    CkptPaths names;
    ckpt_files_paths(&names, dir, st->step);
    const char *tmp = names.tmp;
    H5Ctx c = {.f = {.id = -1, .path = tmp}, .g = grid};
    ParamSet all;
    ckpt_logical_tensors(cfg, &all);
    if (rank == 0) /* the space the last save's pruning frees counts below */
        ckpt_files_prune_wait();
    int rc = rank == 0 ? ckpt_files_prepare_dir(dir, err)
                         || ckpt_files_check_space(dir, expected_file_bytes(&all), err) : 0;
    if (fail_agree(grid->world, rc)) {
        params_free(&all);
        return 1;
    }
    check_file_limit(&c, expected_file_bytes(&all));
    if (agree(&c, err)) {
        params_free(&all);
        return 1;
    }

    float *stage = host_stage(src);
    CkptFlush flush = {.started = 0};
    hid_t fapl = ckpt_io_fapl(grid->world);
    c.f.id = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    if (c.f.id < 0)
        ckpt_fail(&c.f, "cannot create the file: %s", strerror(errno));
    if (!agree(&c, err)) {
        transfers_open(&c);
        if (fault_at("save_fail", rank, (long)st->step))
            ckpt_fail(&c.f, "cannot write dataset /model/wte (injected fault: No space left on device)");
        write_root_attrs(&c, cfg, grid, st);
        write_tensors(&c, src, &all, stage);
        transfers_close(&c);
        /* test fault (fault.h): the tensors are in the file, which is not
         * yet complete, so a test can fill the disk in mid-save */
        if (fault_at("save_pause", rank, (long)st->step))
            raise(SIGSTOP);
        int failed = fail_agree(grid->world, c.f.rc);
        if (!failed && rank == 0)
            ckpt_files_flush_start(&flush, tmp);
        if (!failed)
            write_checksums(&c, src, &all, stage);
        /* a save that already failed closes only to let go of the file */
        unsigned deadline = fail_agree(grid->world, c.f.rc)
                                ? 10 : 30 + (unsigned)(2 * (timer_now() - t0));
        /* test hook (fault.h): a test that fills the disk mid-save checks
         * that the close ends, not how long its deadline is */
        if (fault_at("close_fast", rank, (long)st->step))
            deadline = 2;
        hsize_t size = 0;
        H5Fget_filesize(c.f.id, &size);
        errno = 0;
        if (close_with_deadline(c.f.id, deadline, tmp, rank) < 0)
            ckpt_fail(&c.f, "cannot close the file (%s)", ckpt_io_failure(errno, (int64_t)size));
    }
    rc = agree(&c, err);
    ckpt_files_flush_wait(&flush);
    if (!rc && rank == 0)
        rc = ckpt_files_publish(&names, cfg->checkpoint.keep, err);
    else if (rc && rank == 0)
        ckpt_files_discard(&names);
    rc = fail_agree(grid->world, rc);
    free(stage);
    params_free(&all);
    *bytes = rc ? 0 : written_bytes(src);
    *seconds = timer_now() - t0;
    return rc;
}

int ckpt_save_from(const CkptSource *src, double *seconds, int64_t *bytes, FILE *err)
{
    hdf5_enter();
    int rc = save_from(src, seconds, bytes, err);
    hdf5_leave();
    return rc;
}

/* ---- load ------------------------------------------------------------- */

/* The root attributes: present, in range, matching their checksum, and
 * the model's shape that of the config. */
static void check_model_attrs(H5Ctx *c, const Config *cfg, const CkptRoot *root)
{
    if (ckpt_root_verify(&c->f, root))
        return;
    char why[160];
    /* another architecture first: its keys' defaults differ too (gpt2 ties
     * its head by default, llama does not), and naming one of those would
     * hide what the user changed */
    if (root->cfg.model.arch != cfg->model.arch
        && arch_differs(&root->cfg.model, &cfg->model, why, sizeof why)) {
        ckpt_fail(&c->f, "%s", why);
        return;
    }
    for (int i = 0; i < ckpt_n_root_attrs; i++) {
        const CkptRootAttr *a = &ckpt_root_attrs[i];
        if (a->source != CKPT_FROM_SHAPE)
            continue;
        size_t at = a->offset - offsetof(CkptRoot, cfg);
        int got = *(const int *)((const char *)&root->cfg + at);
        int want = *(const int *)((const char *)cfg + at);
        if (got != want)
            ckpt_fail(&c->f, "[model] %s is %d in the checkpoint but %d in the config",
                      a->name, got, want);
    }
    if (arch_differs(&root->cfg.model, &cfg->model, why, sizeof why))
        ckpt_fail(&c->f, "%s", why);
}

/* Opens a dataset and checks it is fp32 with the logical shape. */
static hid_t open_checked(H5Ctx *c, const char *path, const Param *lp)
{
    char why[256];
    hid_t d = ckpt_dataset_open(c->f.id, path, lp, why, sizeof why);
    if (why[0])
        ckpt_fail(&c->f, "dataset %s %s", path, why);
    return d;
}

/* Reads rows [r0, r0+nr) of this rank's TP block of dataset d into out. */
static void read_rows(H5Ctx *c, hid_t d, const Param *logical, const Param *p, int64_t r0,
                      int64_t nr, float *out, const char *path)
{
    hid_t space = H5Dget_space(d);
    hid_t mspace = select_block(space, p, p ? p->row0 + r0 : 0, nr, p ? p->col0 : 0,
                                p ? p->lcols : 0);
    if (H5Dread(d, H5T_NATIVE_FLOAT, mspace, space, transfer_for(c, logical, c->g->layout.tp),
                nr ? out : empty_selection_buffer) < 0)
        ckpt_fail(&c->f, "cannot read dataset %s (truncated or corrupt file?)", path);
    H5Sclose(mspace);
    H5Sclose(space);
    watchdog_progress();
}

typedef struct {
    float *buf;              /* a whole TP block, fp32 */
    uint64_t *sums;          /* this rank's checksum share, per dataset */
} LoadScratch;

/* Reads one dataset (part) of local parameter p (NULL when this rank has
 * none) into its place, and adds this rank's checksum share. */
static void load_part(H5Ctx *c, Zero *z, hid_t d, const Param *logical, Param *p, int part,
                      const char *path, LoadScratch *s, uint64_t *sum)
{
    int64_t u0 = 0, un = 0, w0 = 0, wn = p ? written_rows(p, &w0) : 0;
    if (p)
        zero_update_rows(z, p, &u0, &un);
    /* weights: the whole block where full weights are kept, else the
     * update rows; moments: the update rows */
    int whole = part == 0 && p && p->w.data;
    int64_t r0 = whole ? 0 : u0, nr = p ? (whole ? p->lrows : un) : 0;
    read_rows(c, d, logical, p, r0, nr, s->buf, path);
    if (!p || nr == 0)
        return;
    *sum += ckpt_checksum(s->buf + (w0 - r0) * p->lcols, p->row0 + w0, wn, p->col0, p->lcols,
                           p->cols);
    ops_tensor src = {s->buf, nr * p->lcols, OPS_F32, OPS_CPU};
    if (part == 0) {
        if (whole)
            ops_cast(p->w, src);
        /* fp32 master rows alias w and are already in place */
        if (!whole || p->master.data != (char *)p->w.data + u0 * p->lcols * sizeof(float))
            ops_copy(p->master, ops_view(src, (u0 - r0) * p->lcols, un * p->lcols));
    } else {
        ops_copy(part == 1 ? p->m : p->v, src);
    }
}

static void read_tensors(H5Ctx *c, Model *m, Zero *z, const ParamSet *all, int parts,
                         uint64_t *sums)
{
    int64_t most = 1;
    for (int i = 0; i < m->ps.n; i++)
        if (params_local_numel(&m->ps.p[i]) > most)
            most = params_local_numel(&m->ps.p[i]);
    LoadScratch s = {.buf = TRI_MALLOC((size_t)most * sizeof(float), "a checkpoint's read buffer")};
    char path[128];
    for (int i = 0; i < all->n; i++) {
        Param *p = params_find(&m->ps, all->p[i].name);
        for (int part = 0; part < parts; part++) {
            ckpt_dataset_path(path, sizeof path, all->p[i].name, part);
            hid_t d = H5Dopen2(c->f.id, path, H5P_DEFAULT);
            load_part(c, z, d, &all->p[i], p, part, path, &s, &sums[3 * i + part]);
            H5Dclose(d);
        }
    }
    free(s.buf);
}

/* The stored checksums against the world's sum of what each rank read. */
static void verify_checksums(H5Ctx *c, const ParamSet *all, int parts, uint64_t *sums)
{
    comm_allreduce_scalars(c->g, COMM_WORLD, sums, 3 * all->n, COMM_UINT64, COMM_SUM);
    char path[128];
    for (int i = 0; i < all->n; i++) {
        for (int part = 0; part < parts; part++) {
            ckpt_dataset_path(path, sizeof path, all->p[i].name, part);
            hid_t d = H5Dopen2(c->f.id, path, H5P_DEFAULT);
            uint64_t want = 0;
            if (ckpt_attr_read(d, CKPT_CHECKSUM_ATTR, H5T_NATIVE_UINT64, &want))
                ckpt_fail(&c->f, "dataset %s has no checksum attribute", path);
            else if (want != sums[3 * i + part])
                ckpt_fail(&c->f, "dataset %s is corrupt: its contents do not match its checksum",
                        path);
            H5Dclose(d);
        }
    }
}

static void check_datasets(H5Ctx *c, const ParamSet *all, int parts)
{
    char path[128];
    for (int i = 0; i < all->n && !c->f.rc; i++) {
        for (int part = 0; part < parts; part++) {
            ckpt_dataset_path(path, sizeof path, all->p[i].name, part);
            hid_t d = open_checked(c, path, &all->p[i]);
            if (d >= 0)
                H5Dclose(d);
        }
    }
}

static int load(Model *m, Zero *z, const Config *cfg, const char *path,
                int with_optimizer, TrainState *st, FILE *err)
{
    H5Ctx c = {.f = {.id = -1, .path = path}, .g = m->grid};
    hid_t fapl = ckpt_io_fapl(m->grid->world);
    c.f.id = ckpt_open(&c.f, path, fapl);
    H5Pclose(fapl);
    if (agree(&c, err))
        return 1;
    ParamSet all;
    ckpt_logical_tensors(cfg, &all);
    int parts = with_optimizer ? 3 : 1;
    CkptRoot root;
    ckpt_root_read(c.f.id, &root);
    check_model_attrs(&c, cfg, &root);
    if (!c.f.rc)
        check_datasets(&c, &all, parts);
    if (!c.f.rc)
        *st = root.st;
    ckpt_root_free(&root);
    int rc = agree(&c, err);
    if (!rc) {
        uint64_t *sums = TRI_CALLOC((size_t)(3 * all.n) + 1, sizeof *sums, "the checksums");
        transfers_open(&c);
        read_tensors(&c, m, z, &all, parts, sums);
        verify_checksums(&c, &all, parts, sums);
        transfers_close(&c);
        free(sums);
        rc = agree(&c, err);
    }
    H5Fclose(c.f.id);
    params_free(&all);
    return rc;
}

int ckpt_load(Model *m, Zero *z, const Config *cfg, const char *path,
              int with_optimizer, TrainState *st, FILE *err)
{
    hdf5_enter();
    int rc = load(m, z, cfg, path, with_optimizer, st, err);
    hdf5_leave();
    return rc;
}

/* ---- the stored config (one rank) ------------------------------------ */

int ckpt_read_config(const char *path, Config *cfg, FILE *err)
{
    const char *name = ckpt_root_attr(CKPT_FROM_CONFIG)->name;
    CkptFile f = {.id = -1, .path = path};
    f.id = ckpt_open_serial(&f, path);
    char *text = f.id >= 0 ? ckpt_attr_read_string(f.id, name) : NULL;
    if (f.id >= 0 && !text)
        ckpt_fail(&f, "no %s attribute: not a trident checkpoint", name);
    if (f.id >= 0)
        H5Fclose(f.id);
    if (f.rc) {
        fputs(f.msg, err);
        return 1;
    }
    config_defaults(cfg);
    snprintf(cfg->source, sizeof cfg->source, "%s (stored config)", path);
    int rc = config_parse_text(cfg, text, cfg->source, err) || config_validate(cfg, err);
    free(text);
    return rc;
}
