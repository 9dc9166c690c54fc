/*
 * peak_cpu.c - the hardware's peak on a CPU: what its arithmetic units can
 * do, measured, not what a GEMM library reaches.
 *
 * MFU is quoted against the hardware (989 TFLOP/s dense bf16 for an H100),
 * so on a CPU the denominator is the rate of the widest multiply-add the
 * cores execute, times its lanes, times the threads running it at once:
 *   fp32:  vfmadd231ps on 16 lanes (AVX-512) or 8 (AVX2 + FMA), 2 FLOP a lane;
 *   bf16:  AMX's tdpbf16ps (16 x 16 x 32 multiply-adds a tile) where the
 *          CPU and the kernel allow AMX, else AVX512_BF16's vdpbf16ps (32
 *          multiply-adds into 16 lanes) where it outruns the fp32 FMA,
 *          else none: bf16 then runs on the fp32 units and its ceiling is
 *          fp32's. vdpbf16ps does not always outrun it: on AMD Zen 4 it
 *          does twice the FMA's multiply-adds a second, on Intel Sapphire
 *          Rapids half (one every two cycles: 115 against 230 GFLOP/s a
 *          core, measured 2026-11-27), so it is timed against the FMA.
 * Each probe runs enough independent accumulator chains to cover the
 * instruction's latency on every port, on every OpenMP thread at once, for
 * a fixed wall time, and counts what was done: ranks that share cores each
 * see their share, and their sum is the cores' rate (src/parallel/hw_peak.c adds
 * them up). Not collective.
 */
#include "cpu.h"

#include <omp.h>
#include <stdio.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#define TRI_X86 1
#else
#define TRI_X86 0
#endif

/* Instructions between two looks at the clock, per chain. */
#define PROBE_BLOCK 4096

typedef enum { UNIT_NONE, UNIT_FMA_AVX2, UNIT_FMA_AVX512, UNIT_DPBF16, UNIT_AMX } Unit;

typedef struct {
    Unit unit;
    const char *name;   /* the instruction and its width */
    double flops;       /* FLOP per instruction */
} Probe;

#if TRI_X86
/* The chains are named variables, not an array: GCC keeps an array of
 * vectors in memory at -O2, and a store and load per FMA measures the
 * store-forwarding latency, not the FMA units. */
#define CHAINS_12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define CHAINS_24(X) CHAINS_12(X) X(12) X(13) X(14) X(15) X(16) X(17) X(18) X(19) \
    X(20) X(21) X(22) X(23)

/* 12 chains of 8 lanes: two FMA ports with a latency of 4 to 5 cycles need
 * 8 to 10 in flight; 12 keep them busy and fit in 16 ymm registers. */
__attribute__((target("avx2,fma"))) static double fma_avx2_block(float seed)
{
    __m256 m = _mm256_set1_ps(0.999999f), a = _mm256_set1_ps(1e-7f);
#define DECLARE(i) __m256 c##i = _mm256_set1_ps(seed + (float)(i));
#define STEP(i) c##i = _mm256_fmadd_ps(c##i, m, a);
#define SUM(i) s = _mm256_add_ps(s, c##i);
    CHAINS_12(DECLARE)
    for (int it = 0; it < PROBE_BLOCK; it++) {
        CHAINS_12(STEP)
    }
    __m256 s = _mm256_setzero_ps();
    CHAINS_12(SUM)
#undef DECLARE
#undef STEP
#undef SUM
    float out[8];
    _mm256_storeu_ps(out, s);
    return out[0]; /* keeps the chains alive */
}

/* 24 chains of 16 lanes in 32 zmm registers. */
__attribute__((target("avx512f"))) static double fma_avx512_block(float seed)
{
    __m512 m = _mm512_set1_ps(0.999999f), a = _mm512_set1_ps(1e-7f);
#define DECLARE(i) __m512 c##i = _mm512_set1_ps(seed + (float)(i));
#define STEP(i) c##i = _mm512_fmadd_ps(c##i, m, a);
#define SUM(i) s = _mm512_add_ps(s, c##i);
    CHAINS_24(DECLARE)
    for (int it = 0; it < PROBE_BLOCK; it++) {
        CHAINS_24(STEP)
    }
    __m512 s = _mm512_setzero_ps();
    CHAINS_24(SUM)
#undef DECLARE
#undef STEP
#undef SUM
    return _mm512_reduce_add_ps(s);
}

/* vdpbf16ps: 16 fp32 lanes, each += two bf16 products. 24 chains. */
__attribute__((target("avx512f,avx512bf16"))) static double dpbf16_block(float seed)
{
    __m512bh x = _mm512_cvtne2ps_pbh(_mm512_set1_ps(0.5f), _mm512_set1_ps(seed));
    __m512bh y = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-3f));
#define DECLARE(i) __m512 c##i = _mm512_set1_ps((float)(i));
#define STEP(i) c##i = _mm512_dpbf16_ps(c##i, x, y);
#define SUM(i) s = _mm512_add_ps(s, c##i);
    CHAINS_24(DECLARE)
    for (int it = 0; it < PROBE_BLOCK; it++) {
        CHAINS_24(STEP)
    }
    __m512 s = _mm512_setzero_ps();
    CHAINS_24(SUM)
#undef DECLARE
#undef STEP
#undef SUM
    return _mm512_reduce_add_ps(s);
}

/* AMX: the tile registers must be requested from the kernel once per
 * process (Linux 5.16+); a kernel or container that refuses leaves AMX
 * unusable, and oneDNN falls back to AVX-512 too. */
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

static int amx_permitted(void)
{
    static int permitted = -1;
    #pragma omp critical(tri_amx_permission)
    if (permitted < 0)
        permitted = syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
    return permitted;
}

/* Palette 1: eight tiles of 16 rows of 64 bytes. */
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} __attribute__((packed)) TileConfig;

/* Four accumulator tiles (0-3), fed by two A tiles (4, 5) and two B tiles
 * (6, 7), all zero: each tdpbf16ps is 16 x 16 x 32 multiply-adds. The
 * thread's tile state is configured here and released before returning. */
__attribute__((target("amx-tile,amx-bf16"))) static double amx_block(float seed)
{
    TileConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) {
        cfg.colsb[t] = 64;
        cfg.rows[t] = 16;
    }
    _tile_loadconfig(&cfg);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_zero(4);
    _tile_zero(5);
    _tile_zero(6);
    _tile_zero(7);
    for (int it = 0; it < PROBE_BLOCK / 16; it++) {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    float out[256];
    _tile_stored(0, out, 64);
    _tile_release();
    return out[0] + seed;
}
#endif

/* The probe for dtype on this CPU: bf16's native unit if it has one that
 * outruns the fp32 FMA, else the fp32 FMA (which is also what fp16 runs on
 * here: trident widens fp16 to fp32 on the CPU). */
static Probe probe_for(ops_dtype dtype)
{
    Probe p = {UNIT_NONE, "scalar (no FMA unit found)", 0.0};
#if TRI_X86
    __builtin_cpu_init();
    if (dtype == OPS_BF16 && __builtin_cpu_supports("amx-bf16") && amx_permitted())
        return (Probe){UNIT_AMX, "AMX tdpbf16ps (16x16x32 bf16 tiles)", 2.0 * 16 * 16 * 32};
    if (dtype == OPS_BF16 && cpu_bf16_dot_outpaces_fma())
        return (Probe){UNIT_DPBF16, "AVX512_BF16 vdpbf16ps (32 bf16 multiply-adds)", 64.0};
    if (__builtin_cpu_supports("avx512f"))
        return (Probe){UNIT_FMA_AVX512, "AVX-512 vfmadd231ps (16 fp32 lanes)", 32.0};
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return (Probe){UNIT_FMA_AVX2, "AVX2 vfmadd231ps (8 fp32 lanes)", 16.0};
#else
    (void)dtype;
#endif
    return p;
}

/* Instructions one call of the unit's block issues. */
static double block_instructions(Unit u)
{
    switch (u) {
    case UNIT_FMA_AVX2: return 12.0 * PROBE_BLOCK;
    case UNIT_FMA_AVX512:
    case UNIT_DPBF16: return 24.0 * PROBE_BLOCK;
    case UNIT_AMX: return 4.0 * (PROBE_BLOCK / 16);
    default: return 0.0;
    }
}

static double run_block(Unit u, float seed)
{
#if TRI_X86
    switch (u) {
    case UNIT_FMA_AVX2: return fma_avx2_block(seed);
    case UNIT_FMA_AVX512: return fma_avx512_block(seed);
    case UNIT_DPBF16: return dpbf16_block(seed);
    case UNIT_AMX: return amx_block(seed);
    default: break;
    }
#endif
    (void)u;
    (void)seed;
    return 0.0;
}

static volatile double probe_sink;
/* Read afresh for every block: a block of constant arguments is a pure
 * function that GCC would compute once and hoist out of the timing loop. */
static volatile float probe_seed = 1.0f;

/* FLOP/s of unit u (flops per instruction) on the calling thread over a
 * window of about `seconds`; the blocks' results are added to *sink, so
 * that they are computed. */
static double thread_rate(Unit u, double flops, double seconds, double *sink)
{
    double done = 0.0, t0 = omp_get_wtime(), dt;
    do {
        *sink += run_block(u, probe_seed);
        done += block_instructions(u);
        dt = omp_get_wtime() - t0;
    } while (dt < seconds);
    return done * flops / dt;
}

void cpu_bf16_dot_rates(double *dot, double *fma)
{
    static double rates[2] = {-1.0, -1.0};
    #pragma omp critical(tri_bf16_dot_rates)
    if (rates[0] < 0.0) {
        rates[0] = rates[1] = 0.0;
#if TRI_X86
        __builtin_cpu_init();
        if (__builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512f")) {
            /* warm up, then five rounds of 2 ms windows taking turns, so a
             * slow spell (another rank on this core) falls on both */
            double sink = 0.0;
            thread_rate(UNIT_DPBF16, 64.0, 2e-3, &sink);
            thread_rate(UNIT_FMA_AVX512, 32.0, 2e-3, &sink);
            for (int round = 0; round < 5; round++) {
                double d = thread_rate(UNIT_DPBF16, 64.0, 2e-3, &sink);
                double f = thread_rate(UNIT_FMA_AVX512, 32.0, 2e-3, &sink);
                rates[0] = d > rates[0] ? d : rates[0];
                rates[1] = f > rates[1] ? f : rates[1];
            }
            probe_sink = sink;
        }
#endif
    }
    *dot = rates[0];
    *fma = rates[1];
}

double cpu_bf16_dot_speedup(void)
{
    double dot, fma;
    cpu_bf16_dot_rates(&dot, &fma);
    return fma > 0.0 ? dot / fma : 0.0;
}

int cpu_bf16_dot_outpaces_fma(void)
{
#if TRI_X86
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_is("amd");
#else
    return 0;
#endif
}

int cpu_has_native_bf16(void)
{
    Unit u = probe_for(OPS_BF16).unit;
    return u == UNIT_AMX || u == UNIT_DPBF16;
}

double cpu_peak_flops(ops_dtype dtype, double seconds, char *how, size_t how_size)
{
    Probe p = probe_for(dtype);
    int threads = omp_get_max_threads();
    double total = 0.0, sink = 0.0;
    if (p.unit != UNIT_NONE) {
        #pragma omp parallel reduction(+ : total, sink)
        {
            /* warm up (AVX-512 units power up, pages of code fault in) */
            sink += run_block(p.unit, (float)omp_get_thread_num());
            total += thread_rate(p.unit, p.flops, seconds, &sink);
        }
    }
    probe_sink = sink; /* the chains' results are used, so they are computed */
    if (how)
        snprintf(how, how_size, "%s x %d thread%s", p.name, threads, threads == 1 ? "" : "s");
    return total;
}

/* The processor's brand string from CPUID leaves 0x80000002-4. */
const char *cpu_model_name(void)
{
    static char name[49];
#if TRI_X86
    unsigned int r[12];
    if (!name[0] && __get_cpuid_max(0x80000000u, NULL) >= 0x80000004u) {
        for (unsigned int i = 0; i < 3; i++)
            __get_cpuid(0x80000002u + i, &r[4 * i], &r[4 * i + 1], &r[4 * i + 2], &r[4 * i + 3]);
        memcpy(name, r, 48);
        name[48] = '\0';
        char *s = name; /* brand strings are padded with spaces */
        while (*s == ' ')
            s++;
        memmove(name, s, strlen(s) + 1);
        for (size_t n = strlen(name); n > 0 && name[n - 1] == ' '; n--)
            name[n - 1] = '\0';
    }
#endif
    if (!name[0])
        snprintf(name, sizeof name, "unknown CPU");
    return name;
}

int cpu_isa_tier(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        return 3;
    if (__builtin_cpu_supports("avx2"))
        return 2;
    if (__builtin_cpu_supports("avx"))
        return 1;
#endif
    return 0;
}

const char *cpu_isa_tier_name(int tier)
{
    static const char *names[] = { "only SSE", "AVX", "AVX2", "AVX-512" };
    return names[tier];
}
