/* fleet_sync.c -- attuned's fleet sync thread (see fleet_sync.h).
 *
 * One loop: connect when not connected, push every pending row (batch by
 * batch, each committed on the server before the local watermark moves),
 * pull this host's models when the pull period is due, sleep. Any failure
 * drops the connection and waits 1, 2, 4 ... FLEET_SYNC_BACKOFF_MAX_S
 * seconds before the next attempt; the first success resets the wait. */
#include "fleet_sync.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/pin_rule.h"
#include "../db/fleet_local.h"
#include "../db/fleet_pg.h"
#include "log.h"

struct fleet_sync {
    fleet_sync_config cfg;
    attn_device_info devices[16];
    char *url, *db_path;
    store *st;
    fleet_pg *conn;
    char source[40];
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    atomic_int stopping;
    long long pending_at_ms;   /* last refresh of the pending gauge (monotonic) */
    int pins_skipped_said;     /* the count of left-out pins last logged */
};

/* Metrics: process-wide, like metrics.c's counters. */
static atomic_int m_enabled, m_up;
static atomic_llong m_pending = -1, m_pushed, m_rejected, m_pulled, m_errors, m_batches;
static atomic_llong m_last_push, m_last_pull, m_last_ok, m_backoff, m_started;

static void refresh_pending(fleet_sync *s);

/* Log the fleet pins a push's or pull's exchange left out past PIN_MAX
 * when the count changed (a store next to a server of more than PIN_MAX
 * rules would say it every push otherwise). */
static void say_pins_skipped(fleet_sync *s, int n)
{
    if (n == s->pins_skipped_said)
        return;
    s->pins_skipped_said = n;
    log_event(n > 0 ? LOGL_WARN : LOGL_INFO, "fleet_pins_skipped", "count=%d max=%d", n,
              PIN_MAX);
}

/* Between two push batches: the pause (spreading a backlog's load on the
 * server), the pending-rows gauge every 200 ms (so /metrics shows
 * a long push progressing), and whether to stop. */
static int between_batches(void *arg)
{
    fleet_sync *s = arg;
    if (s->cfg.pause_ms > 0 && !atomic_load(&s->stopping)) {
        struct timespec ts = {s->cfg.pause_ms / 1000, (long)(s->cfg.pause_ms % 1000) * 1000000};
        nanosleep(&ts, NULL);
    }
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long long ms = (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
    if (ms - s->pending_at_ms >= 200) {
        s->pending_at_ms = ms;
        refresh_pending(s);
    }
    return atomic_load(&s->stopping);
}

/* Sleep up to seconds, or until fleet_sync_stop. */
static void nap(fleet_sync *s, int seconds)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += seconds;
    pthread_mutex_lock(&s->lock);
    while (!atomic_load(&s->stopping))
        if (pthread_cond_timedwait(&s->wake, &s->lock, &until) == ETIMEDOUT)
            break;
    pthread_mutex_unlock(&s->lock);
}

static void refresh_pending(fleet_sync *s)
{
    fleet_local_state ls;
    if (fleet_local_state_get(s->st, &ls) == 0)
        atomic_store(&m_pending, ls.pending);
}

/* One round: 0 when everything due was done, else the error (logged). */
static int sync_once(fleet_sync *s, int64_t *next_pull)
{
    char err[512] = "";
    int rc;
    if (s->conn == NULL) {
        if ((rc = fleet_pg_connect(s->url, &s->conn, err, sizeof err)) != 0) {
            log_event(LOGL_WARN, "fleet_unreachable", "error=%s", LOG_Q(err));
            return rc;
        }
        char where[256];
        fleet_pg_describe(s->conn, where, sizeof where);
        log_event(LOGL_INFO, "fleet_connected", "server=%s source=%s", LOG_Q(where), s->source);
        atomic_store(&m_up, 1);
    }
    fleet_local_push ps;
    memset(&ps, 0, sizeof ps);
    rc = fleet_local_push_pending(s->st, s->conn, s->cfg.batch_rows, between_batches, s, &ps, err,
                                  sizeof err);
    atomic_fetch_add(&m_pushed, ps.rows.sent);
    atomic_fetch_add(&m_rejected, ps.rows.rejected);
    atomic_fetch_add(&m_batches, ps.batches);
    if (ps.rows.rejected > 0)
        log_event(LOGL_WARN, "fleet_rows_rejected", "count=%" PRId64 " first=%s",
                  ps.rows.rejected, LOG_Q(ps.first_rejected));
    if (ps.batches > 0)
        log_event(LOGL_INFO, "fleet_pushed", "rows=%" PRId64 " batches=%" PRId64
                  " watermark=%" PRId64, ps.rows.sent, ps.batches, ps.acked);
    if (rc != 0) {
        log_event(LOGL_WARN, "fleet_push_failed", "error=%s", LOG_Q(err));
        return rc;
    }
    atomic_store(&m_last_push, (long long)time(NULL));
    if (ps.pins_rc != 0) { /* the rows are pushed; the pins again after the backoff
                              (a dropped connection is made again) */
        log_event(LOGL_WARN, "fleet_pins_failed", "error=%s", LOG_Q(ps.pins_err));
        return ps.pins_rc;
    }
    say_pins_skipped(s, ps.pins_skipped);
    if (atomic_load(&s->stopping))
        return 0;
    if (time(NULL) >= *next_pull) {
        int64_t rows = 0;
        int skipped = 0;
        if ((rc = fleet_local_pull(s->st, s->conn, s->devices, s->cfg.ndevices,
                                   FLEET_SYNC_REFRESH_S, &rows, &skipped, err,
                                   sizeof err)) != 0) {
            log_event(LOGL_WARN, "fleet_pull_failed", "error=%s", LOG_Q(err));
            return rc;
        }
        say_pins_skipped(s, skipped);
        atomic_fetch_add(&m_pulled, rows);
        atomic_store(&m_last_pull, (long long)time(NULL));
        *next_pull = time(NULL) + s->cfg.pull_period_s;
        log_event(LOGL_DEBUG, "fleet_pulled", "rows=%" PRId64, rows);
    }
    return 0;
}

static void *run(void *arg)
{
    fleet_sync *s = arg;
    int backoff = 0;
    int64_t next_pull = 0;
    while (!atomic_load(&s->stopping)) {
        int rc = sync_once(s, &next_pull);
        refresh_pending(s);
        if (rc == 0) {
            atomic_store(&m_last_ok, (long long)time(NULL));
            backoff = 0;
            atomic_store(&m_backoff, 0);
            nap(s, s->cfg.period_s);
            continue;
        }
        atomic_fetch_add(&m_errors, 1);
        /* the connection may be half-dead: start over */
        fleet_pg_close(s->conn);
        s->conn = NULL;
        atomic_store(&m_up, 0);
        backoff = backoff == 0 ? 1 : backoff * 2;
        if (backoff > FLEET_SYNC_BACKOFF_MAX_S)
            backoff = FLEET_SYNC_BACKOFF_MAX_S;
        atomic_store(&m_backoff, backoff);
        nap(s, backoff);
    }
    return NULL;
}

static void sync_free(fleet_sync *s)
{
    fleet_pg_close(s->conn);
    store_close(s->st);
    free(s->url);
    free(s->db_path);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->wake);
    free(s);
}

int fleet_sync_start(const fleet_sync_config *cfg, fleet_sync **out, char *err,
                     size_t errlen)
{
    *out = NULL;
    int rc = fleet_pg_url_check(cfg->url, err, errlen);
    if (rc != 0)
        return rc;
    fleet_sync *s = calloc(1, sizeof *s);
    if (s == NULL)
        return ATTUNE_ENOMEM;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->wake, NULL);
    s->cfg = *cfg;
    s->url = strdup(cfg->url);
    s->db_path = strdup(cfg->db_path);
    if (s->url == NULL || s->db_path == NULL) {
        rc = ATTUNE_ENOMEM;
        goto fail;
    }
    s->cfg.url = s->url;
    s->cfg.db_path = s->db_path;
    s->cfg.ndevices = cfg->ndevices < 16 ? cfg->ndevices : 16;
    memcpy(s->devices, cfg->devices, sizeof *s->devices * (size_t)s->cfg.ndevices);
    s->cfg.devices = s->devices;
    if (s->cfg.period_s < 1)
        s->cfg.period_s = 1;
    if (s->cfg.pull_period_s < 1)
        s->cfg.pull_period_s = 1;
    if ((rc = store_open(s->db_path, 0, &s->st, err, errlen)) != 0 ||
        (rc = fleet_local_setup(s->st, s->source, sizeof s->source, err, errlen)) != 0)
        goto fail;
    refresh_pending(s);
    if (pthread_create(&s->thread, NULL, run, s) != 0) {
        rc = attune_fail(err, errlen, ATTUNE_ENOMEM, "cannot start the fleet sync thread");
        goto fail;
    }
    atomic_store(&m_started, (long long)time(NULL));
    atomic_store(&m_enabled, 1);
    *out = s;
    return 0;
fail:
    sync_free(s);
    return rc;
}

void fleet_sync_stop(fleet_sync *s)
{
    if (s == NULL)
        return;
    pthread_mutex_lock(&s->lock);
    atomic_store(&s->stopping, 1);
    pthread_cond_broadcast(&s->wake);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->thread, NULL);
    atomic_store(&m_enabled, 0);
    atomic_store(&m_up, 0);
    sync_free(s);
}

void fleet_sync_metrics(FILE *f)
{
    fprintf(f, "# HELP attune_fleet_enabled 1 when attuned syncs with a fleet server "
               "(--fleet).\n# TYPE attune_fleet_enabled gauge\nattune_fleet_enabled %d\n",
            atomic_load(&m_enabled));
    if (!atomic_load(&m_enabled))
        return;
    long long now = (long long)time(NULL), ok = atomic_load(&m_last_ok);
    long long pending = atomic_load(&m_pending);
    fprintf(f,
            "# HELP attune_fleet_up 1 while connected to the fleet server.\n"
            "# TYPE attune_fleet_up gauge\nattune_fleet_up %d\n"
            "# HELP attune_fleet_pending_rows Committed local rows the fleet server has not "
            "acknowledged yet.\n# TYPE attune_fleet_pending_rows gauge\n"
            "attune_fleet_pending_rows %lld\n"
            "# HELP attune_fleet_lag_seconds Seconds since the last complete sync while rows "
            "are pending (0 when none are).\n# TYPE attune_fleet_lag_seconds gauge\n"
            "attune_fleet_lag_seconds %lld\n"
            "# HELP attune_fleet_backoff_seconds Wait before the next attempt after a "
            "failure.\n# TYPE attune_fleet_backoff_seconds gauge\n"
            "attune_fleet_backoff_seconds %lld\n"
            "# HELP attune_fleet_last_push_timestamp_seconds Last complete push, unix "
            "seconds.\n# TYPE attune_fleet_last_push_timestamp_seconds gauge\n"
            "attune_fleet_last_push_timestamp_seconds %lld\n"
            "# HELP attune_fleet_last_pull_timestamp_seconds Last pull, unix seconds.\n"
            "# TYPE attune_fleet_last_pull_timestamp_seconds gauge\n"
            "attune_fleet_last_pull_timestamp_seconds %lld\n"
            "# HELP attune_fleet_pushed_rows_total Rows sent to the fleet server.\n"
            "# TYPE attune_fleet_pushed_rows_total counter\n"
            "attune_fleet_pushed_rows_total %lld\n"
            "# HELP attune_fleet_push_batches_total Push transactions committed.\n"
            "# TYPE attune_fleet_push_batches_total counter\n"
            "attune_fleet_push_batches_total %lld\n"
            "# HELP attune_fleet_rejected_rows_total Malformed local rows refused.\n"
            "# TYPE attune_fleet_rejected_rows_total counter\n"
            "attune_fleet_rejected_rows_total %lld\n"
            "# HELP attune_fleet_pulled_rows_total Aggregate rows pulled.\n"
            "# TYPE attune_fleet_pulled_rows_total counter\n"
            "attune_fleet_pulled_rows_total %lld\n"
            "# HELP attune_fleet_errors_total Failed sync attempts.\n"
            "# TYPE attune_fleet_errors_total counter\nattune_fleet_errors_total %lld\n",
            atomic_load(&m_up), pending, pending > 0 ? now - (ok ? ok : atomic_load(&m_started)) : 0,
            (long long)atomic_load(&m_backoff), (long long)atomic_load(&m_last_push),
            (long long)atomic_load(&m_last_pull), (long long)atomic_load(&m_pushed),
            (long long)atomic_load(&m_batches), (long long)atomic_load(&m_rejected),
            (long long)atomic_load(&m_pulled), (long long)atomic_load(&m_errors));
}
