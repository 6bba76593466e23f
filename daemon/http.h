/* http.h -- per-request state and the helpers every handler uses:
 * responses (created, queued, destroyed in one place), JSON errors, strict
 * query-string parsing, and handing store work to the DB worker.
 *
 * Every answer is JSON (/metrics excepted); every error is
 * {"error": "..."} with a 4xx/5xx status. */
#ifndef ATTUNED_HTTP_H
#define ATTUNED_HTTP_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "../common/jbuf.h"
#include "../tuner/winners.h"
#include "attuned.h"
#include "routes.h"

typedef struct req req;

/* Store work of a deferred request: runs on the DB worker thread with its
 * store handle and must set the response (req_result / req_error). */
typedef void (*req_work_fn)(req *r, store *st);

struct req {
    attuned *d;
    struct MHD_Connection *conn;
    int route;              /* route table row: metrics label */
    const char *method, *url; /* MHD's, valid until the request completes */
    const char *version;    /* MHD's: the request line's HTTP version */
    const char *raw_uri;    /* the raw URI as sent (conn.h: NULL when too
                               long to keep), from http_request_check on */
    size_t raw_len;
    struct timespec t0;
    /* body, accumulated up to limit; too_big: the rest was discarded */
    char *body;
    size_t len, cap, limit;
    size_t reserved;        /* bytes counted in d->body_bytes */
    int too_big;
    /* deferred work: set by the worker, sent when MHD calls us again */
    req_work_fn work;
    atomic_int ready;
    unsigned status;
    char *resp;
    size_t resp_len;
    char location[64];      /* Location header of a 202, "" for none */
    /* arguments copied for the worker (request memory is MHD's) */
    char device_id[64];
    int64_t job_id;
    attn_shape *shapes;
    int nshapes;
    winners_filter winners; /* GET /v1/winners */
    char extra[2][64];      /* route-specific arguments (drift: the two stacks) */
    int extra_flag;         /* (drift: model scope; tune: shapes let through by force) */
    int force;              /* POST /v1/tune's "force": true */
};

/* Queue a response: status, content type, body buf[0..len) (malloc'd;
 * owned from here on, freed even on failure), and an optional extra header
 * (name NULL for none). Counts the request in the metrics. */
enum MHD_Result http_send(req *r, unsigned status, const char *ctype, char *buf, size_t len,
                          const char *hname, const char *hval);

/* Queue resp (destroyed here) with status: metrics, request log, and the
 * connection marked as answering (conn.h). */
enum MHD_Result http_queue(req *r, unsigned status, struct MHD_Response *resp);

/* http_queue for a response the caller keeps (its reference stays the
 * caller's; MHD takes one of its own while it sends): a cached answer. */
enum MHD_Result http_queue_kept(req *r, unsigned status, struct MHD_Response *resp);

/* Queue obj (reference stolen) as JSON. */
enum MHD_Result http_send_json(req *r, unsigned status, json_t *obj);

/* The one error path of handlers: queue {"error": <formatted message>}
 * with the status the error map gives rc (attune_http_status: EINVAL 400,
 * ENODEV/ENOTFOUND 404, ESTATE 409, ETOOBIG 413, EBUSY 503, ENOMEM/EDB
 * 500, ...). No handler picks a status itself. */
enum MHD_Result http_fail(req *r, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* http_fail with one extra response header (Retry-After of a 503, say). */
enum MHD_Result http_fail_header(req *r, int rc, const char *hname, const char *hval,
                                 const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Queue {"error": ...} with an explicit status: for the protocol checks of
 * the router (401, 403, 405, 414, 415, 431) that no library error names. */
enum MHD_Result http_send_error(req *r, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
enum MHD_Result http_send_error_header(req *r, unsigned status, const char *hname,
                                       const char *hval, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Worker side: set the response of a deferred request; errors as
 * http_fail. */
void req_result(req *r, unsigned status, json_t *obj);
void req_fail(req *r, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Set raw JSON text (malloc'd, owned from here on). */
void req_result_text(req *r, unsigned status, char *text, size_t len);

/* Suspend the connection and run fn on the DB worker; MHD calls the access
 * handler again once it is done and http_send_ready() answers. When the
 * daemon is stopping the answer is 503, also for a request still queued
 * on the worker when the stop began (fn does not run). Always MHD_YES. */
enum MHD_Result http_defer(req *r, req_work_fn fn);

/* http_defer for a read (GET /v1/winners, /v1/drift): fn runs on the read
 * pool (attuned.reader), with a read-only store handle of its own thread,
 * so a report of seconds neither queues ahead of the writer's items
 * (POST /v1/tune, DELETE /v1/jobs/ID, imports) nor can write. A read still
 * queued when the daemon stops is answered 503. Always MHD_YES. */
enum MHD_Result http_defer_read(req *r, req_work_fn fn);

/* Queue the response the worker prepared. */
enum MHD_Result http_send_ready(req *r);

/* ---- strict request checks */

/* First call of the access handler: starts the body deadline (conn.h) and
 * checks what libmicrohttpd lets through although the API calls it an
 * error: "%00" in the URI (path or query: a NUL would cut the value short
 * where it is read as a C string), a URI over ATTUNED_URI_MAX (414),
 * headers over ATTUNED_HEADER_MAX (431), a NUL or control byte in a
 * header, two Host headers, Content-Length headers that differ, a header
 * name that is not a token ("Host : x"), Content-Length together with
 * Transfer-Encoding, two Content-Type or two Authorization headers. 0, or
 * the status to answer with err set. */
unsigned http_request_check(req *r, char *err, size_t errlen);

/* 1 when a Content-Type value is application/json, alone or with
 * parameters (";charset=utf-8"); "application/jsonx" is not. */
int http_content_type_json(const char *ct);

/* A plain decimal number ("0.01", "1e-3", ".5"): no sign, space, hex,
 * inf or nan, and finite. 0 or ATTUNE_EINVAL. */
int http_parse_real(const char *s, double *out);

/* ---- query string */

#define HTTP_MAX_ARGS 24

typedef struct http_args {
    int n;
    int overflow;                /* more than HTTP_MAX_ARGS arguments */
    const char *key[HTTP_MAX_ARGS];
    const char *val[HTTP_MAX_ARGS]; /* NULL for "?key" without '=' */
} http_args;

/* Collect the query arguments of c (pointers valid during this call of
 * the access handler), then check that each is in allowed (NULL-ended),
 * appears once and has a value. 0, or ATTUNE_EINVAL with err. */
int http_args_get(struct MHD_Connection *c, const char *const *allowed, http_args *a,
                  char *err, size_t errlen);

/* The checks of http_args_get over arguments already collected in a. */
int http_args_check(const http_args *a, const char *const *allowed, char *err, size_t errlen);

/* Value of key, NULL when absent. */
const char *http_arg(const http_args *a, const char *key);

/* Parse a required integer argument in [min, max] (decimal digits, an
 * optional '-' so negatives are named as such; no leading zero, as in a
 * canonical shape key: "01" is refused, "0" is not). 0 or ATTUNE_EINVAL. */
int http_arg_int(const http_args *a, const char *key, int64_t min, int64_t max,
                 int64_t *out, char *err, size_t errlen);

/* Shape from either shape=<canonical key> or all of b, hq, hkv, sq, skv,
 * d, dtype, causal (not both); validated. 0 or ATTUNE_EINVAL with err. */
int http_args_shape(const http_args *a, attn_shape *s, char *err, size_t errlen);

/* The cross-dtype question's shape (issue 30 item 3, GET /v1/tactic with
 * dtype=any or a list): b, hq, hkv, sq, skv, d and causal as
 * http_args_shape reads them, validated with s->dtype bf16 (the answer
 * the others are compared with), and dtype= as a set ("any", or names
 * separated by commas: lookup/dtype_choice.h) into *set. shape= is
 * refused: a key names one dtype. 0 or ATTUNE_EINVAL with err. */
int http_args_dims(const http_args *a, attn_shape *s, unsigned *set, char *err,
                   size_t errlen);

/* The max_err= of the cross-dtype question: required there, a plain
 * decimal number in (0, 1]; *out 0 when absent. 0 or ATTUNE_EINVAL. */
int http_arg_max_err(const http_args *a, double *out, char *err, size_t errlen);

/* The optional max_rel_err= of a lookup: *out 0 when absent, else a plain
 * decimal number (http_parse_real) in (0, 1]. 0 or ATTUNE_EINVAL with err. */
int http_arg_max_rel_err(const http_args *a, double *out, char *err, size_t errlen);

/* The device that spec names ("cpu", an ordinal, an id, a name), found in
 * the index: 0 with *v, or -1 with the error answer queued (400 when spec
 * is NULL: "missing parameter 'device'"; 404 when no device matches) and
 * the handler's return value in *ret. The one way a handler resolves a
 * device argument. */
int http_device(req *r, const char *spec, index_device_view *v, enum MHD_Result *ret);

/* 1 when the JSON text s[0..n) nests arrays/objects at most max deep
 * (strings skipped, escapes honoured). Checked before parsing, so a body
 * of 100k '[' costs a scan, not a parser recursion. */
int http_json_depth_ok(const char *s, size_t n, int max);

/* Elapsed seconds since r->t0. */
double req_elapsed(const req *r);

#endif
