/*
 * t_optim_emu.cpp - the optimizer's and the elementwise ops' CUDA code run
 * on the host under tests/cuda_emu (each CUDA thread a fiber), host
 * functions and kernels as written (t_optim_emu.sh extracts them), against
 * the CPU twins of the build's kernels/libkernels.a called directly:
 *
 * - adamw_cuda.cu: adamw_cuda on one tensor and adamw_multi_cuda on a table
 *   of segments (multi_cuda.cu's table: built, uploaded, kept, rebuilt)
 *   against adamw_cpu segment by segment: fp32 master weights with fp32,
 *   bf16 and fp16 gradients and no, fp32, bf16 and fp16 weight copies,
 *   weight decay on and off per segment, steps 1 and 1000 (the bias
 *   corrections), sizes 1, 7, a chunk less one, a chunk, a chunk and one,
 *   two chunks and 77, and GPT-2 small's 148 tensors at width 64 (its
 *   vocabulary of 50257 and context of 1024: tensors of 99 and 2 chunks,
 *   the others of one).
 *   The table of a second step with the same segments is kept (no upload,
 *   no host wait); one pointer changed, one size changed, or the tables
 *   forgotten (multi_tables_forget_cuda) upload it again; the adamw table
 *   and the sum of squares' table are kept side by side. The table alone
 *   (no kernel) at GPT-2 small's real sizes (3892 chunks) and Llama 3.2
 *   1B's (37745: more than the 8192 blocks AdamW launches, so its blocks
 *   stride over chunks, as the grid capped at 3 does here).
 * - elementwise_cuda.cu: GELU forward and backward (dinp over dout), add
 *   (out over a, over b), accumulate, scale, clip (a NaN kept) in fp32,
 *   bf16 and fp16, 16-byte packs and the element path (a buffer one
 *   element off alignment), n 1, 7, 9 and 4099 (a pack's tail); the
 *   fp64 sums (sumsq_accumulate_cuda, sum_accumulate_cuda) and the sum of
 *   squares of many tensors in one launch (sumsq_multi_cuda) against the
 *   CPU's, with an inf and a NaN (the overflow check).
 * - tensor_cuda.cu: cast_cuda between every pair of float dtypes (and the
 *   same dtype, a copy), over values that round to ties, overflow fp16,
 *   are subnormal, -0, inf and NaN; cast_2d_cuda with row strides.
 *
 * Bit for bit where the GPU computes what the CPU does in the same order:
 * everything but the sums. This build is -ffp-contract=off, as the CPU's
 * C11 build is; nvcc contracts a*b + c into a fused multiply-add (AdamW's
 * moments and update, GELU's polynomial), so t_optim_emu.sh builds the
 * test again with contraction (-ffp-contract=fast, -mfma on x86) and runs
 * the AdamW and GELU cases there within a tolerance (contracted_tol):
 * the GPU's bits are not the CPU's, and by how much they may differ is
 * measured here, not guessed. The sums add the same fp64 terms (a square
 * of a value widened from fp32 is exact in fp64, so a fused v*v + s is
 * the same) in another order: the GPU's and the CPU's each lie within
 * (n - 1) 2^-53 times the sum of |terms| of the exact sum, in any order,
 * so they differ by at most 2 n 2^-53 times it; that is the tolerance. The sums' bits are
 * the same in both turn orders and on a second call (deterministic).
 *
 * Every buffer has 64 guard bytes on each side, checked after each call:
 * a write out of bounds fails its case. Each kernel runs in both turn
 * orders (cuda_emu/fibers.h) and, where its loop is grid-stride, with a
 * grid capped at 2 or 3 blocks, so that a thread takes several elements
 * (or chunks), as grid_for's cap at TRI_MAX_BLOCKS does at a 1B model's
 * sizes. Blocks are 128 threads (the GPU's 256; the kernels read
 * blockDim.x). Two mutants, written into the extracted code by
 * t_optim_emu.sh and switched on at run time (emu_mutant): a chunk of
 * adamw_multi_kernel and sumsq_multi_partial_kernel one element too
 * long, and a kept table taken for a new one of the same length whose
 * bytes differ; the multi-tensor cases run under each, and their exit
 * statuses come here: the last checks are that both failed. What does
 * not run here: the GPU's own arithmetic (the multiply-adds nvcc and
 * ptxas choose to fuse) and its memory system;
 * tests/t_ops_cuda runs these ops on a GPU.
 *
 * Usage: emu MODE FIRST [MUTANT1_RC MUTANT2_RC]. MODE main: every case,
 * TAP lines numbered from FIRST, the plan, and the mutants' checks; fma: the AdamW and
 * GELU cases within tolerance (the contracted build), no plan; mutant
 * (FIRST the mutant's number): the multi-tensor cases, quiet, exit
 * status 1 if any failed.
 */
#include "fibers.h"
#include "uniform.h"

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

extern "C" {
#include "kernels/cpu/cpu.h"
}

EmuDim gridDim = { 1, 1 };
#include "runtime.h"

/* the GPU's blocks are TRI_THREADS threads; the emulator's EMU_THREADS */
#define TRI_THREADS 128
static_assert(TRI_THREADS == EMU_THREADS, "the emulated block is TRI_THREADS threads");

#include "common.inc"
static_assert(SCRATCH_CUDA_SLOTS <= 32, "runtime.h keeps 32 scratch slots");
/* The mutants (t_optim_emu.sh writes them into the extracted code, inert
 * while this is 0): 1, each chunk of the multi-tensor kernels one element
 * too long (their bound i < ch.start + ch.n as i < ch.start + ch.n +
 * (emu_mutant == 1)); 2, a kept table taken for the new one whatever its
 * bytes, when their lengths agree (multi_cuda.cu's memcmp ignored). */
static int emu_mutant;
#include "tensor_kernels.inc"
#include "multi_kernels.inc"
#include "adamw_kernels.inc"
#include "elementwise_kernels.inc"


static int n_tests;
static bool quiet;     /* the mutant's run */
static bool contracted; /* the build with fused multiply-adds: tolerances */

static void report(bool ok, const std::string &what)
{
    n_tests++;
    if (!quiet)
        printf("%s %d - %s\n", ok ? "ok" : "not ok", n_tests, what.c_str());
}

static std::string fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static std::string fmt(const char *f, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, f);
    vsnprintf(buf, sizeof buf, f, ap);
    va_end(ap);
    return buf;
}

static const char *dtype_name(ops_dtype dt)
{
    return dt == OPS_F32 ? "fp32" : dt == OPS_BF16 ? "bf16" : dt == OPS_F16 ? "fp16" : "fp64";
}

static const char *order_name(EmuOrder order)
{
    return order == EMU_FORWARD ? "forward" : "backward";
}

/* ---- buffers with guards ---- */

enum { GUARD = 64 };

/* n elements of dtype dt from element `shift` past a 16-byte boundary,
 * with GUARD bytes of 0xa5 on each side. */
struct Buf {
    ops_dtype dt;
    int64_t n;
    int shift;
    char *base;
    void *p;
    Buf(ops_dtype dt_, int64_t n_, int shift_ = 0) : dt(dt_), n(n_), shift(shift_)
    {
        size_t total = GUARD + shift * es() + bytes() + GUARD;
        base = (char *)aligned_alloc(16, (total + 15) / 16 * 16);
        if (!base) {
            fprintf(stderr, "out of memory\n");
            exit(1);
        }
        memset(base, 0xa5, total);
        p = base + GUARD + shift * es();
    }
    Buf(const Buf &b) : Buf(b.dt, b.n, b.shift) { memcpy(p, b.p, bytes()); }
    Buf &operator=(const Buf &) = delete;
    ~Buf() { free(base); }
    size_t es() const { return dt == OPS_F32 ? 4 : dt == OPS_F64 ? 8 : 2; }
    size_t bytes() const { return (size_t)n * es(); }
    float at(int64_t i) const { return load_f32_cuda(p, dt, i); }
    void fill(float lo, float hi)
    {
        for (int64_t i = 0; i < n; i++)
            store_f32_cuda(p, dt, i, uniform(lo, hi));
    }
    bool guards_intact() const
    {
        const unsigned char *after = (const unsigned char *)p + bytes();
        for (int k = 0; k < GUARD; k++)
            if (base[k] != (char)0xa5 || after[k] != 0xa5)
                return false;
        return true;
    }
    bool same(const Buf &b) const { return memcmp(p, b.p, bytes()) == 0; }
};

/* max |got - want| over the larger of max |want| and floor (NaN: infinite) */
static double normwise(const Buf &got, const Buf &want, double floor)
{
    double diff = 0.0, scale = floor;
    for (int64_t i = 0; i < want.n; i++) {
        double d = fabs((double)got.at(i) - want.at(i));
        if (!(d <= diff))
            diff = d == d ? d : INFINITY;
        scale = fabs(want.at(i)) > scale ? fabs(want.at(i)) : scale;
    }
    return diff / (scale > 0.0 ? scale : 1.0);
}

/* The contracted build's tolerance, normwise: the fp32 results within 4
 * ulp of the largest (2^-21), a 16-bit result within one ulp of its dtype
 * where a contracted fp32 result tips its rounding. The scale has a floor,
 * the size of the terms that a result cancels (a moment that lands near
 * zero, GELU's gradient where it crosses zero): there, an ulp of the terms
 * is many of the result's. */
static double contracted_tol(ops_dtype dt)
{
    return dt == OPS_BF16 ? 0x1p-7 : dt == OPS_F16 ? 0x1p-10 : 0x1p-21;
}

/* got against want: bit for bit, or in the contracted build within
 * contracted_tol of the larger of max |want| and floor; also both guards.
 * Appends the worst difference to note. */
static bool agrees(const Buf &got, const Buf &want, std::string *note, double floor = 0.0)
{
    if (!got.guards_intact()) {
        *note += " [guard overwritten]";
        return false;
    }
    if (!contracted)
        return got.same(want);
    double e = normwise(got, want, floor);
    if (e > 0)
        *note += fmt(" [%s %.1e]", dtype_name(got.dt), e);
    return e <= contracted_tol(got.dt);
}

static double absmax(const Buf &b)
{
    double m = 0.0;
    for (int64_t i = 0; i < b.n; i++)
        m = fabs(b.at(i)) > m ? fabs(b.at(i)) : m;
    return m;
}

/* ---- AdamW ---- */

/* One parameter's buffers: master, m, v, the gradient and the copy. */
struct Param {
    Buf master, m, v, grad, wcopy;
    bool has_copy;
    float wd;
    int64_t rows; /* the segment's master.n: the buffers' n, or fewer */
    Param(int64_t n, ops_dtype gdt, ops_dtype wdt, bool copy, float wd_)
        : master(OPS_F32, n), m(OPS_F32, n), v(OPS_F32, n), grad(gdt, n), wcopy(wdt, n),
          has_copy(copy), wd(wd_), rows(n)
    {
        master.fill(-1.0f, 1.0f);
        m.fill(-0.1f, 0.1f);
        v.fill(0.0f, 0.01f);
        grad.fill(-2.0f, 2.0f);
        memset(wcopy.p, 0, wcopy.bytes());
    }
    Param(const Param &o) = default;
    ops_adamw_seg seg() const
    {
        ops_tensor none = { nullptr, 0, OPS_F32, OPS_CUDA };
        return ops_adamw_seg{ { master.p, rows, OPS_F32, OPS_CUDA },
                              { m.p, m.n, OPS_F32, OPS_CUDA },
                              { v.p, v.n, OPS_F32, OPS_CUDA },
                              { grad.p, grad.n, grad.dt, OPS_CUDA },
                              has_copy ? ops_tensor{ wcopy.p, wcopy.n, wcopy.dt, OPS_CUDA } : none,
                              wd };
    }
    /* the CPU twin's step on this parameter's first n elements */
    void cpu_step(int64_t n, ops_adamw_args a)
    {
        a.weight_decay = wd;
        adamw_cpu((float *)master.p, grad.p, grad.dt, (float *)m.p, (float *)v.p,
                  has_copy ? wcopy.p : nullptr, wcopy.dt, n, &a);
    }
    /* floors (agrees): the ranges the buffers are drawn from, the size
     * of the terms of each update */
    bool agrees_with(const Param &cpu, std::string *note) const
    {
        bool ok = agrees(master, cpu.master, note, 1.0) && agrees(m, cpu.m, note, 0.1)
                  && agrees(v, cpu.v, note, 0.01) && grad.guards_intact();
        return ok && agrees(wcopy, cpu.wcopy, note, 1.0);
    }
};

static ops_adamw_args adamw_args(int step)
{
    /* lr, beta1, beta2, eps, weight_decay (the segments'), grad_scale, step */
    return ops_adamw_args{ 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, step };
}

/* adamw_cuda on one tensor against adamw_cpu. */
static bool check_adamw_one(int64_t n, ops_dtype gdt, ops_dtype wdt, bool copy, float wd,
                            int step, EmuOrder order, unsigned cap)
{
    Param gpu(n, gdt, wdt, copy, wd), cpu(gpu);
    ops_adamw_args a = adamw_args(step);
    a.weight_decay = wd;
    emu_order = order;
    emu_grid_cap = cap;
    adamw_cuda((float *)gpu.master.p, gpu.grad.p, gdt, (float *)gpu.m.p, (float *)gpu.v.p,
               copy ? gpu.wcopy.p : nullptr, wdt, n, &a);
    emu_grid_cap = 0;
    cpu.cpu_step(n, a);
    std::string note;
    bool ok = gpu.agrees_with(cpu, &note);
    report(ok, fmt("adamw_cuda, n %lld, %s gradient, %s copy, weight decay %g, step %d, %s "
                   "order%s: master, m, v, copy %s adamw_cpu's%s",
                   (long long)n, dtype_name(gdt), copy ? dtype_name(wdt) : "no", (double)wd,
                   step, order_name(order), cap ? fmt(", grid capped at %u", cap).c_str() : "",
                   contracted ? "within tolerance of" : "bit for bit", note.c_str()));
    return ok;
}

static bool check_all_adamw_one()
{
    bool ok = true;
    for (EmuOrder order : { EMU_FORWARD, EMU_BACKWARD }) {
        ok &= check_adamw_one(1, OPS_F32, OPS_BF16, true, 0.1f, 1, order, 0);
        ok &= check_adamw_one(7, OPS_BF16, OPS_BF16, true, 0.0f, 1000, order, 0);
        ok &= check_adamw_one(300, OPS_F16, OPS_F16, true, 0.1f, 1, order, 0);
    }
    ok &= check_adamw_one(MULTI_CHUNK + 1, OPS_F32, OPS_F32, true, 0.1f, 1000, EMU_FORWARD, 3);
    ok &= check_adamw_one(4099, OPS_F32, OPS_F32, false, 0.1f, 1, EMU_BACKWARD, 2);
    return ok;
}

/* A model's parameters for adamw_multi_cuda. */
struct Model {
    std::vector<Param> gpu, cpu;
    /* room for every parameter: a pointer must not move when one is added */
    Model()
    {
        gpu.reserve(256);
        cpu.reserve(256);
    }
    void add(int64_t n, ops_dtype gdt, ops_dtype wdt, bool copy, float wd)
    {
        gpu.emplace_back(n, gdt, wdt, copy, wd);
        cpu.push_back(gpu.back());
    }
    std::vector<ops_adamw_seg> segs() const
    {
        std::vector<ops_adamw_seg> s;
        for (const Param &p : gpu)
            s.push_back(p.seg());
        return s;
    }
    /* adamw_multi_cuda on the GPU side, the loop of adamw_cpu on the CPU
     * side (each segment's master.n, which may be shorter than its
     * buffers); whether every segment agrees, and the uploads and host
     * waits the call took */
    bool step(int step_no, long *uploads, long *waits, std::string *note)
    {
        std::vector<ops_adamw_seg> s = segs();
        ops_adamw_args a = adamw_args(step_no);
        long u0 = emu_uploads, w0 = emu_host_waits;
        adamw_multi_cuda(s.data(), (int)s.size(), &a);
        *uploads = emu_uploads - u0;
        *waits = emu_host_waits - w0;
        bool ok = true;
        for (size_t i = 0; i < gpu.size(); i++) {
            cpu[i].cpu_step(s[i].master.n, a);
            ok &= gpu[i].agrees_with(cpu[i], note);
        }
        return ok;
    }
};

/* The odd sizes around a chunk, mixed dtypes, copies and decays. */
static void add_edges(Model &md)
{
    const int64_t C = MULTI_CHUNK;
    const int64_t n[] = { 1, 7, C - 1, C, C + 1, 2 * C + 77 };
    const ops_dtype g[] = { OPS_F32, OPS_BF16, OPS_F16 };
    for (int i = 0; i < 6; i++)
        md.add(n[i], g[i % 3], i % 2 ? OPS_BF16 : OPS_F16, i != 3, i % 2 ? 0.0f : 0.1f);
    md.add(5, OPS_F32, OPS_F32, true, 0.1f); /* an fp32 copy */
}

/* GPT-2 small's tensor sizes at width C (its vocabulary, context and 12
 * layers): token and position embeddings, per layer LayerNorms, qkv,
 * attention projection, fc, fc projection (weights and biases), the
 * final LayerNorm; with whether each decays (the matrices). */
static std::vector<std::pair<int64_t, bool>> gpt2_sizes(int64_t C)
{
    const int64_t V = 50257, T = 1024;
    std::vector<std::pair<int64_t, bool>> t = { { V * C, true }, { T * C, true } };
    const int64_t layer[12][2] = { { C, 0 },     { C, 0 },         { 3 * C * C, 1 }, { 3 * C, 0 },
                                   { C * C, 1 }, { C, 0 },         { C, 0 },         { C, 0 },
                                   { 4 * C * C, 1 }, { 4 * C, 0 }, { 4 * C * C, 1 }, { C, 0 } };
    for (int l = 0; l < 12; l++)
        for (const auto &x : layer)
            t.push_back({ x[0], x[1] != 0 });
    t.push_back({ C, false });
    t.push_back({ C, false });
    return t;
}

/* Llama 3.2 1B's: a tied embedding of 128256, 16 layers of 2048 wide
 * with 32 query and 8 key/value heads of 64 and an FFN of 8192. */
static std::vector<int64_t> llama1b_sizes()
{
    const int64_t C = 2048, KV = 512, F = 8192;
    std::vector<int64_t> t = { 128256 * C };
    for (int l = 0; l < 16; l++)
        for (int64_t n : { C, C * C, KV * C, KV * C, C * C, C, F * C, F * C, C * F })
            t.push_back(n);
    t.push_back(C);
    return t;
}

/* GPT-2 small's tensors at width 64: bf16 gradients and copies. */
static void add_gpt2_w64(Model &md)
{
    for (const auto &t : gpt2_sizes(64))
        md.add(t.first, OPS_BF16, OPS_BF16, true, t.second ? 0.1f : 0.0f);
}

/* multi_table_cuda at real models' sizes (the table only: no kernel
 * runs): every tensor's chunks in order, from element 0 to its end, each
 * of MULTI_CHUNK elements but its last; the chunks after the records at a
 * 256-byte boundary; and how many, against the adamw kernel's grid. */
static bool check_table(const char *model, const std::vector<int64_t> &n)
{
    struct Rec {
        int64_t a, b;
    };
    std::vector<Rec> rec(n.size());
    for (size_t i = 0; i < n.size(); i++)
        rec[i] = Rec{ (int64_t)i, n[i] };
    multi_tables_forget_cuda();
    multi_table t = multi_table_cuda(SCRATCH_CUDA_SUMSQ_TABLE, rec.data(), sizeof(Rec), n.data(),
                                     (int)n.size());
    emu_stream_drain();
    bool ok = (size_t)((const char *)t.chunks - (const char *)t.records)
                  == align256(sizeof(Rec) * n.size())
              && memcmp(t.records, rec.data(), sizeof(Rec) * n.size()) == 0;
    int64_t c = 0, total = 0;
    for (size_t i = 0; i < n.size(); i++) {
        total += n[i];
        for (int64_t start = 0; start < n[i]; start += MULTI_CHUNK, c++) {
            int64_t want = n[i] - start < MULTI_CHUNK ? n[i] - start : MULTI_CHUNK;
            ok &= c < t.nchunks && t.chunks[c].start == start && t.chunks[c].t == (int32_t)i
                  && t.chunks[c].n == want;
            if (!ok)
                break;
        }
    }
    ok &= c == t.nchunks;
    multi_tables_forget_cuda();
    report(ok, fmt("multi_table_cuda at %s's sizes: %zu tensors, %lld elements, %lld chunks "
                   "in order, each tensor's from 0 to its end (so the GPU's AdamW, at most %d "
                   "blocks, strides over chunks: %s)",
                   model, n.size(), (long long)total, (long long)t.nchunks, TRI_MAX_BLOCKS,
                   t.nchunks > TRI_MAX_BLOCKS ? "yes" : "no"));
    return ok;
}

static bool check_tables()
{
    std::vector<int64_t> gpt2;
    for (const auto &t : gpt2_sizes(768))
        gpt2.push_back(t.first);
    return check_table("GPT-2 small", gpt2) & check_table("Llama 3.2 1B", llama1b_sizes());
}

/* adamw_multi_cuda through a sequence of steps that keep, rebuild and
 * forget its table. */
static bool check_adamw_multi(bool big, EmuOrder order, unsigned cap)
{
    Model md;
    add_edges(md);
    if (big)
        add_gpt2_w64(md);
    int64_t total = 0;
    for (const Param &p : md.gpu)
        total += p.master.n;
    emu_order = order;
    emu_grid_cap = cap;
    std::string what = fmt("adamw_multi_cuda, %zu segments of %lld elements%s, %s order%s",
                           md.gpu.size(), (long long)total,
                           big ? " (the edges of a chunk and GPT-2 small's at width 64)"
                               : " (the edges of a chunk)",
                           order_name(order),
                           cap ? fmt(", grid capped at %u", cap).c_str() : "");
    const char *how = contracted ? "within tolerance of" : "bit for bit";
    bool all = true;
    long up, waits;
    std::string note;

    multi_tables_forget_cuda();
    bool ok = md.step(1, &up, &waits, &note);
    report(ok && up == 1 && waits == 1, what + fmt(": step 1 on a new table (%ld uploads, %ld "
                                                   "host waits) %s adamw_cpu's%s",
                                                   up, waits, how, note.c_str()));
    all &= ok && up == 1 && waits == 1;

    note.clear();
    ok = md.step(1000, &up, &waits, &note);
    report(ok && up == 0 && waits == 0, what + fmt(": step 1000 on the kept table (%ld uploads, "
                                                   "%ld host waits) %s adamw_cpu's%s",
                                                   up, waits, how, note.c_str()));
    all &= ok && up == 0 && waits == 0;

    if (!big || quiet) {
        /* one pointer moves: segment 2's v to a copy of itself */
        Param &p = md.gpu[2];
        Buf *moved = new Buf(p.v);
        std::swap(p.v.base, moved->base);
        std::swap(p.v.p, moved->p);
        note.clear();
        ok = md.step(2, &up, &waits, &note);
        delete moved; /* the old v, alive until then: a kept stale table writes it */
        bool ok2 = ok && up == 1;
        /* one size shrinks: segment 4 (a chunk and one) loses its last
         * element, which neither side then touches */
        md.gpu[4].rows--;
        md.cpu[4].rows--;
        std::string note2;
        ok = md.step(3, &up, &waits, &note2);
        ok2 &= ok && up == 1;
        ok2 &= md.gpu[4].agrees_with(md.cpu[4], &note2);
        /* forgotten: the same table uploads again */
        multi_tables_forget_cuda();
        long up3, waits3;
        ok = md.step(4, &up3, &waits3, &note2);
        ok2 &= ok && up3 == 1;
        report(ok2, what + fmt(": a moved pointer, a shorter segment and the tables forgotten "
                               "each upload a new table, %s adamw_cpu's%s%s",
                               how, note.c_str(), note2.c_str()));
        all &= ok2;
    }
    emu_grid_cap = 0;
    return all;
}

static bool check_all_adamw_multi()
{
    bool ok = check_adamw_multi(true, EMU_FORWARD, 0);
    ok &= check_adamw_multi(false, EMU_BACKWARD, 0);
    ok &= check_adamw_multi(false, EMU_FORWARD, 3);
    return ok;
}

/* ---- the maps ---- */

enum MapOp { GELU_FWD, GELU_BWD, GELU_BWD_INPLACE, ADD, ADD_OVER_A, ADD_OVER_B, ACCUMULATE,
             SCALE, CLIP, N_MAPS };
static const char *const map_name[N_MAPS] = {
    "gelu_fwd", "gelu_bwd", "gelu_bwd (dinp = dout)", "add", "add (out = a)",
    "add (out = b)", "accumulate", "scale", "clip_value" };

/* op on the GPU side (gpu) or the CPU side: out, a, b as the op reads them */
static void run_map(MapOp op, bool gpu, Buf &out, Buf &a, Buf &b)
{
    ops_dtype dt = out.dt;
    int64_t n = out.n;
    switch (op) {
    case GELU_FWD: gpu ? gelu_fwd_cuda(out.p, a.p, dt, n) : gelu_fwd_cpu(out.p, a.p, dt, n); break;
    case GELU_BWD:
        gpu ? gelu_bwd_cuda(out.p, a.p, b.p, dt, n) : gelu_bwd_cpu(out.p, a.p, b.p, dt, n);
        break;
    case GELU_BWD_INPLACE:
        gpu ? gelu_bwd_cuda(b.p, a.p, b.p, dt, n) : gelu_bwd_cpu(b.p, a.p, b.p, dt, n);
        break;
    case ADD: gpu ? add_cuda(out.p, a.p, b.p, dt, n) : add_cpu(out.p, a.p, b.p, dt, n); break;
    case ADD_OVER_A: gpu ? add_cuda(a.p, a.p, b.p, dt, n) : add_cpu(a.p, a.p, b.p, dt, n); break;
    case ADD_OVER_B: gpu ? add_cuda(b.p, a.p, b.p, dt, n) : add_cpu(b.p, a.p, b.p, dt, n); break;
    case ACCUMULATE:
        gpu ? accumulate_cuda(a.p, b.p, dt, n) : accumulate_cpu(a.p, b.p, dt, n);
        break;
    case SCALE: gpu ? scale_cuda(a.p, 0.37f, dt, n) : scale_cpu(a.p, 0.37f, dt, n); break;
    case CLIP: gpu ? clip_value_cuda(a.p, 1.5f, dt, n) : clip_value_cpu(a.p, 1.5f, dt, n); break;
    default: break;
    }
}

/* Every map over n elements of dt from element `shift`, in `order`. */
static bool check_maps(ops_dtype dt, int64_t n, int shift, EmuOrder order, unsigned cap)
{
    int same = 0, ran = 0;
    std::string bad, note;
    for (int op = 0; op < N_MAPS; op++) {
        if (contracted && op != GELU_FWD && op != GELU_BWD && op != GELU_BWD_INPLACE)
            continue;
        Buf out(dt, n, shift), a(dt, n, shift), b(dt, n, shift);
        a.fill(-4.0f, 4.0f);
        b.fill(-2.0f, 2.0f);
        if (op == CLIP && n > 2)
            store_f32_cuda(a.p, dt, n / 2, NAN);
        memset(out.p, 0, out.bytes());
        Buf out2(out), a2(a), b2(b);
        /* the floor: GELU's result is the size of its input, its
         * gradient's the size of dout */
        double floor = op == GELU_FWD ? absmax(a) : absmax(b);
        emu_order = order;
        emu_grid_cap = cap;
        run_map((MapOp)op, true, out, a, b);
        emu_grid_cap = 0;
        run_map((MapOp)op, false, out2, a2, b2);
        std::string n1;
        bool ok = agrees(out, out2, &n1, floor) && agrees(a, a2, &n1, floor)
                  && agrees(b, b2, &n1, floor);
        if (op == CLIP && n > 2)
            ok &= std::isnan(a.at(n / 2));
        same += ok;
        ran++;
        if (!ok)
            bad += std::string(" ") + map_name[op];
        note += n1;
    }
    bool ok = same == ran;
    bool packed = shift * (dt == OPS_F32 ? 4 : 2) % 16 == 0;
    report(ok, fmt("%s, n %lld from element %d (%s), %s order%s: %d of %d maps %s the CPU's%s%s",
                   dtype_name(dt), (long long)n, shift, packed ? "16-byte packs" : "elements",
                   order_name(order), cap ? fmt(", grid capped at %u", cap).c_str() : "", same,
                   ran, contracted ? "within tolerance of" : "bit for bit", note.c_str(),
                   bad.empty() ? "" : (" (not:" + bad + ")").c_str()));
    return ok;
}

static bool check_all_maps()
{
    bool ok = true;
    for (ops_dtype dt : { OPS_F32, OPS_BF16, OPS_F16 }) {
        for (EmuOrder order : { EMU_FORWARD, EMU_BACKWARD }) {
            ok &= check_maps(dt, 9, 0, order, 0);   /* a pack (or two) and a tail */
            ok &= check_maps(dt, 7, 1, order, 0);   /* off alignment: elements */
        }
        ok &= check_maps(dt, 1, 0, EMU_FORWARD, 0);
        ok &= check_maps(dt, 4099, 0, EMU_BACKWARD, 2); /* packs strided, a tail of 3 */
    }
    return ok;
}

#ifndef EMU_CONTRACTED
/* ---- the sums ---- */

/* 2 n 2^-53 of the sum of |terms|: the most two fp64 sums of the same n
 * terms in different orders can differ (each within (n - 1) 2^-53 of it) */
static double sum_tol(double abs_terms, int64_t n)
{
    return 2.0 * (double)n * 0x1p-53 * abs_terms;
}

static double abs_terms(const Buf &x, bool square)
{
    double s = 0.0;
    for (int64_t i = 0; i < x.n; i++) {
        double v = x.at(i);
        s += square ? v * v : fabs(v);
    }
    return s;
}

/* sumsq_accumulate_cuda and sum_accumulate_cuda on n elements. */
static bool check_sums(ops_dtype dt, int64_t n, EmuOrder order)
{
    Buf x(dt, n);
    x.fill(-3.0f, 2.0f);
    bool ok = true;
    std::string note;
    for (int square = 1; square >= 0; square--) {
        double start = 0.25, got = start, again = start, want = start;
        emu_order = order;
        (square ? sumsq_accumulate_cuda : sum_accumulate_cuda)(&got, x.p, dt, n);
        emu_order = order == EMU_FORWARD ? EMU_BACKWARD : EMU_FORWARD;
        (square ? sumsq_accumulate_cuda : sum_accumulate_cuda)(&again, x.p, dt, n);
        (square ? sumsq_accumulate_cpu : sum_accumulate_cpu)(&want, x.p, dt, n);
        double tol = sum_tol(abs_terms(x, square) + start, n + 1);
        bool this_ok = fabs(got - want) <= tol && memcmp(&got, &again, sizeof got) == 0;
        note += fmt(" %s: |gpu - cpu| %.1e (tol %.1e)%s;", square ? "sumsq" : "sum",
                    fabs(got - want), tol,
                    memcmp(&got, &again, sizeof got) ? ", orders differ" : "");
        ok &= this_ok;
    }
    report(ok && x.guards_intact(), fmt("fp64 sums of %lld %s elements (%lld blocks), %s order "
                                        "then the other, the same bits both times:%s",
                                        (long long)n, dtype_name(dt),
                                        (long long)((n + 1023) / 1024), order_name(order),
                                        note.c_str()));
    return ok;
}

/* sumsq_multi_cuda over many tensors, against sumsq_accumulate_cpu's loop;
 * its table kept on a second call. */
static bool check_sumsq_multi(bool big, EmuOrder order)
{
    Model md; /* the gradients of AdamW's models */
    add_edges(md);
    if (big)
        add_gpt2_w64(md);
    std::vector<ops_tensor> x;
    double abs_sum = 1.0;
    int64_t total = 0;
    for (const Param &p : md.gpu) {
        x.push_back(ops_tensor{ p.grad.p, p.grad.n, p.grad.dt, OPS_CUDA });
        abs_sum += abs_terms(p.grad, true);
        total += p.grad.n;
    }
    double want = 1.0;
    for (const ops_tensor &t : x)
        sumsq_accumulate_cpu(&want, t.data, t.dtype, t.n);
    double got = 1.0, again = 1.0;
    multi_tables_forget_cuda();
    emu_order = order;
    long u0 = emu_uploads;
    sumsq_multi_cuda(&got, x.data(), (int)x.size());
    long up1 = emu_uploads - u0;
    long up2 = 0;
    if (big) { /* a second call, 1/4 of the test's time, checks nothing new */
        again = got;
    } else {
        emu_order = order == EMU_FORWARD ? EMU_BACKWARD : EMU_FORWARD;
        u0 = emu_uploads;
        sumsq_multi_cuda(&again, x.data(), (int)x.size());
        up2 = emu_uploads - u0;
    }
    double tol = sum_tol(abs_sum, total + 1);
    bool ok = fabs(got - want) <= tol && memcmp(&got, &again, sizeof got) == 0
              && up1 == 1 && up2 == 0;
    report(ok, fmt("sumsq_multi_cuda over %zu tensors of %lld elements, %s order%s: "
                   "|gpu - cpu| %.1e (tol %.1e), %ld uploads%s",
                   x.size(), (long long)total, order_name(order),
                   big ? "" : " then the other (the same bits both times, the table kept)",
                   fabs(got - want), tol, up1, big ? "" : fmt(" then %ld", up2).c_str()));
    if (big || quiet)
        return ok;
    /* the AdamW table beside it: each kept while the other is used */
    std::string note;
    long aup1, aup2, awaits;
    bool stepped = md.step(1, &aup1, &awaits, &note);
    u0 = emu_uploads;
    double third = 1.0;
    sumsq_multi_cuda(&third, x.data(), (int)x.size());
    long up3 = emu_uploads - u0;
    stepped &= md.step(2, &aup2, &awaits, &note);
    bool side = stepped && aup1 == 1 && up3 == 0 && aup2 == 0;
    report(side, fmt("the norm's table and AdamW's side by side: AdamW's uploaded once (%ld), "
                     "then the norm's kept (%ld uploads), then AdamW's kept (%ld)%s",
                     aup1, up3, aup2, note.c_str()));
    ok &= side;
    /* the overflow check: an inf, then a NaN, makes the sum non-finite */
    Buf &g = md.gpu[5].grad;
    float keep = g.at(100);
    store_f32_cuda(g.p, g.dt, 100, INFINITY);
    double inf_sum = 0.0, nan_sum = 0.0;
    sumsq_multi_cuda(&inf_sum, x.data(), (int)x.size());
    store_f32_cuda(g.p, g.dt, 100, NAN);
    sumsq_multi_cuda(&nan_sum, x.data(), (int)x.size());
    store_f32_cuda(g.p, g.dt, 100, keep);
    bool flagged = std::isinf(inf_sum) && std::isnan(nan_sum);
    report(flagged, fmt("sumsq_multi_cuda with an inf, then a NaN, in one tensor: %g, %g",
                        inf_sum, nan_sum));
    return ok && flagged;
}

/* ---- casts ---- */

/* Values that test a cast: ties, fp16's overflow and subnormals, -0,
 * inf, NaN (with a payload), then random values of every magnitude. */
static void fill_cast_source(Buf &src)
{
    const uint32_t special[] = { 0x3f808000u, 0x3f818000u, 0x477ff000u, 0x477fe000u,
                                 0x47800000u, 0x33800000u, 0x33000000u, 0x38800000u,
                                 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00001u,
                                 0xffa00000u, 0x00000001u, 0x7f7fffffu, 0x3f7fffffu };
    for (int64_t i = 0; i < src.n; i++) {
        float f;
        if (i < 16) {
            memcpy(&f, &special[i], sizeof f);
        } else {
            f = uniform(-1.0f, 1.0f) * exp2f((float)(int)uniform(-30.0f, 30.0f));
        }
        store_f32_cuda(src.p, src.dt, i, f);
    }
}

static bool check_cast(ops_dtype ddt, ops_dtype sdt, int64_t n, EmuOrder order, unsigned cap)
{
    Buf src(sdt, n), dst(ddt, n), want(ddt, n);
    fill_cast_source(src);
    memset(dst.p, 0, dst.bytes());
    memset(want.p, 0, want.bytes());
    emu_order = order;
    emu_grid_cap = cap;
    cast_cuda(dst.p, ddt, src.p, sdt, n);
    emu_stream_drain(); /* the same dtype's copy is queued */
    emu_grid_cap = 0;
    cast_cpu(want.p, ddt, src.p, sdt, n);
    std::string note;
    bool ok = agrees(dst, want, &note) && src.guards_intact();
    report(ok, fmt("cast_cuda %s to %s, n %lld, %s order%s: bit for bit cast_cpu's%s",
                   dtype_name(sdt), dtype_name(ddt), (long long)n, order_name(order),
                   cap ? fmt(", grid capped at %u", cap).c_str() : "", note.c_str()));
    return ok;
}

static bool check_cast_2d(ops_dtype ddt, ops_dtype sdt)
{
    const int rows = 5, cols = 37, ldd = 40, lds = 53;
    Buf src(sdt, (int64_t)rows * lds), dst(ddt, (int64_t)rows * ldd),
        want(ddt, (int64_t)rows * ldd);
    fill_cast_source(src);
    memset(dst.p, 0x5a, dst.bytes()); /* the gaps between rows must keep this */
    memset(want.p, 0x5a, want.bytes());
    emu_order = EMU_BACKWARD;
    cast_2d_cuda(dst.p, ddt, ldd, src.p, sdt, lds, rows, cols);
    cast_2d_cpu(want.p, ddt, ldd, src.p, sdt, lds, rows, cols);
    std::string note;
    bool ok = agrees(dst, want, &note);
    report(ok, fmt("cast_2d_cuda %s to %s, %d rows of %d (strides %d, %d): bit for bit "
                   "cast_2d_cpu's, the gaps kept%s",
                   dtype_name(sdt), dtype_name(ddt), rows, cols, lds, ldd, note.c_str()));
    return ok;
}

static bool check_all_casts()
{
    bool ok = true;
    const ops_dtype dts[] = { OPS_F32, OPS_BF16, OPS_F16 };
    for (ops_dtype d : dts)
        for (ops_dtype s : dts) {
            ok &= check_cast(d, s, 300, d == s ? EMU_FORWARD : EMU_BACKWARD, 0);
            ok &= check_cast_2d(d, s);
        }
    ok &= check_cast(OPS_BF16, OPS_F16, 7, EMU_FORWARD, 0);
    ok &= check_cast(OPS_F16, OPS_F32, 70001, EMU_FORWARD, 3); /* cast_cpu's chunks of 64 Ki */
    return ok;
}

#endif

int main(int argc, char **argv)
{
    std::string mode = argc > 1 ? argv[1] : "main";
    n_tests = argc > 2 ? atoi(argv[2]) - 1 : 0;
#ifdef EMU_CONTRACTED
    contracted = true;
    volatile float a = 1.0f + 0x1p-12f, b = 1.0f - 0x1p-12f, c = -1.0f;
    bool fused = a * b + c != 0.0f; /* -2^-24 when fused, 0 when the product is rounded */
    printf("# the contracted build %s a*b + c\n", fused ? "fuses" : "does NOT fuse");
    check_all_adamw_one();
    check_adamw_multi(true, EMU_FORWARD, 0);
    check_all_maps();
    return 0;
#else
    if (mode == "mutant") {
        quiet = true;
        emu_mutant = argc > 2 ? atoi(argv[2]) : 1;
        bool ok = check_adamw_multi(false, EMU_FORWARD, 0);
        ok &= check_sumsq_multi(false, EMU_FORWARD);
        return ok ? 0 : 1;
    }
    check_tables();
    check_all_adamw_one();
    check_all_adamw_multi();
    check_all_maps();
    for (ops_dtype dt : { OPS_F32, OPS_BF16, OPS_F16 })
        check_sums(dt, dt == OPS_F32 ? 20001 : 1025, dt == OPS_BF16 ? EMU_BACKWARD : EMU_FORWARD);
    check_sums(OPS_F32, 1, EMU_FORWARD);
    check_sumsq_multi(true, EMU_FORWARD);
    check_sumsq_multi(false, EMU_BACKWARD);
    check_all_casts();
    int chunk_rc = argc > 3 ? atoi(argv[3]) : 0, table_rc = argc > 4 ? atoi(argv[4]) : 0;
    report(chunk_rc != 0, fmt("the multi-tensor kernels with their chunk bound off by one "
                              "(mutant 1) fail these checks (exit status %d)", chunk_rc));
    report(table_rc != 0, fmt("multi_cuda.cu keeping a table whose bytes differ (mutant 2) "
                              "fails these checks (exit status %d)", table_rc));
    printf("1..%d\n", n_tests);
    return 0;
#endif
}
