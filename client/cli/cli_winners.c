/* cli_winners.c -- `attune winners`: every tuned shape of a device with its
 * winner, runner-up and margin, offline from a database file (the same rows
 * and JSON as attuned's GET /v1/winners, tuner/winners.h). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"
#include "cli_out.h"
#include "cli_winners.h"
#include "common/json_num.h"
#include "common/shape.h"
#include "db/store.h"
#include "tuner/winners.h"

const char cli_winners_help[] =
    "usage: attune winners [--db FILE] [--device ID] [--json | --csv] [--dtype T]\n"
    "                      [--d N] [--causal true|false] [--stale true|false]\n"
    "                      [--variants LIST]\n"
    "\n"
    "Every shape measured on device ID with its winner (docs/tuning.md), the time\n"
    "it competes with (with the pad copies when it pads), its relative error, the\n"
    "runner-up and the speedup over it (with e4m3 shapes: src_err, the winner's\n"
    "error against the bf16 values its FP8 inputs came from). A shape whose\n"
    "current stack has no winner shows the most recent other stack's, marked\n"
    "stale; a shape with no eligible tactic at all is listed as '(none)'. The\n"
    "table fits the terminal (the runner-up's name, its time and the errors left\n"
    "out first); --csv prints every column, --json the object of attuned's\n"
    "GET /v1/winners. --db defaults to\n"
    "$ATTUNE_DB, else the installed service's database (" ATTUNE_SYSTEM_DB ")\n"
    "when it exists; --device to the first GPU of this host, else cpu. The filters\n"
    "keep one dtype, head size, masking, or only stale (or only fresh) winners.\n"
    "--variants cudnn,split,folded shows the view of a runtime that runs only\n"
    "those variants (names: fused, fused_splitkv, split, split_repeat, folded,\n"
    "cudnn): each shape's winner, runner-up and counts among their tactics\n"
    "alone, as GET /v1/tactic?variants= answers.\n";

/* The table's columns; at a narrow terminal the runner-up's name goes
 * first, then its time and the winner's error, and the note is cut. */
static const cli_col cols[] = {
    {"shape", 0, 0, 0},        {"winner", 0, 0, 0},      {"time_us", 1, 0, 0},
    {"rel_err", 1, 1, 0},      {"runner_up", 0, 3, 0},   {"runner_up_us", 1, 2, 0},
    {"speedup", 1, 0, 0},      {"note", 0, 0, 1}};
#define NCOLS ((int)(sizeof cols / sizeof cols[0]))
#define COL_REL_ERR 3 /* src_err follows it when a shape is e4m3 */

/* 1 when one of the rows is of an e4m3 shape: the table then has src_err,
 * the winner's error against the bf16 source ("" for other dtypes). */
static int any_e4m3(const winners_row *w, int n)
{
    for (int i = 0; i < n; i++)
        if (w[i].shape.dtype == ATTN_E4M3)
            return 1;
    return 0;
}

/* The rows as a table (csv: every digit, "" where there is no number),
 * with src_err after rel_err when src (any_e4m3). 0 or ATTUNE_ENOMEM. */
static int fill_table(cli_table *t, const winners_row *w, int n, int csv, int src)
{
    for (int i = 0; i < n; i++) {
        char key[ATTN_SHAPE_KEY_MAX], v[5][32], note[160] = "";
        const int e4m3 = w[i].has_winner && w[i].shape.dtype == ATTN_E4M3;
        const double x[5] = {w[i].has_winner ? select_time(&w[i].winner) : NAN,
                             w[i].has_winner ? w[i].winner.rel_err : NAN,
                             w[i].has_runner_up ? select_time(&w[i].runner_up) : NAN,
                             w[i].has_winner ? w[i].margin : NAN,
                             e4m3 ? w[i].winner.src_rel_err : NAN};
        static const char *const fmt[5] = {"%.2f", "%.2e", "%.2f", "%.2fx", "%.2e"};
        for (int k = 0; k < 5; k++)
            if (csv && !isfinite(x[k]))
                v[k][0] = 0;
            else
                cli_fmt_num(v[k], sizeof v[k], csv ? "%.17g" : fmt[k], x[k]);
        attn_shape_key(&w[i].shape, key, sizeof key);
        if (!w[i].has_winner)
            snprintf(note, sizeof note, "%d tactic%s: %d ok, %d inaccurate, %d failed",
                     w[i].ntactics, w[i].ntactics == 1 ? "" : "s", w[i].nok, w[i].ninaccurate,
                     w[i].nfailed);
        else if (w[i].stale) /* the stack in CSV; the word fits a terminal */
            snprintf(note, sizeof note, csv ? "stale: stack %s" : "stale", w[i].stack_id);
        const char *base[NCOLS] = {
            key, w[i].has_winner ? w[i].winner.tactic : "(none)", v[0], v[1],
            w[i].has_runner_up ? w[i].runner_up.tactic : csv ? "" : "-", v[2], v[3], note};
        const char *cells[NCOLS + 1];
        int k = 0;
        for (int c = 0; c < NCOLS; c++) {
            cells[k++] = base[c];
            if (c == COL_REL_ERR && src)
                cells[k++] = e4m3 || csv ? v[4] : "-";
        }
        if (cli_table_add(t, cells) != 0)
            return ATTUNE_ENOMEM;
    }
    return 0;
}

/* The rows as a table fitted to the terminal, or CSV. 0 or ATTUNE_ENOMEM. */
static int print_table(const char *id, const char *name, const char *stack,
                       const winners_row *w, int n, cli_format fmt)
{
    int with = 0, stale = 0;
    for (int i = 0; i < n; i++) {
        with += w[i].has_winner;
        stale += w[i].has_winner && w[i].stale;
    }
    const int src = any_e4m3(w, n);
    cli_col cs[NCOLS + 1];
    int nc = 0;
    for (int c = 0; c < NCOLS; c++) {
        cs[nc++] = cols[c];
        if (c == COL_REL_ERR && src)
            cs[nc++] = (cli_col){"src_err", 1, 1, 0};
    }
    cli_table *t = cli_table_new(cs, nc);
    if (t == NULL || fill_table(t, w, n, fmt == CLI_CSV, src) != 0) {
        cli_table_free(t);
        return ATTUNE_ENOMEM;
    }
    if (fmt == CLI_TEXT) { /* one line where it fits, else two */
        char title[512];
        int width = cli_term_width(), k = snprintf(title, sizeof title, "%s (%s), stack %s:",
                                                   name, id, stack);
        snprintf(title + k, sizeof title - (size_t)k, "%s%d shape%s, %d with a winner, %d stale",
                 width > 0 && k + 40 > width ? "\n" : " ", n, n == 1 ? "" : "s", with, stale);
        puts(title);
    }
    if (n > 0 || fmt == CLI_CSV)
        cli_table_print(t, fmt, cli_term_width(), stdout);
    cli_table_free(t);
    return 0;
}

/* Parse the options; 0, or the exit status to return. */
static int winners_args(int argc, char **argv, const char **db, const char **device,
                        cli_format *fmt, winners_filter *f)
{
    const char *dtype = NULL, *d = NULL, *causal = NULL, *stale = NULL, *variants = NULL;
    int json = 0, csv = 0;
    const cli_opt opts[] = {{"db", 0, CLI_VALUE, db},
                            {"device", 0, CLI_VALUE, device},
                            {"json", 0, CLI_FLAG, &json},
                            {"csv", 0, CLI_FLAG, &csv},
                            {"dtype", 0, CLI_VALUE, &dtype},
                            {"d", 0, CLI_VALUE, &d},
                            {"causal", 0, CLI_VALUE, &causal},
                            {"stale", 0, CLI_VALUE, &stale},
                            {"variants", 0, CLI_VALUE, &variants},
                            {NULL, 0, 0, NULL}};
    int rc;
    if (cli_parse(argc, argv, opts, cli_winners_help, NULL, &rc))
        return rc == 0 ? -1 : rc;
    if ((rc = cli_format_pick("winners", json, csv, fmt)) != 0)
        return rc;
    attn_dtype dt;
    long long hd;
    if (dtype != NULL) {
        if (attn_dtype_parse(dtype, &dt) != 0)
            return cli_usage_error("winners", "--dtype must be f16, bf16, f32 or e4m3");
        f->dtype = (int)dt;
    }
    if (d != NULL) {
        if (cli_llong(d, &hd) != 0 || hd < 1 || hd > ATTN_MAX_HEADDIM)
            return cli_usage_error("winners", "--d must be a head size in 1..%d",
                                   ATTN_MAX_HEADDIM);
        f->d = (int)hd;
    }
    if (causal != NULL && cli_bool(causal, &f->causal) != 0)
        return cli_usage_error("winners", "--causal must be true or false");
    if (stale != NULL && cli_bool(stale, &f->stale) != 0)
        return cli_usage_error("winners", "--stale must be true or false");
    char err[ATTUNE_ERRLEN];
    if (variants != NULL && (variants[0] == 0 ||
                             variant_set_parse(variants, &f->variants, err, sizeof err) != 0))
        return cli_usage_error("winners", "--variants '%s': %s", variants,
                               variants[0] ? err : "empty (write e.g. cudnn,split,folded)");
    *device = cli_device_default(*device);
    return cli_db_default("winners", db);
}

int cli_winners_main(int argc, char **argv)
{
    const char *db = NULL, *device = NULL;
    cli_format fmt;
    winners_filter f;
    winners_filter_all(&f);
    int rc = winners_args(argc, argv, &db, &device, &fmt, &f);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    store *st = NULL;
    if (cli_store_open(db, 0, &st) != 0)
        return 1;
    /* a device of this host (its stack now) or one only the database knows
     * (imported: its latest stored stack) */
    attn_device_info info;
    attn_stack stack;
    store_measurement *m = NULL;
    winners_row *rows = NULL;
    int n = 0, nrows = 0, local;
    rc = 1;
    if (cli_device_resolve(st, device, NULL, &local, &info, &stack) != 0)
        goto out;
    f.need_mark = local; /* as attuned answers for its own devices */
    if (store_measurements_all(st, info.id, &m, &n) != 0) {
        fprintf(stderr, "attune: reading measurements failed\n");
        goto out;
    }
    select_policy pol;
    select_policy_default(&pol);
    if (winners_compute(m, n, &stack, &pol, &f, &rows, &nrows) != 0) {
        fprintf(stderr, "attune: out of memory\n");
        goto out;
    }
    if (fmt == CLI_JSON) {
        char vt[96];
        json_t *root = json_pack(
            "{s:s, s:s, s:s, s:{s:f, s:f, s:f, s:f}, s:f, s:s, s:o}", "device", info.id,
            "name", info.name, "stack", stack.id, "max_rel_err", "f16",
            select_max_rel_err(&pol, ATTN_F16), "bf16", select_max_rel_err(&pol, ATTN_BF16),
            "f32", select_max_rel_err(&pol, ATTN_F32), "e4m3",
            select_max_rel_err(&pol, ATTN_E4M3), "max_ratio", SELECT_DEFAULT_RATIO,
            "variants", variant_set_str(f.variants, vt, sizeof vt), "winners",
            winners_json(rows, nrows));
        if (root == NULL || json_num_dumpf(root, stdout, JSON_INDENT(2)) != 0) {
            json_decref(root);
            fprintf(stderr, "attune: out of memory\n");
            goto out;
        }
        putchar('\n');
        json_decref(root);
    } else if (print_table(info.id, info.name, stack.id, rows, nrows, fmt) != 0) {
        fprintf(stderr, "attune: out of memory\n");
        goto out;
    }
    rc = 0;
out:
    free(m);
    free(rows);
    store_close(st);
    return rc;
}
