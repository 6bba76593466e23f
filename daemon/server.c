/* server.c -- the libmicrohttpd daemon: bind, thread pool, limits, stop. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "attuned.h"
#include "conn.h"
#include "log.h"
#include "routes.h"
#include "tactic_cache.h"

/* MHD's own diagnostics (malformed requests it rejects itself, socket
 * errors) become log events. */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    log_event(LOGL_DEBUG, "mhd", "message=%s", LOG_Q(msg));
}

static struct MHD_Daemon *start_with(attuned *d, unsigned poll_flag,
                                     const struct sockaddr *sa)
{
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | poll_flag |
                     MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    if (sa->sa_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    return MHD_start_daemon(
        flags, (uint16_t)d->cfg.port, NULL, NULL, routes_access, d,
        /* first: libmicrohttpd reads the options in order, and warns on
         * stderr (its own logger) when the logger comes later */
        MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
        MHD_OPTION_SOCK_ADDR, sa,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned int)d->cfg.threads,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned int)d->cfg.max_connections,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)d->cfg.timeout_s,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned int)d->cfg.per_ip,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)ATTUNED_CONN_MEMORY,
        MHD_OPTION_NOTIFY_CONNECTION, conn_notify, d->guard,
        MHD_OPTION_URI_LOG_CALLBACK, conn_uri_seen, d->guard,
        MHD_OPTION_NOTIFY_COMPLETED, routes_completed, d,
        MHD_OPTION_END);
}

/* The address --bind and --port name, in a4 or a6; *sa points at it and
 * *len is its size. 0 or ATTUNE_EINVAL (not an address). */
static int bind_addr(const attuned *d, struct sockaddr_in *a4, struct sockaddr_in6 *a6,
                     const struct sockaddr **sa, socklen_t *len, char *err, size_t errlen)
{
    memset(a4, 0, sizeof *a4);
    memset(a6, 0, sizeof *a6);
    if (inet_pton(AF_INET, d->cfg.bind, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)d->cfg.port);
        *sa = (const struct sockaddr *)a4;
        *len = sizeof *a4;
        return 0;
    }
    if (inet_pton(AF_INET6, d->cfg.bind, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)d->cfg.port);
        *sa = (const struct sockaddr *)a6;
        *len = sizeof *a6;
        return 0;
    }
    return attune_fail(err, errlen, ATTUNE_EINVAL, "--bind %s is not an IPv4 or IPv6 address",
                       d->cfg.bind);
}

int server_probe(const attuned *d, char *err, size_t errlen)
{
    struct sockaddr_in a4;
    struct sockaddr_in6 a6;
    const struct sockaddr *sa;
    socklen_t len;
    int rc = bind_addr(d, &a4, &a6, &sa, &len, err, errlen);
    if (rc != 0 || d->cfg.port == 0)
        return rc;
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return attune_fail(err, errlen, ATTUNE_EIO, "cannot open a socket: %s", strerror(errno));
    const int one = 1;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one); /* as MHD: TIME_WAIT */
    if (sa->sa_family == AF_INET6)
        (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (bind(fd, sa, len) != 0) {
        int e = errno;
        close(fd);
        return attune_fail(err, errlen, ATTUNE_EIO, "cannot listen on %s port %d: %s%s",
                           d->cfg.bind, d->cfg.port, strerror(e),
                           e == EADDRINUSE ? " (another attuned? --port N, or make run PORT=N, "
                                             "picks another)" : "");
    }
    close(fd);
    return 0;
}

int server_start(attuned *d, char *err, size_t errlen)
{
    struct sockaddr_in a4;
    struct sockaddr_in6 a6;
    const struct sockaddr *sa;
    socklen_t len;
    int rc = bind_addr(d, &a4, &a6, &sa, &len, err, errlen);
    if (rc != 0)
        return rc;
    routes_init();
    /* one descriptor per connection: make room for the connection limit
     * (the soft limit is often 1024, the hard one far higher) */
    struct rlimit rl;
    rlim_t want = (rlim_t)d->cfg.max_connections + 64;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < want) {
        rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    d->guard = conn_guard_start(d->cfg.request_timeout_s, ATTUNED_BODY_TIMEOUT_S,
                                d->cfg.timeout_s);
    if (d->guard == NULL)
        return attune_fail(err, errlen, ATTUNE_ENOMEM, "cannot start the connection watchdog");
    if (tactic_cache_start(d) != 0) {
        conn_guard_stop(d->guard);
        d->guard = NULL;
        return attune_fail(err, errlen, ATTUNE_ENOMEM, "out of memory");
    }
    const char *mode = "epoll";
    d->mhd = NULL;
    if (MHD_is_feature_supported(MHD_FEATURE_EPOLL) == MHD_YES)
        d->mhd = start_with(d, MHD_USE_EPOLL, sa);
    if (d->mhd == NULL) {
        mode = "poll";
        d->mhd = start_with(d, MHD_USE_POLL, sa);
    }
    if (d->mhd == NULL) {
        tactic_cache_stop(d);
        conn_guard_stop(d->guard);
        d->guard = NULL;
        return attune_fail(err, errlen, ATTUNE_EIO,
                           "cannot listen on %s port %d (in use? permission?)", d->cfg.bind,
                           d->cfg.port);
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d->mhd, MHD_DAEMON_INFO_BIND_PORT);
    d->bound_port = info != NULL && info->port != 0 ? (int)info->port : d->cfg.port;
    log_event(LOGL_INFO, "http_started", "bind=%s port=%d mode=%s threads=%d "
              "max_connections=%d per_ip=%d timeout_s=%d request_timeout_s=%d", d->cfg.bind,
              d->bound_port, mode, d->cfg.threads, d->cfg.max_connections, d->cfg.per_ip,
              d->cfg.timeout_s, d->cfg.request_timeout_s);
    return 0;
}

/* The listen socket MHD_quiesce_daemon hands back: ours to close, but
 * only after MHD_stop_daemon (a pool thread may still look at it). */
static MHD_socket quiesced = MHD_INVALID_SOCKET;

void server_quiesce(attuned *d)
{
    if (d->mhd != NULL && quiesced == MHD_INVALID_SOCKET)
        quiesced = MHD_quiesce_daemon(d->mhd);
}

void server_stop(attuned *d)
{
    if (d->mhd != NULL) {
        MHD_stop_daemon(d->mhd);
        d->mhd = NULL;
    }
    conn_guard_stop(d->guard); /* after MHD: every connection is closed */
    d->guard = NULL;
    tactic_cache_stop(d); /* after MHD: no request thread uses it */
    if (quiesced != MHD_INVALID_SOCKET) {
        close(quiesced);
        quiesced = MHD_INVALID_SOCKET;
    }
}
