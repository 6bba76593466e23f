/* test_pins.c -- pins (issue 28 item 1): the rule's checks and matching
 * (tuner/pin.h), their precedence in the lookup index for every source
 * (lookup/index.h: pinned, measured, fleet, predicted, default, with
 * variants=), their rows in the store (db/store_pins.h: put, update,
 * delete, a database from before pins) and their trip through a fleet
 * table (export, import, validation). */
#include <sqlite3.h>

#include "common/pin_json.h"
#include "db/store_pins.h"
#include "lookup/answer_json.h"
#include "lookup/index.h"
#include "test.h"

static const attn_shape A = {1, 4, 1, 16, 64, 32, ATTN_F32, 0};  /* MQA: every CPU variant */
static const attn_shape M = {1, 4, 4, 16, 64, 32, ATTN_F32, 0};  /* MHA: no folded */
static const attn_shape U = {1, 4, 1, 32, 64, 32, ATTN_F32, 0};  /* never measured */

static pin mk(pin_action a, const char *tactic, const char *shape, const char *dev,
              const char *model, int64_t id)
{
    pin p;
    memset(&p, 0, sizeof p);
    p.id = id;
    p.action = a;
    snprintf(p.tactic, sizeof p.tactic, "%s", tactic);
    snprintf(p.shape, sizeof p.shape, "%s", shape);
    snprintf(p.device, sizeof p.device, "%s", dev);
    snprintf(p.model, sizeof p.model, "%s", model);
    snprintf(p.reason, sizeof p.reason, "test");
    snprintf(p.author, sizeof p.author, "tester");
    return p;
}

static void check_should_normalise_and_refuse(void)
{
    char err[256];
    pin p = mk(PIN_EXCLUDE, "fused/pad=1", "*.hq8.hkv1.*.*.d256.f16.*", "", "", 0);
    CHECK_EQ_INT(pin_check(&p, err, sizeof err), 0);
    CHECK_STR(p.shape, "b*.hq8.hkv1.sq*.skv*.d256.f16.*");
    p = mk(PIN_EXCLUDE, "split", "b*.hq*.hkv*.sq*.skv*.d*.*.*", "", "", 0);
    CHECK(pin_check(&p, err, sizeof err) == 0 && p.shape[0] == 0); /* any shape */
    p = mk(PIN_FORCE, "fused/pad=8", "b1.hq4.hkv1.sq16.skv64.d32.f32.nc", "", "", 0);
    CHECK_EQ_INT(pin_check(&p, err, sizeof err), 0);
    p = mk(PIN_FORCE, "fused", "", "", "", 0); /* not complete */
    CHECK_EQ_INT(pin_check(&p, err, sizeof err), ATTUNE_EINVAL);
    CHECK(strstr(err, "complete") != NULL);
    /* a required field left out is said missing, not "must be a string" */
    json_t *o = json_pack("{s:s, s:s, s:s}", "action", "exclude", "tactic", "split",
                          "reason", "r");
    CHECK_EQ_INT(pin_from_json(o, "pin", &p, err, sizeof err), ATTUNE_EINVAL);
    CHECK_MSG(strstr(err, "\"author\" is missing") != NULL, "said: %s", err);
    json_decref(o);
    p = mk(PIN_EXCLUDE, "fused/pad", "", "", "", 0); /* half a part */
    CHECK_EQ_INT(pin_check(&p, err, sizeof err), ATTUNE_EINVAL);
    p = mk(PIN_EXCLUDE, "fused/pa=1", "", "", "", 0); /* a typo would exclude nothing */
    CHECK_EQ_INT(pin_check(&p, err, sizeof err), ATTUNE_EINVAL);
    CHECK(strstr(err, "unknown key 'pa'") != NULL);
    p = mk(PIN_EXCLUDE, "fused/tile=64x64/pad=1", "", "", "", 0); /* never a prefix */
    CHECK_EQ_INT(pin_check(&p, err, sizeof err), ATTUNE_EINVAL);
    p = mk(PIN_EXCLUDE, "fused/pad=1/tile=64x64", "", "", "", 0);
    CHECK_EQ_INT(pin_check(&p, err, sizeof err), 0);
    p = mk(PIN_EXCLUDE, "fusd", "", "", "", 0);
    CHECK_EQ_INT(pin_check(&p, err, sizeof err), ATTUNE_EINVAL);
    CHECK(strstr(err, "fusd") != NULL);
    p = mk(PIN_EXCLUDE, "fused", "b1.hq3.hkv2.sq1.skv1.d1.f16.nc", "", "", 0);
    CHECK_EQ_INT(pin_check(&p, err, sizeof err), ATTUNE_EINVAL);
    p = mk(PIN_EXCLUDE, "fused", "b*.hq*", "", "", 0);
    CHECK_EQ_INT(pin_check(&p, err, sizeof err), ATTUNE_EINVAL);
    p = mk(PIN_EXCLUDE, "fused", "", "CPU-1", "Test CPU", 0);
    CHECK_EQ_INT(pin_check(&p, err, sizeof err), ATTUNE_EINVAL);
    p = mk(PIN_EXCLUDE, "fused", "", "", "", 0);
    p.reason[0] = 0;
    CHECK_EQ_INT(pin_check(&p, err, sizeof err), ATTUNE_EINVAL);
    CHECK(strstr(err, "reason") != NULL);
}

static void match_should_cover_prefixes_and_patterns(void)
{
    pin e = mk(PIN_EXCLUDE, "fused", "", "", "", 1);
    CHECK(pin_tactic_matches(&e, "fused/pad=1"));
    CHECK(!pin_tactic_matches(&e, "fused_splitkv/pad=1/splits=2"));
    pin e1 = mk(PIN_EXCLUDE, "fused/pad=1", "", "", "", 1);
    CHECK(pin_tactic_matches(&e1, "fused/pad=1/tile=64x64"));
    CHECK(!pin_tactic_matches(&e1, "fused/pad=16"));
    CHECK(pin_shape_covers("b*.hq4.hkv1.sq*.skv*.d32.f32.*", "b1.hq4.hkv1.sq16.skv64.d32.f32.nc"));
    CHECK(!pin_shape_covers("b*.hq4.hkv1.sq*.skv*.d32.f16.*", "b1.hq4.hkv1.sq16.skv64.d32.f32.nc"));
    CHECK(!pin_shape_covers("b*.hq4.hkv1.sq1.skv*.d32.f32.*", "b1.hq4.hkv1.sq16.skv64.d32.f32.nc"));
    /* precedence: a key beats a pattern beats any shape; then the device */
    pin key = mk(PIN_FORCE, "split/acc=f32/pad=1", "b1.hq4.hkv1.sq16.skv64.d32.f32.nc", "", "", 1);
    pin pat = mk(PIN_FORCE, "split/acc=f32/pad=1", "b*.hq4.hkv1.sq*.skv*.d32.f32.*", "CPU-1", "", 2);
    pin dev = mk(PIN_FORCE, "split/acc=f32/pad=1", "", "CPU-1", "", 3);
    pin model = mk(PIN_FORCE, "split/acc=f32/pad=1", "", "", "test cpu", 4);
    pin any = mk(PIN_FORCE, "split/acc=f32/pad=1", "", "", "", 5);
    CHECK(pin_beats(&key, &pat) && pin_beats(&pat, &dev) && pin_beats(&dev, &model));
    CHECK(pin_beats(&model, &any) && !pin_beats(&any, &model));
    pin any2 = any;
    any2.id = 6;
    CHECK(pin_beats(&any2, &any)); /* the newer of two equal ones */
}

/* ---- the index */

static void device(attn_device_info *info, attn_stack *st, const char *id)
{
    memset(info, 0, sizeof *info);
    memset(st, 0, sizeof *st);
    snprintf(info->id, sizeof info->id, "%s", id);
    snprintf(info->name, sizeof info->name, "Test CPU");
    snprintf(info->kind, sizeof info->kind, "cpu");
    info->index = -1;
    snprintf(st->id, sizeof st->id, "cur");
}

static store_measurement row(const char *dev, attn_shape s, const char *tactic, double us,
                             int incumbent)
{
    store_measurement m;
    memset(&m, 0, sizeof m);
    snprintf(m.device_id, sizeof m.device_id, "%s", dev);
    snprintf(m.stack_id, sizeof m.stack_id, "cur");
    m.shape = s;
    snprintf(m.tactic, sizeof m.tactic, "%s", tactic);
    m.status = STORE_OK;
    m.time_us = m.time_us_min = m.time_us_max = us;
    m.time_us_copies = NAN;
    m.n = 10;
    m.rel_err = m.max_abs_err = 1e-7;
    m.err_ratio = NAN;
    m.incumbent = incumbent;
    m.taken_at = 100;
    return m;
}

/* Local CPU-L with shapes A and M measured (split fastest, then fused,
 * then folded), fleet CPU-F of the same model with shape U measured. */
static index_state *fixture(void)
{
    attn_device_info info;
    attn_stack st;
    index_state *ix = index_new(NULL);
    device(&info, &st, "CPU-L");
    CHECK_EQ_INT(index_device_put(ix, &info, &st, 1), 0);
    device(&info, &st, "CPU-F");
    CHECK_EQ_INT(index_device_put(ix, &info, &st, 0), 0);
    const char *t[3] = {"split/acc=f32/pad=1", "fused/pad=1", "folded/acc=f32/pad=1"};
    for (int i = 0; i < 3; i++) {
        store_measurement a = row("CPU-L", A, t[i], 10 + 10 * i, i == 0);
        store_measurement u = row("CPU-F", U, t[i], 10 + 10 * i, i == 0);
        CHECK(index_row_put(ix, &a) == 0 && index_row_put(ix, &u) == 0);
        if (i < 2) {
            store_measurement m = row("CPU-L", M, t[i], 10 + 10 * i, i == 0);
            CHECK_EQ_INT(index_row_put(ix, &m), 0);
        }
    }
    return ix;
}

static void set_pins(index_state *ix, const pin *p, int n)
{
    pin *c = n > 0 ? malloc((size_t)n * sizeof *c) : NULL;
    if (n > 0)
        memcpy(c, p, (size_t)n * sizeof *c);
    CHECK_EQ_INT(index_pins_set(ix, c, n), 0);
}

static void lookup_should_answer_a_force_as_pinned(void)
{
    index_state *ix = fixture();
    index_answer a;
    pin p = mk(PIN_FORCE, "fused/pad=1", "b1.hq4.hkv1.sq16.skv64.d32.f32.nc", "CPU-L", "", 1);
    set_pins(ix, &p, 1);
    CHECK(index_lookup(ix, "CPU-L", &A, 0, &a) == 0 && a.source == INDEX_PINNED);
    CHECK_STR(a.m.tactic, "fused/pad=1");
    CHECK_NEAR(a.m.time_us, 20, 1e-9); /* its own measurement */
    CHECK_EQ_INT(a.pinned.id, 1);
    CHECK_EQ_INT(a.own_rows, 3);
    CHECK_EQ_INT(a.complete, 1); /* tuned: no tune on miss for a pinned answer */
    /* not of the asked variants: answered among them instead */
    CHECK(index_lookup_in(ix, "CPU-L", &A, 0, 1u << ATTN_SPLIT, &a) == 0 &&
          a.source == INDEX_MEASURED);
    /* another device is not pinned */
    CHECK(index_lookup(ix, "CPU-F", &A, 0, &a) == 0 && a.source != INDEX_PINNED);
    /* a force the backend does not list for the shape never answers */
    pin nf = mk(PIN_FORCE, "folded/acc=f32/pad=1", "", "", "", 2);
    set_pins(ix, &nf, 1);
    CHECK(index_lookup(ix, "CPU-L", &M, 0, &a) == 0 && a.source == INDEX_MEASURED);
    CHECK_STR(a.m.tactic, "split/acc=f32/pad=1");
    CHECK(index_lookup(ix, "CPU-L", &U, 0, &a) == 0 && a.source == INDEX_PINNED);
    CHECK(isnan(a.m.time_us)); /* never measured here */
    CHECK(a.own_rows == 0 && a.complete == 0);
    CHECK_EQ_INT(index_tactic_listed(ix, "CPU-L", &M, "folded/acc=f32/pad=1"), 0);
    CHECK_EQ_INT(index_tactic_listed(ix, "CPU-L", &A, "folded/acc=f32/pad=1"), 1);
    /* unpinned: back to the measurement */
    set_pins(ix, NULL, 0);
    CHECK(index_lookup(ix, "CPU-L", &U, 0, &a) == 0 && a.source == INDEX_FLEET);
    index_free(ix);
}

static void lookup_should_prefer_the_specific_force_and_exclusions(void)
{
    index_state *ix = fixture();
    index_answer a;
    pin p[3] = {mk(PIN_FORCE, "fused/pad=1", "", "", "Test CPU", 1),
                mk(PIN_FORCE, "folded/acc=f32/pad=1", "b*.hq4.hkv1.sq16.skv*.d*.*.*", "", "", 2),
                mk(PIN_EXCLUDE, "folded", "", "CPU-L", "", 3)};
    set_pins(ix, p, 2);
    CHECK(index_lookup(ix, "CPU-L", &A, 0, &a) == 0 && a.source == INDEX_PINNED);
    CHECK_STR(a.m.tactic, "folded/acc=f32/pad=1"); /* the pattern beats the model */
    set_pins(ix, p, 3);
    CHECK(index_lookup(ix, "CPU-L", &A, 0, &a) == 0 && a.source == INDEX_PINNED);
    CHECK_STR(a.m.tactic, "fused/pad=1"); /* the exclusion beats that force */
    CHECK_EQ_INT(a.nexcluded, 1);
    index_free(ix);
}

static void lookup_should_never_answer_an_excluded_tactic(void)
{
    index_state *ix = fixture();
    index_answer a;
    pin x = mk(PIN_EXCLUDE, "split", "", "", "", 1);
    set_pins(ix, &x, 1);
    /* measured: the next best measured */
    CHECK(index_lookup(ix, "CPU-L", &A, 0, &a) == 0 && a.source == INDEX_MEASURED);
    CHECK_STR(a.m.tactic, "fused/pad=1");
    /* fleet: the fleet device's next best */
    CHECK(index_lookup(ix, "CPU-L", &U, 0, &a) == 0 && a.source == INDEX_FLEET);
    CHECK_STR(a.m.tactic, "fused/pad=1");
    /* predicted (a shape nobody measured) and the fleet device's own */
    attn_shape far = {2, 4, 1, 48, 96, 32, ATTN_F32, 0};
    CHECK(index_lookup(ix, "CPU-L", &far, 0, &a) == 0);
    CHECK(a.source == INDEX_PREDICTED || a.source == INDEX_NEAREST);
    CHECK(strncmp(a.m.tactic, "split/", 6) != 0);
    CHECK(index_lookup(ix, "CPU-F", &far, 0, &a) == 0 && strncmp(a.m.tactic, "split/", 6) != 0);
    /* with variants=split nothing is left: refused, never answered */
    CHECK_EQ_INT(index_lookup_in(ix, "CPU-L", &A, 0, 1u << ATTN_SPLIT, &a), ATTUNE_ENOTFOUND);
    CHECK_EQ_INT(a.nexcluded, 1);
    /* default: a device with nothing measured, fused excluded */
    pin xf = mk(PIN_EXCLUDE, "fused/pad=8", "", "", "", 2);
    set_pins(ix, &xf, 1);
    attn_device_info info;
    attn_stack st;
    device(&info, &st, "CPU-E");
    snprintf(info.name, sizeof info.name, "Other CPU");
    CHECK_EQ_INT(index_device_put(ix, &info, &st, 1), 0);
    CHECK(index_lookup(ix, "CPU-E", &A, 0, &a) == 0 && a.source == INDEX_DEFAULT);
    CHECK(strcmp(a.m.tactic, "fused/pad=8") != 0 && a.m.tactic[0] != 0);
    index_free(ix);
}

/* A 404 blames the pins only when the backend lists a variant asked for:
 * variants=cudnn on the CPU is refused for the listing, pin or not. */
static void refusal_should_blame_pins_only_when_the_backend_lists_the_variants(void)
{
    index_state *ix = fixture();
    index_answer a;
    char why[256];
    variant_set cudnn = 1u << ATTN_CUDNN, split = 1u << ATTN_SPLIT;
    pin x = mk(PIN_EXCLUDE, "fused/pad=1", "b*.hq4.hkv1.sq*.skv*.d*.f32.*", "", "", 1);
    set_pins(ix, &x, 1);
    CHECK_EQ_INT(index_lookup_in(ix, "CPU-L", &U, 0, cudnn, &a), ATTUNE_ENOTFOUND);
    CHECK_EQ_INT(a.nexcluded, 1);
    answer_no_tactic_text(&a, cudnn, why, sizeof why);
    CHECK_MSG(strstr(why, "the backend lists only") != NULL, "%s", why);
    CHECK(strstr(why, "pin") == NULL);
    /* an exclusion that does leave nothing of a listed variant is named */
    pin xs = mk(PIN_EXCLUDE, "split", "", "", "", 2);
    set_pins(ix, &xs, 1);
    CHECK_EQ_INT(index_lookup_in(ix, "CPU-L", &U, 0, split, &a), ATTUNE_ENOTFOUND);
    answer_no_tactic_text(&a, split, why, sizeof why);
    CHECK_MSG(strstr(why, "1 exclusion pin") != NULL, "%s", why);
    index_free(ix);
}

/* ---- the store and fleet tables */

static void store_should_keep_pins_and_carry_them_in_tables(void)
{
    char dir[256], path[512], err[256];
    test_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/a.db", dir);
    store *st = NULL;
    CHECK_EQ_INT(store_open(path, 1, &st, err, sizeof err), 0);
    attn_device_info info;
    attn_stack stk;
    device(&info, &stk, "CPU-0123456789abcdef");
    attn_stack_finish(&stk);
    CHECK_EQ_INT(store_device_put(st, &info, &stk), 0);
    store_measurement m = row(info.id, A, "fused/pad=1", 10, 1);
    snprintf(m.stack_id, sizeof m.stack_id, "%s", stk.id);
    CHECK_EQ_INT(store_measurement_put(st, &m), 0);
    pin p = mk(PIN_FORCE, "fused/pad=8", "", info.id, "", 0), q = p;
    int added = 0;
    CHECK(store_pin_put(st, &p, &added, err, sizeof err) == 0 && added && p.id > 0);
    snprintf(q.reason, sizeof q.reason, "again");
    CHECK(store_pin_put(st, &q, &added, err, sizeof err) == 0 && !added && q.id == p.id);
    pin other = mk(PIN_EXCLUDE, "split", "", "CPU-ffffffffffffffff", "", 0);
    CHECK_EQ_INT(store_pin_put(st, &other, &added, err, sizeof err), 0);
    char *json = NULL;
    CHECK_EQ_INT(store_export(st, info.id, &json), 0);
    CHECK(json != NULL && strstr(json, "\"pins\"") != NULL && strstr(json, "again") != NULL);
    CHECK(strstr(json, "CPU-ffffffffffffffff") == NULL); /* another device's pin stays */
    store *mem = NULL;
    store_import_stats stats;
    CHECK_EQ_INT(store_open(":memory:", 1, &mem, err, sizeof err), 0);
    CHECK_EQ_INT(store_import(mem, json, strlen(json), &stats, err, sizeof err), 0);
    CHECK_EQ_INT(stats.pins, 1);
    pin *got = NULL;
    int n = 0;
    CHECK(store_pins_list(mem, &got, &n) == 0 && n == 1 && strcmp(got[0].tactic, "fused/pad=8") == 0);
    free(got);
    /* a table cannot pin another device: its pin moved to another id is
     * refused, naming it, and nothing of the table is taken */
    {
        char *moved = strdup(json);
        char *pins_at = moved != NULL ? strstr(moved, "\"pins\"") : NULL;
        char *dev_at = pins_at != NULL ? strstr(pins_at, info.id) : NULL;
        CHECK(dev_at != NULL);
        if (dev_at != NULL) {
            memcpy(dev_at, "CPU-ffffffffffffffff", 20);
            store *fresh = NULL;
            CHECK_EQ_INT(store_open(":memory:", 1, &fresh, err, sizeof err), 0);
            CHECK_EQ_INT(store_import(fresh, moved, strlen(moved), &stats, err, sizeof err), ATTUNE_EFORMAT);
            CHECK_MSG(strstr(err, "pins[0]") != NULL && strstr(err, "cannot apply") != NULL &&
                          strstr(err, "CPU-ffffffffffffffff") != NULL,
                      "%s", err);
            CHECK(store_pins_list(fresh, &got, &n) == 0 && n == 0);
            free(got);
            store_close(fresh);
        }
        free(moved);
    }
    char *bad = strstr(json, "fused/pad=8") != NULL ? json : NULL;
    if (bad != NULL)
        memcpy(strstr(bad, "fused/pad=8"), "fused/pad=3", 11); /* an invalid pin */
    CHECK_EQ_INT(store_import(mem, json, strlen(json), &stats, err, sizeof err), ATTUNE_EFORMAT);
    CHECK(strstr(err, "pins[0]") != NULL);
    free(json);
    store_close(mem);
    CHECK_EQ_INT(store_pin_delete(st, p.id, NULL), 0);
    CHECK_EQ_INT(store_pin_delete(st, p.id, NULL), ATTUNE_ENOTFOUND);
    store_close(st);
}

/* A database of the current schema turned back into an older one. */
static void older_db(const char *path, const char *sql)
{
    char err[256];
    store *st = NULL;
    CHECK_EQ_INT(store_open(path, 1, &st, err, sizeof err), 0);
    store_close(st);
    sqlite3 *db = NULL;
    CHECK(sqlite3_open(path, &db) == SQLITE_OK && sqlite3_exec(db, sql, 0, 0, 0) == SQLITE_OK);
    sqlite3_close(db);
}

static void store_should_migrate_a_database_from_before_pins(void)
{
    char dir[256], path[512], err[256];
    test_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/v5.db", dir);
    older_db(path, "DROP TABLE pins; ALTER TABLE measurements DROP COLUMN noisy; "
                   "ALTER TABLE measurements DROP COLUMN src_rel_err; "
                   "PRAGMA user_version = 5;");
    store *st = NULL;
    CHECK_EQ_INT(store_open(path, 0, &st, err, sizeof err), 0);
    pin p = mk(PIN_EXCLUDE, "split", "", "", "", 0);
    pin *got = NULL;
    int n = -1;
    CHECK(store_pins_list(st, &got, &n) == 0 && n == 0);
    CHECK_EQ_INT(store_pin_put(st, &p, NULL, err, sizeof err), 0);
    store_close(st);
    /* version 6: pins without tombstones; they changed when they were made */
    snprintf(path, sizeof path, "%s/v6.db", dir);
    older_db(path, "ALTER TABLE pins DROP COLUMN removed; ALTER TABLE pins DROP COLUMN "
                   "updated_at; INSERT INTO pins(action, tactic, reason, author, created_at) "
                   "VALUES ('exclude', 'split', 'r', 'a', 77); "
                   "ALTER TABLE measurements DROP COLUMN noisy; "
                   "ALTER TABLE measurements DROP COLUMN src_rel_err; PRAGMA user_version = 6;");
    CHECK_EQ_INT(store_open(path, 0, &st, err, sizeof err), 0);
    CHECK(store_pins_list(st, &got, &n) == 0 && n == 1);
    CHECK(n == 1 && got[0].updated_at == 77 && got[0].removed == 0);
    free(got);
    store_close(st);
}

/* Merges keep the last writer: a removal is not undone by an older copy,
 * a newer copy revives it; the tombstones are what fleet sync sends. */
static void store_should_merge_pins_last_writer_wins(void)
{
    char err[256];
    store *st = NULL;
    CHECK_EQ_INT(store_open(":memory:", 1, &st, err, sizeof err), 0);
    pin p = mk(PIN_EXCLUDE, "split", "", "", "", 0), *got = NULL;
    int added = 0, n = 0;
    CHECK_EQ_INT(store_pin_put(st, &p, &added, err, sizeof err), 0);
    CHECK_EQ_INT(store_pin_delete(st, p.id, NULL), 0);
    CHECK(store_pins_list(st, &got, &n) == 0 && n == 0);
    CHECK(store_pins_all(st, &got, &n) == 0 && n == 1 && got[0].removed == 1);
    int64_t removed_at = n == 1 ? got[0].updated_at : 0;
    CHECK(removed_at > p.updated_at); /* later than the pin, even in the same second */
    free(got);
    pin old = p;
    old.updated_at = removed_at - 10; /* an older copy of the rule */
    CHECK(store_pins_merge(st, &old, 1, &added, NULL) == 0 && added == 0);
    CHECK(store_pins_list(st, &got, &n) == 0 && n == 0);
    pin newer = p;
    newer.updated_at = removed_at + 10;
    CHECK(store_pins_merge(st, &newer, 1, &added, NULL) == 0 && added == 1);
    CHECK(store_pins_list(st, &got, &n) == 0 && n == 1);
    free(got);
    pin gone = newer;
    gone.removed = 1;
    gone.updated_at = removed_at + 20; /* removed elsewhere later */
    CHECK(store_pins_merge(st, &gone, 1, &added, NULL) == 0 && added == 0);
    CHECK(store_pins_list(st, &got, &n) == 0 && n == 0);
    CHECK_EQ_INT(store_pin_put(st, &p, &added, err, sizeof err), 0); /* pinned here again */
    CHECK(added == 1 && store_pins_list(st, &got, &n) == 0 && n == 1);
    free(got);
    store_close(st);
}

/* A fleet pull merges what fits: past PIN_MAX rules in force the new rules
 * are left out and counted (skipped), not an error that rolls the merge
 * back; tombstones and changes to stored rules still apply, and the rules
 * of this store's devices get the room before other hosts' device pins.
 * An import (skipped NULL) still fails with ETOOBIG. */
static void store_should_leave_out_fleet_pins_past_the_limit(void)
{
    char err[256], name[64];
    store *st = NULL;
    CHECK_EQ_INT(store_open(":memory:", 1, &st, err, sizeof err), 0);
    attn_device_info info;
    attn_stack stk;
    device(&info, &stk, "CPU-0123456789abcdef");
    attn_stack_finish(&stk);
    CHECK_EQ_INT(store_device_put(st, &info, &stk), 0);
    /* PIN_MAX - 2 rules here, one of them removed by the pull */
    pin kept = mk(PIN_EXCLUDE, "split", "", "", "", 0);
    int added = 0, skipped = -1, n = 0;
    CHECK_EQ_INT(store_pin_put(st, &kept, &added, err, sizeof err), 0);
    for (int i = 1; i < PIN_MAX - 2; i++) {
        snprintf(name, sizeof name, "CPU-here-%d", i);
        pin p = mk(PIN_EXCLUDE, "split", "", name, "", 0);
        CHECK_EQ_INT(store_pin_put(st, &p, &added, err, sizeof err), 0);
    }
    /* the server's, newest first: 3 other hosts' device pins, then a rule
     * of this store's device, the tombstone, a generic rule */
    pin in[6];
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "GPU-elsewhere-%d", i);
        in[i] = mk(PIN_EXCLUDE, "fused", "", name, "", 0);
        in[i].updated_at = kept.updated_at + 100 - i;
    }
    in[3] = mk(PIN_FORCE, "fused/pad=8", "", info.id, "", 0);
    in[4] = kept;
    in[4].removed = 1;
    in[4].updated_at = kept.updated_at + 10;
    in[5] = mk(PIN_EXCLUDE, "fused", "", "", "", 0);
    in[3].updated_at = in[5].updated_at = kept.updated_at + 5;
    CHECK_EQ_INT(store_pins_merge(st, in, 6, &added, &skipped), 0);
    CHECK_EQ_INT(added, 3);   /* the local force, the generic rule, one other host's */
    CHECK_EQ_INT(skipped, 2); /* the other two hosts' pins */
    pin *got = NULL;
    CHECK(store_pins_list(st, &got, &n) == 0 && n == PIN_MAX);
    int force = 0, generic = 0, split = 0, elsewhere = 0;
    for (int i = 0; i < n; i++) {
        force += got[i].action == PIN_FORCE && strcmp(got[i].device, info.id) == 0;
        generic += strcmp(got[i].tactic, "fused") == 0 && got[i].device[0] == 0;
        split += strcmp(got[i].tactic, "split") == 0 && got[i].device[0] == 0;
        elsewhere += strncmp(got[i].device, "GPU-elsewhere-", 14) == 0;
    }
    free(got);
    CHECK_EQ_INT(force, 1);
    CHECK_EQ_INT(generic, 1);
    CHECK_EQ_INT(split, 0); /* the tombstone applied */
    CHECK_EQ_INT(elsewhere, 1);
    pin extra = mk(PIN_EXCLUDE, "fused/pad=1", "", "", "", 0);
    extra.updated_at = 1;
    CHECK_EQ_INT(store_pins_merge(st, &extra, 1, &added, NULL), ATTUNE_ETOOBIG); /* an import */
    CHECK(store_pins_merge(st, &extra, 1, &added, &skipped) == 0 && added == 0 && skipped == 1);
    store_close(st);
}

int main(void)
{
    RUN(check_should_normalise_and_refuse);
    RUN(match_should_cover_prefixes_and_patterns);
    RUN(lookup_should_answer_a_force_as_pinned);
    RUN(lookup_should_prefer_the_specific_force_and_exclusions);
    RUN(lookup_should_never_answer_an_excluded_tactic);
    RUN(refusal_should_blame_pins_only_when_the_backend_lists_the_variants);
    RUN(store_should_keep_pins_and_carry_them_in_tables);
    RUN(store_should_migrate_a_database_from_before_pins);
    RUN(store_should_merge_pins_last_writer_wins);
    RUN(store_should_leave_out_fleet_pins_past_the_limit);
    return test_summary();
}
