/* metrics.h -- counters for GET /metrics (Prometheus text format 0.0.4).
 *
 * Process-wide, lock-free: every counter is a C11 atomic bumped by the
 * HTTP threads and the job threads; metrics_render() reads them without
 * stopping anyone (a scrape may see one counter a request ahead of another,
 * as Prometheus allows). */
#ifndef ATTUNED_METRICS_H
#define ATTUNED_METRICS_H

#include <stddef.h>
#include <stdint.h>

#define METRICS_MAX_ROUTES 24

/* Name the routes: labels[i] is the label set of route i in
 * attune_http_requests_total, e.g. `method="GET",route="/v1/tactic"`; it must
 * stay valid for the process lifetime. n <= METRICS_MAX_ROUTES. */
void metrics_init(const char *const *labels, int n);

/* One answered request: route index (as given to metrics_init) and status. */
void metrics_request(int route, unsigned status);

/* One /v1/tactic lookup: source 0 measured, 1 nearest, 2 default,
 * 3 predicted, 4 fleet (index_source), stale (1: the winner was measured
 * on another stack than the device's current one), and the time it took
 * in seconds. */
void metrics_lookup(int source, int stale, double seconds);

/* One failed reload of the index from the database (SIGHUP, the watcher,
 * after an import): the device kept its old rows. */
void metrics_reload_failed(void);

/* Measurements committed by the job threads. */
void metrics_measurements_add(int n);

/* Latest database size (the DB worker refreshes it). */
void metrics_set_db_size(int64_t bytes);

/* Queued work of one local device: explicit jobs waiting for its thread,
 * and shapes queued by tune on miss. */
#define METRICS_MAX_DEVICES 16
typedef struct metrics_queue {
    char device[64];
    int jobs;
    int misses;
    int miss_running; /* 1: a missed shape is being tuned now */
    int miss_today;   /* shapes admitted for tune on miss this UTC day */
    int miss_quota;   /* the daily quota */
    int64_t refused_budget, refused_quota; /* lookups refused tuning, since start */
    int miss_kept;    /* shapes tuned on miss, under retention */
    int64_t miss_expired; /* of those, forgotten since start */
} metrics_queue;

/* State the metrics module cannot see itself, filled by the caller at
 * scrape time. */
typedef struct metrics_snapshot {
    int jobs[5];        /* by store_job_state: queued, running, done, failed, canceled */
    int devices_local;
    int devices_fleet;
    int64_t index_measurements;
    metrics_queue queues[METRICS_MAX_DEVICES]; /* local devices, all present */
    int nqueues;
    /* GET /v1/tactic answered from the kept answers (daemon/tactic_cache.h),
     * and asked there but answered the long way */
    int64_t answers_kept_hits, answers_kept_misses;
    /* the index's builder: models out of date, listings queued (index_pending) */
    int pending_models, pending_listings;
} metrics_snapshot;

/* Render all metrics as text; *out malloc'd (caller frees), *len its
 * length. Returns 0 or ATTUNE_ENOMEM. */
int metrics_render(const metrics_snapshot *snap, char **out, size_t *len);

#endif
