/* store_devices.c -- devices and stacks: upserts, lookup, listing. */
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


/* ---- devices and stacks */

int store_upsert_stack(store *st, const attn_stack *s, int *changed)
{
    sqlite3_stmt *q = NULL;
    int rc = store_stmt(st, STMT_STACK_UPSERT,
                        "INSERT INTO stacks(id, driver, runtime, blas, attune, kernels, "
                        "first_seen, power) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) "
                        "ON CONFLICT(id) DO NOTHING",
                        &q);
    if (rc == 0)
        rc = store_write(st, q,
                         store_bind_text(q, 1, s->id) || store_bind_text(q, 2, s->driver) ||
                             store_bind_text(q, 3, s->runtime) || store_bind_text(q, 4, s->blas) ||
                             store_bind_text(q, 5, s->attune) || store_bind_text(q, 6, s->kernels) ||
                             sqlite3_bind_int64(q, 7, store_now()) || store_bind_text(q, 8, s->power),
                         changed);
    return rc;
}

/* seen is kept no later than now: a time from a clock ahead (within
 * STORE_FUTURE_SLACK_S, or stored before that check) would otherwise
 * outrank every later write of the device; a last_seen already after now
 * is taken as wrong and replaced by the next write, whatever its time. */
int store_upsert_device(store *st, const attn_device_info *d, int64_t seen,
                        const char *latest_stack, int *changed)
{
    sqlite3_stmt *q = NULL;
    int64_t now = store_now();
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
        "WHERE (excluded.last_seen >= devices.last_seen OR devices.last_seen > ?13) AND ("
        "excluded.last_seen <> devices.last_seen OR devices.name IS NOT excluded.name OR "
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
    if (rc == 0)
        rc = store_write(st, q,
                         store_bind_text(q, 1, d->id) || store_bind_text(q, 2, d->name) ||
                             store_bind_text(q, 3, d->kind) || sqlite3_bind_int(q, 4, d->index) ||
                             sqlite3_bind_int(q, 5, d->cc_major) ||
                             sqlite3_bind_int(q, 6, d->cc_minor) ||
                             sqlite3_bind_int(q, 7, d->sm_count) ||
                             sqlite3_bind_int64(q, 8, d->memory_mb) ||
                             sqlite3_bind_int(q, 9, d->clock_mhz) ||
                             sqlite3_bind_int(q, 10, d->mem_clock_mhz) ||
                             store_bind_text(q, 11, latest_stack) ||
                             sqlite3_bind_int64(q, 12, seen < now ? seen : now) ||
                             sqlite3_bind_int64(q, 13, now),
                         changed);
    return rc;
}

/* Contract: see store.h. A stack with an empty id gets attn_stack_finish's;
 * a given id must match its fields. ATTUNE_EINVAL for invalid fields. */
typedef struct device_put_args {
    const attn_device_info *info;
    const attn_stack *stack;
} device_put_args;

static int device_put_tx(store *st, void *ctx)
{
    const device_put_args *a = ctx;
    int rc = store_upsert_stack(st, a->stack, NULL);
    return rc != 0 ? rc : store_upsert_device(st, a->info, store_now(), a->stack->id, NULL);
}

int store_device_put(store *st, const attn_device_info *info, const attn_stack *stack)
{
    int rc;
    if (st == NULL || info == NULL || stack == NULL)
        return ATTUNE_EINVAL;
    attn_stack sk = *stack;
    if (sk.id[0] == 0)
        attn_stack_finish(&sk);
    if ((rc = store_check_device(info, NULL, 0)) != 0 ||
        (rc = store_check_stack(&sk, NULL, 0)) != 0)
        return rc;
    device_put_args a = {info, &sk};
    return store_tx(st, device_put_tx, &a);
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
    if (stack != NULL)
        store_stack_row(q, 10, stack);
}

void store_stack_row(sqlite3_stmt *q, int first, attn_stack *s)
{
    memset(s, 0, sizeof *s);
    store_column_text(q, first, s->id, sizeof s->id);
    store_column_text(q, first + 1, s->driver, sizeof s->driver);
    store_column_text(q, first + 2, s->runtime, sizeof s->runtime);
    store_column_text(q, first + 3, s->blas, sizeof s->blas);
    store_column_text(q, first + 4, s->attune, sizeof s->attune);
    store_column_text(q, first + 5, s->kernels, sizeof s->kernels);
    store_column_text(q, first + 6, s->power, sizeof s->power);
}

/* Contract: see store.h. The query narrows to the rows whose id or name
 * could match (through the indexes); attn_device_match decides, as for
 * local devices: an exact id over a name match, and among equals the most
 * recently seen. latest_stack is zeroed when the device has no stack
 * recorded. */
int store_device_get(store *st, const char *id_or_name, attn_device_info *info,
                     attn_stack *latest_stack)
{
    sqlite3_stmt *q = NULL;
    if (st == NULL || id_or_name == NULL || info == NULL)
        return ATTUNE_EINVAL;
    int rc = store_stmt_text(st, STMT_DEVICE_GET,
                             STORE_DEVICE_SELECT "WHERE d.id = ?1 OR d.name = ?1 COLLATE NOCASE "
                             "ORDER BY d.last_seen DESC, d.rowid DESC",
                             id_or_name, &q);
    if (rc != 0)
        goto fail;
    int src = SQLITE_DONE, best = ATTN_MATCH_NONE;
    attn_device_info cand;
    attn_stack cand_stack;
    while (best < ATTN_MATCH_EXACT && (src = sqlite3_step(q)) == SQLITE_ROW) {
        store_device_row(q, &cand, &cand_stack);
        int score = attn_device_match(id_or_name, &cand, 0);
        if (score > best) {
            best = score;
            *info = cand;
            if (latest_stack != NULL)
                *latest_stack = cand_stack;
        }
    }
    if (src != SQLITE_ROW && src != SQLITE_DONE)
        rc = store_sqlite_err(src);
    else if (best == ATTN_MATCH_NONE)
        rc = ATTUNE_ENOTFOUND;
fail:
    store_stmt_done(q);
    return rc;
}
