/*
 * device.c - one device per rank; see device.h.
 */
#include "device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "comm.h"
#include "fail.h"
#if TRI_HAVE_NCCL
#include "comm_nccl.h"
#endif

/* What auto means here: a GPU only if every rank of the world has one.
 * A GPU that is there but fails (an old driver, say) is an error on every
 * choice but cpu, never a quiet fall back to the CPU. */
static int resolve(const Grid *g, DeviceChoice choice, ops_device *out, char *err,
                   size_t err_size)
{
    *out = choice == DEVICE_CUDA ? OPS_CUDA : OPS_CPU;
    if (choice == DEVICE_CPU || !TRI_HAVE_CUDA)
        return 0;
    int count = ops_device_count(OPS_CUDA);
    int every = count > 0;
    comm_allreduce_scalars(g, COMM_WORLD, &every, 1, COMM_INT, COMM_MIN);
    if (count < 0) {
        snprintf(err, err_size, "this rank cannot use its GPU: %s; fix the node's driver, or "
                 "set [parallel] device = cpu", ops_device_count_error(OPS_CUDA));
        return 1;
    }
    if (choice == DEVICE_AUTO) /* a broken rank stops the run in device_setup */
        *out = every ? OPS_CUDA : OPS_CPU;
    return 0;
}

int device_shared_gpu(const DeviceId *ids, int n, int *first)
{
    for (int i = 1; i < n; i++)
        for (int j = 0; j < i; j++)
            if (!memcmp(ids[i].uuid, ids[j].uuid, sizeof ids[i].uuid)) {
                *first = j;
                return i;
            }
    return -1;
}

/* Every rank of this machine tells the others its GPU's UUID, so two
 * ranks driving one GPU (CUDA_VISIBLE_DEVICES set wrongly, a launcher
 * binding two ranks to one device) stop the run instead of halving its
 * speed in silence; unless share (the test-only escape) lets them, which
 * every rank has already warned of. Collective on the machine's ranks. */
static int check_one_rank_per_gpu(const Grid *g, int share, char *err, size_t err_size)
{
    DeviceId mine = {.world_rank = g->layout.rank};
    if (!ops_device_uuid(g->device, mine.uuid))
        return 0;
    DeviceId *all = TRI_MALLOC(sizeof *all * (size_t)g->host_size, "the node's device ids");
    TRI_CHECK_MPI(MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine,
                                MPI_BYTE, g->host_comm));
    int first = -1, dup = share ? -1 : device_shared_gpu(all, g->host_size, &first);
    if (dup >= 0) {
        char hex[33];
        for (int i = 0; i < 16; i++)
            snprintf(hex + 2 * i, 3, "%02x", all[dup].uuid[i]);
        snprintf(err, err_size, "ranks %d and %d drive the same GPU (UUID %s); give each rank "
                 "its own GPU (one CUDA_VISIBLE_DEVICES entry per rank, or srun "
                 "--gpus-per-task=1)", all[first].world_rank, all[dup].world_rank, hex);
    }
    free(all);
    return dup >= 0;
}

int device_share_gpu_parse(const char *value, int *share, char *err, size_t err_size)
{
    *share = value && !strcmp(value, "1");
    if (!value || !*value || !strcmp(value, "0") || *share)
        return 0;
    snprintf(err, err_size, "%s=%s: set it to 1 to let ranks share a GPU (for tests "
             "only), or unset it", DEVICE_SHARE_GPU_ENV, value);
    return 1;
}

/* Reads the escape on every rank; a bad value on any stops the run.
 * When set, every rank says so, since a rank of a shared GPU runs at a
 * fraction of its speed and memory, which must never pass unnoticed in
 * a real run. Collective on world. */
static int share_gpu_setting(const Grid *g, int *share)
{
    char err[256] = "", msg[320] = "";
    int rc = device_share_gpu_parse(getenv(DEVICE_SHARE_GPU_ENV), share, err, sizeof err);
    if (rc)
        snprintf(msg, sizeof msg, "trident: %s\n", err);
    if (fail_report(g->world, rc, msg))
        return 1;
    if (*share)
        fprintf(stderr, "[rank %d %s] trident: warning: %s=1: ranks of a machine may drive one "
                "GPU; this is for testing NCCL with several ranks on one GPU "
                "(NCCL_MULTI_RANK_GPU_ENABLE=1), never for training%s\n", fail_rank(),
                fail_host(), DEVICE_SHARE_GPU_ENV,
                g->device == OPS_CUDA ? "" : " (this run computes on the CPU: no effect)");
    return 0;
}

/* The model's head size against what the device's attention takes, so a
 * GPU run of a model with heads over 128 wide stops here, naming the
 * keys, rather than at its first forward. */
static int check_head_size(const Grid *g, const ModelConfig *m, char *err, size_t err_size)
{
    int hs = m->n_embd / m->n_head, max = ops_attention_max_head_size(g->device);
    if (max == 0 || hs <= max)
        return 0;
    snprintf(err, err_size, "[model] n_head = %d: heads of n_embd / n_head = %d / %d = %d, but "
             "the CUDA attention takes head sizes up to %d: use more heads, or "
             "[parallel] device = cpu", m->n_head, m->n_embd, m->n_head, hs, max);
    return 1;
}

/* The measurement switches (switches.h: TRIDENT_ATTENTION, TRIDENT_FUSED,
 * ...), read and checked on every rank whatever the device, so a misspelt
 * value stops a CPU run too; a bad value on any rank stops every rank.
 * Rank 0 notes a switch set for the other device's kernels. On the CPU,
 * the path of bf16 GEMMs is chosen here too, so that a
 * TRIDENT_CPU_BF16_GEMM this CPU or build cannot run stops the run now,
 * not at the first bf16 GEMM. Collective on world. */
static int check_switches(const Grid *g)
{
    char err[400] = "", msg[480] = "";
    FILE *notes = g->layout.rank == 0 ? stderr : NULL;
    int rc = ops_switches_check(g->device == OPS_CUDA, notes, err, sizeof err);
    if (!rc && g->device != OPS_CUDA)
        rc = ops_cpu_gemm_check(err, sizeof err);
    if (rc)
        snprintf(msg, sizeof msg, "trident: %s\n", err);
    return fail_report(g->world, rc, msg);
}

int device_setup(Grid *g, const Config *cfg)
{
    char err[512] = "", msg[640] = "";
    const char *names[] = {"auto", "cpu", "cuda"};
    int rc = resolve(g, cfg->parallel.device, &g->device, err, sizeof err);
    if (rc)
        snprintf(msg, sizeof msg, "trident: [parallel] device = %s: %s\n",
                 names[cfg->parallel.device], err);
    if (fail_report(g->world, rc, msg)) /* the others stop with the broken rank */
        return 1;
    if (check_switches(g))
        return 1;
    rc = check_head_size(g, &cfg->model, err, sizeof err);
    if (rc)
        snprintf(msg, sizeof msg, "trident: %s\n", err);
    if (fail_report(g->world, rc, msg))
        return 1;
    /* the GPU follows the rank's place on its machine, never a pretended
     * node_size: pretending must not put two ranks on one GPU */
    rc = ops_device_init(g->device, g->host_rank, g->host_size, err, sizeof err);
    if (rc)
        snprintf(msg, sizeof msg, "trident: [parallel] device = %s: %s\n",
                 g->device == OPS_CUDA ? "cuda" : "cpu", err);
    if (fail_report(g->world, rc, msg))
        return 1;
    int share = 0;
    if (share_gpu_setting(g, &share))
        return 1;
    rc = check_one_rank_per_gpu(g, share, err, sizeof err);
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
