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
 * Not collective.
 */
#ifndef TRI_KERNELS_CPU_CPU_H
#define TRI_KERNELS_CPU_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "../elem.h"
#include "../ops.h"

/* ---- memory (tensor_cpu.c) -------------------------------------------- */

void zero_cpu(void *p, size_t bytes);
void copy_cpu(void *dst, const void *src, size_t bytes);
/* dst(n) of dtype ddt = src(n) of dtype sdt; both among F32, BF16, F16. */
void cast_cpu(void *dst, ops_dtype ddt, const void *src, ops_dtype sdt,
              int64_t n);

/* Element i of a float-family buffer as fp32, and the reverse (rounding to
 * nearest even through elem.h). Inline because the AdamW and cast loops
 * call them per element. */
static inline float load_f32_cpu(const void *p, ops_dtype dt, int64_t i)
{
    switch (dt) {
    case OPS_BF16: return elem_bf16_to_f32(((const uint16_t *)p)[i]);
    case OPS_F16: return elem_f16_to_f32(((const uint16_t *)p)[i]);
    default: return ((const float *)p)[i];
    }
}

static inline void store_f32_cpu(void *p, ops_dtype dt, int64_t i, float x)
{
    switch (dt) {
    case OPS_BF16: ((uint16_t *)p)[i] = elem_f32_to_bf16(x); break;
    case OPS_F16: ((uint16_t *)p)[i] = elem_f32_to_f16(x); break;
    default: ((float *)p)[i] = x; break;
    }
}

/* ---- GEMM (gemm_cpu.c) ------------------------------------------------- */

/* Row-major C(M,N) = alpha op(A) op(B) + beta C, op(A) (M,K), op(B) (K,N);
 * trans_a/trans_b non-zero means the stored matrix is the transpose. With
 * beta == 0, C is not read (NaNs in it do not propagate). Threads with the
 * library's pool; see gemm_serial_begin_cpu for calls from inside an
 * OpenMP parallel region. */
void gemm_f32_cpu(int trans_a, int trans_b, int M, int N, int K, float alpha,
                  const float *A, int lda, const float *B, int ldb,
                  float beta, float *C, int ldc);

/* Bracket a parallel region whose threads each call gemm_f32_cpu, so that
 * each GEMM runs on its calling thread only. Needed for pthreads OpenBLAS,
 * whose thread count is process-wide: begin sets it to 1 and returns the
 * old count, end restores it. A no-op for oneDNN and OpenMP OpenBLAS,
 * which run single-threaded inside parallel regions anyway. Call from the
 * thread that runs the ops, outside parallel regions. */
int gemm_serial_begin_cpu(void);
void gemm_serial_end_cpu(int saved);

/* ---- dense layers (matmul_cpu.c) -------------------------------------- */

void matmul_fwd_cpu(float *out, const float *inp, const float *w,
                    const float *bias, int M, int N, int K);
void matmul_bwd_cpu(float *dinp, float *dw, float *dbias, const float *dout,
                    const float *inp, const float *w, int M, int N, int K);

/* ---- elementwise (elementwise_cpu.c) ------------------------------------ */

void gelu_fwd_cpu(float *out, const float *inp, int64_t n);
void gelu_bwd_cpu(float *dinp, const float *inp, const float *dout, int64_t n);
void add_cpu(float *out, const float *a, const float *b, int64_t n);
void accumulate_cpu(float *y, const float *x, int64_t n);
void scale_cpu(float *x, float s, int64_t n);
void clip_value_cpu(float *x, float c, int64_t n);
void sumsq_accumulate_cpu(double *acc, const float *x, int64_t n);
void sum_accumulate_cpu(double *acc, const float *x, int64_t n);

/* ---- LayerNorm (layernorm_cpu.c) ---------------------------------------- */

void layernorm_fwd_cpu(float *out, float *mean, float *rstd, const float *inp,
                       const float *w, const float *b, int N, int C);
void layernorm_bwd_cpu(float *dinp, float *dw, float *db, const float *dout,
                       const float *inp, const float *w, const float *mean,
                       const float *rstd, int N, int C);

/* ---- attention (attention_cpu.c) ---------------------------------------- */

void attention_fwd_cpu(float *out, float *att, const float *qkv,
                       int B, int T, int NH, int hs);
void attention_bwd_cpu(float *dqkv, float *scratch, const float *dout,
                       const float *qkv, const float *att,
                       int B, int T, int NH, int hs);

/* ---- embeddings (embedding_cpu.c) --------------------------------------- */

void embedding_fwd_cpu(float *out, const int32_t *tokens, const float *wte,
                       int v0, int Vl, int N, int C);
void embedding_bwd_cpu(float *dwte, const int32_t *tokens, const float *dout,
                       int v0, int Vl, int N, int C);
void position_fwd_cpu(float *out, const float *wpe, int B, int T, int C);
void position_bwd_cpu(float *dwpe, const float *dout, int B, int T, int C);

/* ---- softmax cross-entropy (xent_cpu.c) --------------------------------- */

void xent_max_cpu(float *rowmax, const float *logits, int N, int Vl);
void xent_sumexp_cpu(float *sumexp, float *target_logit, const float *logits,
                     const float *rowmax, const int32_t *targets,
                     int v0, int N, int Vl);
void xent_finish_cpu(float *losses, float *dlogits, const float *logits,
                     const float *rowmax, const float *sumexp,
                     const float *target_logit, const int32_t *targets,
                     int v0, int N, int Vl, float grad_scale);

/* ---- optimizer (adamw_cpu.c) -------------------------------------------- */

/* grad is F32, BF16 or F16 (gdt); wcopy may be NULL, else of dtype wdt. */
void adamw_cpu(float *master, const void *grad, ops_dtype gdt, float *m,
               float *v, void *wcopy, ops_dtype wdt, int64_t n,
               const ops_adamw_args *a);

#endif
