/* store_watch.c -- what a reader needs to follow other connections' writes
 * without reading every row again: the commit counter and a fingerprint of
 * each device's measurements. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/grow.h"
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

int store_fingerprints(store *st, store_fingerprint **out, int *n)
{
    sqlite3_stmt *q = NULL;
    store_fingerprint *p = NULL;
    int np = 0, cap = 0, rc, src;
    *out = NULL;
    *n = 0;
    rc = store_stmt(st, STMT_FINGERPRINTS,
                    "SELECT device_id, count(*), sum(taken_at), sum(incumbent) "
                    "FROM measurements GROUP BY device_id ORDER BY device_id",
                    &q);
    if (rc != 0)
        goto fail;
    while ((src = sqlite3_step(q)) == SQLITE_ROW) {
        if ((rc = grow_array(&p, &cap, np, sizeof *p)) != 0)
            goto fail;
        store_column_text(q, 0, p[np].device_id, sizeof p[np].device_id);
        p[np].rows = sqlite3_column_int64(q, 1);
        p[np].taken_sum = sqlite3_column_int64(q, 2);
        p[np].marks = sqlite3_column_int64(q, 3);
        np++;
    }
    if (src != SQLITE_DONE) {
        rc = store_sqlite_err(src);
        goto fail;
    }
    store_stmt_done(q);
    *out = p;
    *n = np;
    return 0;
fail:
    store_stmt_done(q);
    free(p);
    return rc;
}
