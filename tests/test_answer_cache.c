/* test_answer_cache.c -- per-thread answer caches: a value only for its own
 * key and generation, stale ones released, bounded, nothing leaked. */
#include <pthread.h>
#include <stdio.h>

#include "../common/answer_cache.h"
#include "../common/attune_err.h"
#include "test.h"

/* Values are ints from a pool; release marks them released. */
#define NV 256
static int vals[NV];
static int released[NV];
static int nreleased;

static void release(void *v)
{
    int i = (int)((int *)v - vals);
    released[i]++;
    nreleased++;
}

static void reset(void)
{
    memset(released, 0, sizeof released);
    nreleased = 0;
    for (int i = 0; i < NV; i++)
        vals[i] = i;
}

static int put(answer_cache *c, const char *key, uint64_t gen, int v)
{
    return answer_cache_put(c, key, strlen(key), gen, &vals[v]);
}

static int *get(answer_cache *c, const char *key, uint64_t gen)
{
    return answer_cache_get(c, key, strlen(key), gen);
}

static void get_should_answer_only_the_same_key_and_generation(void)
{
    reset();
    answer_cache *c = answer_cache_new(64, release);
    CHECK(c != NULL);
    CHECK(get(c, "/v1/tactic?device=cpu&b=1", 7) == NULL); /* no table yet */
    CHECK_EQ_INT(put(c, "/v1/tactic?device=cpu&b=1", 7, 1), 0);
    CHECK(get(c, "/v1/tactic?device=cpu&b=1", 7) == &vals[1]);
    CHECK(get(c, "/v1/tactic?device=cpu&b=1", 7) == &vals[1]); /* again */
    CHECK(get(c, "/v1/tactic?device=cpu&b=2", 7) == NULL);
    CHECK(get(c, "/v1/tactic?device=cpu&b=", 7) == NULL);   /* a prefix */
    CHECK(get(c, "/v1/tactic?device=cpu&b=10", 7) == NULL); /* longer */
    CHECK_EQ_INT(nreleased, 0);
    int64_t hits, misses;
    answer_cache_counts(c, &hits, &misses);
    CHECK_EQ_INT(hits, 2);
    CHECK_EQ_INT(misses, 4);
    answer_cache_free(c);
    CHECK_EQ_INT(released[1], 1);
    CHECK_EQ_INT(nreleased, 1);
}

/* A change (the generation moved on) makes the old answer unreachable and
 * releases it; asking with the old generation again finds nothing either. */
static void get_should_never_answer_across_a_generation(void)
{
    reset();
    answer_cache *c = answer_cache_new(64, release);
    CHECK_EQ_INT(put(c, "k", 1, 3), 0);
    CHECK(get(c, "k", 2) == NULL);
    CHECK_EQ_INT(released[3], 1);
    CHECK(get(c, "k", 1) == NULL); /* gone, not kept for the old generation */
    CHECK_EQ_INT(put(c, "k", 2, 4), 0);
    CHECK(get(c, "k", 2) == &vals[4]);
    CHECK(get(c, "k", 3) == NULL);
    CHECK_EQ_INT(released[4], 1);
    answer_cache_free(c);
    CHECK_EQ_INT(nreleased, 2);
}

static void put_should_replace_and_bound_the_table(void)
{
    reset();
    answer_cache *c = answer_cache_new(4, release);
    CHECK_EQ_INT(put(c, "same", 1, 0), 0);
    CHECK_EQ_INT(put(c, "same", 1, 1), 0); /* replaces: the old value released */
    CHECK_EQ_INT(released[0], 1);
    CHECK(get(c, "same", 1) == &vals[1]);
    char key[32];
    for (int i = 2; i < 102; i++) {
        snprintf(key, sizeof key, "key%d", i);
        CHECK_EQ_INT(put(c, key, 1, i), 0);
    }
    /* 101 values went in, at most 4 slots hold one */
    CHECK(nreleased >= 101 - 4);
    int live = 0;
    for (int i = 0; i < 102; i++) {
        snprintf(key, sizeof key, "key%d", i);
        int *v = i == 1 ? get(c, "same", 1) : get(c, key, 1);
        if (v != NULL) {
            CHECK_EQ_INT(*v, i); /* a hit is always its own key's value */
            CHECK_EQ_INT(released[i], 0);
            live++;
        }
    }
    CHECK(live >= 1 && live <= 4);
    CHECK_EQ_INT(nreleased + live, 102);
    answer_cache_free(c);
    CHECK_EQ_INT(nreleased, 102);
    for (int i = 0; i < 102; i++)
        CHECK_EQ_INT(released[i], 1); /* each exactly once */
}

static void put_should_refuse_long_keys(void)
{
    reset();
    answer_cache *c = answer_cache_new(8, release);
    char big[ANSWER_CACHE_KEY_MAX + 2];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = 0;
    CHECK_EQ_INT(put(c, big, 1, 5), ATTUNE_ETOOBIG);
    CHECK_EQ_INT(released[5], 1); /* owned, so released */
    CHECK(get(c, big, 1) == NULL);
    big[ANSWER_CACHE_KEY_MAX] = 0; /* exactly the limit: cached */
    CHECK_EQ_INT(put(c, big, 1, 6), 0);
    CHECK(get(c, big, 1) == &vals[6]);
    answer_cache_free(c);
    CHECK_EQ_INT(nreleased, 2);
}

typedef struct other {
    answer_cache *c;
    int *seen;            /* what the other thread found for "k" */
    int put_rc;
} other;

static void *other_thread(void *arg)
{
    other *o = arg;
    o->seen = get(o->c, "k", 1);
    o->put_rc = put(o->c, "k", 1, 9);
    return NULL; /* the thread ends: its table stays on the cache's list */
}

/* Each thread answers from its own table; a table outlives its thread
 * until answer_cache_free releases it. */
static void tables_should_be_per_thread(void)
{
    reset();
    answer_cache *c = answer_cache_new(8, release);
    CHECK_EQ_INT(put(c, "k", 1, 8), 0);
    other o = {c, NULL, -1};
    pthread_t th;
    CHECK_EQ_INT(pthread_create(&th, NULL, other_thread, &o), 0);
    pthread_join(th, NULL);
    CHECK(o.seen == NULL);
    CHECK_EQ_INT(o.put_rc, 0);
    CHECK(get(c, "k", 1) == &vals[8]); /* the other thread's put is not ours */
    CHECK_EQ_INT(nreleased, 0);
    answer_cache_free(c);
    CHECK_EQ_INT(released[8], 1);
    CHECK_EQ_INT(released[9], 1);
}

int main(void)
{
    RUN(get_should_answer_only_the_same_key_and_generation);
    RUN(get_should_never_answer_across_a_generation);
    RUN(put_should_replace_and_bound_the_table);
    RUN(put_should_refuse_long_keys);
    RUN(tables_should_be_per_thread);
    return test_summary();
}
