/* fleet_sync.h -- attuned's fleet sync thread (--fleet URL): pushes every
 * committed local row to the fleet server and pulls the aggregates of this
 * host's models back as fleet rows (db/fleet_local.h, docs/fleet.md).
 *
 * The thread has its own SQLite handle and server connection; nothing else
 * in the daemon waits on it, so a server that is down or slow never stops
 * lookups or tuning. Failures are logged (the URL never is: it may not
 * carry a password anyway) and retried with exponential backoff; /metrics
 * shows how far behind the server is. */
#ifndef ATTUNED_FLEET_SYNC_H
#define ATTUNED_FLEET_SYNC_H

#include <stdio.h>

#include "../common/device_id.h"

typedef struct fleet_sync fleet_sync;

typedef struct fleet_sync_config {
    const char *url;                 /* libpq URI/conninfo without password */
    const char *db_path;
    const attn_device_info *devices; /* local devices: their models are pulled */
    int ndevices;
    int period_s;                    /* seconds between syncs (>= 1) */
    int pull_period_s;               /* seconds between pulls (>= 1) */
    int batch_rows;                  /* rows per push transaction (<= 0: default) */
    int pause_ms;                    /* pause between push batches (0: none) */
} fleet_sync_config;

/* attuned's pulls recompute its model's aggregates at most this often
 * (seconds), and never while another host is at it (fleet_pg_pull_open). */
#define FLEET_SYNC_REFRESH_S 300

/* Longest wait between two attempts while the server is unreachable. */
#define FLEET_SYNC_BACKOFF_MAX_S 60

/* Open the thread's store, set up the push log, start the thread (it
 * connects by itself, so an unreachable server is not an error here).
 * 0, or an error with err; *out NULL on error. */
int fleet_sync_start(const fleet_sync_config *cfg, fleet_sync **out, char *err,
                     size_t errlen);

/* Stop after the batch in flight (a blocking connect may take up to its
 * timeout), join, free. NULL is a no-op. */
void fleet_sync_stop(fleet_sync *s);

/* Append the fleet metrics (Prometheus text) to f; attune_fleet_enabled 0
 * only when no sync runs. Safe from any thread. */
void fleet_sync_metrics(FILE *f);

#endif
