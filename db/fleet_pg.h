/* fleet_pg.h -- the fleet store on PostgreSQL: many attuned push their
 * measurements into one server, which keeps per-model aggregates that each
 * device pulls back (docs/fleet.md, "Fleet server").
 *
 * A connection is used by one thread at a time. Every push is one server
 * transaction: the rows, the dimension rows they need, and the pushing
 * store's watermark commit together or not at all, so a push killed at any
 * moment is repeated whole and, keyed by (model, stack, shape, tactic,
 * device), never doubles a row.
 *
 * Credentials never travel in the URL: a URL with a password is refused
 * (without echoing it); libpq reads PGPASSWORD, PGPASSFILE or ~/.pgpass.
 *
 * Built without libpq (ATTUNE_HAVE_LIBPQ unset), every function returns
 * ATTUNE_EUNSUPP. */
#ifndef ATTUNE_FLEET_PG_H
#define ATTUNE_FLEET_PG_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

typedef struct fleet_pg fleet_pg;

/* Server schema version (table attune_meta, key schema_version). */
#define FLEET_PG_SCHEMA_VERSION 4

/* Pulled aggregates live in the local store as one device per model whose
 * id is this prefix + 16 hex digits of the model's hash (fleet_model_id),
 * host "fleet", ordinal -1: the import format of docs/fleet.md. */
#define FLEET_DEVICE_PREFIX "FLEET-"
#define FLEET_HOST "fleet"

/* A device is a "model" member when name, kind, compute capability, SM
 * count and the model's memory are equal (device_model.h: memory rounded
 * up to its built size, so two hosts of one model agree; server schema 3,
 * store schema 9 re-keyed the ids of older versions). Writes
 * "FLEET-<16 hex of device_model_text's FNV-1a>" into out (>= 24). */
void fleet_model_id(const attn_device_info *d, char *out, size_t len);

/* 1 when id names a pulled fleet-aggregate device. */
int fleet_is_model_device(const char *id);

/* Check a connection URL/conninfo before use: ATTUNE_EINVAL (err says
 * why, never quoting the URL) when it carries a password or is empty. */
int fleet_pg_url_check(const char *url, char *err, size_t errlen);

/* Connect and bring the server schema to FLEET_PG_SCHEMA_VERSION (created
 * when absent, refused with ATTUNE_EVERSION when newer). On error *out is
 * NULL and err says why (libpq's message; it never contains a password). */
int fleet_pg_connect(const char *url, fleet_pg **out, char *err, size_t errlen);
void fleet_pg_close(fleet_pg *c);

/* "host=... db=..." of a live connection, for logs (no credentials). */
void fleet_pg_describe(fleet_pg *c, char *buf, size_t len);

/* One push: devices and stacks that rows refer to by id, the rows, and the
 * pusher's watermark. */
typedef struct fleet_batch {
    const attn_device_info *devices;
    const char *const *device_hosts; /* host of each device (may be NULL) */
    int ndevices;
    const attn_stack *stacks;
    int nstacks;
    const store_measurement *rows;  /* device_id/stack_id name entries above */
    int nrows;
    const char *source;             /* pushing store's id; NULL: no watermark */
    int64_t last_seq;               /* its watermark once this batch commits */
} fleet_batch;

typedef struct fleet_push_stats {
    int64_t sent;      /* rows the server committed (merged or not) */
    int64_t rejected;  /* malformed rows refused before sending */
    int64_t skipped;   /* batches the server already had (watermark) */
} fleet_push_stats;

/* Validate every row (store_check_*), send the valid ones with COPY and
 * merge them in one transaction: a row replaces the server's only when its
 * taken_at is newer (or equal with different values), so re-pushes change
 * nothing. Malformed rows are counted in stats->rejected (first reason in
 * err, return value still 0) and never sent. When source is set and the
 * server's watermark for it is already >= last_seq, nothing is written
 * (stats->skipped). stats accumulates (caller zeroes it). 0 or an error
 * (ATTUNE_EIO: connection lost; EDB: the server refused), with the
 * transaction rolled back. */
int fleet_pg_push(fleet_pg *c, const fleet_batch *b, fleet_push_stats *stats, char *err,
                  size_t errlen);

/* The outcome of one batch of a stream of pushes, told in order. */
typedef struct fleet_push_done {
    int64_t last_seq;      /* the batch's (fleet_batch.last_seq) */
    int skipped;           /* 1: nothing written: the server's watermark was already
                            * there, or (a stream's later batch) was not where the
                            * batch before left it, so this batch was refused; the
                            * rows may not be on the server: do not count them sent */
    int64_t sent;          /* rows the server committed (0 when skipped) */
    int64_t rejected;      /* malformed rows, never sent */
    const char *first_bad; /* why the first was refused ("" if none); valid during the call */
} fleet_push_done;

/* The next batch into *b: 1, or 0 when there is none, or a negative
 * error (which the stream returns as is). The stream holds two batches
 * (one being sent, the next being checked meanwhile): b's pointers must
 * stay valid until next has been called twice more (or the stream
 * returned), e.g. two buffers used in turn. */
typedef int (*fleet_push_next_fn)(void *arg, fleet_batch *b);

/* A batch's outcome, once its transaction has committed (or was
 * skipped): 0 to go on, > 0 to stop (no batch after the one in flight
 * is sent, though that one may have committed; the stream returns 0), or
 * a negative error (returned as is). */
typedef int (*fleet_push_done_fn)(void *arg, const fleet_push_done *d);

/* 1 when the last server error c reported (since the last push stream
 * began) was PostgreSQL ending a transaction to resolve a conflict with
 * another session: deadlock_detected (40P01) or serialization_failure
 * (40001), as two pushers inserting rows of the same keys in different
 * orders can meet. Nothing of that transaction committed; doing the same
 * work again may succeed. */
int fleet_pg_conflicted(const fleet_pg *c);

/* fleet_pg_push for the batches next gives, in order, until it says none:
 * each batch one transaction as fleet_pg_push makes it, two at a time:
 * the next batch is asked for, checked and keyed while this one's rows
 * go, and its rows are copied at the same time on a second connection to
 * the server (opened on c when a stream first has two batches, and kept),
 * each batch's transaction run by a thread of the stream's own, so that
 * the server inserts with two backends. Two batches that hold a key in
 * common do not run at once. The server keeps the commit order (the later
 * batch's last statements wait for the earlier one's transaction, and its
 * watermark moves only from the earlier one's): no batch of a source
 * commits before the batch of that source before it, nor when that one
 * did not (batches of no source, or the first of another source, have no
 * such order). next and done must not use c (its connection may be a
 * lane a stream's thread is using). done and next are called
 * on the caller's thread; done hears of each batch only after its own
 * COMMIT succeeded (or it was skipped), in order: a caller that
 * acknowledges batches in done acknowledges only committed ones. The
 * next batch may have committed too when done hears of one (and is not
 * told when done says stop). On an error every transaction is ended; a
 * batch done did not hear of is not acknowledged, though the server may
 * have it (a connection lost after its COMMIT went): sending it again is
 * a no-op. 0 or the error (err says why, except for next's and done's
 * own). */
int fleet_pg_push_stream(fleet_pg *c, fleet_push_next_fn next, fleet_push_done_fn done,
                         void *arg, char *err, size_t errlen);

/* The server's watermark of source (0 when it never pushed). */
int fleet_pg_source_seq(fleet_pg *c, const char *source, int64_t *seq, char *err,
                        size_t errlen);

/* Recompute the aggregates of groups pushed since the last refresh: of the
 * model of d, or of every model with d NULL (one transaction per model,
 * waiting for a refresh in progress). *groups: groups recomputed. */
int fleet_pg_refresh(fleet_pg *c, const attn_device_info *d, int64_t *groups, char *err,
                     size_t errlen);

/* Pulling the aggregates of d's model, every stack, as fleet rows of the
 * model's fleet device (docs/fleet.md, "fleet rows": device FLEET-<hash>,
 * host "fleet"; time_us the median over devices of their medians, min/max
 * the extreme medians, n the devices with an ok row, rel_err and
 * max_abs_err the largest of any device, status the most common one,
 * taken_at when the aggregate was computed, note "fleet: N devices (K
 * ok), spread S, M outliers"). The server's values are untrusted like any
 * fleet table's: the caller checks each row before it stores it
 * (fleet_local_pull). */
typedef struct fleet_pg_pull fleet_pg_pull;

typedef struct fleet_pg_pull_head {
    attn_device_info device;   /* the model: FLEET-<hash>, clocks 0, index -1 */
    const attn_stack *stacks;  /* the stacks the rows name */
    int nstacks;
    const char *latest_stack;  /* id of the stack refreshed last (in stacks) */
    int64_t newest;            /* the newest row's taken_at */
    int64_t rows;              /* rows that follow */
} fleet_pg_pull_head;

/* Start a pull. Groups pushed since the model's last refresh are
 * recomputed first: always, waiting for a refresh in progress, with
 * refresh_after_s <= 0; otherwise only when the last refresh is older than
 * that and no other session is refreshing the model (a pull of a busy
 * fleet then reads the aggregates as they are: recomputing 200 groups of a
 * 100-device model sorts 800k rows). Then the head is read and the rows
 * start streaming. *out is NULL (and 0 returned) when the server has no
 * aggregates of the model. On success the caller reads the rows with
 * fleet_pg_pull_next and ends with fleet_pg_pull_close. */
int fleet_pg_pull_open(fleet_pg *c, const attn_device_info *d, int refresh_after_s,
                       fleet_pg_pull **out, char *err, size_t errlen);

/* The model's fleet device and stacks (owned by p, valid until close). */
const fleet_pg_pull_head *fleet_pg_pull_head_get(const fleet_pg_pull *p);

/* The next row into *m: 1, or 0 after the last, or a negative error
 * (ATTUNE_EIO: connection lost). */
int fleet_pg_pull_next(fleet_pg_pull *p, store_measurement *m, char *err, size_t errlen);

/* End the pull (the rows not read are dropped) and free p. */
void fleet_pg_pull_close(fleet_pg_pull *p);

typedef struct fleet_pg_info {
    int schema_version;
    int64_t models, devices, stacks, shapes, measurements, aggregates, dirty, outliers;
    int64_t source_seq;     /* watermark of the asked source, 0 if none */
} fleet_pg_info;

int fleet_pg_info_get(fleet_pg *c, const char *source, fleet_pg_info *out, char *err,
                      size_t errlen);

/* Run one SQL text (benchmarks and tests: setup, counts). 0 or EDB. */
int fleet_pg_exec(fleet_pg *c, const char *sql, char *err, size_t errlen);

#endif
