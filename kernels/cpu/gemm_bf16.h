/*
 * gemm_bf16.h - the paths a bf16 GEMM can take on the CPU, and trident's
 * own kernels for it (gemm_bf16_pairs.h, compiled once per ISA;
 * gemm_bf16_cpu.c says which this CPU runs and checks them).
 *
 * Four paths can run gemm_cpu's bf16 case:
 *   library   the GEMM library's bf16 kernel (oneDNN's matmul primitive;
 *             the first choice only where it runs on AMX);
 *   avx512    trident's kernel on AVX512_BF16's vdpbf16ps;
 *   avx2      trident's kernel on AVX2 FMAs, each pair widened in
 *             registers;
 *   widened   the library's sgemm on panels widened to fp32.
 * gemm_cpu.c, the dispatcher, chooses one once per process, from the CPU
 * and the TRIDENT_CPU_BF16_GEMM environment variable (auto, library,
 * trident, widened), and a trident kernel is used only after it has
 * agreed with a plain loop on this CPU. doc/performance.md ("CPU GEMMs")
 * has the measurements behind the choice.
 *
 * Not collective.
 */
#ifndef TRI_KERNELS_CPU_GEMM_BF16_H
#define TRI_KERNELS_CPU_GEMM_BF16_H

#include <stdint.h>

/* trident's kernels are x86 (GCC and clang compile them for their ISA
 * whatever the build's flags); elsewhere bf16 GEMMs take the other paths */
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define TRI_GEMM_BF16_X86 1
#else
#define TRI_GEMM_BF16_X86 0
#endif

typedef enum {
    GEMM_BF16_LIBRARY,
    GEMM_BF16_AVX512,
    GEMM_BF16_AVX2,
    GEMM_BF16_WIDENED
} gemm_bf16_path;

/* C (fp32, M x N, row stride ldc) = [C +] op(A) . op(B), A and B bf16,
 * for M, N, K > 0; the CPU must have the function's ISA. */
typedef void (*gemm_bf16_fn)(int ta, int tb, int M, int N, int K,
                             const uint16_t *A, int lda, const uint16_t *B,
                             int ldb, float *C, int ldc, int accumulate);
void gemm_bf16_avx512(int ta, int tb, int M, int N, int K, const uint16_t *A,
                      int lda, const uint16_t *B, int ldb, float *C, int ldc,
                      int accumulate);
void gemm_bf16_avx2(int ta, int tb, int M, int N, int K, const uint16_t *A,
                    int lda, const uint16_t *B, int ldb, float *C, int ldc,
                    int accumulate);

/* The path this process runs bf16 GEMMs on (gemm_cpu.c), chosen at
 * start-up by ops_cpu_gemm_check or else on the first call (which must be
 * outside parallel regions, as gemm_cpu's are). Fatal (ops_fatal, naming
 * TRIDENT_CPU_BF16_GEMM) where it asks for a path this build or CPU
 * cannot run. */
gemm_bf16_path gemm_bf16_path_cpu(void);
/* The fastest of trident's kernels this CPU can run (AVX512, AVX2), or
 * WIDENED where it runs none. */
gemm_bf16_path gemm_bf16_own_path_cpu(void);
/* The kernel of an own path (AVX512, AVX2), NULL for the others. */
gemm_bf16_fn gemm_bf16_kernel_cpu(gemm_bf16_path path);
/* Whether fn computes, on this CPU, what a plain loop does on a few ragged
 * shapes in all four transposes, up to fp32 round-off (hardware bf16
 * units may flush denormals or round once per pair): the check a trident
 * kernel passes before gemm_bf16_path_cpu uses it. On a fault, *worst is
 * the largest error found (0 otherwise). */
int gemm_bf16_kernel_agrees(gemm_bf16_fn fn, double *worst);
/* A path's name for logs: "trident's bf16 GEMM on vdpbf16ps
 * (AVX512_BF16)", ... */
const char *gemm_bf16_path_name(gemm_bf16_path path);

/* A test's hook, documented in doc/gpu.md ("The measurement switches"):
 * TRIDENT_TEST_BF16_GEMM_LACKS, a comma-separated list of "library",
 * "avx512bf16" and "avx2", makes the choice take this build's GEMM
 * library as having no bf16 kernel and this CPU as lacking the ISAs
 * named, so that a test on a CPU that has every path can see what a CPU
 * or build without one does. It only ever takes paths away. Whether what
 * is listed; another word in it is fatal, naming it. */
#define GEMM_BF16_LACKS_ENV "TRIDENT_TEST_BF16_GEMM_LACKS"
int gemm_bf16_test_lacks(const char *what);

#endif
