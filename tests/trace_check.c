/*
 * trace_check.c - proves from a communication trace (TRIDENT_COMM_TRACE,
 * src/parallel/comm_trace.h) that the ranks of a run agreed on what they
 * said to each other:
 *
 *   - every world rank 0 .. N-1 left a file, and they agree on N;
 *   - on each communicator, every member issued the same sequence of
 *     collectives (operation, count, dtype, root, reduction or split), each
 *     numbered in turn;
 *   - on each pipeline link (a communicator, a kind, a sending and a
 *     receiving rank), the sender's sends are the receiver's receives
 *     (count, dtype, order);
 *   - in each all-to-all (an a2a line after its coll line), what rank i
 *     sent rank j is what j received from i, for every pair.
 *
 * Usage: trace_check DIR. Exit 0 and one line of totals when all holds;
 * exit 1 and, for each communicator or link that fails, one line naming
 * it, its ranks and the first call where they differ. Exit 2 when the
 * files cannot be read or parsed.
 *
 * A test tool, not part of trident: plain C and POSIX, so that it runs
 * wherever the trace was written, a cluster's login node included.
 */
#define _POSIX_C_SOURCE 200809L /* strdup */

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ID_LEN = 96, SIG_LEN = 192 };

typedef struct {
    long seq;                /* the number the rank gave the call */
    char sig[SIG_LEN];       /* the rest of its line: what must match */
} Call;

typedef struct {
    Call *v;
    long n, cap;
} Calls;

/* One rank's counts in one all-to-all: per group rank, sent and received. */
typedef struct {
    long seq;
    long long *send, *recv;
} Exchange;

typedef struct {
    Exchange *v;
    long n, cap;
} Exchanges;

typedef struct {
    char id[ID_LEN];
    char *members;           /* as the first rank that declared it wrote them */
    int size;
    int *world;              /* [size]: each member's world rank */
    int *declared;           /* [size]: whether that member declared it */
    Calls *calls;            /* [size]: each member's collectives */
    Exchanges *a2a;          /* [size]: each member's all-to-all counts */
} Comm;

typedef struct {
    Comm *comm;
    char kind[16];
    int from, to;            /* ranks in comm */
    Calls sent, received;
} Link;

static Comm **comms;     /* each apart: links and memberships point at them */
static int n_comms;
static Link *links;
static int n_links;
static int failures;

static void *grow(void *p, long n, long *cap, size_t size)
{
    if (n < *cap)
        return p;
    *cap = *cap ? 2 * *cap : 16;
    p = realloc(p, (size_t)*cap * size);
    if (!p) {
        fprintf(stderr, "trace_check: out of memory\n");
        exit(2);
    }
    return p;
}

static void push(Calls *c, long seq, const char *sig)
{
    c->v = grow(c->v, c->n, &c->cap, sizeof *c->v);
    c->v[c->n].seq = seq;
    snprintf(c->v[c->n].sig, SIG_LEN, "%s", sig);
    c->n++;
}

static _Noreturn void bad_file(const char *path, long line, const char *why)
{
    fprintf(stderr, "trace_check: %s:%ld: %s\n", path, line, why);
    exit(2);
}

static Comm *find_comm(const char *id)
{
    for (int i = 0; i < n_comms; i++)
        if (strcmp(comms[i]->id, id) == 0)
            return comms[i];
    return NULL;
}

/* "0,2,4" into world[size]; 0 when it is not size ranks. */
static int parse_members(const char *s, int *world, int size)
{
    int n = 0;
    for (const char *p = s; *p && n < size; n++) {
        char *end;
        world[n] = (int)strtol(p, &end, 10);
        if (end == p)
            return 0;
        p = *end == ',' ? end + 1 : end;
    }
    return n == size;
}

static Comm *declare(const char *path, long line, const char *id, int size,
                     const char *members)
{
    Comm *c = find_comm(id);
    if (c) {
        if (c->size != size || strcmp(c->members, members) != 0)
            bad_file(path, line, "a communicator declared with other members than another rank gave it");
        return c;
    }
    static long cap;
    comms = grow(comms, n_comms, &cap, sizeof *comms);
    c = calloc(1, sizeof *c);
    if (!c)
        bad_file(path, line, "out of memory");
    comms[n_comms++] = c;
    snprintf(c->id, sizeof c->id, "%s", id);
    c->members = strdup(members);
    c->size = size;
    c->world = calloc((size_t)size, sizeof *c->world);
    c->declared = calloc((size_t)size, sizeof *c->declared);
    c->calls = calloc((size_t)size, sizeof *c->calls);
    c->a2a = calloc((size_t)size, sizeof *c->a2a);
    if (!c->members || !c->world || !c->declared || !c->calls || !c->a2a || size < 1
        || !parse_members(members, c->world, size))
        bad_file(path, line, "a communicator's members do not parse");
    return c;
}

static Link *find_link(Comm *c, const char *kind, int from, int to)
{
    for (int i = 0; i < n_links; i++)
        if (links[i].comm == c && strcmp(links[i].kind, kind) == 0 && links[i].from == from
            && links[i].to == to)
            return &links[i];
    static long cap;
    links = grow(links, n_links, &cap, sizeof *links);
    Link *l = &links[n_links++];
    memset(l, 0, sizeof *l);
    l->comm = c;
    snprintf(l->kind, sizeof l->kind, "%s", kind);
    l->from = from;
    l->to = to;
    return l;
}

/* "LABEL=C0,C1,..." of size counts at *p into a new array; NULL when it
 * does not parse. */
static long long *parse_counts(const char **p, const char *label, int size)
{
    size_t n = strlen(label);
    while (**p == ' ')
        (*p)++;
    if (strncmp(*p, label, n) != 0 || (*p)[n] != '=')
        return NULL;
    *p += n + 1;
    long long *v = calloc((size_t)size, sizeof *v);
    for (int r = 0; v && r < size; r++) {
        char *end;
        v[r] = strtoll(*p, &end, 10);
        if (end == *p || (r + 1 < size && *end != ',')) {
            free(v);
            return NULL;
        }
        *p = *end == ',' ? end + 1 : end;
    }
    return v;
}

/* An a2a line's counts, after its number, for member me of c. */
static void read_exchange(const char *path, long line, Comm *c, int me, long seq,
                          const char *rest)
{
    Exchanges *x = &c->a2a[me];
    x->v = grow(x->v, x->n, &x->cap, sizeof *x->v);
    Exchange *e = &x->v[x->n++];
    e->seq = seq;
    e->send = parse_counts(&rest, "send", c->size);
    e->recv = e->send ? parse_counts(&rest, "recv", c->size) : NULL;
    if (!e->recv)
        bad_file(path, line, "an a2a line wants send=C0,... recv=C0,... (a count per member)");
}

/* ---- reading one rank's file ------------------------------------------------ */

/* This rank's place in each communicator it declared. */
typedef struct {
    Comm *comm;
    int rank;
} Membership;

static int my_rank_in(const Membership *mine, int n, const Comm *c)
{
    for (int i = 0; i < n; i++)
        if (mine[i].comm == c)
            return mine[i].rank;
    return -1;
}

static void read_line(const char *path, long line, char *text, int world_rank,
                      Membership **mine, int *n_mine, long *cap)
{
    char what[8], id[ID_LEN];
    long seq;
    int used = 0;
    text[strcspn(text, "\n")] = '\0';
    if (text[0] == '#' || text[0] == '\0')
        return;
    if (sscanf(text, "%7s %95s %n", what, id, &used) != 2)
        bad_file(path, line, "not a trace line");
    if (strcmp(what, "comm") == 0) {
        char name[32], members[4096];
        int rank, size;
        if (sscanf(text + used, "%31s %d %d %4095s", name, &rank, &size, members) != 4)
            bad_file(path, line, "a comm line wants ID NAME RANK SIZE MEMBERS");
        Comm *c = declare(path, line, id, size, members);
        if (rank < 0 || rank >= size || c->world[rank] != world_rank)
            bad_file(path, line, "the rank's place in the communicator is not its own");
        c->declared[rank] = 1;
        *mine = grow(*mine, *n_mine, cap, sizeof **mine);
        (*mine)[(*n_mine)++] = (Membership){c, rank};
        return;
    }
    Comm *c = find_comm(id);
    int me = c ? my_rank_in(*mine, *n_mine, c) : -1;
    if (me < 0)
        bad_file(path, line, "a call on a communicator this rank never declared");
    const char *rest = text + used;
    int n = 0;
    if (sscanf(rest, "%ld %n", &seq, &n) != 1)
        bad_file(path, line, "a call without its number");
    rest += n;
    if (strcmp(what, "coll") == 0) {
        push(&c->calls[me], seq, rest);
        return;
    }
    if (strcmp(what, "a2a") == 0) {
        read_exchange(path, line, c, me, seq, rest);
        return;
    }
    char kind[16];
    int peer;
    if (sscanf(rest, "%15s %d %n", kind, &peer, &n) != 2 || peer < 0 || peer >= c->size)
        bad_file(path, line, "a message wants KIND PEER n=COUNT DTYPE");
    if (strcmp(what, "send") == 0)
        push(&find_link(c, kind, me, peer)->sent, seq, rest + n);
    else if (strcmp(what, "recv") == 0)
        push(&find_link(c, kind, peer, me)->received, seq, rest + n);
    else
        bad_file(path, line, "not a comm, coll, a2a, send or recv line");
}

/* Reads one file; returns the world size its header states. */
static int read_file(const char *path, int *world_rank)
{
    FILE *f = fopen(path, "r");
    if (!f)
        bad_file(path, 0, "cannot open");
    char text[8192];
    int size;
    if (!fgets(text, sizeof text, f)
        || sscanf(text, "# trident comm trace: world rank %d of %d", world_rank, &size) != 2)
        bad_file(path, 1, "not a trident comm trace (its first line)");
    Membership *mine = NULL;
    int n_mine = 0;
    long cap = 0;
    for (long line = 2; fgets(text, sizeof text, f); line++)
        read_line(path, line, text, *world_rank, &mine, &n_mine, &cap);
    free(mine);
    fclose(f);
    return size;
}

/* ---- checking ---------------------------------------------------------------- */

static void describe(const Calls *c, long i, const char *verb, char *out, size_t size)
{
    if (i < c->n)
        snprintf(out, size, "%s #%ld %s", verb, c->v[i].seq, c->v[i].sig);
    else
        snprintf(out, size, "%s nothing (it has %ld)", verb, c->n);
}

static int same(const Calls *a, const Calls *b, long i)
{
    if (i >= a->n || i >= b->n)
        return i >= a->n && i >= b->n;
    return a->v[i].seq == b->v[i].seq && strcmp(a->v[i].sig, b->v[i].sig) == 0;
}

/* The first place where a and b differ, or -1; a call numbered other
 * than its place is a difference too (a call lost on every rank alike
 * shows there). */
static long first_difference(const Calls *a, const Calls *b)
{
    long n = a->n > b->n ? a->n : b->n;
    for (long i = 0; i < n; i++)
        if (!same(a, b, i) || a->v[i].seq != i)
            return i;
    return -1;
}

static void check_comm(const Comm *c)
{
    char a[SIG_LEN + 64], b[SIG_LEN + 64];
    for (int m = 1; m < c->size; m++) {
        long i = first_difference(&c->calls[0], &c->calls[m]);
        if (i < 0 && (c->declared[m] || c->calls[0].n == 0))
            continue;   /* the same calls (or a communicator no one called) */
        i = i < 0 ? 0 : i;
        describe(&c->calls[0], i, "issued", a, sizeof a);
        describe(&c->calls[m], i, "issued", b, sizeof b);
        printf("trace_check: communicator %s (world ranks %s): call %ld differs: "
               "world rank %d (its rank 0) %s; world rank %d (its rank %d) %s%s\n",
               c->id, c->members, i, c->world[0], a, c->world[m], m, b,
               c->declared[m] ? "" : " (it never used this communicator)");
        failures++;
        return;
    }
    /* the members agree: a gap in the numbers is then on every one alike */
    long i = first_difference(&c->calls[0], &c->calls[0]);
    if (i < 0)
        return;
    describe(&c->calls[0], i, "issued", a, sizeof a);
    printf("trace_check: communicator %s (world ranks %s): call %ld is misnumbered on "
           "every member: world rank %d (its rank 0) %s\n",
           c->id, c->members, i, c->world[0], a);
    failures++;
}

static void check_link(const Link *l)
{
    long i = first_difference(&l->sent, &l->received);
    if (i < 0)
        return;
    char a[SIG_LEN + 64], b[SIG_LEN + 64];
    describe(&l->sent, i, "sent", a, sizeof a);
    describe(&l->received, i, "received", b, sizeof b);
    printf("trace_check: link %s %s from its rank %d to %d (world ranks %d -> %d): "
           "message %ld differs: world rank %d %s; world rank %d %s\n",
           l->comm->id, l->kind, l->from, l->to, l->comm->world[l->from],
           l->comm->world[l->to], i, l->comm->world[l->from], a, l->comm->world[l->to], b);
    failures++;
}

/* Every all-to-all's counts pair up: member i's k-th a2a line says it
 * sent member j what j's k-th says it received from i. (Whether each
 * member made the same all-to-alls is check_comm's: the coll lines.) */
static void check_exchanges(const Comm *c)
{
    for (int i = 0; i < c->size; i++) {
        for (int j = 0; j < c->size; j++) {
            const Exchanges *a = &c->a2a[i], *b = &c->a2a[j];
            if (a->n != b->n) {
                printf("trace_check: communicator %s (world ranks %s): world rank %d (its rank "
                       "%d) made %ld all-to-alls, world rank %d (its rank %d) %ld\n", c->id,
                       c->members, c->world[i], i, a->n, c->world[j], j, b->n);
                failures++;
                return;
            }
            for (long k = 0; k < a->n; k++) {
                if (a->v[k].send[j] == b->v[k].recv[i] && a->v[k].seq == b->v[k].seq)
                    continue;
                printf("trace_check: communicator %s (world ranks %s): all-to-all #%ld: world "
                       "rank %d (its rank %d) sent %lld elements to its rank %d, but world rank "
                       "%d (its rank %d) received %lld from its rank %d (#%ld)\n", c->id,
                       c->members, a->v[k].seq, c->world[i], i, a->v[k].send[j], j,
                       c->world[j], j, b->v[k].recv[i], i, b->v[k].seq);
                failures++;
                return;
            }
        }
    }
}

static int is_trace_file(const char *name)
{
    size_t n = strlen(name);
    return strncmp(name, "rank-", 5) == 0 && n > 6 && strcmp(name + n - 6, ".trace") == 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: trace_check DIR (a TRIDENT_COMM_TRACE directory)\n");
        return 2;
    }
    DIR *d = opendir(argv[1]);
    if (!d) {
        perror(argv[1]);
        return 2;
    }
    int world_size = -1, files = 0;
    char seen[65536] = {0};
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!is_trace_file(e->d_name))
            continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", argv[1], e->d_name);
        int rank, size = read_file(path, &rank);
        if ((world_size >= 0 && size != world_size) || size < 1 || size > (int)sizeof seen
            || rank < 0 || rank >= size || seen[rank])
            bad_file(path, 1, "its world rank or size disagrees with the other files");
        world_size = size;
        seen[rank] = 1;
        files++;
    }
    closedir(d);
    if (files == 0 || files != world_size) {
        printf("trace_check: %s: %d trace files for a world of %d ranks\n", argv[1], files,
               world_size);
        return 1;
    }
    long calls = 0, messages = 0;
    for (int i = 0; i < n_comms; i++) {
        check_comm(comms[i]);
        check_exchanges(comms[i]);
        for (int m = 0; m < comms[i]->size; m++)
            calls += comms[i]->calls[m].n;
    }
    for (int i = 0; i < n_links; i++) {
        check_link(&links[i]);
        messages += links[i].sent.n;
    }
    if (failures)
        return 1;
    printf("trace_check: %s: %d ranks agree: %d communicators, %ld collective calls, "
           "%d links, %ld messages\n",
           argv[1], world_size, n_comms, calls, n_links, messages);
    return 0;
}
