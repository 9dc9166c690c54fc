/*
 * attention_cudnn_cuda.cu - causal self-attention through cuDNN's fused
 * scaled-dot-product attention (flash attention: forward with the softmax
 * statistics, deterministic backward), the second route beside trident's
 * own kernels (attention_cuda.cu, attention_mma_cuda.cu), which stay the
 * reference and the fallback. Built only with configure
 * --with-cudnn-frontend=DIR: the graphs are described with NVIDIA's
 * header-only C++ frontend (github.com/NVIDIA/cudnn-frontend), which the
 * user installs; cuDNN 9 runs them.
 *
 * attention_fwd_cuda and attention_bwd_cuda (the whole sequence, not
 * context parallelism's row windows) ask here first; 0 back means "run
 * trident's": fp32, a head size cuDNN's flash kernels do not take, a
 * pointer off 16 bytes, TRIDENT_ATTENTION=trident (attention_route.c), or
 * cuDNN failing: no handle (cudnnCreate), a graph it would not build, a
 * run it refused, or an exception out of the frontend's C++ (none may
 * cross into trident's C); said once on stderr, with the reason. A graph
 * whose run failed is dropped: trident's kernel then writes every output
 * (out and lse; dqkv, which the whole sequence's backward overwrites).
 *
 * Layouts, all read and written in place through strides, no copies; the
 * graphs see (batch, head, row, dimension) tensors:
 *  - Q, K, V: views of qkv (B,T,NH,3,hs), the base pointer plus 0, hs and
 *    2*hs elements, strides (T*NH*3*hs, 3*hs, NH*3*hs, 1); dQ, dK, dV the
 *    same views of dqkv (every element written: the backward overwrites);
 *  - O and dO: (B,T,NH*hs), strides (T*NH*hs, hs, NH*hs, 1);
 *  - the statistics: lse (B,NH,T) fp32, strides (NH*T, T, 1, 1). cuDNN's
 *    Stats are max + log(sum exp(s - max)) of the scaled scores s =
 *    q.k * scale, natural logarithm (the frontend's softmax node adds the
 *    max to a LOG pointwise of the sum), which is trident's lse exactly,
 *    so each route's backward reads the other's forward; t_ops_cuda
 *    compares the two.
 *
 * A graph depends on the shape and dtype only (the pointers come at each
 * run), so the built ones are kept in a small cache keyed by (pass,
 * dtype, B, T, NH, hs): a step builds nothing after the first. Their
 * workspace is one grow-only scratch (SCRATCH_CUDA_ATTENTION_CUDNN), so
 * it grows in the first step and never after (ops_device_allocations
 * stays flat). The handle runs on the compute stream.
 *
 * Not collective.
 */
#include <cudnn.h>
#include <cudnn_frontend.h>

#include <exception>
#include <memory>
#include <stdio.h>
#include <string>
#include <unordered_map>

#include "cuda_common.h"

namespace fe = cudnn_frontend;

namespace {

/* the tensors' ids in a graph's variant pack */
enum : int64_t { UID_Q = 1, UID_K, UID_V, UID_O, UID_STATS, UID_DO, UID_DQ, UID_DK, UID_DV };

enum Pass { PASS_FWD, PASS_BWD };

struct Shape {
    Pass pass;
    ops_dtype dt;
    int64_t B, T, NH, hs;
    bool operator==(const Shape &o) const
    {
        return pass == o.pass && dt == o.dt && B == o.B && T == o.T && NH == o.NH && hs == o.hs;
    }
};

struct Built {
    Shape shape;
    std::shared_ptr<fe::graph::Graph> graph; /* null: cuDNN refused this shape */
    int64_t workspace;
};

/* A run meets a handful of shapes (training, evaluation's, a test's):
 * past CACHE_SLOTS the oldest is replaced. */
constexpr int CACHE_SLOTS = 16;

struct State {
    cudnnHandle_t handle = nullptr; /* null: cudnnCreate failed, trident runs all */
    Built cache[CACHE_SLOTS];
    int used = 0, next = 0;
    bool refusal_said = false;
};

State *state; /* on the heap, freed by attention_cudnn_finalize_cuda */

/* Once a run: which shape fell back to trident's kernel and why. */
void say_refusal(State &s, const Shape &sh, const std::string &why)
{
    if (s.refusal_said)
        return;
    s.refusal_said = true;
    fprintf(stderr, "attention: cuDNN refused the %s of B=%lld T=%lld NH=%lld hs=%lld %s (%s); "
            "trident's kernel runs it instead\n", sh.pass == PASS_FWD ? "forward" : "backward",
            (long long)sh.B, (long long)sh.T, (long long)sh.NH, (long long)sh.hs,
            ops_dtype_name(sh.dt), why.c_str());
}

/* The state, made on first use; its handle stays null when cuDNN cannot
 * start (a missing sub-library, a device it does not support), which
 * sends every call to trident's kernel. */
State &get_state(const Shape &sh)
{
    if (!state) {
        state = new State();
        cudnnStatus_t st = cudnnCreate(&state->handle);
        if (st != CUDNN_STATUS_SUCCESS) {
            state->handle = nullptr;
            say_refusal(*state, sh, std::string("cudnnCreate: ") + cudnnGetErrorString(st));
        }
    }
    return *state;
}

fe::DataType_t fe_dtype(ops_dtype dt)
{
    return dt == OPS_BF16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF;
}

/* A (B, NH, T, hs) view of q, k or v in qkv (or of dqkv). */
fe::graph::Tensor_attributes qkv_view(const Shape &sh, const char *name, int64_t uid)
{
    const int64_t row = sh.NH * 3 * sh.hs;
    return fe::graph::Tensor_attributes().set_name(name).set_uid(uid)
        .set_dim({sh.B, sh.NH, sh.T, sh.hs}).set_stride({sh.T * row, 3 * sh.hs, row, 1});
}

/* A (B, NH, T, hs) view of out or dout, (B,T,NH*hs). */
fe::graph::Tensor_attributes out_view(const Shape &sh, const char *name, int64_t uid)
{
    const int64_t row = sh.NH * sh.hs;
    return fe::graph::Tensor_attributes().set_name(name).set_uid(uid)
        .set_dim({sh.B, sh.NH, sh.T, sh.hs}).set_stride({sh.T * row, sh.hs, row, 1});
}

/* lse (B,NH,T) as cuDNN's (B, NH, T, 1) statistics. */
fe::graph::Tensor_attributes stats_view(const Shape &sh)
{
    return fe::graph::Tensor_attributes().set_name("lse").set_uid(UID_STATS)
        .set_dim({sh.B, sh.NH, sh.T, 1}).set_stride({sh.NH * sh.T, sh.T, 1, 1})
        .set_data_type(fe::DataType_t::FLOAT);
}

float attn_scale(const Shape &sh)
{
    return 1.0f / sqrtf((float)sh.hs); /* as attention_cuda.cu's */
}

void describe_fwd(fe::graph::Graph &g, const Shape &sh)
{
    auto q = g.tensor(qkv_view(sh, "q", UID_Q));
    auto k = g.tensor(qkv_view(sh, "k", UID_K));
    auto v = g.tensor(qkv_view(sh, "v", UID_V));
    auto opt = fe::graph::SDPA_attributes().set_name("attention_fwd")
        .set_generate_stats(true).set_causal_mask(true).set_attn_scale(attn_scale(sh));
    auto [o, stats] = g.sdpa(q, k, v, opt);
    const auto ov = out_view(sh, "out", UID_O), sv = stats_view(sh);
    o->set_output(true).set_uid(UID_O).set_dim(ov.get_dim()).set_stride(ov.get_stride());
    stats->set_output(true).set_uid(UID_STATS).set_data_type(fe::DataType_t::FLOAT)
        .set_dim(sv.get_dim()).set_stride(sv.get_stride());
}

void describe_bwd(fe::graph::Graph &g, const Shape &sh)
{
    auto q = g.tensor(qkv_view(sh, "q", UID_Q));
    auto k = g.tensor(qkv_view(sh, "k", UID_K));
    auto v = g.tensor(qkv_view(sh, "v", UID_V));
    auto o = g.tensor(out_view(sh, "out", UID_O));
    auto dout = g.tensor(out_view(sh, "dout", UID_DO));
    auto stats = g.tensor(stats_view(sh));
    /* deterministic: every element summed in one order, as trident's
     * kernels (invariant 5 of doc/design.md) */
    auto opt = fe::graph::SDPA_backward_attributes().set_name("attention_bwd")
        .set_causal_mask(true).set_attn_scale(attn_scale(sh)).set_deterministic_algorithm(true);
    auto [dq, dk, dv] = g.sdpa_backward(q, k, v, o, dout, stats, opt);
    const int64_t uids[3] = { UID_DQ, UID_DK, UID_DV };
    const std::shared_ptr<fe::graph::Tensor_attributes> grads[3] = { dq, dk, dv };
    for (int i = 0; i < 3; i++) {
        const auto view = qkv_view(sh, "dqkv", uids[i]);
        grads[i]->set_output(true).set_uid(uids[i]).set_dim(view.get_dim())
            .set_stride(view.get_stride());
    }
}

/* sh's graph built on the handle, and its workspace; null with *why set
 * when cuDNN refuses it. */
std::shared_ptr<fe::graph::Graph> build_graph(cudnnHandle_t handle, const Shape &sh,
                                              int64_t *workspace, std::string *why)
{
    auto g = std::make_shared<fe::graph::Graph>();
    g->set_io_data_type(fe_dtype(sh.dt)).set_intermediate_data_type(fe::DataType_t::FLOAT)
        .set_compute_data_type(fe::DataType_t::FLOAT);
    if (sh.pass == PASS_FWD)
        describe_fwd(*g, sh);
    else
        describe_bwd(*g, sh);
    fe::error_t built = g->build(handle, { fe::HeurMode_t::A });
    if (built.is_bad()) {
        *why = built.get_message();
        return nullptr;
    }
    fe::error_t sized = g->get_workspace_size(*workspace);
    if (sized.is_bad()) {
        *why = sized.get_message();
        return nullptr;
    }
    return g;
}

/* The built graph of sh, from the cache or built now; null graph when
 * cuDNN refuses it (kept too, so a refusal is asked once). The slot holds
 * the graph only once it is whole. */
Built &built_for(State &s, const Shape &sh)
{
    for (int i = 0; i < s.used; i++)
        if (s.cache[i].shape == sh)
            return s.cache[i];
    Built &b = s.cache[s.used < CACHE_SLOTS ? s.used++ : s.next++ % CACHE_SLOTS];
    b = Built{ sh, nullptr, 0 };
    int64_t workspace = 0;
    std::string why;
    std::shared_ptr<fe::graph::Graph> g;
    try {
        /* the frontend throws too (graph_interface.h: an SDPA without an
         * implementation; cudnnException where it was built with them) */
        g = build_graph(s.handle, sh, &workspace, &why);
    } catch (const std::exception &e) {
        g = nullptr;
        why = std::string("exception: ") + e.what();
    }
    if (!g) {
        say_refusal(s, sh, why);
        return b;
    }
    b.graph = g;
    b.workspace = workspace;
    return b;
}

bool aligned16(const void *p)
{
    return ((uintptr_t)p & 15) == 0;
}

/* Runs sh's graph on the pointers of pack; false when trident must. */
bool run(const Shape &sh, std::unordered_map<int64_t, void *> &pack)
{
    if (!attention_cudnn_supports_cuda(sh.dt, (int)sh.hs))
        return false;
    for (const auto &kv : pack)
        if (!aligned16(kv.second))
            return false;
    State &s = get_state(sh);
    if (!s.handle)
        return false;
    Built &b = built_for(s, sh);
    if (!b.graph)
        return false;
    void *workspace = b.workspace > 0
        ? scratch_cuda(SCRATCH_CUDA_ATTENTION_CUDNN, (size_t)b.workspace) : nullptr;
    cudnnStatus_t cs = cudnnSetStream(s.handle, stream_cuda());
    if (cs != CUDNN_STATUS_SUCCESS)
        ops_fatalf(__FILE__, __LINE__, "cudnnSetStream: %s", cudnnGetErrorString(cs));
    std::string why;
    try {
        fe::error_t st = b.graph->execute(s.handle, pack, workspace);
        if (st.is_bad())
            why = "run: " + st.get_message();
    } catch (const std::exception &e) {
        why = std::string("run: exception: ") + e.what();
    }
    if (!why.empty()) {
        /* a launch error cuDNN left is its own, not trident's next
         * kernel's (a sticky one stops that kernel anyway) */
        cudaError_t ce = cudaGetLastError();
        if (ce != cudaSuccess)
            why += std::string(" (CUDA: ") + cudaGetErrorString(ce) + ")";
        /* dropped, so the shape is not asked again; trident's kernel
         * writes every output this call and after */
        b.graph = nullptr;
        say_refusal(s, sh, why);
        return false;
    }
    TRI_CHECK_LAUNCH(cudnn_sdpa);
    return true;
}

/* element e of a dt tensor at p, as cuDNN's views need it */
void *at(const void *p, ops_dtype dt, int64_t e)
{
    return (char *)p + e * (int64_t)ops_dtype_size(dt);
}

} // namespace

int attention_cudnn_supports_cuda(ops_dtype dt, int hs)
{
    /* cuDNN's flash kernels: 16-bit inputs, head sizes a multiple of 8
     * up to 128 here (trident's own limit, ATTENTION_MAX_HS_CUDA) */
    return (dt == OPS_BF16 || dt == OPS_F16) && hs >= 8 && hs % 8 == 0
           && hs <= ATTENTION_MAX_HS_CUDA;
}

int attention_cudnn_fwd_cuda(void *out, float *lse, const void *qkv, ops_dtype dt,
                             int B, int T, int NH, int hs)
{
    Shape sh{ PASS_FWD, dt, B, T, NH, hs };
    std::unordered_map<int64_t, void *> pack = {
        { UID_Q, at(qkv, dt, 0) }, { UID_K, at(qkv, dt, hs) }, { UID_V, at(qkv, dt, 2 * hs) },
        { UID_O, out }, { UID_STATS, lse } };
    return run(sh, pack);
}

int attention_cudnn_bwd_cuda(void *dqkv, const void *dout, const void *qkv, const void *out,
                             const float *lse, ops_dtype dt, int B, int T, int NH, int hs)
{
    Shape sh{ PASS_BWD, dt, B, T, NH, hs };
    std::unordered_map<int64_t, void *> pack = {
        { UID_Q, at(qkv, dt, 0) }, { UID_K, at(qkv, dt, hs) }, { UID_V, at(qkv, dt, 2 * hs) },
        { UID_O, (void *)out }, { UID_DO, (void *)dout }, { UID_STATS, (void *)lse },
        { UID_DQ, at(dqkv, dt, 0) }, { UID_DK, at(dqkv, dt, hs) },
        { UID_DV, at(dqkv, dt, 2 * hs) } };
    return run(sh, pack);
}

int64_t attention_cudnn_workspace_cuda(int backward, ops_dtype dt, int B, int T, int NH,
                                       int hs)
{
    Shape sh{ backward ? PASS_BWD : PASS_FWD, dt, B, T, NH, hs };
    for (int i = 0; state && i < state->used; i++)
        if (state->cache[i].shape == sh && state->cache[i].graph)
            return state->cache[i].workspace;
    return -1;
}

const char *attention_cudnn_version_cuda(void)
{
    static char text[96];
    size_t v = cudnnGetVersion();
    snprintf(text, sizeof text, "cuDNN %zu.%zu.%zu, frontend %d.%d.%d", v / 10000,
             v % 10000 / 100, v % 100, CUDNN_FRONTEND_MAJOR_VERSION,
             CUDNN_FRONTEND_MINOR_VERSION, CUDNN_FRONTEND_PATCH_VERSION);
    return text;
}

void attention_cudnn_finalize_cuda(void)
{
    if (!state)
        return;
    cudnnHandle_t handle = state->handle;
    delete state; /* the graphs before the handle they were built with */
    state = nullptr;
    if (handle)
        cudnnDestroy(handle);
}
