/*
 * setup_cuda.cu - the GPU backend's start and stop: the order in which its
 * parts are set up on cuda_device_init and torn down on
 * cuda_device_finalize.
 *
 * device_cuda.cu owns the device, its compute stream, the cuBLAS handle
 * and the scratch; cuBLASLt's handle and plans (gemm_lt_cuda.cu), the
 * kept tables of the multi-tensor kernels (multi_cuda.cu) and cuDNN's
 * graphs (attention_cudnn_cuda.cu) live on them. They all call
 * device_cuda.cu, so the one file that calls each of them in turn is this
 * one, above them all, and no part calls back up (tests/t_deps.sh proves
 * kernels/ has no call circle).
 *
 * Not collective.
 */
#include "cuda_common.h"

int cuda_device_init(int local_rank, int local_size, char *err,
                     size_t err_size)
{
    if (device_select_cuda(local_rank, local_size, err, err_size))
        return 1;
    /* the measurement switch (gemm_lt_cuda.cu, switches.h) */
    lt_epilogue_set_cuda(lt_epilogue_switch());
    device_open_cuda();
    lt_init_cuda();
    return 0;
}

void cuda_device_finalize(void)
{
    if (cuda_device_index() < 0)
        return;
    multi_tables_forget_cuda(); /* their device copies go with the scratch */
#if TRI_HAVE_CUDNN
    attention_cudnn_finalize_cuda();
#endif
    device_release_scratch_cuda();
    lt_finalize_cuda();
    device_close_cuda();
}
