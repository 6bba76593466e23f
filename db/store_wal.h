/* store_wal.h -- the write-ahead log's size, and the checkpoint that
 * shrinks it back after long readers.
 *
 * SQLite checkpoints the WAL into the database by itself (every 1000
 * pages), but only up to the oldest open read snapshot, and it never makes
 * the file smaller: a streamed export held open for minutes while imports
 * commit leaves a WAL of tens of MB for good (issue 29: 11.9 -> 74.1 MB,
 * still there after the exports closed). store_wal_checkpoint copies it all
 * back and truncates it once no reader needs it. */
#ifndef ATTUNE_STORE_WAL_H
#define ATTUNE_STORE_WAL_H

#include <stdint.h>

#include "store.h"

/* Bytes of the database's WAL file (path + "-wal") now: 0 when there is
 * none (or for ":memory:"), ATTUNE_EIO when it cannot be read. */
int64_t store_wal_bytes(store *st);

/* What one checkpoint did. */
typedef struct store_wal_result {
    int busy;         /* a reader (or writer) held it up: not truncated */
    int frames;       /* frames in the WAL before (-1: unknown) */
    int copied;       /* of those, now in the database file (-1: unknown) */
} store_wal_result;

/* Checkpoint every frame of the WAL into the database and truncate the
 * WAL to zero bytes (wal_checkpoint(TRUNCATE)), waiting at most busy_ms
 * for readers still on older snapshots (the handle's busy timeout is
 * restored after). A reader that outlasts the wait leaves out->busy set,
 * the frames it pins in place and the file as it was: call again later.
 * Takes the write lock: call from the thread that writes (the daemon's DB
 * worker), not from a read-only handle. 0 (busy or not) or an error. */
int store_wal_checkpoint(store *st, int busy_ms, store_wal_result *out);

#endif
