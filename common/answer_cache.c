/* answer_cache.c -- bounded per-thread caches of whole answers (answer_cache.h). */
#include "answer_cache.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "attune_err.h"

typedef struct entry {
    void *value;          /* NULL: empty */
    uint64_t gen;
    uint64_t hash;
    size_t len;
    char *key;            /* malloc'd, len bytes */
} entry;

/* One thread's table; every table is on its cache's list, so that
 * answer_cache_free reaches the tables of threads that have ended. */
typedef struct table {
    struct table *next;
    entry *e;             /* slots entries */
    atomic_llong hits, misses; /* this thread's (no line shared between threads) */
} table;

struct answer_cache {
    pthread_key_t key;    /* the calling thread's table */
    pthread_mutex_t mu;   /* tables (a thread's first put only) */
    table *tables;
    uint32_t mask;        /* slots - 1 */
    answer_cache_release_fn release;
    atomic_llong misses;  /* of threads with no table yet */
};

/* A key's hash, eight bytes a step (FNV-1a's byte steps were 1% of a
 * lookup's CPU on a 90-byte query): each word mixed in by a multiply and
 * a shift, the length in the seed; a collision only costs a memcmp. */
static uint64_t key_hash(const char *key, size_t len)
{
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ len;
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, key, 8);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ULL;
        h ^= h >> 31;
        key += 8;
        len -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, key, len);
    h = (h ^ w) * 0x94d049bb133111ebULL;
    return h ^ (h >> 29);
}

answer_cache *answer_cache_new(int slots, answer_cache_release_fn release)
{
    answer_cache *c = calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    if (pthread_key_create(&c->key, NULL) != 0) {
        free(c);
        return NULL;
    }
    uint32_t n = 1;
    while ((int)n < slots && n < (1u << 20))
        n <<= 1;
    c->mask = n - 1;
    c->release = release;
    pthread_mutex_init(&c->mu, NULL);
    return c;
}

static void clear(answer_cache *c, entry *e)
{
    if (e->value != NULL && c->release != NULL)
        c->release(e->value);
    free(e->key);
    memset(e, 0, sizeof *e);
}

void answer_cache_free(answer_cache *c)
{
    if (c == NULL)
        return;
    while (c->tables != NULL) {
        table *t = c->tables;
        c->tables = t->next;
        for (uint32_t i = 0; i <= c->mask; i++)
            clear(c, &t->e[i]);
        free(t->e);
        free(t);
    }
    pthread_key_delete(c->key);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

void *answer_cache_get(answer_cache *c, const char *key, size_t len, uint64_t gen)
{
    table *t = pthread_getspecific(c->key);
    if (t == NULL || len > ANSWER_CACHE_KEY_MAX) {
        atomic_fetch_add_explicit(&c->misses, 1, memory_order_relaxed);
        return NULL;
    }
    uint64_t h = key_hash(key, len);
    entry *e = &t->e[h & c->mask];
    if (e->value != NULL && e->gen != gen)
        clear(c, e); /* made from data that has changed since: never again */
    if (e->value == NULL || e->hash != h || e->len != len || memcmp(e->key, key, len) != 0) {
        atomic_fetch_add_explicit(&t->misses, 1, memory_order_relaxed);
        return NULL;
    }
    atomic_fetch_add_explicit(&t->hits, 1, memory_order_relaxed);
    return e->value;
}

/* The calling thread's table, made and listed on its first use. */
static table *my_table(answer_cache *c)
{
    table *t = pthread_getspecific(c->key);
    if (t != NULL)
        return t;
    t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    t->e = calloc((size_t)c->mask + 1, sizeof *t->e);
    if (t->e == NULL || pthread_setspecific(c->key, t) != 0) {
        free(t->e);
        free(t);
        return NULL;
    }
    pthread_mutex_lock(&c->mu);
    t->next = c->tables;
    c->tables = t;
    pthread_mutex_unlock(&c->mu);
    return t;
}

int answer_cache_put(answer_cache *c, const char *key, size_t len, uint64_t gen, void *value)
{
    if (len > ANSWER_CACHE_KEY_MAX) {
        if (c->release != NULL)
            c->release(value);
        return ATTUNE_ETOOBIG;
    }
    table *t = my_table(c);
    char *k = t != NULL ? malloc(len > 0 ? len : 1) : NULL;
    if (k == NULL) {
        if (c->release != NULL)
            c->release(value);
        return ATTUNE_ENOMEM;
    }
    memcpy(k, key, len);
    uint64_t h = key_hash(key, len);
    entry *e = &t->e[h & c->mask];
    clear(c, e);
    e->value = value;
    e->gen = gen;
    e->hash = h;
    e->len = len;
    e->key = k;
    return 0;
}

void answer_cache_counts(answer_cache *c, int64_t *hits, int64_t *misses)
{
    int64_t h = 0, m = atomic_load(&c->misses);
    pthread_mutex_lock(&c->mu);
    for (table *t = c->tables; t != NULL; t = t->next) {
        h += atomic_load_explicit(&t->hits, memory_order_relaxed);
        m += atomic_load_explicit(&t->misses, memory_order_relaxed);
    }
    pthread_mutex_unlock(&c->mu);
    *hits = h;
    *misses = m;
}
