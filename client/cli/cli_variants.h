/* cli_variants.h -- `attune variants`: the table of kernel families. */
#ifndef ATTUNE_CLI_VARIANTS_H
#define ATTUNE_CLI_VARIANTS_H

int cli_variants_main(int argc, char **argv);

#endif
