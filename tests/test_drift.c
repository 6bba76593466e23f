/* test_drift.c -- drift reports (tuner/drift.c) and the fleet push log
 * (db/fleet_local.c) on a local store; no server needed. */
#include <math.h>
#include <sqlite3.h>

#include "../db/fleet_local.h"
#include "../db/fleet_pg.h"
#include "../tuner/drift.h"
#include "test.h"

static char dir[512];

static void device(attn_device_info *d, const char *id, const char *name)
{
    memset(d, 0, sizeof *d);
    snprintf(d->id, sizeof d->id, "%s", id);
    snprintf(d->name, sizeof d->name, "%s", name);
    snprintf(d->kind, sizeof d->kind, "cuda");
    d->index = -1;
    d->cc_major = 9;
    d->sm_count = 132;
    d->memory_mb = 80000;
}

static void stack(attn_stack *s, const char *driver)
{
    memset(s, 0, sizeof *s);
    snprintf(s->driver, sizeof s->driver, "%s", driver);
    snprintf(s->runtime, sizeof s->runtime, "12.6");
    snprintf(s->attune, sizeof s->attune, "0.1.0");
    snprintf(s->kernels, sizeof s->kernels, "00112233");
    attn_stack_finish(s);
}

static void put(store *st, const char *dev, const attn_stack *s, int sq, const char *tactic,
                double t, double err, int64_t at)
{
    store_measurement m;
    memset(&m, 0, sizeof m);
    snprintf(m.device_id, sizeof m.device_id, "%s", dev);
    snprintf(m.stack_id, sizeof m.stack_id, "%s", s->id);
    m.shape = (attn_shape){.b = 1, .hq = 8, .hkv = 1, .sq = sq, .skv = 512, .d = 64,
                           .dtype = ATTN_F16, .causal = 0};
    snprintf(m.tactic, sizeof m.tactic, "%s", tactic);
    m.status = STORE_OK;
    m.time_us = m.time_us_min = m.time_us_max = t;
    m.time_us_copies = NAN;
    m.n = 10;
    m.rel_err = m.max_abs_err = err;
    snprintf(m.mode, sizeof m.mode, "wall");
    m.taken_at = at;
    CHECK_EQ_INT(store_measurement_put(st, &m), 0);
}

/* Two stacks of one device: a planted error jump past the f16 bound on one
 * tactic, a winner change on another shape. */
static store *planted(const char *name, attn_stack *old, attn_stack *new)
{
    char path[600], err[ATTUNE_ERRLEN];
    snprintf(path, sizeof path, "%s/%s.db", dir, name);
    store *st = NULL;
    CHECK_EQ_INT(store_open(path, 1, &st, err, sizeof err), 0);
    attn_device_info d;
    device(&d, "GPU-drift-a", "Drift GPU");
    stack(old, "550.54.15");
    stack(new, "560.35.03");
    CHECK_EQ_INT(store_device_put(st, &d, old), 0);
    CHECK_EQ_INT(store_device_put(st, &d, new), 0);
    for (int sq = 16; sq < 20; sq++) {
        put(st, d.id, old, sq, "split/acc=f32/pad=1", 10, 1e-4, 1000);
        put(st, d.id, old, sq, "fused/pad=1/tile=64x64", 12, 1e-4, 1000);
        put(st, d.id, new, sq, "split/acc=f32/pad=1", sq == 17 ? 15 : 10,
            sq == 18 ? 2e-2 : 1e-4, 2000);
        put(st, d.id, new, sq, "fused/pad=1/tile=64x64", 12, 1e-4, 2000);
    }
    return st;
}

static void drift_should_list_the_planted_regression_first(void)
{
    attn_stack old, new;
    store *st = planted("a", &old, &new);
    select_policy p;
    select_policy_default(&p);
    drift_report r;
    char err[ATTUNE_ERRLEN] = "";
    CHECK_EQ_INT(drift_compare(st, "GPU-drift-a", 0, NULL, NULL, &p, &r, err, sizeof err), 0);
    CHECK_STR(r.stack_a, old.id);
    CHECK_STR(r.stack_b, new.id);
    CHECK_EQ_INT(r.nshapes, 4);
    CHECK_EQ_INT(r.nacc, 1);
    if (r.nacc == 1) {
        CHECK_STR(r.acc[0].shape, "b1.hq8.hkv1.sq18.skv512.d64.f16.nc");
        CHECK_STR(r.acc[0].tactic, "split/acc=f32/pad=1");
        CHECK(r.acc[0].regression);
        CHECK(r.acc[0].flags & DRIFT_BOUND);
        CHECK(r.acc[0].flags & DRIFT_ERR2X);
    }
    /* sq17: split got slower than fused: the winner changed, listed first;
     * sq18's split is out of bounds: fused wins there too */
    CHECK_EQ_INT(r.winner_changes, 2);
    CHECK(strcmp(r.shapes[0].winner_a, r.shapes[0].winner_b) != 0);
    char *text = NULL;
    CHECK_EQ_INT(drift_report_text(&r, &text), 0);
    CHECK(text != NULL && strncmp(text, "ACCURACY REGRESSION b1.hq8.hkv1.sq18", 36) == 0);
    free(text);
    drift_report_free(&r);
    /* reversed: the same change is an improvement, not a regression */
    CHECK_EQ_INT(drift_compare(st, "GPU-drift-a", 0, new.id, old.id, &p, &r, err, sizeof err),
                 0);
    CHECK(r.nacc == 1 && !r.acc[0].regression);
    drift_report_free(&r);
    /* an unknown stack is named */
    CHECK_EQ_INT(drift_compare(st, "GPU-drift-a", 0, "0123456789abcdef", old.id, &p, &r, err,
                               sizeof err),
                 ATTUNE_ENOTFOUND);
    CHECK(strstr(err, "0123456789abcdef") != NULL);
    store_close(st);
}

static int64_t count(store *st, const char *sql)
{
    /* store_internal.h is not needed: a second connection reads the file */
    (void)st;
    char path[600];
    snprintf(path, sizeof path, "%s/b.db", dir);
    sqlite3 *db = NULL;
    sqlite3_stmt *q = NULL;
    int64_t v = -1;
    if (sqlite3_open(path, &db) == SQLITE_OK &&
        sqlite3_prepare_v2(db, sql, -1, &q, NULL) == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW)
        v = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    sqlite3_close(db);
    return v;
}

static void fleet_log_should_hold_every_committed_row_once(void)
{
    attn_stack old, new;
    store *st = planted("b", &old, &new);
    char src[40], err[ATTUNE_ERRLEN];
    CHECK_EQ_INT(fleet_local_setup(st, src, sizeof src, err, sizeof err), 0);
    CHECK(strncmp(src, "src-", 4) == 0 && strlen(src) == 36);
    char again[40];
    CHECK_EQ_INT(fleet_local_setup(st, again, sizeof again, err, sizeof err), 0);
    CHECK_STR(again, src);
    fleet_local_state s;
    CHECK_EQ_INT(fleet_local_state_get(st, &s), 0);
    CHECK_EQ_INT(s.pending, 16); /* the 16 rows already there, seeded */
    /* a new row and a re-measure are logged, an unchanged write is not */
    put(st, "GPU-drift-a", &new, 30, "split/acc=f32/pad=1", 9, 1e-4, 3000);
    put(st, "GPU-drift-a", &new, 16, "split/acc=f32/pad=1", 9.5, 1e-4, 3001);
    put(st, "GPU-drift-a", &new, 16, "split/acc=f32/pad=1", 9.5, 1e-4, 3001);
    CHECK_EQ_INT(fleet_local_state_get(st, &s), 0);
    CHECK_EQ_INT(s.pending, 18);
    /* rows of a pulled fleet device are never logged */
    attn_device_info f;
    device(&f, "FLEET-0011223344556677", "Drift GPU");
    CHECK_EQ_INT(store_device_put(st, &f, &new), 0);
    put(st, f.id, &new, 16, "split/acc=f32/pad=1", 9, 1e-4, 3000);
    CHECK_EQ_INT(fleet_local_state_get(st, &s), 0);
    CHECK_EQ_INT(s.pending, 18);
    CHECK_EQ_INT(count(st, "SELECT count(*) FROM fleet_log WHERE device_id LIKE 'FLEET-%'"), 0);
    CHECK_EQ_INT(count(st, "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND "
                           "name LIKE 'fleet_log_%'"), 3);
    char path[600];
    snprintf(path, sizeof path, "%s/b.db", dir);
    sqlite3 *db = NULL;
    /* a store set up before tunes in flight were held back: the third
     * trigger and its index are added, nothing logged again */
    CHECK(sqlite3_open(path, &db) == SQLITE_OK &&
          sqlite3_exec(db, "DROP TRIGGER fleet_log_complete; DROP INDEX fleet_marked", NULL,
                       NULL, NULL) == SQLITE_OK);
    sqlite3_close(db);
    CHECK_EQ_INT(fleet_local_setup(st, again, sizeof again, err, sizeof err), 0);
    CHECK_EQ_INT(count(st, "SELECT count(*) FROM sqlite_master WHERE name IN "
                           "('fleet_log_complete', 'fleet_marked')"), 2);
    CHECK_EQ_INT(count(st, "SELECT count(*) FROM fleet_log"), 18);
    /* triggers lost (a migration that rebuilds measurements drops them): the
     * next setup puts them back and logs every row again, same source */
    CHECK(sqlite3_open(path, &db) == SQLITE_OK &&
          sqlite3_exec(db, "DROP TRIGGER fleet_log_insert", NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(db);
    put(st, "GPU-drift-a", &new, 31, "split/acc=f32/pad=1", 9, 1e-4, 3002); /* unlogged */
    CHECK_EQ_INT(fleet_local_setup(st, again, sizeof again, err, sizeof err), 0);
    CHECK_STR(again, src);
    CHECK_EQ_INT(count(st, "SELECT count(DISTINCT device_id || stack_id || shape_id || tactic) "
                           "FROM fleet_log"), 18);
    put(st, "GPU-drift-a", &new, 32, "split/acc=f32/pad=1", 9, 1e-4, 3003);
    CHECK_EQ_INT(count(st, "SELECT count(DISTINCT device_id || stack_id || shape_id || tactic) "
                           "FROM fleet_log"), 19);
    store_close(st);
}

static void model_id_should_name_the_model_not_the_device(void)
{
    attn_device_info a, b, c;
    device(&a, "GPU-1", "NVIDIA H200");
    device(&b, "GPU-2", "NVIDIA H200");
    device(&c, "GPU-3", "NVIDIA H200");
    c.memory_mb = 141000;
    char ia[32], ib[32], ic[32];
    fleet_model_id(&a, ia, sizeof ia);
    fleet_model_id(&b, ib, sizeof ib);
    fleet_model_id(&c, ic, sizeof ic);
    CHECK_STR(ia, ib);
    CHECK(strcmp(ia, ic) != 0);
    CHECK(fleet_is_model_device(ia) && strlen(ia) == 22 && !fleet_is_model_device(a.id));
}

static void fleet_url_should_refuse_passwords_without_echoing_them(void)
{
    char err[ATTUNE_ERRLEN];
    int rc = fleet_pg_url_check("postgresql://u:s3cretpw@host/db", err, sizeof err);
    if (rc == ATTUNE_EUNSUPP)
        return; /* built without libpq */
    CHECK_EQ_INT(rc, ATTUNE_EINVAL);
    CHECK(strstr(err, "s3cretpw") == NULL);
    CHECK_EQ_INT(fleet_pg_url_check("host=h dbname=d password=s3cretpw", err, sizeof err),
                 ATTUNE_EINVAL);
    CHECK(strstr(err, "s3cretpw") == NULL);
    CHECK_EQ_INT(fleet_pg_url_check("postgresql://u@host/db?sslmode=verify-full", err,
                                    sizeof err),
                 0);
    CHECK_EQ_INT(fleet_pg_url_check("", err, sizeof err), ATTUNE_EINVAL);
}

int main(void)
{
    test_tmpdir(dir, sizeof dir);
    RUN(drift_should_list_the_planted_regression_first);
    RUN(fleet_log_should_hold_every_committed_row_once);
    RUN(model_id_should_name_the_model_not_the_device);
    RUN(fleet_url_should_refuse_passwords_without_echoing_them);
    return test_summary();
}
