/*
 * blend.h - a weighted mix of datasets, `[data] train = 0.7 web 0.3 code`:
 * parsing the key, and which dataset each global sample comes from.
 *
 * Sample g goes to the dataset furthest below its share, Megatron-LM's rule
 * (build_blending_indices): with weights w normalised to sum 1 and c_j the
 * samples dataset j has had among [0, g), the one with the largest
 * w_j * max(g, 1) - c_j, the first on a tie. Sample g is then sample c_j of
 * dataset j. So every dataset's count after N samples is within one of its
 * share of N, the choice is a pure function of g (invariant 1: any layout,
 * any resume), and the only state, the counts, is rebuilt from g itself.
 */
#ifndef TRI_SRC_BLEND_H
#define TRI_SRC_BLEND_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int n;              /* datasets: 1 when the value is a single name */
    double *weight;     /* normalised, summing to 1 */
    char **prefix;      /* as written */
    char **name;        /* for val_loss/<name>: the prefix's base name, or
                           the prefix itself when two share a base name */
} Blend;

/* Parses a key's value: a single name (the whole value, spaces and all,
 * unless its first word is a number), or WEIGHT NAME pairs whose weights
 * are finite, >= 0 and sum to more than 0. Returns 0, or 1 with the reason
 * in why (no key, no newline). Not collective. */
int blend_parse(const char *text, Blend *b, char *why, size_t why_size);
void blend_free(Blend *b);

/* Where a walk through the samples stands: the counts of each dataset
 * among samples [0, pos). Private to one thread. */
typedef struct {
    int64_t pos;
    int64_t *count;     /* b->n entries */
} BlendWalk;

/* Returns 0, or 1 when memory cannot be had. Not collective. */
int blend_walk_init(BlendWalk *w, const Blend *b);
void blend_walk_free(BlendWalk *w);

/* The dataset sample g >= 0 comes from, and its index among that dataset's
 * samples in *local. Walks forward from w's position (from 0 when g is
 * behind it): O(n) per sample for increasing g, O(g * n) for the first
 * call of a resumed run. Not collective. */
int blend_locate(const Blend *b, BlendWalk *w, int64_t g, int64_t *local);

#endif
