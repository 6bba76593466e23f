/* sync.c -- the lookup index follows the database (sync.h). */
#include "sync.h"

#include <stdlib.h>
#include <string.h>

#include "../db/store_pins.h"
#include "log.h"
#include "metrics.h"

void sync_init(sync_state *s, index_state *ix, const attn_device *local, int nlocal)
{
    memset(s, 0, sizeof *s);
    s->ix = ix;
    s->local = local;
    s->nlocal = nlocal;
}

static int is_local(const sync_state *s, const char *id)
{
    for (int i = 0; i < s->nlocal; i++)
        if (strcmp(s->local[i].info.id, id) == 0)
            return 1;
    return 0;
}

/* Rows of device id read from st and swapped into the index, unless a
 * row was put meanwhile (a job thread's sync_row after a commit that the
 * read may have begun before): then read again, up to SYNC_LOAD_TRIES
 * reads in all, then ATTUNE_EBUSY: not a failure (the index holds every
 * row put; that commit moved data_version, so the next sync_watch
 * compares again and reloads what still differs). Two: one put during a
 * read is the usual case, and a device whose tune commits faster than
 * it can be read costs the DB worker two reads a look, not more. */
#define SYNC_LOAD_TRIES 2
static int load_rows(sync_state *s, store *st, const char *id)
{
    int rc = ATTUNE_EBUSY;
    for (int t = 0; t < SYNC_LOAD_TRIES && rc == ATTUNE_EBUSY; t++) {
        uint64_t puts;
        store_measurement *m = NULL;
        int n = 0;
        if ((rc = index_device_puts(s->ix, id, &puts)) != 0 ||
            (rc = store_measurements_all(st, id, &m, &n)) != 0)
            break;
        if (s->after_read != NULL)
            s->after_read(s->after_read_ctx, id);
        rc = index_device_load_since(s->ix, id, m, n, puts); /* takes m */
    }
    return rc;
}

/* (Re)load every row of device id from st into the index. A fleet device
 * first gets its identity and latest stack as the store has them now; a
 * local one keeps the registry's. */
static int load_device(sync_state *s, store *st, const char *id)
{
    int rc = 0;
    if (!is_local(s, id)) {
        attn_device_info info;
        attn_stack stack;
        if ((rc = store_device_get(st, id, &info, &stack)) != 0 ||
            (rc = index_device_put(s->ix, &info, &stack, 0)) != 0)
            goto out;
    }
    rc = load_rows(s, st, id);
out:
    if (rc != 0 && rc != ATTUNE_EBUSY)
        metrics_reload_failed();
    return rc;
}

int sync_pins(sync_state *s, store *st)
{
    pin *p = NULL;
    int n = 0;
    int rc = store_pins_list(st, &p, &n);
    if (rc != 0) {
        metrics_reload_failed();
        log_event(LOGL_ERROR, "pins_reload_failed", "error=\"%s\" kept=old",
                  attune_strerror(rc));
        return rc;
    }
    return index_pins_set(s->ix, p, n); /* takes p */
}

int sync_load(sync_state *s, store *st)
{
    int rc;
    for (int i = 0; i < s->nlocal; i++) {
        const attn_device *dev = &s->local[i];
        if ((rc = store_device_put(st, &dev->info, &dev->stack)) != 0) {
            log_event(LOGL_ERROR, "device_register_failed", "device=%s error=\"%s\"",
                      dev->info.id, attune_strerror(rc));
            return rc;
        }
        if ((rc = index_device_put(s->ix, &dev->info, &dev->stack, 1)) != 0 ||
            (rc = load_device(s, st, dev->info.id)) != 0)
            return rc;
    }
    attn_device_info *infos = NULL;
    attn_stack *stacks = NULL;
    int n = 0;
    if ((rc = store_devices_list(st, &infos, &stacks, &n)) != 0)
        return rc;
    for (int i = 0; i < n && rc == 0; i++)
        if (!is_local(s, infos[i].id))
            rc = load_device(s, st, infos[i].id);
    free(infos);
    free(stacks);
    return rc != 0 ? rc : sync_pins(s, st);
}

/* Log the index's totals after a reload of some devices. */
static void log_reloaded(sync_state *s, const char *reason, int ok, int failed)
{
    int nlocal, nfleet;
    int64_t nmeas;
    index_stats(s->ix, &nlocal, &nfleet, &nmeas);
    log_event(failed ? LOGL_WARN : LOGL_INFO, "index_reloaded",
              "reason=%s devices=%d failed=%d local=%d fleet=%d measurements=%lld", reason, ok,
              failed, nlocal, nfleet, (long long)nmeas);
}

/* Reload one device, counting into *ok / *failed; the first error into
 * *first. */
static void reload_one(sync_state *s, store *st, const char *id, const char *reason, int *ok,
                       int *failed, int *first)
{
    int rc = load_device(s, st, id);
    if (rc == 0) {
        (*ok)++;
        return;
    }
    if (rc == ATTUNE_EBUSY) { /* rows kept coming in: the next look */
        log_event(LOGL_INFO, "index_reload_deferred", "reason=%s device=%s next=watch", reason,
                  id);
        return;
    }
    if ((*failed)++ == 0)
        *first = rc;
    log_event(LOGL_ERROR, "index_reload_failed", "reason=%s device=%s error=\"%s\" kept=old",
              reason, id, attune_strerror(rc));
}

int sync_reload(sync_state *s, store *st, const char *reason)
{
    attn_device_info *infos = NULL;
    attn_stack *stacks = NULL;
    int n = 0, ok = 0, failed = 0, first = 0;
    int rc = store_devices_list(st, &infos, &stacks, &n);
    if (rc != 0) {
        metrics_reload_failed();
        log_event(LOGL_ERROR, "index_reload_failed", "reason=%s error=\"%s\"", reason,
                  attune_strerror(rc));
        return rc;
    }
    /* the store lists local devices too (registered at start) */
    for (int i = 0; i < n; i++)
        reload_one(s, st, infos[i].id, reason, &ok, &failed, &first);
    free(infos);
    free(stacks);
    log_reloaded(s, reason, ok, failed);
    rc = sync_pins(s, st);
    return first != 0 ? first : rc;
}

/* 1 when two descriptions of a device differ in any field. */
static int info_differs(const attn_device_info *a, const attn_device_info *b)
{
    return strcmp(a->id, b->id) != 0 || strcmp(a->name, b->name) != 0 ||
           strcmp(a->kind, b->kind) != 0 || a->index != b->index ||
           a->cc_major != b->cc_major || a->cc_minor != b->cc_minor ||
           a->sm_count != b->sm_count || a->memory_mb != b->memory_mb ||
           a->clock_mhz != b->clock_mhz || a->mem_clock_mhz != b->mem_clock_mhz;
}

/* 1 when the index's copy v of a device differs from the database's
 * fingerprint p (NULL: the database no longer has the device). A local
 * device's description and stack are the registry's, not the store's, so
 * only its rows are compared. */
static int differs(const index_device_view *v, const store_fingerprint *p)
{
    if (p == NULL)
        return v->nmeasurements > 0;
    if (v->nmeasurements != p->rows || v->taken_sum != p->taken_sum || v->marks != p->marks)
        return 1;
    return !v->local &&
           (strcmp(v->stack.id, p->stack.id) != 0 || info_differs(&v->info, &p->info));
}

/* Reload the devices whose fingerprint differs from the index's, and
 * those the index lacks. 0 or the first error; *looked (may be NULL) is
 * set when the fingerprints could be compared at all. */
static int refresh(sync_state *s, store *st, const char *reason, int *looked)
{
    store_fingerprint *p = NULL;
    index_device_view *views = NULL;
    int np = 0, nv = 0, ok = 0, failed = 0, first = 0;
    int rc = store_fingerprints(st, &p, &np);
    if (rc == 0)
        rc = index_devices(s->ix, &views, &nv);
    if (rc != 0) {
        log_event(LOGL_WARN, "db_watch_failed", "reason=%s error=\"%s\"", reason,
                  attune_strerror(rc));
        goto out;
    }
    if (looked != NULL)
        *looked = 1;
    for (int i = 0; i < np; i++) { /* devices and rows added, changed, (un)marked */
        const index_device_view *v = NULL;
        for (int k = 0; k < nv && v == NULL; k++)
            if (strcmp(views[k].info.id, p[i].info.id) == 0)
                v = &views[k];
        if (v == NULL || differs(v, &p[i]))
            reload_one(s, st, p[i].info.id, reason, &ok, &failed, &first);
    }
    for (int k = 0; k < nv; k++) { /* devices removed from the database */
        const store_fingerprint *f = NULL;
        for (int i = 0; i < np && f == NULL; i++)
            if (strcmp(views[k].info.id, p[i].info.id) == 0)
                f = &p[i];
        if (f == NULL && differs(&views[k], NULL))
            reload_one(s, st, views[k].info.id, reason, &ok, &failed, &first);
    }
    if (ok > 0 || failed > 0)
        log_reloaded(s, reason, ok, failed);
    rc = sync_pins(s, st); /* a few rows: read whole on every look */
    rc = first != 0 ? first : rc;
out:
    free(views);
    free(p);
    return rc;
}

int sync_refresh(sync_state *s, store *st, const char *reason)
{
    return refresh(s, st, reason, NULL);
}

void sync_watch(sync_state *s, store *st)
{
    int64_t version;
    int looked = 0;
    int rc = store_data_version(st, &version);
    if (rc != 0) { /* looked at again at the next call */
        log_event(LOGL_WARN, "db_watch_failed", "reason=watch error=\"%s\"", attune_strerror(rc));
        return;
    }
    if (s->looked && version == s->version)
        return; /* no other connection committed since the last look */
    refresh(s, st, "watch", &looked);
    if (looked) { /* else looked at again at the next call */
        s->version = version;
        s->looked = 1;
    }
}

void sync_row(void *ctx, const store_measurement *m)
{
    int rc = index_row_put(ctx, m);
    if (rc != 0)
        log_event(LOGL_WARN, "index_row_failed", "device=%s tactic=%s error=\"%s\" "
                  "next=watch_reload", m->device_id, m->tactic, attune_strerror(rc));
}
