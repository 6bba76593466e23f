/* fleet_pg.c -- the fleet store on PostgreSQL: connection, errors, status.
 *
 * The rest of the client lives in sibling files behind the same header:
 * fleet_pg_dims.c (dimension rows and their id caches), fleet_pg_push.c
 * (push), fleet_pg_agg.c (aggregates), fleet_pg_pull.c (pull) and
 * fleet_pg_schema.c (schema). See fleet_pg.h. */
#include "fleet_pg.h"

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/hash.h"
#include "device_model.h"

void fleet_model_id(const attn_device_info *d, char *out, size_t len)
{
    char text[256];
    device_model_text(d, text, sizeof text); /* memory as the model's, not as reported */
    uint64_t h = hash_fnv1a64(hash_fnv1a64_init(), text, strlen(text));
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
int fleet_pg_push_stream(fleet_pg *c, fleet_push_next_fn next, fleet_push_done_fn done,
                         void *arg, char *err, size_t errlen) { return NOPQ(err, errlen); }
int fleet_pg_source_seq(fleet_pg *c, const char *source, int64_t *seq, char *err,
                        size_t errlen) { return NOPQ(err, errlen); }
int fleet_pg_refresh(fleet_pg *c, const attn_device_info *d, int64_t *groups, char *err,
                     size_t errlen) { return NOPQ(err, errlen); }
int fleet_pg_pull_open(fleet_pg *c, const attn_device_info *d, int refresh_after_s,
                       fleet_pg_pull **out, char *err, size_t errlen)
{
    *out = NULL;
    return NOPQ(err, errlen);
}
const fleet_pg_pull_head *fleet_pg_pull_head_get(const fleet_pg_pull *p)
{
    (void)p;
    return NULL;
}
int fleet_pg_pull_next(fleet_pg_pull *p, store_measurement *m, char *err, size_t errlen)
{
    return NOPQ(err, errlen);
}
void fleet_pg_pull_close(fleet_pg_pull *p) { (void)p; }
int fleet_pg_info_get(fleet_pg *c, const char *source, fleet_pg_info *out, char *err,
                      size_t errlen) { return NOPQ(err, errlen); }
int fleet_pg_exec(fleet_pg *c, const char *sql, char *err, size_t errlen)
{
    return NOPQ(err, errlen);
}
int fleet_pg_conflicted(const fleet_pg *c)
{
    (void)c;
    return 0;
}

#else

#include "fleet_pg_internal.h"

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
    const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    c->conflict = state != NULL && (strcmp(state, "40P01") == 0 || strcmp(state, "40001") == 0);
    return attune_fail(err, errlen, code, "%s: %.*s", what, (int)n, msg);
}

int fleet_pg_conflicted(const fleet_pg *c) { return c != NULL && c->conflict; }

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

int fleet_pg_cmd_params(fleet_pg *c, const char *sql, int n, const char *const *params,
                        const char *what, char *err, size_t errlen)
{
    PGresult *r = PQexecParams(c->conn, sql, n, NULL, params, NULL, NULL, 0);
    int rc = 0;
    if (PQresultStatus(r) != PGRES_COMMAND_OK)
        rc = fleet_pg_fail(c, r, what, err, errlen);
    PQclear(r);
    return rc;
}

int fleet_pg_value(fleet_pg *c, const char *sql, int n, const char *const *params,
                   int64_t *v, int *found, const char *what, char *err, size_t errlen)
{
    PGresult *r = PQexecParams(c->conn, sql, n, NULL, params, NULL, NULL, 0);
    int rc = 0;
    *found = 0;
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        rc = fleet_pg_fail(c, r, what, err, errlen);
    } else if (PQntuples(r) >= 1) {
        *v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        *found = 1;
    }
    PQclear(r);
    return rc;
}

int fleet_pg_exec(fleet_pg *c, const char *sql, char *err, size_t errlen)
{
    return fleet_pg_cmd(c, sql, err, errlen);
}

void fleet_pg_rollback(fleet_pg *c)
{
    if (PQstatus(c->conn) == CONNECTION_OK)
        PQclear(PQexec(c->conn, "ROLLBACK"));
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

/* A session on url, c->conn set to it (NULL when out of memory): 0, or
 * the mapped error with err. TCP keepalives on unless the URL says
 * otherwise: the second lane may sit idle between pushes, and a peer or
 * middlebox that drops it silently is found in about two minutes, not at
 * the next push's first read. pin: a session at c->pin_host and
 * c->pin_port, so that the lanes of a multi-host URL reach one server. */
static int session_open(fleet_pg *c, const char *url, int pin, char *err, size_t errlen)
{
    /* later keywords override earlier ones: the URL's own settings win,
     * and the pin's host and port win over the URL's */
    const char *keys[] = {"connect_timeout", "application_name", "keepalives",
                          "keepalives_idle", "keepalives_interval", "keepalives_count",
                          "dbname", "host", "port", NULL};
    const char *vals[] = {"10", "attune", "1", "60", "10", "6", url,
                          pin ? c->pin_host : NULL, pin ? c->pin_port : NULL, NULL};
    if (!pin || c->pin_host == NULL)
        keys[7] = NULL; /* the URL alone */
    else if (c->pin_port == NULL)
        keys[8] = NULL;
    c->conn = PQconnectdbParams(keys, vals, 1);
    if (c->conn == NULL)
        return ATTUNE_ENOMEM;
    if (PQstatus(c->conn) != CONNECTION_OK) {
        (void)fleet_pg_fail(c, NULL, "cannot connect to the fleet server", err, errlen);
        return ATTUNE_EIO;
    }
    PQsetNoticeProcessor(c->conn, quiet_notices, NULL);
    return fleet_pg_cmd(c, "SET client_encoding = 'UTF8'", err, errlen);
}

/* Remember where lane 0 is (its host and port), on the thread that owns
 * it: 0, or ATTUNE_ENOMEM with no host kept. */
static int pin_lane0(fleet_pg *c)
{
    free(c->pin_host);
    free(c->pin_port);
    c->pin_host = c->pin_port = NULL;
    const char *h = PQhost(c->lanes[0]), *p = PQport(c->lanes[0]);
    if ((h != NULL && (c->pin_host = strdup(h)) == NULL) || (p != NULL && (c->pin_port = strdup(p)) == NULL)) {
        free(c->pin_host); /* none: lane 1 then follows the URL alone */
        c->pin_host = NULL;
        return ATTUNE_ENOMEM;
    }
    return 0;
}

int fleet_pg_connect(const char *url, fleet_pg **out, char *err, size_t errlen)
{
    *out = NULL;
    int rc = fleet_pg_url_check(url, err, errlen);
    if (rc != 0)
        return rc;
    fleet_pg *c = calloc(1, sizeof *c);
    if (c == NULL)
        return ATTUNE_ENOMEM;
    if ((c->url = strdup(url)) == NULL) {
        free(c);
        return ATTUNE_ENOMEM;
    }
    rc = session_open(c, url, 0, err, errlen);
    c->lanes[0] = c->conn;
    if (rc == 0 && pin_lane0(c) != 0)
        rc = attune_fail(err, errlen, ATTUNE_ENOMEM, "out of memory");
    if (rc != 0 || (rc = fleet_pg_schema_migrate(c, err, errlen)) != 0)
        goto fail;
    *out = c;
    return 0;
fail:
    fleet_pg_close(c);
    return rc;
}

void fleet_pg_lane_use(fleet_pg *c, int i)
{
    assert(i == 0 || c->lanes[i] != NULL);
    c->lane = i;
    c->conn = c->lanes[i];
}

int fleet_pg_lane_open(fleet_pg *c)
{
    if (c->lanes[1] != NULL)
        return 0;
    /* after a failed open, one lane for a minute: then try again (a
     * server that was at its connection limit may have room now) */
    if (c->lane_failed != 0 && time(NULL) - c->lane_failed < 60)
        return ATTUNE_EIO;
    char err[ATTUNE_ERRLEN];
    int was = c->lane;
    int rc = session_open(c, c->url, 1, err, sizeof err); /* sets c->conn */
    c->lanes[1] = c->conn;
    c->lane_failed = 0;
    if (rc != 0) {
        PQfinish(c->lanes[1]);
        c->lanes[1] = NULL;
        c->lane_failed = time(NULL);
    }
    c->conn = c->lanes[was];
    return rc;
}

void fleet_pg_lane_settle(fleet_pg *c)
{
    PGconn *l = c->lanes[1];
    if (l != NULL && (PQstatus(l) != CONNECTION_OK || PQtransactionStatus(l) != PQTRANS_IDLE)) {
        PQfinish(l);
        c->lanes[1] = NULL;
    }
    fleet_pg_lane_use(c, 0);
    /* Lane 0 too: a stream that failed before it could drain a pipeline
     * leaves it in pipeline mode or inside a transaction, which holds the
     * source's turn and order locks and would keep every other pusher of
     * the source waiting (a wait no deadlock closes). A new session ends
     * the old one; a connection that is gone is the next call's to find. */
    PGconn *z = c->lanes[0];
    if (z != NULL && PQstatus(z) == CONNECTION_OK &&
        (PQpipelineStatus(z) != PQ_PIPELINE_OFF || PQtransactionStatus(z) != PQTRANS_IDLE)) {
        PQreset(z);
        const int conflict = c->conflict; /* the stream's, kept for its caller */
        if (PQstatus(z) == CONNECTION_OK) {
            (void)fleet_pg_cmd(c, "SET client_encoding = 'UTF8'", NULL, 0);
            (void)pin_lane0(c); /* out of memory: lane 1 follows the URL alone */
        }
        c->conflict = conflict;
    }
}

void fleet_pg_close(fleet_pg *c)
{
    if (c == NULL)
        return;
    PQfinish(c->lanes[0]);
    PQfinish(c->lanes[1]);
    free(c->url);
    free(c->pin_host);
    free(c->pin_port);
    fleet_pg_idmap_free(&c->shapes);
    fleet_pg_idmap_free(&c->tactics);
    fleet_pg_idmap_free(&c->stacks);
    fleet_pg_idmap_free(&c->devices);
    fleet_pg_idmap_free(&c->models);
    free(c);
}

void fleet_pg_describe(fleet_pg *c, char *buf, size_t len)
{
    const char *host = PQhost(c->conn), *port = PQport(c->conn), *db = PQdb(c->conn);
    snprintf(buf, len, "host=%s port=%s db=%s", host ? host : "-", port ? port : "-",
             db ? db : "-");
}

int fleet_pg_source_seq(fleet_pg *c, const char *source, int64_t *seq, char *err,
                        size_t errlen)
{
    const char *p[] = {source};
    int found;
    *seq = 0;
    return fleet_pg_value(c, "SELECT pushed_seq FROM sources WHERE id = $1", 1, p, seq, &found,
                          "fleet server (source)", err, errlen);
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
