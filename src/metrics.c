/*
 * metrics.c - the human line and the JSON Lines record; see metrics.h.
 */
#include "metrics.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

int metrics_mkdirs_for(const char *path)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        return 0;
    *slash = '\0';
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(dir, 0777) != 0 && errno != EEXIST)
            return errno;
        *p = '/';
    }
    if (dir[0] && mkdir(dir, 0777) != 0 && errno != EEXIST)
        return errno;
    return 0;
}

/* Rewrites path keeping the lines of steps up to last (through a
 * temporary file and a rename). A missing file is fine. */
static int keep_lines_through(const char *path, long last)
{
    FILE *in = fopen(path, "r");
    if (!in)
        return errno == ENOENT ? 0 : errno;
    char tmp[4200], line[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *out = fopen(tmp, "w");
    if (!out) {
        fclose(in);
        return errno;
    }
    while (fgets(line, sizeof line, in)) {
        long step;
        if (sscanf(line, "{\"step\":%ld", &step) == 1 && step <= last)
            fputs(line, out);
    }
    fclose(in);
    int e = fclose(out) == 0 && rename(tmp, path) == 0 ? 0 : errno;
    return e;
}

int metrics_open(Metrics *mt, const char *path, long resumed_step, FILE *err)
{
    mt->jsonl = NULL;
    if (!path || !path[0])
        return 0;
    int e = metrics_mkdirs_for(path);
    if (!e && resumed_step > 0)
        e = keep_lines_through(path, resumed_step);
    if (!e) {
        mt->jsonl = fopen(path, resumed_step > 0 ? "a" : "w");
        e = mt->jsonl ? 0 : errno;
    }
    if (e) {
        fprintf(err, "trident: [log] metrics = %s: %s\n", path, strerror(e));
        return 1;
    }
    return 0;
}

void metrics_close(Metrics *mt)
{
    if (mt->jsonl)
        fclose(mt->jsonl);
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

void metrics_write(Metrics *mt, const StepMetrics *s)
{
    FILE *f = mt->jsonl;
    if (!f)
        return;
    fprintf(f, "{\"step\":%d", s->step);
    json_number(f, "loss", s->loss);
    json_number(f, "lr", s->lr);
    json_number(f, "grad_norm", s->grad_norm);
    json_number(f, "loss_scale", s->loss_scale);
    fprintf(f, ",\"tokens\":%lld", (long long)s->tokens);
    json_number(f, "tokens_per_s", s->tokens_per_s);
    json_number(f, "step_ms", s->step_ms);
    json_number(f, "mfu", s->mfu);
    if (!isnan(s->val_loss))
        json_number(f, "val_loss", s->val_loss);
    fprintf(f, ",\"skipped\":%d", s->skipped);
    json_number(f, "data_wait_ms", s->data_wait_ms);
    json_number(f, "bubble", s->bubble);
    json_number(f, "comm_share", s->comm_share);
    json_number(f, "dp_wait_ms", s->dp_wait_ms);
    json_number(f, "rank_busy_ms_median", s->rank_busy_ms_median);
    json_number(f, "rank_busy_ms_max", s->rank_busy_ms_max);
    json_number(f, "slowest_rank", s->slowest_rank >= 0 ? s->slowest_rank : NAN);
    fprintf(f, "}\n");
    fflush(f);
}

static void format_duration(char *buf, size_t size, double s)
{
    if (!isfinite(s) || s < 0)
        s = 0;
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, size, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, size, "%ld:%02ld", t / 60, t % 60);
}

void metrics_print(FILE *out, const StepMetrics *s)
{
    char eta[32];
    format_duration(eta, sizeof eta, s->eta_s);
    fprintf(out, "step %5d/%d | loss %.4f", s->step, s->steps, s->loss);
    if (!isnan(s->val_loss))
        fprintf(out, " | val %.4f", s->val_loss);
    fprintf(out, " | lr %.2e | norm %.4f | %.0f tok/s | %.1f ms | mfu %.1f%% | eta %s%s\n",
            s->lr, s->grad_norm, s->tokens_per_s, s->step_ms, 100.0 * s->mfu, eta,
            s->skipped ? " | update skipped (gradients not finite)" : "");
    fflush(out);
}

int64_t metrics_peak_rss(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (int64_t)ru.ru_maxrss * 1024; /* Linux reports KiB */
}
