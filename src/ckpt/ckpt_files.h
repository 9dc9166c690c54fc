/*
 * ckpt_files.h - the life of the files in [checkpoint] dir: a save's
 * names, publishing its finished temporary file (fsync, rename, `latest`),
 * pruning to `keep`, and finding the checkpoint a run resumes from.
 *
 *   dir/step_NNNNNNNN.h5.tmp.TAG   a save being written (ckpt.c fills it)
 *   dir/step_NNNNNNNN.h5           a complete checkpoint
 *   dir/latest                     one line: the name of the newest complete one
 *   dir/.trident.lock              locked by the run that owns dir
 *
 * Plain POSIX: no HDF5, no MPI. Rank 0 alone touches the files (every
 * rank names them, for HDF5); what a file holds is ckpt.c's business
 * (doc/checkpoint-format.md, "Atomicity"), and ckpt_resume.c decides with
 * all ranks what a run starts from.
 */
#ifndef TRI_SRC_CKPT_FILES_H
#define TRI_SRC_CKPT_FILES_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "config.h"

/* The names of one save. */
typedef struct {
    const char *dir;
    char name[64];                      /* step_NNNNNNNN.h5: what `latest` holds */
    char final[CONFIG_PATH_MAX + 80];   /* dir/name */
    char tmp[CONFIG_PATH_MAX + 160];    /* dir/name.tmp.TAG: written, then renamed to final */
} CkptPaths;

/* Sets the run's tag, which every temporary file name ends with, so that
 * two runs writing into one directory (where it cannot be locked) never
 * write into each other's files. Every rank sets the same tag (rank 0's
 * ckpt_files_make_tag) before its first save; "" (the start) gives the
 * names without a tag. Not collective. */
void ckpt_files_set_tag(const char *tag);

/* Writes "PID.HOST" (the host cut to 24 characters of [A-Za-z0-9-]) to
 * tag: unique among the runs alive at one time. Not collective. */
void ckpt_files_make_tag(char *tag, size_t size);

/* Fills the names of the checkpoint of `step` in dir (kept as a pointer:
 * it must outlive p). Not collective. */
void ckpt_files_paths(CkptPaths *p, const char *dir, int64_t step);

/* Whether name is a checkpoint's, step_NNNNNNNN.h5 as ckpt_files_paths
 * writes it (8 digits or more, no sign, no extra leading zero); its step
 * goes to *step. Not collective. */
int ckpt_files_parse_name(const char *name, int64_t *step);

/* The steps of the checkpoints in dir, newest first, in a malloc'd array
 * (*steps, free it; NULL when there are none); returns their number, 0
 * when dir cannot be read. Not collective. */
int ckpt_files_list(const char *dir, int64_t **steps);

/* Creates dir and its parents and checks that a file can be created in
 * it (creates and removes one); on failure writes the reason to err
 * ("[checkpoint] dir = DIR: strerror") and returns non-zero. Not
 * collective. */
int ckpt_files_prepare_dir(const char *dir, FILE *err);

/* A run's hold on its checkpoint directory: an fcntl write lock on
 * dir/.trident.lock, which the kernel releases when the process ends,
 * however it ends. fd is -1 when nothing is held. */
typedef struct {
    int fd;
} CkptLock;

/* Locks dir for this run: the lock file holds "pid PID host HOST" of the
 * holder. Fails (non-zero, the reason on err, naming dir and the holder)
 * when another run holds it or the lock file cannot be made. Where the file
 * system does not support locks (ENOLCK, EOPNOTSUPP, ENOSYS: some NFS and
 * Lustre mounts) it writes a warning to warn and returns 0 with lock->fd =
 * -1. Not collective (rank 0). */
int ckpt_files_lock(const char *dir, CkptLock *lock, FILE *err, FILE *warn);

/* Waits for the pruning of the last publication, then lets go of the lock
 * (the lock file stays: removing it would let a run lock a new file while
 * another holds the old one). Not collective. */
void ckpt_files_unlock(CkptLock *lock);

/* Deletes the temporary files (step_*.h5.tmp*, latest.tmp*) a killed run
 * left in dir; call it only while holding dir's lock, when no other run
 * can be writing them. Not collective. */
void ckpt_files_clean_stale(const char *dir);

/* Refuses (non-zero, the reason on err) a save of about `need` bytes when
 * dir's file system has less free; free space it cannot learn passes.
 * Not collective. */
int ckpt_files_check_space(const char *dir, int64_t need, FILE *err);

/* Writing a save's data to the disk while the ranks still work on it.
 * Rank 0 starts it once every rank has written its tensors, and the
 * checksums, the attributes and HDF5's close run while the disk writes:
 * the kernel would otherwise hold the whole file in the page cache until
 * publication's fsync (it starts writing back by itself only past
 * vm.dirty_background_ratio, 10% of the memory: 2.4 GB of 24 GB where it
 * was measured), and the disk would idle meanwhile.
 * It changes no guarantee: ckpt_files_publish still fsyncs the closed
 * file before the rename. */
typedef struct {
    pthread_t thread;
    int started;
    char path[CONFIG_PATH_MAX + 160];
} CkptFlush;

/* Starts a thread that fdatasyncs path (a file being written). Returns at
 * once; nothing is started if no thread can be. Not collective. */
void ckpt_files_flush_start(CkptFlush *f, const char *path);

/* Waits for the thread of ckpt_files_flush_start, if one was started; call
 * it before the file is published or removed. Not collective. */
void ckpt_files_flush_wait(CkptFlush *f);

/* Publishes a closed temporary file: fsync, rename to its final name,
 * fsync dir, point `latest` at it, then start pruning to `keep` on a
 * thread of its own (ckpt_files_prune_wait waits for it). On failure
 * writes the reason to err and returns non-zero; a failed rename also
 * removes the temporary file, and `latest` is never left naming an
 * incomplete file. Not collective. */
int ckpt_files_publish(const CkptPaths *p, int keep, FILE *err);

/* Waits until the pruning that ckpt_files_publish started, if any, has
 * deleted what it deletes. Not collective. */
void ckpt_files_prune_wait(void);

/* Removes the temporary file of a save that failed. Not collective. */
void ckpt_files_discard(const CkptPaths *p);

/* Replaces dir/latest with a file holding name: writes latest.tmp.TAG,
 * fsyncs and renames it, so a reader sees the old name or the new one,
 * never a part. On failure writes the reason to err and returns non-zero.
 * Not collective. */
int ckpt_files_point_latest(const char *dir, const char *name, FILE *err);

/* Deletes all but the newest `keep` checkpoints in dir (step_NNNNNNNN.h5),
 * never the one named `published` (the save just made: a run resumed from
 * an older checkpoint of its directory saves steps below those it left
 * behind), and no other file. A dir that cannot be read is left alone.
 * Not collective. */
void ckpt_files_prune(const char *dir, int keep, const char *published);

/* What a run starts from: nothing (n = 0), one file, or (latest could
 * not be used) dir's checkpoints, newest first, to be tried in turn until
 * one verifies. */
typedef struct {
    int n;                          /* candidates; 0: a fresh start */
    int scanned;                    /* the candidates are dir's checkpoints */
    char why[2 * CONFIG_PATH_MAX + 400]; /* scanned: why latest could not be used */
    char file[CONFIG_PATH_MAX + 80];/* !scanned: the one candidate */
    const char *dir;
    int64_t *steps;                 /* scanned: their steps, newest first */
} CkptResume;

/* Decides what [checkpoint] resume asks for, in a directory that belongs
 * to its run. "none": a fresh start, refused if dir holds completed
 * checkpoints. A path: that file, refused if dir holds checkpoints and the
 * file is not one of them. "auto": the file dir/latest names; a fresh start
 * if dir holds neither latest nor checkpoints; dir's checkpoints, newest
 * first, when latest is missing, cannot be read, holds no name or names a
 * file that cannot be read (r->why says which). Refused: a latest that is
 * a symbolic link or not a regular file, one naming a path outside dir,
 * and an unusable latest beside no checkpoint. On refusal writes the
 * reason and the setting that would resume to err and returns non-zero.
 * Free r with ckpt_files_resume_free. Not collective (rank 0). */
int ckpt_files_resolve(const CheckpointConfig *c, CkptResume *r, FILE *err);

/* The path of candidate i of r. Not collective. */
void ckpt_files_candidate(const CkptResume *r, int i, char *path, size_t size);

/* Frees what ckpt_files_resolve allocated in r. Not collective. */
void ckpt_files_resume_free(CkptResume *r);

#endif
