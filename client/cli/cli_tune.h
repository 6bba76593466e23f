/* cli_tune.h -- `attune tune`: offline into a database file, or (--url) as a
 * job of a running attuned. */
#ifndef ATTUNE_CLI_TUNE_H
#define ATTUNE_CLI_TUNE_H

#include "cli_opts.h"

/* The options of `attune tune`, both forms. */
typedef struct cli_tune_args {
    const char *db, *device, *grid, *budget, *screen, *url, *token_file;
    const char *only; /* --only TEXT[,TEXT...]: measure only the tactics named so */
    cli_multi shapes; /* --shape KEY ... */
    int force, quiet, wait;
    int force_long;   /* --force-long: tune shapes predicted over the daemon's job budget */
} cli_tune_args;

extern const char cli_tune_help[];

/* argv[0] = "tune"; returns the exit status (see cli_tune_help). */
int cli_tune_main(int argc, char **argv);

/* tune --url (cli_remote.c): queue the job, follow it with --wait. */
int cli_tune_remote(const cli_tune_args *a);

#endif
