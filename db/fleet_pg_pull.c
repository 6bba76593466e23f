/* fleet_pg_pull.c -- reading a model's aggregates from the fleet server as
 * fleet rows, one at a time (fleet_pg.h, fleet_pg_pull).
 *
 * Two queries in one read-only REPEATABLE READ transaction, so they see
 * the same refresh: the head (the stacks the model's aggregates name,
 * which stack was refreshed last, how many rows follow), then the rows
 * themselves, in no particular order (a sort would hold back the first
 * row until the last is read): a range of the aggregates' primary key,
 * whose first column is the model, read in libpq's single-row mode with
 * binary results (no float text on either side), so the caller writes
 * each row as it arrives and holds nothing but the row. */
#ifdef ATTUNE_HAVE_LIBPQ
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet_pg_internal.h"
#include "store_internal.h"

/* Most stacks a pull takes (the same bound as a fleet table's). */
#define PULL_MAX_STACKS 4096

struct fleet_pg_pull {
    fleet_pg *c;
    fleet_pg_pull_head head;
    attn_stack *stacks;
    int *stack_ids;     /* server id of stacks[i] */
    int in_tx;          /* the read transaction is open */
    int streaming;      /* the row query has results left to read */
    int checked;        /* the row query's column types were checked */
};

static const char head_sql[] =
    "SELECT a.stack_id, st.uid, st.driver, st.runtime, st.blas, st.attune, st.kernels,"
    " st.power, max(a.updated_at), count(*)"
    " FROM aggregates a JOIN stacks st ON st.id = a.stack_id WHERE a.model_id = $1::int"
    " GROUP BY a.stack_id, st.id ORDER BY 9 DESC, st.uid";

static const char rows_sql[] =
    "SELECT a.stack_id, sh.b, sh.hq, sh.hkv, sh.sq, sh.skv, sh.d, sh.dtype, sh.causal,"
    " t.text, a.status, a.median_us, a.min_us, a.max_us, a.copies_us, a.ok_devices,"
    " a.devices, a.spread, a.rel_err, a.max_abs_err, a.outliers, a.updated_at, a.src_rel_err"
    " FROM aggregates a JOIN shapes sh ON sh.id = a.shape_id"
    " JOIN tactics t ON t.id = a.tactic_id"
    " WHERE a.model_id = $1::int"
    " ORDER BY a.stack_id, a.shape_id"; /* the key's order: a shape's rows together */

/* rows_sql's column types (pg_type oids: int4 23, int8 20, text 25,
 * bool 16, float8 701): binary values are read by these. */
static const Oid row_types[23] = {23, 20, 20, 20, 20, 20, 20, 25, 16, 25, 25,
                                  701, 701, 701, 701, 23, 23, 701, 701, 701, 23, 20, 701};

/* ---- binary values (network byte order) */

static uint64_t be(const PGresult *r, int col, int bytes)
{
    const unsigned char *p = (const unsigned char *)PQgetvalue(r, 0, col);
    uint64_t v = 0;
    if (PQgetlength(r, 0, col) != bytes)
        return 0;
    for (int i = 0; i < bytes; i++)
        v = v << 8 | p[i];
    return v;
}

static int64_t get_i32(const PGresult *r, int col) { return (int32_t)(uint32_t)be(r, col, 4); }
static int64_t get_i64(const PGresult *r, int col) { return (int64_t)be(r, col, 8); }

/* SQL NULL is NaN (unknown), as in the local store. */
static double get_num(const PGresult *r, int col)
{
    if (PQgetisnull(r, 0, col))
        return NAN;
    uint64_t bits = be(r, col, 8);
    double v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

/* Text into buf; "" for NULL; too long for buf: a copy the local checks
 * refuse (never a silent truncation into something valid). */
static void get_text(const PGresult *r, int col, char *buf, size_t len)
{
    int n = PQgetlength(r, 0, col);
    if (PQgetisnull(r, 0, col))
        n = 0;
    if ((size_t)n >= len) {
        snprintf(buf, len, "%s", "\x01"); /* a control character: refused */
        return;
    }
    memcpy(buf, PQgetvalue(r, 0, col), (size_t)n);
    buf[n] = 0;
}

/* ---- open */

/* The head query: the stacks, the latest and the row count. */
static int read_head(fleet_pg_pull *p, const char *model, char *err, size_t errlen)
{
    const char *params[] = {model};
    PGresult *r = PQexecParams(p->c->conn, head_sql, 1, NULL, params, NULL, NULL, 0);
    int rc = 0, n = PQntuples(r);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        rc = fleet_pg_fail(p->c, r, "fleet server (pull)", err, errlen);
        goto out;
    }
    if (n > PULL_MAX_STACKS) {
        rc = attune_fail(err, errlen, ATTUNE_ETOOBIG, "the model has %d stacks, over %d", n,
                         PULL_MAX_STACKS);
        goto out;
    }
    p->stacks = calloc(n > 0 ? (size_t)n : 1, sizeof *p->stacks);
    p->stack_ids = calloc(n > 0 ? (size_t)n : 1, sizeof *p->stack_ids);
    if (p->stacks == NULL || p->stack_ids == NULL) {
        rc = attune_fail(err, errlen, ATTUNE_ENOMEM, "out of memory");
        goto out;
    }
    for (int i = 0; i < n; i++) {
        attn_stack *s = &p->stacks[i];
        p->stack_ids[i] = atoi(PQgetvalue(r, i, 0));
        snprintf(s->id, sizeof s->id, "%s", PQgetvalue(r, i, 1));
        snprintf(s->driver, sizeof s->driver, "%s", PQgetvalue(r, i, 2));
        snprintf(s->runtime, sizeof s->runtime, "%s", PQgetvalue(r, i, 3));
        snprintf(s->blas, sizeof s->blas, "%s", PQgetvalue(r, i, 4));
        snprintf(s->attune, sizeof s->attune, "%s", PQgetvalue(r, i, 5));
        snprintf(s->kernels, sizeof s->kernels, "%s", PQgetvalue(r, i, 6));
        snprintf(s->power, sizeof s->power, "%s", PQgetvalue(r, i, 7));
        p->head.rows += strtoll(PQgetvalue(r, i, 9), NULL, 10);
    }
    /* ordered newest first: row 0 is the stack refreshed last */
    p->head.stacks = p->stacks;
    p->head.nstacks = n;
    p->head.latest_stack = n > 0 ? p->stacks[0].id : NULL;
    p->head.newest = n > 0 ? strtoll(PQgetvalue(r, 0, 8), NULL, 10) : -1;
out:
    PQclear(r);
    return rc;
}

/* The fleet device of d's model (docs/fleet.md, "fleet rows"). */
static void model_device(const attn_device_info *d, attn_device_info *out)
{
    memset(out, 0, sizeof *out);
    fleet_model_id(d, out->id, sizeof out->id);
    snprintf(out->name, sizeof out->name, "%s", d->name);
    snprintf(out->kind, sizeof out->kind, "%s", d->kind);
    out->index = -1;
    out->cc_major = d->cc_major;
    out->cc_minor = d->cc_minor;
    out->sm_count = d->sm_count;
    out->memory_mb = d->memory_mb;
}

int fleet_pg_pull_open(fleet_pg *c, const attn_device_info *d, int refresh_after_s,
                       fleet_pg_pull **out, char *err, size_t errlen)
{
    int model, rc;
    int64_t groups = 0;
    char ms[16];
    *out = NULL;
    if ((rc = fleet_pg_model_lookup(c, d, &model, err, errlen)) != 0 || model < 0 ||
        (rc = fleet_pg_refresh_model(c, model, refresh_after_s, refresh_after_s <= 0, &groups,
                                     err, errlen)) != 0)
        return rc;
    fleet_pg_pull *p = calloc(1, sizeof *p);
    if (p == NULL)
        return attune_fail(err, errlen, ATTUNE_ENOMEM, "out of memory");
    p->c = c;
    model_device(d, &p->head.device);
    snprintf(ms, sizeof ms, "%d", model);
    if ((rc = fleet_pg_cmd(c, "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY", err,
                           errlen)) != 0)
        goto fail;
    p->in_tx = 1;
    if ((rc = read_head(p, ms, err, errlen)) != 0)
        goto fail;
    if (p->head.rows == 0) {
        fleet_pg_pull_close(p); /* the model has no aggregates */
        return 0;
    }
    const char *params[] = {ms};
    if (PQsendQueryParams(c->conn, rows_sql, 1, NULL, params, NULL, NULL, 1) != 1) {
        rc = fleet_pg_fail(c, NULL, "fleet server (pull)", err, errlen);
        goto fail;
    }
    p->streaming = 1;
    if (PQsetSingleRowMode(c->conn) != 1) {
        rc = fleet_pg_fail(c, NULL, "fleet server (pull)", err, errlen);
        goto fail;
    }
    *out = p;
    return 0;
fail:
    fleet_pg_pull_close(p);
    return rc;
}

const fleet_pg_pull_head *fleet_pg_pull_head_get(const fleet_pg_pull *p)
{
    return &p->head;
}

/* ---- rows */

/* A single-row result as a fleet row. */
static int decode_row(fleet_pg_pull *p, const PGresult *r, store_measurement *m, char *err,
                      size_t errlen)
{
    char dtype[8], status[16], note[128];
    if (!p->checked) {
        if (PQnfields(r) != 23)
            return attune_fail(err, errlen, ATTUNE_EFORMAT, "pull: unexpected columns");
        for (int i = 0; i < 23; i++)
            if (PQftype(r, i) != row_types[i] || PQfformat(r, i) != 1)
                return attune_fail(err, errlen, ATTUNE_EFORMAT,
                                   "pull: column %d has an unexpected type", i);
        p->checked = 1;
    }
    memset(m, 0, sizeof *m);
    int stack = (int)get_i32(r, 0), si = -1;
    for (int i = 0; i < p->head.nstacks && si < 0; i++)
        if (p->stack_ids[i] == stack)
            si = i;
    if (si < 0)
        return attune_fail(err, errlen, ATTUNE_EFORMAT, "pull: a row of an unlisted stack");
    snprintf(m->device_id, sizeof m->device_id, "%s", p->head.device.id);
    snprintf(m->stack_id, sizeof m->stack_id, "%s", p->stacks[si].id);
    m->shape.b = get_i64(r, 1);
    m->shape.hq = get_i64(r, 2);
    m->shape.hkv = get_i64(r, 3);
    m->shape.sq = get_i64(r, 4);
    m->shape.skv = get_i64(r, 5);
    m->shape.d = get_i64(r, 6);
    get_text(r, 7, dtype, sizeof dtype);
    if (attn_dtype_parse(dtype, &m->shape.dtype) != 0)
        m->shape.d = 0; /* invalid: the caller's checks refuse it */
    m->shape.causal = PQgetlength(r, 0, 8) == 1 && PQgetvalue(r, 0, 8)[0] != 0;
    get_text(r, 9, m->tactic, sizeof m->tactic);
    get_text(r, 10, status, sizeof status);
    if (store_status_parse(status, &m->status) != 0)
        m->status = (store_status)99; /* refused by store_check_measurement */
    m->time_us = get_num(r, 11);
    m->time_us_min = get_num(r, 12);
    m->time_us_max = get_num(r, 13);
    m->time_us_copies = get_num(r, 14); /* the median device's (padded tactics only) */
    m->n = (int)get_i32(r, 15);
    double spread = get_num(r, 17);
    snprintf(note, sizeof note, "fleet: %d devices (%d ok), spread %.3g, %d outliers",
             (int)get_i32(r, 16), m->n, isfinite(spread) ? spread : 0.0, (int)get_i32(r, 20));
    snprintf(m->note, sizeof m->note, "%s", note);
    m->rel_err = get_num(r, 18);
    m->max_abs_err = get_num(r, 19);
    snprintf(m->mode, sizeof m->mode, "fleet");
    snprintf(m->host, sizeof m->host, FLEET_HOST);
    m->taken_at = get_i64(r, 21);
    m->src_rel_err = get_num(r, 22); /* the largest of the ok devices', as rel_err */
    return 0;
}

int fleet_pg_pull_next(fleet_pg_pull *p, store_measurement *m, char *err, size_t errlen)
{
    if (!p->streaming)
        return 0;
    PGresult *r = PQgetResult(p->c->conn);
    int rc;
    switch (PQresultStatus(r)) {
    case PGRES_SINGLE_TUPLE:
        rc = decode_row(p, r, m, err, errlen);
        PQclear(r);
        return rc == 0 ? 1 : rc;
    case PGRES_TUPLES_OK: /* the end: zero rows, then NULL */
        PQclear(r);
        while ((r = PQgetResult(p->c->conn)) != NULL)
            PQclear(r);
        p->streaming = 0;
        return 0;
    default:
        rc = fleet_pg_fail(p->c, r, "fleet server (pull)", err, errlen);
        PQclear(r);
        while ((r = PQgetResult(p->c->conn)) != NULL)
            PQclear(r);
        p->streaming = 0;
        return rc;
    }
}

void fleet_pg_pull_close(fleet_pg_pull *p)
{
    if (p == NULL)
        return;
    if (p->streaming) {
        /* the caller stopped early: drop the rest of the rows */
        PGcancel *cn = PQgetCancel(p->c->conn);
        char buf[256];
        if (cn != NULL) {
            PQcancel(cn, buf, sizeof buf);
            PQfreeCancel(cn);
        }
        PGresult *r;
        while ((r = PQgetResult(p->c->conn)) != NULL)
            PQclear(r);
    }
    if (p->in_tx)
        fleet_pg_rollback(p->c); /* read-only: nothing to keep */
    free(p->stacks);
    free(p->stack_ids);
    free(p);
}
#endif
