/* index.c -- per-device hash tables of measurements, read-mostly. */
#include "index.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../common/hash.h"

typedef struct ix_shape {
    attn_shape shape;
    char key[ATTN_SHAPE_KEY_MAX];
    uint64_t hash;
    store_measurement *m; /* sorted by stack id, then tactic */
    int n;
    int64_t taken_sum;    /* sum of m[].taken_at, incumbent marks: the */
    int64_t marks;        /* database fingerprint (index_device_view) */
    /* Winners under the daemon's policy, cached because almost every
     * lookup uses it: index into m, -1 if none. */
    int win_fresh;        /* among rows of the device's current stack */
    int win_stale;        /* among the most recent other stack with a winner */
} ix_shape;

typedef struct ix_device {
    attn_device_info info;
    attn_stack stack;
    int local;
    ix_shape *shapes;
    int nshapes, cap;
    int32_t *slots;       /* open addressing, linear probing; -1 empty */
    uint32_t nslots;      /* power of two, > 2 * nshapes */
    int64_t nmeas;
    int64_t taken_sum, marks; /* totals of the shapes' */
} ix_device;

struct index_state {
    pthread_rwlock_t lock;
    select_policy policy;
    ix_device *devs;
    int ndevs, cap;
};

const char *index_source_name(index_source s)
{
    switch (s) {
    case INDEX_MEASURED: return "measured";
    case INDEX_NEAREST: return "nearest";
    default: return "default";
    }
}

index_state *index_new(const select_policy *p)
{
    index_state *ix = calloc(1, sizeof *ix);
    if (ix == NULL)
        return NULL;
    if (pthread_rwlock_init(&ix->lock, NULL) != 0) {
        free(ix);
        return NULL;
    }
    if (p != NULL)
        ix->policy = *p;
    else
        select_policy_default(&ix->policy);
    return ix;
}

static void free_shapes(ix_shape *shapes, int n)
{
    for (int i = 0; i < n; i++)
        free(shapes[i].m);
    free(shapes);
}

void index_free(index_state *ix)
{
    if (ix == NULL)
        return;
    for (int i = 0; i < ix->ndevs; i++) {
        free_shapes(ix->devs[i].shapes, ix->devs[i].nshapes);
        free(ix->devs[i].slots);
    }
    free(ix->devs);
    pthread_rwlock_destroy(&ix->lock);
    free(ix);
}

const select_policy *index_policy(const index_state *ix)
{
    return &ix->policy;
}

static uint64_t key_hash(const char *key)
{
    return hash_fnv1a64(hash_fnv1a64_init(), key, strlen(key));
}

static ix_device *find_device(index_state *ix, const char *id)
{
    for (int i = 0; i < ix->ndevs; i++)
        if (strcmp(ix->devs[i].info.id, id) == 0)
            return &ix->devs[i];
    return NULL;
}

static int cmp_rows(const void *a, const void *b)
{
    const store_measurement *x = a, *y = b;
    int c = strcmp(x->stack_id, y->stack_id);
    return c != 0 ? c : strcmp(x->tactic, y->tactic);
}

/* Winner among m[0..n) of one shape under (p, mre), preferring the rows of
 * the current stack cur; other stacks are tried by recency (their newest
 * row), but only those of cur's power mode: a row taken in another mode
 * belongs to another device state and is never served (kernels/power.h).
 * Sets *stale. Returns the row index or -1. Rows are sorted by stack. */
static int pick_winner(const store_measurement *m, int n, const attn_stack *cur,
                       const select_policy *p, double mre, int *stale)
{
    const char *cur_stack = cur->id;
    int best = -1;
    int64_t best_at = INT64_MIN;
    *stale = 0;
    for (int lo = 0; lo < n;) {
        int hi = lo + 1;
        int64_t newest = m[lo].taken_at;
        while (hi < n && strcmp(m[hi].stack_id, m[lo].stack_id) == 0) {
            if (m[hi].taken_at > newest)
                newest = m[hi].taken_at;
            hi++;
        }
        int w = strcmp(m[lo].power, cur->power) == 0 ? select_winner(m + lo, hi - lo, p, mre)
                                                       : -1;
        if (w >= 0) {
            if (strcmp(m[lo].stack_id, cur_stack) == 0) {
                *stale = 0;
                return lo + w;
            }
            if (newest > best_at) {
                best_at = newest;
                best = lo + w;
            }
        }
        lo = hi;
    }
    *stale = best >= 0;
    return best;
}

static void cache_winners(ix_shape *sh, const attn_stack *cur_stack, const select_policy *p)
{
    int stale;
    int w = pick_winner(sh->m, sh->n, cur_stack, p, 0, &stale);
    sh->win_fresh = (w >= 0 && !stale) ? w : -1;
    sh->win_stale = (w >= 0 && stale) ? w : -1;
}

/* Fill sh's fingerprint sums from its rows. */
static void shape_sums(ix_shape *sh)
{
    sh->taken_sum = sh->marks = 0;
    for (int i = 0; i < sh->n; i++) {
        sh->taken_sum += sh->m[i].taken_at;
        sh->marks += sh->m[i].incumbent != 0;
    }
}

/* Set d's row count and fingerprint sums from its shapes. */
static void device_totals(ix_device *d)
{
    d->nmeas = d->taken_sum = d->marks = 0;
    for (int i = 0; i < d->nshapes; i++) {
        d->nmeas += d->shapes[i].n;
        d->taken_sum += d->shapes[i].taken_sum;
        d->marks += d->shapes[i].marks;
    }
}

/* Build a slot table for shapes[0..n): *slots malloc'd. */
static int build_slots(const ix_shape *shapes, int n, int32_t **slots, uint32_t *nslots)
{
    uint32_t cap = 16;
    while (cap < 2u * (uint32_t)n + 2)
        cap *= 2;
    int32_t *t = malloc(cap * sizeof *t);
    if (t == NULL)
        return ATTUNE_ENOMEM;
    for (uint32_t i = 0; i < cap; i++)
        t[i] = -1;
    for (int i = 0; i < n; i++) {
        uint32_t j = (uint32_t)shapes[i].hash & (cap - 1);
        while (t[j] >= 0)
            j = (j + 1) & (cap - 1);
        t[j] = i;
    }
    *slots = t;
    *nslots = cap;
    return 0;
}

static int find_slot_shape(const ix_device *d, const char *key, uint64_t h)
{
    if (d->nslots == 0)
        return -1;
    uint32_t mask = d->nslots - 1;
    for (uint32_t j = (uint32_t)h & mask;; j = (j + 1) & mask) {
        int32_t i = d->slots[j];
        if (i < 0)
            return -1;
        if (d->shapes[i].hash == h && strcmp(d->shapes[i].key, key) == 0)
            return i;
    }
}

int index_device_put(index_state *ix, const attn_device_info *info, const attn_stack *stack,
                     int local)
{
    int rc = 0;
    pthread_rwlock_wrlock(&ix->lock);
    ix_device *d = find_device(ix, info->id);
    if (d == NULL) {
        if (ix->ndevs == ix->cap) {
            int cap = ix->cap ? ix->cap * 2 : 8;
            ix_device *nd = realloc(ix->devs, (size_t)cap * sizeof *nd);
            if (nd == NULL) {
                rc = ATTUNE_ENOMEM;
                goto out;
            }
            ix->devs = nd;
            ix->cap = cap;
        }
        d = &ix->devs[ix->ndevs++];
        memset(d, 0, sizeof *d);
    }
    d->info = *info;
    d->stack = *stack;
    d->local = local || d->local; /* a fleet copy of a local device stays local */
    for (int i = 0; i < d->nshapes; i++)
        cache_winners(&d->shapes[i], &d->stack, &ix->policy);
out:
    pthread_rwlock_unlock(&ix->lock);
    return rc;
}

int index_shape_put(index_state *ix, const char *device_id, const attn_shape *s,
                    store_measurement *m, int n)
{
    int rc = 0;
    if (n > 1)
        qsort(m, (size_t)n, sizeof *m, cmp_rows);
    ix_shape fresh;
    memset(&fresh, 0, sizeof fresh);
    fresh.shape = *s;
    attn_shape_key(s, fresh.key, sizeof fresh.key);
    fresh.hash = key_hash(fresh.key);
    fresh.m = m;
    fresh.n = n;
    shape_sums(&fresh);

    pthread_rwlock_wrlock(&ix->lock);
    ix_device *d = find_device(ix, device_id);
    if (d == NULL) {
        rc = ATTUNE_ENODEV;
        goto out;
    }
    cache_winners(&fresh, &d->stack, &ix->policy);
    int i = find_slot_shape(d, fresh.key, fresh.hash);
    if (i >= 0) {
        d->nmeas += n - d->shapes[i].n;
        d->taken_sum += fresh.taken_sum - d->shapes[i].taken_sum;
        d->marks += fresh.marks - d->shapes[i].marks;
        free(d->shapes[i].m);
        d->shapes[i] = fresh;
        m = NULL;
        goto out;
    }
    if (d->nshapes == d->cap) {
        int cap = d->cap ? d->cap * 2 : 64;
        ix_shape *ns = realloc(d->shapes, (size_t)cap * sizeof *ns);
        if (ns == NULL) {
            rc = ATTUNE_ENOMEM;
            goto out;
        }
        d->shapes = ns;
        d->cap = cap;
    }
    d->shapes[d->nshapes++] = fresh;
    d->nmeas += n;
    d->taken_sum += fresh.taken_sum;
    d->marks += fresh.marks;
    m = NULL;
    if ((uint32_t)d->nshapes * 2 + 2 > d->nslots) {
        int32_t *slots;
        uint32_t nslots;
        if ((rc = build_slots(d->shapes, d->nshapes, &slots, &nslots)) != 0) {
            /* keep the entry findable: roll the append back */
            d->nshapes--;
            d->nmeas -= n;
            d->taken_sum -= fresh.taken_sum;
            d->marks -= fresh.marks;
            m = fresh.m;
            goto out;
        }
        free(d->slots);
        d->slots = slots;
        d->nslots = nslots;
    } else {
        uint32_t mask = d->nslots - 1;
        uint32_t j = (uint32_t)fresh.hash & mask;
        while (d->slots[j] >= 0)
            j = (j + 1) & mask;
        d->slots[j] = d->nshapes - 1;
    }
out:
    pthread_rwlock_unlock(&ix->lock);
    free(m);
    return rc;
}

typedef struct keyed_row {
    char key[ATTN_SHAPE_KEY_MAX];
    int row;
} keyed_row;

static int cmp_keyed(const void *a, const void *b)
{
    return strcmp(((const keyed_row *)a)->key, ((const keyed_row *)b)->key);
}

int index_device_load(index_state *ix, const char *device_id, store_measurement *m, int n)
{
    int rc = ATTUNE_ENOMEM;
    keyed_row *kr = NULL;
    ix_shape *shapes = NULL;
    int nshapes = 0;
    int32_t *slots = NULL;
    uint32_t nslots = 0;

    if (n > 0 && (kr = malloc((size_t)n * sizeof *kr)) == NULL)
        goto fail;
    for (int i = 0; i < n; i++) {
        attn_shape_key(&m[i].shape, kr[i].key, sizeof kr[i].key);
        kr[i].row = i;
    }
    if (n > 1)
        qsort(kr, (size_t)n, sizeof *kr, cmp_keyed);
    if (n > 0 && (shapes = calloc((size_t)n, sizeof *shapes)) == NULL)
        goto fail;
    for (int lo = 0; lo < n;) {
        int hi = lo + 1;
        while (hi < n && strcmp(kr[hi].key, kr[lo].key) == 0)
            hi++;
        ix_shape *sh = &shapes[nshapes++];
        sh->shape = m[kr[lo].row].shape;
        memcpy(sh->key, kr[lo].key, sizeof sh->key);
        sh->hash = key_hash(sh->key);
        sh->n = hi - lo;
        if ((sh->m = malloc((size_t)sh->n * sizeof *sh->m)) == NULL)
            goto fail;
        for (int k = lo; k < hi; k++)
            sh->m[k - lo] = m[kr[k].row];
        if (sh->n > 1)
            qsort(sh->m, (size_t)sh->n, sizeof *sh->m, cmp_rows);
        shape_sums(sh);
        lo = hi;
    }
    if ((rc = build_slots(shapes, nshapes, &slots, &nslots)) != 0)
        goto fail;

    pthread_rwlock_wrlock(&ix->lock);
    ix_device *d = find_device(ix, device_id);
    if (d == NULL) {
        pthread_rwlock_unlock(&ix->lock);
        rc = ATTUNE_ENODEV;
        goto fail;
    }
    for (int i = 0; i < nshapes; i++)
        cache_winners(&shapes[i], &d->stack, &ix->policy);
    ix_shape *old = d->shapes;
    int nold = d->nshapes;
    int32_t *old_slots = d->slots;
    d->shapes = shapes;
    d->nshapes = d->cap = nshapes;
    d->slots = slots;
    d->nslots = nslots;
    device_totals(d);
    pthread_rwlock_unlock(&ix->lock);
    free_shapes(old, nold);
    free(old_slots);
    free(kr);
    free(m);
    return 0;

fail:
    free_shapes(shapes, nshapes);
    free(slots);
    free(kr);
    free(m);
    return rc;
}

static void view_of(const ix_device *d, index_device_view *v)
{
    v->info = d->info;
    v->stack = d->stack;
    v->local = d->local;
    v->nshapes = d->nshapes;
    v->nmeasurements = d->nmeas;
    v->taken_sum = d->taken_sum;
    v->marks = d->marks;
}

int index_device_find(index_state *ix, const char *spec, index_device_view *out)
{
    int rc = ATTUNE_ENODEV;
    if (spec == NULL || *spec == 0)
        return rc;
    int is_cpu = strcasecmp(spec, "cpu") == 0;
    int ordinal = attn_device_ordinal(spec);
    pthread_rwlock_rdlock(&ix->lock);
    /* pass 0: local devices, pass 1: fleet devices (names may repeat across
     * a fleet; the first imported wins, ids are unique) */
    for (int pass = 0; pass < 2 && rc != 0; pass++)
        for (int i = 0; i < ix->ndevs; i++) {
            const ix_device *d = &ix->devs[i];
            if (d->local != (pass == 0))
                continue;
            int match;
            if (is_cpu)
                match = d->local && strcmp(d->info.kind, "cpu") == 0;
            else if (ordinal != -1)
                match = d->local && strcmp(d->info.kind, "cuda") == 0 &&
                        d->info.index == ordinal;
            else
                /* ids are exact, as the store keeps them (two fleet ids
                 * may differ only in case, issue 15); names are not */
                match = strcmp(spec, d->info.id) == 0 ||
                        strcasecmp(spec, d->info.name) == 0;
            if (match) {
                view_of(d, out);
                rc = 0;
                break;
            }
        }
    pthread_rwlock_unlock(&ix->lock);
    return rc;
}

int index_devices(index_state *ix, index_device_view **out, int *n)
{
    int rc = 0;
    pthread_rwlock_rdlock(&ix->lock);
    *n = ix->ndevs;
    *out = calloc(ix->ndevs > 0 ? (size_t)ix->ndevs : 1, sizeof **out);
    if (*out == NULL) {
        rc = ATTUNE_ENOMEM;
        *n = 0;
    } else {
        for (int i = 0; i < ix->ndevs; i++)
            view_of(&ix->devs[i], &(*out)[i]);
    }
    pthread_rwlock_unlock(&ix->lock);
    return rc;
}

void index_stats(index_state *ix, int *local, int *fleet, int64_t *measurements)
{
    *local = *fleet = 0;
    *measurements = 0;
    pthread_rwlock_rdlock(&ix->lock);
    for (int i = 0; i < ix->ndevs; i++) {
        if (ix->devs[i].local)
            (*local)++;
        else
            (*fleet)++;
        *measurements += ix->devs[i].nmeas;
    }
    pthread_rwlock_unlock(&ix->lock);
}

/* Winner of one indexed shape under the lookup's bound: cached for the
 * policy's own bound, recomputed for an override. */
static int shape_winner(const ix_shape *sh, const ix_device *d, const select_policy *p,
                        double mre, int *stale)
{
    if (mre <= 0) {
        *stale = sh->win_fresh < 0 && sh->win_stale >= 0;
        return sh->win_fresh >= 0 ? sh->win_fresh : sh->win_stale;
    }
    return pick_winner(sh->m, sh->n, &d->stack, p, mre, stale);
}

static double log2_ratio(int64_t a, int64_t b)
{
    return fabs(log2((double)a / (double)b));
}

int index_lookup(index_state *ix, const char *device_id, const attn_shape *s,
                 double max_rel_err, index_answer *out)
{
    char key[ATTN_SHAPE_KEY_MAX];
    attn_shape_key(s, key, sizeof key);
    uint64_t h = key_hash(key);
    memset(out, 0, sizeof *out);
    out->source = INDEX_DEFAULT;

    pthread_rwlock_rdlock(&ix->lock);
    const ix_device *d = find_device(ix, device_id);
    if (d == NULL) {
        pthread_rwlock_unlock(&ix->lock);
        return ATTUNE_ENODEV;
    }
    memcpy(out->stack_id, d->stack.id, sizeof out->stack_id);
    int stale;
    int i = find_slot_shape(d, key, h);
    if (i >= 0) {
        int w = shape_winner(&d->shapes[i], d, &ix->policy, max_rel_err, &stale);
        if (w >= 0) {
            out->source = INDEX_MEASURED;
            out->stale = stale;
            out->m = d->shapes[i].m[w];
            memcpy(out->from_key, key, sizeof key);
            goto done;
        }
    }
    /* nearest: same dtype, d, causal and group size; linear scan (a
     * device holds hundreds to a few thousand shapes) */
    int64_t g = attn_shape_group(s);
    int best = -1, best_w = -1, best_stale = 1;
    double best_dist = INFINITY;
    for (int k = 0; k < d->nshapes; k++) {
        const ix_shape *sh = &d->shapes[k];
        const attn_shape *t = &sh->shape;
        if (k == i || t->dtype != s->dtype || t->d != s->d || t->causal != s->causal ||
            attn_shape_group(t) != g)
            continue;
        double dist = log2_ratio(s->b, t->b) + log2_ratio(s->hq, t->hq) +
                      log2_ratio(s->sq, t->sq) + log2_ratio(s->skv, t->skv);
        if (dist > best_dist + 1e-12)
            continue;
        int w = shape_winner(sh, d, &ix->policy, max_rel_err, &stale);
        if (w < 0)
            continue;
        int better;
        if (best < 0 || dist < best_dist - 1e-12)
            better = 1;
        else if (stale != best_stale)
            better = !stale;
        else
            better = strcmp(sh->key, d->shapes[best].key) < 0;
        if (better) {
            best = k;
            best_w = w;
            best_stale = stale;
            best_dist = dist;
        }
    }
    if (best >= 0) {
        out->source = INDEX_NEAREST;
        out->stale = best_stale;
        out->distance = best_dist;
        out->m = d->shapes[best].m[best_w];
        memcpy(out->from_key, d->shapes[best].key, sizeof out->from_key);
    }
done:
    pthread_rwlock_unlock(&ix->lock);
    return 0;
}

int index_results(index_state *ix, const char *device_id, const attn_shape *s,
                  store_measurement **out, int *n, char stack_id[24])
{
    char key[ATTN_SHAPE_KEY_MAX];
    attn_shape_key(s, key, sizeof key);
    int rc = 0;
    *out = NULL;
    *n = 0;
    pthread_rwlock_rdlock(&ix->lock);
    const ix_device *d = find_device(ix, device_id);
    if (d == NULL) {
        rc = ATTUNE_ENODEV;
        goto out;
    }
    memcpy(stack_id, d->stack.id, 24);
    int i = find_slot_shape(d, key, key_hash(key));
    if (i < 0 || d->shapes[i].n == 0)
        goto out;
    *out = malloc((size_t)d->shapes[i].n * sizeof **out);
    if (*out == NULL) {
        rc = ATTUNE_ENOMEM;
        goto out;
    }
    memcpy(*out, d->shapes[i].m, (size_t)d->shapes[i].n * sizeof **out);
    *n = d->shapes[i].n;
out:
    pthread_rwlock_unlock(&ix->lock);
    return rc;
}
