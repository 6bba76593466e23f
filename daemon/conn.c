/* conn.c -- per-connection request deadlines and raw-URI facts (conn.h). */
#include "conn.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>

/* Watchdog period: a connection outlives its deadline by at most this. */
#define CONN_TICK_MS 200

/* conn_state.due while a request is being answered: no deadline */
#define DUE_NONE (-1LL)

typedef struct conn_state {
    struct conn_state *prev, *next;
    conn_guard *g;
    MHD_socket fd;
    /* the deadline of the phase the connection is in, in ms of now_ms()
     * (receiving headers, a body, sending a response with a deadline), or
     * DUE_NONE while it is answered: one atomic word, written by the thread
     * serving the connection and read by the watchdog, so a request's three
     * phase changes take no lock (a lock shared by every HTTP thread was
     * three round trips per lookup) */
    atomic_llong due;
    int shut;             /* shut down by the watchdog already (under mu) */
    const char *uri;
    size_t uri_len;
    int uri_nul;
    size_t raw_len;       /* > CONN_RAW_URI_MAX: not copied */
    char raw[CONN_RAW_URI_MAX];
} conn_state;

struct conn_guard {
    pthread_mutex_t mu;   /* the list, and every state's shut */
    pthread_cond_t cv;
    pthread_t th;
    conn_state head;      /* sentinel of a circular list */
    int stop;
    int header_s, body_s, idle_s;
};

static atomic_llong kills;
static atomic_llong open_conns; /* STARTED minus CLOSED notifications */

/* Milliseconds of the coarse monotonic clock (a few ms resolution, read
 * without a timer: deadlines are seconds, checked every CONN_TICK_MS). */
static long long now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void set_due(conn_state *s, double seconds)
{
    atomic_store_explicit(&s->due, now_ms() + (long long)(seconds * 1000),
                          memory_order_relaxed);
}

static void *watchdog(void *arg)
{
    conn_guard *g = arg;
    prctl(PR_SET_NAME, "attuned-conn", 0, 0, 0);
    pthread_mutex_lock(&g->mu);
    while (!g->stop) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += CONN_TICK_MS * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&g->cv, &g->mu, &until);
        long long t = now_ms();
        /* shutdown(), not close(): the socket stays libmicrohttpd's, which
         * sees end-of-file and closes it itself. The state is unlinked (in
         * conn_notify, under mu) before libmicrohttpd closes the fd, so a
         * listed fd is never a reused number. */
        for (conn_state *s = g->head.next; s != &g->head; s = s->next) {
            long long due = atomic_load_explicit(&s->due, memory_order_relaxed);
            if (due != DUE_NONE && !s->shut && t > due) {
                shutdown(s->fd, SHUT_RDWR);
                s->shut = 1;
                atomic_fetch_add(&kills, 1);
            }
        }
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

conn_guard *conn_guard_start(int header_s, int body_s, int idle_s)
{
    conn_guard *g = calloc(1, sizeof *g);
    if (g == NULL)
        return NULL;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, &ca);
    pthread_condattr_destroy(&ca);
    g->head.next = g->head.prev = &g->head;
    g->header_s = header_s;
    g->body_s = body_s;
    g->idle_s = idle_s;
    if (pthread_create(&g->th, NULL, watchdog, g) != 0) {
        pthread_cond_destroy(&g->cv);
        pthread_mutex_destroy(&g->mu);
        free(g);
        return NULL;
    }
    return g;
}

void conn_guard_stop(conn_guard *g)
{
    if (g == NULL)
        return;
    pthread_mutex_lock(&g->mu);
    g->stop = 1;
    pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->mu);
    pthread_join(g->th, NULL);
    /* MHD_stop_daemon closed every connection: the list is empty; free
     * what a missed CLOSED notification might have left */
    while (g->head.next != &g->head) {
        conn_state *s = g->head.next;
        g->head.next = s->next;
        free(s);
    }
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

void conn_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                 enum MHD_ConnectionNotificationCode code)
{
    conn_guard *g = cls;
    /* counted before anything can fail: libmicrohttpd sends one CLOSED for
     * every STARTED, whether or not the connection got a state */
    if (code == MHD_CONNECTION_NOTIFY_STARTED)
        atomic_fetch_add(&open_conns, 1);
    else if (code == MHD_CONNECTION_NOTIFY_CLOSED)
        atomic_fetch_sub(&open_conns, 1);
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        conn_state *s = calloc(1, sizeof *s);
        if (s == NULL)
            return; /* no deadline for this one: degrades, never fails */
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (ci == NULL) {
            free(s);
            return;
        }
        s->g = g;
        s->fd = ci->connect_fd;
        set_due(s, g->header_s);
        pthread_mutex_lock(&g->mu);
        s->next = g->head.next;
        s->prev = &g->head;
        g->head.next->prev = s;
        g->head.next = s;
        pthread_mutex_unlock(&g->mu);
        *socket_context = s;
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        conn_state *s = *socket_context;
        if (s == NULL)
            return;
        pthread_mutex_lock(&g->mu);
        s->prev->next = s->next;
        s->next->prev = s->prev;
        pthread_mutex_unlock(&g->mu);
        free(s);
        *socket_context = NULL;
    }
}

static conn_state *state_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci != NULL ? ci->socket_context : NULL;
}

void *conn_uri_seen(void *cls, const char *uri, struct MHD_Connection *c)
{
    (void)cls;
    conn_state *s = state_of(c);
    if (s != NULL) {
        /* only the thread serving c touches these two fields */
        s->uri = uri;
        s->uri_len = strlen(uri);
        s->uri_nul = strstr(uri, "%00") != NULL;
        s->raw_len = s->uri_len;
        if (s->raw_len <= CONN_RAW_URI_MAX)
            memcpy(s->raw, uri, s->raw_len);
    }
    return NULL;
}

void conn_request_begin(struct MHD_Connection *c, conn_request_info *info)
{
    memset(info, 0, sizeof *info);
    conn_state *s = state_of(c);
    if (s == NULL)
        return;
    info->uri = s->uri;
    info->uri_len = s->uri_len;
    info->uri_nul = s->uri_nul;
    if (s->uri != NULL && s->raw_len <= CONN_RAW_URI_MAX) {
        info->raw = s->raw;
        info->raw_len = s->raw_len;
    }
    s->uri = NULL;
    s->uri_len = 0;
    s->uri_nul = 0;
    set_due(s, s->g->body_s);
}

void conn_request_busy(struct MHD_Connection *c)
{
    conn_state *s = state_of(c);
    if (s == NULL)
        return;
    atomic_store_explicit(&s->due, DUE_NONE, memory_order_relaxed);
}

void conn_send_deadline(struct MHD_Connection *c, double seconds)
{
    conn_state *s = state_of(c);
    if (s == NULL)
        return;
    set_due(s, seconds);
}

void conn_request_done(struct MHD_Connection *c)
{
    conn_state *s = state_of(c);
    if (s == NULL)
        return;
    set_due(s, s->g->idle_s);
}

long long conn_deadline_kills(void)
{
    return atomic_load(&kills);
}

long long conn_open_count(void)
{
    return atomic_load(&open_conns);
}
