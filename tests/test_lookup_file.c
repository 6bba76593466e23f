/* test_lookup_file.c -- lookups without a daemon (lookup/lookup_file.c,
 * lookup/attune_lookup.c, db/store_snapshot.c): a database file and its
 * exported table give the same answers, the database is never written,
 * "cpu" names the file's CPU, and bad files, bad arguments, unknown
 * devices and sets of variants with no tactic are errors with a reason. */
#include <math.h>
#include <sys/stat.h>

#include "lookup/attune_lookup.h"
#include "lookup/lookup_file.h"
#include "test.h"

static const attn_shape A = {1, 8, 2, 24, 40, 16, ATTN_F32, 0};

static store_measurement row(const attn_device *dev, const char *tactic, double us)
{
    store_measurement m;
    memset(&m, 0, sizeof m);
    snprintf(m.device_id, sizeof m.device_id, "%s", dev->info.id);
    snprintf(m.stack_id, sizeof m.stack_id, "%s", dev->stack.id);
    m.shape = A;
    snprintf(m.tactic, sizeof m.tactic, "%s", tactic);
    m.status = STORE_OK;
    m.time_us = m.time_us_min = m.time_us_max = us;
    m.time_us_copies = NAN;
    m.n = 10;
    m.rel_err = m.max_abs_err = 1e-6;
    snprintf(m.mode, sizeof m.mode, "wall");
    snprintf(m.l2, sizeof m.l2, "warm");
    snprintf(m.host, sizeof m.host, "test");
    m.rows_checked = 24;
    m.taken_at = 1700000000;
    return m;
}

/* A database at dir/a.db with the CPU device and three tactics of A, the
 * tune complete (split marked the winner), and its table at dir/a.json. */
static void make_files(const char *dir, attn_device *cpu, char *db, char *table, size_t len)
{
    attn_device devs[8];
    int n = attn_devices(devs, 8);
    CHECK(n >= 1 && strcmp(devs[0].info.kind, "cpu") == 0);
    *cpu = devs[0];
    snprintf(db, len, "%s/a.db", dir);
    snprintf(table, len, "%s/a.json", dir);
    store *st;
    char err[256];
    CHECK_EQ_INT(store_open(db, 1, &st, err, sizeof err), 0);
    CHECK_EQ_INT(store_device_put(st, &cpu->info, &cpu->stack), 0);
    const char *tactics[] = {"fused/pad=1", "split/acc=f32/pad=1", "folded/acc=f32/pad=1"};
    const double us[] = {30, 20, 25};
    for (int i = 0; i < 3; i++) {
        store_measurement m = row(cpu, tactics[i], us[i]);
        CHECK_EQ_INT(store_measurement_put(st, &m), 0);
    }
    CHECK_EQ_INT(store_winner_mark(st, cpu->info.id, cpu->stack.id, &A, tactics[1]), 0);
    char *json = NULL;
    CHECK_EQ_INT(store_export(st, cpu->info.id, &json), 0);
    FILE *f = fopen(table, "w");
    CHECK(f != NULL && fputs(json, f) >= 0 && fclose(f) == 0);
    free(json);
    store_close(st);
}

static void check_answers(const char *path, const attn_device *cpu)
{
    index_state *ix;
    index_answer a;
    char err[256];
    CHECK_EQ_INT(lookup_file_open(path, &ix, err, sizeof err), 0);
    CHECK_EQ_INT(index_lookup(ix, "cpu", &A, 0, &a), 0);
    CHECK_EQ_INT(a.source, INDEX_MEASURED);
    CHECK_STR(a.m.tactic, "split/acc=f32/pad=1");
    CHECK_STR(a.device_id, cpu->info.id);
    CHECK_EQ_INT(index_lookup(ix, cpu->info.id, &A, 0, &a), 0);
    CHECK_EQ_INT(index_lookup_in(ix, "cpu", &A, 0, 1u << ATTN_FOLDED, &a), 0);
    CHECK_STR(a.m.tactic, "folded/acc=f32/pad=1"); /* the best folded row */
    CHECK_EQ_INT(index_lookup(ix, "0", &A, 0, &a), ATTUNE_ENODEV); /* no GPU in the file */
    index_free(ix);
}

static void file_should_answer_as_the_index_of_its_rows(void)
{
    char dir[256], db[300], table[300];
    attn_device cpu;
    test_tmpdir(dir, sizeof dir);
    make_files(dir, &cpu, db, table, sizeof db);
    struct stat before, after;
    CHECK_EQ_INT(stat(db, &before), 0);
    check_answers(db, &cpu);
    check_answers(table, &cpu);
    CHECK_EQ_INT(stat(db, &after), 0); /* read-only: not even touched */
    CHECK(before.st_mtime == after.st_mtime && before.st_size == after.st_size);
}

/* A database's tune in flight (or cut short: rows, no winner mark) answers
 * nothing measured, as in attuned, on a device tuned in the file; an
 * imported device's rows (never marked) count whole. */
static void file_should_answer_measured_only_from_a_complete_tune(void)
{
    char dir[256], db[300], table[300], err[256];
    attn_device cpu;
    test_tmpdir(dir, sizeof dir);
    make_files(dir, &cpu, db, table, sizeof db);
    const attn_shape A2 = {2, 8, 2, 24, 40, 16, ATTN_F32, 0};
    attn_device imp = cpu;
    snprintf(imp.info.id, sizeof imp.info.id, "CPU-imported");
    snprintf(imp.info.name, sizeof imp.info.name, "Imported CPU");
    store *st;
    CHECK_EQ_INT(store_open(db, 0, &st, err, sizeof err), 0);
    CHECK_EQ_INT(store_device_put(st, &imp.info, &imp.stack), 0);
    store_measurement m = row(&cpu, "fused/pad=1", 5); /* in flight */
    m.shape = A2;
    CHECK_EQ_INT(store_measurement_put(st, &m), 0);
    m = row(&imp, "fused/pad=1", 7);
    m.shape = A2;
    CHECK_EQ_INT(store_measurement_put(st, &m), 0);
    store_close(st);
    index_state *ix;
    index_answer a;
    CHECK_EQ_INT(lookup_file_open(db, &ix, err, sizeof err), 0);
    CHECK_EQ_INT(index_lookup(ix, cpu.info.id, &A2, 0, &a), 0);
    CHECK(a.source != INDEX_MEASURED);
    CHECK(a.own_rows == 1 && a.complete == 0);
    CHECK(index_lookup(ix, cpu.info.id, &A, 0, &a) == 0 && a.source == INDEX_MEASURED);
    CHECK(index_lookup(ix, "CPU-imported", &A2, 0, &a) == 0 && a.source == INDEX_MEASURED);
    CHECK(index_lookup_in(ix, "CPU-imported", &A2, 0.5, 0, &a) == 0 &&
          a.source == INDEX_MEASURED);
    index_free(ix);
}

/* A fleet table's GPU has no ordinal (index -1): "0" names the file's
 * first such CUDA device, "1" the second, "2" none (docs/api.md: a file:
 * client asks the file's GPU 0). */
static void ordinals_should_name_a_tables_gpus_in_order(void)
{
    char dir[256], db[300], table[300], err[256];
    attn_device cpu;
    test_tmpdir(dir, sizeof dir);
    make_files(dir, &cpu, db, table, sizeof db);
    store *st;
    CHECK_EQ_INT(store_open(db, 0, &st, err, sizeof err), 0);
    for (int g = 0; g < 2; g++) {
        attn_device gpu = cpu;
        snprintf(gpu.info.id, sizeof gpu.info.id, "GPU-table-%d", g);
        snprintf(gpu.info.name, sizeof gpu.info.name, "Table GPU");
        snprintf(gpu.info.kind, sizeof gpu.info.kind, "cuda");
        gpu.info.index = -1;
        CHECK_EQ_INT(store_device_put(st, &gpu.info, &gpu.stack), 0);
    }
    store_close(st);
    index_state *ix;
    index_device_view v0, v1, v2;
    CHECK_EQ_INT(lookup_file_open(db, &ix, err, sizeof err), 0);
    CHECK_EQ_INT(index_device_find(ix, "0", &v0), 0);
    CHECK_EQ_INT(index_device_find(ix, "1", &v1), 0);
    CHECK(strncmp(v0.info.id, "GPU-table-", 10) == 0 &&
          strncmp(v1.info.id, "GPU-table-", 10) == 0 && strcmp(v0.info.id, v1.info.id) != 0);
    CHECK_EQ_INT(index_device_find(ix, "2", &v2), ATTUNE_ENODEV);
    CHECK_EQ_INT(index_device_find(ix, "cpu", &v2), 0);
    CHECK_STR(v2.info.id, cpu.info.id);
    index_free(ix);
}

static void table_api_should_answer_json_or_say_why(void)
{
    char dir[256], db[300], table[300], err[256], *json;
    attn_device cpu;
    attune_table *t;
    test_tmpdir(dir, sizeof dir);
    make_files(dir, &cpu, db, table, sizeof db);
    CHECK_EQ_INT(attune_table_abi(), ATTUNE_TABLE_ABI);
    CHECK_EQ_INT(attune_table_open(table, &t, err, sizeof err), 0);
    const long long dims[6] = {A.b, A.hq, A.hkv, A.sq, A.skv, A.d};
    CHECK_EQ_INT(attune_table_tactic(t, "cpu", dims, "f32", 0, 0, NULL, &json), 200);
    CHECK_MSG(strstr(json, "\"tactic\":\"split/acc=f32/pad=1\"") &&
              strstr(json, "\"source\":\"measured\""), "%s", json);
    attune_table_free(json);
    CHECK_EQ_INT(attune_table_tactic(t, "cpu", dims, "f8", 0, 0, NULL, &json), 400);
    CHECK(strstr(json, "dtype") != NULL);
    attune_table_free(json);
    CHECK_EQ_INT(attune_table_tactic(t, "cpu", dims, "f32", 0, 2.0, NULL, &json), 400);
    attune_table_free(json);
    CHECK_EQ_INT(attune_table_tactic(t, "cpu", dims, "f32", 0, 0, "nope", &json), 400);
    CHECK(strstr(json, "unknown variant 'nope'") != NULL);
    attune_table_free(json);
    CHECK_EQ_INT(attune_table_tactic(t, "GPU-x", dims, "f32", 0, 0, NULL, &json), 404);
    attune_table_free(json);
    CHECK_EQ_INT(attune_table_tactic(t, "cpu", dims, "f32", 0, 0, "cudnn", &json), 404);
    CHECK_MSG(strstr(json, "no tactic of variants=cudnn") != NULL, "%s", json);
    attune_table_free(json);
    attune_table_close(t);
    /* bad files */
    char junk[300];
    snprintf(junk, sizeof junk, "%s/junk.json", dir);
    FILE *f = fopen(junk, "w");
    CHECK(f != NULL && fputs("[1, 2", f) >= 0 && fclose(f) == 0);
    CHECK(attune_table_open(junk, &t, err, sizeof err) != 0 && t == NULL);
    CHECK(strstr(err, "neither an attune database nor a table") != NULL);
    snprintf(junk, sizeof junk, "%s/missing.db", dir);
    CHECK(attune_table_open(junk, &t, err, sizeof err) != 0 && strstr(err, "cannot read"));
}

int main(void)
{
    RUN(file_should_answer_as_the_index_of_its_rows);
    RUN(file_should_answer_measured_only_from_a_complete_tune);
    RUN(ordinals_should_name_a_tables_gpus_in_order);
    RUN(table_api_should_answer_json_or_say_why);
    return test_summary();
}
