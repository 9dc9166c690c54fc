/*
 * pipeline.c - the one executor for every schedule; see pipeline.h.
 *
 * Deadlock freedom: every send is nonblocking, and each receive is posted
 * as soon as its buffer is free (a forward input when its slot's previous
 * microbatch has finished its last pass, the backward or, in schedules
 * that have one, the weight pass; a backward gradient right after the
 * forward of its microbatch), so a stage only ever blocks waiting for data
 * that its neighbour's own schedule is bound to produce. Message tags are
 * 2*mb (activations) and 2*mb+1 (gradients); MPI's ordering per
 * (source, tag) keeps successive steps apart.
 */
#include "pipeline.h"

#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "fail.h"

typedef struct {
    Model *m;
    int stage, pp, rows;
    int n_mb;                     /* microbatches in this step */
    int64_t n;                    /* elements of one (rows,T,C) message */
    MPI_Request *recv_fwd, *recv_bwd, *send_fwd, *send_bwd;  /* per slot */
    PipelineTimes *times;
} Exec;

static int slot_of(const Exec *e, int mb) { return mb % e->m->n_slots; }

/* Waits for a message, timed on the device (a GPU's idle time, ops.h). */
static void wait_for(Exec *e, MPI_Request *req)
{
    if (*req == MPI_REQUEST_NULL)
        return;
    ops_timer_start(&e->times->wait);
    comm_wait(req);
    ops_timer_stop(&e->times->wait);
}

static void post_recv_forward(Exec *e, int mb)
{
    if (e->stage == 0)
        return;
    int s = slot_of(e, mb);
    comm_irecv(e->m->grid, COMM_PP, model_stage_input(e->m, s), e->n, e->stage - 1,
               2 * mb, &e->recv_fwd[s]);
}

static void post_recv_backward(Exec *e, int mb)
{
    if (e->stage == e->pp - 1)
        return;
    int s = slot_of(e, mb);
    /* the gradient buffer may still be going out to the previous stage */
    wait_for(e, &e->send_bwd[s]);
    comm_irecv(e->m->grid, COMM_PP, model_stage_grad(e->m, s), e->n, e->stage + 1,
               2 * mb + 1, &e->recv_bwd[s]);
}

/* Splits microbatch mb of the (host) batch into the slot's tokens and
 * targets, wherever the model's tensors live. */
static void load_microbatch(Exec *e, const int32_t *batch, int mb, int s)
{
    Model *m = e->m;
    int T = m->T;
    for (int b = 0; b < e->rows; b++) {
        int32_t *row = (int32_t *)batch + ((int64_t)mb * e->rows + b) * (T + 1);
        if (m->is_first)
            ops_copy(ops_view(m->tokens[s], (int64_t)b * T, T),
                     (ops_tensor){row, T, OPS_I32, OPS_CPU});
        if (m->is_last)
            ops_copy(ops_view(m->targets[s], (int64_t)b * T, T),
                     (ops_tensor){row + 1, T, OPS_I32, OPS_CPU});
    }
}

static void run_forward(Exec *e, const int32_t *batch, int mb, ForwardMode mode)
{
    int s = slot_of(e, mb);
    e->m->final_microbatch = mb == e->n_mb - 1; /* the last stage's head */
    wait_for(e, &e->recv_fwd[s]);
    /* buffers this forward overwrites may still be going out */
    wait_for(e, &e->send_fwd[s]);
    wait_for(e, &e->send_bwd[s]);
    load_microbatch(e, batch, mb, s);
    ops_timer_start(&e->times->busy);
    model_forward(e->m, s, e->rows, mode);
    ops_timer_stop(&e->times->busy);
    if (e->stage < e->pp - 1)
        comm_isend(e->m->grid, COMM_PP, model_stage_output(e->m, s), e->n, e->stage + 1,
                   2 * mb, &e->send_fwd[s]);
}

static void run_backward(Exec *e, int mb)
{
    int s = slot_of(e, mb);
    /* a split backward leaves gradients for the weight pass to finish */
    e->m->final_microbatch = mb == e->n_mb - 1 && !e->m->defer_weights;
    wait_for(e, &e->recv_bwd[s]);
    ops_timer_start(&e->times->busy);
    model_backward(e->m, s, e->rows);
    ops_timer_stop(&e->times->busy);
    if (e->stage > 0)
        comm_isend(e->m->grid, COMM_PP, model_stage_grad(e->m, s), e->n, e->stage - 1,
                   2 * mb + 1, &e->send_bwd[s]);
}

/* The weight pass: no messages; it reads the slot's activations, the
 * gradients its backward kept, and (stage 0) the gradient at the input. */
static void run_weights(Exec *e, int mb)
{
    e->m->final_microbatch = mb == e->n_mb - 1;
    ops_timer_start(&e->times->busy);
    model_backward_weights(e->m, slot_of(e, mb), e->rows);
    ops_timer_stop(&e->times->busy);
}

/* Four request arrays of n_slots, kept in the model so that steps do not
 * allocate; every request is complete (MPI_REQUEST_NULL) between steps. */
static MPI_Request *requests(Model *m, int which)
{
    int n = m->n_slots;
    if (!m->requests) {
        m->requests = malloc(sizeof *m->requests * (size_t)(4 * n));
        if (!m->requests)
            fail_abort("out of memory", __FILE__, __LINE__);
        for (int i = 0; i < 4 * n; i++)
            m->requests[i] = MPI_REQUEST_NULL;
    }
    return m->requests + which * n;
}

void pipeline_run(Model *m, const Action *actions, int n, const int32_t *batch,
                  int rows, ForwardMode mode, PipelineTimes *times)
{
    int slots = m->n_slots;
    Exec e = {
        .m = m, .stage = m->grid->pp_stage, .pp = m->grid->pp, .rows = rows,
        .n = (int64_t)rows * m->T * m->C,
        .recv_fwd = requests(m, 0), .recv_bwd = requests(m, 1),
        .send_fwd = requests(m, 2), .send_bwd = requests(m, 3), .times = times,
    };
    int n_mb = 0;
    for (int i = 0; i < n; i++)
        if (actions[i].kind == ACTION_FORWARD)
            n_mb++;
    e.n_mb = n_mb;
    /* the first forwards' inputs can be received into free slots at once */
    for (int mb = 0; mb < n_mb && mb < slots; mb++)
        post_recv_forward(&e, mb);
    int training = mode == FORWARD_TRAIN;
    /* the action after which a microbatch's slot is free again */
    ActionKind frees = training ? ACTION_BACKWARD : ACTION_FORWARD;
    for (int i = 0; i < n; i++)
        if (actions[i].kind == ACTION_WEIGHT)
            frees = ACTION_WEIGHT;
    for (int i = 0; i < n; i++) {
        int mb = actions[i].mb;
        if (actions[i].kind == ACTION_FORWARD) {
            run_forward(&e, batch, mb, mode);
            if (training)
                post_recv_backward(&e, mb);
        } else if (actions[i].kind == ACTION_BACKWARD) {
            run_backward(&e, mb);
        } else {
            run_weights(&e, mb);
        }
        if (actions[i].kind == frees && mb + slots < n_mb)
            post_recv_forward(&e, mb + slots);
    }
    for (int s = 0; s < slots; s++) {
        wait_for(&e, &e.send_fwd[s]);
        wait_for(&e, &e.send_bwd[s]);
    }
}
