/* http.c -- responses, JSON errors, query arguments, deferred work. */
#include "http.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../common/json_num.h"
#include "../common/dtype_set.h"
#include "conn.h"
#include "log.h"
#include "metrics.h"

double req_elapsed(const req *r)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - r->t0.tv_sec) + (double)(now.tv_nsec - r->t0.tv_nsec) * 1e-9;
}

enum MHD_Result http_send(req *r, unsigned status, const char *ctype, char *buf, size_t len,
                          const char *hname, const char *hval)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, buf,
                                                                MHD_RESPMEM_MUST_FREE);
    if (resp == NULL) {
        free(buf);
        return MHD_NO; /* out of memory: MHD closes the connection */
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    if (hname != NULL)
        MHD_add_response_header(resp, hname, hval);
    return http_queue(r, status, resp);
}

enum MHD_Result http_queue(req *r, unsigned status, struct MHD_Response *resp)
{
    enum MHD_Result ret = http_queue_kept(r, status, resp);
    MHD_destroy_response(resp);
    return ret;
}

enum MHD_Result http_queue_kept(req *r, unsigned status, struct MHD_Response *resp)
{
    conn_request_busy(r->conn);
    enum MHD_Result ret = MHD_queue_response(r->conn, status, resp);
    metrics_request(r->route, status);
    if (status >= 400 ? log_enabled(LOGL_INFO) : log_enabled(LOGL_DEBUG)) {
        char m[40];
        log_event(status >= 400 ? LOGL_INFO : LOGL_DEBUG, "request",
                  "method=%s path=%s status=%u us=%.0f",
                  log_quote(r->method ? r->method : "?", m, sizeof m),
                  LOG_Q(r->url ? r->url : "?"), status, req_elapsed(r) * 1e6);
    }
    return ret;
}

enum MHD_Result http_send_json(req *r, unsigned status, json_t *obj)
{
    char *text = obj != NULL ? json_num_dumps(obj, JSON_COMPACT) : NULL;
    json_decref(obj);
    if (text == NULL) {
        static const char oom[] = "{\"error\":\"out of memory\"}";
        char *copy = strdup(oom);
        if (copy == NULL)
            return MHD_NO;
        return http_send(r, 500, "application/json", copy, sizeof oom - 1, NULL, NULL);
    }
    return http_send(r, status, "application/json", text, strlen(text), NULL, NULL);
}

static json_t *error_obj(const char *fmt, va_list ap)
{
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    /* a message quoting client input must still be valid UTF-8 JSON:
     * jansson refuses invalid UTF-8 (client bytes, or a quote cut inside
     * a character), so every non-ASCII byte becomes '?' and the message
     * keeps what it names (the parameter, the value's ASCII) */
    json_t *o = json_pack("{s:s}", "error", msg);
    if (o == NULL) {
        for (char *p = msg; *p != 0; p++)
            if ((unsigned char)*p >= 0x80)
                *p = '?';
        o = json_pack("{s:s}", "error", msg);
    }
    return o;
}

/* {"error": message} with status and one extra header (hname NULL: none). */
static enum MHD_Result send_error(req *r, unsigned status, const char *hname,
                                  const char *hval, const char *fmt, va_list ap)
{
    json_t *o = error_obj(fmt, ap);
    char *text = o != NULL ? json_num_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (text == NULL)
        return http_send_json(r, status, NULL); /* answers 500 out of memory */
    return http_send(r, status, "application/json", text, strlen(text), hname, hval);
}

enum MHD_Result http_send_error(req *r, unsigned status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    enum MHD_Result ret = send_error(r, status, NULL, NULL, fmt, ap);
    va_end(ap);
    return ret;
}

enum MHD_Result http_send_error_header(req *r, unsigned status, const char *hname,
                                       const char *hval, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    enum MHD_Result ret = send_error(r, status, hname, hval, fmt, ap);
    va_end(ap);
    return ret;
}

enum MHD_Result http_fail(req *r, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    enum MHD_Result ret = send_error(r, (unsigned)attune_http_status(rc), NULL, NULL, fmt, ap);
    va_end(ap);
    return ret;
}

enum MHD_Result http_fail_header(req *r, int rc, const char *hname, const char *hval,
                                 const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    enum MHD_Result ret = send_error(r, (unsigned)attune_http_status(rc), hname, hval, fmt, ap);
    va_end(ap);
    return ret;
}

void req_result_text(req *r, unsigned status, char *text, size_t len)
{
    free(r->resp);
    r->status = status;
    r->resp = text;
    r->resp_len = len;
}

void req_result(req *r, unsigned status, json_t *obj)
{
    char *text = obj != NULL ? json_num_dumps(obj, JSON_COMPACT) : NULL;
    json_decref(obj);
    if (text == NULL) {
        req_result_text(r, 500, strdup("{\"error\":\"out of memory\"}"), 25);
        return;
    }
    req_result_text(r, status, text, strlen(text));
}

void req_fail(req *r, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    json_t *o = error_obj(fmt, ap);
    va_end(ap);
    req_result(r, (unsigned)attune_http_status(rc), o);
}

/* An item queued when the daemon began to stop is answered 503 at once
 * rather than run: the stop waits for the queue to drain, and queued
 * reports of seconds each, or tunes pricing their shapes, would hold it
 * past the unit's timeout. The client was not answered: it retries. */
static void run_deferred(void *arg, store *st)
{
    req *r = arg;
    if (atomic_load(&r->d->stopping))
        req_fail(r, ATTUNE_EBUSY, "the daemon is shutting down");
    else
        r->work(r, st);
    atomic_store(&r->ready, 1);
    MHD_resume_connection(r->conn);
}

enum MHD_Result http_defer(req *r, req_work_fn fn)
{
    r->work = fn;
    conn_request_busy(r->conn);
    /* suspend before submitting: the worker may resume at once */
    MHD_suspend_connection(r->conn);
    if (atomic_load(&r->d->stopping) ||
        worker_submit(r->d->worker, run_deferred, r) != 0) {
        req_fail(r, ATTUNE_EBUSY, "the daemon is shutting down");
        atomic_store(&r->ready, 1);
        MHD_resume_connection(r->conn);
    }
    return MHD_YES;
}

enum MHD_Result http_defer_read(req *r, req_work_fn fn)
{
    r->work = fn;
    conn_request_busy(r->conn);
    MHD_suspend_connection(r->conn);
    if (atomic_load(&r->d->stopping) ||
        worker_submit(r->d->reader, run_deferred, r) != 0) {
        req_fail(r, ATTUNE_EBUSY, "the daemon is shutting down");
        atomic_store(&r->ready, 1);
        MHD_resume_connection(r->conn);
    }
    return MHD_YES;
}

enum MHD_Result http_send_ready(req *r)
{
    char *text = r->resp;
    r->resp = NULL;
    if (text == NULL) {
        text = strdup("{\"error\":\"internal error: no response\"}");
        if (text == NULL)
            return MHD_NO;
        r->status = 500;
        r->resp_len = strlen(text);
    }
    if (r->location[0] != 0)
        return http_send(r, r->status, "application/json", text, r->resp_len,
                         MHD_HTTP_HEADER_LOCATION, r->location);
    return http_send(r, r->status, "application/json", text, r->resp_len, NULL, NULL);
}

/* ---- query arguments */

static enum MHD_Result collect_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                   const char *value)
{
    http_args *a = cls;
    (void)kind;
    if (a->n == HTTP_MAX_ARGS) {
        a->overflow = 1;
        return MHD_NO;
    }
    a->key[a->n] = key;
    a->val[a->n] = value;
    a->n++;
    return MHD_YES;
}

/* Printable, bounded form of client text for error messages. */
static const char *shown(const char *s, char *buf, size_t len)
{
    size_t i = 0;
    for (; s[i] != 0 && i + 1 < len; i++)
        buf[i] = ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x7f) ? '?' : s[i];
    buf[i] = 0;
    return buf;
}

int http_args_get(struct MHD_Connection *c, const char *const *allowed, http_args *a,
                  char *err, size_t errlen)
{
    memset(a, 0, sizeof *a);
    MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, collect_arg, a);
    return http_args_check(a, allowed, err, errlen);
}

int http_args_check(const http_args *a, const char *const *allowed, char *err, size_t errlen)
{
    char b1[48];
    if (a->overflow)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "more than %d query parameters",
                           HTTP_MAX_ARGS);
    for (int i = 0; i < a->n; i++) {
        int known = 0;
        for (const char *const *k = allowed; *k != NULL && !known; k++)
            known = strcmp(*k, a->key[i]) == 0;
        if (!known)
            return attune_fail(err, errlen, ATTUNE_EINVAL, "unknown parameter '%s'",
                               shown(a->key[i], b1, sizeof b1));
        for (int j = 0; j < i; j++)
            if (strcmp(a->key[j], a->key[i]) == 0)
                return attune_fail(err, errlen, ATTUNE_EINVAL, "parameter '%s' repeated",
                                   a->key[i]);
        if (a->val[i] == NULL || a->val[i][0] == 0)
            return attune_fail(err, errlen, ATTUNE_EINVAL, "parameter '%s' has no value",
                               a->key[i]);
    }
    return 0;
}

const char *http_arg(const http_args *a, const char *key)
{
    for (int i = 0; i < a->n; i++)
        if (strcmp(a->key[i], key) == 0)
            return a->val[i];
    return NULL;
}

int http_arg_int(const http_args *a, const char *key, int64_t min, int64_t max,
                 int64_t *out, char *err, size_t errlen)
{
    char b1[48];
    const char *v = http_arg(a, key);
    if (v == NULL)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "missing parameter '%s'", key);
    const char *p = v;
    int neg = 0;
    if (*p == '-') {
        neg = 1;
        p++;
    }
    if (*p < '0' || *p > '9')
        return attune_fail(err, errlen, ATTUNE_EINVAL, "%s='%s' is not an integer", key,
                           shown(v, b1, sizeof b1));
    for (const char *q = p; *q; q++)
        if (*q < '0' || *q > '9')
            return attune_fail(err, errlen, ATTUNE_EINVAL, "%s='%s' is not an integer", key,
                               shown(v, b1, sizeof b1));
    /* one spelling per number, as the shape keys (b01 is refused there) */
    if (p[0] == '0' && p[1] != 0)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "%s='%s' has a leading zero", key,
                           shown(v, b1, sizeof b1));
    errno = 0;
    long long x = strtoll(v, NULL, 10);
    if (errno == ERANGE || x > max)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "%s=%s is too large (at most %lld)",
                           key, shown(v, b1, sizeof b1), (long long)max);
    if (neg || x < min)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "%s=%s is too small (at least %lld)",
                           key, shown(v, b1, sizeof b1), (long long)min);
    *out = x;
    return 0;
}

/* http_args_shape, or with set != NULL http_args_dims. */
static int args_shape(const http_args *a, attn_shape *s, unsigned *set, char *err,
                      size_t errlen)
{
    static const char *const fields[] = {"b", "hq", "hkv", "sq", "skv", "d"};
    char b1[48];
    const char *key = http_arg(a, "shape");
    memset(s, 0, sizeof *s);
    if (key != NULL && set != NULL)
        return attune_fail(err, errlen, ATTUNE_EINVAL,
                           "a set of dtypes takes the shape fields (b, hq, hkv, sq, skv, d, "
                           "causal), not shape=");
    if (key != NULL) {
        for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
            if (http_arg(a, fields[i]) != NULL)
                return attune_fail(err, errlen, ATTUNE_EINVAL,
                                   "give either shape= or the shape fields, not both");
        if (http_arg(a, "dtype") != NULL || http_arg(a, "causal") != NULL)
            return attune_fail(err, errlen, ATTUNE_EINVAL,
                               "give either shape= or the shape fields, not both");
        return attn_shape_parse(key, s, err, errlen) == 0 ? 0 : ATTUNE_EINVAL;
    }
    int64_t *dst[] = {&s->b, &s->hq, &s->hkv, &s->sq, &s->skv, &s->d};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        int rc = http_arg_int(a, fields[i], 1, ATTN_MAX_DIM, dst[i], err, errlen);
        if (rc != 0)
            return rc;
    }
    const char *dt = http_arg(a, "dtype");
    if (dt == NULL)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "missing parameter 'dtype'");
    if (set != NULL) {
        if (dtype_set_parse(dt, set, err, errlen) != 0)
            return ATTUNE_EINVAL;
        s->dtype = ATTN_BF16;
    } else if (attn_dtype_parse(dt, &s->dtype) != 0) {
        return attune_fail(err, errlen, ATTUNE_EINVAL,
                           "unknown dtype '%s' (expected f16, bf16, f32 or e4m3; a set: any, "
                           "or a list such as bf16,e4m3, with max_err=)",
                           shown(dt, b1, sizeof b1));
    }
    const char *c = http_arg(a, "causal");
    if (c == NULL)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "missing parameter 'causal'");
    if (strcmp(c, "1") == 0 || strcmp(c, "true") == 0)
        s->causal = 1;
    else if (strcmp(c, "0") == 0 || strcmp(c, "false") == 0)
        s->causal = 0;
    else
        return attune_fail(err, errlen, ATTUNE_EINVAL,
                           "causal='%s' must be 0, 1, true or false", shown(c, b1, sizeof b1));
    return attn_shape_validate(s, err, errlen) == 0 ? 0 : ATTUNE_EINVAL;
}

int http_args_shape(const http_args *a, attn_shape *s, char *err, size_t errlen)
{
    return args_shape(a, s, NULL, err, errlen);
}

int http_args_dims(const http_args *a, attn_shape *s, unsigned *set, char *err,
                   size_t errlen)
{
    return args_shape(a, s, set, err, errlen);
}

int http_arg_max_err(const http_args *a, double *out, char *err, size_t errlen)
{
    char b1[48];
    const char *v = http_arg(a, "max_err");
    double x;
    *out = 0;
    if (v == NULL)
        return 0;
    if (http_parse_real(v, &x) != 0 || x <= 0 || x > 1)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "max_err='%s' must be a number in (0, 1]",
                           shown(v, b1, sizeof b1));
    *out = x;
    return 0;
}

int http_device(req *r, const char *spec, index_device_view *v, enum MHD_Result *ret)
{
    if (spec == NULL) {
        *ret = http_fail(r, ATTUNE_EINVAL, "missing parameter 'device'");
        return -1;
    }
    /* longer than any id or name: not looked up, and not echoed whole */
    if (strlen(spec) > 128 || index_device_find(r->d->ix, spec, v) != 0) {
        *ret = http_fail(r, ATTUNE_ENODEV, "unknown device '%.64s' (see GET /v1/devices)", spec);
        return -1;
    }
    return 0;
}

int http_arg_max_rel_err(const http_args *a, double *out, char *err, size_t errlen)
{
    char b1[48];
    const char *v = http_arg(a, "max_rel_err");
    *out = 0;
    if (v == NULL)
        return 0;
    double x;
    if (http_parse_real(v, &x) != 0 || x <= 0 || x > 1)
        return attune_fail(err, errlen, ATTUNE_EINVAL,
                           "max_rel_err='%s' must be a number in (0, 1]", shown(v, b1, sizeof b1));
    *out = x;
    return 0;
}

int http_json_depth_ok(const char *s, size_t n, int max)
{
    int depth = 0, in_str = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (in_str) {
            if (ch == '\\')
                i++; /* skip the escaped character */
            else if (ch == '"')
                in_str = 0;
        } else if (ch == '"') {
            in_str = 1;
        } else if (ch == '[' || ch == '{') {
            if (++depth > max)
                return 0;
        } else if (ch == ']' || ch == '}') {
            depth--;
        }
    }
    return 1;
}

/* ---- strict request checks */

typedef struct header_scan {
    const char *block;      /* the header block in its read buffer, NULL: none */
    size_t block_len;       /* at most ATTUNED_HEADER_MAX */
    /* bit i: a header name starts at block + i. A bitmap, not a list of
     * names: hidden_nul checks every header however many there are (a
     * list of 64 let `Host: localhost\0.evil` pass after 65 others) */
    unsigned char name_at[ATTUNED_HEADER_MAX / 8];
    int outside;            /* a value not in the block: cannot tell */
    int hidden;             /* a value cut at a raw NUL (hidden_nul) */
    int hosts;
    int bad;                /* a header value holds a NUL or control byte */
    const char *cl;         /* first Content-Length value */
    size_t cl_len;
    int cl_differ;          /* a later Content-Length differs from the first */
    int te;                 /* Transfer-Encoding headers */
    int ctypes, auths;      /* Content-Type and Authorization headers */
    int bad_name;           /* a header name that is not an RFC 9110 token */
} header_scan;

/* RFC 9110 5.1/5.6.2: a field name is a token, so "Host : x" (white space
 * before the colon, which libmicrohttpd keeps in the name) is not a Host
 * header a proxy and attuned could disagree on: refused (RFC 9112 5.1). */
static int tchar(unsigned char ch)
{
    switch (ch) {
    case '!': case '#': case '$': case '%': case '&': case '\'': case '*': case '+':
    case '-': case '.': case '^': case '_': case '`': case '|': case '~':
        return 1;
    default:
        return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
    }
}

static int token_name(const char *key, size_t n)
{
    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!tchar((unsigned char)key[i]))
            return 0;
    return 1;
}

static enum MHD_Result scan_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                   size_t key_size, const char *value, size_t value_size)
{
    header_scan *h = cls;
    (void)kind;
    if (h->block != NULL && key >= h->block && key < h->block + h->block_len) {
        size_t at = (size_t)(key - h->block); /* a name elsewhere follows no value */
        h->name_at[at / 8] |= (unsigned char)(1u << (at % 8));
    }
    if (strlen(key) != key_size || (value != NULL && strlen(value) != value_size))
        h->bad = 1;
    for (size_t i = 0; value != NULL && i < value_size; i++) {
        unsigned char ch = (unsigned char)value[i];
        if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
            h->bad = 1;
    }
    if (!token_name(key, key_size))
        h->bad_name = 1;
    /* the names counted differ in length: one comparison per header */
#define IS(name) (key_size == sizeof name - 1 && strcasecmp(key, name) == 0)
    if (IS(MHD_HTTP_HEADER_HOST))
        h->hosts++;
    else if (IS(MHD_HTTP_HEADER_TRANSFER_ENCODING))
        h->te++;
    else if (IS(MHD_HTTP_HEADER_CONTENT_TYPE))
        h->ctypes++;
    else if (IS(MHD_HTTP_HEADER_AUTHORIZATION))
        h->auths++;
    else if (IS(MHD_HTTP_HEADER_CONTENT_LENGTH) && value != NULL) {
        if (h->cl == NULL) {
            h->cl = value;
            h->cl_len = value_size;
        } else if (value_size != h->cl_len || memcmp(value, h->cl, value_size) != 0) {
            h->cl_differ = 1;
        }
    }
#undef IS
    return MHD_YES;
}

/* A raw NUL inside a header value: libmicrohttpd sizes values with
 * strlen(), so "Host: localhost\0.evil.com" reads as "localhost". The
 * header block is still in its read buffer, in place, from the method to
 * method + header_size, each line ended by NUL bytes where its CR/LF were.
 * After a value's end there may only be line-end or trailing-blank bytes
 * (now NUL, CR, space, tab) up to the next header's name or the end of the
 * block; a visible byte there is the rest of a value cut at a NUL. Run for
 * each value once scan_header has marked every name. */
static enum MHD_Result value_end(void *cls, enum MHD_ValueKind kind, const char *key,
                                 size_t key_size, const char *value, size_t value_size)
{
    header_scan *h = cls;
    (void)kind;
    (void)key;
    (void)key_size;
    const char *end = h->block + h->block_len;
    if (value == NULL || value < h->block || value >= end) {
        h->outside = 1; /* not laid out as expected: cannot tell */
        return MHD_NO;
    }
    const char *p = value + value_size + 1;
    while (p < end && (*p == 0 || *p == '\r' || *p == '\n' || *p == ' ' || *p == '\t'))
        p++;
    size_t at = (size_t)(p - h->block);
    if (p < end && !(h->name_at[at / 8] & (1u << (at % 8)))) {
        h->hidden = 1;
        return MHD_NO;
    }
    return MHD_YES;
}

/* 1 when a header value of r hides bytes after a raw NUL (value_end), 0
 * when none does or the layout is not the one expected (cannot tell). */
static int hidden_nul(req *r, header_scan *h)
{
    if (h->block == NULL)
        return 0;
    MHD_get_connection_values_n(r->conn, MHD_HEADER_KIND, value_end, h);
    return h->hidden && !h->outside;
}

unsigned http_request_check(req *r, char *err, size_t errlen)
{
    conn_request_info ci;
    conn_request_begin(r->conn, &ci);
    r->raw_uri = ci.raw;
    r->raw_len = ci.raw_len;
    /* a raw NUL in the request line: the URI seen by the URI callback
     * (before any parsing) ends short of the space before the version */
    if (ci.uri != NULL && r->version != NULL && r->version > ci.uri &&
        (size_t)(r->version - ci.uri) <= ATTUNED_CONN_MEMORY &&
        r->version != ci.uri + ci.uri_len + 1)
        ci.uri_nul = 1;
    if (ci.uri_nul) {
        attune_fail(err, errlen, ATTUNE_EINVAL, "NUL byte in the request URI");
        return 400;
    }
    if (ci.uri_len > ATTUNED_URI_MAX) {
        attune_fail(err, errlen, ATTUNE_EINVAL, "request URI longer than %u bytes",
                    ATTUNED_URI_MAX);
        return 414;
    }
    const union MHD_ConnectionInfo *hi =
        MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
    size_t header_size = hi != NULL ? hi->header_size : 0;
    if (header_size > ATTUNED_HEADER_MAX) {
        attune_fail(err, errlen, ATTUNE_EINVAL, "request headers larger than %u bytes",
                    ATTUNED_HEADER_MAX);
        return 431;
    }
    header_scan h;
    memset(&h, 0, sizeof h);
    if (header_size > 0) { /* at most ATTUNED_HEADER_MAX: checked above */
        h.block = r->method;
        h.block_len = header_size;
    }
    MHD_get_connection_values_n(r->conn, MHD_HEADER_KIND, scan_header, &h);
    if (h.bad || hidden_nul(r, &h)) {
        attune_fail(err, errlen, ATTUNE_EINVAL, "NUL or control byte in a request header");
        return 400;
    }
    if (h.hosts > 1) {
        attune_fail(err, errlen, ATTUNE_EINVAL, "more than one Host header");
        return 400;
    }
    if (h.cl_differ) {
        attune_fail(err, errlen, ATTUNE_EINVAL, "Content-Length headers that differ");
        return 400;
    }
    if (h.bad_name) {
        attune_fail(err, errlen, ATTUNE_EINVAL,
                    "a header name that is not a token (white space before its colon?)");
        return 400;
    }
    /* both framings: which one a proxy in front used is unknowable
     * (request smuggling, RFC 9112 6.3) */
    if (h.te > 0 && h.cl != NULL) {
        attune_fail(err, errlen, ATTUNE_EINVAL, "both Content-Length and Transfer-Encoding");
        return 400;
    }
    if (h.ctypes > 1 || h.auths > 1) {
        attune_fail(err, errlen, ATTUNE_EINVAL, "more than one %s header",
                    h.ctypes > 1 ? "Content-Type" : "Authorization");
        return 400;
    }
    return 0;
}

int http_content_type_json(const char *ct)
{
    static const char want[] = "application/json";
    size_t n = sizeof want - 1;
    if (ct == NULL || strncasecmp(ct, want, n) != 0)
        return 0;
    const char *p = ct + n;
    while (*p == ' ' || *p == '\t')
        p++;
    return *p == 0 || *p == ';'; /* parameters (charset=utf-8) may follow */
}

int http_parse_real(const char *s, double *out)
{
    /* [0-9]+ ( '.' [0-9]* )? ( [eE] [+-]? [0-9]+ )? | '.' [0-9]+ (...)?:
     * what a person or a client library writes; strtod alone would also
     * take spaces, a sign, hex floats, inf and nan */
    const char *p = s;
    int digits = 0;
    while (*p >= '0' && *p <= '9') {
        p++;
        digits++;
    }
    if (*p == '.') {
        p++;
        while (*p >= '0' && *p <= '9') {
            p++;
            digits++;
        }
    }
    if (digits == 0)
        return ATTUNE_EINVAL;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-')
            p++;
        if (*p < '0' || *p > '9')
            return ATTUNE_EINVAL;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    if (*p != 0)
        return ATTUNE_EINVAL;
    errno = 0;
    double v = strtod(s, NULL);
    if (errno == ERANGE || !isfinite(v))
        return ATTUNE_EINVAL;
    *out = v;
    return 0;
}
