/*
 * t_offload.c - [train] offload = optimizer's host half (offload.h).
 *
 * The schedule is checked by replaying it against a model of the staging
 * buffers, which refuses any action that would read a chunk before it has
 * arrived, overwrite a buffer a copy still reads, or leave a copy
 * unfinished; and every element must be updated exactly once. Then the
 * executor, with memcpy for copies, an odd chunk size and several chunks
 * per segment, must give bitwise the master weights, moments and compute
 * copy of ops_adamw run in place, over several steps with value clipping,
 * a norm-clipping factor and weight decay, in fp32 and bf16. On a machine
 * with a GPU the same comparison runs the GPU's AdamW against the host
 * one behind offload_adamw's real copies (skipped without a GPU).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "offload.h"
#include "rng.h"
#include "tap.h"

static int n_checks;
#define CHECK(...) (n_checks++, tap_ok(__VA_ARGS__))

/* ---- the schedule -------------------------------------------------------- */

/* A staging buffer's state while the schedule is replayed. */
typedef enum { FREE, COMING, ARRIVED, WRITTEN, GOING } BufState;
typedef struct { BufState st; int seg; int64_t off; } Buf;

static int same_chunk(const Buf *b, const OffloadStep *s)
{
    return b->seg == s->seg && b->off == s->off;
}

/* Replays steps; returns the index of the first illegal one, or -1 when
 * all are legal, every element of every segment is updated once, and no
 * copy is left unfinished. *overlap: each chunk's update came after the
 * next chunk's download started. */
static int64_t replay(const OffloadStep *steps, int64_t n, const int64_t *seg_n, int n_seg,
                      int64_t chunk, int *overlap)
{
    Buf grad[OFFLOAD_SLOTS] = {{FREE, 0, 0}}, wts[OFFLOAD_SLOTS] = {{FREE, 0, 0}};
    int64_t total = 0;
    for (int i = 0; i < n_seg; i++)
        total += seg_n[i];
    int *hits = calloc((size_t)(total > 0 ? total : 1), sizeof *hits);
    int64_t downs = 0, updates = 0, bad = -1, chunks = 0;
    for (int64_t k = 0; k < n; k++)
        chunks += steps[k].act == OFFLOAD_DOWN;
    *overlap = 1;
    for (int64_t k = 0; k < n && bad < 0; k++) {
        const OffloadStep *s = &steps[k];
        Buf *g = &grad[s->slot], *w = &wts[s->slot];
        int ok = s->slot >= 0 && s->slot < OFFLOAD_SLOTS && s->seg >= 0 && s->seg < n_seg
                 && s->n >= 1 && s->n <= chunk && s->off >= 0 && s->off + s->n <= seg_n[s->seg];
        if (ok) {
            switch (s->act) {
            case OFFLOAD_DOWN:
                ok = g->st == FREE;
                *g = (Buf){COMING, s->seg, s->off};
                downs++;
                break;
            case OFFLOAD_WAIT_DOWN:
                ok = g->st == COMING && same_chunk(g, s);
                g->st = ARRIVED;
                break;
            case OFFLOAD_WAIT_UP:
                ok = w->st == GOING && same_chunk(w, s);
                w->st = FREE;
                break;
            case OFFLOAD_UPDATE:
                ok = g->st == ARRIVED && same_chunk(g, s) && w->st == FREE;
                g->st = FREE;
                *w = (Buf){WRITTEN, s->seg, s->off};
                int64_t base = 0;
                for (int i = 0; i < s->seg; i++)
                    base += seg_n[i];
                for (int64_t e = 0; e < s->n; e++)
                    hits[base + s->off + e]++;
                updates++;
                /* the next chunk, if any, must already be on its way */
                if (downs == updates && downs < chunks)
                    *overlap = 0;
                break;
            case OFFLOAD_UP:
                ok = w->st == WRITTEN && same_chunk(w, s);
                w->st = GOING;
                break;
            }
        }
        if (!ok)
            bad = k;
    }
    for (int s = 0; s < OFFLOAD_SLOTS && bad < 0; s++)
        if (grad[s].st != FREE || wts[s].st != FREE)
            bad = n;
    for (int64_t e = 0; e < total && bad < 0; e++)
        if (hits[e] != 1)
            bad = n;
    free(hits);
    return bad;
}

static void check_schedule(const char *name, const int64_t *seg_n, int n_seg, int64_t chunk,
                           int64_t chunks)
{
    int64_t n = offload_schedule(seg_n, n_seg, chunk, NULL);
    OffloadStep *steps = calloc((size_t)(n > 0 ? n : 1), sizeof *steps);
    int64_t again = offload_schedule(seg_n, n_seg, chunk, steps);
    int overlap = 0;
    int64_t bad = replay(steps, n, seg_n, n_seg, chunk, &overlap);
    CHECK(again == n && n == 5 * chunks && bad < 0 && (overlap || chunks < 2),
          "schedule %s: %lld actions for %lld chunks, first illegal %lld, overlapped %d", name,
          (long long)n, (long long)chunks, (long long)bad, overlap);
    free(steps);
}

static void test_schedule(void)
{
    int64_t mixed[] = {5, 0, 12, 3};
    check_schedule("4 segments, chunk 4", mixed, 4, 4, 6);
    check_schedule("no segments", NULL, 0, 4, 0);
    int64_t one[] = {3};
    check_schedule("one chunk", one, 1, 8, 1);
    int64_t two[] = {8};
    check_schedule("two chunks", two, 1, 4, 2);
    int64_t many[] = {1000, 1, 999};
    check_schedule("odd chunk 7, 287 chunks", many, 3, 7, 143 + 1 + 143);
    /* a broken order must be caught: the replay is what the claims above rest on */
    int64_t n = offload_schedule(mixed, 4, 4, NULL);
    OffloadStep *steps = calloc((size_t)n, sizeof *steps);
    offload_schedule(mixed, 4, 4, steps);
    OffloadStep t = steps[2]; /* chunk 0 updated before it has arrived */
    steps[2] = steps[3];
    steps[3] = t;
    int overlap;
    int64_t bad = replay(steps, n, mixed, 4, 4, &overlap);
    steps[3] = steps[2];
    steps[2] = t;
    for (int64_t k = 0; k < n; k++)
        if (steps[k].act == OFFLOAD_WAIT_UP)
            steps[k].act = OFFLOAD_WAIT_DOWN;
    int64_t bad2 = replay(steps, n, mixed, 4, 4, &overlap);
    CHECK(bad >= 0 && bad2 >= 0, "the replay refuses a swapped pair (at %lld) and a missing wait (at %lld)",
          (long long)bad, (long long)bad2);
    free(steps);
}

/* ---- AdamW through the executor ----------------------------------------- */

#define N_SEG 3
static const int64_t seg_len[N_SEG] = {37 * 5, 64 * 3, 11};
static const int seg_decays[N_SEG] = {1, 0, 1};

typedef struct {
    ops_tensor master, m, v, w;   /* the whole of each, segments back to back */
} State;

static float uniform(uint64_t key, int64_t i, float lo, float hi)
{
    return lo + (hi - lo) * (float)rng_uniform(key, (uint64_t)i);
}

static int64_t total_len(void)
{
    int64_t n = 0;
    for (int i = 0; i < N_SEG; i++)
        n += seg_len[i];
    return n;
}

static ops_tensor host_random(int64_t n, uint64_t key, float lo, float hi)
{
    ops_tensor t = ops_alloc(OPS_F32, OPS_CPU, n);
    for (int64_t i = 0; i < n; i++)
        ((float *)t.data)[i] = uniform(key, i, lo, hi);
    return t;
}

/* The state on `where` (master, m, v) with the compute copy on `wdev`,
 * all from the same random weights. */
static State state_new(ops_dtype wdt, ops_device where, ops_device wdev, int host_pinned)
{
    int64_t n = total_len();
    ops_tensor init = host_random(n, 11, -1.0f, 1.0f);
    State s;
    s.master = host_pinned ? ops_alloc_host(OPS_F32, n, wdev) : ops_alloc(OPS_F32, where, n);
    s.m = host_pinned ? ops_alloc_host(OPS_F32, n, wdev) : ops_alloc(OPS_F32, where, n);
    s.v = host_pinned ? ops_alloc_host(OPS_F32, n, wdev) : ops_alloc(OPS_F32, where, n);
    s.w = ops_alloc(wdt, wdev, n);
    ops_copy(s.master, init);
    ops_cast(s.w, init);
    ops_free(&init);
    return s;
}

static void state_free(State *s, int host_pinned, ops_device near)
{
    if (host_pinned) {
        ops_free_host(&s->master, near);
        ops_free_host(&s->m, near);
        ops_free_host(&s->v, near);
    } else {
        ops_free(&s->master);
        ops_free(&s->m);
        ops_free(&s->v);
    }
    ops_free(&s->w);
}

static ops_adamw_args step_args(int step)
{
    ops_adamw_args a = {
        .lr = 1e-2f / (float)step, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
        .grad_scale = 0.75f, /* a norm clip's factor */
        .step = step,
    };
    return a;
}

/* The trainer's update: ops_adamw segment by segment; in fp32 the master
 * is the weights (updated in place, no copy), otherwise the copy is
 * refreshed in the same sweep. */
static void reference_step(State *s, ops_tensor grad, int step)
{
    ops_adamw_args a = step_args(step);
    int64_t off = 0;
    int fp32 = s->w.dtype == OPS_F32 && s->w.device == OPS_CPU;
    for (int i = 0; i < N_SEG; i++) {
        int64_t n = seg_len[i];
        a.weight_decay = seg_decays[i] ? 0.1f : 0.0f;
        ops_tensor w = ops_view(s->w, off, n);
        ops_adamw(fp32 ? w : ops_view(s->master, off, n), ops_view(grad, off, n),
                  ops_view(s->m, off, n), ops_view(s->v, off, n), fp32 ? OPS_NONE : w, n, &a);
        off += n;
    }
}

static void offload_step(Offload *o, State *s, ops_tensor grad, int step)
{
    ops_adamw_args a = step_args(step);
    OffloadSeg seg[N_SEG];
    int64_t off = 0;
    for (int i = 0; i < N_SEG; i++) {
        int64_t n = seg_len[i];
        seg[i] = (OffloadSeg){ops_view(s->master, off, n), ops_view(s->m, off, n),
                              ops_view(s->v, off, n), ops_view(grad, off, n),
                              ops_view(s->w, off, n), seg_decays[i] ? 0.1f : 0.0f};
        off += n;
    }
    offload_adamw(o, seg, N_SEG, &a);
}

/* A step's gradients on dev: random, a few large ones, value-clipped as
 * the trainer clips them before the step. */
static ops_tensor step_grad(int step, ops_device dev)
{
    int64_t n = total_len();
    ops_tensor h = host_random(n, 100 + (uint64_t)step, -0.5f, 0.5f);
    for (int64_t i = 0; i < n; i += 17)
        ((float *)h.data)[i] *= 40.0f;
    ops_tensor g = ops_alloc(OPS_F32, dev, n);
    ops_copy(g, h);
    ops_clip_value(g, 2.0f, n);
    ops_free(&h);
    return g;
}

/* Host copies of t, as fp32, for comparing. */
static float *to_host_f32(ops_tensor t)
{
    ops_tensor h = ops_alloc(OPS_F32, OPS_CPU, t.n);
    ops_cast(h, t);
    return h.data;
}

static int bitwise(ops_tensor a, ops_tensor b)
{
    float *x = to_host_f32(a), *y = to_host_f32(b);
    int same = memcmp(x, y, sizeof(float) * (size_t)a.n) == 0;
    free(x);
    free(y);
    return same;
}

static double rel_diff(ops_tensor a, ops_tensor b)
{
    float *x = to_host_f32(a), *y = to_host_f32(b);
    double d = tap_max_rel_diff(x, y, (long)a.n, 1e-3);
    free(x);
    free(y);
    return d;
}

/* On the CPU: the executor with memcpy copies against ops_adamw, bitwise. */
static void test_cpu(ops_dtype wdt)
{
    State ref = state_new(wdt, OPS_CPU, OPS_CPU, 0), off = state_new(wdt, OPS_CPU, OPS_CPU, 0);
    Offload *o = offload_create(OPS_CPU, wdt, 29); /* odd: chunks end mid-row */
    for (int step = 1; step <= 4; step++) {
        ops_tensor g = step_grad(step, OPS_CPU);
        reference_step(&ref, g, step);
        offload_step(o, &off, g, step);
        ops_free(&g);
    }
    /* in fp32 the reference's master is its weights */
    ops_tensor ref_master = wdt == OPS_F32 ? ref.w : ref.master;
    CHECK(bitwise(ref_master, off.master) && bitwise(ref.m, off.m) && bitwise(ref.v, off.v)
          && bitwise(ref.w, off.w),
          "%s: 4 steps through offload_adamw (chunk 29, memcpy) are bitwise ops_adamw's: "
          "master, m, v and the compute copy", ops_dtype_name(wdt));
    State init = state_new(wdt, OPS_CPU, OPS_CPU, 0);
    double moved = rel_diff(ref.w, init.w);
    CHECK(moved > 1e-4, "%s: and the steps moved the weights (by up to %.2e)",
          ops_dtype_name(wdt), moved);
    state_free(&init, 0, OPS_CPU);
    offload_destroy(o);
    state_free(&ref, 0, OPS_CPU);
    state_free(&off, 0, OPS_CPU);
}

/* On a GPU: the device's AdamW against the host's behind real copies. */
static void test_gpu(ops_dtype wdt)
{
    State ref = state_new(wdt, OPS_CUDA, OPS_CUDA, 0), off = state_new(wdt, OPS_CPU, OPS_CUDA, 1);
    Offload *o = offload_create(OPS_CUDA, wdt, 29);
    for (int step = 1; step <= 4; step++) {
        ops_tensor g = step_grad(step, OPS_CUDA);
        reference_step(&ref, g, step);
        offload_step(o, &off, g, step);
        ops_free(&g);
    }
    double dm = rel_diff(ref.master, off.master), dw = rel_diff(ref.w, off.w);
    double dmom = fmax(rel_diff(ref.m, off.m), rel_diff(ref.v, off.v));
    double tol_w = wdt == OPS_F32 ? 1e-5 : 1e-2; /* one rounding of the copy apart */
    CHECK(dm <= 1e-5 && dmom <= 1e-5 && dw <= tol_w,
          "%s: the GPU's AdamW against the host's behind offload_adamw: master %.2e, moments "
          "%.2e, compute copy %.2e", ops_dtype_name(wdt), dm, dmom, dw);
    offload_destroy(o);
    state_free(&ref, 0, OPS_CUDA);
    state_free(&off, 1, OPS_CUDA);
}

int main(int argc, char **argv)
{
    tap_init(&argc, &argv);
    CHECK(!offload_active(OFFLOAD_OPTIMIZER, OPS_CPU) && offload_active(OFFLOAD_OPTIMIZER, OPS_CUDA)
          && !offload_active(OFFLOAD_NONE, OPS_CUDA),
          "offload acts on a GPU only");
    CHECK(offload_staging_bytes(OPS_BF16, 1000) == 2 * 1000 * 6,
          "staging: two slots of fp32 gradients and bf16 weights");
    test_schedule();
    test_cpu(OPS_F32);
    test_cpu(OPS_BF16);
    test_cpu(OPS_F16);
    int gpus = ops_device_count(OPS_CUDA);
    char err[256];
    if (gpus == 0) {
        tap_diag("no CUDA device: the GPU's AdamW was not compared with the host's");
    } else if (gpus < 0 || ops_device_init(OPS_CUDA, 0, 1, err, sizeof err) != 0) {
        CHECK(0, "CUDA: %s", gpus < 0 ? ops_device_count_error(OPS_CUDA) : err);
    } else {
        test_gpu(OPS_F32);
        test_gpu(OPS_BF16);
        ops_device_finalize(OPS_CUDA);
    }
    tap_plan(n_checks); /* trailing: the count depends on the GPU */
    return tap_done();
}
