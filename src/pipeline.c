/*
 * pipeline.c - the one executor for every schedule; see pipeline.h.
 *
 * Deadlock freedom: every send is nonblocking, and each receive is posted
 * as soon as its buffer is free (a forward input when its slot's previous
 * microbatch has finished backward, a backward gradient right after the
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
#include "timer.h"

typedef struct {
    Model *m;
    int stage, pp, rows;
    int n_mb;                     /* microbatches in this step */
    int64_t n;                    /* elements of one message: the stage's
                                     rows*T*C, or its slice of them */
    MPI_Request *recv_fwd, *recv_bwd, *send_fwd, *send_bwd;  /* per slot */
    PipelineTimes *times;
} Exec;

static int slot_of(const Exec *e, int mb) { return mb % e->m->n_slots; }

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
    e->times->wait += comm_wait(&e->send_bwd[s]);
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
    e->times->wait += comm_wait(&e->recv_fwd[s]);
    /* buffers this forward overwrites may still be going out */
    e->times->wait += comm_wait(&e->send_fwd[s]);
    e->times->wait += comm_wait(&e->send_bwd[s]);
    load_microbatch(e, batch, mb, s);
    double t0 = timer_now();
    model_forward(e->m, s, e->rows, mode);
    e->times->busy += timer_now() - t0;
    if (e->stage < e->pp - 1)
        comm_isend(e->m->grid, COMM_PP, model_stage_output(e->m, s), e->n, e->stage + 1,
                   2 * mb, &e->send_fwd[s]);
}

static void run_backward(Exec *e, int mb)
{
    int s = slot_of(e, mb);
    e->m->final_microbatch = mb == e->n_mb - 1;
    e->times->wait += comm_wait(&e->recv_bwd[s]);
    double t0 = timer_now();
    model_backward(e->m, s, e->rows);
    e->times->busy += timer_now() - t0;
    if (e->stage > 0)
        comm_isend(e->m->grid, COMM_PP, model_stage_grad(e->m, s), e->n, e->stage - 1,
                   2 * mb + 1, &e->send_bwd[s]);
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
        .n = model_stage_elems(m, rows),
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
    for (int i = 0; i < n; i++) {
        int mb = actions[i].mb;
        if (actions[i].kind == ACTION_FORWARD) {
            run_forward(&e, batch, mb, mode);
            if (training)
                post_recv_backward(&e, mb);
            else if (mb + slots < n_mb) /* no backward frees the slot */
                post_recv_forward(&e, mb + slots);
        } else {
            run_backward(&e, mb);
            if (mb + slots < n_mb)
                post_recv_forward(&e, mb + slots);
        }
    }
    for (int s = 0; s < slots; s++) {
        times->wait += comm_wait(&e.send_fwd[s]);
        times->wait += comm_wait(&e.send_bwd[s]);
    }
}
