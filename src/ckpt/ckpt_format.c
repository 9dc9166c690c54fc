/*
 * ckpt_format.c - the checkpoint format shared by ckpt.c and inspect.c:
 * the root attribute table, attribute I/O, the checksum; see
 * ckpt_format.h.
 */
#include "ckpt_format.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "arch_sizes.h"
#include "config.h"
#include "config_ini.h"
#include "config_load.h"
#include "file_check.h"
#include "layout.h"
#include "params_stage.h"
#include "reason.h"
#include "rng.h"

/* HDF5 1.12 renamed a few calls; keep building against 1.10 (Debian 12)
 * and newer releases (cluster modules). */
#if H5_VERSION_GE(1, 12, 0)
#define tri_h5_is_hdf5(path, fapl) H5Fis_accessible(path, fapl)
#else
#define tri_h5_is_hdf5(path, fapl) ((void)(fapl), H5Fis_hdf5(path))
#endif

/* SHAPE and SEED values are read in place from Config's fields. */
_Static_assert(sizeof(int) == sizeof(int32_t), "the model's shape is stored as int32");
_Static_assert(sizeof(unsigned long long) == sizeof(uint64_t), "the seed is stored as uint64");

/* ---- range checks ------------------------------------------------------
 * What a save can write, so that one flipped bit in a file without a
 * checksum (version 1), or in one whose checksum was forged, is refused
 * with the attribute's name instead of resuming at step -2147483644 or
 * reading sample -2^63. */

static int check_version(const CkptRoot *r, char *why, size_t n)
{
    if (r->format_version < CKPT_FORMAT_OLDEST || r->format_version > CKPT_FORMAT_VERSION)
        return reason_set(why, n, "this trident reads versions %d to %d", CKPT_FORMAT_OLDEST,
                          CKPT_FORMAT_VERSION);
    return 0;
}

static int check_program(const CkptRoot *r, char *why, size_t n)
{
    return strncmp(r->program_version, "trident ", 8) ? reason_set(why, n, "must start with \"trident \"") : 0;
}

/* A save comes after a step (never at step 0) and at most at the last one
 * the config it stores asks for. */
static int check_step(const CkptRoot *r, char *why, size_t n)
{
    int64_t most = r->stored_ok ? r->stored.train.steps : INT_MAX;
    if (r->st.step < 1 || r->st.step > most)
        return reason_set(why, n, "must be between 1 and %lld (%s)", (long long)most,
                          r->stored_ok ? "[train] steps of the stored config" : "the largest step count");
    return 0;
}

/* Each step takes at least one sample and seq_len tokens per sample, so
 * tokens_seen = data_cursor * seq_len, and neither overflows. */
static int check_cursor(const CkptRoot *r, char *why, size_t n)
{
    int64_t T = r->cfg.model.seq_len > 0 ? r->cfg.model.seq_len : 1;
    if (r->st.cursor < r->st.step || r->st.cursor > INT64_MAX / T)
        return reason_set(why, n, "must be between step (%lld) and %lld", (long long)r->st.step,
                          (long long)(INT64_MAX / T));
    return 0;
}

static int check_tokens(const CkptRoot *r, char *why, size_t n)
{
    char ignored[128];
    int64_t T = r->cfg.model.seq_len;
    if (check_cursor(r, ignored, sizeof ignored))
        return 0;  /* data_cursor's own check names it */
    if (T < 1 || r->st.tokens % T || r->st.tokens / T != r->st.cursor)
        return reason_set(why, n, "must be data_cursor (%lld) x seq_len (%d)",
                          (long long)r->st.cursor, r->cfg.model.seq_len);
    return 0;
}

static int at_most_step(int64_t v, const CkptRoot *r, char *why, size_t n)
{
    if (v < 0 || v > r->st.step)
        return reason_set(why, n, "must be between 0 and step (%lld)", (long long)r->st.step);
    return 0;
}

static int check_updates(const CkptRoot *r, char *why, size_t n)
{
    return at_most_step(r->st.updates, r, why, n);
}

static int check_good_steps(const CkptRoot *r, char *why, size_t n)
{
    return at_most_step(r->st.scale_good_steps, r, why, n);
}

static int check_overflows(const CkptRoot *r, char *why, size_t n)
{
    return at_most_step(r->st.scale_overflows, r, why, n);
}

static int check_evals_bad(const CkptRoot *r, char *why, size_t n)
{
    return at_most_step(r->st.evals_bad, r, why, n);
}

static int check_loss_scale(const CkptRoot *r, char *why, size_t n)
{
    if (!(r->st.loss_scale > 0) || !isfinite(r->st.loss_scale))
        return reason_set(why, n, "must be a finite number > 0");
    return 0;
}

/* A cross-entropy is never negative; inf means no evaluation yet. */
static int check_best_val(const CkptRoot *r, char *why, size_t n)
{
    if (!(r->st.best_val >= 0))
        return reason_set(why, n, "must be >= 0 (inf before the first evaluation)");
    return 0;
}

static int check_seed(const CkptRoot *r, char *why, size_t n)
{
    if (r->stored_ok && r->cfg.train.seed != r->stored.train.seed)
        return reason_set(why, n, "the stored config's [train] seed is %llu",
                          r->stored.train.seed);
    return 0;
}

/* The shape the load checks against the config, and the one `sample` and
 * `inspect` take from the stored config: they must be the same. */
#define SHAPE_CHECK(key, lo)                                                              \
    static int check_##key(const CkptRoot *r, char *why, size_t n)                       \
    {                                                                                     \
        if (r->cfg.model.key < (lo))                                                      \
            return reason_set(why, n, "must be at least %d", (lo));                           \
        if (r->stored_ok && r->cfg.model.key != r->stored.model.key)                      \
            return reason_set(why, n, "the stored config's [model] " #key " is %d",          \
                              r->stored.model.key);                                           \
        return 0;                                                                         \
    }
SHAPE_CHECK(n_layer, 1)
SHAPE_CHECK(n_embd, 1)
SHAPE_CHECK(n_head, 1)
SHAPE_CHECK(seq_len, 1)
SHAPE_CHECK(vocab_size, 1)
SHAPE_CHECK(tie_embeddings, 0)

/* "world=W dp=D pp=P tp=T", then " cp=C" where the run had context
 * parallelism (C = 1 where it is not written) */
static int check_layout(const CkptRoot *r, char *why, size_t n)
{
    int world, dp, pp, tp, cp = 1, used = 0;
    int ok = sscanf(r->layout, "world=%d dp=%d pp=%d tp=%d%n", &world, &dp, &pp, &tp, &used) == 4;
    if (ok && !strncmp(r->layout + used, " cp=", 4))
        ok = sscanf(r->layout + used, " cp=%d", &cp) == 1;
    if (!ok || dp < 1 || pp < 1 || tp < 1 || cp < 1 || (long long)dp * pp * cp * tp != world)
        return reason_set(why, n, "must be \"world=W dp=D pp=P tp=T [cp=C] ...\" with W = D * P * "
                          "C * T (C = 1 where not given)");
    return 0;
}

static int check_config(const CkptRoot *r, char *why, size_t n)
{
    return r->stored_ok ? 0 : reason_set(why, n, "%s", r->stored_why);
}

#define AT(field) offsetof(CkptRoot, field)
#define STATE(name, type, field, check) { name, type, CKPT_FROM_STATE, AT(st.field), check }
#define SHAPE(key) { #key, CKPT_I32, CKPT_FROM_SHAPE, AT(cfg.model.key), check_##key }

const CkptRootAttr ckpt_root_attrs[] = {
    { "format_version", CKPT_I32, CKPT_FROM_VERSION, AT(format_version), check_version },
    { "program_version", CKPT_STRING, CKPT_FROM_PROGRAM, AT(program_version), check_program },
    STATE("step", CKPT_I64, step, check_step),
    STATE("tokens_seen", CKPT_I64, tokens, check_tokens),
    STATE("data_cursor", CKPT_I64, cursor, check_cursor),
    STATE("optimizer_updates", CKPT_I64, updates, check_updates),
    STATE("loss_scale", CKPT_F64, loss_scale, check_loss_scale),
    STATE("loss_scale_good_steps", CKPT_I64, scale_good_steps, check_good_steps),
    STATE("loss_scale_overflows", CKPT_I32, scale_overflows, check_overflows),
    STATE("best_val_loss", CKPT_F64, best_val, check_best_val),
    STATE("evals_without_improvement", CKPT_I32, evals_bad, check_evals_bad),
    { "rng_seed", CKPT_U64, CKPT_FROM_SEED, AT(cfg.train.seed), check_seed },
    SHAPE(n_layer),
    SHAPE(n_embd),
    SHAPE(n_head),
    SHAPE(seq_len),
    SHAPE(vocab_size),
    SHAPE(tie_embeddings),
    { "layout", CKPT_STRING, CKPT_FROM_LAYOUT, AT(layout), check_layout },
    { "config", CKPT_STRING, CKPT_FROM_CONFIG, AT(config), check_config },
    { "attrs_checksum", CKPT_U64, CKPT_FROM_CHECKSUM, AT(attrs_checksum), NULL },
};
const int ckpt_n_root_attrs = (int)(sizeof ckpt_root_attrs / sizeof ckpt_root_attrs[0]);
_Static_assert(sizeof ckpt_root_attrs / sizeof ckpt_root_attrs[0] <= CKPT_MAX_ROOT_ATTRS,
               "CkptRoot.present has a place for each root attribute");

const CkptRootAttr *ckpt_root_attr(CkptAttrSource source)
{
    for (int i = 0; i < ckpt_n_root_attrs; i++)
        if (ckpt_root_attrs[i].source == source)
            return &ckpt_root_attrs[i];
    return NULL;
}

hid_t ckpt_attr_native(CkptAttrType type)
{
    switch (type) {
    case CKPT_I32:
        return H5T_NATIVE_INT32;
    case CKPT_I64:
        return H5T_NATIVE_INT64;
    case CKPT_U64:
        return H5T_NATIVE_UINT64;
    case CKPT_F64:
        return H5T_NATIVE_DOUBLE;
    case CKPT_STRING:
        break;
    }
    return -1;
}

void ckpt_fail(CkptFile *f, const char *fmt, ...)
{
    if (f->rc)
        return;
    f->rc = 1;
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(f->msg, sizeof f->msg, "trident: checkpoint %s: ", f->path);
    vsnprintf(f->msg + n, sizeof f->msg - (size_t)n, fmt, ap);
    va_end(ap);
    strncat(f->msg, "\n", sizeof f->msg - strlen(f->msg) - 1);
}

hid_t ckpt_open(CkptFile *f, const char *path, hid_t fapl)
{
    struct stat sb;
    if (stat(path, &sb) != 0) {
        ckpt_fail(f, "%s", strerror(errno));
        return -1;
    }
    /* HDF5's open() would block on a FIFO; a directory gets its own answer */
    if (!S_ISREG(sb.st_mode) && !S_ISDIR(sb.st_mode)) {
        ckpt_fail(f, "%s, not a regular file", file_kind(sb.st_mode));
        return -1;
    }
    if (tri_h5_is_hdf5(path, fapl) <= 0) {
        ckpt_fail(f, "not an HDF5 file, or truncated");
        return -1;
    }
    hid_t id = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    if (id < 0)
        ckpt_fail(f, "cannot open (truncated or corrupt HDF5 file?)");
    return id;
}

hid_t ckpt_open_serial(CkptFile *f, const char *path)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    hid_t id = ckpt_open(f, path, fapl);
    H5Pclose(fapl);
    return id;
}

void ckpt_attr_write(CkptFile *f, hid_t obj, const char *name, hid_t type, const void *v)
{
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    if (a < 0 || H5Awrite(a, type, v) < 0)
        ckpt_fail(f, "cannot write attribute %s", name);
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(space);
}

void ckpt_attr_write_string(CkptFile *f, hid_t obj, const char *name, const char *s)
{
    hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, strlen(s) + 1);
    ckpt_attr_write(f, obj, name, type, s);
    H5Tclose(type);
}

void ckpt_attr_write_root(CkptFile *f, const CkptRootAttr *a, const void *v)
{
    if (a->type == CKPT_STRING)
        ckpt_attr_write_string(f, f->id, a->name, v);
    else
        ckpt_attr_write(f, f->id, a->name, ckpt_attr_native(a->type), v);
}

/* A damaged or foreign file may hold an array under the same name:
 * H5Aread would then write past v. */
int ckpt_attr_read(hid_t obj, const char *name, hid_t type, void *v)
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

char *ckpt_attr_read_string(hid_t obj, const char *name)
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

void ckpt_logical_tensors(const Config *cfg, ParamSet *out)
{
    Config one = *cfg;
    one.parallel.pp = one.parallel.tp = one.parallel.cp = 1;
    one.parallel.ep = 1; /* every expert, each by its name: resumes on any ep */
    one.parallel.virtual_stages = 1; /* one chunk: every layer, in order */
    Layout whole = layout_at(&one.parallel, 1, 0, 0, 0); /* one rank holds everything */
    params_build(out, &one, &whole);
}

void ckpt_dataset_path(char *out, size_t size, const char *name, int part)
{
    static const char *const fmt[] = {"/model/%s", "/optim/%s/m", "/optim/%s/v"};
    snprintf(out, size, fmt[part], name);
}

/* H5Lexists on a path checks each link on the way: "/optim/x/m" with no
 * group "/optim/x" is an error, not "no". */
static int path_exists(hid_t file, const char *path)
{
    char prefix[256];
    size_t len = strlen(path);
    if (len >= sizeof prefix)
        return 0;
    for (size_t i = 1; i <= len; i++) {
        if (path[i] != '/' && path[i] != 0)
            continue;
        memcpy(prefix, path, i);
        prefix[i] = 0;
        if (H5Lexists(file, prefix, H5P_DEFAULT) <= 0)
            return 0;
    }
    return 1;
}

hid_t ckpt_dataset_open(hid_t file, const char *path, const Param *lp, char *why, size_t n)
{
    why[0] = 0;
    if (!path_exists(file, path)) {
        snprintf(why, n, "is missing");
        return -1;
    }
    hid_t d = H5Dopen2(file, path, H5P_DEFAULT);
    if (d < 0) {
        snprintf(why, n, "cannot be opened");
        return -1;
    }
    hid_t type = H5Dget_type(d), space = H5Dget_space(d);
    hsize_t dims[2] = {0, 0};
    int ndim = space < 0 ? -1 : H5Sget_simple_extent_ndims(space);
    if (ndim >= 1 && ndim <= 2)
        H5Sget_simple_extent_dims(space, dims, NULL);
    if (type < 0 || H5Tget_class(type) != H5T_FLOAT || H5Tget_size(type) != 4)
        snprintf(why, n, "is not fp32");
    else if (ndim != lp->ndim || dims[0] != (hsize_t)lp->rows
             || (ndim == 2 && dims[1] != (hsize_t)lp->cols))
        snprintf(why, n, "has shape %llu x %llu, the model needs %lld x %lld",
                 (unsigned long long)dims[0], (unsigned long long)dims[1],
                 (long long)lp->rows, (long long)lp->cols);
    if (type >= 0)
        H5Tclose(type);
    if (space >= 0)
        H5Sclose(space);
    return d;
}

/* ---- the dataset checksum ----------------------------------------------
 * sum over elements of rng_mix64((bits << 32) ^ (index * GOLDEN)), index the
 * element's row-major place in the whole tensor, modulo 2^64. A save hashes
 * all 90 M elements of the mid model's checkpoint, so the loop is written
 * for speed; the value is format 2's and must not change (an independent
 * reader recomputes it; doc/checkpoint-format.md).
 *
 * Along a row the index grows by one, so index * GOLDEN grows by GOLDEN:
 * an addition instead of a multiplication per element. With AVX2 (chosen
 * at run time: the build targets plain x86-64) eight elements go through
 * the mixer at once in two independent vectors of four; AVX2 has no
 * 64-bit multiply, and GCC's and Clang's vector extensions build it from
 * three 32-bit ones. Measured on AMD EPYC (family 25 model 1, 2 vCPUs
 * under KVM): 2.0 ns an element scalar, 1.05 ns this way, the same sums.
 * The additions wrap, so any order of them gives the same sum. */
#define CKPT_GOLDEN 0x9e3779b97f4a7c15ULL

static inline uint64_t element_mix(uint32_t bits, uint64_t index_golden)
{
    return rng_mix64(((uint64_t)bits << 32) ^ index_golden);
}

/* The hashes of n consecutive elements of a row, the first at index k /
 * GOLDEN (k: its index times GOLDEN). */
static uint64_t row_sum_scalar(const float *row, uint64_t k, int64_t n)
{
    uint64_t sum = 0;
    for (int64_t c = 0; c < n; c++, k += CKPT_GOLDEN) {
        uint32_t bits;
        memcpy(&bits, &row[c], sizeof bits);
        sum += element_mix(bits, k);
    }
    return sum;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TRI_CKSUM_AVX2 1
typedef uint64_t cksum_u64x4 __attribute__((vector_size(32)));
typedef uint32_t cksum_u32x4 __attribute__((vector_size(16)));

__attribute__((target("avx2"))) static inline cksum_u64x4 mix4(const float *at, cksum_u64x4 k)
{
    cksum_u32x4 w;
    memcpy(&w, at, sizeof w);
    cksum_u64x4 x = (__builtin_convertvector(w, cksum_u64x4) << 32) ^ k;
    RNG_MIX64_INPLACE(x); /* element_mix, four lanes at once */
    return x;
}

__attribute__((target("avx2"))) static uint64_t row_sum_avx2(const float *row, uint64_t k,
                                                             int64_t n)
{
    const uint64_t g = CKPT_GOLDEN;
    cksum_u64x4 a = {0, 0, 0, 0}, b = {0, 0, 0, 0};
    cksum_u64x4 ka = {k, k + g, k + 2 * g, k + 3 * g}, kb = ka + 4 * g;
    int64_t c = 0;
    for (; c + 8 <= n; c += 8, ka += 8 * g, kb += 8 * g) {
        a += mix4(row + c, ka);
        b += mix4(row + c + 4, kb);
    }
    a += b;
    return a[0] + a[1] + a[2] + a[3] + row_sum_scalar(row + c, k + (uint64_t)c * g, n - c);
}
#else
#define TRI_CKSUM_AVX2 0
#endif

uint64_t ckpt_checksum(const float *data, int64_t r0, int64_t nr, int64_t c0, int64_t nc,
                       int64_t cols)
{
    uint64_t sum = 0;
    int avx2 = 0;
#if TRI_CKSUM_AVX2
    avx2 = __builtin_cpu_supports("avx2");
#endif
    #pragma omp parallel for reduction(+ : sum) schedule(static)
    for (int64_t r = 0; r < nr; r++) {
        uint64_t k = (uint64_t)((r0 + r) * cols + c0) * CKPT_GOLDEN;
#if TRI_CKSUM_AVX2
        if (avx2) {
            sum += row_sum_avx2(data + r * nc, k, nc);
            continue;
        }
#endif
        sum += row_sum_scalar(data + r * nc, k, nc);
    }
    (void)avx2;
    return sum;
}

/* ---- the root attributes as a whole ------------------------------------ */

static void *root_field(CkptRoot *r, const CkptRootAttr *a)
{
    return (char *)r + a->offset;
}

static const void *root_value(const CkptRoot *r, const CkptRootAttr *a)
{
    return (const char *)r + a->offset;
}

/* FNV-1a, 64 bit: any change of one byte changes the result. */
#define FNV_OFFSET 0xcbf29ce484222325ULL
#define FNV_PRIME 0x100000001b3ULL

static uint64_t fnv_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * FNV_PRIME;
    return h;
}

/* v's n low bytes, least significant first, whatever the host's order. */
static uint64_t fnv_le(uint64_t h, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        h = (h ^ ((v >> (8 * i)) & 0xff)) * FNV_PRIME;
    return h;
}

static uint64_t fold_attr(uint64_t h, const CkptRoot *r, const CkptRootAttr *a)
{
    h = fnv_bytes(h, a->name, strlen(a->name) + 1);
    const void *v = root_value(r, a);
    switch (a->type) {
    case CKPT_I32: {
        int32_t x;
        memcpy(&x, v, sizeof x);
        return fnv_le(h, (uint32_t)x, 4);
    }
    case CKPT_I64:
    case CKPT_U64:
    case CKPT_F64: {
        uint64_t x;
        memcpy(&x, v, sizeof x);
        return fnv_le(h, x, 8);
    }
    case CKPT_STRING: {
        const char *s = *(char *const *)v;
        size_t len = s ? strlen(s) : 0;
        h = fnv_le(h, (uint64_t)len, 8);
        return fnv_bytes(h, s ? s : "", len);
    }
    }
    return h;
}

uint64_t ckpt_root_checksum(const CkptRoot *r)
{
    uint64_t h = FNV_OFFSET;
    for (int i = 0; i < ckpt_n_root_attrs; i++)
        if (ckpt_root_attrs[i].source != CKPT_FROM_CHECKSUM)
            h = fold_attr(h, r, &ckpt_root_attrs[i]);
    return h;
}

void ckpt_root_write(CkptFile *f, CkptRoot *r)
{
    static char program[] = "trident " PACKAGE_VERSION;
    r->format_version = CKPT_FORMAT_VERSION;
    r->program_version = program;
    r->attrs_checksum = ckpt_root_checksum(r);
    for (int i = 0; i < ckpt_n_root_attrs; i++) {
        const CkptRootAttr *a = &ckpt_root_attrs[i];
        const void *v = root_value(r, a);
        ckpt_attr_write_root(f, a, a->type == CKPT_STRING ? *(char *const *)v : v);
    }
}

static void parse_stored_config(CkptRoot *r)
{
    config_defaults(&r->stored);
    if (!r->config) {
        snprintf(r->stored_why, sizeof r->stored_why, "missing");
        return;
    }
    char msg[sizeof r->stored_why] = "";
    FILE *err = fmemopen(msg, sizeof msg, "w");
    int rc = !err || config_parse_text(&r->stored, r->config, "stored config", err);
    if (err)
        fclose(err);
    r->stored_ok = !rc;
    /* "trident: stored config:3: ...\n" -> "stored config:3: ..." */
    char *text = strncmp(msg, "trident: ", 9) == 0 ? msg + 9 : msg;
    text[strcspn(text, "\n")] = 0;
    snprintf(r->stored_why, sizeof r->stored_why, "%s", rc ? text : "");
    if (r->stored_ok) /* gpt2's shape is in root attributes; llama's keys only here */
        arch_copy_keys(&r->cfg.model, &r->stored.model);
}

void ckpt_root_read(hid_t file, CkptRoot *r)
{
    memset(r, 0, sizeof *r);
    config_defaults(&r->cfg);
    for (int i = 0; i < ckpt_n_root_attrs; i++) {
        const CkptRootAttr *a = &ckpt_root_attrs[i];
        void *v = root_field(r, a);
        if (a->type == CKPT_STRING) {
            char *s = ckpt_attr_read_string(file, a->name);
            memcpy(v, &s, sizeof s);
            r->present[i] = s != NULL;
        } else {
            r->present[i] = !ckpt_attr_read(file, a->name, ckpt_attr_native(a->type), v);
        }
    }
    parse_stored_config(r);
}

void ckpt_root_free(CkptRoot *r)
{
    free(r->program_version);
    free(r->layout);
    free(r->config);
    r->program_version = r->layout = r->config = NULL;
}

static int table_index(CkptAttrSource source)
{
    return (int)(ckpt_root_attr(source) - ckpt_root_attrs);
}

int ckpt_root_problem(const CkptRoot *r, int i, char *why, size_t n)
{
    const CkptRootAttr *a = &ckpt_root_attrs[i];
    if (!r->present[i]) {
        /* a version 1 file has no checksum, and needs none */
        if (a->source == CKPT_FROM_CHECKSUM && r->present[table_index(CKPT_FROM_VERSION)]
            && r->format_version == 1)
            return 0;
        return reason_set(why, n, "missing");
    }
    return a->check ? a->check(r, why, n) : 0;
}

void ckpt_root_format(const CkptRoot *r, int i, char *out, size_t n)
{
    const CkptRootAttr *a = &ckpt_root_attrs[i];
    const void *v = root_value(r, a);
    if (!r->present[i]) {
        snprintf(out, n, "?");
        return;
    }
    switch (a->type) {
    case CKPT_I32:
        snprintf(out, n, "%d", *(const int32_t *)v);
        break;
    case CKPT_I64:
        snprintf(out, n, "%lld", (long long)*(const int64_t *)v);
        break;
    case CKPT_U64:
        snprintf(out, n, a->source == CKPT_FROM_CHECKSUM ? "0x%016llx" : "%llu",
                 (unsigned long long)*(const uint64_t *)v);
        break;
    case CKPT_F64:
        snprintf(out, n, "%.17g", *(const double *)v);
        break;
    case CKPT_STRING: {
        const char *s = *(char *const *)v;
        if (strchr(s, '\n') || strlen(s) >= n)
            snprintf(out, n, "(%zu bytes of text, printed below)", strlen(s));
        else
            snprintf(out, n, "%s", s);
        break;
    }
    }
}

CkptSumState ckpt_root_sum_state(const CkptRoot *r)
{
    int version = table_index(CKPT_FROM_VERSION), sum = table_index(CKPT_FROM_CHECKSUM);
    if (r->present[version] && r->format_version == 1 && !r->present[sum])
        return CKPT_SUM_NONE;
    if (!r->present[sum])
        return CKPT_SUM_MISSING;
    return r->attrs_checksum == ckpt_root_checksum(r) ? CKPT_SUM_VERIFIED : CKPT_SUM_MISMATCH;
}

int ckpt_root_verify(CkptFile *f, const CkptRoot *r)
{
    const CkptRootAttr *version = ckpt_root_attr(CKPT_FROM_VERSION);
    char why[512], value[64];
    if (!r->present[table_index(CKPT_FROM_VERSION)]) {
        ckpt_fail(f, "no %s attribute: not a trident checkpoint", version->name);
        return f->rc;
    }
    if (version->check(r, why, sizeof why)) {
        ckpt_fail(f, "format version %d, %s", r->format_version, why);
        return f->rc;
    }
    /* range first: it names the attribute that is wrong */
    CkptSumState sum = ckpt_root_sum_state(r);
    for (int i = 0; i < ckpt_n_root_attrs && !f->rc; i++) {
        if (!ckpt_root_problem(r, i, why, sizeof why))
            continue;
        ckpt_root_format(r, i, value, sizeof value);
        ckpt_fail(f, "root attribute %s is %s%s%s (%s)", ckpt_root_attrs[i].name,
                  r->present[i] ? value : "missing", r->present[i] ? ": " : "",
                  r->present[i] ? why : "",
                      sum == CKPT_SUM_MISMATCH ? "and the root attributes do not match their "
                                                 "checksum: a damaged file"
                                               : "a damaged file?");
    }
    if (!f->rc && sum == CKPT_SUM_MISMATCH)
        ckpt_fail(f, "the root attributes do not match their checksum (attrs_checksum): one of "
                  "them was changed; `trident inspect` lists them");
    return f->rc;
}
