/*
 * params_stage.c - the parameters of a rank's stage (params_stage.h): the
 * embeddings on the first stage, each of the stage's layers as its
 * architecture builds a block, the final norm and the head on the last.
 */
#include "params_stage.h"

#include <limits.h>
#include <string.h>

#include "arch.h"

void params_build(ParamSet *ps, const Config *cfg, const Layout *layout)
{
    params_build_layers(ps, cfg, layout, INT_MAX);
}

int params_stage_layers(const Config *cfg, const Layout *layout)
{
    int n = 0, v = cfg->parallel.virtual_stages;
    for (int chunk = 0; chunk < v; chunk++) {
        int first, count;
        layout_chunk_layers(cfg->model.n_layer, layout->pp, v, layout->pp_stage, chunk, &first,
                            &count);
        n += count;
    }
    return n;
}

void params_build_layers(ParamSet *ps, const Config *cfg, const Layout *layout, int max_layers)
{
    const ModelConfig *m = &cfg->model;
    int64_t C = m->n_embd, V = m->vocab_size;
    int v = cfg->parallel.virtual_stages;
    memset(ps, 0, sizeof *ps);
    int is_first = layout->pp_stage == 0, is_last = layout->pp_stage == layout->pp - 1;
    int wte_index = -1;
    const Arch *arch = arch_of(m);
    if (is_first) {
        params_unit_begin(ps, "embed");
        params_unit_param(ps, "wte", V, C, 2, SPLIT_ROWS, ROLE_EMBEDDING, layout);
        wte_index = ps->n - 1;
        if (arch->positions) /* else q and k are rotated */
            params_unit_param(ps, "wpe", m->seq_len, C, 2, SPLIT_NONE, ROLE_EMBEDDING, layout);
    }
    /* the stage's chunks in order, each a run of consecutive layers */
    for (int chunk = 0; chunk < v; chunk++) {
        int first, count;
        layout_chunk_layers(m->n_layer, layout->pp, v, layout->pp_stage, chunk, &first, &count);
        for (int l = first; l < first + count && max_layers > 0; l++, max_layers--)
            arch->build_block(ps, l, m, layout);
    }
    if (is_last) {
        params_unit_begin(ps, "head");
        params_unit_param(ps, "lnf.w", C, 1, 1, SPLIT_NONE, ROLE_NORM_GAIN, layout);
        if (arch->norm_bias)
            params_unit_param(ps, "lnf.b", C, 1, 1, SPLIT_NONE, ROLE_NORM_BIAS, layout);
        if (!m->tie_embeddings) {
            params_unit_param(ps, "lm_head", V, C, 2, SPLIT_ROWS, ROLE_EMBEDDING, layout);
        } else if (wte_index >= 0) {
            params_unit_add(ps, wte_index); /* one stage: the head reads wte itself */
        } else {
            /* Megatron's answer to tied embeddings across stages: the last
             * stage keeps its own copy, initialised alike, and the two
             * copies' gradients are summed before every update. */
            Param *p = params_unit_param(ps, "wte", V, C, 2, SPLIT_ROWS, ROLE_EMBEDDING, layout);
            p->is_copy = 1;
            p->counts_in_norm = 0;
            p->writes_ckpt = 0;
        }
    }
}

/* Elements of the stage's table with its first max_layers blocks: all of
 * them, or (experts_only) the routed experts' (Param.expert). */
static int64_t built_count(const Config *cfg, const Layout *l, int max_layers, int experts_only)
{
    ParamSet ps;
    params_build_layers(&ps, cfg, l, max_layers);
    int64_t n = 0;
    for (int i = 0; i < ps.n; i++)
        if (!experts_only || ps.p[i].expert)
            n += params_local_numel(&ps.p[i]);
    params_free(&ps);
    return n;
}

int params_blocks_alike(const ModelConfig *m)
{
    return m->n_expert == 0 || m->moe_every == 1;
}

static int64_t stage_count(const Config *cfg, int pp_stage, int tp_rank, int experts_only)
{
    /* the blocks do not depend on dp but on the ep rank: the first of ep
     * DP ranks stands for any (each holds n_expert / ep experts) */
    int ep = cfg->parallel.ep > 0 ? cfg->parallel.ep : 1;
    Layout l = layout_at(&cfg->parallel, ep, pp_stage, 0, tp_rank);
    int layers = params_stage_layers(cfg, &l);
    if (layers <= 2 || !params_blocks_alike(&cfg->model))
        return built_count(cfg, &l, layers, experts_only);
    /* the blocks are alike: the stage's ends, and one block per layer */
    int64_t one = built_count(cfg, &l, 1, experts_only);
    return one + (layers - 1) * (built_count(cfg, &l, 2, experts_only) - one);
}

int64_t params_local_count(const Config *cfg, int pp_stage, int tp_rank)
{
    return stage_count(cfg, pp_stage, tp_rank, 0);
}

int64_t params_local_expert_count(const Config *cfg, int pp_stage, int tp_rank)
{
    return stage_count(cfg, pp_stage, tp_rank, 1);
}

int64_t params_logical_count(const ModelConfig *m)
{
    int64_t C = m->n_embd, V = m->vocab_size, T = m->seq_len;
    const Arch *arch = arch_of(m);
    /* wte, wpe where there is one, the blocks, the final norm's gain and
     * bias where it has one */
    int64_t n = V * C + (arch->positions ? T * C : 0) + (arch->norm_bias ? 2 : 1) * C;
    for (int l = 0; l < m->n_layer; l++)
        n += arch->block_numel(m, l);
    if (!m->tie_embeddings)
        n += V * C;
    return n;
}

int64_t params_active_count(const ModelConfig *m)
{
    const Arch *arch = arch_of(m);
    int64_t skipped = m->n_expert > m->top_k && arch->expert_numel
                      ? (int64_t)arch_moe_layer_count(m) * (m->n_expert - m->top_k)
                        * arch->expert_numel(m)
                      : 0;
    return params_logical_count(m) - skipped;
}
