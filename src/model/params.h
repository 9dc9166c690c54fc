/*
 * params.h - the parameters this rank holds, as blocks of logical tensors.
 *
 * Every parameter is a logical 1-D or 2-D tensor with a global name
 * ("h.3.attn.qkv.w"). A rank holds the block of it that its place in the
 * grid gives: the pipeline stage decides which tensors, the TP rank which
 * rows (column-parallel and vocab-parallel) or columns (row-parallel), and
 * ZeRO which rows of that block the rank owns for the optimizer. So every
 * piece of state is a regular hyperslab of a logical tensor, which is what
 * lets checkpoints load on any layout (doc/design.md, invariant 2).
 *
 * Parameters are grouped in units: the embeddings, each transformer block,
 * and the head. A unit is what ZeRO-3 gathers before use and ZeRO-2/3
 * reduce right after their backward.
 */
#ifndef TRI_SRC_PARAMS_H
#define TRI_SRC_PARAMS_H

#include <stdint.h>

#include "config.h"
#include "layout.h"
#include "ops.h"

typedef enum {
    SPLIT_NONE,    /* replicated on every TP rank */
    SPLIT_ROWS,    /* dim 0 split: column-parallel and vocab-parallel */
    SPLIT_COLS     /* dim 1 split: row-parallel */
} TpSplit;

typedef enum {
    ROLE_EMBEDDING,   /* wte, wpe, untied lm_head */
    ROLE_WEIGHT,      /* linear weight (out, in) */
    ROLE_RESIDUAL,    /* linear weight writing into the residual stream */
    ROLE_BIAS,
    ROLE_NORM_GAIN,
    ROLE_NORM_BIAS
} ParamRole;

typedef struct {
    char name[48];
    int ndim;                  /* 1 or 2 */
    int64_t rows, cols;        /* logical shape; 1-D: cols = 1 */
    TpSplit split;
    ParamRole role;
    int64_t lrows, lcols;      /* this rank's block */
    int64_t row0, col0;        /* its offset in the logical tensor */
    int decay;                 /* AdamW weight decay applies (2-D) */
    int counts_in_norm;        /* this rank counts its owned rows in norms */
    int writes_ckpt;           /* this rank writes its owned rows */
    int is_copy;               /* the last stage's copy of a tied wte */
    int expert;                /* a routed expert's tensor (MoE): held by one
                                  ep rank, its gradients reduced and ZeRO-
                                  sharded over COMM_EDP, not COMM_DP */
    ops_tensor w;              /* the block, compute dtype; under ZeRO-3
                                  valid only while its unit is gathered */
    ops_tensor g;              /* gradients of the block, fp32 */
    int64_t zrow0, zrows;      /* ZeRO: rows of the block this rank owns */
    ops_tensor master;         /* fp32 owned rows (aliases w when fp32) */
    ops_tensor m, v;           /* Adam moments, owned rows */
    ops_tensor og;             /* owned rows' reduced gradients, fp32 */
} Param;

typedef struct {
    char name[16];             /* "embed", "h.3", "head" */
    int n, cap;
    int *idx;                  /* n of them, into ParamSet.p (a MoE block
                                  holds 3 tensors per local expert) */
} Unit;

typedef struct {
    Param *p;
    int n, cap;
    Unit *units;
    int n_units;
} ParamSet;

/* Starts a unit named name; the parameters added next belong to it.
 * Not collective. */
void params_unit_begin(ParamSet *ps, const char *name);
/* Adds parameter idx to the current unit. Not collective. */
void params_unit_add(ParamSet *ps, int idx);
/* Adds a logical tensor of (rows, cols), split over TP as `split` says,
 * this rank's block of it as l places it, to the table and to the current
 * unit. Not collective. */
Param *params_unit_param(ParamSet *ps, const char *name, int64_t rows, int64_t cols, int ndim,
                         TpSplit split, ParamRole role, const Layout *l);
void params_free(ParamSet *ps);
Param *params_find(ParamSet *ps, const char *name);
int64_t params_local_numel(const Param *p);

/* Fills p->w (the whole local block) from the counter-based RNG keyed by
 * (seed, name, logical element index), following cfg's init scheme.
 * Not collective. */
void params_init(Param *p, const Config *cfg, float *block);

/* The std (normal schemes) or bound (uniform schemes) of p's distribution
 * under cfg, and whether it is uniform; for tests and docs. */
double params_init_scale(const Param *p, const Config *cfg, int *uniform);

#endif
