/* store_devices.c -- devices the store knows, and the incumbent-winner mark. */
#include <stdlib.h>
#include <string.h>

#include "../common/grow.h"
#include "store_internal.h"

int store_devices_list(store *st, attn_device_info **infos, attn_stack **stacks, int *n)
{
    static const char sql[] = STORE_DEVICE_SELECT "ORDER BY d.last_seen DESC, d.id";
    sqlite3_stmt *q = NULL;
    attn_device_info *inf = NULL;
    attn_stack *stk = NULL;
    int cnt = 0, cap = 0, rc;
    *infos = NULL;
    *stacks = NULL;
    *n = 0;
    int src = sqlite3_prepare_v2(st->db, sql, -1, &q, NULL);
    if (src != SQLITE_OK)
        return store_sqlite_err(src);
    while ((src = sqlite3_step(q)) == SQLITE_ROW) {
        int cap2 = cap;
        if ((rc = grow_array(&inf, &cap, cnt, sizeof *inf)) != 0 ||
            (rc = grow_array(&stk, &cap2, cnt, sizeof *stk)) != 0)
            goto fail;
        store_device_row(q, &inf[cnt], &stk[cnt]);
        cnt++;
    }
    if (src != SQLITE_DONE) {
        rc = store_sqlite_err(src);
        goto fail;
    }
    sqlite3_finalize(q);
    *infos = inf;
    *stacks = stk;
    *n = cnt;
    return 0;
fail:
    sqlite3_finalize(q);
    free(inf);
    free(stk);
    return rc;
}

int store_winner_mark(store *st, const char *device_id, const char *stack_id,
                      const attn_shape *s, const char *tactic)
{
    static const char sql[] =
        "UPDATE measurements SET incumbent = (?4 IS NOT NULL AND tactic = ?4)"
        " WHERE device_id = ?1 AND stack_id = ?2"
        "   AND shape_id = (SELECT id FROM shapes WHERE key = ?3)";
    char key[ATTN_SHAPE_KEY_MAX];
    attn_shape_key(s, key, sizeof key);
    sqlite3_stmt *q = NULL;
    int rc = store_begin(st);
    if (rc != 0)
        return rc;
    int src = sqlite3_prepare_v2(st->db, sql, -1, &q, NULL);
    if (src == SQLITE_OK &&
        (sqlite3_bind_text(q, 1, device_id, -1, SQLITE_STATIC) ||
         sqlite3_bind_text(q, 2, stack_id, -1, SQLITE_STATIC) ||
         sqlite3_bind_text(q, 3, key, -1, SQLITE_STATIC) ||
         (tactic ? sqlite3_bind_text(q, 4, tactic, -1, SQLITE_STATIC)
                 : sqlite3_bind_null(q, 4))))
        src = SQLITE_ERROR;
    if (src == SQLITE_OK)
        src = sqlite3_step(q);
    if (src != SQLITE_DONE) {
        rc = store_sqlite_err(src);
        goto fail;
    }
    if (sqlite3_changes(st->db) == 0) {
        rc = ATTUNE_ENOTFOUND;
        goto fail;
    }
    sqlite3_finalize(q);
    return store_commit(st);
fail:
    sqlite3_finalize(q);
    store_rollback(st);
    return rc;
}
