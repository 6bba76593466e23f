/* store_fleet_scan.h -- a fleet table's text read without holding its rows
 * as JSON (store_import's parser; internal to db/).
 *
 * A parsed JSON tree costs several times its text: json_loadb of a 62 MiB
 * table peaked at 730-770 MB in the daemon, which then stayed at 710 MB
 * (issue 29 item 8). Here the top-level object is parsed key by key; the
 * "measurements" array is only checked and indexed (each element's
 * offset), its rows are parsed one at a time when they are read, and freed
 * at once. The text must stay alive as long as the index. */
#ifndef ATTUNE_STORE_FLEET_SCAN_H
#define ATTUNE_STORE_FLEET_SCAN_H

#include <jansson.h>
#include <stddef.h>

/* The rows of a scanned table: element i of "measurements" starts at
 * text + off[i]. */
typedef struct fleet_rows {
    const char *text;
    size_t len;
    size_t *off;    /* malloc'd, n entries (NULL when n == 0) */
    size_t n;
} fleet_rows;

/* Parse text[0..len) as a JSON object, as json_loadb with
 * JSON_REJECT_DUPLICATES would (the same syntax, no duplicate key at any
 * depth, nothing after the object), into *root, except that the value of
 * a top-level "measurements" that is an array is set to an empty array
 * and its elements are indexed in *rows instead, each checked to be one
 * valid JSON value. A "measurements" that is not an array is kept as it
 * is (the caller's checks name it). At most max_rows elements are
 * indexed: the scan stops with ATTUNE_ETOOBIG where element max_rows + 1
 * starts (unparsed, so memory and time stay bounded by the limit, not by
 * the text). 0, or ATTUNE_EFORMAT with err saying "fleet table is not
 * valid JSON: line L, column C: why" (or "must be a JSON object"),
 * ATTUNE_ETOOBIG, ATTUNE_ENOMEM. On error *root is NULL and rows empty. */
int fleet_scan(const char *text, size_t len, size_t max_rows, json_t **root, fleet_rows *rows,
               char *err, size_t errlen);

/* Row i parsed (a new reference: json_decref it), NULL on ENOMEM (its
 * text was checked by fleet_scan). */
json_t *fleet_rows_get(const fleet_rows *rows, size_t i);

void fleet_rows_free(fleet_rows *rows);

#endif
