/* export.c -- GET /v1/export streamed (export.h). */
#include "export.h"

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "../common/attune_err.h"
#include "../db/store_wal.h"
#include "conn.h"
#include "log.h"

/* Bytes handed to libmicrohttpd per read callback at most: the callback
 * runs on an HTTP thread, so this bounds how long one export holds the
 * other connections of that thread (a few dozen rows of JSON). */
#define EXPORT_BLOCK (16u << 10)

/* Socket send buffer of an export: bytes handed to libmicrohttpd are then
 * close to bytes the client took, which the minimum rate is about (the
 * kernel's autotuned buffer on loopback reaches megabytes). */
#define EXPORT_SNDBUF (256 << 10)

typedef struct export_ctx {
    attuned *d;
    struct MHD_Connection *conn;
    store_export_stream *x;
    const char *piece;    /* the part of the current piece not sent yet */
    size_t left;
    int failed;
    int done;             /* the whole table was handed out */
    double t0;            /* CLOCK_MONOTONIC seconds at the start */
    unsigned long long given; /* bytes handed to libmicrohttpd */
} export_ctx;

static double mono_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Seconds left to an export that has handed out `given` bytes `elapsed`
 * seconds after its start: the total deadline (--export-timeout), and
 * the minimum rate (--export-min-rate KiB/s, averaged from the start
 * after ATTUNED_EXPORT_GRACE_S): a reader that takes 128 KB every 2 s
 * held a slot and a snapshot (pinning the WAL) for as long as it liked. */
static double export_left_s(const attuned_config *cfg, double elapsed,
                            unsigned long long given)
{
    double limit = cfg->export_timeout_s;
    if (cfg->export_min_rate_kb > 0) {
        double by_rate =
            ATTUNED_EXPORT_GRACE_S + (double)given / (cfg->export_min_rate_kb * 1024.0);
        if (by_rate < limit)
            limit = by_rate;
    }
    return limit - elapsed;
}

/* libmicrohttpd's content reader: fill buf with up to max bytes. Runs on
 * the HTTP thread serving the connection, only when the socket can take
 * more: a client that stops reading stops the export (and the idle
 * timeout ends it). */
static ssize_t export_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    export_ctx *c = cls;
    size_t n = 0;
    (void)pos;
    while (n < max) {
        if (c->left == 0) {
            int rc = store_export_next(c->x, &c->piece, &c->left);
            if (rc < 0) {
                /* the status is gone already: end the stream short (the
                 * client sees an unterminated chunked body) */
                log_event(LOGL_WARN, "export_failed", "error=\"%s\"", attune_strerror(rc));
                c->failed = 1;
                return MHD_CONTENT_READER_END_WITH_ERROR;
            }
            if (rc == 0)
                break;
        }
        size_t k = c->left < max - n ? c->left : max - n;
        memcpy(buf + n, c->piece, k);
        c->piece += k;
        c->left -= k;
        n += k;
    }
    if (n == 0) {
        c->done = 1;
        return MHD_CONTENT_READER_END_OF_STREAM;
    }
    c->given += n;
    /* the watchdog enforces it even when this is never called again (a
     * reader that stopped); here it moves as bytes go out */
    conn_send_deadline(c->conn,
                       export_left_s(&c->d->cfg, mono_s() - c->t0, c->given));
    return (ssize_t)n;
}

static void export_free(void *cls)
{
    export_ctx *c = cls;
    double el = mono_s() - c->t0;
    if (c->done || c->failed) {
        log_event(LOGL_DEBUG, "export_end", "failed=%d bytes=%llu seconds=%.1f", c->failed,
                  c->given, el);
    } else {
        /* closed before its end: by the client, or by the deadline */
        int late = export_left_s(&c->d->cfg, el, c->given) <= 0.5;
        log_event(LOGL_INFO, "export_cut", "reason=%s bytes=%llu seconds=%.1f",
                  late ? "deadline" : "client", c->given, el);
    }
    store_export_close(c->x);
    atomic_fetch_sub(&c->d->exports, 1);
    free(c);
}

enum MHD_Result export_stream(req *r, const char *device_id)
{
    attuned *d = r->d;
    char err[ATTUNE_ERRLEN];
    int running = atomic_fetch_add(&d->exports, 1);
    log_event(LOGL_DEBUG, "export_start", "device=%s running=%d", device_id, running);
    if (running >= ATTUNED_EXPORTS_MAX) {
        atomic_fetch_sub(&d->exports, 1);
        return http_fail_header(r, ATTUNE_EBUSY, MHD_HTTP_HEADER_RETRY_AFTER, "5",
                                "too many exports running; retry later");
    }
    export_ctx *c = calloc(1, sizeof *c);
    if (c == NULL) {
        atomic_fetch_sub(&d->exports, 1);
        return http_fail(r, ATTUNE_ENOMEM, "out of memory");
    }
    c->d = d;
    c->conn = r->conn;
    c->t0 = mono_s();
    int rc = store_export_open(d->cfg.db_path, device_id, &c->x, err, sizeof err);
    if (rc != 0) {
        free(c);
        atomic_fetch_sub(&d->exports, 1);
        if (rc == ATTUNE_ENOTFOUND)
            return http_fail(r, rc, "device %s has no table in the database", device_id);
        return http_fail(r, rc, "export failed: %s", err);
    }
    struct MHD_Response *resp = MHD_create_response_from_callback(
        MHD_SIZE_UNKNOWN, EXPORT_BLOCK, export_read, c, export_free);
    if (resp == NULL) {
        export_free(c);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci != NULL) {
        int sndbuf = EXPORT_SNDBUF;
        setsockopt(ci->connect_fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    }
    enum MHD_Result ret = http_queue(r, 200, resp);
    conn_send_deadline(r->conn, export_left_s(&d->cfg, 0, 0));
    return ret;
}

void export_wal_tick(attuned *d, store *st)
{
    int64_t bytes = store_wal_bytes(st);
    if (bytes < ATTUNED_WAL_SHRINK_BYTES || atomic_load(&d->exports) > 0)
        return;
    store_wal_result w;
    double t0 = mono_s();
    int rc = store_wal_checkpoint(st, ATTUNED_WAL_CHECKPOINT_WAIT_MS, &w);
    if (rc != 0) {
        log_event(LOGL_WARN, "wal_checkpoint_failed", "error=\"%s\"", attune_strerror(rc));
        return;
    }
    if (!w.busy)
        log_event(LOGL_INFO, "wal_truncated", "bytes_before=%lld bytes_after=%lld frames=%d "
                  "ms=%.0f", (long long)bytes, (long long)store_wal_bytes(st), w.frames,
                  (mono_s() - t0) * 1e3);
}
