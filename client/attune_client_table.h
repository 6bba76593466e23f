/* attune_client_table.h -- the client's file mode (internal): a client
 * made with "file:PATH" answers in process from a database file or an
 * exported table through libattune_lookup (lookup/attune_lookup.h),
 * loaded with dlopen on first need, so that a client of attuned needs
 * neither that library nor SQLite. */
#ifndef ATTUNE_CLIENT_TABLE_H
#define ATTUNE_CLIENT_TABLE_H

#include <stddef.h>

#include "attune.h"

typedef struct table_mode {
    void *lib;                       /* dlopen handle */
    void *t;                         /* attune_table *, NULL when not open */
    int (*tactic)(void *, const char *, const long long[6], const char *, int, double,
                  const char *, char **);
    void (*free_)(void *);
    void (*close_)(void *);
    char error[256];                 /* why t is not open; "" when it is */
} table_mode;

/* Load libattune_lookup ($ATTUNE_LOOKUP_LIB, else libattune_lookup.so.1
 * beside this library, else the loader's search path) and read the file
 * at path. Returns the mode (malloc'd) or NULL on ENOMEM; a failure to
 * load or read is kept in ->error, and every lookup then falls back with
 * it. */
table_mode *table_mode_open(const char *path);
void table_mode_close(table_mode *tm);

/* Answer q (device resolved, variants canonical) from the table: the
 * JSON text of the answer into *json (malloc'd, caller frees) with the
 * status (200, 400, 404), or -1 with why (no table: ->error). */
int table_mode_ask(table_mode *tm, const attune_shape_q *q, const char *device,
                   double max_rel_err, const char *variants, char **json, char *why,
                   size_t whylen);

#endif
