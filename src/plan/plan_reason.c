/*
 * plan_reason.c - why a search picked cp > 1 or ep > 1; see
 * plan_reason.h.
 */
#include "plan_reason.h"

/* The reason after "context parallelism, cp N (...): " or its expert
 * twin: `dim` ("cp", "ep") at 1 is invalid, does not fit, or fits but
 * does worse. */
static void print_why(const char *dim, double least_gib, double mem_gib, const char *better,
                      FILE *out)
{
    if (least_gib <= 0.0) /* none was valid: the batch, the rules */
        fprintf(out, "no layout at %s 1 is valid here\n", dim);
    else if (least_gib > mem_gib)
        fprintf(out, "no layout at %s 1 fits %.1f GiB, the least a rank needs there is %.2f GiB\n",
                dim, mem_gib, least_gib);
    else
        fprintf(out, "layouts at %s 1 fit %.1f GiB too, this one is %s\n", dim, mem_gib, better);
}

void plan_print_cp_reason(const Config *best, double least_cp1_gib, double mem_gib,
                          const char *better, FILE *out)
{
    int cp = best->parallel.cp;
    if (cp == 1)
        return;
    /* a rank holds seq_len / cp tokens of each sequence (plan_rank_seq_len) */
    fprintf(out, "context parallelism, cp %d (%d tokens of each %d-token sequence a rank): ", cp,
            best->model.seq_len / cp, best->model.seq_len);
    print_why("cp", least_cp1_gib, mem_gib, better, out);
}

void plan_print_ep_reason(const Config *best, double least_ep1_gib, double mem_gib,
                          const char *better, FILE *out)
{
    int ep = best->parallel.ep;
    if (ep <= 1)
        return;
    fprintf(out, "expert parallelism, ep %d (%d of the %d experts of each MoE layer a rank): ",
            ep, best->model.n_expert / ep, best->model.n_expert);
    print_why("ep", least_ep1_gib, mem_gib, better, out);
}
