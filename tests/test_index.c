/* test_index.c -- the daemon's lookup index (lookup/index.c): measured
 * answers only from complete tunes, committed rows taken as the store
 * applies them, nearest/predicted and default answers, and whole-device
 * reloads seen atomically by concurrent readers. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "lookup/index.h"
#include "test.h"

static const attn_shape A = {1, 4, 2, 24, 40, 16, ATTN_F32, 0};
static const attn_shape A2 = {2, 4, 2, 24, 40, 16, ATTN_F32, 0}; /* A's neighbour */
static const attn_shape Z = {1, 8, 8, 512, 512, 128, ATTN_F16, 1}; /* far from A */

static void device(attn_device_info *info, attn_stack *st, const char *id, const char *stack)
{
    memset(info, 0, sizeof *info);
    memset(st, 0, sizeof *st);
    snprintf(info->id, sizeof info->id, "%s", id);
    snprintf(info->name, sizeof info->name, "Test CPU");
    snprintf(info->kind, sizeof info->kind, "cpu");
    info->index = -1;
    snprintf(st->id, sizeof st->id, "%s", stack);
}

static store_measurement row(const char *dev, const char *stack, attn_shape s,
                             const char *tactic, double us, int incumbent, int64_t at)
{
    store_measurement m;
    memset(&m, 0, sizeof m);
    snprintf(m.device_id, sizeof m.device_id, "%s", dev);
    snprintf(m.stack_id, sizeof m.stack_id, "%s", stack);
    m.shape = s;
    snprintf(m.tactic, sizeof m.tactic, "%s", tactic);
    m.status = STORE_OK;
    m.time_us = m.time_us_min = m.time_us_max = us;
    m.time_us_copies = NAN;
    m.n = 10;
    m.rel_err = 1e-6;
    m.max_abs_err = 1e-6;
    m.err_ratio = NAN;
    m.incumbent = incumbent;
    m.taken_at = at;
    return m;
}

/* A fresh index holding one device (local or fleet) on stack "cur". */
static index_state *one_device(const char *id, int local)
{
    attn_device_info info;
    attn_stack st;
    device(&info, &st, id, "cur");
    index_state *ix = index_new(NULL);
    CHECK(ix != NULL);
    CHECK_EQ_INT(index_device_put(ix, &info, &st, local), 0);
    return ix;
}

static void put(index_state *ix, store_measurement m)
{
    CHECK_EQ_INT(index_row_put(ix, &m), 0);
}

static void lookup_should_answer_measured_only_from_a_complete_tune(void)
{
    index_state *ix = one_device("CPU-1", 1);
    index_answer a;
    /* a tune in flight: two rows committed, no winner mark yet */
    put(ix, row("CPU-1", "cur", A, "fused/pad=1", 30, 0, 100));
    put(ix, row("CPU-1", "cur", A, "split/acc=f32/pad=1", 20, 0, 101));
    CHECK_EQ_INT(index_lookup(ix, "CPU-1", &A, 0, &a), 0);
    CHECK(a.source != INDEX_MEASURED);
    CHECK_EQ_INT(a.own_rows, 2);
    CHECK(index_lookup(ix, "CPU-1", &A, 0.5, &a) == 0 && a.source != INDEX_MEASURED);
    /* the rest, then the mark the tuner sets last */
    put(ix, row("CPU-1", "cur", A, "folded/acc=f32/pad=1", 25, 0, 102));
    CHECK(index_lookup(ix, "CPU-1", &A, 0, &a) == 0 && a.source != INDEX_MEASURED);
    put(ix, row("CPU-1", "cur", A, "split/acc=f32/pad=1", 20, 1, 101));
    CHECK_EQ_INT(index_lookup(ix, "CPU-1", &A, 0, &a), 0);
    CHECK_EQ_INT(a.source, INDEX_MEASURED);
    CHECK_STR(a.m.tactic, "split/acc=f32/pad=1");
    CHECK_EQ_INT(a.stale, 0);
    index_free(ix);
}

static void lookup_should_take_fleet_rows_whole(void)
{
    /* an imported table carries no marks and is whole by construction */
    index_state *ix = one_device("CPU-fleet", 0);
    put(ix, row("CPU-fleet", "cur", A, "fused/pad=1", 30, 0, 100));
    put(ix, row("CPU-fleet", "cur", A, "split/acc=f32/pad=1", 20, 0, 100));
    index_answer a;
    CHECK_EQ_INT(index_lookup(ix, "CPU-fleet", &A, 0, &a), 0);
    CHECK_EQ_INT(a.source, INDEX_MEASURED);
    CHECK_STR(a.m.tactic, "split/acc=f32/pad=1");
    index_free(ix);
}

static void lookup_should_fall_back_to_a_complete_older_stack(void)
{
    index_state *ix = one_device("CPU-1", 1);
    put(ix, row("CPU-1", "old", A, "fused/pad=1", 30, 1, 50));
    /* a re-tune on the current stack in flight: the old tune answers, stale */
    put(ix, row("CPU-1", "cur", A, "split/acc=f32/pad=1", 10, 0, 100));
    index_answer a;
    CHECK_EQ_INT(index_lookup(ix, "CPU-1", &A, 0, &a), 0);
    CHECK_EQ_INT(a.source, INDEX_MEASURED);
    CHECK_STR(a.m.tactic, "fused/pad=1");
    CHECK_STR(a.m.stack_id, "old");
    CHECK_EQ_INT(a.stale, 1);
    put(ix, row("CPU-1", "cur", A, "split/acc=f32/pad=1", 10, 1, 100));
    CHECK(index_lookup(ix, "CPU-1", &A, 0, &a) == 0 && a.stale == 0);
    CHECK_STR(a.m.tactic, "split/acc=f32/pad=1");
    index_free(ix);
}

/* Rows as the store applies them: a replaced row keeps its mark, a marked
 * row takes the mark from its stack's other rows, err_ratio over the
 * stack's ok rows, and the fingerprint sums follow. */
static void row_put_should_apply_rows_as_the_store_does(void)
{
    index_state *ix = one_device("CPU-1", 1);
    store_measurement a = row("CPU-1", "cur", A, "fused/pad=1", 30, 1, 100);
    store_measurement b = row("CPU-1", "cur", A, "split/acc=f32/pad=1", 20, 0, 101);
    store_measurement c = row("CPU-1", "old", A, "split/acc=f32/pad=1", 40, 1, 90);
    a.rel_err = 2e-6;
    b.rel_err = 4e-6;
    put(ix, a);
    put(ix, b);
    put(ix, c);
    a.incumbent = 0; /* re-measured: the put does not touch the mark */
    a.taken_at = 110;
    put(ix, a);
    store_measurement *m = NULL;
    int n = 0;
    char stack[24];
    CHECK_EQ_INT(index_results(ix, "CPU-1", &A, &m, &n, stack), 0);
    CHECK_EQ_INT(n, 3);
    CHECK_STR(stack, "cur");
    for (int i = 0; i < n; i++) {
        if (strcmp(m[i].stack_id, "cur") == 0 && strcmp(m[i].tactic, "fused/pad=1") == 0) {
            CHECK_EQ_INT(m[i].incumbent, 1);
            CHECK_EQ_INT(m[i].taken_at, 110);
            CHECK_NEAR(m[i].err_ratio, 1.0, 1e-12);
        } else if (strcmp(m[i].stack_id, "cur") == 0) {
            CHECK_NEAR(m[i].err_ratio, 2.0, 1e-12);
        }
    }
    free(m);
    index_device_view v;
    CHECK_EQ_INT(index_device_find(ix, "CPU-1", &v), 0);
    CHECK_EQ_INT(v.nmeasurements, 3);
    CHECK_EQ_INT(v.taken_sum, 110 + 101 + 90);
    CHECK_EQ_INT(v.marks, 2);
    /* the mark moves to b: a loses it, the other stack keeps its own */
    b.incumbent = 1;
    put(ix, b);
    CHECK_EQ_INT(index_device_find(ix, "CPU-1", &v), 0);
    CHECK_EQ_INT(v.marks, 2);
    CHECK_EQ_INT(index_results(ix, "CPU-1", &A, &m, &n, stack), 0);
    for (int i = 0; i < n; i++)
        if (strcmp(m[i].stack_id, "cur") == 0)
            CHECK_EQ_INT(m[i].incumbent, strcmp(m[i].tactic, "split/acc=f32/pad=1") == 0);
    free(m);
    store_measurement nodev = row("CPU-none", "cur", A, "fused/pad=1", 1, 0, 1);
    CHECK_EQ_INT(index_row_put(ix, &nodev), ATTUNE_ENODEV);
    index_free(ix);
}

static void lookup_should_answer_nearest_or_predicted_from_other_shapes(void)
{
    index_state *ix = one_device("CPU-1", 1);
    static const char *const tactics[] = {"fused/pad=1", "split/acc=f32/pad=1",
                                          "folded/acc=f32/pad=1"};
    for (int i = 0; i < 3; i++)
        put(ix, row("CPU-1", "cur", A, tactics[i], 10.0 * (i + 1), i == 1, 100));
    index_answer a;
    CHECK_EQ_INT(index_lookup(ix, "CPU-1", &A2, 0, &a), 0);
    CHECK_MSG(a.source == INDEX_NEAREST || a.source == INDEX_PREDICTED, "source %s",
              index_source_name(a.source));
    char key[ATTN_SHAPE_KEY_MAX];
    attn_shape_key(&A, key, sizeof key);
    CHECK_STR(a.from_key, key);
    CHECK(a.distance > 0);
    CHECK(a.nfrom >= 1);
    CHECK_EQ_INT(a.own_rows, 0);
    /* whatever the answer, it is a tactic the backend lists for A2 */
    attn_tactic t;
    CHECK_EQ_INT(attn_tactic_parse(a.m.tactic, &t, NULL, 0), 0);
    index_free(ix);
}

/* With the model builder (attuned's), a lookup never builds a model: the
 * one built at start answers at once, a write keeps it answering while
 * the builder rebuilds, and the rebuilt one follows the new rows. */
static void models_should_be_built_off_the_lookup_path(void)
{
    index_state *ix = one_device("CPU-1", 1);
    static const char *const tactics[] = {"fused/pad=1", "split/acc=f32/pad=1",
                                          "folded/acc=f32/pad=1"};
    for (int i = 0; i < 3; i++)
        put(ix, row("CPU-1", "cur", A, tactics[i], 10.0 * (i + 1), i == 0, 100));
    CHECK_EQ_INT(index_models_start(ix), 0);
    index_answer a;
    CHECK_EQ_INT(index_lookup(ix, "CPU-1", &A2, 0, &a), 0);
    CHECK_MSG(a.source == INDEX_NEAREST || a.source == INDEX_PREDICTED, "at start: %s",
              index_source_name(a.source));
    CHECK_STR(a.m.tactic, tactics[0]);
    /* folded becomes 30x faster than fused: the previous model answers
     * until the builder has swapped in the new one */
    put(ix, row("CPU-1", "cur", A, tactics[2], 1.0 / 3, 0, 200));
    CHECK_EQ_INT(index_lookup(ix, "CPU-1", &A2, 0, &a), 0);
    CHECK_MSG(a.source == INDEX_NEAREST || a.source == INDEX_PREDICTED, "after a write: %s",
              index_source_name(a.source));
    int followed = 0;
    for (int i = 0; i < 500 && !followed; i++) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL); /* a poll interval, not an ordering */
        CHECK_EQ_INT(index_lookup(ix, "CPU-1", &A2, 0, &a), 0);
        followed = strcmp(a.m.tactic, tactics[2]) == 0;
    }
    CHECK_MSG(followed, "the rebuilt model answers %s, not the new fastest", a.m.tactic);
    index_free(ix); /* stops the builder */
}

static void lookup_should_answer_default_when_nothing_is_known(void)
{
    index_state *ix = one_device("CPU-1", 1);
    index_answer a;
    CHECK_EQ_INT(index_lookup(ix, "CPU-1", &Z, 0, &a), 0);
    CHECK_EQ_INT(a.source, INDEX_DEFAULT);
    CHECK_STR(a.m.tactic, INDEX_DEFAULT_TACTIC);
    CHECK(isnan(a.m.time_us));
    CHECK_EQ_INT(index_lookup(ix, "GPU-nope", &Z, 0, &a), ATTUNE_ENODEV);
    /* the lookup resolves the spec itself and hands back the id and key */
    CHECK_EQ_INT(index_lookup(ix, "cpu", &Z, 0, &a), 0);
    CHECK_STR(a.device_id, "CPU-1");
    CHECK_EQ_INT(a.local, 1);
    CHECK_STR(a.key, "b1.hq8.hkv8.sq512.skv512.d128.f16.c");
    index_device_view v;
    CHECK_EQ_INT(index_device_find(ix, "cpu", &v), 0);
    CHECK_STR(v.info.id, "CPU-1");
    CHECK_EQ_INT(index_device_find(ix, "test cpu", &v), 0); /* names: any case */
    CHECK_EQ_INT(index_device_find(ix, "cpu-1", &v), ATTUNE_ENODEV); /* ids: exact */
    index_free(ix);
}

/* ---- reload atomicity: readers never see half of a device load */

#define GEN_SHAPES 64
#define GEN_TACTICS 4

typedef struct reload_ctx {
    index_state *ix;
    atomic_int stop;
    atomic_long lookups;
    atomic_int torn;      /* a reader saw rows of two generations at once */
} reload_ctx;

static attn_shape gen_shape(int i)
{
    attn_shape s = {1, 4, 2, 8 + i, 40, 16, ATTN_F32, 0};
    return s;
}

/* Every row of generation g: taken_at = g everywhere, and the winner is
 * the tactic g % GEN_TACTICS (fastest and marked). */
static store_measurement *generation(int g)
{
    static const char *const tactics[GEN_TACTICS] = {
        "fused/pad=1", "split/acc=f32/pad=1", "folded/acc=f32/pad=1",
        "split_repeat/acc=f32/pad=1"};
    store_measurement *m = malloc(GEN_SHAPES * GEN_TACTICS * sizeof *m);
    for (int i = 0; i < GEN_SHAPES; i++)
        for (int k = 0; k < GEN_TACTICS; k++) {
            int win = k == g % GEN_TACTICS;
            m[i * GEN_TACTICS + k] =
                row("CPU-1", "cur", gen_shape(i), tactics[k], win ? 5 : 50 + k, win, g);
        }
    return m;
}

static void *reader(void *arg)
{
    reload_ctx *c = arg;
    unsigned seed = 1;
    while (!atomic_load(&c->stop)) {
        attn_shape s = gen_shape((int)(rand_r(&seed) % GEN_SHAPES));
        store_measurement *m = NULL;
        int n = 0;
        char stack[24];
        index_device_view v;
        if (index_results(c->ix, "CPU-1", &s, &m, &n, stack) != 0 || n != GEN_TACTICS)
            atomic_store(&c->torn, 1);
        for (int i = 1; i < n; i++)
            if (m[i].taken_at != m[0].taken_at)
                atomic_store(&c->torn, 1);
        index_answer a;
        if (n > 0 && (index_lookup(c->ix, "CPU-1", &s, 0, &a) != 0 ||
                      a.source != INDEX_MEASURED || a.m.time_us != 5))
            atomic_store(&c->torn, 1);
        /* the device's totals are one generation's */
        if (index_device_find(c->ix, "CPU-1", &v) != 0 ||
            v.nmeasurements != GEN_SHAPES * GEN_TACTICS ||
            v.taken_sum % (GEN_SHAPES * GEN_TACTICS) != 0)
            atomic_store(&c->torn, 1);
        free(m);
        atomic_fetch_add(&c->lookups, 1);
    }
    return NULL;
}

static void reload_should_be_atomic_under_concurrent_readers(void)
{
    reload_ctx c = {.ix = one_device("CPU-1", 1)};
    CHECK_EQ_INT(index_device_load(c.ix, "CPU-1", generation(1), GEN_SHAPES * GEN_TACTICS), 0);
    pthread_t th[3];
    for (int i = 0; i < 3; i++)
        CHECK_EQ_INT(pthread_create(&th[i], NULL, reader, &c), 0);
    /* enough swaps that readers overlap many of them, and each swap waits
     * for at least one lookup in between (progress, not a delay) */
    for (int g = 2; g < 150; g++) {
        long before = atomic_load(&c.lookups);
        CHECK_EQ_INT(index_device_load(c.ix, "CPU-1", generation(g), GEN_SHAPES * GEN_TACTICS),
                     0);
        while (atomic_load(&c.lookups) == before)
            sched_yield();
    }
    atomic_store(&c.stop, 1);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    CHECK_EQ_INT(atomic_load(&c.torn), 0);
    CHECK(atomic_load(&c.lookups) >= 148);
    index_free(c.ix);
}

int main(void)
{
    RUN(lookup_should_answer_measured_only_from_a_complete_tune);
    RUN(lookup_should_take_fleet_rows_whole);
    RUN(lookup_should_fall_back_to_a_complete_older_stack);
    RUN(row_put_should_apply_rows_as_the_store_does);
    RUN(lookup_should_answer_nearest_or_predicted_from_other_shapes);
    RUN(lookup_should_answer_default_when_nothing_is_known);
    RUN(models_should_be_built_off_the_lookup_path);
    RUN(reload_should_be_atomic_under_concurrent_readers);
    return test_summary();
}
