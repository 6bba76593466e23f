/* store_schema.c -- the store's schema and its forward migrations.
 *
 * The version lives in PRAGMA user_version. Version history:
 *
 *   1  devices (no clocks), stacks, shapes, measurements (no time_us_copies,
 *      rows_checked, note, host), jobs, job_shapes.
 *   2  measurements gain time_us_copies (pad/unpad copies included),
 *      rows_checked and note (why a tactic was unsupported or failed) and
 *      the provenance host; devices gain clock_mhz and mem_clock_mhz.
 *   3  measurements gain incumbent: 1 on the row the last tune of its
 *      (device, stack, shape) chose as winner (tuner/select.h's hysteresis).
 *   4  stacks gain power: the power mode the stack's rows were taken in
 *      (kernels/power.h; part of the stack id when not empty).
 *   5  jobs gain kind: 'tune' (explicit) or 'miss' (tune on miss).
 *   6  pins: an operator's force/exclude rules (tuner/pin.h, db/store_pins.h).
 *   7  pins gain updated_at and removed: a removed pin stays as a tombstone,
 *      so that fleet sync and imports merge rules last-writer-wins.
 *   8  measurements gain noisy: 1 on a row whose timing stayed noisy after
 *      the tuner's re-measures (tuner/noise.h); kept out of answers and
 *      measured again by the next tune.
 *   9  no new column: pulled fleet devices (FLEET-<hash>) take the ids of
 *      their models as db/device_model.h defines them now (memory rounded to
 *      its built size), two old ids of one model merged into one.
 *  10  FP8 (issue 30): shapes.dtype may be 'e4m3' (the table rebuilt: a
 *      CHECK cannot be altered in place), and measurements gain
 *      src_rel_err, an e4m3 row's error against the reference of the bf16
 *      source its inputs were quantized from (NULL for other dtypes).
 *
 * A new database is created at the current version directly; an older one
 * is migrated step by step, each step and the user_version bump in one
 * BEGIN IMMEDIATE transaction, so a crash mid-migration leaves the old
 * version intact. docs/schema.md describes the tables. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet_pg.h"
#include "store_internal.h"

/* The pins table (version 6): one rule a row, unique by its identity (the
 * model compared in any case, as device names are). */
#define PINS_TABLE_V6                                                           \
    "CREATE TABLE pins ("                                                    \
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,"                                \
    "  action TEXT NOT NULL CHECK (action IN ('force', 'exclude')),"         \
    "  tactic TEXT NOT NULL,"                                                \
    "  shape TEXT NOT NULL DEFAULT '',"                                      \
    "  device TEXT NOT NULL DEFAULT '',"                                     \
    "  model TEXT NOT NULL DEFAULT '' COLLATE NOCASE,"                       \
    "  reason TEXT NOT NULL,"                                                \
    "  author TEXT NOT NULL,"                                                \
    "  created_at INTEGER NOT NULL,"                                         \
    "  UNIQUE (action, tactic, shape, device, model)"                        \
    ");"

/* Version 7: when the rule last changed (written, rewritten, removed; unix
 * seconds) and whether it is removed: the last writer wins a merge. */
#define PINS_COLUMNS_V7                                                      \
    "ALTER TABLE pins ADD COLUMN updated_at INTEGER NOT NULL DEFAULT 0;"     \
    "ALTER TABLE pins ADD COLUMN removed INTEGER NOT NULL DEFAULT 0"         \
    " CHECK (removed IN (0, 1));"

/* The shapes table (version 10: dtype e4m3 allowed); `name` is what the
 * statement creates, so that migration 9 -> 10 builds it beside the old
 * one before the swap. */
#define SHAPES_TABLE_V10(name)                                                  \
    "CREATE TABLE " name " ("                                                  \
    "  id INTEGER PRIMARY KEY,"                                                \
    "  key TEXT NOT NULL UNIQUE," /* attn_shape_key */                         \
    "  b INTEGER NOT NULL, hq INTEGER NOT NULL, hkv INTEGER NOT NULL,"         \
    "  sq INTEGER NOT NULL, skv INTEGER NOT NULL, d INTEGER NOT NULL,"         \
    "  dtype TEXT NOT NULL CHECK (dtype IN ('f16', 'bf16', 'f32', 'e4m3')),"   \
    "  causal INTEGER NOT NULL CHECK (causal IN (0, 1))"                       \
    ");"

/* The current schema, created in one go on an empty database. Kept equal
 * to version 1 + every migration, column order included (added columns go
 * last), so a migrated database and a fresh one are the same tables. */
static const char schema_current[] =
    "CREATE TABLE stacks ("
    "  id TEXT PRIMARY KEY NOT NULL,"     /* 16 hex, attn_stack_finish */
    "  driver TEXT NOT NULL,"
    "  runtime TEXT NOT NULL,"
    "  blas TEXT NOT NULL,"
    "  attune TEXT NOT NULL,"
    "  kernels TEXT NOT NULL,"
    "  first_seen INTEGER NOT NULL,"      /* unix seconds */
    "  power TEXT NOT NULL DEFAULT ''"    /* kernels/power.h key, '' unknown */
    ");"
    "CREATE TABLE devices ("
    "  id TEXT PRIMARY KEY NOT NULL,"     /* GPU-<uuid> / CPU-<hex> */
    "  name TEXT NOT NULL,"
    "  kind TEXT NOT NULL CHECK (kind IN ('cpu', 'cuda')),"
    "  idx INTEGER NOT NULL DEFAULT -1,"  /* local CUDA ordinal, -1 CPU/remote */
    "  cc_major INTEGER NOT NULL DEFAULT 0,"
    "  cc_minor INTEGER NOT NULL DEFAULT 0,"
    "  sm_count INTEGER NOT NULL DEFAULT 0,"
    "  memory_mb INTEGER NOT NULL DEFAULT 0,"
    "  latest_stack TEXT REFERENCES stacks(id),"
    "  first_seen INTEGER NOT NULL,"
    "  last_seen INTEGER NOT NULL,"
    "  clock_mhz INTEGER NOT NULL DEFAULT 0,"
    "  mem_clock_mhz INTEGER NOT NULL DEFAULT 0"
    ");"
    "CREATE INDEX devices_name ON devices(name COLLATE NOCASE);"
    SHAPES_TABLE_V10("shapes")
    "CREATE TABLE measurements ("
    "  device_id TEXT NOT NULL REFERENCES devices(id),"
    "  stack_id TEXT NOT NULL REFERENCES stacks(id),"
    "  shape_id INTEGER NOT NULL REFERENCES shapes(id),"
    "  tactic TEXT NOT NULL,"             /* canonical attn_tactic_str */
    "  status TEXT NOT NULL"
    "    CHECK (status IN ('ok', 'unsupported', 'failed', 'inaccurate')),"
    "  time_us REAL, time_us_min REAL, time_us_max REAL," /* NULL = NaN */
    "  n INTEGER NOT NULL DEFAULT 0,"
    "  max_abs_err REAL, rel_err REAL,"
    "  mode TEXT NOT NULL DEFAULT '',"
    "  l2 TEXT NOT NULL DEFAULT '',"
    "  taken_at INTEGER NOT NULL,"        /* unix seconds */
    "  time_us_copies REAL,"
    "  rows_checked INTEGER NOT NULL DEFAULT 0,"
    "  note TEXT NOT NULL DEFAULT '',"
    "  host TEXT NOT NULL DEFAULT '',"
    "  incumbent INTEGER NOT NULL DEFAULT 0 CHECK (incumbent IN (0, 1)),"
    "  noisy INTEGER NOT NULL DEFAULT 0 CHECK (noisy IN (0, 1)),"
    "  src_rel_err REAL,"                 /* e4m3 only: vs the bf16 source */
    "  PRIMARY KEY (device_id, stack_id, shape_id, tactic)"
    ");"
    "CREATE INDEX measurements_shape ON measurements(device_id, shape_id);"
    "CREATE TABLE jobs ("
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  device_id TEXT NOT NULL,"          /* no FK: a job may precede its device row */
    "  state TEXT NOT NULL"
    "    CHECK (state IN ('queued', 'running', 'done', 'failed', 'canceled')),"
    "  done INTEGER NOT NULL DEFAULT 0,"
    "  total INTEGER NOT NULL,"
    "  created_at INTEGER NOT NULL,"
    "  updated_at INTEGER NOT NULL,"
    "  error TEXT NOT NULL DEFAULT '',"
    "  kind TEXT NOT NULL DEFAULT 'tune' CHECK (kind IN ('tune', 'miss')),"
    "  CHECK (done >= 0 AND done <= total)"
    ");"
    "CREATE INDEX jobs_state ON jobs(state, created_at);"
    "CREATE TABLE job_shapes ("
    "  job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
    "  position INTEGER NOT NULL,"        /* 0-based order within the job */
    "  shape_id INTEGER NOT NULL REFERENCES shapes(id),"
    "  PRIMARY KEY (job_id, position)"
    ");"
    PINS_TABLE_V6 PINS_COLUMNS_V7;

/* Migration 1 -> 2: additive columns only. New measurement columns take
 * their "not recorded" values: copies time unknown (NULL = NaN), no rows
 * counted, empty note, unknown host. */
static const char migrate_1_2[] =
    "ALTER TABLE measurements ADD COLUMN time_us_copies REAL;"
    "ALTER TABLE measurements ADD COLUMN rows_checked INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE measurements ADD COLUMN note TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE measurements ADD COLUMN host TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE devices ADD COLUMN clock_mhz INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE devices ADD COLUMN mem_clock_mhz INTEGER NOT NULL DEFAULT 0;";

/* Migration 2 -> 3: the mark is also what says a shape's tune completed
 * (select_complete: rows of a tune in flight are never answered as
 * measured), and the rows of an older database are whole tunes, so each
 * (device, stack, shape) gets its mark where the tuner would have put it
 * with nothing to keep: on the fastest ok row (time with copies when
 * stored), else on the fastest timed inaccurate one. The fastest ok row is
 * what the selection picks anyway whenever it is eligible, so the mark's
 * hysteresis changes no answer. */
static const char migrate_2_3[] =
    "ALTER TABLE measurements ADD COLUMN incumbent INTEGER NOT NULL DEFAULT 0"
    " CHECK (incumbent IN (0, 1));"
    "UPDATE measurements SET incumbent = 1 WHERE rowid IN ("
    "  SELECT (SELECT o.rowid FROM measurements o"
    "          WHERE o.device_id = g.device_id AND o.stack_id = g.stack_id"
    "            AND o.shape_id = g.shape_id AND o.status IN ('ok', 'inaccurate')"
    "            AND coalesce(o.time_us_copies, o.time_us) IS NOT NULL"
    "          ORDER BY o.status <> 'ok', coalesce(o.time_us_copies, o.time_us),"
    "                   o.rel_err, o.tactic LIMIT 1)"
    "  FROM (SELECT DISTINCT device_id, stack_id, shape_id FROM measurements) g);";

/* Migration 3 -> 4: stacks recorded before power modes have none (''), and
 * their ids, hashed without one, stay valid. */
static const char migrate_3_4[] =
    "ALTER TABLE stacks ADD COLUMN power TEXT NOT NULL DEFAULT '';";

/* Migration 4 -> 5: a job's kind: 'tune' (POST /v1/tune, every job before)
 * or 'miss' (tune on miss, issue 28 item 2 / issue 29 item 2). */
static const char migrate_4_5[] =
    "ALTER TABLE jobs ADD COLUMN kind TEXT NOT NULL DEFAULT 'tune'"
    " CHECK (kind IN ('tune', 'miss'));";

/* Migration 5 -> 6: pins (issue 28 item 1); an older database has none. */
static const char migrate_5_6[] = PINS_TABLE_V6;

/* Migration 6 -> 7: pins last changed when they were made. */
static const char migrate_6_7[] = PINS_COLUMNS_V7 "UPDATE pins SET updated_at = created_at;";

/* Migration 7 -> 8: rows timed before the noise check are taken as clean
 * (nothing says otherwise; a re-tune checks them). */
static const char migrate_7_8[] =
    "ALTER TABLE measurements ADD COLUMN noisy INTEGER NOT NULL DEFAULT 0"
    " CHECK (noisy IN (0, 1));";

/* Migration 8 -> 9, in C (the id is a hash): every pulled fleet device
 * (FLEET-...) re-keyed to fleet_model_id of its description, the model's
 * memory rounded (db/device_model.h). Its rows move with it; when the new
 * id is taken (a second old id of the same model), a row moves only where
 * the key has none or an older one, the rest goes with the old device. */
static int rekey_fleet_devices(store *st)
{
    sqlite3_stmt *q = NULL;
    int src = sqlite3_prepare_v2(st->db,
                                 "SELECT id, name, kind, cc_major, cc_minor, sm_count, memory_mb "
                                 "FROM devices WHERE substr(id, 1, 6) = 'FLEET-' ORDER BY "
                                 "last_seen DESC, id",
                                 -1, &q, NULL);
    char (*ids)[2][64] = NULL;
    int n = 0, cap = 0;
    while (src == SQLITE_OK || src == SQLITE_ROW) {
        if ((src = sqlite3_step(q)) != SQLITE_ROW)
            break;
        attn_device_info d;
        memset(&d, 0, sizeof d);
        store_column_text(q, 0, d.id, sizeof d.id);
        store_column_text(q, 1, d.name, sizeof d.name);
        store_column_text(q, 2, d.kind, sizeof d.kind);
        d.cc_major = sqlite3_column_int(q, 3);
        d.cc_minor = sqlite3_column_int(q, 4);
        d.sm_count = sqlite3_column_int(q, 5);
        d.memory_mb = sqlite3_column_int64(q, 6);
        if (n == cap) {
            cap = cap ? 2 * cap : 8;
            void *p = realloc(ids, (size_t)cap * sizeof *ids);
            if (p == NULL) {
                src = SQLITE_NOMEM;
                break;
            }
            ids = p;
        }
        snprintf(ids[n][0], sizeof ids[n][0], "%s", d.id);
        fleet_model_id(&d, ids[n][1], sizeof ids[n][1]);
        n++;
    }
    sqlite3_finalize(q);
    if (src != SQLITE_DONE) {
        free(ids);
        return src;
    }
    static const char move[] =
        /* the new device row, from the old one, unless the model has it */
        "INSERT OR IGNORE INTO devices (id, name, kind, idx, cc_major, cc_minor, sm_count,"
        " memory_mb, latest_stack, first_seen, last_seen, clock_mhz, mem_clock_mhz)"
        " SELECT ?2, name, kind, idx, cc_major, cc_minor, sm_count, memory_mb, latest_stack,"
        " first_seen, last_seen, clock_mhz, mem_clock_mhz FROM devices WHERE id = ?1;"
        /* rows of a key the new id lacks or holds older */
        "DELETE FROM measurements AS n WHERE n.device_id = ?2 AND EXISTS (SELECT 1 FROM"
        " measurements o WHERE o.device_id = ?1 AND o.stack_id = n.stack_id AND"
        " o.shape_id = n.shape_id AND o.tactic = n.tactic AND o.taken_at > n.taken_at);"
        "UPDATE OR IGNORE measurements SET device_id = ?2 WHERE device_id = ?1;"
        "DELETE FROM measurements WHERE device_id = ?1;"
        "UPDATE OR IGNORE pins SET device = ?2 WHERE device = ?1;"
        "DELETE FROM devices WHERE id = ?1;";
    for (int i = 0; i < n && src == SQLITE_DONE; i++) {
        if (strcmp(ids[i][0], ids[i][1]) == 0)
            continue;
        const char *tail = move;
        while (src == SQLITE_DONE && *tail) {
            sqlite3_stmt *s = NULL;
            src = sqlite3_prepare_v2(st->db, tail, -1, &s, &tail);
            if (src != SQLITE_OK)
                break;
            if (s == NULL) { /* trailing whitespace */
                src = SQLITE_DONE;
                break;
            }
            sqlite3_bind_text(s, 1, ids[i][0], -1, SQLITE_STATIC);
            if (sqlite3_bind_parameter_count(s) >= 2)
                sqlite3_bind_text(s, 2, ids[i][1], -1, SQLITE_STATIC);
            src = sqlite3_step(s);
            sqlite3_finalize(s);
        }
    }
    free(ids);
    return src == SQLITE_DONE ? SQLITE_OK : src;
}

/* Migration 9 -> 10, in C: rows before FP8 have no source error (NULL;
 * the column is added unless a file set back to an older version by hand
 * has it), and the shapes table is rebuilt with the wider dtype CHECK: the
 * new one made beside it, the rows copied (ids kept, so every reference
 * still holds), the old one dropped and the new one renamed. It runs
 * before store_open turns foreign keys on, so the drop checks no
 * reference, and no view or trigger names shapes. */
static const char rebuild_shapes_v10[] =
    SHAPES_TABLE_V10("shapes_v10")
    "INSERT INTO shapes_v10 (id, key, b, hq, hkv, sq, skv, d, dtype, causal)"
    " SELECT id, key, b, hq, hkv, sq, skv, d, dtype, causal FROM shapes;"
    "DROP TABLE shapes;"
    "ALTER TABLE shapes_v10 RENAME TO shapes;";

static int add_source_error(store *st)
{
    sqlite3_stmt *q = NULL;
    int has = 0;
    int src = sqlite3_prepare_v2(st->db,
                                 "SELECT count(*) FROM pragma_table_info('measurements')"
                                 " WHERE name = 'src_rel_err'",
                                 -1, &q, NULL);
    if (src == SQLITE_OK && (src = sqlite3_step(q)) == SQLITE_ROW) {
        has = sqlite3_column_int(q, 0) > 0;
        src = SQLITE_OK;
    }
    sqlite3_finalize(q);
    if (src == SQLITE_OK && !has)
        src = sqlite3_exec(st->db, "ALTER TABLE measurements ADD COLUMN src_rel_err REAL;",
                           NULL, NULL, NULL);
    if (src == SQLITE_OK)
        src = sqlite3_exec(st->db, rebuild_shapes_v10, NULL, NULL, NULL);
    return src;
}

/* migrations[v] takes a database from version v to v + 1 (NULL: in C,
 * migrate_c[v]). */
static int (*const migrate_c[STORE_SCHEMA_VERSION])(store *st) = {
    [8] = rekey_fleet_devices,
    [9] = add_source_error,
};
static const char *const migrations[STORE_SCHEMA_VERSION] = {
    NULL, /* 0 -> 1 never runs: an empty database gets schema_current */
    migrate_1_2,
    migrate_2_3,
    migrate_3_4,
    migrate_4_5,
    migrate_5_6,
    migrate_6_7,
    migrate_7_8,
    NULL,
    NULL,
};

/* Read user_version and the number of schema objects. The first read of a
 * file is where SQLite notices that it is not a database. */
static int read_version(store *st, int *version, int *objects, char *err, size_t errlen)
{
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(st->db, "PRAGMA user_version", -1, &q, NULL);
    if (rc == SQLITE_OK && (rc = sqlite3_step(q)) == SQLITE_ROW) {
        *version = sqlite3_column_int(q, 0);
        rc = SQLITE_OK;
    }
    sqlite3_finalize(q);
    q = NULL;
    if (rc == SQLITE_OK) {
        rc = sqlite3_prepare_v2(st->db, "SELECT count(*) FROM sqlite_master", -1, &q, NULL);
        if (rc == SQLITE_OK && (rc = sqlite3_step(q)) == SQLITE_ROW) {
            *objects = sqlite3_column_int(q, 0);
            rc = SQLITE_OK;
        }
        sqlite3_finalize(q);
    }
    if (rc == SQLITE_OK)
        return 0;
    if ((rc & 0xff) == SQLITE_NOTADB)
        return attune_fail(err, errlen, ATTUNE_EFORMAT,
                           "'%s' is not a SQLite database (file is encrypted or corrupt)",
                           st->path);
    return attune_fail(err, errlen, store_sqlite_err(rc), "cannot read '%s': %s", st->path,
                       sqlite3_errmsg(st->db));
}

/* Refuse what this build cannot use; 0 when version is one we can open. */
static int check_version(store *st, int version, int objects, char *err, size_t errlen)
{
    if (version > STORE_SCHEMA_VERSION)
        return attune_fail(err, errlen, ATTUNE_EVERSION,
                           "database '%s' has schema version %d, newer than this build "
                           "of attune knows (%d): upgrade attune to use it",
                           st->path, version, STORE_SCHEMA_VERSION);
    if (version < 0)
        return attune_fail(err, errlen, ATTUNE_EFORMAT,
                           "database '%s' has an invalid schema version %d", st->path, version);
    if (version == 0 && objects > 0)
        return attune_fail(err, errlen, ATTUNE_EFORMAT,
                           "'%s' is a SQLite database but not an attune store "
                           "(it has tables and no schema version)", st->path);
    return 0;
}

typedef struct migrate_args {
    char *err;
    size_t errlen;
    int stage;   /* 0 BEGIN failed, 1 in the body, 2 body done */
} migrate_args;

/* The migration under the write lock: read the version again (another
 * process may have created or migrated the file meanwhile), create or
 * migrate, set user_version. Sets a->err on failure. */
static int migrate_tx(store *st, void *ctx)
{
    migrate_args *a = ctx;
    int version = 0, objects = 0;
    a->stage = 1;
    int rc = read_version(st, &version, &objects, a->err, a->errlen);
    if (rc != 0 || (rc = check_version(st, version, objects, a->err, a->errlen)) != 0)
        return rc;
    if (version == 0) {
        if (sqlite3_exec(st->db, schema_current, NULL, NULL, NULL) != SQLITE_OK)
            goto sqlfail;
        version = STORE_SCHEMA_VERSION;
    }
    for (; version < STORE_SCHEMA_VERSION; version++)
        if (migrations[version] != NULL
                ? sqlite3_exec(st->db, migrations[version], NULL, NULL, NULL) != SQLITE_OK
                : migrate_c[version](st) != SQLITE_OK)
            goto sqlfail;
    /* PRAGMA takes no bound parameters; the value is a compile-time int. */
    char pragma[64];
    snprintf(pragma, sizeof pragma, "PRAGMA user_version = %d", STORE_SCHEMA_VERSION);
    if (sqlite3_exec(st->db, pragma, NULL, NULL, NULL) != SQLITE_OK)
        goto sqlfail;
    a->stage = 2;
    return 0;
sqlfail:;
    /* a C step's failure may leave no error on the handle: never report 0 */
    int code = store_sqlite_err(sqlite3_extended_errcode(st->db));
    return attune_fail(a->err, a->errlen, code != 0 ? code : ATTUNE_EDB,
                       "cannot bring '%s' to schema version %d (at version %d): %s", st->path,
                       STORE_SCHEMA_VERSION, version, sqlite3_errmsg(st->db));
}

/* Contract: see store_internal.h. store_open calls it before anything else
 * touches the file (a refused database is left exactly as it was, journal
 * mode included). The version is read again under the write lock, which
 * settles races between processes opening the same new file. */
int store_schema_migrate(store *st, char *err, size_t errlen)
{
    int version = 0, objects = 0;
    int rc = read_version(st, &version, &objects, err, errlen);
    if (rc != 0)
        return rc;
    if ((rc = check_version(st, version, objects, err, errlen)) != 0)
        return rc;
    if (version == STORE_SCHEMA_VERSION)
        return 0;
    migrate_args a = {err, errlen, 0};
    if ((rc = store_tx(st, migrate_tx, &a)) == 0)
        return 0;
    if (a.stage == 0)
        attune_fail(err, errlen, rc, "cannot lock '%s' to set up its schema: %s", st->path,
                    sqlite3_errmsg(st->db));
    else if (a.stage == 2)
        attune_fail(err, errlen, rc, "cannot commit the schema of '%s': %s", st->path,
                    sqlite3_errmsg(st->db));
    return rc;
}
