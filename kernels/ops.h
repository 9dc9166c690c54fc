/*
 * ops.h - what the model computes, on one device.
 *
 * Every op takes ops_tensor handles (pointer + dtype + device + length) and
 * plain int shapes, llm.c-style: B batch, T time, C channels, V vocabulary,
 * NH heads, hs head size, N = B*T rows. ops.c checks dtypes, and each op
 * family's ops_*.c dispatches on the device to kernels/cpu/ or
 * kernels/cuda/. Nothing here knows about MPI, HDF5 or the pipeline
 * schedule: collectives happen between ops, in src/.
 *
 * Conventions that every backend keeps:
 *  - matrices are row-major; a linear layer's weight is (out, in), as in
 *    GPT-2 and llm.c, so y = x . W^T + b;
 *  - parameter gradients ACCUMULATE (+=) so microbatches add up without a
 *    copy; input gradients are stated per op (overwrite "=" or "+=");
 *  - statistics (LayerNorm mean/rstd, softmax max/sum, loss) are fp32.
 *
 * Precision: the contract every backend keeps, and ops.c enforces.
 * Each call has one compute dtype D, fp32, bf16 or fp16: the dtype of its
 * activations, weight copies and activation gradients, which must all
 * agree (a bf16 inp with an fp16 w fails, naming both). Always fp32,
 * whatever D: LayerNorm mean/rstd; attention's per-row log-sum-exp `lse`; the softmax cross-entropy vectors (rowmax, sumexp,
 * target_logit, losses); PARAMETER GRADIENTS (matmul dw and dbias,
 * LayerNorm dw/db, dwte, dwpe), which accumulate in fp32; AdamW's master
 * weights, m and v. The accumulators of sumsq/sum are fp64. Per op:
 *  - matmul_fwd: inp, w, bias D; out D, or fp32 (the LM head writes fp32
 *    logits so that the loss is computed in fp32);
 *  - matmul_bwd: dinp, inp, w D; dw, dbias fp32 (+=); dout D, or fp32
 *    (the head's dlogits, in place over fp32 logits). An fp32 dout is
 *    rounded to D as it is read, so the result is that of casting dout to
 *    D first (up to fp32 reassociation in dinp), without the caller
 *    holding a (B*T, V) copy;
 *  - layernorm: out, inp, w, b, dout, dinp D; mean, rstd, dw, db fp32;
 *  - gelu, add, accumulate, scale, clip_value: every tensor D (fp32 for
 *    the fp32 gradient buffers);
 *  - attention: qkv, out, dout, dqkv D; lse fp32;
 *  - embedding/position: wte, wpe, out, dout D; dwte, dwpe fp32;
 *  - xent: logits and dlogits share one dtype, which the model makes fp32
 *    (ops_xent_fused_narrow, GPU only: fp32 logits, a D gradient);
 *  - sumsq/sum_accumulate and adamw's grad and wcopy: any float dtype.
 * Arithmetic is fp32 on inputs widened from D (GEMMs accumulate in fp32)
 * and each result is rounded to its dtype once, when stored: an fp16
 * result beyond 65504 is inf and one below 2^-25 is 0, as on a GPU, which
 * is what fp16 loss scaling exists for.
 *
 * Not collective: kernels never communicate.
 */
#ifndef TRI_KERNELS_OPS_H
#define TRI_KERNELS_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "dtype.h"
#include "fatal.h"
#include "switches.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { OPS_CPU = 0, OPS_CUDA = 1 } ops_device;

/* A flat buffer of n elements; shapes are passed to each op. data == NULL
 * means "absent" for optional arguments (bias, position embedding). */
typedef struct {
    void *data;
    int64_t n;
    ops_dtype dtype;
    ops_device device;
} ops_tensor;

extern const ops_tensor OPS_NONE;

/* ---- memory and set-up ------------------------------------------------
 * dtypes (ops_dtype_size, _name, _parse) are in dtype.h, the fatal handler
 * (ops_set_fatal_handler, ops_fatal) in fatal.h; both come with this
 * header. */

/* Zero-filled, 64-byte aligned allocation. Aborts through the fatal handler
 * when memory runs out (the message names the size). */
ops_tensor ops_alloc(ops_dtype dtype, ops_device device, int64_t n);
void ops_free(ops_tensor *t);
/* Host memory (an OPS_CPU tensor, zero-filled) that copies from and to
 * `near` run at full speed: page-locked (pinned) when near is OPS_CUDA, so
 * a download needs no staging by the driver; plain ops_alloc otherwise.
 * Free it with ops_free_host and the same `near`. */
ops_tensor ops_alloc_host(ops_dtype dtype, int64_t n, ops_device near);
void ops_free_host(ops_tensor *t, ops_device near);
/* A view of elements [off, off+n) of t. */
ops_tensor ops_view(ops_tensor t, int64_t off, int64_t n);
void ops_zero(ops_tensor t);
/* dst = src; same dtype, any devices. */
void ops_copy(ops_tensor dst, ops_tensor src);
/* dst (rows x cols, dense) = rows of cols elements of src, row r starting
 * at element r * src_stride (src_stride >= cols): a strided gather on one
 * device, same dtype. On a GPU one cudaMemcpy2DAsync queued on the compute
 * stream, with no host wait, so a batch uploaded once can be split into
 * microbatches (tokens and targets, src/step/pipeline.c) without a host stall
 * per row. */
void ops_copy_rows(ops_tensor dst, ops_tensor src, int64_t rows, int64_t cols,
                   int64_t src_stride);
/* Asynchronous copies, for the optimizer offload (src/step/offload.c), which
 * overlaps the transfers of one chunk with the host's work on another.
 * ops_copy_async is ops_copy queued on a GPU: on a copy stream of its
 * direction (one device to host, one host to device, so the two copy
 * engines run at once), after everything already queued on the compute
 * stream, and returning at once. ops_copy_wait(lane) blocks the host until
 * the last copy queued under `lane` (0 .. OPS_COPY_LANES-1) is done. Host
 * memory must come from ops_alloc_host. On the CPU the copy is a memcpy,
 * done when it returns, and waiting does nothing. */
#define OPS_COPY_LANES 4
void ops_copy_async(ops_tensor dst, ops_tensor src, int lane);
void ops_copy_wait(ops_device dev, int lane);
/* dst = (dtype of dst) src, element-wise rounding (round-to-nearest-even);
 * fp16 reproduces the real range: overflow gives inf, tiny values flush
 * to subnormals or zero. Across devices (set-up, checkpoints: not inside a
 * step) the data moves through a temporary on dst's device. */
void ops_cast(ops_tensor dst, ops_tensor src);

/* Which GEMM library and kernel run, e.g. "oneDNN 2.6.3 dnnl_sgemm
 * (avx512_core_amx)"; *warning is set to a message when that kernel is far
 * below what the CPU supports, else NULL. */
const char *ops_gemm_info(const char **warning);
/* Chooses now the path of the CPU's bf16 GEMMs (cpu/gemm_cpu.c), from this
 * CPU, this build and TRIDENT_CPU_BF16_GEMM, which the first bf16 GEMM
 * would otherwise choose: 0, or 1 with err naming the variable, its value
 * and what this CPU or build lacks to run it (the path is then unusable:
 * the caller stops the run). A trident kernel the check refuses under
 * auto is warned about on stderr, and the path is the widened one. Call at
 * start-up on a run computing on the CPU, after ops_switches_check,
 * outside parallel regions. Not collective (src/parallel/device.c calls
 * it on every rank). */
int ops_cpu_gemm_check(char *err, size_t err_size);
/* Measures the sustained fp32 GEMM rate (FLOP/s) of this process over about
 * `seconds`, on a square GEMM of the size models use. */
double ops_gemm_peak(double seconds);
/* The same for a compute dtype: a linear layer's forward GEMM with inputs
 * and output in dtype (fp32, bf16 or fp16), fp32 accumulation, run the way
 * ops_matmul_fwd runs it. The peak for MFU in that precision. */
double ops_gemm_peak_dtype(ops_dtype dtype, double seconds);
/* The same for the GEMMs of a device (cuBLAS on OPS_CUDA). */
const char *ops_gemm_info_on(ops_device dev, const char **warning);
double ops_gemm_peak_on(ops_device dev, ops_dtype dtype, double seconds);
/* The hardware's dense peak in dtype (FLOP/s) for this process, the
 * denominator of MFU. On the CPU: the widest multiply-add instruction
 * (AVX-512 or AVX2 FMA; AMX or AVX512_BF16 for bf16) measured on every
 * OpenMP thread at once for about `seconds`, so ranks sharing cores each
 * get their share (cpu/peak_cpu.c). On a GPU: the datasheet figure of the
 * selected device, 0 for a model not in the table. `how` receives what the
 * figure is ("AVX2 vfmadd231ps (8 fp32 lanes) x 2 threads"). */
double ops_hardware_peak_on(ops_device dev, ops_dtype dtype, double seconds, char *how,
                            size_t how_size);
/* The CPU's model name (CPUID brand string), e.g. "AMD EPYC 7763 64-Core
 * Processor"; "unknown CPU" where it has none. */
const char *ops_cpu_name(void);
/* Non-zero when the CPU multiplies bf16 natively (AMX usable by this
 * process, or AVX512_BF16); without it bf16 runs on the fp32 units and is
 * no faster than fp32. */
int ops_cpu_native_bf16(void);

/* Devices of a kind this process can see (the CPU: 1; CUDA: 0 in a
 * CPU-only build, without a GPU or without an NVIDIA driver; -1 when the
 * CUDA runtime fails otherwise, e.g. a driver older than the build's
 * runtime, with the reason in ops_device_count_error). */
int ops_device_count(ops_device dev);
const char *ops_device_count_error(ops_device dev);
/* One rank per GPU: picks device local_rank of this node, checks that the
 * node has enough, creates the streams and handles. On failure writes the
 * reason ("built without CUDA; reconfigure with --with-cuda", "node has 4
 * ranks but 2 visible GPUs", ...) to err and returns non-zero. The CPU
 * needs nothing. */
/* The selected device's 16-byte identity (CUDA: its UUID), for checking
 * that no two ranks of a node drive one GPU; returns 0 and leaves uuid
 * alone for the CPU. Call after ops_device_init. Not collective. */
int ops_device_uuid(ops_device dev, unsigned char uuid[16]);
/* The selected device's memory in bytes: all of it, the same on every
 * rank that drives the same kind of GPU (what is free differs from rank to
 * rank); 0 for the CPU, whose memory the host owns. Call after
 * ops_device_init. Not collective. */
int64_t ops_device_memory_bytes(ops_device dev);
/* Allocations made so far on dev, scratch included: ops_alloc's, a
 * scratch buffer's growing (cudaMallocAsync on a GPU), and, for a GPU,
 * pinned host memory (ops_alloc_host near it). Set-up and the first step
 * allocate; a steady step must not (on a GPU a cudaFree there waits for
 * the whole device, NCCL included), and tests/t_gpu.sh and t_train.sh
 * check through the metrics file's `allocations` that it stays put after
 * step 1. Not collective. */
int64_t ops_device_allocations(ops_device dev);
/* n fp32 elements on dev for src/parallel/comm.c's bf16 and fp16
 * reductions, which it widens to fp32: one buffer for the process that
 * only grows (its contents are not kept when it does), counted by
 * ops_device_allocations when it grows. On a GPU it is a scratch slot of
 * the compute stream, grown in stream order (cudaFreeAsync,
 * cudaMallocAsync), so growing waits for nothing: ops_free's cudaFree
 * would wait for the whole device, NCCL's kernels on other streams
 * included, which may wait for a peer that waits for this rank. Every use
 * must be ordered behind the compute stream's work queued when it is
 * handed out, and the compute stream behind it (comm_nccl.c's blocking
 * collectives are). Not collective. */
ops_tensor ops_wide_scratch(ops_device dev, int64_t n);
int ops_device_init(ops_device dev, int local_rank, int local_size, char *err,
                    size_t err_size);
void ops_device_finalize(ops_device dev);

/* ---- device timers ------------------------------------------------------
 * The device's own time between marks, for the step's metrics (the
 * pipeline's busy and waiting time, the DP wait). On a GPU an op returns
 * before its work runs, so a host clock around it measures the launch; a
 * timer instead records marks on the compute stream (CUDA events, a pool
 * kept by the timer and reused each step) and reads them after the host
 * has waited for the work. On the CPU a mark is the host's monotonic
 * clock, so a timer reads what a host clock around the calls reads. */
typedef struct {
    ops_device device;
    double seconds;    /* intervals summed so far (the CPU) */
    double started;    /* the CPU: the clock at ops_timer_start */
    void *marks;       /* CUDA: cudaEvent_t pool, two per interval */
    int n_marks, capacity;
} ops_timer;

/* A timer on device reading 0; a zeroed ops_timer is one on the CPU. */
ops_timer ops_timer_on(ops_device device);
/* Opens and closes an interval; they alternate, start first. */
void ops_timer_start(ops_timer *t);
void ops_timer_stop(ops_timer *t);
/* The seconds inside the intervals closed since the last read, which
 * starts the count again. On a GPU it waits for the last mark: call it
 * once the step's host wait (the loss read) has happened, when that wait
 * is already over. */
double ops_timer_read(ops_timer *t);
/* Releases the marks (a GPU's events). */
void ops_timer_free(ops_timer *t);

/* ---- dense layers ----------------------------------------------------- */

/* out(M,N) = inp(M,K) . w(N,K)^T + bias(N). bias may be OPS_NONE. */
void ops_matmul_fwd(ops_tensor out, ops_tensor inp, ops_tensor w,
                    ops_tensor bias, int M, int N, int K);
/* dinp(M,K) = dout(M,N) . w(N,K)          (overwrite; skipped if absent)
 * dw(N,K)  += dout(M,N)^T . inp(M,K)       (skipped if absent)
 * dbias(N) += column sums of dout          (skipped if absent) */
void ops_matmul_bwd(ops_tensor dinp, ops_tensor dw, ops_tensor dbias,
                    ops_tensor dout, ops_tensor inp, ops_tensor w,
                    int M, int N, int K);
/* GPT-2's MLP up with its GELU: pre(M,N) = inp . w^T + bias (bias may be
 * OPS_NONE), out(M,N) = gelu_tanh(pre), all D; pre is kept for the
 * backward. On the CPU ops_matmul_fwd then ops_gelu_fwd (the same bits);
 * on a GPU the GEMM's epilogue adds the bias, then the GELU kernel runs;
 * under TRIDENT_LT_EPILOGUE=all (doc/gpu.md) one cuBLASLt GEMM applies its
 * own tanh GELU to the fp32 sum too, writing pre and out. */
void ops_matmul_gelu_fwd(ops_tensor out, ops_tensor pre, ops_tensor inp, ops_tensor w,
                         ops_tensor bias, int M, int N, int K);
/* The MLP down's backward through the GELU before it:
 * dinp(M,K) = (dout(M,N) . w(N,K)) * gelu'(pre(M,K))   (overwrite)
 * dw, dbias += as ops_matmul_bwd (skipped if absent; inp may then be
 * absent too). dout is D. On the CPU ops_matmul_bwd then ops_gelu_bwd
 * (the same bits); on a GPU under TRIDENT_LT_EPILOGUE=all the gradient is
 * cuBLASLt's DGELU epilogue. */
void ops_matmul_dgelu_bwd(ops_tensor dinp, ops_tensor dw, ops_tensor dbias,
                          ops_tensor dout, ops_tensor inp, ops_tensor w, ops_tensor pre,
                          int M, int N, int K);

/* ---- elementwise ------------------------------------------------------ */

/* out = gelu_tanh(inp). out may alias nothing. */
void ops_gelu_fwd(ops_tensor out, ops_tensor inp, int64_t n);
/* dinp = gelu'(inp) * dout   (overwrite; dinp may alias dout) */
void ops_gelu_bwd(ops_tensor dinp, ops_tensor inp, ops_tensor dout, int64_t n);
/* out = a + b   (out may alias a or b) */
void ops_add(ops_tensor out, ops_tensor a, ops_tensor b, int64_t n);
/* y += x */
void ops_accumulate(ops_tensor y, ops_tensor x, int64_t n);
/* x *= s */
void ops_scale(ops_tensor x, float s, int64_t n);
/* x = clamp(x, -c, c) */
void ops_clip_value(ops_tensor x, float c, int64_t n);
/* *acc (one OPS_F64 element on x's device) += sum of x^2, in fp64.
 * A non-finite element makes the sum non-finite: that doubles as the
 * overflow check. */
void ops_sumsq_accumulate(ops_tensor acc, ops_tensor x, int64_t n);
/* *acc (one OPS_F64 element on x's device) += sum of x, in fp64: the loss
 * stays on the device until the step reads it once. */
void ops_sum_accumulate(ops_tensor acc, ops_tensor x, int64_t n);
/* ops_sumsq_accumulate over x[0..count) (each x[i].n elements), in that
 * order. The CPU: exactly that loop, the same bits. A GPU under
 * TRIDENT_FUSED: one launch for all of them, then one ordered
 * sum of fixed per-block partials, the same bits every run but not the
 * loop's (the fp64 additions go in another order). */
void ops_sumsq_multi(ops_tensor acc, const ops_tensor *x, int count);

/* ---- LayerNorm -------------------------------------------------------- */

/* out(N,C) = (inp - mean) * rstd * w + b, eps 1e-5; mean, rstd (N) fp32. */
void ops_layernorm_fwd(ops_tensor out, ops_tensor mean, ops_tensor rstd,
                       ops_tensor inp, ops_tensor w, ops_tensor b,
                       int N, int C);
/* dinp += ..., dw += ..., db += ...   (all accumulate: the residual stream
 * gradient arrives in dinp already) */
void ops_layernorm_bwd(ops_tensor dinp, ops_tensor dw, ops_tensor db,
                       ops_tensor dout, ops_tensor inp, ops_tensor w,
                       ops_tensor mean, ops_tensor rstd, int N, int C);

/* resid = a + b (rounded to D, as ops_add), then ops_layernorm_fwd of
 * resid: the residual add and the LayerNorm after it (GPT-2's
 * x + attn_out; ln2), in one pass over the rows on a GPU under
 * TRIDENT_FUSED. Exactly ops_add then ops_layernorm_fwd otherwise and on
 * the CPU. resid may alias a or b; out aliases none of them. */
void ops_add_layernorm_fwd(ops_tensor resid, ops_tensor out, ops_tensor mean,
                           ops_tensor rstd, ops_tensor a, ops_tensor b,
                           ops_tensor w, ops_tensor bias, int N, int C);

/* ---- Llama: RMSNorm, rotary embeddings, SwiGLU, grouped-query heads ----
 * Dtypes as LayerNorm's and GELU's: activations and their gradients D,
 * rstd fp32, dw fp32 (+=). */

/* out(N,C) = inp * rstd * w, rstd = 1 / sqrt(mean(inp^2) + eps); rstd (N). */
void ops_rmsnorm_fwd(ops_tensor out, ops_tensor rstd, ops_tensor inp, ops_tensor w,
                     int N, int C, float eps);
/* resid = a + b (rounded to D, as ops_add), then ops_rmsnorm_fwd of
 * resid: the residual add and the RMSNorm after it (Llama's
 * x + attn_out; the MLP's norm), in one pass over the rows on a GPU under
 * TRIDENT_FUSED. Exactly ops_add then ops_rmsnorm_fwd otherwise and on
 * the CPU. resid may alias a or b; out aliases none of them. */
void ops_add_rmsnorm_fwd(ops_tensor resid, ops_tensor out, ops_tensor rstd, ops_tensor a,
                         ops_tensor b, ops_tensor w, int N, int C, float eps);
/* dinp += ..., dw += ...   (both accumulate, as LayerNorm's) */
void ops_rmsnorm_bwd(ops_tensor dinp, ops_tensor dw, ops_tensor dout, ops_tensor inp,
                     ops_tensor w, ops_tensor rstd, int N, int C);
/* Rotary position embeddings in place on x (B,T,H,hs), HuggingFace's
 * layout: channels i and i + hs/2 of each head at position t rotate by
 * t * theta^(-2i/hs). hs must be even. The backward rotates a gradient
 * back by the same angles. */
void ops_rope_fwd(ops_tensor x, int B, int T, int H, int hs, double theta);
void ops_rope_bwd(ops_tensor dx, int B, int T, int H, int hs, double theta);
/* ops_rope_fwd/bwd for rows of T tokens at positions t0 .. t0 + T - 1
 * (ops_rope_fwd is t0 = 0): a context-parallel rank's chunk of a longer
 * sequence rotates by its tokens' positions in that sequence. */
void ops_rope_fwd_at(ops_tensor x, int B, int T, int t0, int H, int hs, double theta);
void ops_rope_bwd_at(ops_tensor dx, int B, int T, int t0, int H, int hs, double theta);
/* out = silu(gate) * up */
void ops_swiglu_fwd(ops_tensor out, ops_tensor gate, ops_tensor up, int64_t n);
/* dgate = dout * up * silu'(gate), dup = dout * silu(gate)   (overwrite;
 * neither may alias an input) */
void ops_swiglu_bwd(ops_tensor dgate, ops_tensor dup, ops_tensor dout, ops_tensor gate,
                    ops_tensor up, int64_t n);
/* Grouped-query attention's heads into the attention ops' layout:
 * qkv(N,NH,3,hs) from q(N,NH,hs), k and v (N,NKV,hs), query head h
 * reading key/value head h / (NH/NKV). NKV must divide NH. */
void ops_gqa_expand(ops_tensor qkv, ops_tensor q, ops_tensor k, ops_tensor v,
                    int N, int NH, int NKV, int hs);
/* The reverse for gradients: dq = dqkv's q part; dk, dv = the sums of
 * each group's k and v parts (overwrite). */
void ops_gqa_reduce(ops_tensor dq, ops_tensor dk, ops_tensor dv, ops_tensor dqkv,
                    int N, int NH, int NKV, int hs);

/* ---- attention -------------------------------------------------------- */

/* Causal self-attention over NH local heads, fused: no T x T matrix is
 * kept, so activation memory grows linearly with T.
 * qkv (B,T,NH,3,hs): per head, q then k then v (the head-interleaved layout
 * that lets tensor parallelism split heads as a contiguous row block).
 * out (B,T,NH*hs); lse (B,NH,T) fp32 keeps each query row's log-sum-exp of
 * its scaled scores, log sum_j exp(q.k_j / sqrt(hs)), for the backward
 * pass, which recomputes the probabilities from it. */
void ops_attention_fwd(ops_tensor out, ops_tensor lse, ops_tensor qkv,
                       int B, int T, int NH, int hs);
/* dqkv (B,T,NH,3,hs) = ... (overwrite), from the forward's qkv, out and
 * lse. */
void ops_attention_bwd(ops_tensor dqkv, ops_tensor dout, ops_tensor qkv,
                       ops_tensor out, ops_tensor lse,
                       int B, int T, int NH, int hs);
/* Context parallelism's windows (issue 39). Causal attention for query
 * rows [q0, q0 + Tq) of T-token sequences: the queries at positions q0..,
 * keys and values at 0 .. q0 + Tq - 1, all read from qkv (B,T,NH,3,hs).
 * out (B,Tq,NH*hs) and lse (B,NH,Tq), overwritten. ops_attention_fwd is
 * q0 = 0, Tq = T (the same code and bits). 0 <= q0 <= q0 + Tq <= T. */
void ops_attention_rows_fwd(ops_tensor out, ops_tensor lse, ops_tensor qkv,
                            int B, int T, int q0, int Tq, int NH, int hs);
/* Accumulates into dqkv (B,T,NH,3,hs): the q gradient of rows [q0, q0+Tq)
 * and the k, v gradients of rows [0, q0+Tq) (+=; the caller zeroes dqkv
 * first, so the windows of one sequence add up), from dout (B,Tq,NH*hs),
 * the forward's qkv, out and lse. Rows q0 + Tq .. T - 1 are not touched.
 * The CUDA versions of both are checked on the host (t_attention_emu), not
 * yet on a GPU (doc/gpu.md). */
void ops_attention_rows_bwd(ops_tensor dqkv, ops_tensor dout, ops_tensor qkv,
                            ops_tensor out, ops_tensor lse,
                            int B, int T, int q0, int Tq, int NH, int hs);
/* The largest head size hs the attention ops take on dev, 0 for any: the
 * CUDA kernels size their tiles and registers for hs <= 128 (the CPU's
 * have no limit). Not collective. */
int ops_attention_max_head_size(ops_device dev);
/* Which kernel runs a GPU's whole-sequence causal attention (bf16, fp16):
 * trident's own or cuDNN's fused one (configure --with-cudnn-frontend),
 * as the switch TRIDENT_ATTENTION says (switches.h: trident, cudnn, or
 * unset/empty for cuDNN where built; cudnn in a build without it is
 * refused). This process's route; fatal on a value the switch refuses.
 * Not collective. */
typedef enum { OPS_ATTENTION_TRIDENT, OPS_ATTENTION_CUDNN } ops_attention_route;
ops_attention_route ops_attention_route_get(void);
/* Sets the route in place of the environment's (t_ops_cuda pins
 * trident's kernel for its cases of it). Not collective. */
void ops_attention_route_set(ops_attention_route route);
/* The start-up `attention:` line's text for a run on dev in dt: which
 * kernel runs and how to switch. A static buffer. Not collective. */
const char *ops_attention_info_on(ops_device dev, ops_dtype dt);

/* ---- embeddings (vocab-parallel aware) -------------------------------- */

/* out(N,C) = wte[tok - v0] for tokens in [v0, v0+Vl), 0 for others.
 * tokens (N) int32. Summing over the ranks that split V gives the lookup. */
void ops_embedding_fwd(ops_tensor out, ops_tensor tokens, ops_tensor wte,
                       int v0, int Vl, int N, int C);
/* dwte[tok - v0] += dout for tokens this shard owns. */
void ops_embedding_bwd(ops_tensor dwte, ops_tensor tokens, ops_tensor dout,
                       int v0, int Vl, int N, int C);
/* out(B,T,C) += wpe(T,C) broadcast over B. */
void ops_position_fwd(ops_tensor out, ops_tensor wpe, int B, int T, int C);
/* dwpe(T,C) += sum over B of dout(B,T,C). */
void ops_position_bwd(ops_tensor dwpe, ops_tensor dout, int B, int T, int C);

/* ---- softmax cross-entropy (vocab-parallel in three phases) -----------
 * logits (N,Vl) hold this shard's vocabulary [v0, v0+Vl). With one shard
 * the caller runs the phases back to back; with several it all-reduces
 * rowmax (MAX) after phase 1 and sumexp, target_logit (SUM) after phase 2.
 * All the (N) vectors are fp32. */
/* rowmax = max_j logits[i,j] over this shard */
void ops_xent_max(ops_tensor rowmax, ops_tensor logits, int N, int Vl);
/* sumexp[i] = sum_j exp(logits[i,j] - rowmax[i]);
 * target_logit[i] = logits[i, targets[i]-v0] if this shard owns it, else 0 */
void ops_xent_sumexp(ops_tensor sumexp, ops_tensor target_logit,
                     ops_tensor logits, ops_tensor rowmax, ops_tensor targets,
                     int v0, int N, int Vl);
/* losses[i] = log(sumexp[i]) + rowmax[i] - target_logit[i]   (fp32, N)
 * If dlogits is present: dlogits = (softmax - onehot(target)) * grad_scale,
 * written in place over logits when they alias. */
void ops_xent_finish(ops_tensor losses, ops_tensor dlogits, ops_tensor logits,
                     ops_tensor rowmax, ops_tensor sumexp,
                     ops_tensor target_logit, ops_tensor targets,
                     int v0, int N, int Vl, float grad_scale);

/* The three phases fused, for a single shard (the whole vocabulary, v0 =
 * 0): each row's max, sum of exponentials, loss and gradient are done
 * while the row is still in cache, instead of three sweeps over a
 * 50k-wide chunk; rowmax, sumexp and target_logit are filled as the
 * phases fill them. On the CPU the same bits as the phases in sequence;
 * on a GPU two passes over the logits instead of four (the max and the
 * sum of exponentials in one, rescaled as the max grows), equal to the
 * phases to fp32 rounding. */
void ops_xent_fused(ops_tensor losses, ops_tensor dlogits, ops_tensor logits,
                    ops_tensor rowmax, ops_tensor sumexp, ops_tensor target_logit,
                    ops_tensor targets, int N, int V, float grad_scale);

/* The LM head's gradient in the compute dtype, on a GPU (issue 34): with
 * ops_head_narrow, the model's one-shard head takes these two instead of
 * ops_xent_fused's fp32 dlogits and the mixed-dtype ops_matmul_bwd, which
 * must round dlogits to D block by block and accumulate dinp in fp32.
 *
 * ops_xent_fused_narrow is ops_xent_fused over fp32 logits that writes
 * dlogits rounded to gdt (bf16 or fp16) over the logits' own memory: row
 * i of the gradient starts where row i of the logits starts, so the
 * gradient is (N, V) of gdt with rows 2V elements apart, the view
 * ops_head_dlogits gives. grad_scale (1/N times the loss scale) multiplies
 * in fp32 before the one rounding. ops_matmul_bwd_ld is ops_matmul_bwd
 * without a bias, for a dout whose rows lie ld elements apart.
 * CUDA only: the CPU keeps ops_xent_fused's path and bits (a CPU tensor
 * here is refused, naming the op). */
/* 1 when dev runs issue 34's fused kernels: a GPU and TRIDENT_FUSED not
 * 0 (read once; another value is fatal). The CPU: 0, its kernels are
 * what they are. */
int ops_fused(ops_device dev);
/* 1 when dev runs these two for a compute dtype dt: ops_fused, and dt
 * bf16 or fp16. */
int ops_head_narrow(ops_device dev, ops_dtype dt);
void ops_xent_fused_narrow(ops_tensor losses, ops_tensor logits, ops_dtype gdt,
                           ops_tensor rowmax, ops_tensor sumexp, ops_tensor target_logit,
                           ops_tensor targets, int N, int V, float grad_scale);
/* The gradient ops_xent_fused_narrow left in logits (N rows of V): a
 * tensor of gdt that ops_matmul_bwd_ld reads with ld = 2V. */
ops_tensor ops_head_dlogits(ops_tensor logits, ops_dtype gdt);
void ops_matmul_bwd_ld(ops_tensor dinp, ops_tensor dw, ops_tensor dout, int64_t ld,
                       ops_tensor inp, ops_tensor w, int M, int N, int K);

/* ---- mixture of experts (issue 38; src/model/moe.c) -------------------
 * Mixtral/Qwen-MoE routing, one device. N tokens, E experts, k experts per
 * token, R = rows sent to experts (N*k when dropless). A (token, slot)
 * pair is p = token*k + slot. Routing is deterministic: a tie between
 * experts goes to the lower index, and the permutation orders the rows by
 * expert, then token, then slot, so every layout and device routes alike.
 * Router tensors (logits, probs, weights, losses) are fp32; expert ids,
 * offsets and the row maps int32; token and expert rows are D. */
typedef enum {
    OPS_MOE_SOFTMAX_TOPK = 0, /* Mixtral: softmax over E, top-k, weights
                               * renormalised over the k */
    OPS_MOE_SOFTMAX_TOPK_RAW = 1 /* softmax over E, top-k, the k probabilities
                                  * as they are, not renormalised (Qwen2-MoE's
                                  * norm_topk_prob = false, DeepSeek-V2) */
} ops_moe_order;

/* ids(N,k) = the k experts of largest logit per token, in decreasing order
 * (ties: lower index first; the same experts as the largest softmax
 * probabilities, without their rounding ties); weights(N,k) as `order`
 * says; probs(N,E) = softmax over E of logits, in both orders, for the
 * backward and the load-balancing loss. 1 <= k <= E. */
void ops_moe_router_fwd(ops_tensor ids, ops_tensor weights, ops_tensor probs,
                        ops_tensor logits, int N, int E, int k, ops_moe_order order);
/* dlogits(N,E) += the gradient of the weights' loss from dweights(N,k),
 * through the forward's ids, weights and probs. */
void ops_moe_router_bwd(ops_tensor dlogits, ops_tensor dweights, ops_tensor ids,
                        ops_tensor weights, ops_tensor probs, int N, int E, int k,
                        ops_moe_order order);
/* Switch/GShard load balancing: frac(E) = share of the N*k routed pairs
 * that chose each expert (sums to 1), mean_prob(E) = mean over tokens of
 * probs, loss(1) = E * sum_e frac_e * mean_prob_e (1 when balanced;
 * HuggingFace's Mixtral loss is k times this). All fp32. */
void ops_moe_aux_fwd(ops_tensor loss, ops_tensor frac, ops_tensor mean_prob,
                     ops_tensor probs, ops_tensor ids, int N, int E, int k);
/* dlogits(N,E) += the gradient of coeff * loss through probs (frac is a
 * count and carries none). */
void ops_moe_aux_bwd(ops_tensor dlogits, ops_tensor probs, ops_tensor frac,
                     int N, int E, float coeff);
/* Router z-loss: lse(N) = logsumexp of each row of logits, loss(1) = mean
 * of lse^2. */
void ops_moe_zloss_fwd(ops_tensor loss, ops_tensor lse, ops_tensor logits, int N, int E);
/* dlogits(N,E) += coeff * d loss / d logits, from the forward's lse. */
void ops_moe_zloss_bwd(ops_tensor dlogits, ops_tensor logits, ops_tensor lse,
                       int N, int E, float coeff);
/* The stable counting sort of the N*k pairs by expert. capacity > 0 keeps
 * at most capacity pairs per expert (the first by token, then slot) and
 * drops the rest; 0 keeps all (dropless). Writes offsets(E+1): expert e's
 * rows are [offsets[e], offsets[e+1]), R = offsets[E]; order(N*k): the pair
 * of row r for r < R (the rest -1); row_of(N*k): the row of pair p, -1 when
 * dropped; dropped(1): the number of dropped pairs. All int32. */
void ops_moe_permute(ops_tensor order, ops_tensor row_of, ops_tensor offsets,
                     ops_tensor dropped, ops_tensor ids, int N, int E, int k,
                     int capacity);
/* xs(R,C) = x[order[r] / k]: token rows into expert-contiguous order. */
void ops_moe_gather(ops_tensor xs, ops_tensor x, ops_tensor order, int R, int C, int k);
/* dx(N,C) = sum over the kept slots s of dxs[row_of[t*k+s]], in slot order
 * (overwrite; a token with all its pairs dropped gets 0). */
void ops_moe_gather_bwd(ops_tensor dx, ops_tensor dxs, ops_tensor row_of, int N, int C,
                        int k);
/* out(N,C) = sum over kept slots of weights[t,s] * ys[row_of[t*k+s]], in
 * slot order, in fp32, rounded once (overwrite). */
void ops_moe_combine_fwd(ops_tensor out, ops_tensor ys, ops_tensor weights,
                         ops_tensor row_of, int N, int C, int k);
/* dys(R,C) = weights[t,s] * dout[t] for the row of each kept pair
 * (overwrite); dweights(N,k) = dout[t] . ys[row] (overwrite, 0 for a
 * dropped pair). Either may be absent. */
void ops_moe_combine_bwd(ops_tensor dys, ops_tensor dweights, ops_tensor dout,
                         ops_tensor ys, ops_tensor weights, ops_tensor row_of,
                         int N, int C, int k);
/* The shared expert's gate (Qwen2-MoE): gate(N) = sigmoid(logit(N));
 * its backward dlogit = dgate * gate * (1 - gate) (overwrite). fp32. */
void ops_moe_sigmoid_fwd(ops_tensor gate, ops_tensor logit, int N);
void ops_moe_sigmoid_bwd(ops_tensor dlogit, ops_tensor dgate, ops_tensor gate, int N);
/* The experts' linear layers, grouped: for each expert e, rows
 * [offsets[e], offsets[e+1]) of out(R,N) = those of inp(R,K) . w[e]^T, with
 * w an array of E tensors (N,K), one per expert (each expert is its own
 * parameter). offsets(E+1) is HOST memory (a GPU caller downloads
 * ops_moe_permute's, one host wait per layer). One ops_matmul_fwd per
 * expert with rows, so each result is bit for bit that call's. */
void ops_moe_grouped_matmul_fwd(ops_tensor out, ops_tensor inp, const ops_tensor *w,
                                const int32_t *offsets, int E, int N, int K);
/* Per expert, ops_matmul_bwd's halves: dinp rows (overwrite; skipped if
 * absent), dw[e](N,K) += (all skipped if dw is NULL), each dw[e] a gradient
 * tensor; w may be NULL when dinp is absent. */
void ops_moe_grouped_matmul_bwd(ops_tensor dinp, const ops_tensor *dw, ops_tensor dout,
                                ops_tensor inp, const ops_tensor *w, const int32_t *offsets,
                                int E, int N, int K);

/* ---- optimizer -------------------------------------------------------- */

typedef struct {
    float lr, beta1, beta2, eps, weight_decay;
    float grad_scale;   /* grads are multiplied by this first (unscale, clip) */
    int step;           /* 1-based, for bias correction */
} ops_adamw_args;

/* AdamW with decoupled weight decay on fp32 master weights, m and v (n).
 * grad may be fp32 or the compute dtype. If wcopy is present, it receives
 * the updated weights rounded to its dtype. */
void ops_adamw(ops_tensor master, ops_tensor grad, ops_tensor m, ops_tensor v,
               ops_tensor wcopy, int64_t n, const ops_adamw_args *a);

/* One parameter's rows for ops_adamw_multi: master.n elements of each
 * (grad may be longer: its first master.n), wcopy OPS_NONE when absent,
 * and the weight decay of these rows. */
typedef struct {
    ops_tensor master, m, v;
    ops_tensor grad, wcopy;
    float weight_decay;
} ops_adamw_seg;
/* ops_adamw on every segment in order, each with its own weight decay (a's
 * is not read): the same bits as that loop on every device. A GPU under
 * TRIDENT_FUSED runs them in one launch over a table of the
 * segments, kept on the device while they stay the same. */
void ops_adamw_multi(const ops_adamw_seg *seg, int count, const ops_adamw_args *a);

#ifdef __cplusplus
}
#endif
#endif
