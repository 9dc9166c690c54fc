/*
 * cuda.h - the CUDA backend: .cu kernels and cuBLAS, one GPU per rank.
 *
 * Each op is the `_cuda` twin of a `_cpu` function in cpu/cpu.h, with the
 * same arguments in the same order, so the ops_*.c dispatch with one line
 * per op and a reader can hold the two side by side. The dtype contract is the
 * CPU's: `dt` is the compute dtype D (fp32, bf16 or fp16) of every void *
 * argument unless stated; float * is always fp32 (statistics, parameter
 * gradients, master weights, Adam moments). Math runs in fp32 (fp64 for
 * the long sums), and a result is rounded once, when it is stored, through
 * elem.h, so casts and roundings are bit-identical to the CPU's.
 *
 * Pointers are device pointers (NULL = absent where ops.h allows it), and
 * ops.c has already checked sizes and dtypes. Every op is enqueued on the
 * compute stream and returns without waiting for the GPU, except
 * copy_cuda to or from host memory, which returns when the host side may
 * be used. The only other host wait: free_cuda (cudaFree synchronises the
 * device; a scratch buffer grows in stream order, without one). Each goes
 * through cuda_set_wait's hook, so a run can stop instead of hanging.
 *
 * This header is plain C with C linkage, so ops.c, src/ and the tests
 * include it without CUDA headers; streams are handed out as void *
 * (cudaStream_t).
 *
 * Not collective.
 */
#ifndef TRI_KERNELS_CUDA_CUDA_H
#define TRI_KERNELS_CUDA_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "../ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- device, streams and handles (device_cuda.cu) ---------------------- */

/* Visible CUDA devices: 0 when there is no GPU or no NVIDIA driver at all;
 * -1 when the runtime fails otherwise (a driver older than this build's
 * runtime, a GPU in a bad state), with the reason in
 * cuda_device_count_error(). */
int cuda_device_count(void);
const char *cuda_device_count_error(void);
/* cudaGetDeviceCount's error (a cudaError_t) means "no GPU on this node"
 * (cudaErrorNoDevice, or an insufficient driver where none is installed)
 * rather than a GPU that cannot be used. Pure; for the tests. */
int cuda_count_means_no_gpu(int error, int driver_present);

/* Selects this rank's GPU and creates the compute stream and the cuBLAS
 * handle. One rank drives one GPU: device =
 * local_rank when the node's ranks see at least local_size devices; when
 * each rank sees exactly one device (srun --gpus-per-task=1 or a
 * per-rank CUDA_VISIBLE_DEVICES), device 0. Returns non-zero with a
 * message in err otherwise (no GPU, fewer GPUs than ranks, a GPU this
 * build has no kernels for). Call once per process, before any CUDA op.
 * Not collective; cuda_device_uuid lets the caller check over the node that
 * no two ranks share a GPU. */
int cuda_device_init(int local_rank, int local_size, char *err,
                     size_t err_size);
/* Waits for the compute stream, then frees it, the handles and the
 * workspace. */
void cuda_device_finalize(void);
/* The selected device's index, -1 before cuda_device_init. */
int cuda_device_index(void);
/* The selected device's 16-byte UUID. */
void cuda_device_uuid(unsigned char uuid[16]);
/* The selected device's memory in bytes (all of it, not what is free). */
int64_t cuda_device_memory_bytes(void);
/* How many times a scratch buffer has grown (a stream-ordered allocation
 * each), for ops_device_allocations. */
int64_t cuda_scratch_growths(void);
/* ops_wide_scratch on the GPU: its scratch slot (cuda_common.h), grown in
 * stream order on the compute stream. */
void *wide_scratch_cuda(size_t bytes);
/* cudaStream_t of the compute stream. Communication runs on streams of
 * src/parallel/comm_nccl.c's, one per communicator. */
void *cuda_compute_stream(void);
/* Blocks the host until all work on the compute stream is done (through
 * cuda_set_wait's hook). That covers communication too: comm_nccl.c joins
 * every operation into the compute stream (the compute stream waits for
 * it) before anything reuses its buffers or reads its result, so the work
 * queued on the compute stream is behind every operation whose buffers
 * the host may free. */
void cuda_synchronize(void);

/* ---- host waits (device_cuda.cu) ----------------------------------------- */

/* Every host wait of this backend (a copy to or from host memory,
 * cuda_synchronize) records an event behind the work it waits for and
 * hands it to this hook, which returns once the event (a cudaEvent_t)
 * has completed, or never. what names the wait ("a copy between host and
 * GPU"). The default, and NULL, is cudaEventSynchronize. kernels/ never
 * communicates, so it cannot tell a slow GPU from a dead peer:
 * src/parallel/comm_nccl.c installs a hook that polls the event together
 * with NCCL's asynchronous errors and a timeout. */
typedef void (*cuda_wait_fn)(void *event, const char *what);
void cuda_set_wait(cuda_wait_fn wait);
/* Waits through the hook for the work queued so far on stream (a
 * cudaStream_t). */
void cuda_wait_stream(void *stream, const char *what);

/* ---- device timers (timer_cuda.cu) --------------------------------------- */

/* Records t's next mark on the compute stream, growing its event pool. */
void timer_mark_cuda(ops_timer *t);
/* Sum of the elapsed times of t's closed intervals, in seconds, once its
 * last mark has completed (waited for through the hook above). */
double timer_elapsed_cuda(ops_timer *t);
void timer_free_cuda(ops_timer *t);

/* ---- memory (tensor_cuda.cu) -------------------------------------------- */

/* Zero-filled device memory (256-byte aligned); fatal when it runs out. */
void *alloc_cuda(size_t bytes);
void free_cuda(void *p);
/* Zero-filled page-locked host memory; fatal when it cannot be had. */
void *alloc_pinned_cuda(size_t bytes);
void free_pinned_cuda(void *p);
void zero_cuda(void *p, size_t bytes);
/* dst = src between any devices (ddev, sdev each OPS_CPU or OPS_CUDA);
 * returns once a host source may be reused and a host destination read. */
void copy_cuda(void *dst, ops_device ddev, const void *src, ops_device sdev,
               size_t bytes);
/* copy_rows_cpu's twin, both pointers on the device: one
 * cudaMemcpy2DAsync on the compute stream. */
void copy_rows_cuda(void *dst, const void *src, int64_t rows, size_t row_bytes,
                    size_t src_stride);
/* ops_copy_async and ops_copy_wait on a GPU: cudaMemcpyAsync on the copy
 * stream of the copy's direction, ordered after the compute stream's work
 * by an event, and an event per lane recorded after it. */
void copy_async_cuda(void *dst, ops_device ddev, const void *src, ops_device sdev,
                     size_t bytes, int lane);
void copy_wait_cuda(int lane);
/* dst(n) of dtype ddt = src(n) of dtype sdt, both on the device. */
void cast_cuda(void *dst, ops_dtype ddt, const void *src, ops_dtype sdt,
               int64_t n);

/* ---- GEMM (gemm_cuda.cu) ------------------------------------------------- */

/* "cuBLAS 13.1.0 cublasGemmEx (fp32 accumulation), NVIDIA H100 80GB HBM3
 * (sm_90, 132 SMs, 79 GiB)"; *warning is set when the GPU lacks bf16
 * tensor cores, else NULL. */
const char *gemm_info_cuda(const char **warning);
/* Sustained GEMM rate (FLOP/s) in dtype dt with fp32 accumulation, timed
 * with CUDA events on a 4096^3 GEMM for about `seconds`. */
double gemm_peak_cuda(ops_dtype dt, double seconds);
/* The selected GPU's dense datasheet peak in dt (FLOP/s), 0 for a model
 * trident's table does not list; how names the source. */
double hardware_peak_cuda(ops_dtype dt, char *how, size_t how_size);

/* ---- TRIDENT_FUSED (fused_cuda.cu) ---------------------------------------- */

/* 1 unless the switch TRIDENT_FUSED is 0 (the unfused kernels, for
 * measuring against them; switches.h). */
int fused_enabled_cuda(void);
/* ---- cuBLASLt epilogues (gemm_lt_cuda.cu) -------------------------------
 * What the linear layers fuse into their GEMMs, chosen once at set-up
 * from TRIDENT_LT_EPILOGUE (cuda_device_init; doc/gpu.md): none runs the
 * unfused kernels (bias rows, GELU, dGELU and the column-sum bias
 * gradient as kernels of their own), bias fuses the forward bias and the
 * bias gradient (the default), all also GELU and its gradient. */
typedef enum { LT_EPILOGUE_NONE, LT_EPILOGUE_BIAS, LT_EPILOGUE_ALL } lt_epilogue_mode;
/* The mode the switch TRIDENT_LT_EPILOGUE names (switches.h). Its default
 * is bias: cuBLASLt's GELU is the tanh form (PyTorch's _addmm_activation
 * notes, pytorch/pytorch#104061) but not elem.h's to round-off (about
 * 5e-6 in fp32, measured elsewhere; NVIDIA documents neither form nor
 * accuracy), and issue 34 fuses GELU only if it is. t_ops_cuda prints the
 * difference on the GPU; all stays a measurement (doc/gpu.md). */
lt_epilogue_mode lt_epilogue_switch(void);
const char *lt_epilogue_name(lt_epilogue_mode mode);
lt_epilogue_mode lt_epilogue_cuda(void);
/* For tests: run the other paths side by side, and count the GEMMs that
 * ran with an epilogue (a case cuBLASLt has no algorithm for runs the
 * unfused kernels and is not counted). */
void lt_epilogue_set_cuda(lt_epilogue_mode mode);
int64_t lt_fused_count_cuda(void);
/* What a cuBLASLt status (cublasStatus_t) means for a GEMM with an
 * epilogue: it runs (SUCCESS), it falls back to the unfused kernels (a
 * status of the case: NOT_SUPPORTED, INVALID_VALUE, ARCH_MISMATCH, all
 * raised before a launch), or it is fatal (anything else). Pure. */
typedef enum { LT_RUNS, LT_FALLS_BACK, LT_FATAL } lt_verdict;
lt_verdict lt_status_verdict(int status);

/* ---- dense layers (matmul_cuda.cu) --------------------------------------- */

/* out holds odt (F32 or dt). */
void matmul_fwd_cuda(void *out, ops_dtype odt, const void *inp, const void *w,
                     const void *bias, ops_dtype dt, int M, int N, int K);
/* dout holds ddt (F32 or dt); an F32 dout is rounded to dt as it is read. */
void matmul_bwd_cuda(void *dinp, float *dw, float *dbias, const void *dout,
                     ops_dtype ddt, const void *inp, const void *w,
                     ops_dtype dt, int M, int N, int K);
/* matmul_bwd_cuda without a bias, dout (M,N) of dtype dt with rows ld
 * elements apart: the head's gradient as xent_fused_narrow_cuda leaves it
 * (ld = 2N). */
void matmul_bwd_ld_cuda(void *dinp, float *dw, const void *dout, int64_t ld,
                        const void *inp, const void *w, ops_dtype dt, int M,
                        int N, int K);
/* GPT-2's MLP up: pre(M,N) = inp . w^T + bias, out = gelu(pre), all dt
 * (ops_matmul_gelu_fwd). */
void matmul_gelu_fwd_cuda(void *out, void *pre, const void *inp, const void *w,
                          const void *bias, ops_dtype dt, int M, int N, int K);
/* GPT-2's MLP down, backward: dinp(M,K) = (dout . w) * gelu'(pre), dw and
 * dbias += as matmul_bwd_cuda, dout of dtype dt (ops_matmul_dgelu_bwd). */
void matmul_dgelu_bwd_cuda(void *dinp, float *dw, float *dbias, const void *dout,
                           const void *inp, const void *w, const void *pre, ops_dtype dt,
                           int M, int N, int K);

/* ---- elementwise (elementwise_cuda.cu) ----------------------------------- */

void gelu_fwd_cuda(void *out, const void *inp, ops_dtype dt, int64_t n);
void gelu_bwd_cuda(void *dinp, const void *inp, const void *dout,
                   ops_dtype dt, int64_t n);
void add_cuda(void *out, const void *a, const void *b, ops_dtype dt,
              int64_t n);
void accumulate_cuda(void *y, const void *x, ops_dtype dt, int64_t n);
void scale_cuda(void *x, float s, ops_dtype dt, int64_t n);
void clip_value_cuda(void *x, float c, ops_dtype dt, int64_t n);
/* acc: one double on the device. Deterministic: fixed blocks, fixed order. */
void sumsq_accumulate_cuda(double *acc, const void *x, ops_dtype dt,
                           int64_t n);
void sum_accumulate_cuda(double *acc, const void *x, ops_dtype dt, int64_t n);
/* *acc += the sum of squares of every tensor of x, in one launch over a
 * table of the tensors (multi_cuda.cu) and one ordered finish: the same
 * bits every run, close to but not those of sumsq_accumulate_cuda per
 * tensor (another order of the fp64 additions). */
void sumsq_multi_cuda(double *acc, const ops_tensor *x, int count);

/* ---- LayerNorm (layernorm_cuda.cu) --------------------------------------- */

void layernorm_fwd_cuda(void *out, float *mean, float *rstd, const void *inp,
                        const void *w, const void *b, ops_dtype dt, int N,
                        int C);
/* resid = a + b rounded to dt, then layernorm_fwd_cuda of resid, in one
 * pass over the rows; resid may alias a or b. */
void add_layernorm_fwd_cuda(void *resid, void *out, float *mean, float *rstd,
                            const void *a, const void *b, const void *w,
                            const void *bias, ops_dtype dt, int N, int C);
void layernorm_bwd_cuda(void *dinp, float *dw, float *db, const void *dout,
                        const void *inp, const void *w, const float *mean,
                        const float *rstd, ops_dtype dt, int N, int C);
/* dw, db (C) += the column sums of layernorm_bwd_cuda: packed (16-byte
 * packs where C and the pointers allow, a thread per pack) or not (a
 * thread per channel, what TRIDENT_FUSED=0 runs); the same bits either
 * way. On the current device's stream. */
void layernorm_dwdb_cuda(float *dw, float *db, const void *dout,
                         const void *inp, const float *mean, const float *rstd,
                         ops_dtype dt, int N, int C, int packed);
/* dbias (N) += the column sums of dout (M,N) of dtype dt, rows ld
 * elements apart, as matmul_bwd_cuda's unfused bias gradient: packed or
 * not (TRIDENT_FUSED=0), the same bits either way. On the current
 * device's stream. */
void bias_bwd_cuda(float *dbias, const void *dout, ops_dtype dt, int64_t ld,
                   int M, int N, int packed);

/* ---- Llama (llama_cuda.cu) ---- */

void rmsnorm_fwd_cuda(void *out, float *rstd, const void *inp, const void *w,
                     ops_dtype dt, int N, int C, float eps);
/* resid = a + b (rounded to dt), then rmsnorm_fwd_cuda of resid, in one
 * pass over the rows: the bits of add_cuda then rmsnorm_fwd_cuda. resid
 * may alias a or b. */
void add_rmsnorm_fwd_cuda(void *resid, void *out, float *rstd, const void *a, const void *b,
                          const void *w, ops_dtype dt, int N, int C, float eps);
void rmsnorm_bwd_cuda(void *dinp, float *dw, const void *dout, const void *inp,
                     const void *w, const float *rstd, ops_dtype dt, int N, int C);
/* dw (C) += the column sums of x * rstd * dout over the N rows, as
 * rmsnorm_bwd_cuda's dw: packed (16-byte packs where C and the pointers
 * allow, a thread per pack) or not (a thread per channel, what
 * TRIDENT_FUSED=0 runs); the same bits either way. On the current
 * device's stream. */
void rmsnorm_dw_cuda(float *dw, const void *dout, const void *inp, const float *rstd,
                     ops_dtype dt, int N, int C, int packed);
/* Positions t0 .. t0 + T - 1; inverse: rotate back (the backward) */
void rope_cuda(void *x, ops_dtype dt, int B, int T, int t0, int H, int hs, double theta,
              int inverse);
void swiglu_fwd_cuda(void *out, const void *gate, const void *up, ops_dtype dt,
                    int64_t n);
void swiglu_bwd_cuda(void *dgate, void *dup, const void *dout, const void *gate,
                    const void *up, ops_dtype dt, int64_t n);
void gqa_expand_cuda(void *qkv, const void *q, const void *k, const void *v,
                    ops_dtype dt, int N, int NH, int NKV, int hs);
void gqa_reduce_cuda(void *dq, void *dk, void *dv, const void *dqkv, ops_dtype dt,
                    int N, int NH, int NKV, int hs);

/* ---- attention (attention_cuda.cu, attention_mma_cuda.cu, attention_exact_cuda.cu) */

/* Fused, as ops.h's: lse (B,NH,T) fp32 is each row's log-sum-exp; no
 * T x T buffer. hs at most ATTENTION_MAX_HS_CUDA (fatal beyond). */
#define ATTENTION_MAX_HS_CUDA 128
void attention_fwd_cuda(void *out, float *lse, const void *qkv, ops_dtype dt,
                        int B, int T, int NH, int hs);
void attention_bwd_cuda(void *dqkv, const void *dout, const void *qkv,
                        const void *out, const float *lse, ops_dtype dt,
                        int B, int T, int NH, int hs);
/* Query rows [q0, q0 + Tq) against keys [0, q0 + Tq), as ops.h's
 * ops_attention_rows_fwd/bwd: out (B,Tq,NH*hs), lse (B,NH,Tq); the
 * backward adds into dqkv with accumulate, else overwrites (only the whole
 * sequence, q0 = 0 and Tq = T, may ask that). */
void attention_rows_fwd_cuda(void *out, float *lse, const void *qkv, ops_dtype dt,
                             int B, int T, int q0, int Tq, int NH, int hs);
void attention_rows_bwd_cuda(void *dqkv, const void *dout, const void *qkv,
                             const void *out, const float *lse, ops_dtype dt,
                             int B, int T, int q0, int Tq, int NH, int hs, int accumulate);
/* The tensor-core kernels attention_rows_fwd_cuda and
 * attention_rows_bwd_cuda run for bf16 and fp16 (attention_mma_cuda.cu),
 * same arguments. */
void attention_mma_fwd_cuda(void *out, float *lse, const void *qkv, ops_dtype dt,
                            int B, int T, int q0, int Tq, int NH, int hs);
void attention_mma_bwd_cuda(void *dqkv, const void *dout, const void *qkv, const void *out,
                            const float *lse, ops_dtype dt, int B, int T, int q0, int Tq,
                            int NH, int hs, int accumulate);
/* The 1-D grid of B*NH tiles of `rows` rows each, for fn's kernels
 * (attention_grid_cuda.cu); fatal past CUDA's grid limit or past
 * ATTENTION_MAX_HS_CUDA. */
unsigned attention_grid_cuda(const char *fn, int B, int NH, int T, int hs, int rows);
/* The kernels' template bucket of a head size: 32, 64 or 128. */
int attention_head_bucket_cuda(int hs);
/* The reference by cuBLAS GEMMs, same arguments: one sequence's (NH,T,T)
 * probabilities in a device scratch. For tests, not the trainer. */
void attention_exact_fwd_cuda(void *out, float *lse, const void *qkv, ops_dtype dt,
                              int B, int T, int NH, int hs);
void attention_exact_bwd_cuda(void *dqkv, const void *dout, const void *qkv,
                              const void *out, const float *lse, ops_dtype dt,
                              int B, int T, int NH, int hs);

/* ---- cuDNN's fused attention (attention_cudnn_cuda.cu, --with-cudnn-frontend) */

/* attention_fwd_cuda's and attention_bwd_cuda's whole-sequence causal
 * attention through cuDNN's flash attention, same arguments and layouts,
 * in place; the backward deterministic. 1 when cuDNN ran, 0 when the
 * caller must run trident's kernel: a dtype or head size
 * attention_cudnn_supports_cuda refuses, a pointer off 16 bytes, or cuDNN
 * failing (no handle, a graph it would not build or run, an exception;
 * said once on stderr; a graph whose run failed is not tried again). */
int attention_cudnn_fwd_cuda(void *out, float *lse, const void *qkv, ops_dtype dt,
                             int B, int T, int NH, int hs);
int attention_cudnn_bwd_cuda(void *dqkv, const void *dout, const void *qkv, const void *out,
                             const float *lse, ops_dtype dt, int B, int T, int NH, int hs);
/* bf16 or fp16, hs a multiple of 8 from 8 to ATTENTION_MAX_HS_CUDA. */
int attention_cudnn_supports_cuda(ops_dtype dt, int hs);
/* "cuDNN 9.19.0, frontend 1.23.0": the library that runs, the headers built with. */
const char *attention_cudnn_version_cuda(void);
/* The workspace in bytes the cached graph of (backward or not, dt, B, T,
 * NH, hs) asked for; -1 when none is cached. For t_ops_cuda's note: the
 * deterministic backward on Hopper takes the frontend's dP-workspace path,
 * whose size may grow with T^2 (doc/gpu.md). */
int64_t attention_cudnn_workspace_cuda(int backward, ops_dtype dt, int B, int T, int NH,
                                       int hs);
/* Frees the built graphs and the cuDNN handle (cuda_device_finalize). */
void attention_cudnn_finalize_cuda(void);

/* ---- embeddings (embedding_cuda.cu) -------------------------------------- */

void embedding_fwd_cuda(void *out, const int32_t *tokens, const void *wte,
                        ops_dtype dt, int v0, int Vl, int N, int C);
void embedding_bwd_cuda(float *dwte, const int32_t *tokens, const void *dout,
                        ops_dtype dt, int v0, int Vl, int N, int C);
/* embedding_bwd_cuda's kernel under TRIDENT_FUSED=0: the same bits, one
 * dout load in flight per thread. */
void embedding_bwd_serial_cuda(float *dwte, const int32_t *tokens, const void *dout,
                               ops_dtype dt, int v0, int Vl, int N, int C);
void position_fwd_cuda(void *out, const void *wpe, ops_dtype dt, int B, int T,
                       int C);
void position_bwd_cuda(float *dwpe, const void *dout, ops_dtype dt, int B,
                       int T, int C);

/* ---- softmax cross-entropy (xent_cuda.cu) -------------------------------- */

void xent_max_cuda(float *rowmax, const void *logits, ops_dtype dt, int N,
                   int Vl);
void xent_sumexp_cuda(float *sumexp, float *target_logit, const void *logits,
                      ops_dtype dt, const float *rowmax,
                      const int32_t *targets, int v0, int N, int Vl);
/* The three phases with v0 = 0 in two passes over the logits (an online
 * max and sum, then the gradient); rowmax, sumexp and target_logit are
 * filled as the phases fill them, to fp32 rounding. dlogits (dtype dt,
 * or NULL) may alias logits. */
void xent_fused_cuda(float *losses, void *dlogits, const void *logits,
                     ops_dtype dt, float *rowmax, float *sumexp,
                     float *target_logit, const int32_t *targets, int N, int V,
                     float grad_scale);
/* xent_fused_cuda over fp32 logits with the gradient rounded to gdt (bf16
 * or fp16) and written over the logits' own memory: row i of dlogits
 * starts where row i of the logits starts, so its rows lie 2V elements of
 * gdt apart (matmul_bwd_ld_cuda reads them so). logits must be the
 * logits themselves (no copy elsewhere). */
void xent_fused_narrow_cuda(float *losses, float *logits, ops_dtype gdt,
                            float *rowmax, float *sumexp, float *target_logit,
                            const int32_t *targets, int N, int V, float grad_scale);
/* dlogits (dtype dt) may alias logits. */
void xent_finish_cuda(float *losses, void *dlogits, const void *logits,
                      ops_dtype dt, const float *rowmax, const float *sumexp,
                      const float *target_logit, const int32_t *targets,
                      int v0, int N, int Vl, float grad_scale);

/* ---- mixture of experts (moe_cuda.cu; not yet run on a GPU) ----------
 * Router tensors fp32, ids and maps int32, rows of dtype dt; order is an
 * ops_moe_order. dweights, dys may be NULL (combine_bwd). */
void moe_router_fwd_cuda(int32_t *ids, float *weights, float *probs, const float *logits,
                         int N, int E, int k, int order);
void moe_router_bwd_cuda(float *dlogits, const float *dweights, const int32_t *ids,
                         const float *weights, const float *probs, int N, int E, int k,
                         int order);
void moe_aux_fwd_cuda(float *loss, float *frac, float *mean_prob, const float *probs,
                      const int32_t *ids, int N, int E, int k);
void moe_aux_bwd_cuda(float *dlogits, const float *probs, const float *frac, int N, int E,
                      float coeff);
void moe_zloss_fwd_cuda(float *loss, float *lse, const float *logits, int N, int E);
void moe_zloss_bwd_cuda(float *dlogits, const float *logits, const float *lse, int N, int E,
                        float coeff);
void moe_permute_cuda(int32_t *order, int32_t *row_of, int32_t *offsets, int32_t *dropped,
                      const int32_t *ids, int N, int E, int k, int capacity);
/* moe_permute_cuda's two kernels, whatever TRIDENT_FUSED says (it picks
 * the first; t_ops_cuda checks both): a thread per expert in one block,
 * and the whole sort on one thread (TRIDENT_FUSED=0). */
void moe_permute_experts_cuda(int32_t *order, int32_t *row_of, int32_t *offsets,
                              int32_t *dropped, const int32_t *ids, int N, int E, int k,
                              int capacity);
void moe_permute_serial_cuda(int32_t *order, int32_t *row_of, int32_t *offsets,
                             int32_t *dropped, const int32_t *ids, int N, int E, int k,
                             int capacity);
void moe_gather_cuda(void *xs, const void *x, ops_dtype dt, const int32_t *order, int R,
                     int C, int k);
void moe_gather_bwd_cuda(void *dx, const void *dxs, ops_dtype dt, const int32_t *row_of,
                         int N, int C, int k);
void moe_combine_fwd_cuda(void *out, const void *ys, ops_dtype dt, const float *weights,
                          const int32_t *row_of, int N, int C, int k);
void moe_combine_bwd_cuda(void *dys, float *dweights, const void *dout, const void *ys,
                          ops_dtype dt, const float *weights, const int32_t *row_of,
                          int N, int C, int k);
void moe_sigmoid_fwd_cuda(float *gate, const float *logit, int N);
void moe_sigmoid_bwd_cuda(float *dlogit, const float *dgate, const float *gate, int N);

/* ---- optimizer (adamw_cuda.cu) ------------------------------------------- */

/* grad is F32, BF16 or F16 (gdt); wcopy may be NULL, else of dtype wdt. */
void adamw_cuda(float *master, const void *grad, ops_dtype gdt, float *m,
                float *v, void *wcopy, ops_dtype wdt, int64_t n,
                const ops_adamw_args *a);
/* adamw_cuda over every segment (ops_adamw_seg, each with its own weight
 * decay), in one launch over a table of the segments: the same bits as
 * adamw_cuda segment by segment. */
void adamw_multi_cuda(const ops_adamw_seg *seg, int count, const ops_adamw_args *a);

#ifdef __cplusplus
}
#endif
#endif
