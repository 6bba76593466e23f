/* test_store.c -- the SQLite store: rows, err_ratio, WAL, migrations, jobs. */
#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#include "db/store.h"
#include "db/store_internal.h"
#include "fixture_h200.h"
#include "test.h"

/* ---- fixtures */

static void tmp_db(char *path, size_t len)
{
    char dir[256];
    test_tmpdir(dir, sizeof dir);
    snprintf(path, len, "%s/store.db", dir);
}

static attn_shape shape_mqa(void)
{
    attn_shape s = {1, 8, 1, 50, 1018, 256, ATTN_F16, 0};
    return s;
}

static void measurement(store_measurement *m, const attn_device_info *d, const attn_stack *s,
                        attn_shape shape, const char *tactic, double time_us, double rel_err)
{
    memset(m, 0, sizeof *m);
    snprintf(m->device_id, sizeof m->device_id, "%s", d->id);
    snprintf(m->stack_id, sizeof m->stack_id, "%s", s->id);
    m->shape = shape;
    snprintf(m->tactic, sizeof m->tactic, "%s", tactic);
    m->status = STORE_OK;
    m->time_us = time_us;
    m->time_us_min = time_us * 0.97;
    m->time_us_max = time_us * 1.05;
    m->time_us_copies = time_us + 1.25;
    m->n = 50;
    m->max_abs_err = rel_err * 3;
    m->rel_err = rel_err;
    m->err_ratio = NAN;
    snprintf(m->mode, sizeof m->mode, "cuda-graph");
    snprintf(m->l2, sizeof m->l2, "flushed");
    m->rows_checked = 400;
    snprintf(m->host, sizeof m->host, "gpu-node-7");
    m->taken_at = 1767225600;
}

/* Doubles equal bit for bit in value, NaN equal to NaN. */
static int same_double(double a, double b)
{
    return (isnan(a) && isnan(b)) || a == b;
}

static int same_measurement(const store_measurement *a, const store_measurement *b)
{
    return strcmp(a->device_id, b->device_id) == 0 && strcmp(a->stack_id, b->stack_id) == 0 &&
           memcmp(&a->shape, &b->shape, sizeof a->shape) == 0 &&
           strcmp(a->tactic, b->tactic) == 0 && a->status == b->status &&
           same_double(a->time_us, b->time_us) && same_double(a->time_us_min, b->time_us_min) &&
           same_double(a->time_us_max, b->time_us_max) &&
           same_double(a->time_us_copies, b->time_us_copies) && a->n == b->n &&
           same_double(a->max_abs_err, b->max_abs_err) && same_double(a->rel_err, b->rel_err) &&
           strcmp(a->mode, b->mode) == 0 && strcmp(a->l2, b->l2) == 0 &&
           a->rows_checked == b->rows_checked && strcmp(a->note, b->note) == 0 &&
           strcmp(a->host, b->host) == 0 && a->taken_at == b->taken_at;
}

/* An opened store with the H200 and its stack registered. */
static store *open_with_device(char *path, size_t len, attn_device_info *d, attn_stack *s)
{
    char err[ATTUNE_ERRLEN] = "";
    store *st = NULL;
    tmp_db(path, len);
    int rc = store_open(path, 1, &st, err, sizeof err);
    CHECK_MSG(rc == 0, "store_open: %s", err);
    fixture_h200(d, s, "550.54.15");
    if (st != NULL)
        CHECK_EQ_INT(store_device_put(st, d, s), 0);
    return st;
}

/* Run one SQL statement on a raw connection to path; returns the first
 * column of the first row as text in out (if any). */
static int raw_sql(const char *path, const char *sql, char *out, size_t len)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    if (out != NULL && len > 0)
        out[0] = 0;
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(db, sql, -1, &q, NULL);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(q);
        if (rc == SQLITE_ROW && out != NULL && sqlite3_column_text(q, 0) != NULL)
            snprintf(out, len, "%s", (const char *)sqlite3_column_text(q, 0));
        rc = rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : rc;
    }
    sqlite3_finalize(q);
    sqlite3_close(db);
    return rc;
}

/* ---- rows */

static void store_should_round_trip_every_field(void)
{
    char path[300];
    attn_device_info d;
    attn_stack s;
    store *st = open_with_device(path, sizeof path, &d, &s);
    if (st == NULL)
        return;
    store_measurement a, b, *rows = NULL;
    int n = 0;
    measurement(&a, &d, &s, shape_mqa(), "folded/acc=f32/pad=8", 13.8125, 3.0517578125e-4);
    a.status = STORE_INACCURATE;
    a.time_us_copies = NAN; /* NaN -> NULL -> NaN */
    a.max_abs_err = NAN;
    a.rows_checked = 256;
    snprintf(a.note, sizeof a.note, "rel_err over tolerance: \xc3\xa9t\xc3\xa9");
    snprintf(a.mode, sizeof a.mode, "wall");
    snprintf(a.l2, sizeof a.l2, "warm");
    a.taken_at = 1767225601;
    CHECK_EQ_INT(store_measurement_put(st, &a), 0);
    CHECK_EQ_INT(store_measurements_get(st, d.id, s.id, &a.shape, &rows, &n), 0);
    CHECK_EQ_INT(n, 1);
    if (n == 1) {
        b = rows[0];
        CHECK(same_measurement(&a, &b));
        CHECK_STR(b.device_id, d.id);
        CHECK_STR(b.stack_id, s.id);
        CHECK_STR(b.tactic, "folded/acc=f32/pad=8");
        CHECK_EQ_INT(b.status, STORE_INACCURATE);
        CHECK(b.time_us == 13.8125);
        CHECK(b.time_us_min == a.time_us_min);
        CHECK(b.time_us_max == a.time_us_max);
        CHECK(isnan(b.time_us_copies));
        CHECK(isnan(b.max_abs_err));
        CHECK(b.rel_err == 3.0517578125e-4);
        CHECK_EQ_INT(b.n, 50);
        CHECK_STR(b.mode, "wall");
        CHECK_STR(b.l2, "warm");
        CHECK_EQ_INT(b.rows_checked, 256);
        CHECK_STR(b.note, "rel_err over tolerance: \xc3\xa9t\xc3\xa9");
        CHECK_STR(b.host, "gpu-node-7");
        CHECK_EQ_INT(b.taken_at, 1767225601);
        CHECK(isnan(b.err_ratio)); /* no ok row for this shape */
    }
    free(rows);
    /* Every double NULL: times of a tactic that did not run. */
    measurement(&a, &d, &s, shape_mqa(), "split_repeat/acc=f16/pad=1", NAN, NAN);
    a.status = STORE_UNSUPPORTED;
    a.time_us_min = a.time_us_max = a.time_us_copies = a.max_abs_err = NAN;
    a.n = 0;
    CHECK_EQ_INT(store_measurement_put(st, &a), 0);
    CHECK_EQ_INT(store_measurements_get(st, d.id, s.id, &a.shape, &rows, &n), 0);
    CHECK_EQ_INT(n, 2);
    if (n == 2) {
        CHECK_STR(rows[1].tactic, "split_repeat/acc=f16/pad=1");
        CHECK(same_measurement(&a, &rows[1]));
        CHECK(isnan(rows[1].time_us) && isnan(rows[1].time_us_min) &&
              isnan(rows[1].time_us_max) && isnan(rows[1].rel_err));
    }
    free(rows);
    store_close(st);
}

static void store_should_replace_on_put(void)
{
    char path[300];
    attn_device_info d;
    attn_stack s;
    store *st = open_with_device(path, sizeof path, &d, &s);
    if (st == NULL)
        return;
    store_measurement a, *rows = NULL;
    int n = 0;
    measurement(&a, &d, &s, shape_mqa(), "fused/pad=8/tile=64x64", 28.8, 1e-3);
    CHECK_EQ_INT(store_measurement_put(st, &a), 0);
    a.time_us = 27.5;
    a.time_us_min = 27.0;
    a.time_us_max = 29.0;
    a.n = 20;
    a.taken_at += 60;
    snprintf(a.note, sizeof a.note, "re-measured");
    CHECK_EQ_INT(store_measurement_put(st, &a), 0);
    CHECK_EQ_INT(store_measurements_all(st, d.id, &rows, &n), 0);
    CHECK_EQ_INT(n, 1);
    if (n == 1) {
        CHECK(rows[0].time_us == 27.5);
        CHECK_EQ_INT(rows[0].n, 20);
        CHECK_STR(rows[0].note, "re-measured");
        CHECK_EQ_INT(rows[0].taken_at, a.taken_at);
    }
    free(rows);
    store_close(st);
}

static void store_should_store_tactics_canonically(void)
{
    char path[300];
    attn_device_info d;
    attn_stack s;
    store *st = open_with_device(path, sizeof path, &d, &s);
    if (st == NULL)
        return;
    store_measurement a, *rows = NULL;
    int n = 0;
    measurement(&a, &d, &s, shape_mqa(), "fused/tile=64x64/pad=1", 20, 1e-3);
    CHECK_EQ_INT(store_measurement_put(st, &a), 0);
    CHECK_EQ_INT(store_measurements_all(st, d.id, &rows, &n), 0);
    CHECK_EQ_INT(n, 1);
    if (n == 1)
        CHECK_STR(rows[0].tactic, "fused/pad=1/tile=64x64");
    free(rows);
    store_close(st);
}

static void store_should_answer_exists(void)
{
    char path[300];
    attn_device_info d;
    attn_stack s, s2;
    attn_device_info d2;
    store *st = open_with_device(path, sizeof path, &d, &s);
    if (st == NULL)
        return;
    attn_shape sh = shape_mqa();
    store_measurement a;
    CHECK_EQ_INT(store_measurement_exists(st, d.id, s.id, &sh, "folded/acc=f32/pad=1"), 0);
    measurement(&a, &d, &s, sh, "folded/acc=f32/pad=1", 12.0, 4e-4);
    CHECK_EQ_INT(store_measurement_put(st, &a), 0);
    CHECK_EQ_INT(store_measurement_exists(st, d.id, s.id, &sh, "folded/acc=f32/pad=1"), 1);
    /* the same tactic spelled with its keys in another order */
    CHECK_EQ_INT(store_measurement_exists(st, d.id, s.id, &sh, "folded/pad=1/acc=f32"), 1);
    CHECK_EQ_INT(store_measurement_exists(st, d.id, s.id, &sh, "folded/acc=f16/pad=1"), 0);
    fixture_h200(&d2, &s2, "560.35.03");
    CHECK_EQ_INT(store_measurement_exists(st, d.id, s2.id, &sh, "folded/acc=f32/pad=1"), 0);
    sh.causal = 1;
    CHECK_EQ_INT(store_measurement_exists(st, d.id, s.id, &sh, "folded/acc=f32/pad=1"), 0);
    CHECK_EQ_INT(store_measurement_exists(st, d.id, s.id, &sh, "nonsense"), ATTUNE_EINVAL);
    store_close(st);
}

static void store_should_compute_err_ratio_on_read(void)
{
    char path[300];
    attn_device_info d;
    attn_stack s, s2;
    attn_device_info d2;
    store *st = open_with_device(path, sizeof path, &d, &s);
    if (st == NULL)
        return;
    fixture_h200(&d2, &s2, "560.35.03");
    CHECK_EQ_INT(store_device_put(st, &d2, &s2), 0);
    attn_shape sh = shape_mqa();
    store_measurement m, *rows = NULL;
    int n = 0;
    /* ok rows 2e-4 (best) and 5e-4; a failed row more accurate than both
     * must not count as the reference; a NaN rel_err has no ratio. */
    measurement(&m, &d, &s, sh, "folded/acc=f32/pad=1", 12, 2e-4);
    CHECK_EQ_INT(store_measurement_put(st, &m), 0);
    measurement(&m, &d, &s, sh, "folded/acc=f16/pad=1", 11, 5e-4);
    CHECK_EQ_INT(store_measurement_put(st, &m), 0);
    measurement(&m, &d, &s, sh, "fused/pad=1", 14, 1e-5);
    m.status = STORE_FAILED;
    CHECK_EQ_INT(store_measurement_put(st, &m), 0);
    measurement(&m, &d, &s, sh, "split/acc=f32/pad=1", 20, NAN);
    m.status = STORE_UNSUPPORTED; /* an ok row always has an error */
    CHECK_EQ_INT(store_measurement_put(st, &m), 0);
    m.status = STORE_OK;
    CHECK_EQ_INT(store_measurement_put(st, &m), ATTUNE_EINVAL);
    /* another stack: its own reference (1e-3), not mixed with the first */
    measurement(&m, &d, &s2, sh, "split/acc=f32/pad=1", 20, 1e-3);
    CHECK_EQ_INT(store_measurement_put(st, &m), 0);
    /* a shape whose best ok row has rel_err 0: ratio undefined */
    attn_shape sh0 = sh;
    sh0.dtype = ATTN_F32;
    measurement(&m, &d, &s, sh0, "split/pad=1", 30, 0);
    CHECK_EQ_INT(store_measurement_put(st, &m), 0);
    measurement(&m, &d, &s, sh0, "fused/pad=1", 25, 1e-7);
    CHECK_EQ_INT(store_measurement_put(st, &m), 0);

    CHECK_EQ_INT(store_measurements_get(st, d.id, s.id, &sh, &rows, &n), 0);
    CHECK_EQ_INT(n, 4);
    for (int i = 0; i < n; i++) {
        if (strcmp(rows[i].tactic, "folded/acc=f32/pad=1") == 0)
            CHECK_NEAR(rows[i].err_ratio, 1.0, 1e-12);
        else if (strcmp(rows[i].tactic, "folded/acc=f16/pad=1") == 0)
            CHECK_NEAR(rows[i].err_ratio, 2.5, 1e-12);
        else if (strcmp(rows[i].tactic, "fused/pad=1") == 0)
            CHECK_NEAR(rows[i].err_ratio, 0.05, 1e-12);
        else
            CHECK(isnan(rows[i].err_ratio));
    }
    free(rows);
    CHECK_EQ_INT(store_measurements_get(st, d.id, s2.id, &sh, &rows, &n), 0);
    CHECK_EQ_INT(n, 1);
    if (n == 1)
        CHECK_NEAR(rows[0].err_ratio, 1.0, 1e-12);
    free(rows);
    CHECK_EQ_INT(store_measurements_get(st, d.id, s.id, &sh0, &rows, &n), 0);
    CHECK_EQ_INT(n, 2);
    for (int i = 0; i < n; i++)
        CHECK(isnan(rows[i].err_ratio));
    free(rows);
    /* every stack: ordered by tactic, newest first */
    CHECK_EQ_INT(store_measurements_get(st, d.id, NULL, &sh, &rows, &n), 0);
    CHECK_EQ_INT(n, 5);
    if (n == 5) {
        CHECK_STR(rows[0].tactic, "folded/acc=f16/pad=1");
        CHECK_STR(rows[3].tactic, "split/acc=f32/pad=1");
        CHECK_STR(rows[4].tactic, "split/acc=f32/pad=1");
    }
    free(rows);
    store_close(st);
}

static void store_should_list_shapes_and_find_devices(void)
{
    char path[300];
    attn_device_info d, got;
    attn_stack s, latest;
    store *st = open_with_device(path, sizeof path, &d, &s);
    if (st == NULL)
        return;
    store_measurement m;
    attn_shape *shapes = NULL;
    int n = 0;
    attn_shape a = shape_mqa(), b = shape_mqa();
    b.causal = 1;
    measurement(&m, &d, &s, a, "fused/pad=1", 10, 1e-3);
    CHECK_EQ_INT(store_measurement_put(st, &m), 0);
    measurement(&m, &d, &s, a, "fused/pad=8", 11, 1e-3);
    CHECK_EQ_INT(store_measurement_put(st, &m), 0);
    measurement(&m, &d, &s, b, "fused/pad=1", 9, 1e-3);
    CHECK_EQ_INT(store_measurement_put(st, &m), 0);
    CHECK_EQ_INT(store_shapes(st, d.id, &shapes, &n), 0);
    CHECK_EQ_INT(n, 2);
    if (n == 2) {
        CHECK(memcmp(&shapes[0], &b, sizeof b) == 0); /* ".c" sorts before ".nc" */
        CHECK(memcmp(&shapes[1], &a, sizeof a) == 0);
    }
    free(shapes);
    CHECK_EQ_INT(store_shapes(st, "GPU-none", &shapes, &n), 0);
    CHECK_EQ_INT(n, 0);
    free(shapes);

    CHECK_EQ_INT(store_device_get(st, "nvidia h200", &got, &latest), 0);
    CHECK_STR(got.id, d.id);
    CHECK_STR(got.name, "NVIDIA H200");
    CHECK_STR(got.kind, "cuda");
    CHECK_EQ_INT(got.index, 0);
    CHECK_EQ_INT(got.cc_major, 9);
    CHECK_EQ_INT(got.cc_minor, 0);
    CHECK_EQ_INT(got.sm_count, 132);
    CHECK_EQ_INT(got.memory_mb, 143771);
    CHECK_EQ_INT(got.clock_mhz, 1980);
    CHECK_EQ_INT(got.mem_clock_mhz, 3201);
    CHECK(memcmp(&latest, &s, sizeof s) == 0);
    CHECK_EQ_INT(store_device_get(st, d.id, &got, NULL), 0);
    CHECK_EQ_INT(store_device_get(st, "A100", &got, NULL), ATTUNE_ENOTFOUND);
    /* a driver upgrade: the device's latest stack follows */
    attn_stack s2;
    attn_device_info d2;
    fixture_h200(&d2, &s2, "560.35.03");
    CHECK_EQ_INT(store_device_put(st, &d2, &s2), 0);
    CHECK_EQ_INT(store_device_get(st, d.id, &got, &latest), 0);
    CHECK_STR(latest.id, s2.id);
    CHECK_STR(latest.driver, "560.35.03");
    CHECK(store_size_bytes(st) > 0);
    store_close(st);
}

static void store_should_reject_invalid_rows(void)
{
    char path[300];
    attn_device_info d;
    attn_stack s;
    store *st = open_with_device(path, sizeof path, &d, &s);
    if (st == NULL)
        return;
    store_measurement m, *rows = NULL;
    int n = 0;
    measurement(&m, &d, &s, shape_mqa(), "magic/pad=3", 10, 1e-3);
    CHECK_EQ_INT(store_measurement_put(st, &m), ATTUNE_EINVAL);
    measurement(&m, &d, &s, shape_mqa(), "fused/pad=1", INFINITY, 1e-3);
    CHECK_EQ_INT(store_measurement_put(st, &m), ATTUNE_EINVAL);
    measurement(&m, &d, &s, shape_mqa(), "fused/pad=1", -1, 1e-3);
    CHECK_EQ_INT(store_measurement_put(st, &m), ATTUNE_EINVAL);
    measurement(&m, &d, &s, shape_mqa(), "fused/pad=1", 10, -1e-3);
    CHECK_EQ_INT(store_measurement_put(st, &m), ATTUNE_EINVAL);
    measurement(&m, &d, &s, shape_mqa(), "fused/pad=1", 10, 1e-3);
    m.n = -1;
    CHECK_EQ_INT(store_measurement_put(st, &m), ATTUNE_EINVAL);
    measurement(&m, &d, &s, shape_mqa(), "fused/pad=1", 10, 1e-3);
    m.shape.hkv = 3;
    CHECK_EQ_INT(store_measurement_put(st, &m), ATTUNE_EINVAL);
    measurement(&m, &d, &s, shape_mqa(), "fused/pad=1", 10, 1e-3);
    m.status = (store_status)7;
    CHECK_EQ_INT(store_measurement_put(st, &m), ATTUNE_EINVAL);
    measurement(&m, &d, &s, shape_mqa(), "fused/pad=1", 10, 1e-3);
    snprintf(m.note, sizeof m.note, "bell\a");
    CHECK_EQ_INT(store_measurement_put(st, &m), ATTUNE_EINVAL);
    /* a device that was never registered: the foreign key says no */
    measurement(&m, &d, &s, shape_mqa(), "fused/pad=1", 10, 1e-3);
    snprintf(m.device_id, sizeof m.device_id, "GPU-unknown");
    CHECK_EQ_INT(store_measurement_put(st, &m), ATTUNE_ENOTFOUND);
    CHECK_EQ_INT(store_measurements_all(st, d.id, &rows, &n), 0);
    CHECK_EQ_INT(n, 0);
    free(rows);
    /* an infinite error (inf output) is stored as unknown */
    measurement(&m, &d, &s, shape_mqa(), "fused/pad=1", 10, INFINITY);
    m.status = STORE_FAILED;
    CHECK_EQ_INT(store_measurement_put(st, &m), 0);
    CHECK_EQ_INT(store_measurements_all(st, d.id, &rows, &n), 0);
    CHECK_EQ_INT(n, 1);
    if (n == 1)
        CHECK(isnan(rows[0].rel_err));
    free(rows);
    /* a stack whose id does not match its fields */
    attn_stack bad = s;
    bad.id[0] = bad.id[0] == 'a' ? 'b' : 'a';
    CHECK_EQ_INT(store_device_put(st, &d, &bad), ATTUNE_EINVAL);
    store_close(st);
}

/* ---- WAL and locking */

typedef struct {
    sqlite3 *db;
    int delay_ms;
} unlocker;

static void *release_later(void *arg)
{
    unlocker *u = arg;
    struct timespec ts = {u->delay_ms / 1000, (long)(u->delay_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    sqlite3_exec(u->db, "COMMIT", NULL, NULL, NULL);
    return NULL;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void store_should_use_wal_and_wait_for_locks(void)
{
    char path[300], mode[32];
    attn_device_info d;
    attn_stack s;
    store *st = open_with_device(path, sizeof path, &d, &s);
    if (st == NULL)
        return;
    CHECK_EQ_INT(raw_sql(path, "PRAGMA journal_mode", mode, sizeof mode), SQLITE_OK);
    CHECK_STR(mode, "wal");
    sqlite3_stmt *q = NULL;
    CHECK_EQ_INT(sqlite3_prepare_v2(st->db, "PRAGMA busy_timeout", -1, &q, NULL), SQLITE_OK);
    CHECK_EQ_INT(sqlite3_step(q), SQLITE_ROW);
    CHECK_EQ_INT(sqlite3_column_int(q, 0), 5000);
    sqlite3_finalize(q);
    CHECK_EQ_INT(sqlite3_prepare_v2(st->db, "PRAGMA foreign_keys", -1, &q, NULL), SQLITE_OK);
    CHECK_EQ_INT(sqlite3_step(q), SQLITE_ROW);
    CHECK_EQ_INT(sqlite3_column_int(q, 0), 1);
    sqlite3_finalize(q);

    /* Another writer holds the lock for 300 ms: the put waits, then lands. */
    unlocker u = {NULL, 300};
    CHECK_EQ_INT(sqlite3_open(path, &u.db), SQLITE_OK);
    CHECK_EQ_INT(sqlite3_exec(u.db, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    pthread_t th;
    double t0 = now_s();
    CHECK_EQ_INT(pthread_create(&th, NULL, release_later, &u), 0);
    store_measurement m;
    measurement(&m, &d, &s, shape_mqa(), "fused/pad=1", 10, 1e-3);
    CHECK_EQ_INT(store_measurement_put(st, &m), 0);
    double waited = now_s() - t0;
    pthread_join(th, NULL);
    CHECK_MSG(waited >= 0.25 && waited < 4.5, "waited %.3f s", waited);
    CHECK_EQ_INT(store_measurement_exists(st, d.id, s.id, &m.shape, "fused/pad=1"), 1);
    sqlite3_close(u.db);
    store_close(st);
}

/* ---- open: migrations and refusals */

/* Version 1 of the schema, as attune 0.0 created it (docs/schema.md):
 * frozen here on purpose, it must not follow store_schema.c. */
static const char schema_v1[] =
    "CREATE TABLE stacks (id TEXT PRIMARY KEY NOT NULL, driver TEXT NOT NULL,"
    "  runtime TEXT NOT NULL, blas TEXT NOT NULL, attune TEXT NOT NULL,"
    "  kernels TEXT NOT NULL, first_seen INTEGER NOT NULL);"
    "CREATE TABLE devices (id TEXT PRIMARY KEY NOT NULL, name TEXT NOT NULL,"
    "  kind TEXT NOT NULL CHECK (kind IN ('cpu', 'cuda')), idx INTEGER NOT NULL DEFAULT -1,"
    "  cc_major INTEGER NOT NULL DEFAULT 0, cc_minor INTEGER NOT NULL DEFAULT 0,"
    "  sm_count INTEGER NOT NULL DEFAULT 0, memory_mb INTEGER NOT NULL DEFAULT 0,"
    "  latest_stack TEXT REFERENCES stacks(id), first_seen INTEGER NOT NULL,"
    "  last_seen INTEGER NOT NULL);"
    "CREATE INDEX devices_name ON devices(name COLLATE NOCASE);"
    "CREATE TABLE shapes (id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE,"
    "  b INTEGER NOT NULL, hq INTEGER NOT NULL, hkv INTEGER NOT NULL, sq INTEGER NOT NULL,"
    "  skv INTEGER NOT NULL, d INTEGER NOT NULL,"
    "  dtype TEXT NOT NULL CHECK (dtype IN ('f16', 'bf16', 'f32')),"
    "  causal INTEGER NOT NULL CHECK (causal IN (0, 1)));"
    "CREATE TABLE measurements (device_id TEXT NOT NULL REFERENCES devices(id),"
    "  stack_id TEXT NOT NULL REFERENCES stacks(id),"
    "  shape_id INTEGER NOT NULL REFERENCES shapes(id), tactic TEXT NOT NULL,"
    "  status TEXT NOT NULL CHECK (status IN ('ok', 'unsupported', 'failed', 'inaccurate')),"
    "  time_us REAL, time_us_min REAL, time_us_max REAL, n INTEGER NOT NULL DEFAULT 0,"
    "  max_abs_err REAL, rel_err REAL, mode TEXT NOT NULL DEFAULT '',"
    "  l2 TEXT NOT NULL DEFAULT '', taken_at INTEGER NOT NULL,"
    "  PRIMARY KEY (device_id, stack_id, shape_id, tactic));"
    "CREATE INDEX measurements_shape ON measurements(device_id, shape_id);"
    "CREATE TABLE jobs (id INTEGER PRIMARY KEY AUTOINCREMENT, device_id TEXT NOT NULL,"
    "  state TEXT NOT NULL CHECK (state IN ('queued', 'running', 'done', 'failed', 'canceled')),"
    "  done INTEGER NOT NULL DEFAULT 0, total INTEGER NOT NULL, created_at INTEGER NOT NULL,"
    "  updated_at INTEGER NOT NULL, error TEXT NOT NULL DEFAULT '',"
    "  CHECK (done >= 0 AND done <= total));"
    "CREATE INDEX jobs_state ON jobs(state, created_at);"
    "CREATE TABLE job_shapes (job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
    "  position INTEGER NOT NULL, shape_id INTEGER NOT NULL REFERENCES shapes(id),"
    "  PRIMARY KEY (job_id, position));";

static void store_should_migrate_a_version_1_database(void)
{
    char path[300], err[ATTUNE_ERRLEN] = "", buf[64];
    attn_device_info d, got;
    attn_stack s, latest;
    tmp_db(path, sizeof path);
    fixture_h200(&d, &s, "550.54.15");
    sqlite3 *db = NULL;
    CHECK_EQ_INT(sqlite3_open(path, &db), SQLITE_OK);
    CHECK_EQ_INT(sqlite3_exec(db, schema_v1, NULL, NULL, NULL), SQLITE_OK);
    char *ins = sqlite3_mprintf(
        "INSERT INTO stacks VALUES (%Q, '550.54.15', '12.4', '12.4.5.8', '0.1.0',"
        "  '3f1c0d2a9b8e7f60', 1767225000);"
        "INSERT INTO devices VALUES (%Q, 'NVIDIA H200', 'cuda', 0, 9, 0, 132, 143771, %Q,"
        "  1767225000, 1767225600);"
        "INSERT INTO shapes VALUES (1, 'b1.hq8.hkv1.sq50.skv1018.d256.f16.nc', 1, 8, 1, 50,"
        "  1018, 256, 'f16', 0);"
        "INSERT INTO measurements VALUES (%Q, %Q, 1, 'folded/acc=f32/pad=1', 'ok', 13.8,"
        "  13.5, 14.4, 50, 9.765625e-4, 3.1e-4, 'cuda-graph', 'flushed', 1767225600);"
        "INSERT INTO measurements VALUES (%Q, %Q, 1, 'fused/pad=8', 'failed', NULL,"
        "  NULL, NULL, 0, NULL, NULL, 'cuda-graph', 'flushed', 1767225601);"
        "INSERT INTO jobs VALUES (1, %Q, 'running', 0, 1, 1767225000, 1767225500, '');"
        "INSERT INTO job_shapes VALUES (1, 0, 1);"
        "PRAGMA user_version = 1;",
        s.id, d.id, s.id, d.id, s.id, d.id, s.id, d.id);
    CHECK_EQ_INT(sqlite3_exec(db, ins, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_free(ins);
    sqlite3_close(db);

    store *st = NULL;
    int rc = store_open(path, 0, &st, err, sizeof err);
    CHECK_MSG(rc == 0, "store_open: %s", err);
    if (st == NULL)
        return;
    CHECK_EQ_INT(raw_sql(path, "PRAGMA user_version", buf, sizeof buf), SQLITE_OK);
    CHECK_EQ_INT(atoi(buf), STORE_SCHEMA_VERSION);
    store_measurement *rows = NULL;
    int n = 0;
    CHECK_EQ_INT(store_measurements_all(st, d.id, &rows, &n), 0);
    CHECK_EQ_INT(n, 2);
    if (n == 2) {
        CHECK_STR(rows[0].tactic, "folded/acc=f32/pad=1");
        CHECK_EQ_INT(rows[0].status, STORE_OK);
        CHECK(rows[0].time_us == 13.8);
        CHECK(rows[0].time_us_min == 13.5);
        CHECK(rows[0].time_us_max == 14.4);
        CHECK_EQ_INT(rows[0].n, 50);
        CHECK(rows[0].max_abs_err == 9.765625e-4);
        CHECK(rows[0].rel_err == 3.1e-4);
        CHECK_NEAR(rows[0].err_ratio, 1.0, 1e-12);
        CHECK_STR(rows[0].mode, "cuda-graph");
        CHECK_EQ_INT(rows[0].taken_at, 1767225600);
        /* the columns version 2 added, at their defaults */
        CHECK(isnan(rows[0].time_us_copies));
        CHECK_EQ_INT(rows[0].rows_checked, 0);
        CHECK_STR(rows[0].note, "");
        CHECK_STR(rows[0].host, "");
        CHECK_STR(rows[1].tactic, "fused/pad=8");
        CHECK_EQ_INT(rows[1].status, STORE_FAILED);
        CHECK(isnan(rows[1].time_us) && isnan(rows[1].rel_err));
        /* rows from before marks are whole tunes: the fastest ok row
         * carries the mark (select_complete), the failed one not */
        CHECK_EQ_INT(rows[0].incumbent, 1);
        CHECK_EQ_INT(rows[1].incumbent, 0);
    }
    free(rows);
    CHECK_EQ_INT(store_device_get(st, d.id, &got, &latest), 0);
    CHECK_STR(got.name, "NVIDIA H200");
    CHECK_EQ_INT(got.clock_mhz, 0);
    CHECK_EQ_INT(got.mem_clock_mhz, 0);
    CHECK_STR(latest.id, s.id);
    store_job job;
    CHECK_EQ_INT(store_job_get(st, 1, &job), 0);
    CHECK_EQ_INT(job.state, STORE_JOB_RUNNING);
    CHECK_EQ_INT(job.total, 1);
    if (job.shapes != NULL)
        CHECK_EQ_INT(job.shapes[0].skv, 1018);
    store_job_free(&job);
    store_close(st);

    /* reopening a migrated database is a no-op; the new columns take writes */
    st = NULL;
    CHECK_EQ_INT(store_open(path, 0, &st, err, sizeof err), 0);
    if (st != NULL) {
        store_measurement m;
        measurement(&m, &d, &s, shape_mqa(), "fused/pad=1", 10, 1e-3);
        snprintf(m.note, sizeof m.note, "after migration");
        CHECK_EQ_INT(store_measurement_put(st, &m), 0);
        CHECK_EQ_INT(store_measurements_all(st, d.id, &rows, &n), 0);
        CHECK_EQ_INT(n, 3);
        for (int i = 0; i < n; i++)
            if (strcmp(rows[i].tactic, "fused/pad=1") == 0) {
                CHECK_STR(rows[i].note, "after migration");
                CHECK_EQ_INT(rows[i].rows_checked, 400);
                CHECK(rows[i].time_us_copies == 11.25);
            }
        free(rows);
    }
    store_close(st);
}

/* A noisy row (tuner/noise.h): stored with its flag, not "existing" for a
 * tune that resumes (it is measured again), carried by a table as
 * "noisy": true and back; a version-7 database reads its rows clean. */
static void store_should_keep_the_noisy_flag(void)
{
    char path[300], err[ATTUNE_ERRLEN] = "", buf[64];
    attn_device_info d;
    attn_stack s;
    store *st = open_with_device(path, sizeof path, &d, &s);
    if (st == NULL)
        return;
    store_measurement m, q;
    measurement(&m, &d, &s, shape_mqa(), "fused/pad=1", 10, 1e-3);
    measurement(&q, &d, &s, shape_mqa(), "split/acc=f32/pad=1", 12, 1e-3);
    m.noisy = 1;
    snprintf(m.note, sizeof m.note, "noisy: median 2.50x the min");
    CHECK_EQ_INT(store_measurement_put(st, &m), 0);
    CHECK_EQ_INT(store_measurement_put(st, &q), 0);
    CHECK_EQ_INT(store_measurement_exists(st, d.id, s.id, &m.shape, "fused/pad=1"), 0);
    CHECK_EQ_INT(store_measurement_exists(st, d.id, s.id, &m.shape, "split/acc=f32/pad=1"), 1);
    store_measurement *rows = NULL;
    int n = 0;
    CHECK_EQ_INT(store_measurements_get(st, d.id, s.id, &m.shape, &rows, &n), 0);
    CHECK_EQ_INT(n, 2);
    for (int i = 0; i < n; i++)
        CHECK_EQ_INT(rows[i].noisy, strcmp(rows[i].tactic, "fused/pad=1") == 0);
    free(rows);
    char *json = NULL;
    CHECK_EQ_INT(store_export(st, d.id, &json), 0);
    /* the flag only where set */
    const char *one = json ? strstr(json, "\"noisy\"") : NULL;
    CHECK(one != NULL && strstr(one + 1, "\"noisy\"") == NULL);
    char path2[300];
    store *st2 = NULL;
    tmp_db(path2, sizeof path2);
    CHECK_EQ_INT(store_open(path2, 1, &st2, err, sizeof err), 0);
    store_import_stats stats;
    if (st2 != NULL && json != NULL) {
        CHECK_EQ_INT(store_import(st2, json, strlen(json), &stats, err, sizeof err), 0);
        CHECK_EQ_INT(store_measurements_get(st2, d.id, s.id, &m.shape, &rows, &n), 0);
        CHECK_EQ_INT(n, 2);
        for (int i = 0; i < n; i++)
            CHECK_EQ_INT(rows[i].noisy, strcmp(rows[i].tactic, "fused/pad=1") == 0);
        free(rows);
        /* anything but a boolean is refused */
        char *at = strstr(json, "\"noisy\":true");
        CHECK(at != NULL);
        if (at != NULL) {
            memcpy(at + 8, "1   ", 4);
            CHECK_EQ_INT(store_import(st2, json, strlen(json), &stats, err, sizeof err),
                         ATTUNE_EFORMAT);
            CHECK(strstr(err, ".noisy") != NULL);
        }
    }
    free(json);
    store_close(st2);
    /* re-measured clean, it exists again */
    m.noisy = 0;
    m.note[0] = 0;
    CHECK_EQ_INT(store_measurement_put(st, &m), 0);
    CHECK_EQ_INT(store_measurement_exists(st, d.id, s.id, &m.shape, "fused/pad=1"), 1);
    m.noisy = 1;
    CHECK_EQ_INT(store_measurement_put(st, &m), 0);
    store_close(st);
    /* version 7: no column; its rows read clean after the migration (nor
     * the column of version 10, which the migration adds back) */
    CHECK_EQ_INT(raw_sql(path, "ALTER TABLE measurements DROP COLUMN noisy", NULL, 0), SQLITE_OK);
    CHECK_EQ_INT(raw_sql(path, "ALTER TABLE measurements DROP COLUMN src_rel_err", NULL, 0),
                 SQLITE_OK);
    CHECK_EQ_INT(raw_sql(path, "PRAGMA user_version = 7", NULL, 0), SQLITE_OK);
    st = NULL;
    CHECK_EQ_INT(store_open(path, 0, &st, err, sizeof err), 0);
    CHECK_EQ_INT(raw_sql(path, "PRAGMA user_version", buf, sizeof buf), SQLITE_OK);
    CHECK_EQ_INT(atoi(buf), STORE_SCHEMA_VERSION);
    if (st != NULL) {
        CHECK_EQ_INT(store_measurements_get(st, d.id, s.id, &m.shape, &rows, &n), 0);
        CHECK_EQ_INT(n, 2);
        for (int i = 0; i < n; i++)
            CHECK_EQ_INT(rows[i].noisy, 0);
        free(rows);
    }
    store_close(st);
}

/* An e4m3 row (issue 30) keeps its error against the bf16 source
 * (src_rel_err) through put, read, a table and its import; rows of other
 * dtypes have none, whatever the struct held, and a table giving one is
 * refused. A version-9 database (shapes refused 'e4m3') takes e4m3 rows
 * after its migration, its old rows without a source error. */
static void store_should_keep_the_source_error_of_e4m3_rows(void)
{
    char path[300], err[ATTUNE_ERRLEN] = "", buf[64];
    attn_device_info d;
    attn_stack s;
    store *st = open_with_device(path, sizeof path, &d, &s);
    if (st == NULL)
        return;
    attn_shape e = shape_mqa();
    e.dtype = ATTN_E4M3;
    store_measurement m, b;
    measurement(&m, &d, &s, e, "fused/pad=1", 10, 2e-2);
    m.src_rel_err = 4.5e-2;
    measurement(&b, &d, &s, shape_mqa(), "fused/pad=1", 12, 1e-3);
    b.src_rel_err = 0; /* memset's value: not a source error */
    CHECK_EQ_INT(store_measurement_put(st, &m), 0);
    CHECK_EQ_INT(store_measurement_put(st, &b), 0);
    store_measurement *rows = NULL;
    int n = 0;
    CHECK_EQ_INT(store_measurements_get(st, d.id, s.id, &e, &rows, &n), 0);
    CHECK_EQ_INT(n, 1);
    if (n == 1) {
        CHECK(rows[0].src_rel_err == 4.5e-2);
        CHECK(rows[0].rel_err == 2e-2);
        CHECK_EQ_INT(rows[0].shape.dtype, ATTN_E4M3);
    }
    free(rows);
    CHECK_EQ_INT(store_measurements_get(st, d.id, s.id, &b.shape, &rows, &n), 0);
    CHECK(n == 1 && isnan(rows[0].src_rel_err));
    free(rows);
    m.src_rel_err = -1;
    CHECK_EQ_INT(store_measurement_put(st, &m), ATTUNE_EINVAL);
    m.src_rel_err = 4.5e-2;

    char *json = NULL;
    CHECK_EQ_INT(store_export(st, d.id, &json), 0);
    const char *one = json ? strstr(json, "\"src_rel_err\"") : NULL;
    CHECK(one != NULL && strstr(one + 1, "\"src_rel_err\"") == NULL); /* the e4m3 row's only */
    char path2[300];
    store *st2 = NULL;
    tmp_db(path2, sizeof path2);
    CHECK_EQ_INT(store_open(path2, 1, &st2, err, sizeof err), 0);
    store_import_stats stats;
    if (st2 != NULL && json != NULL) {
        CHECK_EQ_INT(store_import(st2, json, strlen(json), &stats, err, sizeof err), 0);
        CHECK_EQ_INT(store_measurements_get(st2, d.id, s.id, &e, &rows, &n), 0);
        CHECK(n == 1 && rows[0].src_rel_err == 4.5e-2);
        free(rows);
        /* on a bf16 row: refused */
        char *bad = strdup(json);
        char *at = strstr(bad, ".e4m3.");
        CHECK(at != NULL);
        if (at != NULL) { /* the e4m3 row's shape key and shape say f16 now */
            memcpy(at + 1, "f16", 3);
            memmove(at + 4, at + 5, strlen(at + 5) + 1); /* the 3 of e4m3 */
            char *dt = strstr(bad, "\"dtype\":\"e4m3\"");
            CHECK(dt != NULL);
            if (dt != NULL) {
                memcpy(dt + 9, "f16", 3);
                memmove(dt + 12, dt + 13, strlen(dt + 13) + 1);
            }
        }
        CHECK_EQ_INT(store_import(st2, bad, strlen(bad), &stats, err, sizeof err),
                     ATTUNE_EFORMAT);
        CHECK_MSG(strstr(err, "src_rel_err") != NULL, "err: %s", err);
        free(bad);
    }
    free(json);
    store_close(st2);
    store_close(st);

    /* back to version 9: no column, and shapes as version 9 made it */
    CHECK_EQ_INT(raw_sql(path, "DELETE FROM measurements WHERE shape_id IN (SELECT id FROM"
                               " shapes WHERE dtype = 'e4m3')", NULL, 0), SQLITE_OK);
    CHECK_EQ_INT(raw_sql(path, "DELETE FROM shapes WHERE dtype = 'e4m3'", NULL, 0), SQLITE_OK);
    CHECK_EQ_INT(raw_sql(path, "ALTER TABLE measurements DROP COLUMN src_rel_err", NULL, 0),
                 SQLITE_OK);
    CHECK_EQ_INT(raw_sql(path, "CREATE TABLE shapes9 (id INTEGER PRIMARY KEY,"
                               " key TEXT NOT NULL UNIQUE, b INTEGER NOT NULL,"
                               " hq INTEGER NOT NULL, hkv INTEGER NOT NULL,"
                               " sq INTEGER NOT NULL, skv INTEGER NOT NULL, d INTEGER NOT NULL,"
                               " dtype TEXT NOT NULL CHECK (dtype IN ('f16', 'bf16', 'f32')),"
                               " causal INTEGER NOT NULL CHECK (causal IN (0, 1)))",
                         NULL, 0),
                 SQLITE_OK);
    CHECK_EQ_INT(raw_sql(path, "INSERT INTO shapes9 SELECT * FROM shapes", NULL, 0), SQLITE_OK);
    CHECK_EQ_INT(raw_sql(path, "DROP TABLE shapes", NULL, 0), SQLITE_OK);
    CHECK_EQ_INT(raw_sql(path, "ALTER TABLE shapes9 RENAME TO shapes", NULL, 0), SQLITE_OK);
    CHECK_EQ_INT(raw_sql(path, "PRAGMA user_version = 9", NULL, 0), SQLITE_OK);
    CHECK(raw_sql(path, "INSERT INTO shapes VALUES (99, 'x', 1, 1, 1, 1, 1, 8, 'e4m3', 0)", NULL,
                  0) != SQLITE_OK); /* what version 9 refused */
    st = NULL;
    CHECK_EQ_INT(store_open(path, 0, &st, err, sizeof err), 0);
    CHECK_EQ_INT(raw_sql(path, "PRAGMA user_version", buf, sizeof buf), SQLITE_OK);
    CHECK_EQ_INT(atoi(buf), STORE_SCHEMA_VERSION);
    if (st != NULL) {
        CHECK_EQ_INT(store_measurements_get(st, d.id, s.id, &b.shape, &rows, &n), 0);
        CHECK(n == 1 && isnan(rows[0].src_rel_err) && rows[0].rel_err == 1e-3);
        free(rows);
        CHECK_EQ_INT(store_measurement_put(st, &m), 0);
        CHECK_EQ_INT(store_measurements_get(st, d.id, s.id, &e, &rows, &n), 0);
        CHECK(n == 1 && rows[0].src_rel_err == 4.5e-2);
        free(rows);
        /* the rebuilt shapes keep their ids: the old row's shape is still found */
        attn_shape *shapes = NULL;
        CHECK_EQ_INT(store_shapes(st, d.id, &shapes, &n), 0);
        CHECK_EQ_INT(n, 2);
        free(shapes);
    }
    store_close(st);
}

/* A migration that fails half-way leaves the database at its old version,
 * with none of the step's changes (one transaction per step). */
static void store_should_roll_back_a_failed_migration(void)
{
    char path[300], err[ATTUNE_ERRLEN] = "", buf[64];
    tmp_db(path, sizeof path);
    /* "version 1" without a devices table: the measurements columns are
     * added, then ALTER TABLE devices fails */
    CHECK_EQ_INT(raw_sql(path, "CREATE TABLE measurements (tactic TEXT)", NULL, 0), SQLITE_OK);
    CHECK_EQ_INT(raw_sql(path, "PRAGMA user_version = 1", NULL, 0), SQLITE_OK);
    store *st = NULL;
    int rc = store_open(path, 0, &st, err, sizeof err);
    CHECK_EQ_INT(rc, ATTUNE_EDB);
    CHECK(st == NULL);
    CHECK_MSG(strstr(err, "schema version") != NULL && strstr(err, path) != NULL, "err: %s",
              err);
    CHECK_EQ_INT(raw_sql(path, "PRAGMA user_version", buf, sizeof buf), SQLITE_OK);
    CHECK_STR(buf, "1");
    CHECK_EQ_INT(raw_sql(path, "SELECT count(*) FROM pragma_table_info('measurements')", buf,
                         sizeof buf),
                 SQLITE_OK);
    CHECK_STR(buf, "1");
}

static void store_should_refuse_a_newer_schema(void)
{
    char path[300], err[ATTUNE_ERRLEN] = "", buf[32];
    tmp_db(path, sizeof path);
    CHECK_EQ_INT(raw_sql(path, "CREATE TABLE future (x)", NULL, 0), SQLITE_OK);
    CHECK_EQ_INT(raw_sql(path, "PRAGMA user_version = 99", NULL, 0), SQLITE_OK);
    store *st = (store *)1;
    CHECK_EQ_INT(store_open(path, 1, &st, err, sizeof err), ATTUNE_EVERSION);
    CHECK(st == NULL);
    CHECK_MSG(strstr(err, "newer") != NULL && strstr(err, path) != NULL, "err: %s", err);
    /* untouched: same version, journal mode not switched to WAL */
    CHECK_EQ_INT(raw_sql(path, "PRAGMA user_version", buf, sizeof buf), SQLITE_OK);
    CHECK_STR(buf, "99");
    CHECK_EQ_INT(raw_sql(path, "PRAGMA journal_mode", buf, sizeof buf), SQLITE_OK);
    CHECK_STR(buf, "delete");
}

static void store_should_refuse_what_is_not_its_database(void)
{
    char path[300], err[ATTUNE_ERRLEN] = "";
    store *st = NULL;
    tmp_db(path, sizeof path);
    static const char text[] = "this is a text file, not a database\n";
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f == NULL)
        return;
    for (int i = 0; i < 100; i++)
        fputs(text, f);
    fclose(f);
    CHECK_EQ_INT(store_open(path, 1, &st, err, sizeof err), ATTUNE_EFORMAT);
    CHECK(st == NULL);
    CHECK_MSG(strstr(err, "not a SQLite database") != NULL && strstr(err, path) != NULL,
              "err: %s", err);
    struct stat sb;
    CHECK(stat(path, &sb) == 0 && sb.st_size == (off_t)(100 * strlen(text)));

    /* a SQLite database that some other program made */
    tmp_db(path, sizeof path);
    CHECK_EQ_INT(raw_sql(path, "CREATE TABLE notes (body TEXT)", NULL, 0), SQLITE_OK);
    CHECK_EQ_INT(store_open(path, 1, &st, err, sizeof err), ATTUNE_EFORMAT);
    CHECK_MSG(strstr(err, "not an attune store") != NULL, "err: %s", err);
}

static void store_open_should_name_missing_and_unwritable_paths(void)
{
    char dir[256], path[400], err[ATTUNE_ERRLEN] = "";
    store *st = NULL;
    test_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/absent.db", dir);
    CHECK_EQ_INT(store_open(path, 0, &st, err, sizeof err), ATTUNE_ENOTFOUND);
    CHECK(st == NULL);
    CHECK_MSG(strstr(err, path) != NULL, "err: %s", err);
    struct stat sb;
    CHECK(stat(path, &sb) != 0); /* create = 0 created nothing */

    snprintf(path, sizeof path, "%s/no/such/dir/a.db", dir);
    CHECK_EQ_INT(store_open(path, 1, &st, err, sizeof err), ATTUNE_EIO);
    CHECK(st == NULL);
    CHECK_MSG(strstr(err, "does not exist") != NULL && strstr(err, "/no/such/dir") != NULL,
              "err: %s", err);

    /* a "directory" that is a file: named, whoever runs the test */
    char file[300];
    snprintf(file, sizeof file, "%s/plain", dir);
    FILE *f = fopen(file, "w");
    CHECK(f != NULL);
    if (f != NULL)
        fclose(f);
    snprintf(path, sizeof path, "%s/a.db", file);
    CHECK_EQ_INT(store_open(path, 1, &st, err, sizeof err), ATTUNE_EIO);
    CHECK_MSG(strstr(err, "not a directory") != NULL && strstr(err, file) != NULL, "err: %s",
              err);
    /* a directory where the database should be */
    CHECK_EQ_INT(store_open(dir, 1, &st, err, sizeof err), ATTUNE_EIO);
    CHECK_MSG(strstr(err, "is a directory") != NULL, "err: %s", err);

    if (geteuid() != 0) { /* root writes anywhere */
        char ro[300];
        snprintf(ro, sizeof ro, "%s/ro", dir);
        CHECK(mkdir(ro, 0555) == 0);
        snprintf(path, sizeof path, "%s/a.db", ro);
        CHECK_EQ_INT(store_open(path, 1, &st, err, sizeof err), ATTUNE_EIO);
        CHECK_MSG(strstr(err, "not writable") != NULL && strstr(err, ro) != NULL, "err: %s",
                  err);
    }
    /* a fresh database is created at the current version */
    snprintf(path, sizeof path, "%s/new.db", dir);
    CHECK_EQ_INT(store_open(path, 1, &st, err, sizeof err), 0);
    store_close(st);
    char buf[16];
    CHECK_EQ_INT(raw_sql(path, "PRAGMA user_version", buf, sizeof buf), SQLITE_OK);
    CHECK_EQ_INT(atoi(buf), STORE_SCHEMA_VERSION);
}

/* ---- jobs */

static void jobs_should_survive_as_rows(void)
{
    char path[300];
    attn_device_info d;
    attn_stack s;
    store *st = open_with_device(path, sizeof path, &d, &s);
    if (st == NULL)
        return;
    attn_shape shapes[3] = {shape_mqa(), shape_mqa(), shape_mqa()};
    shapes[1].sq = 1;
    shapes[2].dtype = ATTN_BF16;
    shapes[2].causal = 1;
    int64_t id1 = 0, id2 = 0;
    CHECK_EQ_INT(store_job_create(st, d.id, shapes, 3, &id1), 0);
    CHECK_EQ_INT(store_job_create(st, "cpu-device.1", shapes + 1, 1, &id2), 0);
    CHECK(id1 > 0 && id2 > id1);
    CHECK_EQ_INT(store_job_create(st, d.id, shapes, 0, &id2), ATTUNE_EINVAL);

    store_job j;
    CHECK_EQ_INT(store_job_get(st, id1, &j), 0);
    CHECK_EQ_INT(j.id, id1);
    CHECK_STR(j.device_id, d.id);
    CHECK_EQ_INT(j.state, STORE_JOB_QUEUED);
    CHECK_EQ_INT(j.done, 0);
    CHECK_EQ_INT(j.total, 3);
    CHECK(j.created_at > 1700000000 && j.updated_at == j.created_at);
    CHECK_STR(j.error, "");
    CHECK(j.shapes != NULL);
    for (int i = 0; j.shapes != NULL && i < 3; i++)
        CHECK(memcmp(&j.shapes[i], &shapes[i], sizeof shapes[i]) == 0);
    store_job_free(&j);
    CHECK(j.shapes == NULL);

    CHECK_EQ_INT(store_job_update(st, id1, STORE_JOB_RUNNING, 1, NULL), 0);
    CHECK_EQ_INT(store_job_update(st, id1, STORE_JOB_RUNNING, 4, NULL), ATTUNE_EINVAL);
    CHECK_EQ_INT(store_job_update(st, id1 + 100, STORE_JOB_RUNNING, 0, NULL), ATTUNE_ENOTFOUND);
    CHECK_EQ_INT(store_job_get(st, id1 + 100, &j), ATTUNE_ENOTFOUND);
    CHECK(j.shapes == NULL);

    store_job *list = NULL;
    int n = 0;
    CHECK_EQ_INT(store_jobs_list(st, STORE_JOB_RUNNING, &list, &n), 0);
    CHECK_EQ_INT(n, 1);
    if (n == 1) {
        CHECK_EQ_INT(list[0].id, id1);
        CHECK_EQ_INT(list[0].done, 1);
        CHECK(list[0].shapes == NULL);
    }
    free(list);
    CHECK_EQ_INT(store_jobs_list(st, STORE_JOB_QUEUED, &list, &n), 0);
    CHECK_EQ_INT(n, 1);
    if (n == 1) {
        CHECK_EQ_INT(list[0].id, id2);
        CHECK_STR(list[0].device_id, "cpu-device.1");
    }
    free(list);
    CHECK_EQ_INT(store_jobs_list(st, -1, &list, &n), 0);
    CHECK_EQ_INT(n, 2);
    if (n == 2)
        CHECK(list[0].id == id1 && list[1].id == id2); /* oldest first */
    free(list);
    CHECK_EQ_INT(store_jobs_list(st, STORE_JOB_DONE, &list, &n), 0);
    CHECK_EQ_INT(n, 0);
    free(list);

    CHECK_EQ_INT(store_job_update(st, id1, STORE_JOB_FAILED, 2, "device lost: Xid 79"), 0);
    CHECK_EQ_INT(store_job_get(st, id1, &j), 0);
    CHECK_EQ_INT(j.state, STORE_JOB_FAILED);
    CHECK_EQ_INT(j.done, 2);
    CHECK_STR(j.error, "device lost: Xid 79");
    store_job_free(&j);
    /* a long error is cut to fit, not refused */
    char longmsg[600];
    memset(longmsg, 'x', sizeof longmsg - 1);
    longmsg[sizeof longmsg - 1] = 0;
    CHECK_EQ_INT(store_job_update(st, id2, STORE_JOB_CANCELED, 0, longmsg), 0);
    CHECK_EQ_INT(store_job_get(st, id2, &j), 0);
    CHECK_EQ_INT(strlen(j.error), sizeof j.error - 1);
    store_job_free(&j);
    CHECK_STR(store_job_state_name(STORE_JOB_CANCELED), "canceled");
    store_close(st);

    /* a restarted daemon sees the same jobs */
    char err[ATTUNE_ERRLEN];
    st = NULL;
    CHECK_EQ_INT(store_open(path, 0, &st, err, sizeof err), 0);
    if (st != NULL) {
        CHECK_EQ_INT(store_jobs_list(st, STORE_JOB_FAILED, &list, &n), 0);
        CHECK_EQ_INT(n, 1);
        free(list);
    }
    store_close(st);
}

static void status_should_round_trip_names(void)
{
    store_status s;
    for (int i = 0; i < 4; i++) {
        CHECK_EQ_INT(store_status_parse(store_status_name((store_status)i), &s), 0);
        CHECK_EQ_INT(s, i);
    }
    CHECK_EQ_INT(store_status_parse("great", &s), ATTUNE_EINVAL);
    CHECK_STR(store_status_name(STORE_INACCURATE), "inaccurate");
}

int main(void)
{
    RUN(status_should_round_trip_names);
    RUN(store_should_round_trip_every_field);
    RUN(store_should_replace_on_put);
    RUN(store_should_store_tactics_canonically);
    RUN(store_should_answer_exists);
    RUN(store_should_compute_err_ratio_on_read);
    RUN(store_should_list_shapes_and_find_devices);
    RUN(store_should_reject_invalid_rows);
    RUN(store_should_use_wal_and_wait_for_locks);
    RUN(store_should_migrate_a_version_1_database);
    RUN(store_should_keep_the_noisy_flag);
    RUN(store_should_keep_the_source_error_of_e4m3_rows);
    RUN(store_should_roll_back_a_failed_migration);
    RUN(store_should_refuse_a_newer_schema);
    RUN(store_should_refuse_what_is_not_its_database);
    RUN(store_open_should_name_missing_and_unwritable_paths);
    RUN(jobs_should_survive_as_rows);
    return test_summary();
}
