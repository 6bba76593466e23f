/* jobs_retain.c -- retention of shapes tuned on miss: one that no lookup
 * asked for again within jobs_config.miss_retain_s is forgotten (its rows
 * on the device and its miss jobs deleted), unless an explicit job tuned
 * it too (issue 29 item 1).
 *
 * Each device keeps a table of the shapes its miss jobs completed, with
 * the last time a lookup was answered `measured` for them. Lookups only
 * read the key hashes and store that time (atomics, no lock: the lookup
 * path takes no mutex); the device thread alone adds and removes entries
 * (at load, when a miss job completes, in the sweep). The sweep runs on the
 * device thread when it is idle, every JOBS_RETAIN_PERIOD_S (or a quarter
 * of the retention); it writes the last-asked times back as the jobs'
 * updated_at, so a restart keeps them to within one period. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/hash.h"
#include "jobs_internal.h"
#include "log.h"

#define SLOT_EMPTY 0
#define SLOT_GONE 1 /* a tombstone: probes go on past it */

static uint64_t key_hash(const char *key)
{
    uint64_t h = hash_fnv1a64(hash_fnv1a64_init(), key, strlen(key));
    return h > SLOT_GONE ? h : h + 2;
}

double jobs_retain_s(const jobs *j)
{
    return j->cfg.miss_retain_s > 0 ? j->cfg.miss_retain_s : JOBS_MISS_RETAIN_S;
}

/* The slot of h, or -1. */
static int find_slot(const jdev *d, uint64_t h)
{
    for (int k = 0; k < JOBS_RETAIN_SLOTS; k++) {
        const retain_slot *sl = &d->kept[(h + (uint64_t)k) % JOBS_RETAIN_SLOTS];
        uint64_t x = atomic_load_explicit(&sl->h, memory_order_acquire);
        if (x == SLOT_EMPTY)
            return -1;
        if (x == h)
            return (int)((h + (uint64_t)k) % JOBS_RETAIN_SLOTS);
    }
    return -1;
}

void jobs_retain_add(jdev *d, const attn_shape *s, int64_t job, int64_t asked)
{
    char key[ATTN_SHAPE_KEY_MAX];
    uint64_t h = key_hash(attn_shape_key(s, key, sizeof key));
    int at = find_slot(d, h);
    for (int k = 0; at < 0 && k < JOBS_RETAIN_SLOTS; k++) {
        int i = (int)((h + (uint64_t)k) % JOBS_RETAIN_SLOTS);
        if (atomic_load_explicit(&d->kept[i].h, memory_order_relaxed) <= SLOT_GONE)
            at = i;
    }
    if (at < 0) {
        log_event(LOGL_WARN, "miss_retain_full", "device=%s shape=%s", d->dev.info.id, key);
        return; /* not tracked: kept for good */
    }
    retain_slot *sl = &d->kept[at];
    sl->s = *s;
    sl->job = job;
    sl->saved = asked;
    atomic_store_explicit(&sl->asked, asked, memory_order_relaxed);
    if (atomic_load_explicit(&sl->h, memory_order_relaxed) != h) {
        atomic_store_explicit(&sl->h, h, memory_order_release);
        atomic_fetch_add_explicit(&d->nkept, 1, memory_order_relaxed);
    }
}

int jobs_retain_has(const jdev *d, const char *key)
{
    return atomic_load_explicit(&d->nkept, memory_order_relaxed) > 0 &&
           find_slot(d, key_hash(key)) >= 0;
}

void jobs_asked(jobs *j, const char *device_id, const char *key)
{
    if (j == NULL)
        return;
    for (int i = 0; i < j->ndevs; i++) {
        jdev *d = &j->devs[i];
        if (strcmp(d->dev.info.id, device_id) != 0 ||
            atomic_load_explicit(&d->nkept, memory_order_relaxed) == 0)
            continue;
        int at = find_slot(d, key_hash(key));
        int64_t now = (int64_t)time(NULL);
        /* one store a second at most: no cache line ping-pong under load */
        if (at >= 0 && atomic_load_explicit(&d->kept[at].asked, memory_order_relaxed) != now)
            atomic_store_explicit(&d->kept[at].asked, now, memory_order_relaxed);
        return;
    }
}

/* Forget slot sl's shape: its rows and miss jobs in the store, their
 * views in the table (every miss job of the shape the store deleted, not
 * only sl->job: an earlier canceled or failed one stayed listed). 1 when
 * forgotten, 0 when kept (an explicit job tuned it), or left for the next
 * sweep (a miss job of it in flight, or the store failed). */
static int forget(jdev *d, store *st, retain_slot *sl)
{
    char key[ATTN_SHAPE_KEY_MAX];
    int64_t rows = 0, *ids = NULL;
    int nids = 0;
    int rc = store_forget_miss_shape(st, d->dev.info.id, &sl->s, &rows, &ids, &nids);
    attn_shape_key(&sl->s, key, sizeof key);
    if (rc == ATTUNE_ESTATE) { /* a miss job of it is writing rows: not now */
        log_event(LOGL_INFO, "miss_retain_kept", "device=%s shape=%s reason=job_in_flight",
                  d->dev.info.id, key);
        return 0;
    }
    if (rc == ATTUNE_EEXIST) { /* tuned by an explicit job too: not ours to drop */
        log_event(LOGL_INFO, "miss_retain_kept", "device=%s shape=%s reason=explicit_job",
                  d->dev.info.id, key);
    } else if (rc != 0) {
        log_event(LOGL_WARN, "miss_retain_failed", "device=%s shape=%s error=\"%s\"",
                  d->dev.info.id, key, attune_strerror(rc));
        return 0;
    } else {
        log_event(LOGL_INFO, "miss_forgotten", "device=%s shape=%s rows=%lld job=%lld jobs=%d",
                  d->dev.info.id, key, (long long)rows, (long long)sl->job, nids);
        jobs_forgotten(d, ids, nids);
    }
    free(ids);
    atomic_store_explicit(&sl->h, SLOT_GONE, memory_order_release);
    atomic_fetch_sub_explicit(&d->nkept, 1, memory_order_relaxed);
    return rc == 0;
}

void jobs_retain_sweep(jdev *d, store *st)
{
    int64_t now = (int64_t)time(NULL);
    double keep = jobs_retain_s(d->j);
    for (int i = 0; i < JOBS_RETAIN_SLOTS; i++) {
        retain_slot *sl = &d->kept[i];
        if (atomic_load_explicit(&sl->h, memory_order_relaxed) <= SLOT_GONE)
            continue;
        int64_t asked = atomic_load_explicit(&sl->asked, memory_order_relaxed);
        if ((double)(now - asked) > keep) {
            forget(d, st, sl);
        } else if (asked > sl->saved && sl->job > 0) {
            /* the last ask, for the next start: the job's updated_at */
            if (store_job_update(st, sl->job, STORE_JOB_DONE, 1, NULL) == 0)
                sl->saved = asked;
        }
    }
}
