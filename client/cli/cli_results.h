/* cli_results.h -- `attune results`: one shape's measurements on a device. */
#ifndef ATTUNE_CLI_RESULTS_H
#define ATTUNE_CLI_RESULTS_H

extern const char cli_results_help[];

/* argv[0] = "results"; returns the exit status: 0, 1 error, 2 usage. */
int cli_results_main(int argc, char **argv);

#endif
