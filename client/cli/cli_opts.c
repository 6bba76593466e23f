/* cli_opts.c -- the one option parser of the attune commands (getopt_long
 * over a table) and the parsers of option values. */
#include "cli_opts.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"

#define MAX_OPTS 32
/* getopt_long returns OPT_BASE + i for the long option opts[i], above any
 * character a short option can be. */
#define OPT_BASE 0x100
#define OPT_HELP (OPT_BASE + MAX_OPTS)

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "attune %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 2;
}

void cli_multi_free(cli_multi *m)
{
    free(m->v);
    m->v = NULL;
    m->n = m->cap = 0;
}

/* Store one option's value; 0 or 1 (out of memory). */
static int take(const cli_opt *o, const char *value)
{
    switch (o->kind) {
    case CLI_FLAG:
        *(int *)o->dst = 1;
        return 0;
    case CLI_VALUE:
        *(const char **)o->dst = value;
        return 0;
    case CLI_MULTI: {
        cli_multi *m = o->dst;
        if (grow_array(&m->v, &m->cap, m->n, sizeof *m->v) != 0)
            return 1;
        m->v[m->n++] = value;
        return 0;
    }
    }
    return 1;
}

/* The option getopt refused, without a value given with '='. */
static void name_offender(const char *arg, char *buf, size_t len)
{
    size_t n = strcspn(arg, "=");
    snprintf(buf, len, "%.*s", (int)(n < 64 ? n : 64), arg);
}

/* How many options arg ("--na") abbreviates: getopt_long takes a unique
 * prefix, and refuses one shared by several. */
static int prefix_of(const cli_opt *opts, const char *arg)
{
    int k = 0;
    if (strncmp(arg, "--", 2) != 0)
        return 0;
    for (; opts->name != NULL; opts++)
        k += strncmp(opts->name, arg + 2, strlen(arg + 2)) == 0;
    return k;
}

int cli_parse(int argc, char **argv, const cli_opt *opts, const char *usage, cli_pos *pos,
              int *status)
{
    struct option lo[MAX_OPTS + 2];
    char shorts[2 * MAX_OPTS + 4] = ":h"; /* ':' first: a missing value returns ':' */
    size_t ns = strlen(shorts);
    int nopts = 0;
    for (; opts[nopts].name != NULL; nopts++) {
        const cli_opt *o = &opts[nopts];
        if (nopts == MAX_OPTS) {
            fprintf(stderr, "attune %s: too many options in the table\n", argv[0]);
            *status = 1;
            return 1;
        }
        lo[nopts] = (struct option){o->name, o->kind == CLI_FLAG ? no_argument : required_argument,
                                    NULL, OPT_BASE + nopts};
        if (o->short_name) {
            shorts[ns++] = (char)o->short_name;
            if (o->kind != CLI_FLAG)
                shorts[ns++] = ':';
        }
    }
    shorts[ns] = 0;
    lo[nopts] = (struct option){"help", no_argument, NULL, OPT_HELP};
    lo[nopts + 1] = (struct option){NULL, 0, NULL, 0};
    if (pos != NULL)
        pos->n = 0;

    opterr = 0; /* our messages, one line each */
    optind = 0; /* 0: a fresh scan (GNU), whatever parsed before */
    char bad[80];
    for (;;) {
        int c = getopt_long(argc, argv, shorts, lo, NULL);
        if (c == -1)
            break;
        if (c == 'h' || c == OPT_HELP) {
            fputs(usage, stdout);
            *status = 0;
            return 1;
        }
        if (c == '?' || c == ':') {
            /* getopt has stepped past the argument it refused */
            name_offender(argv[optind - 1], bad, sizeof bad);
            if (c == ':')
                *status = cli_usage_error(argv[0], "option %s needs a value", bad);
            else if (optopt >= OPT_BASE)
                *status = cli_usage_error(argv[0], "option %s takes no value", bad);
            else if (optopt != 0)
                *status = cli_usage_error(argv[0], "unknown option -%c (see attune %s --help)",
                                          optopt, argv[0]);
            else if (prefix_of(opts, bad) > 1)
                *status = cli_usage_error(argv[0], "ambiguous option %s (see attune %s --help)",
                                          bad, argv[0]);
            else
                *status = cli_usage_error(argv[0], "unknown option %s (see attune %s --help)",
                                          bad, argv[0]);
            return 1;
        }
        int k = -1;
        if (c >= OPT_BASE)
            k = c - OPT_BASE;
        else
            for (int i = 0; i < nopts; i++)
                if (opts[i].short_name == c)
                    k = i;
        if (k < 0 || k >= nopts || take(&opts[k], optarg) != 0) {
            fprintf(stderr, "attune %s: out of memory\n", argv[0]);
            *status = 1;
            return 1;
        }
    }
    for (int i = optind; i < argc; i++) {
        if (pos == NULL || pos->n >= pos->max || pos->n >= 4) {
            *status = cli_usage_error(argv[0], "unexpected argument '%s'", argv[i]);
            return 1;
        }
        pos->v[pos->n++] = argv[i];
    }
    return 0;
}

int cli_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

int cli_llong(const char *s, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end)
        return -1;
    *out = v;
    return 0;
}

int cli_bool(const char *s, int *out)
{
    if (strcmp(s, "true") == 0 || strcmp(s, "1") == 0)
        *out = 1;
    else if (strcmp(s, "false") == 0 || strcmp(s, "0") == 0)
        *out = 0;
    else
        return -1;
    return 0;
}
