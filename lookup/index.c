/* index.c -- the lookup index: per-device hash tables of measurements, read-mostly
 * (shared by attuned and the clients' in-process lookups, lookup/lookup_file.h). */
#include "index.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/grow.h"
#include "../common/hash.h"
#include "../db/device_model.h"
#include "../db/fleet_pg.h" /* fleet_is_model_device */
#include "index_listing.h"

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
    int need_mark;        /* rows count only from a marked (complete) tune:
                             a local device, or one index_device_need_marks
                             named (tuned in a database file) */
    ix_shape *shapes;
    int nshapes, cap;
    int32_t *slots;       /* open addressing, linear probing; -1 empty */
    uint32_t nslots;      /* power of two, > 2 * nshapes */
    int64_t nmeas;
    int64_t taken_sum, marks; /* totals of the shapes' */
    int64_t loads;        /* index_device_load swaps so far */
    /* The prediction model over the rows above. With the model builder
     * (index_models_start) a write marks it dirty and the builder swaps in
     * a new one (write lock); lookups answer from the one they find.
     * Without it, the first lookup that needs it builds it (under
     * model_mu, the read lock held) and every write drops it. */
    predict_model *model;
    int model_dirty;      /* rows changed since the model was built */
    uint64_t gen;         /* writes so far: a build of an older gen stays dirty */
    uint64_t puts;        /* index_row_put calls so far (index_device_puts) */
} ix_device;

/* Lock order: ix->lock, then model_mu or build_mu; the listing cache's
 * lock (index_listing.h) is a leaf, taken under any of them or none. No
 * backend is called while ix->lock is held (listing(), list_after): the
 * builder lists holding no lock, a request thread after it dropped it. */
struct index_state {
    pthread_rwlock_t lock;
    atomic_ullong generation;   /* index_generation: bumped by write_lock and
                                   by every listing made */
    pthread_mutex_t model_mu;   /* builds of ix_device.model */
    /* the builder (index_models_start): a thread that rebuilds the dirty
     * models and makes the queued listings off the request path */
    int builder_on;             /* set once, before the thread starts */
    pthread_t builder;
    pthread_mutex_t build_mu;   /* build_wanted, build_stop, lists_queued;
                                   taken after ix->lock */
    pthread_cond_t build_cv;
    int build_wanted, build_stop;
    int lists_queued;           /* listings queued for the builder, not yet made */
    pthread_cond_t lists_cv;    /* lists_queued fell to 0 */
    index_listing *listings;    /* every backend listing made, bounded */
    select_policy policy;
    int host_specs;             /* index_set_host_specs: "cpu" and ordinals
                                   name fleet devices too */
    ix_device *devs;
    int ndevs, cap;
    pin *pins;                  /* index_pins_set: every pin, any device */
    int npins;
};

const char *index_source_name(index_source s)
{
    switch (s) {
    case INDEX_MEASURED: return "measured";
    case INDEX_NEAREST: return "nearest";
    case INDEX_PREDICTED: return "predicted";
    case INDEX_FLEET: return "fleet";
    case INDEX_PINNED: return "pinned";
    default: return "default";
    }
}

/* The write lock, and a new generation (index_generation): bumped on
 * taking it, so a lookup that read the older one before its read lock
 * either saw none of this write or is tagged older than it. */
static void write_lock(index_state *ix)
{
    pthread_rwlock_wrlock(&ix->lock);
    atomic_fetch_add_explicit(&ix->generation, 1, memory_order_acq_rel);
}

uint64_t index_generation(index_state *ix)
{
    return atomic_load_explicit(&ix->generation, memory_order_acquire);
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
    if ((ix->listings = index_listing_new(0, 0)) == NULL) {
        pthread_rwlock_destroy(&ix->lock);
        free(ix);
        return NULL;
    }
    pthread_mutex_init(&ix->model_mu, NULL);
    pthread_mutex_init(&ix->build_mu, NULL);
    pthread_cond_init(&ix->build_cv, NULL);
    pthread_cond_init(&ix->lists_cv, NULL);
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
    if (ix->builder_on) {
        pthread_mutex_lock(&ix->build_mu);
        ix->build_stop = 1;
        pthread_cond_signal(&ix->build_cv);
        pthread_mutex_unlock(&ix->build_mu);
        pthread_join(ix->builder, NULL);
    }
    for (int i = 0; i < ix->ndevs; i++) {
        free_shapes(ix->devs[i].shapes, ix->devs[i].nshapes);
        free(ix->devs[i].slots);
        predict_free(ix->devs[i].model);
    }
    free(ix->devs);
    free(ix->pins);
    index_listing_free(ix->listings);
    pthread_mutex_destroy(&ix->model_mu);
    pthread_mutex_destroy(&ix->build_mu);
    pthread_cond_destroy(&ix->build_cv);
    pthread_cond_destroy(&ix->lists_cv);
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
 * belongs to another device state and is never served (kernels/power.h),
 * and only complete ones (select_complete; need_mark: ix_device's):
 * rows of a tune in flight are never a winner's source. vs: the variants
 * the winner may be of (0: any), pm the exclusions it may not be (NULL:
 * none); completeness is the whole stack's.
 * Sets *stale. Returns the row index or -1. Rows are sorted by stack. */
static int pick_winner(const store_measurement *m, int n, const attn_stack *cur,
                       const select_policy *p, double mre, variant_set vs,
                       const pin_match *pm, int need_mark, int *stale)
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
        int usable = strcmp(m[lo].power, cur->power) == 0 &&
                     select_complete(m + lo, hi - lo, need_mark);
        int w = usable ? pin_winner(m + lo, hi - lo, p, mre, vs, pm) : -1;
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

static void cache_winners(ix_shape *sh, const ix_device *d, const select_policy *p)
{
    int stale;
    int w = pick_winner(sh->m, sh->n, &d->stack, p, 0, 0, NULL, d->need_mark, &stale);
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

/* d's rows changed (write lock held): with the builder, its model is
 * marked for a rebuild and kept meanwhile; without, dropped (the write
 * lock excludes every reader of it). */
static void rows_changed(index_state *ix, ix_device *d)
{
    d->gen++;
    if (!ix->builder_on) {
        predict_free(d->model);
        d->model = NULL;
        return;
    }
    d->model_dirty = 1;
    pthread_mutex_lock(&ix->build_mu);
    ix->build_wanted = 1;
    pthread_cond_signal(&ix->build_cv);
    pthread_mutex_unlock(&ix->build_mu);
}

int index_device_put(index_state *ix, const attn_device_info *info, const attn_stack *stack,
                     int local)
{
    int rc = 0;
    write_lock(ix);
    ix_device *d = find_device(ix, info->id);
    if (d == NULL) {
        if ((rc = grow_array(&ix->devs, &ix->cap, ix->ndevs, sizeof *ix->devs)) != 0)
            goto out;
        d = &ix->devs[ix->ndevs++];
        memset(d, 0, sizeof *d);
    }
    d->info = *info;
    d->stack = *stack;
    d->local = local || d->local; /* a fleet copy of a local device stays local */
    d->need_mark = d->local || d->need_mark;
    rows_changed(ix, d);
    for (int i = 0; i < d->nshapes; i++)
        cache_winners(&d->shapes[i], d, &ix->policy);
out:
    pthread_rwlock_unlock(&ix->lock);
    return rc;
}

int index_device_need_marks(index_state *ix, const char *device_id)
{
    write_lock(ix);
    ix_device *d = find_device(ix, device_id);
    if (d != NULL && !d->need_mark) {
        d->need_mark = 1;
        for (int i = 0; i < d->nshapes; i++)
            cache_winners(&d->shapes[i], d, &ix->policy);
    }
    pthread_rwlock_unlock(&ix->lock);
    return d != NULL ? 0 : ATTUNE_ENODEV;
}

/* Append shape entry fresh (owning its rows) to d and its slot table
 * (write lock held). 0, or ATTUNE_ENOMEM with d unchanged. */
static int append_shape(ix_device *d, const ix_shape *fresh)
{
    if (grow_array(&d->shapes, &d->cap, d->nshapes, sizeof *d->shapes) != 0)
        return ATTUNE_ENOMEM;
    if ((uint32_t)d->nshapes * 2 + 4 > d->nslots) {
        int32_t *slots;
        uint32_t nslots;
        d->shapes[d->nshapes] = *fresh; /* build_slots sees it, nshapes does not yet */
        if (build_slots(d->shapes, d->nshapes + 1, &slots, &nslots) != 0)
            return ATTUNE_ENOMEM;
        free(d->slots);
        d->slots = slots;
        d->nslots = nslots;
    } else {
        uint32_t mask = d->nslots - 1;
        uint32_t j = (uint32_t)fresh->hash & mask;
        while (d->slots[j] >= 0)
            j = (j + 1) & mask;
        d->slots[j] = d->nshapes;
    }
    d->shapes[d->nshapes++] = *fresh;
    return 0;
}

/* err_ratio of the rows of stack stack_id in sh: rel_err over the smallest
 * rel_err of that stack's ok rows, as a read from the store fills it. */
static void stack_err_ratios(ix_shape *sh, const char *stack_id)
{
    double best = NAN;
    for (int i = 0; i < sh->n; i++) {
        const store_measurement *m = &sh->m[i];
        if (strcmp(m->stack_id, stack_id) == 0 && m->status == STORE_OK &&
            !isnan(m->rel_err) && !(best <= m->rel_err))
            best = m->rel_err;
    }
    for (int i = 0; i < sh->n; i++) {
        store_measurement *m = &sh->m[i];
        if (strcmp(m->stack_id, stack_id) == 0)
            m->err_ratio = isnan(m->rel_err) || isnan(best) || best == 0 ? NAN
                                                                          : m->rel_err / best;
    }
}

/* Put row into sh (write lock held) as the store applied it: a new row is
 * added; a row with the same stack and tactic is replaced and keeps its
 * mark (store_measurement_put leaves incumbent alone); a marked row takes
 * the mark from the other rows of its stack (store_winner_mark). 0 or
 * ATTUNE_ENOMEM with sh unchanged. */
static int shape_row_put(ix_shape *sh, const store_measurement *row)
{
    int at = -1;
    for (int i = 0; i < sh->n && at < 0; i++)
        if (strcmp(sh->m[i].stack_id, row->stack_id) == 0 &&
            strcmp(sh->m[i].tactic, row->tactic) == 0)
            at = i;
    if (at < 0) {
        store_measurement *m = realloc(sh->m, (size_t)(sh->n + 1) * sizeof *m);
        if (m == NULL)
            return ATTUNE_ENOMEM;
        sh->m = m;
        at = sh->n++;
        sh->m[at] = *row;
    } else {
        int kept = sh->m[at].incumbent;
        sh->m[at] = *row;
        sh->m[at].incumbent = row->incumbent || kept;
    }
    if (row->incumbent)
        for (int i = 0; i < sh->n; i++)
            if (i != at && strcmp(sh->m[i].stack_id, row->stack_id) == 0)
                sh->m[i].incumbent = 0;
    stack_err_ratios(sh, row->stack_id);
    if (sh->n > 1)
        qsort(sh->m, (size_t)sh->n, sizeof *sh->m, cmp_rows);
    shape_sums(sh);
    return 0;
}

int index_row_put(index_state *ix, const store_measurement *row)
{
    int rc = 0;
    ix_shape fresh;
    memset(&fresh, 0, sizeof fresh);
    fresh.shape = row->shape;
    attn_shape_key(&row->shape, fresh.key, sizeof fresh.key);
    fresh.hash = key_hash(fresh.key);

    write_lock(ix);
    ix_device *d = find_device(ix, row->device_id);
    if (d == NULL) {
        rc = ATTUNE_ENODEV;
        goto out;
    }
    int i = find_slot_shape(d, fresh.key, fresh.hash);
    ix_shape *sh;
    if (i >= 0) {
        sh = &d->shapes[i];
        if ((rc = shape_row_put(sh, row)) != 0)
            goto out;
    } else {
        if ((rc = shape_row_put(&fresh, row)) != 0)
            goto out;
        if ((rc = append_shape(d, &fresh)) != 0) {
            free(fresh.m);
            goto out;
        }
        sh = &d->shapes[d->nshapes - 1];
    }
    cache_winners(sh, d, &ix->policy);
    device_totals(d);
    d->puts++;
    rows_changed(ix, d);
out:
    pthread_rwlock_unlock(&ix->lock);
    return rc;
}

int index_device_puts(index_state *ix, const char *device_id, uint64_t *puts)
{
    pthread_rwlock_rdlock(&ix->lock);
    const ix_device *d = find_device(ix, device_id);
    if (d != NULL)
        *puts = d->puts;
    pthread_rwlock_unlock(&ix->lock);
    return d != NULL ? 0 : ATTUNE_ENODEV;
}

typedef struct keyed_row {
    char key[ATTN_SHAPE_KEY_MAX];
    int row;
} keyed_row;

static int cmp_keyed(const void *a, const void *b)
{
    return strcmp(((const keyed_row *)a)->key, ((const keyed_row *)b)->key);
}

/* index_device_load; with since, only while device_id's puts still
 * equal *since (else ATTUNE_EBUSY, the index unchanged). */
static int device_load(index_state *ix, const char *device_id, store_measurement *m, int n,
                       const uint64_t *since)
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

    write_lock(ix);
    ix_device *d = find_device(ix, device_id);
    if (d == NULL || (since != NULL && d->puts != *since)) {
        pthread_rwlock_unlock(&ix->lock);
        rc = d == NULL ? ATTUNE_ENODEV : ATTUNE_EBUSY;
        goto fail;
    }
    for (int i = 0; i < nshapes; i++)
        cache_winners(&shapes[i], d, &ix->policy);
    ix_shape *old = d->shapes;
    int nold = d->nshapes;
    int32_t *old_slots = d->slots;
    d->shapes = shapes;
    d->nshapes = d->cap = nshapes;
    d->slots = slots;
    d->nslots = nslots;
    device_totals(d);
    d->loads++;
    rows_changed(ix, d);
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

int index_device_load(index_state *ix, const char *device_id, store_measurement *m, int n)
{
    return device_load(ix, device_id, m, n, NULL);
}

int index_device_load_since(index_state *ix, const char *device_id, store_measurement *m, int n,
                            uint64_t puts)
{
    return device_load(ix, device_id, m, n, &puts);
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
    v->loads = d->loads;
}

/* The device that spec names, by attn_device_match (read lock held):
 * "cpu", a CUDA ordinal, an id (exact: two fleet ids may differ only in
 * case, issue 15), a name (any case); local devices first, then fleet
 * devices (names may repeat across a fleet; the first imported wins). NULL
 * when none. */
static ix_device *find_spec(index_state *ix, const char *spec)
{
    /* Host specs ("cpu", an ordinal) read from a file name a device some
     * host measured before a pulled fleet aggregate of its model
     * (db/fleet_pg.h: FLEET-<hash>, host "fleet"): the aggregate holds the
     * fleet's rows, not this host's, and attuned answers them as "fleet".
     * After `attune fleet pull`, `--url file:DB --device cpu` answered from
     * the aggregate, as measured. Pass 2 takes an aggregate only when no
     * other device matches. */
    int host_spec = ix->host_specs && (strcasecmp(spec, "cpu") == 0 || attn_device_ordinal(spec) >= 0);
    for (int pass = 0; pass < 3; pass++)
        for (int i = 0; i < ix->ndevs; i++) {
            ix_device *d = &ix->devs[i];
            int agg = host_spec && fleet_is_model_device(d->info.id);
            if (d->local == (pass == 0) && (pass == 0 || agg == (pass == 2)) &&
                attn_device_match(spec, &d->info, d->local || ix->host_specs) !=
                    ATTN_MATCH_NONE)
                return d;
        }
    /* host specs: an ordinal N that no device had where it was measured
     * (a fleet table carries no ordinal: its device reads -1) names the
     * N-th such CUDA device, in the file's order, aggregates after the
     * others */
    int n = ix->host_specs ? attn_device_ordinal(spec) : -1;
    for (int agg = 0; agg < 2; agg++)
        for (int i = 0; n >= 0 && i < ix->ndevs; i++) {
            ix_device *d = &ix->devs[i];
            if (!d->local && d->info.index < 0 && strcmp(d->info.kind, "cuda") == 0 &&
                fleet_is_model_device(d->info.id) == agg && n-- == 0)
                return d;
        }
    return NULL;
}

void index_set_host_specs(index_state *ix, int on)
{
    ix->host_specs = on != 0;
}

int index_device_find(index_state *ix, const char *spec, index_device_view *out)
{
    pthread_rwlock_rdlock(&ix->lock);
    const ix_device *d = find_spec(ix, spec);
    if (d != NULL)
        view_of(d, out);
    pthread_rwlock_unlock(&ix->lock);
    return d != NULL ? 0 : ATTUNE_ENODEV;
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

void index_pending(index_state *ix, int *models, int *listings)
{
    *models = 0;
    pthread_rwlock_rdlock(&ix->lock);
    for (int i = 0; i < ix->ndevs; i++)
        *models += ix->builder_on && ix->devs[i].model_dirty;
    pthread_rwlock_unlock(&ix->lock);
    pthread_mutex_lock(&ix->build_mu);
    *listings = ix->lists_queued;
    pthread_mutex_unlock(&ix->build_mu);
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

/* Winner of one indexed shape under the lookup's bound, variants and
 * exclusions: cached for the policy's own bound, every variant and no
 * exclusion, recomputed otherwise. */
static int shape_winner(const ix_shape *sh, const ix_device *d, const select_policy *p,
                        double mre, variant_set vs, const pin_match *pm, int *stale)
{
    if (mre <= 0 && vs == 0 && (pm == NULL || pm->nexclude == 0)) {
        *stale = sh->win_fresh < 0 && sh->win_stale >= 0;
        return sh->win_fresh >= 0 ? sh->win_fresh : sh->win_stale;
    }
    return pick_winner(sh->m, sh->n, &d->stack, p, mre, vs, pm, d->need_mark, stale);
}

/* ---- answers for shapes the device has not measured */

/* Tactics a backend lists for one shape, per thread. */
#define INDEX_LIST_MAX 2048
static _Thread_local attn_tactic list_buf[INDEX_LIST_MAX];

/* The listing listing() found missing from the cache, per thread. The
 * public call that holds the read lock makes it or queues it once it has
 * dropped the lock (list_after): no backend is called under ix->lock. */
typedef struct list_want {
    int set;
    int cheap;            /* the backend's attn_ops.list_cheap */
    int builder;          /* ix->builder_on, read under the lock */
    index_listing_req req;
} list_want;
static _Thread_local list_want want;

/* The tactics of s for d into list_buf, from the index's listing cache
 * (lookup/index_listing.h) of the registry's backend of d's kind
 * (kernels/attn.h attn_backend) as it lists for a local device's own
 * index; for a fleet device, a local device of the same kind and compute
 * capability, or for a CPU the CPU backend's one device. Returns the
 * count; 0 when no backend of this host can list for d, or when the
 * listing is not cached (then `want` names it). Read lock held; never
 * calls the backend. */
static int listing(const index_state *ix, const ix_device *d, const attn_shape *s)
{
    const attn_ops *ops = attn_backend(d->info.kind);
    const ix_device *by = d->local ? d : NULL;
    for (int i = 0; i < ix->ndevs && by == NULL && ops != NULL; i++) {
        const ix_device *o = &ix->devs[i];
        if (o->local && strcmp(o->info.kind, d->info.kind) == 0 &&
            o->info.cc_major == d->info.cc_major && o->info.cc_minor == d->info.cc_minor)
            by = o;
    }
    /* every CPU lists alike: a CPU of a table read from a file (no local
     * device in the index) is listed by this host's */
    int cpu = strcmp(d->info.kind, "cpu") == 0;
    if (ops == NULL || (by == NULL && !cpu))
        return 0;
    int index = by != NULL ? attn_backend_index(&by->info) : 0;
    char key[ATTN_SHAPE_KEY_MAX];
    attn_shape_key(s, key, sizeof key);
    int n = index_listing_get(ix->listings, d->info.kind, index, key, list_buf, INDEX_LIST_MAX);
    if (n >= 0)
        return n > INDEX_LIST_MAX ? INDEX_LIST_MAX : n;
    want.set = 1;
    want.cheap = ops->list_cheap;
    want.builder = ix->builder_on;
    snprintf(want.req.kind, sizeof want.req.kind, "%s", d->info.kind);
    want.req.index = index;
    want.req.shape = *s;
    return 0;
}

/* Make r's listing and cache it (no lock of the index held: the backend
 * may take long). A backend's error is not cached: the next miss lists
 * again. */
static void list_now(index_state *ix, const index_listing_req *r)
{
    const attn_ops *ops = attn_backend(r->kind);
    int n = ops != NULL ? ops->tactics(r->index, &r->shape, list_buf, INDEX_LIST_MAX) : -1;
    if (n < 0)
        return;
    char key[ATTN_SHAPE_KEY_MAX];
    attn_shape_key(&r->shape, key, sizeof key);
    index_listing_put(ix->listings, r->kind, r->index, key, list_buf,
                      n > INDEX_LIST_MAX ? INDEX_LIST_MAX : n);
    /* a lookup that found it missing answered otherwise (or evicted one) */
    atomic_fetch_add_explicit(&ix->generation, 1, memory_order_acq_rel);
}

/* Hand r to the builder thread (index_listing_want). */
static void list_queue(index_state *ix, const index_listing_req *r)
{
    if (index_listing_want(ix->listings, r) != 1)
        return; /* cached, queued or being made already; or the queue is full */
    pthread_mutex_lock(&ix->build_mu);
    ix->lists_queued++;
    pthread_cond_signal(&ix->build_cv);
    pthread_mutex_unlock(&ix->build_mu);
}

enum { LISTED_NONE, LISTED_AGAIN, LISTED_QUEUED };

/* After a public call dropped the read lock: the listing its pass found
 * missing (want), if any. A backend that lists cheaply, or any backend
 * when the caller may wait (may_wait: off the lookup path) or no builder
 * runs (an in-process lookup: as its models, it lists itself), is listed
 * here and the caller makes its pass again (LISTED_AGAIN, first pass
 * only: a listing evicted meanwhile is not made twice); otherwise it goes
 * to the builder (LISTED_QUEUED) and the pass's answer stands, made as
 * for a device nothing lists for. LISTED_NONE: nothing was missing. */
static int list_after(index_state *ix, int may_wait, int first)
{
    if (!want.set)
        return LISTED_NONE;
    list_want w = want;
    want.set = 0;
    if (!w.cheap && !may_wait && w.builder) {
        list_queue(ix, &w.req);
        return LISTED_QUEUED;
    }
    if (!first)
        return LISTED_NONE;
    list_now(ix, &w.req);
    return LISTED_AGAIN;
}

/* The builder's share of listings: make the oldest queued one (no lock of
 * the index held). 1 when one was made, 0 when none is queued. */
static int list_one(index_state *ix)
{
    index_listing_req r;
    if (!index_listing_next(ix->listings, &r))
        return 0;
    list_now(ix, &r);
    index_listing_done(ix->listings);
    pthread_mutex_lock(&ix->build_mu);
    if (--ix->lists_queued == 0)
        pthread_cond_broadcast(&ix->lists_cv);
    pthread_mutex_unlock(&ix->build_mu);
    return 1;
}

/* A model over d's rows of the current power mode, noisy ones left out
 * (tuner/noise.h: no figure to fit on); the read lock held (the rows do
 * not change under it). NULL on ENOMEM. */
static predict_model *build_model(const index_state *ix, const ix_device *d)
{
    const store_measurement **rows = malloc((size_t)(d->nmeas > 0 ? d->nmeas : 1) * sizeof *rows);
    if (rows == NULL)
        return NULL;
    int n = 0;
    for (int i = 0; i < d->nshapes; i++)
        for (int k = 0; k < d->shapes[i].n && n < d->nmeas; k++)
            if (strcmp(d->shapes[i].m[k].power, d->stack.power) == 0 && !d->shapes[i].m[k].noisy)
                rows[n++] = &d->shapes[i].m[k];
    predict_model *pm = predict_build_dev(rows, n, d->stack.id, &ix->policy, &d->info);
    free(rows);
    return pm;
}

/* d's prediction model (read lock held). With the builder: the one it
 * swapped in last, built off the request path (NULL until the first:
 * index_models_start builds every model before it returns); a lookup
 * never builds or waits. Without: built on first use (model_mu
 * serialises the builders). NULL on ENOMEM. */
static const predict_model *device_model(index_state *ix, ix_device *d)
{
    if (ix->builder_on)
        return d->model;
    pthread_mutex_lock(&ix->model_mu);
    if (d->model == NULL)
        d->model = build_model(ix, d);
    const predict_model *pm = d->model;
    pthread_mutex_unlock(&ix->model_mu);
    return pm;
}

/* Rebuild the first dirty model (built under the read lock, swapped in
 * under the write lock; still dirty when rows changed meanwhile). 1 when
 * one was built, 0 when none is dirty. */
static int build_one(index_state *ix)
{
    char id[sizeof ((attn_device_info *)0)->id];
    uint64_t gen = 0;
    predict_model *pm = NULL;
    int found = 0;
    pthread_rwlock_rdlock(&ix->lock);
    for (int i = 0; i < ix->ndevs && !found; i++) {
        const ix_device *d = &ix->devs[i];
        if (!d->model_dirty)
            continue;
        found = 1;
        memcpy(id, d->info.id, sizeof id);
        gen = d->gen;
        pm = build_model(ix, d);
    }
    pthread_rwlock_unlock(&ix->lock);
    if (!found)
        return 0;
    predict_model *old = NULL;
    write_lock(ix);
    ix_device *d = find_device(ix, id);
    if (d != NULL && pm != NULL) {
        old = d->model;
        d->model = pm;
        pm = NULL;
        d->model_dirty = d->gen != gen;
    } else if (d != NULL) {
        d->model_dirty = 0; /* ENOMEM: the previous model stays, until the next write */
    }
    pthread_rwlock_unlock(&ix->lock);
    predict_free(old); /* swapped out under the write lock: no reader holds it */
    predict_free(pm);
    return 1;
}

/* A burst of writes (a tune commits a row every few milliseconds) is
 * one rebuild: the builder waits this long after being woken. */
#define INDEX_BUILD_SETTLE_MS 20

/* 1 once index_free asked the builder to stop. */
static int builder_stopping(index_state *ix)
{
    pthread_mutex_lock(&ix->build_mu);
    int stop = ix->build_stop;
    pthread_mutex_unlock(&ix->build_mu);
    return stop;
}

static void *builder_main(void *arg)
{
    index_state *ix = arg;
    for (;;) {
        pthread_mutex_lock(&ix->build_mu);
        while (!ix->build_wanted && ix->lists_queued == 0 && !ix->build_stop)
            pthread_cond_wait(&ix->build_cv, &ix->build_mu);
        int stop = ix->build_stop, models = ix->build_wanted;
        ix->build_wanted = 0;
        pthread_mutex_unlock(&ix->build_mu);
        if (stop)
            return NULL;
        while (list_one(ix)) /* a lookup waits for these: no settle time */
            ;
        if (!models)
            continue;
        struct timespec settle = {0, INDEX_BUILD_SETTLE_MS * 1000000L};
        do { /* rows still coming in (a tune): rebuild at most once a
              * settle time, and make the listings queued meanwhile
              * between two rebuilds, not after the tune */
            nanosleep(&settle, NULL);
            while (list_one(ix))
                ;
        } while (!builder_stopping(ix) && build_one(ix));
    }
}

int index_listings_wait(index_state *ix)
{
    pthread_rwlock_rdlock(&ix->lock);
    int on = ix->builder_on;
    pthread_rwlock_unlock(&ix->lock);
    pthread_mutex_lock(&ix->build_mu);
    while (on && ix->lists_queued > 0)
        pthread_cond_wait(&ix->lists_cv, &ix->build_mu);
    pthread_mutex_unlock(&ix->build_mu);
    return on ? 0 : ATTUNE_EINVAL;
}

int index_models_start(index_state *ix)
{
    write_lock(ix);
    for (int i = 0; i < ix->ndevs; i++)
        ix->devs[i].model_dirty = 1;
    pthread_rwlock_unlock(&ix->lock);
    while (build_one(ix)) /* every model at load, before a lookup comes */
        ;
    write_lock(ix);
    ix->builder_on = 1; /* from here writes mark models dirty */
    int dirty = 0;
    for (int i = 0; i < ix->ndevs; i++)
        dirty |= ix->devs[i].model_dirty;
    pthread_rwlock_unlock(&ix->lock);
    pthread_mutex_lock(&ix->build_mu);
    ix->build_wanted |= dirty;
    pthread_mutex_unlock(&ix->build_mu);
    if (pthread_create(&ix->builder, NULL, builder_main, ix) != 0) {
        write_lock(ix);
        ix->builder_on = 0;
        pthread_rwlock_unlock(&ix->lock);
        return ATTUNE_ENOMEM;
    }
    return 0;
}

/* An answer row that no measurement backs: the tactic, the predicted time
 * and error, every other number NaN. */
static void predicted_row(const ix_device *d, const attn_shape *s, const char *tactic,
                          double us, double rel_err, store_measurement *m)
{
    memset(m, 0, sizeof *m);
    snprintf(m->device_id, sizeof m->device_id, "%s", d->info.id);
    m->shape = *s;
    snprintf(m->tactic, sizeof m->tactic, "%s", tactic);
    m->status = STORE_OK;
    m->time_us = us;
    m->time_us_min = m->time_us_max = m->time_us_copies = NAN;
    m->max_abs_err = m->err_ratio = NAN;
    m->rel_err = rel_err;
}

/* One model of device: name, compute capability, SM count, memory as the
 * model's (db/device_model.h: two hosts of one model agree on it). */
static int same_model(const ix_device *a, const ix_device *b)
{
    return device_model_same(&a->info, &b->info);
}

/* 1 when list_buf[0..nall) holds tactic. */
static int tactic_listed(const char *tactic, int nall)
{
    char ts[ATTN_TACTIC_STR_MAX];
    for (int k = 0; k < nall; k++)
        if (strcmp(attn_tactic_str(&list_buf[k], ts, sizeof ts), tactic) == 0)
            return 1;
    return 0;
}

/* w, a winner among the rows m[0..n) of shape s (pick_winner's under
 * cur, need_mark and the lookup's bound, variants and exclusions; m may be
 * a copy of an ix_shape's rows, index_lookup_measured's with the asked
 * error) made elsewhere than on d's current stack (stale, fleet), when its
 * tactic runs on d: d's backend lists it for the shape, or nothing lists
 * for d (listing() returns 0: the rows are taken as they are). Else the
 * winner among the rows whose tactics it lists, the others taken as
 * unsupported (the marks stay: a tune's completeness is its whole
 * stack's), *stale set as pick_winner sets it; -1 when none, or
 * ATTUNE_ENOMEM (never "none": a failed copy is no verdict on the rows).
 * Read lock held. */
static int runnable_winner(const index_state *ix, const ix_device *d, const store_measurement *m,
                           int n, const attn_shape *s, int w, const attn_stack *cur, double mre,
                           variant_set vs, const pin_match *pm, int need_mark, int *stale)
{
    int nall = w >= 0 ? listing(ix, d, s) : 0;
    if (nall == 0 || tactic_listed(m[w].tactic, nall))
        return w;
    store_measurement *c = malloc((size_t)n * sizeof *c);
    if (c == NULL)
        return ATTUNE_ENOMEM;
    memcpy(c, m, (size_t)n * sizeof *c);
    for (int k = 0; k < n; k++)
        if (!tactic_listed(c[k].tactic, nall))
            c[k].status = STORE_UNSUPPORTED;
    w = pick_winner(c, n, cur, &ix->policy, mre, vs, pm, need_mark, stale);
    free(c);
    return w;
}

/* Winner of fleet device f's shape sh for local device d: among the rows
 * of d's power mode only (a row of another mode is never served), f's
 * current stack fresh when it is of d's mode, any other stack stale; of a
 * tactic that runs on d (runnable_winner). */
static int fleet_winner(const index_state *ix, const ix_shape *sh, const ix_device *f,
                        const ix_device *d, double mre, variant_set vs, const pin_match *pm,
                        int *stale)
{
    attn_stack as = f->stack; /* its id: f's rows of that stack are of another mode */
    snprintf(as.power, sizeof as.power, "%s", d->stack.power);
    int w = strcmp(f->stack.power, d->stack.power) == 0
                ? shape_winner(sh, f, &ix->policy, mre, vs, pm, stale)
                : pick_winner(sh->m, sh->n, &as, &ix->policy, mre, vs, pm, f->need_mark, stale);
    return runnable_winner(ix, d, sh->m, sh->n, &sh->shape, w, &as, mre, vs, pm, f->need_mark,
                           stale);
}

/* Fleet fallback for local device d: the winner of the shape (key, hash h)
 * on a fleet device of the same model among the rows of d's power mode
 * (fleet_winner), fresh rows before stale ones. 0
 * with *out filled, ATTUNE_ENOTFOUND, or ATTUNE_ENOMEM (read lock held). */
static int fleet_answer(index_state *ix, const ix_device *d, const char *key, uint64_t h,
                        double mre, variant_set vs, const pin_match *pm, index_answer *out)
{
    const ix_device *best = NULL;
    int best_w = -1, best_stale = 1, best_i = -1;
    for (int k = 0; k < ix->ndevs; k++) {
        const ix_device *f = &ix->devs[k];
        if (f->local || !same_model(d, f))
            continue;
        int stale, i = find_slot_shape(f, key, h);
        if (i < 0)
            continue;
        int w = fleet_winner(ix, &f->shapes[i], f, d, mre, vs, pm, &stale);
        if (w < -1)
            return w; /* ENOMEM */
        if (w < 0 || (best != NULL && (stale || !best_stale)))
            continue;
        best = f;
        best_w = w;
        best_i = i;
        best_stale = stale;
    }
    if (best == NULL)
        return ATTUNE_ENOTFOUND;
    out->source = INDEX_FLEET;
    out->stale = best_stale;
    out->m = best->shapes[best_i].m[best_w];
    memcpy(out->from_key, key, ATTN_SHAPE_KEY_MAX);
    snprintf(out->fleet_device, sizeof out->fleet_device, "%s", best->info.id);
    snprintf(out->fleet_host, sizeof out->fleet_host, "%s", out->m.host);
    return 0;
}

/* Keep the tactics of list_buf[0..n) that vs allows and no exclusion of
 * pm covers, in order; the variants listed before into *listed. Returns
 * the count kept. */
static int filter_listing(int n, variant_set vs, const pin_match *pm, variant_set *listed)
{
    int k = 0;
    *listed = 0;
    for (int i = 0; i < n; i++) {
        char ts[ATTN_TACTIC_STR_MAX];
        *listed |= 1u << list_buf[i].variant;
        if (variant_set_has(vs, list_buf[i].variant) &&
            (pm == NULL || pin_match_excluded(pm, attn_tactic_str(&list_buf[i], ts,
                                                                  sizeof ts)) == NULL))
            list_buf[k++] = list_buf[i];
    }
    return k;
}

/* predict_keep_fn over a pin_match: 1 when no exclusion covers tactic. */
static int not_excluded(void *ctx, const char *tactic)
{
    return pin_match_excluded(ctx, tactic) == NULL;
}

/* The answer of the prediction model among list_buf[0..nlist) (or the
 * families the device measured, when nothing lists for it: nall == 0).
 * 0 with out filled, or ATTUNE_ENOTFOUND (read lock held). */
static int predicted_answer(index_state *ix, ix_device *d, const attn_shape *s, int nlist,
                            int nall, double mre, variant_set vs, const pin_match *pm,
                            index_answer *out)
{
    const predict_model *model = device_model(ix, d);
    predict_answer pa;
    int prc = ATTUNE_ENOTFOUND;
    if (model != NULL && nlist > 0)
        prc = predict_answer_for(model, s, list_buf, nlist, mre, &pa);
    else if (model != NULL && nall == 0)
        prc = predict_answer_measured_families_if(model, s, vs, pm != NULL ? not_excluded : NULL,
                                                  (void *)pm, mre, &pa);
    if (prc != 0)
        return ATTUNE_ENOTFOUND;
    out->source = pa.nearest ? INDEX_NEAREST : INDEX_PREDICTED;
    out->stale = pa.stale;
    out->distance = pa.distance;
    out->predicted_us = pa.time_us;
    out->nfrom = pa.nfrom;
    memcpy(out->from, pa.from, sizeof out->from);
    memcpy(out->from_key, pa.from[0], sizeof out->from_key);
    predicted_row(d, s, pa.tactic_str, pa.time_us, pa.rel_err, &out->m);
    return 0;
}

/* Nothing qualifies: the first listed fused pad=8 tactic, else the first
 * listed pad=8 one of another variant, else the first listed
 * (list_buf[0..nlist), already limited to vs and the exclusions);
 * INDEX_DEFAULT_TACTIC when nothing lists for the device (nall == 0) and
 * vs allows fused and pm does not exclude it. 0, or ATTUNE_ENOTFOUND when
 * no tactic is left. */
static int default_answer(const ix_device *d, const attn_shape *s, int nlist, int nall,
                          variant_set vs, const pin_match *pm, index_answer *out)
{
    char dflt[ATTN_TACTIC_STR_MAX];
    snprintf(dflt, sizeof dflt, "%s", INDEX_DEFAULT_TACTIC);
    if (nlist == 0 && (nall > 0 || !variant_set_has(vs, ATTN_FUSED) ||
                       pin_match_excluded(pm, dflt) != NULL))
        return ATTUNE_ENOTFOUND;
    int pick = nlist > 0 ? 0 : -1, padded = -1;
    for (int k = 0; k < nlist; k++) {
        if (list_buf[k].pad != 8)
            continue;
        if (list_buf[k].variant == ATTN_FUSED) {
            padded = k;
            break;
        }
        if (padded < 0)
            padded = k;
    }
    if (padded >= 0)
        pick = padded;
    if (pick >= 0)
        attn_tactic_str(&list_buf[pick], dflt, sizeof dflt);
    predicted_row(d, s, dflt, NAN, NAN, &out->m);
    return 0;
}

/* Rows of shape i of d in its current stack into out->own_rows (tune on
 * miss: 0 means never tuned here), and whether they hold a complete tune
 * (out->complete). Rows are sorted by stack: the stack's are contiguous. */
static void count_own_rows(const ix_device *d, int i, index_answer *out)
{
    int lo = -1;
    for (int k = 0; i >= 0 && k < d->shapes[i].n; k++)
        if (strcmp(d->shapes[i].m[k].stack_id, d->stack.id) == 0) {
            lo = lo < 0 ? k : lo;
            out->own_rows++;
        }
    out->complete = lo >= 0 && select_complete(d->shapes[i].m + lo, out->own_rows,
                                                        d->need_mark);
}

/* The shape's own winner on d (measured), when it has one; one of an
 * older stack only of a tactic that still runs (runnable_winner). 1 with
 * out filled, 0 when none, or ATTUNE_ENOMEM (read lock held). */
static int measured_answer(index_state *ix, const ix_device *d, int i, const char *key,
                           double mre, variant_set vs, const pin_match *pm, index_answer *out)
{
    int stale;
    if (i < 0)
        return 0;
    int w = shape_winner(&d->shapes[i], d, &ix->policy, mre, vs, pm, &stale);
    if (w >= 0 && stale) /* of an older stack: one that still runs */
        w = runnable_winner(ix, d, d->shapes[i].m, d->shapes[i].n, &d->shapes[i].shape, w,
                            &d->stack, mre, vs, pm, d->need_mark, &stale);
    if (w < 0)
        return w < -1 ? w : 0;
    out->source = INDEX_MEASURED;
    out->stale = stale;
    out->m = d->shapes[i].m[w];
    memcpy(out->from_key, key, sizeof out->from_key);
    return 1;
}

/* The row of tactic among shape i's rows on d: of the current stack if
 * there is one, else of any stack; -1 when none. */
static int tactic_row(const ix_device *d, int i, const char *tactic)
{
    int any = -1;
    for (int k = 0; i >= 0 && k < d->shapes[i].n; k++) {
        const store_measurement *m = &d->shapes[i].m[k];
        if (strcmp(m->tactic, tactic) != 0)
            continue;
        if (strcmp(m->stack_id, d->stack.id) == 0)
            return k;
        any = k;
    }
    return any;
}

/* 1 when tactic runs for the shape on d: the listing (list_buf[0..nall))
 * has it, or, when nothing lists for d, a row of it was measured (it was
 * listed where it ran). */
static int tactic_runs(const ix_device *d, int i, const char *tactic, int nall)
{
    if (nall == 0)
        return tactic_row(d, i, tactic) >= 0;
    return tactic_listed(tactic, nall);
}

/* The most specific force of pm that is not excluded, of an asked variant
 * and runs on d (docs/api.md "Pins"). 1 with out filled (the device's own
 * row of the tactic when it has one), else 0 (read lock held). */
static int forced_answer(index_state *ix, const ix_device *d, int i, const attn_shape *s,
                         variant_set vs, const pin_match *pm, index_answer *out)
{
    if (pm == NULL || pm->nforce == 0)
        return 0;
    int nall = listing(ix, d, s);
    for (int k = 0;; k++) {
        const pin *p = pin_match_force(pm, k);
        if (p == NULL)
            return 0;
        if (pin_match_excluded(pm, p->tactic) != NULL ||
            !variant_set_has_tactic(vs, p->tactic) || !tactic_runs(d, i, p->tactic, nall))
            continue;
        int r = tactic_row(d, i, p->tactic);
        if (r >= 0)
            out->m = d->shapes[i].m[r];
        else
            predicted_row(d, s, p->tactic, NAN, NAN, &out->m);
        out->source = INDEX_PINNED;
        out->stale = r >= 0 && strcmp(out->m.stack_id, d->stack.id) != 0;
        out->pinned = *p;
        return 1;
    }
}

int index_lookup(index_state *ix, const char *device, const attn_shape *s,
                 double max_rel_err, index_answer *out)
{
    return index_lookup_in(ix, device, s, max_rel_err, 0, out);
}

/* The sources in order for shape s (key, hash h) on d (read lock held):
 * pinned, measured, fleet, predicted, default. 0, ATTUNE_ENOTFOUND or
 * ATTUNE_ENOMEM; on
 * the first pass (first), ATTUNE_EBUSY when the listing is missing and
 * the lookup will make it itself (list_after): no answer is worth making
 * before it. */
static int answer_from(index_state *ix, ix_device *d, const attn_shape *s, const char *key,
                       uint64_t h, double mre, variant_set vs, int first, index_answer *out)
{
    pin_match match;
    const pin_match *pm = pin_match_init(&match, ix->pins, ix->npins, &d->info, key) > 0
                              ? &match
                              : NULL;
    out->nexcluded = match.nexclude;
    int i = find_slot_shape(d, key, h);
    count_own_rows(d, i, out);
    if (forced_answer(ix, d, i, s, vs, pm, out))
        return 0;
    int rc = measured_answer(ix, d, i, key, mre, vs, pm, out);
    if (rc != 0)
        return rc > 0 ? 0 : rc; /* ENOMEM */
    rc = d->local ? fleet_answer(ix, d, key, h, mre, vs, pm, out) : ATTUNE_ENOTFOUND;
    if (rc != ATTUNE_ENOTFOUND)
        return rc; /* answered, or ENOMEM */
    int nall = listing(ix, d, s);
    if (first && want.set && (want.cheap || !want.builder))
        return ATTUNE_EBUSY;
    int nlist = filter_listing(nall, vs, pm, &out->listed);
    if (predicted_answer(ix, d, s, nlist, nall, mre, vs, pm, out) == 0)
        return 0;
    return default_answer(d, s, nlist, nall, vs, pm, out);
}

/* One pass of index_lookup_in (list_after says whether to make another). */
static int lookup_once(index_state *ix, const char *device, const attn_shape *s,
                       double max_rel_err, variant_set vs, int first, index_answer *out)
{
    memset(out, 0, sizeof *out);
    /* the shape key, built once: the hash probe, the answer, tune on miss */
    char *key = out->key;
    attn_shape_key(s, key, sizeof out->key);
    uint64_t h = key_hash(key);
    out->source = INDEX_DEFAULT;
    out->predicted_us = NAN;
    vs = vs == VARIANT_SET_ALL ? 0 : vs; /* every variant: the cached winners */

    pthread_rwlock_rdlock(&ix->lock);
    ix_device *d = find_spec(ix, device); /* the device, found once */
    if (d == NULL) {
        pthread_rwlock_unlock(&ix->lock);
        return ATTUNE_ENODEV;
    }
    memcpy(out->device_id, d->info.id, sizeof out->device_id);
    out->local = d->local;
    memcpy(out->stack_id, d->stack.id, sizeof out->stack_id);
    int rc = answer_from(ix, d, s, key, h, max_rel_err, vs, first, out);
    pthread_rwlock_unlock(&ix->lock);
    return rc;
}

int index_lookup_in(index_state *ix, const char *device, const attn_shape *s,
                    double max_rel_err, variant_set vs, index_answer *out)
{
    int rc, got, first = 1;
    do {
        rc = lookup_once(ix, device, s, max_rel_err, vs, first, out);
        got = list_after(ix, 0, first);
        first = 0;
    } while (got == LISTED_AGAIN);
    out->listing_pending = got == LISTED_QUEUED;
    return rc;
}

/* A row that can compete under a query's own bound (select.h's usable()
 * with the bound overridden): ok or inaccurate, not noisy, timed. */
static int competes(const store_measurement *m)
{
    return (m->status == STORE_OK || m->status == STORE_INACCURATE) && !m->noisy &&
           isfinite(select_time(m));
}

/* Contract in index.h. The rows are copied with rel_err replaced by the
 * error asked for (src_err), so that pick_winner's rule (bounds, the
 * incumbent, stacks, power modes, completeness, pins) applies unchanged. */
static int measured_once(index_state *ix, const char *device, const attn_shape *s,
                         double max_err, int src_err, variant_set vs, index_answer *out,
                         index_measured_info *info)
{
    memset(out, 0, sizeof *out);
    memset(info, 0, sizeof *info);
    info->best_err = NAN;
    char *key = out->key;
    attn_shape_key(s, key, sizeof out->key);
    uint64_t h = key_hash(key);
    out->source = INDEX_DEFAULT;
    out->predicted_us = NAN;
    vs = vs == VARIANT_SET_ALL ? 0 : vs;
    if (!(max_err > 0))
        return ATTUNE_EINVAL;

    pthread_rwlock_rdlock(&ix->lock);
    ix_device *d = find_spec(ix, device);
    if (d == NULL) {
        pthread_rwlock_unlock(&ix->lock);
        return ATTUNE_ENODEV;
    }
    memcpy(out->device_id, d->info.id, sizeof out->device_id);
    out->local = d->local;
    memcpy(out->stack_id, d->stack.id, sizeof out->stack_id);
    pin_match match;
    const pin_match *pm = pin_match_init(&match, ix->pins, ix->npins, &d->info, key) > 0
                              ? &match
                              : NULL;
    out->nexcluded = match.nexclude;
    int i = find_slot_shape(d, key, h), rc = ATTUNE_ENOTFOUND;
    count_own_rows(d, i, out);
    const ix_shape *sh = i >= 0 ? &d->shapes[i] : NULL;
    store_measurement *c = sh != NULL ? malloc((size_t)sh->n * sizeof *c) : NULL;
    if (sh != NULL && c == NULL)
        rc = ATTUNE_ENOMEM;
    for (int k = 0; c != NULL && k < sh->n; k++) {
        c[k] = sh->m[k];
        if (src_err)
            c[k].rel_err = c[k].src_rel_err;
        if (!competes(&c[k]))
            continue;
        info->rows++;
        if (isfinite(c[k].rel_err)) {
            info->rows_err++;
            if (!(c[k].rel_err >= info->best_err))
                info->best_err = c[k].rel_err;
        }
    }
    if (c != NULL && forced_answer(ix, d, i, s, vs, pm, out)) {
        double e = src_err ? out->m.src_rel_err : out->m.rel_err;
        rc = out->m.stack_id[0] != 0 && competes(&out->m) && e <= max_err ? 0 : ATTUNE_ENOTFOUND;
    } else if (c != NULL) {
        int stale;
        int w = pick_winner(c, sh->n, &d->stack, &ix->policy, max_err, vs, pm, d->need_mark,
                            &stale);
        if (w >= 0 && stale) /* of an older stack: one that still runs */
            w = runnable_winner(ix, d, c, sh->n, &sh->shape, w, &d->stack, max_err, vs, pm,
                                d->need_mark, &stale);
        if (w >= 0) {
            out->source = INDEX_MEASURED;
            out->stale = stale;
            out->m = sh->m[w];
            memcpy(out->from_key, key, sizeof out->from_key);
            rc = 0;
        } else if (w < -1) {
            rc = w; /* ENOMEM from runnable_winner's copy */
        }
    }
    free(c);
    pthread_rwlock_unlock(&ix->lock);
    return rc;
}

int index_lookup_measured(index_state *ix, const char *device, const attn_shape *s,
                          double max_err, int src_err, variant_set vs, index_answer *out,
                          index_measured_info *info)
{
    int rc, got, first = 1;
    do { /* a force pin's check lists */
        rc = measured_once(ix, device, s, max_err, src_err, vs, out, info);
        got = list_after(ix, 0, first);
        first = 0;
    } while (got == LISTED_AGAIN);
    out->listing_pending = got == LISTED_QUEUED;
    return rc;
}

int index_tactic_listed(index_state *ix, const char *device_id, const attn_shape *s,
                        const char *tactic)
{
    int rc, first = 1;
    do { /* off the lookup path (a pin's write): waits for the listing */
        pthread_rwlock_rdlock(&ix->lock);
        ix_device *d = find_device(ix, device_id);
        rc = ATTUNE_ENODEV;
        if (d != NULL) {
            int nall = listing(ix, d, s);
            rc = nall == 0 ? ATTUNE_ENOTFOUND : tactic_runs(d, -1, tactic, nall);
        }
        pthread_rwlock_unlock(&ix->lock);
    } while (list_after(ix, 1, first--) == LISTED_AGAIN);
    return rc;
}

int index_listing_make(index_state *ix, const char *device_id, const attn_shape *s)
{
    pthread_rwlock_rdlock(&ix->lock);
    ix_device *d = find_device(ix, device_id);
    if (d != NULL)
        listing(ix, d, s);
    pthread_rwlock_unlock(&ix->lock);
    list_after(ix, 1, 1);
    return d != NULL ? 0 : ATTUNE_ENODEV;
}

int index_pins_set(index_state *ix, pin *pins, int n)
{
    write_lock(ix);
    pin *old = ix->pins;
    ix->pins = n > 0 ? pins : NULL;
    ix->npins = n > 0 ? n : 0;
    pthread_rwlock_unlock(&ix->lock);
    free(old);
    if (n <= 0)
        free(pins);
    return 0;
}

int index_pins(index_state *ix, pin **out, int *n)
{
    int rc = 0;
    pthread_rwlock_rdlock(&ix->lock);
    *n = ix->npins;
    *out = NULL;
    if (ix->npins > 0 && (*out = malloc((size_t)ix->npins * sizeof **out)) == NULL) {
        rc = ATTUNE_ENOMEM;
        *n = 0;
    } else if (ix->npins > 0) {
        memcpy(*out, ix->pins, (size_t)ix->npins * sizeof **out);
    }
    pthread_rwlock_unlock(&ix->lock);
    return rc;
}

/* One pass of index_predict_top. */
static int predict_top_once(index_state *ix, const char *device_id, const attn_shape *s, int k,
                            attn_tactic *out)
{
    int n = 0;
    pthread_rwlock_rdlock(&ix->lock);
    ix_device *d = find_device(ix, device_id);
    if (d == NULL) {
        pthread_rwlock_unlock(&ix->lock);
        return ATTUNE_ENODEV;
    }
    int nlist = listing(ix, d, s);
    const predict_model *pm = device_model(ix, d);
    /* best first: answer, take the answer out of the candidates, again */
    while (pm != NULL && n < k && nlist > 0) {
        predict_answer pa;
        if (predict_answer_for(pm, s, list_buf, nlist, 0, &pa) != 0)
            break;
        out[n++] = pa.tactic;
        for (int c = 0; c < nlist; c++)
            if (memcmp(&list_buf[c], &pa.tactic, sizeof pa.tactic) == 0) {
                list_buf[c] = list_buf[--nlist];
                break;
            }
    }
    pthread_rwlock_unlock(&ix->lock);
    return n;
}

int index_predict_top(index_state *ix, const char *device_id, const attn_shape *s, int k,
                      attn_tactic *out)
{
    int n, first = 1;
    do /* the jobs thread's: waits for the listing */
        n = predict_top_once(ix, device_id, s, k, out);
    while (list_after(ix, 1, first--) == LISTED_AGAIN);
    return n;
}

/* One pass of index_predict_times. */
static int predict_times_once(index_state *ix, const char *device_id, const attn_shape *s,
                              double *us, int max, int sample)
{
    pthread_rwlock_rdlock(&ix->lock);
    ix_device *d = find_device(ix, device_id);
    if (d == NULL) {
        pthread_rwlock_unlock(&ix->lock);
        return ATTUNE_ENODEV;
    }
    int nlist = listing(ix, d, s);
    const predict_model *pm = device_model(ix, d);
    int n = nlist < max ? nlist : max;
    int step = sample > 0 && n > sample ? (n + sample - 1) / sample : 1;
    /* one candidate at a time, under the loosest bound: its own time */
    for (int c = 0; c < n; c++) {
        predict_answer pa;
        us[c] = c % step != 0 ? -1.0
                : pm != NULL && predict_answer_for(pm, s, &list_buf[c], 1, 1.0, &pa) == 0
                    ? pa.time_us
                    : NAN;
    }
    pthread_rwlock_unlock(&ix->lock);
    return n;
}

int index_predict_times(index_state *ix, const char *device_id, const attn_shape *s,
                        double *us, int max, int sample)
{
    int n, got, first = 1;
    do { /* on the lookup path (tune on miss's admission): never waits */
        n = predict_times_once(ix, device_id, s, us, max, sample);
        got = list_after(ix, 0, first);
        first = 0;
    } while (got == LISTED_AGAIN);
    return got == LISTED_QUEUED && n >= 0 ? ATTUNE_EBUSY : n;
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
