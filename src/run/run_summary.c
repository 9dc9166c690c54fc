/*
 * run_summary.c - the end-of-run summary; see run_summary.h.
 *
 * The next commands are printed with this run's paths so that a user can
 * paste them: the plot of its metrics, a sample and an HF export of its
 * newest checkpoint. A run without a checkpoint says how to get one
 * instead of naming a file that does not exist.
 */
#include "run_summary.h"

#include <math.h>
#include <string.h>

#include "metrics.h"

/* The directory an export goes to: beside the checkpoint directory, as
 * "hf" (runs/tiny/ckpt -> runs/tiny/hf); trailing slashes name the same
 * directory (runs/tiny/ckpt/ -> runs/tiny/hf, not into the checkpoints). */
static void export_dir(char *buf, size_t size, const char *ckpt_dir)
{
    int end = (int)strlen(ckpt_dir);
    while (end > 1 && ckpt_dir[end - 1] == '/')
        end--;
    int slash = end - 1;
    while (slash >= 0 && ckpt_dir[slash] != '/')
        slash--;
    if (slash < 0)
        snprintf(buf, size, "hf");
    else
        snprintf(buf, size, "%.*s/hf", slash, ckpt_dir);
}

static void print_speed(FILE *out, const RunSummary *s)
{
    char wall[32];
    metrics_format_duration(wall, sizeof wall, s->wall_s, 1);
    int steps = s->last_step - s->first_step;
    fprintf(out, "summary: %d step%s this run (steps %d to %d of %d) in %s wall time",
            steps, steps == 1 ? "" : "s", s->first_step + 1, s->last_step, s->total_steps,
            wall);
    if (s->train_s > 0) {
        fprintf(out, "; mean %.0f tokens/s", (double)s->tokens / s->train_s);
        if (s->peak_flops > 0)
            fprintf(out, ", MFU %.1f%%", 100.0 * s->model_flops / s->train_s / s->peak_flops);
        else
            fprintf(out, ", MFU ? (the hardware's peak is unknown)");
    }
    fprintf(out, "\n");
}

static void print_files(FILE *out, const RunSummary *s)
{
    if (s->metrics_path[0])
        fprintf(out, "summary: metrics: %s\n", s->metrics_path);
    else if (s->ckpt_dir[0])
        fprintf(out, "summary: metrics: none ([log] metrics is set empty)\n");
    else    /* the default file lives in the checkpoint dir */
        fprintf(out, "summary: metrics: none (no [log] metrics, and no [checkpoint] dir to "
                     "hold metrics.jsonl)\n");
    if (!s->ckpt_dir[0])
        fprintf(out, "summary: checkpoints: none ([checkpoint] dir is empty: set it to keep the "
                     "model, to resume, sample or export it)\n");
    else if (s->saved_step < 0)
        fprintf(out, "summary: checkpoints: none saved by this run in %s\n", s->ckpt_dir);
    else
        fprintf(out, "summary: checkpoints: %s (newest: %s)\n", s->ckpt_dir, s->saved_path);
}

static void print_next(FILE *out, const RunSummary *s)
{
    if (s->metrics_path[0])
        fprintf(out, "next: plot the curves:  jobs/plot.sh %s\n", s->metrics_path);
    if (!s->ckpt_dir[0] || s->saved_step < 0)
        return;
    char hf[4200];
    export_dir(hf, sizeof hf, s->ckpt_dir);
    fprintf(out, "next: sample the model: trident sample --ckpt %s --tokens 200\n",
            s->saved_path);
    fprintf(out, "next: export it:        trident export %s --format hf %s\n", s->saved_path,
            hf);
    if (s->last_step < s->total_steps)
        fprintf(out, "next: resume:           the same command continues from step %d\n",
                s->saved_step);
}

void run_summary_print(FILE *out, const RunSummary *s)
{
    fprintf(out, "\nsummary: final training loss %.4f (step %d)", s->train_loss, s->last_step);
    if (!isnan(s->val_loss))
        fprintf(out, ", validation loss %.4f (step %d)", s->val_loss, s->val_step);
    else
        fprintf(out, ", no validation ([eval] every = 0 or no evaluation this run)");
    fprintf(out, "\n");
    if (s->moe)
        fprintf(out, "summary: experts at the last logged step: aux %.3f, the worst layer's load "
                "%.2f x the mean (h.%d), %lld (token, expert) pairs dropped\n", s->moe->aux,
                s->moe->load_max, s->moe->load_max_layer, (long long)s->moe->dropped);
    print_speed(out, s);
    print_files(out, s);
    print_next(out, s);
    fflush(out);
}
