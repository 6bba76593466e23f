/* fleet_pg_pins.c -- pins on the fleet server (fleet_pins.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet_pins.h"

#ifndef ATTUNE_HAVE_LIBPQ

int fleet_pg_pins_push(fleet_pg *c, const pin *p, int n, char *err, size_t errlen)
{
    return attune_fail(err, errlen, ATTUNE_EUNSUPP, "this attune was built without libpq");
}

int fleet_pg_pins_pull(fleet_pg *c, pin **out, int *n, char *err, size_t errlen)
{
    *out = NULL;
    *n = 0;
    return attune_fail(err, errlen, ATTUNE_EUNSUPP, "this attune was built without libpq");
}

#else

#include "fleet_pg_internal.h"

/* One rule's upsert: the newer copy wins (ties keep the server's). */
static int push_one(fleet_pg *c, const pin *p, char *err, size_t errlen)
{
    char created[24], updated[24];
    snprintf(created, sizeof created, "%lld", (long long)p->created_at);
    snprintf(updated, sizeof updated, "%lld", (long long)p->updated_at);
    const char *v[10] = {pin_action_name(p->action), p->tactic, p->shape, p->device, p->model,
                         p->reason, p->author, created, updated, p->removed ? "t" : "f"};
    return fleet_pg_cmd_params(
        c,
        "INSERT INTO pins (action, tactic, shape, device, model, reason, author, created_at, "
        "updated_at, removed) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) "
        "ON CONFLICT (action, tactic, shape, device, lower(model)) DO UPDATE SET "
        "reason = excluded.reason, author = excluded.author, created_at = excluded.created_at, "
        "updated_at = excluded.updated_at, removed = excluded.removed, pushed_at = now() "
        "WHERE pins.updated_at < excluded.updated_at",
        10, v, "fleet server (pins)", err, errlen);
}

int fleet_pg_pins_push(fleet_pg *c, const pin *p, int n, char *err, size_t errlen)
{
    int rc = fleet_pg_cmd(c, "BEGIN", err, errlen);
    for (int i = 0; i < n && rc == 0; i++)
        rc = push_one(c, &p[i], err, errlen);
    if (rc == 0)
        return fleet_pg_cmd(c, "COMMIT", err, errlen);
    fleet_pg_rollback(c);
    return rc;
}

/* Row i of r (the columns of fleet_pg_pins_pull's query) into *p. */
static void pin_of_row(const PGresult *r, int i, pin *p)
{
    memset(p, 0, sizeof *p);
    if (pin_action_parse(PQgetvalue(r, i, 0), &p->action) != 0)
        p->action = (pin_action)-1; /* refused by pin_check */
    snprintf(p->tactic, sizeof p->tactic, "%s", PQgetvalue(r, i, 1));
    snprintf(p->shape, sizeof p->shape, "%s", PQgetvalue(r, i, 2));
    snprintf(p->device, sizeof p->device, "%s", PQgetvalue(r, i, 3));
    snprintf(p->model, sizeof p->model, "%s", PQgetvalue(r, i, 4));
    snprintf(p->reason, sizeof p->reason, "%s", PQgetvalue(r, i, 5));
    snprintf(p->author, sizeof p->author, "%s", PQgetvalue(r, i, 6));
    p->created_at = strtoll(PQgetvalue(r, i, 7), NULL, 10);
    p->updated_at = strtoll(PQgetvalue(r, i, 8), NULL, 10);
    p->removed = strcmp(PQgetvalue(r, i, 9), "t") == 0;
}

/* Newest first: tombstones are never deleted, so past FLEET_PINS_MAX rows
 * the limit drops the oldest, never a rule changed since; the order of the
 * merge does not matter otherwise (each rule merged by its updated_at).
 * The rest of the key makes ties deterministic. */
int fleet_pg_pins_pull(fleet_pg *c, pin **out, int *n, char *err, size_t errlen)
{
    char sql[320];
    *out = NULL;
    *n = 0;
    snprintf(sql, sizeof sql,
             "SELECT action, tactic, shape, device, model, reason, author, created_at, "
             "updated_at, removed FROM pins ORDER BY updated_at DESC, action, tactic, shape, "
             "device, lower(model) LIMIT %d",
             FLEET_PINS_MAX);
    PGresult *r = PQexec(c->conn, sql);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        int rc = fleet_pg_fail(c, r, "fleet server (pins)", err, errlen);
        PQclear(r);
        return rc;
    }
    int k = PQntuples(r);
    pin *p = k > 0 ? calloc((size_t)k, sizeof *p) : NULL;
    if (k > 0 && p == NULL) {
        PQclear(r);
        return attune_fail(err, errlen, ATTUNE_ENOMEM, "out of memory");
    }
    for (int i = 0; i < k; i++)
        pin_of_row(r, i, &p[i]);
    PQclear(r);
    *out = p;
    *n = k;
    return 0;
}

#endif
