/* metrics.c -- atomic counters and their Prometheus rendering. */
#include "metrics.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../common/attune_err.h"
#include "fleet_sync.h"

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
static atomic_ullong lookups[5]; /* by index_source */
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

void metrics_lookup(int source, double seconds)
{
    if (source >= 0 && source < 5)
        atomic_fetch_add_explicit(&lookups[source], 1, memory_order_relaxed);
    size_t b = 0;
    while (b < NBUCKETS && seconds > lat_bounds[b])
        b++;
    atomic_fetch_add_explicit(&lat_buckets[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&lat_sum_ns, (unsigned long long)(seconds * 1e9),
                              memory_order_relaxed);
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

int metrics_render(const metrics_snapshot *snap, char **out, size_t *len)
{
    static const char *const job_states[5] = {"queued", "running", "done", "failed",
                                              "canceled"};
    static const char *const sources[5] = {"measured", "nearest", "default", "predicted",
                                           "fleet"};
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (f == NULL)
        return ATTUNE_ENOMEM;

    fprintf(f, "# HELP attune_http_requests_total HTTP requests answered, by route and "
               "status.\n# TYPE attune_http_requests_total counter\n");
    for (int r = 0; r < route_count; r++)
        for (size_t s = 0; s < NSTATUS; s++) {
            unsigned long long v = atomic_load_explicit(&requests[r][s],
                                                        memory_order_relaxed);
            if (v == 0)
                continue;
            if (s < NSTATUS - 1)
                fprintf(f, "attune_http_requests_total{%s,status=\"%u\"} %llu\n",
                        route_labels[r], status_codes[s], v);
            else
                fprintf(f, "attune_http_requests_total{%s,status=\"other\"} %llu\n",
                        route_labels[r], v);
        }

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
    for (int s = 0; s < 5; s++)
        fprintf(f, "attune_lookups_total{source=\"%s\"} %llu\n", sources[s],
                atomic_load_explicit(&lookups[s], memory_order_relaxed));

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

    fleet_sync_metrics(f);

    if (fclose(f) != 0 || buf == NULL) {
        free(buf);
        return ATTUNE_ENOMEM;
    }
    *out = buf;
    *len = n;
    return 0;
}
