/*
 * device.h - which device each rank computes on.
 *
 * [parallel] device = cpu | cuda | auto. With CUDA, one rank drives one
 * GPU: the device is the rank's index on its machine (grid.h host_rank,
 * the shared-memory split, whatever node_size pretends), the machine must
 * have as many GPUs as ranks, and no two ranks of a machine may hold GPUs
 * with the same UUID (unless a test sets DEVICE_SHARE_GPU_ENV, below).
 * auto takes the GPU when the
 * build has CUDA and every rank sees one, else the CPU. A GPU requested
 * from a CPU-only build fails with "reconfigure with --with-cuda".
 */
#ifndef TRI_SRC_DEVICE_H
#define TRI_SRC_DEVICE_H

#include "config.h"
#include "grid.h"

/* Chooses and initialises this rank's device, and the NCCL communicators
 * when the device is a GPU and the build has NCCL; records the choice in
 * g->device. Checks the measurement switches first (kernels/switches.h),
 * on every device. Rank 0 (or a rank failing alone) reports a failure; every
 * rank returns the agreed result. Collective on world. */
int device_setup(Grid *g, const Config *cfg);

/* A rank's GPU identity, as the ranks of a machine exchange it. */
typedef struct {
    int world_rank;
    unsigned char uuid[16];
} DeviceId;

/* The first index i of ids[0..n) whose UUID an earlier entry has, that
 * entry's index in *first; -1 when all differ. Not collective. */
int device_shared_gpu(const DeviceId *ids, int n, int *first);

/* The test-only escape from the one-rank-per-GPU rule: the environment
 * variable TRIDENT_TEST_SHARE_GPU, read by every rank at device_setup.
 * Unset, empty or "0": ranks sharing a GPU stop the run; "1": they may
 * (and every rank warns); anything else is an error. Kept out of the
 * config on purpose: it describes the test machine (one GPU, several
 * ranks through NCCL_MULTI_RANK_GPU_ENABLE), not the training run, so it
 * must not travel with a config file or a checkpoint to a cluster. */
#define DEVICE_SHARE_GPU_ENV "TRIDENT_TEST_SHARE_GPU"

/* Parses value (NULL when unset) into *share (0 or 1); 1 and a message
 * naming the variable in err when it is neither. Not collective. */
int device_share_gpu_parse(const char *value, int *share, char *err, size_t err_size);

/* Releases what device_setup created. Collective on world. */
void device_teardown(Grid *g);

#endif
