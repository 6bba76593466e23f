/* cli_tune.c -- `attune tune`: measure every applicable tactic of each shape
 * on a device of this host, straight into a database file (no daemon: the
 * Jetson use case), with progress, Ctrl-C and resume. */
#include "cli_tune.h"

#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli_common.h"
#include "common/dtype_device.h"
#include "db/store.h"
#include "kernels/attn.h"
#include "tuner/tuner.h"

const char cli_tune_help[] =
    "usage: attune tune [--db FILE] [--device ID] (--shape KEY ... | --grid FILE)\n"
    "                   [--force] [--budget-ms MS] [--screen F] [--only TEXT]\n"
    "                   [--quiet]\n"
    "       attune tune --url URL [--device ID] (--shape KEY ... | --grid FILE)\n"
    "                   [--token-file F] [--wait] [--force-long] [--quiet]\n"
    "\n"
    "With --db: measures every applicable tactic of each shape on device ID of\n"
    "this host and commits each measurement to FILE (created if missing; its\n"
    "directory must exist) as it is taken. Tactics already stored for this device\n"
    "and stack are skipped, so an interrupted tune (Ctrl-C, kill) resumes when\n"
    "re-run; --force re-measures. A running attuned sees tuning written to its\n"
    "database after a moment (or on SIGHUP).\n"
    "With --url: queues the same work as a job of a running attuned (POST\n"
    "/v1/tune) on a device of the daemon's host and prints the job's id.\n"
    "\n"
    "  --db FILE        default $ATTUNE_DB, else the installed service's database\n"
    "                   (" ATTUNE_SYSTEM_DB ") when it exists\n"
    "  --device ID      cpu, a CUDA ordinal (0 is the first GPU), a device id or\n"
    "                   name; default the first GPU of this host, else cpu (--url:\n"
    "                   the first local GPU the daemon reports, else its CPU)\n"
    "  --shape KEY      canonical key, e.g. b1.hq8.hkv1.sq50.skv1018.d256.f16.nc\n"
    "                   (.c: causal; repeatable); --grid FILE: a grids/*.json file\n"
    "  --budget-ms MS   timing budget per tactic (default 200); a tactic whose\n"
    "                   single call takes longer still gets one timed sample\n"
    "  --screen F       time fully only the tactics whose short screening timing\n"
    "                   is within F x the best (default 1.25); the others keep\n"
    "                   their screening time, noted 'screened out'; 0: time\n"
    "                   every tactic fully\n"
    "  --force          measure again tactics already stored\n"
    "  --only TEXT      measure only the tactics whose name holds TEXT (a comma-\n"
    "                   separated list: any of them), e.g. --only tile=192x128;\n"
    "                   no winner is marked (the shape is not tuned by it)\n"
    "  --quiet          no per-shape lines; progress shows only on a terminal\n"
    "  --url URL        the daemon, e.g. http://127.0.0.1:7373\n"
    "  --token-file F   (--url) the bearer token; default $ATTUNE_TOKEN, else the\n"
    "                   file $ATTUNE_TOKEN_FILE, else ./var/token (the daemon's\n"
    "                   token file; /etc/attune/token under systemd)\n"
    "  --wait           (--url) follow the job to its end, a line at each change\n"
    "  --force-long     (--url) queue shapes whose whole tune the daemon predicts\n"
    "                   over its job budget (an hour by default); refused without it\n"
    "\n"
    "Exit status: 0 all shapes tuned (--url: queued; with --wait, the job ended\n"
    "done), 1 a shape or the database failed (--wait: the job ended failed or\n"
    "canceled), 2 usage, 130 interrupted (measurements taken so far are kept).\n";

static volatile sig_atomic_t interrupted;
static atomic_int cancel_flag; /* lock-free: safe in a signal handler (C11 7.14.1.1) */

static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
    cancel_flag = 1;
}

typedef struct tune_ctx {
    int tty;
    int quiet;
    double t0;
    int shapes_done;
    int failures;
} tune_ctx;

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void fmt_secs(double s, char *buf, size_t len)
{
    if (s < 0)
        snprintf(buf, len, "?");
    else if (s < 90)
        snprintf(buf, len, "%.0fs", s);
    else
        snprintf(buf, len, "%.0fm%02.0fs", floor(s / 60), fmod(s, 60));
}

/* Progress on a terminal: one rewritten line with shape i of n, tactic,
 * elapsed and an ETA from the mean time per shape so far (within the first
 * shape, from the tactics). */
static int on_progress(void *vctx, const tuner_progress *p)
{
    tune_ctx *c = vctx;
    if (!c->tty || c->quiet)
        return 0;
    double elapsed = mono_s() - c->t0;
    double frac = p->tactic_count > 0 ? (double)p->tactic_index / p->tactic_count : 1.0;
    double done = c->shapes_done + frac;
    double eta = done > 0.05 ? elapsed / done * (p->shape_count - done) : -1;
    char e1[32], e2[32];
    fmt_secs(elapsed, e1, sizeof e1);
    fmt_secs(eta, e2, sizeof e2);
    fprintf(stderr, "\r\033[K[shape %d/%d] %s  %s (%d/%d)  elapsed %s  ETA %s",
            p->shape_index + 1, p->shape_count, p->shape_key, p->tactic ? p->tactic : "done",
            p->tactic_index, p->tactic_count, e1, e2);
    fflush(stderr);
    return 0;
}

/* Parse and check the options; 0, or the exit status to return (> 0, or
 * -1 after --help). */
static int tune_args(int argc, char **argv, cli_tune_args *a)
{
    const cli_opt opts[] = {{"db", 0, CLI_VALUE, &a->db},
                            {"device", 0, CLI_VALUE, &a->device},
                            {"grid", 0, CLI_VALUE, &a->grid},
                            {"shape", 0, CLI_MULTI, &a->shapes},
                            {"budget-ms", 0, CLI_VALUE, &a->budget},
                            {"screen", 0, CLI_VALUE, &a->screen},
                            {"only", 0, CLI_VALUE, &a->only},
                            {"url", 0, CLI_VALUE, &a->url},
                            {"token-file", 0, CLI_VALUE, &a->token_file},
                            {"force", 0, CLI_FLAG, &a->force},
                            {"quiet", 0, CLI_FLAG, &a->quiet},
                            {"wait", 0, CLI_FLAG, &a->wait},
                            {"force-long", 0, CLI_FLAG, &a->force_long},
                            {NULL, 0, 0, NULL}};
    int status;
    if (cli_parse(argc, argv, opts, cli_tune_help, NULL, &status))
        return status == 0 ? -1 : status;
    if (a->url != NULL) {
        if (a->db != NULL || a->force || a->budget != NULL || a->screen != NULL || a->only != NULL)
            return cli_usage_error("tune", "--db, --force, --budget-ms, --screen and --only go without --url "
                                           "(the daemon tunes into its own database)");
    } else {
        if (a->wait || a->token_file != NULL || a->force_long)
            return cli_usage_error("tune", "%s goes with --url (a daemon job)",
                                   a->wait ? "--wait" : a->force_long ? "--force-long" : "--token-file");
        int rc = cli_db_default("tune", &a->db);
        if (rc != 0)
            return rc;
        a->device = cli_device_default(a->device); /* (--url: the daemon's, later) */
    }
    if ((a->grid == NULL) == (a->shapes.n == 0))
        return cli_usage_error("tune", "needs either --shape KEY (repeatable) or --grid FILE");
    return 0;
}

/* Tune shape i of n and print its line; 0, or ATTUNE_EDB when the store is
 * gone (nothing more can be kept), ATTUNE_EGPULOST when the GPU's context
 * is (nothing more can run). Counts failures in ctx. */
static int tune_one(store *st, const attn_device *dev, const attn_shape *s, int i, int n,
                    tuner_opts *o, tune_ctx *ctx)
{
    char key[ATTN_SHAPE_KEY_MAX];
    attn_shape_key(s, key, sizeof key);
    tuner_shape_result res;
    double ts = mono_s();
    int trc = tuner_run_shape(st, dev, s, o, i, n, &res);
    o->clock_ref_mhz = res.clock_ref_mhz; /* the run's start, for the throttling check */
    ctx->shapes_done++;
    if (ctx->tty && !ctx->quiet)
        fprintf(stderr, "\r\033[K");
    if (trc == ATTUNE_ECANCELED)
        return 0;
    if (trc != 0) {
        if (trc == ATTUNE_ENOMEM)
            fprintf(stderr, "attune: %s: its buffers do not fit in %s's memory\n", key,
                    dev->info.name);
        else if (trc == ATTUNE_EGPULOST)
            fprintf(stderr, "attune: %s: a tactic's kernel faulted and %s's context is lost; "
                            "stopping. Its row is stored failed (attune results shows which), "
                            "the rows before it are kept: run the command again%s to go on\n",
                    key, dev->info.name,
                    o->force ? " without --force (which would run that tactic again)" : "");
        else
            fprintf(stderr, "attune: %s: %s\n", key, attune_strerror(trc));
        ctx->failures++;
        return trc == ATTUNE_EDB || trc == ATTUNE_EGPULOST ? trc : 0;
    }
    if (!ctx->quiet)
        fprintf(stderr, "[%d/%d] %s: %d measured, %d already stored, %d failed; winner %s "
                        "(%.2f us) in %.1fs\n",
                i + 1, n, key, res.measured, res.skipped, res.failed,
                res.winner[0] ? res.winner : "(none)", res.winner_us, mono_s() - ts);
    if (!ctx->quiet && res.measured > 0)
        fprintf(stderr, "[%d/%d] %s: %d screened (%d screened out), %d fully timed; seconds in "
                        "prepare %.2f, plan %.2f, check %.2f, screen %.2f, time %.2f, store %.2f\n",
                i + 1, n, key, res.screened, res.screened_out, res.full, res.prepare_s,
                res.plan_s, res.check_s, res.screen_s, res.time_s, res.store_s);
    if (!ctx->quiet && res.twins > 0)
        fprintf(stderr, "[%d/%d] %s: %d tactic%s whose pad changes no length stored from the "
                        "row of the same tactic at a smaller pad (not timed)\n",
                i + 1, n, key, res.twins, res.twins == 1 ? "" : "s");
    if (res.throttled > 0 || (res.retimed > 0 && !ctx->quiet))
        fprintf(stderr, "attune: %s: GPU clock dropped during %d tactic%s (timed again); "
                        "%d still throttled, noted in their rows (attune results)\n",
                key, res.retimed, res.retimed == 1 ? "" : "s", res.throttled);
    if (res.noisy > 0 || (res.noise_retimed > 0 && !ctx->quiet))
        fprintf(stderr, "attune: %s: noisy timings of %d tactic%s (timed again); %d still "
                        "noisy, stored flagged and kept out of answers until measured again "
                        "(attune results)\n",
                key, res.noise_retimed, res.noise_retimed == 1 ? "" : "s", res.noisy);
    return 0;
}

/* The measuring loop over every shape, Ctrl-C and SIGTERM stopping it
 * after the tactic in flight. Returns the exit status. */
static int tune_shapes(store *st, const attn_device *dev, const attn_shape *shapes, int n,
                       tuner_opts *o, int quiet)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    tune_ctx ctx = {.tty = isatty(2), .quiet = quiet, .t0 = mono_s()};
    o->progress = on_progress;
    o->ctx = &ctx;
    o->cancel = &cancel_flag;
    int rc = 0;
    for (int i = 0; i < n && !interrupted && rc == 0; i++)
        rc = tune_one(st, dev, &shapes[i], i, n, o, &ctx);
    if (interrupted) {
        fprintf(stderr, "attune: interrupted; measurements taken so far are kept, re-run to resume\n");
        return 130;
    }
    if (rc != 0 || ctx.failures > 0)
        return 1;
    if (!quiet)
        fprintf(stderr, "tuned %d shape%s on %s in %.1fs\n", n, n == 1 ? "" : "s",
                dev->info.name, mono_s() - ctx.t0);
    return 0;
}

int cli_tune_main(int argc, char **argv)
{
    cli_tune_args a = {0};
    attn_shape *shapes = NULL;
    store *st = NULL;
    int n = 0, rc = tune_args(argc, argv, &a);
    if (rc != 0) {
        rc = rc < 0 ? 0 : rc;
        goto out;
    }
    if (a.url != NULL) {
        rc = cli_tune_remote(&a);
        goto out;
    }
    tuner_opts o;
    tuner_opts_default(&o);
    o.force = a.force;
    if (a.budget && (cli_double(a.budget, &o.budget_ms) || o.budget_ms <= 0 || o.budget_ms > 6e5)) {
        rc = cli_usage_error("tune", "--budget-ms must be a number of milliseconds in (0, 600000]");
        goto out;
    }
    if (a.screen && (cli_double(a.screen, &o.screen_factor) || o.screen_factor < 0 ||
                     (o.screen_factor > 0 && o.screen_factor < 1) || o.screen_factor > 1e6)) {
        rc = cli_usage_error("tune", "--screen must be 0 (off) or a factor >= 1");
        goto out;
    }
    if (a.only != NULL) {
        if (a.only[0] == '\0' || a.only[0] == ',' || a.only[strlen(a.only) - 1] == ',' ||
            strstr(a.only, ",,") != NULL) {
            rc = cli_usage_error("tune", "--only needs TEXT[,TEXT...] with no empty item");
            goto out;
        }
        o.only = a.only; /* the tuner then marks no winner */
    }
    /* ATTUNE_TUNER_TRACE=1: a line per tactic and pass on stderr */
    const char *trace = getenv("ATTUNE_TUNER_TRACE");
    if (trace != NULL && *trace && strcmp(trace, "0") != 0)
        o.trace = stderr;
    if ((rc = cli_shapes_load("tune", a.grid, &a.shapes, &shapes, &n)) != 0)
        goto out;
    rc = 1;
    attn_device dev;
    char err[ATTUNE_ERRLEN];
    if (attn_device_resolve(a.device, &dev, err, sizeof err) != 0) {
        fprintf(stderr, "attune: %s\n", err);
        goto out;
    }
    for (int i = 0; i < n; i++) /* e4m3 on a GPU without FP8 tensor cores: nothing to tune */
        if (!dtype_device_runs(&dev.info, shapes[i].dtype, err, sizeof err)) {
            fprintf(stderr, "attune: tune: shape %d: %s\n", i + 1, err);
            goto out;
        }
    if (cli_store_open(a.db, 1, &st) != 0)
        goto out;
    rc = tune_shapes(st, &dev, shapes, n, &o, a.quiet);
out:
    store_close(st);
    free(shapes);
    cli_multi_free(&a.shapes);
    return rc;
}

#ifndef ATTUNE_HAVE_CLIENT
int cli_tune_remote(const cli_tune_args *a)
{
    (void)a;
    return cli_usage_error("tune", "--url: this build has no client library (libcurl missing)");
}
#endif
