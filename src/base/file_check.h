/*
 * file_check.h - opening a file the user named without hanging on it.
 *
 * open() of a FIFO waits for a writer (for reading) or a reader (for
 * writing), for ever; rank 0 would sit in it while the other ranks spin in
 * the next collective. So user-named files are opened with O_NONBLOCK,
 * checked with fstat, and anything but a regular file is refused with a
 * reason that says what the path is ("a FIFO", "a directory", ...).
 */
#ifndef TRI_SRC_FILE_CHECK_H
#define TRI_SRC_FILE_CHECK_H

#include <stddef.h>
#include <sys/types.h>

/* What kind of file a stat mode describes, for messages: "a regular file",
 * "a directory", "a FIFO", "a socket", "a character device", "a block
 * device", "a symbolic link". Not collective. */
const char *file_kind(mode_t mode);

/* Opens path with flags (O_RDONLY, or O_WRONLY|O_CREAT|...; mode 0666
 * before the umask) without blocking, and refuses anything but a regular
 * file; O_NONBLOCK is cleared again before returning. Returns the file
 * descriptor, or -1 with a reason in why (why_size bytes): strerror of
 * open's or fstat's errno (errno is left set), "Is a directory", or
 * "<kind>, not a regular file" (errno then EINVAL). Not collective. */
int file_open_regular(const char *path, int flags, char *why, size_t why_size);

/* For paths opened by a library that would block on a FIFO (HDF5, fopen
 * in code that reports its own errors): 1 when path exists and is not a
 * regular file, with "<kind>, not a regular file" in why; 0 when it is
 * one or cannot be stat'ed (the caller's open reports that). Not
 * collective. */
int file_is_special(const char *path, char *why, size_t why_size);

/* Creates the directories above path, as mkdir -p of its dirname (a
 * metrics file's, a checkpoint directory's probe). Returns 0, or the
 * errno of the mkdir that failed. Not collective. */
int file_make_parents(const char *path);

#endif
