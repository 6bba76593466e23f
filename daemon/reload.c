/* reload.c -- the index follows writes of other processes (docs/api.md
 * "Writes from other processes"): a full reload on SIGHUP, and a watcher
 * that the DB worker runs every ATTUNED_WATCH_PERIOD_S seconds.
 *
 * The watcher holds its own read-only connection. PRAGMA data_version on
 * it changes when any other connection commits, the daemon's own included
 * (job threads, DB worker), so it only says "look". What to reload is
 * decided by comparing, per device, the database's fingerprint of its
 * measurements (row count, sum of taken_at, incumbent marks) with the same
 * sums over the rows the index holds: the daemon's own writes are already
 * in the index (the job threads and imports update it), so they match and
 * cost nothing but the comparison; a device whose rows differ is reloaded
 * whole. A mismatch caught in the instant between a job's commit and its
 * own index update only causes a harmless extra reload. */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attuned.h"
#include "log.h"
#include "metrics.h"

int attuned_reload_index(attuned *d, store *st)
{
    attn_device_info *infos = NULL;
    attn_stack *stacks = NULL;
    int n = 0, first = 0, failed = 0;
    int rc = store_devices_list(st, &infos, &stacks, &n);
    if (rc != 0) {
        metrics_reload_failed();
        log_event(LOGL_ERROR, "index_reload_failed", "error=\"%s\"", attune_strerror(rc));
        return rc;
    }
    /* the store lists local devices too (registered at start) */
    for (int i = 0; i < n; i++) {
        if ((rc = attuned_load_device(d, st, infos[i].id)) == 0)
            continue;
        log_event(LOGL_ERROR, "index_reload_failed", "device=%s error=\"%s\" kept=old",
                  infos[i].id, attune_strerror(rc));
        if (failed++ == 0)
            first = rc;
    }
    free(infos);
    free(stacks);
    int nlocal, nfleet;
    int64_t nmeas;
    index_stats(d->ix, &nlocal, &nfleet, &nmeas);
    log_event(failed ? LOGL_WARN : LOGL_INFO, "index_reloaded",
              "reason=sighup local=%d fleet=%d measurements=%lld failed=%d", nlocal, nfleet,
              (long long)nmeas, failed);
    return first;
}

/* ---- the watcher */

struct attuned_watch {
    sqlite3 *db;
    sqlite3_stmt *version;   /* PRAGMA data_version */
    sqlite3_stmt *prints;    /* per-device fingerprint of the measurements */
    int64_t last_version;
    int have_version;        /* 0 until the first check */
};

/* One device's rows as the database has them. */
typedef struct db_print {
    char id[64];
    int64_t rows, taken_sum, marks;
} db_print;

void attuned_watch_close(attuned_watch *w)
{
    if (w == NULL)
        return;
    sqlite3_finalize(w->version);
    sqlite3_finalize(w->prints);
    sqlite3_close_v2(w->db); /* NULL is a no-op */
    free(w);
}

int attuned_watch_open(const char *path, attuned_watch **out, char *err, size_t errlen)
{
    *out = NULL;
    attuned_watch *w = calloc(1, sizeof *w);
    if (w == NULL)
        return attune_fail(err, errlen, ATTUNE_ENOMEM, "out of memory");
    int src = sqlite3_open_v2(path, &w->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL);
    if (src == SQLITE_OK) {
        sqlite3_busy_timeout(w->db, 1000);
        src = sqlite3_prepare_v2(w->db, "PRAGMA data_version", -1, &w->version, NULL);
    }
    if (src == SQLITE_OK)
        src = sqlite3_prepare_v2(w->db,
                                 "SELECT device_id, count(*), sum(taken_at), sum(incumbent) "
                                 "FROM measurements GROUP BY device_id",
                                 -1, &w->prints, NULL);
    if (src != SQLITE_OK) {
        int rc = attune_fail(err, errlen, ATTUNE_EDB, "cannot open database '%s' to watch it: %s",
                             path, w->db != NULL ? sqlite3_errmsg(w->db) : sqlite3_errstr(src));
        attuned_watch_close(w);
        return rc;
    }
    *out = w;
    return 0;
}

/* PRAGMA data_version into *v; 0 or ATTUNE_EDB. */
static int watch_version(attuned_watch *w, int64_t *v)
{
    int src = sqlite3_step(w->version);
    if (src == SQLITE_ROW)
        *v = sqlite3_column_int64(w->version, 0);
    sqlite3_reset(w->version);
    return src == SQLITE_ROW ? 0 : ATTUNE_EDB;
}

/* Every device's fingerprint; *out malloc'd (caller frees). 0 or an error;
 * the read transaction ends before returning. */
static int watch_prints(attuned_watch *w, db_print **out, int *n)
{
    db_print *p = NULL;
    int np = 0, cap = 0, rc = 0, src;
    while ((src = sqlite3_step(w->prints)) == SQLITE_ROW) {
        if (np == cap) {
            int ncap = cap ? cap * 2 : 16;
            db_print *t = realloc(p, (size_t)ncap * sizeof *t);
            if (t == NULL) {
                rc = ATTUNE_ENOMEM;
                goto fail;
            }
            p = t;
            cap = ncap;
        }
        const unsigned char *id = sqlite3_column_text(w->prints, 0);
        snprintf(p[np].id, sizeof p[np].id, "%s", id != NULL ? (const char *)id : "");
        p[np].rows = sqlite3_column_int64(w->prints, 1);
        p[np].taken_sum = sqlite3_column_int64(w->prints, 2);
        p[np].marks = sqlite3_column_int64(w->prints, 3);
        np++;
    }
    if (src != SQLITE_DONE) {
        rc = ATTUNE_EDB;
        goto fail;
    }
    sqlite3_reset(w->prints);
    *out = p;
    *n = np;
    return 0;
fail:
    sqlite3_reset(w->prints);
    free(p);
    return rc;
}

/* Reload one device for the watcher; counts into *ok / *failed. */
static void watch_reload(attuned *d, store *st, const char *id, int *ok, int *failed)
{
    int rc = attuned_load_device(d, st, id);
    if (rc == 0) {
        (*ok)++;
        return;
    }
    (*failed)++;
    log_event(LOGL_ERROR, "index_reload_failed", "reason=watch device=%s error=\"%s\" kept=old",
              id, attune_strerror(rc));
}

void attuned_watch_check(attuned *d, attuned_watch *w, store *st)
{
    int64_t version;
    db_print *p = NULL;
    index_device_view *views = NULL;
    int np = 0, nv = 0, ok = 0, failed = 0;
    int rc = watch_version(w, &version);
    if (rc == 0 && w->have_version && version == w->last_version)
        return; /* no other connection committed since the last check */
    if (rc == 0)
        rc = watch_prints(w, &p, &np);
    if (rc == 0)
        rc = index_devices(d->ix, &views, &nv);
    if (rc != 0) {
        log_event(LOGL_WARN, "db_watch_failed", "error=\"%s\" db_error=\"%s\"",
                  attune_strerror(rc), sqlite3_errmsg(w->db));
        goto out; /* tried again at the next tick */
    }
    w->last_version = version;
    w->have_version = 1;
    for (int i = 0; i < np; i++) {
        const index_device_view *v = NULL;
        for (int k = 0; k < nv && v == NULL; k++)
            if (strcmp(views[k].info.id, p[i].id) == 0)
                v = &views[k];
        if (v == NULL || v->nmeasurements != p[i].rows || v->taken_sum != p[i].taken_sum ||
            v->marks != p[i].marks)
            watch_reload(d, st, p[i].id, &ok, &failed);
    }
    for (int k = 0; k < nv; k++) { /* rows removed from the database */
        int seen = 0;
        for (int i = 0; i < np && !seen; i++)
            seen = strcmp(views[k].info.id, p[i].id) == 0;
        if (!seen && views[k].nmeasurements > 0)
            watch_reload(d, st, views[k].info.id, &ok, &failed);
    }
    if (ok > 0 || failed > 0) {
        int nlocal, nfleet;
        int64_t nmeas;
        index_stats(d->ix, &nlocal, &nfleet, &nmeas);
        log_event(failed ? LOGL_WARN : LOGL_INFO, "index_reloaded",
                  "reason=watch devices=%d failed=%d measurements=%lld", ok, failed,
                  (long long)nmeas);
    }
out:
    free(views);
    free(p);
}
