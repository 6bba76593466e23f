/* fleet_pg_push.c -- pushing measurement rows to the fleet server.
 *
 * One push is one server transaction: the rows and the pusher's watermark
 * commit together or not at all (fleet_pg.h). Its steps, one function each:
 *
 *   1. check_dims, resolve_rows, resolve_keys: devices and stacks (a
 *      malformed one rejects its rows), then every row
 *      (store_check_measurement), and the server ids of the dimension rows
 *      they name (fleet_pg_dims.c, cached; the ones missing upserted
 *      together, each in its own transaction, before the batch's);
 *   2. dedupe: one row per server key (model, stack, shape, tactic,
 *      device), the newest;
 *   3. lane_run: BEGIN and the batch's order lock; read the source's
 *      watermark (a batch that is already there is skipped whole); probe
 *      which keys the server has; rows with new keys go straight into
 *      measurements with one binary COPY; rows with known keys go through
 *      a temporary staging table and one INSERT ... ON CONFLICT that
 *      replaces a row only when newer; wait for the batch before's order
 *      lock; mark the touched groups dirty; move the source's watermark
 *      (or roll back, when it is not where this batch may move it from);
 *      COMMIT. The small statements before the COPY, and those after it,
 *      are sent together (libpq's pipeline mode).
 *
 * Many batches in a row (fleet_pg_push_stream, a store's bulk push) keep
 * two in flight, on two connections to the server ("lanes", the second
 * opened on first need), each batch's transaction run whole by a thread of
 * its own: batch N+1 is asked for, checked and keyed (the dimension rows
 * it lacks upserted on its lane) while batch N's rows go on the other
 * lane, and its rows are copied while N's are, so that the server inserts
 * with two backends, i.e. two CPUs (one COPY is bound by one). The server
 * keeps the commit order: N+1's last statements wait for N's transaction
 * to end (an advisory lock N takes first), and N+1's watermark moves only
 * from N's, so no batch commits before the one before it, nor when that
 * one did not, and the server's watermark never passes a batch that did
 * not commit. Every such wait is in the server, where PostgreSQL's
 * deadlock detector sees it; the client never waits for one lane while
 * the other's transaction waits for it. Two batches that hold a key in
 * common (a row re-measured between them) do not run at once: the later
 * starts when the earlier has ended. The caller is told of each batch
 * (and acknowledges it) only after its own COMMIT's answer, in order. A
 * pusher killed with N+1 committed and N not acknowledged loses nothing
 * and doubles nothing (the next push finds the watermark past its mark,
 * forks and sends N and N+1 again, which the server's merge makes no-ops,
 * fleet_local.c). When no second connection can be had, the stream runs
 * one batch at a time.
 *
 * Why new and known rows part ways: a new key needs no conflict handling,
 * and COPY into the table itself is PostgreSQL's cheapest way to add rows
 * (heap pages filled and logged in batches, no speculative insertion, no
 * second pass over a staging table); the probe costs one index descent
 * per row. A first push of a device, the bulk of any fleet's load, is all
 * new keys. Should another session insert one of the "new" keys after the
 * probe (two stores holding the same device's rows), the COPY fails with a
 * unique violation, the transaction is rolled back and made again with
 * every key probed, then with every row through the merge.
 *
 * Why binary COPY: doubles travel as their 8 bytes (exact, and neither
 * side formats or parses decimal text, which was most of a push's client
 * time), integers as 4 or 8. */
#ifdef ATTUNE_HAVE_LIBPQ
#include <assert.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>

#include "../common/hash.h"
#include "fleet_pg_internal.h"
#include "store_internal.h"

/* ---- binary COPY and array buffers (network byte order) */

typedef struct cbuf {
    unsigned char *p;
    size_t len, cap;
    int oom;
} cbuf;

static int cb_room(cbuf *b, size_t extra)
{
    if (b->oom)
        return 0;
    if (b->len + extra <= b->cap)
        return 1;
    size_t cap = b->cap ? b->cap : 1 << 20;
    while (cap < b->len + extra)
        cap *= 2;
    unsigned char *p = realloc(b->p, cap);
    if (p == NULL) {
        b->oom = 1;
        return 0;
    }
    b->p = p;
    b->cap = cap;
    return 1;
}

/* Inlined, with the room checked once: called for every field of every
 * row (it was a seventh of a push's client time). */
static inline void cb_be(cbuf *b, uint64_t v, int bytes)
{
    if (b->len + (size_t)bytes > b->cap && !cb_room(b, (size_t)bytes))
        return;
    unsigned char *q = b->p + b->len;
    for (int i = bytes - 1; i >= 0; i--)
        *q++ = (unsigned char)(v >> (8 * i));
    b->len += (size_t)bytes;
}

static void cb_i16(cbuf *b, int v) { cb_be(b, (uint16_t)v, 2); }
static void cb_i32(cbuf *b, int32_t v) { cb_be(b, (uint32_t)v, 4); }

/* A field: its length, then its bytes. */
static void cb_f_int(cbuf *b, int32_t v)
{
    cb_i32(b, 4);
    cb_i32(b, v);
}

static void cb_f_bigint(cbuf *b, int64_t v)
{
    cb_i32(b, 8);
    cb_be(b, (uint64_t)v, 8);
}

/* NaN (unknown) is NULL: length -1. */
static void cb_f_num(cbuf *b, double v)
{
    if (!isfinite(v)) {
        cb_i32(b, -1);
        return;
    }
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    cb_i32(b, 8);
    cb_be(b, bits, 8);
}

static void cb_f_text(cbuf *b, const char *s)
{
    size_t n = strlen(s);
    cb_i32(b, (int32_t)n);
    if (cb_room(b, n)) {
        memcpy(b->p + b->len, s, n);
        b->len += n;
    }
}

/* COPY ... (FORMAT binary): signature, flags, header extension length. */
static void cb_copy_header(cbuf *b)
{
    static const unsigned char sig[11] = {'P', 'G', 'C', 'O', 'P', 'Y', '\n',
                                          0xff, '\r', '\n', 0};
    b->len = 0;
    if (cb_room(b, sizeof sig)) {
        memcpy(b->p, sig, sizeof sig);
        b->len = sizeof sig;
    }
    cb_i32(b, 0);
    cb_i32(b, 0);
}

/* A binary COPY streamed while it is made: copy_begin sends sql (a COPY
 * ... FROM STDIN (FORMAT binary)) and starts b with the header; the caller
 * appends tuples and calls copy_flush, which sends b whenever it holds
 * COPY_CHUNK bytes, so the server parses and inserts the first rows while
 * the client is still encoding the last; copy_end sends the rest and the
 * trailer and reads the result. On a server error its SQLSTATE goes to
 * state (6 bytes; "" otherwise). */
#define COPY_CHUNK (256u << 10)

static int copy_begin(fleet_pg *c, const char *sql, cbuf *b, char *err, size_t errlen)
{
    PGresult *r = PQexec(c->conn, sql);
    if (PQresultStatus(r) != PGRES_COPY_IN) {
        int rc = fleet_pg_fail(c, r, "fleet server (COPY)", err, errlen);
        PQclear(r);
        return rc;
    }
    PQclear(r);
    cb_copy_header(b);
    return 0;
}

/* Send what b holds once it is COPY_CHUNK or more (all of it when all);
 * 1 when it sent, 0 when it kept it, or -1 when the connection failed
 * (copy_end reports it). */
static int copy_flush(fleet_pg *c, cbuf *b, int all)
{
    if (b->oom || (!all && b->len < COPY_CHUNK) || b->len == 0)
        return 0;
    int ok = PQputCopyData(c->conn, (const char *)b->p, (int)b->len) == 1;
    b->len = 0;
    return ok ? 1 : -1;
}

static int copy_end(fleet_pg *c, cbuf *b, int ok, char *state, char *err, size_t errlen)
{
    state[0] = 0;
    cb_i16(b, -1);
    int oom = b->oom;
    if (ok && !oom)
        ok = copy_flush(c, b, 1) >= 0;
    if (PQputCopyEnd(c->conn, ok && !oom ? NULL : "client failed") != 1)
        ok = 0;
    int rc = 0;
    PGresult *r;
    while ((r = PQgetResult(c->conn)) != NULL) {
        if (PQresultStatus(r) != PGRES_COMMAND_OK && rc == 0 && !oom) {
            const char *s = PQresultErrorField(r, PG_DIAG_SQLSTATE);
            snprintf(state, 6, "%s", s ? s : "");
            rc = fleet_pg_fail(c, r, "fleet server (COPY)", err, errlen);
        }
        PQclear(r);
    }
    if (oom)
        return attune_fail(err, errlen, ATTUNE_ENOMEM, "out of memory");
    if (rc == 0 && !ok)
        rc = fleet_pg_fail(c, NULL, "fleet server (COPY)", err, errlen);
    return rc;
}

/* ---- the plan of one push */

/* A row's server key (model, stack, shape, tactic, device ids), its age,
 * its index in the batch, its device and stack in the batch (whose ids
 * fill k[0], k[1], k[4] once resolved), and whether the server has the
 * key. */
typedef struct prow {
    int k[5];
    int64_t taken_at;
    int idx;
    short di, si;
    int known;
} prow;

typedef struct push_plan {
    int *dev_state;   /* per device: -1 malformed, 0 not resolved yet, 1 resolved */
    int *dev_model, *dev_id;
    int *stk_id;      /* per stack: -2 malformed, -1 not resolved yet, else the id */
    prow *keys;       /* the rows to send */
    int nkeys;
    int next_row;     /* the rows before it are checked and keyed */
    int stalled;      /* an offline pass stopped at next_row (an id not cached) */
    int shape;        /* id of the shape of the last row keyed (-1: none) */
    attn_shape last;  /* that shape: rows come grouped by shape, its text key is costly */
    int di, si;       /* the last row's device and stack (find_id's hints) */
    int64_t rejected; /* malformed rows, never sent */
    char first_bad[512]; /* why the first malformed entry was refused */
} push_plan;

static void plan_free(push_plan *p)
{
    free(p->dev_state);
    free(p->dev_model);
    free(p->dev_id);
    free(p->stk_id);
    free(p->keys);
    memset(p, 0, sizeof *p);
}

static int plan_init(push_plan *p, const fleet_batch *b)
{
    size_t nd = b->ndevices > 0 ? (size_t)b->ndevices : 1;
    size_t ns = b->nstacks > 0 ? (size_t)b->nstacks : 1;
    memset(p, 0, sizeof *p);
    p->shape = p->di = p->si = -1;
    p->dev_state = calloc(nd, sizeof *p->dev_state);
    p->dev_model = calloc(nd, sizeof *p->dev_model);
    p->dev_id = calloc(nd, sizeof *p->dev_id);
    p->stk_id = calloc(ns, sizeof *p->stk_id);
    p->keys = malloc(sizeof *p->keys * (size_t)(b->nrows > 0 ? b->nrows : 1));
    if (!p->dev_state || !p->dev_model || !p->dev_id || !p->stk_id || !p->keys) {
        plan_free(p);
        return ATTUNE_ENOMEM;
    }
    return 0;
}

/* Step 1a: devices and stacks; a malformed one marks its rows rejected. */
static void check_dims(const fleet_batch *b, push_plan *p)
{
    char why[ATTUNE_ERRLEN];
    for (int i = 0; i < b->ndevices; i++) {
        const char *host = b->device_hosts && b->device_hosts[i] ? b->device_hosts[i] : "";
        if (store_check_device(&b->devices[i], why, sizeof why) != 0 ||
            store_check_text(host, 64, "host", why, sizeof why) != 0) {
            p->dev_state[i] = -1;
            if (!p->first_bad[0])
                snprintf(p->first_bad, sizeof p->first_bad, "device %.64s: %.200s",
                         b->devices[i].id, why);
        }
    }
    for (int i = 0; i < b->nstacks; i++) {
        p->stk_id[i] = -1; /* valid, id not resolved yet */
        if (store_check_stack(&b->stacks[i], why, sizeof why) != 0) {
            p->stk_id[i] = -2;
            if (!p->first_bad[0])
                snprintf(p->first_bad, sizeof p->first_bad, "stack %.24s: %.200s",
                         b->stacks[i].id, why);
        }
    }
}

/* Index of the entry whose id (a string at byte offset off) is id among
 * the n entries of stride bytes at base; -1 if none. Batches name a
 * handful of devices and stacks (fleet_local reads at most 16 of each): a
 * linear search beats a map. The last hit is tried first: rows come
 * grouped. */
static int find_id(const void *base, size_t stride, size_t off, int n, const char *id, int hint)
{
#define ID_AT(i) ((const char *)base + (size_t)(i) * stride + off)
    if (hint >= 0 && hint < n && strcmp(ID_AT(hint), id) == 0)
        return hint;
    for (int i = 0; i < n; i++)
        if (strcmp(ID_AT(i), id) == 0)
            return i;
    return -1;
#undef ID_AT
}

/* The ids of device di (and its model) and stack si, upserted on first
 * use. */
static int resolve_dims(fleet_pg *c, const fleet_batch *b, push_plan *p, int di, int si,
                        char *err, size_t errlen)
{
    int rc;
    if (p->dev_state[di] == 0) {
        const char *host = b->device_hosts ? b->device_hosts[di] : "";
        const attn_device_info *d = &b->devices[di];
        if ((rc = fleet_pg_model_dim(c, d, &p->dev_model[di], err, errlen)) != 0 ||
            (rc = fleet_pg_device_dim(c, d, host, p->dev_model[di], &p->dev_id[di], err,
                                      errlen)) != 0)
            return rc;
        p->dev_state[di] = 1;
    }
    if (p->stk_id[si] == -1 &&
        (rc = fleet_pg_stack_dim(c, &b->stacks[si], &p->stk_id[si], err, errlen)) != 0)
        return rc;
    return 0;
}

/* Step 1b: check the rows from p->next_row on and key them with their
 * shape and tactic ids; malformed rows are counted in p->rejected (the
 * first reason in p->first_bad). offline: ids come from the
 * connection's cache only (no server call), and the first row whose shape
 * or tactic is not cached stops the pass there (p->next_row): plan_finish
 * upserts the dimension rows the rest lack together, then goes on from
 * it. At most limit rows. The device and stack ids come later
 * (resolve_keys). */
static int resolve_rows(fleet_pg *c, const fleet_batch *b, push_plan *p, int offline,
                        int limit, char *err, size_t errlen)
{
    int rc, end = limit < b->nrows - p->next_row ? p->next_row + limit : b->nrows;
    if (offline && p->stalled)
        return 0; /* until a pass with the connection free */
    p->stalled = 0;
    for (int i = p->next_row; i < end; i++) {
        const store_measurement *m = &b->rows[i];
        char canon[ATTN_TACTIC_STR_MAX], key[ATTN_SHAPE_KEY_MAX], why[ATTUNE_ERRLEN];
        int di = find_id(b->devices, sizeof *b->devices, offsetof(attn_device_info, id),
                         b->ndevices, m->device_id, p->di);
        int si = find_id(b->stacks, sizeof *b->stacks, offsetof(attn_stack, id), b->nstacks,
                         m->stack_id, p->si);
        int bad = di < 0 || si < 0 || p->dev_state[di] < 0 || p->stk_id[si] == -2, tactic;
        if (bad)
            snprintf(why, sizeof why, "%s",
                     di < 0 || si < 0 ? "unknown device or stack"
                                      : "its device or stack is malformed");
        else
            bad = store_check_measurement(m, canon, why, sizeof why) != 0;
        if (bad) {
            p->rejected++;
            if (!p->first_bad[0])
                snprintf(p->first_bad, sizeof p->first_bad, "row %d (%.64s %.96s): %.200s", i,
                         m->device_id, m->tactic, why);
            continue;
        }
        p->di = di;
        p->si = si;
        if (p->shape < 0 || memcmp(&p->last, &m->shape, sizeof p->last) != 0) {
            int shape;
            attn_shape_key(&m->shape, key, sizeof key);
            if (offline && (shape = fleet_pg_shape_cached(c, key)) < 0)
                goto stop;
            if (!offline &&
                (rc = fleet_pg_shape_dim(c, &m->shape, key, &shape, err, errlen)) != 0)
                return rc;
            p->last = m->shape;
            p->shape = shape;
        }
        if (offline && (tactic = fleet_pg_tactic_cached(c, canon)) < 0)
            goto stop;
        if (!offline && (rc = fleet_pg_tactic_dim(c, canon, &tactic, err, errlen)) != 0)
            return rc;
        prow *pr = &p->keys[p->nkeys++];
        pr->k[2] = p->shape;
        pr->k[3] = tactic;
        pr->di = (short)di;
        pr->si = (short)si;
        pr->taken_at = m->taken_at;
        pr->idx = i;
        pr->known = 0;
        continue;
    stop:
        p->next_row = i;
        p->stalled = 1;
        return 0;
    }
    p->next_row = end;
    return 0;
}

/* Step 1c: the device (and model) and stack ids of every keyed row,
 * upserted on first use (the connection must be free). */
static int resolve_keys(fleet_pg *c, const fleet_batch *b, push_plan *p, char *err,
                        size_t errlen)
{
    int rc;
    for (int k = 0; k < p->nkeys; k++) {
        prow *pr = &p->keys[k];
        if ((rc = resolve_dims(c, b, p, pr->di, pr->si, err, errlen)) != 0)
            return rc;
        pr->k[0] = p->dev_model[pr->di];
        pr->k[1] = p->stk_id[pr->si];
        pr->k[4] = p->dev_id[pr->di];
    }
    return 0;
}

static int prow_cmp(const void *pa, const void *pb)
{
    const prow *a = pa, *b = pb;
    for (int i = 0; i < 5; i++)
        if (a->k[i] != b->k[i])
            return a->k[i] < b->k[i] ? -1 : 1;
    if (a->taken_at != b->taken_at)
        return a->taken_at > b->taken_at ? -1 : 1; /* newest first */
    return a->idx > b->idx ? -1 : a->idx < b->idx;  /* then the later row */
}

/* Step 2: one row per key, the newest (a log may name a row twice, and ON
 * CONFLICT DO UPDATE may touch a row once per statement). Leaves the keys
 * in the primary key's order, which is also the order of index inserts
 * that touches each leaf page once. */
static void dedupe(push_plan *p)
{
    qsort(p->keys, (size_t)p->nkeys, sizeof *p->keys, prow_cmp);
    int n = 0;
    for (int k = 0; k < p->nkeys; k++)
        if (n == 0 || memcmp(p->keys[k].k, p->keys[n - 1].k, sizeof p->keys[k].k) != 0)
            p->keys[n++] = p->keys[k];
    p->nkeys = n;
}

/* The dimension rows the plan still lacks, added to q (fleet_pg_dims_add_*:
 * sent, not read): the devices (with their models) and stacks of its
 * rows, and the shapes and tactics of the rows an offline pass left (from
 * p->next_row). Malformed rows are skipped (resolve_rows counts them). */
static int plan_dims_add(fleet_pg *c, const fleet_batch *b, const push_plan *p,
                         fleet_dims_req *q)
{
    char *added = calloc((size_t)(b->ndevices + b->nstacks + 1), 1); /* devices, then stacks */
    char canon[ATTN_TACTIC_STR_MAX], key[ATTN_SHAPE_KEY_MAX], why[ATTUNE_ERRLEN];
    int rc = added == NULL ? ATTUNE_ENOMEM : 0, shape = 0;
    attn_shape last;
#define ADD_DIMS(di, si)                                                                     \
    do {                                                                                     \
        if (rc == 0 && p->dev_state[di] == 0 && !added[di]) {                               \
            added[di] = 1;                                                                   \
            rc = fleet_pg_dims_add_device(c, q, &b->devices[di],                             \
                                          b->device_hosts ? b->device_hosts[di] : "");       \
        }                                                                                    \
        if (rc == 0 && p->stk_id[si] == -1 && !added[b->ndevices + (si)]) {                  \
            added[b->ndevices + (si)] = 1;                                                   \
            rc = fleet_pg_dims_add_stack(c, q, &b->stacks[si]);                              \
        }                                                                                    \
    } while (0)
    for (int k = 0; k < p->nkeys && rc == 0; k++)
        ADD_DIMS(p->keys[k].di, p->keys[k].si);
    for (int i = p->next_row, di = -1, si = -1; i < b->nrows && rc == 0; i++) {
        const store_measurement *m = &b->rows[i];
        di = find_id(b->devices, sizeof *b->devices, offsetof(attn_device_info, id),
                     b->ndevices, m->device_id, di);
        si = find_id(b->stacks, sizeof *b->stacks, offsetof(attn_stack, id), b->nstacks,
                     m->stack_id, si);
        if (di < 0 || si < 0 || p->dev_state[di] < 0 || p->stk_id[si] == -2 ||
            store_check_measurement(m, canon, why, sizeof why) != 0)
            continue;
        ADD_DIMS(di, si);
        if (rc == 0 && (!shape || memcmp(&last, &m->shape, sizeof last) != 0)) {
            attn_shape_key(&m->shape, key, sizeof key);
            rc = fleet_pg_dims_add_shape(c, q, &m->shape, key);
            last = m->shape;
            shape = 1;
        }
        if (rc == 0)
            rc = fleet_pg_dims_add_tactic(c, q, canon);
    }
#undef ADD_DIMS
    free(added);
    return rc;
}

/* Finish a plan with the connection free: the dimension rows it lacks
 * upserted together (one round trip), the rows an offline pass left, the
 * device and stack ids, one row per key. */
static int plan_finish(fleet_pg *c, const fleet_batch *b, push_plan *p, char *err,
                       size_t errlen)
{
    fleet_dims_req q = FLEET_DIMS_REQ_INIT;
    int rc = plan_dims_add(c, b, p, &q);
    fleet_pg_dims_send(c, &q);
    int rc2 = fleet_pg_dims_read(c, &q, 1, err, errlen);
    fleet_pg_dims_req_free(&q);
    if (rc != 0)
        return attune_fail(err, errlen, rc, "fleet server (dimension rows): %s",
                           attune_strerror(rc));
    if (rc2 != 0 || (rc = resolve_rows(c, b, p, 0, INT_MAX, err, errlen)) != 0 ||
        (rc = resolve_keys(c, b, p, err, errlen)) != 0)
        return rc2 != 0 ? rc2 : rc;
    dedupe(p);
    return 0;
}

/* ---- step 3: the transaction */

/* Columns of a pushed row, in the order of the staging table and of
 * copy_row. */
#define PUSH_COLUMNS                                                                     \
    "model_id, stack_id, shape_id, tactic_id, device_id, status, time_us, time_us_min," \
    " time_us_max, time_us_copies, n, max_abs_err, rel_err, mode, l2, rows_checked,"     \
    " note, host, taken_at, src_rel_err"
#define PUSH_NCOLUMNS 20

/* The staging table of known rows, private to the session and emptied by
 * every commit or rollback. */
static const char stage_sql[] =
    "CREATE TEMP TABLE IF NOT EXISTS fleet_stage ("
    " model_id int, stack_id int, shape_id int, tactic_id int, device_id int,"
    " status text, time_us float8, time_us_min float8, time_us_max float8,"
    " time_us_copies float8, n int, max_abs_err float8, rel_err float8, mode text,"
    " l2 text, rows_checked int, note text, host text, taken_at bigint, src_rel_err float8)"
    " ON COMMIT DELETE ROWS";

static const char merge_sql[] =
    "INSERT INTO measurements AS m (" PUSH_COLUMNS ")"
    " SELECT " PUSH_COLUMNS " FROM fleet_stage"
    " ON CONFLICT (model_id, stack_id, shape_id, tactic_id, device_id) DO UPDATE SET"
    " status = excluded.status, time_us = excluded.time_us,"
    " time_us_min = excluded.time_us_min, time_us_max = excluded.time_us_max,"
    " time_us_copies = excluded.time_us_copies, n = excluded.n,"
    " max_abs_err = excluded.max_abs_err, rel_err = excluded.rel_err,"
    " mode = excluded.mode, l2 = excluded.l2, rows_checked = excluded.rows_checked,"
    " note = excluded.note, host = excluded.host, taken_at = excluded.taken_at,"
    " src_rel_err = excluded.src_rel_err, pushed_at = now()"
    " WHERE excluded.taken_at > m.taken_at OR (excluded.taken_at = m.taken_at AND"
    " (excluded.status, excluded.time_us, excluded.time_us_min, excluded.time_us_max,"
    "  excluded.time_us_copies, excluded.n, excluded.max_abs_err, excluded.rel_err,"
    "  excluded.src_rel_err)"
    " IS DISTINCT FROM (m.status, m.time_us, m.time_us_min, m.time_us_max,"
    "  m.time_us_copies, m.n, m.max_abs_err, m.rel_err, m.src_rel_err))";

/* One row as a binary COPY tuple, the columns of PUSH_COLUMNS. */
static void copy_row(cbuf *buf, const prow *k, const store_measurement *m)
{
    cb_i16(buf, PUSH_NCOLUMNS);
    for (int f = 0; f < 5; f++)
        cb_f_int(buf, k->k[f]);
    cb_f_text(buf, store_status_name(m->status));
    cb_f_num(buf, m->time_us);
    cb_f_num(buf, m->time_us_min);
    cb_f_num(buf, m->time_us_max);
    cb_f_num(buf, m->time_us_copies);
    cb_f_int(buf, m->n);
    cb_f_num(buf, m->max_abs_err);
    cb_f_num(buf, m->rel_err);
    cb_f_text(buf, m->mode);
    cb_f_text(buf, m->l2);
    cb_f_int(buf, m->rows_checked);
    cb_f_text(buf, m->note);
    cb_f_text(buf, m->host);
    cb_f_bigint(buf, m->taken_at);
    cb_f_num(buf, m->shape.dtype == ATTN_E4M3 ? m->src_rel_err : NAN); /* e4m3 rows only */
}

/* COPY the keys whose known flag equals known with sql, streamed. */
static int copy_rows(fleet_pg *c, const fleet_batch *b, const push_plan *p, int known,
                     const char *sql, cbuf *buf, char *state, char *err, size_t errlen)
{
    state[0] = 0;
    int rc = copy_begin(c, sql, buf, err, errlen), ok = 1;
    if (rc != 0)
        return rc;
    for (int k = 0; k < p->nkeys && ok; k++)
        if (p->keys[k].known == known) {
            copy_row(buf, &p->keys[k], &b->rows[p->keys[k].idx]);
            ok = copy_flush(c, buf, 0) >= 0;
        }
    return copy_end(c, buf, ok, state, err, errlen);
}

/* ---- statements sent together

 * A push's small statements before its COPY, and those after it, go to
 * the server at once (libpq's pipeline mode) and their answers are read
 * back in order: one round trip per group instead of one per statement.
 * On a loaded host each round trip is a wait for the scheduler on both
 * sides, and a push made eleven of them around a COPY of 8,000 rows
 * (bench/push_copy.py; docs/fleet.md "Transport"). COPY itself cannot be
 * pipelined. A group is sent (sb_send, which ends it with a sync point)
 * and its answers read later (sb_collect; sb_run does both). The first statement of a group that fails is the group's
 * error; the server skips the rest (PGRES_PIPELINE_ABORTED) and the
 * transaction is rolled back by the caller. A libpq without pipelining
 * (before 14) runs each statement as it is added: the same answers, a
 * round trip each. */
#define BATCH_MAX 8

typedef struct stmt_batch {
    fleet_pg *c;
    int n, piped, synced;
    PGresult *res[BATCH_MAX];
    const char *what[BATCH_MAX];
} stmt_batch;

static void sb_init(stmt_batch *sb, fleet_pg *c)
{
    memset(sb, 0, sizeof *sb);
    sb->c = c;
#ifdef LIBPQ_HAS_PIPELINING
    sb->piped = PQpipelineStatus(c->conn) == PQ_PIPELINE_ON ||
                PQenterPipelineMode(c->conn) == 1;
#endif
}

/* Add a statement of n parameters (types, values, lengths, formats as
 * PQexecParams takes them; NULL: text). A send that fails shows as the
 * statement's missing answer in sb_collect. */
static void sb_add(stmt_batch *sb, const char *what, const char *sql, int n, const Oid *types,
                   const char *const *vals, const int *lens, const int *fmts)
{
    assert(sb->n < BATCH_MAX);
    int i = sb->n++;
    sb->what[i] = what;
#ifdef LIBPQ_HAS_PIPELINING
    if (sb->piped) {
        if (PQsendQueryParams(sb->c->conn, sql, n, types, vals, lens, fmts, 0) != 1)
            sb->what[i] = NULL; /* not sent: no answer will come */
        return;
    }
#endif
    sb->res[i] = PQexecParams(sb->c->conn, sql, n, types, vals, lens, fmts, 0);
}

/* End the group (a sync point) and send it; its answers come later. */
static void sb_send(stmt_batch *sb)
{
#ifdef LIBPQ_HAS_PIPELINING
    if (sb->piped)
        sb->synced = PQpipelineSync(sb->c->conn) == 1;
#endif
}

/* The answers of a sent group, in order: 0 when every statement succeeded
 * (their results in sb->res for the caller to read), else the first
 * failure's error. last: no group sent after this one waits to be read,
 * so the connection leaves pipeline mode (COPY and plain statements may
 * follow). */
static int sb_collect(stmt_batch *sb, int last, char *err, size_t errlen)
{
    int rc = 0;
#ifdef LIBPQ_HAS_PIPELINING
    if (sb->piped) {
        PGconn *conn = sb->c->conn;
        int synced = sb->synced;
        for (int i = 0; i < sb->n && synced; i++) {
            if (sb->what[i] == NULL)
                continue;
            sb->res[i] = PQgetResult(conn);
            if (sb->res[i] == NULL)
                break; /* the connection is gone */
            PGresult *more;
            while ((more = PQgetResult(conn)) != NULL) /* the end of this statement's answer */
                PQclear(more);
        }
        PGresult *r = synced ? PQgetResult(conn) : NULL;
        if (r == NULL || PQresultStatus(r) != PGRES_PIPELINE_SYNC)
            synced = 0;
        PQclear(r);
        if (!synced || (last && PQexitPipelineMode(conn) != 1))
            rc = fleet_pg_fail(sb->c, NULL, "fleet server (pipeline)", err, errlen);
    }
#endif
    (void)last;
    for (int i = 0; i < sb->n; i++) {
        ExecStatusType st = PQresultStatus(sb->res[i]);
        if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
            return fleet_pg_fail(sb->c, sb->res[i], sb->what[i] ? sb->what[i] : "fleet server",
                                 err, errlen);
    }
    return rc;
}

/* Send a group and read its answers (nothing else in flight). */
static int sb_run(stmt_batch *sb, char *err, size_t errlen)
{
    sb_send(sb);
    return sb_collect(sb, 1, err, errlen);
}

static void sb_free(stmt_batch *sb)
{
    for (int i = 0; i < sb->n; i++)
        PQclear(sb->res[i]);
    sb->n = 0;
}

/* ---- binary int4[] parameters */

/* A binary int4[] parameter (array_recv's format): field f of the keys
 * sel[0..n). */
static void int_array(cbuf *a, const push_plan *p, int f, const int *sel, int n)
{
    a->len = 0;
    cb_i32(a, 1);  /* dimensions */
    cb_i32(a, 0);  /* no NULLs */
    cb_i32(a, 23); /* int4 */
    cb_i32(a, n);
    cb_i32(a, 1);  /* lower bound */
    for (int i = 0; i < n; i++)
        cb_f_int(a, p->keys[sel[i]].k[f]);
}

/* Add sql with nparams binary int4[] parameters, fields f[0..nparams) of
 * the keys sel[0..n), to sb. ATTUNE_ENOMEM when out of memory. */
static int add_arrays(stmt_batch *sb, const char *what, const char *sql, const push_plan *p,
                      const int *f, int nparams, const int *sel, int n)
{
    cbuf a[5];
    const char *vals[5];
    int lens[5], fmts[5], rc = 0;
    Oid types[5];
    memset(a, 0, sizeof a);
    for (int i = 0; i < nparams; i++) {
        int_array(&a[i], p, f[i], sel, n);
        if (a[i].oom) {
            rc = ATTUNE_ENOMEM;
            goto out;
        }
        vals[i] = (const char *)a[i].p;
        lens[i] = (int)a[i].len;
        fmts[i] = 1;
        types[i] = 1007; /* int4[] */
    }
    sb_add(sb, what, sql, nparams, types, vals, lens, fmts); /* sent or run: copied */
out:
    for (int i = 0; i < nparams; i++)
        free(a[i].p);
    return rc;
}

/* ---- probing which keys the server has */

/* Which of the keys sel[k] the server has. OFFSET 0 keeps the EXISTS a
 * per-row index probe: pulled up into a join, the planner may choose to
 * hash the whole table for a large batch. */
static const char probe_sql[] =
    "SELECT k.i FROM unnest($1, $2, $3, $4, $5) WITH ORDINALITY AS k(m, s, h, t, d, i)"
    " WHERE EXISTS (SELECT 1 FROM measurements x WHERE x.model_id = k.m AND"
    " x.stack_id = k.s AND x.shape_id = k.h AND x.tactic_id = k.t AND"
    " x.device_id = k.d OFFSET 0)";

static int probe_add(stmt_batch *sb, const push_plan *p, const int *sel, int n)
{
    static const int fields[5] = {0, 1, 2, 3, 4};
    return add_arrays(sb, "fleet server (probe)", probe_sql, p, fields, 5, sel, n);
}

/* Mark the keys of the probe's answer r known; the newly known ones
 * counted in *nknown. */
static void probe_read(push_plan *p, const PGresult *r, const int *sel, int n, int *nknown)
{
    *nknown = 0;
    for (int i = 0; i < PQntuples(r); i++) {
        long k = strtol(PQgetvalue(r, i, 0), NULL, 10) - 1;
        if (k >= 0 && k < n && !p->keys[sel[k]].known) {
            p->keys[sel[k]].known = 1;
            (*nknown)++;
        }
    }
}

/* Probe the keys sel[0..n) alone (one round trip). */
static int probe(fleet_pg *c, push_plan *p, const int *sel, int n, int *nknown, char *err,
                 size_t errlen)
{
    stmt_batch sb;
    sb_init(&sb, c);
    int rc = probe_add(&sb, p, sel, n);
    int rc2 = sb_run(&sb, err, errlen);
    if (rc != 0)
        rc = attune_fail(err, errlen, rc, "out of memory");
    else
        rc = rc2;
    if (rc == 0)
        probe_read(p, sb.res[0], sel, n, nknown);
    sb_free(&sb);
    return rc;
}

/* Keys probed first, one in PROBE_SAMPLE_STRIDE (and the last): when none
 * of them is on the server, the batch is taken for new (a device's first
 * push) and goes straight to COPY without probing every key; a wrong
 * guess costs one rolled-back COPY, then the full probe. The sample's
 * indices into sel; their count. */
#define PROBE_SAMPLE_STRIDE 256

static int probe_sample(const push_plan *p, int *sel)
{
    int n = 0;
    for (int k = 0; k < p->nkeys; k += PROBE_SAMPLE_STRIDE)
        sel[n++] = k;
    if (sel[n - 1] != p->nkeys - 1)
        sel[n++] = p->nkeys - 1;
    return n;
}

/* ---- sending the rows */

/* How a transaction learns which keys the server has: the sample probe
 * (a first push's keys are all new), every key probed, or none (every key
 * taken for known: the merge sorts it out). A COPY of "new" keys that
 * meets a key another session inserted meanwhile (two stores holding the
 * same device's rows) fails with a unique violation; the transaction is
 * rolled back and made again one mode further. A savepoint around the
 * COPY would save redoing the first group, but costs every COPY about 8%
 * (docs/fleet.md), and the race is rare. */
enum { PROBE_SAMPLE, PROBE_ALL, PROBE_NONE };

/* New keys straight into measurements. *conflict = 1 (and 0 returned)
 * when another session has inserted one of them: the transaction is
 * aborted, the caller rolls it back. */
static int copy_new(fleet_pg *c, const fleet_batch *b, push_plan *p, cbuf *buf, int *conflict,
                    char *err, size_t errlen)
{
    static const char sql[] = "COPY measurements (" PUSH_COLUMNS ") FROM STDIN (FORMAT binary)";
    char state[6];
    int rc = copy_rows(c, b, p, 0, sql, buf, state, err, errlen);
    *conflict = rc != 0 && strcmp(state, "23505") == 0; /* unique_violation */
    return *conflict ? 0 : rc;
}

/* Known keys through the staging table and the merge. */
static int merge_known(fleet_pg *c, const fleet_batch *b, const push_plan *p, cbuf *buf,
                       char *err, size_t errlen)
{
    char state[6];
    int rc;
    /* created in each transaction that needs it: behind a transaction-
     * pooling proxy, the session that made it before may not be this one */
    if ((rc = fleet_pg_cmd(c, stage_sql, err, errlen)) != 0 ||
        (rc = copy_rows(c, b, p, 1, "COPY fleet_stage FROM STDIN (FORMAT binary)", buf, state,
                        err, errlen)) != 0)
        return rc;
    return fleet_pg_cmd(c, merge_sql, err, errlen);
}

/* Send every key: new ones by COPY, known ones by the merge (see the top
 * of the file). known: how many keys the first group's probe found on the
 * server (mode PROBE_SAMPLE: of the sample only); sel: scratch of
 * p->nkeys. *conflict as copy_new; *probed set when every key was probed
 * (a conflict then goes to PROBE_NONE). */
static int send_rows(fleet_pg *c, const fleet_batch *b, push_plan *p, int mode, int known,
                     int *sel, int *conflict, int *probed, char *err, size_t errlen)
{
    cbuf buf = {0};
    int rc = 0, n;
    *conflict = 0;
    *probed = mode != PROBE_SAMPLE;
    if (mode == PROBE_SAMPLE && known > 0) { /* not a first push: probe every key */
        for (int k = 0; k < p->nkeys; k++)
            sel[k] = k;
        if ((rc = probe(c, p, sel, p->nkeys, &n, err, errlen)) != 0)
            goto out;
        *probed = 1;
    }
    known = 0;
    for (int k = 0; k < p->nkeys; k++)
        known += p->keys[k].known;
    if (known < p->nkeys && ((rc = copy_new(c, b, p, &buf, conflict, err, errlen)) != 0 ||
                             *conflict))
        goto out;
    if (known > 0)
        rc = merge_known(c, b, p, &buf, err, errlen);
out:
    free(buf.p);
    return rc;
}

/* The (model, stack, shape) groups of the keys, for the next refresh,
 * added to sb. The keys are sorted, so each group is one run; they are
 * inserted in key order, so concurrent pushers take the row locks in one
 * order and never deadlock. sel: scratch of p->nkeys. */
static int dirty_add(stmt_batch *sb, const push_plan *p, int *sel)
{
    static const char sql[] =
        "INSERT INTO dirty SELECT * FROM unnest($1, $2, $3) AS g(m, s, h)"
        " ORDER BY 1, 2, 3 ON CONFLICT DO NOTHING";
    static const int fields[3] = {0, 1, 2};
    int n = 0;
    for (int k = 0; k < p->nkeys; k++)
        if (k == 0 || memcmp(p->keys[k].k, p->keys[k - 1].k, 3 * sizeof(int)) != 0)
            sel[n++] = k;
    return add_arrays(sb, "fleet server (dirty groups)", sql, p, fields, 3, sel, n);
}

/* ---- step 3: the transaction

 * Everything the server writes for one batch, in one transaction, rolled
 * back on any failure. Its first group: BEGIN, the batch's order lock,
 * the source's watermark read (a batch at or below it is skipped whole:
 * already there), the probe; then the rows (a COPY when every key is
 * new); its last group: the wait for the order lock of the batch before
 * it in the stream, the dirty groups, the watermark moved (or the batch
 * refused), and COMMIT.
 *
 * Commit order is kept by the server, not by the client. A stream runs
 * two batches at once, each on its own lane and thread, each sending its
 * whole transaction, COMMIT included, without waiting for the other's
 * answers. Batch N takes a transaction-scoped advisory lock of its own
 * (the order lock: its source and last_seq, or the stream's nonce and its
 * index) in its first group, and batch N+1 is begun only after that
 * group's answer; N+1's last group starts with a wait for N's order lock,
 * i.e. until N's transaction has ended, and its watermark UPDATE moves
 * the watermark only from N's last_seq. So N+1 commits after N, and only
 * when N committed (N rolled back or refused: N+1 is refused too, and
 * the watermark never passes a batch that did not commit). Every wait is
 * in the server, where PostgreSQL's deadlock detector sees it: the client
 * never holds one lane's transaction open while it waits for the other's
 * answer (before 2026-12-04 it sent N+1's COMMIT only after reading N's,
 * and a COPY of N+1 that waited for a row of N's hung, docs/fleet.md).
 * Batches in flight together have no key in common (keys_overlap: one
 * that has waits for the one before to end), so within a stream no row
 * waits on another row of the stream.
 *
 * A stream's first batch of a source also takes the source's turn lock
 * (an advisory lock of the source alone) in its first group, so two
 * pushers of one source (a copy of the store, a second process on the
 * file) take turns at their first batch, and the later one's is skipped
 * at once when the earlier one pushed it; copies pushing the same log meet
 * on the same order locks (source, last_seq) and take turns batch by
 * batch. Until 2026-12-04 the first group locked the source's row (FOR
 * UPDATE) instead: with two batches in flight, a later batch's watermark
 * UPDATE then waited for another pusher's first batch, which held the row
 * while it copied, and that one's COPY for the later batch's rows, a
 * deadlock PostgreSQL broke after its deadlock_timeout (1 s) by failing
 * one push (11 in 20 it_fleet_clone histories, against 1 at 796e381 and 0
 * with the turn lock). Locked only in the last group, as 1d53ea9 had it,
 * two such pushers copied rows of the same keys at once and deadlocked
 * the same way (it_fleet_clone, seed 1354525904, history 8). Conflicts
 * between pushers that do not meet on a lock stay possible; the server
 * sees them, and the push does its round again (fleet_pg_conflicted).
 * The last group's watermark UPDATE refuses a batch at or below the
 * watermark (a stream's first batch of a source), or one whose batch
 * before did not leave the watermark at its own last_seq (the later
 * ones). */

/* A batch's place in its stream: its order lock and the batch before's. */
typedef struct tx_order {
    int32_t key[2];   /* the batch's order lock */
    int32_t prev[2];  /* the order lock of the batch before it in the stream */
    int has_prev;     /* there is one */
    int first;        /* no batch of its source before it in the stream: the source's
                         turn lock taken in the first group, the watermark moved from
                         any value below the batch's */
    int64_t prev_seq; /* else: the batch before's last_seq, the only watermark it moves from */
} tx_order;

static const char order_sql[] = "SELECT pg_advisory_xact_lock($1::int4, $2::int4)";

static void order_add(stmt_batch *sb, const int32_t key[2])
{
    char k0[16], k1[16];
    const char *lk[2] = {k0, k1};
    snprintf(k0, sizeof k0, "%" PRId32, key[0]);
    snprintf(k1, sizeof k1, "%" PRId32, key[1]);
    sb_add(sb, "fleet server (order)", order_sql, 2, NULL, lk, NULL, NULL); /* sent or run: copied */
}

/* Where the answers of a first group are. */
typedef struct tx_first {
    int i_seq, i_probe, nprobe, oom;
} tx_first;

static void first_add(stmt_batch *sb, const fleet_batch *b, push_plan *p, const tx_order *o,
                      int mode, int *sel, tx_first *t)
{
    const char *src[1] = {b->source};
    t->i_seq = t->i_probe = -1;
    t->nprobe = t->oom = 0;
    sb_add(sb, "fleet server", "BEGIN", 0, NULL, NULL, NULL, NULL);
    if (b->source != NULL && o->first) {
        int32_t turn[2] = {o->key[0], -1}; /* the source's turn: see above */
        order_add(sb, turn);
    }
    order_add(sb, o->key);
    if (b->source != NULL && o->first)
        sb_add(sb, "fleet server (source)",
               "INSERT INTO sources (id, pushed_seq) VALUES ($1, 0) ON CONFLICT (id) DO NOTHING",
               1, NULL, src, NULL, NULL);
    if (b->source != NULL) {
        t->i_seq = sb->n;
        sb_add(sb, "fleet server (source)", "SELECT pushed_seq FROM sources WHERE id = $1", 1,
               NULL, src, NULL, NULL);
    }
    for (int k = 0; k < p->nkeys; k++)
        p->keys[k].known = mode == PROBE_NONE;
    if (p->nkeys > 0 && mode != PROBE_NONE) {
        if (mode == PROBE_SAMPLE)
            t->nprobe = probe_sample(p, sel);
        else
            for (int k = 0; k < p->nkeys; k++)
                sel[t->nprobe++] = k;
        t->i_probe = sb->n;
        t->oom = probe_add(sb, p, sel, t->nprobe) != 0;
    }
}

/* Read a collected first group: *skipped when the server's watermark is
 * already at the batch's, else the keys the probe found marked known (how
 * many in *known). */
static int first_read(const stmt_batch *sb, const fleet_batch *b, push_plan *p, const int *sel,
                      const tx_first *t, int *skipped, int *known, char *err, size_t errlen)
{
    *skipped = *known = 0;
    if (t->oom)
        return attune_fail(err, errlen, ATTUNE_ENOMEM, "out of memory");
    /* a push that committed before its pusher died: already here (no row:
     * the source's first push) */
    if (b->source != NULL && PQntuples(sb->res[t->i_seq]) > 0)
        *skipped = strtoll(PQgetvalue(sb->res[t->i_seq], 0, 0), NULL, 10) >= b->last_seq;
    if (!*skipped && t->i_probe >= 0)
        probe_read(p, sb->res[t->i_probe], sel, t->nprobe, known);
    return 0;
}

/* The watermark moved to $2 in the source's row, which the UPDATE locks
 * (waiting for another pusher's transaction that holds it, then reading
 * what that one committed). A watermark already at or past the batch's
 * would make it -1, against sources' CHECK (pushed_seq >= 0): the
 * statement fails with check_violation and the transaction cannot commit
 * (the server has the batch, or a copy of the store pushed past it);
 * commit_run reads that failure as the batch skipped. */
static const char mark_sql[] =
    "UPDATE sources SET pushed_seq = CASE WHEN pushed_seq < $2::bigint THEN $2::bigint"
    " ELSE -1 END, updated_at = now() WHERE id = $1";

/* The same for a batch that follows another of its source in a stream:
 * the watermark moves only from that one's last_seq ($3), i.e. only when
 * it committed and no other pusher moved the watermark since. */
static const char mark_next_sql[] =
    "UPDATE sources SET pushed_seq = CASE WHEN pushed_seq = $3::bigint THEN $2::bigint"
    " ELSE -1 END, updated_at = now() WHERE id = $1";

/* 1 when r is the marks' refusal (the batch is already there). */
static int mark_refused(const PGresult *r)
{
    const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    const char *con = PQresultErrorField(r, PG_DIAG_CONSTRAINT_NAME);
    return PQresultStatus(r) == PGRES_FATAL_ERROR && state != NULL &&
           strcmp(state, "23514") == 0 && con != NULL &&
           strcmp(con, "sources_pushed_seq_check") == 0;
}

/* The last group of b's transaction, run: the wait for the batch before
 * (its order lock), the dirty groups, the watermark, COMMIT. *refused when
 * the watermark refused the batch (rolled back; 0 returned). 0 or an
 * error, the transaction rolled back. */
static int commit_run(fleet_pg *c, const fleet_batch *b, const push_plan *p, const tx_order *o,
                      int *sel, int *refused, char *err, size_t errlen)
{
    char seq[24], prev[24];
    const char *src[3] = {b->source, seq, prev};
    stmt_batch sb;
    int i_mark = -1, rc;
    *refused = 0;
    sb_init(&sb, c);
    if (o->has_prev)
        order_add(&sb, o->prev); /* first: nothing below waits for the batch before */
    int oom = p->nkeys > 0 && dirty_add(&sb, p, sel) != 0;
    if (b->source != NULL) {
        snprintf(seq, sizeof seq, "%" PRId64, b->last_seq);
        snprintf(prev, sizeof prev, "%" PRId64, o->prev_seq);
        sb_add(&sb, "fleet server (source)",
               "INSERT INTO sources (id, pushed_seq) VALUES ($1, 0) ON CONFLICT (id) DO NOTHING",
               1, NULL, src, NULL, NULL);
        i_mark = sb.n;
        sb_add(&sb, "fleet server (watermark)", o->first ? mark_sql : mark_next_sql,
               o->first ? 2 : 3, NULL, src, NULL, NULL);
    }
    /* out of memory for the dirty groups: nothing commits */
    sb_add(&sb, "fleet server", oom ? "ROLLBACK" : "COMMIT", 0, NULL, NULL, NULL, NULL);
    rc = sb_run(&sb, err, errlen);
    if (rc != 0 && i_mark >= 0 && sb.res[i_mark] != NULL && mark_refused(sb.res[i_mark]))
        rc = 0, *refused = 1;
    if (rc == 0 && oom)
        rc = attune_fail(err, errlen, ATTUNE_ENOMEM, "out of memory");
    sb_free(&sb);
    if (rc != 0 || *refused)
        fleet_pg_rollback(c);
    return rc;
}

/* ---- a stream of batches on two lanes

 * One batch of a stream on one lane, run by a thread of its own
 * (lane_run), so that the two lanes' COPYs go at once: a COPY is bound
 * by its backend, one CPU, and the server has more. The thread uses only
 * lc (the handle with conn = the lane's session) and the job: never the
 * handle's id caches, which the stream's thread fills while it plans the
 * next batch, nor the caller's callbacks, which the stream's thread calls
 * in order. */
typedef struct push_stream push_stream;

typedef struct lane_job {
    push_stream *s;
    fleet_pg lc;
    fleet_batch b;
    push_plan p;         /* the job's from job_start to its finish */
    tx_order o;
    int64_t index;       /* its place in the stream */
    int busy;            /* started, not finished (the stream's thread only) */
    int threaded;        /* th runs it */
    pthread_t th;
    int started, ended;  /* under s->mu: its first group answered (its order lock
                            held), its thread done */
    int rc, skipped;     /* its outcome (read after the join) */
    char err[ATTUNE_ERRLEN];
} lane_job;

struct push_stream {
    fleet_pg *c;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    lane_job jobs[2];
};

static void job_tell(lane_job *j, int ended)
{
    pthread_mutex_lock(&j->s->mu);
    j->started = 1;
    j->ended |= ended;
    pthread_cond_broadcast(&j->s->cv);
    pthread_mutex_unlock(&j->s->mu);
}

/* Push one planned batch on the job's lane: its transaction begun and
 * probed (then the stream is told it started: its order lock is held),
 * its rows sent, its last group and COMMIT run. The outcome in j->rc and
 * j->skipped; every transaction ended. */
static void *lane_run(void *arg)
{
    lane_job *j = arg;
    fleet_pg *c = &j->lc;
    const fleet_batch *b = &j->b;
    push_plan *p = &j->p;
    char *err = j->err;
    size_t errlen = sizeof j->err;
    /* scratch of a key each (and the probe's sample's last) */
    int *sel = malloc(sizeof *sel * (size_t)(p->nkeys + 1));
    int rc = 0, mode = PROBE_SAMPLE, skipped = 0, known = 0, conflict = 0, probed = 0;
    int begun = 0;
    stmt_batch sb;
    tx_first t;
    if (sel == NULL)
        rc = attune_fail(err, errlen, ATTUNE_ENOMEM, "out of memory");
    while (rc == 0) {
        sb_init(&sb, c);
        first_add(&sb, b, p, &j->o, mode, sel, &t);
        sb_send(&sb);
        begun = 1;
        rc = sb_collect(&sb, 1, err, errlen);
        if (rc == 0)
            rc = first_read(&sb, b, p, sel, &t, &skipped, &known, err, errlen);
        sb_free(&sb);
        job_tell(j, 0); /* holds its order lock: the next batch may begin */
        if (rc != 0 || skipped || p->nkeys == 0)
            break;
        if ((rc = send_rows(c, b, p, mode, known, sel, &conflict, &probed, err, errlen)) != 0 ||
            !conflict)
            break;
        /* raced with another pusher: again, one mode further (the order
         * lock is let go meanwhile; the next batch, should it take it,
         * finds the watermark short of this one's and is refused) */
        fleet_pg_rollback(c);
        mode = probed ? PROBE_NONE : PROBE_ALL;
    }
    if (rc == 0 && !skipped)
        rc = commit_run(c, b, p, &j->o, sel, &skipped, err, errlen);
    else if (begun)
        fleet_pg_rollback(c);
    free(sel);
    j->rc = rc;
    j->skipped = skipped;
    job_tell(j, 1);
    return NULL;
}

/* Start the planned batch in j on lane (the job owns b's plan from now
 * on), on a thread of its own, or in this one when none can be had. */
static void job_start(push_stream *s, lane_job *j, int lane)
{
    j->lc = *s->c;
    j->lc.conn = s->c->lanes[lane];
    j->lc.lane = lane;
    j->lc.conflict = 0;
    j->started = j->ended = 0;
    j->rc = j->skipped = 0;
    j->err[0] = 0;
    j->busy = 1;
    /* signals stay with the caller's threads (a daemon's handlers, its
     * sigwait): the lane thread blocks them all */
    sigset_t all, was;
    sigfillset(&all);
    int masked = pthread_sigmask(SIG_SETMASK, &all, &was) == 0;
    j->threaded = pthread_create(&j->th, NULL, lane_run, j) == 0;
    if (masked)
        pthread_sigmask(SIG_SETMASK, &was, NULL);
    if (!j->threaded)
        (void)lane_run(j);
}

/* Wait until j's first group was answered; 1 when j has ended too. */
static int job_wait_started(push_stream *s, lane_job *j)
{
    pthread_mutex_lock(&s->mu);
    while (!j->started)
        pthread_cond_wait(&s->cv, &s->mu);
    int ended = j->ended;
    pthread_mutex_unlock(&s->mu);
    return ended;
}

/* Wait for j to end and tell the caller its outcome: 0 (also when j was
 * not busy), done's answer, or j's error (with err, the handle's conflict
 * flag as j's). done NULL: j is waited for and nothing is told (0). */
static int job_finish(push_stream *s, lane_job *j, fleet_push_done_fn done, void *arg, char *err,
                      size_t errlen)
{
    if (!j->busy)
        return 0;
    if (j->threaded)
        pthread_join(j->th, NULL);
    j->busy = 0;
    int rc = done != NULL ? j->rc : 0;
    if (rc != 0) {
        s->c->conflict = j->lc.conflict;
        if (errlen > 0)
            snprintf(err, errlen, "%s", j->err);
    } else if (done != NULL) {
        fleet_push_done d = {.last_seq = j->b.last_seq,
                             .skipped = j->skipped,
                             .sent = j->skipped ? 0 : j->p.nkeys,
                             .rejected = j->p.rejected,
                             .first_bad = j->p.first_bad};
        rc = done(arg, &d);
    }
    plan_free(&j->p);
    return rc;
}

static int key_cmp(const int *a, const int *b)
{
    for (int i = 0; i < 5; i++)
        if (a[i] != b[i])
            return a[i] < b[i] ? -1 : 1;
    return 0;
}

/* 1 when two plans (deduped: keys sorted) have a key in common: a row
 * re-measured between two batches of a stream. Such batches do not run
 * at once: the later one's COPY would wait for the earlier one's row. */
static int keys_overlap(const push_plan *a, const push_plan *b)
{
    int i = 0, k = 0;
    while (i < a->nkeys && k < b->nkeys) {
        int d = key_cmp(a->keys[i].k, b->keys[k].k);
        if (d == 0)
            return 1;
        if (d < 0)
            i++;
        else
            k++;
    }
    return 0;
}

/* A batch's order lock: (source, last_seq), which two pushers of copies of
 * a store share for the same batch of the same log (they then take turns),
 * or, without a source, (the stream's nonce, the batch's index). 31 bits
 * each: int4 keys; two batches that share a lock by chance only wait
 * longer. */
static void order_key(const fleet_batch *b, int32_t nonce, int64_t index, int32_t key[2])
{
    if (b->source != NULL) {
        uint64_t h = hash_fnv1a64(hash_fnv1a64_init(), b->source, strlen(b->source));
        key[0] = (int32_t)((h ^ (h >> 32)) & 0x7fffffff);
        key[1] = (int32_t)((uint64_t)b->last_seq & 0x7fffffff);
    } else {
        key[0] = nonce;
        key[1] = (int32_t)((uint64_t)index & 0x7fffffff);
    }
}

static int32_t stream_nonce(const fleet_pg *c)
{
    static atomic_uint count;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uintptr_t who = (uintptr_t)c;
    unsigned n = atomic_fetch_add(&count, 1);
    uint64_t h = hash_fnv1a64_init();
    h = hash_fnv1a64(h, &ts, sizeof ts);
    h = hash_fnv1a64(h, &who, sizeof who);
    h = hash_fnv1a64(h, &n, sizeof n);
    return (int32_t)((h ^ (h >> 32)) & 0x7fffffff);
}

/* Plan batch b (from the id caches first, then on lane, which is free:
 * the dimension rows it lacks upserted together) into *p. */
static int plan_batch(fleet_pg *c, int lane, const fleet_batch *b, push_plan *p, char *err,
                      size_t errlen)
{
    if (plan_init(p, b) != 0)
        return attune_fail(err, errlen, ATTUNE_ENOMEM, "out of memory");
    check_dims(b, p);
    (void)resolve_rows(c, b, p, 1, INT_MAX, err, errlen); /* offline: makes no call */
    fleet_pg_lane_use(c, lane);
    int rc = plan_finish(c, b, p, err, errlen);
    if (rc != 0)
        plan_free(p);
    return rc;
}

int fleet_pg_push_stream(fleet_pg *c, fleet_push_next_fn next, fleet_push_done_fn done,
                         void *arg, char *err, size_t errlen)
{
    if (c == NULL || next == NULL || done == NULL)
        return ATTUNE_EINVAL;
    push_stream s;
    memset(&s, 0, sizeof s);
    s.c = c;
    if (pthread_mutex_init(&s.mu, NULL) != 0)
        return attune_fail(err, errlen, ATTUNE_ENOMEM, "out of memory");
    if (pthread_cond_init(&s.cv, NULL) != 0) {
        pthread_mutex_destroy(&s.mu);
        return attune_fail(err, errlen, ATTUNE_ENOMEM, "out of memory");
    }
    s.jobs[0].s = s.jobs[1].s = &s;
    c->conflict = 0;
    int rc = 0, lanes = 1, have_prev = 0;
    int32_t nonce = stream_nonce(c), prev_key[2] = {0, 0};
    int64_t n, limit = INT64_MAX; /* batches from limit on are not told (an error, a stop) */
    fleet_batch prev; /* the batch before (its pointers valid until next is called again) */
    memset(&prev, 0, sizeof prev);
    for (n = 0;; n++) {
        /* a second lane at the second batch's turn (opened before next
         * says whether there is one, since the lane decides which job
         * finishes first; kept in the handle for later pushes), or, when
         * no second session can be had, one batch at a time on the one
         * there is. Its server is lane 0's, as read when lane 0 connected
         * (the batch-0 thread owns lane 0 now). */
        if (n == 1 && fleet_pg_lane_open(c) == 0)
            lanes = 2;
        int lane = lanes == 2 ? (int)(n & 1) : 0;
        lane_job *j = &s.jobs[lane], *o = &s.jobs[lane ^ 1];
        /* the lane's batch before (n - 2, or n - 1 on one lane): told first,
         * and its buffers may be reused by next */
        if ((rc = job_finish(&s, j, done, arg, err, errlen)) != 0) {
            limit = j->index;
            break;
        }
        fleet_batch b;
        memset(&b, 0, sizeof b);
        int have = next(arg, &b);
        if (have <= 0) {
            rc = have; /* an error: next said why (in its own context) */
            limit = n;
            break;
        }
        push_plan p;
        if ((rc = plan_batch(c, lane, &b, &p, err, errlen)) != 0) {
            limit = n;
            break;
        }
        /* a key of both: after the batch before has ended */
        if (o->busy && keys_overlap(&o->p, &p) &&
            (rc = job_finish(&s, o, done, arg, err, errlen)) != 0) {
            plan_free(&p);
            limit = o->index;
            break;
        }
        j->b = b;
        j->p = p;
        j->index = n;
        order_key(&b, nonce, n, j->o.key);
        j->o.has_prev = have_prev;
        j->o.prev[0] = prev_key[0];
        j->o.prev[1] = prev_key[1];
        j->o.first = !have_prev || b.source == NULL || prev.source == NULL ||
                     strcmp(b.source, prev.source) != 0;
        j->o.prev_seq = prev.last_seq;
        job_start(&s, j, lane);
        prev = b;
        have_prev = 1;
        prev_key[0] = j->o.key[0];
        prev_key[1] = j->o.key[1];
        /* the next batch begins once this one holds its order lock; one
         * that ended there (skipped, failed) is told at once, after the
         * batch before it */
        if (job_wait_started(&s, j)) {
            if ((rc = job_finish(&s, o, done, arg, err, errlen)) != 0) {
                limit = o->index;
                break;
            }
            if ((rc = job_finish(&s, j, done, arg, err, errlen)) != 0) {
                limit = j->index;
                break;
            }
        }
    }
    /* the batches still in flight, in order: told while all is well and
     * they come before a failure or a stop; else waited for, not told.
     * After a failure its error (and conflict flag) is the one returned. */
    char e2[ATTUNE_ERRLEN];
    int failed = rc < 0, conflict = c->conflict;
    lane_job *a = &s.jobs[0], *z = &s.jobs[1];
    if (z->busy && (!a->busy || z->index < a->index)) {
        a = &s.jobs[1];
        z = &s.jobs[0];
    }
    for (int k = 0; k < 2; k++) {
        lane_job *j = k == 0 ? a : z;
        int tell = j->index < limit && rc <= 0;
        int rc2 = job_finish(&s, j, tell ? done : NULL, arg, rc == 0 ? err : e2,
                             rc == 0 ? errlen : sizeof e2);
        if (rc == 0)
            rc = rc2;
        if (rc2 != 0)
            limit = j->index;
    }
    if (failed)
        c->conflict = conflict;
    pthread_cond_destroy(&s.cv);
    pthread_mutex_destroy(&s.mu);
    fleet_pg_lane_settle(c); /* back on lane 0; a lane left mid-transaction closed */
    return rc > 0 ? 0 : rc;
}

/* fleet_pg_push: one batch through the stream. */
typedef struct one_push {
    const fleet_batch *b;
    int given;
    fleet_push_stats *stats;
    char *err;
    size_t errlen;
} one_push;

static int one_next(void *arg, fleet_batch *out)
{
    one_push *o = arg;
    if (o->given)
        return 0;
    o->given = 1;
    *out = *o->b;
    return 1;
}

static int one_done(void *arg, const fleet_push_done *d)
{
    one_push *o = arg;
    o->stats->sent += d->sent;
    o->stats->rejected += d->rejected;
    o->stats->skipped += d->skipped;
    if (d->first_bad[0])
        snprintf(o->err, o->errlen, "%s", d->first_bad);
    return 0;
}

int fleet_pg_push(fleet_pg *c, const fleet_batch *b, fleet_push_stats *stats, char *err,
                  size_t errlen)
{
    if (c == NULL || b == NULL || stats == NULL)
        return ATTUNE_EINVAL;
    one_push o = {b, 0, stats, err, errlen};
    return fleet_pg_push_stream(c, one_next, one_done, &o, err, errlen);
}
#endif
