/*
 * gemm_lt_cuda.cu - GEMMs with a fused epilogue, through cuBLASLt.
 *
 * A linear layer's bias, GPT-2's GELU and its gradient, and the bias
 * gradient each cost a pass over an activation when they run as kernels
 * of their own (matmul_cuda.cu, elementwise_cuda.cu). cuBLASLt applies
 * them to the GEMM's fp32 accumulator before the output is rounded, so
 * the pass goes, and the bias is added in fp32 before the single rounding
 * of the output, as gemm_cpu's fused bias.
 *
 * Row-major operands and arguments as gemm_cuda (gemm_cuda.cu), mapped to
 * cuBLASLt's column-major view the same way: B first, dimensions swapped.
 *
 * Deterministic: the algorithm for a shape is chosen once by cuBLASLt's
 * heuristic and cached, so every step runs the same one; split-K partial
 * sums may only be reduced in fp32 in the workspace (or not split), never
 * in the output dtype, which keeps ops.h's fp32 accumulation. The
 * workspace is one buffer of LT_WORKSPACE_BYTES allocated at set-up.
 *
 * What runs is chosen once at set-up by the switch TRIDENT_LT_EPILOGUE
 * (none, bias, all; switches.h, doc/gpu.md): none is exactly the unfused
 * kernels. Where cuBLASLt has no algorithm for a case (a misaligned view,
 * an aux leading dimension not a multiple of 8, or a status
 * lt_status_verdict calls the case's, not the library's), gemm_lt_cuda
 * returns 0 and the caller runs the unfused kernels; stderr says so once
 * per case, so a measurement's log tells which GEMMs did not fuse.
 */
#include "cuda_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>

#define LT_WORKSPACE_BYTES ((size_t)32 << 20)

static struct {
    cublasLtHandle_t handle;
    void *workspace;
    lt_epilogue_mode mode;
    int ready;
    int64_t fused; /* GEMMs run with an epilogue (lt_fused_count_cuda) */
} lt; /* mode: set from the switch (switches.c holds its default) when
       * device_cuda.cu sets the device up, before any GEMM */

/* ---- the switch ------------------------------------------------------------ */

static const char *const mode_names[] = { "none", "bias", "all" };

lt_epilogue_mode lt_epilogue_switch(void)
{
    for (int i = 0; i < 3; i++)
        if (ops_switch_is(OPS_SWITCH_LT_EPILOGUE, mode_names[i]))
            return (lt_epilogue_mode)i;
    return LT_EPILOGUE_ALL; /* not reached: the switch takes these three */
}

const char *lt_epilogue_name(lt_epilogue_mode mode)
{
    return (int)mode >= 0 && (int)mode < 3 ? mode_names[mode] : "?";
}

lt_epilogue_mode lt_epilogue_cuda(void)
{
    return lt.mode;
}

void lt_epilogue_set_cuda(lt_epilogue_mode mode)
{
    lt.mode = mode;
}

int64_t lt_fused_count_cuda(void)
{
    return lt.fused;
}

lt_verdict lt_status_verdict(int status)
{
    switch (status) {
    case CUBLAS_STATUS_SUCCESS:
        return LT_RUNS;
    /* the heuristic's "no algorithm for this configuration"; cublasLt.h
     * and cuBLAS's cublasLtMatmul section: INVALID_VALUE for parameters
     * "in conflict or in an impossible configuration" (an epilogue's aux
     * or bias type the kernels lack); ARCH_MISMATCH for a feature the
     * device lacks. All are raised before anything is launched. */
    case CUBLAS_STATUS_NOT_SUPPORTED:
    case CUBLAS_STATUS_INVALID_VALUE:
    case CUBLAS_STATUS_ARCH_MISMATCH:
        return LT_FALLS_BACK;
    default:
        return LT_FATAL;
    }
}

/* ---- set-up ------------------------------------------------------------------ */

void lt_init_cuda(void)
{
    TRI_CHECK_CUBLAS(cublasLtCreate(&lt.handle));
    TRI_CHECK_CUDA(cudaMalloc(&lt.workspace, LT_WORKSPACE_BYTES));
    lt.ready = 1;
}

/* The cached plans: one per shape, dtypes, epilogue and alignment. */
typedef struct {
    int ta, tb, M, N, K, lda, ldb, ldc;
    int abt, ct, epi;
    int align[5]; /* A, B, C, bias, aux: the largest power of 2 up to 256 */
} lt_key;

typedef struct {
    lt_key key;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, c; /* cuBLASLt's A (our B), B (our A), C = D */
    cublasLtMatmulAlgo_t algo;
    int ok; /* the heuristic found an algorithm */
} lt_plan;

static lt_plan *plans;
static int n_plans, cap_plans;

static void destroy_plan(lt_plan *p)
{
    TRI_CHECK_CUBLAS(cublasLtMatrixLayoutDestroy(p->a));
    TRI_CHECK_CUBLAS(cublasLtMatrixLayoutDestroy(p->b));
    TRI_CHECK_CUBLAS(cublasLtMatrixLayoutDestroy(p->c));
    TRI_CHECK_CUBLAS(cublasLtMatmulDescDestroy(p->desc));
}

void lt_finalize_cuda(void)
{
    if (!lt.ready)
        return;
    for (int i = 0; i < n_plans; i++)
        destroy_plan(&plans[i]);
    free(plans);
    plans = NULL;
    n_plans = cap_plans = 0;
    TRI_CHECK_CUDA(cudaFree(lt.workspace));
    TRI_CHECK_CUBLAS(cublasLtDestroy(lt.handle));
    lt.workspace = NULL;
    lt.handle = NULL;
    lt.ready = 0;
}

/* ---- plans ------------------------------------------------------------------- */

static int alignment(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    int al = 256;
    while (al > 1 && a % (uintptr_t)al)
        al /= 2;
    return al;
}

static cublasLtEpilogue_t lt_epilogue_of(lt_epilogue_kind epi, int has_bias)
{
    switch (epi) {
    case LT_BIAS: return CUBLASLT_EPILOGUE_BIAS;
    case LT_GELU: return has_bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
    case LT_DGELU: return CUBLASLT_EPILOGUE_DGELU;
    case LT_BGRAD: return CUBLASLT_EPILOGUE_BGRADB;
    }
    return CUBLASLT_EPILOGUE_DEFAULT;
}

static const char *lt_epilogue_label(lt_epilogue_kind epi, int has_bias)
{
    switch (epi) {
    case LT_BIAS: return "BIAS";
    case LT_GELU: return has_bias ? "GELU_AUX_BIAS" : "GELU_AUX";
    case LT_DGELU: return "DGELU";
    case LT_BGRAD: return "BGRADB";
    }
    return "?";
}

/* One stderr line per case that falls back: which epilogue, shape and
 * dtypes, and cuBLASLt's status (SUCCESS: the heuristic found nothing). */
static void say_fallback(const lt_key *k, const char *step, cublasStatus_t st)
{
    fprintf(stderr, "gemm: cuBLASLt %s for the %s epilogue of %dx%dx%d %s->%s: %s; the "
            "unfused kernels run it\n", step,
            lt_epilogue_label((lt_epilogue_kind)k->epi, k->align[3] != 0), k->M, k->N, k->K,
            ops_dtype_name((ops_dtype)k->abt), ops_dtype_name((ops_dtype)k->ct),
            st == CUBLAS_STATUS_SUCCESS ? "no algorithm" : cublasGetStatusName(st));
}

#define SET_DESC(p, attr, value)                                                 \
    do {                                                                         \
        auto v_ = (value);                                                       \
        TRI_CHECK_CUBLAS(cublasLtMatmulDescSetAttribute((p)->desc, attr, &v_,    \
                                                        sizeof v_));             \
    } while (0)

/* The descriptor, layouts and the heuristic's algorithm for key k; the
 * pointers only for the alignment the heuristic assumes. */
static void build_plan(lt_plan *p, const lt_key *k, const void *bias, void *aux)
{
    memset(p, 0, sizeof *p);
    p->key = *k;
    cudaDataType_t abt = blas_type_cuda((ops_dtype)k->abt), ct = blas_type_cuda((ops_dtype)k->ct);
    TRI_CHECK_CUBLAS(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    /* cuBLASLt's A is our B and its B our A (the header's comment) */
    SET_DESC(p, CUBLASLT_MATMUL_DESC_TRANSA, (int32_t)(k->tb ? CUBLAS_OP_T : CUBLAS_OP_N));
    SET_DESC(p, CUBLASLT_MATMUL_DESC_TRANSB, (int32_t)(k->ta ? CUBLAS_OP_T : CUBLAS_OP_N));
    SET_DESC(p, CUBLASLT_MATMUL_DESC_EPILOGUE,
             (uint32_t)lt_epilogue_of((lt_epilogue_kind)k->epi, bias != NULL));
    /* the bias, its gradient and the GELU input have C's dtype, cuBLASLt's
     * default (the callers pass a bias only where C is D) */
    if (bias)
        SET_DESC(p, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
    if (aux) {
        SET_DESC(p, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, (int64_t)k->ldc);
        SET_DESC(p, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux);
    }
    /* column-major: our B (K,N) or its transpose is cuBLASLt's A */
    TRI_CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&p->a, abt, k->tb ? k->K : k->N,
                                                k->tb ? k->N : k->K, k->ldb));
    TRI_CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&p->b, abt, k->ta ? k->M : k->K,
                                                k->ta ? k->K : k->M, k->lda));
    TRI_CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&p->c, ct, k->N, k->M, k->ldc));

    cublasLtMatmulPreference_t pref;
    TRI_CHECK_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t ws = LT_WORKSPACE_BYTES;
    uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    uint32_t al[4] = { (uint32_t)k->align[1], (uint32_t)k->align[0], (uint32_t)k->align[2],
                       (uint32_t)k->align[2] };
    TRI_CHECK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    TRI_CHECK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes, sizeof schemes));
    TRI_CHECK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al[0], sizeof al[0]));
    TRI_CHECK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al[1], sizeof al[1]));
    TRI_CHECK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al[2], sizeof al[2]));
    TRI_CHECK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al[3], sizeof al[3]));
    cublasLtMatmulHeuristicResult_t result;
    int found = 0;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(lt.handle, p->desc, p->a, p->b, p->c,
                                                       p->c, pref, 1, &result, &found);
    TRI_CHECK_CUBLAS(cublasLtMatmulPreferenceDestroy(pref));
    /* a status of the case (lt_status_verdict) falls back; anything else
     * is a bug */
    if (lt_status_verdict(st) == LT_FATAL)
        TRI_CHECK_CUBLAS(st);
    if (st == CUBLAS_STATUS_SUCCESS && found > 0 && result.state != CUBLAS_STATUS_SUCCESS)
        st = result.state;
    p->ok = st == CUBLAS_STATUS_SUCCESS && found > 0;
    if (p->ok)
        p->algo = result.algo;
    else
        say_fallback(k, "has no algorithm", st);
}

static lt_plan *plan_for(const lt_key *k, const void *bias, void *aux)
{
    for (int i = 0; i < n_plans; i++)
        if (memcmp(&plans[i].key, k, sizeof *k) == 0)
            return &plans[i];
    if (n_plans == cap_plans) {
        int cap = cap_plans ? 2 * cap_plans : 64;
        lt_plan *grown = (lt_plan *)realloc(plans, (size_t)cap * sizeof *grown);
        if (!grown)
            ops_fatalf(__FILE__, __LINE__, "cuBLASLt: out of host memory for %d GEMM plans",
                       cap);
        plans = grown;
        cap_plans = cap;
    }
    build_plan(&plans[n_plans], k, bias, aux);
    return &plans[n_plans++];
}

/* ---- the GEMM ------------------------------------------------------------------ */

int gemm_lt_cuda(int trans_a, int trans_b, int M, int N, int K, const void *A, int lda,
                 const void *B, int ldb, float beta, void *C, int ldc, ops_dtype abt,
                 ops_dtype ct, lt_epilogue_kind epi, const void *bias, void *aux)
{
    if (!lt.ready || M <= 0 || N <= 0 || K <= 0)
        return 0;
    /* the epilogue's vectors and the GELU input want 16-byte alignment and
     * an aux leading dimension divisible by 8 (cublasLt.h) */
    if ((bias && alignment(bias) < 16) || (aux && (alignment(aux) < 16 || ldc % 8)))
        return 0;
    /* all ints, so no padding: memcmp compares the fields */
    lt_key k = { trans_a, trans_b, M, N, K, lda, ldb, ldc, (int)abt, (int)ct, (int)epi,
                  { alignment(A), alignment(B), alignment(C), bias ? alignment(bias) : 0,
                    aux ? alignment(aux) : 0 } };
    lt_plan *p = plan_for(&k, bias, aux);
    if (!p->ok)
        return 0;
    if (bias)
        SET_DESC(p, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
    if (aux)
        SET_DESC(p, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux);
    float alpha = 1.0f;
    cublasStatus_t st = cublasLtMatmul(lt.handle, p->desc, &alpha, B, p->a, A, p->b, &beta, C,
                                       p->c, C, p->c, &p->algo, lt.workspace,
                                       LT_WORKSPACE_BYTES, stream_cuda());
    if (st != CUBLAS_STATUS_SUCCESS && lt_status_verdict(st) == LT_FALLS_BACK) {
        /* refused before launching: nothing written, and never asked again */
        p->ok = 0;
        say_fallback(&p->key, "refused the run", st);
        return 0;
    }
    TRI_CHECK_CUBLAS(st);
    lt.fused++;
    return 1;
}
