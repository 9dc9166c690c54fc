/*
 * t_blend.c - TAP test of blends (blend.c, and data.c's use of them):
 * parsing [data] train's value and its messages; the proportions, counted
 * from the tokens of the samples read (each dataset's ids lie in a range of
 * their own), exact at every multiple of the weights' denominator and
 * within one sample of each share at every prefix; a loader started at a
 * resumed cursor, and loaders splitting the batch as DP ranks do, read the
 * rows one loader reads straight through.
 */
#include "blend.h"
#include "data.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"

#define PARTS 3
#define SPAN 100         /* dataset j's ids lie in [j * SPAN, (j + 1) * SPAN) */
#define TOKENS 20000     /* per dataset */
#define SEQ 8
#define ROWS 64          /* a global batch */
#define STEPS 500        /* 32000 samples: several epochs of each dataset */

static char paths[PARTS][256];

static void put_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* An llm.c shard of TOKENS ids from dataset j's range. */
static void write_dataset(int j)
{
    const char *dir = getenv("TMPDIR");
    snprintf(paths[j], sizeof paths[j], "%s/trident-t_blend-XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(paths[j]);
    size_t size = 1024 + 2 * TOKENS;
    uint8_t *b = calloc(size, 1);
    if (fd < 0 || !b)
        abort();
    put_le32(b, 20240520);
    put_le32(b + 4, 1);
    put_le32(b + 8, TOKENS);
    for (int i = 0; i < TOKENS; i++) {
        int id = j * SPAN + (i * 37 + j) % SPAN;
        b[1024 + 2 * i] = (uint8_t)(id & 0xff);
        b[1024 + 2 * i + 1] = (uint8_t)(id >> 8);
    }
    if (write(fd, b, size) != (ssize_t)size)
        abort();
    close(fd);
    free(b);
}

static void parse_ok(const char *text, int n, const char *names, const char *what)
{
    Blend b;
    char why[512], got[512] = "";
    int rc = blend_parse(text, &b, why, sizeof why);
    double sum = 0;
    for (int i = 0; !rc && i < b.n; i++) {
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s%s", i ? "," : "", b.name[i]);
        sum += b.weight[i];
    }
    int ok = !rc && b.n == n && !strcmp(got, names) && fabs(sum - 1) < 1e-12;
    if (!ok)
        tap_diag("rc %d: %s; names \"%s\", sum %g", rc, rc ? why : "", got, sum);
    tap_ok(ok, "blend_parse \"%s\": %s", text, what);
    if (!rc)
        blend_free(&b);
}

static void parse_bad(const char *text, const char *want)
{
    Blend b;
    char why[512] = "";
    int rc = blend_parse(text, &b, why, sizeof why);
    int ok = rc && !strcmp(why, want);
    if (!ok)
        tap_diag("rc %d, got \"%s\", want \"%s\"", rc, why, want);
    tap_ok(ok, "blend_parse \"%s\" refused: %s", text, why);
}

static void test_parse(void)
{
    parse_ok("data/web", 1, "web", "a single name");
    parse_ok("my corpus/web text", 1, "web text", "a single name with spaces (no weight first)");
    parse_ok("0.7 a/web 0.3 b/code", 2, "web,code", "two datasets, named by base name");
    parse_ok("2 a/web 1 b/web 1 c", 3, "a/web,b/web,c", "a shared base name keeps the prefix");
    parse_bad("0.7 web x code", "weight 2 (\"x\") is not a number: a blend is WEIGHT NAME pairs, "
              "e.g. 0.7 web 0.3 code");
    parse_bad("0.7 web 0.3", "weight 0.3 has no dataset after it: a blend is WEIGHT NAME pairs, "
              "e.g. 0.7 web 0.3 code");
    parse_bad("0.7 web -0.3 code", "weight 2 (-0.3, of code) must be a finite number >= 0");
    parse_bad("1 web inf code", "weight 2 (inf, of code) must be a finite number >= 0");
    parse_bad("0 web 0 code", "the weights sum to 0: they must sum to a finite number > 0");
    parse_bad("1 web 2 web", "web is named twice: give each dataset one weight");
}

static Dataset *open_blend(const char *weights[PARTS])
{
    DataConfig c;
    memset(&c, 0, sizeof c);
    snprintf(c.train, sizeof c.train, "%s %s %s %s %s %s", weights[0], paths[0], weights[1],
             paths[1], weights[2], paths[2]);
    c.format = DATA_TOKENS;
    c.val_fraction = 0.1;
    Dataset *ds = NULL;
    if (data_open(&ds, &c, SEQ, PARTS * SPAN, stderr))
        return NULL;
    return ds;
}

/* The dataset a row came from, by its first token; -1 if its tokens mix. */
static int row_part(const int32_t *row)
{
    int j = row[0] / SPAN;
    for (int i = 1; i <= SEQ; i++)
        if (row[i] / SPAN != j)
            return -1;
    return j;
}

/* Reads samples [0, STEPS * ROWS) a batch at a time and counts each
 * dataset's: exactly its share at every multiple of 10 samples (the
 * weights are tenths), within one sample of it everywhere. */
static void test_proportions(Dataset *ds, const double w[PARTS])
{
    Loader *ld = loader_create(ds, 7, ROWS);
    int64_t count[PARTS] = {0}, index[ROWS];
    double worst = 0;
    int exact = 1, mixed = 0;
    for (int s = 0; s < STEPS; s++) {
        for (int k = 0; k < ROWS; k++)
            index[k] = (int64_t)s * ROWS + k;
        loader_request(ld, index);
        const int32_t *b = loader_wait(ld, NULL, NULL);
        for (int k = 0; k < ROWS && b; k++) {
            int j = row_part(b + (size_t)k * (SEQ + 1));
            if (j < 0) {
                mixed++;
                continue;
            }
            count[j]++;
            int64_t n = index[k] + 1;
            for (int i = 0; i < PARTS; i++) {
                double off = fabs((double)count[i] - w[i] * (double)n);
                worst = off > worst ? off : worst;
                if (n % 10 == 0 && fabs((double)count[i] - w[i] * (double)n) > 1e-6)
                    exact = 0;
            }
        }
    }
    loader_destroy(ld);
    tap_ok(!mixed && exact && worst <= 1.0,
           "weights %.1f %.1f %.1f: %lld / %lld / %lld of %d samples; exact at every 10th, "
           "at most %.2f from a share anywhere", w[0], w[1], w[2], (long long)count[0],
           (long long)count[1], (long long)count[2], STEPS * ROWS, worst);
}

/* Rows of samples [first, first + n) as one loader reads them. */
static int32_t *read_rows(Dataset *ds, int64_t first, int n)
{
    Loader *ld = loader_create(ds, 7, n);
    int32_t *rows = malloc((size_t)n * (SEQ + 1) * sizeof *rows);
    int64_t *index = malloc((size_t)n * sizeof *index);
    for (int k = 0; k < n; k++)
        index[k] = first + k;
    loader_request(ld, index);
    const int32_t *b = loader_wait(ld, NULL, NULL);
    if (b)
        memcpy(rows, b, (size_t)n * (SEQ + 1) * sizeof *rows);
    loader_destroy(ld);
    free(index);
    return b ? rows : (free(rows), NULL);
}

/* A straight loader over 40 steps, against a loader started at step 25
 * (a resume: its walk replays from 0) and against two loaders that each
 * take half of every batch (dp = 2). */
static void test_resume_and_layout(Dataset *ds)
{
    const int steps = 40, resume_at = 25;
    size_t row = SEQ + 1;
    int32_t *straight = malloc((size_t)steps * ROWS * row * sizeof *straight);
    Loader *ld = loader_create(ds, 7, ROWS);
    int64_t index[ROWS];
    for (int s = 0; s < steps; s++) {
        for (int k = 0; k < ROWS; k++)
            index[k] = (int64_t)s * ROWS + k;
        loader_request(ld, index);
        memcpy(straight + (size_t)s * ROWS * row, loader_wait(ld, NULL, NULL),
               ROWS * row * sizeof *straight);
    }
    loader_destroy(ld);
    int32_t *resumed = read_rows(ds, (int64_t)resume_at * ROWS, ROWS);
    tap_ok(resumed && !memcmp(resumed, straight + (size_t)resume_at * ROWS * row,
                              ROWS * row * sizeof *resumed),
           "a loader started at step %d (a resume) reads the straight run's rows", resume_at);
    free(resumed);
    int same = 1;
    for (int s = 30; s < steps; s++)
        for (int r = 0; r < 2; r++) {
            int32_t *half = read_rows(ds, (int64_t)s * ROWS + r * ROWS / 2, ROWS / 2);
            same = same && half && !memcmp(half, straight + ((size_t)s * ROWS + r * ROWS / 2) * row,
                                           ROWS / 2 * row * sizeof *half);
            free(half);
        }
    tap_ok(same, "two loaders taking half a batch each (dp = 2) read the same rows");
    int32_t one[SEQ + 1];
    int64_t g = 17 * ROWS + 5;
    tap_ok(data_train_sample(ds, 7, g, one, NULL) == 0 &&
           !memcmp(one, straight + (size_t)g * row, sizeof one) &&
           data_train_part(ds, g) == row_part(one),
           "data_train_sample and data_train_part agree with the loader (sample %lld)",
           (long long)g);
    free(straight);
}

int main(int argc, char **argv)
{
    tap_init(&argc, &argv);
    tap_plan(16);
    test_parse();
    for (int j = 0; j < PARTS; j++)
        write_dataset(j);
    const char *w1[PARTS] = {"0.5", "0.3", "0.2"};
    Dataset *ds = open_blend(w1);
    tap_ok(ds && data_train_parts(ds) == PARTS && data_val_parts(ds) == PARTS,
           "a blend of three token shards opens: three train and three validation parts");
    if (ds) {
        test_proportions(ds, (const double[PARTS]){0.5, 0.3, 0.2});
        test_resume_and_layout(ds);
        data_close(ds);
    }
    /* weights that do not sum to 1, one of them 0: normalised, the zero never drawn */
    const char *w2[PARTS] = {"6", "0", "4"};
    ds = open_blend(w2);
    if (ds) {
        test_proportions(ds, (const double[PARTS]){0.6, 0.0, 0.4});
        data_close(ds);
    } else {
        tap_ok(0, "the blend 6 / 0 / 4 opens");
    }
    for (int j = 0; j < PARTS; j++)
        unlink(paths[j]);
    return tap_done();
}
