/* store_fleet.c -- fleet tables: one device's measurements as JSON, out and in.
 *
 * The format (version 1) is described in docs/fleet.md. Export writes what
 * the store holds; import treats the text as hostile: every field is
 * type-, range- and length-checked and every row re-validated with the
 * same checks store_measurement_put applies, all before the first write;
 * then the whole table is merged in one transaction. JSON is read and
 * written with jansson only. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/hash.h"
#include "../common/json_num.h"
#include "../common/shape_json.h"
#include "store_fleet_pins.h"
#include "store_fleet_scan.h"
#include "store_internal.h"

#define FLEET_FORMAT     "attune-fleet"
#define FLEET_VERSION    1
#define FLEET_MAX_BYTES  ((size_t)64 << 20) /* text accepted by import */
#define FLEET_MAX_ROWS   1000000
#define FLEET_MAX_STACKS 4096

/* ---- export */

/* Object for one measurement, in the documented key order; NULL on ENOMEM. */
static json_t *measurement_json(const store_measurement *m)
{
    char key[ATTN_SHAPE_KEY_MAX];
    json_t *o = json_object();
    int bad = o == NULL;
    if (!bad) {
        bad |= json_object_set_new(o, "shape", shape_json_new(&m->shape));
        bad |= json_object_set_new(o, "shape_key",
                                   json_string(attn_shape_key(&m->shape, key, sizeof key)));
        bad |= json_object_set_new(o, "tactic", json_string(m->tactic));
        bad |= json_object_set_new(o, "stack", json_string(m->stack_id));
        bad |= json_object_set_new(o, "status", json_string(store_status_name(m->status)));
        bad |= json_object_set_new(o, "time_us", json_num(m->time_us));
        bad |= json_object_set_new(o, "time_us_min", json_num(m->time_us_min));
        bad |= json_object_set_new(o, "time_us_max", json_num(m->time_us_max));
        bad |= json_object_set_new(o, "time_us_copies", json_num(m->time_us_copies));
        bad |= json_object_set_new(o, "n", json_integer(m->n));
        bad |= json_object_set_new(o, "max_abs_err", json_num(m->max_abs_err));
        bad |= json_object_set_new(o, "rel_err", json_num(m->rel_err));
        bad |= json_object_set_new(o, "mode", json_string(m->mode));
        bad |= json_object_set_new(o, "l2", json_string(m->l2));
        bad |= json_object_set_new(o, "rows_checked", json_integer(m->rows_checked));
        bad |= json_object_set_new(o, "note", json_string(m->note));
        bad |= json_object_set_new(o, "host", json_string(m->host));
        bad |= json_object_set_new(o, "taken_at", json_integer(m->taken_at));
        /* only when set: a clean row reads as every table before it did */
        if (m->noisy)
            bad |= json_object_set_new(o, "noisy", json_true());
        /* e4m3 rows only (null when not checked): the error against the
         * bf16 source the inputs were quantized from */
        if (m->shape.dtype == ATTN_E4M3)
            bad |= json_object_set_new(o, "src_rel_err", json_num(m->src_rel_err));
    }
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *device_json(const attn_device_info *d, const attn_stack *latest)
{
    char cc[16];
    snprintf(cc, sizeof cc, "%d.%d", d->cc_major, d->cc_minor);
    return json_pack("{ss ss ss ss si sI si si so}", "id", d->id, "name", d->name, "kind",
                     d->kind, "cc", cc, "sm_count", d->sm_count, "memory_mb",
                     (json_int_t)d->memory_mb, "clock_mhz", d->clock_mhz, "mem_clock_mhz",
                     d->mem_clock_mhz, "latest_stack",
                     latest->id[0] ? json_string(latest->id) : json_null());
}

/* Append the stacks used by the device's rows, and its latest one, to arr. */
static int stacks_json(store *st, const char *device_id, json_t *arr)
{
    sqlite3_stmt *q = NULL;
    int rc = store_stmt_text(st, STMT_EXPORT_STACKS,
                             "SELECT " STORE_STACK_COLS " FROM stacks "
                             "WHERE id IN (SELECT stack_id FROM measurements WHERE device_id = ?1 "
                             "UNION SELECT latest_stack FROM devices WHERE id = ?1) "
                             "ORDER BY first_seen, id",
                             device_id, &q);
    if (rc != 0)
        goto fail;
    int src;
    while ((src = sqlite3_step(q)) == SQLITE_ROW) {
        attn_stack s;
        store_stack_row(q, 0, &s);
        json_t *o = json_pack("{ss ss ss ss ss ss}", "id", s.id, "driver", s.driver, "runtime",
                              s.runtime, "blas", s.blas, "attune", s.attune, "kernels",
                              s.kernels);
        /* "power" only when known: tables without it stay what they were. */
        if (o != NULL && s.power[0] != 0 &&
            json_object_set_new(o, "power", json_string(s.power)) != 0) {
            json_decref(o);
            o = NULL;
        }
        if (json_array_append_new(arr, o) != 0) {
            rc = ATTUNE_ENOMEM;
            goto fail;
        }
    }
    if (src != SQLITE_DONE)
        rc = store_sqlite_err(src);
fail:
    store_stmt_done(q);
    return rc;
}

typedef struct export_read {
    const char *device_id;
    attn_device_info info;
    attn_stack latest;
    store_measurement *rows;
    int n;
    json_t *stacks;
} export_read;

/* What a table holds, read in one snapshot. */
static int export_read_tx(store *st, void *ctx)
{
    export_read *a = ctx;
    int rc;
    if ((rc = store_device_get(st, a->device_id, &a->info, &a->latest)) != 0 ||
        (rc = store_measurements_exported(st, a->info.id, &a->rows, &a->n)) != 0)
        return rc;
    if ((a->stacks = json_array()) == NULL)
        return ATTUNE_ENOMEM;
    return stacks_json(st, a->info.id, a->stacks);
}

/* Contract: see store.h. Rarely asked: prepared each time. */
int store_export_held_back(store *st, const char *device_id, int64_t *n)
{
    sqlite3_stmt *q = NULL;
    if (n != NULL)
        *n = 0;
    if (st == NULL || device_id == NULL || n == NULL)
        return ATTUNE_EINVAL;
    int rc = sqlite3_prepare_v2(st->db,
                                "SELECT count(*) FROM measurements m WHERE m.device_id = ?1"
                                " AND NOT " STORE_COMPLETE_ROW("m", "?1"),
                                -1, &q, NULL) == SQLITE_OK &&
                     sqlite3_bind_text(q, 1, device_id, -1, SQLITE_STATIC) == SQLITE_OK &&
                     sqlite3_step(q) == SQLITE_ROW
                 ? 0
                 : ATTUNE_EDB;
    if (rc == 0)
        *n = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    return rc;
}

/* Contract: see store.h. device_id may be anything store_device_get
 * resolves (id or name). Reads one consistent snapshot (a read
 * transaction). ATTUNE_ENOTFOUND for an unknown device; on error *json is
 * NULL. Numbers are written in the shortest form that reads back to the
 * same double (json_num.h); NaN is written as null. */
int store_export(store *st, const char *device_id, char **json)
{
    export_read a = {.device_id = device_id};
    json_t *root = NULL, *meas = NULL;
    char host[64];
    if (json != NULL)
        *json = NULL;
    if (st == NULL || device_id == NULL || json == NULL)
        return ATTUNE_EINVAL;
    int rc = store_snapshot(st, export_read_tx, &a);
    if (rc != 0)
        goto fail;
    rc = ATTUNE_ENOMEM;
    if ((meas = json_array()) == NULL)
        goto fail;
    for (int i = 0; i < a.n; i++)
        if (json_array_append_new(meas, measurement_json(&a.rows[i])) != 0)
            goto fail;
    if (gethostname(host, sizeof host) != 0)
        host[0] = 0;
    host[sizeof host - 1] = 0;
    root = json_pack("{ss si sI ss so sO}", "format", FLEET_FORMAT, "version", FLEET_VERSION,
                     "exported_at", (json_int_t)store_now(), "host", host, "device",
                     device_json(&a.info, &a.latest), "stacks", a.stacks);
    if (root == NULL || store_fleet_pins_put(st, &a.info, root) != 0 ||
        json_object_set(root, "measurements", meas) != 0)
        goto fail;
    /* Compact: a table has to fit the import limit (FLEET_MAX_BYTES). */
    if ((*json = json_num_dumps(root, JSON_COMPACT)) == NULL)
        goto fail;
    rc = 0;
fail:
    json_decref(root);
    json_decref(a.stacks);
    json_decref(meas);
    free(a.rows);
    return rc;
}

/* ---- import: reading untrusted JSON */

/* obj[key], which must be present. */
static int need(const json_t *obj, const char *key, const char *where, json_t **v, char *err,
                size_t errlen)
{
    *v = json_object_get(obj, key);
    if (*v == NULL)
        return attune_fail(err, errlen, ATTUNE_EFORMAT, "%s: missing field \"%s\"", where, key);
    return 0;
}

/* Reject keys outside the known list (a table is versioned: new keys come
 * with a new version). */
static int only_keys(const json_t *obj, const char *const *keys, size_t nkeys,
                     const char *where, char *err, size_t errlen)
{
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)obj, key, val) {
        size_t i = 0;
        while (i < nkeys && strcmp(key, keys[i]) != 0)
            i++;
        if (i == nkeys)
            return attune_fail(err, errlen, ATTUNE_EFORMAT, "%s: unknown field \"%.40s\"",
                               where, key);
    }
    return 0;
}

/* An integer field in [lo, hi] (JSON integers only: 1.0 and 1e3 are not). */
static int get_int(const json_t *obj, const char *key, int64_t lo, int64_t hi,
                   const char *where, int64_t *out, char *err, size_t errlen)
{
    json_t *v;
    int rc = need(obj, key, where, &v, err, errlen);
    if (rc != 0)
        return rc;
    if (!json_is_integer(v))
        return attune_fail(err, errlen, ATTUNE_EFORMAT, "%s.%s: must be an integer", where,
                           key);
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi)
        return attune_fail(err, errlen, ATTUNE_EFORMAT, "%s.%s: %lld is outside [%lld, %lld]",
                           where, key, (long long)x, (long long)lo, (long long)hi);
    *out = (int64_t)x;
    return 0;
}

/* A number or null (-> NaN); ranges are checked by store_check_measurement. */
static int get_num(const json_t *obj, const char *key, const char *where, double *out,
                   char *err, size_t errlen)
{
    json_t *v;
    int rc = need(obj, key, where, &v, err, errlen);
    if (rc != 0)
        return rc;
    if (json_is_null(v)) {
        *out = NAN;
        return 0;
    }
    if (!json_is_number(v))
        return attune_fail(err, errlen, ATTUNE_EFORMAT, "%s.%s: must be a number or null",
                           where, key);
    *out = json_number_value(v);
    return 0;
}

/* A string shorter than len bytes, copied into buf. */
static int get_str(const json_t *obj, const char *key, char *buf, size_t len,
                   const char *where, char *err, size_t errlen)
{
    json_t *v;
    int rc = need(obj, key, where, &v, err, errlen);
    if (rc != 0)
        return rc;
    if (!json_is_string(v))
        return attune_fail(err, errlen, ATTUNE_EFORMAT, "%s.%s: must be a string", where, key);
    size_t n = json_string_length(v);
    if (n >= len)
        return attune_fail(err, errlen, ATTUNE_EFORMAT,
                           "%s.%s: %zu bytes, longer than the limit of %zu", where, key, n,
                           len - 1);
    memcpy(buf, json_string_value(v), n + 1); /* no NUL inside: no JSON_ALLOW_NUL */
    return 0;
}

/* Turn an EINVAL/ETOOBIG detail from a shared check into the import's
 * EFORMAT, prefixed with where. */
static int field_fail(char *err, size_t errlen, const char *where, const char *detail)
{
    return attune_fail(err, errlen, ATTUNE_EFORMAT, "%s: %s", where, detail);
}

static const char *const device_keys[] = {"id",       "name",      "kind",
                                          "cc",       "sm_count",  "memory_mb",
                                          "clock_mhz", "mem_clock_mhz", "latest_stack"};

/* The device object; *latest receives latest_stack ("" when null). */
static int device_from_json(const json_t *o, attn_device_info *d, char *latest, char *err,
                            size_t errlen)
{
    const char *where = "device";
    char cc[8], detail[ATTUNE_ERRLEN];
    int64_t v[5];
    json_t *ls;
    int rc;
    memset(d, 0, sizeof *d);
    if (!json_is_object(o))
        return attune_fail(err, errlen, ATTUNE_EFORMAT, "device: must be an object");
    if ((rc = only_keys(o, device_keys, sizeof device_keys / sizeof device_keys[0], where, err,
                        errlen)) != 0 ||
        (rc = get_str(o, "id", d->id, sizeof d->id, where, err, errlen)) != 0 ||
        (rc = get_str(o, "name", d->name, sizeof d->name, where, err, errlen)) != 0 ||
        (rc = get_str(o, "kind", d->kind, sizeof d->kind, where, err, errlen)) != 0 ||
        (rc = get_str(o, "cc", cc, sizeof cc, where, err, errlen)) != 0 ||
        (rc = get_int(o, "sm_count", 0, STORE_MAX_COUNT, where, &v[0], err, errlen)) != 0 ||
        (rc = get_int(o, "memory_mb", 0, STORE_MAX_MEMORY_MB, where, &v[1], err, errlen)) != 0 ||
        (rc = get_int(o, "clock_mhz", 0, STORE_MAX_COUNT, where, &v[2], err, errlen)) != 0 ||
        (rc = get_int(o, "mem_clock_mhz", 0, STORE_MAX_COUNT, where, &v[3], err, errlen)) != 0 ||
        (rc = need(o, "latest_stack", where, &ls, err, errlen)) != 0)
        return rc;
    /* cc is "major.minor", one or two digits each. */
    int maj = 0, min = 0;
    char *dot = strchr(cc, '.');
    size_t la = dot ? (size_t)(dot - cc) : 0, lb = dot ? strlen(dot + 1) : 0;
    int ok = dot != NULL && la >= 1 && la <= 2 && lb >= 1 && lb <= 2;
    for (size_t i = 0; ok && cc[i]; i++)
        ok = cc[i] == '.' || (cc[i] >= '0' && cc[i] <= '9');
    if (!ok || sscanf(cc, "%d.%d", &maj, &min) != 2)
        return attune_fail(err, errlen, ATTUNE_EFORMAT,
                           "device.cc: \"%s\" is not of the form major.minor", cc);
    d->cc_major = maj;
    d->cc_minor = min;
    d->index = -1; /* ordinals are local to the host that measured */
    d->sm_count = (int)v[0];
    d->memory_mb = v[1];
    d->clock_mhz = (int)v[2];
    d->mem_clock_mhz = (int)v[3];
    latest[0] = 0;
    if (!json_is_null(ls)) {
        if (!json_is_string(ls) || json_string_length(ls) != 16)
            return attune_fail(err, errlen, ATTUNE_EFORMAT,
                               "device.latest_stack: must be a stack id or null");
        memcpy(latest, json_string_value(ls), 17);
    }
    if ((rc = store_check_device(d, detail, sizeof detail)) != 0)
        return field_fail(err, errlen, where, detail);
    return 0;
}

static const char *const stack_keys[] = {"id", "driver", "runtime", "blas", "attune",
                                         "kernels", "power"};

static int stack_from_json(const json_t *o, int i, attn_stack *s, char *err, size_t errlen)
{
    char where[32], detail[ATTUNE_ERRLEN];
    int rc;
    snprintf(where, sizeof where, "stacks[%d]", i);
    memset(s, 0, sizeof *s);
    if (!json_is_object(o))
        return attune_fail(err, errlen, ATTUNE_EFORMAT, "%s: must be an object", where);
    if ((rc = only_keys(o, stack_keys, sizeof stack_keys / sizeof stack_keys[0], where, err,
                        errlen)) != 0 ||
        (rc = get_str(o, "id", s->id, sizeof s->id, where, err, errlen)) != 0 ||
        (rc = get_str(o, "driver", s->driver, sizeof s->driver, where, err, errlen)) != 0 ||
        (rc = get_str(o, "runtime", s->runtime, sizeof s->runtime, where, err, errlen)) != 0 ||
        (rc = get_str(o, "blas", s->blas, sizeof s->blas, where, err, errlen)) != 0 ||
        (rc = get_str(o, "attune", s->attune, sizeof s->attune, where, err, errlen)) != 0 ||
        (rc = get_str(o, "kernels", s->kernels, sizeof s->kernels, where, err, errlen)) != 0)
        return rc;
    /* Optional: tables written before power modes have none. */
    if (json_object_get(o, "power") != NULL &&
        (rc = get_str(o, "power", s->power, sizeof s->power, where, err, errlen)) != 0)
        return rc;
    if ((rc = store_check_stack(s, detail, sizeof detail)) != 0)
        return field_fail(err, errlen, where, detail);
    return 0;
}

static const char *const row_keys[] = {
    "shape", "shape_key", "tactic", "stack", "status", "time_us", "time_us_min",
    "time_us_max", "time_us_copies", "n", "max_abs_err", "rel_err", "mode", "l2",
    "rows_checked", "note", "host", "taken_at", "noisy", "src_rel_err"};

/* Row i of measurements into *m (tactic in canonical form), for device_id.
 * Checks everything but the stack's presence in the table (the caller's). */
static int row_from_json(const json_t *o, int i, const char *device_id, store_measurement *m,
                         char *err, size_t errlen)
{
    char where[40], detail[ATTUNE_ERRLEN], key[ATTN_SHAPE_KEY_MAX], given[ATTN_SHAPE_KEY_MAX];
    char status[16], canon[ATTN_TACTIC_STR_MAX];
    int64_t n, rows, taken;
    json_t *shape;
    int rc;
    snprintf(where, sizeof where, "measurements[%d]", i);
    memset(m, 0, sizeof *m);
    if (!json_is_object(o))
        return attune_fail(err, errlen, ATTUNE_EFORMAT, "%s: must be an object", where);
    if ((rc = only_keys(o, row_keys, sizeof row_keys / sizeof row_keys[0], where, err,
                        errlen)) != 0 ||
        (rc = need(o, "shape", where, &shape, err, errlen)) != 0)
        return rc;
    if (shape_json_parse(shape, 0, &m->shape, detail, sizeof detail) != 0)
        return attune_fail(err, errlen, ATTUNE_EFORMAT, "%s.shape: %s", where, detail);
    if ((rc = get_str(o, "shape_key", given, sizeof given, where, err, errlen)) != 0)
        return rc;
    if (strcmp(given, attn_shape_key(&m->shape, key, sizeof key)) != 0)
        return attune_fail(err, errlen, ATTUNE_EFORMAT,
                           "%s.shape_key: \"%s\" does not match the shape (%s)", where, given,
                           key);
    if ((rc = get_str(o, "tactic", m->tactic, sizeof m->tactic, where, err, errlen)) != 0 ||
        (rc = get_str(o, "stack", m->stack_id, sizeof m->stack_id, where, err, errlen)) != 0 ||
        (rc = get_str(o, "status", status, sizeof status, where, err, errlen)) != 0)
        return rc;
    if (store_status_parse(status, &m->status) != 0)
        return attune_fail(err, errlen, ATTUNE_EFORMAT,
                           "%s.status: unknown status \"%s\" (expected ok, unsupported, "
                           "failed or inaccurate)",
                           where, status);
    if ((rc = get_num(o, "time_us", where, &m->time_us, err, errlen)) != 0 ||
        (rc = get_num(o, "time_us_min", where, &m->time_us_min, err, errlen)) != 0 ||
        (rc = get_num(o, "time_us_max", where, &m->time_us_max, err, errlen)) != 0 ||
        (rc = get_num(o, "time_us_copies", where, &m->time_us_copies, err, errlen)) != 0 ||
        (rc = get_int(o, "n", 0, STORE_MAX_N, where, &n, err, errlen)) != 0 ||
        (rc = get_num(o, "max_abs_err", where, &m->max_abs_err, err, errlen)) != 0 ||
        (rc = get_num(o, "rel_err", where, &m->rel_err, err, errlen)) != 0 ||
        (rc = get_str(o, "mode", m->mode, sizeof m->mode, where, err, errlen)) != 0 ||
        (rc = get_str(o, "l2", m->l2, sizeof m->l2, where, err, errlen)) != 0 ||
        (rc = get_int(o, "rows_checked", 0, 0x7fffffff, where, &rows, err, errlen)) != 0 ||
        (rc = get_str(o, "note", m->note, sizeof m->note, where, err, errlen)) != 0 ||
        (rc = get_str(o, "host", m->host, sizeof m->host, where, err, errlen)) != 0 ||
        (rc = get_int(o, "taken_at", 0, STORE_MAX_TAKEN_AT, where, &taken, err, errlen)) != 0)
        return rc;
    /* Optional (tables before the noise check have none): true on a row
     * whose timing stayed noisy (tuner/noise.h). */
    json_t *noisy = json_object_get(o, "noisy");
    if (noisy != NULL && !json_is_boolean(noisy))
        return attune_fail(err, errlen, ATTUNE_EFORMAT, "%s.noisy: must be true or false",
                           where);
    m->noisy = noisy != NULL && json_is_true(noisy);
    /* Optional, e4m3 rows only (tables before FP8 have none): the error
     * against the bf16 source's reference. */
    m->src_rel_err = NAN;
    if (json_object_get(o, "src_rel_err") != NULL) {
        if (m->shape.dtype != ATTN_E4M3)
            return attune_fail(err, errlen, ATTUNE_EFORMAT,
                               "%s.src_rel_err: only e4m3 rows have one (this row is %s)",
                               where, attn_dtype_name(m->shape.dtype));
        if ((rc = get_num(o, "src_rel_err", where, &m->src_rel_err, err, errlen)) != 0)
            return rc;
    }
    m->n = (int)n;
    m->rows_checked = (int)rows;
    m->taken_at = taken;
    m->err_ratio = NAN;
    snprintf(m->device_id, sizeof m->device_id, "%s", device_id);
    if (store_check_measurement(m, canon, detail, sizeof detail) != 0 ||
        store_check_not_future(m->taken_at, "taken_at", detail, sizeof detail) != 0)
        return field_fail(err, errlen, where, detail);
    memcpy(m->tactic, canon, sizeof canon);
    return 0;
}

/* ---- import: duplicates and stack references */

typedef struct {
    uint64_t h; /* FNV-1a of stack, shape key and canonical tactic */
    int i;      /* row index */
} row_hash;

static int row_hash_cmp(const void *a, const void *b)
{
    const row_hash *x = a, *y = b;
    if (x->h != y->h)
        return x->h < y->h ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

static uint64_t row_identity(const store_measurement *m)
{
    char key[ATTN_SHAPE_KEY_MAX];
    uint64_t h = hash_fnv1a64_init();
    h = hash_fnv1a64(h, m->stack_id, strlen(m->stack_id) + 1);
    attn_shape_key(&m->shape, key, sizeof key);
    h = hash_fnv1a64(h, key, strlen(key) + 1);
    return hash_fnv1a64(h, m->tactic, strlen(m->tactic) + 1);
}

static int same_identity(const store_measurement *a, const store_measurement *b)
{
    char ka[ATTN_SHAPE_KEY_MAX], kb[ATTN_SHAPE_KEY_MAX];
    return strcmp(a->stack_id, b->stack_id) == 0 && strcmp(a->tactic, b->tactic) == 0 &&
           strcmp(attn_shape_key(&a->shape, ka, sizeof ka),
                  attn_shape_key(&b->shape, kb, sizeof kb)) == 0;
}

/* After sorting by hash, rows with equal hashes are compared exactly (an
 * adversarial FNV collision must not pass for, or hide, a duplicate). */
/* Row i of rows into m: parsed from its text, read, freed (a table's rows
 * are never all held as JSON: store_fleet_scan.h). */
static int row_at(const fleet_rows *rows, size_t i, const char *device_id, store_measurement *m,
                  char *err, size_t errlen)
{
    json_t *o = fleet_rows_get(rows, i);
    if (o == NULL)
        return attune_fail(err, errlen, ATTUNE_ENOMEM, "out of memory");
    int rc = row_from_json(o, (int)i, device_id, m, err, errlen);
    json_decref(o);
    return rc;
}

static int find_duplicates(const fleet_rows *rows, row_hash *keys, int n,
                           const char *device_id, char *err, size_t errlen)
{
    store_measurement a, b;
    qsort(keys, (size_t)n, sizeof *keys, row_hash_cmp);
    for (int j = 1, start = 0; j < n; j++) {
        if (keys[j].h != keys[j - 1].h) {
            start = j;
            continue;
        }
        for (int k = start; k < j; k++) {
            int rc;
            if ((rc = row_at(rows, (size_t)keys[k].i, device_id, &a, err, errlen)) != 0 ||
                (rc = row_at(rows, (size_t)keys[j].i, device_id, &b, err, errlen)) != 0)
                return rc; /* ENOMEM: rows were validated */
            if (same_identity(&a, &b))
                return attune_fail(err, errlen, ATTUNE_EFORMAT,
                                   "measurements[%d] repeats measurements[%d] (stack %s, "
                                   "tactic %s, same shape)",
                                   keys[j].i, keys[k].i, b.stack_id, b.tactic);
        }
    }
    return 0;
}

static int stack_id_cmp(const void *a, const void *b)
{
    return strcmp(((const attn_stack *)a)->id, ((const attn_stack *)b)->id);
}

/* bsearch comparator: key is a stack id string, elem an attn_stack. */
static int stack_key_cmp(const void *key, const void *elem)
{
    return strcmp((const char *)key, ((const attn_stack *)elem)->id);
}

/* ---- import */

/* Say why the merge failed (the transaction is rolled back by the caller). */
static int merge_fail(store *st, int rc, char *err, size_t errlen)
{
    return attune_fail(err, errlen, rc, "merging the fleet table failed (%s): %s",
                       attune_strerror(rc), sqlite3_errmsg(st->db));
}

/* Stacks of a table into stacks[] (json_array_size(arr) entries, sorted by
 * id): each valid, none listed twice, latest ("" or an id) among them. */
static int check_stacks(const json_t *arr, const char *latest, attn_stack *stacks, char *err,
                        size_t errlen)
{
    size_t n = json_array_size(arr);
    int rc;
    for (size_t i = 0; i < n; i++)
        if ((rc = stack_from_json(json_array_get(arr, i), (int)i, &stacks[i], err, errlen)) != 0)
            return rc;
    qsort(stacks, n, sizeof *stacks, stack_id_cmp);
    for (size_t i = 1; i < n; i++)
        if (strcmp(stacks[i].id, stacks[i - 1].id) == 0)
            return attune_fail(err, errlen, ATTUNE_EFORMAT, "stacks: %s is listed twice",
                               stacks[i].id);
    if (latest[0] != 0 && bsearch(latest, stacks, n, sizeof *stacks, stack_key_cmp) == NULL)
        return attune_fail(err, errlen, ATTUNE_EFORMAT,
                           "device.latest_stack: %s is not in \"stacks\"", latest);
    return 0;
}

/* Rows of a table: each valid, with a stack among stacks[0..nstacks), no
 * two the same row (keys: one per row, scratch). *newest: the latest
 * taken_at, -1 when there are no rows. */
static int check_rows(const fleet_rows *rows, const char *device_id, const attn_stack *stacks,
                      size_t nstacks, row_hash *keys, int64_t *newest, char *err,
                      size_t errlen)
{
    size_t n = rows->n;
    store_measurement m;
    int rc;
    for (size_t i = 0; i < n; i++) {
        if ((rc = row_at(rows, i, device_id, &m, err, errlen)) != 0)
            return rc;
        if (bsearch(m.stack_id, stacks, nstacks, sizeof *stacks, stack_key_cmp) == NULL)
            return attune_fail(err, errlen, ATTUNE_EFORMAT,
                               "measurements[%zu].stack: %s is not in \"stacks\"", i,
                               m.stack_id);
        keys[i].h = row_identity(&m);
        keys[i].i = (int)i;
        if (m.taken_at > *newest)
            *newest = m.taken_at;
    }
    return find_duplicates(rows, keys, (int)n, device_id, err, errlen);
}

/* What store_import's transaction merges: the checked table. */
/* A (stack, shape) an import wrote, to mark (store_mark_fastest). */
typedef struct import_shape {
    char stack_id[sizeof ((store_measurement *)0)->stack_id];
    int64_t shape_id;
} import_shape;

static int import_shape_cmp(const void *a, const void *b)
{
    const import_shape *x = a, *y = b;
    int c = strcmp(x->stack_id, y->stack_id);
    return c != 0 ? c : (x->shape_id > y->shape_id) - (x->shape_id < y->shape_id);
}

/* The marks of what an import brought (store_internal.h): each (stack,
 * shape) of the table t[0..n) without one. Only those: an unmarked shape
 * the table does not bring may be a tune in flight here, and its partial
 * rows must not read as complete. */
static int mark_imported(store *st, const char *device_id, import_shape *t, size_t n)
{
    qsort(t, n, sizeof *t, import_shape_cmp);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        if (i == 0 || import_shape_cmp(&t[i], &t[i - 1]) != 0)
            rc = store_mark_fastest(st, device_id, t[i].stack_id, t[i].shape_id);
    return rc;
}

typedef struct merge_args {
    const attn_stack *stacks;
    size_t nstacks;
    const attn_device_info *dev;
    int64_t seen;
    const char *latest;
    const fleet_rows *rows;
    const pin *pins;          /* checked (store_fleet_pins_read) */
    int npins;
    import_shape *touched;    /* rows->n entries: each row's (stack, shape) */
    store_import_stats got;   /* out */
    int stage;                /* 0 BEGIN failed, 1 in the body, 2 body done */
    char *err;
    size_t errlen;
} merge_args;

/* store_import's transaction: stacks, the device, then each row (replaced
 * only when newer). Sets a->err on failure. */
static int merge_tx(store *st, void *ctx)
{
    merge_args *a = ctx;
    store_measurement m;
    int rc, changed = 0;
    a->stage = 1;
    for (size_t i = 0; i < a->nstacks; i++) {
        if ((rc = store_upsert_stack(st, &a->stacks[i], &changed)) != 0)
            return merge_fail(st, rc, a->err, a->errlen);
        a->got.stacks += changed;
    }
    rc = store_upsert_device(st, a->dev, a->seen, a->latest[0] ? a->latest : NULL, &changed);
    if (rc != 0)
        return merge_fail(st, rc, a->err, a->errlen);
    a->got.devices = changed;
    for (size_t i = 0; i < a->rows->n; i++) {
        if ((rc = row_at(a->rows, i, a->dev->id, &m, a->err, a->errlen)) != 0)
            return rc;
        if ((rc = store_write_measurement(st, &m, m.tactic, 1, &changed,
                                          &a->touched[i].shape_id)) != 0)
            return merge_fail(st, rc, a->err, a->errlen);
        memcpy(a->touched[i].stack_id, m.stack_id, sizeof m.stack_id);
        if (changed)
            a->got.measurements++;
        else
            a->got.skipped++;
    }
    if ((rc = mark_imported(st, a->dev->id, a->touched, a->rows->n)) != 0)
        return merge_fail(st, rc, a->err, a->errlen);
    if ((rc = store_pins_merge(st, a->pins, a->npins, &a->got.pins, NULL)) != 0)
        return rc == ATTUNE_ETOOBIG
                   ? attune_fail(a->err, a->errlen, rc, "the table's pins would pass the limit "
                                 "of %d pins", PIN_MAX)
                   : merge_fail(st, rc, a->err, a->errlen);
    a->stage = 2;
    return 0;
}

static const char *const top_keys[] = {"format", "version", "exported_at", "host",
                                       "device", "stacks", "measurements", "pins"};

/* Contract: see store.h. Nothing is written unless every check passes;
 * then one BEGIN IMMEDIATE transaction upserts the device and stacks and
 * inserts each row, replacing an existing one only when the incoming
 * taken_at is newer (others count as skipped). Any failure rolls the whole
 * table back. *stats (may be NULL) is zeroed, and filled on success. */
int store_import(store *st, const char *json, size_t len, store_import_stats *stats,
                 char *err, size_t errlen)
{
    json_t *root = NULL, *v, *stacks_js, *rows_js;
    attn_stack *stacks = NULL;
    row_hash *keys = NULL;
    import_shape *touched = NULL;
    pin *pins = NULL;
    int npins = 0;
    fleet_rows rows = {0};
    attn_device_info dev;
    char host[64], latest[24];
    int64_t version, exported_at;
    int rc;
    if (stats != NULL)
        memset(stats, 0, sizeof *stats);
    if (st == NULL || json == NULL)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "no table given");
    if (len > FLEET_MAX_BYTES)
        return attune_fail(err, errlen, ATTUNE_ETOOBIG,
                           "fleet table is %zu bytes, over the limit of %zu", len,
                           FLEET_MAX_BYTES);

    /* Duplicate keys in an object are an error, not "last one wins";
     * NaN/Infinity literals and NUL in strings are rejected by the parser.
     * The rows stay text, indexed, each parsed when read (memory: the
     * table's text and one row, not a tree several times its size). */
    if ((rc = fleet_scan(json, len, FLEET_MAX_ROWS, &root, &rows, err, errlen)) != 0)
        goto fail;
    v = json_object_get(root, "format");
    if (!json_is_string(v) || strcmp(json_string_value(v), FLEET_FORMAT) != 0) {
        rc = attune_fail(err, errlen, ATTUNE_EFORMAT,
                         "not a fleet table: \"format\" must be \"" FLEET_FORMAT "\"");
        goto fail;
    }
    /* The version decides what the rest means: check it before the rest. */
    if ((rc = get_int(root, "version", INT64_MIN, INT64_MAX, "table", &version, err,
                      errlen)) != 0)
        goto fail;
    if (version != FLEET_VERSION) {
        rc = attune_fail(err, errlen, ATTUNE_EVERSION,
                         "fleet table version %lld is not supported (this build reads "
                         "version %d)",
                         (long long)version, FLEET_VERSION);
        goto fail;
    }
    if ((rc = only_keys(root, top_keys, sizeof top_keys / sizeof top_keys[0], "table", err,
                        errlen)) != 0 ||
        (rc = get_int(root, "exported_at", 0, STORE_MAX_TAKEN_AT, "table", &exported_at, err,
                      errlen)) != 0 ||
        (rc = get_str(root, "host", host, sizeof host, "table", err, errlen)) != 0 ||
        (rc = need(root, "device", "table", &v, err, errlen)) != 0 ||
        (rc = device_from_json(v, &dev, latest, err, errlen)) != 0 ||
        (rc = need(root, "stacks", "table", &stacks_js, err, errlen)) != 0 ||
        (rc = need(root, "measurements", "table", &rows_js, err, errlen)) != 0)
        goto fail;
    char detail[ATTUNE_ERRLEN];
    if (store_check_text(host, sizeof host, "host", detail, sizeof detail) != 0 ||
        store_check_not_future(exported_at, "exported_at", detail, sizeof detail) != 0) {
        rc = field_fail(err, errlen, "table", detail);
        goto fail;
    }
    if (!json_is_array(stacks_js) || !json_is_array(rows_js)) {
        rc = attune_fail(err, errlen, ATTUNE_EFORMAT,
                         "table: \"stacks\" and \"measurements\" must be arrays");
        goto fail;
    }
    size_t nstacks = json_array_size(stacks_js), nrows = rows.n;
    if (nstacks > FLEET_MAX_STACKS || nrows > FLEET_MAX_ROWS) {
        rc = attune_fail(err, errlen, ATTUNE_ETOOBIG,
                         "fleet table has %zu stacks and %zu measurements, over the limits "
                         "of %d and %d",
                         nstacks, nrows, FLEET_MAX_STACKS, FLEET_MAX_ROWS);
        goto fail;
    }

    rc = ATTUNE_ENOMEM;
    if ((stacks = calloc(nstacks ? nstacks : 1, sizeof *stacks)) == NULL ||
        (keys = calloc(nrows ? nrows : 1, sizeof *keys)) == NULL ||
        (touched = calloc(nrows ? nrows : 1, sizeof *touched)) == NULL) {
        attune_fail(err, errlen, rc, "out of memory");
        goto fail;
    }
    int64_t seen = exported_at, newest = -1;
    if ((rc = check_stacks(stacks_js, latest, stacks, err, errlen)) != 0 ||
        (rc = check_rows(&rows, dev.id, stacks, nstacks, keys, &newest, err, errlen)) != 0 ||
        (rc = store_fleet_pins_read(root, &dev, &pins, &npins, err, errlen)) != 0)
        goto fail;
    if (newest >= 0)
        seen = newest; /* the device was seen when it was last measured */

    /* Merge: all or nothing. */
    merge_args a = {.stacks = stacks, .nstacks = nstacks, .dev = &dev, .seen = seen,
                    .latest = latest, .rows = &rows, .pins = pins, .npins = npins,
                    .touched = touched,
                    .err = err, .errlen = errlen};
    if ((rc = store_tx(st, merge_tx, &a)) != 0) {
        if (a.stage == 0)
            attune_fail(err, errlen, rc, "cannot lock the database: %s", sqlite3_errmsg(st->db));
        else if (a.stage == 2) /* COMMIT failed */
            merge_fail(st, rc, err, errlen);
        goto fail;
    }
    if (stats != NULL)
        *stats = a.got;
fail:
    json_decref(root);
    fleet_rows_free(&rows);
    free(stacks);
    free(keys);
    free(touched);
    free(pins);
    return rc;
}

/* ---- for store_stream.c: the same objects, piece by piece */

json_t *store_fleet_measurement_json(const store_measurement *m)
{
    return measurement_json(m);
}

json_t *store_fleet_head_json(store *st, const attn_device_info *info,
                              const attn_stack *latest)
{
    char host[64];
    json_t *stacks = json_array();
    if (stacks == NULL || stacks_json(st, info->id, stacks) != 0) {
        json_decref(stacks);
        return NULL;
    }
    if (gethostname(host, sizeof host) != 0)
        host[0] = 0;
    host[sizeof host - 1] = 0;
    /* the keys of store_export's root, in its order, measurements last */
    json_t *head = json_pack("{ss si sI ss so so}", "format", FLEET_FORMAT, "version",
                             FLEET_VERSION, "exported_at", (json_int_t)store_now(), "host",
                             host, "device", device_json(info, latest), "stacks", stacks);
    if (head != NULL && store_fleet_pins_put(st, info, head) != 0) {
        json_decref(head);
        return NULL;
    }
    return head;
}
