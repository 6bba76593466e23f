/* test_fleet.c -- fleet tables: export/import round trips, and hostile
 * tables rejected with the database unchanged. */
#include <dirent.h>
#include <jansson.h>
#include <sqlite3.h>
#include <stdint.h>
#include <time.h>

#include "common/hash.h"
#include "db/store.h"
#include "db/store_fleet_scan.h"
#include "fixture_h200.h"
#include "test.h"

/* ---- fixtures */

static const char *inputs_dir(void)
{
    const char *d = getenv("ATTUNE_TEST_INPUTS");
    return d != NULL ? d : "tests/inputs";
}

/* Whole file into a malloc'd buffer, *len its size; NULL when unreadable. */
static char *slurp(const char *name, size_t *len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", inputs_dir(), name);
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    char *buf = NULL;
    size_t cap = 0, n = 0, got;
    do {
        if (n == cap) {
            cap = cap ? cap * 2 : 4096;
            char *grown = realloc(buf, cap);
            if (grown == NULL) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = grown;
        }
        got = fread(buf + n, 1, cap - n, f);
        n += got;
    } while (got > 0);
    fclose(f);
    *len = n;
    return buf;
}

static store *fresh_store(char *path, size_t len)
{
    char dir[256], err[ATTUNE_ERRLEN] = "";
    store *st = NULL;
    test_tmpdir(dir, sizeof dir);
    snprintf(path, len, "%s/fleet.db", dir);
    int rc = store_open(path, 1, &st, err, sizeof err);
    CHECK_MSG(rc == 0, "store_open: %s", err);
    return st;
}

static void row(store_measurement *m, const attn_device_info *d, const attn_stack *s,
                attn_shape shape, const char *tactic, double t, double rel, int64_t taken)
{
    memset(m, 0, sizeof *m);
    snprintf(m->device_id, sizeof m->device_id, "%s", d->id);
    snprintf(m->stack_id, sizeof m->stack_id, "%s", s->id);
    m->shape = shape;
    snprintf(m->tactic, sizeof m->tactic, "%s", tactic);
    m->status = STORE_OK;
    m->time_us = t;
    m->time_us_min = t * 0.98;
    m->time_us_max = t * 1.1;
    m->time_us_copies = NAN;
    m->n = 37;
    m->max_abs_err = rel * 2.5;
    m->rel_err = rel;
    snprintf(m->mode, sizeof m->mode, "cuda-graph");
    snprintf(m->l2, sizeof m->l2, "flushed");
    m->rows_checked = 300;
    snprintf(m->host, sizeof m->host, "gpu-node-7");
    m->taken_at = taken;
}

/* A store holding an H200 measured under two stacks, values chosen to
 * exercise NaN, awkward doubles and text. */
static void populate(store *st)
{
    attn_device_info d;
    attn_stack s1, s2;
    store_measurement m;
    attn_shape mqa = {1, 8, 1, 50, 1018, 256, ATTN_F16, 0};
    attn_shape gqa = {2, 32, 8, 900, 900, 128, ATTN_BF16, 1};
    fixture_h200(&d, &s1, "550.54.15");
    fixture_h200(&d, &s2, "560.35.03");
    CHECK_EQ_INT(store_device_put(st, &d, &s1), 0);
    CHECK_EQ_INT(store_device_put(st, &d, &s2), 0);
    row(&m, &d, &s1, mqa, "fused/pad=8/tile=64x64", 28.8, 3.1e-4, 1767225600);
    m.time_us_copies = 31.000000000000004; /* needs all 17 digits */
    CHECK_EQ_INT(store_measurement_put(st, &m), 0);
    row(&m, &d, &s1, mqa, "folded/acc=f32/pad=1", 13.8, 0.1 + 0.2, 1767225660);
    CHECK_EQ_INT(store_measurement_put(st, &m), 0);
    row(&m, &d, &s2, mqa, "folded/acc=f32/pad=1", 13.7, 4.5e-4, 1767229200);
    m.max_abs_err = NAN;
    snprintf(m.note, sizeof m.note, "quotes \" and \\ and caf\xc3\xa9");
    CHECK_EQ_INT(store_measurement_put(st, &m), 0);
    row(&m, &d, &s2, gqa, "split_repeat/acc=f32/pad=8", NAN, NAN, 1767229320);
    m.status = STORE_FAILED;
    m.time_us_min = m.time_us_max = m.max_abs_err = NAN;
    m.n = 0;
    m.rows_checked = 0;
    snprintf(m.note, sizeof m.note, "cublasGemmEx: CUBLAS_STATUS_NOT_SUPPORTED");
    CHECK_EQ_INT(store_measurement_put(st, &m), 0);
    row(&m, &d, &s2, gqa, "fused/pad=1/tile=128x64", 412.5, 2.1e-3, 1767229260);
    m.time_us_copies = 1e-300;
    CHECK_EQ_INT(store_measurement_put(st, &m), 0);
}

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
           same_double(a->err_ratio, b->err_ratio) && strcmp(a->mode, b->mode) == 0 &&
           strcmp(a->l2, b->l2) == 0 && a->rows_checked == b->rows_checked &&
           strcmp(a->note, b->note) == 0 && strcmp(a->host, b->host) == 0 &&
           a->taken_at == b->taken_at;
}

/* FNV-1a over every row of every table, read through a separate
 * connection: "unchanged" means this number is unchanged. Returns 0 when
 * a table is missing. */
static uint64_t content_checksum(const char *path, int64_t *measurements)
{
    static const char *const sql[] = {
        "SELECT * FROM devices ORDER BY id",
        "SELECT * FROM stacks ORDER BY id",
        "SELECT * FROM shapes ORDER BY id",
        "SELECT * FROM measurements ORDER BY device_id, stack_id, shape_id, tactic",
        "SELECT * FROM jobs ORDER BY id",
        "SELECT * FROM job_shapes ORDER BY job_id, position",
        "SELECT count(*) FROM measurements"};
    sqlite3 *db = NULL;
    uint64_t h = hash_fnv1a64_init();
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        sqlite3_close(db);
        return 0;
    }
    for (size_t i = 0; i < sizeof sql / sizeof sql[0]; i++) {
        sqlite3_stmt *q = NULL;
        if (sqlite3_prepare_v2(db, sql[i], -1, &q, NULL) != SQLITE_OK) {
            sqlite3_close(db);
            return 0;
        }
        while (sqlite3_step(q) == SQLITE_ROW) {
            for (int c = 0; c < sqlite3_column_count(q); c++) {
                int type = sqlite3_column_type(q, c);
                h = hash_fnv1a64(h, &type, sizeof type);
                const void *p = sqlite3_column_blob(q, c);
                int n = sqlite3_column_bytes(q, c);
                if (p != NULL)
                    h = hash_fnv1a64(h, p, (size_t)n);
            }
            if (i == sizeof sql / sizeof sql[0] - 1 && measurements != NULL)
                *measurements = sqlite3_column_int64(q, 0);
        }
        sqlite3_finalize(q);
    }
    sqlite3_close(db);
    return h;
}

/* ---- round trips */

static void fleet_should_round_trip_every_field(void)
{
    char pa[300], pb[300], err[ATTUNE_ERRLEN] = "";
    store *a = fresh_store(pa, sizeof pa), *b = fresh_store(pb, sizeof pb);
    if (a == NULL || b == NULL)
        goto done;
    populate(a);
    const char *id = "GPU-2f6c3a1e-8b7d-4c5e-9a0b-1c2d3e4f5a6b";
    char *text = NULL, *text2 = NULL;
    CHECK_EQ_INT(store_export(a, "nvidia h200", &text), 0); /* by name, too */
    CHECK(text != NULL);
    if (text == NULL)
        goto done;
    store_import_stats stats;
    int rc = store_import(b, text, strlen(text), &stats, err, sizeof err);
    CHECK_MSG(rc == 0, "import: %s", err);
    CHECK_EQ_INT(stats.devices, 1);
    CHECK_EQ_INT(stats.stacks, 2);
    CHECK_EQ_INT(stats.measurements, 5);
    CHECK_EQ_INT(stats.skipped, 0);

    store_measurement *ra = NULL, *rb = NULL;
    int na = 0, nb = 0;
    CHECK_EQ_INT(store_measurements_all(a, id, &ra, &na), 0);
    CHECK_EQ_INT(store_measurements_all(b, id, &rb, &nb), 0);
    CHECK_EQ_INT(na, 5);
    CHECK_EQ_INT(nb, na);
    for (int i = 0; i < na && i < nb; i++)
        CHECK_MSG(same_measurement(&ra[i], &rb[i]), "row %d (%s) differs", i, ra[i].tactic);
    /* spot checks that "same" really looked at the values */
    for (int i = 0; i < nb; i++) {
        if (strcmp(rb[i].tactic, "fused/pad=8/tile=64x64") == 0)
            CHECK(rb[i].time_us_copies == 31.000000000000004);
        if (strcmp(rb[i].tactic, "fused/pad=1/tile=128x64") == 0)
            CHECK(rb[i].time_us_copies == 1e-300);
        if (strcmp(rb[i].tactic, "split_repeat/acc=f32/pad=8") == 0)
            CHECK(isnan(rb[i].time_us) && isnan(rb[i].rel_err) && rb[i].status == STORE_FAILED);
    }
    free(ra);
    free(rb);

    attn_device_info da, db;
    attn_stack sa, sb;
    CHECK_EQ_INT(store_device_get(a, id, &da, &sa), 0);
    CHECK_EQ_INT(store_device_get(b, id, &db, &sb), 0);
    CHECK_EQ_INT(db.index, -1); /* ordinals stay on their host */
    db.index = da.index;
    CHECK(memcmp(&da, &db, sizeof da) == 0);
    CHECK(memcmp(&sa, &sb, sizeof sa) == 0);
    CHECK_STR(sb.driver, "560.35.03");

    /* B exports the same table (but for the time and host of export). */
    CHECK_EQ_INT(store_export(b, id, &text2), 0);
    json_t *ja = json_loads(text, 0, NULL), *jb = text2 ? json_loads(text2, 0, NULL) : NULL;
    CHECK(ja != NULL && jb != NULL);
    if (ja != NULL && jb != NULL) {
        CHECK_STR(json_string_value(json_object_get(ja, "format")), "attune-fleet");
        CHECK_EQ_INT(json_integer_value(json_object_get(ja, "version")), 1);
        CHECK(json_equal(json_object_get(ja, "device"), json_object_get(jb, "device")));
        CHECK(json_equal(json_object_get(ja, "stacks"), json_object_get(jb, "stacks")));
        CHECK(json_equal(json_object_get(ja, "measurements"),
                         json_object_get(jb, "measurements")));
        json_t *m0 = json_array_get(json_object_get(ja, "measurements"), 0);
        CHECK(json_is_null(json_object_get(m0, "time_us_copies")) ||
              json_is_real(json_object_get(m0, "time_us_copies")));
    }
    json_decref(ja);
    json_decref(jb);

    /* The same table again: nothing new. */
    rc = store_import(b, text, strlen(text), &stats, err, sizeof err);
    CHECK_MSG(rc == 0, "re-import: %s", err);
    CHECK_EQ_INT(stats.devices, 0);
    CHECK_EQ_INT(stats.stacks, 0);
    CHECK_EQ_INT(stats.measurements, 0);
    CHECK_EQ_INT(stats.skipped, 5);
    free(text);
    free(text2);
done:
    store_close(a);
    store_close(b);
}

/* Change row i of a table's text (taken_at by dt, time_us to t). */
static char *edit_row(const char *text, int i, int64_t dt, double t)
{
    json_t *root = json_loads(text, 0, NULL);
    json_t *r = json_array_get(json_object_get(root, "measurements"), (size_t)i);
    json_int_t taken = json_integer_value(json_object_get(r, "taken_at"));
    json_object_set_new(r, "taken_at", json_integer(taken + dt));
    json_object_set_new(r, "time_us", json_real(t));
    json_object_set_new(r, "time_us_min", json_real(t));
    json_object_set_new(r, "time_us_max", json_real(t));
    char *out = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return out;
}

static void fleet_should_replace_only_older_rows(void)
{
    char pa[300], pb[300], err[ATTUNE_ERRLEN] = "";
    store *a = fresh_store(pa, sizeof pa), *b = fresh_store(pb, sizeof pb);
    char *text = NULL, *newer = NULL, *older = NULL;
    if (a == NULL || b == NULL)
        goto done;
    populate(a);
    const char *id = "GPU-2f6c3a1e-8b7d-4c5e-9a0b-1c2d3e4f5a6b";
    CHECK_EQ_INT(store_export(a, id, &text), 0);
    if (text == NULL)
        goto done;
    store_import_stats stats;
    CHECK_EQ_INT(store_import(b, text, strlen(text), &stats, err, sizeof err), 0);
    newer = edit_row(text, 0, 3600, 99.0);
    older = edit_row(text, 1, -3600, 77.0);
    CHECK_EQ_INT(store_import(b, newer, strlen(newer), &stats, err, sizeof err), 0);
    CHECK_EQ_INT(stats.measurements, 1);
    CHECK_EQ_INT(stats.skipped, 4);
    CHECK_EQ_INT(store_import(b, older, strlen(older), &stats, err, sizeof err), 0);
    CHECK_EQ_INT(stats.measurements, 0);
    CHECK_EQ_INT(stats.skipped, 5);
    store_measurement *rows = NULL;
    int n = 0, seen99 = 0, seen77 = 0;
    CHECK_EQ_INT(store_measurements_all(b, id, &rows, &n), 0);
    CHECK_EQ_INT(n, 5);
    for (int i = 0; i < n; i++) {
        seen99 += rows[i].time_us == 99.0;
        seen77 += rows[i].time_us == 77.0;
    }
    CHECK_EQ_INT(seen99, 1);
    CHECK_EQ_INT(seen77, 0);
    free(rows);
done:
    free(text);
    free(newer);
    free(older);
    store_close(a);
    store_close(b);
}

static void fleet_should_import_the_good_fixture(void)
{
    char path[300], err[ATTUNE_ERRLEN] = "";
    size_t len = 0;
    char *text = slurp("fleet_good.json", &len);
    CHECK_MSG(text != NULL, "cannot read %s/fleet_good.json", inputs_dir());
    store *st = fresh_store(path, sizeof path);
    if (text == NULL || st == NULL)
        goto done;
    /* The device is also local here: its ordinal survives the import. */
    attn_device_info d, got;
    attn_stack s, latest;
    fixture_h200(&d, &s, "550.54.15");
    d.index = 3;
    CHECK_EQ_INT(store_device_put(st, &d, &s), 0);
    store_import_stats stats;
    int rc = store_import(st, text, len, &stats, err, sizeof err);
    CHECK_MSG(rc == 0, "import: %s", err);
    CHECK_EQ_INT(stats.stacks, 1); /* 550.54.15 was known */
    CHECK_EQ_INT(stats.measurements, 5);
    CHECK_EQ_INT(stats.skipped, 0);
    CHECK_EQ_INT(store_device_get(st, d.id, &got, &latest), 0);
    CHECK_EQ_INT(got.index, 3);
    CHECK_STR(got.name, "NVIDIA H200");
    CHECK_EQ_INT(got.cc_major, 9);
    CHECK_EQ_INT(got.cc_minor, 0);
    CHECK_EQ_INT(got.mem_clock_mhz, 3201);

    store_measurement *rows = NULL;
    int n = 0, found = 0;
    CHECK_EQ_INT(store_measurements_all(st, d.id, &rows, &n), 0);
    CHECK_EQ_INT(n, 5);
    for (int i = 0; i < n; i++) {
        if (strcmp(rows[i].tactic, "fused/pad=1/tile=128x64") == 0) { /* re-emitted */
            found++;
            CHECK(rows[i].time_us == 412.5);
            CHECK_EQ_INT(rows[i].shape.hq, 32);
            CHECK_EQ_INT(rows[i].shape.causal, 1);
            CHECK_EQ_INT(rows[i].shape.dtype, ATTN_BF16);
            CHECK(isnan(rows[i].time_us_copies));
            CHECK_EQ_INT(rows[i].rows_checked, 512);
            CHECK_NEAR(rows[i].err_ratio, 1.0, 1e-12);
        }
        if (strcmp(rows[i].tactic, "split_repeat/acc=f32/pad=8") == 0) {
            found++;
            CHECK_EQ_INT(rows[i].status, STORE_FAILED);
            CHECK(isnan(rows[i].time_us) && isnan(rows[i].max_abs_err));
            CHECK_STR(rows[i].note, "cublasGemmEx: CUBLAS_STATUS_NOT_SUPPORTED");
            CHECK_STR(rows[i].host, "gpu-node-7");
            CHECK_EQ_INT(rows[i].taken_at, 1767229320);
        }
    }
    CHECK_EQ_INT(found, 2);
    free(rows);
done:
    free(text);
    store_close(st);
}

/* ---- hostile tables */

static const struct {
    const char *file;
    int rc;
} bad_tables[] = {
    {"fleet_bad_truncated.json", ATTUNE_EFORMAT},
    {"fleet_bad_ok_without_time.json", ATTUNE_EFORMAT},
    {"fleet_bad_trailing_garbage.json", ATTUNE_EFORMAT},
    {"fleet_bad_not_object.json", ATTUNE_EFORMAT},
    {"fleet_bad_empty.json", ATTUNE_EFORMAT},
    {"fleet_bad_b_string.json", ATTUNE_EFORMAT},
    {"fleet_bad_b_huge.json", ATTUNE_EFORMAT},
    {"fleet_bad_b_negative.json", ATTUNE_EFORMAT},
    {"fleet_bad_b_zero.json", ATTUNE_EFORMAT},
    {"fleet_bad_hq_not_multiple.json", ATTUNE_EFORMAT},
    {"fleet_bad_d_too_big.json", ATTUNE_EFORMAT},
    {"fleet_bad_elems_too_big.json", ATTUNE_EFORMAT},
    {"fleet_bad_dtype.json", ATTUNE_EFORMAT},
    {"fleet_bad_shape_key.json", ATTUNE_EFORMAT},
    {"fleet_bad_time_string.json", ATTUNE_EFORMAT},
    {"fleet_bad_time_negative.json", ATTUNE_EFORMAT},
    {"fleet_bad_time_huge.json", ATTUNE_EFORMAT},
    {"fleet_bad_min_above_median.json", ATTUNE_EFORMAT},
    {"fleet_bad_n_negative.json", ATTUNE_EFORMAT},
    {"fleet_bad_n_real.json", ATTUNE_EFORMAT},
    {"fleet_bad_rows_checked_string.json", ATTUNE_EFORMAT},
    {"fleet_bad_rel_err_negative.json", ATTUNE_EFORMAT},
    {"fleet_bad_taken_at_real.json", ATTUNE_EFORMAT},
    {"fleet_bad_taken_at_future.json", ATTUNE_EFORMAT},
    {"fleet_bad_version.json", ATTUNE_EVERSION},
    {"fleet_bad_version_string.json", ATTUNE_EFORMAT},
    {"fleet_bad_format.json", ATTUNE_EFORMAT},
    {"fleet_bad_status.json", ATTUNE_EFORMAT},
    {"fleet_bad_tactic.json", ATTUNE_EFORMAT},
    {"fleet_bad_tactic_pad.json", ATTUNE_EFORMAT},
    {"fleet_bad_tactic_type.json", ATTUNE_EFORMAT},
    {"fleet_bad_duplicate_row.json", ATTUNE_EFORMAT},
    {"fleet_bad_duplicate_row_spelling.json", ATTUNE_EFORMAT},
    {"fleet_bad_nan_string.json", ATTUNE_EFORMAT},
    {"fleet_bad_infinity_string.json", ATTUNE_EFORMAT},
    {"fleet_bad_nan_literal.json", ATTUNE_EFORMAT},
    {"fleet_bad_infinity_literal.json", ATTUNE_EFORMAT},
    {"fleet_bad_duplicate_key.json", ATTUNE_EFORMAT},
    {"fleet_bad_int_overflow.json", ATTUNE_EFORMAT},
    {"fleet_bad_nul_in_string.json", ATTUNE_EFORMAT},
    {"fleet_bad_missing_field.json", ATTUNE_EFORMAT},
    {"fleet_bad_missing_shape_field.json", ATTUNE_EFORMAT},
    {"fleet_bad_missing_device.json", ATTUNE_EFORMAT},
    {"fleet_bad_unknown_field.json", ATTUNE_EFORMAT},
    {"fleet_bad_long_note.json", ATTUNE_EFORMAT},
    {"fleet_bad_long_host.json", ATTUNE_EFORMAT},
    {"fleet_bad_long_tactic.json", ATTUNE_EFORMAT},
    {"fleet_bad_long_device_name.json", ATTUNE_EFORMAT},
    {"fleet_bad_long_device_id.json", ATTUNE_EFORMAT},
    {"fleet_bad_control_char_note.json", ATTUNE_EFORMAT},
    {"fleet_bad_unknown_stack.json", ATTUNE_EFORMAT},
    {"fleet_bad_stack_id_mismatch.json", ATTUNE_EFORMAT},
    {"fleet_bad_stack_listed_twice.json", ATTUNE_EFORMAT},
    {"fleet_bad_sql_device_id.json", ATTUNE_EFORMAT},
    {"fleet_bad_sql_stack.json", ATTUNE_EFORMAT},
    {"fleet_bad_device_kind.json", ATTUNE_EFORMAT},
    {"fleet_bad_device_cc.json", ATTUNE_EFORMAT},
    {"fleet_bad_memory_negative.json", ATTUNE_EFORMAT},
    {"fleet_bad_latest_stack_unknown.json", ATTUNE_EFORMAT},
    {"fleet_bad_measurements_not_array.json", ATTUNE_EFORMAT},
    {"fleet_bad_row_not_object.json", ATTUNE_EFORMAT},
};
#define NBAD (sizeof bad_tables / sizeof bad_tables[0])

static void fleet_should_reject_every_bad_fixture_unchanged(void)
{
    char path[300], err[ATTUNE_ERRLEN];
    store *st = fresh_store(path, sizeof path);
    if (st == NULL)
        return;
    populate(st);
    int64_t count0 = -1, count1 = -1;
    uint64_t before = content_checksum(path, &count0);
    CHECK(before != 0);
    CHECK_EQ_INT(count0, 5);
    for (size_t i = 0; i < NBAD; i++) {
        size_t len = 0;
        char *text = slurp(bad_tables[i].file, &len);
        CHECK_MSG(text != NULL, "cannot read %s", bad_tables[i].file);
        if (text == NULL)
            continue;
        store_import_stats stats = {9, 9, 9, 9, 9};
        err[0] = 0;
        int rc = store_import(st, text, len, &stats, err, sizeof err);
        CHECK_MSG(rc == bad_tables[i].rc, "%s: rc %d (%s), want %d", bad_tables[i].file, rc,
                  err, bad_tables[i].rc);
        CHECK_MSG(err[0] != 0, "%s: no message", bad_tables[i].file);
        CHECK(stats.devices == 0 && stats.stacks == 0 && stats.measurements == 0 &&
              stats.skipped == 0);
        uint64_t after = content_checksum(path, &count1);
        CHECK_MSG(after == before, "%s changed the database", bad_tables[i].file);
        CHECK_EQ_INT(count1, 5);
        if (getenv("ATTUNE_TEST_VERBOSE"))
            fprintf(stderr, "  %s: %s\n", bad_tables[i].file, err);
        free(text);
    }
    store_close(st);
}

/* Every fleet_bad_*.json in the inputs is in the table above: a new
 * fixture cannot be silently skipped. */
static void fleet_bad_fixtures_should_all_be_listed(void)
{
    DIR *dir = opendir(inputs_dir());
    CHECK_MSG(dir != NULL, "cannot open %s", inputs_dir());
    if (dir == NULL)
        return;
    struct dirent *e;
    int files = 0;
    while ((e = readdir(dir)) != NULL) {
        if (strncmp(e->d_name, "fleet_bad_", 10) != 0)
            continue;
        files++;
        int listed = 0;
        for (size_t i = 0; i < NBAD && !listed; i++)
            listed = strcmp(bad_tables[i].file, e->d_name) == 0;
        CHECK_MSG(listed, "%s is not in bad_tables", e->d_name);
    }
    closedir(dir);
    CHECK_EQ_INT(files, NBAD);
}

static void fleet_should_keep_sql_in_strings_as_data(void)
{
    char path[300], err[ATTUNE_ERRLEN] = "";
    size_t len = 0;
    char *text = slurp("fleet_sql_note.json", &len);
    store *st = fresh_store(path, sizeof path);
    CHECK(text != NULL);
    if (text == NULL || st == NULL)
        goto done;
    store_import_stats stats;
    int rc = store_import(st, text, len, &stats, err, sizeof err);
    CHECK_MSG(rc == 0, "import: %s", err);
    CHECK_EQ_INT(stats.measurements, 5);
    attn_device_info d;
    CHECK_EQ_INT(store_device_get(st, "GPU-2f6c3a1e-8b7d-4c5e-9a0b-1c2d3e4f5a6b", &d, NULL), 0);
    CHECK_STR(d.name, "Robert'); DROP TABLE devices;--");
    store_measurement *rows = NULL;
    int n = 0, found = 0;
    CHECK_EQ_INT(store_measurements_all(st, d.id, &rows, &n), 0);
    CHECK_EQ_INT(n, 5);
    for (int i = 0; i < n; i++)
        found += strcmp(rows[i].note, "'); DROP TABLE measurements;--") == 0;
    CHECK_EQ_INT(found, 1);
    free(rows);
    int64_t count = -1;
    CHECK(content_checksum(path, &count) != 0); /* every table still there */
    CHECK_EQ_INT(count, 5);
done:
    free(text);
    store_close(st);
}

static void fleet_should_refuse_oversized_tables(void)
{
    char path[300], err[ATTUNE_ERRLEN] = "";
    store *st = fresh_store(path, sizeof path);
    if (st == NULL)
        return;
    populate(st);
    uint64_t before = content_checksum(path, NULL);
    /* over 64 MiB of text: refused before parsing */
    size_t big = ((size_t)64 << 20) + 1;
    char *text = malloc(big);
    CHECK(text != NULL);
    if (text != NULL) {
        memset(text, ' ', big);
        CHECK_EQ_INT(store_import(st, text, big, NULL, err, sizeof err), ATTUNE_ETOOBIG);
        free(text);
    }
    /* over a million rows (each a 0: the count is checked first) */
    size_t rows = 1000001, cap = rows * 2 + 512;
    text = malloc(cap);
    CHECK(text != NULL);
    if (text != NULL) {
        size_t n = (size_t)snprintf(
            text, cap,
            "{\"format\":\"attune-fleet\",\"version\":1,\"exported_at\":1767312000,"
            "\"host\":\"h\",\"device\":{\"id\":\"CPU-0123456789abcdef\",\"name\":\"cpu\","
            "\"kind\":\"cpu\",\"cc\":\"0.0\",\"sm_count\":8,\"memory_mb\":1024,"
            "\"clock_mhz\":0,\"mem_clock_mhz\":0,\"latest_stack\":null},\"stacks\":[],"
            "\"measurements\":[");
        for (size_t i = 0; i < rows; i++) {
            text[n++] = '0';
            text[n++] = i + 1 < rows ? ',' : ']';
        }
        text[n++] = '}';
        err[0] = 0;
        CHECK_EQ_INT(store_import(st, text, n, NULL, err, sizeof err), ATTUNE_ETOOBIG);
        CHECK_MSG(strstr(err, "more than 1000000 measurements") != NULL, "err: %s", err);
        /* the scan stops where row 1000001 starts, before reading it: a
         * malformed rest (here no JSON at all, never closed) is never seen */
        memcpy(text + n - 3, "x", 2); /* row 1000001 is "x" */
        err[0] = 0;
        CHECK_EQ_INT(store_import(st, text, n - 2, NULL, err, sizeof err), ATTUNE_ETOOBIG);
        CHECK_MSG(strstr(err, "more than 1000000 measurements") != NULL, "err: %s", err);
        free(text);
    }
    CHECK(content_checksum(path, NULL) == before);
    store_close(st);
}

/* text[0..len) with exported_at set to exported and, when i >= 0, row
 * i's taken_at to taken (malloc'd, NUL-terminated). */
static char *set_times(const char *text, size_t len, int64_t exported, int i, int64_t taken)
{
    json_t *root = json_loadb(text, len, 0, NULL);
    json_object_set_new(root, "exported_at", json_integer(exported));
    if (i >= 0)
        json_object_set_new(json_array_get(json_object_get(root, "measurements"), (size_t)i),
                            "taken_at", json_integer(taken));
    char *out = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return out;
}

/* A table from a clock more than a day ahead is refused, naming the field
 * (and the row); within the day it is taken, but the device's last_seen
 * stays no later than now, so later writes of the device still apply; a
 * last_seen already in the future (stored before the check) holds none
 * back; a local row two days ahead of the clock is stored (what a push
 * sends). */
static void fleet_should_refuse_times_from_the_future(void)
{
    char path[300], err[ATTUNE_ERRLEN] = "";
    const char *id = "GPU-2f6c3a1e-8b7d-4c5e-9a0b-1c2d3e4f5a6b";
    size_t len = 0;
    char *text = slurp("fleet_good.json", &len), *t = NULL;
    store *st = fresh_store(path, sizeof path);
    sqlite3 *db = NULL;
    sqlite3_stmt *q = NULL;
    if (text == NULL || st == NULL)
        goto done;
    int64_t now = (int64_t)time(NULL), day = 86400;
    uint64_t before = content_checksum(path, NULL);
    t = set_times(text, len, now + 2 * day, -1, 0);
    CHECK(t != NULL);
    if (t == NULL)
        goto done;
    CHECK_EQ_INT(store_import(st, t, strlen(t), NULL, err, sizeof err), ATTUNE_EFORMAT);
    CHECK_MSG(strstr(err, "table: exported_at=") != NULL, "err: %s", err);
    free(t);
    t = set_times(text, len, now, 2, now + 2 * day);
    CHECK_EQ_INT(store_import(st, t, strlen(t), NULL, err, sizeof err), ATTUNE_EFORMAT);
    CHECK_MSG(strstr(err, "measurements[2]: taken_at=") != NULL, "err: %s", err);
    free(t);
    CHECK(content_checksum(path, NULL) == before);
    t = set_times(text, len, now + 3600, 2, now + 3600);
    CHECK_MSG(store_import(st, t, strlen(t), NULL, err, sizeof err) == 0, "import: %s", err);
    CHECK_EQ_INT(sqlite3_open(path, &db), SQLITE_OK);
    CHECK_EQ_INT(sqlite3_prepare_v2(db, "SELECT last_seen FROM devices WHERE id = ?1", -1, &q,
                                    NULL),
                 SQLITE_OK);
    sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
    CHECK(sqlite3_step(q) == SQLITE_ROW && sqlite3_column_int64(q, 0) <= (int64_t)time(NULL));
    sqlite3_reset(q);
    attn_device_info info;
    attn_stack stk;
    for (int pass = 0; pass < 2; pass++) {
        /* pass 1: a last_seen ten days ahead, as a store before the check kept */
        if (pass == 1)
            CHECK_EQ_INT(sqlite3_exec(db, "UPDATE devices SET last_seen = last_seen + 864000",
                                      NULL, NULL, NULL),
                         SQLITE_OK);
        CHECK_EQ_INT(store_device_get(st, id, &info, &stk), 0);
        int clock = info.clock_mhz + 1;
        info.clock_mhz = clock;
        CHECK_EQ_INT(store_device_put(st, &info, &stk), 0);
        CHECK_EQ_INT(store_device_get(st, id, &info, &stk), 0);
        CHECK_MSG(info.clock_mhz == clock, "pass %d: the device write held back", pass);
        CHECK(sqlite3_step(q) == SQLITE_ROW &&
              sqlite3_column_int64(q, 0) <= (int64_t)time(NULL));
        sqlite3_reset(q);
    }
    /* a row of this host's, taken before its clock was set back two days
     * (a Jetson without an RTC before NTP): stored, so a push sends it;
     * only imported tables are held to this host's clock */
    store_measurement m;
    attn_shape sh = {1, 8, 1, 50, 1018, 256, ATTN_F16, 0};
    row(&m, &info, &stk, sh, "fused/pad=8/tile=64x64", 28.8, 3.1e-4, now + 2 * day);
    CHECK_EQ_INT(store_measurement_put(st, &m), 0);
done:
    sqlite3_finalize(q);
    sqlite3_close(db);
    free(t);
    free(text);
    store_close(st);
}

/* fleet_scan indexes at most max_rows rows: exactly the limit passes, one
 * more fails with ETOOBIG where it starts (the garbage after it unread),
 * the index left empty. */
static void fleet_scan_should_stop_at_the_row_limit(void)
{
    char err[ATTUNE_ERRLEN] = "";
    json_t *root = NULL;
    fleet_rows rows;
    const char *ok = "{\"measurements\":[1,2,3]}";
    CHECK_EQ_INT(fleet_scan(ok, strlen(ok), 3, &root, &rows, err, sizeof err), 0);
    CHECK_EQ_INT(rows.n, 3);
    json_decref(root);
    fleet_rows_free(&rows);
    const char *over = "{\"measurements\":[1,2,3,{oops";
    CHECK_EQ_INT(fleet_scan(over, strlen(over), 3, &root, &rows, err, sizeof err),
                 ATTUNE_ETOOBIG);
    CHECK_MSG(strstr(err, "more than 3 measurements") != NULL, "err: %s", err);
    CHECK(root == NULL && rows.n == 0 && rows.off == NULL);
    CHECK_EQ_INT(fleet_scan(over, strlen(over), 4, &root, &rows, err, sizeof err),
                 ATTUNE_EFORMAT);
}

/* A failure inside the merge (after validation) rolls everything back:
 * here a trigger aborts the insert of the table's last row. */
static void fleet_should_merge_all_or_nothing(void)
{
    char path[300], err[ATTUNE_ERRLEN] = "";
    size_t len = 0;
    char *text = slurp("fleet_good.json", &len);
    store *st = fresh_store(path, sizeof path);
    sqlite3 *db = NULL;
    if (text == NULL || st == NULL)
        goto done;
    CHECK_EQ_INT(sqlite3_open(path, &db), SQLITE_OK);
    CHECK_EQ_INT(sqlite3_exec(db,
                              "CREATE TRIGGER boom BEFORE INSERT ON measurements "
                              "WHEN NEW.tactic = 'split_repeat/acc=f32/pad=8' "
                              "BEGIN SELECT RAISE(ABORT, 'boom'); END",
                              NULL, NULL, NULL),
                 SQLITE_OK);
    uint64_t before = content_checksum(path, NULL);
    store_import_stats stats;
    int rc = store_import(st, text, len, &stats, err, sizeof err);
    CHECK_MSG(rc == ATTUNE_EDB, "rc %d: %s", rc, err);
    CHECK_MSG(strstr(err, "boom") != NULL, "err: %s", err);
    CHECK(content_checksum(path, NULL) == before);
    CHECK_EQ_INT(sqlite3_exec(db, "DROP TRIGGER boom", NULL, NULL, NULL), SQLITE_OK);
    rc = store_import(st, text, len, &stats, err, sizeof err);
    CHECK_MSG(rc == 0, "import: %s", err);
    CHECK_EQ_INT(stats.measurements, 5);
done:
    sqlite3_close(db);
    free(text);
    store_close(st);
}

/* text with the first occurrence of from replaced by to (malloc'd). */
static char *replaced(const char *text, const char *from, const char *to)
{
    const char *at = strstr(text, from);
    CHECK_MSG(at != NULL, "'%s' not in the table", from);
    if (at == NULL)
        return strdup(text);
    size_t n = strlen(text) - strlen(from) + strlen(to);
    char *out = malloc(n + 1);
    size_t k = (size_t)(at - text);
    memcpy(out, text, k);
    strcpy(out + k, to);
    strcat(out, at + strlen(from));
    return out;
}

/* The streamed parse of store_import (store_fleet_scan.c: the rows kept as
 * text, parsed one at a time) accepts exactly the JSON that json_loadb
 * with JSON_REJECT_DUPLICATES accepts, at every level of the table. */
static void fleet_scan_should_refuse_what_the_parser_refuses(void)
{
    char pa[300], pb[300], err[ATTUNE_ERRLEN] = "";
    store *a = fresh_store(pa, sizeof pa), *b = fresh_store(pb, sizeof pb);
    char *text = NULL;
    if (a == NULL || b == NULL)
        goto done;
    populate(a);
    CHECK_EQ_INT(store_export(a, "GPU-2f6c3a1e-8b7d-4c5e-9a0b-1c2d3e4f5a6b", &text), 0);
    if (text == NULL)
        goto done;
    /* the export is compact: rows are "},{" apart, the array ends "}]" */
    static const struct {
        const char *from, *to;
        int ok;
    } cases[] = {
        {"\"measurements\":[", "\"measurements\" :\n [ ", 1},
        {"},{", "} ,\n\t{", 1},
        {"},{", "}{", 0},                       /* no comma between rows */
        {"},{", "},,{", 0},
        {"},{", "},1e999,{", 0},                /* a row jansson cannot read */
        {"},{", "},{\"a\":1,\"a\":2},{", 0},  /* a duplicate key inside a row */
        {"},{", "},\"\\ud800\",{", 0},          /* a lone surrogate */
        {"\"measurements\":[{", "\"measurements\":[,{", 0},
        {"\"format\":", "\"format\":\"x\",\"format\":", 0}, /* duplicate top key */
        {"\"host\":", "\"host\" \"x\",\"host\":", 0},       /* no colon */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *t = replaced(text, cases[i].from, cases[i].to);
        json_error_t je;
        json_t *ref = json_loadb(t, strlen(t), JSON_REJECT_DUPLICATES, &je);
        CHECK_MSG((ref != NULL) == cases[i].ok, "case %zu: json_loadb %s", i,
                  ref ? "accepts" : je.text);
        json_decref(ref);
        store_import_stats st;
        int rc = store_import(b, t, strlen(t), &st, err, sizeof err);
        CHECK_MSG(cases[i].ok ? rc == 0 : rc == ATTUNE_EFORMAT, "case %zu: rc %d (%s)", i, rc,
                  err);
        if (!cases[i].ok)
            CHECK_MSG(strstr(err, "not valid JSON: line 1, column") != NULL, "case %zu: %s", i,
                      err);
        free(t);
    }
    /* the end of the table: nothing may follow the object, and it must close */
    size_t n = strlen(text);
    char *t = malloc(n + 8);
    memcpy(t, text, n);
    memcpy(t + n, " x", 3);
    CHECK_EQ_INT(store_import(b, t, n + 2, NULL, err, sizeof err), ATTUNE_EFORMAT);
    memcpy(t + n, "\0", 2); /* a raw NUL after the object */
    CHECK_EQ_INT(store_import(b, t, n + 1, NULL, err, sizeof err), ATTUNE_EFORMAT);
    CHECK_EQ_INT(store_import(b, t, n - 1, NULL, err, sizeof err), ATTUNE_EFORMAT);
    CHECK_EQ_INT(store_import(b, "[]", 2, NULL, err, sizeof err), ATTUNE_EFORMAT);
    CHECK_MSG(strstr(err, "must be a JSON object") != NULL, "%s", err);
    CHECK_EQ_INT(store_import(b, "  ", 2, NULL, err, sizeof err), ATTUNE_EFORMAT);
    free(t);
    /* an empty measurements array: the table's device and stacks alone */
    t = replaced(text, "\"measurements\":[", "\"measurements\":[]}");
    *strstr(t, "[]}") = 0;
    strcat(t, "[]}");
    store_import_stats st;
    CHECK_EQ_INT(store_import(b, t, strlen(t), &st, err, sizeof err), 0);
    CHECK_EQ_INT(st.measurements, 0);
    free(t);
done:
    free(text);
    store_close(a);
    store_close(b);
}

static void fleet_export_should_refuse_unknown_devices(void)
{
    char path[300];
    store *st = fresh_store(path, sizeof path);
    if (st == NULL)
        return;
    char *text = (char *)1;
    CHECK_EQ_INT(store_export(st, "GPU-nope", &text), ATTUNE_ENOTFOUND);
    CHECK(text == NULL);
    /* a device without measurements exports an empty table */
    attn_device_info d;
    attn_stack s;
    fixture_h200(&d, &s, "550.54.15");
    CHECK_EQ_INT(store_device_put(st, &d, &s), 0);
    CHECK_EQ_INT(store_export(st, d.id, &text), 0);
    json_t *root = text ? json_loads(text, 0, NULL) : NULL;
    CHECK(root != NULL);
    CHECK_EQ_INT(json_array_size(json_object_get(root, "measurements")), 0);
    CHECK_EQ_INT(json_array_size(json_object_get(root, "stacks")), 1);
    CHECK_STR(json_string_value(json_object_get(json_object_get(root, "device"), "cc")), "9.0");
    json_decref(root);
    free(text);
    store_close(st);
}

/* The marked tactic of (stack, shape) among st's rows of the H200 ("" when
 * none, "2" when more than one). */
static void marked(store *st, const char *stack_id, const attn_shape *s, char *out, size_t len)
{
    store_measurement *m = NULL;
    int n = 0, marks = 0;
    attn_device_info d;
    attn_stack any;
    fixture_h200(&d, &any, "550.54.15");
    out[0] = 0;
    CHECK_EQ_INT(store_measurements_all(st, d.id, &m, &n), 0);
    for (int i = 0; i < n; i++)
        if (m[i].incumbent && strcmp(m[i].stack_id, stack_id) == 0 &&
            memcmp(&m[i].shape, s, sizeof *s) == 0 && marks++ == 0)
            snprintf(out, len, "%s", m[i].tactic);
    if (marks > 1)
        snprintf(out, len, "2");
    free(m);
}

/* Marks are not exported, and a device with marks (or one tuned here)
 * counts its unmarked (stack, shape)s as tunes in flight: an import marks
 * what it brought, on the fastest ok row, keeps the marks of tunes done
 * here, and marks nothing it did not bring. */
static void fleet_import_should_mark_what_it_brought(void)
{
    char pa[300], pb[300], pc[300], got[160], err[ATTUNE_ERRLEN] = "";
    store *a = fresh_store(pa, sizeof pa), *b = fresh_store(pb, sizeof pb),
          *c = fresh_store(pc, sizeof pc);
    char *text = NULL;
    if (a == NULL || b == NULL || c == NULL)
        goto done;
    populate(a);
    CHECK_EQ_INT(store_export(a, "nvidia h200", &text), 0);
    if (text == NULL)
        goto done;
    attn_device_info d;
    attn_stack s1, s2;
    store_measurement m;
    attn_shape mqa = {1, 8, 1, 50, 1018, 256, ATTN_F16, 0};
    attn_shape gqa = {2, 32, 8, 900, 900, 128, ATTN_BF16, 1};
    attn_shape other = {1, 4, 4, 64, 64, 64, ATTN_F16, 0};
    fixture_h200(&d, &s1, "550.54.15");
    fixture_h200(&d, &s2, "560.35.03");

    /* b: the same device's rows of another shape, unmarked (an import
     * before marks, or a first tune in flight) */
    CHECK_EQ_INT(store_device_put(b, &d, &s1), 0);
    row(&m, &d, &s1, other, "fused/pad=1/tile=64x64", 9.0, 1e-4, 1767225000);
    CHECK_EQ_INT(store_measurement_put(b, &m), 0);
    row(&m, &d, &s1, other, "split/acc=f32/pad=1", 7.0, 1e-4, 1767225000);
    CHECK_EQ_INT(store_measurement_put(b, &m), 0);
    int rc = store_import(b, text, strlen(text), NULL, err, sizeof err);
    CHECK_MSG(rc == 0, "import: %s", err);
    marked(b, s1.id, &mqa, got, sizeof got);
    CHECK_STR(got, "folded/acc=f32/pad=1"); /* 13.8 us against 31 with copies */
    marked(b, s2.id, &mqa, got, sizeof got);
    CHECK_STR(got, "folded/acc=f32/pad=1");
    marked(b, s2.id, &gqa, got, sizeof got);
    CHECK_STR(got, "fused/pad=1/tile=128x64"); /* the failed row is no winner */
    /* a shape the table does not bring keeps no mark: it may be a tune in
     * flight here, whose partial rows must not read as complete */
    marked(b, s1.id, &other, got, sizeof got);
    CHECK_STR(got, "");
    /* again: one mark each, where it was */
    rc = store_import(b, text, strlen(text), NULL, err, sizeof err);
    CHECK_MSG(rc == 0, "import: %s", err);
    marked(b, s2.id, &mqa, got, sizeof got);
    CHECK_STR(got, "folded/acc=f32/pad=1");

    /* c: the device tuned here: (s2, gqa) done with a slower winner kept
     * by its mark, (s1, other) in flight (unmarked) */
    CHECK_EQ_INT(store_device_put(c, &d, &s1), 0);
    CHECK_EQ_INT(store_device_put(c, &d, &s2), 0);
    row(&m, &d, &s2, gqa, "cudnn/eng=1/graph=comp/kcfg=0/pad=1", 420.0, 1e-3, 1767225000);
    CHECK_EQ_INT(store_measurement_put(c, &m), 0);
    CHECK_EQ_INT(store_winner_mark(c, d.id, s2.id, &gqa, m.tactic), 0);
    row(&m, &d, &s1, other, "split/acc=f32/pad=1", 7.0, 1e-4, 1767225000);
    CHECK_EQ_INT(store_measurement_put(c, &m), 0);
    rc = store_import(c, text, strlen(text), NULL, err, sizeof err);
    CHECK_MSG(rc == 0, "import: %s", err);
    marked(c, s2.id, &gqa, got, sizeof got);
    CHECK_STR(got, "cudnn/eng=1/graph=comp/kcfg=0/pad=1");
    marked(c, s1.id, &mqa, got, sizeof got);
    CHECK_STR(got, "folded/acc=f32/pad=1");
    marked(c, s2.id, &mqa, got, sizeof got);
    CHECK_STR(got, "folded/acc=f32/pad=1");
    marked(c, s1.id, &other, got, sizeof got);
    CHECK_STR(got, ""); /* still in flight */
done:
    free(text);
    store_close(a);
    store_close(b);
    store_close(c);
}

int main(void)
{
    RUN(fleet_should_round_trip_every_field);
    RUN(fleet_should_replace_only_older_rows);
    RUN(fleet_import_should_mark_what_it_brought);
    RUN(fleet_should_import_the_good_fixture);
    RUN(fleet_bad_fixtures_should_all_be_listed);
    RUN(fleet_should_reject_every_bad_fixture_unchanged);
    RUN(fleet_should_keep_sql_in_strings_as_data);
    RUN(fleet_should_refuse_oversized_tables);
    RUN(fleet_scan_should_stop_at_the_row_limit);
    RUN(fleet_should_refuse_times_from_the_future);
    RUN(fleet_should_merge_all_or_nothing);
    RUN(fleet_export_should_refuse_unknown_devices);
    RUN(fleet_scan_should_refuse_what_the_parser_refuses);
    return test_summary();
}
