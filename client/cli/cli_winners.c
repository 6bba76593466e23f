/* cli_winners.c -- `attune winners`: every tuned shape of a device with its
 * winner, runner-up and margin, offline from a database file (the same rows
 * and JSON as attuned's GET /v1/winners, tuner/winners.h). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"
#include "cli_winners.h"
#include "common/json_num.h"
#include "db/store.h"
#include "kernels/attn.h"
#include "tuner/winners.h"

const char cli_winners_help[] =
    "usage: attune winners --db FILE --device ID [--json] [--dtype T] [--d N]\n"
    "                      [--causal true|false] [--stale true|false]\n"
    "                      [--variants LIST]\n"
    "\n"
    "Every shape measured on device ID with its winner (docs/tuning.md), the time\n"
    "it competes with (with the pad copies when it pads), its relative error, the\n"
    "runner-up and the speedup over it. A shape whose current stack has no winner\n"
    "shows the most recent other stack's, marked stale; a shape with no eligible\n"
    "tactic at all is listed as '(none)'. --json prints the object of attuned's\n"
    "GET /v1/winners. The filters keep one dtype, head size, masking, or only\n"
    "stale (or only fresh) winners. --variants cudnn,split,folded shows the view\n"
    "of a runtime that runs only those variants (names: fused, fused_splitkv,\n"
    "split, split_repeat, folded, cudnn): each shape's winner, runner-up and\n"
    "counts among their tactics alone, as GET /v1/tactic?variants= answers.\n";

static void print_table(const char *id, const char *name, const char *stack,
                        const winners_row *w, int n)
{
    int with = 0, stale = 0;
    for (int i = 0; i < n; i++) {
        with += w[i].has_winner;
        stale += w[i].has_winner && w[i].stale;
    }
    printf("%s (%s), stack %s: %d shape%s, %d with a winner, %d stale\n", name, id, stack, n,
           n == 1 ? "" : "s", with, stale);
    if (n == 0)
        return;
    printf("%-40s %-30s %10s %9s %-30s %10s %7s\n", "shape", "winner", "time_us", "rel_err",
           "runner-up", "time_us", "speedup");
    for (int i = 0; i < n; i++) {
        char key[ATTN_SHAPE_KEY_MAX], t[16], e[16], rt[16], sp[16];
        attn_shape_key(&w[i].shape, key, sizeof key);
        if (!w[i].has_winner) {
            printf("%-40s %-30s (%d tactics: %d ok, %d inaccurate, %d failed)\n", key,
                   "(none)", w[i].ntactics, w[i].nok, w[i].ninaccurate, w[i].nfailed);
            continue;
        }
        cli_fmt_num(t, sizeof t, "%.2f", select_time(&w[i].winner));
        cli_fmt_num(e, sizeof e, "%.2e", w[i].winner.rel_err);
        cli_fmt_num(rt, sizeof rt, "%.2f", w[i].has_runner_up ? select_time(&w[i].runner_up) : NAN);
        cli_fmt_num(sp, sizeof sp, "%.2fx", w[i].margin);
        printf("%-40s %-30s %10s %9s %-30s %10s %7s%s%s\n", key, w[i].winner.tactic, t, e,
               w[i].has_runner_up ? w[i].runner_up.tactic : "-", rt, sp,
               w[i].stale ? "  stale: stack " : "", w[i].stale ? w[i].stack_id : "");
    }
}

/* Parse the options; 0, or the exit status to return. */
static int winners_args(int argc, char **argv, const char **db, const char **device, int *json,
                        winners_filter *f)
{
    const char *dtype = NULL, *d = NULL, *causal = NULL, *stale = NULL, *variants = NULL;
    const cli_opt opts[] = {{"db", 0, CLI_VALUE, db},
                            {"device", 0, CLI_VALUE, device},
                            {"json", 0, CLI_FLAG, json},
                            {"dtype", 0, CLI_VALUE, &dtype},
                            {"d", 0, CLI_VALUE, &d},
                            {"causal", 0, CLI_VALUE, &causal},
                            {"stale", 0, CLI_VALUE, &stale},
                            {"variants", 0, CLI_VALUE, &variants},
                            {NULL, 0, 0, NULL}};
    int rc;
    if (cli_parse(argc, argv, opts, cli_winners_help, NULL, &rc))
        return rc == 0 ? -1 : rc;
    attn_dtype dt;
    long long hd;
    if (dtype != NULL) {
        if (attn_dtype_parse(dtype, &dt) != 0)
            return cli_usage_error("winners", "--dtype must be f16, bf16 or f32");
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
    if (*db == NULL || *device == NULL)
        return cli_usage_error("winners", "needs --db FILE --device ID");
    return 0;
}

int cli_winners_main(int argc, char **argv)
{
    const char *db = NULL, *device = NULL;
    int json = 0;
    winners_filter f;
    winners_filter_all(&f);
    int rc = winners_args(argc, argv, &db, &device, &json, &f);
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
    if (json) {
        char vt[96];
        json_t *root = json_pack(
            "{s:s, s:s, s:s, s:{s:f, s:f, s:f}, s:f, s:s, s:o}", "device", info.id, "name",
            info.name, "stack", stack.id, "max_rel_err", "f16",
            select_max_rel_err(&pol, ATTN_F16), "bf16", select_max_rel_err(&pol, ATTN_BF16),
            "f32", select_max_rel_err(&pol, ATTN_F32), "max_ratio", SELECT_DEFAULT_RATIO,
            "variants", variant_set_str(f.variants, vt, sizeof vt), "winners",
            winners_json(rows, nrows));
        if (root == NULL || json_num_dumpf(root, stdout, JSON_INDENT(2)) != 0) {
            json_decref(root);
            fprintf(stderr, "attune: out of memory\n");
            goto out;
        }
        putchar('\n');
        json_decref(root);
    } else {
        print_table(info.id, info.name, stack.id, rows, nrows);
    }
    rc = 0;
out:
    free(m);
    free(rows);
    store_close(st);
    return rc;
}
