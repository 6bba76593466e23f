/* store_measurements.c -- measurement rows: write, commit, look up, read back. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "store_internal.h"

/* ---- measurements */

#define MEAS_UPSERT                                                                    \
    "INSERT INTO measurements(device_id, stack_id, shape_id, tactic, status, time_us, " \
    "time_us_min, time_us_max, time_us_copies, n, max_abs_err, rel_err, mode, l2, "    \
    "rows_checked, note, host, taken_at, noisy, src_rel_err) VALUES (?1, ?2, ?3, ?4, "  \
    "?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20) "       \
    "ON CONFLICT(device_id, stack_id, shape_id, tactic) DO UPDATE SET "               \
    "status = excluded.status, time_us = excluded.time_us, "                           \
    "time_us_min = excluded.time_us_min, time_us_max = excluded.time_us_max, "         \
    "time_us_copies = excluded.time_us_copies, n = excluded.n, "                       \
    "max_abs_err = excluded.max_abs_err, rel_err = excluded.rel_err, "                 \
    "mode = excluded.mode, l2 = excluded.l2, rows_checked = excluded.rows_checked, "   \
    "note = excluded.note, host = excluded.host, taken_at = excluded.taken_at, "      \
    "noisy = excluded.noisy, src_rel_err = excluded.src_rel_err"

int store_write_measurement(store *st, const store_measurement *m, const char *tactic,
                            int only_newer, int *written, int64_t *shape_id_out)
{
    sqlite3_stmt *q = NULL;
    int64_t shape_id;
    int rc = store_shape_id(st, &m->shape, &shape_id);
    if (rc != 0)
        return rc;
    if (shape_id_out != NULL)
        *shape_id_out = shape_id;
    if (only_newer)
        rc = store_stmt(st, STMT_MEAS_MERGE,
                        MEAS_UPSERT " WHERE excluded.taken_at > measurements.taken_at", &q);
    else
        rc = store_stmt(st, STMT_MEAS_PUT, MEAS_UPSERT, &q);
    if (rc == 0)
        rc = store_write(
            st, q,
            store_bind_text(q, 1, m->device_id) || store_bind_text(q, 2, m->stack_id) ||
                sqlite3_bind_int64(q, 3, shape_id) || store_bind_text(q, 4, tactic) ||
                store_bind_text(q, 5, store_status_name(m->status)) ||
                store_bind_double(q, 6, m->time_us) || store_bind_double(q, 7, m->time_us_min) ||
                store_bind_double(q, 8, m->time_us_max) ||
                store_bind_double(q, 9, m->time_us_copies) || sqlite3_bind_int(q, 10, m->n) ||
                store_bind_double(q, 11, m->max_abs_err) || store_bind_double(q, 12, m->rel_err) ||
                store_bind_text(q, 13, m->mode) || store_bind_text(q, 14, m->l2) ||
                sqlite3_bind_int(q, 15, m->rows_checked) || store_bind_text(q, 16, m->note) ||
                store_bind_text(q, 17, m->host) || sqlite3_bind_int64(q, 18, m->taken_at) ||
                sqlite3_bind_int(q, 19, m->noisy != 0) ||
                /* only an e4m3 row has a source: rows of other dtypes made
                 * with memset (0, not NaN) store none */
                store_bind_double(q, 20, m->shape.dtype == ATTN_E4M3 ? m->src_rel_err : NAN),
            written);
    return rc;
}

/* store_measurement_put's transaction: ctx is the checked row, tactic
 * canonical. */
static int measurement_put_tx(store *st, void *ctx)
{
    const store_measurement *m = ctx;
    return store_write_measurement(st, m, m->tactic, 0, NULL, NULL);
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
    int rc;
    if (st == NULL || m == NULL)
        return ATTUNE_EINVAL;
    store_measurement c = *m;
    if (isinf(c.max_abs_err) && c.max_abs_err > 0)
        c.max_abs_err = NAN;
    if (isinf(c.rel_err) && c.rel_err > 0)
        c.rel_err = NAN;
    if (isinf(c.src_rel_err) && c.src_rel_err > 0)
        c.src_rel_err = NAN;
    if ((rc = store_check_measurement(&c, canon, NULL, 0)) != 0)
        return rc;
    memcpy(c.tactic, canon, sizeof c.tactic);
    return store_tx(st, measurement_put_tx, &c);
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
                    "AND m.tactic = ?4 AND m.noisy = 0",
                    &q);
    if (rc != 0)
        goto fail;
    if (store_bind_text(q, 1, device_id) || store_bind_text(q, 2, stack_id) || store_bind_text(q, 3, key) ||
        store_bind_text(q, 4, canon)) {
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
#define MEAS_COLUMNS "SELECT " STORE_MEAS_COLS ", m.incumbent, "
#define MEAS_SELECT                                                                    \
    MEAS_COLUMNS "(SELECT min(o.rel_err) FROM measurements o "                         \
    "WHERE o.device_id = m.device_id AND o.stack_id = m.stack_id "                     \
    "AND o.shape_id = m.shape_id AND o.status = 'ok'), "                               \
    "(SELECT k.power FROM stacks k WHERE k.id = m.stack_id) "                          \
    "FROM measurements m JOIN shapes s ON s.id = m.shape_id "                          \
    "WHERE m.device_id = ?1 AND (?2 IS NULL OR m.stack_id = ?2) "
#define MEAS_ORDER " ORDER BY s.key, m.tactic, m.taken_at DESC, m.stack_id"

int store_meas_columns(sqlite3_stmt *q, int first, store_measurement *m)
{
    char buf[16];
    int rc = 0, i = first;
    memset(m, 0, sizeof *m);
    store_column_text(q, i, m->device_id, sizeof m->device_id);
    store_column_text(q, i + 1, m->stack_id, sizeof m->stack_id);
    m->shape.b = sqlite3_column_int64(q, i + 2);
    m->shape.hq = sqlite3_column_int64(q, i + 3);
    m->shape.hkv = sqlite3_column_int64(q, i + 4);
    m->shape.sq = sqlite3_column_int64(q, i + 5);
    m->shape.skv = sqlite3_column_int64(q, i + 6);
    m->shape.d = sqlite3_column_int64(q, i + 7);
    store_column_text(q, i + 8, buf, sizeof buf);
    if (attn_dtype_parse(buf, &m->shape.dtype) != 0) {
        m->shape.d = 0;
        rc = ATTUNE_EDB;
    }
    m->shape.causal = sqlite3_column_int(q, i + 9) != 0;
    store_column_text(q, i + 10, m->tactic, sizeof m->tactic);
    store_column_text(q, i + 11, buf, sizeof buf);
    if (store_status_parse(buf, &m->status) != 0) {
        m->status = (store_status)99;
        rc = ATTUNE_EDB;
    }
    m->time_us = store_column_double(q, i + 12);
    m->time_us_min = store_column_double(q, i + 13);
    m->time_us_max = store_column_double(q, i + 14);
    m->time_us_copies = store_column_double(q, i + 15);
    m->n = sqlite3_column_int(q, i + 16);
    m->max_abs_err = store_column_double(q, i + 17);
    m->rel_err = store_column_double(q, i + 18);
    store_column_text(q, i + 19, m->mode, sizeof m->mode);
    store_column_text(q, i + 20, m->l2, sizeof m->l2);
    m->rows_checked = sqlite3_column_int(q, i + 21);
    store_column_text(q, i + 22, m->note, sizeof m->note);
    store_column_text(q, i + 23, m->host, sizeof m->host);
    m->taken_at = sqlite3_column_int64(q, i + 24);
    m->noisy = sqlite3_column_int(q, i + 25) != 0;
    m->src_rel_err = store_column_double(q, i + 26);
    return rc;
}

/* A MEAS_SELECT row: STORE_MEAS_COLS, then incumbent, the best ok
 * rel_err of its (device, stack, shape) and its stack's power mode. */
static int row_read(sqlite3_stmt *q, store_measurement *m)
{
    int rc = store_meas_columns(q, 0, m);
    if (rc != 0)
        return rc;
    m->incumbent = sqlite3_column_int(q, STORE_MEAS_NCOLS) != 0;
    double best = store_column_double(q, STORE_MEAS_NCOLS + 1);
    m->err_ratio = isnan(m->rel_err) || isnan(best) || best == 0 ? NAN : m->rel_err / best;
    store_column_text(q, STORE_MEAS_NCOLS + 2, m->power, sizeof m->power);
    return 0;
}

static int row_read_any(sqlite3_stmt *q, void *row)
{
    return row_read(q, row);
}

/* The rows of MEAS_SELECT (statement id, sql) for device_id, stack_id
 * (NULL: every stack) and, when key is not NULL, that shape only. */
static int meas_read(store *st, store_stmt_id id, const char *sql, const char *device_id,
                     const char *stack_id, const char *key, store_measurement **out, int *n)
{
    sqlite3_stmt *q = NULL;
    void *rows = NULL;
    int rc = store_stmt(st, id, sql, &q);
    if (rc == 0 && (store_bind_text(q, 1, device_id) || store_bind_text(q, 2, stack_id) ||
                    (key != NULL && store_bind_text(q, 3, key))))
        rc = ATTUNE_EDB;
    if (rc == 0 && (rc = store_collect(q, sizeof **out, row_read_any, &rows, n)) == 0)
        *out = rows;
    store_stmt_done(q);
    return rc;
}

/* Contract: see store.h. On error *out is NULL and *n 0. Rows come ordered
 * by tactic, newest first within a tactic. */
int store_measurements_get(store *st, const char *device_id, const char *stack_id,
                           const attn_shape *s, store_measurement **out, int *n)
{
    char key[ATTN_SHAPE_KEY_MAX];
    if (out != NULL)
        *out = NULL;
    if (n != NULL)
        *n = 0;
    if (st == NULL || device_id == NULL || s == NULL || out == NULL || n == NULL)
        return ATTUNE_EINVAL;
    int rc = lookup_keys(s, NULL, key, NULL);
    if (rc != 0)
        return rc;
    return meas_read(st, STMT_MEAS_READ, MEAS_SELECT "AND s.key = ?3" MEAS_ORDER, device_id,
                     stack_id, key, out, n);
}

/* Every row of device_id that sql (statement id) selects, in MEAS_ORDER. */
static int meas_device(store *st, store_stmt_id id, const char *sql, const char *device_id,
                       store_measurement **out, int *n)
{
    if (out != NULL)
        *out = NULL;
    if (n != NULL)
        *n = 0;
    if (st == NULL || device_id == NULL || out == NULL || n == NULL)
        return ATTUNE_EINVAL;
    return meas_read(st, id, sql, device_id, NULL, NULL, out, n);
}

/* Contract: see store.h; rows ordered by shape key, then as above. */
int store_measurements_all(store *st, const char *device_id, store_measurement **out,
                           int *n)
{
    return meas_device(st, STMT_MEAS_READ_ALL, MEAS_SELECT MEAS_ORDER, device_id, out, n);
}

/* Contract: see store.h; ordered as store_measurements_all. */
int store_measurements_exported(store *st, const char *device_id, store_measurement **out,
                                int *n)
{
    return meas_device(st, STMT_MEAS_READ_EXPORTED,
                       MEAS_SELECT "AND " STORE_COMPLETE_ROW("m", "?1") MEAS_ORDER, device_id,
                       out, n);
}

typedef struct winner_mark_args {
    const char *device_id, *stack_id, *key, *tactic;
} winner_mark_args;

/* The winner's row marked first, then the others cleared: while the new
 * mark is set the old one still stands, so a trigger on the mark
 * (fleet_local.c's fleet_log_complete) sees whether the (stack, shape) had
 * a completed tune before this one. */
static int winner_mark_tx(store *st, void *ctx)
{
    const winner_mark_args *a = ctx;
    static const char *const sql[2] = {
        "UPDATE measurements SET incumbent = 1 WHERE device_id = ?1 AND stack_id = ?2"
        " AND shape_id = (SELECT id FROM shapes WHERE key = ?3) AND tactic = ?4",
        "UPDATE measurements SET incumbent = 0 WHERE device_id = ?1 AND stack_id = ?2"
        " AND shape_id = (SELECT id FROM shapes WHERE key = ?3) AND tactic IS NOT ?4"};
    static const store_stmt_id ids[2] = {STMT_WINNER_MARK, STMT_WINNER_CLEAR};
    int rc = 0, rows = 0;
    for (int i = a->tactic == NULL; i < 2 && rc == 0; i++) {
        sqlite3_stmt *q = NULL;
        int changed = 0;
        if ((rc = store_stmt(st, ids[i], sql[i], &q)) == 0)
            rc = store_write(st, q,
                             store_bind_text(q, 1, a->device_id) ||
                                 store_bind_text(q, 2, a->stack_id) ||
                                 store_bind_text(q, 3, a->key) || store_bind_text(q, 4, a->tactic),
                             &changed);
        rows += changed;
    }
    return rc == 0 && !rows ? ATTUNE_ENOTFOUND : rc;
}

int store_winner_mark(store *st, const char *device_id, const char *stack_id,
                      const attn_shape *s, const char *tactic)
{
    char key[ATTN_SHAPE_KEY_MAX];
    attn_shape_key(s, key, sizeof key);
    winner_mark_args a = {device_id, stack_id, key, tactic};
    return store_tx(st, winner_mark_tx, &a);
}

/* ---- marks of imported rows (store_internal.h) */

/* The fastest row of group g (the columns device_id, stack_id, shape_id)
 * that the tuner could have marked: migration 2 -> 3's rule, noisy rows
 * left out (never a winner). */
#define FASTEST_OF(g)                                                                   \
    "(SELECT o.rowid FROM measurements o WHERE o.device_id = " g ".device_id"            \
    " AND o.stack_id = " g ".stack_id AND o.shape_id = " g ".shape_id"                   \
    " AND o.status IN ('ok', 'inaccurate') AND o.noisy = 0"                              \
    " AND coalesce(o.time_us_copies, o.time_us) IS NOT NULL"                             \
    " ORDER BY o.status <> 'ok', coalesce(o.time_us_copies, o.time_us), o.rel_err,"      \
    " o.tactic LIMIT 1)"
#define UNMARKED(g)                                                                     \
    "NOT EXISTS (SELECT 1 FROM measurements k WHERE k.device_id = " g ".device_id"       \
    " AND k.stack_id = " g ".stack_id AND k.shape_id = " g ".shape_id AND k.incumbent = 1)"

int store_mark_fastest(store *st, const char *device_id, const char *stack_id, int64_t shape_id)
{
    static const char sql[] =
        "UPDATE measurements SET incumbent = 1 WHERE rowid = (SELECT " FASTEST_OF("g")
        " FROM (SELECT ?1 AS device_id, ?2 AS stack_id, ?3 AS shape_id) g WHERE " UNMARKED("g")
        ")";
    sqlite3_stmt *q = NULL;
    int rc = store_stmt(st, STMT_MARK_FASTEST, sql, &q);
    if (rc == 0)
        rc = store_write(st, q,
                         store_bind_text(q, 1, device_id) || store_bind_text(q, 2, stack_id) ||
                             sqlite3_bind_int64(q, 3, shape_id),
                         NULL);
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
                        "WHERE m.device_id = ?1 AND (?2 IS NULL OR m.stack_id = ?2) "
                        "AND " STORE_COMPLETE_ROW("m", "?1") MEAS_ORDER;
}

int store_meas_row_read(sqlite3_stmt *q, store_measurement *m)
{
    return row_read(q, m);
}
