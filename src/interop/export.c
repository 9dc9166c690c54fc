/*
 * export.c - `trident export`; see export.h.
 *
 * The checkpoint is trusted only after the checks a load makes (root
 * attributes, their checksum, every dataset's shape and checksum). The
 * output never replaces a file silently: a DIR that holds anything is
 * refused without --force, and every file is written under a temporary
 * name, fsynced, and renamed into place only when all of them are
 * complete, so an interrupted export leaves no file that looks finished.
 * With --force, the files of an earlier export that this one does not
 * write (model.safetensors, the index, model-*-of-*.safetensors) are
 * removed after the renames: a loader would otherwise take a stale one.
 */
#include "export.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_format.h"
#include "ckpt_pick.h"
#include "cli_options.h"
#include "fail.h"
#include "hf_map.h"
#include "safetensors.h"
#include "tokenizer_hf.h"
#include "tokenizer_load.h"

#define SINGLE_NAME "model.safetensors"
#define INDEX_NAME "model.safetensors.index.json"
#define CONFIG_NAME "config.json"

/* "5GB" = 5e9 and "5GiB" = 5 x 2^30 bytes, as transformers reads them;
 * out is a uint64_t. */
static int parse_size(const char *s, void *out)
{
    static const struct { const char *suffix; uint64_t scale; } units[] = {
        {"", 1}, {"B", 1}, {"KB", 1000}, {"MB", 1000000}, {"GB", 1000000000},
        {"KiB", 1ull << 10}, {"MiB", 1ull << 20}, {"GiB", 1ull << 30},
    };
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || s[0] == '-' || v == 0)
        return -1;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (!strcmp(end, units[i].suffix)) {
            if (v > UINT64_MAX / units[i].scale)
                return -1;
            *(uint64_t *)out = v * units[i].scale;
            return 0;
        }
    return -1;
}

int export_parse(ExportArgs *a, int argc, char **argv, FILE *err)
{
    memset(a, 0, sizeof *a);
    a->max_shard = EXPORT_DEFAULT_SHARD;
    int format;
    CliOption options[] = {
        {.name = "format", .takes = CLI_ONE, .check = CLI_CHOICE, .choices = "hf", .to = &format,
         .invalid = "--format %s: the one format is hf (HuggingFace safetensors)", .needed = "hf"},
        {.name = "dtype", .takes = CLI_ONE, .check = CLI_CHOICE, .choices = "fp32|bf16",
         .to = &a->bf16, .invalid = "--dtype %s: expected fp32 or bf16"},
        {.name = "max-shard-size", .takes = CLI_ONE, .check = CLI_CUSTOM, .parse = parse_size,
         .to = &a->max_shard, .invalid = "--max-shard-size %s: expected a positive size in bytes, "
                                         "optionally with KB, MB, GB, KiB, MiB or GiB"},
        {.name = "force", .takes = CLI_FLAG, .to = &a->force},
    };
    CliSpec spec = {
        .command = "export", .options = options,
        .n_options = (int)(sizeof options / sizeof options[0]),
        .positional = {&a->ckpt, &a->dir}, .n_positional = 2,
        .missing = "expected CKPT.h5 and DIR (export CKPT.h5 --format hf DIR)",
    };
    return cli_options_parse(&spec, argc, argv, err);
}

/* ---- the output directory --------------------------------------------- */

static int is_shard_name(const char *s)
{
    unsigned a, b;
    int end = 0;
    return sscanf(s, "model-%5u-of-%5u.safetensors%n", &a, &b, &end) == 2
           && end == (int)strlen(s);
}

/* DIR is created, or must be empty, or --force. */
static int claim_dir(const ExportArgs *a, FILE *err)
{
    if (mkdir(a->dir, 0777) == 0)
        return 0;
    if (errno != EEXIST) {
        fprintf(err, "trident: export: %s: cannot create: %s\n", a->dir, strerror(errno));
        return 1;
    }
    DIR *d = opendir(a->dir);
    if (!d) {
        fprintf(err, "trident: export: %s: %s\n", a->dir, strerror(errno));
        return 1;
    }
    int found = 0;
    char first[256] = "";
    for (struct dirent *e; !found && (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            found = snprintf(first, sizeof first, "%s", e->d_name) > 0;
    closedir(d);
    if (found && !a->force) {
        fprintf(err, "trident: export: %s is not empty (it holds %s): export refuses to "
                "write over files; choose a new directory or pass --force\n", a->dir, first);
        return 1;
    }
    return 0;
}

/* ---- what goes where -------------------------------------------------- */

typedef struct {
    const Param *lp;
    HfTensor hf;
    int zeros;              /* HF's zero bias of lp (Qwen2-MoE's q, k, v) */
} Item;

typedef struct {
    Item *items;
    StEntry *entries;
    int n;
    int *shard_of;          /* item -> shard */
    int n_shards;
    int tokenizer;          /* the tokenizer files are written */
} Plan;

/* What [data] tokenizer becomes (tokenizer_hf.h), in this order. */
static const char *const tokenizer_files[] = {"tokenizer.json", "tokenizer_config.json",
                                              "special_tokens_map.json"};
enum { N_TOKENIZER_FILES = 3 };

static void plan_free(Plan *p)
{
    free(p->items);
    free(p->entries);
    free(p->shard_of);
}

/* Item i's safetensors entry, and the shard it falls in: transformers'
 * rule, a tensor opens a new shard when it would take the current one
 * past the limit; one larger than the limit sits alone. */
static void plan_entry(Plan *p, const ExportArgs *a, uint64_t *in_shard)
{
    const Item *it = &p->items[p->n];
    StEntry *e = &p->entries[p->n];
    *e = (StEntry){it->hf.hf, a->bf16 ? OPS_BF16 : OPS_F32, it->hf.ndim,
                   {it->hf.hf_shape[0], it->hf.hf_shape[1]}};
    uint64_t bytes = st_data_bytes(e, 1);
    if (p->n && *in_shard + bytes > a->max_shard) {
        p->n_shards++;
        *in_shard = 0;
    }
    p->shard_of[p->n++] = p->n_shards;
    *in_shard += bytes;
}

/* Every tensor of ps by its HF name, each followed by its zero bias where
 * the format has one. */
static int plan_tensors(Plan *p, const ParamSet *ps, const Config *cfg, const ExportArgs *a,
                        FILE *err)
{
    size_t most = 2 * (size_t)ps->n;
    p->items = calloc(most, sizeof *p->items);
    p->entries = calloc(most, sizeof *p->entries);
    p->shard_of = calloc(most, sizeof *p->shard_of);
    if (!p->items || !p->entries || !p->shard_of) {
        fprintf(err, "trident: export: out of memory\n");
        return 1;
    }
    uint64_t in_shard = 0;
    for (int i = 0; i < ps->n; i++) {
        Item *it = &p->items[p->n];
        it->lp = &ps->p[i];
        if (hf_map_tensor(cfg, HF_NAMES_HF, it->lp, &it->hf)) {
            fprintf(err, "trident: export: tensor %s has no HuggingFace name in its "
                    "architecture's tables (hf_map.h)\n", it->lp->name);
            return 1;
        }
        plan_entry(p, a, &in_shard);
        Item *bias = &p->items[p->n];
        if (!hf_map_zero_bias(cfg, &ps->p[i], &bias->hf)) {
            bias->lp = &ps->p[i];
            bias->zeros = 1;
            plan_entry(p, a, &in_shard);
        }
    }
    p->n_shards++;
    return 0;
}

/* ---- reading the checkpoint ------------------------------------------- */

/* The whole of lp's weights, their checksum verified. */
static int read_weights(hid_t file, const char *ckpt, const Param *lp, float *buf, FILE *err)
{
    char path[128], why[256];
    ckpt_dataset_path(path, sizeof path, lp->name, 0);
    hid_t d = ckpt_dataset_open(file, path, lp, why, sizeof why);
    uint64_t want = 0;
    int rc = why[0] || d < 0;
    if (!rc && (ckpt_attr_read(d, CKPT_CHECKSUM_ATTR, H5T_NATIVE_UINT64, &want)
                || H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0)) {
        snprintf(why, sizeof why, "cannot be read");
        rc = 1;
    }
    if (!rc && ckpt_checksum(buf, 0, lp->rows, 0, lp->cols, lp->cols) != want) {
        snprintf(why, sizeof why, "does not match its checksum");
        rc = 1;
    }
    if (d >= 0)
        H5Dclose(d);
    if (rc)
        fprintf(err, "trident: export: checkpoint %s: dataset %s %s\n", ckpt, path, why);
    return rc;
}

/* ---- writing ---------------------------------------------------------- */

static void shard_name(char *out, size_t n, const Plan *p, int s)
{
    if (p->n_shards == 1)
        snprintf(out, n, SINGLE_NAME);
    else
        snprintf(out, n, "model-%05d-of-%05d.safetensors", s + 1, p->n_shards);
}

static void temp_path(char *out, size_t n, const char *dir, const char *name)
{
    snprintf(out, n, "%s/.%s.tmp.%ld", dir, name, (long)getpid());
}

static int write_shard(const Plan *p, int s, hid_t file, const ExportArgs *a, float *raw,
                       float *hf, FILE *err)
{
    char name[64], tmp[4096], why[ST_WHY_MAX];
    shard_name(name, sizeof name, p, s);
    temp_path(tmp, sizeof tmp, a->dir, name);
    int first = 0;
    while (p->shard_of[first] != s)
        first++;
    int n = 0;
    while (first + n < p->n && p->shard_of[first + n] == s)
        n++;
    StWriter w;
    if (st_write_begin(&w, tmp, &p->entries[first], n, why, sizeof why)) {
        fprintf(err, "trident: export: %s\n", why);
        return 1;
    }
    for (int i = first; i < first + n; i++) {
        const Item *it = &p->items[i];
        /* the vocabulary's padding rows are the tensor's last: the first
         * hf.rows rows are the ones HF keeps */
        if (it->zeros) {
            memset(hf, 0, (size_t)it->hf.rows * sizeof *hf);
        } else if (read_weights(file, a->ckpt, it->lp, raw, err)) {
            st_write_abort(&w);
            return 1;
        } else {
            hf_map_to_hf(&it->hf, raw, hf);
        }
        if (st_write_tensor(&w, hf, why, sizeof why)) {
            st_write_abort(&w);
            fprintf(err, "trident: export: %s\n", why);
            return 1;
        }
    }
    if (st_write_end(&w, why, sizeof why)) {
        fprintf(err, "trident: export: %s\n", why);
        return 1;
    }
    return 0;
}

/* Writes json to DIR/.NAME.tmp.PID, fsynced. */
static int write_json(const char *dir, const char *name, json_t *json, FILE *err)
{
    char tmp[4096];
    temp_path(tmp, sizeof tmp, dir, name);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    int rc = fd < 0 || !json || json_dumpfd(json, fd, JSON_INDENT(2) | JSON_SORT_KEYS)
             || write(fd, "\n", 1) != 1 || fsync(fd);
    if (fd >= 0 && close(fd))
        rc = 1;
    if (rc) {
        fprintf(err, "trident: export: %s: %s\n", tmp, errno ? strerror(errno) : "failed");
        unlink(tmp);
    }
    return rc;
}

static json_t *index_json(const Plan *p)
{
    uint64_t total = st_data_bytes(p->entries, p->n);
    json_t *map = json_object();
    for (int i = 0; i < p->n; i++) {
        char name[64];
        shard_name(name, sizeof name, p, p->shard_of[i]);
        json_object_set_new(map, p->entries[i].name, json_string(name));
    }
    return json_pack("{s:{s:I}, s:o}", "metadata", "total_size", (json_int_t)total,
                     "weight_map", map);
}

/* The temporary files, renamed into place, the directory synced; then the
 * earlier export's files that this one did not write removed. */
static int publish(const Plan *p, const ExportArgs *a, FILE *err)
{
    char name[64], tmp[4096], final[4096];
    int rc = 0;
    for (int s = -2; s < p->n_shards; s++) {
        if (s == -1 && p->n_shards == 1)
            continue;
        if (s == -2)
            snprintf(name, sizeof name, CONFIG_NAME);
        else if (s == -1)
            snprintf(name, sizeof name, INDEX_NAME);
        else
            shard_name(name, sizeof name, p, s);
        temp_path(tmp, sizeof tmp, a->dir, name);
        snprintf(final, sizeof final, "%s/%s", a->dir, name);
        if (!rc && rename(tmp, final)) {
            fprintf(err, "trident: export: %s: %s\n", final, strerror(errno));
            rc = 1;
        }
        if (rc)
            unlink(tmp);
    }
    for (int t = 0; t < N_TOKENIZER_FILES && p->tokenizer; t++) {
        temp_path(tmp, sizeof tmp, a->dir, tokenizer_files[t]);
        snprintf(final, sizeof final, "%s/%s", a->dir, tokenizer_files[t]);
        if (!rc && rename(tmp, final)) {
            fprintf(err, "trident: export: %s: %s\n", final, strerror(errno));
            rc = 1;
        }
        if (rc)
            unlink(tmp);
    }
    DIR *d = rc ? NULL : opendir(a->dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        int ours = 0;
        for (int s = 0; s < p->n_shards; s++) {
            shard_name(name, sizeof name, p, s);
            ours |= !strcmp(name, e->d_name);
        }
        int stale = is_shard_name(e->d_name) || !strcmp(e->d_name, SINGLE_NAME)
                    || (!strcmp(e->d_name, INDEX_NAME) && p->n_shards == 1);
        for (int t = 0; t < N_TOKENIZER_FILES && !p->tokenizer; t++)
            stale |= !strcmp(e->d_name, tokenizer_files[t]);
        if (stale && !ours) {
            snprintf(final, sizeof final, "%s/%s", a->dir, e->d_name);
            unlink(final);
        }
    }
    if (d) {
        fsync(dirfd(d));
        closedir(d);
    }
    return rc;
}

static void remove_temps(const Plan *p, const ExportArgs *a)
{
    char name[64], tmp[4096];
    temp_path(tmp, sizeof tmp, a->dir, CONFIG_NAME);
    unlink(tmp);
    temp_path(tmp, sizeof tmp, a->dir, INDEX_NAME);
    unlink(tmp);
    for (int t = 0; t < N_TOKENIZER_FILES; t++) {
        temp_path(tmp, sizeof tmp, a->dir, tokenizer_files[t]);
        unlink(tmp);
    }
    for (int s = 0; s < p->n_shards; s++) {
        shard_name(name, sizeof name, p, s);
        temp_path(tmp, sizeof tmp, a->dir, name);
        unlink(tmp);
    }
}

/* The tokenizer the run named ([data] tokenizer, a path from where it ran)
 * as HuggingFace's files, under their temporary names. */
static int write_tokenizer(const char *dir, const Config *cfg, FILE *err)
{
    Bpe *bpe;
    char eod[256], why[1024];
    if (tokenizer_load(cfg->data.tokenizer, &bpe, eod, sizeof eod, why, sizeof why)) {
        fprintf(err, "trident: export: the checkpoint's stored config names [data] tokenizer = "
                "%s, which cannot be read: %s (run export where the run ran, or from a "
                "directory where that path leads to the file)\n", cfg->data.tokenizer, why);
        return 1;
    }
    json_t *files[N_TOKENIZER_FILES] = {tokenizer_hf_json(bpe),
                                        tokenizer_hf_config_json(eod, cfg->model.seq_len),
                                        tokenizer_hf_special_map_json(eod)};
    int rc = 0;
    for (int t = 0; t < N_TOKENIZER_FILES; t++) {
        rc = rc || write_json(dir, tokenizer_files[t], files[t], err);
        json_decref(files[t]);
    }
    bpe_free(bpe);
    return rc;
}

static int write_all(const Plan *p, hid_t file, const Config *cfg, const ExportArgs *a,
                     json_t *config, FILE *err)
{
    int64_t most = 1;
    for (int i = 0; i < p->n; i++)
        if (p->items[i].lp->rows * p->items[i].lp->cols > most)
            most = p->items[i].lp->rows * p->items[i].lp->cols;
    float *raw = malloc((size_t)most * sizeof *raw), *hf = malloc((size_t)most * sizeof *hf);
    int rc = !raw || !hf;
    if (rc)
        fprintf(err, "trident: export: out of memory\n");
    for (int s = 0; s < p->n_shards && !rc; s++)
        rc = write_shard(p, s, file, a, raw, hf, err);
    free(raw);
    free(hf);
    if (!rc && p->n_shards > 1) {
        json_t *index = index_json(p);
        rc = write_json(a->dir, INDEX_NAME, index, err);
        json_decref(index);
    }
    if (!rc)
        rc = write_json(a->dir, CONFIG_NAME, config, err);
    if (!rc && p->tokenizer)
        rc = write_tokenizer(a->dir, cfg, err);
    rc = rc ? rc : publish(p, a, err);
    if (rc)
        remove_temps(p, a);
    return rc;
}

/* config.json for the checkpoint's model, or NULL where no format
 * expresses it (the reason names the key). A capacity factor is a
 * training setting HF's formats do not hold: said, since transformers'
 * models then compute what trident's would without dropping. */
static json_t *model_config(const Config *cfg, const ExportArgs *a, FILE *out, FILE *err)
{
    char why[1024];
    json_t *config = hf_map_config_json(cfg, a->bf16 ? "bfloat16" : "float32", why, sizeof why);
    if (!config)
        fprintf(err, "trident: export: %s: %s\n", a->ckpt, why);
    else if (cfg->model.n_expert && cfg->model.moe_capacity > 0)
        fprintf(out, "note: export: [model] moe_capacity = %g has no HuggingFace field: "
                "transformers' MoE layers drop no token\n", cfg->model.moe_capacity);
    return config;
}

int export_hf(const ExportArgs *a, FILE *out, FILE *err)
{
    char ckpt[CKPT_PICKED_MAX];
    if (ckpt_pick(a->ckpt, "export", ckpt, sizeof ckpt, err, err))
        return 1;
    ExportArgs picked = *a; /* a directory named: its messages name the file */
    picked.ckpt = ckpt;
    a = &picked;
    CkptFile f = {.id = -1, .path = ckpt};
    f.id = ckpt_open_serial(&f, ckpt);
    CkptRoot *root = f.rc ? NULL : calloc(1, sizeof *root);
    if (!f.rc && !root)
        ckpt_fail(&f, "out of memory");
    if (root) {
        ckpt_root_read(f.id, root);
        ckpt_root_verify(&f, root);
    }
    int rc = f.rc;
    if (rc)
        fputs(f.msg, err);
    /* a model no format expresses is refused before DIR is made */
    json_t *config = rc ? NULL : model_config(&root->stored, a, out, err);
    rc = rc || !config;
    rc = rc ? rc : claim_dir(a, err);
    ParamSet ps = {0};
    Plan plan = {0};
    if (!rc) {
        ckpt_logical_tensors(&root->stored, &ps);
        plan.tokenizer = root->stored.data.tokenizer[0] != '\0';
        rc = plan_tensors(&plan, &ps, &root->stored, a, err)
             || write_all(&plan, f.id, &root->stored, a, config, err);
    }
    json_decref(config);
    if (!rc)
        fprintf(out, "trident: exported %s to %s: %d tensors in %d file%s (%s), config.json%s\n",
                a->ckpt, a->dir, plan.n, plan.n_shards, plan.n_shards > 1 ? "s" : "",
                a->bf16 ? "bf16" : "fp32",
                plan.tokenizer ? ", tokenizer.json, tokenizer_config.json, special_tokens_map.json "
                                 "(from [data] tokenizer)" : "");
    plan_free(&plan);
    params_free(&ps);
    if (root)
        ckpt_root_free(root);
    free(root);
    if (f.id >= 0)
        H5Fclose(f.id);
    return rc;
}

int export_main(int argc, char **argv, MPI_Comm world)
{
    int rank;
    MPI_Comm_rank(world, &rank);
    ExportArgs a;
    int rc = export_parse(&a, argc, argv, fail_stream(rank == 0));
    if (rc)
        return rc;
    rc = rank == 0 ? export_hf(&a, stdout, stderr) : 0;
    return fail_agree(world, rc) ? TRI_EXIT_ERROR : TRI_EXIT_OK;
}
