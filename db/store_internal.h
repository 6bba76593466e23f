/* store_internal.h -- what the db/store*.c files share.
 *
 * Not part of the store's contract (db/store.h is): the handle's layout,
 * SQLite error mapping, transactions and the field checks that both
 * store_measurement_put and store_import apply, so that whatever the store
 * accepts from the tuner it also accepts back from its own export. Tests
 * may include it to look at the raw connection. */
#ifndef ATTUNE_STORE_INTERNAL_H
#define ATTUNE_STORE_INTERNAL_H

#include <sqlite3.h>

#include "store.h"

/* Prepared statements, cached on the handle (SQLITE_PREPARE_PERSISTENT):
 * the tuner commits one row per tactic and the daemon reads per request. */
typedef enum {
    STMT_BEGIN, STMT_BEGIN_READ, STMT_COMMIT, STMT_ROLLBACK,
    STMT_SHAPE_INSERT, STMT_SHAPE_SELECT,
    STMT_STACK_UPSERT, STMT_DEVICE_UPSERT, STMT_DEVICE_GET,
    STMT_MEAS_PUT, STMT_MEAS_MERGE, STMT_MEAS_EXISTS, STMT_MEAS_READ, STMT_MEAS_READ_ALL,
    STMT_MEAS_READ_EXPORTED,
    STMT_SHAPES, STMT_WINNER_MARK, STMT_WINNER_CLEAR,
    STMT_MARK_FASTEST,
    STMT_JOB_INSERT, STMT_JOB_SHAPE_INSERT, STMT_JOB_GET, STMT_JOB_SHAPES,
    STMT_JOB_TOTAL, STMT_JOB_UPDATE, STMT_JOBS_LIST,
    STMT_EXPORT_STACKS,
    STMT_FINGERPRINTS,
    STMT_COUNT
} store_stmt_id;

struct store {
    sqlite3 *db;  /* opened SQLITE_OPEN_NOMUTEX: one thread at a time */
    char *path;   /* as given to store_open, for messages and sizes */
    sqlite3_stmt *stmt[STMT_COUNT];
};

/* Bounds on imported/stored values (see docs/fleet.md). */
#define STORE_MAX_TIME_US   1e12          /* 11.6 days per call */
#define STORE_MAX_N         1000000000
#define STORE_MAX_TAKEN_AT  4102444800LL  /* 2100-01-01 */
/* How far past this host's clock a time from elsewhere may be: clocks
 * drift, but a row or table from later than this comes from a clock set
 * wrong, and would outrank every later write (last_seen, taken_at). */
#define STORE_FUTURE_SLACK_S 86400
#define STORE_MAX_MEMORY_MB (1LL << 40)
#define STORE_MAX_COUNT     1000000       /* sm_count, clocks */
#define STORE_MAX_JOB_SHAPES 1000000

/* Busy timeout on every connection, milliseconds. */
#define STORE_BUSY_TIMEOUT_MS 5000

/* Map a SQLite result code to an attune code: BUSY/LOCKED -> EBUSY,
 * NOMEM -> ENOMEM, FULL/IOERR/CANTOPEN/READONLY -> EIO, NOTADB -> EFORMAT,
 * foreign key violations -> ENOTFOUND, anything else -> EDB. */
int store_sqlite_err(int src);

/* The one write-transaction path: BEGIN IMMEDIATE, body(st, ctx), COMMIT;
 * when BEGIN, the body or COMMIT fails, ROLLBACK and return that first
 * error (the body's return value when it is the one). 0 on commit. */
typedef int (*store_tx_body)(store *st, void *ctx);
int store_tx(store *st, store_tx_body body, void *ctx);

/* The one read-snapshot path: body(st, ctx) sees one consistent state of
 * the database. The BEGIN's error, else the body's return value. */
int store_snapshot(store *st, store_tx_body body, void *ctx);

/* The same snapshot held across calls (the streamed export): every read
 * between store_read_begin and store_read_end sees one state. read_begin:
 * 0 or an error; read_end may be called when none is open. */
int store_read_begin(store *st);
void store_read_end(store *st);

/* The cached statement id, prepared from sql on first use (each id has
 * exactly one SQL text), reset and unbound otherwise. 0 or a mapped error.
 * Every user calls store_stmt_done(q) when finished with it, on success
 * and failure paths alike, so no read stays open on the connection. */
int store_stmt(store *st, store_stmt_id id, const char *sql, sqlite3_stmt **out);
void store_stmt_done(sqlite3_stmt *q);

/* store_stmt with ?1 bound: to text (copied; NULL as SQL NULL) or to an
 * integer. A failed bind is ATTUNE_EDB with *out set all the same, so the
 * caller's store_stmt_done(q) holds on every path. */
int store_stmt_text(store *st, store_stmt_id id, const char *sql, const char *text,
                    sqlite3_stmt **out);
int store_stmt_int(store *st, store_stmt_id id, const char *sql, int64_t v,
                   sqlite3_stmt **out);

/* Step a statement that returns no row: 0 or a mapped error. */
int store_exec(sqlite3_stmt *q);

/* Step a statement that must return a row: 0 with the row current,
 * ATTUNE_ENOTFOUND when there is none, or a mapped error. */
int store_step_row(sqlite3_stmt *q);

/* The end of every single-statement write: bind_failed is the OR of the
 * bind calls' results (non-zero: ATTUNE_EDB, q is not stepped), else q is
 * stepped; *changed (may be NULL) is then 1 when a row was inserted or
 * modified. q is reset (store_stmt_done) either way. 0 or the error. */
int store_write(store *st, sqlite3_stmt *q, int bind_failed, int *changed);

/* Bind a text, NULL as SQL NULL (copied: SQLITE_TRANSIENT). */
int store_bind_text(sqlite3_stmt *q, int i, const char *s);
/* Bind a double, NaN as SQL NULL. */
int store_bind_double(sqlite3_stmt *q, int i, double v);
/* Column as double, SQL NULL as NaN. */
double store_column_double(sqlite3_stmt *q, int i);
/* Copy a text column into buf (truncating, always NUL-terminated). */
void store_column_text(sqlite3_stmt *q, int i, char *buf, size_t len);

/* A device with its latest stack: the columns store_device_row reads
 * (STORE_DEVICE_NCOLS of them, from column 0), the FROM clause they need,
 * and the two as one SELECT (callers add WHERE / ORDER BY). */
#define STORE_DEVICE_COLS                                                        \
    "d.id, d.name, d.kind, d.idx, d.cc_major, d.cc_minor, d.sm_count, "         \
    "d.memory_mb, d.clock_mhz, d.mem_clock_mhz, s.id, s.driver, s.runtime, "     \
    "s.blas, s.attune, s.kernels, s.power "
#define STORE_DEVICE_NCOLS 17
#define STORE_DEVICE_FROM "FROM devices d LEFT JOIN stacks s ON s.id = d.latest_stack "
#define STORE_DEVICE_SELECT "SELECT " STORE_DEVICE_COLS STORE_DEVICE_FROM

/* Read the current row of a STORE_DEVICE_SELECT statement; stack may be
 * NULL. A device without a stack row gets an all-empty stack. */
void store_device_row(sqlite3_stmt *q, attn_device_info *info, attn_stack *stack);

/* The columns of a stack row, in the order STORE_STACK_COLS names them. */
#define STORE_STACK_COLS "id, driver, runtime, blas, attune, kernels, power"
/* Read a stack from q's columns first.. first+6 (STORE_STACK_COLS' order;
 * SQL NULLs read as ""). */
void store_stack_row(sqlite3_stmt *q, int first, attn_stack *s);

/* Step q to its end, each row read by read(q, row) into the next element
 * (size bytes) of a malloc'd array: the one row-collecting loop of the
 * store. Returns 0 with *out (NULL when no row) and *n, or the error of
 * read or SQLite with *out NULL and *n 0. */
typedef int (*store_row_fn)(sqlite3_stmt *q, void *row);
int store_collect(sqlite3_stmt *q, size_t size, store_row_fn read, void **out, int *n);

/* Imported rows are whole tunes (exports and pushes carry only completed
 * ones), but marks are not exported, and readers count an unmarked (stack,
 * shape) of a device tuned here, or of one with any mark, as a tune in
 * flight (STORE_COMPLETE_ROW, select_complete). So an import marks what
 * it brought, where the tuner would have put the mark with nothing to keep
 * (the rule of migration 2 -> 3): on the fastest ok row that is not noisy
 * (time with copies when stored), else on the fastest timed inaccurate one.
 * store_mark_fastest: that mark on the (stack_id, shape_id) of device_id,
 * unless one of its rows is marked already. Inside a transaction; 0 or the
 * store's error. */
int store_mark_fastest(store *st, const char *device_id, const char *stack_id, int64_t shape_id);

/* Id of the shapes row of s, inserting it when new. Inside a transaction. */
int store_shape_id(store *st, const attn_shape *s, int64_t *id);

/* Step q (columns b, hq, hkv, sq, skv, d, dtype, causal from column 0)
 * to the end into a malloc'd array (*out NULL when none). */
int store_collect_shapes(sqlite3_stmt *q, attn_shape **out, int *n);

/* Current unix time, seconds. */
int64_t store_now(void);

/* ---- field checks (0 or ATTUNE_EINVAL with err naming the field) */

/* An id: 1..max-1 bytes of [A-Za-z0-9._:-] (device ids, job devices). */
int store_check_id(const char *s, size_t max, const char *field, char *err, size_t errlen);
/* 16 lowercase hex digits. */
int store_check_hex16(const char *s, const char *field, char *err, size_t errlen);
/* Free text: < max bytes, valid UTF-8, no control characters. */
int store_check_text(const char *s, size_t max, const char *field, char *err, size_t errlen);
/* A word: < max bytes of [A-Za-z0-9._-] (may be empty). */
int store_check_word(const char *s, size_t max, const char *field, char *err, size_t errlen);

/* Every field of a device description. */
int store_check_device(const attn_device_info *d, char *err, size_t errlen);
/* Every field of a stack; its id must be attn_stack_finish of the others. */
int store_check_stack(const attn_stack *s, char *err, size_t errlen);
/* A time t (unix seconds, field names it) no later than store_now() +
 * STORE_FUTURE_SLACK_S: 0, or ATTUNE_EINVAL with err saying so. */
int store_check_not_future(int64_t t, const char *field, char *err, size_t errlen);
/* Every field of a measurement except err_ratio (computed on read). The
 * tactic must parse; its canonical text goes to canon (ATTN_TACTIC_STR_MAX
 * bytes). taken_at is not compared with this host's clock here (a fleet
 * push of this host's rows after its clock was set back must not refuse
 * them; imports check it: store_check_not_future). */
int store_check_measurement(const store_measurement *m, char *canon, char *err,
                            size_t errlen);

/* ---- rows */

/* Write one measurement row (canonical tactic text in tactic) inside a
 * transaction. only_newer = 0: insert or replace; 1: an existing row is
 * replaced only when m->taken_at is newer. *written (may be NULL) is 1 when
 * the row was inserted or replaced, 0 when kept; *shape_id (may be NULL)
 * the id of its shape's row. */
int store_write_measurement(store *st, const store_measurement *m, const char *tactic,
                            int only_newer, int *written, int64_t *shape_id);

/* Upsert a device row (inside a transaction; the stack row must exist).
 * seen is when the device was last seen (device_put: now; import: its
 * newest measurement). An existing row takes the new description and
 * latest_stack only when seen is not older than its last_seen, so an old
 * table never overrides newer knowledge; index < 0 (imported) keeps the
 * local CUDA ordinal. seen later than now is taken as now, and a stored
 * last_seen later than now (a clock that was ahead) never holds a write
 * back. *changed (may be NULL) is 1 when the row was inserted or actually
 * modified, 0 when it was already identical. */
int store_upsert_device(store *st, const attn_device_info *d, int64_t seen,
                        const char *latest_stack, int *changed);
/* Insert a stack row unless present (its id is a hash of its fields, so an
 * existing row is the same stack). *changed: 1 inserted, 0 present. */
int store_upsert_stack(store *st, const attn_stack *s, int *changed);

/* ---- schema (store_schema.c) */

/* Bring a freshly opened database to STORE_SCHEMA_VERSION: create it when
 * empty, migrate it forward when older, refuse it (ATTUNE_EVERSION) when
 * newer, refuse a database that is not attune's (ATTUNE_EFORMAT). */
int store_schema_migrate(store *st, char *err, size_t errlen);

/* A measurement's columns (measurements m JOIN shapes s): what
 * store_meas_columns reads, STORE_MEAS_NCOLS of them. */
#define STORE_MEAS_COLS                                                                 \
    "m.device_id, m.stack_id, s.b, s.hq, s.hkv, s.sq, s.skv, s.d, s.dtype, s.causal, "  \
    "m.tactic, m.status, m.time_us, m.time_us_min, m.time_us_max, m.time_us_copies, "   \
    "m.n, m.max_abs_err, m.rel_err, m.mode, m.l2, m.rows_checked, m.note, m.host, "     \
    "m.taken_at, m.noisy, m.src_rel_err"
#define STORE_MEAS_NCOLS 27

/* Read the STORE_MEAS_COLS of q from column first into m (zeroed first;
 * incumbent, err_ratio and power are not among them). 0, or ATTUNE_EDB
 * when the dtype or the status does not parse: the row is read all the
 * same, with shape.d 0 or the status out of range so that
 * store_check_measurement refuses it. */
int store_meas_columns(sqlite3_stmt *q, int first, store_measurement *m);

/* ---- shared with store_stream.c (streamed fleet export) */

/* What leaves this store (an export, a fleet push): SQL true for a row m
 * (an alias) of device dev (SQL text: a parameter, or m's device_id) that
 * holds no partial tune. On a device tuned here (one with a row marked
 * incumbent: the mark is the tuner's and is not exported), only rows of a
 * (stack, shape) whose tune completed, i.e. one of whose rows carries the
 * mark (select_complete's rule, as lookups read it); a device without any
 * mark (imported) whole. A tune in flight, canceled or failed leaves its
 * rows home until a tune of that (stack, shape) completes. */
#define STORE_COMPLETE_ROW(m, dev)                                                    \
    "(NOT EXISTS (SELECT 1 FROM measurements mk WHERE mk.device_id = " dev             \
    " AND mk.incumbent = 1) OR EXISTS (SELECT 1 FROM measurements mg"                  \
    " WHERE mg.device_id = " m ".device_id AND mg.stack_id = " m ".stack_id"           \
    " AND mg.shape_id = " m ".shape_id AND mg.incumbent = 1))"

/* SELECT of every measurement of device ?1 an export carries
 * (STORE_COMPLETE_ROW; ?2: stack or NULL), ordered as
 * store_measurements_exported, cheap to start (no whole-table sort) and
 * without err_ratio; rows read with store_meas_row_read. */
const char *store_meas_all_sql(void);
int store_meas_row_read(sqlite3_stmt *q, store_measurement *m);

/* The fleet-table objects of store_fleet.c (jansson; NULL on ENOMEM). */
#include <jansson.h>
json_t *store_fleet_measurement_json(const store_measurement *m);
/* The root of a device's table without its "measurements" (format,
 * version, exported_at, host, device, stacks), read inside the caller's
 * transaction. */
json_t *store_fleet_head_json(store *st, const attn_device_info *info,
                              const attn_stack *latest);

#endif
