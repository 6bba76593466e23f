/* store_stream.c -- a fleet table written piece by piece (store.h).
 *
 * GET /v1/export streams a device's table to a client that may read it
 * slowly, or never: the text is produced row by row as the client takes
 * it, from a read-only connection and read transaction of the export's
 * own, so no table is ever held whole in memory and the daemon's database
 * thread is never occupied by an export. The pieces concatenate to what
 * store_export returns (tests/test_store_stream.c compares them). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/json_num.h"
#include "store_internal.h"
#include "store_readonly.h"

struct store_export_stream {
    store *st;            /* read-only, private to this export */
    sqlite3_stmt *q;      /* the rows, stepped one per piece */
    char *piece;          /* text handed out by the last call */
    int state;            /* 0 head, 1 rows, 2 tail sent, 3 done */
    int rows;             /* rows written (a ',' before every one but the first) */
};

int store_export_open(const char *path, const char *device_id, store_export_stream **out,
                      char *err, size_t errlen)
{
    store_export_stream *x = NULL;
    attn_device_info info;
    attn_stack latest;
    int rc;
    if (out != NULL)
        *out = NULL;
    if (path == NULL || device_id == NULL || out == NULL)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "no database or device given");
    if ((x = calloc(1, sizeof *x)) == NULL)
        return attune_fail(err, errlen, ATTUNE_ENOMEM, "out of memory");
    if ((rc = store_open_readonly(path, &x->st, err, errlen)) != 0)
        goto fail;
    /* one read transaction from here to store_export_close: every piece
     * comes from the same snapshot (WAL: writers go on meanwhile) */
    if ((rc = store_read_begin(x->st)) != 0) {
        attune_fail(err, errlen, rc, "cannot start a read transaction");
        goto fail;
    }
    if ((rc = store_device_get(x->st, device_id, &info, &latest)) != 0) {
        attune_fail(err, errlen, rc, "device '%.64s': %s", device_id, attune_strerror(rc));
        goto fail;
    }
    json_t *head = store_fleet_head_json(x->st, &info, &latest);
    char *text = head != NULL ? json_num_dumps(head, JSON_COMPACT) : NULL;
    json_decref(head);
    size_t n = text != NULL ? strlen(text) : 0;
    if (text == NULL || n < 2 || text[n - 1] != '}') {
        free(text);
        rc = attune_fail(err, errlen, ATTUNE_ENOMEM, "out of memory");
        goto fail;
    }
    static const char tail[] = ",\"measurements\":[";
    x->piece = realloc(text, n + sizeof tail);
    if (x->piece == NULL) {
        free(text);
        rc = attune_fail(err, errlen, ATTUNE_ENOMEM, "out of memory");
        goto fail;
    }
    memcpy(x->piece + n - 1, tail, sizeof tail); /* replaces the closing '}' */
    if (sqlite3_prepare_v2(x->st->db, store_meas_all_sql(), -1, &x->q, NULL) != SQLITE_OK ||
        sqlite3_bind_text(x->q, 1, info.id, -1, SQLITE_TRANSIENT) != SQLITE_OK) {
        rc = attune_fail(err, errlen, ATTUNE_EDB, "cannot read measurements: %s",
                         sqlite3_errmsg(x->st->db));
        goto fail;
    }
    *out = x;
    return 0;
fail:
    store_export_close(x);
    return rc;
}

int store_export_next(store_export_stream *x, const char **text, size_t *len)
{
    if (x->state == 0) { /* the head prepared by store_export_open */
        x->state = 1;
        *text = x->piece;
        *len = strlen(x->piece);
        return 1;
    }
    free(x->piece);
    x->piece = NULL;
    if (x->state == 1) {
        int src = sqlite3_step(x->q);
        if (src == SQLITE_ROW) {
            store_measurement m;
            int rc = store_meas_row_read(x->q, &m);
            if (rc != 0)
                return rc;
            json_t *o = store_fleet_measurement_json(&m);
            char *t = o != NULL ? json_num_dumps(o, JSON_COMPACT) : NULL;
            json_decref(o);
            if (t == NULL)
                return ATTUNE_ENOMEM;
            size_t n = strlen(t);
            x->piece = malloc(n + 2);
            if (x->piece == NULL) {
                free(t);
                return ATTUNE_ENOMEM;
            }
            size_t o0 = 0;
            if (x->rows++ > 0)
                x->piece[o0++] = ',';
            memcpy(x->piece + o0, t, n + 1);
            free(t);
            *text = x->piece;
            *len = o0 + n;
            return 1;
        }
        if (src != SQLITE_DONE)
            return store_sqlite_err(src);
        x->state = 2;
        *text = "]}";
        *len = 2;
        return 1;
    }
    x->state = 3;
    return 0;
}

void store_export_close(store_export_stream *x)
{
    if (x == NULL)
        return;
    sqlite3_finalize(x->q);
    if (x->st != NULL)
        store_read_end(x->st);
    store_close(x->st);
    free(x->piece);
    free(x);
}
