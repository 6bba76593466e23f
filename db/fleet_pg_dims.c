/* fleet_pg_dims.c -- the fleet server's dimension rows (models, devices,
 * stacks, shapes, tactics): each upserted in its own small autocommit
 * statement that returns its id, cached per connection. Orphan dimension
 * rows are harmless, and a committed id never changes, so a push resolves
 * each distinct value once per connection and the rows carry only ids. */
#ifdef ATTUNE_HAVE_LIBPQ
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/hash.h"
#include "device_model.h"
#include "fleet_pg_internal.h"

/* ---- id maps */

void fleet_pg_idmap_free(fleet_idmap *m)
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

/* ---- dimension rows */

/* The cached ids alone (no server call): -1 when not cached. */
int fleet_pg_shape_cached(const fleet_pg *c, const char *key) { return idmap_get(&c->shapes, key); }
int fleet_pg_tactic_cached(const fleet_pg *c, const char *tactic)
{
    return idmap_get(&c->tactics, tactic);
}
int fleet_pg_stack_cached(const fleet_pg *c, const attn_stack *s)
{
    return idmap_get(&c->stacks, s->id);
}
int fleet_pg_device_cached(const fleet_pg *c, const attn_device_info *d)
{
    char uid[32];
    fleet_model_id(d, uid, sizeof uid);
    return idmap_get(&c->models, uid) >= 0 && idmap_get(&c->devices, d->id) >= 0;
}

#ifndef LIBPQ_HAS_PIPELINING
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
#endif

/* One value's id: cached, or upserted alone (its own round trip) through
 * the many-at-once path below. "DO UPDATE SET x = excluded.x" (no
 * change) makes RETURNING answer for an existing row too. */
static int one_dim(fleet_pg *c, int rc, fleet_dims_req *q, const fleet_idmap *m,
                   const char *key, int *id, char *err, size_t errlen)
{
    fleet_pg_dims_send(c, q);
    int rc2 = fleet_pg_dims_read(c, q, 1, err, errlen);
    fleet_pg_dims_req_free(q);
    if (rc != 0)
        return attune_fail(err, errlen, rc, "fleet server (dimension row): %s",
                           attune_strerror(rc));
    if (rc2 != 0)
        return rc2;
    if ((*id = idmap_get(m, key)) < 0)
        return attune_fail(err, errlen, ATTUNE_EDB, "fleet server (dimension row): no id");
    return 0;
}

int fleet_pg_model_dim(fleet_pg *c, const attn_device_info *d, int *id, char *err,
                       size_t errlen)
{
    char uid[32];
    fleet_dims_req q = FLEET_DIMS_REQ_INIT;
    fleet_model_id(d, uid, sizeof uid);
    if ((*id = idmap_get(&c->models, uid)) >= 0)
        return 0;
    return one_dim(c, fleet_pg_dims_add_model(c, &q, d), &q, &c->models, uid, id, err, errlen);
}

/* model: the id of d's model, already upserted (the upsert finds it by
 * the model's uid). */
int fleet_pg_device_dim(fleet_pg *c, const attn_device_info *d, const char *host, int model,
                        int *id, char *err, size_t errlen)
{
    fleet_dims_req q = FLEET_DIMS_REQ_INIT;
    (void)model;
    if ((*id = idmap_get(&c->devices, d->id)) >= 0)
        return 0;
    return one_dim(c, fleet_pg_dims_add_device(c, &q, d, host), &q, &c->devices, d->id, id,
                   err, errlen);
}

int fleet_pg_stack_dim(fleet_pg *c, const attn_stack *s, int *id, char *err, size_t errlen)
{
    fleet_dims_req q = FLEET_DIMS_REQ_INIT;
    if ((*id = idmap_get(&c->stacks, s->id)) >= 0)
        return 0;
    return one_dim(c, fleet_pg_dims_add_stack(c, &q, s), &q, &c->stacks, s->id, id, err,
                   errlen);
}

int fleet_pg_shape_dim(fleet_pg *c, const attn_shape *s, const char *key, int *id, char *err,
                       size_t errlen)
{
    fleet_dims_req q = FLEET_DIMS_REQ_INIT;
    if ((*id = idmap_get(&c->shapes, key)) >= 0)
        return 0;
    return one_dim(c, fleet_pg_dims_add_shape(c, &q, s, key), &q, &c->shapes, key, id, err,
                   errlen);
}

int fleet_pg_tactic_dim(fleet_pg *c, const char *tactic, int *id, char *err, size_t errlen)
{
    fleet_dims_req q = FLEET_DIMS_REQ_INIT;
    if ((*id = idmap_get(&c->tactics, tactic)) >= 0)
        return 0;
    return one_dim(c, fleet_pg_dims_add_tactic(c, &q, tactic), &q, &c->tactics, tactic, id,
                   err, errlen);
}

/* ---- many at once

 * The dimension rows a batch needs and the connection has not cached,
 * upserted together: sent in pipeline mode, each its own transaction (after whatever the
 * connection has in flight, e.g. the previous batch's commit), read back
 * in one round trip. A first batch names a few hundred shapes and
 * tactics: one by one, each was a round trip (2-7 ms on a loaded host). A
 * device's model id comes from its model's row by uid (upserted just
 * before it). Without libpq's pipelining each is upserted as it
 * is added. */
static int req_add(fleet_pg *c, fleet_dims_req *q, int kind, const char *key, const char *sql,
                   int n, const char *const *params)
{
    fleet_idmap *m = kind == FLEET_DIM_MODEL    ? &c->models
                     : kind == FLEET_DIM_DEVICE ? &c->devices
                     : kind == FLEET_DIM_STACK  ? &c->stacks
                     : kind == FLEET_DIM_SHAPE  ? &c->shapes
                                                : &c->tactics;
    if (idmap_get(m, key) >= 0)
        return 0;
    for (int i = 0; i < q->n; i++)
        if (q->kind[i] == kind && strcmp(q->key[i], key) == 0)
            return 0;
#ifdef LIBPQ_HAS_PIPELINING
    if (q->n == q->cap) {
        int cap = q->cap ? 2 * q->cap : 64;
        int *k = realloc(q->kind, sizeof *k * (size_t)cap);
        if (k != NULL)
            q->kind = k;
        char **ks = k ? realloc(q->key, sizeof *ks * (size_t)cap) : NULL;
        if (ks == NULL)
            return ATTUNE_ENOMEM;
        q->key = ks;
        q->cap = cap;
    }
    if (PQpipelineStatus(c->conn) != PQ_PIPELINE_ON && PQenterPipelineMode(c->conn) != 1)
        return ATTUNE_EIO;
    if ((q->key[q->n] = strdup(key)) == NULL)
        return ATTUNE_ENOMEM;
    q->kind[q->n] = kind;
    /* each its own transaction (a sync point after it), as one by one: in
     * one transaction, the row locks of two pushers upserting the same
     * rows in other orders would deadlock. A send that fails leaves no
     * answer: fleet_pg_dims_read reports it. */
    q->sent_ok &= PQsendQueryParams(c->conn, sql, n, NULL, params, NULL, NULL, 0) == 1 &&
                  PQpipelineSync(c->conn) == 1;
    q->n++;
    return 0;
#else
    char err[ATTUNE_ERRLEN];
    int id, rc = upsert_id(c, sql, n, params, &id, err, sizeof err);
    return rc ? rc : idmap_put(m, key, id);
#endif
}

int fleet_pg_dims_add_model(fleet_pg *c, fleet_dims_req *q, const attn_device_info *d)
{
    char uid[32], ccma[8], ccmi[8], sm[16], mem[24];
    fleet_model_id(d, uid, sizeof uid);
    snprintf(ccma, sizeof ccma, "%d", d->cc_major);
    snprintf(ccmi, sizeof ccmi, "%d", d->cc_minor);
    snprintf(sm, sizeof sm, "%d", d->sm_count);
    snprintf(mem, sizeof mem, "%" PRId64, device_model_memory_gib(d->memory_mb) * 1024);
    const char *p[] = {uid, d->name, d->kind, ccma, ccmi, sm, mem};
    return req_add(c, q, FLEET_DIM_MODEL, uid,
                   "INSERT INTO models (uid, name, kind, cc_major, cc_minor, sm_count, "
                   "memory_mb) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (uid) "
                   "DO UPDATE SET uid = excluded.uid RETURNING id",
                   7, p);
}

int fleet_pg_dims_add_device(fleet_pg *c, fleet_dims_req *q, const attn_device_info *d,
                             const char *host)
{
    char uid[32], clk[16], mclk[16];
    int rc = fleet_pg_dims_add_model(c, q, d);
    if (rc != 0)
        return rc;
    fleet_model_id(d, uid, sizeof uid);
    snprintf(clk, sizeof clk, "%d", d->clock_mhz);
    snprintf(mclk, sizeof mclk, "%d", d->mem_clock_mhz);
    const char *p[] = {d->id, uid, host ? host : "", clk, mclk};
    return req_add(c, q, FLEET_DIM_DEVICE, d->id,
                   "INSERT INTO devices (uid, model_id, host, clock_mhz, mem_clock_mhz) "
                   "VALUES ($1, (SELECT id FROM models WHERE uid = $2), $3, $4, $5) "
                   "ON CONFLICT (uid) DO UPDATE SET "
                   "model_id = excluded.model_id, host = excluded.host, clock_mhz = "
                   "excluded.clock_mhz, mem_clock_mhz = excluded.mem_clock_mhz, "
                   "last_push = now() RETURNING id",
                   5, p);
}

int fleet_pg_dims_add_stack(fleet_pg *c, fleet_dims_req *q, const attn_stack *s)
{
    const char *p[] = {s->id, s->driver, s->runtime, s->blas, s->attune, s->kernels,
                       s->power};
    return req_add(c, q, FLEET_DIM_STACK, s->id,
                   "INSERT INTO stacks (uid, driver, runtime, blas, attune, kernels, "
                   "power) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (uid) DO "
                   "UPDATE SET uid = excluded.uid RETURNING id",
                   7, p);
}

int fleet_pg_dims_add_shape(fleet_pg *c, fleet_dims_req *q, const attn_shape *s,
                            const char *key)
{
    char v[6][24];
    const int64_t f[6] = {s->b, s->hq, s->hkv, s->sq, s->skv, s->d};
    for (int i = 0; i < 6; i++)
        snprintf(v[i], sizeof v[i], "%" PRId64, f[i]);
    const char *p[] = {key, v[0], v[1], v[2], v[3], v[4], v[5], attn_dtype_name(s->dtype),
                       s->causal ? "true" : "false"};
    return req_add(c, q, FLEET_DIM_SHAPE, key,
                   "INSERT INTO shapes (key, b, hq, hkv, sq, skv, d, dtype, causal) "
                   "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (key) DO "
                   "UPDATE SET key = excluded.key RETURNING id",
                   9, p);
}

int fleet_pg_dims_add_tactic(fleet_pg *c, fleet_dims_req *q, const char *tactic)
{
    const char *p[] = {tactic};
    return req_add(c, q, FLEET_DIM_TACTIC, tactic,
                   "INSERT INTO tactics (text) VALUES ($1) ON CONFLICT (text) DO "
                   "UPDATE SET text = excluded.text RETURNING id",
                   1, p);
}

void fleet_pg_dims_send(fleet_pg *c, fleet_dims_req *q)
{
#ifdef LIBPQ_HAS_PIPELINING
    if (q->n > 0)
        q->sent_ok &= PQflush(c->conn) == 0;
#else
    (void)c;
    (void)q;
#endif
}

int fleet_pg_dims_read(fleet_pg *c, fleet_dims_req *q, int last, char *err, size_t errlen)
{
    int rc = 0;
#ifdef LIBPQ_HAS_PIPELINING
    if (q->n == 0)
        return 0;
    PGconn *conn = c->conn;
    for (int i = 0; i < q->n && q->sent_ok; i++) {
        PGresult *r = PQgetResult(conn), *more;
        if (r == NULL) {
            q->sent_ok = 0;
            break;
        }
        while ((more = PQgetResult(conn)) != NULL)
            PQclear(more);
        PGresult *sync = PQgetResult(conn); /* its sync point */
        if (sync == NULL || PQresultStatus(sync) != PGRES_PIPELINE_SYNC)
            q->sent_ok = 0;
        PQclear(sync);
        if (rc == 0 && (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1))
            rc = fleet_pg_fail(c, r, "fleet server (dimension row)", err, errlen);
        else if (rc == 0) {
            fleet_idmap *m = q->kind[i] == FLEET_DIM_MODEL    ? &c->models
                             : q->kind[i] == FLEET_DIM_DEVICE ? &c->devices
                             : q->kind[i] == FLEET_DIM_STACK  ? &c->stacks
                             : q->kind[i] == FLEET_DIM_SHAPE  ? &c->shapes
                                                              : &c->tactics;
            rc = idmap_put(m, q->key[i], atoi(PQgetvalue(r, 0, 0)));
        }
        PQclear(r);
    }
    if ((!q->sent_ok || (last && PQexitPipelineMode(conn) != 1)) && rc == 0)
        rc = fleet_pg_fail(c, NULL, "fleet server (dimension rows)", err, errlen);
#else
    (void)c;
    (void)q;
    (void)last;
    (void)err;
    (void)errlen;
#endif
    return rc;
}

void fleet_pg_dims_req_free(fleet_dims_req *q)
{
    for (int i = 0; i < q->n; i++)
        free(q->key[i]);
    free(q->key);
    free(q->kind);
    memset(q, 0, sizeof *q);
    q->sent_ok = 1;
}
#endif
