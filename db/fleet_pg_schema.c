/* fleet_pg_schema.c -- the fleet server's schema and its forward migrations.
 *
 * The version lives in attune_meta (key schema_version). Version history:
 *
 *   1  models, devices, stacks, shapes, tactics, measurements (keyed by
 *      model, stack, shape, tactic, device), sources (push watermarks),
 *      dirty (groups pushed since their aggregates were computed),
 *      aggregates and outliers.
 *   2  pins: the fleet's operator pins (tuner/pin.h), one row per rule
 *      with its tombstone state, merged last-writer-wins (fleet_pins.h).
 *   3  models keyed by the model's memory, not one driver's figure
 *      (db/device_model.h): each model's uid and memory_mb recomputed, and
 *      the models that then coincide merged into the oldest (their devices
 *      and rows moved to it, a row of one key kept where newest, the
 *      aggregates dropped and the groups marked dirty to be recomputed).
 *   4  FP8 (issue 30): shapes.dtype may be 'e4m3'; measurements gain
 *      src_rel_err (an e4m3 row's error against the reference of its bf16
 *      source) and aggregates its largest over the ok devices.
 *
 * Migrations run in one transaction under an advisory lock, so two
 * attuned starting against a new server create it once. docs/fleet.md
 * ("Fleet server") describes the tables. */
#ifdef ATTUNE_HAVE_LIBPQ
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device_model.h"
#include "fleet_pg_internal.h"

/* Version 1. CHECKs repeat the local store's field rules (docs/fleet.md)
 * so that a row written by any client, not only attune's push, is refused
 * when malformed (on measurements, lengths and ranges only: a regular
 * expression per row costs on bulk loads, and the pushing client has
 * checked the alphabet). measurements has no foreign keys: its ids come from the
 * same push's dimension lookups, and each FK check would cost an index
 * probe per row of an 8M-row load. Its primary key starts with the model,
 * so one index serves both the idempotent upsert and the per-model
 * aggregation scans. */
static const char schema_v1[] =
    "CREATE TABLE models ("
    "  id serial PRIMARY KEY,"
    "  uid text NOT NULL UNIQUE CHECK (uid ~ '^FLEET-[0-9a-f]{16}$'),"
    "  name text NOT NULL CHECK (length(name) < 128),"
    "  kind text NOT NULL CHECK (kind IN ('cpu', 'cuda')),"
    "  cc_major int NOT NULL CHECK (cc_major BETWEEN 0 AND 99),"
    "  cc_minor int NOT NULL CHECK (cc_minor BETWEEN 0 AND 99),"
    "  sm_count int NOT NULL CHECK (sm_count BETWEEN 0 AND 1000000),"
    "  memory_mb bigint NOT NULL CHECK (memory_mb BETWEEN 0 AND 1099511627776),"
    "  refreshed_at timestamptz,"    /* last aggregate refresh of the model */
    "  UNIQUE (name, kind, cc_major, cc_minor, sm_count, memory_mb));"
    "CREATE TABLE devices ("
    "  id serial PRIMARY KEY,"
    "  uid text NOT NULL UNIQUE CHECK (uid ~ '^[A-Za-z0-9._:-]{1,63}$'),"
    "  model_id int NOT NULL REFERENCES models(id),"
    "  host text NOT NULL DEFAULT '' CHECK (length(host) < 64),"
    "  clock_mhz int NOT NULL DEFAULT 0 CHECK (clock_mhz BETWEEN 0 AND 1000000),"
    "  mem_clock_mhz int NOT NULL DEFAULT 0 CHECK (mem_clock_mhz BETWEEN 0 AND 1000000),"
    "  first_push timestamptz NOT NULL DEFAULT now(),"
    "  last_push timestamptz NOT NULL DEFAULT now());"
    "CREATE INDEX devices_model ON devices(model_id);"
    "CREATE TABLE stacks ("
    "  id serial PRIMARY KEY,"
    "  uid text NOT NULL UNIQUE CHECK (uid ~ '^[0-9a-f]{16}$'),"
    "  driver text NOT NULL CHECK (length(driver) < 32),"
    "  runtime text NOT NULL CHECK (length(runtime) < 32),"
    "  blas text NOT NULL CHECK (length(blas) < 32),"
    "  attune text NOT NULL CHECK (length(attune) < 32),"
    "  kernels text NOT NULL CHECK (length(kernels) < 24),"
    "  power text NOT NULL DEFAULT '' CHECK (power ~ '^[A-Za-z0-9._-]{0,47}$'),"
    "  first_push timestamptz NOT NULL DEFAULT now());"
    "CREATE TABLE shapes ("
    "  id serial PRIMARY KEY,"
    "  key text NOT NULL UNIQUE,"
    "  b bigint NOT NULL CHECK (b BETWEEN 1 AND 1048576),"
    "  hq bigint NOT NULL CHECK (hq BETWEEN 1 AND 1048576),"
    "  hkv bigint NOT NULL CHECK (hkv BETWEEN 1 AND 1048576),"
    "  sq bigint NOT NULL CHECK (sq BETWEEN 1 AND 1048576),"
    "  skv bigint NOT NULL CHECK (skv BETWEEN 1 AND 1048576),"
    "  d bigint NOT NULL CHECK (d BETWEEN 1 AND 1024),"
    "  dtype text NOT NULL CHECK (dtype IN ('f16', 'bf16', 'f32')),"
    "  causal boolean NOT NULL,"
    "  CHECK (hq % hkv = 0));"
    "CREATE TABLE tactics ("
    "  id serial PRIMARY KEY,"
    "  text text NOT NULL UNIQUE"
    "    CHECK (length(text) < 96 AND text ~ '^[a-z0-9_]+(/[a-z0-9_]+=[A-Za-z0-9_.x-]+)*$'));"
    "CREATE TABLE measurements ("
    "  model_id int NOT NULL, stack_id int NOT NULL, shape_id int NOT NULL,"
    "  tactic_id int NOT NULL, device_id int NOT NULL,"
    "  status text NOT NULL CHECK (status IN ('ok', 'unsupported', 'failed', 'inaccurate')),"
    "  time_us float8 CHECK (time_us BETWEEN 0 AND 1e12),"
    "  time_us_min float8 CHECK (time_us_min BETWEEN 0 AND 1e12),"
    "  time_us_max float8 CHECK (time_us_max BETWEEN 0 AND 1e12),"
    "  time_us_copies float8 CHECK (time_us_copies BETWEEN 0 AND 1e12),"
    "  n int NOT NULL CHECK (n BETWEEN 0 AND 1000000000),"
    "  max_abs_err float8 CHECK (max_abs_err >= 0 AND max_abs_err < 'Infinity'),"
    "  rel_err float8 CHECK (rel_err >= 0 AND rel_err < 'Infinity'),"
    "  mode text NOT NULL CHECK (length(mode) < 24),"
    "  l2 text NOT NULL CHECK (length(l2) < 16),"
    "  rows_checked int NOT NULL CHECK (rows_checked >= 0),"
    "  note text NOT NULL CHECK (length(note) < 128),"
    "  host text NOT NULL CHECK (length(host) < 64),"
    "  taken_at bigint NOT NULL CHECK (taken_at BETWEEN 0 AND 4102444800),"
    "  pushed_at timestamptz NOT NULL DEFAULT now(),"
    "  CHECK (status <> 'ok' OR (time_us IS NOT NULL AND rel_err IS NOT NULL)),"
    "  CHECK (time_us_min <= time_us AND time_us <= time_us_max"
    "         OR time_us_min IS NULL OR time_us IS NULL OR time_us_max IS NULL),"
    "  PRIMARY KEY (model_id, stack_id, shape_id, tactic_id, device_id));"
    "CREATE TABLE sources ("
    "  id text PRIMARY KEY CHECK (id ~ '^[A-Za-z0-9._:-]{1,63}$'),"
    "  pushed_seq bigint NOT NULL CHECK (pushed_seq >= 0),"
    "  updated_at timestamptz NOT NULL DEFAULT now());"
    "CREATE TABLE dirty ("
    "  model_id int NOT NULL, stack_id int NOT NULL, shape_id int NOT NULL,"
    "  PRIMARY KEY (model_id, stack_id, shape_id));"
    "CREATE TABLE aggregates ("
    "  model_id int NOT NULL, stack_id int NOT NULL, shape_id int NOT NULL,"
    "  tactic_id int NOT NULL,"
    "  devices int NOT NULL,"          /* devices with a row */
    "  ok_devices int NOT NULL,"       /* of which status ok */
    "  status text NOT NULL,"          /* most common status */
    "  median_us float8, min_us float8, max_us float8," /* over ok devices' medians */
    "  copies_us float8,"              /* median of time_us_copies */
    "  spread float8,"                 /* interquartile range / median */
    "  rel_err float8, max_abs_err float8," /* largest over ok devices (all if none) */
    "  outliers int NOT NULL DEFAULT 0,"
    "  updated_at bigint NOT NULL,"    /* unix seconds of the refresh */
    "  PRIMARY KEY (model_id, stack_id, shape_id, tactic_id));"
    "CREATE TABLE outliers ("
    "  model_id int NOT NULL, stack_id int NOT NULL, shape_id int NOT NULL,"
    "  tactic_id int NOT NULL, device_id int NOT NULL,"
    "  ratio float8 NOT NULL,"         /* device's median / the group's */
    "  PRIMARY KEY (model_id, stack_id, shape_id, tactic_id, device_id));"
    "CREATE INDEX outliers_device ON outliers(device_id);";

/* Version 2: pins, keyed by the rule (the model in any case, as stores
 * compare it); updated_at decides which copy of a rule wins. */
static const char schema_v2[] =
    "CREATE TABLE pins ("
    "  action text NOT NULL CHECK (action IN ('force', 'exclude')),"
    "  tactic text NOT NULL CHECK (length(tactic) BETWEEN 1 AND 95),"
    "  shape text NOT NULL CHECK (length(shape) < 128),"
    "  device text NOT NULL CHECK (length(device) < 64),"
    "  model text NOT NULL CHECK (length(model) < 64),"
    "  reason text NOT NULL CHECK (length(reason) BETWEEN 1 AND 255),"
    "  author text NOT NULL CHECK (length(author) BETWEEN 1 AND 63),"
    "  created_at bigint NOT NULL CHECK (created_at >= 0),"
    "  updated_at bigint NOT NULL CHECK (updated_at >= 0),"
    "  removed boolean NOT NULL,"
    "  pushed_at timestamptz NOT NULL DEFAULT now());"
    "CREATE UNIQUE INDEX pins_rule ON pins (action, tactic, shape, device, lower(model));";

/* Version 4: the dtype CHECK widened (PostgreSQL names a column's CHECK
 * <table>_<column>_check), the source error of e4m3 rows beside rel_err
 * (NULL for other dtypes and older rows), in rows and aggregates.
 * Idempotent, so a server whose version was set back by hand (tests plant
 * older servers so) migrates again. */
static const char schema_v4[] =
    "ALTER TABLE shapes DROP CONSTRAINT IF EXISTS shapes_dtype_check;"
    "ALTER TABLE shapes ADD CONSTRAINT shapes_dtype_check"
    "  CHECK (dtype IN ('f16', 'bf16', 'f32', 'e4m3'));"
    "ALTER TABLE measurements ADD COLUMN IF NOT EXISTS src_rel_err float8"
    "  CHECK (src_rel_err >= 0 AND src_rel_err < 'Infinity');"
    "ALTER TABLE aggregates ADD COLUMN IF NOT EXISTS src_rel_err float8;";

/* Version 3, for one model m merged into k: devices, then rows (a key
 * held by both keeps the newer row), then the derived tables (k's groups
 * recomputed), then the model row. params: "mk" ($1 = m, $2 = k), "m" or
 * "k" ($1 alone): PostgreSQL types only the parameters a statement names. */
static const struct {
    const char *params, *sql;
} merge_model[] = {
    {"mk", "UPDATE devices SET model_id = $2::int WHERE model_id = $1::int"},
    {"mk", "INSERT INTO measurements (model_id, stack_id, shape_id, tactic_id, device_id,"
           " status, time_us, time_us_min, time_us_max, time_us_copies, n, max_abs_err,"
           " rel_err, mode, l2, rows_checked, note, host, taken_at, pushed_at)"
           " SELECT $2::int, stack_id, shape_id, tactic_id, device_id, status, time_us,"
           " time_us_min, time_us_max, time_us_copies, n, max_abs_err, rel_err, mode, l2,"
           " rows_checked, note, host, taken_at, pushed_at FROM measurements"
           " WHERE model_id = $1::int"
           " ON CONFLICT (model_id, stack_id, shape_id, tactic_id, device_id) DO UPDATE SET"
           " status = excluded.status, time_us = excluded.time_us,"
           " time_us_min = excluded.time_us_min, time_us_max = excluded.time_us_max,"
           " time_us_copies = excluded.time_us_copies, n = excluded.n,"
           " max_abs_err = excluded.max_abs_err, rel_err = excluded.rel_err,"
           " mode = excluded.mode, l2 = excluded.l2, rows_checked = excluded.rows_checked,"
           " note = excluded.note, host = excluded.host, taken_at = excluded.taken_at,"
           " pushed_at = excluded.pushed_at WHERE excluded.taken_at > measurements.taken_at"},
    {"m", "DELETE FROM measurements WHERE model_id = $1::int"},
    {"mk", "DELETE FROM aggregates WHERE model_id IN ($1::int, $2::int)"},
    {"mk", "DELETE FROM outliers WHERE model_id IN ($1::int, $2::int)"},
    {"m", "DELETE FROM dirty WHERE model_id = $1::int"},
    {"k", "INSERT INTO dirty (model_id, stack_id, shape_id) SELECT DISTINCT model_id,"
          " stack_id, shape_id FROM measurements WHERE model_id = $1::int"
          " ON CONFLICT DO NOTHING"},
    {"k", "UPDATE models SET refreshed_at = NULL WHERE id = $1::int"},
    {"m", "DELETE FROM models WHERE id = $1::int"},
};

typedef struct model_row {
    int id;
    attn_device_info d;
    char uid[32];
    int64_t mem_mb; /* the model's: device_model_memory_gib * 1024 */
} model_row;

/* Version 3 (in C: the uid is a hash): every model's uid and memory as
 * device_model.h defines them; models that coincide merged into the one of
 * the lowest id. Inside the migration's transaction. 0 or the error. */
static int migrate_models(fleet_pg *c, char *err, size_t errlen)
{
    PGresult *r = PQexec(c->conn, "SELECT id, name, kind, cc_major, cc_minor, sm_count,"
                                  " memory_mb FROM models ORDER BY id");
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        int rc = fleet_pg_fail(c, r, "reading the models (schema 3)", err, errlen);
        PQclear(r);
        return rc;
    }
    int n = PQntuples(r), rc = 0;
    model_row *m = calloc(n > 0 ? (size_t)n : 1, sizeof *m);
    if (m == NULL) {
        PQclear(r);
        return attune_fail(err, errlen, ATTUNE_ENOMEM, "out of memory");
    }
    for (int i = 0; i < n; i++) {
        m[i].id = atoi(PQgetvalue(r, i, 0));
        snprintf(m[i].d.name, sizeof m[i].d.name, "%s", PQgetvalue(r, i, 1));
        snprintf(m[i].d.kind, sizeof m[i].d.kind, "%s", PQgetvalue(r, i, 2));
        m[i].d.cc_major = atoi(PQgetvalue(r, i, 3));
        m[i].d.cc_minor = atoi(PQgetvalue(r, i, 4));
        m[i].d.sm_count = atoi(PQgetvalue(r, i, 5));
        m[i].d.memory_mb = strtoll(PQgetvalue(r, i, 6), NULL, 10);
        fleet_model_id(&m[i].d, m[i].uid, sizeof m[i].uid);
        m[i].mem_mb = device_model_memory_gib(m[i].d.memory_mb) * 1024;
    }
    PQclear(r);
    /* merges first (a later model into the first of its uid), so that no
     * two rows hold one (name, ..., memory_mb) when the keepers change */
    for (int i = 0; i < n && rc == 0; i++)
        for (int k = 0; k < i && rc == 0; k++) {
            if (strcmp(m[i].uid, m[k].uid) != 0 || m[k].id < 0)
                continue;
            char from[16], to[16];
            snprintf(from, sizeof from, "%d", m[i].id);
            snprintf(to, sizeof to, "%d", m[k].id);
            const char *mk[] = {from, to}, *k1[] = {to};
            for (size_t s = 0; s < sizeof merge_model / sizeof merge_model[0] && rc == 0; s++) {
                const char *w = merge_model[s].params;
                rc = fleet_pg_cmd_params(c, merge_model[s].sql, (int)strlen(w),
                                         strcmp(w, "k") == 0 ? k1 : mk,
                                         "merging a model (schema 3)", err, errlen);
            }
            m[i].id = -1; /* merged */
            break;
        }
    for (int i = 0; i < n && rc == 0; i++) {
        if (m[i].id < 0)
            continue;
        char id[16], mem[24];
        snprintf(id, sizeof id, "%d", m[i].id);
        snprintf(mem, sizeof mem, "%lld", (long long)m[i].mem_mb);
        const char *p[] = {id, m[i].uid, mem};
        rc = fleet_pg_cmd_params(c, "UPDATE models SET uid = $2, memory_mb = $3::bigint"
                                    " WHERE id = $1::int", 3, p,
                                 "re-keying a model (schema 3)", err, errlen);
    }
    free(m);
    return rc;
}

/* migrations[v] takes the server from version v to v + 1 (NULL: in C,
 * migrate_c[v]). */
static const char *const migrations[FLEET_PG_SCHEMA_VERSION] = {schema_v1, schema_v2, NULL,
                                                                 schema_v4};
static int (*const migrate_c[FLEET_PG_SCHEMA_VERSION])(fleet_pg *, char *, size_t) = {
    [2] = migrate_models,
};

/* Advisory lock key of schema changes (any constant unique to attune). */
#define SCHEMA_LOCK_KEY 737301

int fleet_pg_schema_migrate(fleet_pg *c, char *err, size_t errlen)
{
    int rc = 0, version = 0;
    PGresult *r = NULL;
    char sql[160];
    if ((rc = fleet_pg_cmd(c, "BEGIN", err, errlen)) != 0)
        return rc;
    snprintf(sql, sizeof sql, "SELECT pg_advisory_xact_lock(%d)", SCHEMA_LOCK_KEY);
    if ((rc = fleet_pg_cmd(c, sql, err, errlen)) != 0 ||
        (rc = fleet_pg_cmd(c,
                           "CREATE TABLE IF NOT EXISTS attune_meta ("
                           " key text PRIMARY KEY, value text NOT NULL)",
                           err, errlen)) != 0)
        goto fail;
    r = PQexec(c->conn, "SELECT value FROM attune_meta WHERE key = 'schema_version'");
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        rc = fleet_pg_fail(c, r, "reading the schema version", err, errlen);
        goto fail;
    }
    if (PQntuples(r) == 1)
        version = atoi(PQgetvalue(r, 0, 0));
    PQclear(r);
    r = NULL;
    if (version > FLEET_PG_SCHEMA_VERSION) {
        rc = attune_fail(err, errlen, ATTUNE_EVERSION,
                         "fleet server has schema version %d, newer than this build of "
                         "attune knows (%d): upgrade attune",
                         version, FLEET_PG_SCHEMA_VERSION);
        goto fail;
    }
    if (version == FLEET_PG_SCHEMA_VERSION) {
        c->schema_version = version;
        return fleet_pg_cmd(c, "COMMIT", err, errlen);
    }
    for (; version < FLEET_PG_SCHEMA_VERSION; version++)
        if ((rc = migrations[version] != NULL
                      ? fleet_pg_cmd(c, migrations[version], err, errlen)
                      : migrate_c[version](c, err, errlen)) != 0)
            goto fail;
    snprintf(sql, sizeof sql,
             "INSERT INTO attune_meta VALUES ('schema_version', '%d') "
             "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
             FLEET_PG_SCHEMA_VERSION);
    if ((rc = fleet_pg_cmd(c, sql, err, errlen)) != 0)
        goto fail;
    c->schema_version = FLEET_PG_SCHEMA_VERSION;
    return fleet_pg_cmd(c, "COMMIT", err, errlen);
fail:
    PQclear(r);
    PQclear(PQexec(c->conn, "ROLLBACK"));
    return rc;
}
#endif
