/*
 * ckpt_pick.h - the checkpoint a user names on the command line
 * (`trident inspect`, `sample --ckpt`, `export`): a checkpoint file, a
 * run's [checkpoint] dir, or that directory's `latest`. A directory (or its
 * latest) stands for the newest checkpoint in it, chosen as a resumed run
 * chooses (ckpt_files_resolve with resume = auto), and the command says
 * which it took, so a directory is never opened as if it were a file.
 */
#ifndef TRI_SRC_CKPT_PICK_H
#define TRI_SRC_CKPT_PICK_H

#include <stddef.h>
#include <stdio.h>

#include "config.h"

/* Room for the path ckpt_pick writes: a directory and a checkpoint's name. */
#define CKPT_PICKED_MAX (CONFIG_PATH_MAX + 80)

/* Writes the checkpoint file that `given` stands for to path (size
 * bytes): given itself unless it is a directory or a file named latest;
 * else the checkpoint its latest names (or, latest missing or unusable,
 * its newest step_NNNNNNNN.h5), after a line on note saying which
 * ("trident COMMAND: DIR is a checkpoint directory: taking ..."). Returns
 * 0, or 1 with a line on err naming COMMAND and the directory when it
 * holds no checkpoint or its latest must not be followed. Not collective
 * (call it on one rank and share the path). */
int ckpt_pick(const char *given, const char *command, char *path, size_t size, FILE *note,
              FILE *err);

#endif
