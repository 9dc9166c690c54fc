/*
 * ckpt.h - saving and loading checkpoints: one HDF5 file per save, written
 * by every rank at once through MPI-IO, holding every tensor in its full
 * logical shape.
 *
 *   /                 attributes: format version, program version, step,
 *                     tokens seen, data cursor, config text, the layout
 *                     that wrote it, loss-scaler state, early-stopping
 *                     state, seed, the model's shape, and the checksum
 *                     of all of them
 *   /model/<name>     fp32 master weights
 *   /optim/<name>/m   Adam first moment
 *   /optim/<name>/v   Adam second moment
 *
 * Each dataset carries a "checksum" attribute: the wrapping sum over its
 * elements of a hash of (index, value bits). It does not depend on who
 * wrote which part, so any layout can verify any file.
 *
 * A save is atomic: it writes step_NNNNNNNN.h5.tmp, closes it, renames it
 * and only then points `latest` at it (doc/checkpoint-format.md). The root
 * attributes are listed in ckpt_format.h, the files' names and life in
 * ckpt_files.h; `trident inspect` is inspect.h.
 */
#ifndef TRI_SRC_CKPT_H
#define TRI_SRC_CKPT_H

#include <stdint.h>
#include <stdio.h>

#include "config.h"
#include "grid.h"
#include "model.h"
#include "params.h"
#include "train_state.h"
#include "zero.h"


/* Where a save takes the state it writes from: the live model, or a
 * snapshot of it that a background writer saves while training goes on
 * (ckpt_async.h). Which rows a rank writes always comes from its parameter
 * table, whose shape never changes during a run; the rows themselves come
 * from `rows` when it is set, else from the optimizer state in `zero`. */
typedef struct CkptSource {
    const Grid *grid;            /* rank and tp; its world carries every collective */
    ParamSet *ps;                /* this rank's parameters (names, blocks, owned rows) */
    Zero *zero;                  /* the live state, when rows is NULL */
    /* host fp32 rows this rank writes of part (0 weights, 1 m, 2 v) of
     * ps->p[i]: written_rows x lcols, contiguous */
    const float *(*rows)(const struct CkptSource *s, int i, int part);
    void *ctx;                   /* for rows */
    const Config *cfg;
    const TrainState *st;
} CkptSource;

/* Writes dir/step_NNNNNNNN.h5 and points dir/latest at it, then deletes
 * checkpoints older than the newest `keep`. On failure deletes the
 * temporary file, leaves `latest` alone, writes the reason on err (rank 0)
 * and returns non-zero. Collective on world. */
int ckpt_save(Model *m, Zero *z, const Config *cfg, const TrainState *st,
              double *seconds, int64_t *bytes, FILE *err);

/* ckpt_save from any source. The only caller of HDF5 while it runs: no
 * other thread may enter ckpt.c meanwhile (a second entry is fatal).
 * Collective on src->grid's world. */
int ckpt_save_from(const CkptSource *src, double *seconds, int64_t *bytes, FILE *err);

/* The rows of part (0 weights, 1 m, 2 v) of p this rank writes, where
 * they live (host or device): the one definition of what a save copies,
 * shared by the live save and the snapshot. Not collective. */
ops_tensor ckpt_written_rows(Zero *z, const Param *p, int part);

/* Checks the file (format version, the root attributes' ranges and
 * checksum, model shape, every dataset's presence, shape and type), then reads the hyperslabs this rank now owns and checks
 * every dataset's checksum. with_optimizer = 0 skips the Adam moments (for
 * sampling). Errors name the file and the dataset. Collective on world. */
int ckpt_load(Model *m, Zero *z, const Config *cfg, const char *path,
              int with_optimizer, TrainState *st, FILE *err);

/* Reads the config text stored in a checkpoint into cfg (for `sample`):
 * defaults, then the text, then config_validate; errors name the file as
 * "PATH (stored config)". Not collective. */
int ckpt_read_config(const char *path, Config *cfg, FILE *err);

#endif
