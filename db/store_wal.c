/* store_wal.c -- WAL size and the truncating checkpoint (store_wal.h). */
#include "store_wal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "store_internal.h"

int64_t store_wal_bytes(store *st)
{
    if (strcmp(st->path, ":memory:") == 0)
        return 0;
    size_t n = strlen(st->path) + 5;
    char *wal = malloc(n);
    if (wal == NULL)
        return ATTUNE_ENOMEM;
    snprintf(wal, n, "%s-wal", st->path);
    struct stat sb;
    int64_t bytes = stat(wal, &sb) == 0 ? (int64_t)sb.st_size : 0;
    free(wal);
    return bytes;
}

int store_wal_checkpoint(store *st, int busy_ms, store_wal_result *out)
{
    out->busy = 0;
    out->frames = out->copied = -1;
    sqlite3_busy_timeout(st->db, busy_ms);
    int frames = -1, copied = -1;
    int src = sqlite3_wal_checkpoint_v2(st->db, NULL, SQLITE_CHECKPOINT_TRUNCATE, &frames,
                                        &copied);
    sqlite3_busy_timeout(st->db, STORE_BUSY_TIMEOUT_MS);
    out->frames = frames;
    out->copied = copied;
    if ((src & 0xff) == SQLITE_BUSY || (src & 0xff) == SQLITE_LOCKED) {
        out->busy = 1;
        return 0;
    }
    return src == SQLITE_OK ? 0 : store_sqlite_err(src);
}
