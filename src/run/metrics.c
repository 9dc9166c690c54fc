/*
 * metrics.c - the human line and the JSON Lines record; see metrics.h.
 *
 * A write that fails (a full disk, a quota, an I/O error) costs the
 * metrics, not the run: rank 0 warns once, naming the file and the reason,
 * stops writing the file, and training goes on (the human lines on stdout
 * still report every logged step). Stopping a run of hours because its log
 * could not be appended would lose more than it saves; the checkpoints
 * report their own write errors and do stop the run.
 */
#include "metrics.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "file_check.h"

/* Whether a line is a run's header record (make_header). */
static int is_run_header(const char *line)
{
    return strncmp(line, "{\"run\":", 7) == 0;
}

/* The 1-based number of path's last run header line; 0 if it has none
 * (a file written before headers came is one run). */
static long last_header_line(FILE *in)
{
    char line[4096];
    long n = 0, last = 0;
    while (fgets(line, sizeof line, in)) {
        n++;
        if (is_run_header(line))
            last = n;
    }
    rewind(in);
    return last;
}

/* Rewrites path (through a temporary file and a rename) keeping every
 * complete line of the runs before the last one, and of the last run its
 * header and its records of steps up to last: a resumed run drops what
 * its killed predecessor logged after the checkpoint it resumes from (it
 * logs those steps again), never another run's lines. A last line without
 * its newline is what a full disk or a killed job left half written: it
 * is dropped, or the next record would be appended onto it. A missing
 * file is fine. */
static int keep_lines_through(const char *path, long last)
{
    FILE *in = fopen(path, "r");
    if (!in)
        return errno == ENOENT ? 0 : errno;
    char tmp[4200], line[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *out = fopen(tmp, "w");
    if (!out) {
        int e = errno;
        fclose(in);
        return e;
    }
    long header = last_header_line(in), n = 0;
    while (fgets(line, sizeof line, in)) {
        long step;
        size_t len = strlen(line);
        int whole = len > 0 && line[len - 1] == '\n';
        int earlier_run = ++n <= header;
        if (whole && (earlier_run || (sscanf(line, "{\"step\":%ld", &step) == 1 && step <= last)))
            fputs(line, out);
    }
    int e = ferror(in) ? EIO : 0;
    fclose(in);
    if (ferror(out) && !e)
        e = EIO;
    if (fclose(out) != 0 && !e)
        e = errno;
    if (!e && rename(tmp, path) != 0)
        e = errno;
    if (e)
        unlink(tmp);
    return e;
}

/* Whether path is a regular file whose last byte is not a newline: a
 * record cut short, which a fresh run drops before it appends. */
static int ends_cut(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0)
        return 0;
    FILE *f = fopen(path, "r");
    int cut = f && fseek(f, -1, SEEK_END) == 0 && fgetc(f) != '\n';
    if (f)
        fclose(f);
    return cut;
}

/* Opens for writing without blocking on a FIFO that nobody reads, and
 * refuses anything but a regular file or a character device (/dev/null
 * turns the file off, /dev/full tests a full disk). */
static FILE *open_log(const char *path, char *why, size_t why_size)
{
    int flags = O_WRONLY | O_CREAT | O_APPEND;
    struct stat st;
    if (stat(path, &st) == 0 && S_ISCHR(st.st_mode)) {
        FILE *f = fopen(path, "a");
        if (!f)
            snprintf(why, why_size, "%s", strerror(errno));
        return f;
    }
    int fd = file_open_regular(path, flags, why, why_size);
    if (fd < 0)
        return NULL;
    FILE *f = fdopen(fd, "a");
    if (!f) {
        snprintf(why, why_size, "%s", strerror(errno));
        close(fd);
    }
    return f;
}

/* FNV-1a, 64 bits: a digest that tells two configs apart at a glance. */
static uint64_t digest_of(const char *text)
{
    uint64_t h = 14695981039346656037ULL;
    for (const unsigned char *p = (const unsigned char *)text; *p; p++)
        h = (h ^ *p) * 1099511628211ULL;
    return h;
}

/* The run's first record: who it is, when it began, what it ran, and
 * whether it continues a checkpoint (plot.sh draws a boundary at it).
 * Made at the open, written with the first step's record: a run that
 * fails before its first step leaves no header behind, and a full disk
 * is reported as any record's (metrics_write). */
static void make_header(Metrics *mt, const MetricsRun *run)
{
    time_t now = time(NULL);
    struct tm utc;
    gmtime_r(&now, &utc);
    char id[24], start[32];
    strftime(start, sizeof start, "%Y-%m-%dT%H:%M:%SZ", &utc);
    strftime(id, sizeof id, "%Y%m%dT%H%M%SZ", &utc);
    /* the run's id, "20261128T091513Z-4242": its start (UTC) and rank 0's pid */
    snprintf(mt->header, sizeof mt->header, "{\"run\":\"%s-%ld\",\"start\":\"%s\",\"config_digest\":\"%016llx\","
            "\"steps\":%d,\"resumed\":%s,\"resumed_from_step\":%ld}\n",
            id, (long)getpid(), start, (unsigned long long)digest_of(run->config_text), run->steps,
            run->resumed_step > 0 ? "true" : "false", run->resumed_step);
}

int metrics_open(Metrics *mt, const char *path, const MetricsRun *run, FILE *err)
{
    memset(mt, 0, sizeof *mt);
    if (!path || !path[0])
        return 0;
    snprintf(mt->path, sizeof mt->path, "%s", path);
    char why[256] = "";
    int e = file_make_parents(path);
    if (!e && (run->resumed_step > 0 || ends_cut(path)))
        e = keep_lines_through(path, run->resumed_step > 0 ? run->resumed_step : LONG_MAX);
    if (e)
        snprintf(why, sizeof why, "%s", strerror(e));
    else
        mt->jsonl = open_log(path, why, sizeof why);
    if (!mt->jsonl) {
        fprintf(err, "trident: [log] metrics = %s: %s\n", path, why);
        return 1;
    }
    make_header(mt, run);
    return 0;
}

/* The first failure is reported and ends the file's writing: later
 * records would only land after a cut one. */
static void give_up(Metrics *mt, int e, int step)
{
    fprintf(stderr,
            "trident: warning: [log] metrics = %s: cannot write the record of step %d (%s); "
            "training goes on without the metrics file (stdout still shows each logged step)\n",
            mt->path, step, strerror(e));
    fflush(stderr);
    fclose(mt->jsonl);
    mt->jsonl = NULL;
    mt->failed = 1;
}

void metrics_close(Metrics *mt)
{
    if (mt->jsonl && fclose(mt->jsonl) != 0) {
        fprintf(stderr, "trident: warning: [log] metrics = %s: cannot finish writing (%s)\n",
                mt->path, strerror(errno));
        fflush(stderr);
    }
    mt->jsonl = NULL;
}

/* JSON has no NaN or inf: write null. */
static void json_number(FILE *f, const char *key, double v)
{
    if (isfinite(v))
        fprintf(f, ",\"%s\":%.9g", key, v);
    else
        fprintf(f, ",\"%s\":null", key);
}

/* A key made of a name the user chose (a dataset's): quotes, backslashes
 * and control characters escaped as JSON wants. */
static void json_key_number(FILE *f, const char *prefix, const char *name, double v)
{
    fprintf(f, ",\"%s", prefix);
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    if (isfinite(v))
        fprintf(f, "\":%.9g", v);
    else
        fprintf(f, "\":null");
}

/* A MoE run's fields; the per-layer list is the file's alone. */
static void json_moe(FILE *f, const MoeStepMetrics *m)
{
    json_number(f, "moe_aux", m->aux);
    if (!isnan(m->z))
        json_number(f, "moe_z", m->z);
    json_number(f, "moe_load_max", m->load_max);
    fprintf(f, ",\"moe_load_max_layer\":%d,\"moe_load\":[", m->load_max_layer);
    for (int i = 0; i < m->n_layers; i++) {
        if (isfinite(m->load[i]))
            fprintf(f, "%s%.9g", i ? "," : "", m->load[i]);
        else
            fprintf(f, "%snull", i ? "," : "");
    }
    fprintf(f, "],\"moe_dropped\":%lld", (long long)m->dropped);
}

void metrics_write(Metrics *mt, const StepMetrics *s)
{
    FILE *f = mt->jsonl;
    if (!f)
        return;
    if (mt->header[0]) {
        fputs(mt->header, f);
        mt->header[0] = '\0';
    }
    fprintf(f, "{\"step\":%d", s->step);
    json_number(f, "loss", s->loss);
    json_number(f, "lr", s->lr);
    json_number(f, "grad_norm", s->grad_norm);
    json_number(f, "loss_scale", s->loss_scale);
    fprintf(f, ",\"tokens\":%lld", (long long)s->tokens);
    json_number(f, "tokens_per_s", s->tokens_per_s);
    json_number(f, "step_ms", s->step_ms);
    json_number(f, "mfu", s->mfu);
    json_number(f, "of_gemm_peak", s->of_gemm_peak);
    if (!isnan(s->val_loss))
        json_number(f, "val_loss", s->val_loss);
    for (int j = 0; !isnan(s->val_loss) && j < s->val_parts; j++)
        json_key_number(f, "val_loss/", s->val_names[j], s->val_part_loss[j]);
    fprintf(f, ",\"skipped\":%d", s->skipped);
    json_number(f, "data_wait_ms", s->data_wait_ms);
    json_number(f, "bubble", s->bubble);
    json_number(f, "comm_share", s->comm_share);
    json_number(f, "dp_wait_ms", s->dp_wait_ms);
    json_number(f, "rank_busy_ms_median", s->rank_busy_ms_median);
    json_number(f, "rank_busy_ms_max", s->rank_busy_ms_max);
    json_number(f, "slowest_rank", s->slowest_rank >= 0 ? s->slowest_rank : NAN);
    fprintf(f, ",\"allocations\":%lld", (long long)s->allocations);
    if (s->moe)
        json_moe(f, s->moe);
    fprintf(f, "}\n");
    /* fprintf only fills stdio's buffer; fflush is where a full disk shows */
    errno = 0;
    if (fflush(f) != 0 || ferror(f))
        give_up(mt, errno ? errno : EIO, s->step);
}

void metrics_format_duration(char *buf, size_t size, double s, int hours)
{
    if (!isfinite(s) || s < 0)
        s = 0;
    long t = (long)(s + 0.5);
    if (hours || t >= 3600)
        snprintf(buf, size, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, size, "%ld:%02ld", t / 60, t % 60);
}

void metrics_print(FILE *out, const StepMetrics *s)
{
    char eta[32];
    metrics_format_duration(eta, sizeof eta, s->eta_s, 0);
    fprintf(out, "step %5d/%d | loss %.4f", s->step, s->steps, s->loss);
    if (!isnan(s->val_loss))
        fprintf(out, " | val %.4f", s->val_loss);
    for (int j = 0; !isnan(s->val_loss) && j < s->val_parts; j++)
        fprintf(out, " | val_loss/%s %.4f", s->val_names[j], s->val_part_loss[j]);
    fprintf(out, " | lr %.2e | norm %.4f | %.0f tok/s | %.1f ms", s->lr, s->grad_norm,
            s->tokens_per_s, s->step_ms);
    if (isnan(s->mfu))
        fprintf(out, " | mfu ?");
    else
        fprintf(out, " | mfu %.1f%%", 100.0 * s->mfu);
    fprintf(out, " (%.1f%% of GEMM peak)", 100.0 * s->of_gemm_peak);
    if (s->moe) {
        const MoeStepMetrics *m = s->moe;
        fprintf(out, " | moe aux %.3f", m->aux);
        if (!isnan(m->z))
            fprintf(out, " z %.3g", m->z);
        fprintf(out, " load %.2f (h.%d)", m->load_max, m->load_max_layer);
        if (m->capacity)
            fprintf(out, " dropped %lld", (long long)m->dropped);
    }
    if (!isnan(s->eta_s))
        fprintf(out, " | eta %s", eta);
    fprintf(out, "%s\n", s->skipped ? " | update skipped (gradients not finite)" : "");
    fflush(out);
}

int64_t metrics_peak_rss(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (int64_t)ru.ru_maxrss * 1024; /* Linux reports KiB */
}
