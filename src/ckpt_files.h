/*
 * ckpt_files.h - the life of the files in [checkpoint] dir: a save's
 * names, publishing its finished temporary file (fsync, rename, `latest`),
 * pruning to `keep`, and finding the checkpoint a run resumes from.
 *
 *   dir/step_NNNNNNNN.h5.tmp   a save being written (ckpt.c fills it)
 *   dir/step_NNNNNNNN.h5       a complete checkpoint
 *   dir/latest                 one line: the name of the newest complete one
 *
 * Plain POSIX: no HDF5, no MPI. Rank 0 alone calls these; what a file
 * holds is ckpt.c's business (doc/checkpoint-format.md, "Atomicity").
 */
#ifndef TRI_SRC_CKPT_FILES_H
#define TRI_SRC_CKPT_FILES_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "config.h"

/* The names of one save. */
typedef struct {
    const char *dir;
    char name[64];                      /* step_NNNNNNNN.h5: what `latest` holds */
    char final[CONFIG_PATH_MAX + 80];   /* dir/name */
    char tmp[CONFIG_PATH_MAX + 96];     /* dir/name.tmp: written, then renamed to final */
} CkptPaths;

/* Fills the names of the checkpoint of `step` in dir (kept as a pointer:
 * it must outlive p). Not collective. */
void ckpt_files_paths(CkptPaths *p, const char *dir, int64_t step);

/* Creates dir and its parents and checks that it is writable; on failure
 * writes the reason to err and returns non-zero. Not collective. */
int ckpt_files_prepare_dir(const char *dir, FILE *err);

/* Refuses (non-zero, the reason on err) a save of about `need` bytes when
 * dir's file system has less free; free space it cannot learn passes.
 * Not collective. */
int ckpt_files_check_space(const char *dir, int64_t need, FILE *err);

/* Publishes a closed temporary file: fsync, rename to its final name,
 * fsync dir, point `latest` at it, prune to `keep`. On failure writes the
 * reason to err and returns non-zero; a failed rename also removes the
 * temporary file, and `latest` is never left naming an incomplete file.
 * Not collective. */
int ckpt_files_publish(const CkptPaths *p, int keep, FILE *err);

/* Removes the temporary file of a save that failed. Not collective. */
void ckpt_files_discard(const CkptPaths *p);

/* Replaces dir/latest with a file holding name: writes latest.tmp, fsyncs
 * and renames it, so a reader sees the old name or the new one, never a
 * part. On failure writes the reason to err and returns non-zero.
 * Not collective. */
int ckpt_files_point_latest(const char *dir, const char *name, FILE *err);

/* Deletes all but the newest `keep` checkpoints in dir (step_NNNNNNNN.h5,
 * 8 digits), and the step_*.h5.tmp files killed saves left behind; no other
 * file. A dir that cannot be read is left alone. Not collective. */
void ckpt_files_prune(const char *dir, int keep);

/* Finds what [checkpoint] resume asks for: "none" gives an empty path;
 * "auto" the file dir/latest names (empty if there is none yet); anything
 * else is a path. Fails, with the reason on err, if that path or the file
 * `latest` names cannot be read, or `latest` holds no plain file name.
 * Not collective. */
int ckpt_files_resolve(const CheckpointConfig *c, char *path, size_t size, FILE *err);

#endif
