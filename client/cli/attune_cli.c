/* attune_cli.c -- the `attune` command: devices, offline tuning, results,
 * fleet export/import, and (through the client library) daemon queries. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli_winners.h"
#include "common/json_num.h"
#include "common/shape_json.h"
#include "db/store.h"
#include "kernels/attn.h"
#include "kernels/power.h"
#include "tuner/grid.h"
#include "tuner/select.h"
#include "tuner/tuner.h"
#include "cli_predict.h"
#include "cli_fleet.h"
#ifdef ATTUNE_HAVE_CLIENT
#include "cli_remote.h"
#endif

static const char usage[] =
    "usage: attune <command> [options]\n"
    "\n"
    "commands:\n"
    "  devices [--json]                      list the devices attune can tune here\n"
    "  tune --db FILE --device ID (--shape KEY ... | --grid FILE) [--force]\n"
    "       [--budget-ms MS] [--quiet]       measure every applicable tactic of each\n"
    "                                        shape, straight into a database file\n"
    "  tune --url URL --device ID ...        the same, as a job of a running attuned\n"
    "  results --db FILE --device ID --shape KEY [--json] [--max-rel-err X]\n"
    "                                        every tactic with time, error, status;\n"
    "                                        the winner marked with '*'\n"
    "  winners --db FILE --device ID [--json] every tuned shape's winner, runner-up\n"
    "                                        and speedup over it\n"
    "  export --db FILE --device ID [-o FILE]  the device's table as fleet JSON\n"
    "  import --db FILE TABLE.json           validate a fleet table, then merge it\n"
    "  tactics --device ID --shape KEY       every tactic the backend lists for a shape\n"
    "  loo --db FILE --device ID [--grid FILE]  leave-one-out regret of predicted answers\n"
    "  query, jobs                           ask a running attuned\n"
    "  fleet push|pull|status --db FILE --fleet URL\n"
    "                                        sync with the fleet server (PostgreSQL)\n"
    "  drift --db FILE --device ID [--model]  what changed between two stacks,\n"
    "                                        accuracy first\n"
    "\n"
    "KEY is a canonical shape key, e.g. b1.hq8.hkv1.sq50.skv1018.d256.f16.nc\n"
    "(.c for causal). ID is cpu, a CUDA ordinal, a device UUID or name.\n"
    "`attune <command> --help` describes each command.\n"
    "Exit status: 0 success, 1 error, 2 usage, 130 interrupted; `attune query`\n"
    "also 3 when attuned refused the question (see `attune query --help`).\n";

/* Per-command help: `attune <command> --help`. */
static const struct {
    const char *cmd, *text;
} cmd_help[] = {
    {"devices",
     "usage: attune devices [--json]\n"
     "\n"
     "Lists the devices this host can tune: the CPU (spec `cpu`) and each CUDA GPU\n"
     "(spec = its ordinal), with id, name, compute capability, SMs, memory and the\n"
     "id of the software stack their measurements belong to.\n"},
    {"tune",
     "usage: attune tune --db FILE --device ID (--shape KEY ... | --grid FILE)\n"
     "                   [--force] [--budget-ms MS] [--quiet]\n"
     "       attune tune --url URL --device ID ...   (as a job of a running attuned;\n"
     "                   `attune tune --url URL --help` lists --wait, --token-file)\n"
     "\n"
     "Measures every applicable tactic of each shape on device ID and commits each\n"
     "measurement to FILE (created if missing; its directory must exist) as it is\n"
     "taken. Tactics already stored for this device and stack are skipped, so an\n"
     "interrupted tune (Ctrl-C, kill) resumes when re-run; --force re-measures.\n"
     "\n"
     "  --shape KEY     canonical key, e.g. b1.hq8.hkv1.sq50.skv1018.d256.f16.nc\n"
     "                  (repeatable); --grid FILE: a grids/*.json file\n"
     "  --budget-ms MS  timing budget per tactic (default 200); a tactic whose\n"
     "                  single call takes longer still gets one timed sample\n"
     "  --quiet         no per-shape lines; progress shows only on a terminal\n"
     "\n"
     "A running attuned sees tuning written to its database by this command after\n"
     "a moment (or on SIGHUP); `--url` hands the work to the daemon instead.\n"
     "Exit status: 0 all shapes tuned, 1 a shape or the database failed,\n"
     "2 usage, 130 interrupted (measurements taken so far are kept).\n"},
    {"results",
     "usage: attune results --db FILE --device ID --shape KEY [--json]\n"
     "                      [--max-rel-err X]\n"
     "\n"
     "Every measured tactic of the shape: median time, min, max, time with\n"
     "pad/unpad copies, samples, relative L2 and max abs error against float64,\n"
     "the error ratio to the most accurate tactic, status and note. The winner\n"
     "(docs/tuning.md) is marked '*'. ID may also be a device known only from an\n"
     "imported table. --max-rel-err X: the winner under the bound X instead of the\n"
     "defaults (loosens or tightens).\n"},
    {"export",
     "usage: attune export --db FILE --device ID [-o FILE]\n"
     "\n"
     "Writes the device's measurements, all stacks, with provenance as a fleet\n"
     "table (docs/fleet.md) to stdout or FILE (written beside, then renamed).\n"},
    {"import",
     "usage: attune import --db FILE TABLE.json\n"
     "\n"
     "Validates the fleet table completely (types, ranges, tactics, duplicates,\n"
     "sizes), then merges it in one transaction: a row replaces a stored one only\n"
     "when newer. Any problem rejects the whole table; the database is unchanged.\n"},
};

#define DIE_USAGE(...)                                                         \
    do {                                                                       \
        fprintf(stderr, "attune: " __VA_ARGS__);                               \
        fputc('\n', stderr);                                                   \
        return 2;                                                              \
    } while (0)

/* ---- small option parser: --name VALUE and --flag, shared by commands */

typedef struct opt {
    const char *name;  /* "--db" */
    int takes_value;
    const char **value; /* where a value goes (last wins unless multi) */
    int *flag;         /* set to 1 when present (flags) */
    const char ***multi; /* repeated values (--shape) */
    int *nmulti;
} opt;

/* Parse argv[1..] against opts; positional args go to pos (up to maxpos).
 * Returns 0 or 2 (usage error printed). */
static int parse_opts(int argc, char **argv, const opt *opts, const char **pos, int maxpos,
                      int *npos)
{
    *npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] == '-' && a[1] != 0) {
            const opt *o = NULL;
            for (const opt *p = opts; p->name; p++)
                if (strcmp(p->name, a) == 0)
                    o = p;
            if (o == NULL)
                DIE_USAGE("%s: unknown option %s (see attune --help)", argv[0], a);
            if (!o->takes_value) {
                *o->flag = 1;
                continue;
            }
            if (i + 1 >= argc)
                DIE_USAGE("%s: option %s needs a value", argv[0], a);
            const char *v = argv[++i];
            if (o->multi) {
                const char **grown = realloc(*o->multi, (size_t)(*o->nmulti + 1) * sizeof *grown);
                if (grown == NULL)
                    DIE_USAGE("out of memory");
                grown[(*o->nmulti)++] = v;
                *o->multi = grown;
            } else {
                *o->value = v;
            }
        } else {
            if (*npos >= maxpos)
                DIE_USAGE("%s: unexpected argument '%s'", argv[0], a);
            pos[(*npos)++] = a;
        }
    }
    return 0;
}

static int parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

static int open_store(const char *path, int create, store **st)
{
    char err[ATTUNE_ERRLEN] = "";
    int rc = store_open(path, create, st, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, "attune: database %s: %s\n", path, err[0] ? err : attune_strerror(rc));
    return rc;
}

/* ---- devices */

static void print_device_json(json_t *arr, const attn_device *d)
{
    char cc[16];
    snprintf(cc, sizeof cc, "%d.%d", d->info.cc_major, d->info.cc_minor);
    json_array_append_new(
        arr, json_pack("{ss ss ss si ss si sI s{ss ss ss ss ss ss ss}}", "id", d->info.id, "name",
                       d->info.name, "kind", d->info.kind, "index", d->info.index, "cc", cc,
                       "sm_count", d->info.sm_count, "memory_mb", (json_int_t)d->info.memory_mb,
                       "stack", "id", d->stack.id, "driver", d->stack.driver, "runtime",
                       d->stack.runtime, "blas", d->stack.blas, "attune", d->stack.attune,
                       "kernels", d->stack.kernels, "power", d->stack.power));
}

static int cmd_devices(int argc, char **argv)
{
    int json = 0, npos;
    const opt opts[] = {{"--json", 0, NULL, &json, NULL, NULL}, {0}};
    if (parse_opts(argc, argv, opts, NULL, 0, &npos))
        return 2;
    attn_device devs[64];
    int n = attn_devices(devs, 64);
    if (n > 64)
        n = 64;
    if (json) {
        json_t *arr = json_array();
        for (int i = 0; i < n; i++)
            print_device_json(arr, &devs[i]);
        json_t *root = json_pack("{so}", "devices", arr);
        json_num_dumpf(root, stdout, JSON_INDENT(2));
        putchar('\n');
        json_decref(root);
        return 0;
    }
    printf("%-6s %-5s %-40s %-24s %5s %5s %9s  %s\n", "spec", "kind", "name", "id", "cc", "SMs",
           "mem_MB", "stack");
    for (int i = 0; i < n; i++) {
        const attn_device *d = &devs[i];
        char spec[16], cc[16];
        if (strcmp(d->info.kind, "cpu") == 0)
            snprintf(spec, sizeof spec, "cpu");
        else
            snprintf(spec, sizeof spec, "%d", d->index);
        snprintf(cc, sizeof cc, "%d.%d", d->info.cc_major, d->info.cc_minor);
        printf("%-6s %-5s %-40.40s %-24.24s %5s %5d %9lld  %s\n", spec, d->info.kind,
               d->info.name, d->info.id, cc, d->info.sm_count, (long long)d->info.memory_mb,
               d->stack.id);
        char pw[256];
        if (attn_power_describe(&d->info, pw, sizeof pw)[0] != 0)
            printf("%-6s power: %s\n", "", pw);
    }
    return 0;
}

/* ---- tune */

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

static int cmd_tune(int argc, char **argv)
{
    const char *db = NULL, *device = NULL, *grid = NULL, *budget = NULL, *url = NULL;
    const char **shapes_txt = NULL;
    int nshapes_txt = 0, force = 0, quiet = 0, npos;
    const opt opts[] = {{"--db", 1, &db, NULL, NULL, NULL},
                        {"--device", 1, &device, NULL, NULL, NULL},
                        {"--grid", 1, &grid, NULL, NULL, NULL},
                        {"--shape", 1, NULL, NULL, &shapes_txt, &nshapes_txt},
                        {"--budget-ms", 1, &budget, NULL, NULL, NULL},
                        {"--url", 1, &url, NULL, NULL, NULL},
                        {"--force", 0, NULL, &force, NULL, NULL},
                        {"--quiet", 0, NULL, &quiet, NULL, NULL},
                        {0}};
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--url") == 0) {
#ifdef ATTUNE_HAVE_CLIENT
            return cli_tune_remote_main(argc, argv);
#else
            DIE_USAGE("tune --url: this build has no client library (libcurl missing)");
#endif
        }
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--wait") == 0 || strcmp(argv[i], "--token-file") == 0) {
            fprintf(stderr, "attune: tune: %s goes with --url (a daemon job)\n", argv[i]);
            return 2;
        }
    int rc = parse_opts(argc, argv, opts, NULL, 0, &npos);
    if (rc)
        goto out;
    rc = 2;
    if (db == NULL || device == NULL) {
        fprintf(stderr, "attune: tune needs --db FILE and --device ID\n");
        goto out;
    }
    if ((grid == NULL) == (nshapes_txt == 0)) {
        fprintf(stderr, "attune: tune needs either --shape KEY (repeatable) or --grid FILE\n");
        goto out;
    }
    tuner_opts o;
    tuner_opts_default(&o);
    if (budget && (parse_double(budget, &o.budget_ms) || o.budget_ms <= 0 || o.budget_ms > 6e5)) {
        fprintf(stderr, "attune: --budget-ms must be a number of milliseconds in (0, 600000]\n");
        goto out;
    }
    (void)url;

    char err[ATTUNE_ERRLEN];
    attn_shape *shapes = NULL;
    int n = 0;
    if (grid) {
        if ((rc = grid_load(grid, &shapes, &n, err, sizeof err)) != 0) {
            fprintf(stderr, "attune: %s\n", err);
            rc = 1;
            goto out;
        }
    } else {
        shapes = calloc((size_t)nshapes_txt, sizeof *shapes);
        if (shapes == NULL) {
            rc = 1;
            goto out;
        }
        for (int i = 0; i < nshapes_txt; i++)
            if (attn_shape_parse(shapes_txt[i], &shapes[n++], err, sizeof err) != 0) {
                fprintf(stderr, "attune: bad shape '%s': %s\n", shapes_txt[i], err);
                free(shapes);
                rc = 2;
                goto out;
            }
    }
    attn_device dev;
    if (attn_device_resolve(device, &dev, err, sizeof err) != 0) {
        fprintf(stderr, "attune: %s\n", err);
        free(shapes);
        rc = 1;
        goto out;
    }
    store *st;
    if (open_store(db, 1, &st) != 0) {
        free(shapes);
        rc = 1;
        goto out;
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    tune_ctx ctx = {.tty = isatty(2), .quiet = quiet, .t0 = mono_s()};
    o.force = force;
    o.progress = on_progress;
    o.ctx = &ctx;
    o.cancel = &cancel_flag;
    int failures = 0;
    rc = 0;
    for (int i = 0; i < n && !interrupted; i++) {
        char key[ATTN_SHAPE_KEY_MAX];
        attn_shape_key(&shapes[i], key, sizeof key);
        tuner_shape_result res;
        double ts = mono_s();
        int trc = tuner_run_shape(st, &dev, &shapes[i], &o, i, n, &res);
        o.clock_ref_mhz = res.clock_ref_mhz; /* the run's start, for the throttling check */
        ctx.shapes_done++;
        if (ctx.tty && !quiet)
            fprintf(stderr, "\r\033[K");
        if (trc == ATTUNE_ECANCELED)
            break;
        if (trc != 0) {
            if (trc == ATTUNE_ENOMEM)
                fprintf(stderr, "attune: %s: its buffers do not fit in %s's memory\n", key,
                        dev.info.name);
            else
                fprintf(stderr, "attune: %s: %s\n", key, attune_strerror(trc));
            failures++;
            if (trc == ATTUNE_EDB) { /* the store is gone: nothing more can be kept */
                rc = 1;
                break;
            }
            continue;
        }
        if (!quiet)
            fprintf(stderr, "[%d/%d] %s: %d measured, %d already stored, %d failed; winner %s%s "
                            "(%.2f us) in %.1fs\n",
                    i + 1, n, key, res.measured, res.skipped, res.failed,
                    res.winner[0] ? res.winner : "(none)", "", res.winner_us, mono_s() - ts);
        if (res.throttled > 0 || (res.retimed > 0 && !quiet))
            fprintf(stderr, "attune: %s: GPU clock dropped during %d tactic%s (timed again); "
                            "%d still throttled, noted in their rows (attune results)\n",
                    key, res.retimed, res.retimed == 1 ? "" : "s", res.throttled);
    }
    store_close(st);
    free(shapes);
    if (interrupted) {
        fprintf(stderr, "attune: interrupted; measurements taken so far are kept, re-run to resume\n");
        rc = 130;
    } else if (rc != 0 || failures > 0) {
        rc = 1;
    } else if (!quiet) {
        fprintf(stderr, "tuned %d shape%s on %s in %.1fs\n", n, n == 1 ? "" : "s", dev.info.name,
                mono_s() - ctx.t0);
    }
out:
    free(shapes_txt);
    return rc;
}

/* ---- results */

/* The device an offline command means: a local device (cpu, ordinal,
 * local UUID/name) or one known only to the database (imported). Fills id
 * and the stack to show. */
static int resolve_stored_device(store *st, const char *spec, char *id, size_t idlen,
                                 attn_stack *stack)
{
    attn_device dev;
    char err[ATTUNE_ERRLEN];
    if (attn_device_resolve(spec, &dev, err, sizeof err) == 0) {
        snprintf(id, idlen, "%s", dev.info.id);
        *stack = dev.stack;
        return 0;
    }
    attn_device_info info;
    if (store_device_get(st, spec, &info, stack) == 0) {
        snprintf(id, idlen, "%s", info.id);
        return 0;
    }
    fprintf(stderr, "attune: unknown device '%s': not on this host and not in the database\n",
            spec);
    return ATTUNE_ENODEV;
}

/* A number, or "-" when not measured (NaN). */
static void fmt_num(char *buf, size_t len, const char *fmt, double v)
{
    if (isfinite(v))
        snprintf(buf, len, fmt, v);
    else
        snprintf(buf, len, "-");
}

static int cmd_results(int argc, char **argv)
{
    const char *db = NULL, *device = NULL, *shape = NULL, *mre = NULL;
    int json = 0, npos;
    const opt opts[] = {{"--db", 1, &db, NULL, NULL, NULL},
                        {"--device", 1, &device, NULL, NULL, NULL},
                        {"--shape", 1, &shape, NULL, NULL, NULL},
                        {"--max-rel-err", 1, &mre, NULL, NULL, NULL},
                        {"--json", 0, NULL, &json, NULL, NULL},
                        {0}};
    if (parse_opts(argc, argv, opts, NULL, 0, &npos))
        return 2;
    if (!db || !device || !shape)
        DIE_USAGE("results needs --db FILE --device ID --shape KEY");
    double max_rel_err = 0;
    if (mre && (parse_double(mre, &max_rel_err) || max_rel_err <= 0))
        DIE_USAGE("--max-rel-err must be a positive number");
    attn_shape s;
    char err[ATTUNE_ERRLEN];
    if (attn_shape_parse(shape, &s, err, sizeof err) != 0)
        DIE_USAGE("bad shape '%s': %s", shape, err);
    store *st;
    if (open_store(db, 0, &st) != 0)
        return 1;
    char id[64];
    attn_stack stack;
    store_measurement *m = NULL;
    int n = 0, rc = 1;
    if (resolve_stored_device(st, device, id, sizeof id, &stack) != 0)
        goto out;
    if (store_measurements_get(st, id, stack.id, &s, &m, &n) != 0) {
        fprintf(stderr, "attune: reading measurements failed\n");
        goto out;
    }
    const char *stale_stack = NULL;
    if (n == 0) {
        /* Nothing for the current stack: show the most recent other stack's
         * rows (stale until re-measured here), one stack at a time. */
        free(m);
        m = NULL;
        if (store_measurements_get(st, id, NULL, &s, &m, &n) != 0)
            goto out;
        int newest = -1;
        for (int i = 0; i < n; i++)
            if (newest < 0 || m[i].taken_at > m[newest].taken_at)
                newest = i;
        if (newest >= 0) {
            char keep[sizeof m[0].stack_id];
            snprintf(keep, sizeof keep, "%s", m[newest].stack_id);
            int k = 0;
            for (int i = 0; i < n; i++)
                if (strcmp(m[i].stack_id, keep) == 0)
                    m[k++] = m[i];
            n = k;
            stale_stack = m[0].stack_id;
        }
    }
    select_policy pol;
    select_policy_default(&pol);
    int w = select_winner(m, n, &pol, max_rel_err);
    if (json) {
        json_t *arr = json_array();
        for (int i = 0; i < n; i++) {
            attn_tactic t = {0};
            if (attn_tactic_parse(m[i].tactic, &t, NULL, 0) != 0)
                t.pad = 0; /* not canonical: shown as stored, pad unknown */
            json_array_append_new(
                arr, json_pack("{ss ss si so so so so so si so so so ss ss sb ss}", "tactic",
                               m[i].tactic, "variant", attn_variant_name(t.variant), "pad", t.pad,
                               "time_us", json_num(m[i].time_us), "time_us_paid",
                               json_num(select_time(&m[i])), "time_us_min",
                               json_num(m[i].time_us_min), "time_us_max",
                               json_num(m[i].time_us_max), "time_us_copies",
                               json_num(m[i].time_us_copies), "n", m[i].n, "rel_err",
                               json_num(m[i].rel_err), "max_abs_err",
                               json_num(m[i].max_abs_err), "err_ratio",
                               json_num(m[i].err_ratio), "status",
                               store_status_name(m[i].status), "note", m[i].note, "winner",
                               i == w, "stack", m[i].stack_id));
        }
        json_t *root = json_pack("{ss ss ss sb so so}", "device", id, "shape", shape, "stack",
                                 n > 0 ? m[0].stack_id : stack.id, "stale", stale_stack != NULL,
                                 "winner", w >= 0 ? json_string(m[w].tactic) : json_null(),
                                 "measurements", arr);
        json_num_dumpf(root, stdout, JSON_INDENT(2));
        putchar('\n');
        json_decref(root);
    } else {
        printf("%s on %s\n", shape, id);
        if (stale_stack)
            printf("  stale: measured on stack %s; this device's current stack is %s\n",
                   stale_stack, stack.id);
        if (n == 0)
            printf("  no measurements (tune it with: attune tune --db %s --device %s --shape %s)\n",
                   db, device, shape);
        else
            printf("  %-34s %-10s %10s %10s %10s %10s %10s %4s %9s %9s %6s\n", "tactic",
                   "status", "paid_us", "time_us", "min", "max", "w/copies", "n", "rel_err",
                   "max_abs", "ratio");
        for (int i = 0; i < n; i++) {
            char t[5][16], e[3][16];
            /* paid_us: what a caller pays (with the copies of a padded
             * tactic), the figure the winner is chosen on */
            const double tv[5] = {select_time(&m[i]), m[i].time_us, m[i].time_us_min,
                                  m[i].time_us_max, m[i].time_us_copies};
            const double ev[3] = {m[i].rel_err, m[i].max_abs_err, m[i].err_ratio};
            for (int k = 0; k < 5; k++)
                fmt_num(t[k], sizeof t[k], "%.2f", tv[k]);
            for (int k = 0; k < 3; k++)
                fmt_num(e[k], sizeof e[k], k == 2 ? "%.2f" : "%.2e", ev[k]);
            printf("%c %-34s %-10s %10s %10s %10s %10s %10s %4d %9s %9s %6s%s%s\n",
                   i == w ? '*' : ' ', m[i].tactic, store_status_name(m[i].status), t[0], t[1],
                   t[2], t[3], t[4], m[i].n, e[0], e[1], e[2], m[i].note[0] ? "  " : "",
                   m[i].note);
        }
        if (n > 0)
            printf("winner: %s\n", w >= 0 ? m[w].tactic : "(none within tolerance)");
        /* Say why when the winner is not the fastest eligible row: the
         * hysteresis of docs/tuning.md kept the last tune's choice. */
        if (w >= 0 && m[w].incumbent) {
            store_measurement *mm = malloc((size_t)n * sizeof *mm);
            if (mm != NULL) {
                memcpy(mm, m, (size_t)n * sizeof *mm);
                for (int i = 0; i < n; i++)
                    mm[i].incumbent = 0;
                int f = select_winner(mm, n, &pol, max_rel_err);
                if (f >= 0 && f != w)
                    printf("  kept from the last tune: %s measured %.2f us against %.2f us, "
                           "within the measured noise\n",
                           m[f].tactic, select_time(&m[f]), select_time(&m[w]));
                free(mm);
            }
        }
    }
    rc = 0;
out:
    free(m);
    store_close(st);
    return rc;
}

/* ---- export / import */

static int cmd_export(int argc, char **argv)
{
    const char *db = NULL, *device = NULL, *outp = NULL;
    int npos;
    const opt opts[] = {{"--db", 1, &db, NULL, NULL, NULL},
                        {"--device", 1, &device, NULL, NULL, NULL},
                        {"-o", 1, &outp, NULL, NULL, NULL},
                        {"--output", 1, &outp, NULL, NULL, NULL},
                        {0}};
    if (parse_opts(argc, argv, opts, NULL, 0, &npos))
        return 2;
    if (!db || !device)
        DIE_USAGE("export needs --db FILE --device ID");
    store *st;
    if (open_store(db, 0, &st) != 0)
        return 1;
    char id[64], *json = NULL;
    attn_stack stack;
    int rc = 1;
    if (resolve_stored_device(st, device, id, sizeof id, &stack) != 0)
        goto out;
    int erc = store_export(st, id, &json);
    if (erc != 0) {
        fprintf(stderr, "attune: export of %s failed: %s\n", id, attune_strerror(erc));
        goto out;
    }
    if (outp && strcmp(outp, "-") != 0) {
        /* Write beside, then rename: a crash never leaves half a table. */
        char tmp[4096];
        snprintf(tmp, sizeof tmp, "%s.tmp.%ld", outp, (long)getpid());
        FILE *f = fopen(tmp, "w");
        if (f == NULL) {
            fprintf(stderr, "attune: cannot write %s: %s\n", outp, strerror(errno));
            goto out;
        }
        int ok = fputs(json, f) >= 0 && fputc('\n', f) != EOF;
        ok = (fclose(f) == 0) && ok;
        if (!ok || rename(tmp, outp) != 0) {
            fprintf(stderr, "attune: cannot write %s: %s\n", outp, strerror(errno));
            unlink(tmp);
            goto out;
        }
    } else {
        puts(json);
    }
    rc = 0;
out:
    free(json);
    store_close(st);
    return rc;
}

/* Read a whole file, refusing more than max bytes. */
static int read_file(const char *path, size_t max, char **buf, size_t *len)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "attune: cannot read %s: %s\n", path, strerror(errno));
        return ATTUNE_EIO;
    }
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap + 1);
    int rc = 0;
    while (b) {
        if (n == cap) {
            if (cap >= max) {
                fprintf(stderr, "attune: %s is larger than %zu bytes\n", path, max);
                rc = ATTUNE_ETOOBIG;
                break;
            }
            cap *= 2;
            char *g = realloc(b, cap + 1);
            if (g == NULL)
                break;
            b = g;
        }
        size_t got = fread(b + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    if (b != NULL && rc == 0 && ferror(f)) {
        fprintf(stderr, "attune: cannot read %s: %s\n", path, strerror(errno));
        rc = ATTUNE_EIO;
    }
    if (f != stdin)
        fclose(f);
    if (b == NULL)
        return ATTUNE_ENOMEM;
    if (rc) {
        free(b);
        return rc;
    }
    b[n] = 0;
    *buf = b;
    *len = n;
    return 0;
}

static int cmd_import(int argc, char **argv)
{
    const char *db = NULL, *pos[1];
    int npos;
    const opt opts[] = {{"--db", 1, &db, NULL, NULL, NULL}, {0}};
    if (parse_opts(argc, argv, opts, pos, 1, &npos))
        return 2;
    if (!db || npos != 1)
        DIE_USAGE("import needs --db FILE and one TABLE.json");
    char *json;
    size_t len;
    if (read_file(pos[0], (size_t)64 << 20, &json, &len) != 0)
        return 1;
    store *st;
    if (open_store(db, 1, &st) != 0) {
        free(json);
        return 1;
    }
    store_import_stats stats;
    char err[ATTUNE_ERRLEN] = "";
    int rc = store_import(st, json, len, &stats, err, sizeof err);
    store_close(st);
    free(json);
    if (rc != 0) {
        fprintf(stderr, "attune: import of %s rejected, database unchanged: %s\n", pos[0],
                err[0] ? err : attune_strerror(rc));
        return 1;
    }
    printf("imported %s: %d measurements written, %d skipped (not newer), %d devices, %d stacks\n",
           pos[0], stats.measurements, stats.skipped, stats.devices, stats.stacks);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage, stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        fputs(usage, stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0) {
        printf("attune %s\n", ATTUNE_VERSION);
        return 0;
    }
    int url = 0;
    for (int i = 2; i < argc; i++)
        url |= strcmp(argv[i], "--url") == 0;
    for (int i = 2; i < argc; i++)
        if ((strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) && !url) {
            for (size_t k = 0; k < sizeof cmd_help / sizeof cmd_help[0]; k++)
                if (strcmp(cmd, cmd_help[k].cmd) == 0) {
                    fputs(cmd_help[k].text, stdout);
                    return 0;
                }
            if (strcmp(cmd, "winners") == 0) {
                fputs(cli_winners_help, stdout);
                return 0;
            }
        }
    if (strcmp(cmd, "devices") == 0)
        return cmd_devices(argc - 1, argv + 1);
    if (strcmp(cmd, "tune") == 0)
        return cmd_tune(argc - 1, argv + 1);
    if (strcmp(cmd, "results") == 0)
        return cmd_results(argc - 1, argv + 1);
    if (strcmp(cmd, "winners") == 0)
        return cli_winners_main(argc - 1, argv + 1);
    if (strcmp(cmd, "export") == 0)
        return cmd_export(argc - 1, argv + 1);
    if (strcmp(cmd, "import") == 0)
        return cmd_import(argc - 1, argv + 1);
    if (strcmp(cmd, "tactics") == 0)
        return cli_tactics_main(argc - 1, argv + 1);
    if (strcmp(cmd, "loo") == 0)
        return cli_loo_main(argc - 1, argv + 1);
    if (strcmp(cmd, "fleet") == 0)
        return cli_fleet_main(argc - 1, argv + 1);
    if (strcmp(cmd, "drift") == 0)
        return cli_drift_main(argc - 1, argv + 1);
#ifdef ATTUNE_HAVE_CLIENT
    if (strcmp(cmd, "query") == 0)
        return cli_query_main(argc - 1, argv + 1);
    if (strcmp(cmd, "jobs") == 0)
        return cli_jobs_main(argc - 1, argv + 1);
#else
    if (strcmp(cmd, "query") == 0 || strcmp(cmd, "jobs") == 0) {
        fprintf(stderr, "attune: %s needs the client library (built when libcurl is found)\n", cmd);
        return 1;
    }
#endif
    fprintf(stderr, "attune: unknown command '%s' (see attune --help)\n", cmd);
    return 2;
}
