/*
 * init_from.c - starting a run from a published model; see init_from.h.
 *
 * Both kinds of source become one thing: an StModel, a list of named,
 * typed, shaped byte ranges in files. A HuggingFace directory is one
 * already (safetensors.h); an llm.c .bin is described as one here, from
 * its 256-int header, one tensor per layer of each of its stacked arrays,
 * named as trident names its tensors. hf_map.h's tables then say where
 * each of trident's elements is, so a rank's block is read by runs of
 * rows whose source rows (or, transposed, columns) are consecutive.
 * Rank 0 first checks that the source is the model [model] describes, all
 * of it (init_from.h); every rank checks the values it reads are finite.
 */
#include "init_from.h"

#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "arch.h"
#include "ckpt_files.h"
#include "ckpt_format.h"
#include "comm.h"
#include "fail.h"
#include "file_check.h"
#include "hf_config.h"
#include "hf_map.h"
#include "reason.h"
#include "safetensors.h"

#define LLMC_MAGIC 20240326
#define LLMC_HEADER_INTS 256
#define MSG_MAX 2048

typedef struct {
    const char *path;     /* [checkpoint] init_from */
    HfNames names;
    StModel m;
    int tied;             /* its head is its embedding (config.json says so,
                             or an llm.c file, always tied) */
} Source;

/* How many tensors nothing reads an error lists by name. */
#define UNREAD_NAMED 4

/* ---- llm.c's .bin ----------------------------------------------------- */

/* llm.c's parameter arrays in file order; per_layer arrays are L stacked
 * (rows x cols) tensors named "h.%d.<name>". */
typedef struct {
    const char *name;
    int per_layer;
    char rows, cols;      /* 'V' Vp, 'T' maxT, 'C' C, '3' 3C, '4' 4C, '1' 1 */
} LlmcArray;

static const LlmcArray LLMC_ARRAYS[] = {
    {"wte", 0, 'V', 'C'}, {"wpe", 0, 'T', 'C'},
    {"ln1.w", 1, 'C', '1'}, {"ln1.b", 1, 'C', '1'},
    {"attn.qkv.w", 1, '3', 'C'}, {"attn.qkv.b", 1, '3', '1'},
    {"attn.proj.w", 1, 'C', 'C'}, {"attn.proj.b", 1, 'C', '1'},
    {"ln2.w", 1, 'C', '1'}, {"ln2.b", 1, 'C', '1'},
    {"mlp.fc.w", 1, '4', 'C'}, {"mlp.fc.b", 1, '4', '1'},
    {"mlp.proj.w", 1, 'C', '4'}, {"mlp.proj.b", 1, 'C', '1'},
    {"lnf.w", 0, 'C', '1'}, {"lnf.b", 0, 'C', '1'},
};

static int64_t llmc_dim(char d, const int32_t *h)
{
    int64_t C = h[6];
    switch (d) {
    case 'V': return h[7];
    case 'T': return h[2];
    case 'C': return C;
    case '3': return 3 * C;
    case '4': return 4 * C;
    }
    return 1;
}

/* The header against [model], before any size is computed from it. */
static int llmc_check_header(const int32_t *h, const Config *cfg, char *why, size_t n)
{
    const ModelConfig *m = &cfg->model;
    if (h[0] != LLMC_MAGIC)
        return reason_set(why, n, "magic %d, an llm.c model file starts with %d", h[0], LLMC_MAGIC);
    if (h[1] != 3 && h[1] != 5)
        return reason_set(why, n, "version %d, trident reads llm.c's 3 (fp32) and 5 (bf16)", h[1]);
    static const struct { int index; const char *what, *key; } same[] = {
        {4, "num_layers", "n_layer"}, {5, "num_heads", "n_head"}, {6, "channels", "n_embd"},
        {7, "padded_vocab_size", "vocab_size"},
    };
    const int want[] = {m->n_layer, m->n_head, m->n_embd, m->vocab_size};
    for (int i = 0; i < 4; i++)
        if (h[same[i].index] != want[i])
            return reason_set(why, n, "%s = %d, [model] %s = %d", same[i].what, h[same[i].index],
                              same[i].key, want[i]);
    if (h[2] < m->seq_len)
        return reason_set(why, n, "max_seq_len = %d, shorter than [model] seq_len = %d", h[2],
                          m->seq_len);
    if (h[3] < 1 || h[3] > h[7] || (m->vocab_used && h[3] != m->vocab_used))
        return reason_set(why, n, "vocab_size = %d: [model] vocab_used must be it (it is %d)", h[3],
                          m->vocab_used);
    return 0;
}

static int llmc_open(StModel *sm, const char *path, const Config *cfg, char *why, size_t n)
{
    memset(sm, 0, sizeof *sm);
    if (!arch_of(&cfg->model)->llmc_names)
        return reason_set(why, n, "%s: not a directory: only a HuggingFace directory holds a %s "
                          "model (an llm.c file holds GPT-2)", path, arch_of(&cfg->model)->name);
    sm->files = calloc(1, sizeof *sm->files);
    if (!sm->files || !(sm->dir = strdup(path)))
        return reason_set(why, n, "%s: out of memory", path);
    StFile *f = sm->files;
    f->fd = -1;
    sm->n_files = 1;
    if (!(f->path = strdup(path)))
        return reason_set(why, n, "%s: out of memory", path);
    char reason[256];
    f->fd = file_open_regular(path, O_RDONLY, reason, sizeof reason);
    if (f->fd < 0)
        return reason_set(why, n, "%s: %s", path, reason);
    int32_t h[LLMC_HEADER_INTS];
    struct stat sb;
    if (fstat(f->fd, &sb) || pread(f->fd, h, sizeof h, 0) != (ssize_t)sizeof h)
        return reason_set(why, n, "%s: shorter than llm.c's %zu-byte header", path, sizeof h);
    if (llmc_check_header(h, cfg, reason, sizeof reason))
        return reason_set(why, n, "%s: llm.c header: %s", path, reason);
    int L = h[4], count = 4 + 12 * L;
    int es = h[1] == 5 ? 2 : 4;
    if (!(f->t = calloc((size_t)count, sizeof *f->t)))
        return reason_set(why, n, "%s: out of memory", path);
    uint64_t at = 0;
    for (size_t a = 0; a < sizeof LLMC_ARRAYS / sizeof LLMC_ARRAYS[0]; a++) {
        const LlmcArray *arr = &LLMC_ARRAYS[a];
        for (int l = 0; l < (arr->per_layer ? L : 1); l++) {
            StTensor *t = &f->t[f->n++];
            char name[64];
            if (arr->per_layer)
                snprintf(name, sizeof name, "h.%d.%s", l, arr->name);
            else
                snprintf(name, sizeof name, "%s", arr->name);
            t->name = strdup(name);
            snprintf(t->dtype, sizeof t->dtype, "%s", es == 2 ? "BF16" : "F32");
            t->elem_size = es;
            t->shape[0] = llmc_dim(arr->rows, h);
            t->shape[1] = llmc_dim(arr->cols, h);
            t->ndim = arr->cols == '1' ? 1 : 2;
            t->begin = at;
            at += (uint64_t)(t->shape[0] * t->shape[1]) * (uint64_t)es;
            t->end = at;
            if (!t->name)
                return reason_set(why, n, "%s: out of memory", path);
        }
    }
    f->data_start = sizeof h;
    uint64_t want = sizeof h + at;
    if ((uint64_t)sb.st_size != want)
        return reason_set(why, n, "%s: %llu bytes, its llm.c header describes %llu (%s)", path,
                          (unsigned long long)sb.st_size, (unsigned long long)want,
                          (uint64_t)sb.st_size < want ? "truncated" : "extra bytes at the end");
    return 0;
}

/* ---- HuggingFace's config.json ---------------------------------------- */

/* config.json's tie_word_embeddings (absent: the architecture's default,
 * as transformers' own) into *tied. A tied source may start an untied
 * model, whose head starts as a copy of the embedding; a source with a
 * head of its own cannot load into a tied model, which would drop it. */
static int hf_check_tie(json_t *root, const char *path, const Config *cfg, int *tied,
                        char *why, size_t n)
{
    int dflt = arch_of(&cfg->model)->tied_head;
    json_t *v = json_object_get(root, "tie_word_embeddings");
    *tied = v ? json_is_true(v) : dflt;
    if ((v && !json_is_boolean(v)) || !*tied)
        return hf_config_bool(root, path, "tie_word_embeddings", dflt, "[model] tie_embeddings",
                              cfg->model.tie_embeddings, why, n);
    return 0;
}

/* dir's config.json against [model], by the architecture's own check,
 * and whether its head is tied. */
static int hf_check_config(const char *dir, const Config *cfg, int *tied, char *why, size_t n)
{
    char path[CONFIG_PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/config.json", dir);
    json_error_t err;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &err);
    if (!root)
        return reason_set(why, n, "%s: %s", path, err.text);
    int rc = arch_of(&cfg->model)->hf_check(root, path, cfg, why, n)
             || hf_check_tie(root, path, cfg, tied, why, n);
    json_decref(root);
    return rc;
}

/* ---- the source ------------------------------------------------------- */

static int source_open(Source *s, const Config *cfg, char *why, size_t n)
{
    memset(s, 0, sizeof *s);
    s->path = cfg->checkpoint.init_from;
    struct stat sb;
    int rc;
    if (stat(s->path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        s->names = HF_NAMES_HF;
        rc = hf_check_config(s->path, cfg, &s->tied, why, n)
             || st_model_open(&s->m, s->path, why, n);
    } else {
        s->names = HF_NAMES_LLMC;
        s->tied = 1;
        rc = llmc_open(&s->m, s->path, cfg, why, n);
        if (rc)
            st_model_close(&s->m);
    }
    return rc;
}

/* The source's tensor called name; HF hub's own gpt2 files name theirs
 * without "transformer.". */
static const StTensor *find(const Source *s, const char *name, const StFile **f)
{
    const StTensor *t = st_model_find(&s->m, name, f);
    if (!t && !strncmp(name, "transformer.", 12))
        t = st_model_find(&s->m, name + 12, f);
    return t;
}

/* The source tensor of trident tensor lp, checked against its shape. */
static int source_tensor(const Source *s, const Config *cfg, const Param *lp, HfTensor *map,
                         const StFile **f, const StTensor **t, char *why, size_t n)
{
    int mapped = !hf_map_tensor(cfg, s->names, lp, map);
    *t = mapped ? find(s, map->hf, f) : NULL;
    if (!*t && !strcmp(lp->name, "lm_head")) {
        /* a tied source (GPT-2's, llm.c's) has no head: an untied trident
         * head starts as a copy of the embedding */
        Param alias = *lp;
        snprintf(alias.name, sizeof alias.name, "wte");
        mapped = !hf_map_tensor(cfg, s->names, &alias, map);
        *t = mapped ? find(s, map->hf, f) : NULL;
    }
    if (!mapped)
        return reason_set(why, n, "%s: trident's tensor %s has no name in this format", s->path,
                          lp->name);
    if (!*t)
        return reason_set(why, n, "%s: tensor %s is missing (trident's %s)", s->path, map->hf,
                          lp->name);
    int64_t r = (*t)->ndim >= 1 ? (*t)->shape[0] : 0, c = (*t)->ndim == 2 ? (*t)->shape[1] : 1;
    int ok = (*t)->ndim == map->ndim && c == map->hf_shape[1]
             && (r == map->hf_shape[0] || (map->how->longer_ok && r > map->hf_shape[0]));
    if (!ok)
        return reason_set(why, n, "%s: tensor %s has shape [%lld, %lld] (%d-D), [model] needs "
                          "[%lld, %lld]%s (trident's %s)", (*f)->path, map->hf, (long long)r,
                          (long long)c, (*t)->ndim, (long long)map->hf_shape[0],
                          (long long)map->hf_shape[1], map->how->longer_ok ? " or more rows" : "",
                          lp->name);
    if (strcmp((*t)->dtype, "F32") && strcmp((*t)->dtype, "F16") && strcmp((*t)->dtype, "BF16"))
        return reason_set(why, n, "%s: tensor %s has dtype %s, trident reads F32, F16 or BF16",
                          (*f)->path, map->hf, (*t)->dtype);
    return 0;
}

/* ---- deciding and checking -------------------------------------------- */

/* Rank 0: whether the checkpoint directory holds something to resume. */
static int dir_has_checkpoints(const Config *cfg)
{
    const CheckpointConfig *c = &cfg->checkpoint;
    if (!c->dir[0] || !strcmp(c->resume, "none"))
        return 0;
    int64_t *steps = NULL;
    int n = ckpt_files_list(c->dir, &steps);
    free(steps);
    char latest[CONFIG_PATH_MAX + 16];
    snprintf(latest, sizeof latest, "%s/latest", c->dir);
    return n > 0 || access(latest, F_OK) == 0;
}

/* Whether t is one of read[0..n). */
static int was_read(const StTensor *t, const StTensor *const *read, int n)
{
    for (int i = 0; i < n; i++)
        if (read[i] == t)
            return 1;
    return 0;
}

/* A buffer a published model's files carry beside its weights, which
 * transformers computes again on load: GPT-2's causal masks, Llama's
 * rotary frequencies. Nothing reads them, and nothing is lost. */
static int is_buffer(const char *name)
{
    static const char *const tails[] = {".attn.bias", ".attn.masked_bias",
                                        ".rotary_emb.inv_freq"};
    size_t len = strlen(name);
    for (size_t i = 0; i < sizeof tails / sizeof tails[0]; i++) {
        size_t k = strlen(tails[i]);
        if (len > k && !strcmp(name + len - k, tails[i]))
            return 1;
    }
    return 0;
}

/* A tied source's own lm_head.weight, if it has one, against the
 * embedding it is tied to: the same values are one matrix stored twice
 * (read, then), other values a head that loading would drop. */
static int check_tied_head(const Source *s, const StTensor *wte, const StTensor **head,
                           char *why, size_t n)
{
    const StFile *head_file, *wte_file;
    *head = s->tied && s->names == HF_NAMES_HF ? find(s, "lm_head.weight", &head_file) : NULL;
    if (!*head || !wte || !st_model_find(&s->m, wte->name, &wte_file))
        return 0;
    const char *tie = "config.json ties the head to the embedding (tie_word_embeddings, absent: "
                      "the architecture's default), so this head would be dropped; if it is the "
                      "model's head, set tie_word_embeddings to false there and [model] "
                      "tie_embeddings = false";
    int64_t rows, cols, wrows, wcols;
    st_matrix(*head, &rows, &cols);
    st_matrix(wte, &wrows, &wcols);
    if (rows != wrows || cols != wcols)
        return reason_set(why, n, "%s: tensor lm_head.weight is %lld x %lld, %s %lld x %lld: %s",
                          s->path, (long long)rows, (long long)cols, wte->name,
                          (long long)wrows, (long long)wcols, tie);
    float *a = TRI_MALLOC(2 * (size_t)cols * sizeof *a, "init_from's head check");
    int rc = 0;
    for (int64_t r = 0; r < rows && !rc; r++) {
        rc = st_read_f32(head_file, *head, r, 1, 0, cols, a, why, n)
             || st_read_f32(wte_file, wte, r, 1, 0, cols, a + cols, why, n);
        for (int64_t c = 0; c < cols && !rc; c++)
            if (memcmp(&a[c], &a[cols + c], sizeof *a))
                rc = reason_set(why, n, "%s: tensor lm_head.weight differs from %s (first at "
                                "[%lld, %lld]: %g, %g): %s", s->path, wte->name, (long long)r,
                                (long long)c, a[c], a[cols + c], tie);
    }
    free(a);
    return rc;
}

/* Every tensor of the source that trident reads (read[0..n_read), and a
 * tied source's head equal to its embedding) or that is a buffer: a
 * tensor nothing reads is a part of the model that the run would drop
 * (a block past [model] n_layer, say). Buffers get a note. */
static int check_unread(const Source *s, const StTensor *const *read, int n_read, char *why,
                        size_t n)
{
    char names[512] = "";
    int unread = 0, buffers = 0;
    for (int i = 0; i < s->m.n_files; i++)
        for (int j = 0; j < s->m.files[i].n; j++) {
            const StTensor *t = &s->m.files[i].t[j];
            if (was_read(t, read, n_read))
                continue;
            if (is_buffer(t->name)) {
                buffers++;
                continue;
            }
            if (unread++ < UNREAD_NAMED)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
                         unread > 1 ? ", " : "", t->name);
        }
    char more[32] = "";
    if (unread > UNREAD_NAMED)
        snprintf(more, sizeof more, " (and %d more)", unread - UNREAD_NAMED);
    if (unread)
        return reason_set(why, n, "%s: %d tensor%s that no tensor of [model] reads, which the "
                          "run would drop: %s%s: config.json and [model] describe another model "
                          "than the files hold", s->path, unread, unread > 1 ? "s" : "", names,
                          more);
    if (buffers)
        printf("note: [checkpoint] init_from: %s holds %d buffer%s that transformers computes "
               "on load (attn.bias, attn.masked_bias, rotary_emb.inv_freq): not weights, not "
               "read\n", s->path, buffers, buffers > 1 ? "s" : "");
    return 0;
}

/* The zero bias the source's format keeps for trident weight lp, if any
 * (hf_map_zero_bias: Qwen2-MoE's q, k, v biases, which trident's
 * attention lacks), in *t: present, 1-D of lp's rows, and all zeros, for
 * any other bias would change what the model computes. */
static int check_zero_bias(const Source *s, const Config *cfg, const Param *lp,
                           const StTensor **t, char *why, size_t n)
{
    HfTensor map;
    const StFile *f;
    *t = NULL;
    if (s->names != HF_NAMES_HF || hf_map_zero_bias(cfg, lp, &map))
        return 0;
    if (!(*t = find(s, map.hf, &f)))
        return reason_set(why, n, "%s: tensor %s is missing (the bias of trident's %s, which "
                          "must be zeros)", s->path, map.hf, lp->name);
    if ((*t)->ndim != 1 || (*t)->shape[0] != map.rows)
        return reason_set(why, n, "%s: tensor %s is not 1-D of %lld values (the bias of "
                          "trident's %s)", f->path, map.hf, (long long)map.rows, lp->name);
    float *v = TRI_MALLOC((size_t)map.rows * sizeof *v, "init_from's bias check");
    int rc = st_read_f32(f, *t, 0, map.rows, 0, 1, v, why, n);
    for (int64_t i = 0; i < map.rows && !rc; i++)
        if (v[i] != 0.0f)
            rc = reason_set(why, n, "%s: tensor %s holds %g at [%lld]: trident's attention "
                            "has no bias, so it reads this one only if all zeros (trident's "
                            "export writes zeros)", f->path, map.hf, v[i], (long long)i);
    free(v);
    return rc;
}

/* Rank 0: every tensor [model] needs is in the source with its shape and
 * a float dtype, and every tensor of the source is read. */
static int check_all(const Config *cfg, char *why, size_t n)
{
    Source s;
    int rc = source_open(&s, cfg, why, n);
    ParamSet ps = {0};
    if (!rc) {
        ckpt_logical_tensors(cfg, &ps);
        /* each tensor's, then its zero bias's, then a tied head's */
        const StTensor **read = TRI_CALLOC(2 * (size_t)ps.n + 1, sizeof *read,
                                           "init_from's check");
        const StTensor *wte = NULL, *head = NULL;
        for (int i = 0; i < ps.n && !rc; i++) {
            HfTensor map;
            const StFile *f;
            rc = source_tensor(&s, cfg, &ps.p[i], &map, &f, &read[i], why, n)
                 || check_zero_bias(&s, cfg, &ps.p[i], &read[ps.n + i], why, n);
            if (!strcmp(ps.p[i].name, "wte"))
                wte = read[i];
            if (!rc && !strcmp(ps.p[i].name, "lm_head") && read[i] == wte)
                printf("note: [checkpoint] init_from: %s ties its head to the embedding and "
                       "[model] tie_embeddings = false unties it: lm_head starts as a copy of "
                       "%s\n", s.path, wte->name);
        }
        rc = rc || check_tied_head(&s, wte, &head, why, n);
        read[2 * ps.n] = head;
        rc = rc || check_unread(&s, read, 2 * ps.n + 1, why, n);
        free(read);
        params_free(&ps);
    }
    st_model_close(&s.m);
    return rc;
}

int init_from_check(const Config *cfg, const Grid *g, int *use)
{
    char msg[MSG_MAX] = "";
    int rc = 0, decided = 0;
    if (g->layout.rank == 0 && cfg->checkpoint.init_from[0]) {
        decided = !dir_has_checkpoints(cfg);
        if (!decided)
            printf("note: [checkpoint] dir = %s holds checkpoints: resuming them; init_from = "
                   "%s starts new runs only and is ignored\n", cfg->checkpoint.dir,
                   cfg->checkpoint.init_from);
        char why[MSG_MAX - 64];
        if (decided && check_all(cfg, why, sizeof why)) {
            snprintf(msg, sizeof msg, "trident: [checkpoint] init_from: %s\n", why);
            rc = 1;
        }
    }
    TRI_TRY(fail_report(g->world, rc, msg));
    comm_bcast_bytes(g, COMM_WORLD, &decided, sizeof decided, 0);
    *use = decided;
    return 0;
}

/* ---- loading ---------------------------------------------------------- */

typedef struct {
    const Source *s;
    const Config *cfg;
    char *why;
    size_t n;
} FillCtx;

/* The rows x cols elements just read from t, rows [r0, ...) and columns
 * [c0, ...) of it as st_matrix sees it, are all finite: a NaN or an
 * infinity would only show as a NaN loss at step 1, blamed on the
 * learning rate. Names the file, the tensor and the first bad element. */
static int check_finite(const FillCtx *x, const StFile *f, const StTensor *t, const float *v,
                        int64_t r0, int64_t rows, int64_t c0, int64_t cols)
{
    for (int64_t e = 0; e < rows * cols; e++) {
        if (isfinite(v[e]))
            continue;
        int64_t r = r0 + e / cols, c = c0 + e % cols;
        char at[64];
        if (t->ndim == 1)
            snprintf(at, sizeof at, "[%lld]", (long long)r);
        else
            snprintf(at, sizeof at, "[%lld, %lld]", (long long)r, (long long)c);
        return reason_set(x->why, x->n, "%s: tensor %s holds %g at %s: a model with a NaN or "
                          "infinite weight cannot train", f->path, t->name, v[e], at);
    }
    return 0;
}

/* Rows [r, r+k) of p's block from the source: k source rows, or k source
 * columns (transposed) read into scratch and turned; each checked finite. */
static int read_run(const FillCtx *x, const Param *p, const HfTensor *map, const StFile *f,
                    const StTensor *t, int64_t r, int64_t k, float *block, float *scratch)
{
    int64_t h = hf_map_row(map, r), nc = p->lcols;
    float *dst = block + (r - p->row0) * nc;
    if (!map->how->transpose) {
        TRI_TRY(st_read_f32(f, t, h, k, p->col0, nc, dst, x->why, x->n));
        return check_finite(x, f, t, dst, h, k, p->col0, nc);
    }
    TRI_TRY(st_read_f32(f, t, p->col0, nc, h, k, scratch, x->why, x->n));
    TRI_TRY(check_finite(x, f, t, scratch, p->col0, nc, h, k));
    for (int64_t j = 0; j < k; j++)
        for (int64_t i = 0; i < nc; i++)
            dst[j * nc + i] = scratch[i * k + j];
    return 0;
}

static int fill_block(const Param *p, float *block, void *ctx)
{
    const FillCtx *x = ctx;
    HfTensor map;
    const StFile *f;
    const StTensor *t;
    TRI_TRY(source_tensor(x->s, x->cfg, p, &map, &f, &t, x->why, x->n));
    float *scratch = map.how->transpose ? TRI_MALLOC((size_t)(p->lrows * p->lcols) * sizeof *scratch,
                                                     "init_from's transpose") : NULL;
    int rc = 0;
    int64_t end = p->row0 + p->lrows;
    for (int64_t r = p->row0; r < end && !rc;) {
        if (r >= map.rows) {  /* the vocabulary's padding: zeros, as llm.c's */
            memset(block + (r - p->row0) * p->lcols, 0, (size_t)((end - r) * p->lcols)
                   * sizeof *block);
            break;
        }
        int64_t k = 1;
        while (r + k < end && r + k < map.rows && hf_map_row(&map, r + k) == hf_map_row(&map, r) + k)
            k++;
        rc = read_run(x, p, &map, f, t, r, k, block, scratch);
        r += k;
    }
    free(scratch);
    return rc;
}

int init_from_load(Zero *z, const Config *cfg, const Grid *g)
{
    char why[MSG_MAX - 64] = "", msg[MSG_MAX] = "";
    Source s;
    int rc = source_open(&s, cfg, why, sizeof why);
    if (!rc) {
        FillCtx x = {&s, cfg, why, sizeof why};
        rc = zero_fill_weights(z, fill_block, &x);
    }
    if (rc)
        snprintf(msg, sizeof msg, "trident: [checkpoint] init_from: %s\n", why);
    st_model_close(&s.m);
    TRI_TRY(fail_report(g->world, rc, msg));
    if (g->layout.rank == 0)
        printf("initialised from %s (%s): step 0, a fresh optimizer\n", cfg->checkpoint.init_from,
               s.names == HF_NAMES_HF ? "HuggingFace safetensors" : "llm.c model file");
    return 0;
}
