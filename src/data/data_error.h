/*
 * data_error.h - why a sample could not be read during the run, the type
 * data.h's readers and data_format.h's share (its own header, so that the
 * formats need nothing of data.h). Not collective.
 */
#ifndef TRI_SRC_DATA_ERROR_H
#define TRI_SRC_DATA_ERROR_H

#include "config.h"

/* One line (no newline), "trident: [data] train = FILE: ...", naming the
 * file and the offset. */
typedef struct {
    char msg[CONFIG_PATH_MAX + 512];
} DataError;

#endif
