/* cli_winners.h -- `attune winners` (cli_winners.c). */
#ifndef ATTUNE_CLI_WINNERS_H
#define ATTUNE_CLI_WINNERS_H

/* argv[0] is "winners". Returns the exit status (0, 1 error, 2 usage). */
int cli_winners_main(int argc, char **argv);

/* `attune winners --help` */
extern const char cli_winners_help[];

#endif
