/* cli_remote.h -- the `attune` subcommands that talk to a running attuned
 * through the client library: query and jobs (tune --url: cli_tune.h).
 *
 * Each takes argv[0] = the subcommand name ("query", "jobs") and
 * its options after it, like a main(), prints its own usage on --help, and
 * returns the process exit status: 0 success, 1 error (or, for query, a
 * fallback answer; for jobs --wait, a job that ended failed or
 * canceled), 2 usage, 3 (query) attuned refused the question. */
#ifndef ATTUNE_CLI_REMOTE_H
#define ATTUNE_CLI_REMOTE_H

#include <jansson.h>
#include <stddef.h>

#include "../attune.h"

int cli_query_main(int argc, char **argv);
int cli_jobs_main(int argc, char **argv);


/* ---- shared by the commands that talk to attuned (cli_pins.c too) */

/* The bearer token of mutating routes: --token-file FILE when given, else
 * $ATTUNE_TOKEN, else the file $ATTUNE_TOKEN_FILE, else ./var/token.
 * 0, or -1 after printing why. */
int cli_remote_token(const char *file, char *tok, size_t len);
/* Print "attune: WHAT: HTTP STATUS: <the answer's error>" to stderr. */
void cli_remote_http_error(const char *what, long status, const char *body);
/* Say that attuned at c's URL did not answer (why may be NULL). */
void cli_remote_unreachable(const char *prefix, const attune_client *c, const char *why);
/* Append prefix and value percent-encoded to dst; the length written. */
size_t cli_remote_param(char *dst, size_t len, const char *prefix, const char *value);
/* The client of attuned at url (NULL: $ATTUNE_URL, else the default), for
 * command cmd; NULL with *status the exit status to return: 2 after a usage
 * error (a port outside 1-65535), 1 out of memory. */
attune_client *cli_remote_client(const char *cmd, const char *url, long timeout_ms,
                                 int *status);
/* GET path and parse the JSON answer; NULL (error printed) unless 200. */
json_t *cli_remote_get_json(attune_client *c, const char *path, const char *what);

#endif
