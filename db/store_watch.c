/* store_watch.c -- what a reader needs to follow other connections' writes
 * without reading every row again: the commit counter and a fingerprint of
 * each device (its description, latest stack and measurements). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_internal.h"

int store_data_version(store *st, int64_t *version)
{
    sqlite3_stmt *q = NULL;
    /* not cached: PRAGMA statements are cheap to prepare, and this one is
     * read every few seconds at most */
    int src = sqlite3_prepare_v2(st->db, "PRAGMA data_version", -1, &q, NULL);
    if (src == SQLITE_OK && (src = sqlite3_step(q)) == SQLITE_ROW)
        *version = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    return src == SQLITE_ROW ? 0 : store_sqlite_err(src);
}

static int fingerprint_read(sqlite3_stmt *q, void *row)
{
    store_fingerprint *p = row;
    store_device_row(q, &p->info, &p->stack);
    p->rows = sqlite3_column_int64(q, STORE_DEVICE_NCOLS); /* NULL (no rows): 0 */
    p->taken_sum = sqlite3_column_int64(q, STORE_DEVICE_NCOLS + 1);
    p->marks = sqlite3_column_int64(q, STORE_DEVICE_NCOLS + 2);
    return 0;
}

int store_fingerprints(store *st, store_fingerprint **out, int *n)
{
    sqlite3_stmt *q = NULL;
    void *rows = NULL;
    *out = NULL;
    *n = 0;
    int rc = store_stmt(st, STMT_FINGERPRINTS,
                        "SELECT " STORE_DEVICE_COLS ", m.n, m.t, m.k " STORE_DEVICE_FROM
                        "LEFT JOIN (SELECT device_id, count(*) AS n, sum(taken_at) AS t, "
                        "sum(incumbent) AS k FROM measurements GROUP BY device_id) m "
                        "ON m.device_id = d.id ORDER BY d.id",
                        &q);
    if (rc == 0 && (rc = store_collect(q, sizeof **out, fingerprint_read, &rows, n)) == 0)
        *out = rows;
    store_stmt_done(q);
    return rc;
}
