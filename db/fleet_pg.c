/* fleet_pg.c -- the fleet store on PostgreSQL: connect, push, aggregate, pull.
 *
 * A push resolves its dimension rows (models, devices, stacks, shapes,
 * tactics) to server ids first, each in its own small autocommit upsert
 * (orphan dimension rows are harmless, and committed ids can be cached per
 * connection), then sends the measurement rows with COPY into a temporary
 * staging table and merges them with one INSERT ... ON CONFLICT, in one
 * transaction with the pusher's watermark. See fleet_pg.h. */
#include "fleet_pg.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/hash.h"

void fleet_model_id(const attn_device_info *d, char *out, size_t len)
{
    char text[256];
    int n = snprintf(text, sizeof text, "%s|%s|%d.%d|%d|%" PRId64, d->name, d->kind,
                     d->cc_major, d->cc_minor, d->sm_count, d->memory_mb);
    if (n < 0)
        n = 0;
    if ((size_t)n >= sizeof text)
        n = sizeof text - 1;
    uint64_t h = hash_fnv1a64(hash_fnv1a64_init(), text, (size_t)n);
    snprintf(out, len, FLEET_DEVICE_PREFIX "%016" PRIx64, h);
}

int fleet_is_model_device(const char *id)
{
    return id != NULL && strncmp(id, FLEET_DEVICE_PREFIX, strlen(FLEET_DEVICE_PREFIX)) == 0;
}

#ifndef ATTUNE_HAVE_LIBPQ

/* Built without libpq: the fleet server is not available. */
#define NOPQ(err, errlen) \
    attune_fail(err, errlen, ATTUNE_EUNSUPP, "this attune was built without libpq")

int fleet_pg_url_check(const char *url, char *err, size_t errlen) { return NOPQ(err, errlen); }
int fleet_pg_connect(const char *url, fleet_pg **out, char *err, size_t errlen)
{
    *out = NULL;
    return NOPQ(err, errlen);
}
void fleet_pg_close(fleet_pg *c) { (void)c; }
void fleet_pg_describe(fleet_pg *c, char *buf, size_t len) { snprintf(buf, len, "-"); }
int fleet_pg_push(fleet_pg *c, const fleet_batch *b, fleet_push_stats *stats, char *err,
                  size_t errlen) { return NOPQ(err, errlen); }
int fleet_pg_source_seq(fleet_pg *c, const char *source, int64_t *seq, char *err,
                        size_t errlen) { return NOPQ(err, errlen); }
int fleet_pg_refresh(fleet_pg *c, const attn_device_info *d, int64_t *groups, char *err,
                     size_t errlen) { return NOPQ(err, errlen); }
int fleet_pg_pull(fleet_pg *c, const attn_device_info *d, int refresh_after_s, char **json,
                  int *nrows, char *err, size_t errlen) { return NOPQ(err, errlen); }
int fleet_pg_info_get(fleet_pg *c, const char *source, fleet_pg_info *out, char *err,
                      size_t errlen) { return NOPQ(err, errlen); }
int fleet_pg_exec(fleet_pg *c, const char *sql, char *err, size_t errlen)
{
    return NOPQ(err, errlen);
}

#else

#include <jansson.h>

#include "../common/json_num.h"
#include "../common/shape_json.h"
#include "fleet_pg_internal.h"
#include "store_internal.h"

/* ---- errors */

int fleet_pg_fail(fleet_pg *c, const PGresult *r, const char *what, char *err,
                  size_t errlen)
{
    const char *msg = r ? PQresultErrorMessage(r) : "";
    if (msg == NULL || *msg == 0)
        msg = PQerrorMessage(c->conn);
    /* libpq messages end in a newline */
    size_t n = strlen(msg);
    while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
        n--;
    int code = PQstatus(c->conn) == CONNECTION_BAD ? ATTUNE_EIO : ATTUNE_EDB;
    return attune_fail(err, errlen, code, "%s: %.*s", what, (int)n, msg);
}

int fleet_pg_cmd(fleet_pg *c, const char *sql, char *err, size_t errlen)
{
    PGresult *r = PQexec(c->conn, sql);
    int rc = 0;
    ExecStatusType s = PQresultStatus(r);
    if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK)
        rc = fleet_pg_fail(c, r, "fleet server", err, errlen);
    PQclear(r);
    return rc;
}

int fleet_pg_exec(fleet_pg *c, const char *sql, char *err, size_t errlen)
{
    return fleet_pg_cmd(c, sql, err, errlen);
}

static void rollback(fleet_pg *c)
{
    if (PQstatus(c->conn) == CONNECTION_OK)
        PQclear(PQexec(c->conn, "ROLLBACK"));
}

/* ---- id maps */

static void idmap_free(fleet_idmap *m)
{
    for (size_t i = 0; i < m->cap; i++)
        free(m->keys ? m->keys[i] : NULL);
    free(m->keys);
    free(m->ids);
    memset(m, 0, sizeof *m);
}

static size_t idmap_slot(const fleet_idmap *m, const char *key)
{
    uint64_t h = hash_fnv1a64(hash_fnv1a64_init(), key, strlen(key));
    size_t i = (size_t)h & (m->cap - 1);
    while (m->keys[i] != NULL && strcmp(m->keys[i], key) != 0)
        i = (i + 1) & (m->cap - 1);
    return i;
}

/* id of key, or -1 when not mapped. */
static int idmap_get(const fleet_idmap *m, const char *key)
{
    if (m->cap == 0)
        return -1;
    size_t i = idmap_slot(m, key);
    return m->keys[i] ? m->ids[i] : -1;
}

static int idmap_put(fleet_idmap *m, const char *key, int id)
{
    if ((m->n + 1) * 2 > m->cap) {
        fleet_idmap g = {0};
        g.cap = m->cap ? m->cap * 2 : 256;
        g.keys = calloc(g.cap, sizeof *g.keys);
        g.ids = calloc(g.cap, sizeof *g.ids);
        if (g.keys == NULL || g.ids == NULL) {
            free(g.keys);
            free(g.ids);
            return ATTUNE_ENOMEM;
        }
        for (size_t i = 0; i < m->cap; i++)
            if (m->keys[i] != NULL) {
                size_t j = idmap_slot(&g, m->keys[i]);
                g.keys[j] = m->keys[i];
                g.ids[j] = m->ids[i];
            }
        g.n = m->n;
        free(m->keys);
        free(m->ids);
        *m = g;
    }
    size_t i = idmap_slot(m, key);
    if (m->keys[i] == NULL) {
        if ((m->keys[i] = strdup(key)) == NULL)
            return ATTUNE_ENOMEM;
        m->n++;
    }
    m->ids[i] = id;
    return 0;
}

/* ---- connection */

int fleet_pg_url_check(const char *url, char *err, size_t errlen)
{
    if (url == NULL || *url == 0)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "empty fleet URL");
    char *perr = NULL;
    PQconninfoOption *opts = PQconninfoParse(url, &perr);
    if (opts == NULL) {
        /* libpq's message may quote the URL: say only that it is malformed */
        PQfreemem(perr);
        return attune_fail(err, errlen, ATTUNE_EINVAL,
                           "the fleet URL is not a valid PostgreSQL URI or conninfo string");
    }
    int rc = 0;
    for (PQconninfoOption *o = opts; o->keyword != NULL; o++)
        if (strcmp(o->keyword, "password") == 0 && o->val != NULL && o->val[0] != 0)
            rc = attune_fail(err, errlen, ATTUNE_EINVAL,
                             "the fleet URL carries a password: remove it and use "
                             "PGPASSFILE, ~/.pgpass or PGPASSWORD (credentials must not "
                             "appear on command lines or in logs)");
    PQconninfoFree(opts);
    return rc;
}

static void quiet_notices(void *arg, const char *msg)
{
    (void)arg;
    (void)msg; /* "relation already exists, skipping" and the like */
}

/* The staging table of pushes, private to the connection and emptied by
 * every commit or rollback. */
static const char stage_sql[] =
    "CREATE TEMP TABLE IF NOT EXISTS fleet_stage ("
    " model_id int, stack_id int, shape_id int, tactic_id int, device_id int,"
    " status text, time_us float8, time_us_min float8, time_us_max float8,"
    " time_us_copies float8, n int, max_abs_err float8, rel_err float8, mode text,"
    " l2 text, rows_checked int, note text, host text, taken_at bigint)"
    " ON COMMIT DELETE ROWS";

int fleet_pg_connect(const char *url, fleet_pg **out, char *err, size_t errlen)
{
    *out = NULL;
    int rc = fleet_pg_url_check(url, err, errlen);
    if (rc != 0)
        return rc;
    fleet_pg *c = calloc(1, sizeof *c);
    if (c == NULL)
        return ATTUNE_ENOMEM;
    /* later keywords override earlier ones: the URL's own settings win */
    const char *keys[] = {"connect_timeout", "application_name", "dbname", NULL};
    const char *vals[] = {"10", "attune", url, NULL};
    c->conn = PQconnectdbParams(keys, vals, 1);
    if (c->conn == NULL) {
        free(c);
        return ATTUNE_ENOMEM;
    }
    if (PQstatus(c->conn) != CONNECTION_OK) {
        rc = fleet_pg_fail(c, NULL, "cannot connect to the fleet server", err, errlen);
        rc = ATTUNE_EIO;
        goto fail;
    }
    PQsetNoticeProcessor(c->conn, quiet_notices, NULL);
    if ((rc = fleet_pg_cmd(c, "SET client_encoding = 'UTF8'", err, errlen)) != 0 ||
        (rc = fleet_pg_schema_migrate(c, err, errlen)) != 0 ||
        (rc = fleet_pg_cmd(c, stage_sql, err, errlen)) != 0)
        goto fail;
    *out = c;
    return 0;
fail:
    fleet_pg_close(c);
    return rc;
}

void fleet_pg_close(fleet_pg *c)
{
    if (c == NULL)
        return;
    PQfinish(c->conn);
    idmap_free(&c->shapes);
    idmap_free(&c->tactics);
    idmap_free(&c->stacks);
    idmap_free(&c->devices);
    idmap_free(&c->models);
    free(c);
}

void fleet_pg_describe(fleet_pg *c, char *buf, size_t len)
{
    const char *host = PQhost(c->conn), *port = PQport(c->conn), *db = PQdb(c->conn);
    snprintf(buf, len, "host=%s port=%s db=%s", host ? host : "-", port ? port : "-",
             db ? db : "-");
}

/* ---- dimension rows */

/* Run an upsert that returns one id; params are text. */
static int upsert_id(fleet_pg *c, const char *sql, int nparams, const char *const *params,
                     int *id, char *err, size_t errlen)
{
    PGresult *r = PQexecParams(c->conn, sql, nparams, NULL, params, NULL, NULL, 0);
    int rc = 0;
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1)
        rc = fleet_pg_fail(c, r, "fleet server (dimension row)", err, errlen);
    else
        *id = atoi(PQgetvalue(r, 0, 0));
    PQclear(r);
    return rc;
}

/* "DO UPDATE SET x = excluded.x" (no change) makes RETURNING answer for an
 * existing row too, in one round trip. */
static int model_id(fleet_pg *c, const attn_device_info *d, int *id, char *err, size_t errlen)
{
    char uid[32], ccma[8], ccmi[8], sm[16], mem[24];
    fleet_model_id(d, uid, sizeof uid);
    if ((*id = idmap_get(&c->models, uid)) >= 0)
        return 0;
    snprintf(ccma, sizeof ccma, "%d", d->cc_major);
    snprintf(ccmi, sizeof ccmi, "%d", d->cc_minor);
    snprintf(sm, sizeof sm, "%d", d->sm_count);
    snprintf(mem, sizeof mem, "%" PRId64, d->memory_mb);
    const char *p[] = {uid, d->name, d->kind, ccma, ccmi, sm, mem};
    int rc = upsert_id(c,
                       "INSERT INTO models (uid, name, kind, cc_major, cc_minor, sm_count, "
                       "memory_mb) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (uid) "
                       "DO UPDATE SET uid = excluded.uid RETURNING id",
                       7, p, id, err, errlen);
    return rc ? rc : idmap_put(&c->models, uid, *id);
}

static int device_id(fleet_pg *c, const attn_device_info *d, const char *host, int model,
                     int *id, char *err, size_t errlen)
{
    if ((*id = idmap_get(&c->devices, d->id)) >= 0)
        return 0;
    char ms[16], clk[16], mclk[16];
    snprintf(ms, sizeof ms, "%d", model);
    snprintf(clk, sizeof clk, "%d", d->clock_mhz);
    snprintf(mclk, sizeof mclk, "%d", d->mem_clock_mhz);
    const char *p[] = {d->id, ms, host ? host : "", clk, mclk};
    int rc = upsert_id(c,
                       "INSERT INTO devices (uid, model_id, host, clock_mhz, mem_clock_mhz) "
                       "VALUES ($1, $2, $3, $4, $5) ON CONFLICT (uid) DO UPDATE SET "
                       "model_id = excluded.model_id, host = excluded.host, clock_mhz = "
                       "excluded.clock_mhz, mem_clock_mhz = excluded.mem_clock_mhz, "
                       "last_push = now() RETURNING id",
                       5, p, id, err, errlen);
    return rc ? rc : idmap_put(&c->devices, d->id, *id);
}

static int stack_id(fleet_pg *c, const attn_stack *s, int *id, char *err, size_t errlen)
{
    if ((*id = idmap_get(&c->stacks, s->id)) >= 0)
        return 0;
    const char *p[] = {s->id, s->driver, s->runtime, s->blas, s->attune, s->kernels,
                       s->power};
    int rc = upsert_id(c,
                       "INSERT INTO stacks (uid, driver, runtime, blas, attune, kernels, "
                       "power) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (uid) DO "
                       "UPDATE SET uid = excluded.uid RETURNING id",
                       7, p, id, err, errlen);
    return rc ? rc : idmap_put(&c->stacks, s->id, *id);
}

static int shape_id(fleet_pg *c, const attn_shape *s, const char *key, int *id, char *err,
                    size_t errlen)
{
    if ((*id = idmap_get(&c->shapes, key)) >= 0)
        return 0;
    char v[6][24];
    const int64_t f[6] = {s->b, s->hq, s->hkv, s->sq, s->skv, s->d};
    for (int i = 0; i < 6; i++)
        snprintf(v[i], sizeof v[i], "%" PRId64, f[i]);
    const char *p[] = {key, v[0], v[1], v[2], v[3], v[4], v[5], attn_dtype_name(s->dtype),
                       s->causal ? "true" : "false"};
    int rc = upsert_id(c,
                       "INSERT INTO shapes (key, b, hq, hkv, sq, skv, d, dtype, causal) "
                       "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (key) DO "
                       "UPDATE SET key = excluded.key RETURNING id",
                       9, p, id, err, errlen);
    return rc ? rc : idmap_put(&c->shapes, key, *id);
}

static int tactic_id(fleet_pg *c, const char *tactic, int *id, char *err, size_t errlen)
{
    if ((*id = idmap_get(&c->tactics, tactic)) >= 0)
        return 0;
    const char *p[] = {tactic};
    int rc = upsert_id(c,
                       "INSERT INTO tactics (text) VALUES ($1) ON CONFLICT (text) DO "
                       "UPDATE SET text = excluded.text RETURNING id",
                       1, p, id, err, errlen);
    return rc ? rc : idmap_put(&c->tactics, tactic, *id);
}

/* ---- COPY text */

typedef struct cbuf {
    char *p;
    size_t len, cap;
    int oom;
} cbuf;

static void cb_reserve(cbuf *b, size_t extra)
{
    if (b->oom || b->len + extra <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 1 << 20;
    while (cap < b->len + extra)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (p == NULL) {
        b->oom = 1;
        return;
    }
    b->p = p;
    b->cap = cap;
}

/* A text field, escaped for COPY's text format (backslash, tab, newlines:
 * validated text has no other control characters), then sep. */
static void cb_text(cbuf *b, const char *s, char sep)
{
    size_t n = strlen(s);
    cb_reserve(b, 2 * n + 2);
    if (b->oom)
        return;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (ch == '\\' || ch == '\t' || ch == '\n' || ch == '\r') {
            b->p[b->len++] = '\\';
            ch = ch == '\t' ? 't' : ch == '\n' ? 'n' : ch == '\r' ? 'r' : '\\';
        }
        b->p[b->len++] = ch;
    }
    b->p[b->len++] = sep;
}

static void cb_int(cbuf *b, int64_t v, char sep)
{
    cb_reserve(b, 24);
    if (!b->oom)
        b->len += (size_t)snprintf(b->p + b->len, 24, "%" PRId64 "%c", v, sep);
}

/* NaN -> \N (NULL); the shortest digits that read back exactly. */
static void cb_num(cbuf *b, double v, char sep)
{
    cb_reserve(b, JSON_NUM_MAX + 2);
    if (b->oom)
        return;
    if (!isfinite(v)) {
        b->len += (size_t)snprintf(b->p + b->len, 4, "\\N%c", sep);
        return;
    }
    b->len += (size_t)json_num_shortest(v, b->p + b->len);
    b->p[b->len++] = sep;
}

static int copy_send(fleet_pg *c, const char *sql, const cbuf *b, char *err, size_t errlen)
{
    PGresult *r = PQexec(c->conn, sql);
    if (PQresultStatus(r) != PGRES_COPY_IN) {
        int rc = fleet_pg_fail(c, r, "fleet server (COPY)", err, errlen);
        PQclear(r);
        return rc;
    }
    PQclear(r);
    int ok = 1;
    for (size_t off = 0; off < b->len && ok;) {
        size_t chunk = b->len - off < (1u << 20) ? b->len - off : (1u << 20);
        ok = PQputCopyData(c->conn, b->p + off, (int)chunk) == 1;
        off += chunk;
    }
    if (PQputCopyEnd(c->conn, ok ? NULL : "client failed") != 1)
        ok = 0;
    int rc = 0;
    while ((r = PQgetResult(c->conn)) != NULL) {
        if (PQresultStatus(r) != PGRES_COMMAND_OK && rc == 0)
            rc = fleet_pg_fail(c, r, "fleet server (COPY)", err, errlen);
        PQclear(r);
    }
    if (rc == 0 && !ok)
        rc = fleet_pg_fail(c, NULL, "fleet server (COPY)", err, errlen);
    return rc;
}

/* ---- push */

static int find_device(const fleet_batch *b, const char *id)
{
    for (int i = 0; i < b->ndevices; i++)
        if (strcmp(b->devices[i].id, id) == 0)
            return i;
    return -1;
}

static int find_stack(const fleet_batch *b, const char *id)
{
    for (int i = 0; i < b->nstacks; i++)
        if (strcmp(b->stacks[i].id, id) == 0)
            return i;
    return -1;
}

/* A row's server key (model, stack, shape, tactic, device ids), its age
 * and its index in the batch. */
typedef struct prow {
    int k[5];
    int64_t taken_at;
    int idx;
} prow;

static int prow_cmp(const void *pa, const void *pb)
{
    const prow *a = pa, *b = pb;
    for (int i = 0; i < 5; i++)
        if (a->k[i] != b->k[i])
            return a->k[i] < b->k[i] ? -1 : 1;
    if (a->taken_at != b->taken_at)
        return a->taken_at > b->taken_at ? -1 : 1; /* newest first */
    return a->idx > b->idx ? -1 : a->idx < b->idx;  /* then the later row */
}

static const char merge_sql[] =
    "INSERT INTO measurements AS m (model_id, stack_id, shape_id, tactic_id, device_id,"
    " status, time_us, time_us_min, time_us_max, time_us_copies, n, max_abs_err, rel_err,"
    " mode, l2, rows_checked, note, host, taken_at)"
    " SELECT model_id, stack_id, shape_id, tactic_id, device_id, status, time_us,"
    " time_us_min, time_us_max, time_us_copies, n, max_abs_err, rel_err, mode, l2,"
    " rows_checked, note, host, taken_at FROM fleet_stage"
    " ON CONFLICT (model_id, stack_id, shape_id, tactic_id, device_id) DO UPDATE SET"
    " status = excluded.status, time_us = excluded.time_us,"
    " time_us_min = excluded.time_us_min, time_us_max = excluded.time_us_max,"
    " time_us_copies = excluded.time_us_copies, n = excluded.n,"
    " max_abs_err = excluded.max_abs_err, rel_err = excluded.rel_err,"
    " mode = excluded.mode, l2 = excluded.l2, rows_checked = excluded.rows_checked,"
    " note = excluded.note, host = excluded.host, taken_at = excluded.taken_at,"
    " pushed_at = now()"
    " WHERE excluded.taken_at > m.taken_at OR (excluded.taken_at = m.taken_at AND"
    " (excluded.status, excluded.time_us, excluded.time_us_min, excluded.time_us_max,"
    "  excluded.time_us_copies, excluded.n, excluded.max_abs_err, excluded.rel_err)"
    " IS DISTINCT FROM (m.status, m.time_us, m.time_us_min, m.time_us_max,"
    "  m.time_us_copies, m.n, m.max_abs_err, m.rel_err))";

static const char dirty_sql[] =
    "INSERT INTO dirty SELECT DISTINCT model_id, stack_id, shape_id FROM fleet_stage"
    " ORDER BY 1, 2, 3 ON CONFLICT DO NOTHING";

/* Lock the source's row and read its watermark (inside the transaction). */
static int source_lock(fleet_pg *c, const char *source, int64_t *seq, char *err,
                       size_t errlen)
{
    const char *p[] = {source};
    PGresult *r = PQexecParams(c->conn,
                               "INSERT INTO sources (id, pushed_seq) VALUES ($1, 0) "
                               "ON CONFLICT (id) DO NOTHING",
                               1, NULL, p, NULL, NULL, 0);
    int rc = 0;
    if (PQresultStatus(r) != PGRES_COMMAND_OK)
        rc = fleet_pg_fail(c, r, "fleet server (source)", err, errlen);
    PQclear(r);
    if (rc != 0)
        return rc;
    r = PQexecParams(c->conn, "SELECT pushed_seq FROM sources WHERE id = $1 FOR UPDATE", 1,
                     NULL, p, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1)
        rc = fleet_pg_fail(c, r, "fleet server (source)", err, errlen);
    else
        *seq = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    return rc;
}

int fleet_pg_push(fleet_pg *c, const fleet_batch *b, fleet_push_stats *stats, char *err,
                  size_t errlen)
{
    cbuf buf = {0};
    int rc = 0, in_tx = 0;
    int *dev_ok = NULL, *dev_sid = NULL, *dev_mid = NULL, *stk_sid = NULL;
    prow *keys = NULL;
    int nkeys = 0;
    char first_bad[512] = "";
    if (c == NULL || b == NULL || stats == NULL)
        return ATTUNE_EINVAL;
    int nd = b->ndevices > 0 ? b->ndevices : 1, ns = b->nstacks > 0 ? b->nstacks : 1;
    dev_ok = calloc((size_t)nd, sizeof *dev_ok);
    dev_sid = calloc((size_t)nd, sizeof *dev_sid);
    dev_mid = calloc((size_t)nd, sizeof *dev_mid);
    stk_sid = calloc((size_t)ns, sizeof *stk_sid);
    keys = malloc(sizeof *keys * (size_t)(b->nrows > 0 ? b->nrows : 1));
    if (!dev_ok || !dev_sid || !dev_mid || !stk_sid || !keys) {
        rc = ATTUNE_ENOMEM;
        goto out;
    }
    /* Devices and stacks first: a malformed one rejects its rows. */
    for (int i = 0; i < b->ndevices; i++) {
        char why[ATTUNE_ERRLEN];
        const char *host = b->device_hosts ? b->device_hosts[i] : "";
        if (store_check_device(&b->devices[i], why, sizeof why) != 0 ||
            store_check_text(host ? host : "", 64, "host", why, sizeof why) != 0) {
            dev_ok[i] = -1;
            if (!first_bad[0])
                snprintf(first_bad, sizeof first_bad, "device %.64s: %.200s", b->devices[i].id,
                         why);
        }
    }
    for (int i = 0; i < b->nstacks; i++) {
        char why[ATTUNE_ERRLEN];
        if (store_check_stack(&b->stacks[i], why, sizeof why) != 0) {
            stk_sid[i] = -2;
            if (!first_bad[0])
                snprintf(first_bad, sizeof first_bad, "stack %.24s: %.200s", b->stacks[i].id,
                         why);
        } else {
            stk_sid[i] = -1; /* valid, id not resolved yet */
        }
    }
    for (int i = 0; i < b->nrows; i++) {
        const store_measurement *m = &b->rows[i];
        char canon[ATTN_TACTIC_STR_MAX], key[ATTN_SHAPE_KEY_MAX], why[ATTUNE_ERRLEN];
        int di = find_device(b, m->device_id), si = find_stack(b, m->stack_id);
        int bad = di < 0 || si < 0 || dev_ok[di] < 0 || stk_sid[si] == -2;
        if (!bad && store_check_measurement(m, canon, why, sizeof why) != 0) {
            bad = 1;
        } else if (bad) {
            snprintf(why, sizeof why, "%s", di < 0 || si < 0 ? "unknown device or stack"
                                                              : "its device or stack is malformed");
        }
        if (bad) {
            stats->rejected++;
            if (!first_bad[0])
                snprintf(first_bad, sizeof first_bad, "row %d (%.64s %.96s): %.200s", i,
                         m->device_id, m->tactic, why);
            continue;
        }
        int mid, did, sid, shid, tid;
        if (dev_ok[di] == 0) {
            if ((rc = model_id(c, &b->devices[di], &mid, err, errlen)) != 0 ||
                (rc = device_id(c, &b->devices[di], b->device_hosts ? b->device_hosts[di] : "",
                                mid, &did, err, errlen)) != 0)
                goto out;
            dev_ok[di] = 1;
            dev_mid[di] = mid;
            dev_sid[di] = did;
        }
        if (stk_sid[si] == -1) {
            if ((rc = stack_id(c, &b->stacks[si], &sid, err, errlen)) != 0)
                goto out;
            stk_sid[si] = sid;
        }
        attn_shape_key(&m->shape, key, sizeof key);
        if ((rc = shape_id(c, &m->shape, key, &shid, err, errlen)) != 0 ||
            (rc = tactic_id(c, canon, &tid, err, errlen)) != 0)
            goto out;
        prow *pr = &keys[nkeys++];
        pr->k[0] = dev_mid[di];
        pr->k[1] = stk_sid[si];
        pr->k[2] = shid;
        pr->k[3] = tid;
        pr->k[4] = dev_sid[di];
        pr->taken_at = m->taken_at;
        pr->idx = i;
    }
    /* one row per key (a log may name a row twice; ON CONFLICT DO UPDATE
     * may touch a row once per statement): the newest wins */
    qsort(keys, (size_t)nkeys, sizeof *keys, prow_cmp);
    for (int k = 0; k < nkeys; k++) {
        if (k > 0 && memcmp(keys[k].k, keys[k - 1].k, sizeof keys[k].k) == 0)
            continue;
        const store_measurement *m = &b->rows[keys[k].idx];
        for (int f = 0; f < 5; f++)
            cb_int(&buf, keys[k].k[f], '\t');
        cb_text(&buf, store_status_name(m->status), '\t');
        cb_num(&buf, m->time_us, '\t');
        cb_num(&buf, m->time_us_min, '\t');
        cb_num(&buf, m->time_us_max, '\t');
        cb_num(&buf, m->time_us_copies, '\t');
        cb_int(&buf, m->n, '\t');
        cb_num(&buf, m->max_abs_err, '\t');
        cb_num(&buf, m->rel_err, '\t');
        cb_text(&buf, m->mode, '\t');
        cb_text(&buf, m->l2, '\t');
        cb_int(&buf, m->rows_checked, '\t');
        cb_text(&buf, m->note, '\t');
        cb_text(&buf, m->host, '\t');
        cb_int(&buf, m->taken_at, '\n');
        stats->sent++;
    }
    if (buf.oom) {
        rc = ATTUNE_ENOMEM;
        goto out;
    }

    if ((rc = fleet_pg_cmd(c, "BEGIN", err, errlen)) != 0)
        goto out;
    in_tx = 1;
    /* again in each transaction: behind a transaction-pooling proxy the
     * session that made it at connect may not be this one */
    if ((rc = fleet_pg_cmd(c, stage_sql, err, errlen)) != 0)
        goto out;
    if (b->source != NULL) {
        int64_t have = 0;
        if ((rc = source_lock(c, b->source, &have, err, errlen)) != 0)
            goto out;
        if (have >= b->last_seq) {
            /* a push that committed before its pusher died: already here */
            stats->skipped++;
            rc = fleet_pg_cmd(c, "ROLLBACK", err, errlen);
            in_tx = 0;
            goto out;
        }
    }
    if (buf.len > 0 &&
        ((rc = copy_send(c, "COPY fleet_stage FROM STDIN", &buf, err, errlen)) != 0 ||
         (rc = fleet_pg_cmd(c, merge_sql, err, errlen)) != 0 ||
         (rc = fleet_pg_cmd(c, dirty_sql, err, errlen)) != 0))
        goto out;
    if (b->source != NULL) {
        char seq[24];
        snprintf(seq, sizeof seq, "%" PRId64, b->last_seq);
        const char *p[] = {b->source, seq};
        PGresult *r = PQexecParams(c->conn,
                                   "UPDATE sources SET pushed_seq = $2, updated_at = now() "
                                   "WHERE id = $1",
                                   2, NULL, p, NULL, NULL, 0);
        if (PQresultStatus(r) != PGRES_COMMAND_OK)
            rc = fleet_pg_fail(c, r, "fleet server (watermark)", err, errlen);
        PQclear(r);
        if (rc != 0)
            goto out;
    }
    rc = fleet_pg_cmd(c, "COMMIT", err, errlen);
    in_tx = 0;
    if (rc == 0 && first_bad[0])
        snprintf(err, errlen, "%s", first_bad);
out:
    if (in_tx)
        rollback(c);
    free(buf.p);
    free(dev_ok);
    free(dev_sid);
    free(dev_mid);
    free(stk_sid);
    free(keys);
    return rc;
}

int fleet_pg_source_seq(fleet_pg *c, const char *source, int64_t *seq, char *err,
                        size_t errlen)
{
    const char *p[] = {source};
    *seq = 0;
    PGresult *r = PQexecParams(c->conn, "SELECT pushed_seq FROM sources WHERE id = $1", 1,
                               NULL, p, NULL, NULL, 0);
    int rc = 0;
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        rc = fleet_pg_fail(c, r, "fleet server (source)", err, errlen);
    else if (PQntuples(r) == 1)
        *seq = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    return rc;
}

/* ---- aggregates */

/* Advisory lock key of refreshes: they replace aggregate rows by group, so
 * two at once could insert the same key. */
#define REFRESH_LOCK_KEY 737302

/* Spread: interquartile range / median over the ok devices. Outliers, in
 * groups of at least 3 ok devices (with 2 there is no majority to be far
 * from): a device whose median is off the group's by more than 25%, and,
 * in groups of 8 or more where quartiles mean something, by more than 3
 * interquartile ranges (a group that is wide by nature flags nobody). */
static const char *const refresh_sql[] = {
    /* prev_at: the group's last updated_at, so a new one is strictly later
     * even within one second (pulled rows replace a local fleet row only
     * when their taken_at is newer: two refreshes in one second would
     * otherwise leave the first one's rows in place) */
    "CREATE TEMP TABLE IF NOT EXISTS fleet_groups (model_id int, stack_id int,"
    " shape_id int, prev_at bigint) ON COMMIT DELETE ROWS",
    "WITH d AS (DELETE FROM dirty WHERE $1::int IS NULL OR model_id = $1::int RETURNING *)"
    " INSERT INTO fleet_groups (model_id, stack_id, shape_id)"
    " SELECT model_id, stack_id, shape_id FROM d",
    /* a temporary table has no statistics: without them the planner takes
     * it for tiny and scans measurements once per group */
    "ANALYZE fleet_groups",
    "UPDATE fleet_groups g SET prev_at = (SELECT max(a.updated_at) FROM aggregates a"
    " WHERE a.model_id = g.model_id AND a.stack_id = g.stack_id AND a.shape_id = g.shape_id)",
    "DELETE FROM aggregates a USING fleet_groups g WHERE a.model_id = g.model_id"
    " AND a.stack_id = g.stack_id AND a.shape_id = g.shape_id",
    "DELETE FROM outliers o USING fleet_groups g WHERE o.model_id = g.model_id"
    " AND o.stack_id = g.stack_id AND o.shape_id = g.shape_id",
    /* One sort of the groups' rows (by key, status, time) gives every
     * order statistic at once: the median (the middle one or two ok rows),
     * the quartiles for the spread, min and max. Ordered-set aggregates
     * (percentile_cont) would sort once per group: 80k sorts for 8M rows. */
    "INSERT INTO aggregates (model_id, stack_id, shape_id, tactic_id, devices, ok_devices,"
    " status, median_us, min_us, max_us, copies_us, spread, rel_err, max_abs_err,"
    " updated_at)"
    " SELECT model_id, stack_id, shape_id, tactic_id, devices, c_ok,"
    "  CASE WHEN c_ok >= greatest(c_in, c_fa, c_un) THEN 'ok'"
    "   WHEN c_in >= greatest(c_fa, c_un) THEN 'inaccurate'"
    "   WHEN c_fa >= c_un THEN 'failed' ELSE 'unsupported' END,"
    "  med, tmin, tmax, copies, CASE WHEN med > 0 THEN (q3 - q1) / med END, rel, abs_err,"
    "  greatest(extract(epoch FROM now())::bigint, coalesce(prev_at + 1, 0))"
    " FROM (SELECT model_id, stack_id, shape_id, tactic_id, count(*) AS devices,"
    "  count(*) FILTER (WHERE status = 'ok') AS c_ok,"
    "  count(*) FILTER (WHERE status = 'inaccurate') AS c_in,"
    "  count(*) FILTER (WHERE status = 'failed') AS c_fa,"
    "  count(*) FILTER (WHERE status = 'unsupported') AS c_un,"
    "  avg(time_us) FILTER (WHERE ok AND rn IN ((nst + 1) / 2, (nst + 2) / 2)) AS med,"
    "  avg(time_us_copies) FILTER (WHERE ok AND rn IN ((nst + 1) / 2, (nst + 2) / 2))"
    "   AS copies,"
    "  max(time_us) FILTER (WHERE ok AND rn = (nst + 3) / 4) AS q1,"
    "  max(time_us) FILTER (WHERE ok AND rn = (3 * nst + 3) / 4) AS q3,"
    "  min(time_us) FILTER (WHERE ok) AS tmin, max(time_us) FILTER (WHERE ok) AS tmax,"
    "  coalesce(max(rel_err) FILTER (WHERE ok), max(rel_err)) AS rel,"
    "  coalesce(max(max_abs_err) FILTER (WHERE ok), max(max_abs_err)) AS abs_err,"
    "  max(prev_at) AS prev_at"
    "  FROM (SELECT m.model_id, m.stack_id, m.shape_id, m.tactic_id, m.status,"
    "   m.status = 'ok' AS ok, m.time_us, m.time_us_copies, m.rel_err, m.max_abs_err,"
    "   g.prev_at,"
    "   row_number() OVER w AS rn,"
    "   count(*) OVER (PARTITION BY m.model_id, m.stack_id, m.shape_id, m.tactic_id,"
    "    m.status) AS nst"
    "   FROM measurements m JOIN fleet_groups g ON m.model_id = g.model_id"
    "    AND m.stack_id = g.stack_id AND m.shape_id = g.shape_id"
    "   WINDOW w AS (PARTITION BY m.model_id, m.stack_id, m.shape_id, m.tactic_id,"
    "    m.status ORDER BY m.time_us)) r"
    "  GROUP BY 1, 2, 3, 4) k",
    "INSERT INTO outliers SELECT m.model_id, m.stack_id, m.shape_id, m.tactic_id,"
    " m.device_id, m.time_us / a.median_us"
    " FROM measurements m JOIN fleet_groups g ON m.model_id = g.model_id"
    "  AND m.stack_id = g.stack_id AND m.shape_id = g.shape_id"
    " JOIN aggregates a ON a.model_id = m.model_id AND a.stack_id = m.stack_id"
    "  AND a.shape_id = m.shape_id AND a.tactic_id = m.tactic_id"
    " WHERE m.status = 'ok' AND a.ok_devices >= 3 AND a.median_us > 0"
    "  AND abs(m.time_us - a.median_us) >"
    "      CASE WHEN a.ok_devices >= 8"
    "       THEN greatest(0.25 * a.median_us, 3 * coalesce(a.spread, 0) * a.median_us)"
    "       ELSE 0.25 * a.median_us END",
    "UPDATE aggregates a SET outliers = o.n FROM ("
    " SELECT o.model_id, o.stack_id, o.shape_id, o.tactic_id, count(*) AS n"
    " FROM outliers o JOIN fleet_groups g ON o.model_id = g.model_id"
    "  AND o.stack_id = g.stack_id AND o.shape_id = g.shape_id GROUP BY 1, 2, 3, 4) o"
    " WHERE a.model_id = o.model_id AND a.stack_id = o.stack_id AND a.shape_id = o.shape_id"
    " AND a.tactic_id = o.tactic_id",
};

/* Server id of d's model, -1 when the server has never seen it. */
static int model_lookup(fleet_pg *c, const attn_device_info *d, int *id, char *err,
                        size_t errlen)
{
    char uid[32];
    fleet_model_id(d, uid, sizeof uid);
    const char *p[] = {uid};
    PGresult *r = PQexecParams(c->conn, "SELECT id FROM models WHERE uid = $1", 1, NULL, p,
                               NULL, NULL, 0);
    int rc = 0;
    *id = -1;
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        rc = fleet_pg_fail(c, r, "fleet server (model)", err, errlen);
    else if (PQntuples(r) == 1)
        *id = atoi(PQgetvalue(r, 0, 0));
    PQclear(r);
    return rc;
}

/* Recompute the dirty groups of one model in one transaction, under the
 * model's advisory lock (two refreshes of a model would insert the same
 * aggregate keys). wait = 0: when another session holds the lock, or the
 * model was refreshed less than min_age_s ago, do nothing (a pull then
 * reads the aggregates as they are). */
static int refresh_model(fleet_pg *c, int model, int min_age_s, int wait, int64_t *groups,
                         char *err, size_t errlen)
{
    char ms[16], sql[160], age[16];
    int rc;
    snprintf(ms, sizeof ms, "%d", model);
    snprintf(age, sizeof age, "%d", min_age_s);
    const char *p[] = {ms, age};
    if ((rc = fleet_pg_cmd(c, "BEGIN", err, errlen)) != 0)
        return rc;
    snprintf(sql, sizeof sql, "SELECT %s(%d, %d)",
             wait ? "pg_advisory_xact_lock" : "pg_try_advisory_xact_lock", REFRESH_LOCK_KEY,
             model);
    PGresult *r = PQexec(c->conn, sql);
    int go = PQresultStatus(r) == PGRES_TUPLES_OK;
    if (!go) {
        rc = fleet_pg_fail(c, r, "fleet server (aggregates lock)", err, errlen);
        PQclear(r);
        goto fail;
    }
    go = wait || PQgetvalue(r, 0, 0)[0] == 't';
    PQclear(r);
    if (go && min_age_s > 0) {
        r = PQexecParams(c->conn,
                         "SELECT refreshed_at IS NULL OR refreshed_at < now() - "
                         "make_interval(secs => $2::int) FROM models WHERE id = $1::int",
                         2, NULL, p, NULL, NULL, 0);
        if (PQresultStatus(r) != PGRES_TUPLES_OK) {
            rc = fleet_pg_fail(c, r, "fleet server (aggregates age)", err, errlen);
            PQclear(r);
            goto fail;
        }
        go = PQntuples(r) == 1 && PQgetvalue(r, 0, 0)[0] == 't';
        PQclear(r);
    }
    if (!go)
        return fleet_pg_cmd(c, "ROLLBACK", err, errlen);
    /* the window sort of a model's rows (800k for 8M) fits in memory
     * instead of spilling to disk at the default 4MB */
    if ((rc = fleet_pg_cmd(c, "SET LOCAL work_mem = '256MB'", err, errlen)) != 0)
        goto fail;
    for (size_t i = 0; i < sizeof refresh_sql / sizeof refresh_sql[0]; i++) {
        int np = strstr(refresh_sql[i], "$1") != NULL;
        r = PQexecParams(c->conn, refresh_sql[i], np, NULL, np ? p : NULL, NULL, NULL, 0);
        if (PQresultStatus(r) != PGRES_COMMAND_OK) {
            rc = fleet_pg_fail(c, r, "fleet server (aggregates)", err, errlen);
            PQclear(r);
            goto fail;
        }
        if (i == 1)
            *groups += strtoll(PQcmdTuples(r), NULL, 10);
        PQclear(r);
    }
    r = PQexecParams(c->conn, "UPDATE models SET refreshed_at = now() WHERE id = $1::int", 1,
                     NULL, p, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
        rc = fleet_pg_fail(c, r, "fleet server (aggregates)", err, errlen);
        PQclear(r);
        goto fail;
    }
    PQclear(r);
    return fleet_pg_cmd(c, "COMMIT", err, errlen);
fail:
    rollback(c);
    return rc;
}

int fleet_pg_refresh(fleet_pg *c, const attn_device_info *d, int64_t *groups, char *err,
                     size_t errlen)
{
    int model = -1, rc;
    *groups = 0;
    if (d != NULL) {
        if ((rc = model_lookup(c, d, &model, err, errlen)) != 0 || model < 0)
            return rc;
        return refresh_model(c, model, 0, 1, groups, err, errlen);
    }
    /* every model with dirty groups, one transaction each */
    PGresult *r = PQexec(c->conn, "SELECT DISTINCT model_id FROM dirty ORDER BY 1");
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        rc = fleet_pg_fail(c, r, "fleet server (aggregates)", err, errlen);
        PQclear(r);
        return rc;
    }
    rc = 0;
    for (int i = 0; i < PQntuples(r) && rc == 0; i++)
        rc = refresh_model(c, atoi(PQgetvalue(r, i, 0)), 0, 1, groups, err, errlen);
    PQclear(r);
    return rc;
}

/* ---- pull */

static const char pull_sql[] =
    "SELECT st.uid, st.driver, st.runtime, st.blas, st.attune, st.kernels,"
    " sh.b, sh.hq, sh.hkv, sh.sq, sh.skv, sh.d, sh.dtype, sh.causal, t.text,"
    " a.status, a.median_us, a.min_us, a.max_us, a.copies_us, a.ok_devices, a.devices,"
    " a.spread, a.rel_err, a.max_abs_err, a.outliers, a.updated_at, st.power"
    " FROM aggregates a JOIN stacks st ON st.id = a.stack_id"
    " JOIN shapes sh ON sh.id = a.shape_id JOIN tactics t ON t.id = a.tactic_id"
    " WHERE a.model_id = $1 ORDER BY st.uid, a.shape_id, t.text";

static double col_num(const PGresult *r, int row, int col)
{
    return PQgetisnull(r, row, col) ? NAN : strtod(PQgetvalue(r, row, col), NULL);
}

/* One aggregate row as a fleet-table measurement (docs/fleet.md). */
static json_t *pull_row(const PGresult *r, int i)
{
    attn_shape s;
    memset(&s, 0, sizeof s);
    s.b = strtoll(PQgetvalue(r, i, 6), NULL, 10);
    s.hq = strtoll(PQgetvalue(r, i, 7), NULL, 10);
    s.hkv = strtoll(PQgetvalue(r, i, 8), NULL, 10);
    s.sq = strtoll(PQgetvalue(r, i, 9), NULL, 10);
    s.skv = strtoll(PQgetvalue(r, i, 10), NULL, 10);
    s.d = strtoll(PQgetvalue(r, i, 11), NULL, 10);
    if (attn_dtype_parse(PQgetvalue(r, i, 12), &s.dtype) != 0)
        return NULL;
    s.causal = PQgetvalue(r, i, 13)[0] == 't';
    char key[ATTN_SHAPE_KEY_MAX], note[128];
    attn_shape_key(&s, key, sizeof key);
    double med = col_num(r, i, 16), spread = col_num(r, i, 22);
    int ok = atoi(PQgetvalue(r, i, 20)), all = atoi(PQgetvalue(r, i, 21));
    int outl = atoi(PQgetvalue(r, i, 25));
    snprintf(note, sizeof note, "fleet: %d devices (%d ok), spread %.3g, %d outliers", all, ok,
             isfinite(spread) ? spread : 0.0, outl);
    /* copies are stored only for padded tactics: keep the fleet's median */
    double copies = col_num(r, i, 19);
    return json_pack("{s:o, s:s, s:s, s:s, s:s, s:o, s:o, s:o, s:o, s:i, s:o, s:o, "
                     "s:s, s:s, s:i, s:s, s:s, s:I}",
                     "shape", shape_json_new(&s), "shape_key", key, "tactic",
                     PQgetvalue(r, i, 14), "stack", PQgetvalue(r, i, 0), "status",
                     PQgetvalue(r, i, 15), "time_us", json_num(med), "time_us_min",
                     json_num(col_num(r, i, 17)), "time_us_max", json_num(col_num(r, i, 18)),
                     "time_us_copies", json_num(copies), "n", ok, "max_abs_err",
                     json_num(col_num(r, i, 24)), "rel_err", json_num(col_num(r, i, 23)), "mode",
                     "fleet", "l2", "", "rows_checked", 0, "note", note, "host", FLEET_HOST,
                     "taken_at", (json_int_t)strtoll(PQgetvalue(r, i, 26), NULL, 10));
}

int fleet_pg_pull(fleet_pg *c, const attn_device_info *d, int refresh_after_s, char **json,
                  int *nrows, char *err, size_t errlen)
{
    int model, rc;
    int64_t groups;
    PGresult *r = NULL;
    json_t *root = NULL, *stacks = NULL, *rows = NULL;
    *json = NULL;
    *nrows = 0;
    groups = 0;
    if ((rc = model_lookup(c, d, &model, err, errlen)) != 0 || model < 0 ||
        (rc = refresh_model(c, model, refresh_after_s, refresh_after_s <= 0, &groups, err,
                            errlen)) != 0)
        return rc;
    char ms[16];
    snprintf(ms, sizeof ms, "%d", model);
    const char *p[] = {ms};
    r = PQexecParams(c->conn, pull_sql, 1, NULL, p, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        rc = fleet_pg_fail(c, r, "fleet server (pull)", err, errlen);
        goto out;
    }
    int n = PQntuples(r);
    if (n == 0)
        goto out;
    stacks = json_array();
    rows = json_array();
    if (stacks == NULL || rows == NULL) {
        rc = ATTUNE_ENOMEM;
        goto out;
    }
    /* rows come ordered by stack: one stack object per run; the latest
     * stack is the one refreshed last */
    const char *latest = NULL;
    int64_t latest_at = -1;
    for (int i = 0; i < n; i++) {
        const char *sid = PQgetvalue(r, i, 0);
        if (i == 0 || strcmp(sid, PQgetvalue(r, i - 1, 0)) != 0) {
            json_t *so = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "id", sid, "driver",
                                   PQgetvalue(r, i, 1), "runtime", PQgetvalue(r, i, 2),
                                   "blas", PQgetvalue(r, i, 3), "attune",
                                   PQgetvalue(r, i, 4), "kernels", PQgetvalue(r, i, 5));
            /* "power" only when known, as store_export writes it */
            const char *power = PQgetvalue(r, i, 27);
            if (so != NULL && power[0] != 0 &&
                json_object_set_new(so, "power", json_string(power)) != 0) {
                json_decref(so);
                so = NULL;
            }
            if (so == NULL || json_array_append_new(stacks, so) != 0) {
                rc = ATTUNE_ENOMEM;
                goto out;
            }
        }
        int64_t at = strtoll(PQgetvalue(r, i, 26), NULL, 10);
        if (at > latest_at) {
            latest_at = at;
            latest = sid;
        }
        json_t *row = pull_row(r, i);
        if (row == NULL || json_array_append_new(rows, row) != 0) {
            rc = ATTUNE_ENOMEM;
            goto out;
        }
    }
    char uid[32], cc[16];
    fleet_model_id(d, uid, sizeof uid);
    snprintf(cc, sizeof cc, "%d.%d", d->cc_major, d->cc_minor);
    root = json_pack("{s:s, s:i, s:I, s:s, s:{s:s, s:s, s:s, s:s, s:i, s:I, s:i, s:i, s:s}, "
                     "s:O, s:O}",
                     "format", "attune-fleet", "version", 1, "exported_at",
                     (json_int_t)time(NULL), "host", FLEET_HOST, "device", "id", uid, "name",
                     d->name, "kind", d->kind, "cc", cc, "sm_count", d->sm_count, "memory_mb",
                     (json_int_t)d->memory_mb, "clock_mhz", 0, "mem_clock_mhz", 0,
                     "latest_stack", latest, "stacks", stacks, "measurements", rows);
    if (root == NULL || (*json = json_num_dumps(root, JSON_COMPACT)) ==
                            NULL) {
        rc = ATTUNE_ENOMEM;
        goto out;
    }
    *nrows = n;
out:
    PQclear(r);
    json_decref(root);
    json_decref(stacks);
    json_decref(rows);
    return rc;
}

/* ---- status */

int fleet_pg_info_get(fleet_pg *c, const char *source, fleet_pg_info *out, char *err,
                      size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->schema_version = c->schema_version;
    /* reltuples would be cheaper on huge tables; exact counts are what the
     * tests and the kill -9 loops compare against */
    static const char sql[] =
        "SELECT (SELECT count(*) FROM models), (SELECT count(*) FROM devices),"
        " (SELECT count(*) FROM stacks), (SELECT count(*) FROM shapes),"
        " (SELECT count(*) FROM measurements), (SELECT count(*) FROM aggregates),"
        " (SELECT count(*) FROM dirty), (SELECT count(*) FROM outliers)";
    PGresult *r = PQexec(c->conn, sql);
    int rc = 0;
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
        rc = fleet_pg_fail(c, r, "fleet server (status)", err, errlen);
    } else {
        int64_t *f[] = {&out->models, &out->devices, &out->stacks, &out->shapes,
                        &out->measurements, &out->aggregates, &out->dirty, &out->outliers};
        for (int i = 0; i < 8; i++)
            *f[i] = strtoll(PQgetvalue(r, 0, i), NULL, 10);
    }
    PQclear(r);
    if (rc == 0 && source != NULL)
        rc = fleet_pg_source_seq(c, source, &out->source_seq, err, errlen);
    return rc;
}

#endif
