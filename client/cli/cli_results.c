/* cli_results.c -- `attune results`: every measured tactic of one shape on
 * one device, from a database file, with the winner marked. */
#include "cli_results.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"
#include "common/json_num.h"
#include "tuner/select.h"

const char cli_results_help[] =
    "usage: attune results --db FILE --device ID --shape KEY [--json]\n"
    "                      [--max-rel-err X]\n"
    "\n"
    "Every measured tactic of the shape: median time, min, max, time with\n"
    "pad/unpad copies, samples, relative L2 and max abs error against float64,\n"
    "the error ratio to the most accurate tactic, status and note. The winner\n"
    "(docs/tuning.md) is marked '*'; a timing that stayed noisy '~' (never a\n"
    "winner; the next tune measures it again). ID may also be a device known\n"
    "only from an imported table. --max-rel-err X: the winner under the bound X\n"
    "instead of the defaults (loosens or tightens).\n";

/* The rows to show: the device's current stack, or when it has none, the
 * most recent other stack's (stale until re-measured here), one stack at a
 * time. *stale_stack points into *m when stale. Returns 0 or an error. */
static int read_rows(store *st, const char *id, const attn_stack *stack, const attn_shape *s,
                     store_measurement **m, int *n, const char **stale_stack)
{
    *stale_stack = NULL;
    if (store_measurements_get(st, id, stack->id, s, m, n) != 0)
        return ATTUNE_EDB;
    if (*n > 0)
        return 0;
    free(*m);
    *m = NULL;
    if (store_measurements_get(st, id, NULL, s, m, n) != 0)
        return ATTUNE_EDB;
    store_measurement *r = *m;
    int newest = -1;
    for (int i = 0; i < *n; i++)
        if (newest < 0 || r[i].taken_at > r[newest].taken_at)
            newest = i;
    if (newest < 0)
        return 0;
    char keep[sizeof r[0].stack_id];
    snprintf(keep, sizeof keep, "%s", r[newest].stack_id);
    int k = 0;
    for (int i = 0; i < *n; i++)
        if (strcmp(r[i].stack_id, keep) == 0)
            r[k++] = r[i];
    *n = k;
    *stale_stack = r[0].stack_id;
    return 0;
}

static json_t *row_json(const store_measurement *m, int winner)
{
    attn_tactic t = {0};
    if (attn_tactic_parse(m->tactic, &t, NULL, 0) != 0)
        t.pad = 0; /* not canonical: shown as stored, pad unknown */
    return json_pack("{ss ss si so so so so so si so so so ss ss sb ss sb}", "tactic", m->tactic,
                     "variant", attn_variant_name(t.variant), "pad", t.pad, "time_us",
                     json_num(m->time_us), "time_us_paid", json_num(select_time(m)),
                     "time_us_min", json_num(m->time_us_min), "time_us_max",
                     json_num(m->time_us_max), "time_us_copies", json_num(m->time_us_copies),
                     "n", m->n, "rel_err", json_num(m->rel_err), "max_abs_err",
                     json_num(m->max_abs_err), "err_ratio", json_num(m->err_ratio), "status",
                     store_status_name(m->status), "note", m->note, "winner", winner, "stack",
                     m->stack_id, "noisy", m->noisy);
}

static void print_json(const char *id, const char *shape, const char *stack_id,
                       const store_measurement *m, int n, int w, int stale)
{
    json_t *arr = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(arr, row_json(&m[i], i == w));
    json_t *root = json_pack("{ss ss ss sb so so}", "device", id, "shape", shape, "stack",
                             n > 0 ? m[0].stack_id : stack_id, "stale", stale, "winner",
                             w >= 0 ? json_string(m[w].tactic) : json_null(), "measurements",
                             arr);
    json_num_dumpf(root, stdout, JSON_INDENT(2));
    putchar('\n');
    json_decref(root);
}

static void print_row(const store_measurement *m, int winner)
{
    char t[5][16], e[3][16];
    /* paid_us: what a caller pays (with the copies of a padded tactic), the
     * figure the winner is chosen on */
    const double tv[5] = {select_time(m), m->time_us, m->time_us_min, m->time_us_max,
                          m->time_us_copies};
    const double ev[3] = {m->rel_err, m->max_abs_err, m->err_ratio};
    for (int k = 0; k < 5; k++)
        cli_fmt_num(t[k], sizeof t[k], "%.2f", tv[k]);
    for (int k = 0; k < 3; k++)
        cli_fmt_num(e[k], sizeof e[k], k == 2 ? "%.2f" : "%.2e", ev[k]);
    printf("%c %-34s %-10s %10s %10s %10s %10s %10s %4d %9s %9s %6s%s%s\n",
           winner ? '*' : m->noisy ? '~' : ' ',
           m->tactic, store_status_name(m->status), t[0], t[1], t[2], t[3], t[4], m->n, e[0],
           e[1], e[2], m->note[0] ? "  " : "", m->note);
}

/* Say why when the winner is not the fastest eligible row: the hysteresis
 * of docs/tuning.md kept the last tune's choice. */
static void print_kept(const store_measurement *m, int n, int w, const select_policy *pol,
                       double max_rel_err)
{
    if (w < 0 || !m[w].incumbent)
        return;
    store_measurement *mm = malloc((size_t)n * sizeof *mm);
    if (mm == NULL)
        return;
    memcpy(mm, m, (size_t)n * sizeof *mm);
    for (int i = 0; i < n; i++)
        mm[i].incumbent = 0;
    int f = select_winner(mm, n, pol, max_rel_err);
    if (f >= 0 && f != w)
        printf("  kept from the last tune: %s measured %.2f us against %.2f us, "
               "within the measured noise\n",
               m[f].tactic, select_time(&m[f]), select_time(&m[w]));
    free(mm);
}

int cli_results_main(int argc, char **argv)
{
    const char *db = NULL, *device = NULL, *shape = NULL, *mre = NULL;
    int json = 0, rc;
    const cli_opt opts[] = {{"db", 0, CLI_VALUE, &db},
                            {"device", 0, CLI_VALUE, &device},
                            {"shape", 0, CLI_VALUE, &shape},
                            {"max-rel-err", 0, CLI_VALUE, &mre},
                            {"json", 0, CLI_FLAG, &json},
                            {NULL, 0, 0, NULL}};
    if (cli_parse(argc, argv, opts, cli_results_help, NULL, &rc))
        return rc;
    if (!db || !device || !shape)
        return cli_usage_error("results", "needs --db FILE --device ID --shape KEY");
    double max_rel_err = 0;
    if (mre && (cli_double(mre, &max_rel_err) || max_rel_err <= 0))
        return cli_usage_error("results", "--max-rel-err must be a positive number");
    attn_shape s;
    char err[ATTUNE_ERRLEN];
    if (attn_shape_parse(shape, &s, err, sizeof err) != 0)
        return cli_usage_error("results", "bad shape '%s': %s", shape, err);
    store *st;
    if (cli_store_open(db, 0, &st) != 0)
        return 1;
    attn_device_info info;
    attn_stack stack;
    store_measurement *m = NULL;
    const char *stale_stack = NULL;
    int n = 0;
    rc = 1;
    if (cli_device_resolve(st, device, NULL, NULL, &info, &stack) != 0)
        goto out;
    if (read_rows(st, info.id, &stack, &s, &m, &n, &stale_stack) != 0) {
        fprintf(stderr, "attune: reading measurements failed\n");
        goto out;
    }
    select_policy pol;
    select_policy_default(&pol);
    int w = select_winner(m, n, &pol, max_rel_err);
    if (json) {
        print_json(info.id, shape, stack.id, m, n, w, stale_stack != NULL);
    } else {
        printf("%s on %s\n", shape, info.id);
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
        for (int i = 0; i < n; i++)
            print_row(&m[i], i == w);
        int noisy = 0;
        for (int i = 0; i < n; i++)
            noisy += m[i].noisy;
        if (noisy > 0)
            printf("~ noisy: %d timing%s stayed noisy after re-measuring (the note says how); "
                   "kept out of answers until the next tune measures %s again\n",
                   noisy, noisy == 1 ? "" : "s", noisy == 1 ? "it" : "them");
        if (n > 0)
            printf("winner: %s\n", w >= 0 ? m[w].tactic : "(none within tolerance)");
        print_kept(m, n, w, &pol, max_rel_err);
    }
    rc = 0;
out:
    free(m);
    store_close(st);
    return rc;
}
