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
 *
 * Migrations run in one transaction under an advisory lock, so two
 * attuned starting against a new server create it once. docs/fleet.md
 * ("Fleet server") describes the tables. */
#ifdef ATTUNE_HAVE_LIBPQ
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* migrations[v] takes the server from version v to v + 1. */
static const char *const migrations[FLEET_PG_SCHEMA_VERSION] = {schema_v1, schema_v2};

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
        if ((rc = fleet_pg_cmd(c, migrations[version], err, errlen)) != 0)
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
