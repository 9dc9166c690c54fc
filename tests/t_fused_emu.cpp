/*
 * t_fused_emu.cpp - TRIDENT_FUSED's CUDA kernels run on the host
 * under tests/cuda_emu (each CUDA thread a fiber): the cross-entropy that
 * writes the head's gradient in bf16/fp16 over the fp32 logits it is
 * computed from (xent_fused_kernel's narrow case, kernels/cuda/
 * xent_cuda.cu), against a double reference, and the token embedding's
 * backward (embedding_cuda.cu: the batched kernel and the serial one it
 * replaced), bit for bit against the CPU's position-order sum; and the
 * column sums of LayerNorm's dw, db and of the bias gradient
 * (layernorm_cuda.cu, matmul_cuda.cu: the kernels a 16-byte pack a
 * thread and those a column a thread), bit for bit against the CPU's
 * formula summed chunk by chunk as the GPU chunks the rows.
 *
 * The cross-entropy's hazard is the aliasing: gradient pack k of a row
 * lands on the bytes of fp32 pack k/2 of the same row, which another
 * thread may not have read yet; row_dlogits_narrow's barrier between a
 * stretch's loads and its stores is what keeps every logit read before
 * it is overwritten. So each case runs in both turn orders
 * (cuda_emu/fibers.h: the backward one lets a higher thread, and a
 * higher block, write before a lower one reads), and t_fused_emu.sh
 * builds the kernel a second time with that barrier removed and passes
 * its exit status here: the last check is that the mutant fails, so
 * these checks can see the race they guard against.
 *
 * Blocks of 128 threads (the GPU launches 512; the kernel reads
 * blockDim.x, so a stretch is 512 packs here): rows narrower than a
 * block, rows of several stretches with a partial last one, 16-byte
 * packs (V a multiple of 4, aligned) and single elements (V odd, or the
 * logits one element off alignment), fp16 with a loss scale.
 * Tolerances: the statistics as fp32 sums (rowmax exact, sumexp 1e-5
 * relative, loss 1e-4 absolute); each gradient element within the
 * dtype's half ulp plus fp32 error of the double reference (2^-8 bf16,
 * 2^-11 fp16, relative) plus the smallest subnormal (fp16).
 *
 * The embedding's kernels read the sort's output: shard_keys_kernel's
 * keys here too, sorted stably on the host (CUB's radix sort is stable).
 * Runs longer than the batch of 16 rows, ending mid-array and at its
 * end, runs of exactly 16, tokens of other shards, fewer tokens than a
 * batch; C at most 128 (one block of channels).
 */
#include "fibers.h"
#include "uniform.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <vector>

EmuDim gridDim = { 1, 1 }; /* the grid-stride kernels' (one block) */

#include "packs.inc"
#include "xent_kernels.inc"
#include "embedding_kernels.inc"
#include "colsum_kernels.inc"

static int n_tests;

/* The narrow kernel over N rows of V fp32 logits starting `shift`
 * elements into a 16-byte aligned buffer, gradient dtype GT, in `order`;
 * quiet: no output (the mutant's run). Returns whether every value was
 * within its tolerance. */
template <ops_dtype GT>
static bool check(int N, int V, int shift, float loss_scale, EmuOrder order, bool quiet)
{
    const float grad_scale = loss_scale / (float)N;
    size_t count = (size_t)N * V + (size_t)shift;
    float *buf = (float *)aligned_alloc(16, (count * sizeof(float) + 15) / 16 * 16);
    float *logits = buf + shift;
    std::vector<float> x((size_t)N * V), losses(N), rowmax(N), sumexp(N), tl(N);
    std::vector<int32_t> targets(N);
    for (size_t i = 0; i < x.size(); i++)
        logits[i] = x[i] = uniform(-12.0f, 12.0f);
    for (int i = 0; i < N; i++)
        targets[i] = (int32_t)(uniform(0.0f, 1.0f) * (float)V) % V;

    /* as xent_fused_narrow_cuda picks: packs where the rows allow */
    bool packed = ((uintptr_t)logits & 15) == 0 && V % 4 == 0;
    emu_order = order;
    if (packed)
        launch((unsigned)N, [&] {
            xent_fused_kernel<OPS_F32, 4, GT>(losses.data(), logits, logits, rowmax.data(),
                                              sumexp.data(), tl.data(), targets.data(), V,
                                              grad_scale);
        });
    else
        launch((unsigned)N, [&] {
            xent_fused_kernel<OPS_F32, 1, GT>(losses.data(), logits, logits, rowmax.data(),
                                              sumexp.data(), tl.data(), targets.data(), V,
                                              grad_scale);
        });

    double tol = GT == OPS_BF16 ? 0x1p-8 : 0x1p-11, floor = GT == OPS_F16 ? 0x1p-24 : 0.0;
    const uint16_t *g = (const uint16_t *)logits; /* row i at element 2 V i */
    long bad_grad = 0, bad_stats = 0;
    for (int i = 0; i < N; i++) {
        const float *row = &x[(size_t)i * V];
        double m = -INFINITY, s = 0.0;
        for (int j = 0; j < V; j++)
            m = row[j] > m ? row[j] : m;
        for (int j = 0; j < V; j++)
            s += exp((double)row[j] - m);
        double loss = log(s) + m - row[targets[i]];
        bad_stats += rowmax[i] != (float)m || fabs(sumexp[i] - s) > 1e-5 * s
                     || fabs(losses[i] - loss) > 1e-4 || tl[i] != row[targets[i]];
        for (int j = 0; j < V; j++) {
            double want = (exp((double)row[j] - m) / s - (j == targets[i])) * grad_scale;
            uint16_t h = g[(size_t)2 * V * i + j];
            double got = GT == OPS_BF16 ? elem_bf16_to_f32(h) : elem_f16_to_f32(h);
            bad_grad += !(fabs(got - want) <= tol * fabs(want) + floor);
        }
    }
    free(buf);
    bool ok = bad_grad == 0 && bad_stats == 0;
    if (!quiet)
        printf("%s %d - %s, %s order: N %d, V %d (%s, %d stretches of 512 packs), logits "
               "from element %d, loss scale %g: %ld gradient elements and %ld rows' statistics "
               "off\n", ok ? "ok" : "not ok", ++n_tests, GT == OPS_BF16 ? "bf16" : "fp16",
               order == EMU_FORWARD ? "forward" : "backward", N, V,
               packed ? "16-byte packs" : "elements", ((packed ? V / 4 : V) + 511) / 512, shift,
               (double)loss_scale, bad_grad, bad_stats);
    return ok;
}

/* Every cross-entropy case in both orders; quiet: only whether all passed. */
static bool check_all(bool quiet)
{
    bool ok = true;
    for (EmuOrder order : { EMU_FORWARD, EMU_BACKWARD }) {
        ok &= check<OPS_BF16>(3, 40, 0, 1.0f, order, quiet);      /* narrower than a block */
        ok &= check<OPS_BF16>(2, 5000, 0, 1.0f, order, quiet);    /* 1250 packs: 3 stretches */
        ok &= check<OPS_F16>(2, 4099, 0, 1024.0f, order, quiet);  /* odd: 9 stretches */
        ok &= check<OPS_BF16>(2, 2048, 1, 1.0f, order, quiet);    /* off alignment */
        ok &= check<OPS_F16>(2, 2052, 0, 1.0f, order, quiet);     /* 513 packs */
    }
    return ok;
}

/* ---- the token embedding's backward ---- */

/* The (key, position) pairs a sort leaves, keys in increasing order and
 * equal keys in position order: with shard keys, shard_keys_kernel's
 * (the row in the shard, Vl for another shard's token), else the tokens. */
static void sorted_pairs(std::vector<int32_t> &keys, std::vector<int32_t> &pos,
                         const std::vector<int32_t> &tok, int v0, int Vl, bool shard_keys)
{
    int N = (int)tok.size();
    std::vector<int32_t> k(tok), p(N);
    if (shard_keys)
        launch(1, [&] { shard_keys_kernel(k.data(), p.data(), tok.data(), v0, Vl, N); });
    std::vector<int> order(N);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return k[a] < k[b]; });
    keys.resize(N);
    pos.resize(N);
    for (int i = 0; i < N; i++) {
        keys[i] = k[order[i]];
        pos[i] = order[i];
    }
}

/* Both kernels, in both orders, on tokens tok over the shard [v0, v0 + Vl)
 * with C channels of dtype dt, against the CPU's sum: dwte[t - v0] +=
 * dout[i] for i = 0, 1, ... in fp32. */
static bool check_embedding(const char *what, const std::vector<int32_t> &tok, int v0, int Vl,
                            int C, ops_dtype dt)
{
    int N = (int)tok.size();
    size_t es = dt == OPS_F32 ? 4 : 2;
    std::vector<char> dout((size_t)N * C * es);
    std::vector<float> start((size_t)Vl * C), want;
    for (int64_t i = 0; i < (int64_t)N * C; i++)
        store_f32_cuda(dout.data(), dt, i, uniform(-1.0f, 1.0f));
    for (float &w : start)
        w = uniform(-1.0f, 1.0f);
    want = start;
    for (int i = 0; i < N; i++)
        if (tok[i] >= v0 && tok[i] < v0 + Vl)
            for (int c = 0; c < C; c++)
                want[(size_t)(tok[i] - v0) * C + c] += load_f32_cuda(dout.data(), dt,
                                                                     (int64_t)i * C + c);
    int bad = 0;
    for (EmuOrder order : { EMU_FORWARD, EMU_BACKWARD })
        for (int batched = 0; batched < 2; batched++) {
            emu_order = order;
            std::vector<int32_t> keys, pos;
            sorted_pairs(keys, pos, tok, v0, Vl, batched);
            std::vector<float> got = start;
            if (batched)
                launch((unsigned)N, [&] {
                    embedding_bwd_batched_kernel(got.data(), keys.data(), pos.data(),
                                                 dout.data(), dt, Vl, N, C);
                });
            else
                launch((unsigned)N, [&] {
                    embedding_bwd_run_kernel(got.data(), keys.data(), pos.data(), dout.data(),
                                             dt, v0, Vl, N, C);
                });
            bad += memcmp(got.data(), want.data(), got.size() * sizeof(float)) != 0;
        }
    printf("%s %d - embedding_bwd, batched and serial kernels, both orders: %s, %d tokens, "
           "shard [%d, %d), C %d, %s: bit-identical to the CPU's sum (%d of 4 runs differ)\n",
           bad == 0 ? "ok" : "not ok", ++n_tests, what, N, v0, v0 + Vl, C,
           dt == OPS_F32 ? "fp32" : dt == OPS_BF16 ? "bf16" : "fp16", bad);
    return bad == 0;
}

static bool check_embeddings()
{
    std::vector<int32_t> drawn(300), same(48, 3), sixteens(40), distinct(37), few = { 7, 1, 7, 12, 7 };
    for (int32_t &t : drawn)
        t = (int32_t)(uniform(0.0f, 1.0f) * 12.0f) % 12;
    for (int i = 0; i < 40; i++) /* runs of 16, 16 and 8, interleaved */
        sixteens[i] = 5 + (i % 5 == 4 ? 2 : i % 2);
    for (int i = 0; i < 37; i++)
        distinct[i] = 10 + (int32_t)((i * 7919) % 50);
    bool ok = true;
    ok &= check_embedding("12 words (runs of about 25, 4 words on other shards)", drawn, 2, 8,
                          70, OPS_BF16);
    ok &= check_embedding("all one token (3 whole batches)", same, 0, 8, 33, OPS_F32);
    ok &= check_embedding("runs of 16, 16 and 8", sixteens, 0, 8, 128, OPS_F16);
    ok &= check_embedding("all distinct", distinct, 10, 50, 1, OPS_BF16);
    ok &= check_embedding("fewer tokens than a batch, 2 on other shards", few, 5, 4, 9, OPS_F32);
    return ok;
}

/* ---- the packed column sums (LayerNorm's dw, db; the bias gradient) ---- */

/* A column sums' pass-1 kernel over the chunks of rows: each chunk a
 * blockIdx.y (the emulator's launch is one row of blocks), `units`
 * columns or packs of columns a thread. */
static void launch_chunks(int chunks, int units, const std::function<void()> &kernel)
{
    for (int y = 0; y < chunks; y++) {
        blockIdx.y = (unsigned)y;
        launch((unsigned)((units + 127) / 128), kernel);
    }
    blockIdx.y = 0;
}

/* dst += colsum_finish_kernel's sum over the chunks of partial */
static void finish(std::vector<float> &dst, const std::vector<float> &partial, int chunks, int C)
{
    launch((unsigned)((C + 127) / 128),
           [&] { colsum_finish_kernel(dst.data(), partial.data(), chunks, C); });
}

/* LayerNorm's dw, db and the bias gradient over N rows of C channels of
 * dtype DT from element `shift` of a 16-byte aligned buffer (the bias's
 * rows ld = C + pad apart), in `order`: the packed kernels and the
 * unpacked ones (TRIDENT_FUSED=0's) bit for bit, and both against the
 * CPU's sums: layernorm_cpu.c's (x - mean) * rstd * g, each channel's
 * rows in order, within each colsum_chunks chunk and then the chunks in
 * order (one chunk, N <= 32: the CPU's layernorm_bwd_cpu bits). */
template <ops_dtype DT>
static bool check_colsums(int N, int C, int shift, int pad, EmuOrder order)
{
    const int VEC = DT == OPS_F32 ? 4 : 8;
    size_t es = DT == OPS_F32 ? 4 : 2;
    int64_t n = (int64_t)N * C, ld = C + pad;
    char *buf_x = (char *)aligned_alloc(16, ((size_t)(n + shift) * es + 15) / 16 * 16);
    char *buf_g = (char *)aligned_alloc(16, ((size_t)(n + shift) * es + 15) / 16 * 16);
    void *inp = buf_x + shift * es, *dout = buf_g + shift * es;
    std::vector<float> mean(N), rstd(N), start(C);
    for (int64_t i = 0; i < n; i++) {
        store_f32_cuda(inp, DT, i, uniform(-2.0f, 3.0f));
        store_f32_cuda(dout, DT, i, uniform(-1.0f, 1.0f));
    }
    for (int i = 0; i < N; i++) {
        mean[i] = uniform(-0.5f, 0.5f);
        rstd[i] = uniform(0.5f, 2.0f);
    }
    for (float &v : start)
        v = uniform(-1.0f, 1.0f);
    int rpc, chunks = colsum_chunks(N, &rpc);
    int M = (int)((n - C) / ld) + 1; /* the bias's rows */
    int rpcb, chunksb = colsum_chunks(M, &rpcb);
    emu_order = order;

    /* the CPU's formula, chunk by chunk */
    std::vector<float> want_w(start), want_b(start), want_bias(start);
    for (int c = 0; c < C; c++) {
        float tw = 0.0f, tb = 0.0f, tbias = 0.0f;
        for (int r = 0; r < chunks; r++) {
            float sw = 0.0f, sb = 0.0f;
            for (int i = r * rpc; i < N && i < (r + 1) * rpc; i++) {
                float g = load_f32_cuda(dout, DT, (int64_t)i * C + c);
                float norm = (load_f32_cuda(inp, DT, (int64_t)i * C + c) - mean[i]) * rstd[i];
                sw += norm * g;
                sb += g;
            }
            tw += sw;
            tb += sb;
        }
        for (int r = 0; r < chunksb; r++) {
            float s = 0.0f;
            for (int i = r * rpcb; i < M && i < (r + 1) * rpcb; i++)
                s += load_f32_cuda(dout, DT, i * ld + c);
            tbias += s;
        }
        want_w[c] += tw;
        want_b[c] += tb;
        want_bias[c] += tbias;
    }

    /* as layernorm_dwdb_cuda and bias_bwd_cuda pick */
    bool ln_packs = ((uintptr_t)inp & 15) == 0 && ((uintptr_t)dout & 15) == 0 && C % VEC == 0;
    bool bias_packs = ((uintptr_t)dout & 15) == 0 && ld % VEC == 0 && C % VEC == 0;
    std::vector<float> pw((size_t)chunks * C), pb((size_t)chunks * C);
    std::vector<float> pbias((size_t)chunksb * C);
    int same = 0;
    std::vector<float> got[2][3];
    for (int packed = 0; packed < 2; packed++) {
        if (!packed)
            launch_chunks(chunks, C, [&] {
                layernorm_dwdb_partial_kernel(pw.data(), pb.data(), dout, inp, mean.data(),
                                              rstd.data(), DT, N, C, rpc);
            });
        else if (ln_packs)
            launch_chunks(chunks, C / VEC, [&] {
                layernorm_dwdb_pack_kernel<DT, VEC>(pw.data(), pb.data(), dout, inp,
                                                    mean.data(), rstd.data(), N, C, rpc);
            });
        else
            launch_chunks(chunks, C, [&] {
                layernorm_dwdb_pack_kernel<DT, 1>(pw.data(), pb.data(), dout, inp, mean.data(),
                                                  rstd.data(), N, C, rpc);
            });
        if (!packed)
            launch_chunks(chunksb, C, [&] {
                bias_partial_kernel(pbias.data(), dout, DT, ld, M, C, rpcb);
            });
        else if (bias_packs)
            launch_chunks(chunksb, C / VEC, [&] {
                bias_pack_kernel<DT, VEC>(pbias.data(), dout, ld, M, C, rpcb);
            });
        else
            launch_chunks(chunksb, C, [&] {
                bias_pack_kernel<DT, 1>(pbias.data(), dout, ld, M, C, rpcb);
            });
        got[packed][0] = got[packed][1] = got[packed][2] = start;
        finish(got[packed][0], pw, chunks, C);
        finish(got[packed][1], pb, chunks, C);
        finish(got[packed][2], pbias, chunksb, C);
        same += got[packed][0] == want_w && got[packed][1] == want_b &&
                got[packed][2] == want_bias;
    }
    free(buf_x);
    free(buf_g);
    bool ok = same == 2;
    printf("%s %d - column sums, %s, %s order: N %d, C %d from element %d (LayerNorm %s), "
           "bias rows %lld apart (%s): dw, db, dbias of the packed and unpacked kernels "
           "bit-identical to the CPU's sums (%d of 2 kernels agree)\n",
           ok ? "ok" : "not ok", ++n_tests, DT == OPS_F32 ? "fp32" : DT == OPS_BF16 ? "bf16" : "fp16",
           order == EMU_FORWARD ? "forward" : "backward", N, C, shift,
           ln_packs ? "16-byte packs" : "elements", (long long)ld,
           bias_packs ? "16-byte packs" : "elements", same);
    return ok;
}

static bool check_all_colsums()
{
    bool ok = true;
    ok &= check_colsums<OPS_BF16>(9, 24, 0, 0, EMU_FORWARD);   /* one chunk: the CPU's bits */
    ok &= check_colsums<OPS_F32>(37, 100, 0, 0, EMU_BACKWARD); /* packs in fp32 only */
    ok &= check_colsums<OPS_BF16>(37, 100, 0, 0, EMU_FORWARD); /* C % 8 != 0: elements */
    ok &= check_colsums<OPS_F16>(70, 96, 1, 0, EMU_BACKWARD);  /* unaligned: elements */
    ok &= check_colsums<OPS_BF16>(70, 96, 0, 1, EMU_FORWARD);  /* bias rows 97 apart */
    ok &= check_colsums<OPS_BF16>(300, 1040, 0, 8, EMU_BACKWARD); /* 10 chunks, 130 packs */
    return ok;
}

/* argv[1]: "mutant" runs the cross-entropy's cases quietly and exits 1 if
 * any failed (the build without its barrier); otherwise the exit status
 * of that mutant, which must have failed. */
int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "mutant") == 0)
        return check_all(true) ? 0 : 1;
    int mutant_rc = argc > 1 ? atoi(argv[1]) : -1;
    printf("1..22\n");
    bool ok = check_all(false);
    ok &= check_embeddings();
    ok &= check_all_colsums();
    bool caught = mutant_rc == 1;
    printf("%s %d - without row_dlogits_narrow's barrier the same cases fail (the mutant's "
           "exit status %d, 1 expected)\n", caught ? "ok" : "not ok", ++n_tests, mutant_rc);
    return ok && caught ? 0 : 1;
}
