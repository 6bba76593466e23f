/* fleet_local.h -- the local store's side of fleet sync: which committed
 * rows the fleet server has not seen yet, pushing them, and pulling the
 * aggregates of this host's models back as fleet rows.
 *
 * Every committed write of a measurement (by attuned, attune tune, attune
 * import) appends its key to the log table fleet_log through triggers, in
 * the writer's own transaction, so the log is exactly the committed rows in
 * commit order (SQLite serializes writers). Pushing sends the rows of log
 * entries after the server's watermark for this store (its "source" id),
 * and the server commits rows and watermark together; the local watermark
 * and log pruning follow only after that commit. Kill either side at any
 * moment: the next push resends at most one batch, which the server's keys
 * make a no-op.
 *
 * A copy of the database file (a cloned image, a restored backup) holds
 * the same source id. A store therefore acknowledges only batches that its
 * own server transaction committed, never what the server's watermark
 * alone says; a watermark ahead of its acknowledged mark makes it take a
 * fresh source id and push on from that mark (reconcile() in
 * fleet_local.c; docs/fleet.md, "Copies of a store").
 *
 * Pulled aggregates (device FLEET-<hash>, fleet_pg.h) are never logged, so
 * they never travel back to the server.
 *
 * Every push and every pull ends with the exchange of the store's pins
 * (fleet_pins.h: all of them each time, merged last-writer-wins). */
#ifndef ATTUNE_FLEET_LOCAL_H
#define ATTUNE_FLEET_LOCAL_H

#include <stdint.h>

#include "fleet_pg.h"
#include "store.h"

/* Rows per push transaction by default. */
#define FLEET_PUSH_BATCH 5000

/* How many rounds in a row one push may make without its acknowledged
 * mark moving (a round reconciles with the server, then sends batches).
 * Past that, another holder of the source id keeps forcing new rounds,
 * and the push ends with ATTUNE_EBUSY, the rest pending. */
#define FLEET_PUSH_ROUNDS 8

/* Create the log, its triggers and this store's source id when absent
 * (seeding the log with every existing non-fleet row, in the same
 * transaction); idempotent. source (>= 40 bytes) receives the id. */
int fleet_local_setup(store *st, char *source, size_t len, char *err, size_t errlen);

typedef struct fleet_local_state {
    char source[40];
    int64_t acked;     /* local copy of the server's watermark */
    int64_t last_seq;  /* newest log entry (0: none) */
    int64_t pending;   /* log entries after acked: rows not yet on the server */
} fleet_local_state;

/* Read the state (after fleet_local_setup). */
int fleet_local_state_get(store *st, fleet_local_state *out);

typedef struct fleet_local_push {
    int64_t batches;   /* transactions committed on the server */
    fleet_push_stats rows; /* rows.skipped: batches the server refused as
                            * already there (another holder of the source
                            * id got there first): not acknowledged; the
                            * push reconciles again and goes on */
    int64_t acked;     /* watermark after the push */
    int64_t new_sources; /* fresh source ids taken: a copy of this store (or a
                          * lost acknowledgement) found, or lost server commits */
    char first_rejected[512]; /* why the first malformed row was refused */
    /* The pins' exchange that ends a push (fleet_pins.h), reported apart
     * from the rows (they are on the server whatever it does): pins_rc 0
     * or its error, pins_err why; pins_skipped: pulled rules left out,
     * PIN_MAX rules being in force here. Callers show both. */
    int pins_rc;
    int pins_skipped;
    char pins_err[256];
} fleet_local_push;

/* Asked between batches; nonzero ends a push early. */
typedef int (*fleet_stop_fn)(void *arg);

/* Push every pending row in batches of batch_rows (<= 0: default), each
 * batch one server transaction, then its local acknowledgement. stop (may
 * be NULL) is asked between batches: nonzero ends the push early (0 is
 * returned; the rest stays pending). stats accumulates (caller zeroes).
 * 0 or the first error (ATTUNE_EIO: the server went away; ATTUNE_EBUSY:
 * FLEET_PUSH_ROUNDS rounds without progress, the rest stays pending).
 * After a push without error, the pins are exchanged (fleet_local_pins):
 * its outcome is in stats->pins_*, not in the return value. */
int fleet_local_push_pending(store *st, fleet_pg *c, int batch_rows, fleet_stop_fn stop,
                             void *stop_arg, fleet_local_push *stats, char *err,
                             size_t errlen);

/* Pull the aggregates of the models of devs[0..n) (duplicates pulled once)
 * into st as fleet rows, validated and merged as store_import would (only
 * newer rows replace older ones); refresh_after_s as fleet_pg_pull_open's.
 * The rows are written as they stream in, in transactions of a few
 * thousand rows that each end between two shapes, so a tune committing
 * meanwhile never waits on the network. A refused row or a lost connection
 * ends the pull with its error and leaves the chunks before it (each shape
 * whole, its rows all from this pull or all as they were, unless a shape
 * has more rows than a chunk's 8,192 at most); a fleet device the store
 * lacks is inserted first (its newest time, no latest stack), and a known
 * one's latest stack and last_seen move only with the model's last chunk. *rows: aggregate rows committed. Ends with the pins' exchange,
 * whose error (a malformed pin on the server) is the pull's; rules left
 * out at PIN_MAX are not an error: *pins_skipped (may be NULL) counts
 * them. */
int fleet_local_pull(store *st, fleet_pg *c, const attn_device_info *devs, int n,
                     int refresh_after_s, int64_t *rows, int *pins_skipped, char *err,
                     size_t errlen);

/* The stack row id of st: 0, ATTUNE_ENOTFOUND, or a database error. */
int fleet_local_stack(store *st, const char *id, attn_stack *out);

#endif
