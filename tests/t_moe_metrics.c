/*
 * t_moe_metrics.c - a mixture of experts' step figures (moe_metrics.h):
 * each rank's routing counts summed over the world into the aux mean,
 * every MoE layer's max over mean load and the worst layer, the dropped
 * pairs; and how metrics.jsonl and the step line show them. A dense model
 * has none, and its reduce is no collective (only rank 0 calls it here:
 * a collective would hang the test). Runs on 1 and 2 ranks.
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "grid.h"
#include "metrics.h"
#include "moe_metrics.h"
#include "run_summary.h"
#include "tap.h"

/* 4 layers, MoE every second one (layers 1 and 3), 4 experts. */
static ModelConfig moe_model(int z, double capacity)
{
    ModelConfig m;
    memset(&m, 0, sizeof m);
    m.arch = ARCH_LLAMA;
    m.n_layer = 4;
    m.n_expert = 4;
    m.top_k = 2;
    m.moe_every = 2;
    m.moe_z_loss = z ? 0.001 : 0.0;
    m.moe_capacity = capacity;
    return m;
}

/* What the whole world counted, split over the ranks: rank r adds its
 * share of layer 1's loads {4, 2, 0, 2} and layer 3's {3, 3, 3, 3}, of
 * the aux sum 4 over 4 forwards, the z sum 8 and 4 dropped pairs, so the
 * sums are the same on any number of ranks. */
static void add_counts(MoeMetrics *mm, int rank, int size)
{
    static const int64_t layer1[4] = {4, 2, 0, 2}, layer3[4] = {3, 3, 3, 3};
    int64_t mine1[4], mine3[4];
    for (int e = 0; e < 4; e++) {
        /* rank 0 keeps the remainder */
        mine1[e] = layer1[e] / size + (rank == 0 ? layer1[e] % size : 0);
        mine3[e] = layer3[e] / size + (rank == 0 ? layer3[e] % size : 0);
    }
    moe_metrics_add_layer(mm, 3, mine3);
    moe_metrics_add_layer(mm, 1, mine1);
    moe_metrics_add_totals(mm, 4.0 / size, 8.0 / size, rank == 0 ? 4 - (size - 1) : 1,
                           rank == 0 ? 4 - (size - 1) : 1);
}

/* The record metrics_write makes of s, in buf. */
static void written(const StepMetrics *s, char *buf, size_t n)
{
    Metrics mt;
    memset(&mt, 0, sizeof mt);
    mt.jsonl = tmpfile();
    metrics_write(&mt, s);
    rewind(mt.jsonl);
    size_t got = fread(buf, 1, n - 1, mt.jsonl);
    buf[got] = '\0';
    fclose(mt.jsonl);
}

/* The step line metrics_print makes of s, in buf. */
static void printed(const StepMetrics *s, char *buf, size_t n)
{
    FILE *f = tmpfile();
    metrics_print(f, s);
    rewind(f);
    size_t got = fread(buf, 1, n - 1, f);
    buf[got] = '\0';
    fclose(f);
}

/* mm set up for m, holding the world's sums of add_counts. */
static const MoeStepMetrics *summed(MoeMetrics *mm, const ModelConfig *m, const Grid *w,
                                    int rank, int size)
{
    moe_metrics_init(mm, m);
    moe_metrics_clear(mm);
    add_counts(mm, rank, size);
    return moe_metrics_reduce(mm, w);
}

/* The record and the step line of a step with the MoE figures s. */
static void shown(const MoeStepMetrics *s, char *json, char *line, size_t n)
{
    StepMetrics step = {.step = 7, .steps = 9, .loss = 2.5, .val_loss = NAN, .moe = s};
    written(&step, json, n);
    printed(&step, line, n);
}

static void test_dense(int rank)
{
    ModelConfig m = moe_model(0, 0.0);
    m.n_expert = 0;
    MoeMetrics mm;
    moe_metrics_init(&mm, &m);
    const MoeStepMetrics *s = NULL;
    if (rank == 0) {
        Grid w;
        grid_world_only(&w, MPI_COMM_WORLD);
        moe_metrics_clear(&mm);
        s = moe_metrics_reduce(&mm, &w);
    }
    char json[4096], line[4096];
    shown(s, json, line, sizeof json);
    tap_ok(!mm.on && s == NULL && !strstr(json, "moe") && !strstr(line, "moe"),
           "a dense model: no MoE figures, no collective, nothing written or printed");
    moe_metrics_free(&mm);
}

static void test_sums(const Grid *w, int rank, int size)
{
    ModelConfig m = moe_model(0, 0.0);
    MoeMetrics mm;
    const MoeStepMetrics *s = summed(&mm, &m, w, rank, size);
    tap_ok(s && s->n_layers == 2 && s->aux == 1.0 && isnan(s->z) && s->dropped == 4 &&
           s->load[0] == 2.0 && s->load[1] == 1.0 && s->load_max == 2.0 &&
           s->load_max_layer == 1,
           "summed over %d rank%s: aux 1, layer 1's max over mean 4 / 2, layer 3's 1, the "
           "worst is layer 1, 4 dropped", size, size == 1 ? "" : "s");
    if (s)
        tap_diag("aux %g load %g %g (max %g, layer %d) dropped %lld", s->aux, s->load[0],
                 s->load[1], s->load_max, s->load_max_layer, (long long)s->dropped);

    char json[4096], line[4096];
    shown(s, json, line, sizeof json);
    tap_ok(strstr(json, ",\"moe_aux\":1,\"moe_load_max\":2,\"moe_load_max_layer\":1,"
                        "\"moe_load\":[2,1],\"moe_dropped\":4}\n") && !strstr(json, "moe_z"),
           "metrics.jsonl: the aux mean, the worst layer and every layer's load, the drops; "
           "no moe_z without a z-loss");
    tap_diag("%s", json);
    tap_ok(strstr(line, " | moe aux 1.000 load 2.00 (h.1)") && !strstr(line, "dropped") &&
           !strstr(line, " z "),
           "the step line: aux and the worst layer; no drops where nothing can drop");
    tap_diag("%s", line);

    FILE *f = tmpfile();
    RunSummary sum = {.last_step = 9, .total_steps = 9, .train_loss = 2.5, .val_loss = NAN,
                      .ckpt_dir = "", .saved_step = -1, .saved_path = "", .metrics_path = "",
                      .moe = s};
    run_summary_print(f, &sum);
    rewind(f);
    size_t got = fread(json, 1, sizeof json - 1, f);
    json[got] = '\0';
    fclose(f);
    tap_ok(strstr(json, "summary: experts at the last logged step: aux 1.000, the worst layer's "
                        "load 2.00 x the mean (h.1), 4 (token, expert) pairs dropped\n") != NULL,
           "the run's summary: the last logged step's aux, worst load and drops");

    /* a second step starts from none */
    moe_metrics_clear(&mm);
    add_counts(&mm, rank, size);
    s = moe_metrics_reduce(&mm, w);
    tap_ok(s && s->aux == 1.0 && s->dropped == 4 && s->load[0] == 2.0,
           "the next step's sums start from none");
    moe_metrics_free(&mm);
}

static void test_z_and_capacity(const Grid *w, int rank, int size)
{
    ModelConfig m = moe_model(1, 1.25);
    MoeMetrics mm;
    const MoeStepMetrics *s = summed(&mm, &m, w, rank, size);
    char json[4096], line[4096];
    shown(s, json, line, sizeof json);
    tap_ok(s && s->z == 2.0 && strstr(json, ",\"moe_aux\":1,\"moe_z\":2,") &&
           strstr(line, " | moe aux 1.000 z 2 load 2.00 (h.1) dropped 4"),
           "with a z-loss and a capacity: the z mean and the drops, in the file and the line");
    tap_diag("%s", line);
    moe_metrics_free(&mm);
}

/* A layer no token reached has no max over mean: null in the file, and
 * the worst layer is the one that routed. */
static void test_empty_layer(const Grid *w, int rank)
{
    ModelConfig m = moe_model(0, 0.0);
    MoeMetrics mm;
    moe_metrics_init(&mm, &m);
    moe_metrics_clear(&mm);
    static const int64_t load[4] = {1, 1, 1, 5};
    if (rank == 0) {
        moe_metrics_add_layer(&mm, 3, load);
        moe_metrics_add_totals(&mm, 1.5, 0.0, 1, 0);
    }
    const MoeStepMetrics *s = moe_metrics_reduce(&mm, w);
    char json[4096], line[4096];
    shown(s, json, line, sizeof json);
    tap_ok(s && isnan(s->load[0]) && s->load[1] == 2.5 && s->load_max == 2.5 &&
           s->load_max_layer == 3 && strstr(json, "\"moe_load\":[null,2.5]"),
           "a layer nothing reached: null, and the worst layer is the other");
    tap_diag("%s", json);
    moe_metrics_free(&mm);
}

int main(int argc, char **argv)
{
    tap_init(&argc, &argv);
    tap_plan(8);
    int rank = tap_rank(), size = tap_size();
    Grid w;
    grid_world_only(&w, MPI_COMM_WORLD);
    test_dense(rank);
    test_sums(&w, rank, size);
    test_z_and_capacity(&w, rank, size);
    test_empty_layer(&w, rank);
    return tap_done();
}
