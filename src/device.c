/*
 * device.c - one device per rank; see device.h.
 */
#include "device.h"

#include <stdio.h>

#include "comm.h"
#include "fail.h"
#if TRI_HAVE_NCCL
#include "comm_nccl.h"
#endif

/* What auto means here: a GPU only if every rank of the world has one. */
static ops_device resolve(const Grid *g, DeviceChoice choice)
{
    if (choice == DEVICE_CPU)
        return OPS_CPU;
    if (choice == DEVICE_CUDA)
        return OPS_CUDA;
    int every = TRI_HAVE_CUDA && ops_device_count(OPS_CUDA) > 0;
    comm_allreduce_scalars(g, COMM_WORLD, &every, 1, COMM_INT, COMM_MIN);
    return every ? OPS_CUDA : OPS_CPU;
}

int device_setup(Grid *g, const Config *cfg)
{
    char err[512] = "", msg[640] = "";
    g->device = resolve(g, cfg->parallel.device);
    int rc = ops_device_init(g->device, g->local_rank, g->local_size, err, sizeof err);
#if TRI_HAVE_NCCL
    if (!rc && g->device == OPS_CUDA)
        rc = comm_nccl_init(g, err, sizeof err);
#else
    if (!rc && g->device == OPS_CUDA) {
        snprintf(err, sizeof err, "GPU runs move gradients and activations with NCCL; reconfigure with --with-nccl");
        rc = 1;
    }
#endif
    if (rc)
        snprintf(msg, sizeof msg, "trident: [parallel] device = %s: %s\n",
                 g->device == OPS_CUDA ? "cuda" : "cpu", err);
    return fail_report(g->world, rc, msg);
}

void device_teardown(Grid *g)
{
#if TRI_HAVE_NCCL
    if (g->device == OPS_CUDA)
        comm_nccl_finalize();
#endif
    ops_device_finalize(g->device);
}
