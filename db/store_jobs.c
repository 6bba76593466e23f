/* store_jobs.c -- tuning jobs as rows: create, read, update, list. */
#include <stdlib.h>
#include <string.h>


#include "store_internal.h"

static int job_state_parse(const char *s, store_job_state *out)
{
    for (int i = 0; s != NULL && i < 5; i++)
        if (strcmp(s, store_job_state_name((store_job_state)i)) == 0) {
            *out = (store_job_state)i;
            return 0;
        }
    return ATTUNE_EINVAL;
}

/* ---- jobs */

const char *store_job_kind_name(store_job_kind k)
{
    return k == STORE_JOB_MISS ? "miss" : "tune";
}

typedef struct job_create_args {
    const char *device_id;
    store_job_kind kind;
    const attn_shape *shapes;
    int n;
    int64_t id;  /* out */
} job_create_args;

/* store_job_create's transaction: the job row, then one row per shape. */
static int job_create_tx(store *st, void *ctx)
{
    job_create_args *a = ctx;
    sqlite3_stmt *q = NULL;
    int rc = store_stmt(st, STMT_JOB_INSERT,
                        "INSERT INTO jobs(device_id, state, done, total, created_at, "
                        "updated_at, error, kind) VALUES (?1, 'queued', 0, ?2, ?3, ?3, '', ?4)",
                        &q);
    if (rc == 0)
        rc = store_write(st, q,
                         store_bind_text(q, 1, a->device_id) || sqlite3_bind_int(q, 2, a->n) ||
                             sqlite3_bind_int64(q, 3, store_now()) ||
                             store_bind_text(q, 4, store_job_kind_name(a->kind)),
                         NULL);
    if (rc != 0)
        return rc;
    a->id = sqlite3_last_insert_rowid(st->db);
    for (int i = 0; i < a->n && rc == 0; i++) {
        int64_t shape_id;
        if ((rc = store_shape_id(st, &a->shapes[i], &shape_id)) == 0 &&
            (rc = store_stmt(st, STMT_JOB_SHAPE_INSERT,
                             "INSERT INTO job_shapes(job_id, position, shape_id) "
                             "VALUES (?1, ?2, ?3)",
                             &q)) == 0)
            rc = store_write(st, q,
                             sqlite3_bind_int64(q, 1, a->id) || sqlite3_bind_int(q, 2, i) ||
                                 sqlite3_bind_int64(q, 3, shape_id),
                             NULL);
    }
    return rc;
}

/* Contract: see store.h. n must be in [1, STORE_MAX_JOB_SHAPES] and every
 * shape valid (ATTUNE_EINVAL otherwise); job and shapes are written in one
 * transaction. */
int store_job_create(store *st, const char *device_id, const attn_shape *shapes, int n,
                     int64_t *id)
{
    return store_job_create_kind(st, device_id, STORE_JOB_TUNE, shapes, n, id);
}

int store_job_create_kind(store *st, const char *device_id, store_job_kind kind,
                          const attn_shape *shapes, int n, int64_t *id)
{
    int rc;
    if (st == NULL || device_id == NULL || shapes == NULL || id == NULL || n < 1 ||
        n > STORE_MAX_JOB_SHAPES)
        return ATTUNE_EINVAL;
    if ((rc = store_check_id(device_id, 64, "device id", NULL, 0)) != 0)
        return rc;
    for (int i = 0; i < n; i++)
        if ((rc = attn_shape_validate(&shapes[i], NULL, 0)) != 0)
            return ATTUNE_EINVAL;
    job_create_args a = {device_id, kind, shapes, n, 0};
    if ((rc = store_tx(st, job_create_tx, &a)) == 0)
        *id = a.id;
    return rc;
}

#define JOB_COLS "id, device_id, state, done, total, created_at, updated_at, error, kind"

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
    char kind[8];
    store_column_text(q, 8, kind, sizeof kind);
    j->kind = strcmp(kind, "miss") == 0 ? STORE_JOB_MISS : STORE_JOB_TUNE;
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
    int rc = store_stmt_int(st, STMT_JOB_GET, "SELECT " JOB_COLS " FROM jobs WHERE id = ?1",
                            id, &q);
    if (rc != 0 || (rc = store_step_row(q)) != 0 || (rc = job_read(q, job)) != 0)
        goto fail;
    store_stmt_done(q);
    if ((rc = store_stmt_int(st, STMT_JOB_SHAPES,
                             "SELECT s.b, s.hq, s.hkv, s.sq, s.skv, s.d, s.dtype, s.causal "
                             "FROM job_shapes j JOIN shapes s ON s.id = j.shape_id "
                             "WHERE j.job_id = ?1 ORDER BY j.position",
                             id, &q)) != 0 ||
        (rc = store_collect_shapes(q, &shapes, &n)) != 0)
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

typedef struct job_update_args {
    int64_t id;
    store_job_state state;
    int done;
    const char *error;
} job_update_args;

/* store_job_update's transaction: done checked against the row's total. */
static int job_update_tx(store *st, void *ctx)
{
    const job_update_args *a = ctx;
    sqlite3_stmt *q = NULL;
    int rc = store_stmt_int(st, STMT_JOB_TOTAL, "SELECT total FROM jobs WHERE id = ?1", a->id,
                            &q);
    if (rc != 0 || (rc = store_step_row(q)) != 0)
        goto fail;
    if (a->done > sqlite3_column_int(q, 0)) {
        rc = ATTUNE_EINVAL;
        goto fail;
    }
    store_stmt_done(q);
    if ((rc = store_stmt(st, STMT_JOB_UPDATE,
                         "UPDATE jobs SET state = ?2, done = ?3, error = ?4, updated_at = ?5 "
                         "WHERE id = ?1",
                         &q)) != 0)
        goto fail;
    return store_write(st, q,
                       sqlite3_bind_int64(q, 1, a->id) ||
                           store_bind_text(q, 2, store_job_state_name(a->state)) ||
                           sqlite3_bind_int(q, 3, a->done) || store_bind_text(q, 4, a->error) ||
                           sqlite3_bind_int64(q, 5, store_now()),
                       NULL);
fail:
    store_stmt_done(q);
    return rc;
}

/* Contract: see store.h. error NULL clears the error text; a longer one is
 * cut to what store_job.error holds. ATTUNE_EINVAL for an unknown state or
 * done outside [0, total], ATTUNE_ENOTFOUND for an unknown job. */
int store_job_update(store *st, int64_t id, store_job_state state, int done,
                     const char *error)
{
    char msg[sizeof ((store_job *)0)->error];
    if (st == NULL || (unsigned)state > STORE_JOB_CANCELED || done < 0)
        return ATTUNE_EINVAL;
    utf8_truncate(error != NULL ? error : "", msg, sizeof msg);
    job_update_args a = {id, state, done, msg};
    return store_tx(st, job_update_tx, &a);
}

static int job_read_any(sqlite3_stmt *q, void *row)
{
    return job_read(q, row);
}

/* Contract: see store.h. *out is NULL when there are no such jobs. */
int store_jobs_list(store *st, int state, store_job **out, int *n)
{
    sqlite3_stmt *q = NULL;
    void *rows = NULL;
    if (out != NULL)
        *out = NULL;
    if (n != NULL)
        *n = 0;
    if (st == NULL || out == NULL || n == NULL || state > (int)STORE_JOB_CANCELED)
        return ATTUNE_EINVAL;
    int rc = store_stmt_text(st, STMT_JOBS_LIST,
                             "SELECT " JOB_COLS " FROM jobs WHERE ?1 IS NULL OR state = ?1 "
                             "ORDER BY created_at, id",
                             state < 0 ? NULL : store_job_state_name((store_job_state)state), &q);
    if (rc == 0 && (rc = store_collect(q, sizeof **out, job_read_any, &rows, n)) == 0)
        *out = rows;
    store_stmt_done(q);
    return rc;
}

/* ---- retention of tune on miss */

typedef struct forget_args {
    const char *device_id;
    const char *key;
    int64_t rows;  /* out */
    int64_t *jobs; /* out: the miss jobs deleted, malloc'd */
    int njobs;
} forget_args;

/* Run sql (parameters ?1 device id, ?2 shape key) on st; *changes: rows
 * it changed. 0 or ATTUNE_EDB. Rarely run: prepared each time. */
static int forget_step(store *st, const forget_args *a, const char *sql, int64_t *changes)
{
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(st->db, sql, -1, &q, NULL) == SQLITE_OK &&
                     sqlite3_bind_text(q, 1, a->device_id, -1, SQLITE_STATIC) == SQLITE_OK &&
                     sqlite3_bind_text(q, 2, a->key, -1, SQLITE_STATIC) == SQLITE_OK
                 ? sqlite3_step(q)
                 : SQLITE_ERROR;
    if (changes != NULL)
        *changes = rc == SQLITE_ROW ? sqlite3_column_int64(q, 0) : sqlite3_changes(st->db);
    sqlite3_finalize(q);
    return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : ATTUNE_EDB;
}

#define FORGET_SHAPE "(SELECT id FROM shapes WHERE key = ?2)"
#define FORGET_JOBS(kind)                                                              \
    "SELECT j.id FROM jobs j JOIN job_shapes js ON js.job_id = j.id WHERE j.device_id = ?1 " \
    "AND j.kind = '" kind "' AND js.shape_id = " FORGET_SHAPE

static int read_job_id(sqlite3_stmt *q, void *row)
{
    *(int64_t *)row = sqlite3_column_int64(q, 0);
    return 0;
}

/* The ids of the miss jobs forget_tx deletes, into a->jobs. */
static int forget_ids(store *st, forget_args *a)
{
    sqlite3_stmt *q = NULL;
    void *ids = NULL;
    int rc = sqlite3_prepare_v2(st->db, FORGET_JOBS("miss") " ORDER BY j.id", -1, &q, NULL) ==
                         SQLITE_OK &&
                     sqlite3_bind_text(q, 1, a->device_id, -1, SQLITE_STATIC) == SQLITE_OK &&
                     sqlite3_bind_text(q, 2, a->key, -1, SQLITE_STATIC) == SQLITE_OK
                 ? store_collect(q, sizeof *a->jobs, read_job_id, &ids, &a->njobs)
                 : ATTUNE_EDB;
    sqlite3_finalize(q);
    a->jobs = ids;
    return rc;
}

/* store_forget_miss_shape's transaction: refused when an explicit job
 * holds the shape, or a miss job of it is queued or running (its rows are
 * being written); else its measurements, then its miss jobs (their ids
 * kept for the caller). */
static int forget_tx(store *st, void *ctx)
{
    forget_args *a = ctx;
    int64_t explicit_jobs = 0, in_flight = 0, n = 0;
    int rc = forget_step(st, a, "SELECT count(*) FROM (" FORGET_JOBS("tune") ")", &explicit_jobs);
    if (rc == 0 && explicit_jobs > 0)
        return ATTUNE_EEXIST;
    if (rc == 0)
        rc = forget_step(st, a, "SELECT count(*) FROM (" FORGET_JOBS("miss")
                         " AND j.state IN ('queued', 'running'))", &in_flight);
    if (rc == 0 && in_flight > 0)
        return ATTUNE_ESTATE;
    if (rc == 0)
        rc = forget_step(st, a, "DELETE FROM measurements WHERE device_id = ?1 AND shape_id = "
                         FORGET_SHAPE, &a->rows);
    if (rc == 0)
        rc = forget_ids(st, a);
    if (rc == 0)
        rc = forget_step(st, a, "DELETE FROM jobs WHERE id IN (" FORGET_JOBS("miss") ")", &n);
    return rc;
}

int store_forget_miss_shape(store *st, const char *device_id, const attn_shape *s,
                            int64_t *rows, int64_t **jobs, int *njobs)
{
    char key[ATTN_SHAPE_KEY_MAX];
    if (jobs != NULL)
        *jobs = NULL;
    if (njobs != NULL)
        *njobs = 0;
    if (st == NULL || device_id == NULL || s == NULL || rows == NULL || jobs == NULL ||
        njobs == NULL)
        return ATTUNE_EINVAL;
    forget_args a = {device_id, attn_shape_key(s, key, sizeof key), 0, NULL, 0};
    int rc = store_tx(st, forget_tx, &a);
    *rows = a.rows;
    if (rc == 0) {
        *jobs = a.jobs;
        *njobs = a.njobs;
    } else {
        free(a.jobs);
    }
    return rc;
}
