/* conn.h -- per-connection state: the deadline for receiving a request,
 * and what libmicrohttpd's callbacks saw of the raw request (a "%00" in
 * the URI, the URI's length) before the access handler runs.
 *
 * libmicrohttpd's own timeout is an idle timeout: a client that sends one
 * header byte every few seconds keeps its connection for ever. Here every
 * connection has a deadline for the request it is receiving (headers,
 * then body); a watchdog thread shuts down the socket of a connection past
 * its deadline, which makes libmicrohttpd close it on its next read.
 * While a request is being answered (handler, deferred work, response
 * being sent) there is no deadline: the idle timeout covers a reader that
 * stops reading; a response that may take long to send (a streamed
 * export) sets its own (conn_send_deadline), which a reader that keeps
 * reading slowly cannot outlast. */
#ifndef ATTUNED_CONN_H
#define ATTUNED_CONN_H

#include <microhttpd.h>
#include <stddef.h>

typedef struct conn_guard conn_guard;

/* Start the watchdog. header_s: seconds a new connection has to deliver
 * its first request's headers; body_s: seconds from the headers to the end
 * of the body; idle_s: seconds a kept-alive connection has, after a
 * response, to deliver the next request's headers. NULL on ENOMEM or when
 * the thread cannot start. */
conn_guard *conn_guard_start(int header_s, int body_s, int idle_s);

/* Join the watchdog and free g; call after MHD_stop_daemon (every
 * connection closed). NULL is a no-op. */
void conn_guard_stop(conn_guard *g);

/* MHD_OPTION_NOTIFY_CONNECTION callback (cls: the conn_guard). */
void conn_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                 enum MHD_ConnectionNotificationCode code);

/* The longest raw URI kept whole (conn_request_info.raw). */
#define CONN_RAW_URI_MAX 512

/* MHD_OPTION_URI_LOG_CALLBACK callback (cls: the conn_guard): notes the
 * raw URI's length and whether it escapes a NUL byte, and copies it when
 * it is at most CONN_RAW_URI_MAX bytes. Returns NULL (no request state
 * yet). */
void *conn_uri_seen(void *cls, const char *uri, struct MHD_Connection *c);

/* What the callbacks saw of the current request's raw URI. */
typedef struct conn_request_info {
    const char *uri;  /* the raw URI in libmicrohttpd's read buffer */
    size_t uri_len;   /* strlen of the raw URI (path and query) */
    int uri_nul;      /* the URI holds "%00" */
    /* a copy of the raw URI as the client sent it (path and query, not
     * unescaped: libmicrohttpd parses the query in place, so uri above no
     * longer reads so by the access handler), valid until the connection's
     * next request; NULL when longer than CONN_RAW_URI_MAX or no state */
    const char *raw;
    size_t raw_len;
} conn_request_info;

/* The access handler's first call for a request: the headers are in, the
 * body deadline starts. Fills info (zeros when c has no state). */
void conn_request_begin(struct MHD_Connection *c, conn_request_info *info);

/* The request is being answered (response queued or work deferred): no
 * deadline until it completes. */
void conn_request_busy(struct MHD_Connection *c);

/* The response of c is being sent under a deadline, seconds from now:
 * past it the watchdog shuts the connection down (libmicrohttpd then
 * closes it and frees the response). Called again, it moves the deadline
 * (a streamed export extends it as bytes go out: a minimum rate); the
 * request's completion lifts it. From the thread serving c. */
void conn_send_deadline(struct MHD_Connection *c, double seconds);

/* The request completed (MHD's completion callback): the connection may
 * carry another request, whose headers are due within idle_s. */
void conn_request_done(struct MHD_Connection *c);

/* Connections shut down for a missed deadline since start (metrics). */
long long conn_deadline_kills(void);

/* Connections open now (accepted and not yet closed by libmicrohttpd;
 * a connection counts against --per-ip until it is closed here). */
long long conn_open_count(void);

#endif
