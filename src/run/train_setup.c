/*
 * train_setup.c - a training run set up and torn down (see train_setup.h):
 * the config shared and checked, the grid and device, the hardware and
 * GEMM peaks measured, the schedule built and its message order checked,
 * the memory estimate checked against the node, the model, the data and
 * its loader, the checkpoint directory claimed, the weights initialised or
 * resumed, the metrics file and the checkpoint writer; and what rank 0
 * prints of them.
 *
 * Why this shape: set-up is one ordered sequence of collective steps, each
 * of which must finish before the next may start (the peaks are measured
 * before the loader's and writer's threads take cores, and before the
 * model takes the memory; memory is checked before anything large is
 * allocated; the data ranks agree before the rest learn the validation
 * blend). Keeping it apart from the loop (train.c) keeps that order in one
 * place, and teardown beside it undoes each step however far it got.
 */
#include "train_setup.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "affinity.h"
#include "alloc.h"
#include "arch.h"
#include "arch_sizes.h"
#include "blend.h"
#include "ckpt.h"
#include "ckpt_async.h"
#include "ckpt_files.h"
#include "ckpt_resume.h"
#include "comm.h"
#include "config_load.h"
#include "data.h"
#include "device.h"
#include "fail.h"
#include "fault.h"
#include "grid.h"
#include "host_memory.h"
#include "hw_peak.h"
#include "init_from.h"
#include "metrics.h"
#include "model.h"
#include "optim.h"
#include "params_stage.h"
#include "plan.h"
#include "prof.h"
#include "scaler.h"
#include "schedule.h"
#include "tokenizer_load.h"
#include "watchdog.h"
#include "zero.h"
#include "ops.h"

/* Rank 0 has the config; everyone checks the layout against the world.
 * The grid knows only the world until train_setup_build builds it. */
int train_setup_share_config(Trainer *t, MPI_Comm world)
{
    grid_world_only(&t->grid, world);
    comm_bcast_bytes(&t->grid, COMM_WORLD, t->cfg, sizeof *t->cfg, 0);
    char msg[1024] = "";
    FILE *err = fmemopen(msg, sizeof msg, "w");
    int rc = layout_check(t->cfg, t->grid.layout.size, err);
    fclose(err);
    return fail_report(world, rc, msg);
}

static void print_data(const Trainer *t)
{
    const Dataset *d = t->data;
    printf("data: %s, %lld train tokens (%lld windows), %lld validation tokens\n",
           t->cfg->data.train, (long long)data_train_tokens(d),
           (long long)data_train_windows(d), (long long)data_val_tokens(d));
    if (data_train_parts(d) > 1)
        for (int j = 0; j < data_train_parts(d); j++)
            printf("data: blend %.4f %s, %lld train tokens\n", data_train_weight(d, j),
                   data_train_name(d, j), (long long)data_train_part_tokens(d, j));
    if (data_val_parts(d) > 1)
        for (int j = 0; j < data_val_parts(d); j++)
            printf("data: validation %.4f %s, %lld tokens\n", data_val_weight(d, j),
                   data_val_name(d, j), (long long)data_val_part_tokens(d, j));
}

static int open_data(Trainer *t)
{
    char msg[2048] = "";
    int rc = 0;
    if (t->grid.layout.rank == 0 && t->cfg->data.tokenizer[0])
        rc = tokenizer_for_model(t->cfg->data.tokenizer, t->cfg->model.vocab_size,
                                 "[data] tokenizer = ", NULL, NULL, msg, sizeof msg);
    if (!rc && (t->model.is_first || t->model.is_last)) {
        FILE *err = fmemopen(msg, sizeof msg, "w");
        rc = data_open(&t->data, &t->cfg->data, t->cfg->model.seq_len,
                       t->cfg->model.vocab_size, err);
        if (!rc && fault_at("data_open", t->grid.layout.rank, 0)) {
            fprintf(err, "trident: [data] train = %s: injected fault: this rank cannot read it\n",
                    t->cfg->data.train);
            rc = 1;
        }
        fclose(err);
    }
    rc = fail_report(t->grid.world, rc, msg);
    if (rc)
        return rc;
    /* every rank runs the evaluation's collectives, one round per
     * validation dataset, so every rank knows them, not only those that
     * read data; the parse cannot fail where data_open's succeeded */
    const DataConfig *dc = &t->cfg->data;
    if (blend_parse(dc->val[0] ? dc->val : dc->train, &t->val_blend, msg, sizeof msg))
        fail_abort("the validation blend parsed on the data ranks only", __FILE__, __LINE__);
    t->val_part_loss = TRI_CALLOC((size_t)t->val_blend.n, sizeof *t->val_part_loss, "the validation losses");
    if (!t->data)
        return 0;
    t->loader = loader_create(t->data, t->cfg->train.seed, t->ga * t->rows);
    if (!t->loader)
        fail_abort("cannot start the data loader thread", __FILE__, __LINE__);
    if (is_root(t))
        print_data(t);
    return 0;
}

/* [train] offload's line: where the optimizer state is, on rank 0. */
static void print_offload(Trainer *t)
{
    if (!is_root(t) || t->cfg->train.offload != OFFLOAD_OPTIMIZER)
        return;
    if (zero_offload(t->zero))
        printf("offload: master weights and Adam moments in host memory, AdamW on the host\n");
    else
        printf("offload: [train] offload = optimizer changes nothing on the CPU backend, whose "
               "optimizer state is in host memory already\n");
}

static void print_memory(Trainer *t)
{
    ZeroBytes b = zero_bytes(t->zero);
    double mine[5] = {(double)b.weights, (double)b.grads, (double)b.optimizer,
                      (double)model_activation_bytes(&t->model), (double)b.host};
    int size = t->grid.layout.size;
    double *all = is_root(t) ? malloc(sizeof mine * (size_t)size) : NULL;
    comm_gather_bytes(&t->grid, COMM_WORLD, mine, sizeof mine, all, 0);
    if (!is_root(t))
        return;
    /* plan's table (plan.c), the host column only where the run offloads */
    int host = zero_offload(t->zero) != NULL;
    printf("memory per rank (MiB): weights / grads / optimizer / activations%s\n",
           host ? " / host (offloaded)" : "");
    for (int r = 0; r < size; r++) {
        if (size > 16 && r == 8) {
            printf("  ... (%d more ranks)\n", size - 8);
            break;
        }
        const double *a = all + 5 * r;
        printf("  rank %3d: %10.3f / %10.3f / %10.3f / %10.3f", r, a[0] / 1048576.0,
               a[1] / 1048576.0, a[2] / 1048576.0, a[3] / 1048576.0);
        if (host)
            printf(" / %10.3f", a[4] / 1048576.0);
        printf("\n");
    }
    free(all);
}

/* The GEMM library's rate (the hardware's peak, MFU's denominator, was
 * measured just before). Every rank measures at the same time, so
 * oversubscribed ranks see their real share of the cores; the sum is the
 * world's. Measured before the model exists: the probe's three 4096^2
 * operands would not fit beside a model that fills a GPU. */
static void measure_peak(Trainer *t)
{
    const char *warning = NULL;
    ops_device dev = t->grid.device;
    ops_dtype dt = model_dtype(t->cfg->train.precision);
    const char *info = ops_gemm_info_on(dev, &warning);
    const char *attention = ops_attention_info_on(dev, dt);
    comm_barrier(&t->grid, COMM_WORLD);
    double total = ops_gemm_peak_on(dev, dt, 0.06);
    comm_allreduce_scalars(&t->grid, COMM_WORLD, &total, 1, COMM_DOUBLE, COMM_SUM);
    t->peak_flops = total;
    if (!is_root(t))
        return;
    affinity_print(stdout);
    if (t->hw_peak.flops > 0)
        printf("hardware: %s; %s peak %.1f GFLOP/s (MFU is against it)\n", t->hw_peak.how,
               ops_dtype_name(dt), t->hw_peak.flops / 1e9);
    else
        printf("hardware: %s; peak unknown, so MFU is not reported (of GEMM peak is)\n",
               t->hw_peak.how);
    printf("gemm: %s; measured %s peak %.1f GFLOP/s over %d rank%s", info, ops_dtype_name(dt),
           total / 1e9, t->grid.layout.size, t->grid.layout.size > 1 ? "s" : "");
    if (t->hw_peak.flops > 0)
        printf(" (%.0f%% of the hardware's)", 100.0 * total / t->hw_peak.flops);
    printf("\n");
    printf("attention: %s\n", attention);
    if (warning)
        printf("warning: %s\n", warning);
    if (dev == OPS_CUDA)
        printf("fused: %s\n", ops_fused(dev) ? "on (TRIDENT_FUSED: doc/gpu.md)"
                                             : "off (TRIDENT_FUSED=0: the unfused kernels)");
    if (*ops_switches_set())
        printf("switches: %s (doc/gpu.md)\n", ops_switches_set());
    if (dev == OPS_CPU && dt == OPS_BF16 && !ops_cpu_native_bf16())
        printf("warning: this CPU has no bf16 arithmetic faster than its fp32 units (AMX, "
               "or AVX512_BF16 outpacing the FMA): bf16 runs on its fp32 units, converting "
               "every operand, and is slower than precision = fp32 here\n");
}

/* A mixture of experts' shape on the model line: which layers, how many
 * experts of what width, and the parameters one token uses. */
static void print_experts(const ModelConfig *m)
{
    printf("experts: %d of %d layers MoE, %d experts of width %d, top %d", arch_moe_layer_count(m),
           m->n_layer, m->n_expert, arch_moe_ffn_dim(m), m->top_k);
    if (m->n_shared_expert)
        printf(", a shared expert of width %d", arch_shared_ffn_dim(m));
    printf(": %.2fM of the parameters active per token\n", params_active_count(m) / 1e6);
}

static void print_plan(Trainer *t)
{
    if (!is_root(t))
        return;
    const Config *c = t->cfg;
    printf("model: %s, %d layers, %d wide, %d heads (%d KV heads), FFN %d, seq %d, vocab %d: "
           "%.2fM parameters\n", arch_of(&c->model)->name, c->model.n_layer, c->model.n_embd,
           c->model.n_head, arch_kv_heads(&c->model), arch_ffn_dim(&c->model),
           c->model.seq_len, c->model.vocab_size, params_logical_count(&c->model) / 1e6);
    if (c->model.n_expert > 0)
        print_experts(&c->model);
    printf("batch: %d rows x %d microbatches x dp %d = %lld sequences (%lld tokens) per step; schedule %s, zero %d\n",
           t->rows, t->ga, t->grid.layout.dp, (long long)t->global_batch,
           (long long)(t->global_batch * c->model.seq_len), schedule_name(c->parallel.schedule),
           c->parallel.zero);
    if (c->parallel.virtual_stages > 1)
        printf("pipeline: %d chunks of %d layer%s a stage (chunk c of stage s is virtual stage "
               "c*pp+s)\n", c->parallel.virtual_stages, t->model.chunk_len,
               t->model.chunk_len > 1 ? "s" : "");
    if (c->parallel.sequence_parallel && t->grid.layout.tp == 1)
        printf("note: [parallel] sequence_parallel = true does nothing with tp = 1: it slices the "
               "tokens over the TP ranks\n");
    if (c->parallel.schedule != SCHED_GPIPE && t->ga < t->grid.layout.pp)
        printf("warning: grad_accum (%d) < pp (%d): with fewer microbatches than stages, the pipeline idles %.0f%% of the step; use grad_accum >= pp (4 x pp is better)\n",
               t->ga, t->grid.layout.pp,
               100.0 * schedule_simulate(c->parallel.schedule, t->grid.layout.pp, 1, t->ga,
                                         (StageCost){1.0, 1.0, 1.0}, NULL));
}

/* Rank 0, resumed: whether the checkpoint's run read another [data] train
 * (stored, its config, names it). Changing data is legitimate (a new
 * corpus for the next phase), so this warns, and says what the cursor
 * means now: it counts the samples seen and is kept (tokens seen and the
 * schedule follow from it), so the run goes on at that sample of the new
 * data's own seeded order, wrapping at its windows as any epoch does,
 * instead of where it stopped in the old data. */
static void warn_data_changed(const Trainer *t, const Config *stored)
{
    const char *now = t->cfg->data.train;
    int64_t cursor = t->st.cursor, windows = data_train_windows(t->data);
    if (strcmp(stored->data.train, now) && data_train_parts(t->data) == 1 && windows > 0)
        printf("warning: [data] train = %s, but the checkpoint's run read %s: the data cursor "
               "(%lld samples seen) is kept, so training goes on at sample %lld of the new "
               "data's seeded order: position %lld in its epoch %lld (it holds %lld windows), not "
               "where the old data stopped\n", now, stored->data.train, (long long)cursor,
               (long long)cursor, (long long)(cursor % windows), (long long)(cursor / windows),
               (long long)windows);
    else if (strcmp(stored->data.train, now))
        printf("warning: [data] train = %s, but the checkpoint's run read %s: the data cursor "
               "(%lld samples seen) is kept, so training goes on at sample %lld of the new "
               "blend's seeded order, each part wrapping at its own windows, not where the old "
               "data stopped\n", now, stored->data.train, (long long)cursor, (long long)cursor);
}

/* The step at which a schedule's cosine reaches min_lr. */
static int decay_end(const TrainConfig *tc)
{
    return tc->decay_steps > 0 ? tc->decay_steps : tc->steps;
}

/* A resume whose learning-rate schedule is not the checkpoint's (stored,
 * its config; most often: [train] steps raised to train on) says so, with
 * the next step's learning rate under each, instead of jumping in silence;
 * with steps changed it names decay_steps, which keeps the decayed
 * schedule. Rank 0. */
static void say_schedule_change(const Trainer *t, const Config *stored)
{
    const TrainConfig *now = &t->cfg->train, *then = &stored->train;
    double lr_now = optim_lr(now, t->step), lr_then = optim_lr(then, t->step);
    int end_now = decay_end(now), end_then = decay_end(then);
    if (end_now == end_then && lr_now == lr_then)
        return;
    if (end_now != end_then)
        printf("note: the cosine schedule now ends at step %d, the checkpoint's at step %d "
               "([train] steps %d, was %d): step %d trains at lr %.3g (%.3g on the "
               "checkpoint's schedule); to keep the checkpoint's schedule, set "
               "[train] decay_steps = %d\n", end_now, end_then, now->steps, then->steps,
               t->step + 1, lr_now, lr_then, end_then);
    else
        printf("note: the learning-rate schedule is not the checkpoint's ([train] lr, min_lr "
               "or warmup changed): step %d trains at lr %.3g (%.3g on the checkpoint's "
               "schedule)\n", t->step + 1, lr_now, lr_then);
}

/* Rank 0, resumed from path: what this run changed of the checkpoint's
 * run, read once from its stored config. One that cannot be read changes
 * nothing of the resume (the load verified the tensors, which is what the
 * run needs): only the data comparison, which a user may rely on, says it
 * was not made. */
static void say_changes_since(const Trainer *t, const char *path)
{
    static Config stored; /* large: not on the stack */
    char why[1024] = "";
    FILE *err = fmemopen(why, sizeof why, "w");
    int rc = ckpt_read_config(path, &stored, err);
    fclose(err);
    if (rc) {
        if (t->data)
            printf("note: [data] train not compared with the checkpoint's: %s", why);
        return;
    }
    say_schedule_change(t, &stored);
    if (t->data)
        warn_data_changed(t, &stored);
}

/* Fresh weights from the counter-based RNG or [checkpoint] init_from, or
 * the checkpoint that [checkpoint] resume names, whatever layout wrote it
 * (ckpt_resume.h). */
static int init_or_resume(Trainer *t)
{
    char path[CONFIG_PATH_MAX + 80];
    WatchdogPhase outer = watchdog_enter("ckpt_load", NULL);
    int rc = ckpt_resume_load(&t->model, t->zero, t->cfg, &t->st, path, sizeof path);
    watchdog_leave(outer);
    TRI_TRY(rc);
    if (!path[0] && t->init_from)
        return init_from_load(t->zero, t->cfg, &t->grid);
    if (!path[0]) {
        zero_init_weights(t->zero);
        return 0;
    }
    t->step = (int)t->st.step;
    if (t->scaler.dynamic) {
        t->scaler.scale = t->st.loss_scale;
        t->scaler.good_steps = t->st.scale_good_steps;
        t->scaler.overflows = t->st.scale_overflows;
    }
    if (is_root(t)) {
        printf("resumed from %s: step %d, %lld tokens seen\n", path, t->step,
               (long long)t->st.tokens);
        say_changes_since(t, path);
    }
    return 0;
}

/* Pipeline messages match in posting order (comm.h), so every stage's
 * receives must come in its sender's order. Each schedule is built so,
 * and t_schedule checks it; this keeps a schedule added later from
 * sending gradients to the wrong microbatch on the first step. */
static void check_message_order(ScheduleKind kind, int pp, int v, int m)
{
    int len = schedule_length(kind, v, m);
    Action *lists = TRI_MALLOC(sizeof *lists * (size_t)(pp * len), "the stages' schedules");
    for (int s = 0; s < pp; s++)
        schedule_build(kind, pp, v, s, m, lists + (size_t)s * len);
    if (!schedule_links_in_order(lists, len, pp, v))
        fail_abort("the pipeline schedule sends messages in another order than its "
                   "receivers take them", __FILE__, __LINE__);
    free(lists);
}

/* The plan's estimate of this rank's memory against what its node can
 * still give, before anything large is allocated: a run that cannot fit
 * fails at once, saying the estimate, instead of paging for minutes. CPU
 * runs only (a GPU's own memory is the device layer's). A pretended node
 * (node_size) holds fewer ranks than the machine: the check is then
 * lenient. Collective on world. */
static int check_memory_fits(Trainer *t)
{
    const Config *c = t->cfg;
    char msg[1024] = "";
    int rc = 0;
    if (t->grid.device == OPS_CPU) {
        PlanMemory m = plan_rank_memory(c, t->grid.layout.size, t->grid.layout.pp_stage, t->grid.layout.dp_rank,
                                        t->grid.layout.tp_rank, MODEL_HEAD_CPU_LOGITS);
        int64_t need = m.weights + m.grads + m.optimizer + m.activations + m.host;
        int64_t avail = host_memory_available();
        int share = t->grid.host_size > 0 ? t->grid.host_size : 1;
        const double gib = 1073741824.0;
        if (avail > 0 && need > avail / share) {
            snprintf(msg, sizeof msg,
                     "trident: the plan estimates %.2f GiB for rank %d (weights %.2f, gradients "
                     "%.2f, optimizer %.2f, activations %.2f GiB at [train] micro_batch = %d), but "
                     "its node has %.2f GiB available (MemAvailable + free swap, within the job's "
                     "cgroup) for %d rank(s): lower micro_batch (raise grad_accum to keep the "
                     "batch), recompute activations, raise [parallel] zero, use more nodes or a "
                     "smaller model; `trident plan` shows the layouts that fit\n",
                     need / gib, t->grid.layout.rank, m.weights / gib, m.grads / gib, m.optimizer / gib,
                     m.activations / gib, c->train.micro_batch, avail / gib, share);
            rc = 1;
        }
    }
    return fail_report(t->grid.world, rc, msg);
}

/* [checkpoint] async: the writer, and what its snapshot costs. */
static int start_writer(Trainer *t)
{
    TRI_TRY(ckpt_async_create(&t->async, &t->grid, stderr));
    double most = (double)ckpt_async_snapshot_bytes(&t->model, t->zero);
    most = max_over_world(t, most);
    if (is_root(t))
        printf("checkpoint: asynchronous; its host snapshot takes up to %.3f MiB per rank\n",
               most / 1048576.0);
    return 0;
}

int train_setup_build(Trainer *t)
{
    Config *cfg = t->cfg;
    grid_create(&t->grid, cfg, t->grid.world);
    if (is_root(t))
        grid_print(&t->grid, stdout);
    TRI_TRY(device_setup(&t->grid, cfg));
    t->device_ready = 1;
    t->times = (PipelineTimes){ops_timer_on(t->grid.device), ops_timer_on(t->grid.device)};
    t->dp_timer = ops_timer_on(t->grid.device);
    /* before the data loader's and checkpoint writer's threads exist: on a
     * CPU they would take the probe's cores (GPT-2 small's read half) */
    hw_peak_measure(&t->grid, model_dtype(cfg->train.precision), &t->hw_peak);
    if (fault_at("low_peak", t->grid.layout.rank, 0)) /* as a busy machine reads */
        t->hw_peak.flops /= 100.0;
    t->hw_probed = t->hw_peak.flops;
    measure_peak(t);
    t->rows = cfg->train.micro_batch;
    t->ga = cfg->train.grad_accum;
    t->global_batch = (int64_t)t->rows * t->ga * t->grid.layout.dp;
    scaler_init(&t->scaler, &cfg->train);
    t->st.best_val = INFINITY;
    ScheduleKind kind = cfg->parallel.schedule;
    int v = cfg->parallel.virtual_stages;
    t->actions = TRI_CALLOC((size_t)schedule_length(kind, v, t->ga), sizeof *t->actions, "the step's schedule");
    t->eval_actions = TRI_CALLOC((size_t)(v * t->ga), sizeof *t->eval_actions, "the step's schedule");
    t->index = TRI_CALLOC((size_t)(t->ga * t->rows), sizeof *t->index, "the batch");
    t->eval_batch = TRI_CALLOC((size_t)(t->ga * t->rows) * (size_t)(cfg->model.seq_len + 1),
                               sizeof *t->eval_batch, "the batch");
    t->n_actions = schedule_build(kind, t->grid.layout.pp, v, t->grid.layout.pp_stage, t->ga, t->actions);
    t->n_eval_actions = schedule_forwards(kind, t->grid.layout.pp, v, t->ga, t->eval_actions);
    check_message_order(kind, t->grid.layout.pp, v, t->ga);
    int slots = schedule_max_in_flight(t->actions, t->n_actions);
    TRI_TRY(check_memory_fits(t));
    TRI_TRY(init_from_check(cfg, &t->grid, &t->init_from));
    model_create(&t->model, cfg, &t->grid, slots);
    moe_metrics_init(&t->moe, &cfg->model);
    pipeline_create(&t->pipe, &t->model);
    print_plan(t);
    TRI_TRY(open_data(t));
    TRI_TRY(ckpt_resume_claim(&t->grid, cfg, &t->ckpt_lock));
    t->zero = zero_create(&t->model, cfg, &t->grid);
    TRI_TRY(init_or_resume(t));
    char msg[1024] = "";
    int rc = 0;
    if (is_root(t)) {
        static char text[1 << 16];
        config_to_ini(cfg, text, sizeof text);
        MetricsRun run = {.config_text = text, .steps = cfg->train.steps,
                          .resumed_step = t->step};
        FILE *err = fmemopen(msg, sizeof msg, "w");
        rc = metrics_open(&t->metrics, cfg->log.metrics, &run, err);
        fclose(err);
    }
    TRI_TRY(fail_report(t->grid.world, rc, msg));
    if (cfg->checkpoint.async && cfg->checkpoint.dir[0])
        TRI_TRY(start_writer(t));
    print_offload(t);
    print_memory(t);
    return 0;
}

void train_setup_teardown(Trainer *t)
{
    ckpt_async_destroy(t->async);
    if (t->loader)
        loader_destroy(t->loader);
    if (t->data)
        data_close(t->data);
    zero_destroy(t->zero);
    if (t->model.cfg) {
        pipeline_destroy(&t->pipe);
        model_destroy(&t->model);
    }
    metrics_close(&t->metrics);
    moe_metrics_free(&t->moe);
    ckpt_files_unlock(&t->ckpt_lock);
    free(t->actions);
    free(t->eval_actions);
    free(t->index);
    free(t->eval_batch);
    free(t->val_part_loss);
    blend_free(&t->val_blend);
    ops_timer_free(&t->times.busy);
    ops_timer_free(&t->times.wait);
    ops_timer_free(&t->dp_timer);
    if (prof_on)
        prof_stop(); /* a run that ended before its last step: the timers' events */
    if (t->device_ready)
        device_teardown(&t->grid);
    grid_destroy(&t->grid);
}
