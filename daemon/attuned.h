/* attuned.h -- the daemon's shared state: configuration, devices, and the
 * modules every request and thread reaches (index, jobs, DB worker, HTTP). */
#ifndef ATTUNED_H
#define ATTUNED_H

#include <stdatomic.h>
#include <stddef.h>

#include "../kernels/attn.h"
#include "auth.h"
#include "../lookup/index.h"
#include "jobs.h"
#include "sync.h"
#include "worker.h"

#define ATTUNED_MAX_DEVICES 64
#define ATTUNED_MAX_ALLOW_HOSTS 16

/* Request body limits (413 beyond): a tune request is a grid at most; an
 * import is a fleet table. */
#define ATTUNED_TUNE_BODY_MAX   (1u << 20)
#define ATTUNED_IMPORT_BODY_MAX (64u << 20)
/* Body bytes buffered across all requests at once (503 beyond), so that
 * max-connections simultaneous imports cannot exhaust memory. */
#define ATTUNED_BODY_BUDGET     (160u << 20)
/* Request line plus headers accepted (431 beyond, as JSON); the URI
 * alone (414). libmicrohttpd's own per-connection memory is larger
 * (ATTUNED_CONN_MEMORY) so that these limits, not its HTML answers, are
 * what clients meet: it holds the request's bytes and 56 bytes per header
 * line, so 16 KiB of headers in up to ~500 lines are answered, and one
 * header up to ~48 KB gets our JSON 431 (tests/reliability/battery.py).
 * libmicrohttpd 0.9.75 zeroes 1.5 times this memory for every request of
 * a kept-alive connection (the pool, then the unused half of the read
 * buffer): 48 KiB rather than 64 is 25 KB less per lookup, 0.55 us of
 * CPU (docs/perf-http.md); at 32 KiB 300 short headers (15 KB) would get
 * its HTML 431. */
#define ATTUNED_HEADER_MAX      (16u << 10)
#define ATTUNED_URI_MAX         (8u << 10)
#define ATTUNED_CONN_MEMORY     (48u << 10)
/* Seconds from the headers to the end of a request's body. */
#define ATTUNED_BODY_TIMEOUT_S  120
/* GET /v1/export streams at once (503 beyond): each holds a read
 * transaction and a database connection until its reader is done. */
#define ATTUNED_EXPORTS_MAX     4
/* Threads (each with a read-only connection) of the read pool: the
 * reports of GET /v1/winners and /v1/drift read every row of a device,
 * seconds on a big store; two run at once, the rest queue, and none waits
 * behind or holds up the writer. */
#define ATTUNED_READERS         2
/* An export's first seconds, before --export-min-rate applies. */
#define ATTUNED_EXPORT_GRACE_S  5
/* A WAL over this, with no export running, is checkpointed and truncated
 * (export_wal_tick); SQLite's own checkpoints keep it near 4 MB. */
#define ATTUNED_WAL_SHRINK_BYTES (8 << 20)
/* How long that checkpoint waits for a reader on an older snapshot. */
#define ATTUNED_WAL_CHECKPOINT_WAIT_MS 20
/* Deepest JSON nesting accepted in a request body. */
#define ATTUNED_JSON_DEPTH_MAX  32
/* Seconds between two looks of the watcher at the database (sync.h). */
#define ATTUNED_WATCH_PERIOD_S  2

typedef struct attuned_config {
    int port;                   /* 0: any free port (logged) */
    const char *bind;           /* IPv4 or IPv6 literal */
    const char *db_path;
    const char *token_file;     /* NULL: credentials dir or beside the db */
    int no_default_grid;
    int no_tune_on_miss;        /* --no-tune-on-miss */
    const char *default_grid;   /* grid tuned on the CPU at first start */
    const char *default_grid_gpu; /* grid tuned on each GPU at first start */
    const char *allow_hosts[ATTUNED_MAX_ALLOW_HOSTS + 1]; /* + the bind address */
    int nallow_hosts;
    int threads;                /* HTTP thread pool */
    int max_connections;
    int timeout_s;              /* idle connection timeout */
    int per_ip;                 /* connections per client address */
    int request_timeout_s;      /* a new connection's request headers */
    const char *log_path;       /* NULL: stderr */
    int verbose;                /* log every request */
    double tune_budget_ms;      /* tuner budget per tactic; <= 0: default */
    int miss_budget_s;          /* --miss-budget-s: a miss tune's whole budget */
    int miss_quota;             /* --miss-quota: miss shapes per device and day */
    int job_budget_s;           /* --job-budget-s: an explicit job's shape without force */
    int miss_retain_s;          /* --miss-retain-s: retention of miss-tuned shapes */
    int export_timeout_s;       /* --export-timeout: an export's whole deadline */
    int export_min_rate_kb;     /* --export-min-rate: KiB/s after the grace; 0: none */
    const char *fleet_url;      /* --fleet: fleet server (NULL: no sync) */
    int fleet_period_s;         /* seconds between fleet syncs */
    int fleet_batch;            /* rows per fleet push transaction */
    int fleet_pause_ms;         /* pause between fleet push batches */
} attuned_config;

typedef struct attuned {
    attuned_config cfg;
    attn_device devices[ATTUNED_MAX_DEVICES]; /* local, registry order */
    int ndevices;
    char token[AUTH_TOKEN_MAX];
    index_state *ix;
    jobs *jobs;
    worker *worker;             /* the DB worker: the daemon's one writer */
    worker *reader;             /* the read pool (ATTUNED_READERS threads) */
    sync_state sync;            /* the index follows the database (sync.h) */
    struct fleet_sync *fleet;   /* NULL: no --fleet */
    struct MHD_Daemon *mhd;
    struct conn_guard *guard;   /* request deadlines (conn.h) */
    struct answer_cache *answers; /* kept /v1/tactic answers (tactic_cache.h) */
    int bound_port;
    atomic_int stopping;
    atomic_llong body_bytes;    /* request body bytes buffered now */
    atomic_int exports;         /* GET /v1/export streams running (export.c) */
    atomic_int gpu_lost;        /* a device's context was lost: stop, exit 1 (main.c) */
} attuned;

/* ---- server.c: the libmicrohttpd daemon */

/* Whether cfg.bind:cfg.port can be bound now (a socket bound and closed
 * again; port 0: not tried), checked before the store is opened and jobs
 * start, so a port in use fails at once with the system's reason. The
 * port can still be taken before server_start. 0 or ATTUNE_EINVAL /
 * ATTUNE_EIO with err. */
int server_probe(const attuned *d, char *err, size_t errlen);

/* Start listening on cfg.bind:cfg.port with the thread pool (epoll, poll
 * where epoll is unavailable). Sets d->mhd and d->bound_port. 0 or
 * ATTUNE_EIO with err. */
int server_start(attuned *d, char *err, size_t errlen);

/* Stop accepting new connections (existing ones finish). */
void server_quiesce(attuned *d);

/* Close every connection and join the HTTP threads. No connection may be
 * suspended (worker_close the DB worker and the read pool first: they
 * resume them all; a deferral after that is answered at once). */
void server_stop(attuned *d);

#endif
