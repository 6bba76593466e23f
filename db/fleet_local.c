/* fleet_local.c -- the local store's side of fleet sync (see fleet_local.h). */
#include "fleet_local.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/grow.h"
#include "../common/hash.h"
#include "fleet_pins.h"
#include "store_internal.h"

/* The log and the sync state. */
static const char tables_sql[] =
    "CREATE TABLE IF NOT EXISTS fleet_state (key TEXT PRIMARY KEY NOT NULL,"
    "  value TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS fleet_log ("
    "  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  device_id TEXT NOT NULL, stack_id TEXT NOT NULL,"
    "  shape_id INTEGER NOT NULL, tactic TEXT NOT NULL);";

/* The triggers that fill it. Updates are logged only when a pushed field
 * changed (the incumbent mark is local and not pushed). Fleet-aggregate
 * devices (FLEET-...) are never logged. */
static const char triggers_sql[] =
    "CREATE TRIGGER IF NOT EXISTS fleet_log_insert AFTER INSERT ON measurements"
    "  WHEN substr(NEW.device_id, 1, 6) <> 'FLEET-' BEGIN"
    "  INSERT INTO fleet_log (device_id, stack_id, shape_id, tactic)"
    "  VALUES (NEW.device_id, NEW.stack_id, NEW.shape_id, NEW.tactic); END;"
    "CREATE TRIGGER IF NOT EXISTS fleet_log_update AFTER UPDATE ON measurements"
    "  WHEN substr(NEW.device_id, 1, 6) <> 'FLEET-' AND ("
    "   NEW.taken_at IS NOT OLD.taken_at OR NEW.status IS NOT OLD.status OR"
    "   NEW.time_us IS NOT OLD.time_us OR NEW.time_us_min IS NOT OLD.time_us_min OR"
    "   NEW.time_us_max IS NOT OLD.time_us_max OR NEW.time_us_copies IS NOT"
    "   OLD.time_us_copies OR NEW.n IS NOT OLD.n OR NEW.max_abs_err IS NOT"
    "   OLD.max_abs_err OR NEW.rel_err IS NOT OLD.rel_err OR NEW.note IS NOT OLD.note OR"
    "   NEW.host IS NOT OLD.host) BEGIN"
    "  INSERT INTO fleet_log (device_id, stack_id, shape_id, tactic)"
    "  VALUES (NEW.device_id, NEW.stack_id, NEW.shape_id, NEW.tactic); END;";

/* Ready when the log, both triggers and the source id exist: 3 objects. */
static const char ready_sql[] =
    "SELECT count(*) FROM sqlite_master WHERE (type = 'table' AND name = 'fleet_log')"
    " OR (type = 'trigger' AND name IN ('fleet_log_insert', 'fleet_log_update'))";

/* Tunes in flight (STORE_COMPLETE_ROW): a push leaves the rows of a (stack,
 * shape) of a device tuned here until its tune completes, so the tune's
 * first mark logs every row of it again, then pushed; a mark that moves
 * within a completed (stack, shape) logs nothing (store_winner_mark sets
 * the new mark before it clears the old). fleet_marked finds marks at
 * once, for that filter read per row. Added to stores set up before them
 * without a re-log: 2 objects. */
static const char complete_sql[] =
    "CREATE INDEX IF NOT EXISTS fleet_marked ON measurements(device_id, stack_id, shape_id)"
    "  WHERE incumbent = 1;"
    "CREATE TRIGGER IF NOT EXISTS fleet_log_complete AFTER UPDATE OF incumbent ON measurements"
    "  WHEN NEW.incumbent = 1 AND OLD.incumbent = 0 AND substr(NEW.device_id, 1, 6) <> 'FLEET-'"
    "  AND NOT EXISTS (SELECT 1 FROM measurements o WHERE o.device_id = NEW.device_id"
    "   AND o.stack_id = NEW.stack_id AND o.shape_id = NEW.shape_id AND o.incumbent = 1"
    "   AND o.tactic <> NEW.tactic) BEGIN"
    "  INSERT INTO fleet_log (device_id, stack_id, shape_id, tactic)"
    "  SELECT device_id, stack_id, shape_id, tactic FROM measurements"
    "  WHERE device_id = NEW.device_id AND stack_id = NEW.stack_id AND shape_id = NEW.shape_id"
    "  ORDER BY taken_at, tactic; END;";
static const char complete_ready_sql[] =
    "SELECT count(*) FROM sqlite_master WHERE (type = 'index' AND name = 'fleet_marked')"
    " OR (type = 'trigger' AND name = 'fleet_log_complete')";

/* Rows committed before the log existed, oldest first. */
static const char seed_sql[] =
    "INSERT INTO fleet_log (device_id, stack_id, shape_id, tactic)"
    " SELECT device_id, stack_id, shape_id, tactic FROM measurements"
    " WHERE substr(device_id, 1, 6) <> 'FLEET-' ORDER BY taken_at, rowid";

static int state_get(store *st, const char *key, char *buf, size_t len)
{
    sqlite3_stmt *q = NULL;
    int src = sqlite3_prepare_v2(st->db, "SELECT value FROM fleet_state WHERE key = ?1", -1,
                                 &q, NULL);
    if (src == SQLITE_OK)
        src = sqlite3_bind_text(q, 1, key, -1, SQLITE_STATIC);
    if (src == SQLITE_OK)
        src = sqlite3_step(q);
    int rc = 0;
    if (src == SQLITE_ROW)
        store_column_text(q, 0, buf, len);
    else if (src == SQLITE_DONE)
        rc = ATTUNE_ENOTFOUND;
    else
        rc = store_sqlite_err(src);
    sqlite3_finalize(q);
    return rc;
}

static int state_put(store *st, const char *key, const char *value)
{
    sqlite3_stmt *q = NULL;
    int src = sqlite3_prepare_v2(st->db,
                                 "INSERT INTO fleet_state VALUES (?1, ?2) ON CONFLICT(key) "
                                 "DO UPDATE SET value = excluded.value",
                                 -1, &q, NULL);
    if (src == SQLITE_OK &&
        (sqlite3_bind_text(q, 1, key, -1, SQLITE_STATIC) != SQLITE_OK ||
         sqlite3_bind_text(q, 2, value, -1, SQLITE_STATIC) != SQLITE_OK))
        src = SQLITE_ERROR;
    if (src == SQLITE_OK)
        src = sqlite3_step(q);
    sqlite3_finalize(q);
    return src == SQLITE_DONE ? 0 : store_sqlite_err(src);
}

static int64_t query_int(store *st, const char *sql, int64_t arg, int *rc)
{
    sqlite3_stmt *q = NULL;
    int64_t v = 0;
    int src = sqlite3_prepare_v2(st->db, sql, -1, &q, NULL);
    if (src == SQLITE_OK && strchr(sql, '?') != NULL)
        src = sqlite3_bind_int64(q, 1, arg);
    if (src == SQLITE_OK && (src = sqlite3_step(q)) == SQLITE_ROW) {
        v = sqlite3_column_int64(q, 0);
        src = SQLITE_OK;
    }
    if (src != SQLITE_OK && src != SQLITE_DONE && *rc == 0)
        *rc = store_sqlite_err(src);
    sqlite3_finalize(q);
    return v;
}

/* A new source id: 128 random bits, so two stores (or a store restored
 * from an old copy and given a new id) never share a watermark. */
static void new_source(char *out, size_t len)
{
    unsigned char r[16];
    FILE *f = fopen("/dev/urandom", "rb");
    size_t got = f ? fread(r, 1, sizeof r, f) : 0;
    if (f)
        fclose(f);
    if (got != sizeof r) {
        uint64_t s = (uint64_t)time(NULL) ^ ((uint64_t)clock() << 32) ^ (uintptr_t)out;
        for (size_t i = 0; i < sizeof r; i += 8) {
            uint64_t v = hash_splitmix64(&s);
            memcpy(r + i, &v, 8);
        }
    }
    char hex[33];
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", r[i]);
    snprintf(out, len, "src-%s", hex);
}

/* fleet_local_setup's transaction: ctx is a char[40] for the source id. */
static int setup_tx(store *st, void *ctx)
{
    char *src = ctx;
    int rc = 0;
    /* another process may have set it up meanwhile */
    int have = (int)query_int(st, ready_sql, 0, &rc);
    int complete = rc == 0 ? (int)query_int(st, complete_ready_sql, 0, &rc) : 0;
    if (rc != 0 || (have == 3 && complete == 2 && state_get(st, "source", src, 40) == 0))
        return rc;
    /* New, or triggers lost (a store migration that rebuilt measurements
     * drops them): whatever was committed meanwhile went unlogged, so every
     * row is logged again (re-pushing is harmless). A source id survives. */
    if (have != 3 && (sqlite3_exec(st->db, tables_sql, NULL, NULL, NULL) != SQLITE_OK ||
                      sqlite3_exec(st->db, triggers_sql, NULL, NULL, NULL) != SQLITE_OK ||
                      sqlite3_exec(st->db, seed_sql, NULL, NULL, NULL) != SQLITE_OK))
        return store_sqlite_err(sqlite3_errcode(st->db));
    if (sqlite3_exec(st->db, complete_sql, NULL, NULL, NULL) != SQLITE_OK)
        return store_sqlite_err(sqlite3_errcode(st->db));
    if (state_get(st, "source", src, 40) != 0) {
        new_source(src, 40);
        if ((rc = state_put(st, "source", src)) == 0)
            rc = state_put(st, "acked", "0");
    }
    return rc;
}

int fleet_local_setup(store *st, char *source, size_t len, char *err, size_t errlen)
{
    int rc = 0;
    int have = (int)query_int(st, ready_sql, 0, &rc);
    int complete = rc == 0 ? (int)query_int(st, complete_ready_sql, 0, &rc) : 0;
    if (rc != 0)
        return attune_fail(err, errlen, rc, "cannot read the database: %s",
                           sqlite3_errmsg(st->db));
    if (have == 3 && complete == 2 && state_get(st, "source", source, len) == 0)
        return 0;
    char src[40];
    if ((rc = store_tx(st, setup_tx, src)) != 0)
        return attune_fail(err, errlen, rc, "cannot set up fleet sync in the database: %s",
                           sqlite3_errmsg(st->db));
    snprintf(source, len, "%s", src);
    return 0;
}

int fleet_local_state_get(store *st, fleet_local_state *out)
{
    char buf[40];
    int rc;
    memset(out, 0, sizeof *out);
    if ((rc = state_get(st, "source", out->source, sizeof out->source)) != 0 ||
        (rc = state_get(st, "acked", buf, sizeof buf)) != 0)
        return rc;
    out->acked = strtoll(buf, NULL, 10);
    out->last_seq = query_int(st, "SELECT coalesce(max(seq), 0) FROM fleet_log", 0, &rc);
    out->pending = query_int(st, "SELECT count(*) FROM fleet_log WHERE seq > ?1", out->acked,
                             &rc);
    /* pruned entries leave max(seq) behind: sqlite_sequence keeps the top */
    int64_t top = query_int(st, "SELECT coalesce(max(seq), 0) FROM sqlite_sequence "
                                "WHERE name = 'fleet_log'", 0, &rc);
    if (top > out->last_seq)
        out->last_seq = top;
    return rc;
}

/* A change of the sync state (source id, acknowledged mark), applied only
 * while the state is still what the pusher read: another process of this
 * store (attuned and `attune fleet push` on one file) may push, fork or
 * relog meanwhile. stale is set, and nothing written, when it did. */
typedef struct state_change {
    const char *source;   /* the source id the pusher read */
    int64_t acked;        /* the mark it read (ack_tx: the batch's last_seq) */
    const char *fresh;    /* fork_tx, relog_tx: the new source id */
    int stale;            /* out */
} state_change;

/* 0 with *same set when fleet_state still names source (and, when acked
 * >= 0, that acked mark). */
static int state_same(store *st, const char *source, int64_t acked, int *same)
{
    char have[40], buf[24];
    int rc;
    *same = 0;
    if ((rc = state_get(st, "source", have, sizeof have)) != 0 ||
        (rc = state_get(st, "acked", buf, sizeof buf)) != 0)
        return rc;
    *same = strcmp(have, source) == 0 && (acked < 0 || strtoll(buf, NULL, 10) == acked);
    return 0;
}

/* Acknowledge a batch that a server transaction of this store committed:
 * prune the log up to ctx->acked and move the mark there (never back: the
 * store's other pusher may be ahead). Under a source id changed meanwhile
 * (a fork or relog by another process) nothing is acknowledged: the batch
 * is sent again under the new id, which the server merges as a no-op. A
 * store_tx body. */
static int ack_tx(store *st, void *ctx)
{
    state_change *ch = ctx;
    char buf[24];
    int same, rc;
    if ((rc = state_same(st, ch->source, -1, &same)) != 0)
        return rc;
    if (!same) {
        ch->stale = 1;
        return 0;
    }
    if ((rc = state_get(st, "acked", buf, sizeof buf)) != 0)
        return rc;
    if (strtoll(buf, NULL, 10) >= ch->acked)
        return 0;
    snprintf(buf, sizeof buf, "%" PRId64, ch->acked);
    sqlite3_stmt *q = NULL;
    int src = sqlite3_prepare_v2(st->db, "DELETE FROM fleet_log WHERE seq <= ?1", -1, &q, NULL);
    if (src == SQLITE_OK && (src = sqlite3_bind_int64(q, 1, ch->acked)) == SQLITE_OK)
        src = sqlite3_step(q);
    sqlite3_finalize(q);
    if (src != SQLITE_DONE)
        return store_sqlite_err(src);
    return state_put(st, "acked", buf);
}

/* Take the new source id ch->fresh, keeping the log and the acknowledged
 * mark (see reconcile). A store_tx body. */
static int fork_tx(store *st, void *ctx)
{
    state_change *ch = ctx;
    int same, rc;
    if ((rc = state_same(st, ch->source, ch->acked, &same)) != 0)
        return rc;
    if (!same) {
        ch->stale = 1;
        return 0;
    }
    return state_put(st, "source", ch->fresh);
}

/* Forget the log and log every row again under the new source id
 * ch->fresh. A store_tx body. */
static int relog_tx(store *st, void *ctx)
{
    state_change *ch = ctx;
    int same, rc;
    if ((rc = state_same(st, ch->source, ch->acked, &same)) != 0)
        return rc;
    if (!same) {
        ch->stale = 1;
        return 0;
    }
    if (sqlite3_exec(st->db, "DELETE FROM fleet_log", NULL, NULL, NULL) != SQLITE_OK ||
        sqlite3_exec(st->db, seed_sql, NULL, NULL, NULL) != SQLITE_OK)
        return store_sqlite_err(sqlite3_errcode(st->db));
    if ((rc = state_put(st, "source", ch->fresh)) != 0)
        return rc;
    return state_put(st, "acked", "0");
}

/* Make the server's watermark W for this store's source id agree with
 * what the store acknowledged (s->acked), before anything is pushed.
 *
 * Why W may disagree. A source id lives in the database file, so every
 * copy of the file has it: an image cloned to several hosts, a backup
 * restored and tuned on. Two stores holding one id push under one
 * watermark, and W then no longer tells this store what *it* sent. W
 * above s->acked may be this store's own last batch, committed by the
 * server just before a crash lost its local acknowledgement; or a copy's
 * batches of rows this store never sent. The two cannot be told apart
 * (a copy is byte for byte the same store), and taking W as ours (as
 * attune did before issue 27) dropped the log entries up to W unsent: a
 * clone that pushed second sent 223 of its 2,395 rows and then reported
 * nothing pending.
 *
 * The rule: a store acknowledges (prunes from its log) only the entries
 * that a server transaction of its own carried -- a fleet_pg_push that
 * committed the batch rather than skip it -- never entries that W alone
 * vouches for. Rows the server has from this store stay acknowledged;
 * rows it may have are sent again, and the server's merge makes a re-sent
 * row a no-op (one row per (model, stack, shape, tactic, device), replaced
 * only by a newer taken_at: fleet_pg_push.c), so nothing is doubled. So:
 *
 *   W == acked  agreed: the next batch ends past W and is not skipped.
 *   W >  acked  fork: a fresh source id, registered on the server at acked
 *               (an empty batch moves its watermark there), then taken
 *               locally; log and mark stay, and the entries after acked
 *               are pushed under the new id. A lost acknowledgement costs
 *               one batch sent twice; a clone loses nothing. The old id
 *               stays with the other holder(s).
 *   W <  acked  the server lost commits it had acknowledged (a restored
 *               backup, asynchronous commit, a failover to a lagging
 *               replica), and the log no longer holds what it lost: relog
 *               every row under a fresh id (re-pushing is harmless).
 *
 * Registering before switching means a crash in between leaves only an
 * unused id on the server; switching first would leave a mark above the
 * new id's W, read next time as lost commits (a needless full relog).
 * The local switch is made only if the state is still what was read
 * (state_change): otherwise another process of this store moved it, and
 * the caller reads it again. *settled is 1 when W agreed (the state is
 * unchanged), 0 after a fork, a relog or a stale read: the caller reads
 * the state back and calls again. */
static int reconcile(store *st, fleet_pg *c, fleet_local_state *s, int *settled,
                     fleet_local_push *stats, char *err, size_t errlen)
{
    int64_t server = 0;
    *settled = 0;
    int rc = fleet_pg_source_seq(c, s->source, &server, err, errlen);
    if (rc != 0)
        return rc;
    if (server == s->acked) {
        *settled = 1;
        return 0;
    }
    char fresh[40];
    new_source(fresh, sizeof fresh);
    state_change ch = {.source = s->source, .acked = s->acked, .fresh = fresh};
    if (server < s->acked) {
        if ((rc = store_tx(st, relog_tx, &ch)) != 0)
            return attune_fail(err, errlen, rc, "cannot log every row again: %s",
                               attune_strerror(rc));
    } else {
        if (s->acked > 0) {
            fleet_push_stats ps = {0};
            fleet_batch reg = {.source = fresh, .last_seq = s->acked};
            if ((rc = fleet_pg_push(c, &reg, &ps, err, errlen)) != 0)
                return rc;
        }
        if ((rc = store_tx(st, fork_tx, &ch)) != 0)
            return attune_fail(err, errlen, rc, "cannot record a new source id: %s",
                               attune_strerror(rc));
    }
    if (!ch.stale)
        stats->new_sources++;
    return 0;
}

/* One batch read from the log, with the devices and stacks it names. */
typedef struct batch {
    store_measurement *rows;
    int nrows, cap;
    attn_device_info devs[16];
    char hosts[16][64];
    const char *host_ptrs[16];
    int ndevs;
    attn_stack stacks[16];
    int nstacks;
    int64_t last_seq;
    int64_t missing;   /* log entries whose row is gone, noisy, of a tune in
                          flight (STORE_COMPLETE_ROW) or unreadable */
} batch;

static const char read_sql[] =
    "SELECT l.seq, " STORE_MEAS_COLS
    " FROM fleet_log l LEFT JOIN measurements m ON m.device_id = l.device_id"
    "  AND m.stack_id = l.stack_id AND m.shape_id = l.shape_id AND m.tactic = l.tactic"
    "  AND m.noisy = 0" /* a noisy row stays home; its re-measure is logged again */
    "  AND " STORE_COMPLETE_ROW("m", "m.device_id") /* fleet_log_complete logs it later */
    " LEFT JOIN shapes s ON s.id = m.shape_id"
    " WHERE l.seq > ?1 ORDER BY l.seq LIMIT ?2";

int fleet_local_stack(store *st, const char *id, attn_stack *out)
{
    sqlite3_stmt *q = NULL;
    memset(out, 0, sizeof *out);
    int src = sqlite3_prepare_v2(st->db,
                                 "SELECT " STORE_STACK_COLS " FROM stacks WHERE id = ?1",
                                 -1, &q, NULL);
    if (src == SQLITE_OK && (src = sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC)) == SQLITE_OK)
        src = sqlite3_step(q);
    int rc = 0;
    if (src == SQLITE_ROW)
        store_stack_row(q, 0, out);
    else
        rc = src == SQLITE_DONE ? ATTUNE_ENOTFOUND : store_sqlite_err(src);
    sqlite3_finalize(q);
    return rc;
}

typedef struct batch_args {
    int64_t after;
    int limit;
    batch *b;
} batch_args;

/* batch_read's snapshot (a store_snapshot body). */
static int batch_read_tx(store *st, void *ctx)
{
    const batch_args *a = ctx;
    int64_t after = a->after;
    int limit = a->limit;
    batch *b = a->b;
    sqlite3_stmt *q = NULL;
    int rc = 0;
    int src = sqlite3_prepare_v2(st->db, read_sql, -1, &q, NULL);
    if (src == SQLITE_OK && ((src = sqlite3_bind_int64(q, 1, after)) != SQLITE_OK ||
                             (src = sqlite3_bind_int(q, 2, limit)) != SQLITE_OK))
        goto sqlfail;
    if (src != SQLITE_OK)
        goto sqlfail;
    while ((src = sqlite3_step(q)) == SQLITE_ROW) {
        int64_t seq = sqlite3_column_int64(q, 0);
        if (sqlite3_column_type(q, 1) == SQLITE_NULL || sqlite3_column_type(q, 3) == SQLITE_NULL) {
            b->missing++; /* superseded by a later entry, noisy, or unreadable */
            b->last_seq = seq;
            continue;
        }
        char dev[64], stk[24];
        store_column_text(q, 1, dev, sizeof dev);
        store_column_text(q, 2, stk, sizeof stk);
        int di = -1, si = -1;
        for (int i = 0; i < b->ndevs; i++)
            if (strcmp(b->devs[i].id, dev) == 0)
                di = i;
        for (int i = 0; i < b->nstacks; i++)
            if (strcmp(b->stacks[i].id, stk) == 0)
                si = i;
        if ((di < 0 && b->ndevs == 16) || (si < 0 && b->nstacks == 16))
            break;
        if ((rc = grow_array(&b->rows, &b->cap, b->nrows, sizeof *b->rows)) != 0)
            goto fail;
        store_measurement *m = &b->rows[b->nrows];
        /* an unreadable dtype or status is marked invalid: the push refuses it */
        (void)store_meas_columns(q, 1, m);
        if (di < 0) {
            di = b->ndevs;
            attn_stack latest;
            if (store_device_get(st, dev, &b->devs[di], &latest) != 0 ||
                strcmp(b->devs[di].id, dev) != 0) {
                /* no device row: the push refuses the rows (unknown device) */
                memset(&b->devs[di], 0, sizeof b->devs[di]);
                snprintf(b->devs[di].id, sizeof b->devs[di].id, "%s", "?");
            }
            snprintf(b->hosts[di], sizeof b->hosts[di], "%s", m->host);
            b->host_ptrs[di] = b->hosts[di];
            b->ndevs++;
        }
        if (si < 0) {
            si = b->nstacks;
            if (fleet_local_stack(st, stk, &b->stacks[si]) != 0)
                snprintf(b->stacks[si].id, sizeof b->stacks[si].id, "%s", "?");
            b->nstacks++;
        }
        b->nrows++;
        b->last_seq = seq;
    }
    if (src != SQLITE_ROW && src != SQLITE_DONE)
        goto sqlfail;
    sqlite3_finalize(q);
    return 0;
sqlfail:
    rc = store_sqlite_err(src);
fail:
    sqlite3_finalize(q);
    return rc;
}

/* Read up to limit log entries after `after` in one read transaction.
 * Rows of a device or stack beyond the batch's 16 end the batch early
 * (the next batch takes them). */
static int batch_read(store *st, int64_t after, int limit, batch *b)
{
    b->nrows = b->ndevs = b->nstacks = 0;
    b->last_seq = after;
    b->missing = 0;
    batch_args a = {after, limit, b};
    return store_snapshot(st, batch_read_tx, &a);
}

/* A round's batches, as fleet_pg_push_stream asks for them and tells of
 * them: read from the log after the last batch handed out (read_after),
 * acknowledged locally, in order, once each has committed. */
typedef struct round_ctx {
    store *st;
    fleet_local_state *s;
    int batch_rows;
    fleet_stop_fn stop;
    void *stop_arg;
    batch *b;              /* two, handed out in turn (the stream holds two) */
    int turn;              /* the one handed out last */
    int64_t read_after;    /* its last_seq: the next batch starts after it */
    fleet_local_push *stats;
    int again;             /* the state must be read and reconciled anew */
    int rc;                /* next's or done's own error, with err */
    char *err;
    size_t errlen;
} round_ctx;

/* fleet_push_next_fn: the next batch of the log (read while the server
 * commits the one before). */
static int round_next(void *arg, fleet_batch *fb)
{
    round_ctx *r = arg;
    if (r->stop != NULL && r->stop(r->stop_arg))
        return 0;
    r->turn ^= 1;
    batch *b = &r->b[r->turn];
    int rc = batch_read(r->st, r->read_after, r->batch_rows, b);
    if (rc != 0) {
        r->rc = attune_fail(r->err, r->errlen, rc, "cannot read pending rows: %s",
                            attune_strerror(rc));
        return rc;
    }
    if (b->last_seq == r->read_after)
        return 0; /* nothing pending */
    *fb = (fleet_batch){.devices = b->devs, .device_hosts = b->host_ptrs, .ndevices = b->ndevs,
                        .stacks = b->stacks, .nstacks = b->nstacks, .rows = b->rows,
                        .nrows = b->nrows, .source = r->s->source, .last_seq = b->last_seq};
    r->read_after = b->last_seq;
    return 1;
}

/* fleet_push_done_fn: a batch the server committed is acknowledged (the
 * log pruned up to it); a batch it skipped is not (another holder of the
 * source id moved the watermark past it: not ours to acknowledge), and
 * ends the round, as does an acknowledgement refused as stale (another
 * process of this store took a new source id meanwhile). */
static int round_done(void *arg, const fleet_push_done *d)
{
    round_ctx *r = arg;
    fleet_local_push *stats = r->stats;
    stats->rows.rejected += d->rejected;
    stats->rows.skipped += d->skipped;
    if (d->skipped)
        return 1; /* not committed by this push: acknowledge nothing */
    stats->rows.sent += d->sent;
    if (d->rejected > 0 && !stats->first_rejected[0])
        snprintf(stats->first_rejected, sizeof stats->first_rejected, "%s", d->first_bad);
    stats->batches++;
    /* the server has committed: now the local watermark may follow */
    state_change ch = {.source = r->s->source, .acked = d->last_seq};
    int rc = store_tx(r->st, ack_tx, &ch);
    if (rc != 0) {
        r->rc = attune_fail(r->err, r->errlen, rc, "pushed, but cannot record it locally: %s",
                            attune_strerror(rc));
        return rc;
    }
    if (ch.stale)
        return 1;
    stats->acked = d->last_seq;
    return 0;
}

/* One round of a push: reconcile the state s (read by the caller) with the
 * server, then push batches after the acknowledged mark until nothing is
 * pending or stop says so (fleet_pg_push_stream: the next batch is read
 * while the server commits the last). *again is set (and 0 returned) when
 * the state must be read and reconciled anew: after a fork or relog (to
 * check it), or when round_done ended the round. */
static int push_round(store *st, fleet_pg *c, fleet_local_state *s, int batch_rows,
                      fleet_stop_fn stop, void *stop_arg, batch b[2], fleet_local_push *stats,
                      int *again, char *err, size_t errlen)
{
    int settled, rc;
    *again = 1;
    if ((rc = reconcile(st, c, s, &settled, stats, err, errlen)) != 0 || !settled)
        return rc;
    stats->acked = s->acked;
    round_ctx r = {.st = st, .s = s, .batch_rows = batch_rows, .stop = stop, .stop_arg = stop_arg,
               .b = b, .read_after = s->acked, .stats = stats, .err = err, .errlen = errlen};
    char why[512] = "";
    rc = fleet_pg_push_stream(c, round_next, round_done, &r, why, sizeof why);
    if (rc != 0) {
        if (r.rc == 0) /* the server's error, not next's or done's (those are in err) */
            snprintf(err, errlen, "%s", why);
        return rc;
    }
    /* the round ended early (skipped or stale) when the last batch read
     * was not acknowledged; else nothing is pending or stop said so */
    *again = stats->acked != r.read_after;
    return 0;
}

int fleet_local_push_pending(store *st, fleet_pg *c, int batch_rows, fleet_stop_fn stop,
                             void *stop_arg, fleet_local_push *stats, char *err,
                             size_t errlen)
{
    fleet_local_state s;
    batch b[2];
    int rc = 0, again = 1, conflicts = 0;
    int64_t progress = -1;
    memset(b, 0, sizeof b);
    if (batch_rows <= 0)
        batch_rows = FLEET_PUSH_BATCH;
    /* Rounds without the acknowledged mark moving are bounded: two pushers
     * trading forks would otherwise never end. */
    for (int rounds = 0; again; rounds++) {
        if ((rc = fleet_local_state_get(st, &s)) != 0) {
            attune_fail(err, errlen, rc, "cannot read the fleet sync state: %s",
                        attune_strerror(rc));
            break;
        }
        if (s.acked > progress) {
            progress = s.acked;
            rounds = 0;
            conflicts = 0; /* the bound is on conflicts without progress between them */
        }
        if (rounds == FLEET_PUSH_ROUNDS) {
            rc = attune_fail(err, errlen, ATTUNE_EBUSY,
                             "another store keeps pushing under this store's source id %s "
                             "(a copy of this database, or another process on it); %" PRId64
                             " rows stay pending for the next push",
                             s.source, s.pending);
            break;
        }
        if ((rc = push_round(st, c, &s, batch_rows, stop, stop_arg, b, stats, &again, err,
                             errlen)) != 0) {
            /* the server ended a batch's transaction to break a deadlock
             * with another pusher of rows of the same keys (two stores'
             * rows of one device): nothing of it committed, and what was
             * acknowledged before it is on the server; the round again,
             * after a pause that grows, a bounded number of times */
            if (rc == ATTUNE_EDB && fleet_pg_conflicted(c) && conflicts < FLEET_PUSH_ROUNDS) {
                const struct timespec pause = {0, 20000000L * ++conflicts};
                nanosleep(&pause, NULL);
                if (errlen > 0)
                    err[0] = 0;
                rc = 0;
                again = 1;
                continue;
            }
            break;
        }
    }
    free(b[0].rows);
    free(b[1].rows);
    /* the pins go with every push (fleet_pins.h); the rows are on the
     * server whatever becomes of them, so their outcome is reported apart */
    int pushed, added;
    if (rc == 0)
        stats->pins_rc = fleet_local_pins(st, c, &pushed, &added, &stats->pins_skipped,
                                          stats->pins_err, sizeof stats->pins_err);
    return rc;
}

/* One model's pull into the store: what store_import does with a fleet
 * table (docs/fleet.md, "Merging"), in chunks as the rows arrive: every
 * value checked outside any transaction, then a chunk of whole shapes
 * written in one short transaction (rows inserted or replacing older
 * ones), so SQLite's write lock is never held while the server is waited
 * on and a tune's commit waits at most one chunk's write. The stacks and,
 * when the store lacks it, the fleet device come first; the device's
 * latest stack and last_seen go with the last chunk, so a pull that fails
 * midway leaves the chunks before it and the device as it was. */
#define PULL_CHUNK_ROWS 2048
/* A chunk ends here even within a shape (one with more rows than this,
 * tactics of one stack, is cut anyway). */
#define PULL_CHUNK_MAX (4 * PULL_CHUNK_ROWS)

typedef struct pull_chunk {
    store_measurement *rows;
    char (*canon)[ATTN_TACTIC_STR_MAX]; /* each row's canonical tactic */
    int n;
} pull_chunk;

typedef struct pull_args {
    fleet_pg_pull *p;
    const pull_chunk *c;
    int last;          /* the model's last chunk: the device row goes with it */
    int64_t rows;      /* rows committed */
    char *err;
    size_t errlen;
} pull_args;

static int pull_fail(store *st, int rc, const char *what, const char *why, char *err,
                     size_t errlen)
{
    return attune_fail(err, errlen, rc, "pulled %s: %s", what,
                       why != NULL ? why : sqlite3_errmsg(st->db));
}

/* The head's transaction: stacks upserted, the device inserted when the
 * store lacks it (never updated here: pull_chunk_tx does that last). */
static int pull_head_tx(store *st, void *ctx)
{
    pull_args *a = ctx;
    const fleet_pg_pull_head *h = fleet_pg_pull_head_get(a->p);
    int rc, changed;
    for (int i = 0; i < h->nstacks; i++)
        if ((rc = store_upsert_stack(st, &h->stacks[i], &changed)) != 0)
            return pull_fail(st, rc, "stack", NULL, a->err, a->errlen);
    attn_device_info known;
    attn_stack stack;
    rc = store_device_get(st, h->device.id, &known, &stack);
    if (rc == ATTUNE_ENOTFOUND || (rc == 0 && strcmp(known.id, h->device.id) != 0))
        rc = store_upsert_device(st, &h->device, h->newest, NULL, &changed);
    return rc != 0 ? pull_fail(st, rc, "model", NULL, a->err, a->errlen) : 0;
}

static int pull_chunk_tx(store *st, void *ctx)
{
    pull_args *a = ctx;
    const fleet_pg_pull_head *h = fleet_pg_pull_head_get(a->p);
    int rc, changed;
    for (int i = 0; i < a->c->n; i++)
        if ((rc = store_write_measurement(st, &a->c->rows[i], a->c->canon[i], 1, &changed, NULL)) != 0)
            return pull_fail(st, rc, "row", NULL, a->err, a->errlen);
    if (a->last &&
        (rc = store_upsert_device(st, &h->device, h->newest, h->latest_stack, &changed)) != 0)
        return pull_fail(st, rc, "model", NULL, a->err, a->errlen);
    return 0;
}

static int same_shape(const store_measurement *x, const store_measurement *y)
{
    const attn_shape *s = &x->shape, *t = &y->shape;
    return strcmp(x->stack_id, y->stack_id) == 0 && s->b == t->b && s->hq == t->hq &&
           s->hkv == t->hkv && s->sq == t->sq && s->skv == t->skv && s->d == t->d &&
           s->dtype == t->dtype && s->causal == t->causal;
}

/* Write chunk c (last: the model's end) in its transaction; c emptied. */
static int pull_flush(store *st, pull_args *a, pull_chunk *c, int last)
{
    a->c = c;
    a->last = last;
    int rc = store_tx(st, pull_chunk_tx, a);
    if (rc == 0)
        a->rows += c->n;
    c->n = 0;
    return rc;
}

/* Pull one opened model (a->p) into st, chunk by chunk. 0 or the first
 * error (err filled); the chunks written before it stay. */
static int pull_model(store *st, pull_args *a)
{
    const fleet_pg_pull_head *h = fleet_pg_pull_head_get(a->p);
    char why[ATTUNE_ERRLEN];
    if (store_check_device(&h->device, why, sizeof why) != 0)
        return pull_fail(st, ATTUNE_EFORMAT, "model", why, a->err, a->errlen);
    for (int i = 0; i < h->nstacks; i++)
        if (store_check_stack(&h->stacks[i], why, sizeof why) != 0)
            return pull_fail(st, ATTUNE_EFORMAT, "stack", why, a->err, a->errlen);
    int rc = store_tx(st, pull_head_tx, a);
    if (rc != 0)
        return rc;
    pull_chunk c = {malloc((PULL_CHUNK_MAX + 1) * sizeof *c.rows),
                    malloc((PULL_CHUNK_MAX + 1) * sizeof *c.canon), 0};
    if (c.rows == NULL || c.canon == NULL) {
        rc = attune_fail(a->err, a->errlen, ATTUNE_ENOMEM, "out of memory");
        goto out;
    }
    /* rows come in (stack, shape) order: a chunk ends between two shapes */
    while ((rc = fleet_pg_pull_next(a->p, &c.rows[c.n], a->err, a->errlen)) == 1) {
        if (store_check_measurement(&c.rows[c.n], c.canon[c.n], why, sizeof why) != 0) {
            rc = pull_fail(st, ATTUNE_EFORMAT, "row", why, a->err, a->errlen);
            goto out;
        }
        int full = c.n >= PULL_CHUNK_MAX ||
                   (c.n >= PULL_CHUNK_ROWS && !same_shape(&c.rows[c.n], &c.rows[c.n - 1]));
        if (full) { /* rows [0, n) go; the one just read, at n, opens the next chunk */
            int read = c.n;
            if ((rc = pull_flush(st, a, &c, 0)) != 0)
                goto out;
            c.rows[0] = c.rows[read];
            memcpy(c.canon[0], c.canon[read], sizeof c.canon[0]);
        }
        c.n++;
    }
    if (rc == 0)
        rc = pull_flush(st, a, &c, 1);
out:
    free(c.rows);
    free(c.canon);
    return rc;
}

int fleet_local_pull(store *st, fleet_pg *c, const attn_device_info *devs, int n,
                     int refresh_after_s, int64_t *rows, int *pins_skipped, char *err,
                     size_t errlen)
{
    *rows = 0;
    if (pins_skipped != NULL)
        *pins_skipped = 0;
    for (int i = 0; i < n; i++) {
        char uid[32], other[32];
        int seen = 0;
        fleet_model_id(&devs[i], uid, sizeof uid);
        for (int j = 0; j < i && !seen; j++) {
            fleet_model_id(&devs[j], other, sizeof other);
            seen = strcmp(uid, other) == 0;
        }
        if (seen || fleet_is_model_device(devs[i].id))
            continue;
        pull_args a = {.err = err, .errlen = errlen};
        int rc = fleet_pg_pull_open(c, &devs[i], refresh_after_s, &a.p, err, errlen);
        if (rc != 0)
            return rc;
        if (a.p == NULL)
            continue; /* no aggregates of this model */
        if (err != NULL && errlen > 0)
            err[0] = 0;
        rc = pull_model(st, &a);
        if (rc != 0 && err != NULL && errlen > 0 && err[0] == 0)
            attune_fail(err, errlen, rc, "cannot store the pulled rows: %s",
                        sqlite3_errmsg(st->db));
        fleet_pg_pull_close(a.p);
        *rows += a.rows;
        if (rc != 0)
            return rc;
    }
    int pushed, added, skipped = 0; /* and with every pull */
    int rc = fleet_local_pins(st, c, &pushed, &added, &skipped, err, errlen);
    if (pins_skipped != NULL)
        *pins_skipped = skipped;
    return rc;
}
