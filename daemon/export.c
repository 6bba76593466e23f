/* export.c -- GET /v1/export streamed (export.h). */
#include "export.h"

#include <stdlib.h>
#include <string.h>

#include "../common/attune_err.h"
#include "log.h"

/* Bytes handed to libmicrohttpd per read callback at most: the callback
 * runs on an HTTP thread, so this bounds how long one export holds the
 * other connections of that thread (a few dozen rows of JSON). */
#define EXPORT_BLOCK (16u << 10)

typedef struct export_ctx {
    attuned *d;
    store_export_stream *x;
    const char *piece;    /* the part of the current piece not sent yet */
    size_t left;
    int failed;
} export_ctx;

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
    if (n == 0)
        return MHD_CONTENT_READER_END_OF_STREAM;
    return (ssize_t)n;
}

static void export_free(void *cls)
{
    export_ctx *c = cls;
    log_event(LOGL_DEBUG, "export_end", "failed=%d", c->failed);
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
    return http_queue(r, 200, resp);
}
