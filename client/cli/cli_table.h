/* cli_table.h -- `attune export` and `attune import`: a device's table as
 * fleet JSON (docs/fleet.md), out of and into a database file. */
#ifndef ATTUNE_CLI_TABLE_H
#define ATTUNE_CLI_TABLE_H

/* argv[0] = the command; each returns the exit status: 0, 1 error, 2 usage. */
int cli_export_main(int argc, char **argv);
int cli_import_main(int argc, char **argv);

#endif
