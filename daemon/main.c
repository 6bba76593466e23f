/* main.c -- attuned: arguments, start-up, signals, orderly shutdown.
 *
 * Threads: main (waits for signals), the HTTP pool (libmicrohttpd), the DB
 * worker (store work of requests), one tuning thread per local device.
 * Signals are blocked everywhere and taken synchronously by main with
 * sigwait(), so no handler runs in an arbitrary thread. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../db/fleet_pg.h"
#include "../db/store_readonly.h"
#include "../tuner/grid.h"
#include "attuned.h"
#include "export.h"
#include "fleet_sync.h"
#include "log.h"
#include "metrics.h"
#include "sdnotify.h"

static const char usage_text[] =
    "usage: attuned [options]\n"
    "\n"
    "attune's daemon: serves tuned attention tactics over HTTP (API v1, see\n"
    "docs/api.md) and runs tuning jobs on this host's devices.\n"
    "\n"
    "  --port N             TCP port (default 7373; 0 picks a free one, logged)\n"
    "  --bind ADDR          IPv4/IPv6 address to listen on (default 127.0.0.1)\n"
    "  --db PATH            SQLite database (default ./var/attune.db; its\n"
    "                       directory is created)\n"
    "  --token-file PATH    bearer token of POST/DELETE routes (default:\n"
    "                       $CREDENTIALS_DIRECTORY/token when that exists, else\n"
    "                       'token' beside the database); created 0600 with 32\n"
    "                       random bytes as hex when missing\n"
    "  --no-default-grid    do not tune anything at first start\n"
    "  --no-tune-on-miss    do not queue shapes that lookups miss for tuning\n"
    "                       (default: a lookup that is not `measured` queues its\n"
    "                       shape on that local device, behind explicit jobs)\n"
    "  --default-grid FILE  grid tuned on the CPU at first start, i.e. when the\n"
    "                       database has no measurement and no job for it\n"
    "                       (default grids/cpu-small.json, relative to the\n"
    "                       working directory; skipped with a warning if absent)\n"
    "  --default-grid-gpu FILE  the same for each CUDA device\n"
    "                       (default grids/default.json)\n"
    "  --allow-host NAME    accept this Host header besides localhost, 127.0.0.1\n"
    "                       and [::1] (repeatable, up to 16). The --bind address\n"
    "                       is accepted too, but not a wildcard (0.0.0.0, [::]):\n"
    "                       give the host's own names and addresses then\n"
    "  --threads N          HTTP thread pool size (default 4)\n"
    "  --max-connections N  simultaneous connections (default 2048)\n"
    "  --per-ip N           simultaneous connections per client address (default 64)\n"
    "  --timeout S          idle connection timeout in seconds (default 30)\n"
    "  --request-timeout S  a new connection's request headers must arrive within\n"
    "                       S seconds (default 10); a kept-alive one has --timeout\n"
    "  --tune-budget-ms MS  tuner time budget per tactic (default: the tuner's)\n"
    "  --miss-budget-s S    tune on miss only shapes whose whole tune is predicted\n"
    "                       within S seconds, and stop one at S (default 60)\n"
    "  --miss-quota N       shapes tuned on miss per device and UTC day (default 200)\n"
    "  --miss-retain-s S    forget a shape tuned on miss that no lookup asked for\n"
    "                       within S seconds (default 2592000: 30 days)\n"
    "  --job-budget-s S     POST /v1/tune refuses a shape predicted over S seconds\n"
    "                       unless the job says \"force\": true (default 3600)\n"
    "  --export-timeout S   a GET /v1/export is cut S seconds after it began\n"
    "                       (default 600)\n"
    "  --export-min-rate K  ... or once it has averaged under K KiB/s since its\n"
    "                       start, after 5 s (default 256; 0: no minimum)\n"
    "  --fleet URL          sync with a fleet server (PostgreSQL URI or conninfo,\n"
    "                       no password in it: libpq reads PGPASSFILE, ~/.pgpass,\n"
    "                       PGPASSWORD): push every committed row, pull this\n"
    "                       host's models' aggregates (docs/fleet.md)\n"
    "  --fleet-period S     seconds between fleet pushes (default 10); pulls\n"
    "                       every 6 periods\n"
    "  --fleet-batch N      rows per fleet push transaction (default 5000)\n"
    "  --fleet-pause-ms MS  pause between push transactions, spreading a large\n"
    "                       backlog's load on the server (default 0)\n"
    "  --log FILE           log to FILE instead of stderr (reopened on SIGHUP)\n"
    "  --verbose            log every request (default: errors and events)\n"
    "  --version            print the version\n"
    "  --help               this text\n"
    "\n"
    "SIGTERM/SIGINT stop cleanly: running tuning stops after the tactic in\n"
    "flight and resumes at the next start. SIGHUP reopens the log file and\n"
    "reloads the lookup index from the database. Measurements written to the\n"
    "database by another process (attune tune --db, attune import) are picked\n"
    "up within about 2 s without a signal. Under systemd (Type=notify) READY=1\n"
    "is sent once the port is open. A tune whose kernel faults (the GPU's\n"
    "context lost: nothing more can run on it in this process) stores that\n"
    "tactic failed, leaves its job queued and stops the daemon with exit\n"
    "status 1, so that systemd's restart resumes the job.\n";

enum {
    OPT_PORT = 256, OPT_BIND, OPT_DB, OPT_TOKEN, OPT_NOGRID, OPT_GRID, OPT_GRID_GPU,
    OPT_ALLOW, OPT_THREADS, OPT_MAXCONN, OPT_TIMEOUT, OPT_PERIP, OPT_REQTIMEOUT, OPT_BUDGET,
    OPT_LOG, OPT_VERBOSE, OPT_VERSION, OPT_HELP, OPT_FLEET, OPT_FLEET_PERIOD, OPT_FLEET_BATCH,
    OPT_FLEET_PAUSE, OPT_NOMISS, OPT_MISS_BUDGET, OPT_MISS_QUOTA, OPT_JOB_BUDGET, OPT_MISS_RETAIN,
    OPT_EXPORT_TIMEOUT, OPT_EXPORT_RATE
};

/* Parse a decimal int in [min, max] that fills the whole string. */
static int parse_int(const char *s, long min, long max, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max)
        return -1;
    *out = (int)v;
    return 0;
}

/* The admission and export limits (issue 29 items 1, 4): NULL, or the
 * option that was bad. */
static const char *limit_opt(int ch, const char *arg, attuned_config *c)
{
    switch (ch) {
    case OPT_EXPORT_TIMEOUT:
        return parse_int(arg, 1, 86400, &c->export_timeout_s) ? "--export-timeout" : NULL;
    case OPT_EXPORT_RATE:
        return parse_int(arg, 0, 1 << 20, &c->export_min_rate_kb) ? "--export-min-rate" : NULL;
    case OPT_MISS_BUDGET: return parse_int(arg, 1, 86400, &c->miss_budget_s) ? "--miss-budget-s" : NULL;
    case OPT_MISS_QUOTA: return parse_int(arg, 1, 1000000, &c->miss_quota) ? "--miss-quota" : NULL;
    case OPT_MISS_RETAIN:
        return parse_int(arg, 1, 86400 * 3650, &c->miss_retain_s) ? "--miss-retain-s" : NULL;
    default: return parse_int(arg, 1, 86400 * 30, &c->job_budget_s) ? "--job-budget-s" : NULL;
    }
}

/* The defaults of every option (usage_text names them). */
static void config_defaults(attuned_config *c)
{
    c->port = 7373;
    c->bind = "127.0.0.1";
    c->db_path = "./var/attune.db";
    c->default_grid = "grids/cpu-small.json";
    c->default_grid_gpu = "grids/default.json";
    c->threads = 4;
    c->max_connections = 2048;
    c->timeout_s = 30;
    c->fleet_period_s = 10;
    c->per_ip = 64;
    c->request_timeout_s = 10;
    c->job_budget_s = 3600;
    c->export_timeout_s = 600;
    c->export_min_rate_kb = 256;
}

static int parse_args(int argc, char **argv, attuned_config *c)
{
    static const struct option opts[] = {
        {"port", required_argument, NULL, OPT_PORT},
        {"bind", required_argument, NULL, OPT_BIND},
        {"db", required_argument, NULL, OPT_DB},
        {"token-file", required_argument, NULL, OPT_TOKEN},
        {"no-default-grid", no_argument, NULL, OPT_NOGRID},
        {"no-tune-on-miss", no_argument, NULL, OPT_NOMISS},
        {"miss-budget-s", required_argument, NULL, OPT_MISS_BUDGET},
        {"miss-quota", required_argument, NULL, OPT_MISS_QUOTA},
        {"job-budget-s", required_argument, NULL, OPT_JOB_BUDGET},
        {"miss-retain-s", required_argument, NULL, OPT_MISS_RETAIN},
        {"export-timeout", required_argument, NULL, OPT_EXPORT_TIMEOUT},
        {"export-min-rate", required_argument, NULL, OPT_EXPORT_RATE},
        {"default-grid", required_argument, NULL, OPT_GRID},
        {"default-grid-gpu", required_argument, NULL, OPT_GRID_GPU},
        {"allow-host", required_argument, NULL, OPT_ALLOW},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"max-connections", required_argument, NULL, OPT_MAXCONN},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"per-ip", required_argument, NULL, OPT_PERIP},
        {"request-timeout", required_argument, NULL, OPT_REQTIMEOUT},
        {"tune-budget-ms", required_argument, NULL, OPT_BUDGET},
        {"log", required_argument, NULL, OPT_LOG},
        {"verbose", no_argument, NULL, OPT_VERBOSE},
        {"version", no_argument, NULL, OPT_VERSION},
        {"help", no_argument, NULL, OPT_HELP},
        {"fleet", required_argument, NULL, OPT_FLEET},
        {"fleet-period", required_argument, NULL, OPT_FLEET_PERIOD},
        {"fleet-batch", required_argument, NULL, OPT_FLEET_BATCH},
        {"fleet-pause-ms", required_argument, NULL, OPT_FLEET_PAUSE},
        {NULL, 0, NULL, 0}};
    config_defaults(c);
    int ch, budget;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        const char *bad = NULL;
        switch (ch) {
        case OPT_PORT: if (parse_int(optarg, 0, 65535, &c->port)) bad = "--port (0-65535)"; break;
        case OPT_BIND: c->bind = optarg; break;
        case OPT_DB: c->db_path = optarg; break;
        case OPT_TOKEN: c->token_file = optarg; break;
        case OPT_NOGRID: c->no_default_grid = 1; break;
        case OPT_NOMISS: c->no_tune_on_miss = 1; break;
        case OPT_MISS_BUDGET: case OPT_MISS_QUOTA: case OPT_JOB_BUDGET: case OPT_MISS_RETAIN:
        case OPT_EXPORT_TIMEOUT: case OPT_EXPORT_RATE: bad = limit_opt(ch, optarg, c); break;
        case OPT_GRID: c->default_grid = optarg; break;
        case OPT_GRID_GPU: c->default_grid_gpu = optarg; break;
        case OPT_ALLOW:
            if (c->nallow_hosts == ATTUNED_MAX_ALLOW_HOSTS)
                bad = "--allow-host (too many)";
            else
                c->allow_hosts[c->nallow_hosts++] = optarg;
            break;
        case OPT_THREADS: if (parse_int(optarg, 1, 256, &c->threads)) bad = "--threads"; break;
        case OPT_MAXCONN:
            if (parse_int(optarg, 1, 65536, &c->max_connections))
                bad = "--max-connections";
            break;
        case OPT_TIMEOUT: if (parse_int(optarg, 1, 3600, &c->timeout_s)) bad = "--timeout"; break;
        case OPT_PERIP: if (parse_int(optarg, 1, 65536, &c->per_ip)) bad = "--per-ip"; break;
        case OPT_REQTIMEOUT:
            if (parse_int(optarg, 1, 3600, &c->request_timeout_s))
                bad = "--request-timeout";
            break;
        case OPT_BUDGET:
            if (parse_int(optarg, 1, 600000, &budget))
                bad = "--tune-budget-ms";
            else
                c->tune_budget_ms = budget;
            break;
        case OPT_FLEET: c->fleet_url = optarg; break;
        case OPT_FLEET_PERIOD:
            if (parse_int(optarg, 1, 86400, &c->fleet_period_s))
                bad = "--fleet-period";
            break;
        case OPT_FLEET_BATCH:
            if (parse_int(optarg, 1, 1000000, &c->fleet_batch))
                bad = "--fleet-batch";
            break;
        case OPT_FLEET_PAUSE:
            if (parse_int(optarg, 0, 60000, &c->fleet_pause_ms))
                bad = "--fleet-pause-ms";
            break;
        case OPT_LOG: c->log_path = optarg; break;
        case OPT_VERBOSE: c->verbose = 1; break;
        case OPT_VERSION: printf("attuned %s\n", ATTUNE_VERSION); exit(0);
        case OPT_HELP: fputs(usage_text, stdout); exit(0);
        default:
            fprintf(stderr, "attuned: unknown or incomplete option '%s'\n%s",
                    argv[optind - 1], usage_text);
            return -1;
        }
        if (bad != NULL) {
            fprintf(stderr, "attuned: bad value '%s' for %s\n", optarg, bad);
            return -1;
        }
    }
    if (c->fleet_url != NULL) {
        char err[ATTUNE_ERRLEN];
        /* refused before anything is logged: the URL never reaches a log */
        if (fleet_pg_url_check(c->fleet_url, err, sizeof err) != 0) {
            fprintf(stderr, "attuned: --fleet: %s\n", err);
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "attuned: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    if (c->threads > 1 && c->max_connections < c->threads)
        c->max_connections = c->threads; /* MHD splits the limit across the pool */
    /* the bound address is a fine Host too (bound to a LAN address, say) */
    if (strcmp(c->bind, "0.0.0.0") != 0 && strcmp(c->bind, "::") != 0)
        c->allow_hosts[c->nallow_hosts++] = c->bind;
    return 0;
}

/* mkdir -p of the directory holding path. */
static int make_parent_dirs(const char *path)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return ATTUNE_EINVAL;
    char *slash = strrchr(buf, '/');
    if (slash == NULL || slash == buf)
        return 0;
    *slash = 0;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(buf, 0750) != 0 && errno != EEXIST)
            return ATTUNE_EIO;
        *p = '/';
    }
    if (mkdir(buf, 0750) != 0 && errno != EEXIST)
        return ATTUNE_EIO;
    return 0;
}

/* First start: queue the default grid on each local device that has
 * neither measurements nor jobs. */
static void queue_default_grids(attuned *d, store *st)
{
    for (int i = 0; i < d->ndevices; i++) {
        const attn_device *dev = &d->devices[i];
        index_device_view v;
        if (index_device_find(d->ix, dev->info.id, &v) != 0 || v.nmeasurements > 0 ||
            jobs_any_for_device(d->jobs, dev->info.id))
            continue;
        const char *path = strcmp(dev->info.kind, "cpu") == 0 ? d->cfg.default_grid
                                                               : d->cfg.default_grid_gpu;
        attn_shape *shapes = NULL;
        int n = 0;
        char err[ATTUNE_ERRLEN];
        int rc = grid_load(path, &shapes, &n, err, sizeof err);
        if (rc != 0) {
            log_event(LOGL_WARN, "default_grid_skipped", "device=%s grid=%s error=%s",
                      dev->info.id, LOG_Q(path), LOG_Q(err));
            continue;
        }
        jobs_view jv;
        rc = jobs_submit(d->jobs, st, dev->info.id, shapes, n, &jv);
        free(shapes);
        if (rc != 0)
            log_event(LOGL_WARN, "default_grid_failed", "device=%s error=\"%s\"",
                      dev->info.id, attune_strerror(rc));
        else
            log_event(LOGL_INFO, "default_grid_queued", "device=%s grid=%s job=%lld "
                      "shapes=%d", dev->info.id, LOG_Q(path), (long long)jv.id, n);
    }
}

/* jobs_config.gpu_lost: a tune lost a device's context, so nothing more
 * runs on it in this process. The daemon stops as on SIGTERM (jobs left
 * queued, answers served until then) and exits 1: under systemd
 * (Restart=on-failure) a new process takes the jobs up again. */
static void on_gpu_lost(void *ctx, const char *device_id)
{
    attuned *d = ctx;
    atomic_store(&d->gpu_lost, 1);
    log_event(LOGL_ERROR, "stopping", "reason=gpu_context_lost device=%s exit=1", device_id);
    kill(getpid(), SIGTERM); /* serve()'s sigwait takes it */
}

/* DB worker tick, every ATTUNED_WATCH_PERIOD_S: the watcher (writes of
 * other processes), the WAL shrunk back once long readers are gone
 * (export_wal_tick), and about every 10 s the database size for /metrics.
 * Only the worker thread calls it. */
static void db_tick(void *arg, store *st)
{
    static int ticks;
    attuned *d = arg;
    sync_watch(&d->sync, st);
    export_wal_tick(d, st);
    if (ticks++ % (10 / ATTUNED_WATCH_PERIOD_S) == 0)
        metrics_set_db_size(store_size_bytes(st));
}

/* SIGHUP's reload, on the DB worker (serialized with imports). */
static void reload_work(void *arg, store *st)
{
    attuned *d = arg;
    sync_reload(&d->sync, st, "sighup");
}

/* Step 1: signals blocked in every thread (they inherit this mask) and
 * taken by sigwait in serve(); SIGPIPE ignored: a client hanging up is not
 * fatal. */
static void block_signals(sigset_t *sigs)
{
    sigemptyset(sigs);
    sigaddset(sigs, SIGTERM);
    sigaddset(sigs, SIGINT);
    sigaddset(sigs, SIGHUP);
    pthread_sigmask(SIG_BLOCK, sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* Step 2: the database (its directory created), the token, this host's
 * devices. *st open on success. 0 or an error (logged). */
static int open_store(attuned *d, store **st)
{
    char err[ATTUNE_ERRLEN], token_path[PATH_MAX];
    int rc, loose = 0;
    if (make_parent_dirs(d->cfg.db_path) != 0) {
        log_event(LOGL_ERROR, "db_dir_failed", "db=%s error=%s", LOG_Q(d->cfg.db_path),
                  LOG_Q(strerror(errno)));
        return ATTUNE_EIO;
    }
    if ((rc = store_open(d->cfg.db_path, 1, st, err, sizeof err)) != 0) {
        log_event(LOGL_ERROR, "db_open_failed", "db=%s error=%s", LOG_Q(d->cfg.db_path),
                  LOG_Q(err));
        return rc;
    }
    if ((rc = auth_token_load(d->cfg.token_file, d->cfg.db_path, d->token, token_path,
                              sizeof token_path, &loose, err, sizeof err)) != 0) {
        log_event(LOGL_ERROR, "token_failed", "error=%s", LOG_Q(err));
        return rc;
    }
    if (loose)
        log_event(LOGL_WARN, "token_file_readable", "path=%s hint=\"chmod 600\"",
                  LOG_Q(token_path));
    log_event(LOGL_INFO, "token", "path=%s", LOG_Q(token_path));
    int n = attn_devices(d->devices, ATTUNED_MAX_DEVICES);
    d->ndevices = n < ATTUNED_MAX_DEVICES ? n : ATTUNED_MAX_DEVICES;
    for (int i = 0; i < d->ndevices; i++)
        log_event(LOGL_INFO, "device", "id=%s kind=%s name=%s stack=%s",
                  d->devices[i].info.id, d->devices[i].info.kind, LOG_Q(d->devices[i].info.name),
                  d->devices[i].stack.id);
    return 0;
}

/* Step 3: the lookup index, loaded (sync_load), and the job threads with
 * the jobs of the last run resumed and, at first start, the default grids
 * queued. 0 or an error (logged). */
static int start_index_and_jobs(attuned *d, store *st)
{
    select_policy policy; /* copied by the index and the jobs */
    select_policy_default(&policy);
    if ((d->ix = index_new(&policy)) == NULL)
        return ATTUNE_ENOMEM;
    sync_init(&d->sync, d->ix, d->devices, d->ndevices);
    int rc = sync_load(&d->sync, st);
    if (rc != 0) {
        log_event(LOGL_ERROR, "index_load_failed", "error=\"%s\"", attune_strerror(rc));
        return rc;
    }
    int nlocal, nfleet;
    int64_t nmeas;
    index_stats(d->ix, &nlocal, &nfleet, &nmeas);
    log_event(LOGL_INFO, "index_loaded", "local=%d fleet=%d measurements=%lld", nlocal,
              nfleet, (long long)nmeas);
    /* the prediction models: built now, then rebuilt off the request path
     * when rows change (a lookup never builds one under the index's lock) */
    if ((rc = index_models_start(d->ix)) != 0)
        log_event(LOGL_WARN, "index_models_inline", "error=\"%s\"", attune_strerror(rc));
    jobs_config jc = {.db_path = d->cfg.db_path, .devices = d->devices,
                      .ndevices = d->ndevices, .ix = d->ix, .policy = &policy,
                      .committed = sync_row, .committed_ctx = d->ix,
                      .gpu_lost = on_gpu_lost, .gpu_lost_ctx = d,
                      .budget_ms = d->cfg.tune_budget_ms,
                      .no_tune_on_miss = d->cfg.no_tune_on_miss,
                      .miss_budget_s = d->cfg.miss_budget_s, .miss_quota = d->cfg.miss_quota,
                      .miss_retain_s = d->cfg.miss_retain_s};
    if ((rc = jobs_new(&jc, &d->jobs)) != 0)
        return rc;
    int requeued = 0;
    if ((rc = jobs_load(d->jobs, st, &requeued)) != 0) {
        log_event(LOGL_ERROR, "jobs_load_failed", "error=\"%s\"", attune_strerror(rc));
        return rc;
    }
    if (requeued > 0)
        log_event(LOGL_INFO, "jobs_resumed", "count=%d", requeued);
    if (!d->cfg.no_default_grid)
        queue_default_grids(d, st);
    return jobs_start(d->jobs);
}

/* Step 4 (--fleet): the fleet sync thread. 0 or an error (logged). */
static int start_fleet(attuned *d)
{
    char err[ATTUNE_ERRLEN];
    attn_device_info infos[ATTUNED_MAX_DEVICES];
    for (int i = 0; i < d->ndevices; i++)
        infos[i] = d->devices[i].info;
    fleet_sync_config fc = {.url = d->cfg.fleet_url, .db_path = d->cfg.db_path,
                            .devices = infos, .ndevices = d->ndevices,
                            .period_s = d->cfg.fleet_period_s,
                            .pull_period_s = 6 * d->cfg.fleet_period_s,
                            .batch_rows = d->cfg.fleet_batch,
                            .pause_ms = d->cfg.fleet_pause_ms};
    int rc = fleet_sync_start(&fc, &d->fleet, err, sizeof err);
    if (rc != 0) {
        log_event(LOGL_ERROR, "fleet_start_failed", "error=%s", LOG_Q(err));
        return rc;
    }
    log_event(LOGL_INFO, "fleet_sync", "period_s=%d", d->cfg.fleet_period_s);
    return 0;
}

/* Step 5: the HTTP server; then signals until SIGTERM or SIGINT (SIGHUP:
 * reopen the log, reload the index on the DB worker). 0 or an error. */
static int serve(attuned *d, const sigset_t *sigs)
{
    char err[ATTUNE_ERRLEN];
    int rc = server_start(d, err, sizeof err);
    if (rc != 0) {
        log_event(LOGL_ERROR, "listen_failed", "error=%s", LOG_Q(err));
        return rc;
    }
    sdnotify_send("READY=1");
    /* a URL that answers: bound to every address, this host's loopback
     * (the wildcard is no Host a client may send: 403) */
    const char *host = strcmp(d->cfg.bind, "0.0.0.0") == 0 ? "127.0.0.1"
                       : strcmp(d->cfg.bind, "::") == 0    ? "::1"
                                                           : d->cfg.bind;
    log_event(LOGL_INFO, "ready", "url=http://%s%s%s:%d/ bind=%s", strchr(host, ':') ? "[" : "", host,
              strchr(host, ':') ? "]" : "", d->bound_port, LOG_Q(d->cfg.bind));
    for (;;) {
        int sig = 0;
        if (sigwait(sigs, &sig) != 0)
            continue;
        if (sig != SIGHUP) {
            log_event(LOGL_INFO, "stopping", "signal=%s", sig == SIGTERM ? "TERM" : "INT");
            return 0;
        }
        log_event(LOGL_INFO, "reopen_log", NULL);
        if (log_reopen() != 0)
            log_event(LOGL_ERROR, "reopen_log_failed", "path=%s",
                      LOG_Q(d->cfg.log_path));
        if ((rc = worker_submit(d->worker, reload_work, d)) != 0) {
            metrics_reload_failed();
            log_event(LOGL_ERROR, "index_reload_failed", "error=\"%s\"", attune_strerror(rc));
        }
    }
}

/* The read pool: ATTUNED_READERS read-only connections to the database
 * the writer opened (and migrated), one per thread. 0 or an error. */
static int start_readers(attuned *d)
{
    store *sts[ATTUNED_READERS] = {NULL};
    char err[ATTUNE_ERRLEN];
    int rc = 0, n = 0;
    for (; n < ATTUNED_READERS; n++)
        if ((rc = store_open_readonly(d->cfg.db_path, &sts[n], err, sizeof err)) != 0) {
            log_event(LOGL_ERROR, "reader_open_failed", "error=\"%s\"",
                      attune_strerror(rc)); /* err names the path: outside text */
            break;
        }
    if (rc == 0 && (rc = worker_start_pool(sts, n, "attuned-read", NULL, NULL, 0,
                                           &d->reader)) != 0)
        log_event(LOGL_ERROR, "reader_start_failed", "error=\"%s\"", attune_strerror(rc));
    if (rc != 0)
        for (int i = 0; i < n; i++)
            store_close(sts[i]);
    return rc;
}

/* Step 6: no new connections; the DB worker and the read pool closed
 * (resuming every suspended connection, new deferrals answered 503);
 * HTTP threads joined, and only then the workers freed (an HTTP thread
 * may still submit to a closed one: refused, not a use after free);
 * tuning interrupted between tactics and joined; stores closed by their
 * threads. Safe after any step failed. */
static void shutdown_all(attuned *d, store *st)
{
    sdnotify_send("STOPPING=1");
    atomic_store(&d->stopping, 1);
    server_quiesce(d);
    worker_close(d->worker);
    worker_close(d->reader);
    server_stop(d);
    worker_free(d->worker);
    worker_free(d->reader);
    d->worker = d->reader = NULL;
    fleet_sync_stop(d->fleet);
    jobs_stop(d->jobs);
    jobs_free(d->jobs);
    index_free(d->ix);
    store_close(st);
}

int main(int argc, char **argv)
{
    static attuned d; /* large (device table): not on the stack */
    store *st = NULL;
    sigset_t sigs;
    int exit_code = 1, served = 0;

    if (parse_args(argc, argv, &d.cfg) != 0)
        return 2;
    if (d.cfg.log_path != NULL && log_open(d.cfg.log_path) != 0) {
        fprintf(stderr, "attuned: cannot open log file %s: %s\n", d.cfg.log_path,
                strerror(errno));
        return 1;
    }
    log_set_level(d.cfg.verbose ? LOGL_DEBUG : LOGL_INFO);
    block_signals(&sigs);
    log_event(LOGL_INFO, "start", "version=%s db=%s pid=%ld", ATTUNE_VERSION,
              LOG_Q(d.cfg.db_path), (long)getpid());
    char perr[ATTUNE_ERRLEN];
    if (server_probe(&d, perr, sizeof perr) != 0) { /* before any job starts */
        log_event(LOGL_ERROR, "listen_failed", "error=%s", LOG_Q(perr));
        goto out;
    }
    if (open_store(&d, &st) != 0 || start_index_and_jobs(&d, st) != 0)
        goto out;
    if (worker_start(st, db_tick, &d, ATTUNED_WATCH_PERIOD_S, &d.worker) != 0)
        goto out;
    st = NULL; /* the worker owns it now */
    if (start_readers(&d) != 0)
        goto out;
    if (d.cfg.fleet_url != NULL && start_fleet(&d) != 0)
        goto out;
    served = serve(&d, &sigs) == 0;
out:
    shutdown_all(&d, st); /* joins the job threads: a loss in their last tactic counts */
    if (served && !atomic_load(&d.gpu_lost))
        exit_code = 0;
    log_event(exit_code == 0 ? LOGL_INFO : LOGL_ERROR, "exit", "code=%d", exit_code);
    log_close();
    return exit_code;
}
