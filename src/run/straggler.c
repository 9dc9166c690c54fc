/*
 * straggler.c - the slowest rank against the median; see straggler.h.
 *
 * The lower median (element (n - 1) / 2 of the sorted times) is used, so
 * that with two ranks the median is the faster one and a rank twice as
 * slow as its partner is seen.
 */
#include "straggler.h"

#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "comm.h"
#include "fail.h"

typedef struct {
    double busy_ms;
    char host[56];
} RankTime;

void straggler_add_step(Straggler *s, double step_s, double blocked_s)
{
    double busy = step_s - blocked_s;
    s->busy_s += busy > 0 ? busy : 0;
    s->steps++;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Rank 0: counts the reports in a row where the same rank is behind, and
 * warns once when they reach STRAGGLER_REPORTS. */
static void judge(Straggler *s, const StragglerReport *r, const char *host, FILE *warn)
{
    int behind = r->slowest_ms > STRAGGLER_RATIO * r->median_ms
                 && r->slowest_ms - r->median_ms > STRAGGLER_MIN_MS;
    if (!behind) {
        s->behind = 0;
        return;
    }
    s->behind = s->behind_rank == r->slowest_rank ? s->behind + 1 : 1;
    s->behind_rank = r->slowest_rank;
    if (s->behind == STRAGGLER_REPORTS && warn)
        fprintf(warn, "warning: straggler: rank %d (%s) computed %.1f ms per step against a median"
                " of %.1f ms over the ranks (%.1fx) for %d logged steps in a row; the others wait"
                " for it: a slow or busy node, a throttled device, or unequal pipeline stages\n",
                r->slowest_rank, host, r->slowest_ms, r->median_ms,
                r->median_ms > 0 ? r->slowest_ms / r->median_ms : 0.0, STRAGGLER_REPORTS);
}

void straggler_report(Straggler *s, const Grid *g, StragglerReport *out, FILE *warn)
{
    RankTime mine = {.busy_ms = s->steps > 0 ? 1e3 * s->busy_s / s->steps : 0.0};
    snprintf(mine.host, sizeof mine.host, "%s", fail_host());
    s->busy_s = 0.0;
    s->steps = 0;
    int size = g->layout.size;
    RankTime *all = g->layout.rank == 0 ? TRI_MALLOC(sizeof *all * (size_t)size, "the ranks' times") : NULL;
    double *sorted = g->layout.rank == 0 ? TRI_MALLOC(sizeof *sorted * (size_t)size, "the ranks' times") : NULL;
    comm_gather_bytes(g, COMM_WORLD, &mine, sizeof mine, all, 0);
    *out = (StragglerReport){.slowest_rank = -1};
    if (g->layout.rank == 0) {
        int slowest = 0;
        for (int r = 0; r < size; r++) {
            sorted[r] = all[r].busy_ms;
            if (all[r].busy_ms > all[slowest].busy_ms)
                slowest = r;
        }
        qsort(sorted, (size_t)size, sizeof *sorted, by_value);
        *out = (StragglerReport){sorted[(size - 1) / 2], all[slowest].busy_ms, slowest};
        judge(s, out, all[slowest].host, warn);
    }
    free(all);
    free(sorted);
}
