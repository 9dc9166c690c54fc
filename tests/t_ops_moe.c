/*
 * t_ops_moe.c - the mixture-of-experts ops of issue 38 on the CPU: every
 * backward against central finite differences of its forward (the
 * router's softmax-top-k in both orders (renormalised and raw), the load-balancing and z losses,
 * the combine's weights and rows, the grouped GEMM's inputs and weights),
 * the permutation's order and round trip, routing under ties and thread
 * counts, the capacity's drops, the grouped GEMM bit for bit against one
 * ops_matmul per expert, and the dispatcher's refusals.
 */
#include "kernels/ops.h"

#include <math.h>
#include <omp.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/tap.h"

enum { N = 6, E = 4, K = 2, C = 5, OUT = 3 };

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static float uniform(float lo, float hi)
{
    return tap_uniform(&rng_state, lo, hi);
}

static ops_tensor f32(int64_t n)
{
    return ops_alloc(OPS_F32, OPS_CPU, n);
}

static ops_tensor i32(int64_t n)
{
    return ops_alloc(OPS_I32, OPS_CPU, n);
}

static float *fp(ops_tensor t)
{
    return (float *)t.data;
}

static int32_t *ip(ops_tensor t)
{
    return (int32_t *)t.data;
}

static void fill(ops_tensor t, float lo, float hi)
{
    for (int64_t i = 0; i < t.n; i++)
        fp(t)[i] = uniform(lo, hi);
}

static double dot(const float *a, const float *b, int64_t n)
{
    double s = 0.0;
    for (int64_t i = 0; i < n; i++)
        s += (double)a[i] * b[i];
    return s;
}

/* ---- finite differences ------------------------------------------------ */

typedef double (*loss_fn)(void *ctx);

/* Whether grad matches the central difference of loss over each element
 * of x, within 5e-4 + 2e-3 |grad|: fp32 forwards with h = 1e-2 (a 1% error
 * in a gradient fails). */
static int fd_matches(const char *what, float *x, int64_t n, const float *grad,
                      loss_fn loss, void *ctx)
{
    const float h = 1e-2f;
    double worst = 0.0;
    for (int64_t i = 0; i < n; i++) {
        float x0 = x[i];
        x[i] = x0 + h;
        double lp = loss(ctx);
        float up = x[i];
        x[i] = x0 - h;
        double lm = loss(ctx);
        float down = x[i];
        x[i] = x0;
        double num = (lp - lm) / ((double)up - down);
        double err = fabs(num - grad[i]) / (5e-4 + 2e-3 * fabs(grad[i]));
        if (err > worst)
            worst = err;
        if (err > 1.0)
            tap_diag("%s[%lld]: analytic %g, numeric %g", what, (long long)i,
                     (double)grad[i], num);
    }
    return worst <= 1.0;
}

/* ---- router ------------------------------------------------------------ */

typedef struct {
    ops_tensor logits, ids, weights, probs, gw, frac0;
    ops_moe_order order;
    float coeff;
} router_ctx;

/* Logits whose gaps (>= 0.1) outlast a perturbation of 1e-2, so the
 * chosen experts stay put under finite differences. */
static void spread_logits(ops_tensor logits)
{
    for (int t = 0; t < N; t++) {
        int start = (int)uniform(0.0f, (float)E);
        for (int e = 0; e < E; e++)
            fp(logits)[t * E + (start + e) % E] = 0.5f * e + uniform(-0.2f, 0.2f) + 0.1f * t;
    }
}

static double router_loss(void *p)
{
    router_ctx *c = p;
    ops_moe_router_fwd(c->ids, c->weights, c->probs, c->logits, N, E, K, c->order);
    return dot(fp(c->weights), fp(c->gw), N * K);
}

static void test_router_grad(ops_moe_order order, const char *name)
{
    router_ctx c = { f32(N * E), i32(N * K), f32(N * K), f32(N * E), f32(N * K),
                     OPS_NONE, order, 0.0f };
    spread_logits(c.logits);
    fill(c.gw, -1.0f, 1.0f);
    ops_tensor dlogits = f32(N * E);
    router_loss(&c);
    int ok = 1;
    for (int t = 0; t < N; t++) {
        /* renormalised: the weights sum to 1; raw: each is its expert's
         * probability, so they sum to less than 1 */
        double s = 0.0;
        for (int j = 0; j < K; j++) {
            float pj = fp(c.probs)[t * E + ip(c.ids)[t * K + j]];
            s += fp(c.weights)[t * K + j];
            ok = ok && (order == OPS_MOE_SOFTMAX_TOPK || fp(c.weights)[t * K + j] == pj);
        }
        ok = ok && (order == OPS_MOE_SOFTMAX_TOPK ? fabs(s - 1.0) < 1e-6 : s < 1.0 - 1e-3) &&
             fp(c.logits)[t * E + ip(c.ids)[t * K]] > fp(c.logits)[t * E + ip(c.ids)[t * K + 1]];
    }
    ops_moe_router_bwd(dlogits, c.gw, c.ids, c.weights, c.probs, N, E, K, order);
    ok = fd_matches(name, fp(c.logits), N * E, fp(dlogits), router_loss, &c) && ok;
    tap_ok(ok, "router %s: weights as the order says, experts in decreasing order, "
           "backward matches finite differences", name);
    ops_free(&c.logits), ops_free(&c.ids), ops_free(&c.weights), ops_free(&c.probs);
    ops_free(&c.gw), ops_free(&dlogits);
}

/* The aux loss with this run's frac held fixed, as its gradient holds it. */
static double aux_loss(void *p)
{
    router_ctx *c = p;
    ops_tensor loss = f32(1), frac = f32(E), mean_prob = f32(E);
    ops_moe_router_fwd(c->ids, c->weights, c->probs, c->logits, N, E, K, c->order);
    ops_moe_aux_fwd(loss, frac, mean_prob, c->probs, c->ids, N, E, K);
    double l = c->coeff * E * dot(fp(c->frac0), fp(mean_prob), E);
    ops_free(&loss), ops_free(&frac), ops_free(&mean_prob);
    return l;
}

static void test_aux_loss(void)
{
    router_ctx c = { f32(N * E), i32(N * K), f32(N * K), f32(N * E), OPS_NONE, f32(E),
                     OPS_MOE_SOFTMAX_TOPK, 0.7f };
    spread_logits(c.logits);
    ops_tensor loss = f32(1), mean_prob = f32(E), dlogits = f32(N * E);
    ops_moe_router_fwd(c.ids, c.weights, c.probs, c.logits, N, E, K, c.order);
    ops_moe_aux_fwd(loss, c.frac0, mean_prob, c.probs, c.ids, N, E, K);
    /* frac by hand: the share of the N*K pairs per expert */
    int count[E] = { 0 };
    for (int p = 0; p < N * K; p++)
        count[ip(c.ids)[p]]++;
    int ok = 1;
    double want = 0.0, psum = 0.0;
    for (int e = 0; e < E; e++) {
        ok = ok && fp(c.frac0)[e] == (float)count[e] / (N * K);
        want += (double)count[e] / (N * K) * fp(mean_prob)[e];
        psum += fp(mean_prob)[e];
    }
    ok = ok && fabs(fp(loss)[0] - E * want) < 1e-6 && fabs(psum - 1.0) < 1e-6;
    ops_moe_aux_bwd(dlogits, c.probs, c.frac0, N, E, c.coeff);
    ok = fd_matches("aux", fp(c.logits), N * E, fp(dlogits), aux_loss, &c) && ok;
    tap_ok(ok, "load-balancing loss: frac and mean_prob as defined, gradient matches "
           "finite differences");
    ops_free(&c.logits), ops_free(&c.ids), ops_free(&c.weights), ops_free(&c.probs);
    ops_free(&c.frac0), ops_free(&loss), ops_free(&mean_prob), ops_free(&dlogits);
}

static double z_loss(void *p)
{
    router_ctx *c = p;
    ops_tensor loss = f32(1), lse = f32(N);
    ops_moe_zloss_fwd(loss, lse, c->logits, N, E);
    double l = c->coeff * fp(loss)[0];
    ops_free(&loss), ops_free(&lse);
    return l;
}

static void test_z_loss(void)
{
    router_ctx c = { f32(N * E), OPS_NONE, OPS_NONE, OPS_NONE, OPS_NONE, OPS_NONE,
                     OPS_MOE_SOFTMAX_TOPK, 1.3f };
    fill(c.logits, -2.0f, 3.0f);
    ops_tensor loss = f32(1), lse = f32(N), dlogits = f32(N * E);
    ops_moe_zloss_fwd(loss, lse, c.logits, N, E);
    double want = 0.0;
    for (int t = 0; t < N; t++) {
        double s = 0.0;
        for (int e = 0; e < E; e++)
            s += exp(fp(c.logits)[t * E + e]);
        want += log(s) * log(s) / N;
    }
    int ok = fabs(fp(loss)[0] - want) < 1e-5 * want;
    ops_moe_zloss_bwd(dlogits, c.logits, lse, N, E, c.coeff);
    ok = fd_matches("zloss", fp(c.logits), N * E, fp(dlogits), z_loss, &c) && ok;
    tap_ok(ok, "router z-loss: the mean of logsumexp^2, gradient matches finite "
           "differences");
    ops_free(&c.logits), ops_free(&loss), ops_free(&lse), ops_free(&dlogits);
}

/* ---- permutation ------------------------------------------------------- */

typedef struct {
    ops_tensor order, row_of, offsets, dropped;
} perm;

static perm permute(ops_tensor ids, int capacity)
{
    perm p = { i32(N * K), i32(N * K), i32(E + 1), i32(1) };
    ops_moe_permute(p.order, p.row_of, p.offsets, p.dropped, ids, N, E, K, capacity);
    return p;
}

static void perm_free(perm *p)
{
    ops_free(&p->order), ops_free(&p->row_of), ops_free(&p->offsets), ops_free(&p->dropped);
}

/* Random ids, distinct per token. */
static ops_tensor random_ids(void)
{
    ops_tensor ids = i32(N * K);
    for (int t = 0; t < N; t++) {
        ip(ids)[t * K] = (int)uniform(0.0f, (float)E) % E;
        ip(ids)[t * K + 1] = (ip(ids)[t * K] + 1 + (int)uniform(0.0f, (float)(E - 1))) % E;
    }
    return ids;
}

static void test_permute_order(void)
{
    ops_tensor ids = random_ids();
    perm p = permute(ids, 0);
    int ok = ip(p.dropped)[0] == 0 && ip(p.offsets)[0] == 0 && ip(p.offsets)[E] == N * K;
    for (int r = 0; r < N * K && ok; r++) {
        int pair = ip(p.order)[r];
        ok = ip(p.row_of)[pair] == r && ip(ids)[pair] >= 0 &&
             r >= ip(p.offsets)[ip(ids)[pair]] && r < ip(p.offsets)[ip(ids)[pair] + 1];
        /* by expert, then token, then slot: pair indices rise within an expert */
        if (r > 0 && ip(ids)[ip(p.order)[r - 1]] == ip(ids)[pair])
            ok = ok && ip(p.order)[r - 1] < pair;
        if (r > 0)
            ok = ok && ip(ids)[ip(p.order)[r - 1]] <= ip(ids)[pair];
    }
    tap_ok(ok, "permute: rows sorted by expert, then token, then slot; offsets and "
           "row_of agree");
    perm_free(&p);
    ops_free(&ids);
}

static void test_round_trip(void)
{
    ops_tensor ids = random_ids();
    perm p = permute(ids, 0);
    ops_tensor x = f32(N * C), xs = f32(N * K * C), out = f32(N * C), ones = f32(N * K);
    ops_tensor back = f32(N * C);
    fill(x, -1.0f, 1.0f);
    for (int i = 0; i < N * K; i++)
        fp(ones)[i] = 1.0f;
    ops_moe_gather(xs, x, p.order, N * K, C, K);
    ops_moe_combine_fwd(out, xs, ones, p.row_of, N, C, K);
    ops_moe_gather_bwd(back, xs, p.row_of, N, C, K);
    int ok = 1;
    for (int i = 0; i < N * C; i++)
        ok = ok && fp(out)[i] == K * fp(x)[i] && fp(back)[i] == K * fp(x)[i];
    /* gather_bwd is gather's adjoint: <gather(x), g> = <x, gather_bwd(g)> */
    ops_tensor g = f32(N * K * C);
    fill(g, -1.0f, 1.0f);
    ops_moe_gather_bwd(back, g, p.row_of, N, C, K);
    ok = ok && fabs(dot(fp(xs), fp(g), N * K * C) - dot(fp(x), fp(back), N * C)) < 1e-5;
    tap_ok(ok, "gather then combine with weight 1 (and gather_bwd) give k x the input; "
           "gather_bwd is gather's adjoint");
    perm_free(&p);
    ops_free(&ids), ops_free(&x), ops_free(&xs), ops_free(&out), ops_free(&ones);
    ops_free(&back), ops_free(&g);
}

static void test_capacity(void)
{
    /* experts chosen: 0 by every token (slot 0), 1 + t % 3 in slot 1 */
    ops_tensor ids = i32(N * K);
    for (int t = 0; t < N; t++)
        ip(ids)[t * K] = 0, ip(ids)[t * K + 1] = 1 + t % 3;
    perm p = permute(ids, 2);
    /* expert 0: 6 pairs, 4 dropped; experts 1..3: 2 each, none dropped */
    int ok = ip(p.dropped)[0] == 4 && ip(p.offsets)[E] == 8;
    for (int t = 0; t < N; t++)
        ok = ok && (ip(p.row_of)[t * K] >= 0) == (t < 2) && ip(p.row_of)[t * K + 1] >= 0;
    for (int r = 8; r < N * K; r++)
        ok = ok && ip(p.order)[r] == -1;
    /* the combine skips a dropped pair: token 5 keeps its slot-1 row only */
    ops_tensor ys = f32(N * K * C), w = f32(N * K), out = f32(N * C);
    fill(ys, -1.0f, 1.0f);
    fill(w, 0.1f, 1.0f);
    ops_moe_combine_fwd(out, ys, w, p.row_of, N, C, K);
    int r5 = ip(p.row_of)[5 * K + 1];
    for (int c = 0; c < C; c++)
        ok = ok && fp(out)[5 * C + c] == fp(w)[5 * K + 1] * fp(ys)[r5 * C + c];
    tap_ok(ok, "capacity 2: 4 pairs past expert 0's capacity dropped and counted, the "
           "first tokens kept, dropped pairs left out of the combine");
    perm_free(&p);
    ops_free(&ids), ops_free(&ys), ops_free(&w), ops_free(&out);
}

static void test_ties(void)
{
    /* every token's logits tie in pairs: experts 1 and 3 high, 0 and 2 low */
    ops_tensor logits = f32(N * E), ids = i32(N * K), w = f32(N * K), probs = f32(N * E);
    for (int t = 0; t < N; t++)
        for (int e = 0; e < E; e++)
            fp(logits)[t * E + e] = e % 2 ? 1.0f : -1.0f;
    int ok = 1;
    for (int order = 0; order < 2; order++) {
        ops_moe_router_fwd(ids, w, probs, logits, N, E, K, (ops_moe_order)order);
        /* renormalised: a half each; raw: each its (equal) probability */
        for (int t = 0; t < N; t++) {
            float want = order == OPS_MOE_SOFTMAX_TOPK ? 0.5f : fp(probs)[t * E + 1];
            ok = ok && ip(ids)[t * K] == 1 && ip(ids)[t * K + 1] == 3 &&
                 fp(w)[t * K] == want && fp(w)[t * K + 1] == want;
        }
    }
    /* and the same bits on 1 thread and on 3 */
    ops_tensor big = f32(97 * E), ids1 = i32(97 * K), ids3 = i32(97 * K);
    ops_tensor w1 = f32(97 * K), w3 = f32(97 * K), p1 = f32(97 * E), p3 = f32(97 * E);
    for (int64_t i = 0; i < big.n; i++)
        fp(big)[i] = (float)(int)uniform(0.0f, 3.0f); /* many ties */
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    ops_moe_router_fwd(ids1, w1, p1, big, 97, E, K, OPS_MOE_SOFTMAX_TOPK);
    omp_set_num_threads(3);
    ops_moe_router_fwd(ids3, w3, p3, big, 97, E, K, OPS_MOE_SOFTMAX_TOPK);
    omp_set_num_threads(threads);
    ok = ok && memcmp(ids1.data, ids3.data, 97 * K * 4) == 0 &&
         memcmp(w1.data, w3.data, 97 * K * 4) == 0;
    for (int t = 0; t < 97; t++) /* a tie between the chosen goes to the lower */
        ok = ok && (fp(big)[t * E + ip(ids1)[t * K]] > fp(big)[t * E + ip(ids1)[t * K + 1]] ||
                    ip(ids1)[t * K] < ip(ids1)[t * K + 1]);
    tap_ok(ok, "ties go to the lower expert index in both orders, the same on 1 and 3 "
           "threads");
    ops_free(&logits), ops_free(&ids), ops_free(&w), ops_free(&probs), ops_free(&big);
    ops_free(&ids1), ops_free(&ids3), ops_free(&w1), ops_free(&w3), ops_free(&p1);
    ops_free(&p3);
}

/* ---- combine ----------------------------------------------------------- */

typedef struct {
    ops_tensor ys, w, row_of, out, g;
} combine_ctx;

static double combine_loss(void *p)
{
    combine_ctx *c = p;
    ops_moe_combine_fwd(c->out, c->ys, c->w, c->row_of, N, C, K);
    return dot(fp(c->out), fp(c->g), N * C);
}

static void test_combine_grad(void)
{
    ops_tensor ids = random_ids();
    perm p = permute(ids, 0);
    combine_ctx c = { f32(N * K * C), f32(N * K), p.row_of, f32(N * C), f32(N * C) };
    fill(c.ys, -1.0f, 1.0f);
    fill(c.w, 0.0f, 1.0f);
    fill(c.g, -1.0f, 1.0f);
    ops_tensor dys = f32(N * K * C), dw = f32(N * K);
    ops_moe_combine_bwd(dys, dw, c.g, c.ys, c.w, p.row_of, N, C, K);
    int ok = fd_matches("dweights", fp(c.w), N * K, fp(dw), combine_loss, &c);
    ok = fd_matches("dys", fp(c.ys), N * K * C, fp(dys), combine_loss, &c) && ok;
    tap_ok(ok, "combine backward: the weights' and the rows' gradients match finite "
           "differences");
    perm_free(&p);
    ops_free(&ids), ops_free(&c.ys), ops_free(&c.w), ops_free(&c.out), ops_free(&c.g);
    ops_free(&dys), ops_free(&dw);
}

/* ---- grouped GEMM ------------------------------------------------------ */

/* Expert row counts 5, 0, 4, 3: an empty expert included. */
static const int32_t offsets[E + 1] = { 0, 5, 5, 9, 12 };
enum { R = 12 };

typedef struct {
    ops_tensor x, w, y, g;
} gemm_ctx;

/* E views of one (E, n, k) tensor: the per-expert arrays the ops take. */
static void expert_views(ops_tensor *out, ops_tensor all, int64_t nk)
{
    for (int e = 0; e < E; e++)
        out[e] = ops_view(all, e * nk, nk);
}

static double gemm_loss(void *p)
{
    gemm_ctx *c = p;
    ops_tensor we[E];
    expert_views(we, c->w, OUT * C);
    ops_moe_grouped_matmul_fwd(c->y, c->x, we, offsets, E, OUT, C);
    return dot(fp(c->y), fp(c->g), R * OUT);
}

static void test_grouped_grad(void)
{
    gemm_ctx c = { f32(R * C), f32(E * OUT * C), f32(R * OUT), f32(R * OUT) };
    fill(c.x, -1.0f, 1.0f);
    fill(c.w, -1.0f, 1.0f);
    fill(c.g, -1.0f, 1.0f);
    ops_tensor dx = f32(R * C), dw = f32(E * OUT * C), we[E], dwe[E];
    expert_views(we, c.w, OUT * C);
    expert_views(dwe, dw, OUT * C);
    gemm_loss(&c);
    ops_moe_grouped_matmul_bwd(dx, dwe, c.g, c.x, we, offsets, E, OUT, C);
    int ok = fd_matches("dx", fp(c.x), R * C, fp(dx), gemm_loss, &c);
    ok = fd_matches("dw", fp(c.w), E * OUT * C, fp(dw), gemm_loss, &c) && ok;
    for (int i = OUT * C; i < 2 * OUT * C; i++) /* the empty expert's gradient */
        ok = ok && fp(dw)[i] == 0.0f;
    tap_ok(ok, "grouped GEMM backward: dx and dw match finite differences; an expert "
           "without rows gets none");
    ops_free(&c.x), ops_free(&c.w), ops_free(&c.y), ops_free(&c.g), ops_free(&dx);
    ops_free(&dw);
}

static void test_grouped_bitwise(void)
{
    enum { BK = 70, BN = 40 }; /* big enough for the GEMM library's blocking */
    ops_tensor x = f32(R * BK), w = f32(E * BN * BK), y = f32(R * BN), dy = f32(R * BN);
    ops_tensor dx = f32(R * BK), dw = f32(E * BN * BK);
    fill(x, -1.0f, 1.0f), fill(w, -1.0f, 1.0f), fill(dy, -1.0f, 1.0f), fill(dw, -1.0f, 1.0f);
    ops_tensor dw_ref = f32(E * BN * BK);
    memcpy(dw_ref.data, dw.data, dw.n * 4); /* dw accumulates onto what is there */
    ops_tensor wv[E], dwv[E];
    expert_views(wv, w, BN * BK);
    expert_views(dwv, dw, BN * BK);
    ops_moe_grouped_matmul_fwd(y, x, wv, offsets, E, BN, BK);
    ops_moe_grouped_matmul_bwd(dx, dwv, dy, x, wv, offsets, E, BN, BK);
    int ok = 1;
    for (int e = 0; e < E; e++) {
        int rows = offsets[e + 1] - offsets[e];
        if (rows == 0)
            continue;
        /* separate tensors, so the comparison does not share a pointer */
        ops_tensor xe = f32(rows * BK), we = f32(BN * BK), ye = f32(rows * BN);
        ops_tensor dye = f32(rows * BN), dxe = f32(rows * BK);
        memcpy(xe.data, fp(x) + offsets[e] * BK, rows * BK * 4);
        memcpy(we.data, fp(w) + e * BN * BK, BN * BK * 4);
        memcpy(dye.data, fp(dy) + offsets[e] * BN, rows * BN * 4);
        ops_matmul_fwd(ye, xe, we, OPS_NONE, rows, BN, BK);
        ops_matmul_bwd(dxe, ops_view(dw_ref, e * BN * BK, BN * BK), OPS_NONE, dye, xe, we,
                       rows, BN, BK);
        ok = ok && memcmp(ye.data, fp(y) + offsets[e] * BN, rows * BN * 4) == 0 &&
             memcmp(dxe.data, fp(dx) + offsets[e] * BK, rows * BK * 4) == 0;
        ops_free(&xe), ops_free(&we), ops_free(&ye), ops_free(&dye), ops_free(&dxe);
    }
    ok = ok && memcmp(dw.data, dw_ref.data, dw.n * 4) == 0;
    tap_ok(ok, "grouped GEMM: forward, dx and dw (accumulated) bit for bit those of one "
           "ops_matmul per expert");
    ops_free(&x), ops_free(&w), ops_free(&y), ops_free(&dy), ops_free(&dx), ops_free(&dw);
    ops_free(&dw_ref);
}

/* ---- refusals ---------------------------------------------------------- */

static jmp_buf fatal_jump;
static char fatal_msg[512];

static void catch_fatal(const char *what, const char *file, int line)
{
    (void)file;
    (void)line;
    snprintf(fatal_msg, sizeof fatal_msg, "%s", what);
    longjmp(fatal_jump, 1);
}

static void test_errors(void)
{
    ops_tensor logits = f32(N * E), ids = i32(N * K), w = f32(N * K), probs = f32(N * E);
    ops_tensor wrong_ids = f32(N * K);
    int32_t bad_offsets[E + 1] = { 0, 5, 3, 9, 12 };
    ops_tensor x = f32(R * C), ww = f32(E * OUT * C), y = f32(R * OUT), wv[E];
    expert_views(wv, ww, OUT * C);
    wv[3] = f32(OUT * C - 1); /* one expert's weight too small */
    const char *want[] = { "ops_moe_router_fwd: k = 5 experts per token must be in [1, E = 4]",
                           "ops_moe_router_fwd: ids is fp32 but must be int32",
                           "ops_moe_grouped_matmul_fwd: offsets[2] = 3 is below offsets[1] = 5",
                           "ops_moe_permute: capacity = -1 must be >= 0",
                           "ops_moe_grouped_matmul_fwd: w[3] holds 14 elements but the "
                           "shapes need 15" };
    int ok = 1;
    ops_set_fatal_handler(catch_fatal);
    for (int i = 0; i < 5; i++) {
        fatal_msg[0] = '\0';
        if (setjmp(fatal_jump) == 0) {
            if (i == 0)
                ops_moe_router_fwd(ids, w, probs, logits, N, E, 5, OPS_MOE_SOFTMAX_TOPK);
            else if (i == 1)
                ops_moe_router_fwd(wrong_ids, w, probs, logits, N, E, K, OPS_MOE_SOFTMAX_TOPK);
            else if (i == 2)
                ops_moe_grouped_matmul_fwd(y, x, wv, bad_offsets, E, OUT, C);
            else if (i == 3)
                ops_moe_permute(ids, ids, ids, ids, ids, N, E, K, -1);
            else
                ops_moe_grouped_matmul_fwd(y, x, wv, offsets, E, OUT, C);
        }
        if (!strstr(fatal_msg, want[i])) {
            tap_diag("want \"%s\", got \"%s\"", want[i], fatal_msg);
            ok = 0;
        }
    }
    ops_set_fatal_handler(NULL);
    tap_ok(ok, "bad MoE calls reach the fatal handler naming the op and the argument");
    ops_free(&logits), ops_free(&ids), ops_free(&w), ops_free(&probs), ops_free(&wrong_ids);
    ops_free(&x), ops_free(&ww), ops_free(&y), ops_free(&wv[3]);
}

int main(int argc, char **argv)
{
    tap_init(&argc, &argv);
    tap_plan(12);
    test_router_grad(OPS_MOE_SOFTMAX_TOPK, "softmax-then-top-k");
    test_router_grad(OPS_MOE_SOFTMAX_TOPK_RAW, "softmax-then-top-k-raw");
    test_aux_loss();
    test_z_loss();
    test_permute_order();
    test_round_trip();
    test_capacity();
    test_ties();
    test_combine_grad();
    test_grouped_grad();
    test_grouped_bitwise();
    test_errors();
    return tap_done();
}
