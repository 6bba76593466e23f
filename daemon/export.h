/* export.h -- GET /v1/export: a device's fleet table streamed to the
 * client from a read-only database connection of its own.
 *
 * Why not the DB worker: an export of a large fleet device takes seconds
 * to build and tens of MB to hold; on the one worker thread it delayed
 * every job creation and cancel behind it (issue 15: 24 unread exports
 * held a DELETE for 137 s and grew memory by 600 MB). Streamed, an export
 * holds a connection and a snapshot, not the table, and the worker never
 * sees it. At most ATTUNED_EXPORTS_MAX run at once (503 beyond).
 *
 * Why no token: the export is read-only, and every row of it is readable
 * without a token through GET /v1/results (the API's rule: only mutating
 * routes take the token). What the token would have protected against is
 * cost, and the bound on concurrent exports, the per-address connection
 * limit and the export's deadline bound that: --export-timeout in all, and
 * a minimum rate (--export-min-rate) after ATTUNED_EXPORT_GRACE_S, so a
 * reader that takes a little every few seconds cannot hold a slot, and the
 * snapshot that pins the WAL, for as long as it likes (issue 29 item 4). */
#ifndef ATTUNED_EXPORT_H
#define ATTUNED_EXPORT_H

#include "http.h"

/* Answer r with the table of device_id (a resolved id): 200 and a chunked
 * stream, 404 for a device the database lacks, 503 when
 * ATTUNED_EXPORTS_MAX exports are running. */
enum MHD_Result export_stream(req *r, const char *device_id);

/* The DB worker's periodic look at the WAL: past ATTUNED_WAL_SHRINK_BYTES
 * with no export running (the long readers whose snapshots kept SQLite's
 * own checkpoints from finishing), checkpoint it all and truncate it,
 * waiting at most ATTUNED_WAL_CHECKPOINT_WAIT_MS for a shorter reader (a
 * reader still there: tried again at the next tick). */
void export_wal_tick(attuned *d, store *st);

#endif
