/* store.h -- the SQLite store: devices, stacks, shapes, measurements, jobs.
 *
 * One database file, WAL, busy_timeout, every write in its own BEGIN
 * IMMEDIATE transaction (a measurement is durable when store_measurement_put
 * returns). Schema version in PRAGMA user_version, migrated forward on open.
 * A store handle is used by one thread at a time; open one handle per
 * thread (SQLite's own locking serializes writers across handles and
 * processes). */
#ifndef ATTUNE_STORE_H
#define ATTUNE_STORE_H

#include <stdint.h>

#include "../common/device_id.h"
#include "../common/shape.h"
#include "../common/tactic.h"

typedef struct store store;

/* Current schema version (PRAGMA user_version after open). */
#define STORE_SCHEMA_VERSION 10

typedef enum {
    STORE_OK = 0,
    STORE_UNSUPPORTED = 1,
    STORE_FAILED = 2,
    STORE_INACCURATE = 3
} store_status;

const char *store_status_name(store_status s);          /* "ok", ... */
int store_status_parse(const char *s, store_status *out);

/* One measurement row: (device, stack, shape, tactic) -> statistics. */
typedef struct store_measurement {
    char device_id[64];
    char stack_id[24];
    attn_shape shape;
    char tactic[ATTN_TACTIC_STR_MAX];
    store_status status;
    double time_us;        /* median kernel time per call (NaN if none) */
    double time_us_min, time_us_max;
    double time_us_copies; /* median including pad/unpad copies; NaN if pad=1 */
    int n;                 /* timing samples taken */
    double max_abs_err;    /* NaN when not checked */
    double rel_err;        /* relative L2 error vs float64 reference */
    double src_rel_err;    /* e4m3: relative L2 error vs the float64 reference of
                              the bf16 source its inputs were quantized from
                              (attn_ops.reference_source): the whole cost of
                              FP8, input rounding included; NaN otherwise
                              (rows of other dtypes are stored without one,
                              whatever this holds) */
    double err_ratio;      /* rel_err / min rel_err of the same (device, stack,
                              shape) ok rows; filled on read, NaN if none */
    char mode[24];         /* "wall", "cuda-graph" */
    char l2[16];           /* "warm", "flushed" */
    int rows_checked;      /* query rows compared against the reference */
    char note[128];        /* why unsupported/failed, "" otherwise */
    char power[48];        /* power mode of the row's stack (attn_stack.power),
                              filled on read; "" when none is known */
    int incumbent;         /* 1: the winner chosen by the last tune of this
                              (device, stack, shape); kept by re-measuring,
                              set only by store_winner_mark; not exported */
    int noisy;             /* 1: the timing stayed noisy after the tuner's
                              re-measures (tuner/noise.h; the note says how):
                              never a winner, measured again by the next tune,
                              not pushed to a fleet server */
    /* provenance */
    char host[64];
    int64_t taken_at;      /* unix seconds */
} store_measurement;

/* Open (create with create != 0) the database at path, migrate it to
 * STORE_SCHEMA_VERSION. On error *out is NULL, err says why (missing
 * directory, not a database, newer schema than this build knows). */
int store_open(const char *path, int create, store **out, char *err, size_t errlen);
void store_close(store *st);

/* A copy in memory of the database at path, which is opened read-only and
 * never written (an older schema is migrated in the copy): what an
 * in-process lookup reads (lookup/lookup_file.h). Writes go to the copy
 * and are lost at store_close. On error *out is NULL and err says why
 * (cannot open or read, not a database, newer schema). */
int store_open_snapshot(const char *path, store **out, char *err, size_t errlen);

/* Insert or refresh the device and its stack (the stack's fields kept so
 * exports and drift reports can show them). */
int store_device_put(store *st, const attn_device_info *info, const attn_stack *stack);

/* Look a device up by id ("GPU-..."/"CPU-...", byte for byte) or name
 * (case-insensitive; the most recently seen if several), the rules of
 * attn_device_match for a device of another host. ATTUNE_ENOTFOUND if
 * none. */
int store_device_get(store *st, const char *id_or_name, attn_device_info *info,
                     attn_stack *latest_stack);

/* Commit one measurement (insert or replace the row with the same device,
 * stack, shape and tactic) in its own transaction. */
int store_measurement_put(store *st, const store_measurement *m);

/* Every device in the store (local and imported) with its most recent
 * stack; *infos and *stacks malloc'd (caller frees both), *n entries,
 * most recently seen first. A device without a stack row gets an empty
 * stack. */
int store_devices_list(store *st, attn_device_info **infos, attn_stack **stacks, int *n);

/* 1 if a row exists for (device, stack, shape, tactic) and is not noisy, 0
 * if not (a noisy row is there to be measured again), <0 error. */
int store_measurement_exists(store *st, const char *device_id, const char *stack_id,
                             const attn_shape *s, const char *tactic);

/* All measurements of device for shape s. stack_id NULL: every stack (the
 * newest row per tactic first... ordered by tactic, then taken_at desc).
 * *out is malloc'd (caller frees), *n its length; err_ratio filled. */
int store_measurements_get(store *st, const char *device_id, const char *stack_id,
                           const attn_shape *s, store_measurement **out, int *n);

/* Mark tactic as the incumbent winner of (device, stack, shape) and clear
 * the mark on its other rows, in one transaction. tactic NULL clears all.
 * ATTUNE_ENOTFOUND when the shape has no rows. */
int store_winner_mark(store *st, const char *device_id, const char *stack_id,
                      const attn_shape *s, const char *tactic);

/* Every measurement of a device (all shapes), same ownership as above.
 * Used to build the daemon's in-memory index. */
int store_measurements_all(store *st, const char *device_id, store_measurement **out,
                           int *n);
/* The same, less the rows an export does not carry: those of a tune in
 * flight on a device tuned here (STORE_COMPLETE_ROW; docs/fleet.md, "Tunes
 * in flight"). */
int store_measurements_exported(store *st, const char *device_id, store_measurement **out,
                                int *n);

/* ---- following other connections' writes (store_watch.c) */

/* PRAGMA data_version of this handle: it changes whenever another
 * connection (thread or process) commits, never for this handle's own
 * commits. 0 or an error. */
int store_data_version(store *st, int64_t *version);

/* One device as the database has it: its row and latest stack (as
 * store_device_get gives them), and its measurements summed up: rows, sum
 * of taken_at, rows marked incumbent. A reader holding the same device
 * computes the same; a difference means its description or stack changed,
 * or rows were added, replaced, removed or (un)marked since. */
typedef struct store_fingerprint {
    attn_device_info info;
    attn_stack stack;
    int64_t rows, taken_sum, marks;   /* 0 for a device without rows */
} store_fingerprint;

/* The fingerprint of every device of the devices table, by device id;
 * *out malloc'd (NULL when *n == 0; caller frees). One statement: one
 * snapshot. 0 or an error. */
int store_fingerprints(store *st, store_fingerprint **out, int *n);

/* Distinct shapes measured on a device (malloc'd array). */
int store_shapes(store *st, const char *device_id, attn_shape **out, int *n);

/* ---- jobs: tuning work that survives restarts */

typedef enum {
    STORE_JOB_QUEUED = 0,
    STORE_JOB_RUNNING = 1,
    STORE_JOB_DONE = 2,
    STORE_JOB_FAILED = 3,
    STORE_JOB_CANCELED = 4
} store_job_state;

const char *store_job_state_name(store_job_state s);

/* What made a job: POST /v1/tune (or a grid), or tune on miss. */
typedef enum { STORE_JOB_TUNE = 0, STORE_JOB_MISS = 1 } store_job_kind;

/* "tune", "miss" */
const char *store_job_kind_name(store_job_kind k);

typedef struct store_job {
    int64_t id;
    char device_id[64];
    store_job_kind kind;
    store_job_state state;
    int done, total;         /* shapes finished / in the job */
    int64_t created_at, updated_at;
    char error[256];         /* failed: why */
    attn_shape *shapes;      /* malloc'd, total entries (NULL from list calls) */
} store_job;

/* Create a queued job over n shapes; *id receives its id. */
int store_job_create(store *st, const char *device_id, const attn_shape *shapes, int n,
                     int64_t *id);
/* The same for a job of the given kind. */
int store_job_create_kind(store *st, const char *device_id, store_job_kind kind,
                          const attn_shape *shapes, int n, int64_t *id);
/* Load a job with its shapes (job->shapes malloc'd; free with store_job_free). */
int store_job_get(store *st, int64_t id, store_job *job);
void store_job_free(store_job *job);
/* Update state, progress and error text (error may be NULL). */
int store_job_update(store *st, int64_t id, store_job_state state, int done,
                     const char *error);
/* Retention of tune on miss: delete every row of shape s on device_id (all
 * stacks) and the miss jobs of s there, in one transaction; *rows: the
 * measurements deleted; *jobs (malloc'd, NULL when none) and *njobs: the
 * ids of the miss jobs deleted (every one of s there: done, failed or
 * canceled), for the caller's job table. Nothing is deleted, and the answer
 * is ATTUNE_EEXIST when an explicit job (kind tune) of the device holds s,
 * ATTUNE_ESTATE when a miss job of s there is queued or running (ask again
 * after it ends); on error *jobs is NULL. */
int store_forget_miss_shape(store *st, const char *device_id, const attn_shape *s,
                            int64_t *rows, int64_t **jobs, int *njobs);
/* Jobs in the given state (or all with state < 0), oldest first, without
 * shapes; *out malloc'd. */
int store_jobs_list(store *st, int state, store_job **out, int *n);

/* ---- fleet tables (export/import, JSON, see docs/fleet.md) */

/* Serialize every measurement of a device (all stacks) with provenance as
 * a fleet table, less the rows of tunes in flight on a device tuned here
 * (store_measurements_exported); *json is malloc'd UTF-8 text. */
int store_export(store *st, const char *device_id, char **json);
/* *n: the rows of device_id (an id) that an export leaves out, those of
 * tunes in flight, canceled or failed (docs/fleet.md "Tunes in flight"). */
int store_export_held_back(store *st, const char *device_id, int64_t *n);

/* ---- streamed export (store_stream.c): the same table as store_export,
 * byte for byte except exported_at, written piece by piece from a
 * read-only connection of its own, so neither the whole table nor the
 * caller's store is held while a slow reader takes it. */

typedef struct store_export_stream store_export_stream;

/* Open the database at path read-only, start a read transaction (the
 * table is one snapshot) and prepare the export of device_id (id or name,
 * as store_device_get). ATTUNE_ENOTFOUND for an unknown device; on error
 * *out is NULL (err set). */
int store_export_open(const char *path, const char *device_id, store_export_stream **out,
                      char *err, size_t errlen);

/* The next piece of text: 1 with *text and *len set (valid until the next call),
 * 0 at the end, or a negative error (the table is then incomplete). */
int store_export_next(store_export_stream *x, const char **text, size_t *len);

/* End the transaction, close the connection, free x. NULL is a no-op. */
void store_export_close(store_export_stream *x);

typedef struct store_import_stats {
    int devices, stacks, measurements; /* rows written */
    int skipped;                       /* rows identical to existing ones */
    int pins;                          /* pins added (db/store_pins.h) */
} store_import_stats;

/* Validate a fleet table completely, then merge it in one transaction:
 * all or nothing. Any invalid field (type, range, unknown version, duplicate
 * row, oversize) rejects the whole table with err naming the first problem
 * (ATTUNE_EFORMAT / EVERSION / ETOOBIG) and the database unchanged. */
int store_import(store *st, const char *json, size_t len, store_import_stats *stats,
                 char *err, size_t errlen);

/* Size of the database file(s) in bytes (for metrics). */
int64_t store_size_bytes(store *st);

#endif
