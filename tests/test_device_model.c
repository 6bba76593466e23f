/* test_device_model.c -- a GPU model two hosts agree on (issue 27 item 5):
 * the model's memory, model equality and the fleet id, a lookup's fleet
 * answer across two memory figures of one model, and store schema 9's
 * re-keying of pulled fleet devices stored under the old ids. */
#include <inttypes.h>
#include <sqlite3.h>
#include <stdarg.h>

#include "common/hash.h"
#include "db/device_model.h"
#include "db/fleet_pg.h"
#include "db/store.h"
#include "lookup/index.h"
#include "test.h"

static attn_device_info gpu(const char *id, const char *name, int sm, int64_t mem)
{
    attn_device_info d;
    memset(&d, 0, sizeof d);
    snprintf(d.id, sizeof d.id, "%s", id);
    snprintf(d.name, sizeof d.name, "%s", name);
    snprintf(d.kind, sizeof d.kind, "cuda");
    d.index = -1;
    d.cc_major = 9;
    d.sm_count = sm;
    d.memory_mb = mem;
    return d;
}

/* The reported totals of real devices land on the size they are built
 * with; a driver's or ECC's bite stays within one size. */
static void memory_should_round_up_to_the_built_size(void)
{
    static const struct {
        int64_t mb, gib;
    } cases[] = {
        {143771, 144}, {143155, 144},       /* one H200, two drivers (issue 27) */
        {81559, 80},   {40536, 40},         /* H100 80GB, A100 40GB */
        {95830, 94},   {97871, 96},         /* H100 NVL, GH200 */
        {183359, 180}, {24217, 24},         /* B200, RTX 4090 */
        {11264 * 15 / 16, 11}, {12288 * 15 / 16, 12}, /* ECC on: 1/16 less */
        {62841, 64},   {30536, 32}, {15388, 16}, {7620, 8}, /* Jetson Orin modules */
        {24105, 24},   {1, 1},     {1024, 1}, {1025, 2},
        {300 * 1024, 320}, {0, 0}, {-5, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK_MSG(device_model_memory_gib(cases[i].mb) == cases[i].gib,
                  "%" PRId64 " MiB -> %" PRId64 " GiB, want %" PRId64, cases[i].mb,
                  device_model_memory_gib(cases[i].mb), cases[i].gib);
}

static void one_model_should_have_one_id(void)
{
    attn_device_info a = gpu("GPU-a", "NVIDIA H200", 132, 143771);
    attn_device_info b = gpu("GPU-b", "NVIDIA H200", 132, 143155);
    attn_device_info c = gpu("GPU-c", "NVIDIA H200", 132, 97871);  /* another memory */
    attn_device_info e = gpu("GPU-e", "NVIDIA H200", 114, 143771); /* another SM count */
    char ia[32], ib[32], ic[32], ie[32], text[256];
    CHECK(device_model_same(&a, &b) && !device_model_same(&a, &c) && !device_model_same(&a, &e));
    fleet_model_id(&a, ia, sizeof ia);
    fleet_model_id(&b, ib, sizeof ib);
    fleet_model_id(&c, ic, sizeof ic);
    fleet_model_id(&e, ie, sizeof ie);
    CHECK_STR(ia, ib);
    CHECK(strcmp(ia, ic) != 0 && strcmp(ia, ie) != 0);
    device_model_text(&a, text, sizeof text);
    CHECK_STR(text, "NVIDIA H200|cuda|9.0|132|144G");
    /* the id is FNV-1a of that text (docs/fleet.md says so; the server's
     * migration and any other client compute it the same way) */
    char want[32];
    snprintf(want, sizeof want, "FLEET-%016" PRIx64,
             hash_fnv1a64(hash_fnv1a64_init(), text, strlen(text)));
    CHECK_STR(ia, want);
}

/* A local device and a fleet device of its model whose drivers report
 * different totals: the fleet's measurement answers the local lookup; a
 * device of another memory size is another model. */
static void lookup_should_take_the_fleet_of_one_model(void)
{
    attn_shape s = {1, 4, 1, 16, 64, 32, ATTN_F32, 0};
    for (int other = 0; other < 2; other++) {
        index_state *ix = index_new(NULL);
        attn_device_info l, f;
        attn_stack st;
        memset(&st, 0, sizeof st);
        snprintf(st.id, sizeof st.id, "cur");
        memset(&l, 0, sizeof l);
        snprintf(l.id, sizeof l.id, "CPU-L");
        snprintf(l.name, sizeof l.name, "Test CPU");
        snprintf(l.kind, sizeof l.kind, "cpu");
        l.index = -1;
        l.memory_mb = 24105;
        f = l;
        snprintf(f.id, sizeof f.id, "CPU-F");
        f.memory_mb = other ? 15800 : 23821; /* 16 GiB: another model */
        CHECK_EQ_INT(index_device_put(ix, &l, &st, 1), 0);
        CHECK_EQ_INT(index_device_put(ix, &f, &st, 0), 0);
        store_measurement m;
        memset(&m, 0, sizeof m);
        snprintf(m.device_id, sizeof m.device_id, "CPU-F");
        snprintf(m.stack_id, sizeof m.stack_id, "cur");
        m.shape = s;
        snprintf(m.tactic, sizeof m.tactic, "split/acc=f32/pad=1");
        m.status = STORE_OK;
        m.time_us = m.time_us_min = m.time_us_max = 10;
        m.time_us_copies = NAN;
        m.n = 10;
        m.rel_err = m.max_abs_err = 1e-7;
        m.err_ratio = NAN;
        m.taken_at = 100;
        CHECK_EQ_INT(index_row_put(ix, &m), 0);
        index_answer a;
        CHECK_EQ_INT(index_lookup(ix, "CPU-L", &s, 0, &a), 0);
        CHECK_MSG((a.source == INDEX_FLEET) == !other, "memory %" PRId64 ": source %d",
                  f.memory_mb, (int)a.source);
        if (!other)
            CHECK_STR(a.fleet_device, "CPU-F");
        index_free(ix);
    }
}

/* FNV-1a of the text schema 8 keyed a model by: the exact memory. */
static void old_model_id(const attn_device_info *d, char *out, size_t len)
{
    char text[256];
    int n = snprintf(text, sizeof text, "%s|%s|%d.%d|%d|%" PRId64, d->name, d->kind,
                     d->cc_major, d->cc_minor, d->sm_count, d->memory_mb);
    snprintf(out, len, "FLEET-%016" PRIx64,
             hash_fnv1a64(hash_fnv1a64_init(), text, (size_t)n));
}

static int sql(sqlite3 *db, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *q = sqlite3_vmprintf(fmt, ap);
    va_end(ap);
    char *err = NULL;
    int rc = sqlite3_exec(db, q, NULL, NULL, &err);
    if (rc != SQLITE_OK)
        fprintf(stderr, "sql: %s: %s\n", err ? err : "?", q);
    sqlite3_free(err);
    sqlite3_free(q);
    return rc;
}

static void put_row(store *st, const char *dev, const char *stack, const char *tactic,
                    double us, int64_t at)
{
    store_measurement m;
    memset(&m, 0, sizeof m);
    snprintf(m.device_id, sizeof m.device_id, "%s", dev);
    snprintf(m.stack_id, sizeof m.stack_id, "%s", stack);
    attn_shape s = {1, 8, 1, 50, 1018, 64, ATTN_F16, 0};
    m.shape = s;
    snprintf(m.tactic, sizeof m.tactic, "%s", tactic);
    m.status = STORE_OK;
    m.time_us = m.time_us_min = m.time_us_max = us;
    m.time_us_copies = NAN;
    m.n = 3;
    m.rel_err = m.max_abs_err = 1e-4;
    snprintf(m.host, sizeof m.host, "fleet");
    m.taken_at = at;
    CHECK_EQ_INT(store_measurement_put(st, &m), 0);
}

/* A version-8 store holding one H200 model pulled under two old ids (its
 * two memory figures): version 9 keeps one device, the model's id, with
 * the rows of both (a key held by both keeps the newer), and moves a pin. */
static void store_should_rekey_pulled_fleet_devices(void)
{
    char dir[256], path[300], err[256] = "";
    test_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/v8.db", dir);
    attn_device_info a = gpu("", "NVIDIA H200", 132, 143771);
    attn_device_info b = gpu("", "NVIDIA H200", 132, 143155);
    char ida[32], idb[32], want[32];
    old_model_id(&a, ida, sizeof ida);
    old_model_id(&b, idb, sizeof idb);
    fleet_model_id(&a, want, sizeof want);
    CHECK(strcmp(ida, idb) != 0 && strcmp(ida, want) != 0);
    snprintf(a.id, sizeof a.id, "%s", ida);
    snprintf(b.id, sizeof b.id, "%s", idb);
    attn_stack s;
    memset(&s, 0, sizeof s);
    snprintf(s.runtime, sizeof s.runtime, "13.0");
    snprintf(s.attune, sizeof s.attune, "0.1.0");
    attn_stack_finish(&s);
    store *st = NULL;
    CHECK_EQ_INT(store_open(path, 1, &st, err, sizeof err), 0);
    if (st == NULL)
        return;
    CHECK(store_device_put(st, &a, &s) == 0 && store_device_put(st, &b, &s) == 0);
    put_row(st, ida, s.id, "fused/pad=1", 10, 1000);   /* only under a */
    put_row(st, ida, s.id, "split/acc=f32/pad=1", 20, 1000); /* both: b newer */
    put_row(st, idb, s.id, "split/acc=f32/pad=1", 21, 2000);
    put_row(st, idb, s.id, "folded/acc=f32/pad=1", 30, 500); /* only b */
    put_row(st, idb, s.id, "fused/pad=8", 40, 3000);   /* both: a newer */
    put_row(st, ida, s.id, "fused/pad=8", 41, 4000);
    store_close(st);
    sqlite3 *db = NULL;
    CHECK_EQ_INT(sqlite3_open(path, &db), SQLITE_OK);
    CHECK_EQ_INT(sql(db, "INSERT INTO pins (action, tactic, device, reason, author, created_at,"
                         " updated_at) VALUES ('exclude', 'split', %Q, 'r', 'a', 1, 1);"
                         "PRAGMA user_version = 8;",
                     idb),
                 SQLITE_OK);
    sqlite3_close(db);

    st = NULL;
    CHECK_EQ_INT(store_open(path, 0, &st, err, sizeof err), 0);
    if (st == NULL)
        return;
    attn_device_info got;
    attn_stack latest;
    CHECK_EQ_INT(store_device_get(st, want, &got, &latest), 0);
    CHECK_EQ_INT(store_device_get(st, ida, &got, &latest), ATTUNE_ENOTFOUND);
    CHECK_EQ_INT(store_device_get(st, idb, &got, &latest), ATTUNE_ENOTFOUND);
    store_measurement *m = NULL;
    int n = 0;
    CHECK_EQ_INT(store_measurements_all(st, want, &m, &n), 0);
    CHECK_EQ_INT(n, 4);
    for (int i = 0; i < n; i++) {
        if (strcmp(m[i].tactic, "split/acc=f32/pad=1") == 0)
            CHECK(m[i].time_us == 21 && m[i].taken_at == 2000);
        if (strcmp(m[i].tactic, "fused/pad=8") == 0)
            CHECK(m[i].time_us == 41 && m[i].taken_at == 4000);
    }
    free(m);
    store_close(st);
    CHECK_EQ_INT(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_stmt *q = NULL;
    CHECK_EQ_INT(sqlite3_prepare_v2(db, "SELECT device FROM pins", -1, &q, NULL), SQLITE_OK);
    CHECK(sqlite3_step(q) == SQLITE_ROW &&
          strcmp((const char *)sqlite3_column_text(q, 0), want) == 0);
    sqlite3_finalize(q);
    CHECK_EQ_INT(sqlite3_prepare_v2(db, "SELECT count(*) FROM devices", -1, &q, NULL),
                 SQLITE_OK);
    CHECK(sqlite3_step(q) == SQLITE_ROW && sqlite3_column_int(q, 0) == 1);
    sqlite3_finalize(q);
    sqlite3_close(db);
}

int main(void)
{
    RUN(memory_should_round_up_to_the_built_size);
    RUN(one_model_should_have_one_id);
    RUN(lookup_should_take_the_fleet_of_one_model);
    RUN(store_should_rekey_pulled_fleet_devices);
    return test_summary();
}
