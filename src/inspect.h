/*
 * inspect.h - `trident inspect FILE`: a checkpoint's root attributes, every
 * dataset with its shape and the verdict of its checksum, and the config
 * it stores, read on one rank without a model or a config.
 */
#ifndef TRI_SRC_INSPECT_H
#define TRI_SRC_INSPECT_H

#include <stdio.h>

/* Prints the attributes and every dataset with its shape to out, verifying
 * every checksum. Returns non-zero, with the reason on err, when the file
 * cannot be opened, holds no dataset or a dataset is corrupt or unreadable.
 * Not collective (one rank). */
int inspect_checkpoint(const char *path, FILE *out, FILE *err);

#endif
