/* cli_fleet.h -- `attune fleet push|pull|status` and `attune drift`.
 *
 * Each takes argv[0] = the command name ("fleet", "drift") and its options
 * after it, like a main(), prints its own usage on --help, and returns the
 * process exit status (see each command's --help). */
#ifndef ATTUNE_CLI_FLEET_H
#define ATTUNE_CLI_FLEET_H

int cli_fleet_main(int argc, char **argv);
int cli_drift_main(int argc, char **argv);

#endif
