/* cli_predict.c -- `attune tactics` and `attune loo`. */
#include "cli_predict.h"

#include "cli_common.h"
#include "cli_out.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_num.h"
#include "db/store.h"
#include "kernels/attn.h"
#include "tuner/grid.h"
#include "tuner/loo.h"
#include "tuner/select.h"

static const char tactics_usage[] =
    "usage: attune tactics [--device ID] --shape KEY [--json | --csv]\n"
    "\n"
    "Lists, one per line, every tactic the backend of device ID (default: the\n"
    "first GPU of this host, else cpu) has for the shape (the candidates `attune\n"
    "tune` measures and attuned predicts from; stale and fleet answers are kept to\n"
    "them too), so any answer can be checked against it. An imported table's rows\n"
    "of this device's current stack answer as they are. --csv: a column \"tactic\"\n"
    "with a header; --json: {\"device\", \"shape\", \"tactics\": [...]}.\n";

static const char loo_usage[] =
    "usage: attune loo [--db FILE] [--device ID] [--grid FILE] [--holdout FILE]\n"
    "                  [--max-median R] [--max-worst R] [--json | --csv]\n"
    "\n"
    "Leave-one-out evaluation of the prediction model (docs/tuning.md): for each\n"
    "shape tuned on device ID in FILE (only the shapes of --grid when given), hide\n"
    "it, predict its answer from the other shapes, and print the regret: measured\n"
    "time of the answered tactic on that shape / time of its winner (inf: the\n"
    "answer is not eligible there). Then median, worst and geometric mean\n"
    "(--csv: the shapes' lines only; --json: both). --db and --device default as\n"
    "for attune results.\n"
    "The candidates are the device's tactic listing for each hidden shape when the\n"
    "device is on this host, else the tactics measured on that shape (what its\n"
    "backend listed when it was tuned), so an imported table evaluates anywhere.\n"
    "  --holdout FILE   a grid of shapes hidden together instead: the model is built\n"
    "                   from every other tuned shape (those of --grid when given)\n"
    "                   and only the held-out shapes are scored (bench/realmodels.sh)\n"
    "  --max-median R, --max-worst R   exit 1 when the median / worst exceeds R\n"
    "With ATTUNE_PREDICT_TRACE=1 in the environment, every candidate each answer\n"
    "ranked goes to stderr: predicted time, score (lowest wins), cost on the shape,\n"
    "eligible share and the neighbours that measured its family.\n";

int cli_tactics_main(int argc, char **argv)
{
    const char *device = NULL, *shape = NULL;
    int json = 0, csv = 0, rc;
    cli_format fmt;
    const cli_opt opts[] = {{"device", 0, CLI_VALUE, &device},
                            {"shape", 0, CLI_VALUE, &shape},
                            {"json", 0, CLI_FLAG, &json},
                            {"csv", 0, CLI_FLAG, &csv},
                            {NULL, 0, 0, NULL}};
    if (cli_parse(argc, argv, opts, tactics_usage, NULL, &rc))
        return rc;
    if ((rc = cli_format_pick("tactics", json, csv, &fmt)) != 0)
        return rc;
    if (shape == NULL)
        return cli_usage_error("tactics", "needs --shape KEY");
    device = cli_device_default(device);
    char err[ATTUNE_ERRLEN];
    attn_shape s;
    if (attn_shape_parse(shape, &s, err, sizeof err) != 0)
        return cli_usage_error("tactics", "bad shape '%s': %s", shape, err);
    attn_device dev;
    if (attn_device_resolve(device, &dev, err, sizeof err) != 0) {
        fprintf(stderr, "attune: %s (tactics are listed by a device of this host)\n", err);
        return 1;
    }
    int n = dev.ops->tactics(dev.index, &s, NULL, 0);
    attn_tactic *t = NULL;
    if (n >= 0) {
        /* CPU reports its total; CUDA writes at most max: ask generously */
        int cap = n > 4096 ? n : 4096;
        if ((t = malloc((size_t)cap * sizeof *t)) == NULL) {
            fprintf(stderr, "attune: out of memory\n");
            return 1;
        }
        n = dev.ops->tactics(dev.index, &s, t, cap);
        if (n > cap)
            n = cap;
    }
    if (n < 0) {
        fprintf(stderr, "attune: listing tactics failed: %s\n", attune_strerror(n));
        free(t);
        return 1;
    }
    json_t *arr = fmt == CLI_JSON ? json_array() : NULL;
    if (fmt == CLI_CSV)
        puts("tactic"); /* canonical tactics need no quoting: [a-z0-9_/=.x-] */
    for (int i = 0; i < n; i++) {
        char buf[ATTN_TACTIC_STR_MAX];
        attn_tactic_str(&t[i], buf, sizeof buf);
        if (arr != NULL)
            json_array_append_new(arr, json_string(buf));
        else
            puts(buf);
    }
    free(t);
    if (fmt == CLI_JSON) {
        char key[ATTN_SHAPE_KEY_MAX];
        json_t *o = json_pack("{s:s, s:s, s:o}", "device", dev.info.id, "shape",
                              attn_shape_key(&s, key, sizeof key), "tactics", arr);
        if (o == NULL || json_dumpf(o, stdout, JSON_INDENT(2)) != 0) {
            json_decref(o);
            fprintf(stderr, "attune: out of memory\n");
            return 1;
        }
        putchar('\n');
        json_decref(o);
    }
    return 0;
}

/* A ratio bound: a finite number >= 1; 0 or -1. */
static int parse_ratio(const char *s, double *out)
{
    double v;
    if (cli_double(s, &v) != 0 || !(v >= 1.0))
        return -1;
    *out = v;
    return 0;
}

/* Keep the rows of m whose shape is in grid or hold (n updated). */
static void keep_shapes(store_measurement *m, int *n, const attn_shape *grid, int ngrid,
                        const attn_shape *hold, int nhold)
{
    int k = 0;
    for (int i = 0; i < *n; i++) {
        int keep = 0;
        for (int g = 0; g < ngrid && !keep; g++)
            keep = memcmp(&m[i].shape, &grid[g], sizeof grid[g]) == 0;
        for (int g = 0; g < nhold && !keep; g++)
            keep = memcmp(&m[i].shape, &hold[g], sizeof hold[g]) == 0;
        if (keep)
            m[k++] = m[i];
    }
    *n = k;
}

/* The per-shape table's columns; at a narrow terminal the predicted time
 * goes first, then the two measured times and the winner. */
static const cli_col loo_cols[] = {
    {"shape", 0, 0, 0},   {"answered", 0, 0, 0}, {"winner", 0, 4, 0}, {"pred_us", 1, 1, 0},
    {"us", 1, 3, 0},      {"best_us", 1, 2, 0},  {"regret", 1, 0, 0}};

/* Every shape's line, then the summary (text), or the lines as CSV (no
 * summary: it is computed from them), or JSON. 0 or 1 (out of memory). */
static int print_loo(const loo_result *r, cli_format fmt)
{
    json_t *arr = fmt == CLI_JSON ? json_array() : NULL;
    cli_table *t = fmt != CLI_JSON ? cli_table_new(loo_cols, 7) : NULL;
    if (arr == NULL && t == NULL)
        return 1;
    for (int i = 0; i < r->n; i++) {
        const loo_shape *ls = &r->shapes[i];
        const char *ans = ls->answer[0] ? ls->answer : fmt == CLI_CSV ? "" : "(none)";
        if (arr != NULL) {
            json_t *o = json_pack("{s:s, s:s, s:s}", "shape", ls->key, "answered", ans,
                                  "winner", ls->winner);
            json_object_set_new(o, "predicted_us", json_num(ls->predicted_us));
            json_object_set_new(o, "answer_us", json_num(ls->answer_us));
            json_object_set_new(o, "winner_us", json_num(ls->winner_us));
            json_object_set_new(o, "regret", json_num(ls->regret));
            json_array_append_new(arr, o);
            continue;
        }
        char v[4][32];
        const double x[4] = {ls->predicted_us, ls->answer_us, ls->winner_us, ls->regret};
        for (int k = 0; k < 4; k++)
            snprintf(v[k], sizeof v[k], fmt == CLI_CSV ? "%.17g" : k < 3 ? "%.2f" : "%.3f",
                     x[k]);
        const char *cells[7] = {ls->key, ans, ls->winner, v[0], v[1], v[2], v[3]};
        if (cli_table_add(t, cells) != 0) {
            cli_table_free(t);
            return 1;
        }
    }
    if (arr != NULL) {
        json_t *o = json_pack("{s:i, s:o}", "shapes", r->n, "rows", arr);
        json_object_set_new(o, "median_regret", json_num(r->median));
        json_object_set_new(o, "worst_regret", json_num(r->worst));
        json_object_set_new(o, "geomean_regret", json_num(r->geomean));
        json_num_dumpf(o, stdout, JSON_INDENT(2));
        putchar('\n');
        json_decref(o);
        return 0;
    }
    cli_table_print(t, fmt, cli_term_width(), stdout);
    cli_table_free(t);
    if (fmt == CLI_TEXT)
        printf("shapes %d  median regret %.3f  worst %.3f  geomean %.3f\n", r->n, r->median,
               r->worst, r->geomean);
    return 0;
}

int cli_loo_main(int argc, char **argv)
{
    const char *db = NULL, *device = NULL, *grid_file = NULL, *hold_file = NULL, *med = NULL,
               *worst = NULL;
    int rc, json = 0, csv = 0;
    cli_format fmt;
    const cli_opt opts[] = {{"json", 0, CLI_FLAG, &json},
                            {"csv", 0, CLI_FLAG, &csv},
                            {"db", 0, CLI_VALUE, &db},
                            {"device", 0, CLI_VALUE, &device},
                            {"grid", 0, CLI_VALUE, &grid_file},
                            {"holdout", 0, CLI_VALUE, &hold_file},
                            {"max-median", 0, CLI_VALUE, &med},
                            {"max-worst", 0, CLI_VALUE, &worst},
                            {NULL, 0, 0, NULL}};
    if (cli_parse(argc, argv, opts, loo_usage, NULL, &rc))
        return rc;
    if ((rc = cli_format_pick("loo", json, csv, &fmt)) != 0 ||
        (rc = cli_db_default("loo", &db)) != 0)
        return rc;
    device = cli_device_default(device);
    double max_median = INFINITY, max_worst = INFINITY;
    if ((med && parse_ratio(med, &max_median)) || (worst && parse_ratio(worst, &max_worst)))
        return cli_usage_error("loo", "--max-median/--max-worst need a ratio >= 1");
    char err[ATTUNE_ERRLEN] = "";
    attn_shape *grid = NULL, *hold = NULL;
    store *st = NULL;
    store_measurement *m = NULL;
    loo_result r = {0};
    int ngrid = 0, nhold = 0, n = 0, is_local;
    rc = 1;
    if ((grid_file != NULL && grid_load(grid_file, &grid, &ngrid, err, sizeof err) != 0) ||
        (hold_file != NULL && grid_load(hold_file, &hold, &nhold, err, sizeof err) != 0)) {
        fprintf(stderr, "attune: %s\n", err);
        goto out;
    }
    if (cli_store_open(db, 0, &st) != 0)
        goto out;
    attn_device dev;
    attn_device_info info;
    attn_stack stack;
    if (cli_device_resolve(st, device, &dev, &is_local, &info, &stack) != 0)
        goto out;
    if (store_measurements_all(st, info.id, &m, &n) != 0) {
        fprintf(stderr, "attune: reading measurements failed\n");
        goto out;
    }
    if (grid != NULL)
        keep_shapes(m, &n, grid, ngrid, hold, nhold);
    /* ATTUNE_PREDICT_TRACE=1: every candidate each answer ranked, on stderr */
    const char *trace = getenv("ATTUNE_PREDICT_TRACE");
    loo_opts lo = {.hold = hold, .nhold = nhold, .info = &info,
                   .trace = trace != NULL && strcmp(trace, "1") == 0 ? stderr : NULL};
    int lrc = loo_run_opts(m, n, stack.id, NULL, is_local ? &dev : NULL, &lo, &r);
    if (lrc != 0) {
        fprintf(stderr, "attune: leave-one-out failed: %s\n", attune_strerror(lrc));
        goto out;
    }
    if (print_loo(&r, fmt) != 0) {
        fprintf(stderr, "attune: out of memory\n");
        goto out;
    }
    rc = r.n > 0 && r.median <= max_median && r.worst <= max_worst ? 0 : 1;
    if (r.n == 0)
        fprintf(stderr, "attune: no tuned shape with a winner on %s\n", info.id);
out:
    loo_result_free(&r);
    free(m);
    free(grid);
    free(hold);
    store_close(st);
    return rc;
}
