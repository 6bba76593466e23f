/* attune_cli.c -- the `attune` command: the table of subcommands, the
 * top-level usage, and `attune devices`. Each subcommand lives in its own
 * cli_*.c file and parses its options with cli_parse (cli_opts.h). */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli_common.h"
#include "cli_fleet.h"
#include "cli_out.h"
#include "cli_pins.h"
#include "cli_predict.h"
#include "cli_results.h"
#include "cli_table.h"
#include "cli_tune.h"
#include "cli_variants.h"
#include "cli_winners.h"
#include "common/json_num.h"
#include "kernels/attn.h"
#include "common/power.h"
#ifdef ATTUNE_HAVE_CLIENT
#include "cli_remote.h"
#endif

static const char usage[] =
    "usage: attune <command> [options]\n"
    "       attune --version | --help\n"
    "\n"
    "commands:\n"
    "  devices                               list the devices attune can tune here\n"
    "  tune [--db FILE] [--device ID] (--shape KEY ... | --grid FILE) [--force]\n"
    "       [--budget-ms MS] [--screen F] [--only TEXT] [--quiet]\n"
    "                                        measure every applicable tactic of each\n"
    "                                        shape (--only: those named so), straight\n"
    "                                        into a database file\n"
    "  tune --url URL [--device ID] ...      the same, as a job of a running attuned\n"
    "  results [--db FILE] [--device ID] --shape KEY [--max-rel-err X]\n"
    "                                        every tactic with time, error, status;\n"
    "                                        the winner marked '*', noisy timings '~'\n"
    "  winners [--db FILE] [--device ID]     every tuned shape's winner, runner-up\n"
    "                                        and speedup over it (--variants LIST:\n"
    "                                        among those variants)\n"
    "  export [--db FILE] [--device ID] [-o FILE]  the device's table as fleet JSON\n"
    "  import [--db FILE] TABLE.json         validate a fleet table, then merge it\n"
    "  tactics [--device ID] --shape KEY     every tactic the backend lists for it\n"
    "  variants                              the kernel families this build knows\n"
    "  loo [--db FILE] [--device ID] [--grid FILE]\n"
    "                                        leave-one-out regret of predictions\n"
    "  query [--device ID] --shape KEY [--url URL] [--variants LIST]\n"
    "                                        the answer of a running attuned, or of\n"
    "                                        a table file (--url file:PATH)\n"
    "  jobs [--url URL] [ID]                 its tuning jobs (--wait, --cancel)\n"
    "  pin (--force T | --exclude T) --reason TEXT [--shape KEY|PATTERN]\n"
    "      [--device ID | --model NAME] [--url URL | --db FILE]\n"
    "                                        force or exclude tactics in the answers\n"
    "  unpin [--url URL | --db FILE] ID      remove a pin\n"
    "  pins [--url URL | --db FILE] [--device ID]  list the pins\n"
    "  fleet push|pull|status [--db FILE] --fleet URL\n"
    "                                        sync with the fleet server (PostgreSQL)\n"
    "  drift [--db FILE] --device ID [--model]  what changed between two stacks,\n"
    "                                        accuracy first\n"
    "\n"
    "KEY is a canonical shape key, e.g. b1.hq8.hkv1.sq50.skv1018.d256.f16.nc\n"
    "(.c for causal). ID is cpu, a CUDA ordinal, a device UUID or name; offline it\n"
    "defaults to this host's first GPU, else cpu (query, tune --url: the daemon's\n"
    "first local GPU, else its CPU). --db defaults to $ATTUNE_DB, else the\n"
    "installed service's " ATTUNE_SYSTEM_DB " when it exists. The listings\n"
    "(devices, tactics, results, winners, jobs, pins, loo, variants) fit the\n"
    "terminal and take --csv or --json for every column. `attune <command>\n"
    "--help` describes each command. Options take their value as --opt VALUE or\n"
    "--opt=VALUE, in any order.\n"
    "Exit status: 0 success, 1 error, 2 usage, 130 interrupted; `attune query`\n"
    "also 3 when attuned refused the question (see `attune query --help`).\n";

/* ---- devices */

static const char devices_help[] =
    "usage: attune devices [--json | --csv]\n"
    "\n"
    "Lists the devices this host can tune: the CPU (spec `cpu`) and each CUDA GPU\n"
    "(spec = its ordinal), with id, name, compute capability, SMs, memory, the\n"
    "id of the software stack their measurements belong to and the power mode.\n"
    "The table fits the terminal (the power mode and stack left out first);\n"
    "--csv and --json print every field.\n";

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

static const cli_col device_cols[] = {
    /* the name is cut to fit (a CPU's model name runs to 40 characters
     * and more: "Intel(R) Xeon(R) Processor" put the line at 86 at 80
     * columns); the power note is left out first */
    {"spec", 0, 0, 0}, {"kind", 0, 0, 0},     {"name", 0, 0, 1},  {"id", 0, 0, 0},
    {"cc", 1, 0, 0},   {"sm_count", 1, 0, 0}, {"memory_mb", 1, 0, 0},
    {"stack", 0, 1, 0}, {"power", 0, 2, 0}};

static int cmd_devices(int argc, char **argv)
{
    int json = 0, csv = 0, rc;
    cli_format fmt;
    const cli_opt opts[] = {{"json", 0, CLI_FLAG, &json}, {"csv", 0, CLI_FLAG, &csv},
                            {NULL, 0, 0, NULL}};
    if (cli_parse(argc, argv, opts, devices_help, NULL, &rc))
        return rc;
    if ((rc = cli_format_pick("devices", json, csv, &fmt)) != 0)
        return rc;
    attn_device devs[64];
    int n = attn_devices(devs, 64);
    if (n > 64)
        n = 64;
    if (fmt == CLI_JSON) {
        json_t *arr = json_array();
        for (int i = 0; i < n; i++)
            print_device_json(arr, &devs[i]);
        json_t *root = json_pack("{so}", "devices", arr);
        json_num_dumpf(root, stdout, JSON_INDENT(2));
        putchar('\n');
        json_decref(root);
        return 0;
    }
    cli_table *t = cli_table_new(device_cols, 9);
    for (int i = 0; t != NULL && i < n; i++) {
        const attn_device *d = &devs[i];
        char spec[16], cc[16], sms[16], mem[24], pw[256];
        if (strcmp(d->info.kind, "cpu") == 0)
            snprintf(spec, sizeof spec, "cpu");
        else
            snprintf(spec, sizeof spec, "%d", d->index);
        snprintf(cc, sizeof cc, "%d.%d", d->info.cc_major, d->info.cc_minor);
        snprintf(sms, sizeof sms, "%d", d->info.sm_count);
        snprintf(mem, sizeof mem, "%lld", (long long)d->info.memory_mb);
        attn_power_describe(&d->info, pw, sizeof pw);
        const char *cells[9] = {spec, d->info.kind, d->info.name, d->info.id, cc, sms, mem,
                                d->stack.id, pw};
        if (cli_table_add(t, cells) != 0) {
            cli_table_free(t);
            t = NULL;
        }
    }
    if (t == NULL) {
        fprintf(stderr, "attune: out of memory\n");
        return 1;
    }
    cli_table_print(t, fmt, cli_term_width(), stdout);
    cli_table_free(t);
    return 0;
}

/* ---- the subcommands */

#ifndef ATTUNE_HAVE_CLIENT
static int no_client(int argc, char **argv)
{
    (void)argc;
    fprintf(stderr, "attune: %s needs the client library (built when libcurl is found)\n",
            argv[0]);
    return 1;
}
#define cli_query_main no_client
#define cli_jobs_main no_client
#endif

static const struct command {
    const char *name;
    int (*main)(int argc, char **argv); /* argv[0] = name */
} commands[] = {
    {"devices", cmd_devices},         {"tune", cli_tune_main},
    {"results", cli_results_main},    {"winners", cli_winners_main},
    {"export", cli_export_main},      {"import", cli_import_main},
    {"tactics", cli_tactics_main},    {"loo", cli_loo_main},
    {"fleet", cli_fleet_main},        {"drift", cli_drift_main},
    {"query", cli_query_main},        {"jobs", cli_jobs_main},
    {"pin", cli_pin_main},            {"unpin", cli_unpin_main},
    {"pins", cli_pins_main},          {"variants", cli_variants_main},
};

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
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(cmd, commands[i].name) == 0)
            return commands[i].main(argc - 1, argv + 1);
    if (cmd[0] == '-')
        fprintf(stderr, "attune: unknown option %s (see attune --help)\n", cmd);
    else
        fprintf(stderr, "attune: unknown command '%s' (see attune --help)\n", cmd);
    return 2;
}
