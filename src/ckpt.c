/*
 * ckpt.c - parallel HDF5 checkpoints; see ckpt.h for the file layout.
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
 * alone, so each call's status is recorded and the ranks agree on it at
 * the next collective point.
 */
#include "ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "fail.h"
#include "fault.h"
#include "grid.h"
#include "metrics.h"
#include "params.h"
#include "rng.h"
#include "timer.h"

#define MSG_MAX 1024

/* HDF5 1.12 renamed a few calls; keep building against 1.10 (Debian 12)
 * and newer releases (cluster modules). */
#if H5_VERSION_GE(1, 12, 0)
#define tri_h5_is_hdf5(path, fapl) H5Fis_accessible(path, fapl)
typedef H5O_info2_t tri_h5_info_t;
#define tri_h5_visit(obj, fn, data) H5Ovisit3(obj, H5_INDEX_NAME, H5_ITER_INC, fn, data, H5O_INFO_BASIC)
#else
#define tri_h5_is_hdf5(path, fapl) ((void)(fapl), H5Fis_hdf5(path))
typedef H5O_info_t tri_h5_info_t;
#define tri_h5_visit(obj, fn, data) H5Ovisit2(obj, H5_INDEX_NAME, H5_ITER_INC, fn, data, H5O_INFO_BASIC)
#endif

typedef struct {
    hid_t file;
    hid_t independent, collective;   /* transfer property lists */
    int rc;                  /* first local failure */
    char msg[MSG_MAX];       /* its description */
    const char *path;
    int tp;                  /* TP size: decides strided or contiguous */
} H5Ctx;

static void h5_fail(H5Ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void h5_fail(H5Ctx *c, const char *fmt, ...)
{
    if (c->rc)
        return;
    c->rc = 1;
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(c->msg, sizeof c->msg, "trident: checkpoint %s: ", c->path);
    vsnprintf(c->msg + n, sizeof c->msg - (size_t)n, fmt, ap);
    va_end(ap);
    strncat(c->msg, "\n", sizeof c->msg - strlen(c->msg) - 1);
}

/* Agrees on failure across the world; rank 0 (or the failing rank) prints. */
static int agree(H5Ctx *c, FILE *err)
{
    int all = fail_agree(MPI_COMM_WORLD, c->rc);
    if (!all)
        return 0;
    int rank, root_rc = c->rc;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Bcast(&root_rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (c->rc && (rank == 0 || !root_rc))
        fputs(c->msg, err);
    return all;
}

/* ---- the logical tensor list ------------------------------------------ */

/* Every tensor of the model once, in its full logical shape: the table
 * of a one-stage, one-TP-rank layout. */
static void logical_tensors(const Config *cfg, ParamSet *out)
{
    Config one = *cfg;
    one.parallel.pp = one.parallel.tp = 1;
    Grid g;
    memset(&g, 0, sizeof g);
    g.pp = g.tp = g.dp = 1;
    params_build(out, &one, &g);
}

/* The rows of p this rank writes (and verifies): its ZeRO partition of its
 * TP block, unless another rank holds the same elements. */
static int64_t written_rows(const Param *p, int64_t *row0)
{
    *row0 = p ? p->zrow0 : 0;
    return p && p->writes_ckpt ? p->zrows : 0;
}

/* HDF5 wants a buffer even for an empty selection. */
static float empty_selection_buffer[1];

/* ---- checksums -------------------------------------------------------- */

static uint64_t element_hash(uint64_t index, float v)
{
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    return rng_mix64(((uint64_t)bits << 32) ^ (index * 0x9e3779b97f4a7c15ULL));
}

/* Sum of hashes of rows [r0, r0+nr) x cols [c0, c0+nc) of a tensor with
 * `cols` columns; data holds those elements row-major. */
static uint64_t block_checksum(const float *data, int64_t r0, int64_t nr, int64_t c0,
                               int64_t nc, int64_t cols)
{
    uint64_t sum = 0;
    #pragma omp parallel for reduction(+ : sum) schedule(static)
    for (int64_t r = 0; r < nr; r++)
        for (int64_t c = 0; c < nc; c++)
            sum += element_hash((uint64_t)((r0 + r) * cols + c0 + c), data[r * nc + c]);
    return sum;
}

/* ---- transfers --------------------------------------------------------- */

/* Each rank's block is a run of whole rows, contiguous in the file, except
 * for row-parallel tensors under TP, whose blocks are column slices. The
 * contiguous ones go out as independent writes (no synchronisation, one
 * large request each); the strided ones collectively, so MPI-IO's
 * collective buffering turns the slices into large contiguous writes.
 * Measured on 8 ranks for a 172 MB checkpoint: 0.07 GB/s all collective,
 * 0.5 GB/s this way (bench/ckpt_bench.sh). */
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

/* ---- attributes ------------------------------------------------------- */

static void attr_write(H5Ctx *c, hid_t obj, const char *name, hid_t type, const void *v)
{
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    if (a < 0 || H5Awrite(a, type, v) < 0)
        h5_fail(c, "cannot write attribute %s", name);
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(space);
}

static void attr_string(H5Ctx *c, hid_t obj, const char *name, const char *s)
{
    hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, strlen(s) + 1);
    attr_write(c, obj, name, type, s);
    H5Tclose(type);
}

/* Reads a one-element attribute. A damaged or foreign file may hold an
 * array under the same name: H5Aread would then write past v. */
static int attr_read(hid_t obj, const char *name, hid_t type, void *v)
{
    if (H5Aexists(obj, name) <= 0)
        return 1;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    if (a < 0)
        return 1;
    hid_t space = H5Aget_space(a);
    int rc = space < 0 || H5Sget_simple_extent_npoints(space) != 1 || H5Aread(a, type, v) < 0;
    if (space >= 0)
        H5Sclose(space);
    H5Aclose(a);
    return rc;
}

/* Reads a string attribute into a malloc'd buffer, or NULL. */
static char *attr_read_string(hid_t obj, const char *name)
{
    if (H5Aexists(obj, name) <= 0)
        return NULL;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    if (a < 0)
        return NULL;
    /* one fixed-length string, or the read would overrun the buffer */
    hid_t ftype = H5Aget_type(a), space = H5Aget_space(a);
    char *s = NULL;
    if (ftype >= 0 && space >= 0 && H5Tget_class(ftype) == H5T_STRING
        && H5Tis_variable_str(ftype) == 0 && H5Sget_simple_extent_npoints(space) == 1) {
        size_t size = H5Tget_size(ftype);
        s = calloc(size + 1, 1);
        hid_t mtype = H5Tcopy(H5T_C_S1);
        H5Tset_size(mtype, size + 1);
        if (!s || H5Aread(a, mtype, s) < 0) {
            free(s);
            s = NULL;
        }
        H5Tclose(mtype);
    }
    if (space >= 0)
        H5Sclose(space);
    if (ftype >= 0)
        H5Tclose(ftype);
    H5Aclose(a);
    return s;
}

static const char *const MODEL_ATTRS[] = {"n_layer", "n_embd", "n_head", "seq_len",
                                          "vocab_size", "tie_embeddings"};

static void model_shape(const Config *cfg, int32_t v[6])
{
    const ModelConfig *m = &cfg->model;
    int32_t s[6] = {m->n_layer, m->n_embd, m->n_head, m->seq_len, m->vocab_size,
                    m->tie_embeddings};
    memcpy(v, s, sizeof s);
}

static void write_root_attrs(H5Ctx *c, const Config *cfg, const Grid *g, const TrainState *st)
{
    hid_t root = c->file;
    int32_t version = CKPT_FORMAT_VERSION, shape[6];
    attr_write(c, root, "format_version", H5T_NATIVE_INT32, &version);
    attr_string(c, root, "program_version", "trident " PACKAGE_VERSION);
    attr_write(c, root, "step", H5T_NATIVE_INT64, &st->step);
    attr_write(c, root, "tokens_seen", H5T_NATIVE_INT64, &st->tokens);
    attr_write(c, root, "data_cursor", H5T_NATIVE_INT64, &st->cursor);
    attr_write(c, root, "optimizer_updates", H5T_NATIVE_INT64, &st->updates);
    attr_write(c, root, "loss_scale", H5T_NATIVE_DOUBLE, &st->loss_scale);
    attr_write(c, root, "loss_scale_good_steps", H5T_NATIVE_INT64, &st->scale_good_steps);
    attr_write(c, root, "loss_scale_overflows", H5T_NATIVE_INT32, &st->scale_overflows);
    attr_write(c, root, "best_val_loss", H5T_NATIVE_DOUBLE, &st->best_val);
    attr_write(c, root, "evals_without_improvement", H5T_NATIVE_INT32, &st->evals_bad);
    uint64_t seed = cfg->train.seed;
    attr_write(c, root, "rng_seed", H5T_NATIVE_UINT64, &seed);
    model_shape(cfg, shape);
    for (int i = 0; i < 6; i++)
        attr_write(c, root, MODEL_ATTRS[i], H5T_NATIVE_INT32, &shape[i]);
    char layout[160];
    snprintf(layout, sizeof layout, "world=%d dp=%d pp=%d tp=%d zero=%d schedule=%s", g->size,
             g->dp, g->pp, g->tp, cfg->parallel.zero,
             cfg->parallel.schedule == SCHED_GPIPE ? "gpipe" : "1f1b");
    attr_string(c, root, "layout", layout);
    char *text = malloc(1 << 16);
    if (text) {
        config_to_ini(cfg, text, 1 << 16);
        attr_string(c, root, "config", text);
        free(text);
    }
}

/* ---- files and directories ------------------------------------------- */

static hid_t parallel_fapl(void)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    MPI_Info info;
    MPI_Info_create(&info);
    /* Collective buffering gathers the strided row-parallel blocks into
     * large contiguous writes; 1 MiB alignment keeps datasets on stripe
     * boundaries of parallel file systems. */
    MPI_Info_set(info, "romio_cb_write", "enable");
    MPI_Info_set(info, "romio_cb_read", "enable");
    H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, info);
    H5Pset_alignment(fapl, 65536, 1 << 20);
    H5Pset_coll_metadata_write(fapl, 1);
    H5Pset_all_coll_metadata_ops(fapl, 1);
    MPI_Info_free(&info);
    return fapl;
}

static void fsync_path(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

static void join(char *out, size_t size, const char *dir, const char *name)
{
    snprintf(out, size, "%s/%s", dir, name);
}

/* Writes dir/latest atomically: latest.tmp, fsync, rename. */
static int point_latest(const char *dir, const char *name, FILE *err)
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

static int compare_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

/* Deletes all but the newest `keep` checkpoints, and temporary files a
 * killed save left behind. Rank 0 only. */
static void prune(const char *dir, int keep, const char *current_tmp)
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
        size_t len = strlen(e->d_name);
        if (len > 7 && strcmp(e->d_name + len - 7, ".h5.tmp") == 0
            && strncmp(e->d_name, "step_", 5) == 0 && strcmp(e->d_name, current_tmp) != 0) {
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

/* ---- save ------------------------------------------------------------- */

typedef enum { PART_WEIGHTS, PART_M, PART_V } Part;

/* This rank's written rows of part, in host memory: where they live on
 * the CPU, else copied from the device into `stage` (which holds the
 * largest block). */
static const float *part_rows(Zero *z, const Param *p, Part part, float *stage)
{
    int64_t r0, nr, w0;
    zero_update_rows(z, p, &r0, &nr);
    ops_tensor t = part == PART_WEIGHTS ? p->master : part == PART_M ? p->m : p->v;
    int64_t n = written_rows(p, &w0) * p->lcols;
    ops_tensor rows = ops_view(t, (w0 - r0) * p->lcols, n);
    if (rows.device == OPS_CPU)
        return rows.data;
    ops_copy((ops_tensor){stage, n, OPS_F32, OPS_CPU}, rows);
    return stage;
}

/* A host buffer for part_rows when the state lives on a device. */
static float *host_stage(Model *m)
{
    if (m->grid->device == OPS_CPU)
        return NULL;
    int64_t most = 1;
    for (int i = 0; i < m->ps.n; i++)
        if (params_local_numel(&m->ps.p[i]) > most)
            most = params_local_numel(&m->ps.p[i]);
    float *buf = malloc((size_t)most * sizeof(float));
    if (!buf)
        fail_abort("out of memory staging a checkpoint", __FILE__, __LINE__);
    return buf;
}

/* The checksums of every dataset, summed over the world in one call. */
static uint64_t *save_checksums(Model *m, Zero *z, const ParamSet *all, float *stage)
{
    uint64_t *sums = calloc((size_t)(3 * all->n) + 1, sizeof *sums);
    if (!sums)
        fail_abort("out of memory", __FILE__, __LINE__);
    for (int i = 0; i < all->n; i++) {
        Param *p = params_find(&m->ps, all->p[i].name);
        int64_t r0, nr = p ? written_rows(p, &r0) : 0;
        for (int part = 0; part < 3 && nr > 0; part++)
            sums[3 * i + part] = block_checksum(part_rows(z, p, (Part)part, stage), p->row0 + r0,
                                                nr, p->col0, p->lcols, p->cols);
    }
    TRI_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, sums, 3 * all->n, MPI_UINT64_T, MPI_SUM,
                                MPI_COMM_WORLD));
    return sums;
}

static void write_dataset(H5Ctx *c, hid_t group, const char *name, const Param *logical,
                          const Param *p, const float *rows, uint64_t checksum)
{
    hsize_t dims[2] = {(hsize_t)logical->rows, (hsize_t)logical->cols};
    hid_t space = H5Screate_simple(logical->ndim, dims, NULL);
    hid_t d = H5Dcreate2(group, name, H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT,
                         H5P_DEFAULT);
    if (d < 0) {
        h5_fail(c, "cannot create dataset %s", logical->name);
        H5Sclose(space);
        return;
    }
    attr_write(c, d, "checksum", H5T_NATIVE_UINT64, &checksum);
    int64_t r0 = 0, nr = p ? written_rows(p, &r0) : 0;
    hid_t mspace = select_block(space, logical, p ? p->row0 + r0 : 0, nr, p ? p->col0 : 0,
                                p ? p->lcols : 0);
    if (H5Dwrite(d, H5T_NATIVE_FLOAT, mspace, space, transfer_for(c, logical, c->tp),
                 nr ? rows : empty_selection_buffer) < 0)
        h5_fail(c, "cannot write dataset %s (disk full?)", logical->name);
    H5Sclose(mspace);
    H5Sclose(space);
    H5Dclose(d);
}

static void write_tensors(H5Ctx *c, Model *m, Zero *z, const ParamSet *all,
                          const uint64_t *sums, float *stage)
{
    hid_t model = H5Gcreate2(c->file, "model", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t optim = H5Gcreate2(c->file, "optim", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (model < 0 || optim < 0)
        h5_fail(c, "cannot create groups");
    for (int i = 0; i < all->n && model >= 0 && optim >= 0; i++) {
        const Param *lp = &all->p[i];
        Param *p = params_find(&m->ps, lp->name);
        write_dataset(c, model, lp->name, lp, p,
                      p ? part_rows(z, p, PART_WEIGHTS, stage) : NULL, sums[3 * i]);
        hid_t g = H5Gcreate2(optim, lp->name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        if (g < 0) {
            h5_fail(c, "cannot create group /optim/%s", lp->name);
            continue;
        }
        write_dataset(c, g, "m", lp, p, p ? part_rows(z, p, PART_M, stage) : NULL,
                      sums[3 * i + 1]);
        write_dataset(c, g, "v", lp, p, p ? part_rows(z, p, PART_V, stage) : NULL,
                      sums[3 * i + 2]);
        H5Gclose(g);
    }
    if (model >= 0)
        H5Gclose(model);
    if (optim >= 0)
        H5Gclose(optim);
}

/* Rank 0: the directory exists and stale temporaries are gone. */
static int prepare_dir(const char *dir, FILE *err)
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

/* The file's size to expect: every logical tensor's weights and both
 * Adam moments in fp32, plus room for HDF5's headers and the attributes
 * (the config text among them). The 1 MiB alignment of large datasets
 * leaves holes, which take no space. */
static int64_t expected_file_bytes(const ParamSet *all)
{
    int64_t b = 64 << 10;
    for (int i = 0; i < all->n; i++)
        b += 3 * (all->p[i].rows * all->p[i].cols * (int64_t)sizeof(float) + 512);
    return b;
}

/* Refuses a save that cannot fit before a byte is written. A write that
 * runs out of space part-way fails too (and is cleaned up), but HDF5 may
 * then leave the ranks out of step inside its collective close; this
 * check keeps the common case, a disk already too full, away from it. */
static int check_free_space(const char *dir, int64_t need, FILE *err)
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

/* HDF5's collective close flushes the metadata, and a write that fails
 * there (the disk filled up just then) can leave the ranks out of step: one
 * skips a barrier the others wait in, and the job would hang. So a close
 * gets a deadline, well above what writing a few MB of metadata takes;
 * past it this rank removes the temporary file (rank 0) and exits, and
 * mpiexec ends the others. Completed checkpoints are untouched: only the
 * temporary file was being written. */
static char close_tmp_path[CONFIG_PATH_MAX + 96];

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

static int64_t written_bytes(Model *m)
{
    int64_t b = 0;
    for (int i = 0; i < m->ps.n; i++) {
        int64_t r0;
        b += 3 * written_rows(&m->ps.p[i], &r0) * m->ps.p[i].lcols * (int64_t)sizeof(float);
    }
    int64_t all = 0;
    TRI_CHECK_MPI(MPI_Allreduce(&b, &all, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD));
    return all;
}

/* Rank 0 publishes the closed file: fsync, rename, latest, prune. */
static int publish(const char *dir, const char *tmp, const char *final, const char *name,
                   int keep, FILE *err)
{
    fsync_path(tmp);
    if (rename(tmp, final) != 0) {
        fprintf(err, "trident: checkpoint: cannot rename %s: %s\n", tmp, strerror(errno));
        unlink(tmp);
        return 1;
    }
    fsync_path(dir);
    if (point_latest(dir, name, err))
        return 1;
    prune(dir, keep, "");
    return 0;
}

int ckpt_save(Model *m, Zero *z, const Config *cfg, const TrainState *st,
              double *seconds, int64_t *bytes, FILE *err)
{
    const char *dir = cfg->checkpoint.dir;
    int rank = m->grid->rank;
    double t0 = timer_now();
    char name[64], final[CONFIG_PATH_MAX + 80], tmp[CONFIG_PATH_MAX + 96];
    snprintf(name, sizeof name, "step_%08lld.h5", (long long)st->step);
    join(final, sizeof final, dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", final);
    H5Ctx c = {.file = -1, .path = tmp, .tp = m->grid->tp};
    ParamSet all;
    logical_tensors(cfg, &all);
    int rc = rank == 0 ? prepare_dir(dir, err)
                             || check_free_space(dir, expected_file_bytes(&all), err) : 0;
    if (fail_agree(MPI_COMM_WORLD, rc)) {
        params_free(&all);
        return 1;
    }

    float *stage = host_stage(m);
    uint64_t *sums = save_checksums(m, z, &all, stage);
    hid_t fapl = parallel_fapl();
    c.file = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    if (c.file < 0)
        h5_fail(&c, "cannot create the file: %s", strerror(errno));
    if (!agree(&c, err)) {
        transfers_open(&c);
        if (fault_at("save_fail", rank, (long)st->step))
            h5_fail(&c, "cannot write dataset /model/wte (injected fault: No space left on device)");
        write_root_attrs(&c, cfg, m->grid, st);
        write_tensors(&c, m, z, &all, sums, stage);
        transfers_close(&c);
        /* a save that already failed closes only to let go of the file */
        unsigned deadline = fail_agree(MPI_COMM_WORLD, c.rc)
                                ? 10 : 30 + (unsigned)(2 * (timer_now() - t0));
        if (close_with_deadline(c.file, deadline, tmp, rank) < 0)
            h5_fail(&c, "cannot close the file (disk full?)");
    }
    rc = agree(&c, err);
    if (!rc && rank == 0)
        rc = publish(dir, tmp, final, name, cfg->checkpoint.keep, err);
    else if (rc && rank == 0)
        unlink(tmp);
    rc = fail_agree(MPI_COMM_WORLD, rc);
    free(sums);
    free(stage);
    params_free(&all);
    *bytes = rc ? 0 : written_bytes(m);
    *seconds = timer_now() - t0;
    return rc;
}

/* ---- load ------------------------------------------------------------- */

int ckpt_resolve(const CheckpointConfig *c, char *path, size_t size, FILE *err)
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

static void check_model_attrs(H5Ctx *c, const Config *cfg)
{
    int32_t version = 0, want[6], got[6];
    if (attr_read(c->file, "format_version", H5T_NATIVE_INT32, &version)) {
        h5_fail(c, "no format_version attribute: not a trident checkpoint");
        return;
    }
    if (version != CKPT_FORMAT_VERSION) {
        h5_fail(c, "format version %d, this trident reads version %d", version,
                CKPT_FORMAT_VERSION);
        return;
    }
    model_shape(cfg, want);
    for (int i = 0; i < 6; i++) {
        if (attr_read(c->file, MODEL_ATTRS[i], H5T_NATIVE_INT32, &got[i]))
            h5_fail(c, "attribute %s is missing", MODEL_ATTRS[i]);
        else if (got[i] != want[i])
            h5_fail(c, "[model] %s is %d in the checkpoint but %d in the config",
                    MODEL_ATTRS[i], got[i], want[i]);
    }
}

/* Opens a dataset and checks it is fp32 with the logical shape. */
static hid_t open_checked(H5Ctx *c, const char *path, const Param *lp)
{
    if (H5Lexists(c->file, path[0] == '/' ? path + 1 : path, H5P_DEFAULT) <= 0) {
        h5_fail(c, "dataset %s is missing", path);
        return -1;
    }
    hid_t d = H5Dopen2(c->file, path, H5P_DEFAULT);
    if (d < 0) {
        h5_fail(c, "cannot open dataset %s", path);
        return -1;
    }
    hid_t type = H5Dget_type(d), space = H5Dget_space(d);
    hsize_t dims[2] = {0, 0};
    int ndim = H5Sget_simple_extent_ndims(space);
    if (ndim >= 1 && ndim <= 2)
        H5Sget_simple_extent_dims(space, dims, NULL);
    if (H5Tget_class(type) != H5T_FLOAT || H5Tget_size(type) != 4)
        h5_fail(c, "dataset %s is not fp32", path);
    else if (ndim != lp->ndim || dims[0] != (hsize_t)lp->rows
             || (ndim == 2 && dims[1] != (hsize_t)lp->cols))
        h5_fail(c, "dataset %s has shape %llu x %llu, the model needs %lld x %lld", path,
                (unsigned long long)dims[0], (unsigned long long)dims[1],
                (long long)lp->rows, (long long)lp->cols);
    H5Tclose(type);
    H5Sclose(space);
    return d;
}

static void dataset_path(char *out, size_t size, const char *name, int part)
{
    static const char *const fmt[] = {"/model/%s", "/optim/%s/m", "/optim/%s/v"};
    snprintf(out, size, fmt[part], name);
}

/* Reads rows [r0, r0+nr) of this rank's TP block of dataset d into out. */
static void read_rows(H5Ctx *c, hid_t d, const Param *logical, const Param *p, int64_t r0,
                      int64_t nr, float *out, const char *path)
{
    hid_t space = H5Dget_space(d);
    hid_t mspace = select_block(space, p, p ? p->row0 + r0 : 0, nr, p ? p->col0 : 0,
                                p ? p->lcols : 0);
    if (H5Dread(d, H5T_NATIVE_FLOAT, mspace, space, transfer_for(c, logical, c->tp),
                nr ? out : empty_selection_buffer) < 0)
        h5_fail(c, "cannot read dataset %s (truncated or corrupt file?)", path);
    H5Sclose(mspace);
    H5Sclose(space);
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
    *sum += block_checksum(s->buf + (w0 - r0) * p->lcols, p->row0 + w0, wn, p->col0, p->lcols,
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
    LoadScratch s = {.buf = malloc((size_t)most * sizeof(float))};
    if (!s.buf)
        fail_abort("out of memory reading a checkpoint", __FILE__, __LINE__);
    char path[128];
    for (int i = 0; i < all->n; i++) {
        Param *p = params_find(&m->ps, all->p[i].name);
        for (int part = 0; part < parts; part++) {
            dataset_path(path, sizeof path, all->p[i].name, part);
            hid_t d = H5Dopen2(c->file, path, H5P_DEFAULT);
            load_part(c, z, d, &all->p[i], p, part, path, &s, &sums[3 * i + part]);
            H5Dclose(d);
        }
    }
    free(s.buf);
}

/* The stored checksums against the world's sum of what each rank read. */
static void verify_checksums(H5Ctx *c, const ParamSet *all, int parts, uint64_t *sums)
{
    TRI_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, sums, 3 * all->n, MPI_UINT64_T, MPI_SUM,
                                MPI_COMM_WORLD));
    char path[128];
    for (int i = 0; i < all->n; i++) {
        for (int part = 0; part < parts; part++) {
            dataset_path(path, sizeof path, all->p[i].name, part);
            hid_t d = H5Dopen2(c->file, path, H5P_DEFAULT);
            uint64_t want = 0;
            if (attr_read(d, "checksum", H5T_NATIVE_UINT64, &want))
                h5_fail(c, "dataset %s has no checksum attribute", path);
            else if (want != sums[3 * i + part])
                h5_fail(c, "dataset %s is corrupt: its contents do not match its checksum",
                        path);
            H5Dclose(d);
        }
    }
}

static void read_state(H5Ctx *c, TrainState *st)
{
    int bad = attr_read(c->file, "step", H5T_NATIVE_INT64, &st->step)
            | attr_read(c->file, "tokens_seen", H5T_NATIVE_INT64, &st->tokens)
            | attr_read(c->file, "data_cursor", H5T_NATIVE_INT64, &st->cursor)
            | attr_read(c->file, "optimizer_updates", H5T_NATIVE_INT64, &st->updates)
            | attr_read(c->file, "loss_scale", H5T_NATIVE_DOUBLE, &st->loss_scale)
            | attr_read(c->file, "loss_scale_good_steps", H5T_NATIVE_INT64, &st->scale_good_steps)
            | attr_read(c->file, "loss_scale_overflows", H5T_NATIVE_INT32, &st->scale_overflows)
            | attr_read(c->file, "best_val_loss", H5T_NATIVE_DOUBLE, &st->best_val)
            | attr_read(c->file, "evals_without_improvement", H5T_NATIVE_INT32, &st->evals_bad);
    if (bad)
        h5_fail(c, "the training state attributes are missing or unreadable");
}

static void check_datasets(H5Ctx *c, const ParamSet *all, int parts)
{
    char path[128];
    for (int i = 0; i < all->n && !c->rc; i++) {
        for (int part = 0; part < parts; part++) {
            dataset_path(path, sizeof path, all->p[i].name, part);
            hid_t d = open_checked(c, path, &all->p[i]);
            if (d >= 0)
                H5Dclose(d);
        }
    }
}

static hid_t open_file(H5Ctx *c, const char *path, hid_t fapl)
{
    struct stat sb;
    if (stat(path, &sb) != 0) {
        h5_fail(c, "%s", strerror(errno));
        return -1;
    }
    if (tri_h5_is_hdf5(path, fapl) <= 0) {
        h5_fail(c, "not an HDF5 file, or truncated");
        return -1;
    }
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    if (f < 0)
        h5_fail(c, "cannot open (truncated or corrupt HDF5 file?)");
    return f;
}

int ckpt_load(Model *m, Zero *z, const Config *cfg, const char *path,
              int with_optimizer, TrainState *st, FILE *err)
{
    H5Ctx c = {.file = -1, .path = path, .tp = m->grid->tp};
    hid_t fapl = parallel_fapl();
    c.file = open_file(&c, path, fapl);
    H5Pclose(fapl);
    if (agree(&c, err))
        return 1;
    ParamSet all;
    logical_tensors(cfg, &all);
    int parts = with_optimizer ? 3 : 1;
    check_model_attrs(&c, cfg);
    if (!c.rc)
        check_datasets(&c, &all, parts);
    if (!c.rc)
        read_state(&c, st);
    int rc = agree(&c, err);
    if (!rc) {
        uint64_t *sums = calloc((size_t)(3 * all.n) + 1, sizeof *sums);
        transfers_open(&c);
        read_tensors(&c, m, z, &all, parts, sums);
        verify_checksums(&c, &all, parts, sums);
        transfers_close(&c);
        free(sums);
        rc = agree(&c, err);
    }
    H5Fclose(c.file);
    params_free(&all);
    return rc;
}

/* ---- one-rank readers: config and inspect ----------------------------- */

static hid_t open_serial(H5Ctx *c, const char *path)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    hid_t f = open_file(c, path, fapl);
    H5Pclose(fapl);
    return f;
}

int ckpt_read_config(const char *path, Config *cfg, FILE *err)
{
    H5Ctx c = {.file = -1, .path = path};
    c.file = open_serial(&c, path);
    char *text = c.file >= 0 ? attr_read_string(c.file, "config") : NULL;
    if (c.file >= 0 && !text)
        h5_fail(&c, "no config attribute: not a trident checkpoint");
    if (c.file >= 0)
        H5Fclose(c.file);
    if (c.rc) {
        fputs(c.msg, err);
        return 1;
    }
    char tmpl[] = "/tmp/trident-ckpt-config-XXXXXX";
    int fd = mkstemp(tmpl);
    int rc = fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text);
    if (fd >= 0)
        close(fd);
    free(text);
    if (!rc)
        rc = config_load(cfg, tmpl, NULL, 0, err);
    unlink(tmpl);
    return rc;
}

typedef struct {
    FILE *out;
    H5Ctx *c;
    int64_t elements;
    int datasets, bad;
    int64_t file_bytes;      /* no dataset can hold more than its file */
} InspectState;

/* The dataset's rank and dims when it is 1-D or 2-D (the only shapes a
 * checkpoint holds), else -1: dims has room for two. */
static int dataset_shape(hid_t d, hsize_t dims[2])
{
    hid_t space = H5Dget_space(d);
    int ndim = space < 0 ? -1 : H5Sget_simple_extent_ndims(space);
    dims[0] = 0;
    dims[1] = 1;
    if (ndim >= 1 && ndim <= 2)
        H5Sget_simple_extent_dims(space, dims, NULL);
    else
        ndim = -1;
    if (space >= 0)
        H5Sclose(space);
    return ndim;
}

/* Reads a whole fp32 dataset and checks its checksum attribute: 1 good,
 * 0 mismatch, -1 unreadable or not a checkpoint tensor. */
static int verify_whole(hid_t d, int ndim, const hsize_t dims[2], int64_t file_bytes,
                        int64_t *count)
{
    hsize_t cols = ndim == 2 ? dims[1] : 1;
    /* a damaged header may claim any extent: what does not fit in the
     * file is refused, not allocated */
    hsize_t max_elements = (hsize_t)file_bytes / sizeof(float);
    if (ndim < 0 || dims[0] > max_elements || cols > max_elements
        || (cols && dims[0] > max_elements / cols))
        return -1;
    int64_t n = (int64_t)(dims[0] * cols);
    *count = n;
    uint64_t want;
    float *buf = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    if (!buf || attr_read(d, "checksum", H5T_NATIVE_UINT64, &want)
        || H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
        free(buf);
        return -1;
    }
    uint64_t got = block_checksum(buf, 0, (int64_t)dims[0], 0, (int64_t)cols, (int64_t)cols);
    free(buf);
    return got == want;
}

static herr_t inspect_object(hid_t obj, const char *name, const tri_h5_info_t *info,
                             void *data)
{
    InspectState *s = data;
    if (info->type != H5O_TYPE_DATASET)
        return 0;
    hid_t d = H5Dopen2(obj, name, H5P_DEFAULT);
    hsize_t dims[2];
    int ndim = d < 0 ? -1 : dataset_shape(d, dims);
    int64_t count = 0;
    int ok = ndim < 0 ? -1 : verify_whole(d, ndim, dims, s->file_bytes, &count);
    if (d >= 0)
        H5Dclose(d);
    char shape[64];
    if (ndim == 2)
        snprintf(shape, sizeof shape, "%llu x %llu", (unsigned long long)dims[0],
                 (unsigned long long)dims[1]);
    else if (ndim == 1)
        snprintf(shape, sizeof shape, "%llu", (unsigned long long)dims[0]);
    else
        snprintf(shape, sizeof shape, "?");
    fprintf(s->out, "  /%-36s %-16s %s\n", name, shape,
            ok == 1 ? "ok" : ok == 0 ? "CORRUPT (checksum mismatch)" : "UNREADABLE");
    s->datasets++;
    s->bad += ok != 1;
    if (strncmp(name, "model/", 6) == 0)
        s->elements += count;
    return 0;
}

static void print_attrs(hid_t file, FILE *out)
{
    static const char *const ints[] = {"format_version", "step", "tokens_seen", "data_cursor",
                                       "optimizer_updates",
                                       "loss_scale_good_steps", "loss_scale_overflows",
                                       "evals_without_improvement", "n_layer", "n_embd",
                                       "n_head", "seq_len", "vocab_size", "tie_embeddings"};
    static const char *const reals[] = {"loss_scale", "best_val_loss"};
    char *s = attr_read_string(file, "program_version");
    fprintf(out, "  %-26s %s\n", "program_version", s ? s : "?");
    free(s);
    s = attr_read_string(file, "layout");
    fprintf(out, "  %-26s %s\n", "layout", s ? s : "?");
    free(s);
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        long long v = 0;
        if (!attr_read(file, ints[i], H5T_NATIVE_LLONG, &v))
            fprintf(out, "  %-26s %lld\n", ints[i], v);
    }
    for (size_t i = 0; i < sizeof reals / sizeof reals[0]; i++) {
        double v = 0;
        if (!attr_read(file, reals[i], H5T_NATIVE_DOUBLE, &v))
            fprintf(out, "  %-26s %g\n", reals[i], v);
    }
}

int ckpt_inspect(const char *path, FILE *out, FILE *err)
{
    H5Ctx c = {.file = -1, .path = path};
    c.file = open_serial(&c, path);
    if (c.rc) {
        fputs(c.msg, err);
        return 1;
    }
    fprintf(out, "%s\nattributes:\n", path);
    print_attrs(c.file, out);
    fprintf(out, "datasets (checksums verified):\n");
    struct stat sb;
    InspectState s = {.out = out, .c = &c,
                      .file_bytes = stat(path, &sb) == 0 ? (int64_t)sb.st_size : 0};
    tri_h5_visit(c.file, inspect_object, &s);
    fprintf(out, "%d datasets, %.3fM model parameters, %d bad\n", s.datasets,
            s.elements / 1e6, s.bad);
    char *config = attr_read_string(c.file, "config");
    if (config) {
        fprintf(out, "config:\n%s", config);
        free(config);
    }
    H5Fclose(c.file);
    if (s.bad || s.datasets == 0) {
        fprintf(err, "trident: checkpoint %s: %s\n", path,
                s.datasets ? "some datasets are corrupt or unreadable" : "no datasets");
        return 1;
    }
    return 0;
}
