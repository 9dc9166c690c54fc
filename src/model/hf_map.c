/*
 * hf_map.c - trident's tensors in HuggingFace's names and layouts; see
 * hf_map.h. The tables themselves are the architectures' (arch_gpt2.c,
 * arch_llama.c).
 */
#include "hf_map.h"

#include <stdio.h>
#include <string.h>

#include "arch.h"

/* The entry for trident name, with its twin's name filled in; NULL if
 * none. */
static const HfName *find_entry(const HfName *table, size_t count, const char *name, char *hf,
                                size_t n)
{
    int layer = -1;
    if (sscanf(name, "h.%d.", &layer) != 1)
        layer = -1;
    for (size_t i = 0; i < count; i++) {
        const HfName *e = &table[i];
        char want[96];
        int layered = strstr(e->trident, "%d") != NULL;
        if (layered != (layer >= 0))
            continue;
        /* the format is one of the table's literals above */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
        snprintf(want, sizeof want, e->trident, layer);
        if (!strcmp(want, name)) {
            snprintf(hf, n, e->hf, layer);
#pragma GCC diagnostic pop
            return e;
        }
    }
    return NULL;
}

int hf_map_tensor(const Config *cfg, HfNames names, const Param *lp, HfTensor *out)
{
    memset(out, 0, sizeof *out);
    const Arch *arch = arch_of(&cfg->model);
    if (names == HF_NAMES_LLMC)
        out->how = find_entry(arch->llmc_names, arch->n_llmc_names, lp->name, out->hf,
                              sizeof out->hf);
    else
        out->how = find_entry(arch->hf_names, arch->n_hf_names, lp->name, out->hf,
                              sizeof out->hf);
    if (!out->how)
        return -1;
    out->rows = out->how->vocab_rows ? hf_map_vocab(cfg) : lp->rows;
    out->cols = lp->cols;
    out->ndim = lp->ndim;
    out->n_head = cfg->model.n_head;
    out->hf_shape[0] = out->how->transpose ? out->cols : out->rows;
    out->hf_shape[1] = out->how->transpose ? out->rows : out->cols;
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


json_t *hf_map_config_json(const Config *cfg, const char *torch_dtype)
{
    return arch_of(&cfg->model)->hf_config(cfg, torch_dtype);
}
