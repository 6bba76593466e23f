/* store_snapshot.c -- a database file copied into memory, read-only on
 * disk: what an in-process lookup reads (lookup/lookup_file.h). */
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "store_internal.h"

/* Copy the database at path (opened read-only; a WAL file's committed
 * pages included) into the empty in-memory database dst. */
static int copy_in(sqlite3 *dst, const char *path, char *err, size_t errlen)
{
    sqlite3 *src = NULL;
    int rc = sqlite3_open_v2(path, &src, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_busy_timeout(src, STORE_BUSY_TIMEOUT_MS);
        sqlite3_backup *b = sqlite3_backup_init(dst, "main", src, "main");
        if (b == NULL) {
            rc = sqlite3_errcode(dst);
        } else {
            rc = sqlite3_backup_step(b, -1);
            int fin = sqlite3_backup_finish(b);
            rc = rc == SQLITE_DONE ? fin : rc;
        }
    }
    if (rc != SQLITE_OK)
        attune_fail(err, errlen, store_sqlite_err(rc), "cannot read database '%s': %s", path,
                    src != NULL && sqlite3_errcode(src) != SQLITE_OK ? sqlite3_errmsg(src)
                                                                     : sqlite3_errstr(rc));
    sqlite3_close_v2(src);
    return rc == SQLITE_OK ? 0 : store_sqlite_err(rc);
}

int store_open_snapshot(const char *path, store **out, char *err, size_t errlen)
{
    store *st = NULL;
    int rc;
    *out = NULL;
    if (path == NULL || path[0] == 0)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "no database path given");
    if ((st = calloc(1, sizeof *st)) == NULL || (st->path = strdup(path)) == NULL) {
        rc = attune_fail(err, errlen, ATTUNE_ENOMEM, "out of memory");
        goto fail;
    }
    /* a fresh connection: its page size is the source's after the copy */
    int src = sqlite3_open_v2(":memory:", &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
                              NULL);
    if (src != SQLITE_OK) {
        rc = attune_fail(err, errlen, store_sqlite_err(src), "cannot open memory: %s",
                         sqlite3_errstr(src));
        goto fail;
    }
    sqlite3_extended_result_codes(st->db, 1);
    if ((rc = copy_in(st->db, path, err, errlen)) != 0 ||
        (rc = store_schema_migrate(st, err, errlen)) != 0) /* an older file: in memory */
        goto fail;
    *out = st;
    return 0;
fail:
    store_close(st);
    return rc;
}
