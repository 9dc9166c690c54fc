/*
 * ckpt_io.c - the MPI-IO hints and HDF5 property lists of a checkpoint
 * file, and the reason a write failed; see ckpt_io.h.
 *
 * Alignment: HDF5 places every dataset of at least ALIGN_THRESHOLD bytes
 * at a multiple of ALIGN_BYTES, which keeps the large tensors on stripe
 * boundaries of a parallel file system (its stripes are 1 MiB by default
 * on Lustre and GPFS). Each aligned dataset may leave a hole of up to
 * ALIGN_BYTES before it. Aligning every dataset above 64 KiB, as trident
 * first did, made a 1.5 MB checkpoint 15.8 MB long (a hole takes no disk
 * space, but `ulimit -f` and quotas count a file's length, and copies
 * fill the holes); with the threshold at 4 MiB a hole is at most a
 * quarter of the dataset after it, and small models are not aligned at
 * all.
 */
#include "ckpt_io.h"

#include <errno.h>
#include <signal.h>
#include <sys/resource.h>

#define ALIGN_THRESHOLD (4 << 20)
#define ALIGN_BYTES (1 << 20)

hid_t ckpt_io_fapl(MPI_Comm world)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    MPI_Info info;
    MPI_Info_create(&info);
    /* ROMIO's collective buffering gathers the strided row-parallel
     * blocks into large contiguous writes (OMPIO, Open MPI's default,
     * aggregates by its own rules and ignores romio_ hints) */
    MPI_Info_set(info, "romio_cb_write", "enable");
    MPI_Info_set(info, "romio_cb_read", "enable");
    H5Pset_fapl_mpio(fapl, world, info);
    MPI_Info_free(&info);
    H5Pset_alignment(fapl, ALIGN_THRESHOLD, ALIGN_BYTES);
    /* metadata goes out in a few collective writes at close, not as many
     * small independent ones from rank 0 */
    H5Pset_coll_metadata_write(fapl, 1);
    H5Pset_all_coll_metadata_ops(fapl, 1);
    return fapl;
}

void ckpt_io_ignore_file_size_signal(void)
{
    signal(SIGXFSZ, SIG_IGN);
}

int64_t ckpt_io_span(int64_t bytes)
{
    return bytes + (bytes >= ALIGN_THRESHOLD ? ALIGN_BYTES : 0);
}

int ckpt_io_over_file_limit(int64_t length, int64_t *limit)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_FSIZE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY
        || rl.rlim_cur >= (rlim_t)INT64_MAX)
        return 0;
    *limit = (int64_t)rl.rlim_cur;
    return length > *limit;
}

const char *ckpt_io_failure(int err, int64_t reach)
{
    int64_t limit;
    if (err == EFBIG || (reach > 0 && ckpt_io_over_file_limit(reach, &limit)))
        return "file size limit exceeded (ulimit -f)";
    return "disk full?";
}
