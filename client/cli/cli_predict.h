/* cli_predict.h -- the `attune` subcommands around predicted answers:
 * `tactics` (every tactic the backend lists for a shape) and `loo` (the
 * leave-one-out evaluation of the prediction model over a tuned database).
 * Each takes argv[0] = the subcommand name and its options after it, like
 * a main(), prints its usage on --help, and returns the exit status: 0
 * success, 1 error (for loo --max-median/--max-worst: a bound missed),
 * 2 usage. */
#ifndef ATTUNE_CLI_PREDICT_H
#define ATTUNE_CLI_PREDICT_H

int cli_tactics_main(int argc, char **argv);
int cli_loo_main(int argc, char **argv);

#endif
