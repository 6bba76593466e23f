/* test_index_listing.c -- the lookup index's listing cache
 * (lookup/index_listing.c) and the lookup path's use of it (lookup/index.c,
 * issue 26 item 4): a backend whose listing may block is never listed on
 * the request thread while the builder runs; a lookup that misses answers
 * at once as for a device nothing lists for, and the next one after the
 * builder listed answers from the listing. Fake backends registered
 * through kernels/registry.c (attn_backend_register) count their listings
 * and the threads they ran on. */
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "kernels/attn.h"
#include "lookup/index.h"
#include "lookup/index_listing.h"
#include "fake_backend.h"
#include "test.h"

static const attn_shape A = {1, 4, 2, 24, 40, 16, ATTN_F32, 0};
static const attn_shape A2 = {2, 4, 2, 24, 40, 16, ATTN_F32, 0}; /* A's neighbour */

/* The one tactic the fake backends list: measured nowhere, so an answer
 * naming it came from the listing. */
#define LISTED "split/acc=f32/pad=8"

/* ---- the cache alone */

static attn_tactic tactic(const char *text)
{
    attn_tactic t;
    CHECK_EQ_INT(attn_tactic_parse(text, &t, NULL, 0), 0);
    return t;
}

static void cache_should_evict_the_least_recently_used_past_its_entries(void)
{
    index_listing *c = index_listing_new(4, 0);
    attn_tactic t[2] = {tactic("fused/pad=1"), tactic("fused/pad=8")}, got[2];
    char key[16];
    for (int i = 0; i < 4; i++) {
        snprintf(key, sizeof key, "s%d", i);
        CHECK_EQ_INT(index_listing_put(c, "cpu", 0, key, t, 1 + i % 2), 0);
    }
    CHECK_EQ_INT(index_listing_get(c, "cpu", 0, "s0", got, 2), 1); /* s1 is now the oldest */
    CHECK_EQ_INT(index_listing_put(c, "cpu", 0, "s4", t, 2), 0);
    index_listing_stats st;
    index_listing_stats_get(c, &st);
    CHECK_EQ_INT(st.entries, 4);
    CHECK_EQ_INT(st.evictions, 1);
    CHECK_EQ_INT(index_listing_get(c, "cpu", 0, "s1", got, 2), -1);
    CHECK_EQ_INT(index_listing_get(c, "cpu", 0, "s0", got, 2), 1);
    CHECK_EQ_INT(index_listing_get(c, "cpu", 0, "s2", got, 2), 1);
    CHECK_EQ_INT(index_listing_get(c, "cpu", 0, "s4", got, 2), 2);
    CHECK(memcmp(&got[1], &t[1], sizeof t[1]) == 0);
    /* the key is (kind, index, shape): another device index, another kind */
    CHECK_EQ_INT(index_listing_get(c, "cpu", 1, "s4", got, 2), -1);
    CHECK_EQ_INT(index_listing_get(c, "cuda", 0, "s4", got, 2), -1);
    /* a put of a held key replaces it, evicting nothing */
    CHECK_EQ_INT(index_listing_put(c, "cpu", 0, "s4", t, 1), 0);
    CHECK_EQ_INT(index_listing_get(c, "cpu", 0, "s4", got, 2), 1);
    index_listing_stats_get(c, &st);
    CHECK_EQ_INT(st.entries, 4);
    CHECK_EQ_INT(st.evictions, 1);
    index_listing_free(c);
}

static void cache_should_hold_at_most_its_default_bounds(void)
{
    index_listing *c = index_listing_new(0, 0);
    attn_tactic t = tactic("fused/pad=8"), got;
    char key[24];
    for (int i = 0; i < INDEX_LISTING_MAX_ENTRIES + 100; i++) {
        snprintf(key, sizeof key, "shape%d", i);
        CHECK_EQ_INT(index_listing_put(c, "cuda", 0, key, &t, 1), 0);
    }
    index_listing_stats st;
    index_listing_stats_get(c, &st);
    CHECK_EQ_INT(st.entries, INDEX_LISTING_MAX_ENTRIES);
    CHECK_EQ_INT(st.tactics, INDEX_LISTING_MAX_ENTRIES);
    CHECK_EQ_INT(st.evictions, 100);
    CHECK_EQ_INT(index_listing_get(c, "cuda", 0, "shape99", &got, 1), -1);
    CHECK_EQ_INT(index_listing_get(c, "cuda", 0, "shape100", &got, 1), 1);
    snprintf(key, sizeof key, "shape%d", INDEX_LISTING_MAX_ENTRIES + 99);
    CHECK_EQ_INT(index_listing_get(c, "cuda", 0, key, &got, 1), 1);
    index_listing_free(c);

    /* the tactics bound: 3 listings of 4 in a cache of 10 tactics */
    c = index_listing_new(0, 10);
    attn_tactic four[4] = {t, t, t, t};
    for (int i = 0; i < 3; i++) {
        snprintf(key, sizeof key, "s%d", i);
        CHECK_EQ_INT(index_listing_put(c, "cuda", 0, key, four, 4), 0);
    }
    index_listing_stats_get(c, &st);
    CHECK_EQ_INT(st.entries, 2);
    CHECK_EQ_INT(st.tactics, 8);
    CHECK_EQ_INT(index_listing_get(c, "cuda", 0, "s0", &got, 1), -1);
    attn_tactic many[11] = {t, t, t, t, t, t, t, t, t, t, t};
    CHECK_EQ_INT(index_listing_put(c, "cuda", 0, "big", many, 11), 0); /* never fits */
    CHECK_EQ_INT(index_listing_get(c, "cuda", 0, "big", &got, 1), -1);
    index_listing_free(c);
}

static void queue_should_not_repeat_a_listing(void)
{
    index_listing *c = index_listing_new(0, 0);
    index_listing_req r = {.kind = "cuda", .index = 1, .shape = A}, r2 = r, got;
    r2.shape = A2;
    CHECK_EQ_INT(index_listing_want(c, &r), 1);
    CHECK_EQ_INT(index_listing_want(c, &r), 0);
    CHECK_EQ_INT(index_listing_want(c, &r2), 1);
    CHECK_EQ_INT(index_listing_next(c, &got), 1);
    CHECK_EQ_INT(got.index, 1);
    CHECK(got.shape.b == A.b);
    CHECK_EQ_INT(index_listing_want(c, &r), 0); /* being made */
    index_listing_done(c);
    char key[ATTN_SHAPE_KEY_MAX];
    attn_shape_key(&A, key, sizeof key);
    CHECK_EQ_INT(index_listing_put(c, "cuda", 1, key, NULL, 0), 0);
    CHECK_EQ_INT(index_listing_want(c, &r), 0); /* cached: an empty listing counts */
    CHECK_EQ_INT(index_listing_next(c, &got), 1);
    CHECK(got.shape.b == A2.b);
    index_listing_done(c);
    CHECK_EQ_INT(index_listing_next(c, &got), 0);
    for (int i = 0; i < INDEX_LISTING_QUEUE_MAX; i++) {
        r.shape.sq = 100 + i;
        CHECK_EQ_INT(index_listing_want(c, &r), 1);
    }
    r.shape.sq = 99;
    CHECK_EQ_INT(index_listing_want(c, &r), ATTUNE_ERANGE);
    index_listing_stats st;
    index_listing_stats_get(c, &st);
    CHECK_EQ_INT(st.queued, INDEX_LISTING_QUEUE_MAX);
    index_listing_free(c);
}

/* ---- fake backends: "slow" may block (list_cheap 0), "quick" may not */

static pthread_t main_thread;
static atomic_int calls_main, calls_other;
/* Lists LISTED. Off the main thread it waits while the gate is closed
 * (a first cuDNN heuristics call); on the main thread it never waits, so
 * that a wrong caller shows as a count, not a hang. */
static int fake_tactics(int index, const attn_shape *s, attn_tactic *out, int max)
{
    (void)index;
    (void)s;
    if (pthread_equal(pthread_self(), main_thread)) {
        atomic_fetch_add(&calls_main, 1);
    } else {
        atomic_fetch_add(&calls_other, 1);
        fake_gate_pass();
    }
    if (max > 0 && attn_tactic_parse(LISTED, &out[0], NULL, 0) != 0)
        return ATTUNE_EINVAL; /* no CHECK here: the builder's thread runs this */
    return 1;
}

static const attn_ops slow_ops = {.name = "slow", .device_count = fake_backend_count,
                                  .device_info = fake_backend_info, .tactics = fake_tactics,
                                  .list_cheap = 0};
static const attn_ops quick_ops = {.name = "quick", .device_count = fake_backend_count,
                                   .device_info = fake_backend_info, .tactics = fake_tactics,
                                   .list_cheap = 1};

static void reset_counts(void)
{
    atomic_store(&calls_main, 0);
    atomic_store(&calls_other, 0);
}

/* An ok row of tactic t on dev's stack "cur", taking us. */
static store_measurement row(const char *dev, attn_shape s, const char *t, double us, int mark)
{
    store_measurement m = {.shape = s, .status = STORE_OK, .n = 10, .incumbent = mark,
                           .taken_at = 100, .time_us = us, .time_us_min = us,
                           .time_us_max = us, .time_us_copies = NAN, .rel_err = 1e-6,
                           .max_abs_err = 1e-6, .err_ratio = NAN};
    snprintf(m.device_id, sizeof m.device_id, "%s", dev);
    snprintf(m.stack_id, sizeof m.stack_id, "cur");
    snprintf(m.tactic, sizeof m.tactic, "%s", t);
    return m;
}

/* A fresh index holding local device id of backend kind, with a complete
 * tune of A (two tactics, neither LISTED). */
static index_state *fake_device(const char *id, const char *kind)
{
    attn_device_info info;
    attn_stack st;
    memset(&info, 0, sizeof info);
    memset(&st, 0, sizeof st);
    snprintf(info.id, sizeof info.id, "%s", id);
    snprintf(info.name, sizeof info.name, "Fake %s", kind);
    snprintf(info.kind, sizeof info.kind, "%s", kind);
    info.index = 0;
    snprintf(st.id, sizeof st.id, "cur");
    index_state *ix = index_new(NULL);
    CHECK(ix != NULL);
    CHECK_EQ_INT(index_device_put(ix, &info, &st, 1), 0);
    store_measurement m = row(id, A, "fused/pad=1", 30, 0);
    CHECK_EQ_INT(index_row_put(ix, &m), 0);
    m = row(id, A, "split/acc=f32/pad=1", 20, 1);
    CHECK_EQ_INT(index_row_put(ix, &m), 0);
    return ix;
}

static void lookup_should_not_wait_for_a_slow_listing(void)
{
    reset_counts();
    fake_gate_set(0);
    index_state *ix = fake_device("SLOW-1", "slow");
    CHECK_EQ_INT(index_models_start(ix), 0);
    index_answer a;
    /* a miss: answered at once as for a device nothing lists for, the
     * listing queued for the builder */
    CHECK_EQ_INT(index_lookup(ix, "SLOW-1", &A2, 0, &a), 0);
    CHECK_EQ_INT(a.listing_pending, 1);
    CHECK_MSG(strcmp(a.m.tactic, LISTED) != 0, "answered %s before the listing", a.m.tactic);
    CHECK(a.source == INDEX_PREDICTED || a.source == INDEX_NEAREST ||
          a.source == INDEX_DEFAULT);
    /* the builder is inside the listing, stuck on the gate: lookups still
     * answer, and queue nothing twice */
    fake_gate_wait_inside();
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_INT(index_lookup(ix, "SLOW-1", &A2, 0, &a), 0);
        CHECK_EQ_INT(a.listing_pending, 1);
        CHECK(strcmp(a.m.tactic, LISTED) != 0);
    }
    /* the tune-on-miss admission's pricing says it cannot price yet */
    double us[8];
    CHECK_EQ_INT(index_predict_times(ix, "SLOW-1", &A2, us, 8, 0), ATTUNE_EBUSY);
    fake_gate_set(1);
    CHECK_EQ_INT(index_listings_wait(ix), 0);
    CHECK_EQ_INT(index_lookup(ix, "SLOW-1", &A2, 0, &a), 0);
    CHECK_EQ_INT(a.listing_pending, 0);
    CHECK_STR(a.m.tactic, LISTED);
    CHECK(a.listed != 0);
    CHECK_EQ_INT(index_predict_times(ix, "SLOW-1", &A2, us, 8, 0), 1);
    CHECK_EQ_INT(atomic_load(&calls_main), 0);
    CHECK_EQ_INT(atomic_load(&calls_other), 1); /* once, by the builder */
    /* a measured shape needs no listing: nothing queued for it */
    CHECK_EQ_INT(index_lookup(ix, "SLOW-1", &A, 0, &a), 0);
    CHECK_EQ_INT(a.source, INDEX_MEASURED);
    CHECK_EQ_INT(a.listing_pending, 0);
    CHECK_EQ_INT(index_listings_wait(ix), 0);
    CHECK_EQ_INT(atomic_load(&calls_other), 1);
    index_free(ix);
}

/* Off the lookup path (a pin's check, tune on miss's top tactics), a call
 * that needs the listing waits for it: made on the caller's thread, once. */
static void calls_off_the_lookup_path_should_list_themselves(void)
{
    reset_counts();
    fake_gate_set(1);
    index_state *ix = fake_device("SLOW-1", "slow");
    CHECK_EQ_INT(index_models_start(ix), 0);
    CHECK_EQ_INT(index_tactic_listed(ix, "SLOW-1", &A2, LISTED), 1);
    CHECK_EQ_INT(index_tactic_listed(ix, "SLOW-1", &A2, "fused/pad=1"), 0);
    CHECK_EQ_INT(atomic_load(&calls_main), 1);
    attn_tactic top[2];
    CHECK(index_predict_top(ix, "SLOW-1", &A, 2, top) >= 0); /* another shape: listed */
    CHECK_EQ_INT(atomic_load(&calls_main), 2);
    CHECK(index_predict_top(ix, "SLOW-1", &A2, 2, top) >= 0); /* cached */
    CHECK_EQ_INT(atomic_load(&calls_main), 2);
    index_answer a;
    CHECK_EQ_INT(index_lookup(ix, "SLOW-1", &A2, 0, &a), 0);
    CHECK_STR(a.m.tactic, LISTED);
    CHECK_EQ_INT(a.listing_pending, 0);
    CHECK_EQ_INT(atomic_load(&calls_other), 0);
    index_free(ix);
}

/* The listing runs with the index's lock free: it takes the write lock
 * itself (index_pins_set), which it could not while its caller held the
 * read lock (alarm() in main turns such a hang into a failure). */
static index_state *relock_ix;
static int relock_tactics(int index, const attn_shape *s, attn_tactic *out, int max)
{
    CHECK_EQ_INT(index_pins_set(relock_ix, NULL, 0), 0);
    return fake_tactics(index, s, out, max);
}
static const attn_ops relock_ops = {.name = "relock", .device_count = fake_backend_count,
                                    .device_info = fake_backend_info, .tactics = relock_tactics,
                                    .list_cheap = 1};

/* A cheap backend (the CPU's) is listed by the lookup itself, which then
 * answers from it at once; so is a slow one when no builder runs (the
 * clients' in-process lookups). */
static void lookup_should_list_a_cheap_backend_itself(void)
{
    const char *const kinds[] = {"quick", "slow", "relock"};
    for (int k = 0; k < 3; k++) {
        reset_counts();
        fake_gate_set(1);
        index_state *ix = fake_device("FAKE-1", kinds[k]);
        relock_ix = ix;
        if (k == 0)
            CHECK_EQ_INT(index_models_start(ix), 0);
        index_answer a;
        CHECK_EQ_INT(index_lookup(ix, "FAKE-1", &A2, 0, &a), 0);
        CHECK_MSG(strcmp(a.m.tactic, LISTED) == 0, "%s: %s", kinds[k], a.m.tactic);
        CHECK_EQ_INT(a.listing_pending, 0);
        CHECK_EQ_INT(index_lookup(ix, "FAKE-1", &A2, 0, &a), 0); /* cached now */
        CHECK_STR(a.m.tactic, LISTED);
        CHECK_EQ_INT(atomic_load(&calls_main), 1);
        CHECK_EQ_INT(atomic_load(&calls_other), 0);
        index_free(ix);
    }
}

/* A tune commits a row every few milliseconds, and each dirties the
 * device's model: the builder rebuilds it once a settle time for as long
 * as that lasts. A listing queued meanwhile is made between two rebuilds,
 * not after the tune (it waited for the whole tune: review of 2026-12-03,
 * 3.07 s for a 3 s writer). */
static atomic_int writer_stop;
static void *writer_main(void *arg)
{
    index_state *ix = arg;
    for (int i = 0; !atomic_load(&writer_stop); i++) {
        attn_shape s = A;
        s.sq = 200 + i % 500;
        store_measurement m = row("SLOW-1", s, "fused/pad=1", 30 + i % 7, 0);
        if (index_row_put(ix, &m) != 0)
            break;
        usleep(5000);
    }
    return NULL;
}

static void listing_should_not_wait_for_a_tune_to_end(void)
{
    reset_counts();
    fake_gate_set(1);
    index_state *ix = fake_device("SLOW-1", "slow");
    CHECK_EQ_INT(index_models_start(ix), 0);
    pthread_t th;
    atomic_store(&writer_stop, 0);
    CHECK_EQ_INT(pthread_create(&th, NULL, writer_main, ix), 0);
    usleep(200000); /* the builder is rebuilding */
    index_answer a;
    CHECK_EQ_INT(index_lookup(ix, "SLOW-1", &A2, 0, &a), 0);
    CHECK_EQ_INT(a.listing_pending, 1);
    int made = 0;
    for (int k = 0; k < 100 && !made; k++) { /* up to 5 s, the writer still writing */
        usleep(50000);
        CHECK_EQ_INT(index_lookup(ix, "SLOW-1", &A2, 0, &a), 0);
        made = !a.listing_pending;
    }
    int writing = !atomic_load(&writer_stop);
    atomic_store(&writer_stop, 1);
    pthread_join(th, NULL);
    CHECK_MSG(made && writing, "the listing was %s while rows kept coming",
              made ? "made" : "not made within 5 s");
    CHECK_STR(a.m.tactic, LISTED);
    CHECK_EQ_INT(atomic_load(&calls_main), 0);
    index_free(ix);
}

int main(void)
{
    main_thread = pthread_self();
    alarm(120); /* a listing under the lock deadlocks: fail, do not hang */
    CHECK_EQ_INT(attn_backend_register(&slow_ops), 0);
    CHECK_EQ_INT(attn_backend_register(&quick_ops), 0);
    CHECK_EQ_INT(attn_backend_register(&relock_ops), 0);
    CHECK_EQ_INT(attn_backend_register(&slow_ops), ATTUNE_EINVAL); /* kind taken */
    CHECK(attn_backend("slow") == &slow_ops);
    RUN(cache_should_evict_the_least_recently_used_past_its_entries);
    RUN(cache_should_hold_at_most_its_default_bounds);
    RUN(queue_should_not_repeat_a_listing);
    RUN(lookup_should_not_wait_for_a_slow_listing);
    RUN(calls_off_the_lookup_path_should_list_themselves);
    RUN(lookup_should_list_a_cheap_backend_itself);
    RUN(listing_should_not_wait_for_a_tune_to_end);
    attn_backend_reset();
    CHECK(attn_backend("slow") == NULL);
    CHECK(attn_backend("cpu") != NULL);
    return test_summary();
}
