/* cli_results.c -- `attune results`: every measured tactic of one shape on
 * one device, from a database file, with the winner marked. */
#include "cli_results.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"
#include "cli_out.h"
#include "common/json_num.h"
#include "tuner/select.h"

const char cli_results_help[] =
    "usage: attune results [--db FILE] [--device ID] --shape KEY [--json | --csv]\n"
    "                      [--max-rel-err X]\n"
    "\n"
    "Every measured tactic of the shape: the time it competes with (paid_us: with\n"
    "the pad/unpad copies of a padded tactic), median, min and max kernel time,\n"
    "the time with copies, samples, relative L2 and max abs error against\n"
    "float64, the error ratio to the most accurate tactic, status and note; for an\n"
    "e4m3 shape also src_err, the relative error against the bf16 values the FP8\n"
    "inputs were quantized from (what going to FP8 costs in all). The\n"
    "winner (docs/tuning.md) is marked '*'; a timing that stayed noisy '~' (never\n"
    "a winner; the next tune measures it again). The table fits the terminal\n"
    "(least needed columns left out, the note cut); --csv and --json print\n"
    "every column. --db defaults to $ATTUNE_DB, else the installed service's\n"
    "database (" ATTUNE_SYSTEM_DB ") when it exists; --device to the first GPU of\n"
    "this host, else cpu. ID may also be a device known only from an imported\n"
    "table. --max-rel-err X: the winner under the bound X instead of the defaults\n"
    "(loosens or tightens).\n";

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

/* row_json, with the source error of an e4m3 row. */
static json_t *row_json_full(const store_measurement *m, int winner)
{
    json_t *o = row_json(m, winner);
    if (o != NULL && m->shape.dtype == ATTN_E4M3)
        json_object_set_new(o, "src_rel_err", json_num(m->src_rel_err));
    return o;
}

static void print_json(const char *id, const char *shape, const char *stack_id,
                       const store_measurement *m, int n, int w, int stale)
{
    json_t *arr = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(arr, row_json_full(&m[i], i == w));
    json_t *root = json_pack("{ss ss ss sb so so}", "device", id, "shape", shape, "stack",
                             n > 0 ? m[0].stack_id : stack_id, "stale", stale, "winner",
                             w >= 0 ? json_string(m[w].tactic) : json_null(), "measurements",
                             arr);
    json_num_dumpf(root, stdout, JSON_INDENT(2));
    putchar('\n');
    json_decref(root);
}

/* The table's columns: the mark ('*' the winner, '~' noisy; in CSV
 * "winner" / "noisy"), then what attune results --help lists; at a narrow
 * terminal the ratio goes first, then max_abs, max, min, copies_us,
 * time_us and n, and the note is cut. */
static const cli_col cols_text[] = {
    {"", 0, 0, 0},         {"tactic", 0, 0, 0},    {"status", 0, 0, 0},
    {"paid_us", 1, 0, 0},  {"time_us", 1, 2, 0},   {"min_us", 1, 4, 0},
    {"max_us", 1, 5, 0},   {"copies_us", 1, 3, 0}, {"n", 1, 1, 0},
    {"rel_err", 1, 0, 0},  {"max_abs", 1, 6, 0},   {"ratio", 1, 7, 0},
    {"note", 0, 0, 1}};
static const cli_col cols_csv[] = {
    {"mark", 0, 0, 0},     {"tactic", 0, 0, 0},    {"status", 0, 0, 0},
    {"paid_us", 1, 0, 0},  {"time_us", 1, 0, 0},   {"min_us", 1, 0, 0},
    {"max_us", 1, 0, 0},   {"copies_us", 1, 0, 0}, {"n", 1, 0, 0},
    {"rel_err", 1, 0, 0},  {"max_abs_err", 1, 0, 0}, {"err_ratio", 1, 0, 0},
    {"note", 0, 0, 0}};
#define NCOLS ((int)(sizeof cols_text / sizeof cols_text[0]))
#define COL_REL_ERR 9 /* an e4m3 shape's src_err column comes after it */

/* The columns of a table of shape s: base (cols_text or cols_csv), with
 * src_err after rel_err for e4m3 (never left out: FP8's whole cost).
 * Writes out[0..NCOLS + 1), returns the count. */
static int table_cols(const cli_col *base, const attn_shape *s, cli_col *out)
{
    int k = 0;
    for (int i = 0; i < NCOLS; i++) {
        out[k++] = base[i];
        if (i == COL_REL_ERR && s->dtype == ATTN_E4M3)
            out[k++] = (cli_col){"src_err", 1, 0, 0};
    }
    return k;
}

/* Row m into t: times with 2 decimals and errors with 3 digits in the
 * table, every digit in CSV ("" where not measured); e4m3 rows with their
 * source error after rel_err (as table_cols). */
static int add_row(cli_table *t, const store_measurement *m, int winner, int csv)
{
    char v[9][32], nbuf[16];
    /* paid_us: what a caller pays (with the copies of a padded tactic), the
     * figure the winner is chosen on */
    const double x[9] = {select_time(m),  m->time_us,   m->time_us_min,
                         m->time_us_max,  m->time_us_copies, m->rel_err,
                         m->max_abs_err,  m->err_ratio, m->src_rel_err};
    for (int k = 0; k < 9; k++) {
        if (csv && !isfinite(x[k]))
            v[k][0] = 0;
        else
            cli_fmt_num(v[k], sizeof v[k],
                        csv ? "%.17g" : k < 5 ? "%.2f" : (k < 7 || k == 8) ? "%.2e" : "%.2f",
                        x[k]);
    }
    snprintf(nbuf, sizeof nbuf, "%d", m->n);
    const char *mark = winner ? (csv ? "winner" : "*") : m->noisy ? (csv ? "noisy" : "~") : "";
    const char *base[NCOLS] = {mark, m->tactic, store_status_name(m->status), v[0], v[1],
                               v[2], v[3], v[4], nbuf, v[5], v[6], v[7], m->note};
    const char *cells[NCOLS + 1];
    int k = 0;
    for (int i = 0; i < NCOLS; i++) {
        cells[k++] = base[i];
        if (i == COL_REL_ERR && m->shape.dtype == ATTN_E4M3)
            cells[k++] = v[8];
    }
    return cli_table_add(t, cells);
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
        printf("  kept from the last tune: %s measured %.2f us\n  against %.2f us, "
               "within the measured noise\n",
               m[f].tactic, select_time(&m[f]), select_time(&m[w]));
    free(mm);
}

int cli_results_main(int argc, char **argv)
{
    const char *db = NULL, *device = NULL, *shape = NULL, *mre = NULL;
    int json = 0, csv = 0, rc;
    cli_format fmt;
    const cli_opt opts[] = {{"db", 0, CLI_VALUE, &db},
                            {"device", 0, CLI_VALUE, &device},
                            {"shape", 0, CLI_VALUE, &shape},
                            {"max-rel-err", 0, CLI_VALUE, &mre},
                            {"json", 0, CLI_FLAG, &json},
                            {"csv", 0, CLI_FLAG, &csv},
                            {NULL, 0, 0, NULL}};
    if (cli_parse(argc, argv, opts, cli_results_help, NULL, &rc))
        return rc;
    if ((rc = cli_format_pick("results", json, csv, &fmt)) != 0)
        return rc;
    if (!shape)
        return cli_usage_error("results", "needs --shape KEY");
    if ((rc = cli_db_default("results", &db)) != 0)
        return rc;
    device = cli_device_default(device);
    double max_rel_err = 0;
    if (mre && (cli_double(mre, &max_rel_err) || !(max_rel_err > 0 && max_rel_err <= 1)))
        return cli_usage_error("results", "--max-rel-err must be in (0, 1], as for attune query");
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
    if (fmt == CLI_JSON) {
        print_json(info.id, shape, stack.id, m, n, w, stale_stack != NULL);
    } else if (fmt == CLI_CSV) {
        cli_col cols[NCOLS + 1];
        cli_table *t = cli_table_new(cols, table_cols(cols_csv, &s, cols));
        for (int i = 0; t != NULL && i < n; i++)
            if (add_row(t, &m[i], i == w, 1) != 0)
                goto oom;
        if (t == NULL)
            goto oom;
        cli_table_print(t, CLI_CSV, 0, stdout);
        cli_table_free(t);
    } else {
        printf("%s on %s\n", shape, info.id);
        if (stale_stack)
            printf("  stale: measured under stack %s (the device's now: %s)\n", stale_stack,
                   stack.id);
        if (n == 0)
            printf("  no measurements; tune it with\n  attune tune --db %s --device %s "
                   "--shape %s\n", db, device, shape);
        cli_col cols[NCOLS + 1];
        cli_table *t = n > 0 ? cli_table_new(cols, table_cols(cols_text, &s, cols)) : NULL;
        if (n > 0 && t == NULL)
            goto oom;
        for (int i = 0; i < n; i++)
            if (add_row(t, &m[i], i == w, 0) != 0) {
                cli_table_free(t);
                goto oom;
            }
        if (t != NULL)
            cli_table_print(t, CLI_TEXT, cli_term_width(), stdout);
        cli_table_free(t);
        int noisy = 0;
        for (int i = 0; i < n; i++)
            noisy += m[i].noisy;
        if (noisy > 0)
            printf("~ noisy: %d timing%s stayed noisy when measured again (the note says\n"
                   "  how); out of answers until the next tune measures %s\n",
                   noisy, noisy == 1 ? "" : "s", noisy == 1 ? "it" : "them");
        if (n > 0)
            printf("winner: %s\n", w >= 0 ? m[w].tactic : "(none within tolerance)");
        print_kept(m, n, w, &pol, max_rel_err);
    }
    rc = 0;
    goto out;
oom:
    fprintf(stderr, "attune: out of memory\n");
out:
    free(m);
    store_close(st);
    return rc;
}
