/*
 * data_impl.h - what the data module's files share: a Dataset's layout
 * (its token files, and the parts of its training and validation blends
 * with their splits and windows) and data_bug. Only data.c,
 * data_sampler.c and data_loader.c include it; everything else goes
 * through data.h. Not collective.
 */
#ifndef TRI_SRC_DATA_IMPL_H
#define TRI_SRC_DATA_IMPL_H

#include <stdint.h>

#include "blend.h"
#include "data.h"
#include "data_format.h"

/* 2^64 over the golden ratio: salts dataset j's order (j * DATA_GOLDEN)
 * and keeps the sampler's hash inputs apart. */
#define DATA_GOLDEN 0x9e3779b97f4a7c15ULL

/* One dataset of the training blend (the only one without a blend). */
typedef struct {
    Split split;
    int64_t windows;          /* W: training windows per epoch */
    int shifted;              /* 1: per-epoch shift in [0, seq_len); 0: no room, shift 0 */
    uint64_t seed_salt;       /* j * DATA_GOLDEN for dataset j: their orders differ; 0 for the first */
} TrainPart;

/* One validation dataset: its held-out tail, or a [data] val file. */
typedef struct {
    Split split;
    int64_t windows;          /* V */
} ValPart;

struct Dataset {
    TokenFile *files;         /* the train datasets', then [data] val's if set */
    int n_files;
    Blend train_blend;        /* [data] train: one dataset, or weights and names */
    Blend val_blend;          /* [data] val; n = 0 when the tails of train are held out */
    const Blend *val_of;      /* the blend that names the validation parts */
    TrainPart *train;         /* train_blend.n */
    ValPart *val;             /* val_of->n */
    int vocab;                /* every id read must be below it */
    int seq_len;
    int64_t n_train, n_val;   /* tokens in all train / val parts */
};

/* A caller broke the API contract: no sane way on, so say what and stop
 * (abort). */
void data_bug(const char *what);

#endif
