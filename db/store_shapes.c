/* store_shapes.c -- the shapes table: a shape's row id, and shape lists read back. */
#include <stdlib.h>
#include <string.h>

#include "store_internal.h"

/* Contract: see store_internal.h. Looks the key up first: shapes repeat
 * across tactics, so the insert is the rare path. */
int store_shape_id(store *st, const attn_shape *s, int64_t *id)
{
    char key[ATTN_SHAPE_KEY_MAX];
    sqlite3_stmt *q = NULL;
    attn_shape_key(s, key, sizeof key);
    int rc = store_stmt_text(st, STMT_SHAPE_SELECT, "SELECT id FROM shapes WHERE key = ?1", key,
                             &q);
    if (rc == 0 && (rc = store_step_row(q)) == 0)
        *id = sqlite3_column_int64(q, 0);
    store_stmt_done(q);
    if (rc != ATTUNE_ENOTFOUND)
        return rc; /* found, or an error */
    rc = store_stmt(st, STMT_SHAPE_INSERT,
                    "INSERT INTO shapes(key, b, hq, hkv, sq, skv, d, dtype, causal) "
                    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                    &q);
    if (rc == 0)
        rc = store_write(st, q,
                         store_bind_text(q, 1, key) || sqlite3_bind_int64(q, 2, s->b) ||
                             sqlite3_bind_int64(q, 3, s->hq) || sqlite3_bind_int64(q, 4, s->hkv) ||
                             sqlite3_bind_int64(q, 5, s->sq) || sqlite3_bind_int64(q, 6, s->skv) ||
                             sqlite3_bind_int64(q, 7, s->d) ||
                             store_bind_text(q, 8, attn_dtype_name(s->dtype)) ||
                             sqlite3_bind_int(q, 9, s->causal ? 1 : 0),
                         NULL);
    if (rc == 0)
        *id = sqlite3_last_insert_rowid(st->db);
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

static int shape_read_any(sqlite3_stmt *q, void *row)
{
    return shape_read(q, 0, row);
}

/* Step q (shape columns from 0) into a malloc'd array. */
int store_collect_shapes(sqlite3_stmt *q, attn_shape **out, int *n)
{
    void *rows;
    int rc = store_collect(q, sizeof **out, shape_read_any, &rows, n);
    *out = rows;
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
    int rc = store_stmt_text(st, STMT_SHAPES,
                             "SELECT b, hq, hkv, sq, skv, d, dtype, causal FROM shapes "
                             "WHERE id IN (SELECT shape_id FROM measurements WHERE device_id = ?1) "
                             "ORDER BY key",
                             device_id, &q);
    if (rc == 0)
        rc = store_collect_shapes(q, out, n);
    store_stmt_done(q);
    return rc;
}
