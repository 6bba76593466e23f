/* cli_variants.c -- `attune variants`: the variants this build knows and
 * their families, from the table every layer reads (kernels/variant.h;
 * the JSON is GET /v1/variants'). */
#include "cli_variants.h"

#include <jansson.h>
#include <stdio.h>

#include "cli_opts.h"
#include "cli_out.h"
#include "common/json_num.h"
#include "kernels/variant.h"
#include "tuner/variants_json.h"

static const char variants_help[] =
    "usage: attune variants [--json | --csv]\n"
    "\n"
    "Lists the kernel families this build knows (docs/design.md, \"Variants\n"
    "describe themselves\"): per family its variant (the first word of a\n"
    "tactic, what a variants= filter takes), the family within it, the backend\n"
    "that runs it, whether this binary runs it (a family of a backend\n"
    "or library not built here is still named, parsed and costed), the dtypes\n"
    "it runs, its parameters, the dashboard's colour of its variant and what\n"
    "it computes.\n"
    "--json prints GET /v1/variants' answer.\n";

static const cli_col cols[] = {{"variant", 0, 0, 0}, {"family", 0, 0, 0}, {"backend", 0, 0, 0},
                               {"built", 0, 0, 0},   {"dtypes", 0, 2, 0}, {"color", 0, 2, 0},
                               {"params", 0, 3, 0},  {"summary", 0, 1, 1}};

/* "f16,bf16,e4m3": the dtypes family f runs, into buf. */
static const char *dtypes_text(const attn_variant_desc *f, char *buf, size_t len)
{
    size_t k = 0;
    buf[0] = 0;
    for (int t = 0; t < ATTN_NDTYPES; t++)
        if (f->dtypes & ATTN_DTYPE_BIT(t)) {
            int w = snprintf(buf + k, len - k, "%s%s", k ? "," : "", attn_dtype_name((attn_dtype)t));
            if (w < 0 || (size_t)w >= len - k)
                break;
            k += (size_t)w;
        }
    return buf;
}

int cli_variants_main(int argc, char **argv)
{
    int json = 0, csv = 0, rc;
    cli_format fmt;
    const cli_opt opts[] = {{"json", 0, CLI_FLAG, &json}, {"csv", 0, CLI_FLAG, &csv},
                            {NULL, 0, 0, NULL}};
    if (cli_parse(argc, argv, opts, variants_help, NULL, &rc))
        return rc;
    if ((rc = cli_format_pick("variants", json, csv, &fmt)) != 0)
        return rc;
    if (fmt == CLI_JSON) {
        json_t *root = variants_json();
        if (root == NULL) {
            fprintf(stderr, "attune: out of memory\n");
            return 1;
        }
        json_num_dumpf(root, stdout, JSON_INDENT(2));
        putchar('\n');
        json_decref(root);
        return 0;
    }
    int n;
    const attn_variant_desc *const *f = attn_families(&n);
    cli_table *t = cli_table_new(cols, 8);
    for (int v = 0; t != NULL && v < ATTN_MAX_VARIANTS; v++) /* variants in id order */
        for (int i = 0; t != NULL && i < n; i++) {
            if (f[i]->variant != (attn_variant)v)
                continue;
            char dts[48];
            const char *cells[8] = {f[i]->name,   f[i]->family, f[i]->backend,
                                    f[i]->kernel != NULL ? "yes" : "no",
                                    dtypes_text(f[i], dts, sizeof dts), f[i]->color,
                                    f[i]->params, f[i]->summary};
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
