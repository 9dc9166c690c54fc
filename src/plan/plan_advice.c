/*
 * plan_advice.c - the last line of a plan, "train with:" and the options
 * that make `trident train` run what plan advises; see plan.h
 * (plan_print_advice).
 */
#include "plan.h"

#include <string.h>

#include "schedule.h"

/* " --set KEY=VALUE" (an int) where the advice differs from the config. */
static void advise_int(FILE *out, const char *key, int now, int advised)
{
    if (now != advised)
        fprintf(out, " --set %s=%d", key, advised);
}

static void advise_word(FILE *out, const char *key, const char *now, const char *advised)
{
    if (strcmp(now, advised))
        fprintf(out, " --set %s=%s", key, advised);
}

static const char *recompute_word(const TrainConfig *t, char *buf, size_t n)
{
    if (t->recompute == RECOMPUTE_EVERY)
        snprintf(buf, n, "every:%d", t->recompute_every);
    else
        snprintf(buf, n, "%s", t->recompute == RECOMPUTE_FULL ? "full" : "none");
    return buf;
}

/* One word of the user's own, quoted for a POSIX shell where it needs it. */
static void print_shell_word(const char *w, FILE *out)
{
    if (*w && w[strspn(w, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._=:/+,-")] == '\0') {
        fputs(w, out);
        return;
    }
    fputc('\'', out);
    for (; *w; w++) {
        if (*w == '\'')
            fputs("'\\''", out); /* close, an escaped quote, reopen */
        else
            fputc(*w, out);
    }
    fputc('\'', out);
}

void plan_print_advice(const Config *cfg, const Config *advice, const char *const *sets,
                       int n_sets, FILE *out)
{
    const ParallelConfig *p = &cfg->parallel, *a = &advice->parallel;
    char now[32], advised[32];
    fputs("train with:", out);
    for (int i = 0; i < n_sets; i++) {
        fputs(" --set ", out);
        print_shell_word(sets[i], out);
    }
    if (p->dp != 0) /* dp = 0 follows pp and tp by itself */
        advise_int(out, "parallel.dp", p->dp, a->dp);
    advise_int(out, "parallel.pp", p->pp, a->pp);
    advise_int(out, "parallel.cp", p->cp, a->cp);
    advise_int(out, "parallel.tp", p->tp, a->tp);
    advise_int(out, "parallel.ep", p->ep, a->ep);
    advise_int(out, "train.grad_accum", cfg->train.grad_accum, advice->train.grad_accum);
    advise_int(out, "parallel.zero", p->zero, a->zero);
    advise_word(out, "train.recompute", recompute_word(&cfg->train, now, sizeof now),
                recompute_word(&advice->train, advised, sizeof advised));
    advise_word(out, "train.offload", cfg->train.offload ? "optimizer" : "none",
                advice->train.offload ? "optimizer" : "none");
    advise_word(out, "parallel.schedule", schedule_name(p->schedule), schedule_name(a->schedule));
    advise_int(out, "parallel.virtual_stages", p->virtual_stages, a->virtual_stages);
    advise_word(out, "parallel.sequence_parallel", p->sequence_parallel ? "true" : "false",
                a->sequence_parallel ? "true" : "false");
    advise_int(out, "log.sample_tokens", cfg->log.sample_tokens, advice->log.sample_tokens);
    fputc('\n', out);
}
