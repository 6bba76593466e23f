/* store_readonly.c -- read-only connections (store_readonly.h). */
#include "store_readonly.h"

#include <stdlib.h>
#include <string.h>

#include "store_internal.h"

int store_open_readonly(const char *path, store **out, char *err, size_t errlen)
{
    sqlite3_stmt *v = NULL;
    int rc;
    *out = NULL;
    store *st = calloc(1, sizeof *st);
    if (st == NULL || (st->path = strdup(path)) == NULL) {
        rc = attune_fail(err, errlen, ATTUNE_ENOMEM, "out of memory");
        goto fail;
    }
    int src = sqlite3_open_v2(path, &st->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL);
    if (src != SQLITE_OK) {
        rc = attune_fail(err, errlen, store_sqlite_err(src), "cannot open database '%s': %s",
                         path, st->db != NULL ? sqlite3_errmsg(st->db) : sqlite3_errstr(src));
        goto fail;
    }
    sqlite3_extended_result_codes(st->db, 1);
    sqlite3_busy_timeout(st->db, STORE_BUSY_TIMEOUT_MS);
    if (sqlite3_prepare_v2(st->db, "PRAGMA user_version", -1, &v, NULL) != SQLITE_OK ||
        sqlite3_step(v) != SQLITE_ROW) {
        rc = attune_fail(err, errlen, ATTUNE_EDB, "cannot read database '%s': %s", path,
                         sqlite3_errmsg(st->db));
        goto fail;
    }
    if (sqlite3_column_int(v, 0) != STORE_SCHEMA_VERSION) {
        rc = attune_fail(err, errlen, ATTUNE_EVERSION, "database '%s' has schema %d, not %d",
                         path, sqlite3_column_int(v, 0), STORE_SCHEMA_VERSION);
        goto fail;
    }
    sqlite3_finalize(v);
    *out = st;
    return 0;
fail:
    sqlite3_finalize(v);
    store_close(st);
    return rc;
}
