/*
 * t_moe_emu.cpp - the mixture-of-experts CUDA kernels (kernels/cuda/
 * moe_cuda.cu, issue 38) run on the host under tests/cuda_emu (each CUDA
 * thread a fiber), against their CPU twins (kernels/cpu/moe_cpu.c) called
 * directly on the same inputs: the router's top-k forward and backward in
 * both orders, the load-balancing and z losses, the permutation with and
 * without a capacity, gather, combine and their backward passes, the
 * shared expert's sigmoid gate.
 *
 * Everything is compared bit for bit. Both sides here are the host's
 * arithmetic (the same expf, no fused multiply-adds), so a difference is
 * an index, a bound, an order of summation or a formula that parts from
 * the CPU's. On a GPU, CUDA's expf and nvcc's contracted a*b + c move the
 * fp32 results (softmax, the losses, the gradients, the combine's sums)
 * by ulps, and tests/t_ops_cuda's MoE cases allow for that; the expert
 * ids, the permutation, gather and the gather's backward (copies and
 * adds only) stay bit for bit there too.
 *
 * The grid-stride kernels run in four launches each: the turn order
 * forward and backward (cuda_emu/fibers.h; the blocks last to first in
 * the backward one), and with every block the n elements need and with
 * 2 blocks (each thread then strides over several elements, as at real
 * sizes when grid_for caps the grid). Blocks are 128 threads (the GPU
 * launches TRI_THREADS = 256; the kernels read blockDim.x). The
 * single-thread kernels (the permutation, the losses' final sums) run
 * once, as the <<<1, 1>>> launch runs them. The host functions run too
 * (LAUNCH on grid_for's grid; t_moe_emu.sh rewrites <<< >>>, which no
 * host compiler takes, as a call; moe_permute_cuda under both values of
 * TRIDENT_FUSED), so their arguments are checked on their way to the
 * kernels. No kernel of
 * moe_cuda.cu uses atomics or shared memory; the block permutation's
 * threads meet through the offsets in global memory at its two barriers
 * (both turn orders, and a build without them that must fail), the other
 * kernels' threads only write distinct elements. What the emulation
 * cannot show is the hardware: its arithmetic (above) and its memory
 * ordering, which __syncthreads orders for global memory within a block.
 *
 * Cases: E = 4, 8 and 64 with k = 1, 2 and 8 (Mixtral's 8 and 2,
 * Qwen-MoE's 64 and 8 at N = 8192 tokens); logits drawn at random, with
 * ties (three levels, and whole rows equal: the lower expert wins, as the
 * determinism promise says), all tokens to one expert, half the experts
 * receiving no token; capacities that drop pairs; N not a multiple of the
 * block; more experts than the block has threads; fp32, bf16 and fp16
 * rows. The permutation runs in both its kernels: the one-thread sort and
 * the block with a thread per expert, whose threads meet at two barriers
 * (in both turn orders). t_moe_emu.sh builds the kernels twice more, with
 * an off-by-one in the capacity bound and without the block's barriers,
 * and passes those builds' exit statuses here: the last checks are that
 * they failed.
 */
#include "fibers.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

EmuDim gridDim = { 1, 1 };

/* A <<<1, 1>>> launch: thread 0 of block 0, on the host thread. */
static void one_thread(const std::function<void()> &kernel)
{
    threadIdx.x = blockIdx.x = 0;
    gridDim.x = 1;
    kernel();
}

/* kernels/cuda/cuda_common.h's TRI_THREADS, grid_for and GRID_STRIDE
 * (t_moe_emu.sh copies them), and its LAUNCH on the host: grid_for's
 * blocks (of TRI_THREADS; the emulated blocks have 128 threads, so each
 * thread strides over twice as many elements), in the turn order set. */
#include "grid.inc"
#define LAUNCH(kernel, n, ...)                                  \
    do {                                                        \
        gridDim.x = grid_for((n), TRI_THREADS);                 \
        launch(gridDim.x, [&] { kernel(__VA_ARGS__); });        \
    } while (0)

/* kernel<<<grid, threads, 0, stream_cuda()>>>(args), which t_moe_emu.sh
 * rewrites as EMU_LAUNCH(grid, threads, kernel)(args): one thread on the
 * host thread, more as the emulator's blocks of 128 fibers (the kernels
 * read blockDim.x), in the turn order set. */
template <typename K> static auto emu_launch(unsigned grid, unsigned threads, K kernel)
{
    return [=](auto... args) {
        if (threads == 1) {
            one_thread([&] { kernel(args...); });
        } else {
            gridDim.x = grid;
            launch(grid, [&] { kernel(args...); });
        }
    };
}
#define EMU_LAUNCH(grid, threads, kernel) \
    emu_launch((grid), (threads), [](auto... args) { kernel(args...); })
#define TRI_CHECK_LAUNCH(kernel) ((void)0)

/* TRIDENT_FUSED as fused_cuda.cu reads it, set by the test */
static bool emu_fused = true;
static int fused_enabled_cuda()
{
    return emu_fused;
}

#include "moe_kernels.inc"

extern "C" {
#include "kernels/cpu/cpu.h"

/* moe_cpu.c's two helpers from the rest of the CPU backend */
void copy_cpu(void *dst, const void *src, size_t bytes)
{
    memcpy(dst, src, bytes);
}

size_t ops_dtype_size(ops_dtype dt)
{
    return dt == OPS_BF16 || dt == OPS_F16 ? 2 : dt == OPS_F64 ? 8 : 4;
}
}

static std::mt19937_64 rng(38); /* the same draws every run */

static float uniform(float lo, float hi)
{
    return std::uniform_real_distribution<float>(lo, hi)(rng);
}

static int n_tests;
static bool quiet; /* the mutant's run: no output, only the exit status */

/* ---- launches ------------------------------------------------------------ */

/* The four launches of a grid-stride kernel over n elements (above). */
static const int n_launches = 4;

static void launch_nth(int which, int64_t n, const std::function<void()> &kernel)
{
    int64_t blocks = (n + EMU_THREADS - 1) / EMU_THREADS;
    if (which % 2 && blocks > 2)
        blocks = 2;
    emu_order = which < 2 ? EMU_FORWARD : EMU_BACKWARD;
    gridDim.x = (unsigned)(blocks > 0 ? blocks : 1);
    launch(gridDim.x, kernel);
}

template <typename T> static bool same(const std::vector<T> &a, const std::vector<T> &b)
{
    return a.size() == b.size() && memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

/* Collects the names of the outputs that differ, for one TAP line. */
struct Verdict {
    std::string bad;
    void expect(bool ok, const char *what)
    {
        if (!ok && bad.find(what) == std::string::npos)
            bad += bad.empty() ? what : std::string(", ") + what;
    }
    bool report(const char *fmt, ...) __attribute__((format(printf, 2, 3)));
};

bool Verdict::report(const char *fmt, ...)
{
    bool ok = bad.empty();
    if (quiet && !ok)
        exit(1); /* a mutant's first failing case is its verdict */
    if (quiet)
        return ok;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    printf("%s %d - %s%s%s\n", ok ? "ok" : "not ok", ++n_tests, line,
           ok ? "" : ": differ from the CPU: ", bad.c_str());
    return ok;
}

/* ---- routing ------------------------------------------------------------- */

enum Logits { RANDOM, TIES, ONE_EXPERT, HALF_EMPTY };
static const char *logits_name[] = { "random logits", "tied logits (3 levels, every 5th row all "
                                     "equal)", "every token's top logit on expert E-1",
                                     "experts E/2.. never chosen" };

static std::vector<float> draw_logits(int N, int E, Logits kind)
{
    std::vector<float> z((size_t)N * E);
    for (int t = 0; t < N; t++)
        for (int e = 0; e < E; e++) {
            float v = uniform(-4.0f, 4.0f);
            if (kind == TIES)
                v = t % 5 == 4 ? 0.25f : (float)(int)uniform(0.0f, 3.0f) * 0.5f;
            else if (kind == ONE_EXPERT && e == E - 1)
                v = 20.0f;
            else if (kind == HALF_EMPTY && e >= E / 2)
                v = -30.0f;
            z[(size_t)t * E + e] = v;
        }
    return z;
}

/* The router, its backward, both losses and their backward passes, and
 * the permutation with no capacity and with `capacity`, each kernel's
 * outputs against moe_cpu.c's; each kernel takes the CPU's inputs, so a
 * difference points at the kernel that made it. */
static bool check_routing(int N, int E, int k, int order, Logits kind, int capacity)
{
    const size_t NE = (size_t)N * E, Nk = (size_t)N * k;
    std::vector<float> z = draw_logits(N, E, kind);
    std::vector<int32_t> ids(Nk);
    std::vector<float> w(Nk), probs(NE);
    moe_router_fwd_cpu(ids.data(), w.data(), probs.data(), z.data(), N, E, k, order);
    std::vector<float> dw(Nk), dz0(NE), frac(E), mean(E), loss(1), lse(N), zl(1);
    for (float &v : dw)
        v = uniform(-1.0f, 1.0f);
    for (float &v : dz0)
        v = uniform(-0.1f, 0.1f);
    std::vector<float> dz_router = dz0, dz_aux = dz0, dz_z = dz0;
    moe_router_bwd_cpu(dz_router.data(), dw.data(), ids.data(), w.data(), probs.data(), N, E,
                       k, order);
    moe_aux_fwd_cpu(loss.data(), frac.data(), mean.data(), probs.data(), ids.data(), N, E, k);
    moe_aux_bwd_cpu(dz_aux.data(), probs.data(), frac.data(), N, E, 0.01f);
    moe_zloss_fwd_cpu(zl.data(), lse.data(), z.data(), N, E);
    moe_zloss_bwd_cpu(dz_z.data(), z.data(), lse.data(), N, E, 0.001f);
    std::vector<int32_t> perm[2][4]; /* capacity 0 and capacity: order, row_of, offsets, dropped */
    for (int c = 0; c < 2; c++) {
        perm[c][0].assign(Nk, 0x7f7f7f7f);
        perm[c][1].assign(Nk, 0x7f7f7f7f);
        perm[c][2].assign((size_t)E + 1, 0x7f7f7f7f);
        perm[c][3].assign(1, 0x7f7f7f7f);
        moe_permute_cpu(perm[c][0].data(), perm[c][1].data(), perm[c][2].data(),
                        perm[c][3].data(), ids.data(), N, E, k, c ? capacity : 0);
    }

    Verdict v;
    for (int l = 0; l < n_launches; l++) {
        std::vector<int32_t> g_ids(Nk, -7);
        std::vector<float> g_w(Nk, -7.0f), g_probs(NE, -7.0f);
        launch_nth(l, N, [&] {
            router_fwd_kernel(g_ids.data(), g_w.data(), g_probs.data(), z.data(), N, E, k, order);
        });
        v.expect(same(g_ids, ids), "ids");
        v.expect(same(g_w, w), "weights");
        v.expect(same(g_probs, probs), "probs");
        std::vector<float> g_dz = dz0;
        launch_nth(l, N, [&] {
            router_bwd_kernel(g_dz.data(), dw.data(), ids.data(), w.data(), probs.data(), N, E,
                              k, order);
        });
        v.expect(same(g_dz, dz_router), "router_bwd's dlogits");
        std::vector<float> g_frac(E, -7.0f), g_mean(E, -7.0f), g_loss(1, -7.0f);
        launch_nth(l, E, [&] {
            aux_stats_kernel(g_frac.data(), g_mean.data(), probs.data(), ids.data(), N, E, k);
        });
        one_thread([&] { aux_loss_kernel(g_loss.data(), g_frac.data(), g_mean.data(), E); });
        v.expect(same(g_frac, frac) && same(g_mean, mean), "aux frac, mean_prob");
        v.expect(same(g_loss, loss), "aux loss");
        g_dz = dz0;
        launch_nth(l, N, [&] {
            aux_bwd_kernel(g_dz.data(), probs.data(), frac.data(), N, E, 0.01f);
        });
        v.expect(same(g_dz, dz_aux), "aux_bwd's dlogits");
        std::vector<float> g_lse(N, -7.0f), g_zl(1, -7.0f);
        launch_nth(l, N, [&] { zloss_lse_kernel(g_lse.data(), z.data(), N, E); });
        one_thread([&] { zloss_mean_kernel(g_zl.data(), g_lse.data(), N); });
        v.expect(same(g_lse, lse) && same(g_zl, zl), "z-loss lse, loss");
        g_dz = dz0;
        launch_nth(l, (int64_t)NE, [&] {
            zloss_bwd_kernel(g_dz.data(), z.data(), lse.data(), N, E, 0.001f);
        });
        v.expect(same(g_dz, dz_z), "zloss_bwd's dlogits");
    }
    { /* the host functions: their arguments reach the kernels */
        emu_order = EMU_FORWARD;
        std::vector<int32_t> g_ids(Nk, -7);
        std::vector<float> g_w(Nk, -7.0f), g_probs(NE, -7.0f), g_dz = dz0, g_da = dz0;
        std::vector<float> g_dzz = dz0;
        moe_router_fwd_cuda(g_ids.data(), g_w.data(), g_probs.data(), z.data(), N, E, k, order);
        moe_router_bwd_cuda(g_dz.data(), dw.data(), ids.data(), w.data(), probs.data(), N, E, k,
                            order);
        moe_aux_bwd_cuda(g_da.data(), probs.data(), frac.data(), N, E, 0.01f);
        moe_zloss_bwd_cuda(g_dzz.data(), z.data(), lse.data(), N, E, 0.001f);
        v.expect(same(g_ids, ids) && same(g_w, w) && same(g_probs, probs) &&
                 same(g_dz, dz_router) && same(g_da, dz_aux) && same(g_dzz, dz_z),
                 "moe_router_fwd/bwd_cuda, moe_aux_bwd_cuda, moe_zloss_bwd_cuda");
        std::vector<float> g_frac(E, -7.0f), g_mean(E, -7.0f), g_loss(1, -7.0f);
        std::vector<float> g_lse(N, -7.0f), g_zl(1, -7.0f);
        moe_aux_fwd_cuda(g_loss.data(), g_frac.data(), g_mean.data(), probs.data(), ids.data(),
                         N, E, k);
        moe_zloss_fwd_cuda(g_zl.data(), g_lse.data(), z.data(), N, E);
        v.expect(same(g_frac, frac) && same(g_mean, mean) && same(g_loss, loss) &&
                 same(g_lse, lse) && same(g_zl, zl), "moe_aux_fwd_cuda, moe_zloss_fwd_cuda");
        /* moe_permute_cuda under TRIDENT_FUSED=1 (the block) and 0 */
        for (int fused = 0; fused < 2; fused++) {
            std::vector<int32_t> g[4];
            for (int i = 0; i < 4; i++)
                g[i].assign(perm[1][i].size(), i == 2 ? 0 : 0x7f7f7f7f);
            emu_fused = fused;
            moe_permute_cuda(g[0].data(), g[1].data(), g[2].data(), g[3].data(), ids.data(), N,
                             E, k, capacity);
            v.expect(same(g[0], perm[1][0]) && same(g[1], perm[1][1]) &&
                     same(g[2], perm[1][2]) && same(g[3], perm[1][3]), "moe_permute_cuda");
        }
        emu_fused = true;
    }
    /* the one-thread sort, then the block's in both turn orders (its
     * threads meet at the barriers around the cut); offsets start 0 */
    for (int c = 0; c < 2; c++)
        for (int kernel = 0; kernel < 3; kernel++) {
            std::vector<int32_t> g[4];
            for (int i = 0; i < 4; i++)
                g[i].assign(perm[c][i].size(), i == 2 ? 0 : 0x7f7f7f7f);
            int cap = c ? capacity : 0;
            if (kernel == 0)
                one_thread([&] {
                    permute_kernel(g[0].data(), g[1].data(), g[2].data(), g[3].data(),
                                   ids.data(), N, E, k, cap);
                });
            else {
                emu_order = kernel == 1 ? EMU_FORWARD : EMU_BACKWARD;
                gridDim.x = 1;
                launch(1, [&] {
                    permute_experts_kernel(g[0].data(), g[1].data(), g[2].data(), g[3].data(),
                                           ids.data(), N, E, k, cap);
                });
            }
            v.expect(same(g[0], perm[c][0]) && same(g[1], perm[c][1]) &&
                     same(g[2], perm[c][2]) && same(g[3], perm[c][3]),
                     kernel == 0 ? (c ? "permute_kernel (capacity)" : "permute_kernel (dropless)")
                                 : (c ? "permute_experts_kernel (capacity)"
                                      : "permute_experts_kernel (dropless)"));
        }
    int dropped = perm[1][3][0], empty = 0;
    for (int e = 0; e < E; e++)
        empty += perm[0][2][e + 1] == perm[0][2][e];
    return v.report("routing, %s, N %d, E %d, k %d, %s: router fwd/bwd, aux and z losses "
                    "fwd/bwd (4 launches each, and their host functions), permute (one thread; a block, both turn "
                    "orders) dropless and at capacity %d (%d pairs dropped; %d experts "
                    "without a token)", order ? "raw" : "renormalised",
                    N, E, k, logits_name[kind], capacity, dropped, empty);
}

/* ---- rows: gather, combine and their backward passes ---------------------- */

static const char *dtype_name(ops_dtype dt)
{
    return dt == OPS_F32 ? "fp32" : dt == OPS_BF16 ? "bf16" : "fp16";
}

static std::vector<uint8_t> draw_rows(ops_dtype dt, int64_t n)
{
    std::vector<uint8_t> b((size_t)n * ops_dtype_size(dt));
    for (int64_t i = 0; i < n; i++)
        store_f32_cuda(b.data(), dt, i, uniform(-2.0f, 2.0f));
    return b;
}

/* N tokens of C channels routed to k of E experts (random logits, one
 * expert favoured so that `capacity` drops pairs), then gather, its
 * backward, combine and its backward (with both outputs, and with each
 * alone: the absent arguments NULL as ops.h allows), four launches each. */
static bool check_rows(ops_dtype dt, int N, int C, int E, int k, int capacity)
{
    const int64_t Nk = (int64_t)N * k;
    std::vector<float> z = draw_logits(N, E, RANDOM);
    for (int t = 0; t < N; t += 2)
        z[(size_t)t * E + 1] += 3.0f; /* expert 1 popular */
    std::vector<int32_t> ids(Nk), order(Nk), row_of(Nk), offsets(E + 1), dropped(1);
    std::vector<float> w(Nk), probs((size_t)N * E);
    moe_router_fwd_cpu(ids.data(), w.data(), probs.data(), z.data(), N, E, k, 0);
    moe_permute_cpu(order.data(), row_of.data(), offsets.data(), dropped.data(), ids.data(), N,
                    E, k, capacity);
    const int R = offsets[E];
    std::vector<uint8_t> x = draw_rows(dt, (int64_t)N * C), ys = draw_rows(dt, Nk * C);
    std::vector<uint8_t> dxs = draw_rows(dt, Nk * C), dout = draw_rows(dt, (int64_t)N * C);
    std::vector<uint8_t> start = draw_rows(dt, Nk * C); /* rows a kernel must not touch */

    std::vector<uint8_t> xs = start, dx = start, out = start, dys = start;
    std::vector<float> dwts(Nk, -7.0f);
    moe_gather_cpu(xs.data(), x.data(), dt, order.data(), R, C, k);
    moe_gather_bwd_cpu(dx.data(), dxs.data(), dt, row_of.data(), N, C, k);
    moe_combine_fwd_cpu(out.data(), ys.data(), dt, w.data(), row_of.data(), N, C, k);
    moe_combine_bwd_cpu(dys.data(), dwts.data(), dout.data(), ys.data(), dt, w.data(),
                        row_of.data(), N, C, k);

    Verdict v;
    for (int l = 0; l < n_launches; l++) {
        std::vector<uint8_t> g = start;
        launch_nth(l, (int64_t)R * C, [&] {
            gather_kernel(g.data(), x.data(), dt, order.data(), (int64_t)R * C, C, k);
        });
        v.expect(g == xs, "gather");
        g = start;
        launch_nth(l, (int64_t)N * C, [&] {
            gather_bwd_kernel(g.data(), dxs.data(), dt, row_of.data(), (int64_t)N * C, C, k);
        });
        v.expect(g == dx, "gather_bwd");
        g = start;
        launch_nth(l, (int64_t)N * C, [&] {
            combine_fwd_kernel(g.data(), ys.data(), dt, w.data(), row_of.data(),
                               (int64_t)N * C, C, k);
        });
        v.expect(g == out, "combine_fwd");
        for (int outputs = 1; outputs <= 3; outputs++) { /* dys, dweights, both */
            bool with_dys = outputs & 1, with_dw = outputs & 2;
            std::vector<uint8_t> gd = start;
            std::vector<float> gw(Nk, -7.0f);
            launch_nth(l, Nk, [&] {
                combine_bwd_kernel(with_dys ? gd.data() : nullptr,
                                   with_dw ? gw.data() : nullptr, dout.data(),
                                   with_dw ? ys.data() : nullptr, dt,
                                   with_dys ? w.data() : nullptr, row_of.data(), Nk, C, k);
            });
            v.expect(with_dys ? gd == dys : gd == start, "combine_bwd's dys");
            v.expect(with_dw ? same(gw, dwts) : gw == std::vector<float>(Nk, -7.0f),
                     "combine_bwd's dweights");
        }
    }
    { /* the host functions */
        emu_order = EMU_BACKWARD;
        std::vector<uint8_t> g = start, gx = start, go = start, gd = start;
        std::vector<float> gw(Nk, -7.0f);
        moe_gather_cuda(g.data(), x.data(), dt, order.data(), R, C, k);
        moe_gather_bwd_cuda(gx.data(), dxs.data(), dt, row_of.data(), N, C, k);
        moe_combine_fwd_cuda(go.data(), ys.data(), dt, w.data(), row_of.data(), N, C, k);
        moe_combine_bwd_cuda(gd.data(), gw.data(), dout.data(), ys.data(), dt, w.data(),
                             row_of.data(), N, C, k);
        v.expect(g == xs && gx == dx && go == out && gd == dys && same(gw, dwts),
                 "moe_gather(_bwd)_cuda, moe_combine_fwd/bwd_cuda");
    }
    return v.report("rows, %s, N %d, C %d, E %d, k %d, capacity %d (%d of %lld pairs dropped): "
                    "gather, gather_bwd, combine_fwd, combine_bwd (dys, dweights, both), 4 "
                    "launches each, and their host functions", dtype_name(dt), N, C, E, k,
                    capacity, dropped[0], (long long)Nk);
}

/* The shared expert's gate and its backward. */
static bool check_sigmoid(int N)
{
    std::vector<float> logit(N), dgate(N), gate(N), dlogit(N);
    for (int t = 0; t < N; t++) {
        logit[t] = uniform(-12.0f, 12.0f);
        dgate[t] = uniform(-1.0f, 1.0f);
    }
    moe_sigmoid_fwd_cpu(gate.data(), logit.data(), N);
    moe_sigmoid_bwd_cpu(dlogit.data(), dgate.data(), gate.data(), N);
    Verdict v;
    for (int l = 0; l < n_launches; l++) {
        std::vector<float> g(N, -7.0f), gd(N, -7.0f);
        launch_nth(l, N, [&] { sigmoid_fwd_kernel(g.data(), logit.data(), N); });
        launch_nth(l, N, [&] { sigmoid_bwd_kernel(gd.data(), dgate.data(), gate.data(), N); });
        v.expect(same(g, gate), "gate");
        v.expect(same(gd, dlogit), "dlogit");
    }
    std::vector<float> g(N, -7.0f), gd(N, -7.0f);
    emu_order = EMU_FORWARD;
    moe_sigmoid_fwd_cuda(g.data(), logit.data(), N);
    moe_sigmoid_bwd_cuda(gd.data(), dgate.data(), gate.data(), N);
    v.expect(same(g, gate) && same(gd, dlogit), "moe_sigmoid_fwd/bwd_cuda");
    return v.report("sigmoid gate fwd/bwd, N %d, 4 launches each, and their host functions",
                    N);
}

/* ---- the cases ----------------------------------------------------------- */

/* Every case, each printing its line (none when quiet). */
static bool check_all()
{
    bool ok = true;
    for (int order = 0; order < 2; order++) {
        ok &= check_routing(300, 4, 1, order, RANDOM, 60);
        ok &= check_routing(300, 4, 2, order, TIES, 100);
        ok &= check_routing(300, 8, 2, order, ONE_EXPERT, 75);
        ok &= check_routing(257, 64, 2, order, HALF_EMPTY, 9);
        ok &= check_routing(300, 64, 8, order, TIES, 38);
        ok &= check_routing(300, 64, 8, order, RANDOM, 38); /* slot order is not index order */
        ok &= check_routing(257, 300, 2, order, RANDOM, 3); /* 2 or 3 experts a thread */
    }
    /* Mixtral's routing and Qwen-MoE's at 8192 tokens (capacity factor 1) */
    ok &= check_routing(8192, 8, 2, 0, RANDOM, 2048);
    ok &= check_routing(8192, 64, 8, 1, RANDOM, 1024);
    for (ops_dtype dt : { OPS_F32, OPS_BF16, OPS_F16 }) {
        ok &= check_rows(dt, 300, 70, 8, 2, 0);
        ok &= check_rows(dt, 129, 33, 4, 2, 50);
    }
    ok &= check_rows(OPS_BF16, 100, 129, 64, 8, 10);
    ok &= check_rows(OPS_F32, 200, 16, 4, 1, 30);
    ok &= check_sigmoid(1000);
    return ok;
}

/* argv[1]: "mutant" runs the cases quietly and exits 1 at the first that
 * fails (a mutant's build); otherwise argv[1] and argv[2] are the exit statuses of
 * the two mutants, which must have failed. */
int main(int argc, char **argv)
{
    quiet = argc > 1 && strcmp(argv[1], "mutant") == 0;
    if (quiet)
        return check_all() ? 0 : 1;
    int bound_rc = argc > 2 ? atoi(argv[1]) : -1, barrier_rc = argc > 2 ? atoi(argv[2]) : -1;
    printf("1..27\n");
    bool ok = check_all();
    printf("%s %d - with an off-by-one in fill_expert_rows' capacity bound the same cases fail "
           "(the mutant's exit status %d, 1 expected)\n", bound_rc == 1 ? "ok" : "not ok",
           ++n_tests, bound_rc);
    /* without its barriers permute_experts_kernel may also write out of
     * bounds: any failure counts */
    printf("%s %d - without permute_experts_kernel's barriers the same cases fail (the "
           "mutant's exit status %d, not 0)\n", barrier_rc != 0 ? "ok" : "not ok", ++n_tests,
           barrier_rc);
    return ok && bound_rc == 1 && barrier_rc != 0 ? 0 : 1;
}
