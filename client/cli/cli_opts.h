/* cli_opts.h -- the one option parser of the attune commands: getopt_long
 * over a table of the command's options, and the parsers of their values.
 *
 * Every command accepts `--opt value` and `--opt=value`, `--help` (and -h),
 * `--` before positional arguments that start with '-', options and
 * positional arguments in any order, and (getopt_long's rule) a long option
 * abbreviated to a prefix no other option shares. An unknown option, a missing value or
 * a surplus argument is one line on stderr and exit status 2. */
#ifndef ATTUNE_CLI_OPTS_H
#define ATTUNE_CLI_OPTS_H

typedef enum cli_opt_kind {
    CLI_FLAG,  /* no value: *(int *)dst = 1 */
    CLI_VALUE, /* one value, the last given wins: *(const char **)dst */
    CLI_MULTI, /* repeatable: appended to *(cli_multi *)dst */
} cli_opt_kind;

/* The values of a repeatable option, pointers into argv; the caller frees v
 * (cli_multi_free) whatever cli_parse returned. */
typedef struct cli_multi {
    const char **v;
    int n, cap;
} cli_multi;

typedef struct cli_opt {
    const char *name; /* long name without the dashes: "db"; NULL ends a table */
    int short_name;   /* 'o' for -o, or 0 */
    cli_opt_kind kind;
    void *dst;        /* int *, const char ** or cli_multi *, by kind */
} cli_opt;

/* Positional arguments: at most max (<= 4), in argv order. */
typedef struct cli_pos {
    const char *v[4];
    int n, max;
} cli_pos;

/* Parse argv[1..argc) of the command named argv[0] against opts (pos may be
 * NULL: no positional argument allowed). --help prints usage to stdout.
 * Returns 0 when the command goes on; otherwise the command is finished and
 * must return *status: 0 after --help, 2 after a usage error (one line on
 * stderr naming the option), 1 when out of memory. */
int cli_parse(int argc, char **argv, const cli_opt *opts, const char *usage, cli_pos *pos,
              int *status);

void cli_multi_free(cli_multi *m);

/* Value parsers: 0 and *out set, or -1 (out untouched). A double must be
 * finite; an integer decimal, without trailing characters or overflow;
 * a boolean true/false/1/0. */
int cli_double(const char *s, double *out);
int cli_llong(const char *s, long long *out);
int cli_bool(const char *s, int *out);

/* Print "attune CMD: MESSAGE" and a newline to stderr; returns 2 (usage), so
 * a command says `return cli_usage_error("tune", "...")`. */
int cli_usage_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
