/*
 * inspect.c - `trident inspect`; see inspect.h.
 *
 * The file is untrusted: a damaged header may claim any shape or type, so
 * every dataset is checked against the file's size before it is read, and
 * a bad one is reported and skipped rather than trusted.
 */
#include "inspect.h"

#include <hdf5.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "arch.h"
#include "arch_sizes.h"
#include "ckpt_format.h"
#include "ckpt_pick.h"
#include "params.h"
#include "params_stage.h"

/* HDF5 1.12 renamed H5Ovisit; keep building against 1.10 (Debian 12) and
 * newer releases (cluster modules). */
#if H5_VERSION_GE(1, 12, 0)
typedef H5O_info2_t tri_h5_info_t;
#define tri_h5_visit(obj, fn, data) H5Ovisit3(obj, H5_INDEX_NAME, H5_ITER_INC, fn, data, H5O_INFO_BASIC)
#else
typedef H5O_info_t tri_h5_info_t;
#define tri_h5_visit(obj, fn, data) H5Ovisit2(obj, H5_INDEX_NAME, H5_ITER_INC, fn, data, H5O_INFO_BASIC)
#endif

typedef struct {
    FILE *out;
    int64_t elements;        /* of the model's weights (model/...) */
    int tensors;             /* the model's weights */
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
    if (!buf || ckpt_attr_read(d, CKPT_CHECKSUM_ATTR, H5T_NATIVE_UINT64, &want)
        || H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
        free(buf);
        return -1;
    }
    uint64_t got = ckpt_checksum(buf, 0, (int64_t)dims[0], 0, (int64_t)cols, (int64_t)cols);
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
    if (strncmp(name, "model/", 6) == 0) {
        s->elements += count;
        s->tensors++;
    }
    return 0;
}

/* ---- root attributes -------------------------------------------------- */

/* The keys of the model's shape that only the stored config carries (the
 * root attributes hold gpt2's), listed with them so that one block says
 * what the model is. */
static void print_stored_shape(const CkptRoot *r, FILE *out)
{
    if (!r->stored_ok) {
        fprintf(out, "  %-26s unknown (the stored config does not parse)\n", "arch");
        return;
    }
    const ModelConfig *m = &r->cfg.model;
    fprintf(out, "  %-26s %s (stored config)\n", "arch", arch_of(m)->name);
    fprintf(out, "  %-26s %d (stored config)\n", "n_kv_head", arch_kv_heads(m));
    fprintf(out, "  %-26s %d (stored config)\n", "ffn_dim", arch_ffn_dim(m));
}

/* Lists every root attribute with its value, and what is wrong with it;
 * returns the number of attributes that are missing or out of range. */
static int print_root(const CkptRoot *r, FILE *out)
{
    int bad = 0;
    fprintf(out, "root attributes:\n");
    for (int i = 0; i < ckpt_n_root_attrs; i++) {
        char value[96], why[512];
        ckpt_root_format(r, i, value, sizeof value);
        int wrong = ckpt_root_problem(r, i, why, sizeof why);
        if (!wrong && !r->present[i])
            snprintf(value, sizeof value, "none (format version 1)");
        fprintf(out, "  %-26s %s%s%s\n", ckpt_root_attrs[i].name, value,
                wrong ? "  <- WRONG: " : "", wrong ? why : "");
        bad += wrong;
    }
    print_stored_shape(r, out);
    static const char *const verdict[] = {
        [CKPT_SUM_VERIFIED] = "verified",
        [CKPT_SUM_MISMATCH] = "MISMATCH (an attribute was changed)",
        [CKPT_SUM_MISSING] = "MISSING",
        [CKPT_SUM_NONE] = "none (format version 1: range-checked only)",
    };
    fprintf(out, "root attributes checksum: %s\n", verdict[ckpt_root_sum_state(r)]);
    return bad;
}

/* ---- completeness -------------------------------------------------------- */

/* A checkpoint holds every tensor three times in fp32, so a file smaller
 * than that cannot be complete; and a shape that a damaged or hostile file
 * claims (2^30 layers) is not turned into a parameter table of that size.
 * The first test bounds the largest term, so the count cannot overflow. */
static int model_fits(const ModelConfig *m, int64_t file_bytes)
{
    double f = (double)file_bytes, C = m->n_embd;
    /* without a position table (llama), seq_len sizes no tensor */
    if (12.0 * m->n_layer * C * C > f || 12.0 * m->vocab_size * C > f
        || (arch_of(m)->positions && 12.0 * m->seq_len * C > f))
        return 0;
    return 12.0 * (double)params_logical_count(m) <= f;
}

#define LISTED_MAX 10   /* missing datasets named on err; all are on out */

/* Checks that every dataset the model of the root attributes needs is
 * there, fp32, with its shape; lists those that are not on out and the
 * first few on err. Returns non-zero when any is wrong or the check cannot
 * be made. */
static int check_complete(hid_t file, const char *path, const CkptRoot *r, int64_t file_bytes,
                          FILE *out, FILE *err)
{
    const ModelConfig *m = &r->cfg.model;
    if (!model_fits(m, file_bytes)) {
        fprintf(out, "complete: NO: the file is too small for its model\n");
        fprintf(err, "trident: checkpoint %s: incomplete: its %lld bytes cannot hold the "
                "tensors of the model its root attributes describe (n_layer %d, n_embd %d, "
                "vocab_size %d, seq_len %d)\n", path, (long long)file_bytes, m->n_layer,
                m->n_embd, m->vocab_size, m->seq_len);
        return 1;
    }
    ParamSet all;
    ckpt_logical_tensors(&r->cfg, &all);
    int needed = 3 * all.n, wrong = 0;
    char listed[LISTED_MAX * 160] = "";
    for (int i = 0; i < all.n; i++) {
        for (int part = 0; part < 3; part++) {
            char name[128], why[256];
            ckpt_dataset_path(name, sizeof name, all.p[i].name, part);
            hid_t d = ckpt_dataset_open(file, name, &all.p[i], why, sizeof why);
            if (d >= 0)
                H5Dclose(d);
            if (!why[0])
                continue;
            if (wrong++ == 0)
                fprintf(out, "datasets the model needs that are missing or wrong:\n");
            fprintf(out, "  %s %s\n", name, why);
            if (wrong <= LISTED_MAX)
                snprintf(listed + strlen(listed), sizeof listed - strlen(listed), "%s%s %s",
                         wrong > 1 ? ", " : "", name, why);
        }
    }
    params_free(&all);
    if (!wrong) {
        /* the default architecture goes without saying */
        int named = m->arch != ARCH_GPT2;
        fprintf(out, "complete: all %d datasets of the model (%s%s%d layers, %d wide, vocab %d) "
                "are present with their shapes\n", needed, named ? arch_of(m)->name : "",
                named ? ", " : "", m->n_layer, m->n_embd, m->vocab_size);
        return 0;
    }
    fprintf(out, "complete: NO: %d of the %d datasets the model needs are missing or wrong\n",
            wrong, needed);
    /* one write: under mpiexec, stderr and stdout reach the terminal as
     * separate streams, and a line written in pieces can be cut by stdout */
    char more[32] = "";
    if (wrong > LISTED_MAX)
        snprintf(more, sizeof more, " (and %d more)", wrong - LISTED_MAX);
    fprintf(err, "trident: checkpoint %s: incomplete: missing or wrong datasets (%d of the %d "
            "the model needs): %s%s\n", path, wrong, needed, listed, more);
    return 1;
}

/* The last line: what the file is, and whether it can be trusted (the
 * reasons, when not, are on err). */
static void print_verdict(const CkptRoot *r, const InspectState *s, int bad, FILE *out)
{
    if (bad) {
        fprintf(out, "verdict: NOT usable: %d of %d datasets bad, root attributes %s (the "
                "reasons are above)\n", s->bad, s->datasets,
                ckpt_root_sum_state(r) == CKPT_SUM_VERIFIED ? "verified" : "not verified");
        return;
    }
    int root_summed = ckpt_root_sum_state(r) == CKPT_SUM_VERIFIED;
    fprintf(out, "verdict: good: step %lld, %s, %.3fM parameters in %d tensors, all %d "
            "checksums verified%s\n", (long long)r->st.step, arch_of(&r->cfg.model)->name,
            s->elements / 1e6, s->tensors, s->datasets + root_summed,
            root_summed ? "" : " (format version 1: root attributes range-checked)");
}

int inspect_checkpoint(const char *given, FILE *out, FILE *err)
{
    char path[CKPT_PICKED_MAX];
    if (ckpt_pick(given, "inspect", path, sizeof path, err, err))
        return 1;
    CkptFile f = {.id = -1, .path = path};
    f.id = ckpt_open_serial(&f, path);
    if (f.rc) {
        fputs(f.msg, err);
        return 1;
    }
    CkptRoot *root = malloc(sizeof *root);
    if (!root) {
        H5Fclose(f.id);
        fprintf(err, "trident: inspect: out of memory\n");
        return 1;
    }
    ckpt_root_read(f.id, root);
    fprintf(out, "%s\n", path);
    print_root(root, out);
    /* the reason a load would give, which names the first bad attribute */
    int root_bad = ckpt_root_verify(&f, root);
    fprintf(out, "datasets (checksums verified):\n");
    struct stat sb;
    InspectState s = {.out = out, .file_bytes = stat(path, &sb) == 0 ? (int64_t)sb.st_size : 0};
    tri_h5_visit(f.id, inspect_object, &s);
    fprintf(out, "%d datasets, %.3fM model parameters, %d bad\n", s.datasets,
            s.elements / 1e6, s.bad);
    /* the model's shape is taken from attributes found sound */
    int incomplete = 0;
    if (!root_bad)
        incomplete = check_complete(f.id, path, root, s.file_bytes, out, err);
    if (root->config)
        fprintf(out, "config:\n%s", root->config);
    int bad = root_bad || incomplete || s.bad || s.datasets == 0;
    print_verdict(root, &s, bad, out);
    ckpt_root_free(root);
    free(root);
    H5Fclose(f.id);
    if (root_bad)
        fputs(f.msg, err);
    if (s.bad || s.datasets == 0)
        fprintf(err, "trident: checkpoint %s: %s\n", path,
                s.datasets ? "some datasets are corrupt or unreadable" : "no datasets");
    return bad;
}
