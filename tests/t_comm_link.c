/*
 * t_comm_link.c - the pipeline links' ring arithmetic (src/parallel/comm_link.c),
 * on the CPU: for rings of 2 to 9 stages, every link end meets its
 * partner (the other stage's complementary link names this stage, carries
 * the same kind, has the other role and the same key), activations go to
 * the next stage and gradients to the previous, each key names exactly one
 * communicator; and, in a model of NCCL's set-up where each rank waits in
 * its current link until the peer reaches the same link, the key order
 * lets every rank through while a stage's own index order deadlocks (so
 * the model can fail). The NCCL calls that use this order are
 * src/parallel/comm_nccl.c's and need GPUs.
 */
#include "comm_link.h"

#include "tap.h"

#define MAX_PP 9

static Link partner_link(Link l)
{
    switch (l) {
    case LINK_ACT_OUT: return LINK_ACT_IN;
    case LINK_ACT_IN: return LINK_ACT_OUT;
    case LINK_GRAD_OUT: return LINK_GRAD_IN;
    default: return LINK_GRAD_OUT;
    }
}

static void ends_meet(void)
{
    int ok = 1, flows = 1, keys = 1;
    for (int pp = 2; pp <= MAX_PP; pp++) {
        int ends_of_key[2 * MAX_PP] = {0};
        for (int s = 0; s < pp; s++) {
            for (int l = 0; l < N_LINKS; l++) {
                LinkEnd e = comm_link_end((Link)l, s, pp);
                LinkEnd p = comm_link_end(partner_link((Link)l), e.peer, pp);
                ok &= p.peer == s && p.kind == e.kind && p.sends == !e.sends && p.key == e.key;
                int to = e.kind == LINK_ACTIVATION ? (s + 1) % pp : (s + pp - 1) % pp;
                int from = e.kind == LINK_ACTIVATION ? (s + pp - 1) % pp : (s + 1) % pp;
                flows &= e.peer == (e.sends ? to : from);
                keys &= e.key >= 0 && e.key < 2 * pp;
                if (e.key >= 0 && e.key < 2 * pp)
                    ends_of_key[e.key]++;
            }
        }
        for (int k = 0; k < 2 * pp; k++)
            keys &= ends_of_key[k] == 2;
    }
    tap_ok(ok, "pp 2..9: each link end's partner names it back, same kind and key, the other role");
    tap_ok(flows, "activations go to the next stage in the ring, gradients to the previous");
    tap_ok(keys, "each key in [0, 2 pp) names one communicator: exactly two ends");
    tap_ok(comm_link_of(LINK_ACTIVATION, 1) == LINK_ACT_OUT &&
           comm_link_of(LINK_ACTIVATION, 0) == LINK_ACT_IN &&
           comm_link_of(LINK_GRADIENT, 1) == LINK_GRAD_OUT &&
           comm_link_of(LINK_GRADIENT, 0) == LINK_GRAD_IN,
           "comm_link_of: a message's kind and direction pick its link");
}

/* Every stage takes its links in order[s]; a stage at a link waits until
 * the link's other end is at it too, then both move on (NCCL's creation,
 * first connection and teardown each wait for the peer). 1 when every
 * stage gets through all four. */
static int all_get_through(int pp, Link order[][N_LINKS])
{
    int at[MAX_PP] = {0};
    for (int moved = 1; moved;) {
        moved = 0;
        for (int s = 0; s < pp; s++) {
            if (at[s] == N_LINKS)
                continue;
            LinkEnd e = comm_link_end(order[s][at[s]], s, pp);
            int p = e.peer;
            if (at[p] < N_LINKS && comm_link_end(order[p][at[p]], p, pp).key == e.key) {
                at[s]++;
                at[p]++;
                moved = 1;
            }
        }
    }
    int all = 1;
    for (int s = 0; s < pp; s++)
        all &= at[s] == N_LINKS;
    return all;
}

static void orders(void)
{
    int keyed = 1, naive = 0, sorted = 1;
    for (int pp = 2; pp <= MAX_PP; pp++) {
        Link by_key[MAX_PP][N_LINKS], by_index[MAX_PP][N_LINKS];
        for (int s = 0; s < pp; s++) {
            comm_link_order(s, pp, by_key[s]);
            for (int i = 0; i < N_LINKS; i++) {
                by_index[s][i] = (Link)i;
                if (i > 0)
                    sorted &= comm_link_end(by_key[s][i - 1], s, pp).key <
                              comm_link_end(by_key[s][i], s, pp).key;
            }
        }
        keyed &= all_get_through(pp, by_key);
        naive |= all_get_through(pp, by_index);
    }
    tap_ok(sorted, "comm_link_order: a stage's four links by increasing key");
    tap_ok(keyed, "pp 2..9: taking the links in key order, every stage gets through");
    tap_ok(!naive, "pp 2..9: in each stage's own index order the ring deadlocks (the model can fail)");
}

int main(int argc, char **argv)
{
    tap_init(&argc, &argv);
    tap_plan(7);
    ends_meet();
    orders();
    return tap_done();
}
