/*
 * cpu.h - the CPU backend: C, OpenMP, and oneDNN or a CBLAS for the GEMMs.
 *
 * ops.c has already checked presence, sizes, dtypes and devices when these
 * run, so they take plain typed pointers (NULL = absent where ops.h allows
 * it) and the math reads like llm.c's train_gpt2.c. Each function is the
 * `_cpu` twin of an ops_* call and keeps its semantics exactly; see ops.h.
 * Everything runs on the calling thread's OpenMP pool; the results of every
 * op except the GEMMs do not depend on the number of threads.
 *
 * Precision (ops.h, "Precision"): bf16 and fp16 tensors are widened to fp32
 * as they are read, all arithmetic is fp32 (fp64 for the long sums), and a
 * result is rounded once, when it is stored, through elem.h, so an fp16
 * result overflows to inf and underflows to zero exactly as the format
 * does. The fp32 paths keep their loops and their order of operations, so
 * fp32 results are bit for bit what they were before bf16 and fp16 came
 * (since then, the norms' row sums run in vec.h's 16 lanes and dbias
 * sums chunks of rows: fixed orders, the same on every CPU).
 *
 * Not collective.
 */
#ifndef TRI_KERNELS_CPU_CPU_H
#define TRI_KERNELS_CPU_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "../elem.h"
#include "../ops.h"
#include "cast_vec.h"

/* Hot loops get AVX2 and AVX-512 variants beside the baseline x86-64 one,
 * and the loader picks the one this CPU runs (GCC/clang function
 * multi-versioning), so one binary is fast on any node. Results are the
 * same bits in every variant: only the vector width changes (C11 mode
 * does not contract a*b+c into FMA). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(TRI_NO_CLONES)
#define TRI_CLONES __attribute__((target_clones("default", "avx2", "avx512f")))
#else
#define TRI_CLONES
#endif

/* Runs stmt with `dt_` a compile-time constant where dt is fp32 or bf16,
 * so that an always-inline loop body stmt calls is compiled for each of
 * them alone and vectorizes; other dtypes share one generic copy. */
#define TRI_WITH_CONST_DTYPE(dt, stmt)                                        \
    do {                                                                      \
        if ((dt) == OPS_F32) {                                                \
            const ops_dtype dt_ = OPS_F32;                                    \
            stmt;                                                             \
        } else if ((dt) == OPS_BF16) {                                        \
            const ops_dtype dt_ = OPS_BF16;                                   \
            stmt;                                                             \
        } else {                                                              \
            const ops_dtype dt_ = (dt);                                       \
            stmt;                                                             \
        }                                                                     \
    } while (0)

/* Elements a thread handles per call of a cloned span. */
#define TRI_SPAN 16384

/* ---- memory (tensor_cpu.c) -------------------------------------------- */

void zero_cpu(void *p, size_t bytes);
void copy_cpu(void *dst, const void *src, size_t bytes);
/* rows of row_bytes each, src_stride bytes apart in src, packed in dst. */
void copy_rows_cpu(void *dst, const void *src, int64_t rows, size_t row_bytes,
                   size_t src_stride);
/* Seconds on the monotonic clock: a device timer's mark on the CPU. */
double clock_cpu(void);
/* dst(n) of dtype ddt = src(n) of dtype sdt; both among F32, BF16, F16. */
/* The same on one thread, for a span inside a parallel loop. */
void cast_span_cpu(void *dst, ops_dtype ddt, const void *src, ops_dtype sdt, int64_t n);
void cast_cpu(void *dst, ops_dtype ddt, const void *src, ops_dtype sdt,
              int64_t n);
/* The same on a (rows, cols) block: row r of dst starts at element r*ldd,
 * of src at r*lds. Rows go to threads; call outside parallel regions. */
void cast_2d_cpu(void *dst, ops_dtype ddt, int64_t ldd, const void *src,
                 ops_dtype sdt, int64_t lds, int rows, int cols);

/* Scratch memory kept for the life of the process and reused by every
 * call, so no hot path allocates once the first step has run. Each slot
 * is one 64-byte aligned buffer that only ever grows (its contents are not
 * kept when it does). Not thread-safe: call from the thread that runs the
 * ops, outside parallel regions; a region's threads share out one buffer. */
typedef enum {
    SCRATCH_GEMM_A,      /* gemm_cpu's converted panels and C tile */
    SCRATCH_GEMM_B,
    SCRATCH_GEMM_C,
    SCRATCH_DNNL,        /* oneDNN's scratchpad */
    SCRATCH_MATMUL_DOUT, /* matmul_bwd: an fp32 dout block rounded to D */
    SCRATCH_MATMUL_ACC,  /* matmul_bwd: dinp accumulating in fp32 */
    SCRATCH_MATMUL_BIAS, /* matmul_bwd: dbias's partial sums over row chunks */
    SCRATCH_ATTENTION,   /* per-thread score tiles and fp32 copies of one head */
    SCRATCH_ROPE,        /* rope: the cos and sin of each (position, pair) */
    SCRATCH_SLOTS
} scratch_slot;
void *scratch_cpu(scratch_slot slot, size_t bytes);
/* How many times a scratch buffer has grown, for ops_device_allocations. */
int64_t scratch_cpu_growths(void);

/* Element i of a float-family buffer as fp32, and the reverse (rounding to
 * nearest even): elem.h's bits, through cast_vec.h's branch-free forms, so
 * that the kernels' loops over bf16 and fp16 rows vectorize as their fp32
 * twins do. Inline because those loops call them per element, with dt a
 * constant at each call site. */
static inline float load_f32_cpu(const void *p, ops_dtype dt, int64_t i)
{
    switch (dt) {
    case OPS_BF16: return elem_bf16_to_f32(((const uint16_t *)p)[i]);
    case OPS_F16: return f16_to_f32_vec(((const uint16_t *)p)[i]);
    default: return ((const float *)p)[i];
    }
}

static inline void store_f32_cpu(void *p, ops_dtype dt, int64_t i, float x)
{
    switch (dt) {
    case OPS_BF16: ((uint16_t *)p)[i] = f32_to_bf16_vec(x); break;
    case OPS_F16: ((uint16_t *)p)[i] = f32_to_f16_vec(x); break;
    default: ((float *)p)[i] = x; break;
    }
}

/* dst(rows, cols) fp32 with row stride ldd = src rows of dtype dt (row
 * stride lds), widened. Serial: a thread calls it for its own rows. */
void widen_rows_cpu(float *dst, int ldd, const void *src, ops_dtype dt, int64_t lds, int rows,
                    int cols);
/* The reverse: rounds fp32 rows into dtype dt. Serial. */
void narrow_rows_cpu(void *dst, ops_dtype dt, int64_t ldd, const float *src, int lds, int rows,
                     int cols);
/* This thread's `floats` floats of a buffer that the caller sized for
 * omp_get_max_threads() shares. */
float *thread_share_cpu(float *buf, int64_t floats);

/* ---- GEMM (gemm_cpu.c, and gemm_dnnl.c or gemm_cblas.c) ----------------
 * gemm_cpu.c is the dispatcher: it chooses the route of each GEMM and
 * calls it (the library's file, gemm_lib.h; trident's bf16 kernels,
 * gemm_bf16.h; sgemm on widened panels, its own). */

/* Row-major C(M,N) = alpha op(A) op(B) + beta C, op(A) (M,K), op(B) (K,N);
 * trans_a/trans_b non-zero means the stored matrix is the transpose. With
 * beta == 0, C is not read (NaNs in it do not propagate). Threads with the
 * library's pool; see gemm_serial_begin_cpu for calls from inside an
 * OpenMP parallel region. */
void gemm_f32_cpu(int trans_a, int trans_b, int M, int N, int K, float alpha,
                  const float *A, int lda, const float *B, int ldb,
                  float beta, float *C, int ldc);

/* The GEMM of every dense layer, in any compute dtype dt (F32, BF16, F16):
 *   C(M,N) = op(A) op(B) + bias(N) [+ C if accumulate]
 * A, B and bias (NULL = none) hold dt; C holds cdt, which is F32 or dt.
 * Products and sums are fp32, and C is rounded to cdt once, at the end.
 * bf16 runs on oneDNN's matmul primitive where the build has oneDNN and
 * the CPU has AMX; every other low-precision case widens blocks of A and
 * B to fp32 and calls gemm_f32_cpu (doc/performance.md, "CPU GEMMs", says
 * why). Threads by itself and uses the shared scratch, so call it outside
 * parallel regions (attention converts its heads to fp32 and calls
 * gemm_f32_cpu instead). */
void gemm_cpu(ops_dtype dt, int trans_a, int trans_b, int M, int N, int K,
              const void *A, int lda, const void *B, int ldb,
              const void *bias, int accumulate, void *C, ops_dtype cdt,
              int ldc);

/* Which kernel gemm_cpu runs for dt inputs and a cdt output on this shape
 * (dense operands): "oneDNN matmul brg:avx512_core_amx_bf16", "dnnl_sgemm
 * on fp32 copies", "cblas_sgemm", ...; a static string, overwritten by the
 * next call. For tests and benchmarks. */
const char *gemm_kernel_name_cpu(ops_dtype dt, int trans_a, int trans_b,
                                 int M, int N, int K, ops_dtype cdt,
                                 int accumulate);

/* Bracket a parallel region whose threads each call gemm_f32_cpu, so that
 * each GEMM runs on its calling thread only. Needed for pthreads OpenBLAS,
 * whose thread count is process-wide: begin sets it to 1 and returns the
 * old count, end restores it. A no-op for oneDNN and OpenMP OpenBLAS,
 * which run single-threaded inside parallel regions anyway. Call from the
 * thread that runs the ops, outside parallel regions. */
int gemm_serial_begin_cpu(void);
void gemm_serial_end_cpu(int saved);

/* ---- the hardware's peak (peak_cpu.c) ---------------------------------- */

/* FLOP/s of dtype's widest multiply-add on every thread of the pool at
 * once, measured for about `seconds`; how: the instruction and threads. */
double cpu_peak_flops(ops_dtype dtype, double seconds, char *how, size_t how_size);
/* The CPUID brand string. */
const char *cpu_model_name(void);
/* AMX (permitted by the kernel), or AVX512_BF16 where it outpaces the
 * fp32 FMA (cpu_bf16_dot_outpaces_fma): a bf16 unit faster than fp32's. */
int cpu_has_native_bf16(void);
/* vdpbf16ps's FLOP/s over the AVX-512 FMA's on one core, measured once
 * per process (about 25 ms on the calling thread; the result is cached):
 * about 2 on AMD Zen 4, 0.5 on Intel Sapphire Rapids, 0 without
 * AVX512_BF16. A measurement to print (t_gemm_bf16, make bench); no
 * choice depends on it. Call outside parallel regions. */
double cpu_bf16_dot_speedup(void);
/* The two rates behind it, FLOP/s on one core (0 without AVX512_BF16). */
void cpu_bf16_dot_rates(double *dot, double *fma);
/* Whether vdpbf16ps counts as the faster unit, for bf16's peak and the
 * bf16 GEMM's path: on AMD's cores with AVX512_BF16 (Zen 4 and later),
 * from CPUID, never from cpu_bf16_dot_speedup's timing. The measured
 * cases are 4x apart (2 on Zen 4, 0.5 on Sapphire Rapids), but a timing
 * taken beside another job once read 4.6 on that Intel core, and a path
 * that flips between a run and its resume would break bitwise resume. */
int cpu_bf16_dot_outpaces_fma(void);
/* What this CPU's vector units can do: 0 = SSE only, 1 = AVX, 2 =
 * AVX2/FMA, 3 = AVX-512 (other architectures: 0, so nothing is warned
 * about there), and its name, for the GEMM libraries' warnings that they
 * run narrower kernels than this CPU has. */
int cpu_isa_tier(void);
const char *cpu_isa_tier_name(int tier);

/* ---- the ops ----------------------------------------------------------
 * `dt` is the call's compute dtype D (F32, BF16 or F16): every argument
 * typed void * holds D unless its comment says otherwise; float * is
 * always fp32 (statistics, parameter gradients). */

/* ---- dense layers (matmul_cpu.c) -------------------------------------- */

/* out holds odt (F32 or dt). */
void matmul_fwd_cpu(void *out, ops_dtype odt, const void *inp, const void *w,
                    const void *bias, ops_dtype dt, int M, int N, int K);
/* dout holds ddt (F32 or dt); an F32 dout is rounded to dt as it is read. */
void matmul_bwd_cpu(void *dinp, float *dw, float *dbias, const void *dout,
                    ops_dtype ddt, const void *inp, const void *w,
                    ops_dtype dt, int M, int N, int K);

/* ---- elementwise (elementwise_cpu.c) ------------------------------------ */

void gelu_fwd_cpu(void *out, const void *inp, ops_dtype dt, int64_t n);
void gelu_bwd_cpu(void *dinp, const void *inp, const void *dout,
                  ops_dtype dt, int64_t n);
void add_cpu(void *out, const void *a, const void *b, ops_dtype dt,
             int64_t n);
void accumulate_cpu(void *y, const void *x, ops_dtype dt, int64_t n);
void scale_cpu(void *x, float s, ops_dtype dt, int64_t n);
void clip_value_cpu(void *x, float c, ops_dtype dt, int64_t n);
void sumsq_accumulate_cpu(double *acc, const void *x, ops_dtype dt,
                          int64_t n);
void sum_accumulate_cpu(double *acc, const void *x, ops_dtype dt, int64_t n);

/* ---- LayerNorm (layernorm_cpu.c) ---------------------------------------- */

void layernorm_fwd_cpu(void *out, float *mean, float *rstd, const void *inp,
                       const void *w, const void *b, ops_dtype dt, int N,
                       int C);
void layernorm_bwd_cpu(void *dinp, float *dw, float *db, const void *dout,
                       const void *inp, const void *w, const float *mean,
                       const float *rstd, ops_dtype dt, int N, int C);

/* ---- Llama (rmsnorm_cpu.c, rope_cpu.c, gqa_cpu.c, elementwise_cpu.c) ---- */

void rmsnorm_fwd_cpu(void *out, float *rstd, const void *inp, const void *w,
                     ops_dtype dt, int N, int C, float eps);
void rmsnorm_bwd_cpu(void *dinp, float *dw, const void *dout, const void *inp,
                     const void *w, const float *rstd, ops_dtype dt, int N, int C);
/* Positions t0 .. t0 + T - 1; inverse: rotate back (the backward) */
void rope_cpu(void *x, ops_dtype dt, int B, int T, int t0, int H, int hs, double theta,
              int inverse);
void swiglu_fwd_cpu(void *out, const void *gate, const void *up, ops_dtype dt,
                    int64_t n);
void swiglu_bwd_cpu(void *dgate, void *dup, const void *dout, const void *gate,
                    const void *up, ops_dtype dt, int64_t n);
void gqa_expand_cpu(void *qkv, const void *q, const void *k, const void *v,
                    ops_dtype dt, int N, int NH, int NKV, int hs);
void gqa_reduce_cpu(void *dq, void *dk, void *dv, const void *dqkv, ops_dtype dt,
                    int N, int NH, int NKV, int hs);

/* ---- attention (attention_cpu.c, attention_exact_cpu.c) ----------------- */

/* Fused, for query rows [q0, q0 + Tq) of T-token sequences (ops.h's
 * ops_attention_rows_fwd/bwd; the whole-sequence ops are q0 = 0, Tq = T):
 * out (B,Tq,NH*hs), lse (B,NH,Tq) fp32 each row's log-sum-exp. The
 * backward adds into dqkv with accumulate; without, it overwrites, which
 * only the whole sequence (q0 = 0, Tq = T) may ask. */
void attention_rows_fwd_cpu(void *out, float *lse, const void *qkv, ops_dtype dt,
                            int B, int T, int q0, int Tq, int NH, int hs);
void attention_rows_bwd_cpu(void *dqkv, const void *dout, const void *qkv,
                            const void *out, const float *lse, ops_dtype dt,
                            int B, int T, int q0, int Tq, int NH, int hs, int accumulate);
/* The reference that keeps the probabilities: att (B,NH,T,T) fp32, zero
 * above the diagonal; scratch B*NH*T*T fp32. For tests and benchmarks. */
void attention_exact_fwd_cpu(void *out, float *att, const void *qkv, ops_dtype dt,
                             int B, int T, int NH, int hs);
void attention_exact_bwd_cpu(void *dqkv, float *scratch, const void *dout,
                             const void *qkv, const float *att, ops_dtype dt,
                             int B, int T, int NH, int hs);

/* ---- embeddings (embedding_cpu.c) --------------------------------------- */

void embedding_fwd_cpu(void *out, const int32_t *tokens, const void *wte,
                       ops_dtype dt, int v0, int Vl, int N, int C);
void embedding_bwd_cpu(float *dwte, const int32_t *tokens, const void *dout,
                       ops_dtype dt, int v0, int Vl, int N, int C);
void position_fwd_cpu(void *out, const void *wpe, ops_dtype dt, int B, int T,
                      int C);
void position_bwd_cpu(float *dwpe, const void *dout, ops_dtype dt, int B,
                      int T, int C);

/* ---- softmax cross-entropy (xent_cpu.c) --------------------------------- */

/* logits and dlogits hold dt (fp32 is what the model passes). */
void xent_fused_cpu(float *losses, void *dlogits, const void *logits, ops_dtype dt,
                    float *rowmax, float *sumexp, float *target_logit,
                    const int32_t *targets, int N, int V, float grad_scale);
void xent_max_cpu(float *rowmax, const void *logits, ops_dtype dt, int N,
                  int Vl);
void xent_sumexp_cpu(float *sumexp, float *target_logit, const void *logits,
                     ops_dtype dt, const float *rowmax,
                     const int32_t *targets, int v0, int N, int Vl);
void xent_finish_cpu(float *losses, void *dlogits, const void *logits,
                     ops_dtype dt, const float *rowmax, const float *sumexp,
                     const float *target_logit, const int32_t *targets,
                     int v0, int N, int Vl, float grad_scale);

/* ---- mixture of experts (moe_cpu.c) ------------------------------------
 * Router tensors fp32, ids and maps int32, rows of dtype dt; order is an
 * ops_moe_order. dweights, dys may be NULL (combine_bwd). */
void moe_router_fwd_cpu(int32_t *ids, float *weights, float *probs, const float *logits,
                        int N, int E, int k, int order);
void moe_router_bwd_cpu(float *dlogits, const float *dweights, const int32_t *ids,
                        const float *weights, const float *probs, int N, int E, int k,
                        int order);
void moe_aux_fwd_cpu(float *loss, float *frac, float *mean_prob, const float *probs,
                     const int32_t *ids, int N, int E, int k);
void moe_aux_bwd_cpu(float *dlogits, const float *probs, const float *frac, int N, int E,
                     float coeff);
void moe_zloss_fwd_cpu(float *loss, float *lse, const float *logits, int N, int E);
void moe_zloss_bwd_cpu(float *dlogits, const float *logits, const float *lse, int N, int E,
                       float coeff);
void moe_permute_cpu(int32_t *order, int32_t *row_of, int32_t *offsets, int32_t *dropped,
                     const int32_t *ids, int N, int E, int k, int capacity);
void moe_gather_cpu(void *xs, const void *x, ops_dtype dt, const int32_t *order, int R,
                    int C, int k);
void moe_gather_bwd_cpu(void *dx, const void *dxs, ops_dtype dt, const int32_t *row_of,
                        int N, int C, int k);
void moe_combine_fwd_cpu(void *out, const void *ys, ops_dtype dt, const float *weights,
                         const int32_t *row_of, int N, int C, int k);
void moe_combine_bwd_cpu(void *dys, float *dweights, const void *dout, const void *ys,
                         ops_dtype dt, const float *weights, const int32_t *row_of,
                         int N, int C, int k);
void moe_sigmoid_fwd_cpu(float *gate, const float *logit, int N);
void moe_sigmoid_bwd_cpu(float *dlogit, const float *dgate, const float *gate, int N);

/* ---- optimizer (adamw_cpu.c) -------------------------------------------- */

/* grad is F32, BF16 or F16 (gdt); wcopy may be NULL, else of dtype wdt. */
void adamw_cpu(float *master, const void *grad, ops_dtype gdt, float *m,
               float *v, void *wcopy, ops_dtype wdt, int64_t n,
               const ops_adamw_args *a);

#endif
