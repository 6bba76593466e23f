/* fleet_pg_agg.c -- the fleet server's aggregates: per (model, stack,
 * shape, tactic) the median over devices, the spread and the outlier
 * flags, recomputed set-based for the groups pushes marked dirty, one
 * model per transaction (docs/fleet.md, "Aggregates and pulled rows"). */
#ifdef ATTUNE_HAVE_LIBPQ
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet_pg_internal.h"

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
    " src_rel_err, updated_at)"
    " SELECT model_id, stack_id, shape_id, tactic_id, devices, c_ok,"
    "  CASE WHEN c_ok >= greatest(c_in, c_fa, c_un) THEN 'ok'"
    "   WHEN c_in >= greatest(c_fa, c_un) THEN 'inaccurate'"
    "   WHEN c_fa >= c_un THEN 'failed' ELSE 'unsupported' END,"
    "  med, tmin, tmax, copies, CASE WHEN med > 0 THEN (q3 - q1) / med END, rel, abs_err,"
    "  src_rel,"
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
    "  coalesce(max(src_rel_err) FILTER (WHERE ok), max(src_rel_err)) AS src_rel,"
    "  max(prev_at) AS prev_at"
    "  FROM (SELECT m.model_id, m.stack_id, m.shape_id, m.tactic_id, m.status,"
    "   m.status = 'ok' AS ok, m.time_us, m.time_us_copies, m.rel_err, m.max_abs_err,"
    "   m.src_rel_err,"
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
int fleet_pg_model_lookup(fleet_pg *c, const attn_device_info *d, int *id, char *err,
                        size_t errlen)
{
    char uid[32];
    fleet_model_id(d, uid, sizeof uid);
    const char *p[] = {uid};
    int64_t v = -1;
    int found;
    int rc = fleet_pg_value(c, "SELECT id FROM models WHERE uid = $1", 1, p, &v, &found,
                            "fleet server (model)", err, errlen);
    *id = (int)v;
    return rc;
}

/* Recompute the dirty groups of one model in one transaction, under the
 * model's advisory lock (two refreshes of a model would insert the same
 * aggregate keys). wait = 0: when another session holds the lock, or the
 * model was refreshed less than min_age_s ago, do nothing (a pull then
 * reads the aggregates as they are). */
int fleet_pg_refresh_model(fleet_pg *c, int model, int min_age_s, int wait, int64_t *groups,
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
    if ((rc = fleet_pg_cmd_params(c, "UPDATE models SET refreshed_at = now() WHERE id = $1::int",
                                  1, p, "fleet server (aggregates)", err, errlen)) != 0)
        goto fail;
    return fleet_pg_cmd(c, "COMMIT", err, errlen);
fail:
    fleet_pg_rollback(c);
    return rc;
}

int fleet_pg_refresh(fleet_pg *c, const attn_device_info *d, int64_t *groups, char *err,
                     size_t errlen)
{
    int model = -1, rc;
    *groups = 0;
    if (d != NULL) {
        if ((rc = fleet_pg_model_lookup(c, d, &model, err, errlen)) != 0 || model < 0)
            return rc;
        return fleet_pg_refresh_model(c, model, 0, 1, groups, err, errlen);
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
        rc = fleet_pg_refresh_model(c, atoi(PQgetvalue(r, i, 0)), 0, 1, groups, err, errlen);
    PQclear(r);
    return rc;
}
#endif
