/* cli_pins.h -- `attune pin`, `attune unpin`, `attune pins`: an operator's
 * pins (docs/api.md "Pins"), through a running attuned (--url, the token
 * of its mutating routes) or straight into a database file (--db). Each
 * takes argv[0] = its name, prints its usage on --help, and returns the
 * exit status: 0 success, 1 error (refused or unreachable), 2 usage. */
#ifndef ATTUNE_CLI_PINS_H
#define ATTUNE_CLI_PINS_H

int cli_pin_main(int argc, char **argv);
int cli_unpin_main(int argc, char **argv);
int cli_pins_main(int argc, char **argv);

#endif
