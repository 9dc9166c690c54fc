/*
 * data_sampler.c - the seeded window sampler: training sample g of each
 * blend part is a pure function of (seed, g); validation windows are read
 * in order (see data.h, data_sampler.h).
 *
 * Why this shape:
 * - Training sample g is a pure function of (seed, g) (doc/design.md, invariant 1):
 *   epoch e = g / W picks a seeded shift and a seeded permutation of the W
 *   windows, computed in O(1) memory by a Feistel network, so no rank stores
 *   or communicates an order, and resuming at any g needs only g.
 * - The blend walk (which part sample g comes from) is passed in by the
 *   caller: the loader thread keeps its own, and the calls of data.h make a
 *   walk for themselves, so the Dataset stays immutable and shared without
 *   locks.
 */
#include "data_sampler.h"

#include "data_format.h"
#include "data_impl.h"
#include "rng.h"

/* Hashing and the permutation. */

#define TAG_SHIFT 0x5348494654ULL  /* "SHIFT": keeps the two streams apart */
#define TAG_PERM 0x5045524dULL     /* "PERM" */

/* Folds v into the running hash h; distinct v give distinct inputs to the
 * final mix for a fixed h, because rng_mix64 is a bijection. */
static uint64_t hash_combine(uint64_t h, uint64_t v)
{
    return rng_mix64(h + DATA_GOLDEN + rng_mix64(v));
}

static uint64_t epoch_key(uint64_t seed, uint64_t tag, int64_t epoch)
{
    return hash_combine(hash_combine(seed, tag), (uint64_t)epoch);
}

/* Smallest h with 4^h >= w (w >= 2): the Feistel network is balanced, so
 * its domain is 2^(2h) values, less than 4w, which bounds cycle-walking. */
static int half_bits(int64_t w)
{
    int h = 1;
    while (h < 32 && (((uint64_t)1 << (2 * h)) < (uint64_t)w))
        h++;
    return h;
}

/* Four Feistel rounds on (l, r), h bits each. Each round maps (l, r) to
 * (r, l ^ F(r)), which is undone by (l, r) = (r' ^ F(l'), l'), so the
 * network is a bijection of [0, 4^h) whatever the round function F. */
static uint64_t feistel(uint64_t x, int h, const uint64_t key[4])
{
    uint64_t mask = ((uint64_t)1 << h) - 1;
    uint64_t l = x >> h, r = x & mask;
    for (int i = 0; i < 4; i++) {
        uint64_t t = l ^ (rng_mix64(key[i] ^ r) & mask);
        l = r;
        r = t;
    }
    return (l << h) | r;
}

/* A seeded bijection of [0, w): apply the Feistel permutation of [0, 4^h)
 * until the value falls back into [0, w) ("cycle-walking"). It terminates:
 * p lies on a finite cycle of the permutation, and that cycle comes back to
 * p < w. It is a bijection: walking the cycles backwards from the result
 * recovers p, so two starting points cannot meet. Since 4^h < 4w, it takes
 * fewer than 4 steps on average. */
static int64_t permute(int64_t p, int64_t w, uint64_t key)
{
    if (w <= 1)
        return 0;
    uint64_t round_key[4];
    for (int i = 0; i < 4; i++)
        round_key[i] = hash_combine(key, (uint64_t)i);
    int h = half_bits(w);
    uint64_t x = (uint64_t)p;
    do
        x = feistel(x, h, round_key);
    while (x >= (uint64_t)w);
    return (int64_t)x;
}

/* Sampling. */

/* Start offset of sample k of training part tp. */
static int64_t part_offset(const Dataset *ds, const TrainPart *tp, uint64_t seed, int64_t k)
{
    uint64_t s = seed ^ tp->seed_salt;
    int64_t w = tp->windows, e = k / w, p = k % w;
    int64_t shift = 0;
    if (tp->shifted)
        shift = (int64_t)(epoch_key(s, TAG_SHIFT, e) % (uint64_t)ds->seq_len);
    int64_t window = permute(p, w, epoch_key(s, TAG_PERM, e));
    return shift + window * ds->seq_len;
}

/* The part and offset of training sample g, walking the blend with walk. */
static int locate(const Dataset *ds, BlendWalk *walk, uint64_t seed, int64_t g, int64_t *offset)
{
    if (g < 0)
        data_bug("data_train_offset: negative sample index");
    int64_t k;
    int j = blend_locate(&ds->train_blend, walk, g, &k);
    *offset = part_offset(ds, &ds->train[j], seed, k);
    return j;
}

/* A walk of its own for a call that has none: from sample 0. */
static int locate_once(const Dataset *ds, uint64_t seed, int64_t g, int64_t *offset)
{
    BlendWalk walk;
    if (blend_walk_init(&walk, &ds->train_blend))
        data_bug("out of memory for a blend walk");
    int j = locate(ds, &walk, seed, g, offset);
    blend_walk_free(&walk);
    return j;
}

int64_t data_train_offset(const Dataset *ds, uint64_t seed, int64_t g)
{
    int64_t offset;
    locate_once(ds, seed, g, &offset);
    return offset;
}

int data_train_part(const Dataset *ds, int64_t g)
{
    int64_t offset;
    return locate_once(ds, 0, g, &offset);
}

int data_sampler_read(const Dataset *ds, BlendWalk *walk, uint64_t seed, int64_t g,
                      int32_t *out, DataError *why)
{
    DataError ignored;
    int64_t offset;
    int j = locate(ds, walk, seed, g, &offset);
    return data_format_read(&ds->train[j].split, ds->vocab, offset, ds->seq_len + 1, out,
                            why ? why : &ignored);
}

int data_train_sample(const Dataset *ds, uint64_t seed, int64_t g, int32_t *out,
                      DataError *why)
{
    BlendWalk walk;
    if (blend_walk_init(&walk, &ds->train_blend))
        data_bug("out of memory for a blend walk");
    int rc = data_sampler_read(ds, &walk, seed, g, out, why);
    blend_walk_free(&walk);
    return rc;
}

int data_val_part_sample(const Dataset *ds, int j, int64_t i, int32_t *out, DataError *why)
{
    DataError ignored;
    if (j < 0 || j >= ds->val_of->n)
        data_bug("data_val_part_sample: no such validation dataset");
    const ValPart *vp = &ds->val[j];
    int64_t v = vp->windows, k = i % v;
    if (k < 0)
        k += v;
    return data_format_read(&vp->split, ds->vocab, k * ds->seq_len, ds->seq_len + 1, out,
                            why ? why : &ignored);
}

int data_val_sample(const Dataset *ds, int64_t i, int32_t *out, DataError *why)
{
    return data_val_part_sample(ds, 0, i, out, why);
}
