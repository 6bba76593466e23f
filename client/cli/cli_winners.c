/* cli_winners.c -- `attune winners`: every tuned shape of a device with its
 * winner, runner-up and margin, offline from a database file (the same rows
 * and JSON as attuned's GET /v1/winners, tuner/winners.h). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_winners.h"
#include "common/json_num.h"
#include "db/store.h"
#include "kernels/attn.h"
#include "tuner/winners.h"

const char cli_winners_help[] =
    "usage: attune winners --db FILE --device ID [--json] [--dtype T] [--d N]\n"
    "                      [--causal true|false] [--stale true|false]\n"
    "\n"
    "Every shape measured on device ID with its winner (docs/tuning.md), the time\n"
    "it competes with (with the pad copies when it pads), its relative error, the\n"
    "runner-up and the speedup over it. A shape whose current stack has no winner\n"
    "shows the most recent other stack's, marked stale; a shape with no eligible\n"
    "tactic at all is listed as '(none)'. --json prints the object of attuned's\n"
    "GET /v1/winners. The filters keep one dtype, head size, masking, or only\n"
    "stale (or only fresh) winners.\n";

static int bool_arg(const char *v, int *out)
{
    if (strcmp(v, "true") == 0 || strcmp(v, "1") == 0)
        *out = 1;
    else if (strcmp(v, "false") == 0 || strcmp(v, "0") == 0)
        *out = 0;
    else
        return -1;
    return 0;
}

static void fmt(char *buf, size_t len, const char *f, double v)
{
    if (isfinite(v))
        snprintf(buf, len, f, v);
    else
        snprintf(buf, len, "-");
}

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
        fmt(t, sizeof t, "%.2f", select_time(&w[i].winner));
        fmt(e, sizeof e, "%.2e", w[i].winner.rel_err);
        fmt(rt, sizeof rt, "%.2f", w[i].has_runner_up ? select_time(&w[i].runner_up) : NAN);
        fmt(sp, sizeof sp, "%.2fx", w[i].margin);
        printf("%-40s %-30s %10s %9s %-30s %10s %7s%s%s\n", key, w[i].winner.tactic, t, e,
               w[i].has_runner_up ? w[i].runner_up.tactic : "-", rt, sp,
               w[i].stale ? "  stale: stack " : "", w[i].stale ? w[i].stack_id : "");
    }
}

int cli_winners_main(int argc, char **argv)
{
    const char *db = NULL, *device = NULL;
    int json = 0;
    winners_filter f;
    winners_filter_all(&f);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--json") == 0) {
            json = 1;
            continue;
        }
        if (strcmp(a, "--db") != 0 && strcmp(a, "--device") != 0 && strcmp(a, "--dtype") != 0 &&
            strcmp(a, "--d") != 0 && strcmp(a, "--causal") != 0 && strcmp(a, "--stale") != 0) {
            fprintf(stderr, "attune: winners: unknown option %s (see attune winners --help)\n",
                    a);
            return 2;
        }
        if (v == NULL) {
            fprintf(stderr, "attune: winners: option %s needs a value\n", a);
            return 2;
        }
        i++;
        attn_dtype dt;
        char *end;
        if (strcmp(a, "--db") == 0) {
            db = v;
        } else if (strcmp(a, "--device") == 0) {
            device = v;
        } else if (strcmp(a, "--dtype") == 0) {
            if (attn_dtype_parse(v, &dt) != 0) {
                fprintf(stderr, "attune: winners: --dtype must be f16, bf16 or f32\n");
                return 2;
            }
            f.dtype = (int)dt;
        } else if (strcmp(a, "--d") == 0) {
            long d = strtol(v, &end, 10);
            if (end == v || *end != 0 || d < 1 || d > ATTN_MAX_HEADDIM) {
                fprintf(stderr, "attune: winners: --d must be a head size in 1..%d\n",
                        ATTN_MAX_HEADDIM);
                return 2;
            }
            f.d = (int)d;
        } else if (bool_arg(v, strcmp(a, "--causal") == 0 ? &f.causal : &f.stale) != 0) {
            fprintf(stderr, "attune: winners: %s must be true or false\n", a);
            return 2;
        }
    }
    if (db == NULL || device == NULL) {
        fprintf(stderr, "attune: winners needs --db FILE --device ID\n");
        return 2;
    }
    char err[ATTUNE_ERRLEN] = "";
    store *st = NULL;
    int rc = store_open(db, 0, &st, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "attune: database %s: %s\n", db, err[0] ? err : attune_strerror(rc));
        return 1;
    }
    /* a device of this host (its stack now) or one only the database knows
     * (imported: its latest stored stack) */
    attn_device dev;
    attn_device_info info;
    attn_stack stack;
    store_measurement *m = NULL;
    winners_row *rows = NULL;
    int n = 0, nrows = 0;
    rc = 1;
    if (attn_device_resolve(device, &dev, err, sizeof err) == 0) {
        info = dev.info;
        stack = dev.stack;
        f.need_mark = 1; /* as attuned answers for its own devices */
    } else if (store_device_get(st, device, &info, &stack) != 0) {
        fprintf(stderr, "attune: unknown device '%s': not on this host and not in the "
                        "database\n",
                device);
        goto out;
    }
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
        json_t *root = json_pack(
            "{s:s, s:s, s:s, s:{s:f, s:f, s:f}, s:f, s:o}", "device", info.id, "name", info.name,
            "stack", stack.id, "max_rel_err", "f16", select_max_rel_err(&pol, ATTN_F16), "bf16",
            select_max_rel_err(&pol, ATTN_BF16), "f32", select_max_rel_err(&pol, ATTN_F32),
            "max_ratio", SELECT_DEFAULT_RATIO, "winners", winners_json(rows, nrows));
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
