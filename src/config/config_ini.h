/*
 * config_ini.h - a config's INI text applied to a Config (config_ini.c):
 * from a file (config_load's) or from memory (the text a checkpoint
 * stores), every error naming its line. The lines themselves are read by
 * ini_read.h.
 */
#ifndef TRI_SRC_CONFIG_INI_H
#define TRI_SRC_CONFIG_INI_H

#include <stdio.h>

#include "config.h"

/* Parses INI text onto cfg, each key through config_set's checks; keys the
 * text does not name keep their values. The first error (a syntax error,
 * an unknown section or key, a bad value, a key given twice) stops the
 * parse, is written to err as one line, "trident: ORIGIN:LINE: ...", and
 * makes the result non-zero. Cross-key rules are config_validate's.
 * Not collective. */
int config_parse_text(Config *cfg, const char *text, const char *origin, FILE *err);

/* config_parse_text on the contents of the file at path, named by its path
 * in messages; a file over 1 MiB, or holding a NUL byte, is refused.
 * Not collective. */
int config_parse_file(Config *cfg, const char *path, FILE *err);

#endif
