/* store.c -- the SQLite store: open, devices, measurements and jobs.
 *
 * Connections are opened SQLITE_OPEN_NOMUTEX: store.h says a handle is used
 * by one thread at a time, so SQLite's per-connection mutex would only cost;
 * separate handles (threads, processes) are serialized by SQLite's file
 * locks, waited on for up to STORE_BUSY_TIMEOUT_MS. Every statement binds
 * its values: no SQL text is ever built from data. */
#include <assert.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
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

static int job_state_parse(const char *s, store_job_state *out)
{
    for (int i = 0; s != NULL && i < 5; i++)
        if (strcmp(s, job_state_names[i]) == 0) {
            *out = (store_job_state)i;
            return 0;
        }
    return ATTUNE_EINVAL;
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

int store_exec(sqlite3_stmt *q)
{
    int rc = sqlite3_step(q);
    return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : store_sqlite_err(rc);
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

int store_begin(store *st)
{
    return run_simple(st, STMT_BEGIN, "BEGIN IMMEDIATE");
}

int store_commit(store *st)
{
    return run_simple(st, STMT_COMMIT, "COMMIT");
}

void store_rollback(store *st)
{
    /* Some errors (SQLITE_FULL, IOERR) end the transaction by themselves. */
    if (!sqlite3_get_autocommit(st->db))
        (void)run_simple(st, STMT_ROLLBACK, "ROLLBACK");
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

static int bind_text(sqlite3_stmt *q, int i, const char *s)
{
    return s == NULL ? sqlite3_bind_null(q, i) : sqlite3_bind_text(q, i, s, -1, SQLITE_TRANSIENT);
}

int64_t store_now(void)
{
    return (int64_t)time(NULL);
}

/* Contract: see store_internal.h. Looks the key up first: shapes repeat
 * across tactics, so the insert is the rare path. */
int store_shape_id(store *st, const attn_shape *s, int64_t *id)
{
    char key[ATTN_SHAPE_KEY_MAX];
    sqlite3_stmt *q = NULL;
    attn_shape_key(s, key, sizeof key);
    int rc = store_stmt(st, STMT_SHAPE_SELECT, "SELECT id FROM shapes WHERE key = ?1", &q);
    if (rc != 0)
        goto fail;
    if (bind_text(q, 1, key) != SQLITE_OK) {
        rc = ATTUNE_EDB;
        goto fail;
    }
    int src = sqlite3_step(q);
    if (src == SQLITE_ROW) {
        *id = sqlite3_column_int64(q, 0);
        store_stmt_done(q);
        return 0;
    }
    if (src != SQLITE_DONE) {
        rc = store_sqlite_err(src);
        goto fail;
    }
    store_stmt_done(q);
    rc = store_stmt(st, STMT_SHAPE_INSERT,
                    "INSERT INTO shapes(key, b, hq, hkv, sq, skv, d, dtype, causal) "
                    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                    &q);
    if (rc != 0)
        goto fail;
    if (bind_text(q, 1, key) || sqlite3_bind_int64(q, 2, s->b) ||
        sqlite3_bind_int64(q, 3, s->hq) || sqlite3_bind_int64(q, 4, s->hkv) ||
        sqlite3_bind_int64(q, 5, s->sq) || sqlite3_bind_int64(q, 6, s->skv) ||
        sqlite3_bind_int64(q, 7, s->d) || bind_text(q, 8, attn_dtype_name(s->dtype)) ||
        sqlite3_bind_int(q, 9, s->causal ? 1 : 0)) {
        rc = ATTUNE_EDB;
        goto fail;
    }
    if ((rc = store_exec(q)) != 0)
        goto fail;
    *id = sqlite3_last_insert_rowid(st->db);
fail:
    store_stmt_done(q);
    return rc;
}

/* ---- field checks */

int store_check_id(const char *s, size_t max, const char *field, char *err, size_t errlen)
{
    size_t n = strnlen(s, max);
    if (n == 0)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "%s is empty", field);
    if (n >= max)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "%s is longer than %zu bytes", field,
                           max - 1);
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == ':' || c == '-'))
            return attune_fail(err, errlen, ATTUNE_EINVAL,
                               "%s contains a character other than A-Z a-z 0-9 . _ : -", field);
    }
    return 0;
}

int store_check_hex16(const char *s, const char *field, char *err, size_t errlen)
{
    size_t n = strnlen(s, 17);
    int ok = n == 16;
    for (size_t i = 0; ok && i < n; i++)
        ok = (s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f');
    return ok ? 0
              : attune_fail(err, errlen, ATTUNE_EINVAL,
                            "%s must be 16 lowercase hex digits", field);
}

/* 1 if s is well-formed UTF-8 (no overlong forms, surrogates or code
 * points past U+10FFFF) without control characters (C0, DEL, C1): text we
 * store may end up on a terminal. */
static int text_ok(const unsigned char *s)
{
    while (*s) {
        unsigned c = *s;
        if (c < 0x80) {
            if (c < 0x20 || c == 0x7f)
                return 0;
            s++;
            continue;
        }
        int len;
        unsigned cp, min;
        if ((c & 0xe0) == 0xc0) {
            len = 2, cp = c & 0x1f, min = 0x80;
        } else if ((c & 0xf0) == 0xe0) {
            len = 3, cp = c & 0x0f, min = 0x800;
        } else if ((c & 0xf8) == 0xf0) {
            len = 4, cp = c & 0x07, min = 0x10000;
        } else {
            return 0;
        }
        for (int i = 1; i < len; i++) {
            if ((s[i] & 0xc0) != 0x80)
                return 0;
            cp = (cp << 6) | (s[i] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) ||
            (cp >= 0x80 && cp <= 0x9f))
            return 0;
        s += len;
    }
    return 1;
}

int store_check_text(const char *s, size_t max, const char *field, char *err, size_t errlen)
{
    if (strnlen(s, max) >= max)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "%s is longer than %zu bytes", field,
                           max - 1);
    if (!text_ok((const unsigned char *)s))
        return attune_fail(err, errlen, ATTUNE_EINVAL,
                           "%s is not UTF-8 text without control characters", field);
    return 0;
}

int store_check_word(const char *s, size_t max, const char *field, char *err, size_t errlen)
{
    size_t n = strnlen(s, max);
    if (n >= max)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "%s is longer than %zu bytes", field,
                           max - 1);
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return attune_fail(err, errlen, ATTUNE_EINVAL,
                               "%s contains a character other than A-Z a-z 0-9 . _ -", field);
    }
    return 0;
}

static int check_range(int64_t v, int64_t lo, int64_t hi, const char *field, char *err,
                       size_t errlen)
{
    if (v < lo || v > hi)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "%s=%lld is outside [%lld, %lld]",
                           field, (long long)v, (long long)lo, (long long)hi);
    return 0;
}

int store_check_device(const attn_device_info *d, char *err, size_t errlen)
{
    int rc;
    if ((rc = store_check_id(d->id, sizeof d->id, "device id", err, errlen)) != 0 ||
        (rc = store_check_text(d->name, sizeof d->name, "device name", err, errlen)) != 0)
        return rc;
    if (strcmp(d->kind, "cpu") != 0 && strcmp(d->kind, "cuda") != 0)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "device kind must be cpu or cuda");
    if ((rc = check_range(d->index, -1, 4095, "device index", err, errlen)) != 0 ||
        (rc = check_range(d->cc_major, 0, 99, "cc major", err, errlen)) != 0 ||
        (rc = check_range(d->cc_minor, 0, 99, "cc minor", err, errlen)) != 0 ||
        (rc = check_range(d->sm_count, 0, STORE_MAX_COUNT, "sm_count", err, errlen)) != 0 ||
        (rc = check_range(d->memory_mb, 0, STORE_MAX_MEMORY_MB, "memory_mb", err, errlen)) != 0 ||
        (rc = check_range(d->clock_mhz, 0, STORE_MAX_COUNT, "clock_mhz", err, errlen)) != 0 ||
        (rc = check_range(d->mem_clock_mhz, 0, STORE_MAX_COUNT, "mem_clock_mhz", err, errlen)) != 0)
        return rc;
    return 0;
}

int store_check_stack(const attn_stack *s, char *err, size_t errlen)
{
    int rc;
    if ((rc = store_check_text(s->driver, sizeof s->driver, "stack driver", err, errlen)) != 0 ||
        (rc = store_check_text(s->runtime, sizeof s->runtime, "stack runtime", err, errlen)) != 0 ||
        (rc = store_check_text(s->blas, sizeof s->blas, "stack blas", err, errlen)) != 0 ||
        (rc = store_check_text(s->attune, sizeof s->attune, "stack attune", err, errlen)) != 0 ||
        (rc = store_check_text(s->kernels, sizeof s->kernels, "stack kernels", err, errlen)) != 0 ||
        (rc = store_check_word(s->power, sizeof s->power, "stack power", err, errlen)) != 0 ||
        (rc = store_check_hex16(s->id, "stack id", err, errlen)) != 0)
        return rc;
    attn_stack want = *s;
    attn_stack_finish(&want);
    if (strcmp(want.id, s->id) != 0)
        return attune_fail(err, errlen, ATTUNE_EINVAL,
                           "stack id %s does not match its fields (expected %s)", s->id,
                           want.id);
    return 0;
}

/* A time in microseconds: NaN (not measured) or finite in [0, max]. */
static int check_time(double v, const char *field, char *err, size_t errlen)
{
    if (isnan(v))
        return 0;
    if (!isfinite(v) || v < 0 || v > STORE_MAX_TIME_US)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "%s=%g is outside [0, %g]", field, v,
                           STORE_MAX_TIME_US);
    return 0;
}

/* An error statistic: NaN (not checked) or finite and >= 0. */
static int check_error(double v, const char *field, char *err, size_t errlen)
{
    if (isnan(v))
        return 0;
    if (!isfinite(v) || v < 0)
        return attune_fail(err, errlen, ATTUNE_EINVAL,
                           "%s=%g must be a finite number >= 0 (or null)", field, v);
    return 0;
}

int store_check_measurement(const store_measurement *m, char *canon, char *err,
                            size_t errlen)
{
    int rc;
    attn_tactic t;
    if ((rc = store_check_id(m->device_id, sizeof m->device_id, "device id", err, errlen)) != 0 ||
        (rc = store_check_hex16(m->stack_id, "stack id", err, errlen)) != 0)
        return rc;
    if ((rc = attn_shape_validate(&m->shape, err, errlen)) != 0)
        return rc;
    if (strnlen(m->tactic, sizeof m->tactic) >= sizeof m->tactic)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "tactic is too long");
    if ((rc = attn_tactic_parse(m->tactic, &t, err, errlen)) != 0)
        return rc;
    attn_tactic_str(&t, canon, ATTN_TACTIC_STR_MAX);
    if ((unsigned)m->status > STORE_INACCURATE)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "unknown status %d", (int)m->status);
    if ((rc = check_time(m->time_us, "time_us", err, errlen)) != 0 ||
        (rc = check_time(m->time_us_min, "time_us_min", err, errlen)) != 0 ||
        (rc = check_time(m->time_us_max, "time_us_max", err, errlen)) != 0 ||
        (rc = check_time(m->time_us_copies, "time_us_copies", err, errlen)) != 0)
        return rc;
    /* An ok measurement was checked and timed: it has both numbers. */
    if (m->status == STORE_OK && (!isfinite(m->time_us) || !isfinite(m->rel_err)))
        return attune_fail(err, errlen, ATTUNE_EINVAL,
                           "status ok needs a time_us and a rel_err (got %g, %g)", m->time_us,
                           m->rel_err);
    /* The median lies between min and max of the same samples. */
    if (!isnan(m->time_us) && !isnan(m->time_us_min) && !isnan(m->time_us_max) &&
        !(m->time_us_min <= m->time_us && m->time_us <= m->time_us_max))
        return attune_fail(err, errlen, ATTUNE_EINVAL,
                           "time_us_min <= time_us <= time_us_max does not hold (%g, %g, %g)",
                           m->time_us_min, m->time_us, m->time_us_max);
    if ((rc = check_range(m->n, 0, STORE_MAX_N, "n", err, errlen)) != 0 ||
        (rc = check_error(m->max_abs_err, "max_abs_err", err, errlen)) != 0 ||
        (rc = check_error(m->rel_err, "rel_err", err, errlen)) != 0 ||
        (rc = store_check_word(m->mode, sizeof m->mode, "mode", err, errlen)) != 0 ||
        (rc = store_check_word(m->l2, sizeof m->l2, "l2", err, errlen)) != 0 ||
        (rc = check_range(m->rows_checked, 0, INT_MAX, "rows_checked", err, errlen)) != 0 ||
        (rc = store_check_text(m->note, sizeof m->note, "note", err, errlen)) != 0 ||
        (rc = store_check_text(m->host, sizeof m->host, "host", err, errlen)) != 0 ||
        (rc = check_range(m->taken_at, 0, STORE_MAX_TAKEN_AT, "taken_at", err, errlen)) != 0)
        return rc;
    return 0;
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

/* ---- devices and stacks */

int store_upsert_stack(store *st, const attn_stack *s, int *changed)
{
    sqlite3_stmt *q = NULL;
    int rc = store_stmt(st, STMT_STACK_UPSERT,
                        "INSERT INTO stacks(id, driver, runtime, blas, attune, kernels, "
                        "first_seen, power) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) "
                        "ON CONFLICT(id) DO NOTHING",
                        &q);
    if (rc != 0)
        goto fail;
    if (bind_text(q, 1, s->id) || bind_text(q, 2, s->driver) || bind_text(q, 3, s->runtime) ||
        bind_text(q, 4, s->blas) || bind_text(q, 5, s->attune) || bind_text(q, 6, s->kernels) ||
        sqlite3_bind_int64(q, 7, store_now()) || bind_text(q, 8, s->power)) {
        rc = ATTUNE_EDB;
        goto fail;
    }
    if ((rc = store_exec(q)) != 0)
        goto fail;
    if (changed != NULL)
        *changed = sqlite3_changes(st->db) > 0;
fail:
    store_stmt_done(q);
    return rc;
}

int store_upsert_device(store *st, const attn_device_info *d, int64_t seen,
                        const char *latest_stack, int *changed)
{
    sqlite3_stmt *q = NULL;
    int rc = store_stmt(
        st, STMT_DEVICE_UPSERT,
        "INSERT INTO devices(id, name, kind, idx, cc_major, cc_minor, sm_count, memory_mb, "
        "clock_mhz, mem_clock_mhz, latest_stack, first_seen, last_seen) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?12) "
        "ON CONFLICT(id) DO UPDATE SET name = excluded.name, kind = excluded.kind, "
        "idx = CASE WHEN excluded.idx >= 0 THEN excluded.idx ELSE devices.idx END, "
        "cc_major = excluded.cc_major, cc_minor = excluded.cc_minor, "
        "sm_count = excluded.sm_count, memory_mb = excluded.memory_mb, "
        "clock_mhz = excluded.clock_mhz, mem_clock_mhz = excluded.mem_clock_mhz, "
        "latest_stack = coalesce(excluded.latest_stack, devices.latest_stack), "
        "last_seen = excluded.last_seen "
        "WHERE excluded.last_seen >= devices.last_seen AND ("
        "excluded.last_seen > devices.last_seen OR devices.name IS NOT excluded.name OR "
        "devices.kind IS NOT excluded.kind OR "
        "(excluded.idx >= 0 AND devices.idx IS NOT excluded.idx) OR "
        "devices.cc_major IS NOT excluded.cc_major OR "
        "devices.cc_minor IS NOT excluded.cc_minor OR "
        "devices.sm_count IS NOT excluded.sm_count OR "
        "devices.memory_mb IS NOT excluded.memory_mb OR "
        "devices.clock_mhz IS NOT excluded.clock_mhz OR "
        "devices.mem_clock_mhz IS NOT excluded.mem_clock_mhz OR "
        "(excluded.latest_stack IS NOT NULL AND "
        "devices.latest_stack IS NOT excluded.latest_stack))",
        &q);
    if (rc != 0)
        goto fail;
    if (bind_text(q, 1, d->id) || bind_text(q, 2, d->name) || bind_text(q, 3, d->kind) ||
        sqlite3_bind_int(q, 4, d->index) || sqlite3_bind_int(q, 5, d->cc_major) ||
        sqlite3_bind_int(q, 6, d->cc_minor) || sqlite3_bind_int(q, 7, d->sm_count) ||
        sqlite3_bind_int64(q, 8, d->memory_mb) || sqlite3_bind_int(q, 9, d->clock_mhz) ||
        sqlite3_bind_int(q, 10, d->mem_clock_mhz) || bind_text(q, 11, latest_stack) ||
        sqlite3_bind_int64(q, 12, seen)) {
        rc = ATTUNE_EDB;
        goto fail;
    }
    if ((rc = store_exec(q)) != 0)
        goto fail;
    if (changed != NULL)
        *changed = sqlite3_changes(st->db) > 0;
fail:
    store_stmt_done(q);
    return rc;
}

/* Contract: see store.h. A stack with an empty id gets attn_stack_finish's;
 * a given id must match its fields. ATTUNE_EINVAL for invalid fields. */
int store_device_put(store *st, const attn_device_info *info, const attn_stack *stack)
{
    int rc, in_tx = 0;
    if (st == NULL || info == NULL || stack == NULL)
        return ATTUNE_EINVAL;
    attn_stack sk = *stack;
    if (sk.id[0] == 0)
        attn_stack_finish(&sk);
    if ((rc = store_check_device(info, NULL, 0)) != 0 ||
        (rc = store_check_stack(&sk, NULL, 0)) != 0)
        return rc;
    if ((rc = store_begin(st)) != 0)
        goto fail;
    in_tx = 1;
    if ((rc = store_upsert_stack(st, &sk, NULL)) != 0 ||
        (rc = store_upsert_device(st, info, store_now(), sk.id, NULL)) != 0 ||
        (rc = store_commit(st)) != 0)
        goto fail;
    return 0;
fail:
    if (in_tx)
        store_rollback(st);
    return rc;
}

void store_device_row(sqlite3_stmt *q, attn_device_info *info, attn_stack *stack)
{
    memset(info, 0, sizeof *info);
    store_column_text(q, 0, info->id, sizeof info->id);
    store_column_text(q, 1, info->name, sizeof info->name);
    store_column_text(q, 2, info->kind, sizeof info->kind);
    info->index = sqlite3_column_int(q, 3);
    info->cc_major = sqlite3_column_int(q, 4);
    info->cc_minor = sqlite3_column_int(q, 5);
    info->sm_count = sqlite3_column_int(q, 6);
    info->memory_mb = sqlite3_column_int64(q, 7);
    info->clock_mhz = sqlite3_column_int(q, 8);
    info->mem_clock_mhz = sqlite3_column_int(q, 9);
    if (stack == NULL)
        return;
    memset(stack, 0, sizeof *stack);
    store_column_text(q, 10, stack->id, sizeof stack->id);
    store_column_text(q, 11, stack->driver, sizeof stack->driver);
    store_column_text(q, 12, stack->runtime, sizeof stack->runtime);
    store_column_text(q, 13, stack->blas, sizeof stack->blas);
    store_column_text(q, 14, stack->attune, sizeof stack->attune);
    store_column_text(q, 15, stack->kernels, sizeof stack->kernels);
    store_column_text(q, 16, stack->power, sizeof stack->power);
}

/* Contract: see store.h. An exact id wins over a name match; among name
 * matches the most recently seen. latest_stack is zeroed when the device
 * has no stack recorded. */
int store_device_get(store *st, const char *id_or_name, attn_device_info *info,
                     attn_stack *latest_stack)
{
    sqlite3_stmt *q = NULL;
    if (st == NULL || id_or_name == NULL || info == NULL)
        return ATTUNE_EINVAL;
    int rc = store_stmt(st, STMT_DEVICE_GET,
                        STORE_DEVICE_SELECT "WHERE d.id = ?1 OR d.name = ?1 COLLATE NOCASE "
                        "ORDER BY d.id = ?1 DESC, d.last_seen DESC, d.rowid DESC LIMIT 1",
                        &q);
    if (rc != 0)
        goto fail;
    if (bind_text(q, 1, id_or_name) != SQLITE_OK) {
        rc = ATTUNE_EDB;
        goto fail;
    }
    int src = sqlite3_step(q);
    if (src == SQLITE_DONE) {
        rc = ATTUNE_ENOTFOUND;
        goto fail;
    }
    if (src != SQLITE_ROW) {
        rc = store_sqlite_err(src);
        goto fail;
    }
    store_device_row(q, info, latest_stack);
fail:
    store_stmt_done(q);
    return rc;
}

/* ---- measurements */

#define MEAS_UPSERT                                                                    \
    "INSERT INTO measurements(device_id, stack_id, shape_id, tactic, status, time_us, " \
    "time_us_min, time_us_max, time_us_copies, n, max_abs_err, rel_err, mode, l2, "    \
    "rows_checked, note, host, taken_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, " \
    "?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18) "                                    \
    "ON CONFLICT(device_id, stack_id, shape_id, tactic) DO UPDATE SET "               \
    "status = excluded.status, time_us = excluded.time_us, "                           \
    "time_us_min = excluded.time_us_min, time_us_max = excluded.time_us_max, "         \
    "time_us_copies = excluded.time_us_copies, n = excluded.n, "                       \
    "max_abs_err = excluded.max_abs_err, rel_err = excluded.rel_err, "                 \
    "mode = excluded.mode, l2 = excluded.l2, rows_checked = excluded.rows_checked, "   \
    "note = excluded.note, host = excluded.host, taken_at = excluded.taken_at"

int store_write_measurement(store *st, const store_measurement *m, const char *tactic,
                            int only_newer, int *written)
{
    sqlite3_stmt *q = NULL;
    int64_t shape_id;
    int rc = store_shape_id(st, &m->shape, &shape_id);
    if (rc != 0)
        goto fail;
    if (only_newer)
        rc = store_stmt(st, STMT_MEAS_MERGE,
                        MEAS_UPSERT " WHERE excluded.taken_at > measurements.taken_at", &q);
    else
        rc = store_stmt(st, STMT_MEAS_PUT, MEAS_UPSERT, &q);
    if (rc != 0)
        goto fail;
    if (bind_text(q, 1, m->device_id) || bind_text(q, 2, m->stack_id) ||
        sqlite3_bind_int64(q, 3, shape_id) || bind_text(q, 4, tactic) ||
        bind_text(q, 5, store_status_name(m->status)) || store_bind_double(q, 6, m->time_us) ||
        store_bind_double(q, 7, m->time_us_min) || store_bind_double(q, 8, m->time_us_max) ||
        store_bind_double(q, 9, m->time_us_copies) || sqlite3_bind_int(q, 10, m->n) ||
        store_bind_double(q, 11, m->max_abs_err) || store_bind_double(q, 12, m->rel_err) ||
        bind_text(q, 13, m->mode) || bind_text(q, 14, m->l2) ||
        sqlite3_bind_int(q, 15, m->rows_checked) || bind_text(q, 16, m->note) ||
        bind_text(q, 17, m->host) || sqlite3_bind_int64(q, 18, m->taken_at)) {
        rc = ATTUNE_EDB;
        goto fail;
    }
    if ((rc = store_exec(q)) != 0)
        goto fail;
    if (written != NULL)
        *written = sqlite3_changes(st->db) > 0;
fail:
    store_stmt_done(q);
    return rc;
}

/* Contract: see store.h. ATTUNE_EINVAL for an invalid field (see
 * store_check_measurement; the tactic is stored in canonical form),
 * ATTUNE_ENOTFOUND when the device or stack was never stored with
 * store_device_put, ATTUNE_EBUSY when the write lock stayed taken past the
 * busy timeout. An infinite error statistic (inf output) is stored as
 * unknown (NULL): the status carries the verdict. */
int store_measurement_put(store *st, const store_measurement *m)
{
    char canon[ATTN_TACTIC_STR_MAX];
    int rc, in_tx = 0;
    if (st == NULL || m == NULL)
        return ATTUNE_EINVAL;
    store_measurement c = *m;
    if (isinf(c.max_abs_err) && c.max_abs_err > 0)
        c.max_abs_err = NAN;
    if (isinf(c.rel_err) && c.rel_err > 0)
        c.rel_err = NAN;
    if ((rc = store_check_measurement(&c, canon, NULL, 0)) != 0)
        return rc;
    if ((rc = store_begin(st)) != 0)
        goto fail;
    in_tx = 1;
    if ((rc = store_write_measurement(st, &c, canon, 0, NULL)) != 0 ||
        (rc = store_commit(st)) != 0)
        goto fail;
    return 0;
fail:
    if (in_tx)
        store_rollback(st);
    return rc;
}

/* Canonical shape key and tactic text for a lookup. */
static int lookup_keys(const attn_shape *s, const char *tactic, char *key, char *canon)
{
    attn_tactic t;
    if (attn_shape_validate(s, NULL, 0) != 0)
        return ATTUNE_EINVAL;
    attn_shape_key(s, key, ATTN_SHAPE_KEY_MAX);
    if (tactic != NULL) {
        if (attn_tactic_parse(tactic, &t, NULL, 0) != 0)
            return ATTUNE_EINVAL;
        attn_tactic_str(&t, canon, ATTN_TACTIC_STR_MAX);
    }
    return 0;
}

int store_measurement_exists(store *st, const char *device_id, const char *stack_id,
                             const attn_shape *s, const char *tactic)
{
    char key[ATTN_SHAPE_KEY_MAX], canon[ATTN_TACTIC_STR_MAX];
    sqlite3_stmt *q = NULL;
    if (st == NULL || device_id == NULL || stack_id == NULL || s == NULL || tactic == NULL)
        return ATTUNE_EINVAL;
    int rc = lookup_keys(s, tactic, key, canon);
    if (rc != 0)
        return rc;
    rc = store_stmt(st, STMT_MEAS_EXISTS,
                    "SELECT 1 FROM measurements m JOIN shapes s ON s.id = m.shape_id "
                    "WHERE m.device_id = ?1 AND m.stack_id = ?2 AND s.key = ?3 "
                    "AND m.tactic = ?4",
                    &q);
    if (rc != 0)
        goto fail;
    if (bind_text(q, 1, device_id) || bind_text(q, 2, stack_id) || bind_text(q, 3, key) ||
        bind_text(q, 4, canon)) {
        rc = ATTUNE_EDB;
        goto fail;
    }
    int src = sqlite3_step(q);
    if (src == SQLITE_ROW)
        rc = 1;
    else if (src == SQLITE_DONE)
        rc = 0;
    else
        rc = store_sqlite_err(src);
fail:
    store_stmt_done(q);
    return rc;
}

/* Columns read by row_read, in order; the last one is the smallest
 * relative error of the ok rows of the same (device, stack, shape). */
#define MEAS_COLUMNS                                                                   \
    "SELECT m.device_id, m.stack_id, s.b, s.hq, s.hkv, s.sq, s.skv, s.d, s.dtype, "     \
    "s.causal, m.tactic, m.status, m.time_us, m.time_us_min, m.time_us_max, "          \
    "m.time_us_copies, m.n, m.max_abs_err, m.rel_err, m.mode, m.l2, m.rows_checked, "  \
    "m.note, m.host, m.taken_at, m.incumbent, "
#define MEAS_SELECT                                                                    \
    MEAS_COLUMNS "(SELECT min(o.rel_err) FROM measurements o "                         \
    "WHERE o.device_id = m.device_id AND o.stack_id = m.stack_id "                     \
    "AND o.shape_id = m.shape_id AND o.status = 'ok'), "                               \
    "(SELECT k.power FROM stacks k WHERE k.id = m.stack_id) "                          \
    "FROM measurements m JOIN shapes s ON s.id = m.shape_id "                          \
    "WHERE m.device_id = ?1 AND (?2 IS NULL OR m.stack_id = ?2) "
#define MEAS_ORDER " ORDER BY s.key, m.tactic, m.taken_at DESC, m.stack_id"

static int row_read(sqlite3_stmt *q, store_measurement *m)
{
    char buf[16];
    memset(m, 0, sizeof *m);
    store_column_text(q, 0, m->device_id, sizeof m->device_id);
    store_column_text(q, 1, m->stack_id, sizeof m->stack_id);
    m->shape.b = sqlite3_column_int64(q, 2);
    m->shape.hq = sqlite3_column_int64(q, 3);
    m->shape.hkv = sqlite3_column_int64(q, 4);
    m->shape.sq = sqlite3_column_int64(q, 5);
    m->shape.skv = sqlite3_column_int64(q, 6);
    m->shape.d = sqlite3_column_int64(q, 7);
    store_column_text(q, 8, buf, sizeof buf);
    if (attn_dtype_parse(buf, &m->shape.dtype) != 0)
        return ATTUNE_EDB;
    m->shape.causal = sqlite3_column_int(q, 9) != 0;
    store_column_text(q, 10, m->tactic, sizeof m->tactic);
    store_column_text(q, 11, buf, sizeof buf);
    if (store_status_parse(buf, &m->status) != 0)
        return ATTUNE_EDB;
    m->time_us = store_column_double(q, 12);
    m->time_us_min = store_column_double(q, 13);
    m->time_us_max = store_column_double(q, 14);
    m->time_us_copies = store_column_double(q, 15);
    m->n = sqlite3_column_int(q, 16);
    m->max_abs_err = store_column_double(q, 17);
    m->rel_err = store_column_double(q, 18);
    store_column_text(q, 19, m->mode, sizeof m->mode);
    store_column_text(q, 20, m->l2, sizeof m->l2);
    m->rows_checked = sqlite3_column_int(q, 21);
    store_column_text(q, 22, m->note, sizeof m->note);
    store_column_text(q, 23, m->host, sizeof m->host);
    m->taken_at = sqlite3_column_int64(q, 24);
    m->incumbent = sqlite3_column_int(q, 25) != 0;
    double best = store_column_double(q, 26);
    m->err_ratio = isnan(m->rel_err) || isnan(best) || best == 0 ? NAN : m->rel_err / best;
    store_column_text(q, 27, m->power, sizeof m->power);
    return 0;
}

/* Step q to the end, collecting rows into a malloc'd array. */
static int collect(sqlite3_stmt *q, store_measurement **out, int *n)
{
    store_measurement *rows = NULL;
    int count = 0, cap = 0, rc = 0, src;
    while ((src = sqlite3_step(q)) == SQLITE_ROW) {
        if ((rc = grow_array(&rows, &cap, count, sizeof *rows)) != 0)
            goto fail;
        if ((rc = row_read(q, &rows[count])) != 0)
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

/* Contract: see store.h. On error *out is NULL and *n 0. Rows come ordered
 * by tactic, newest first within a tactic. */
int store_measurements_get(store *st, const char *device_id, const char *stack_id,
                           const attn_shape *s, store_measurement **out, int *n)
{
    char key[ATTN_SHAPE_KEY_MAX];
    sqlite3_stmt *q = NULL;
    if (out != NULL)
        *out = NULL;
    if (n != NULL)
        *n = 0;
    if (st == NULL || device_id == NULL || s == NULL || out == NULL || n == NULL)
        return ATTUNE_EINVAL;
    int rc = lookup_keys(s, NULL, key, NULL);
    if (rc != 0)
        return rc;
    rc = store_stmt(st, STMT_MEAS_READ, MEAS_SELECT "AND s.key = ?3" MEAS_ORDER, &q);
    if (rc != 0)
        goto fail;
    if (bind_text(q, 1, device_id) || bind_text(q, 2, stack_id) || bind_text(q, 3, key)) {
        rc = ATTUNE_EDB;
        goto fail;
    }
    rc = collect(q, out, n);
fail:
    store_stmt_done(q);
    return rc;
}

/* Contract: see store.h; rows ordered by shape key, then as above. */
int store_measurements_all(store *st, const char *device_id, store_measurement **out,
                           int *n)
{
    sqlite3_stmt *q = NULL;
    if (out != NULL)
        *out = NULL;
    if (n != NULL)
        *n = 0;
    if (st == NULL || device_id == NULL || out == NULL || n == NULL)
        return ATTUNE_EINVAL;
    int rc = store_stmt(st, STMT_MEAS_READ_ALL, MEAS_SELECT MEAS_ORDER, &q);
    if (rc != 0)
        goto fail;
    if (bind_text(q, 1, device_id) != SQLITE_OK) {
        rc = ATTUNE_EDB;
        goto fail;
    }
    rc = collect(q, out, n);
fail:
    store_stmt_done(q);
    return rc;
}

/* Read shape columns b, hq, hkv, sq, skv, d, dtype, causal from column i. */
static int shape_read(sqlite3_stmt *q, int i, attn_shape *s)
{
    char dt[8];
    memset(s, 0, sizeof *s);
    s->b = sqlite3_column_int64(q, i);
    s->hq = sqlite3_column_int64(q, i + 1);
    s->hkv = sqlite3_column_int64(q, i + 2);
    s->sq = sqlite3_column_int64(q, i + 3);
    s->skv = sqlite3_column_int64(q, i + 4);
    s->d = sqlite3_column_int64(q, i + 5);
    store_column_text(q, i + 6, dt, sizeof dt);
    s->causal = sqlite3_column_int(q, i + 7) != 0;
    return attn_dtype_parse(dt, &s->dtype) == 0 ? 0 : ATTUNE_EDB;
}

/* Step q (shape columns from 0) into a malloc'd array. */
static int collect_shapes(sqlite3_stmt *q, attn_shape **out, int *n)
{
    attn_shape *rows = NULL;
    int count = 0, cap = 0, rc = 0, src;
    while ((src = sqlite3_step(q)) == SQLITE_ROW) {
        if (count == cap) {
            if (cap > INT_MAX / 2) {
                rc = ATTUNE_ENOMEM;
                goto fail;
            }
            int ncap = cap ? cap * 2 : 16;
            attn_shape *grown = realloc(rows, (size_t)ncap * sizeof *rows);
            if (grown == NULL) {
                rc = ATTUNE_ENOMEM;
                goto fail;
            }
            rows = grown;
            cap = ncap;
        }
        if ((rc = shape_read(q, 0, &rows[count])) != 0)
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

/* Contract: see store.h; ordered by canonical key, *out NULL when none. */
int store_shapes(store *st, const char *device_id, attn_shape **out, int *n)
{
    sqlite3_stmt *q = NULL;
    if (out != NULL)
        *out = NULL;
    if (n != NULL)
        *n = 0;
    if (st == NULL || device_id == NULL || out == NULL || n == NULL)
        return ATTUNE_EINVAL;
    int rc = store_stmt(st, STMT_SHAPES,
                        "SELECT b, hq, hkv, sq, skv, d, dtype, causal FROM shapes "
                        "WHERE id IN (SELECT shape_id FROM measurements WHERE device_id = ?1) "
                        "ORDER BY key",
                        &q);
    if (rc != 0)
        goto fail;
    if (bind_text(q, 1, device_id) != SQLITE_OK) {
        rc = ATTUNE_EDB;
        goto fail;
    }
    rc = collect_shapes(q, out, n);
fail:
    store_stmt_done(q);
    return rc;
}

/* ---- jobs */

/* Contract: see store.h. n must be in [1, STORE_MAX_JOB_SHAPES] and every
 * shape valid (ATTUNE_EINVAL otherwise); job and shapes are written in one
 * transaction. */
int store_job_create(store *st, const char *device_id, const attn_shape *shapes, int n,
                     int64_t *id)
{
    sqlite3_stmt *q = NULL;
    int rc, in_tx = 0;
    if (st == NULL || device_id == NULL || shapes == NULL || id == NULL || n < 1 ||
        n > STORE_MAX_JOB_SHAPES)
        return ATTUNE_EINVAL;
    if ((rc = store_check_id(device_id, 64, "device id", NULL, 0)) != 0)
        return rc;
    for (int i = 0; i < n; i++)
        if ((rc = attn_shape_validate(&shapes[i], NULL, 0)) != 0)
            return ATTUNE_EINVAL;
    if ((rc = store_begin(st)) != 0)
        goto fail;
    in_tx = 1;
    int64_t now = store_now();
    if ((rc = store_stmt(st, STMT_JOB_INSERT,
                         "INSERT INTO jobs(device_id, state, done, total, created_at, "
                         "updated_at, error) VALUES (?1, 'queued', 0, ?2, ?3, ?3, '')",
                         &q)) != 0)
        goto fail;
    if (bind_text(q, 1, device_id) || sqlite3_bind_int(q, 2, n) ||
        sqlite3_bind_int64(q, 3, now)) {
        rc = ATTUNE_EDB;
        goto fail;
    }
    if ((rc = store_exec(q)) != 0)
        goto fail;
    store_stmt_done(q);
    q = NULL;
    int64_t job = sqlite3_last_insert_rowid(st->db);
    for (int i = 0; i < n; i++) {
        int64_t shape_id;
        if ((rc = store_shape_id(st, &shapes[i], &shape_id)) != 0)
            goto fail;
        if ((rc = store_stmt(st, STMT_JOB_SHAPE_INSERT,
                             "INSERT INTO job_shapes(job_id, position, shape_id) "
                             "VALUES (?1, ?2, ?3)",
                             &q)) != 0)
            goto fail;
        if (sqlite3_bind_int64(q, 1, job) || sqlite3_bind_int(q, 2, i) ||
            sqlite3_bind_int64(q, 3, shape_id)) {
            rc = ATTUNE_EDB;
            goto fail;
        }
        if ((rc = store_exec(q)) != 0)
            goto fail;
        store_stmt_done(q);
        q = NULL;
    }
    if ((rc = store_commit(st)) != 0)
        goto fail;
    *id = job;
    return 0;
fail:
    store_stmt_done(q);
    if (in_tx)
        store_rollback(st);
    return rc;
}

#define JOB_COLS "id, device_id, state, done, total, created_at, updated_at, error"

static int job_read(sqlite3_stmt *q, store_job *j)
{
    char state[16];
    memset(j, 0, sizeof *j);
    j->id = sqlite3_column_int64(q, 0);
    store_column_text(q, 1, j->device_id, sizeof j->device_id);
    store_column_text(q, 2, state, sizeof state);
    if (job_state_parse(state, &j->state) != 0)
        return ATTUNE_EDB;
    j->done = sqlite3_column_int(q, 3);
    j->total = sqlite3_column_int(q, 4);
    j->created_at = sqlite3_column_int64(q, 5);
    j->updated_at = sqlite3_column_int64(q, 6);
    store_column_text(q, 7, j->error, sizeof j->error);
    return 0;
}

/* Contract: see store.h. ATTUNE_ENOTFOUND when no job has that id. On
 * error job->shapes is NULL. */
int store_job_get(store *st, int64_t id, store_job *job)
{
    sqlite3_stmt *q = NULL;
    attn_shape *shapes = NULL;
    int n = 0;
    if (st == NULL || job == NULL)
        return ATTUNE_EINVAL;
    memset(job, 0, sizeof *job);
    int rc = store_stmt(st, STMT_JOB_GET, "SELECT " JOB_COLS " FROM jobs WHERE id = ?1", &q);
    if (rc != 0)
        goto fail;
    if (sqlite3_bind_int64(q, 1, id) != SQLITE_OK) {
        rc = ATTUNE_EDB;
        goto fail;
    }
    int src = sqlite3_step(q);
    if (src != SQLITE_ROW) {
        rc = src == SQLITE_DONE ? ATTUNE_ENOTFOUND : store_sqlite_err(src);
        goto fail;
    }
    if ((rc = job_read(q, job)) != 0)
        goto fail;
    store_stmt_done(q);
    if ((rc = store_stmt(st, STMT_JOB_SHAPES,
                         "SELECT s.b, s.hq, s.hkv, s.sq, s.skv, s.d, s.dtype, s.causal "
                         "FROM job_shapes j JOIN shapes s ON s.id = j.shape_id "
                         "WHERE j.job_id = ?1 ORDER BY j.position",
                         &q)) != 0)
        goto fail;
    if (sqlite3_bind_int64(q, 1, id) != SQLITE_OK) {
        rc = ATTUNE_EDB;
        goto fail;
    }
    if ((rc = collect_shapes(q, &shapes, &n)) != 0)
        goto fail;
    if (n != job->total) { /* the schema cannot say it; the rows can */
        rc = ATTUNE_EDB;
        goto fail;
    }
    job->shapes = shapes;
    shapes = NULL;
fail:
    store_stmt_done(q);
    free(shapes);
    return rc;
}

void store_job_free(store_job *job)
{
    if (job == NULL)
        return;
    free(job->shapes);
    job->shapes = NULL;
}

/* Copy at most len - 1 bytes of s into buf without cutting a UTF-8
 * sequence in two. */
static void utf8_truncate(const char *s, char *buf, size_t len)
{
    size_t n = strlen(s);
    if (n >= len) {
        n = len - 1;
        while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
            n--;
    }
    memcpy(buf, s, n);
    buf[n] = 0;
}

/* Contract: see store.h. error NULL clears the error text; a longer one is
 * cut to what store_job.error holds. ATTUNE_EINVAL for an unknown state or
 * done outside [0, total], ATTUNE_ENOTFOUND for an unknown job. */
int store_job_update(store *st, int64_t id, store_job_state state, int done,
                     const char *error)
{
    sqlite3_stmt *q = NULL;
    char msg[sizeof ((store_job *)0)->error];
    int rc, in_tx = 0;
    if (st == NULL || (unsigned)state > STORE_JOB_CANCELED || done < 0)
        return ATTUNE_EINVAL;
    utf8_truncate(error != NULL ? error : "", msg, sizeof msg);
    if ((rc = store_begin(st)) != 0)
        goto fail;
    in_tx = 1;
    if ((rc = store_stmt(st, STMT_JOB_TOTAL, "SELECT total FROM jobs WHERE id = ?1", &q)) != 0)
        goto fail;
    if (sqlite3_bind_int64(q, 1, id) != SQLITE_OK) {
        rc = ATTUNE_EDB;
        goto fail;
    }
    int src = sqlite3_step(q);
    if (src != SQLITE_ROW) {
        rc = src == SQLITE_DONE ? ATTUNE_ENOTFOUND : store_sqlite_err(src);
        goto fail;
    }
    if (done > sqlite3_column_int(q, 0)) {
        rc = ATTUNE_EINVAL;
        goto fail;
    }
    store_stmt_done(q);
    if ((rc = store_stmt(st, STMT_JOB_UPDATE,
                         "UPDATE jobs SET state = ?2, done = ?3, error = ?4, updated_at = ?5 "
                         "WHERE id = ?1",
                         &q)) != 0)
        goto fail;
    if (sqlite3_bind_int64(q, 1, id) || bind_text(q, 2, store_job_state_name(state)) ||
        sqlite3_bind_int(q, 3, done) || bind_text(q, 4, msg) ||
        sqlite3_bind_int64(q, 5, store_now())) {
        rc = ATTUNE_EDB;
        goto fail;
    }
    if ((rc = store_exec(q)) != 0)
        goto fail;
    store_stmt_done(q);
    q = NULL;
    if ((rc = store_commit(st)) != 0)
        goto fail;
    return 0;
fail:
    store_stmt_done(q);
    if (in_tx)
        store_rollback(st);
    return rc;
}

/* Contract: see store.h. *out is NULL when there are no such jobs. */
int store_jobs_list(store *st, int state, store_job **out, int *n)
{
    sqlite3_stmt *q = NULL;
    store_job *rows = NULL;
    int count = 0, cap = 0, src;
    if (out != NULL)
        *out = NULL;
    if (n != NULL)
        *n = 0;
    if (st == NULL || out == NULL || n == NULL || state > (int)STORE_JOB_CANCELED)
        return ATTUNE_EINVAL;
    int rc = store_stmt(st, STMT_JOBS_LIST,
                        "SELECT " JOB_COLS " FROM jobs WHERE ?1 IS NULL OR state = ?1 "
                        "ORDER BY created_at, id",
                        &q);
    if (rc != 0)
        goto fail;
    if (bind_text(q, 1, state < 0 ? NULL : store_job_state_name((store_job_state)state))) {
        rc = ATTUNE_EDB;
        goto fail;
    }
    while ((src = sqlite3_step(q)) == SQLITE_ROW) {
        if ((rc = grow_array(&rows, &cap, count, sizeof *rows)) != 0)
            goto fail;
        if ((rc = job_read(q, &rows[count])) != 0)
            goto fail;
        count++;
    }
    if (src != SQLITE_DONE) {
        rc = store_sqlite_err(src);
        goto fail;
    }
    *out = rows;
    *n = count;
    rows = NULL;
fail:
    store_stmt_done(q);
    free(rows);
    return rc;
}

/* ---- for store_stream.c: every row of a device, one step at a time */

const char *store_meas_all_sql(void)
{
    /* MEAS_SELECT's rows in MEAS_ORDER, but walked shape by shape in key
     * order (CROSS JOIN keeps shapes outside): only each shape's few rows
     * are sorted, so the first row comes at once however large the table,
     * and err_ratio (NULL here) is not computed: exports do not carry it */
    return MEAS_COLUMNS "NULL FROM shapes s CROSS JOIN measurements m ON m.shape_id = s.id "
                        "WHERE m.device_id = ?1 AND (?2 IS NULL OR m.stack_id = ?2)" MEAS_ORDER;
}

int store_meas_row_read(sqlite3_stmt *q, store_measurement *m)
{
    return row_read(q, m);
}
