/* cli_fleet.c -- `attune fleet push|pull|status` (a host syncing with the
 * fleet server without attuned: a Jetson tuned offline pushes when it is
 * back on the network) and `attune drift` (what changed between stacks). */
#include "cli_fleet.h"

#include "cli_common.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_num.h"
#include "common/pin_rule.h"
#include "db/fleet_local.h"
#include "db/fleet_pg.h"
#include "db/store.h"
#include "kernels/attn.h"
#include "tuner/drift.h"

static const char fleet_usage[] =
    "usage: attune fleet push   [--db FILE] --fleet URL [--batch N]\n"
    "       attune fleet pull   [--db FILE] --fleet URL [--device ID ...]\n"
    "       attune fleet status [--db FILE] [--fleet URL]\n"
    "\n"
    "Syncs the local database with the fleet server (PostgreSQL, docs/fleet.md):\n"
    "  push    sends every committed row the server has not seen (batches of N\n"
    "          rows, default 5000, each one server transaction; a push killed at\n"
    "          any moment resends at most one batch, which changes nothing)\n"
    "  pull    fetches the fleet's aggregates (median over devices, spread,\n"
    "          outliers) for the models of the given devices (default: the\n"
    "          devices of this host) into the database as fleet rows\n"
    "  status  the local watermark and pending rows; with --fleet, the server's\n"
    "\n"
    "URL is a libpq URI or conninfo, e.g. postgresql://attune@fleet-db/attune.\n"
    "It must not carry a password: libpq reads PGPASSFILE, ~/.pgpass or\n"
    "PGPASSWORD. --db defaults to $ATTUNE_DB, else the installed service's\n"
    "database (" ATTUNE_SYSTEM_DB ") when it exists. Exit status: 0 success,\n"
    "1 error (or rows refused as malformed: the others are pushed), 2 usage.\n";

static const char drift_usage[] =
    "usage: attune drift [--db FILE] --device ID [--model] [--from STACK --to STACK]\n"
    "                    [--json] [--fleet URL]\n"
    "\n"
    "Compares two software stacks of a device (or, with --model, of every device of\n"
    "its model in the database, pulled fleet rows included): accuracy changes first\n"
    "(a tactic whose status changed, whose rel_err crossed the dtype's bound or grew\n"
    "beyond 2x; regressions before improvements), then each shape whose winner\n"
    "changed, then every shape's winner time ratio (newer / older), slowest first.\n"
    "The two stacks default to the two most recent (by their first measurement).\n"
    "A summary line ends the text. With --fleet URL the model's aggregates are\n"
    "pulled from the fleet server first and the report is the model's (--model):\n"
    "the whole fleet's drift. --db defaults as for attune results.\n"
    "Exit status: 0 no accuracy regression, 1 error, 2 usage, 4 at least one\n"
    "accuracy regression.\n";

typedef struct args {
    const char *db, *url, *from, *to;
    cli_multi devices;
    int json, model, batch;
} args;

/* Parse argv (argv[0]: the command's name for messages) into a; 0, or the
 * exit status to return. The caller frees a->devices. */
static int parse(int argc, char **argv, args *a, const char *usage)
{
    const char *batch = NULL;
    memset(a, 0, sizeof *a);
    /* fleet takes --batch, drift --from, --to, --model and --json */
    const cli_opt fleet_opts[] = {{"db", 0, CLI_VALUE, &a->db},
                                  {"fleet", 0, CLI_VALUE, &a->url},
                                  {"device", 0, CLI_MULTI, &a->devices},
                                  {"batch", 0, CLI_VALUE, &batch},
                                  {NULL, 0, 0, NULL}};
    const cli_opt drift_opts[] = {{"db", 0, CLI_VALUE, &a->db},
                                  {"fleet", 0, CLI_VALUE, &a->url},
                                  {"device", 0, CLI_MULTI, &a->devices},
                                  {"from", 0, CLI_VALUE, &a->from},
                                  {"to", 0, CLI_VALUE, &a->to},
                                  {"json", 0, CLI_FLAG, &a->json},
                                  {"model", 0, CLI_FLAG, &a->model},
                                  {NULL, 0, 0, NULL}};
    int rc;
    if (cli_parse(argc, argv, usage == drift_usage ? drift_opts : fleet_opts, usage, NULL, &rc))
        return rc == 0 ? -1 : rc;
    long long n;
    if (batch != NULL) {
        if (cli_llong(batch, &n) != 0 || n < 1 || n > 1000000)
            return cli_usage_error(argv[0], "--batch takes 1..1000000");
        a->batch = (int)n;
    }
    if (a->devices.n > 16)
        return cli_usage_error(argv[0], "at most 16 --device");
    if ((rc = cli_db_default(argv[0], &a->db)) != 0)
        return rc;
    if (a->url != NULL) {
        char err[ATTUNE_ERRLEN];
        if (fleet_pg_url_check(a->url, err, sizeof err) != 0)
            return cli_usage_error(argv[0], "%s", err);
    }
    return 0;
}

static int connect_fleet(const char *url, fleet_pg **c)
{
    char err[ATTUNE_ERRLEN];
    if (fleet_pg_connect(url, c, err, sizeof err) != 0) {
        fprintf(stderr, "attune: fleet server: %s\n", err);
        return 1;
    }
    return 0;
}

static int fleet_push(const args *a)
{
    store *st = NULL;
    fleet_pg *c = NULL;
    char err[512] = "", src[40];
    fleet_local_push ps;
    memset(&ps, 0, sizeof ps);
    int rc = 1;
    if (cli_store_open(a->db, 0, &st) || connect_fleet(a->url, &c))
        goto out;
    if (fleet_local_setup(st, src, sizeof src, err, sizeof err) != 0 ||
        fleet_local_push_pending(st, c, a->batch, NULL, NULL, &ps, err, sizeof err) != 0) {
        fprintf(stderr, "attune: fleet push failed after %" PRId64 " batches: %s\n",
                ps.batches, err);
        goto out;
    }
    printf("pushed %" PRId64 " rows in %" PRId64 " batches (%" PRId64
           " already on the server); watermark %" PRId64 "\n",
           ps.rows.sent, ps.batches, ps.rows.skipped, ps.acked);
    rc = 0;
    if (ps.rows.rejected > 0) {
        fprintf(stderr, "attune: %" PRId64 " malformed rows refused (not pushed), first: %s\n",
                ps.rows.rejected, ps.first_rejected);
        rc = 1;
    }
    if (ps.pins_skipped > 0)
        fprintf(stderr, "attune: %d fleet pins left out: this store holds %d at most "
                        "(its own devices' first)\n", ps.pins_skipped, PIN_MAX);
    if (ps.pins_rc != 0) { /* the rows are on the server; the pins are not exchanged */
        fprintf(stderr, "attune: fleet pins not exchanged: %s\n", ps.pins_err);
        rc = 1;
    }
out:
    fleet_pg_close(c);
    store_close(st);
    return rc;
}

static int fleet_pull(const args *a)
{
    store *st = NULL;
    fleet_pg *c = NULL;
    char err[ATTUNE_ERRLEN] = "";
    attn_device_info devs[16];
    int n = 0, rc = 1;
    if (cli_store_open(a->db, 0, &st) || connect_fleet(a->url, &c))
        goto out;
    if (a->devices.n > 0) {
        for (int i = 0; i < a->devices.n; i++) { /* cpu, an ordinal, an id or name */
            attn_stack stack;
            if (cli_device_resolve(st, a->devices.v[i], NULL, NULL, &devs[n], &stack) != 0)
                goto out;
            n++;
        }
    } else {
        attn_device local[16];
        int k = attn_devices(local, 16);
        for (int i = 0; i < k && i < 16; i++)
            devs[n++] = local[i].info;
    }
    int64_t rows = 0;
    int skipped = 0;
    if (fleet_local_pull(st, c, devs, n, 0, &rows, &skipped, err, sizeof err) != 0) {
        fprintf(stderr, "attune: fleet pull failed: %s\n", err);
        if (rows > 0) /* whole shapes, committed chunk by chunk (fleet_local.h) */
            fprintf(stderr, "attune: %" PRId64 " aggregate row%s stored before it; the next "
                            "pull brings the rest\n", rows, rows == 1 ? "" : "s");
        goto out;
    }
    printf("pulled %" PRId64 " aggregate row%s for %d device%s\n", rows, rows == 1 ? "" : "s",
           n, n == 1 ? "" : "s");
    if (skipped > 0)
        fprintf(stderr, "attune: %d fleet pins left out: this store holds %d at most "
                        "(its own devices' first)\n", skipped, PIN_MAX);
    rc = 0;
out:
    fleet_pg_close(c);
    store_close(st);
    return rc;
}

static int fleet_status(const args *a)
{
    store *st = NULL;
    fleet_pg *c = NULL;
    char err[ATTUNE_ERRLEN] = "", src[40];
    int rc = 1;
    fleet_local_state ls;
    if (cli_store_open(a->db, 0, &st))
        goto out;
    if (fleet_local_setup(st, src, sizeof src, err, sizeof err) != 0 ||
        fleet_local_state_get(st, &ls) != 0) {
        fprintf(stderr, "attune: %s\n", err[0] ? err : "cannot read the fleet sync state");
        goto out;
    }
    printf("source %s\nlocal watermark %" PRId64 "\nlast log entry %" PRId64
           "\npending rows %" PRId64 "\n",
           ls.source, ls.acked, ls.last_seq, ls.pending);
    if (a->url == NULL) {
        rc = 0;
        goto out;
    }
    if (connect_fleet(a->url, &c))
        goto out;
    fleet_pg_info info;
    if (fleet_pg_info_get(c, ls.source, &info, err, sizeof err) != 0) {
        fprintf(stderr, "attune: fleet server: %s\n", err);
        goto out;
    }
    char where[256];
    fleet_pg_describe(c, where, sizeof where);
    printf("server %s\nserver schema %d\nserver watermark %" PRId64 "\nmodels %" PRId64
           "\ndevices %" PRId64 "\nstacks %" PRId64 "\nshapes %" PRId64
           "\nmeasurements %" PRId64 "\naggregates %" PRId64 "\ngroups to aggregate %" PRId64
           "\noutliers %" PRId64 "\n",
           where, info.schema_version, info.source_seq, info.models, info.devices, info.stacks,
           info.shapes, info.measurements, info.aggregates, info.dirty, info.outliers);
    rc = 0;
out:
    fleet_pg_close(c);
    store_close(st);
    return rc;
}

int cli_fleet_main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fputs(fleet_usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    static const char *const subs[] = {"push", "pull", "status"};
    int (*const run[])(const args *) = {fleet_push, fleet_pull, fleet_status};
    int k = 0;
    while (k < 3 && strcmp(argv[1], subs[k]) != 0)
        k++;
    if (k == 3)
        return cli_usage_error("fleet", "unknown fleet command '%s' (see attune fleet --help)",
                               argv[1]);
    /* argv[1] names the command in messages: "attune fleet push: ..." */
    char name[32];
    snprintf(name, sizeof name, "fleet %s", subs[k]);
    argv[1] = name;
    args a;
    int rc = parse(argc - 1, argv + 1, &a, fleet_usage);
    if (rc == 0 && k != 2 && a.url == NULL)
        rc = cli_usage_error(name, "needs --fleet URL");
    /* one option table for the three: refuse what this one does not use */
    if (rc == 0 && k != 0 && a.batch > 0)
        rc = cli_usage_error(name, "--batch is an option of fleet push only");
    if (rc == 0 && k != 1 && a.devices.n > 0)
        rc = cli_usage_error(name, "--device is an option of fleet pull only");
    if (rc == 0)
        rc = run[k](&a);
    cli_multi_free(&a.devices);
    return rc < 0 ? 0 : rc;
}

/* The fleet's view of the device's model: its aggregates pulled from the
 * server into the database as the model's fleet device. 0 or 1 (printed). */
static int drift_pull(store *st, const args *a, const attn_device_info *info)
{
    fleet_pg *c = NULL;
    char err[ATTUNE_ERRLEN] = "";
    int64_t rows = 0;
    int rc = connect_fleet(a->url, &c) != 0 ||
             fleet_local_pull(st, c, info, 1, 0, &rows, NULL, err, sizeof err) != 0;
    if (rc != 0 && err[0])
        fprintf(stderr, "attune: fleet pull failed: %s\n", err);
    fleet_pg_close(c);
    return rc;
}

/* Print the report as text or JSON; 0 or 1. */
static int drift_print(const drift_report *r, int json)
{
    char *text = NULL;
    if (json) {
        json_t *j = drift_report_json(r);
        text = j ? json_num_dumps(j, JSON_INDENT(1)) : NULL;
        json_decref(j);
        if (text == NULL)
            return 1;
        puts(text);
    } else {
        if (drift_report_text(r, &text) != 0)
            return 1;
        fputs(text, stdout);
    }
    free(text);
    return 0;
}

/* The drift report of a. Returns the exit status: 4 at least one accuracy
 * regression. */
static int drift_main(args *a)
{
    if (a->devices.n != 1)
        return cli_usage_error("drift", "needs one --device ID");
    if ((a->from == NULL) != (a->to == NULL))
        return cli_usage_error("drift", "give --from STACK and --to STACK together");
    store *st = NULL;
    if (cli_store_open(a->db, 0, &st))
        return 1;
    /* the spec as every command reads it (cpu, an ordinal, an id or name),
     * then the device by its id */
    attn_device_info info;
    attn_stack stack;
    if (cli_device_resolve(st, a->devices.v[0], NULL, NULL, &info, &stack) != 0 ||
        (a->url != NULL && drift_pull(st, a, &info) != 0)) {
        store_close(st);
        return 1;
    }
    if (a->url != NULL)
        a->model = 1;
    select_policy p;
    select_policy_default(&p);
    drift_report r;
    char err[ATTUNE_ERRLEN] = "";
    int rc = drift_compare(st, info.id, a->model, a->from, a->to, &p, &r, err, sizeof err);
    store_close(st);
    if (rc != 0) {
        fprintf(stderr, "attune: drift: %s\n", err[0] ? err : attune_strerror(rc));
        return 1;
    }
    int regress = 0;
    for (int i = 0; i < r.nacc; i++)
        regress |= r.acc[i].regression;
    rc = drift_print(&r, a->json);
    drift_report_free(&r);
    return rc != 0 ? rc : regress ? 4 : 0;
}

int cli_drift_main(int argc, char **argv)
{
    args a;
    int rc = parse(argc, argv, &a, drift_usage);
    if (rc == 0)
        rc = drift_main(&a);
    cli_multi_free(&a.devices);
    return rc < 0 ? 0 : rc;
}
