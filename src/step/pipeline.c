/*
 * pipeline.c - the one executor for every schedule; see pipeline.h.
 *
 * Stages form a ring: a chunk's output goes to the next stage, and the
 * last stage's chunk c sends to stage 0's chunk c+1 (the interleaved
 * schedule; with one chunk the ring is never closed). Gradients go the
 * other way.
 *
 * Messages carry no tags: those of one kind between two stages match in
 * the order they are posted (comm_link_send), the only matching NCCL's
 * send and receive offer, and the CPU's MPI path keeps the same rule so
 * that it runs, and the tests check, the very order a GPU relies on. So
 * a receiver posts its receives in its sender's order: activations in the
 * order of the forwards, gradients in the order of the backwards, which
 * every schedule gives both ends of each link alike
 * (schedule_links_in_order, checked at start-up and by t_schedule).
 *
 * Slots are one pool: each forward in the list is given a free slot in
 * list order, and the slot returns to the pool after the last pass of the
 * same (mb, chunk): its backward, or its weight pass in schedules that
 * have one (zb1), or right after the forward when nothing trains. A
 * forward's input receive is posted the moment its slot is given. A
 * gradient's receive is posted as early as the backward order allows:
 * after its own forward and the receives of every backward before it (in
 * 1F1B, GPipe and zb1 right after its forward; interleaved takes the
 * chunks' backwards in reverse, so there some wait for later forwards).
 *
 * Deadlock freedom: every send is nonblocking, so a stage blocks only
 * (a) on a receive for the action it is about to run, which the sender's
 * own schedule produces before anything that waits on us (the simulator,
 * schedule_simulate, checks each schedule has that order), or (b) on one
 * of its own sends before reusing the buffer. In training (b) never waits
 * on the peer: a slot is reused only after the backward of its (mb, chunk),
 * which needed the gradient the receiver sent after using our activation,
 * and a gradient's receive is posted by the time its backward runs, before
 * the previous stage's slot can need it back. In a forward-only list every
 * stage runs the same order in which each forward's input comes from an
 * earlier entry, so the receiver reaches the entry it is late on without
 * waiting for us. On a GPU the host only queues all of this (each link's
 * operations run in order on its own stream, and the compute stream waits
 * on their events), so the same argument holds for the streams.
 */
#include "pipeline.h"

#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "comm.h"
#include "fail.h"
#include "model_cp.h"

typedef struct {
    Pipeline *p;
    Model *m;
    const Action *actions;
    int n_actions;
    int stage, pp, v, rows;
    int n_mb;                     /* microbatches in this step */
    float grad_scale;
    int64_t n;                    /* elements of one message: the stage's
                                     rows*T*C, or its slice of them */
    CommRequest *recv_fwd, *recv_bwd, *send_fwd, *send_bwd;  /* the Pipeline's */
    int *holder;                  /* the Pipeline's */
    int next_unslotted;           /* the first forward without a slot */
    char *forwarded;              /* the Pipeline's */
    int next_grad_recv;           /* the first backward whose gradient's
                                     receive is not posted */
    PipelineTimes *times;
} Exec;

static int key_of(const Exec *e, Action a) { return a.mb * e->v + a.chunk; }

/* Waits for a message, timed on the device (a GPU's idle time, ops.h). */
static void wait_for(Exec *e, CommRequest *req)
{
    if (comm_request_done(req))
        return;
    ops_timer_start(&e->times->wait);
    comm_wait(req);
    ops_timer_stop(&e->times->wait);
}

/* The slot holding a's (mb, chunk), or -1 while it has none. */
static int find_slot(const Exec *e, Action a)
{
    for (int s = 0; s < e->m->n_slots; s++)
        if (e->holder[s] == key_of(e, a))
            return s;
    return -1;
}

static int slot_of(const Exec *e, Action a)
{
    int s = find_slot(e, a);
    if (s < 0)
        fail_abort("pipeline: an action has no activation slot", __FILE__, __LINE__);
    return s;
}

/* Where a chunk's input comes from and its output goes: the previous and
 * next stage in the ring, unless the chunk is the model's first or last. */
static int has_input(const Exec *e, Action a) { return schedule_has_input(e->stage, a.chunk); }
static int has_output(const Exec *e, Action a)
{
    return schedule_has_output(e->pp, e->v, e->stage, a.chunk);
}
static int prev_stage(const Exec *e) { return (e->stage + e->pp - 1) % e->pp; }
static int next_stage(const Exec *e) { return (e->stage + 1) % e->pp; }

static void post_recv_forward(Exec *e, Action a, int s)
{
    if (!has_input(e, a))
        return;
    comm_link_recv(e->m->grid, LINK_ACTIVATION, model_stage_input(e->m, s), e->n,
                   prev_stage(e), &e->recv_fwd[s]);
}

static void post_recv_backward(Exec *e, Action a, int s)
{
    if (!has_output(e, a))
        return;
    /* the gradient buffer may still be going out to the previous stage */
    wait_for(e, &e->send_bwd[s]);
    comm_link_recv(e->m->grid, LINK_GRADIENT, model_stage_grad(e->m, s), e->n, next_stage(e),
                   &e->recv_bwd[s]);
}

/* Posts the gradient receives the backward order allows: those of the
 * next backwards in the list whose forwards have run. */
static void post_grad_receives(Exec *e)
{
    for (; e->next_grad_recv < e->n_actions; e->next_grad_recv++) {
        Action a = e->actions[e->next_grad_recv];
        if (a.kind != ACTION_BACKWARD)
            continue;
        int s = find_slot(e, a);
        if (s < 0 || !e->forwarded[s])
            return;
        post_recv_backward(e, a, s);
    }
}

/* Gives free slot s to the next forward in the list that has none, and
 * posts the receive of that forward's input into it. */
static void give_slot(Exec *e, int s)
{
    e->holder[s] = -1;
    while (e->next_unslotted < e->n_actions
           && e->actions[e->next_unslotted].kind != ACTION_FORWARD)
        e->next_unslotted++;
    if (e->next_unslotted == e->n_actions)
        return;
    Action a = e->actions[e->next_unslotted++];
    e->holder[s] = key_of(e, a);
    e->forwarded[s] = 0;
    post_recv_forward(e, a, s);
}

/* Splits microbatch mb of the batch (rows of seq_len+1 tokens, where the
 * model lives: batch_on_device) into the slot's tokens (first chunk of the
 * model) and targets (last chunk): one strided copy each per chunk of the
 * sequence this rank holds (the whole row, or under context parallelism
 * its two chunks, chunk-major: model_cp.h), which a GPU queues without a
 * host wait. */
static void load_microbatch(Exec *e, ops_tensor batch, Action a, int s)
{
    Model *m = e->m;
    int64_t T = m->seq_len, Tc = model_cp_chunk_len(m), rows = e->rows;
    /* each row's Tc tokens from t0 on, the targets one further: the view
     * ends at the last row's chunk */
    int64_t first = (int64_t)a.mb * rows * (T + 1), n = (rows - 1) * (T + 1) + Tc;
    for (int h = 0; h < model_cp_chunks(m); h++) {
        int64_t t0 = model_cp_chunk_start(m, h), local = h * rows * Tc;
        if (!has_input(e, a))
            ops_copy_rows(ops_view(m->tokens[s], local, rows * Tc),
                          ops_view(batch, first + t0, n), rows, Tc, T + 1);
        if (!has_output(e, a))
            ops_copy_rows(ops_view(m->targets[s], local, rows * Tc),
                          ops_view(batch, first + t0 + 1, n), rows, Tc, T + 1);
    }
}

/* The step's batch (n_mb microbatches of rows x (T+1) host tokens) where
 * the model lives. On a GPU one upload for the whole step, into the
 * model's buffer: one host wait, at the step's start when the GPU has
 * little queued, instead of one per row and microbatch. Only the stages
 * with the model's first or last chunk read it. */
static ops_tensor batch_on_device(Exec *e, const int32_t *batch)
{
    Model *m = e->m;
    int reads = e->stage == 0 || e->stage == e->pp - 1;
    if (!reads || !batch)
        return OPS_NONE;
    int64_t n = (int64_t)e->n_mb * e->rows * (m->seq_len + 1);
    ops_tensor host = {(void *)batch, n, OPS_I32, OPS_CPU};
    if (m->grid->device == OPS_CPU)
        return host;
    Pipeline *p = e->p;
    if (p->batch.n < n) {
        ops_free(&p->batch);
        p->batch = ops_alloc(OPS_I32, m->grid->device, n);
    }
    ops_tensor dev = ops_view(p->batch, 0, n);
    ops_copy(dev, host);
    return dev;
}

/* The flags of a pass over microbatch mb: whether it is the step's last
 * (with `final_pass`: this is the last pass over its gradients). */
static ModelPass pass_of(const Exec *e, int mb, int final_pass)
{
    return (ModelPass){.final = mb == e->n_mb - 1 && final_pass, .grad_scale = e->grad_scale};
}

static void run_forward(Exec *e, ops_tensor batch, Action a, int s, ForwardMode mode)
{
    wait_for(e, &e->recv_fwd[s]);
    /* buffers this forward overwrites may still be going out */
    wait_for(e, &e->send_fwd[s]);
    wait_for(e, &e->send_bwd[s]);
    load_microbatch(e, batch, a, s);
    ops_timer_start(&e->times->busy);
    /* the last stage's head runs its backward in the forward */
    model_forward(e->m, a.chunk, s, e->rows, mode, pass_of(e, a.mb, 1));
    ops_timer_stop(&e->times->busy);
    if (has_output(e, a))
        comm_link_send(e->m->grid, LINK_ACTIVATION, model_stage_output(e->m, s), e->n,
                       next_stage(e), &e->send_fwd[s]);
    e->forwarded[s] = 1;
}

static void run_backward(Exec *e, Action a, int s)
{
    wait_for(e, &e->recv_bwd[s]);
    ops_timer_start(&e->times->busy);
    /* the chunk's last microbatch: its units' gradients become final,
     * unless a split backward leaves them for the weight pass to finish */
    model_backward(e->m, a.chunk, s, e->rows, pass_of(e, a.mb, !e->m->defer_weights));
    ops_timer_stop(&e->times->busy);
    if (has_input(e, a))
        comm_link_send(e->m->grid, LINK_GRADIENT, model_stage_grad(e->m, s), e->n,
                       prev_stage(e), &e->send_bwd[s]);
}

/* The weight pass: no messages; it reads the slot's activations, the
 * gradients its backward kept, and (stage 0) the gradient at the input. */
static void run_weights(Exec *e, Action a, int s)
{
    ops_timer_start(&e->times->busy);
    model_backward_weights(e->m, a.chunk, s, e->rows, pass_of(e, a.mb, 1));
    ops_timer_stop(&e->times->busy);
}

void pipeline_create(Pipeline *p, Model *m)
{
    int n = m->n_slots;
    *p = (Pipeline){.m = m, .batch = OPS_NONE};
    p->requests = TRI_MALLOC(sizeof *p->requests * (size_t)(4 * n), "the pipeline's slots");
    p->holder = TRI_MALLOC(sizeof *p->holder * (size_t)n, "the pipeline's slots");
    p->forwarded = TRI_MALLOC((size_t)n, "the pipeline's slots");
    for (int i = 0; i < 4 * n; i++)
        p->requests[i] = COMM_REQUEST_NULL;
}

void pipeline_destroy(Pipeline *p)
{
    free(p->requests);
    free(p->holder);
    free(p->forwarded);
    ops_free(&p->batch);
    memset(p, 0, sizeof *p);
}

void pipeline_run(Pipeline *p, const Action *actions, int n, const int32_t *batch, int rows,
                  ForwardMode mode, float grad_scale, PipelineTimes *times)
{
    Model *m = p->m;
    int slots = m->n_slots;
    Exec e = {
        .p = p, .m = m, .actions = actions, .n_actions = n, .stage = m->grid->layout.pp_stage,
        .pp = m->grid->layout.pp, .v = m->n_chunks, .rows = rows, .grad_scale = grad_scale,
        .n = model_stage_elems(m, rows), .times = times,
        .recv_fwd = p->requests, .recv_bwd = p->requests + slots,
        .send_fwd = p->requests + 2 * slots, .send_bwd = p->requests + 3 * slots,
        .holder = p->holder, .forwarded = p->forwarded,
    };
    for (int i = 0; i < n; i++)
        if (actions[i].kind == ACTION_FORWARD && actions[i].mb >= e.n_mb)
            e.n_mb = actions[i].mb + 1;
    ops_tensor step_batch = batch_on_device(&e, batch);
    /* the first forwards' inputs can be received into free slots at once */
    for (int s = 0; s < slots; s++)
        give_slot(&e, s);
    int training = mode == FORWARD_TRAIN;
    /* the action after which a microbatch's slot is free again */
    ActionKind frees = training ? ACTION_BACKWARD : ACTION_FORWARD;
    for (int i = 0; i < n; i++)
        if (actions[i].kind == ACTION_WEIGHT)
            frees = ACTION_WEIGHT;
    for (int i = 0; i < n; i++) {
        Action a = actions[i];
        int s = slot_of(&e, a);
        if (a.kind == ACTION_FORWARD) {
            run_forward(&e, step_batch, a, s, mode);
            if (training)
                post_grad_receives(&e);
        } else if (a.kind == ACTION_BACKWARD) {
            run_backward(&e, a, s);
        } else {
            run_weights(&e, a, s);
        }
        if (a.kind == frees)
            give_slot(&e, s);
    }
    for (int s = 0; s < slots; s++) {
        wait_for(&e, &e.send_fwd[s]);
        wait_for(&e, &e.send_bwd[s]);
    }
}
