/* metrics.c -- atomic counters and their Prometheus rendering. */
#include "metrics.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../common/attune_err.h"
#include "conn.h"
#include "fleet_sync.h"

/* cmake/commit.cmake writes it at each build (build_commit.c). */
extern const char attune_build_commit[];

#ifdef ATTUNE_CUDA_VERSION
#define BUILD_CUDA ATTUNE_CUDA_VERSION
#else
#define BUILD_CUDA "none"
#endif

/* Statuses counted on their own; anything else lands in "other". */
static const unsigned status_codes[] = {200, 202, 400, 401, 403, 404, 405,
                                        409, 413, 415, 500, 503};
#define NSTATUS (sizeof status_codes / sizeof status_codes[0] + 1)

/* Lookup latency buckets, seconds: a lookup is a hash probe plus JSON, so
 * the interesting range is microseconds. */
static const double lat_bounds[] = {5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4,
                                    2.5e-4, 5e-4, 1e-3, 5e-3, 2.5e-2};
#define NBUCKETS (sizeof lat_bounds / sizeof lat_bounds[0])

static const char *const *route_labels;
static int route_count;
static atomic_ullong requests[METRICS_MAX_ROUTES][NSTATUS];
static atomic_ullong lat_buckets[NBUCKETS + 1]; /* last: +Inf */
static atomic_ullong lat_sum_ns;
static atomic_ullong lookups[6]; /* by index_source */
static atomic_ullong lookups_stale;
static atomic_ullong reload_failures;
static atomic_ullong measurements;
static atomic_llong db_size = -1;
static time_t started_at;

void metrics_init(const char *const *labels, int n)
{
    route_labels = labels;
    route_count = n < METRICS_MAX_ROUTES ? n : METRICS_MAX_ROUTES;
    started_at = time(NULL);
}

static size_t status_slot(unsigned status)
{
    for (size_t i = 0; i < NSTATUS - 1; i++)
        if (status_codes[i] == status)
            return i;
    return NSTATUS - 1;
}

void metrics_request(int route, unsigned status)
{
    if (route < 0 || route >= route_count)
        return;
    atomic_fetch_add_explicit(&requests[route][status_slot(status)], 1,
                              memory_order_relaxed);
}

void metrics_lookup(int source, int stale, double seconds)
{
    if (source >= 0 && source < 6)
        atomic_fetch_add_explicit(&lookups[source], 1, memory_order_relaxed);
    if (stale)
        atomic_fetch_add_explicit(&lookups_stale, 1, memory_order_relaxed);
    size_t b = 0;
    while (b < NBUCKETS && seconds > lat_bounds[b])
        b++;
    atomic_fetch_add_explicit(&lat_buckets[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&lat_sum_ns, (unsigned long long)(seconds * 1e9),
                              memory_order_relaxed);
}

void metrics_reload_failed(void)
{
    atomic_fetch_add_explicit(&reload_failures, 1, memory_order_relaxed);
}

void metrics_measurements_add(int n)
{
    if (n > 0)
        atomic_fetch_add_explicit(&measurements, (unsigned long long)n,
                                  memory_order_relaxed);
}

void metrics_set_db_size(int64_t bytes)
{
    atomic_store(&db_size, (long long)bytes);
}

/* A label value as the text format wants it: backslash, quote and newline
 * escaped (device ids are plain today; the format must not break if not). */
static void label_escape(const char *in, char *out, size_t size)
{
    size_t n = 0;
    for (; *in && n + 3 < size; in++) {
        if (*in == '\\' || *in == '"' || *in == '\n') {
            out[n++] = '\\';
            out[n++] = *in == '\n' ? 'n' : *in;
        } else {
            out[n++] = *in;
        }
    }
    out[n] = 0;
}

/* HTTP: requests by route and status, open connections, deadline closes. */
static void render_http(FILE *f)
{
    fprintf(f, "# HELP attune_http_requests_total HTTP requests answered, by route and "
               "status.\n# TYPE attune_http_requests_total counter\n");
    for (int r = 0; r < route_count; r++)
        for (size_t s = 0; s < NSTATUS; s++) {
            /* every series from the start, at zero: an alert on a rate
             * needs the series before the first event */
            unsigned long long v = atomic_load_explicit(&requests[r][s],
                                                        memory_order_relaxed);
            if (s < NSTATUS - 1)
                fprintf(f, "attune_http_requests_total{%s,status=\"%u\"} %llu\n",
                        route_labels[r], status_codes[s], v);
            else
                fprintf(f, "attune_http_requests_total{%s,status=\"other\"} %llu\n",
                        route_labels[r], v);
        }

    fprintf(f, "# HELP attune_http_connections_open HTTP connections open now.\n"
               "# TYPE attune_http_connections_open gauge\nattune_http_connections_open %lld\n"
               "# HELP attune_http_deadline_closes_total Connections shut down for not "
               "delivering a request in time (--request-timeout).\n"
               "# TYPE attune_http_deadline_closes_total counter\n"
               "attune_http_deadline_closes_total %lld\n",
            conn_open_count(), conn_deadline_kills());
}

/* Lookups: the latency histogram, answers by source, stale answers. */
static void render_lookups(FILE *f)
{
    static const char *const sources[6] = {"measured", "nearest", "default", "predicted",
                                           "fleet",    "pinned"};
    fprintf(f, "# HELP attune_lookup_duration_seconds Time to answer GET /v1/tactic, "
               "parse to response.\n# TYPE attune_lookup_duration_seconds histogram\n");
    unsigned long long cum = 0;
    for (size_t b = 0; b <= NBUCKETS; b++) {
        cum += atomic_load_explicit(&lat_buckets[b], memory_order_relaxed);
        if (b < NBUCKETS)
            fprintf(f, "attune_lookup_duration_seconds_bucket{le=\"%g\"} %llu\n",
                    lat_bounds[b], cum);
        else
            fprintf(f, "attune_lookup_duration_seconds_bucket{le=\"+Inf\"} %llu\n", cum);
    }
    fprintf(f, "attune_lookup_duration_seconds_sum %.9f\n",
            (double)atomic_load(&lat_sum_ns) * 1e-9);
    fprintf(f, "attune_lookup_duration_seconds_count %llu\n", cum);

    fprintf(f, "# HELP attune_lookups_total Lookups answered, by source of the answer.\n"
               "# TYPE attune_lookups_total counter\n");
    for (int s = 0; s < 6; s++)
        fprintf(f, "attune_lookups_total{source=\"%s\"} %llu\n", sources[s],
                atomic_load_explicit(&lookups[s], memory_order_relaxed));

    fprintf(f, "# HELP attune_lookups_stale_total Lookups answered with a winner measured "
               "on another stack than the device's current one.\n"
               "# TYPE attune_lookups_stale_total counter\nattune_lookups_stale_total %llu\n",
            atomic_load_explicit(&lookups_stale, memory_order_relaxed));
}

/* Tune on miss's admission (issue 29 item 1): the daily quota, its use,
 * and lookups refused tuning by reason. */
static void render_miss_quota(FILE *f, const metrics_snapshot *snap)
{
    fprintf(f, "# HELP attune_miss_quota Shapes a local device tunes on miss per UTC day "
               "(--miss-quota).\n# TYPE attune_miss_quota gauge\n");
    for (int i = 0; i < snap->nqueues; i++) {
        char dev[2 * sizeof snap->queues[i].device];
        label_escape(snap->queues[i].device, dev, sizeof dev);
        fprintf(f, "attune_miss_quota{device=\"%s\"} %d\n", dev, snap->queues[i].miss_quota);
    }
    fprintf(f, "# HELP attune_miss_admitted_today Shapes admitted for tune on miss this UTC "
               "day.\n# TYPE attune_miss_admitted_today gauge\n");
    for (int i = 0; i < snap->nqueues; i++) {
        char dev[2 * sizeof snap->queues[i].device];
        label_escape(snap->queues[i].device, dev, sizeof dev);
        fprintf(f, "attune_miss_admitted_today{device=\"%s\"} %d\n", dev,
                snap->queues[i].miss_today);
    }
    fprintf(f, "# HELP attune_miss_refused_total Lookups whose shape was refused tuning: its "
               "predicted tune over --miss-budget-s (reason=\"budget\") or the day's quota "
               "used (reason=\"quota\").\n# TYPE attune_miss_refused_total counter\n");
    for (int i = 0; i < snap->nqueues; i++) {
        char dev[2 * sizeof snap->queues[i].device];
        label_escape(snap->queues[i].device, dev, sizeof dev);
        fprintf(f, "attune_miss_refused_total{device=\"%s\",reason=\"budget\"} %lld\n", dev,
                (long long)snap->queues[i].refused_budget);
        fprintf(f, "attune_miss_refused_total{device=\"%s\",reason=\"quota\"} %lld\n", dev,
                (long long)snap->queues[i].refused_quota);
    }
    fprintf(f, "# HELP attune_miss_retained Shapes tuned on miss under retention: forgotten "
               "when no lookup asks for them within --miss-retain-s.\n"
               "# TYPE attune_miss_retained gauge\n");
    for (int i = 0; i < snap->nqueues; i++) {
        char dev[2 * sizeof snap->queues[i].device];
        label_escape(snap->queues[i].device, dev, sizeof dev);
        fprintf(f, "attune_miss_retained{device=\"%s\"} %d\n", dev, snap->queues[i].miss_kept);
    }
    fprintf(f, "# HELP attune_miss_forgotten_total Shapes tuned on miss whose rows were "
               "deleted for want of a lookup, since start.\n"
               "# TYPE attune_miss_forgotten_total counter\n");
    for (int i = 0; i < snap->nqueues; i++) {
        char dev[2 * sizeof snap->queues[i].device];
        label_escape(snap->queues[i].device, dev, sizeof dev);
        fprintf(f, "attune_miss_forgotten_total{device=\"%s\"} %lld\n", dev,
                (long long)snap->queues[i].miss_expired);
    }
}

/* The daemon's state: reload failures, queues, jobs, rows, devices, the
 * database's size, the start time. */
static void render_state(FILE *f, const metrics_snapshot *snap)
{
    static const char *const job_states[5] = {"queued", "running", "done", "failed",
                                              "canceled"};
    fprintf(f, "# HELP attune_index_reload_failures_total Reloads of a device's rows from "
               "the database that failed (the index kept the old rows).\n"
               "# TYPE attune_index_reload_failures_total counter\n"
               "attune_index_reload_failures_total %llu\n",
            atomic_load_explicit(&reload_failures, memory_order_relaxed));

    fprintf(f, "# HELP attune_queue_depth Work queued on a local device: explicit jobs "
               "(queue=\"jobs\") and shapes missed by lookups (queue=\"miss\").\n"
               "# TYPE attune_queue_depth gauge\n");
    for (int i = 0; i < snap->nqueues; i++) {
        char dev[2 * sizeof snap->queues[i].device];
        label_escape(snap->queues[i].device, dev, sizeof dev);
        fprintf(f, "attune_queue_depth{device=\"%s\",queue=\"jobs\"} %d\n", dev,
                snap->queues[i].jobs);
        fprintf(f, "attune_queue_depth{device=\"%s\",queue=\"miss\"} %d\n", dev,
                snap->queues[i].misses);
    }
    fprintf(f, "# HELP attune_miss_tuning 1 while a local device tunes a shape that a lookup "
               "missed (its quick pass or its full tune), else 0.\n"
               "# TYPE attune_miss_tuning gauge\n");
    for (int i = 0; i < snap->nqueues; i++) {
        char dev[2 * sizeof snap->queues[i].device];
        label_escape(snap->queues[i].device, dev, sizeof dev);
        fprintf(f, "attune_miss_tuning{device=\"%s\"} %d\n", dev, snap->queues[i].miss_running);
    }
    render_miss_quota(f, snap);

    fprintf(f, "# HELP attune_jobs Tuning jobs known to the daemon, by state.\n"
               "# TYPE attune_jobs gauge\n");
    for (int s = 0; s < 5; s++)
        fprintf(f, "attune_jobs{state=\"%s\"} %d\n", job_states[s], snap->jobs[s]);

    fprintf(f, "# HELP attune_measurements_taken_total Measurements committed by this "
               "daemon's tuning jobs.\n# TYPE attune_measurements_taken_total counter\n"
               "attune_measurements_taken_total %llu\n",
            atomic_load(&measurements));

    fprintf(f, "# HELP attune_index_measurements Measurements held by the lookup index.\n"
               "# TYPE attune_index_measurements gauge\nattune_index_measurements %lld\n",
            (long long)snap->index_measurements);

    fprintf(f, "# HELP attune_devices Devices served, local or fleet (imported).\n"
               "# TYPE attune_devices gauge\nattune_devices{kind=\"local\"} %d\n"
               "attune_devices{kind=\"fleet\"} %d\n",
            snap->devices_local, snap->devices_fleet);

    long long size = atomic_load(&db_size);
    if (size >= 0)
        fprintf(f, "# HELP attune_db_size_bytes Size of the database file(s).\n"
                   "# TYPE attune_db_size_bytes gauge\nattune_db_size_bytes %lld\n",
                size);

    fprintf(f, "# HELP attune_start_time_seconds Start time of the daemon, unix seconds.\n"
               "# TYPE attune_start_time_seconds gauge\nattune_start_time_seconds %lld\n",
            (long long)started_at);
}

int metrics_render(const metrics_snapshot *snap, char **out, size_t *len)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (f == NULL)
        return ATTUNE_ENOMEM;

    fprintf(f, "# HELP attune_build_info The running build: version, commit, kernels' "
               "build hash, CUDA toolkit (none: CPU only).\n"
               "# TYPE attune_build_info gauge\n"
               "attune_build_info{version=\"%s\",commit=\"%s\",kernels_hash=\"%s\","
               "cuda=\"%s\"} 1\n",
            ATTUNE_VERSION, attune_build_commit, ATTUNE_KERNELS_HASH, BUILD_CUDA);

    render_http(f);
    render_lookups(f);
    fprintf(f, "# HELP attune_lookups_kept_total Lookups answered from the kept answers "
               "(the same query, the index unchanged since), and asked there first but "
               "answered by a lookup.\n# TYPE attune_lookups_kept_total counter\n"
               "attune_lookups_kept_total{result=\"hit\"} %lld\n"
               "attune_lookups_kept_total{result=\"miss\"} %lld\n",
            (long long)snap->answers_kept_hits, (long long)snap->answers_kept_misses);
    fprintf(f, "# HELP attune_index_pending Changes the index's builder still has to make: "
               "prediction models older than their rows, listings queued. Each drops the kept "
               "answers when made.\n# TYPE attune_index_pending gauge\n"
               "attune_index_pending{work=\"models\"} %d\n"
               "attune_index_pending{work=\"listings\"} %d\n",
            snap->pending_models, snap->pending_listings);
    render_state(f, snap);
    fleet_sync_metrics(f);

    if (fclose(f) != 0 || buf == NULL) {
        free(buf);
        return ATTUNE_ENOMEM;
    }
    *out = buf;
    *len = n;
    return 0;
}
