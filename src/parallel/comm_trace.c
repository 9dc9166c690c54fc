/*
 * comm_trace.c - the communication trace's files; see comm_trace.h.
 *
 * Each communicator this rank meets gets an entry, hung on the
 * communicator itself as an MPI attribute: a communicator freed and
 * another made in its place (even under the same handle) is a new entry,
 * and two communicators of one name and the same members (the training
 * world and the checkpoint writer's duplicate) stay apart. The entry
 * holds its ID and the count of calls made on it; the pipeline links'
 * counts are kept per kind, direction and peer beside it.
 *
 * The checkpoint writer calls comm from its own thread, so recording
 * takes a lock; only a traced run pays for it.
 */
#include "comm_trace.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "fail.h"

int comm_trace_state = -1;

static FILE *trace_file;
static pthread_mutex_t trace_lock = PTHREAD_MUTEX_INITIALIZER;
static int trace_keyval = MPI_KEYVAL_INVALID;

typedef struct TraceComm {
    char id[96];
    char name[32];
    int *members;            /* world ranks, in group order */
    int size;
    int64_t calls;           /* collectives recorded so far */
    /* [(2 kind + sends) size + peer]: messages recorded so far on each
     * link end (a kind, a direction, a peer) */
    int64_t *messages;
    struct TraceComm *next;
} TraceComm;

static TraceComm *trace_comms;   /* every entry made, for the K of an ID */

static void trace_close(void)
{
    if (trace_file)
        fclose(trace_file);
    trace_file = NULL;
}

static void open_trace_file(const char *dir)
{
    char msg[8192];
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        snprintf(msg, sizeof msg, "trident: %s=%s: cannot make the directory: %s",
                 COMM_TRACE_ENV, dir, strerror(errno));
        fail_input_abort(msg);
    }
    int world_rank, world_size;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    char path[4096];
    snprintf(path, sizeof path, "%s/rank-%05d.trace", dir, world_rank);
    /* O_EXCL: an earlier run's trace is the user's, never overwritten */
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0666);
    if (fd < 0) {
        snprintf(msg, sizeof msg, "trident: %s: cannot create %s: %s%s", COMM_TRACE_ENV,
                 path, strerror(errno),
                 errno == EEXIST ? " (an earlier trace? name a new directory)" : "");
        fail_input_abort(msg);
    }
    trace_file = fdopen(fd, "w");
    if (!trace_file)
        fail_abort("fdopen of the comm trace", __FILE__, __LINE__);
    /* a line at a time: a rank ended by the watchdog keeps its last call */
    setvbuf(trace_file, NULL, _IOLBF, 0);
    fprintf(trace_file, "# trident comm trace: world rank %d of %d\n", world_rank,
            world_size);
    atexit(trace_close);
    if (world_rank == 0)
        fprintf(stderr, "trident: tracing every communication call into %s/rank-*.trace (%s)\n",
                dir, COMM_TRACE_ENV);
}

int comm_trace_start(void)
{
    pthread_mutex_lock(&trace_lock);
    if (comm_trace_state < 0) {
        const char *dir = getenv(COMM_TRACE_ENV);
        comm_trace_state = dir && *dir;
        if (comm_trace_state)
            open_trace_file(dir);
    }
    pthread_mutex_unlock(&trace_lock);
    return comm_trace_state;
}

/* ---- communicators --------------------------------------------------------- */

static int *world_members(MPI_Comm comm, int size)
{
    MPI_Group group, world;
    MPI_Comm_group(comm, &group);
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int *mine = TRI_MALLOC((size_t)size * sizeof *mine, "the trace's group ranks");
    int *members = TRI_MALLOC((size_t)size * sizeof *members, "the trace's members");
    for (int r = 0; r < size; r++)
        mine[r] = r;
    MPI_Group_translate_ranks(group, size, mine, world, members);
    MPI_Group_free(&group);
    MPI_Group_free(&world);
    free(mine);
    return members;
}

/* How many entries of the same name and members this rank made before. */
static int congruent_before(const char *name, const int *members, int size)
{
    int k = 0;
    for (const TraceComm *c = trace_comms; c; c = c->next)
        k += strcmp(c->name, name) == 0 && c->size == size
             && memcmp(c->members, members, (size_t)size * sizeof *members) == 0;
    return k;
}

static void declare(const TraceComm *c, int rank)
{
    fprintf(trace_file, "comm %s %s %d %d ", c->id, c->name, rank, c->size);
    for (int r = 0; r < c->size; r++)
        fprintf(trace_file, "%s%d", r ? "," : "", c->members[r]);
    fputc('\n', trace_file);
}

static TraceComm *entry_of(MPI_Comm comm, const char *name)
{
    if (trace_keyval == MPI_KEYVAL_INVALID)
        MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN,
                               &trace_keyval, NULL);
    TraceComm *c;
    int found = 0;
    MPI_Comm_get_attr(comm, trace_keyval, &c, &found);
    if (found)
        return c;
    c = TRI_CALLOC(1, sizeof *c, "a traced communicator");
    snprintf(c->name, sizeof c->name, "%s", name);
    MPI_Comm_size(comm, &c->size);
    c->members = world_members(comm, c->size);
    c->messages = TRI_CALLOC(4 * (size_t)c->size, sizeof *c->messages, "the trace's links");
    int k = congruent_before(name, c->members, c->size);
    snprintf(c->id, sizeof c->id, k ? "%s@%d#%d" : "%s@%d", name, c->members[0], k);
    c->next = trace_comms;
    trace_comms = c;
    MPI_Comm_set_attr(comm, trace_keyval, c);
    int rank;
    MPI_Comm_rank(comm, &rank);
    declare(c, rank);
    return c;
}

/* ---- records ------------------------------------------------------------------ */

void comm_trace_collective(MPI_Comm comm, const char *name, const char *operation,
                           int64_t count, const char *dtype, int root, const char *detail)
{
    if (comm == MPI_COMM_NULL)
        return;
    pthread_mutex_lock(&trace_lock);
    TraceComm *c = entry_of(comm, name);
    char at[16] = "-";
    if (root >= 0)
        snprintf(at, sizeof at, "%d", root);
    fprintf(trace_file, "coll %s %" PRId64 " %s n=%" PRId64 " %s root=%s %s\n", c->id,
            c->calls++, operation, count, dtype, at, detail ? detail : "-");
    pthread_mutex_unlock(&trace_lock);
}

static void print_counts(const char *label, const int64_t *counts, int n)
{
    fprintf(trace_file, " %s=", label);
    for (int r = 0; r < n; r++)
        fprintf(trace_file, "%s%" PRId64, r ? "," : "", counts[r]);
}

void comm_trace_exchange(MPI_Comm comm, const char *name, const char *operation,
                         const char *dtype, const int64_t *send_counts,
                         const int64_t *recv_counts)
{
    if (comm == MPI_COMM_NULL)
        return;
    pthread_mutex_lock(&trace_lock);
    TraceComm *c = entry_of(comm, name);
    int64_t seq = c->calls++;
    fprintf(trace_file, "coll %s %" PRId64 " %s n=%d %s root=- a2a\n", c->id, seq, operation,
            c->size, dtype);
    fprintf(trace_file, "a2a %s %" PRId64, c->id, seq);
    print_counts("send", send_counts, c->size);
    print_counts("recv", recv_counts, c->size);
    fputc('\n', trace_file);
    pthread_mutex_unlock(&trace_lock);
}

void comm_trace_message(MPI_Comm comm, int sends, CommLink kind, int64_t count,
                        const char *dtype, int peer)
{
    if (comm == MPI_COMM_NULL)
        return;
    pthread_mutex_lock(&trace_lock);
    TraceComm *c = entry_of(comm, comm_group_name(COMM_PP));
    if (peer < 0 || peer >= c->size)
        fail_abort("comm trace: a pipeline peer outside the pp group", __FILE__, __LINE__);
    int k = kind == LINK_GRADIENT;
    int64_t *seq = &c->messages[(2 * k + (sends != 0)) * c->size + peer];
    fprintf(trace_file, "%s %s %" PRId64 " %s %d n=%" PRId64 " %s\n", sends ? "send" : "recv",
            c->id, (*seq)++, k ? "gradient" : "activation", peer, count, dtype);
    pthread_mutex_unlock(&trace_lock);
}

void comm_trace_split(const int *counts, int n, char *out, int size)
{
    uint64_t h = 14695981039346656037ULL; /* FNV-1a over the counts' values */
    for (int i = 0; i < n; i++) {
        uint64_t v = (uint64_t)(int64_t)counts[i];
        for (int b = 0; b < 8; b++) {
            h ^= (v >> (8 * b)) & 0xff;
            h *= 1099511628211ULL;
        }
    }
    snprintf(out, (size_t)size, "split=%016" PRIx64, h);
}
