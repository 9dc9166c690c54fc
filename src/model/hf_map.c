/*
 * hf_map.c - trident's tensors in HuggingFace's names and layouts; see
 * hf_map.h. The tables themselves are the architectures' (arch_gpt2.c,
 * arch_llama.c).
 */
#include "hf_map.h"

#include <stdio.h>
#include <string.h>

#include "arch.h"

/* The numbers that stand as whole dot-separated parts of a trident name,
 * in order, at most two: "h.3.moe.e.5.gate.w" gives 3 and 5 (the layer,
 * the expert), "wte" none. Returns how many. */
static int name_indices(const char *name, int idx[2])
{
    int count = 0;
    for (const char *p = name; *p && count < 2;) {
        int value, end = 0;
        if (sscanf(p, "%d%n", &value, &end) == 1 && end > 0 && (p[end] == '.' || !p[end])
            && p[0] >= '0' && p[0] <= '9')
            idx[count++] = value;
        p = strchr(p, '.');
        p = p ? p + 1 : "";
    }
    return count;
}

static int count_indices(const char *format)
{
    int count = 0;
    for (const char *p = strstr(format, "%d"); p; p = strstr(p + 2, "%d"))
        count++;
    return count;
}

/* The entry of the tables for trident name, a zero bias (HF_ZERO_BIAS) or
 * not as asked,
 * with its twin's name filled in; NULL if none. */
static const HfName *find_entry(const HfTable *tables, int n_tables, int zero_bias,
                                const char *name, char *hf, size_t n)
{
    int idx[2] = {-1, -1};
    int count = name_indices(name, idx);
    for (int t = 0; t < n_tables; t++)
        for (size_t i = 0; i < tables[t].n; i++) {
            const HfName *e = &tables[t].names[i];
            char want[96];
            if ((e->perm == HF_ZERO_BIAS) != zero_bias || count_indices(e->trident) != count)
                continue;
            /* the format is one of the tables' literals, with as many %d
             * as idx has values (C ignores an argument the format lacks) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
#pragma GCC diagnostic ignored "-Wformat-extra-args"
            snprintf(want, sizeof want, e->trident, idx[0], idx[1]);
            if (!strcmp(want, name)) {
                snprintf(hf, n, e->hf, idx[0], idx[1]);
#pragma GCC diagnostic pop
                return e;
            }
        }
    return NULL;
}

/* out for lp's twin in entry how: trident's shape, HF's the same or, for a
 * transposed one, turned. */
static void fill(HfTensor *out, const Config *cfg, const Param *lp)
{
    out->rows = out->how->vocab_rows ? hf_map_vocab(cfg) : lp->rows;
    out->cols = lp->cols;
    out->ndim = lp->ndim;
    out->n_head = cfg->model.n_head;
    out->hf_shape[0] = out->how->transpose ? out->cols : out->rows;
    out->hf_shape[1] = out->how->transpose ? out->rows : out->cols;
}

int hf_map_tensor(const Config *cfg, HfNames names, const Param *lp, HfTensor *out)
{
    memset(out, 0, sizeof *out);
    const Arch *arch = arch_of(&cfg->model);
    if (names == HF_NAMES_LLMC) {
        HfTable llmc = {arch->llmc_names, arch->n_llmc_names};
        out->how = find_entry(&llmc, 1, 0, lp->name, out->hf, sizeof out->hf);
    } else {
        HfTable tables[HF_TABLES_MAX];
        int n_tables = arch->hf_tables(&cfg->model, tables);
        out->how = find_entry(tables, n_tables, 0, lp->name, out->hf, sizeof out->hf);
    }
    if (!out->how)
        return -1;
    fill(out, cfg, lp);
    return 0;
}

int hf_map_zero_bias(const Config *cfg, const Param *lp, HfTensor *out)
{
    memset(out, 0, sizeof *out);
    HfTable tables[HF_TABLES_MAX];
    int n_tables = arch_of(&cfg->model)->hf_tables(&cfg->model, tables);
    out->how = find_entry(tables, n_tables, 1, lp->name, out->hf, sizeof out->hf);
    if (!out->how)
        return -1;
    Param bias = *lp;   /* one value per row of the weight */
    bias.cols = 1;
    bias.ndim = 1;
    fill(out, cfg, &bias);
    return 0;
}

int64_t hf_map_row(const HfTensor *t, int64_t r)
{
    if (t->how->perm == HF_PERM_QKV) {
        /* trident: r = (head * 3 + which) * hs + d; HF: (which * NH + head) * hs + d */
        int64_t hs = t->rows / (3 * (int64_t)t->n_head);
        int64_t d = r % hs, which = (r / hs) % 3, head = r / (3 * hs);
        return (which * t->n_head + head) * hs + d;
    }
    return r;
}

void hf_map_to_hf(const HfTensor *t, const float *in, float *out)
{
    for (int64_t r = 0; r < t->rows; r++) {
        int64_t h = hf_map_row(t, r);
        for (int64_t c = 0; c < t->cols; c++) {
            float v = in[r * t->cols + c];
            if (t->how->transpose)
                out[c * t->rows + h] = v;
            else
                out[h * t->cols + c] = v;
        }
    }
}

json_t *hf_map_config_json(const Config *cfg, const char *torch_dtype, char *why, size_t n)
{
    return arch_of(&cfg->model)->hf_config(cfg, torch_dtype, why, n);
}
