/*
 * ckpt_resume.h - how a run starts in its checkpoint directory: it claims
 * the directory (creates it, checks that a file can be written there,
 * locks it against other runs, clears a dead run's temporary files), then
 * loads what [checkpoint] resume asks for. Rank 0 decides
 * (ckpt_files_resolve) and broadcasts, so every rank agrees and none waits
 * alone; doc/checkpoint-format.md, "Whose directory".
 */
#ifndef TRI_SRC_CKPT_RESUME_H
#define TRI_SRC_CKPT_RESUME_H

#include <stddef.h>

#include "ckpt.h"
#include "ckpt_files.h"
#include "grid.h"

/* With [checkpoint] dir set: rank 0 creates dir, checks that a file can be
 * created in it and locks it (lock: held by rank 0 until
 * ckpt_files_unlock, -1 elsewhere), and every rank takes the run's tag for
 * temporary names (ckpt_files_set_tag). Fails on every rank, the reason
 * said once, before any step. Collective on world. */
int ckpt_resume_claim(const Grid *g, const Config *cfg, CkptLock *lock);

/* Loads what [checkpoint] resume asks for (ckpt_files_resolve), trying
 * dir's checkpoints newest first, with a warning, when latest could not be
 * used. path gets the file loaded, "" for a fresh start (nothing loaded).
 * Fails on every rank, the reason said once. Collective on world. */
int ckpt_resume_load(Model *m, Zero *z, const Config *cfg, TrainState *st, char *path,
                     size_t size);

#endif
