/* sync.h -- keeping the lookup index equal to the database: the one module
 * that puts rows into the index (index.h), whoever wrote them.
 *
 *   start      sync_load: this host's devices registered in the store and
 *              the index, then every device's rows;
 *   own tunes  sync_row, the tuner's commit callback (tuner_opts.committed):
 *              each committed row, and the winner's mark, taken as they
 *              are; nothing is read back;
 *   imports    sync_refresh after POST /v1/import, on the DB worker: each
 *              device's fingerprint in the database (store_fingerprints:
 *              its description and latest stack; rows, sum of taken_at,
 *              marks) is compared with the index's (index_device_view),
 *              and only a device that differs, or that the index lacks,
 *              is reloaded whole;
 *   SIGHUP     sync_reload, on the DB worker: every device;
 *   pins       sync_pins: every pin (a few rows), read whole at start,
 *              after each pin route's write, and with every reload or
 *              refresh below (another process's `attune pin --db`, an
 *              import, a fleet pull);
 *   others     sync_watch, on the DB worker every ATTUNED_WATCH_PERIOD_S:
 *              when the database's data_version moved (another connection
 *              committed: another process, the fleet thread's pull, or this
 *              one's job threads), the comparison of sync_refresh. The
 *              daemon's own rows are in the index already (via sync_row),
 *              so they match and cost only the comparison; a look between
 *              a commit and its sync_row costs an extra reload, no more.
 *
 * A reload builds a device's rows outside the index lock and swaps them in
 * whole (index_device_load_since): readers see the old table or the new
 * one, never a mix. A row sync_row put while the reload read (its commit
 * perhaps after the read began) makes the swap refuse and the read start
 * again (twice in all, then the next look): an older read never
 * replaces a newer row. A device that fails to reload keeps its old rows; the
 * failure is logged and counted (attune_index_reload_failures_total). */
#ifndef ATTUNED_SYNC_H
#define ATTUNED_SYNC_H

#include "../db/store.h"
#include "../lookup/index.h"

typedef struct sync_state {
    index_state *ix;
    const attn_device *local;   /* this host's devices, registry order */
    int nlocal;
    int64_t version;            /* data_version at the last complete look */
    int looked;                 /* 0 until then */
    /* Tests only (NULL in attuned): called in every reload of a device's
     * rows between the database read and the swap, where a job thread's
     * commit and sync_row may land. */
    void (*after_read)(void *ctx, const char *device_id);
    void *after_read_ctx;
} sync_state;

/* Set s up over ix and the local devices (kept by reference). */
void sync_init(sync_state *s, index_state *ix, const attn_device *local, int nlocal);

/* Start: put every local device in st and the index and load its rows,
 * then every other device st knows (fleet) with its identity, latest
 * stack and rows. 0 or the first error. */
int sync_load(sync_state *s, store *st);

/* Read every pin of st into the index (index_pins_set). 0 or the
 * store's error (logged, counted; the index keeps its old pins). */
int sync_pins(sync_state *s, store *st);

/* Reload every device of st (local ones' rows; fleet ones' identity,
 * stack and rows), one at a time, each swapped in whole. reason names
 * the caller in the log ("sighup"). 0 or the first error; the
 * devices that failed keep their old rows. */
int sync_reload(sync_state *s, store *st, const char *reason);

/* Reload the devices of st whose fingerprint differs from the index's
 * (see above); reason names the caller in the log ("import"). 0 or the
 * first error; the devices that failed keep their old rows. */
int sync_refresh(sync_state *s, store *st, const char *reason);

/* One look at st for other connections' commits: sync_refresh when
 * data_version moved (see above). Errors are logged and the look is
 * tried again at the next call. */
void sync_watch(sync_state *s, store *st);

/* The tuner's commit callback: ctx is the index_state. Puts m into the
 * index (index_row_put); a failure is logged, and the next sync_watch
 * reloads the device, whose fingerprint then differs. */
void sync_row(void *ctx, const store_measurement *m);

#endif
