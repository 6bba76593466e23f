/* table_file.c -- read a fleet table file whole, gzip-compressed or not.
 *
 * Tables are JSON (docs/api.md, "Fleet tables"); the measured H200 tables
 * kept in bench/ are gzip-compressed (a tenth of the size). Reading either
 * is one call: the gzip magic (1f 8b) at the start of the file decides. */
#ifndef ATTUNE_TABLE_FILE_H
#define ATTUNE_TABLE_FILE_H

#include <stddef.h>

/* Read the whole file at path ("-": standard input) into *buf (malloc'd,
 * NUL-terminated, caller frees) and its length into *len, inflating it
 * when it is gzip-compressed. More than max bytes (after inflating) is
 * ATTUNE_ETOOBIG. Returns 0, ATTUNE_EIO (cannot open or read),
 * ATTUNE_EFORMAT (a corrupt or truncated gzip stream), ATTUNE_ETOOBIG or
 * ATTUNE_ENOMEM, with the detail in err. */
int table_file_read(const char *path, size_t max, char **buf, size_t *len, char *err,
                    size_t errlen);

#endif
