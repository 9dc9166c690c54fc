/*
 * attention_cpu.c - fused causal self-attention, forward and backward,
 * without a T x T matrix in memory.
 *
 * Per (batch, head), FlashAttention-2's schedule on the CPU: the queries go
 * in tiles of ATT_ROWS rows and, for each, the keys up to the tile's end of
 * the diagonal go in tiles of ATT_KEYS columns. The forward computes
 * S = Q_i K_j^T / sqrt(hs) for one tile pair, keeps each row's running
 * max m and sum l of exponentials (online softmax: when m grows, l and the
 * output row so far are scaled by exp(m_old - m_new)), and adds
 * exp(S - m) V_j to the output; at the end it divides by l and keeps only
 * lse = m + log l per row, (B,NH,T) floats, beside the output. The
 * backward recomputes P = exp(S - lse) tile by tile, with (in fp32)
 * D_i = rowsum(dO_i * O_i) in place of rowsum(dP * P) (equal: both are
 * dO_i . sum_j P_ij V_j; head_bwd says why bf16 and fp16 do not):
 *   dV_j += P^T dO_i,  dP = dO_i V_j^T,  dS = P * (dP - D) / sqrt(hs),
 *   dQ_i += dS K_j,    dK_j += dS^T Q_i.
 * The memory that grew with T^2 (the probabilities kept for the backward,
 * and a second T x T scratch there) becomes two ATT_ROWS x ATT_KEYS tiles
 * per thread, which stay in L2, and the lse. kernels/cpu/attention_exact_cpu.c keeps
 * the full-matrix kernel as the reference the tests compare with.
 *
 * Q, K and V are read in place from the (B,T,NH,3,hs) qkv tensor through
 * the GEMM's leading dimension 3*NH*hs, O is written in place into
 * (B,T,NH*hs), and the tile products are single-threaded gemm_f32_cpu
 * calls (a threaded 64x256x64 GEMM spends more time starting threads than
 * computing). The causal mask skips whole key tiles past the diagonal; in
 * the diagonal tile the masked entries of P and dS are written as zeros,
 * so the GEMMs may read the full tile.
 *
 * Threads and determinism: the (batch, head) pairs go to OpenMP threads
 * and each pair is computed start to end by one thread in one order (key
 * tiles, then query tiles for dK and dV), so no sum is split by the thread
 * count and the results are the same bits on any number of threads. Rows
 * reduce in 16 lanes (vec.h), the same on every ISA variant.
 *
 * Tile sizes: ATT_ROWS 64 as the exact kernel's blocks. ATT_KEYS 256
 * holds a whole row at T <= 256, so the online rescaling never runs there;
 * at T = 1024 a query tile sees up to 4 key tiles. fwd + bwd against the
 * exact kernel, B=4 NH=12 hs=64 fp32, 2 shared cores, oneDNN avx2, best
 * of interleaved runs in one process: T = 256 45 vs 48 ms, T = 1024 907
 * vs 1220 ms (the exact kernel's T x T passes leave the cache there).
 * Other tile sizes were not tried.
 *
 * Row windows (context parallelism, issue 39): the ops take the queries
 * of rows [q0, q0 + Tq) of the sequence against the keys [0, q0 + Tq).
 * The query at local row i sits at position a = q0 + i, so the causal
 * mask and the key tiles' end use a where the whole sequence used i, and
 * out, lse, dout hold Tq rows. Only index arithmetic changes: q0 = 0,
 * Tq = T is the whole-sequence op, the same instructions and bits. The
 * window's backward accumulates (+=) into a dqkv the caller zeroed, so
 * the windows of one sequence add their dk, dv into one tensor; the
 * whole-sequence op overwrites, as ops.h states.
 *
 * bf16 and fp16: each thread widens its head's q, k, v (and out, dout) to
 * fp32 in its share of a scratch buffer, runs the fp32 head code on the
 * copies, and rounds the head's output (or dq, dk, dv) once into the
 * tensor; lse is fp32. The GEMMs stay fp32, as in the exact kernel.
 */
#include "cpu.h"

#include <math.h>
#include <omp.h>

#include "vec.h"

#define ATT_ROWS 64
#define ATT_KEYS 256 /* a multiple of ATT_ROWS: query_tile_end */

static int imin(int a, int b) { return a < b ? a : b; }

/* The end of the query tile that starts at position a0, in a window that
 * ends at `end`: tiles break at multiples of ATT_ROWS in the sequence's
 * positions, wherever the window starts, so a key tile (a multiple of
 * ATT_KEYS, itself a multiple of ATT_ROWS) that starts before a tile's end
 * starts at or before its first row, and every row of the tile sees at
 * least one of the tile's keys. For q0 = 0 these are the tiles of the
 * whole sequence. */
static int query_tile_end(int a0, int end)
{
    return imin(end, (a0 / ATT_ROWS + 1) * ATT_ROWS);
}

/* x[0..n) dotted with y[0..n), 16 lanes then across them in order. */
static inline float row_dot(const float *x, const float *y, int n)
{
    vec16 acc = vec16_set(0.0f);
    int j = 0;
    for (; j + 16 <= n; j += 16)
        acc = vec16_add(acc, vec16_mul(vec16_load(x + j), vec16_load(y + j)));
    float s = vec16_sum_lanes(acc);
    for (; j < n; j++)
        s += x[j] * y[j];
    return s;
}

/* The shape of one head's window: query rows [q0, q0 + Tq) against keys
 * [0, q0 + Tq), head size hs; ld is the row stride of q, k, v, ldo that of
 * the output (and dout). */
typedef struct {
    int q0, Tq, hs, ld, ldo;
} head_shape;

/* The online softmax of one tile: s (nr rows of stride ATT_KEYS, nc
 * columns from key c0, the first row at position a0) becomes exp(s - m)
 * with m each row's running max, zero past the diagonal; l gains the row sums; alpha[i] receives the
 * factor by which row i's output so far must be scaled (0 on the first
 * key tile, which the output GEMM overwrites). */
TRI_CLONES static void online_softmax(float *s, float *m, float *l, float *alpha,
                                      int nr, int nc, int a0, int c0)
{
    for (int i = 0; i < nr; i++) {
        float *row = s + (int64_t)i * ATT_KEYS;
        int n = imin(nc, a0 + i + 1 - c0); /* >= 1: key tiles start at or before a0 */
        float mx = vec_row_max(row, n);
        float mnew = c0 == 0 || mx > m[i] ? mx : m[i];
        alpha[i] = c0 == 0 ? 0.0f : elem_expf(m[i] - mnew);
        for (int j = 0; j < n; j++)
            row[j] = elem_expf(row[j] - mnew);
        for (int j = n; j < nc; j++)
            row[j] = 0.0f;
        float sum = vec_row_sum(row, n);
        l[i] = c0 == 0 ? sum : l[i] * alpha[i] + sum;
        m[i] = mnew;
    }
}

/* One head's forward over the window sh. q points at the window's first
 * query row, k and v at the head's first key row (row stride sh.ld); o at
 * its first output row (stride sh.ldo); lse at its Tq floats; s is an
 * ATT_ROWS x ATT_KEYS tile. */
static void head_fwd(float *o, float *lse, float *s, const float *q,
                     const float *k, const float *v, head_shape sh)
{
    int hs = sh.hs, ld = sh.ld, ldo = sh.ldo;
    float scale = 1.0f / sqrtf((float)hs);
    float m[ATT_ROWS], l[ATT_ROWS], alpha[ATT_ROWS];
    int end = sh.q0 + sh.Tq;
    for (int a0 = sh.q0, kend; a0 < end; a0 = kend) {
        kend = query_tile_end(a0, end); /* keys [0, kend) */
        int nr = kend - a0, r0 = a0 - sh.q0;
        float *orow = o + (int64_t)r0 * ldo;
        for (int c0 = 0; c0 < kend; c0 += ATT_KEYS) {
            int nc = imin(ATT_KEYS, kend - c0);
            // S = scale Q[r0:r0+nr] K[c0:c0+nc]^T
            gemm_f32_cpu(0, 1, nr, nc, hs, scale, q + (int64_t)r0 * ld, ld,
                         k + (int64_t)c0 * ld, ld, 0.0f, s, ATT_KEYS);
            online_softmax(s, m, l, alpha, nr, nc, a0, c0);
            if (c0 > 0)
                for (int i = 0; i < nr; i++)
                    for (int d = 0; d < hs; d++)
                        orow[(int64_t)i * ldo + d] *= alpha[i];
            // O[r0:r0+nr] (+)= exp(S - m) V[c0:c0+nc]
            gemm_f32_cpu(0, 0, nr, hs, nc, 1.0f, s, ATT_KEYS,
                         v + (int64_t)c0 * ld, ld, c0 > 0 ? 1.0f : 0.0f, orow,
                         ldo);
        }
        for (int i = 0; i < nr; i++) {
            float inv = 1.0f / l[i];
            for (int d = 0; d < hs; d++)
                orow[(int64_t)i * ldo + d] *= inv;
            lse[r0 + i] = m[i] + logf(l[i]);
        }
    }
}

/* P = exp(S - lse) over S in place (nr rows of stride ATT_KEYS, nc
 * columns from key c0; the first row at position a0, its lse at lse[0]),
 * zero past the diagonal. With D, D[i] += rowsum(P * dP) over the tile. */
TRI_CLONES static void tile_probs(float *s, const float *dp, float *D,
                                  const float *lse, int nr, int nc, int a0, int c0)
{
    for (int i = 0; i < nr; i++) {
        float *prow = s + (int64_t)i * ATT_KEYS;
        int n = imin(nc, a0 + i + 1 - c0);
        float li = lse[i];
        for (int j = 0; j < n; j++)
            prow[j] = elem_expf(prow[j] - li);
        for (int j = n; j < nc; j++)
            prow[j] = 0.0f;
        if (D)
            D[i] += row_dot(prow, dp + (int64_t)i * ATT_KEYS, n);
    }
}

/* dS = P * (dP - D) * scale over dP, zero past the diagonal (rows from
 * position a0). */
TRI_CLONES static void tile_ds(float *dp, const float *p, const float *D,
                               int nr, int nc, int a0, int c0, float scale)
{
    for (int i = 0; i < nr; i++) {
        const float *prow = p + (int64_t)i * ATT_KEYS;
        float *drow = dp + (int64_t)i * ATT_KEYS;
        int n = imin(nc, a0 + i + 1 - c0);
        float di = D[i];
        for (int j = 0; j < n; j++)
            drow[j] = prow[j] * (drow[j] - di) * scale;
        for (int j = n; j < nc; j++)
            drow[j] = 0.0f;
    }
}

/* One head's backward over the window sh: dq (the window's Tq rows), dk,
 * dv (keys [0, q0 + Tq)), row stride ldd, are written (=), or with
 * accumulate added to (+=); q points at the window's first query row, k
 * and v at the first key row (stride sh.ld); dout and o have stride sh.ldo
 * and Tq rows; s and dp are ATT_ROWS x ATT_KEYS tiles. With exact_d, D = rowsum(P * dP) in a first sweep over
 * the key tiles instead of rowsum(dO * O): bf16 and fp16 need it, as their
 * O is rounded (2^-9 of an element) and dP - D cancels, which put dq off
 * by tens of percent in places against the fp32 op; when the row fits one
 * key tile (T <= ATT_KEYS) the sweep's P and dP are used directly, so it
 * costs nothing there. fp32's O is the forward's own, so it takes the
 * dot product and saves the sweep's two GEMMs per tile. */
static void head_bwd(float *dq, float *dk, float *dv, int ldd, float *s,
                     float *dp, const float *dout, const float *o,
                     const float *q, const float *k, const float *v,
                     const float *lse, head_shape sh, int exact_d, int accumulate)
{
    int hs = sh.hs, ld = sh.ld, ldo = sh.ldo;
    float scale = 1.0f / sqrtf((float)hs);
    float D[ATT_ROWS];
    for (int t = 0; !accumulate && t < sh.q0 + sh.Tq; t++)
        for (int d = 0; d < hs; d++)
            dk[(int64_t)t * ldd + d] = dv[(int64_t)t * ldd + d] = 0.0f;
    int end = sh.q0 + sh.Tq;
    for (int a0 = sh.q0, kend; a0 < end; a0 = kend) {
        kend = query_tile_end(a0, end); /* keys [0, kend) */
        int nr = kend - a0, r0 = a0 - sh.q0;
        const float *qi = q + (int64_t)r0 * ld, *doi = dout + (int64_t)r0 * ldo;
        const float *li = lse + r0;
        if (exact_d) {
            for (int i = 0; i < nr; i++)
                D[i] = 0.0f;
            for (int c0 = 0; c0 < kend; c0 += ATT_KEYS) {
                int nc = imin(ATT_KEYS, kend - c0);
                gemm_f32_cpu(0, 1, nr, nc, hs, scale, qi, ld, k + (int64_t)c0 * ld, ld,
                             0.0f, s, ATT_KEYS);
                gemm_f32_cpu(0, 1, nr, nc, hs, 1.0f, doi, ldo, v + (int64_t)c0 * ld, ld,
                             0.0f, dp, ATT_KEYS);
                tile_probs(s, dp, D, li, nr, nc, a0, c0);
            }
        } else {
            for (int i = 0; i < nr; i++)
                D[i] = row_dot(doi + (int64_t)i * ldo, o + (int64_t)(r0 + i) * ldo, hs);
        }
        for (int c0 = 0; c0 < kend; c0 += ATT_KEYS) {
            int nc = imin(ATT_KEYS, kend - c0);
            const float *kj = k + (int64_t)c0 * ld, *vj = v + (int64_t)c0 * ld;
            if (!exact_d || kend > ATT_KEYS) {
                // S = scale Q_i K_j^T, dP = dO_i V_j^T, P = exp(S - lse)
                gemm_f32_cpu(0, 1, nr, nc, hs, scale, qi, ld, kj, ld, 0.0f, s, ATT_KEYS);
                gemm_f32_cpu(0, 1, nr, nc, hs, 1.0f, doi, ldo, vj, ld, 0.0f, dp, ATT_KEYS);
                tile_probs(s, dp, NULL, li, nr, nc, a0, c0);
            }
            tile_ds(dp, s, D, nr, nc, a0, c0, scale);
            // dQ_i (+)= dS K_j
            gemm_f32_cpu(0, 0, nr, hs, nc, 1.0f, dp, ATT_KEYS, kj, ld,
                         c0 > 0 || accumulate ? 1.0f : 0.0f, dq + (int64_t)r0 * ldd, ldd);
            // dK_j += dS^T Q_i, dV_j += P^T dO_i
            gemm_f32_cpu(1, 0, nc, hs, nr, 1.0f, dp, ATT_KEYS, qi, ld, 1.0f,
                         dk + (int64_t)c0 * ldd, ldd);
            gemm_f32_cpu(1, 0, nc, hs, nr, 1.0f, s, ATT_KEYS, doi, ldo, 1.0f,
                         dv + (int64_t)c0 * ldd, ldd);
        }
    }
}

#define TILE ((int64_t)ATT_ROWS * ATT_KEYS)

/* fp32 works in place; bf16/fp16 first widen each head into fp32
 * (q0 + Tq, 3hs) q|k|v rows and a (Tq, hs) output, in the thread's share. */
void attention_rows_fwd_cpu(void *out, float *lse, const void *qkv, ops_dtype dt,
                            int B, int T, int q0, int Tq, int NH, int hs)
{
    int ld = 3 * NH * hs, ldo = NH * hs, f32 = dt == OPS_F32, K = q0 + Tq;
    size_t es = ops_dtype_size(dt);
    int64_t share = TILE + (f32 ? 0 : (int64_t)T * 4 * hs);
    float *buf = scratch_cpu(SCRATCH_ATTENTION, (size_t)omp_get_max_threads()
                             * share * sizeof(float));
    int saved = gemm_serial_begin_cpu();
    #pragma omp parallel for schedule(static)
    for (int bh = 0; bh < B * NH; bh++) {
        int b = bh / NH, h = bh % NH;
        float *s = thread_share_cpu(buf, share);
        int64_t qoff = (int64_t)b * T * ld + (int64_t)h * 3 * hs;
        int64_t ooff = (int64_t)b * Tq * ldo + (int64_t)h * hs;
        float *lh = lse + (int64_t)bh * Tq;
        if (f32) {
            const float *q = (const float *)qkv + qoff;
            head_fwd((float *)out + ooff, lh, s, q + (int64_t)q0 * ld, q + hs, q + 2 * hs,
                     (head_shape){ q0, Tq, hs, ld, ldo });
            continue;
        }
        float *q = s + TILE, *o = q + (int64_t)K * 3 * hs;
        widen_rows_cpu(q, 3 * hs, (const char *)qkv + qoff * es, dt, ld, K, 3 * hs);
        head_fwd(o, lh, s, q + (int64_t)q0 * 3 * hs, q + hs, q + 2 * hs,
                 (head_shape){ q0, Tq, hs, 3 * hs, hs });
        narrow_rows_cpu((char *)out + ooff * es, dt, ldo, o, hs, Tq, hs);
    }
    gemm_serial_end_cpu(saved);
}

/* dst (rows x cols of dtype dt, stride ldd) += src (fp32, stride lds),
 * each sum rounded once. */
static void add_rows(void *dst, ops_dtype dt, int64_t ldd, const float *src, int lds,
                     int rows, int cols)
{
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            int64_t at = (int64_t)r * ldd + c;
            store_f32_cpu(dst, dt, at, load_f32_cpu(dst, dt, at) + src[(int64_t)r * lds + c]);
        }
}

/* bf16/fp16: q|k|v of keys [0, q0 + Tq), the window's out and dout
 * widened, dq|dk|dv computed in fp32 (q0 + Tq, 3hs) and rounded once into
 * dqkv, or added to it with accumulate: dk, dv of every key row, dq of the
 * window's rows. */
void attention_rows_bwd_cpu(void *dqkv, const void *dout, const void *qkv,
                            const void *out, const float *lse, ops_dtype dt,
                            int B, int T, int q0, int Tq, int NH, int hs, int accumulate)
{
    int ld = 3 * NH * hs, ldo = NH * hs, f32 = dt == OPS_F32, K = q0 + Tq;
    size_t es = ops_dtype_size(dt);
    int64_t share = 2 * TILE + (f32 ? 0 : (int64_t)T * 8 * hs);
    float *buf = scratch_cpu(SCRATCH_ATTENTION, (size_t)omp_get_max_threads()
                             * share * sizeof(float));
    int saved = gemm_serial_begin_cpu();
    #pragma omp parallel for schedule(static)
    for (int bh = 0; bh < B * NH; bh++) {
        int b = bh / NH, h = bh % NH;
        float *s = thread_share_cpu(buf, share), *dp = s + TILE;
        int64_t qoff = (int64_t)b * T * ld + (int64_t)h * 3 * hs;
        int64_t ooff = (int64_t)b * Tq * ldo + (int64_t)h * hs;
        const float *lh = lse + (int64_t)bh * Tq;
        if (f32) {
            const float *q = (const float *)qkv + qoff;
            float *dq = (float *)dqkv + qoff;
            head_bwd(dq + (int64_t)q0 * ld, dq + hs, dq + 2 * hs, ld, s, dp,
                     (const float *)dout + ooff, (const float *)out + ooff,
                     q + (int64_t)q0 * ld, q + hs, q + 2 * hs, lh,
                     (head_shape){ q0, Tq, hs, ld, ldo }, 0, accumulate);
            continue;
        }
        float *q = dp + TILE, *dq = q + (int64_t)K * 3 * hs;
        float *g = dq + (int64_t)K * 3 * hs, *o = g + (int64_t)Tq * hs;
        widen_rows_cpu(q, 3 * hs, (const char *)qkv + qoff * es, dt, ld, K, 3 * hs);
        widen_rows_cpu(g, hs, (const char *)dout + ooff * es, dt, ldo, Tq, hs);
        widen_rows_cpu(o, hs, (const char *)out + ooff * es, dt, ldo, Tq, hs);
        float *dqw = dq + (int64_t)q0 * 3 * hs;
        head_bwd(dqw, dq + hs, dq + 2 * hs, 3 * hs, s, dp, g, o, q + (int64_t)q0 * 3 * hs,
                 q + hs, q + 2 * hs, lh, (head_shape){ q0, Tq, hs, 3 * hs, hs }, 1, 0);
        char *dst = (char *)dqkv + qoff * es;
        if (!accumulate) {
            narrow_rows_cpu(dst, dt, ld, dq, 3 * hs, K, 3 * hs); /* q0 = 0 here */
            continue;
        }
        // keys before the window: dk, dv only (their dq is another window's)
        add_rows(dst + (size_t)hs * es, dt, ld, dq + hs, 3 * hs, q0, 2 * hs);
        add_rows(dst + (size_t)q0 * ld * es, dt, ld, dqw, 3 * hs, Tq, 3 * hs);
    }
    gemm_serial_end_cpu(saved);
}
