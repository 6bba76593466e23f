/* cli_out.h -- a listing's three forms: a table fitted to the terminal,
 * CSV and JSON (issue 28 item 4).
 *
 * Every listing command (devices, tactics, results, winners, jobs, pins,
 * loo) takes --csv and --json. The table fits the terminal's width: when
 * its lines would be wider, the columns a command marked droppable go
 * first (the least needed first), then the column marked shrinkable (a
 * free-text note) is cut, ending in "..." (left out too on a terminal too
 * narrow for 12 characters of it); a line under the table names what was
 * left out. The width is $COLUMNS when set, else the terminal's
 * when stdout is one; output to a pipe or a file is never cut (scripts
 * should still read --csv or --json). CSV: a header row with the column
 * names, then every column of every row, quoted as RFC 4180 says (lines
 * end in a newline). */
#ifndef ATTUNE_CLI_OUT_H
#define ATTUNE_CLI_OUT_H

#include <stdio.h>

typedef enum { CLI_TEXT = 0, CLI_CSV = 1, CLI_JSON = 2 } cli_format;

/* The format of --json and --csv (both given: a usage error). 0 with *fmt,
 * or 2 after printing the error. */
int cli_format_pick(const char *cmd, int json, int csv, cli_format *fmt);

/* The width a table fits: $COLUMNS (a number >= 20), else the terminal's
 * when stdout is a terminal, else 0: no limit. */
int cli_term_width(void);

typedef struct cli_col {
    const char *name; /* the header (and the CSV header) */
    int right;        /* 1: right-aligned (numbers) */
    int drop;         /* 0: always shown; k > 0: left out to fit, highest k first */
    int shrink;       /* 1: cut to fit (one column of a table, free text) */
} cli_col;

typedef struct cli_table cli_table;

/* A table of ncols columns (cols is kept, not copied: static tables).
 * NULL on ENOMEM. */
cli_table *cli_table_new(const cli_col *cols, int ncols);

/* Append a row of ncols cells (copied; NULL reads as ""). 0 or
 * ATTUNE_ENOMEM. */
int cli_table_add(cli_table *t, const char *const *cells);

/* Rows added so far. */
int cli_table_rows(const cli_table *t);

/* Print t to f: CLI_TEXT fitted to width (0: no limit) with a header row,
 * or CLI_CSV. (CLI_JSON is the command's own: nothing printed.) */
void cli_table_print(const cli_table *t, cli_format fmt, int width, FILE *f);

void cli_table_free(cli_table *t);

#endif
