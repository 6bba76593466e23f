/* cli_predict.c -- `attune tactics` and `attune loo`. */
#include "cli_predict.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/store.h"
#include "kernels/attn.h"
#include "tuner/grid.h"
#include "tuner/loo.h"
#include "tuner/select.h"

static const char tactics_usage[] =
    "usage: attune tactics --device ID --shape KEY\n"
    "\n"
    "Lists, one per line, every tactic the backend of device ID has for the shape\n"
    "(the candidates `attune tune` measures, and the only tactics attuned answers\n"
    "with), so any answer can be checked against it.\n";

static const char loo_usage[] =
    "usage: attune loo --db FILE --device ID [--grid FILE] [--holdout FILE]\n"
    "                  [--max-median R] [--max-worst R]\n"
    "\n"
    "Leave-one-out evaluation of the prediction model (docs/tuning.md): for each\n"
    "shape tuned on device ID in FILE (only the shapes of --grid when given), hide\n"
    "it, predict its answer from the other shapes, and print the regret: measured\n"
    "time of the answered tactic on that shape / time of its winner (inf: the\n"
    "answer is not eligible there). Then median, worst and geometric mean.\n"
    "The candidates are the device's tactic listing for each hidden shape when the\n"
    "device is on this host, else the tactics measured on that shape (what its\n"
    "backend listed when it was tuned), so an imported table evaluates anywhere.\n"
    "  --holdout FILE   a grid of shapes hidden together instead: the model is built\n"
    "                   from every other tuned shape (those of --grid when given)\n"
    "                   and only the held-out shapes are scored (bench/realmodels.sh)\n"
    "  --max-median R, --max-worst R   exit 1 when the median / worst exceeds R\n";

static int want_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return 1;
    return 0;
}

/* --name VALUE pairs only; unknown options are usage errors. */
static int get_opts(int argc, char **argv, const char *const *names, const char **vals,
                    int nnames, const char *usage)
{
    for (int i = 1; i < argc; i++) {
        int k;
        for (k = 0; k < nnames; k++)
            if (strcmp(argv[i], names[k]) == 0)
                break;
        if (k == nnames || i + 1 >= argc) {
            fprintf(stderr, "attune: %s: %s %s\n%s", argv[0], argv[i],
                    k == nnames ? "is not an option here" : "needs a value", usage);
            return 2;
        }
        vals[k] = argv[++i];
    }
    return 0;
}

int cli_tactics_main(int argc, char **argv)
{
    if (want_help(argc, argv)) {
        fputs(tactics_usage, stdout);
        return 0;
    }
    static const char *const names[] = {"--device", "--shape"};
    const char *vals[2] = {NULL, NULL};
    if (get_opts(argc, argv, names, vals, 2, tactics_usage) != 0)
        return 2;
    if (vals[0] == NULL || vals[1] == NULL) {
        fprintf(stderr, "attune: tactics needs --device ID --shape KEY\n");
        return 2;
    }
    char err[ATTUNE_ERRLEN];
    attn_shape s;
    if (attn_shape_parse(vals[1], &s, err, sizeof err) != 0) {
        fprintf(stderr, "attune: bad shape '%s': %s\n", vals[1], err);
        return 2;
    }
    attn_device dev;
    if (attn_device_resolve(vals[0], &dev, err, sizeof err) != 0) {
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
    for (int i = 0; i < n; i++) {
        char buf[ATTN_TACTIC_STR_MAX];
        puts(attn_tactic_str(&t[i], buf, sizeof buf));
    }
    free(t);
    return 0;
}

static int parse_ratio(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= 1.0) || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

int cli_loo_main(int argc, char **argv)
{
    if (want_help(argc, argv)) {
        fputs(loo_usage, stdout);
        return 0;
    }
    static const char *const names[] = {"--db",         "--device",    "--grid",
                                        "--max-median", "--max-worst", "--holdout"};
    const char *vals[6] = {NULL, NULL, NULL, NULL, NULL, NULL};
    if (get_opts(argc, argv, names, vals, 6, loo_usage) != 0)
        return 2;
    if (vals[0] == NULL || vals[1] == NULL) {
        fprintf(stderr, "attune: loo needs --db FILE --device ID\n");
        return 2;
    }
    double max_median = INFINITY, max_worst = INFINITY;
    if ((vals[3] && parse_ratio(vals[3], &max_median)) || (vals[4] && parse_ratio(vals[4], &max_worst))) {
        fprintf(stderr, "attune: --max-median/--max-worst need a ratio >= 1\n");
        return 2;
    }
    char err[ATTUNE_ERRLEN] = "";
    attn_shape *grid = NULL, *hold = NULL;
    int ngrid = 0, nhold = 0;
    if ((vals[2] != NULL && grid_load(vals[2], &grid, &ngrid, err, sizeof err) != 0) ||
        (vals[5] != NULL && grid_load(vals[5], &hold, &nhold, err, sizeof err) != 0)) {
        fprintf(stderr, "attune: %s\n", err);
        free(grid);
        return 1;
    }
    store *st = NULL;
    store_measurement *m = NULL;
    loo_result r = {0};
    int n = 0, rc = 1;
    if (store_open(vals[0], 0, &st, err, sizeof err) != 0) {
        fprintf(stderr, "attune: database %s: %s\n", vals[0], err);
        goto out;
    }
    attn_device dev, *devp = NULL;
    attn_device_info info;
    attn_stack stack;
    char id[64];
    if (attn_device_resolve(vals[1], &dev, err, sizeof err) == 0) {
        devp = &dev;
        info = dev.info;
        stack = dev.stack;
        snprintf(id, sizeof id, "%s", dev.info.id);
    } else {
        if (store_device_get(st, vals[1], &info, &stack) != 0) {
            fprintf(stderr, "attune: unknown device '%s'\n", vals[1]);
            goto out;
        }
        snprintf(id, sizeof id, "%s", info.id);
    }
    if (store_measurements_all(st, id, &m, &n) != 0) {
        fprintf(stderr, "attune: reading measurements failed\n");
        goto out;
    }
    if (grid != NULL) {
        int k = 0;
        for (int i = 0; i < n; i++) {
            int keep = 0;
            for (int g = 0; g < ngrid && !keep; g++)
                keep = memcmp(&m[i].shape, &grid[g], sizeof grid[g]) == 0;
            for (int g = 0; g < nhold && !keep; g++)
                keep = memcmp(&m[i].shape, &hold[g], sizeof hold[g]) == 0;
            if (keep)
                m[k++] = m[i];
        }
        n = k;
    }
    loo_opts lo = {.hold = hold, .nhold = nhold, .info = &info};
    int lrc = loo_run_opts(m, n, stack.id, NULL, devp, &lo, &r);
    if (lrc != 0) {
        fprintf(stderr, "attune: leave-one-out failed: %s\n", attune_strerror(lrc));
        goto out;
    }
    printf("%-40s %-46s %-46s %9s %9s %9s %7s\n", "shape", "answered", "winner", "pred_us",
           "us", "best_us", "regret");
    for (int i = 0; i < r.n; i++) {
        const loo_shape *ls = &r.shapes[i];
        printf("%-40s %-46s %-46s %9.2f %9.2f %9.2f %7.3f\n", ls->key,
               ls->answer[0] ? ls->answer : "(none)", ls->winner, ls->predicted_us,
               ls->answer_us, ls->winner_us, ls->regret);
    }
    printf("shapes %d  median regret %.3f  worst %.3f  geomean %.3f\n", r.n, r.median, r.worst,
           r.geomean);
    rc = r.n > 0 && r.median <= max_median && r.worst <= max_worst ? 0 : 1;
    if (r.n == 0)
        fprintf(stderr, "attune: no tuned shape with a winner on %s\n", id);
out:
    loo_result_free(&r);
    free(m);
    free(grid);
    free(hold);
    store_close(st);
    return rc;
}
