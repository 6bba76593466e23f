/* store.c -- the SQLite store's connection: open, close, statements,
 * transactions, and the bind/column helpers every store file uses.
 *
 * Connections are opened SQLITE_OPEN_NOMUTEX: store.h says a handle is used
 * by one thread at a time, so SQLite's per-connection mutex would only cost;
 * separate handles (threads, processes) are serialized by SQLite's file
 * locks, waited on for up to STORE_BUSY_TIMEOUT_MS. Every statement binds
 * its values: no SQL text is ever built from data. The rows live in sibling
 * files, one concept each: store_check.c (field checks), store_devices.c,
 * store_shapes.c, store_measurements.c, store_jobs.c, store_fleet.c,
 * store_schema.c. */
#include <assert.h>
#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../common/grow.h"
#include "store_internal.h"

static const char *const status_names[] = {"ok", "unsupported", "failed", "inaccurate"};
static const char *const job_state_names[] = {"queued", "running", "done", "failed",
                                              "canceled"};

const char *store_status_name(store_status s)
{
    return (unsigned)s < 4 ? status_names[s] : "?";
}

int store_status_parse(const char *s, store_status *out)
{
    for (int i = 0; s != NULL && i < 4; i++)
        if (strcmp(s, status_names[i]) == 0) {
            *out = (store_status)i;
            return 0;
        }
    return ATTUNE_EINVAL;
}

const char *store_job_state_name(store_job_state s)
{
    return (unsigned)s < 5 ? job_state_names[s] : "?";
}

/* ---- SQLite plumbing */

int store_sqlite_err(int src)
{
    if (src == SQLITE_CONSTRAINT_FOREIGNKEY)
        return ATTUNE_ENOTFOUND;
    switch (src & 0xff) {
    case SQLITE_OK:
    case SQLITE_ROW:
    case SQLITE_DONE:
        return 0;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return ATTUNE_EBUSY;
    case SQLITE_NOMEM:
        return ATTUNE_ENOMEM;
    case SQLITE_FULL:
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
    case SQLITE_READONLY:
    case SQLITE_PERM:
        return ATTUNE_EIO;
    case SQLITE_NOTADB:
        return ATTUNE_EFORMAT;
    case SQLITE_TOOBIG:
        return ATTUNE_ETOOBIG;
    default:
        return ATTUNE_EDB;
    }
}

int store_stmt(store *st, store_stmt_id id, const char *sql, sqlite3_stmt **out)
{
    assert((unsigned)id < STMT_COUNT);
    sqlite3_stmt *q = st->stmt[id];
    if (q == NULL) {
        int rc = sqlite3_prepare_v3(st->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &q, NULL);
        if (rc != SQLITE_OK) {
            *out = NULL;
            return store_sqlite_err(rc);
        }
        st->stmt[id] = q;
    } else {
        assert(strcmp(sqlite3_sql(q), sql) == 0); /* one SQL text per id */
        sqlite3_reset(q);
        sqlite3_clear_bindings(q);
    }
    *out = q;
    return 0;
}

void store_stmt_done(sqlite3_stmt *q)
{
    if (q != NULL)
        sqlite3_reset(q);
}

int store_stmt_text(store *st, store_stmt_id id, const char *sql, const char *text,
                    sqlite3_stmt **out)
{
    int rc = store_stmt(st, id, sql, out);
    if (rc == 0 && store_bind_text(*out, 1, text) != SQLITE_OK)
        rc = ATTUNE_EDB;
    return rc;
}

int store_stmt_int(store *st, store_stmt_id id, const char *sql, int64_t v,
                   sqlite3_stmt **out)
{
    int rc = store_stmt(st, id, sql, out);
    if (rc == 0 && sqlite3_bind_int64(*out, 1, v) != SQLITE_OK)
        rc = ATTUNE_EDB;
    return rc;
}

int store_step_row(sqlite3_stmt *q)
{
    int src = sqlite3_step(q);
    return src == SQLITE_ROW ? 0 : src == SQLITE_DONE ? ATTUNE_ENOTFOUND : store_sqlite_err(src);
}

int store_exec(sqlite3_stmt *q)
{
    int rc = sqlite3_step(q);
    return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : store_sqlite_err(rc);
}

int store_collect(sqlite3_stmt *q, size_t size, store_row_fn read, void **out, int *n)
{
    char *rows = NULL;
    int count = 0, cap = 0, rc = 0, src;
    *out = NULL;
    *n = 0;
    while ((src = sqlite3_step(q)) == SQLITE_ROW) {
        if ((rc = grow_array(&rows, &cap, count, size)) != 0)
            goto fail;
        if ((rc = read(q, rows + (size_t)count * size)) != 0)
            goto fail;
        count++;
    }
    if (src != SQLITE_DONE) {
        rc = store_sqlite_err(src);
        goto fail;
    }
    *out = rows;
    *n = count;
    return 0;
fail:
    free(rows);
    return rc;
}

int store_write(store *st, sqlite3_stmt *q, int bind_failed, int *changed)
{
    int rc = bind_failed ? ATTUNE_EDB : store_exec(q);
    if (rc == 0 && changed != NULL)
        *changed = sqlite3_changes(st->db) > 0;
    store_stmt_done(q);
    return rc;
}

static int run_simple(store *st, store_stmt_id id, const char *sql)
{
    sqlite3_stmt *q = NULL;
    int rc = store_stmt(st, id, sql, &q);
    if (rc == 0)
        rc = store_exec(q);
    store_stmt_done(q);
    return rc;
}

static int begin_tx(store *st)
{
    return run_simple(st, STMT_BEGIN, "BEGIN IMMEDIATE");
}

static int commit_tx(store *st)
{
    return run_simple(st, STMT_COMMIT, "COMMIT");
}

static void rollback_tx(store *st)
{
    /* Some errors (SQLITE_FULL, IOERR) end the transaction by themselves. */
    if (!sqlite3_get_autocommit(st->db))
        (void)run_simple(st, STMT_ROLLBACK, "ROLLBACK");
}

int store_tx(store *st, store_tx_body body, void *ctx)
{
    int rc = begin_tx(st);
    if (rc != 0)
        return rc;
    if ((rc = body(st, ctx)) == 0 && (rc = commit_tx(st)) == 0)
        return 0;
    rollback_tx(st);
    return rc;
}

int store_read_begin(store *st)
{
    /* deferred: the snapshot starts at the first read and takes no write
     * lock (WAL: writers go on meanwhile) */
    return run_simple(st, STMT_BEGIN_READ, "BEGIN");
}

void store_read_end(store *st)
{
    rollback_tx(st); /* nothing was written: ROLLBACK just ends it */
}

int store_snapshot(store *st, store_tx_body body, void *ctx)
{
    int rc = store_read_begin(st);
    if (rc != 0)
        return rc;
    rc = body(st, ctx);
    store_read_end(st);
    return rc;
}

int store_bind_double(sqlite3_stmt *q, int i, double v)
{
    return isnan(v) ? sqlite3_bind_null(q, i) : sqlite3_bind_double(q, i, v);
}

double store_column_double(sqlite3_stmt *q, int i)
{
    return sqlite3_column_type(q, i) == SQLITE_NULL ? NAN : sqlite3_column_double(q, i);
}

void store_column_text(sqlite3_stmt *q, int i, char *buf, size_t len)
{
    const char *t = (const char *)sqlite3_column_text(q, i);
    size_t n = t != NULL ? strlen(t) : 0;
    if (n >= len)
        n = len - 1;
    if (n > 0)
        memcpy(buf, t, n);
    buf[n] = 0;
}

int store_bind_text(sqlite3_stmt *q, int i, const char *s)
{
    return s == NULL ? sqlite3_bind_null(q, i) : sqlite3_bind_text(q, i, s, -1, SQLITE_TRANSIENT);
}

int64_t store_now(void)
{
    return (int64_t)time(NULL);
}

/* ---- open and close */

/* Check that path can be opened (create = 0: exists) or created (its
 * directory exists and is writable), so that failures name the path and
 * the reason instead of SQLite's "unable to open database file". */
static int check_path(const char *path, int create, char *err, size_t errlen)
{
    struct stat sb;
    char *copy = NULL;
    int rc = 0;
    if (stat(path, &sb) == 0) {
        if (S_ISDIR(sb.st_mode))
            return attune_fail(err, errlen, ATTUNE_EIO, "'%s' is a directory, not a database",
                               path);
        if (access(path, R_OK | W_OK) != 0)
            return attune_fail(err, errlen, ATTUNE_EIO,
                               "database '%s' is not readable and writable: %s", path,
                               strerror(errno));
        return 0;
    }
    if (errno != ENOENT && errno != ENOTDIR)
        return attune_fail(err, errlen, ATTUNE_EIO, "cannot access database '%s': %s", path,
                           strerror(errno));
    if (!create)
        return attune_fail(err, errlen, ATTUNE_ENOTFOUND, "database '%s' does not exist", path);
    if ((copy = strdup(path)) == NULL)
        return attune_fail(err, errlen, ATTUNE_ENOMEM, "out of memory");
    const char *dir = dirname(copy);
    if (stat(dir, &sb) != 0) {
        rc = attune_fail(err, errlen, ATTUNE_EIO,
                         "cannot create database '%s': directory '%s' %s", path, dir,
                         errno == ENOENT ? "does not exist" : strerror(errno));
        goto fail;
    }
    if (!S_ISDIR(sb.st_mode)) {
        rc = attune_fail(err, errlen, ATTUNE_EIO,
                         "cannot create database '%s': '%s' is not a directory", path, dir);
        goto fail;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        rc = attune_fail(err, errlen, ATTUNE_EIO,
                         "cannot create database '%s': directory '%s' is not writable: %s",
                         path, dir, strerror(errno));
        goto fail;
    }
fail:
    free(copy);
    return rc;
}

/* Run a PRAGMA and copy its first result column (if any) into out. */
static int pragma(store *st, const char *sql, char *out, size_t outlen)
{
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(st->db, sql, -1, &q, NULL);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(q);
        if (rc == SQLITE_ROW && out != NULL)
            store_column_text(q, 0, out, outlen);
        if (rc == SQLITE_ROW || rc == SQLITE_DONE)
            rc = SQLITE_OK;
    }
    sqlite3_finalize(q);
    return rc == SQLITE_OK ? 0 : store_sqlite_err(rc);
}

/* Contract: see store.h. On error the handle is closed, *out is NULL and a
 * database that was refused (newer version, not attune's) is untouched. */
int store_open(const char *path, int create, store **out, char *err, size_t errlen)
{
    store *st = NULL;
    int rc;
    if (out != NULL)
        *out = NULL;
    if (path == NULL || path[0] == 0 || out == NULL)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "no database path given");
    int memory = strcmp(path, ":memory:") == 0;
    if (!memory && (rc = check_path(path, create, err, errlen)) != 0)
        return rc;
    if ((st = calloc(1, sizeof *st)) == NULL || (st->path = strdup(path)) == NULL) {
        rc = attune_fail(err, errlen, ATTUNE_ENOMEM, "out of memory");
        goto fail;
    }
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | (create ? SQLITE_OPEN_CREATE : 0);
    int src = sqlite3_open_v2(path, &st->db, flags, NULL);
    if (src != SQLITE_OK) {
        rc = attune_fail(err, errlen, store_sqlite_err(src), "cannot open database '%s': %s",
                         path, st->db != NULL ? sqlite3_errmsg(st->db) : sqlite3_errstr(src));
        goto fail;
    }
    sqlite3_extended_result_codes(st->db, 1);
    if (sqlite3_db_readonly(st->db, "main") == 1) {
        rc = attune_fail(err, errlen, ATTUNE_EIO, "database '%s' is not writable", path);
        goto fail;
    }
    sqlite3_busy_timeout(st->db, STORE_BUSY_TIMEOUT_MS);
    if ((rc = store_schema_migrate(st, err, errlen)) != 0)
        goto fail;

    char mode[16] = "";
    if ((rc = pragma(st, "PRAGMA journal_mode = WAL", mode, sizeof mode)) != 0 ||
        (!memory && strcmp(mode, "wal") != 0)) {
        rc = attune_fail(err, errlen, rc ? rc : ATTUNE_EIO,
                         "cannot put database '%s' in WAL mode (journal mode '%s'): %s", path,
                         mode, sqlite3_errmsg(st->db));
        goto fail;
    }
    /* FULL: a commit is on disk when store_measurement_put returns, power
     * loss included; one fsync per measurement is noise next to taking it. */
    if ((rc = pragma(st, "PRAGMA foreign_keys = ON", NULL, 0)) != 0 ||
        (rc = pragma(st, "PRAGMA synchronous = FULL", NULL, 0)) != 0) {
        attune_fail(err, errlen, rc, "cannot configure database '%s': %s", path,
                    sqlite3_errmsg(st->db));
        goto fail;
    }
    *out = st;
    return 0;
fail:
    store_close(st);
    return rc;
}

void store_close(store *st)
{
    if (st == NULL)
        return;
    for (int i = 0; i < STMT_COUNT; i++)
        sqlite3_finalize(st->stmt[i]);
    sqlite3_close_v2(st->db); /* NULL is a no-op */
    free(st->path);
    free(st);
}

int64_t store_size_bytes(store *st)
{
    struct stat sb;
    if (st == NULL)
        return ATTUNE_EINVAL;
    if (strcmp(st->path, ":memory:") == 0)
        return 0;
    if (stat(st->path, &sb) != 0)
        return ATTUNE_EIO;
    int64_t total = (int64_t)sb.st_size;
    size_t n = strlen(st->path) + 5;
    char *wal = malloc(n);
    if (wal == NULL)
        return ATTUNE_ENOMEM;
    snprintf(wal, n, "%s-wal", st->path);
    if (stat(wal, &sb) == 0)
        total += (int64_t)sb.st_size;
    free(wal);
    return total;
}

