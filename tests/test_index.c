/* test_index.c -- the daemon's lookup index (lookup/index.c): measured
 * answers only from complete tunes, committed rows taken as the store
 * applies them, nearest/predicted and default answers, and whole-device
 * reloads seen atomically by concurrent readers. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "lookup/dtype_choice.h"
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

/* Fleet rows of another power mode are never served: a 15 W Orin is not
 * answered with a MAXN Orin's winner, only with its rows of 15 W. */
static void fleet_answer_should_keep_to_the_power_mode(void)
{
    attn_device_info info;
    attn_stack st;
    index_state *ix = index_new(NULL);
    CHECK(ix != NULL);
    device(&info, &st, "CPU-L", "l15");
    snprintf(st.power, sizeof st.power, "nvpmodel-2-15W");
    CHECK_EQ_INT(index_device_put(ix, &info, &st, 1), 0);
    device(&info, &st, "CPU-F", "fmaxn");
    snprintf(st.power, sizeof st.power, "nvpmodel-0-MAXN");
    CHECK_EQ_INT(index_device_put(ix, &info, &st, 0), 0);
    store_measurement m = row("CPU-F", "fmaxn", A, "split/acc=f32/pad=1", 10, 0, 100);
    snprintf(m.power, sizeof m.power, "nvpmodel-0-MAXN");
    put(ix, m);
    index_answer a;
    CHECK_EQ_INT(index_lookup(ix, "CPU-L", &A, 0, &a), 0);
    CHECK(a.source != INDEX_FLEET);
    CHECK(index_lookup_in(ix, "CPU-L", &A, 0.5, 0, &a) == 0 && a.source != INDEX_FLEET);
    /* the fleet device's rows of 15 W (an older stack there) answer, stale */
    m = row("CPU-F", "f15", A, "fused/pad=1", 30, 0, 50);
    snprintf(m.power, sizeof m.power, "nvpmodel-2-15W");
    put(ix, m);
    CHECK_EQ_INT(index_lookup(ix, "CPU-L", &A, 0, &a), 0);
    CHECK_EQ_INT(a.source, INDEX_FLEET);
    CHECK_STR(a.m.tactic, "fused/pad=1");
    CHECK_EQ_INT(a.stale, 1);
    /* and the fleet device itself still answers with its own mode's rows */
    CHECK(index_lookup(ix, "CPU-F", &A, 0, &a) == 0 && a.source == INDEX_MEASURED);
    CHECK_STR(a.m.tactic, "split/acc=f32/pad=1");
    index_free(ix);
}

/* A stale or fleet winner is a tactic the backend lists for the shape:
 * split/acc=f16 (an older build's, say) is not listed for f32 data. */
static void stale_and_fleet_answers_should_be_listed_tactics(void)
{
    index_state *ix = one_device("CPU-1", 1);
    put(ix, row("CPU-1", "old", A, "split/acc=f16/pad=1", 10, 1, 50));
    put(ix, row("CPU-1", "old", A, "fused/pad=1", 30, 0, 50));
    index_answer a;
    CHECK_EQ_INT(index_lookup(ix, "CPU-1", &A, 0, &a), 0);
    CHECK(a.source == INDEX_MEASURED && a.stale == 1);
    CHECK_STR(a.m.tactic, "fused/pad=1");
    attn_device_info info;
    attn_stack st;
    device(&info, &st, "CPU-F", "fcur");
    CHECK_EQ_INT(index_device_put(ix, &info, &st, 0), 0);
    put(ix, row("CPU-F", "fcur", A2, "split/acc=f16/pad=1", 10, 0, 60));
    put(ix, row("CPU-F", "fcur", A2, "split/acc=f32/pad=1", 20, 0, 60));
    CHECK_EQ_INT(index_lookup(ix, "CPU-1", &A2, 0, &a), 0);
    CHECK_EQ_INT(a.source, INDEX_FLEET);
    CHECK_STR(a.m.tactic, "split/acc=f32/pad=1");
    /* the fleet device's own answer is its measurement, listed or not */
    CHECK(index_lookup(ix, "CPU-F", &A2, 0, &a) == 0 && a.source == INDEX_MEASURED);
    CHECK_STR(a.m.tactic, "split/acc=f16/pad=1");
    index_free(ix);
}

/* The measured query of one dtype (index_lookup_measured, the cross-dtype
 * query's candidate) applies index_lookup_in's listing rule to a stale
 * winner: split/acc=f16 is not listed for f32 data, so the older stack's
 * listed row answers, as /v1/tactic's measured source does. */
static void measured_query_should_serve_listed_stale_winners(void)
{
    index_state *ix = one_device("CPU-1", 1);
    put(ix, row("CPU-1", "old", A, "split/acc=f16/pad=1", 10, 1, 50));
    put(ix, row("CPU-1", "old", A, "fused/pad=1", 30, 0, 50));
    index_answer a, b;
    index_measured_info info;
    CHECK_EQ_INT(index_lookup_in(ix, "CPU-1", &A, 1e-3, 0, &b), 0);
    CHECK_EQ_INT(index_lookup_measured(ix, "CPU-1", &A, 1e-3, 0, 0, &a, &info), 0);
    CHECK(a.source == INDEX_MEASURED && a.stale == 1);
    CHECK_STR(a.m.tactic, "fused/pad=1");
    CHECK_STR(a.m.tactic, b.m.tactic);
    /* nothing listed runs: no measured answer, not the unlisted one */
    put(ix, row("CPU-1", "old", A, "fused/pad=1", NAN, 0, 50));
    CHECK_EQ_INT(index_lookup_measured(ix, "CPU-1", &A, 1e-3, 0, 0, &a, &info),
                 ATTUNE_ENOTFOUND);
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

/* ---- the cross-dtype question (lookup/dtype_choice.h, issue 30 item 3) */

/* A complete tune of A's sizes in dtype t on dev: a fast and a slow
 * tactic, the fast one marked; errors err (rel_err) and src (e4m3's
 * src_rel_err, NaN for none). */
static void tune_in(index_state *ix, const char *dev, attn_dtype t, double fast_us, double err,
                    double src)
{
    attn_shape s = A;
    s.dtype = t;
    store_measurement f = row(dev, "cur", s, "fused/pad=1", fast_us, 1, 100);
    store_measurement g = row(dev, "cur", s, "split/acc=f32/pad=1", fast_us * 3, 0, 100);
    f.rel_err = g.rel_err = err;
    f.src_rel_err = g.src_rel_err = src;
    put(ix, f);
    put(ix, g);
}

static const dtype_candidate *cand(const dtype_choice *c, attn_dtype t)
{
    for (int i = 0; i < c->n; i++)
        if (c->c[i].dtype == t)
            return &c->c[i];
    return NULL;
}

static void dtype_sets_should_parse_any_and_lists(void)
{
    unsigned set = 0;
    char err[ATTUNE_ERRLEN], buf[64];
    CHECK(dtype_set_text("any") && dtype_set_text("bf16,e4m3") && !dtype_set_text("e4m3"));
    CHECK(!dtype_set_text(NULL));
    CHECK_EQ_INT(dtype_set_parse("any", &set, err, sizeof err), 0);
    CHECK_STR(dtype_set_str(set, buf, sizeof buf), "f16,bf16,f32,e4m3");
    CHECK_EQ_INT(dtype_set_parse("e4m3,bf16", &set, err, sizeof err), 0);
    CHECK_EQ_INT(set, (1u << ATTN_BF16) | (1u << ATTN_E4M3));
    CHECK_STR(dtype_set_str(set, buf, sizeof buf), "bf16,e4m3");
    CHECK_EQ_INT(dtype_set_parse("e4m3", &set, err, sizeof err), 0);
    CHECK_EQ_INT(set, 1u << ATTN_E4M3);
    CHECK_EQ_INT(dtype_set_parse("bf16,fp8", &set, err, sizeof err), ATTUNE_EINVAL);
    CHECK(strstr(err, "'fp8'") != NULL && strstr(err, "e4m3") != NULL);
    CHECK_EQ_INT(dtype_set_parse("bf16,bf16", &set, err, sizeof err), ATTUNE_EINVAL);
    CHECK_EQ_INT(dtype_set_parse("bf16,", &set, err, sizeof err), ATTUNE_EINVAL);
    CHECK_EQ_INT(dtype_set_parse("", &set, err, sizeof err), ATTUNE_EINVAL);
}

/* A bf16 tune at 20 us with error 3e-3 and a faster e4m3 one (12 us) whose
 * error against its stored inputs is 0.02 and against the bf16 source
 * 0.045: the answer flips with max_err around 0.045. */
static void dtype_choice_should_take_the_fastest_within_the_bound(void)
{
    index_state *ix = one_device("CPU-1", 1);
    tune_in(ix, "CPU-1", ATTN_BF16, 20, 3e-3, NAN);
    tune_in(ix, "CPU-1", ATTN_E4M3, 12, 0.02, 0.045);
    const unsigned both = (1u << ATTN_BF16) | (1u << ATTN_E4M3);
    dtype_choice *c = malloc(sizeof *c);
    CHECK_EQ_INT(dtype_choose(ix, "cpu", &A, both, 0.05, 0, c), 0);
    CHECK(c->chosen >= 0 && c->c[c->chosen].dtype == ATTN_E4M3);
    const dtype_candidate *e = cand(c, ATTN_E4M3), *b = cand(c, ATTN_BF16);
    CHECK(e != NULL && e->verdict == DTYPE_CHOSEN && e->err == 0.045);
    CHECK(e != NULL && strcmp(e->ans.m.tactic, "fused/pad=1") == 0 && e->ans.m.time_us == 12);
    CHECK_STR(e->key, "b1.hq4.hkv2.sq24.skv40.d16.e4m3.nc");
    CHECK(b != NULL && b->verdict == DTYPE_SLOWER && b->err == 3e-3);
    CHECK(b != NULL && strstr(b->why, "slower") != NULL && strstr(b->why, "12 us") != NULL);
    size_t len = 0;
    char *json = dtype_choice_json(c, 0, &len);
    CHECK(json != NULL && strlen(json) == len);
    CHECK(json != NULL && strstr(json, "\"dtype\":\"e4m3\"") != NULL);
    CHECK(json != NULL && strstr(json, "\"shape\":\"b1.hq4.hkv2.sq24.skv40.d16.e4m3.nc\"") != NULL);
    CHECK(json != NULL && strstr(json, "\"err\":0.045") != NULL);
    CHECK(json != NULL && strstr(json, "\"src_rel_err\":0.045") != NULL);
    CHECK(json != NULL && strstr(json, "\"verdict\":\"slower\"") != NULL);
    CHECK(json != NULL && strstr(json, "\"dtypes\":\"bf16,e4m3\"") != NULL);
    free(json);

    /* 0.044: the e4m3 rows' source error is over, bf16 answers */
    CHECK_EQ_INT(dtype_choose(ix, "cpu", &A, both, 0.044, 0, c), 0);
    CHECK(c->chosen >= 0 && c->c[c->chosen].dtype == ATTN_BF16);
    e = cand(c, ATTN_E4M3);
    CHECK(e != NULL && e->verdict == DTYPE_OVER && e->err == 0.045);
    CHECK(e != NULL && strstr(e->why, "0.045") != NULL && strstr(e->why, "over max_err") != NULL);
    /* the e4m3 rows' own rel_err (0.02) is not what counts: 0.03 refuses them */
    CHECK_EQ_INT(dtype_choose(ix, "cpu", &A, both, 0.03, 0, c), 0);
    CHECK(c->chosen >= 0 && c->c[c->chosen].dtype == ATTN_BF16);

    /* below both: nothing, each dtype says why */
    CHECK_EQ_INT(dtype_choose(ix, "cpu", &A, both, 1e-3, 0, c), 0);
    CHECK_EQ_INT(c->chosen, -1);
    CHECK(cand(c, ATTN_BF16)->verdict == DTYPE_OVER && cand(c, ATTN_BF16)->err == 3e-3);
    char why[2048];
    dtype_choice_refusal(c, why, sizeof why);
    CHECK_MSG(strstr(why, "no dtype of bf16,e4m3 within max_err=0.001") != NULL &&
                  strstr(why, "b1.hq4.hkv2.sq24.skv40.d16.*.nc") != NULL &&
                  strstr(why, "bf16: ") != NULL && strstr(why, "e4m3: ") != NULL,
              "%s", why);
    json = dtype_choice_json(c, 0, NULL);
    CHECK(json != NULL && strstr(json, "\"error\":\"no dtype of") != NULL &&
          strstr(json, "\"tactic\":null") != NULL);
    free(json);

    /* any: f16 and f32 not measured */
    CHECK_EQ_INT(dtype_choose(ix, "cpu", &A, (1u << ATTN_NDTYPES) - 1, 0.05, 0, c), 0);
    CHECK_EQ_INT(c->n, 4);
    CHECK(c->chosen >= 0 && c->c[c->chosen].dtype == ATTN_E4M3);
    CHECK(cand(c, ATTN_F16)->verdict == DTYPE_UNMEASURED &&
          cand(c, ATTN_F32)->verdict == DTYPE_UNMEASURED);
    CHECK(strstr(cand(c, ATTN_F16)->why, "b1.hq4.hkv2.sq24.skv40.d16.f16.nc is not measured") !=
          NULL);
    /* a faster f16 tune within the bound takes it */
    tune_in(ix, "CPU-1", ATTN_F16, 9, 4e-4, NAN);
    CHECK_EQ_INT(dtype_choose(ix, "cpu", &A, (1u << ATTN_NDTYPES) - 1, 0.05, 0, c), 0);
    CHECK(c->chosen >= 0 && c->c[c->chosen].dtype == ATTN_F16);
    /* variants: only split's rows (3x the fused times): bf16 60, e4m3 36 */
    variant_set vs = 1u << ATTN_SPLIT;
    CHECK_EQ_INT(dtype_choose(ix, "cpu", &A, both, 0.05, vs, c), 0);
    CHECK(c->chosen >= 0 && c->c[c->chosen].dtype == ATTN_E4M3 &&
          strcmp(c->c[c->chosen].ans.m.tactic, "split/acc=f32/pad=1") == 0);
    /* bad bounds, unknown devices */
    CHECK_EQ_INT(dtype_choose(ix, "cpu", &A, both, 0, 0, c), ATTUNE_EINVAL);
    CHECK_EQ_INT(dtype_choose(ix, "cpu", &A, both, 1.5, 0, c), ATTUNE_EINVAL);
    CHECK_EQ_INT(dtype_choose(ix, "cpu", &A, 0, 0.05, 0, c), ATTUNE_EINVAL);
    CHECK_EQ_INT(dtype_choose(ix, "GPU-nope", &A, both, 0.05, 0, c), ATTUNE_ENODEV);
    free(c);
    index_free(ix);
}

/* e4m3 rows without a source error (a backend without reference_source)
 * are refused as such; a tune in flight is not measured; a GPU without
 * FP8 tensor cores cannot run e4m3 at all. */
static void dtype_choice_should_say_why_a_dtype_is_refused(void)
{
    index_state *ix = one_device("CPU-1", 1);
    tune_in(ix, "CPU-1", ATTN_BF16, 20, 3e-3, NAN);
    tune_in(ix, "CPU-1", ATTN_E4M3, 12, 0.02, NAN);
    const unsigned both = (1u << ATTN_BF16) | (1u << ATTN_E4M3);
    dtype_choice *c = malloc(sizeof *c);
    CHECK_EQ_INT(dtype_choose(ix, "cpu", &A, both, 0.5, 0, c), 0);
    CHECK(c->chosen >= 0 && c->c[c->chosen].dtype == ATTN_BF16);
    CHECK(cand(c, ATTN_E4M3)->verdict == DTYPE_NO_SOURCE);
    CHECK(strstr(cand(c, ATTN_E4M3)->why, "without an error against its bf16 source") != NULL);
    /* f32 rows of a tune in flight (no mark) */
    attn_shape f = A;
    put(ix, row("CPU-1", "cur", f, "fused/pad=1", 1, 0, 100));
    CHECK_EQ_INT(dtype_choose(ix, "cpu", &A, (1u << ATTN_F32) | both, 0.5, 0, c), 0);
    CHECK(c->chosen >= 0 && c->c[c->chosen].dtype == ATTN_BF16);
    CHECK(cand(c, ATTN_F32)->verdict == DTYPE_UNMEASURED);
    CHECK(strstr(cand(c, ATTN_F32)->why, "no complete tune") != NULL);
    index_free(ix);

    /* an Orin (sm_87) known from a table: e4m3 is refused before any row */
    attn_device_info info;
    attn_stack st;
    device(&info, &st, "GPU-orin", "cur");
    snprintf(info.name, sizeof info.name, "Orin");
    snprintf(info.kind, sizeof info.kind, "cuda");
    info.cc_major = 8;
    info.cc_minor = 7;
    ix = index_new(NULL);
    CHECK_EQ_INT(index_device_put(ix, &info, &st, 0), 0);
    tune_in(ix, "GPU-orin", ATTN_BF16, 20, 3e-3, NAN);
    CHECK_EQ_INT(dtype_choose(ix, "GPU-orin", &A, both, 0.5, 0, c), 0);
    CHECK(c->chosen >= 0 && c->c[c->chosen].dtype == ATTN_BF16);
    const dtype_candidate *e = cand(c, ATTN_E4M3);
    CHECK(e != NULL && e->verdict == DTYPE_UNSUPPORTED);
    CHECK_MSG(e != NULL && strstr(e->why, "compute capability 8.7") != NULL &&
                  strstr(e->why, "no FP8 tensor cores") != NULL,
              "%s", e ? e->why : "");
    /* an H100-class part (9.0) runs it: not measured, not unsupported */
    info.cc_major = 9;
    info.cc_minor = 0;
    snprintf(info.id, sizeof info.id, "GPU-h");
    CHECK_EQ_INT(index_device_put(ix, &info, &st, 0), 0);
    CHECK_EQ_INT(dtype_choose(ix, "GPU-h", &A, both, 0.5, 0, c), 0);
    CHECK(cand(c, ATTN_E4M3)->verdict == DTYPE_UNMEASURED);
    free(c);
    index_free(ix);
}

static pin pin_of(pin_action a, const char *tactic, const char *shape, int64_t id)
{
    pin p;
    memset(&p, 0, sizeof p);
    p.id = id;
    p.action = a;
    snprintf(p.tactic, sizeof p.tactic, "%s", tactic);
    snprintf(p.shape, sizeof p.shape, "%s", shape);
    snprintf(p.reason, sizeof p.reason, "test");
    snprintf(p.author, sizeof p.author, "tester");
    return p;
}

/* A force pin makes its tactic a dtype's only candidate (within the bound
 * or refused as pinned); an exclusion leaves its tactics out. */
static void dtype_choice_should_honour_pins(void)
{
    index_state *ix = one_device("CPU-1", 1);
    tune_in(ix, "CPU-1", ATTN_BF16, 20, 3e-3, NAN);
    tune_in(ix, "CPU-1", ATTN_E4M3, 12, 0.02, 0.045);
    pin *ps = calloc(2, sizeof *ps);
    ps[0] = pin_of(PIN_FORCE, "split/acc=f32/pad=1", "b1.hq4.hkv2.sq24.skv40.d16.e4m3.nc", 7);
    ps[1] = pin_of(PIN_EXCLUDE, "fused", "b1.hq4.hkv2.sq24.skv40.d16.bf16.nc", 8);
    CHECK_EQ_INT(index_pins_set(ix, ps, 2), 0);
    const unsigned both = (1u << ATTN_BF16) | (1u << ATTN_E4M3);
    dtype_choice *c = malloc(sizeof *c);
    CHECK_EQ_INT(dtype_choose(ix, "cpu", &A, both, 0.05, 0, c), 0);
    const dtype_candidate *e = cand(c, ATTN_E4M3), *b = cand(c, ATTN_BF16);
    CHECK(c->chosen >= 0 && c->c[c->chosen].dtype == ATTN_E4M3);
    CHECK(e->ans.source == INDEX_PINNED && strcmp(e->ans.m.tactic, "split/acc=f32/pad=1") == 0 &&
          e->ans.m.time_us == 36);
    CHECK(b->verdict == DTYPE_SLOWER && strcmp(b->ans.m.tactic, "split/acc=f32/pad=1") == 0 &&
          b->ans.m.time_us == 60);
    CHECK_EQ_INT(dtype_choose(ix, "cpu", &A, both, 0.04, 0, c), 0);
    CHECK(c->chosen >= 0 && c->c[c->chosen].dtype == ATTN_BF16);
    e = cand(c, ATTN_E4M3);
    CHECK(e->verdict == DTYPE_PINNED && e->err == 0.045);
    CHECK_MSG(strstr(e->why, "pin 7 forces split/acc=f32/pad=1") != NULL, "%s", e->why);
    free(c);
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

/* index_generation (attuned's kept answers): every change a lookup could
 * see moves it before the change shows; a lookup that only reads leaves
 * it, so an answer kept for a generation is asked for again. */
static void generation_should_move_with_every_change(void)
{
    index_state *ix = one_device("CPU-1", 1);
    index_answer a;
    uint64_t g = index_generation(ix), now;
#define MOVED(what)                                                         \
    do {                                                                    \
        now = index_generation(ix);                                         \
        CHECK_MSG(now > g, "%s: generation %llu -> %llu", what,             \
                  (unsigned long long)g, (unsigned long long)now);          \
        g = now;                                                            \
    } while (0)
    put(ix, row("CPU-1", "cur", A, "fused/pad=1", 30, 0, 100));
    MOVED("a row");
    put(ix, row("CPU-1", "cur", A, "split/acc=f32/pad=1", 20, 1, 101));
    MOVED("a winner mark");
    CHECK(index_lookup(ix, "CPU-1", &A, 0, &a) == 0 && a.source == INDEX_MEASURED);
    CHECK(index_lookup(ix, "cpu", &A, 0, &a) == 0 && a.source == INDEX_MEASURED);
    CHECK_EQ_INT(index_generation(ix), g); /* answered from what it held: no change */
    attn_device_info info;
    attn_stack st;
    device(&info, &st, "CPU-1", "next");
    CHECK_EQ_INT(index_device_put(ix, &info, &st, 1), 0);
    MOVED("a new stack");
    CHECK(index_lookup(ix, "CPU-1", &A, 0, &a) == 0 && a.stale);
    device(&info, &st, "CPU-2", "cur");
    CHECK_EQ_INT(index_device_put(ix, &info, &st, 0), 0);
    MOVED("a new device");
    store_measurement *m = malloc(sizeof *m);
    *m = row("CPU-2", "cur", A, "fused/pad=1", 30, 1, 100);
    CHECK_EQ_INT(index_device_load(ix, "CPU-2", m, 1), 0);
    MOVED("a reload");
    pin *ps = calloc(1, sizeof *ps);
    ps[0] = pin_of(PIN_EXCLUDE, "split", "", 1);
    CHECK_EQ_INT(index_pins_set(ix, ps, 1), 0);
    MOVED("pins");
    CHECK(index_lookup(ix, "CPU-1", &A, 0, &a) == 0 &&
          strcmp(a.m.tactic, "split/acc=f32/pad=1") != 0);
    CHECK_EQ_INT(index_pins_set(ix, NULL, 0), 0);
    MOVED("no pins");
    /* a shape nobody measured: the CPU's listing is made for it (by the
     * lookup itself, no builder running), which changes what the next
     * lookup answers */
    CHECK_EQ_INT(index_lookup(ix, "CPU-1", &Z, 0, &a), 0);
    MOVED("a listing made");
    CHECK_EQ_INT(index_lookup(ix, "CPU-1", &Z, 0, &a), 0);
    CHECK_EQ_INT(index_generation(ix), g); /* listed already: no change */
    CHECK_EQ_INT(index_models_start(ix), 0);
    MOVED("models built");
#undef MOVED
    index_free(ix);
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

/* Host specs of a file ("cpu", an ordinal: index_set_host_specs) name a
 * device some host measured before a pulled fleet aggregate of its model
 * (FLEET-<hash>), whatever their order; the aggregate only when nothing
 * else matches. */
static void host_specs_should_prefer_a_host_device_to_a_fleet_aggregate(void)
{
    index_state *ix = one_device("FLEET-0123456789abcdef", 0); /* first, as the newest would be */
    index_set_host_specs(ix, 1);
    index_device_view v;
    CHECK_EQ_INT(index_device_find(ix, "cpu", &v), 0); /* only the aggregate: it answers */
    CHECK_STR(v.info.id, "FLEET-0123456789abcdef");
    attn_device_info info;
    attn_stack st;
    device(&info, &st, "CPU-924137ba40e768d8", "cur");
    CHECK_EQ_INT(index_device_put(ix, &info, &st, 0), 0);
    CHECK_EQ_INT(index_device_find(ix, "cpu", &v), 0);
    CHECK_STR(v.info.id, "CPU-924137ba40e768d8");
    CHECK_EQ_INT(index_device_find(ix, "CPU", &v), 0);
    CHECK_STR(v.info.id, "CPU-924137ba40e768d8");
    /* an id still names the aggregate itself */
    CHECK_EQ_INT(index_device_find(ix, "FLEET-0123456789abcdef", &v), 0);
    CHECK_STR(v.info.id, "FLEET-0123456789abcdef");
    /* ordinals alike: CUDA devices of a file carry none (index -1) */
    device(&info, &st, "FLEET-00000000000000aa", "cur");
    snprintf(info.kind, sizeof info.kind, "cuda");
    CHECK_EQ_INT(index_device_put(ix, &info, &st, 0), 0);
    device(&info, &st, "GPU-aaaaaaaa-1111-2222-3333-444444444444", "cur");
    snprintf(info.kind, sizeof info.kind, "cuda");
    CHECK_EQ_INT(index_device_put(ix, &info, &st, 0), 0);
    CHECK_EQ_INT(index_device_find(ix, "0", &v), 0);
    CHECK_STR(v.info.id, "GPU-aaaaaaaa-1111-2222-3333-444444444444");
    CHECK_EQ_INT(index_device_find(ix, "1", &v), 0);
    CHECK_STR(v.info.id, "FLEET-00000000000000aa");
    CHECK_EQ_INT(index_device_find(ix, "2", &v), ATTUNE_ENODEV);
    index_free(ix);
}

int main(void)
{
    RUN(host_specs_should_prefer_a_host_device_to_a_fleet_aggregate);
    RUN(lookup_should_answer_measured_only_from_a_complete_tune);
    RUN(lookup_should_take_fleet_rows_whole);
    RUN(lookup_should_fall_back_to_a_complete_older_stack);
    RUN(fleet_answer_should_keep_to_the_power_mode);
    RUN(stale_and_fleet_answers_should_be_listed_tactics);
    RUN(measured_query_should_serve_listed_stale_winners);
    RUN(row_put_should_apply_rows_as_the_store_does);
    RUN(lookup_should_answer_nearest_or_predicted_from_other_shapes);
    RUN(lookup_should_answer_default_when_nothing_is_known);
    RUN(dtype_sets_should_parse_any_and_lists);
    RUN(dtype_choice_should_take_the_fastest_within_the_bound);
    RUN(dtype_choice_should_say_why_a_dtype_is_refused);
    RUN(dtype_choice_should_honour_pins);
    RUN(models_should_be_built_off_the_lookup_path);
    RUN(reload_should_be_atomic_under_concurrent_readers);
    RUN(generation_should_move_with_every_change);
    return test_summary();
}
