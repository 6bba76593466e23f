/* test_store_power.c -- the power mode in the store: stacks keep it (schema
 * v4), rows read back carry their stack's mode, fleet tables move it, and a
 * v3 database gains it without changing a stack id. */
#include <sqlite3.h>

#include "db/store.h"
#include "test.h"

static void orin(attn_device_info *d, attn_stack *s, const char *power)
{
    memset(d, 0, sizeof *d);
    snprintf(d->id, sizeof d->id, "GPU-0a1b2c3d-0000-4000-8000-00000000a0b0");
    snprintf(d->name, sizeof d->name, "Orin");
    snprintf(d->kind, sizeof d->kind, "cuda");
    d->cc_major = 8;
    d->cc_minor = 7;
    d->sm_count = 16;
    d->memory_mb = 62841;
    memset(s, 0, sizeof *s);
    snprintf(s->driver, sizeof s->driver, "540.4.0/cuda-12.6");
    snprintf(s->runtime, sizeof s->runtime, "12.6");
    snprintf(s->blas, sizeof s->blas, "cublas-12.6.1");
    snprintf(s->attune, sizeof s->attune, "0.1.0");
    snprintf(s->kernels, sizeof s->kernels, "0123456789abcdef");
    snprintf(s->power, sizeof s->power, "%s", power);
    attn_stack_finish(s);
}

static void row(store_measurement *m, const attn_device_info *d, const attn_stack *s,
                double us)
{
    attn_shape shape = {1, 8, 1, 50, 1018, 256, ATTN_F16, 0};
    memset(m, 0, sizeof *m);
    snprintf(m->device_id, sizeof m->device_id, "%s", d->id);
    snprintf(m->stack_id, sizeof m->stack_id, "%s", s->id);
    m->shape = shape;
    snprintf(m->tactic, sizeof m->tactic, "fused/pad=8");
    m->status = STORE_OK;
    m->time_us = m->time_us_min = m->time_us_max = us;
    m->time_us_copies = NAN;
    m->n = 9;
    m->max_abs_err = 1e-3;
    m->rel_err = 1e-3;
    snprintf(m->mode, sizeof m->mode, "cuda-graph");
    snprintf(m->l2, sizeof m->l2, "warm");
    m->taken_at = 1767225600;
}

static void rows_should_carry_their_stacks_power_mode(void)
{
    char dir[256], path[300], *json = NULL;
    test_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/a.db", dir);
    store *st = NULL;
    CHECK_EQ_INT(store_open(path, 1, &st, NULL, 0), 0);
    attn_device_info d;
    attn_stack maxn, w15, got;
    attn_device_info info;
    store_measurement m;
    orin(&d, &maxn, "nvpmodel-0-MAXN");
    orin(&d, &w15, "nvpmodel-1-15W");
    CHECK(strcmp(maxn.id, w15.id) != 0);
    CHECK_EQ_INT(store_device_put(st, &d, &maxn), 0);
    row(&m, &d, &maxn, 100);
    CHECK_EQ_INT(store_measurement_put(st, &m), 0);
    CHECK_EQ_INT(store_device_put(st, &d, &w15), 0);
    row(&m, &d, &w15, 300);
    CHECK_EQ_INT(store_measurement_put(st, &m), 0);

    CHECK_EQ_INT(store_device_get(st, d.id, &info, &got), 0);
    CHECK_STR(got.power, "nvpmodel-1-15W");
    store_measurement *ms = NULL;
    int n = 0;
    CHECK_EQ_INT(store_measurements_all(st, d.id, &ms, &n), 0);
    CHECK_EQ_INT(n, 2);
    for (int i = 0; i < n; i++)
        CHECK_STR(ms[i].power, strcmp(ms[i].stack_id, maxn.id) == 0 ? "nvpmodel-0-MAXN"
                                                                     : "nvpmodel-1-15W");
    free(ms);

    /* Through a fleet table into another database: the modes survive, and
     * the stack ids (hashes including the mode) still check. */
    CHECK_EQ_INT(store_export(st, d.id, &json), 0);
    CHECK(json != NULL && strstr(json, "\"nvpmodel-0-MAXN\"") != NULL);
    snprintf(path, sizeof path, "%s/b.db", dir);
    store *st2 = NULL;
    CHECK_EQ_INT(store_open(path, 1, &st2, NULL, 0), 0);
    store_import_stats stats;
    char err[ATTUNE_ERRLEN] = "";
    CHECK_MSG(store_import(st2, json, strlen(json), &stats, err, sizeof err) == 0, "%s", err);
    CHECK_EQ_INT(store_measurements_all(st2, d.id, &ms, &n), 0);
    CHECK_EQ_INT(n, 2);
    for (int i = 0; i < n; i++)
        CHECK(strncmp(ms[i].power, "nvpmodel-", 9) == 0);
    free(ms);

    /* A power key with characters outside the word set is refused. */
    char *bad = strstr(json, "nvpmodel-0-MAXN");
    CHECK(bad != NULL);
    if (bad != NULL) {
        bad[8] = ' ';
        CHECK_EQ_INT(store_import(st2, json, strlen(json), &stats, err, sizeof err),
                     ATTUNE_EFORMAT);
    }
    free(json);
    store_close(st2);
    store_close(st);
}

/* A database of schema 3 (no power column) opens as version 4 with its
 * stacks' power empty, so their ids, hashed without one, stay right. */
static void v3_database_should_gain_an_empty_power(void)
{
    char dir[256], path[300];
    test_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/v3.db", dir);
    store *st = NULL;
    CHECK_EQ_INT(store_open(path, 1, &st, NULL, 0), 0);
    attn_device_info d;
    attn_stack s, got;
    attn_device_info info;
    orin(&d, &s, "");
    CHECK_EQ_INT(store_device_put(st, &d, &s), 0);
    store_close(st);
    /* Turn it back into a v3 file: drop the column, set the version. */
    sqlite3 *db = NULL;
    CHECK_EQ_INT(sqlite3_open(path, &db), SQLITE_OK);
    CHECK_EQ_INT(sqlite3_exec(db,
                              "ALTER TABLE stacks DROP COLUMN power; ALTER TABLE jobs DROP COLUMN kind; "
                              "DROP TABLE pins; ALTER TABLE measurements DROP COLUMN noisy; "
                              "ALTER TABLE measurements DROP COLUMN src_rel_err; "
                              "PRAGMA user_version = 3;",
                              NULL, NULL, NULL),
                 SQLITE_OK);
    sqlite3_close(db);
    CHECK_EQ_INT(store_open(path, 0, &st, NULL, 0), 0);
    CHECK_EQ_INT(store_device_get(st, d.id, &info, &got), 0);
    CHECK_STR(got.power, "");
    CHECK_STR(got.id, s.id);
    store_close(st);
}

int main(void)
{
    RUN(rows_should_carry_their_stacks_power_mode);
    RUN(v3_database_should_gain_an_empty_power);
    return test_summary();
}
