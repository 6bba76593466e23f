/* mhd_bare.c -- the floor for bench/http_load.sh: libmicrohttpd in the same
 * mode as attuned (internal polling thread, epoll, thread pool) answering
 * every request with one fixed JSON body, no parsing, no lookup. attuned's
 * lookup throughput is reported relative to this.
 *
 * It answers as attuned does: on the access handler's second call, once
 * the request is complete. A response queued on the first call (before
 * libmicrohttpd knows the request has no body) makes it close the
 * connection after the answer: every request then paid a new TCP
 * connection, and attuned looked 3.79x faster than this "floor" (issue 29
 * item 6). http_load.sh checks that the connection stays open.
 *
 *   cc -O2 -o mhd_bare mhd_bare.c $(pkg-config --cflags --libs libmicrohttpd)
 *   ./mhd_bare PORT [THREADS]        (stops on SIGINT/SIGTERM) */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <microhttpd.h>

/* The size and shape of attuned's answer for http_load.sh's shape (404
 * bytes: its fields since time_us_kernel, doubles in their shortest
 * round-trip form; the body was 313 bytes before 2026-12-03). */
static const char body[] =
    "{\"device\":\"CPU-924137ba40e768d8\",\"shape\":\"b1.hq8.hkv1.sq16.skv128.d64.f32.nc\","
    "\"tactic\":\"folded/acc=f32/pad=8\",\"variant\":\"folded\",\"pad\":8,"
    "\"source\":\"measured\",\"stale\":false,\"stack\":\"cb84c04617e36dd4\","
    "\"time_us\":295.90383275349933,\"time_us_kernel\":295.90383275349933,"
    "\"time_us_copies\":295.90383275349933,\"rel_err\":2.4795911800514253e-07,"
    "\"max_abs_err\":2.384852963999151e-07,\"measured_stack\":\"cb84c04617e36dd4\"}";

static struct MHD_Response *resp;

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload, size_t *upload_size, void **req_cls)
{
    static int first; /* its address marks a request whose first call was seen */
    (void)cls; (void)url; (void)method; (void)version; (void)upload;
    if (*req_cls == NULL) {
        *req_cls = &first;
        return MHD_YES;
    }
    if (*upload_size != 0) { /* a body: take it, answer at the end */
        *upload_size = 0;
        return MHD_YES;
    }
    return MHD_queue_response(c, 200, resp);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: mhd_bare PORT [THREADS]\n");
        return 2;
    }
    int port = atoi(argv[1]);
    unsigned threads = argc > 2 ? (unsigned)atoi(argv[2]) : 4;
    /* block before MHD starts its threads (they inherit the mask); main
     * takes the signal with sigwait */
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGINT);
    sigaddset(&s, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &s, NULL);
    resp = MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(resp, "Content-Type", "application/json");
    unsigned poll = MHD_is_feature_supported(MHD_FEATURE_EPOLL) == MHD_YES ? MHD_USE_EPOLL
                                                                            : MHD_USE_POLL;
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | poll, (uint16_t)port, NULL, NULL, on_request, NULL,
        MHD_OPTION_THREAD_POOL_SIZE, threads, MHD_OPTION_CONNECTION_LIMIT, 2048u,
        MHD_OPTION_CONNECTION_TIMEOUT, 30u, MHD_OPTION_END);
    if (d == NULL) {
        fprintf(stderr, "mhd_bare: cannot listen on port %d\n", port);
        return 1;
    }
    int sig;
    sigwait(&s, &sig);
    MHD_stop_daemon(d);
    MHD_destroy_response(resp);
    return 0;
}
