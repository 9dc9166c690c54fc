/*
 * t_moe_ep.c - expert parallelism's dispatch alone (src/model/moe_ep.c),
 * on 1, 2 and 4 ranks, without a MoE model: every rank routes random
 * counts of rows to each global expert (some none, some ranks none at
 * all), each row naming its source, expert and place. Each rank can
 * recompute every rank's counts, so it knows what its experts must
 * receive and checks, over ep = 1, 2 and 4 (with dp / ep groups), with
 * one local expert and with three:
 *   - the counts exchange right: R_in and the owner's offsets;
 *   - the owner's rows are exactly the rows routed to its experts,
 *     expert-major, then by source ep rank, then in the source's order;
 *   - send then return gives back the rows sent, bit for bit;
 *   - ep = 1 is a copy (and nothing when dst is src), the offsets as given;
 * and moe_ep_max_rows's bound, dropless and with a capacity.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "config_load.h"
#include "grid.h"
#include "model.h"
#include "moe_ep.h"
#include "tap.h"

enum { WIDTH = 3 };

/* The rows world rank src routes to global expert e in trial t: 0 to 4,
 * and none at all from world rank 1 in trial 0. */
static int64_t routed(int src, int e, int t)
{
    if (t == 0 && src == 1)
        return 0;
    uint64_t h = (uint64_t)(src * 7919 + e * 104729 + t * 1299709) * 2654435761u;
    return (int64_t)((h >> 13) % 5);
}

/* Element c of row i of the rows world rank src routes to expert e: exact
 * in fp32 for the sizes here. */
static float row_value(int src, int e, int64_t i, int c, int E)
{
    return (float)(((src * E + e) * 8 + i) * WIDTH + c);
}

static ops_tensor host(float *p, int64_t n)
{
    return (ops_tensor){p, n, OPS_F32, OPS_CPU};
}

typedef struct {
    int ep, E, trial;
    const Grid *g;
    int base;        /* the world rank of ep rank 0 of this rank's ep group */
} Case;

/* This rank's rows in global expert order, and their offsets. */
static int64_t source_rows(const Case *k, int32_t *offsets, float **rows)
{
    int me = k->g->layout.rank;
    offsets[0] = 0;
    for (int e = 0; e < k->E; e++)
        offsets[e + 1] = offsets[e] + (int32_t)routed(me, e, k->trial);
    int64_t R = offsets[k->E];
    *rows = malloc(sizeof **rows * (size_t)(R * WIDTH + 1));
    for (int e = 0; e < k->E; e++)
        for (int64_t i = 0; i < offsets[e + 1] - offsets[e]; i++)
            for (int c = 0; c < WIDTH; c++)
                (*rows)[(offsets[e] + i) * WIDTH + c] = row_value(me, e, i, c, k->E);
    return R;
}

/* What this rank's experts must hold: expert-major, then source, then the
 * source's order; in_offsets as expected. Returns the count of wrong
 * values (and offsets). */
static int owner_errors(const Case *k, const float *got, int64_t R_in, const int32_t *in_off)
{
    int El = k->E / k->ep, ep_rank = k->g->layout.ep_rank, errors = 0;
    int64_t at = 0;
    for (int j = 0; j < El; j++) {
        int e = ep_rank * El + j;
        errors += in_off[j] != at;
        for (int s = 0; s < k->ep; s++)
            for (int64_t i = 0; i < routed(k->base + s, e, k->trial); i++, at++)
                for (int c = 0; c < WIDTH; c++)
                    errors += at >= R_in || got[at * WIDTH + c] != row_value(k->base + s, e, i, c, k->E);
    }
    return errors + (in_off[El] != at) + (R_in != at);
}

/* One trial of ep and E on the world: the route, the owner's rows, and
 * the round trip. */
static int dispatch(int ep, int E, int trial, const char **why)
{
    Config cfg;
    config_defaults(&cfg);
    cfg.model.n_layer = 8;
    cfg.model.n_head = 8;
    cfg.model.n_embd = 64;
    cfg.model.n_expert = E;
    cfg.model.top_k = 2;
    cfg.parallel.dp = 0;
    cfg.parallel.ep = ep;
    Grid g;
    grid_create(&g, &cfg, MPI_COMM_WORLD);
    Model m;
    memset(&m, 0, sizeof m);
    m.cfg = &cfg;
    m.grid = &g;
    Case k = {ep, E, trial, &g, g.layout.rank - g.layout.ep_rank};
    int32_t offsets[E + 1], in_off[E / ep + 1];
    float *rows;
    int64_t R = source_rows(&k, offsets, &rows);
    MoeRoute *r = moe_route_create(&m);
    int64_t R_in = moe_ep_route(&m, r, offsets, in_off);
    float *owned = calloc((size_t)(R_in * WIDTH + 1), sizeof *owned);
    float *back = calloc((size_t)(R * WIDTH + 1), sizeof *back);
    moe_ep_send(&m, r, host(owned, R_in * WIDTH), host(rows, R * WIDTH), WIDTH);
    int ok = 1;
    if (owner_errors(&k, owned, R_in, in_off)) {
        *why = "the owner's rows or offsets";
        ok = 0;
    }
    moe_ep_return(&m, r, host(back, R * WIDTH), host(owned, R_in * WIDTH), WIDTH);
    if (memcmp(back, rows, sizeof *rows * (size_t)(R * WIDTH)) != 0) {
        *why = "send then return is not the identity";
        ok = 0;
    }
    if (ep == 1 && (R_in != R || memcmp(in_off, offsets, sizeof offsets) != 0)) {
        *why = "ep = 1: R_in or in_offsets differ from the offsets";
        ok = 0;
    }
    if (ep == 1) { /* dst = src: nothing moves, nothing breaks */
        moe_ep_send(&m, r, host(rows, R * WIDTH), host(rows, R * WIDTH), WIDTH);
        ok &= owner_errors(&k, rows, R, in_off) == 0;
    }
    moe_route_destroy(r);
    free(rows);
    free(owned);
    free(back);
    grid_destroy(&g);
    return ok;
}

/* Every rank's verdict, so that all report the same. */
static int all_ok(int ok)
{
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    return ok;
}

static int max_rows(void)
{
    ModelConfig mc;
    memset(&mc, 0, sizeof mc);
    mc.n_expert = 8;
    mc.top_k = 2;
    int ok = moe_ep_max_rows(&mc, 1, 10) == 20      /* N k: k < El */
             && moe_ep_max_rows(&mc, 4, 10) == 80   /* ep N k */
             && moe_ep_max_rows(&mc, 8, 10) == 80;  /* El = 1: a token sends it one row */
    mc.moe_capacity = 1.25;                         /* ceil(1.25 x 10 x 2 / 8) = 4 */
    ok &= moe_ep_max_rows(&mc, 2, 10) == 2 * 4 * 4 && moe_ep_max_rows(&mc, 1, 10) == 8 * 4;
    return ok;
}

int main(int argc, char **argv)
{
    tap_init(&argc, &argv);
    int n = tap_size();
    tap_plan(6);
    tap_ok(max_rows(), "moe_ep_max_rows: ep N min(k, El) dropless, ep El ceil(c N k / E) capped");
    static const struct { int ep, E; } cases[] = {{1, 4}, {2, 2}, {2, 6}, {4, 4}, {4, 12}};
    for (int i = 0; i < 5; i++) {
        int ep = cases[i].ep, E = cases[i].E, ok = 1;
        const char *why = "";
        if (n % ep == 0)
            for (int t = 0; t < 3; t++)
                ok &= dispatch(ep, E, t, &why);
        ok = all_ok(ok);
        if (n % ep)
            tap_ok(1, "ep %d, %d experts # SKIP needs a multiple of %d ranks", ep, E, ep);
        else
            tap_ok(ok, "ep %d x dp/ep %d, %d experts (%d per rank), 3 random routes: counts, "
                   "owner's rows expert-major then by source, round trip%s%s", ep, n / ep, E,
                   E / ep, ok ? "" : ": ", why);
    }
    return tap_done();
}
