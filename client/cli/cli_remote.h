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

int cli_query_main(int argc, char **argv);
int cli_jobs_main(int argc, char **argv);

#endif
