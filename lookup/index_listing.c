/* index_listing.c -- the lookup index's cache of backend listings: a chained
 * hash table over a bounded array of entries, least recently used evicted,
 * and the builder's queue of listings to make. */
#include "index_listing.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/attune_err.h"
#include "../common/hash.h"

typedef struct entry {
    char kind[sizeof ((index_listing_req *)0)->kind];
    int index;
    char key[ATTN_SHAPE_KEY_MAX];
    uint64_t hash;
    attn_tactic *t;          /* malloc'd; NULL when n == 0 */
    int n;
    int32_t next;            /* the bucket's next entry, -1 at the end */
    _Atomic uint64_t used;   /* tick of the last get or put */
} entry;

struct index_listing {
    pthread_rwlock_t lock;
    int max_entries, max_tactics;
    entry *e;                /* e[0..n): every entry is live */
    int n;
    int32_t *buckets;        /* heads, -1 empty; nbuckets a power of two */
    uint32_t nbuckets;
    int64_t tactics, evictions;
    _Atomic uint64_t tick;
    /* the queue: a ring of q[(head + i) % QUEUE_MAX], i < nq; q[head] is
     * being made from index_listing_next to index_listing_done */
    index_listing_req q[INDEX_LISTING_QUEUE_MAX];
    int head, nq;
};

index_listing *index_listing_new(int max_entries, int max_tactics)
{
    index_listing *c = calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    c->max_entries = max_entries > 0 ? max_entries : INDEX_LISTING_MAX_ENTRIES;
    c->max_tactics = max_tactics > 0 ? max_tactics : INDEX_LISTING_MAX_TACTICS;
    c->nbuckets = 16;
    while (c->nbuckets < (uint32_t)c->max_entries)
        c->nbuckets *= 2;
    c->e = calloc((size_t)c->max_entries, sizeof *c->e);
    c->buckets = malloc(c->nbuckets * sizeof *c->buckets);
    if (c->e == NULL || c->buckets == NULL || pthread_rwlock_init(&c->lock, NULL) != 0) {
        free(c->e);
        free(c->buckets);
        free(c);
        return NULL;
    }
    for (uint32_t i = 0; i < c->nbuckets; i++)
        c->buckets[i] = -1;
    return c;
}

void index_listing_free(index_listing *c)
{
    if (c == NULL)
        return;
    for (int i = 0; i < c->n; i++)
        free(c->e[i].t);
    free(c->e);
    free(c->buckets);
    pthread_rwlock_destroy(&c->lock);
    free(c);
}

static uint64_t entry_hash(const char *kind, int index, const char *key)
{
    uint64_t h = hash_fnv1a64(hash_fnv1a64_init(), kind, strlen(kind) + 1);
    h = hash_fnv1a64(h, &index, sizeof index);
    return hash_fnv1a64(h, key, strlen(key));
}

/* The entry of (kind, index, key) with hash h, or -1 (a lock held). */
static int find(const index_listing *c, const char *kind, int index, const char *key,
                uint64_t h)
{
    for (int32_t i = c->buckets[h & (c->nbuckets - 1)]; i >= 0; i = c->e[i].next) {
        const entry *x = &c->e[i];
        if (x->hash == h && x->index == index && strcmp(x->kind, kind) == 0 &&
            strcmp(x->key, key) == 0)
            return i;
    }
    return -1;
}

int index_listing_get(index_listing *c, const char *kind, int index, const char *key,
                      attn_tactic *out, int max)
{
    uint64_t h = entry_hash(kind, index, key);
    pthread_rwlock_rdlock(&c->lock);
    int i = find(c, kind, index, key, h), n = -1;
    if (i >= 0) {
        entry *x = &c->e[i];
        n = x->n;
        if (n > 0 && max > 0)
            memcpy(out, x->t, (size_t)(n < max ? n : max) * sizeof *out);
        /* relaxed: the stamp orders evictions, nothing is read through it */
        atomic_store_explicit(&x->used, atomic_fetch_add(&c->tick, 1) + 1,
                              memory_order_relaxed);
    }
    pthread_rwlock_unlock(&c->lock);
    return n;
}

/* Take entry i out of its bucket's chain (write lock held). */
static void unlink_entry(index_listing *c, int32_t i)
{
    int32_t *p = &c->buckets[c->e[i].hash & (c->nbuckets - 1)];
    while (*p != i)
        p = &c->e[*p].next;
    *p = c->e[i].next;
}

/* Remove entry i (write lock held): the last entry moves into its place,
 * relinked under its new number. */
static void remove_entry(index_listing *c, int32_t i)
{
    unlink_entry(c, i);
    c->tactics -= c->e[i].n;
    free(c->e[i].t);
    int32_t last = --c->n;
    if (i != last) {
        unlink_entry(c, last);
        memcpy(&c->e[i], &c->e[last], sizeof c->e[i]);
        int32_t *head = &c->buckets[c->e[i].hash & (c->nbuckets - 1)];
        c->e[i].next = *head;
        *head = i;
    }
    memset(&c->e[last], 0, sizeof c->e[last]);
}

/* Evict the least recently used entry (write lock held, n > 0). */
static void evict_lru(index_listing *c)
{
    int32_t lru = 0;
    uint64_t oldest = atomic_load_explicit(&c->e[0].used, memory_order_relaxed);
    for (int32_t i = 1; i < c->n; i++) {
        uint64_t u = atomic_load_explicit(&c->e[i].used, memory_order_relaxed);
        if (u < oldest) {
            oldest = u;
            lru = i;
        }
    }
    remove_entry(c, lru);
    c->evictions++;
}

int index_listing_put(index_listing *c, const char *kind, int index, const char *key,
                      const attn_tactic *t, int n)
{
    if (n < 0 || n > c->max_tactics)
        return 0; /* larger than the whole cache: listed each time instead */
    attn_tactic *copy = NULL;
    if (n > 0 && (copy = malloc((size_t)n * sizeof *copy)) == NULL)
        return ATTUNE_ENOMEM;
    if (n > 0)
        memcpy(copy, t, (size_t)n * sizeof *copy);
    uint64_t h = entry_hash(kind, index, key);
    pthread_rwlock_wrlock(&c->lock);
    int i = find(c, kind, index, key, h);
    if (i >= 0)
        remove_entry(c, i);
    while (c->n > 0 && (c->n >= c->max_entries || c->tactics + n > c->max_tactics))
        evict_lru(c);
    entry *x = &c->e[c->n];
    snprintf(x->kind, sizeof x->kind, "%s", kind);
    x->index = index;
    snprintf(x->key, sizeof x->key, "%s", key);
    x->hash = h;
    x->t = copy;
    x->n = n;
    atomic_store_explicit(&x->used, atomic_fetch_add(&c->tick, 1) + 1, memory_order_relaxed);
    int32_t *head = &c->buckets[h & (c->nbuckets - 1)];
    x->next = *head;
    *head = c->n++;
    c->tactics += n;
    pthread_rwlock_unlock(&c->lock);
    return 0;
}

static int same_req(const index_listing_req *a, const index_listing_req *b)
{
    const attn_shape *x = &a->shape, *y = &b->shape;
    return a->index == b->index && strcmp(a->kind, b->kind) == 0 && x->b == y->b &&
           x->hq == y->hq && x->hkv == y->hkv && x->sq == y->sq && x->skv == y->skv &&
           x->d == y->d && x->dtype == y->dtype && x->causal == y->causal;
}

int index_listing_want(index_listing *c, const index_listing_req *r)
{
    char key[ATTN_SHAPE_KEY_MAX];
    attn_shape_key(&r->shape, key, sizeof key);
    uint64_t h = entry_hash(r->kind, r->index, key);
    int rc = 1;
    pthread_rwlock_wrlock(&c->lock);
    if (find(c, r->kind, r->index, key, h) >= 0)
        rc = 0;
    for (int i = 0; i < c->nq && rc == 1; i++)
        if (same_req(&c->q[(c->head + i) % INDEX_LISTING_QUEUE_MAX], r))
            rc = 0;
    if (rc == 1 && c->nq == INDEX_LISTING_QUEUE_MAX)
        rc = ATTUNE_ERANGE;
    if (rc == 1)
        c->q[(c->head + c->nq++) % INDEX_LISTING_QUEUE_MAX] = *r;
    pthread_rwlock_unlock(&c->lock);
    return rc;
}

int index_listing_next(index_listing *c, index_listing_req *r)
{
    pthread_rwlock_rdlock(&c->lock);
    int any = c->nq > 0;
    if (any)
        *r = c->q[c->head];
    pthread_rwlock_unlock(&c->lock);
    return any;
}

void index_listing_done(index_listing *c)
{
    pthread_rwlock_wrlock(&c->lock);
    if (c->nq > 0) {
        c->head = (c->head + 1) % INDEX_LISTING_QUEUE_MAX;
        c->nq--;
    }
    pthread_rwlock_unlock(&c->lock);
}

void index_listing_stats_get(index_listing *c, index_listing_stats *out)
{
    pthread_rwlock_rdlock(&c->lock);
    out->entries = c->n;
    out->tactics = c->tactics;
    out->evictions = c->evictions;
    out->queued = c->nq;
    pthread_rwlock_unlock(&c->lock);
}
