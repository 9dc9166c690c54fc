/*
 * ckpt_io.h - how a checkpoint file meets the disk: the MPI-IO hints and
 * HDF5 property lists of the parallel file, and what a failed write means
 * (a full disk, or the process's file size limit, `ulimit -f`).
 *
 * ckpt.c decides what goes where in the file; this file decides how the
 * bytes travel. The figures behind each setting are in
 * doc/performance.md ("Checkpoints"), the hints for parallel file systems
 * in doc/cluster.md.
 */
#ifndef TRI_SRC_CKPT_IO_H
#define TRI_SRC_CKPT_IO_H

#include <hdf5.h>
#include <mpi.h>
#include <stdint.h>

/* File access through MPI-IO on world, with trident's hints and HDF5's
 * alignment and metadata settings. The caller closes it (H5Pclose). Not
 * collective; a file opened or created with it is collective on world. */
hid_t ckpt_io_fapl(MPI_Comm world);

/* Makes a write beyond the process's file size limit fail with EFBIG, so
 * that a save reports it, instead of killing the process with SIGXFSZ
 * (and a core). Call once at start-up. Not collective. */
void ckpt_io_ignore_file_size_signal(void);

/* The length a dataset of `bytes` may add to the file: its bytes, and the
 * hole its alignment may leave before it. Not collective. */
int64_t ckpt_io_span(int64_t bytes);

/* Non-zero when this process may not make a file `length` bytes long
 * (`ulimit -f`); *limit receives the limit in bytes. Not collective. */
int ckpt_io_over_file_limit(int64_t length, int64_t *limit);

/* Why a write failed, for a message: "file size limit exceeded (ulimit
 * -f)" when err is EFBIG or the process may not make files of `reach`
 * bytes (the end of what was being written; 0: unknown), else "disk
 * full?". Not collective. */
const char *ckpt_io_failure(int err, int64_t reach);

#endif
