/*
 * train.c - the training loop; see train.h. Set-up and teardown are
 * train_setup.c's; this file runs the steps in between: the step,
 * evaluation, the metrics line, early stopping, when to save and stop.
 *
 * A step: every DP rank takes its grad_accum microbatches of the global
 * batch (sample k of step s is sample cursor + k of the seeded order, with
 * DP rank r taking k in [r*ga*B, (r+1)*ga*B)), the pipeline runs its
 * schedule over them, ZeRO reduces the gradients, one all-reduce gives the
 * global norm (and the overflow check), AdamW updates the owned rows, and
 * ZeRO shares the new weights. The loss is normalised by the global token
 * count inside the loss layer, so any layout sums to the same gradient.
 */
#include "train.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blend.h"
#include "ckpt.h"
#include "ckpt_async.h"
#include "ckpt_files.h"
#include "comm.h"
#include "data.h"
#include "fail.h"
#include "fault.h"
#include "grid.h"
#include "hw_peak.h"
#include "metrics.h"
#include "model.h"
#include "optim.h"
#include "pipeline.h"
#include "prof.h"
#include "run_summary.h"
#include "sample.h"
#include "scaler.h"
#include "schedule.h"
#include "stop_signal.h"
#include "straggler.h"
#include "timer.h"
#include "tokenizer_load.h"
#include "train_impl.h"
#include "train_setup.h"
#include "watchdog.h"
#include "zero.h"
#include "ops.h"

/* ---- steps ------------------------------------------------------------- */

/* Asks the loader for the samples of the step starting at `cursor`. */
static void request_batch(Trainer *t, int64_t cursor)
{
    if (!t->loader)
        return;
    int64_t mine = (int64_t)t->grid.layout.dp_rank * t->ga * t->rows;
    for (int k = 0; k < t->ga * t->rows; k++)
        t->index[k] = cursor + mine + k;
    loader_request(t->loader, t->index);
}

/* Sum over the world of the last stage's (TP rank 0's) loss sums. */
static double global_loss_sum(Trainer *t)
{
    Model *m = &t->model;
    double total = m->is_last && t->grid.layout.tp_rank == 0 ? model_loss_sum(m) : 0.0;
    comm_allreduce_scalars(&t->grid, COMM_WORLD, &total, 1, COMM_DOUBLE, COMM_SUM);
    return total;
}

/* The mean loss over [eval] batches global batches of validation dataset j. */
static double evaluate_part(Trainer *t, int j)
{
    const Config *c = t->cfg;
    int T = c->model.seq_len, rows = t->ga * t->rows;
    model_reset_loss(&t->model);
    PipelineTimes times = {0};
    for (int i = 0; i < c->eval.batches; i++) {
        if (t->data) {
            int64_t first = (int64_t)i * t->global_batch + (int64_t)t->grid.layout.dp_rank * rows;
            DataError why;
            for (int k = 0; k < rows; k++)
                if (data_val_part_sample(t->data, j, first + k,
                                         t->eval_batch + (int64_t)k * (T + 1), &why))
                    fail_input_abort(why.msg);
        }
        pipeline_run(&t->pipe, t->eval_actions, t->n_eval_actions, t->eval_batch, t->rows,
                     FORWARD_EVAL, 1.0f, &times);
    }
    double tokens = (double)c->eval.batches * t->global_batch * T;
    return global_loss_sum(t) / tokens;
}

/* The validation loss: of the one dataset, or of a blend's datasets each
 * (val_part_loss) and their mean weighted by the blend's weights. */
static double evaluate(Trainer *t)
{
    const Blend *b = &t->val_blend;
    for (int j = 0; j < b->n; j++)
        t->val_part_loss[j] = evaluate_part(t, j);
    if (b->n == 1)
        return t->val_part_loss[0];
    double val = 0.0;
    for (int j = 0; j < b->n; j++)
        val += b->weight[j] * t->val_part_loss[j];
    return val;
}

/* Test hooks (fault.h): slow one rank down or stop it, poison a weight so
 * the loss turns NaN, or put an inf into one gradient, on one rank. */
static void inject_before(Trainer *t)
{
    if (fault_at("slow", t->grid.layout.rank, t->step + 1))
        usleep(50000); /* a straggler: 50 ms more than the others each step */
    if (fault_at("stall", t->grid.layout.rank, t->step + 1))
        raise(SIGSTOP); /* a rank that stops without dying: the watchdog's case */
    if (!fault_at("nan_loss", t->grid.layout.rank, t->step + 1) || t->model.ps.n == 0)
        return;
    Param *p = &t->model.ps.p[0];
    ops_tensor one = p->w.data ? ops_view(p->w, 0, 1) : ops_view(p->master, 0, 1);
    float nan = NAN;
    ops_cast(one, (ops_tensor){&nan, 1, OPS_F32, OPS_CPU});
}

static void inject_after(Trainer *t)
{
    if (fault_at("die", t->grid.layout.rank, t->step + 1)) {
        fprintf(stderr, "[rank %d] injected fault: dying mid-step\n", t->grid.layout.rank);
        _exit(9);
    }
    if (!fault_at("grad_inf", t->grid.layout.rank, t->step + 1))
        return;
    for (int i = 0; i < t->model.ps.n; i++) {
        Param *p = &t->model.ps.p[i];
        if (p->og.data && p->og.n > 0) {
            float inf = INFINITY;
            ops_copy(ops_view(p->og, 0, 1), (ops_tensor){&inf, 1, OPS_F32, OPS_CPU});
            return;
        }
    }
}

typedef struct {
    double loss, grad_norm, data_wait, bubble, dp_wait;
    int skipped;              /* fp16 overflow: no update this step */
    int give_up;              /* non-finite and nothing left to try */
} StepResult;

/* The gradients are ready: clip, update, share the new weights, unless
 * the global norm says they overflowed. */
static void apply_update(Trainer *t, StepResult *r)
{
    const TrainConfig *tc = &t->cfg->train;
    Model *m = &t->model;
    double scale = t->scaler.scale;
    if (tc->clip_value > 0)
        PROF(PROF_OPTIMIZER, optim_clip_value(m, t->zero, (float)(tc->clip_value * scale)));
    PROF(PROF_OPTIMIZER, r->grad_norm = optim_grad_norm(m, t->zero) / scale);
    ScalerVerdict v = scaler_update(&t->scaler, isfinite(r->grad_norm));
    r->skipped = v != SCALER_STEP;
    r->give_up = v == SCALER_GIVE_UP;
    if (v != SCALER_STEP)
        return;
    double clip = 1.0;
    if (tc->clip_norm > 0 && r->grad_norm > tc->clip_norm)
        clip = tc->clip_norm / r->grad_norm;
    t->st.updates++;
    PROF(PROF_OPTIMIZER, optim_step(m, t->zero, tc, (int)t->st.updates, optim_lr(tc, t->step),
                                    (float)(clip / scale)));
    zero_gather_weights(t->zero);
}

static StepResult train_step(Trainer *t)
{
    const TrainConfig *tc = &t->cfg->train;
    Model *m = &t->model;
    StepResult r = {0};
    int64_t tokens = t->global_batch * t->cfg->model.seq_len;
    WatchdogPhase outer = watchdog_enter("loader_wait (the next batch from the data)", NULL);
    DataError why;
    const int32_t *batch = t->loader ? loader_wait(t->loader, &r.data_wait, &why) : NULL;
    watchdog_leave(outer);
    if (t->loader && !batch)
        fail_input_abort(why.msg); /* only the ranks that read data know */
    t->st.cursor += t->global_batch;
    if (t->step + 1 < tc->steps)
        request_batch(t, t->st.cursor); /* the next step's batch loads meanwhile */

    inject_before(t);
    zero_begin_step(t->zero);
    model_reset_loss(m);
    float grad_scale = (float)(t->scaler.scale / (double)tokens);
    pipeline_run(&t->pipe, t->actions, t->n_actions, batch, t->rows, FORWARD_TRAIN, grad_scale,
                 &t->times);
    ops_timer_start(&t->dp_timer);
    zero_reduce_grads(t->zero);
    model_sum_split_grads(m);
    ops_timer_stop(&t->dp_timer);
    inject_after(t);
    apply_update(t, &r);
    r.loss = global_loss_sum(t) / (double)tokens;
    /* the device timers, now that the host has waited for the step */
    double span, exposed, busy = ops_timer_read(&t->times.busy);
    double wait = ops_timer_read(&t->times.wait);
    r.dp_wait = ops_timer_read(&t->dp_timer); /* blocking: the whole reduction */
    zero_overlap_seconds(t->zero, &span, &exposed);
    if (span > 0.0)
        r.dp_wait = exposed;             /* overlapped: the part left to wait */
    double total = busy + wait;
    r.bubble = max_over_world(t, total > 0 ? wait / total : 0.0);
    r.data_wait = max_over_world(t, r.data_wait);
    t->step++;
    t->st.step = t->step;
    t->st.tokens += tokens;
    t->st.loss_scale = t->scaler.scale;
    t->st.scale_good_steps = t->scaler.good_steps;
    t->st.scale_overflows = t->scaler.overflows;
    return r;
}

static int due(int step, int every, int last)
{
    return step == last || (every > 0 && step % every == 0);
}

/* The ETA's step time: an exponential average of the steps after the
 * first (which pays for warm-up), so one slow step or a busy moment moves
 * it a little, not the whole estimate. */
enum { ETA_STEADY = 3 };      /* steps averaged before an ETA is shown */
static void time_step(Trainer *t, double step_s)
{
    const double weight = 0.1;
    if (t->step == t->first_step + 1)
        return;
    t->avg_step_s = t->avg_steps == 0 ? step_s : (1.0 - weight) * t->avg_step_s + weight * step_s;
    t->avg_steps++;
}

/* The time left: the averaged step times the steps left, plus the
 * evaluations left at the last one's cost. NaN (no ETA shown) until
 * ETA_STEADY steps are averaged: an estimate from the first steps jumps. */
static double eta_seconds(const Trainer *t)
{
    const Config *c = t->cfg;
    if (t->avg_steps < ETA_STEADY)
        return NAN;
    int left = c->train.steps - t->step;
    int evals_left = c->eval.every > 0 ? left / c->eval.every : 0;
    return t->avg_step_s * left + evals_left * t->eval_seconds;
}

/* The model's FLOPs of training on `tokens` tokens, as MFU counts them:
 * the forward pass and a backward of twice its cost (recomputation is not
 * the model's work). The step lines and the end-of-run summary both use
 * it. */
static double training_flops(const ModelConfig *m, double tokens)
{
    return 3.0 * model_forward_flops(m, tokens);
}

static void report(Trainer *t, const StepResult *r, double step_s, double val_loss,
                   double comm_s, const StragglerReport *spread, const MoeStepMetrics *moe)
{
    const Config *c = t->cfg;
    double tokens = (double)t->global_batch * c->model.seq_len;
    double model_flops = training_flops(&c->model, tokens);
    /* a probe taken while the machine was busy reads low; no step can run
     * faster than the peak, so the best step rate bounds it from below, and
     * the hardware's peak is at least what the GEMM library reached */
    if (model_flops / step_s > t->peak_flops)
        t->peak_flops = model_flops / step_s;
    if (t->hw_peak.flops > 0 && t->peak_flops > t->hw_peak.flops)
        t->hw_peak.flops = t->peak_flops;
    StepMetrics s = {
        .step = t->step, .steps = c->train.steps, .loss = r->loss, .val_loss = val_loss,
        .val_parts = t->val_blend.n > 1 ? t->val_blend.n : 0, .val_names = t->val_blend.name,
        .val_part_loss = t->val_part_loss,
        .lr = optim_lr(&c->train, t->step - 1), .grad_norm = r->grad_norm,
        .loss_scale = t->st.loss_scale, .tokens = t->st.tokens, .skipped = r->skipped,
        .tokens_per_s = tokens / step_s, .step_ms = 1e3 * step_s,
        .mfu = t->hw_peak.flops > 0 ? model_flops / step_s / t->hw_peak.flops : NAN,
        .of_gemm_peak = model_flops / step_s / t->peak_flops,
        .data_wait_ms = 1e3 * r->data_wait, .bubble = r->bubble,
        .dp_wait_ms = 1e3 * r->dp_wait,
        .comm_share = comm_s / step_s,
        .rank_busy_ms_median = spread->slowest_rank >= 0 ? spread->median_ms : NAN,
        .rank_busy_ms_max = spread->slowest_rank >= 0 ? spread->slowest_ms : NAN,
        .slowest_rank = spread->slowest_rank,
        .allocations = ops_device_allocations(t->grid.device),
        .eta_s = eta_seconds(t),
        .moe = moe,
    };
    metrics_print(stdout, &s);
    metrics_write(&t->metrics, &s);
}

/* A CPU's peak is measured again after steps 2 and 8 of a run, and the
 * highest reading kept: a start-up probe taken while other processes ran
 * (the previous job still exiting, another tenant of a shared node) reads
 * low, and MFU against it reads high, up to the 100% at which report()
 * stops it. Every rank reaches those steps together, so the probe, which
 * is collective, stays in step; it takes 0.1 s, outside the steps' time,
 * twice a run. */
static void remeasure_peak(Trainer *t, int first)
{
    int s = t->step - first;
    if (t->grid.device != OPS_CPU || t->hw_probed <= 0.0 || (s != 2 && s != 8)
        || t->step >= t->cfg->train.steps)
        return;
    ops_dtype dt = model_dtype(t->cfg->train.precision);
    HardwarePeak again;
    hw_peak_measure(&t->grid, dt, &again);
    if (again.flops <= 1.05 * t->hw_probed)
        return;
    if (is_root(t))
        printf("hardware: measured again after step %d: %s peak %.1f GFLOP/s (%.1f before; "
               "MFU is against the higher)\n", t->step, ops_dtype_name(dt), again.flops / 1e9,
               t->hw_probed / 1e9);
    t->hw_probed = again.flops;
    if (again.flops > t->hw_peak.flops)
        t->hw_peak.flops = again.flops;
}

/* The tokenizer of [data] tokenizer on rank 0, which prints the sample,
 * and its end-of-document id on every rank: the prompt, after which the
 * data's documents begin. Without one (or should the file have gone since
 * start-up: a note) *bpe is NULL and the prompt is sample_default_prompt's.
 * Collective on world. */
static void sample_tokenizer(Trainer *t, Bpe **bpe, int32_t *prompt)
{
    const Config *c = t->cfg;
    *bpe = NULL;
    *prompt = sample_default_prompt(c->model.vocab_size);
    if (!c->data.tokenizer[0])
        return;
    char msg[2048];
    if (is_root(t) && tokenizer_for_model(c->data.tokenizer, c->model.vocab_size,
                                          "[data] tokenizer = ", bpe, prompt, msg, sizeof msg))
        printf("note: the sample is printed as token ids: %s", msg);
    comm_bcast_bytes(&t->grid, COMM_WORLD, prompt, sizeof *prompt, 0);
}

static void generate(Trainer *t)
{
    const Config *c = t->cfg;
    if (c->log.sample_tokens <= 0)
        return;
    Bpe *bpe;
    int32_t prompt;
    sample_tokenizer(t, &bpe, &prompt);
    if (is_root(t))
        printf("\nsample (%d tokens%s):\n", c->log.sample_tokens,
               bpe ? ", decoded by [data] tokenizer" : "");
    sample_generate(&t->pipe, &prompt, 1, c->log.sample_tokens, 0.8, c->train.seed, bpe, stdout);
    if (is_root(t))
        printf("\n");
    bpe_free(bpe);
}

/* ---- stopping and saving ---------------------------------------------- */

/* How the save the background writer finished went (every rank alike). */
static int async_saved(Trainer *t, const CkptAsyncResult *r)
{
    if (r->step < 0)
        return 0;
    if (r->rc) {
        if (is_root(t))
            fprintf(stderr, "trident: the checkpoint of step %lld, written in the background, failed (the reason is above); stopping at step %d\n",
                    (long long)r->step, t->step);
        return 1;
    }
    t->saved_step = (int)r->step;
    if (is_root(t))
        printf("checkpoint: %s/step_%08lld.h5, %.1f MB in %.2f s (%.2f GB/s) in the background; training paused %.1f ms for the snapshot\n",
               t->cfg->checkpoint.dir, (long long)r->step, r->bytes / 1e6, r->seconds,
               r->bytes / r->seconds / 1e9, 1e3 * r->snapshot_seconds);
    return 0;
}

/* Waits for the asynchronous save in flight, if any. */
static int save_wait(Trainer *t)
{
    if (!ckpt_async_pending(t->async))
        return 0;
    CkptAsyncResult r;
    ckpt_async_wait(t->async, &r);
    return async_saved(t, &r);
}

static int save(Trainer *t)
{
    if (!t->cfg->checkpoint.dir[0])
        return 0;
    if (t->async) {
        /* one save at a time: the next waits for the one in flight */
        TRI_TRY(save_wait(t));
        ckpt_async_start(t->async, &t->model, t->zero, t->cfg, &t->st);
        return 0;
    }
    double seconds;
    int64_t bytes;
    WatchdogPhase outer = watchdog_enter("ckpt_save", NULL);
    int rc = ckpt_save(&t->model, t->zero, t->cfg, &t->st, &seconds, &bytes, stderr);
    watchdog_leave(outer);
    if (!rc)
        t->saved_step = t->step;
    if (!rc && is_root(t))
        printf("checkpoint: %s/step_%08d.h5, %.1f MB in %.2f s (%.2f GB/s)\n",
               t->cfg->checkpoint.dir, t->step, bytes / 1e6, seconds, bytes / seconds / 1e9);
    return rc;
}

/* Early stopping: counts evaluations that fail to beat the best by
 * min_delta; returns 1 when patience runs out. */
static int out_of_patience(Trainer *t, double val)
{
    const EvalConfig *e = &t->cfg->eval;
    if (val < t->st.best_val - e->min_delta) {
        t->st.best_val = val;
        t->st.evals_bad = 0;
        return 0;
    }
    t->st.evals_bad++;
    return e->patience > 0 && t->st.evals_bad >= e->patience;
}

typedef enum { RUN_DONE, RUN_SIGNALLED, RUN_STOPPED_UNSAVED, RUN_EARLY_STOP, RUN_FAILED } RunEnd;

/* Why a run cannot go on: it has no finite gradients to step with. The
 * last checkpoint, if any, is left as it was. */
static void give_up_message(Trainer *t, const StepResult *r)
{
    if (!is_root(t))
        return;
    if (t->scaler.dynamic)
        fprintf(stderr, "trident: step %d: the fp16 loss scale fell to %g, below [train] loss_scale_min = %g: the gradients overflow at any scale; lower the learning rate or use bf16\n",
                t->step, t->scaler.scale, t->scaler.min);
    else
        fprintf(stderr, "trident: step %d: the loss is %g and the gradient norm %g: training diverged (NaN or inf); lower [train] lr, set clip_norm, or resume from an earlier checkpoint\n",
                t->step, r->loss, r->grad_norm);
}

/* With [log] profile: the breakdown of the steps after the first (which
 * pays for warm-up), on rank 0. */
static void profile_step(Trainer *t, double step_s, int first)
{
    if (!t->cfg->log.profile)
        return;
    if (t->step == first + 1) {
        prof_start(t->grid.device);
        t->profiled_seconds = 0.0;
        return;
    }
    prof_collect(); /* the step's host wait is over: its marks are read at once */
    t->profiled_seconds += step_s;
    if (t->step == t->cfg->train.steps) {
        if (is_root(t))
            prof_print(stdout, t->step - first - 1, t->profiled_seconds);
        prof_stop();
    }
}

/* What comes after a stop that exits 75, for the stop line: the batch
 * scripts requeue on it; by hand, the same command resumes (or, with
 * nothing trained yet, starts the run); and Open MPI's mpirun reports the
 * non-zero exit in a block of its own, and exits 1 itself when Ctrl-C or
 * SIGTERM reached it rather than the ranks. */
static void print_what_next(const Trainer *t)
{
    int resumable = t->step > 0;
    if (getenv("SLURM_JOB_ID"))
        printf("jobs/*.sbatch requeue the job on it, and the next run %s",
               resumable ? "resumes from the checkpoint"
                         : "starts afresh (nothing was trained yet)");
    else
        printf("%s", resumable ? "the same command resumes from the checkpoint"
                               : "nothing was trained yet: the same command starts the run");
    if (getenv("OMPI_COMM_WORLD_SIZE"))
        printf(" (Open MPI's report that follows, of processes that exited with a non-zero "
               "status, is expected; a mpirun that got Ctrl-C or SIGTERM itself exits 1)");
    printf("\n");
}

/* The stop on a signal, said on rank 0 ("at step N" or "before step N"):
 * with a checkpoint dir the run exits 75, which asks for a requeue; with
 * none nothing can be resumed, so it says what is lost and exits
 * TRI_EXIT_STOPPED, which no script requeues (a requeue would start over,
 * and a time limit would repeat that for ever). */
static RunEnd stop_on_signal(Trainer *t, const char *when)
{
    int trained = t->step - t->first_step;
    RunEnd end = t->cfg->checkpoint.dir[0] ? RUN_SIGNALLED : RUN_STOPPED_UNSAVED;
    if (!is_root(t))
        return end;
    if (end == RUN_SIGNALLED) {
        printf("stopping %s on %s, %s: exit %d; ", when, stop_signal_name(),
               trained > 0 ? "its checkpoint saved" : "nothing new to save", TRI_EXIT_REQUEUE);
        print_what_next(t);
    } else {
        printf("stopping %s on %s with nothing saved: [checkpoint] dir is empty, so the %d "
               "step%s trained here %s lost and running again starts over; exit %d, not %d: "
               "there is nothing to resume, so no script requeues it (set [checkpoint] dir to "
               "make a stop resumable)\n", when, stop_signal_name(), trained,
               trained == 1 ? "" : "s", trained == 1 ? "is" : "are", TRI_EXIT_STOPPED,
               TRI_EXIT_REQUEUE);
    }
    fflush(stdout);
    return end;
}

/* The stop of [eval] patience, said on rank 0 (its checkpoint is saved). */
static RunEnd stop_early(const Trainer *t)
{
    const EvalConfig *e = &t->cfg->eval;
    if (is_root(t))
        printf("early stop at step %d: validation loss has not improved on %.4f by %g for %d evaluations\n",
               t->step, t->st.best_val, e->min_delta, e->patience);
    return RUN_EARLY_STOP;
}

/* A run resumed at (or past) its last step trains nothing: it says so,
 * instead of ending in silence. */
static void say_already_done(Trainer *t)
{
    const Config *c = t->cfg;
    if (is_root(t))
        printf("already at step %d of %d: nothing to train (raise [train] steps to train on "
               "from this checkpoint, or choose another [checkpoint] dir to start a new run)\n",
               t->step, c->train.steps);
}

/* One training step, timed, and what the run keeps of it: the step's
 * time (the ETA's average, the summary's total, the stragglers' record,
 * the profile) and its loss. The first step of the run ends the start-up:
 * the watchdog's longer limit, and the line saying how long it took. */
static StepResult timed_step(Trainer *t, double *step_s)
{
    int first_of_run = t->step == t->first_step;
    /* a test hook: SIGTERM from outside at a known step (t_matrix M122) */
    if (fault_at("sigterm", t->grid.layout.rank, t->step + 1))
        kill(getpid(), SIGTERM);
    comm_reset_seconds();
    watchdog_step(t->step + 1);
    /* a MoE model's routing counts are the step's (moe_metrics.h) */
    if (t->moe.on)
        model_moe_reset_stats(&t->model);
    double t0 = timer_now();
    WatchdogPhase outer = watchdog_enter("train_step", NULL);
    StepResult r = train_step(t);
    watchdog_leave(outer);
    *step_s = timer_now() - t0;
    t->train_seconds += *step_s;
    t->last_loss = r.loss;
    time_step(t, *step_s);
    if (first_of_run)
        watchdog_warmed_up();
    straggler_add_step(&t->straggler, *step_s, comm_blocked_seconds());
    if (first_of_run && is_root(t))
        printf("start-up: first step done %.2f s after the process started (MPI_Init to here)\n",
               timer_now() - t->started);
    profile_step(t, *step_s, t->first_step);
    return r;
}

/* The validation loss where an evaluation is due after this step, else
 * NaN; its time (the ETA's) and value (the summary's) are kept. */
static double evaluate_if_due(Trainer *t)
{
    const Config *c = t->cfg;
    if (c->eval.every <= 0 || !due(t->step, c->eval.every, c->train.steps))
        return NAN;
    WatchdogPhase outer = watchdog_enter("evaluate", NULL);
    double e0 = timer_now();
    double val = evaluate(t);
    t->eval_seconds = timer_now() - e0;
    t->last_val = val;
    t->last_val_step = t->step;
    watchdog_leave(outer);
    return val;
}

static RunEnd run_steps(Trainer *t)
{
    const Config *c = t->cfg;
    int first = t->step;
    t->first_step = first;
    /* a signal that came while the job started: nothing to save yet */
    if (fail_agree(t->grid.world, stop_signal_received() != 0)) {
        char when[64];
        snprintf(when, sizeof when, "before step %d (the signal came while starting)",
                 t->step + 1);
        return stop_on_signal(t, when);
    }
    if (t->step >= c->train.steps) {
        say_already_done(t);
        return RUN_DONE;
    }
    request_batch(t, t->st.cursor);
    while (t->step < c->train.steps) {
        double step_s;
        StepResult r = timed_step(t, &step_s);
        double comm_s = comm_seconds(COMM_TP) + comm_seconds(COMM_DP) + comm_seconds(COMM_KV)
                        + comm_seconds(COMM_CP);
        comm_s += comm_seconds(COMM_EP) + comm_seconds(COMM_EDP); /* MoE's all-to-all, experts' DP */
        if (r.give_up) {
            StragglerReport none = {.slowest_rank = -1};
            if (is_root(t))
                report(t, &r, step_s, NAN, comm_s, &none, NULL);
            give_up_message(t, &r);
            return RUN_FAILED;
        }
        double val = evaluate_if_due(t);
        if (due(t->step, c->log.every, c->train.steps) || t->step == first + 1 || !isnan(val)) {
            StragglerReport spread;
            straggler_report(&t->straggler, &t->grid, &spread, stdout);
            const MoeStepMetrics *moe = moe_metrics_gather(&t->moe, &t->model, &t->grid);
            if (is_root(t))
                report(t, &r, step_s, val, comm_s, &spread, moe);
        }
        remeasure_peak(t, first);
        int early = !isnan(val) && out_of_patience(t, val);
        int signalled = fail_agree(t->grid.world, stop_signal_received() != 0);
        CkptAsyncResult saved;
        if (ckpt_async_poll(t->async, &saved) && async_saved(t, &saved))
            return RUN_FAILED;
        /* a test hook: a save on a signal as slow as a large model's */
        if (signalled && fault_at("slow_stop", t->grid.layout.rank, t->step))
            sleep(3);
        if (signalled || early || (c->checkpoint.every > 0 && t->step % c->checkpoint.every == 0
                                   && t->step < c->train.steps)) {
            if (save(t))
                return RUN_FAILED;
        }
        /* a stop waits for the save in flight: the job ends with it written */
        if ((signalled || early) && save_wait(t))
            return RUN_FAILED;
        if (signalled) {
            char when[32];
            snprintf(when, sizeof when, "at step %d", t->step);
            return stop_on_signal(t, when);
        }
        if (early)
            return stop_early(t);
    }
    if (t->step > first && (save(t) || save_wait(t)))
        return RUN_FAILED;
    return RUN_DONE;
}

/* The end-of-run summary (run_summary.h), on rank 0, of a run that
 * trained at least one step and did not fail. */
static void summarise(Trainer *t, int64_t tokens_before)
{
    const Config *c = t->cfg;
    if (!is_root(t) || t->step <= t->first_step)
        return;
    int64_t tokens = t->st.tokens - tokens_before;
    CkptPaths newest = {.final = ""};
    if (t->saved_step >= 0)
        ckpt_files_paths(&newest, c->checkpoint.dir, t->saved_step);
    RunSummary s = {
        .first_step = t->first_step, .last_step = t->step, .total_steps = c->train.steps,
        .train_loss = t->last_loss, .val_loss = t->last_val, .val_step = t->last_val_step,
        .wall_s = timer_now() - t->started, .train_s = t->train_seconds, .tokens = tokens,
        .model_flops = training_flops(&c->model, (double)tokens),
        .peak_flops = t->hw_peak.flops, .ckpt_dir = c->checkpoint.dir,
        .saved_step = t->saved_step, .saved_path = newest.final,
        .metrics_path = c->log.metrics,
        .moe = t->moe.on ? &t->moe.step : NULL,
    };
    run_summary_print(stdout, &s);
}

static int exit_status(RunEnd end)
{
    switch (end) {
    case RUN_SIGNALLED:
        return TRI_EXIT_REQUEUE;
    case RUN_STOPPED_UNSAVED:
        return TRI_EXIT_STOPPED;
    case RUN_FAILED:
        return TRI_EXIT_ERROR;
    default:
        return TRI_EXIT_OK;
    }
}

int train_run(Config *cfg, MPI_Comm world, double started)
{
    Trainer t;
    memset(&t, 0, sizeof t);
    t.ckpt_lock.fd = -1;
    t.cfg = cfg;
    t.started = started;
    int rc = train_setup_share_config(&t, world);
    if (rc)
        return TRI_EXIT_ERROR;
    /* the config's timeout replaces the command line's of the start-up */
    if (watchdog_set_timeout(cfg->fault.timeout))
        fail_abort("cannot start the watchdog thread", __FILE__, __LINE__);
    t.saved_step = -1;
    t.last_val = NAN;
    rc = train_setup_build(&t);
    RunEnd end = RUN_FAILED;
    if (!rc) {
        int64_t tokens_before = t.st.tokens;
        WatchdogPhase outer = watchdog_enter("training", NULL);
        end = run_steps(&t);
        /* a run that failed still lets the save in flight finish */
        if (save_wait(&t))
            end = RUN_FAILED;
        watchdog_leave(outer);
        outer = watchdog_enter("the sample and the end of the run", NULL);
        int trained = t.step > t.first_step;
        if ((end == RUN_DONE || end == RUN_EARLY_STOP) && trained)
            generate(&t);
        double rss = max_over_world(&t, (double)metrics_peak_rss());
        if (is_root(&t))
            printf("done: %d step%s; peak memory (RSS) %.1f MiB on the largest rank\n", t.step,
                   t.step == 1 ? "" : "s", rss / 1048576.0);
        if (end != RUN_FAILED)
            summarise(&t, tokens_before);
        watchdog_leave(outer);
    }
    train_setup_teardown(&t);
    watchdog_stop();
    return rc ? TRI_EXIT_ERROR : exit_status(end);
}
