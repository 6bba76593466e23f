/* lookup_load.c -- GET one URL over and over from N connections and print
 * the latency distribution: the load side of tests/reliability/.
 *
 *   lookup_load -p PORT -u PATH [-c CONNS] [-t SECONDS] [-r RATE] [-n] [-s SRCADDR]
 *
 * One thread per connection, blocking sockets, HTTP/1.1 keep-alive where
 * the server keeps the connection (a "Connection: close" answer: the next
 * request opens a new one, as wrk does); -n: a new connection per request. -r: requests
 * per second per connection at most (0: as fast as answered). A request
 * is an error when the connection fails or the status is not 200; the
 * connection is then reopened. Prints one JSON line: requests, errors,
 * requests/s, latency p50/p99/p999/max in ms. C, not Python: on a 2-core
 * machine the load generator's own overhead must stay far below the
 * milliseconds being measured. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int port, conns = 1, seconds = 5, fresh;
static double rate;
static const char *path = "/v1/health", *src;
static double t_end;

typedef struct worker_out {
    double *lat;
    size_t n, cap;
    long errors;
} worker_out;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int dial(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    if (src != NULL) {
        inet_pton(AF_INET, src, &a.sin_addr);
        if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0) {
            close(fd);
            return -1;
        }
    }
    a.sin_port = htons((uint16_t)port);
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* One request/response on fd; the status, or -1 when the connection
 * failed (closed, reset, timed out, unparsable). *closing: the server said
 * Connection: close (the next request needs a new connection). */
static int exchange(int fd, const char *req, size_t reqlen, int *closing)
{
    char buf[16384];
    size_t off = 0;
    if (send(fd, req, reqlen, MSG_NOSIGNAL) != (ssize_t)reqlen)
        return -1;
    for (;;) {
        ssize_t k = recv(fd, buf + off, sizeof buf - 1 - off, 0);
        if (k <= 0)
            return -1;
        off += (size_t)k;
        buf[off] = 0;
        char *end = strstr(buf, "\r\n\r\n");
        if (end == NULL) {
            if (off >= sizeof buf - 1)
                return -1;
            continue;
        }
        int status = 0;
        if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1)
            return -1;
        char *cl = strcasestr(buf, "\r\ncontent-length:");
        if (cl == NULL || cl > end)
            return -1;
        char *conn = strcasestr(buf, "\r\nconnection: close");
        *closing = conn != NULL && conn < end;
        size_t body = strtoul(cl + 17, NULL, 10);
        size_t have = off - (size_t)(end + 4 - buf);
        while (have < body) {
            k = recv(fd, buf, sizeof buf, 0);
            if (k <= 0)
                return -1;
            have += (size_t)k;
        }
        return status;
    }
}

static void record(worker_out *o, double ms)
{
    if (o->n == o->cap) {
        o->cap = o->cap ? o->cap * 2 : 4096;
        o->lat = realloc(o->lat, o->cap * sizeof *o->lat);
        if (o->lat == NULL)
            exit(2);
    }
    o->lat[o->n++] = ms;
}

static void *run(void *arg)
{
    worker_out *o = arg;
    char req[2048];
    int reqlen = snprintf(req, sizeof req,
                          "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%s\r\n", path, port,
                          fresh ? "Connection: close\r\n" : "");
    int fd = -1;
    double next = now_s();
    while (now_s() < t_end) {
        if (rate > 0) {
            double w = next - now_s();
            if (w > 0) {
                struct timespec ts = {(time_t)w, (long)((w - (double)(time_t)w) * 1e9)};
                nanosleep(&ts, NULL);
            }
            next += 1.0 / rate;
        }
        double t0 = now_s();
        if (fd < 0)
            fd = dial();
        int closing = 0;
        int st = fd >= 0 ? exchange(fd, req, (size_t)reqlen, &closing) : -1;
        double ms = (now_s() - t0) * 1e3;
        if (st != 200) {
            o->errors++;
            if (fd >= 0)
                close(fd);
            fd = -1;
            continue;
        }
        record(o, ms);
        if (fresh || closing) {
            close(fd);
            fd = -1;
        }
    }
    if (fd >= 0)
        close(fd);
    return NULL;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int ch;
    while ((ch = getopt(argc, argv, "p:u:c:t:r:ns:")) != -1) {
        switch (ch) {
        case 'p': port = atoi(optarg); break;
        case 'u': path = optarg; break;
        case 'c': conns = atoi(optarg); break;
        case 't': seconds = atoi(optarg); break;
        case 'r': rate = atof(optarg); break;
        case 'n': fresh = 1; break;
        case 's': src = optarg; break;
        default:
            fprintf(stderr, "usage: lookup_load -p PORT -u PATH [-c CONNS] [-t S] [-r RATE] "
                            "[-n] [-s SRCADDR]\n");
            return 2;
        }
    }
    if (port <= 0 || conns < 1 || conns > 4096 || seconds < 1) {
        fprintf(stderr, "lookup_load: bad arguments\n");
        return 2;
    }
    pthread_t *th = calloc((size_t)conns, sizeof *th);
    worker_out *out = calloc((size_t)conns, sizeof *out);
    if (th == NULL || out == NULL)
        return 2;
    double t0 = now_s();
    t_end = t0 + seconds;
    for (int i = 0; i < conns; i++)
        if (pthread_create(&th[i], NULL, run, &out[i]) != 0)
            return 2;
    size_t total = 0;
    long errors = 0;
    for (int i = 0; i < conns; i++) {
        pthread_join(th[i], NULL);
        total += out[i].n;
        errors += out[i].errors;
    }
    double el = now_s() - t0;
    double *all = malloc((total ? total : 1) * sizeof *all);
    if (all == NULL)
        return 2;
    size_t k = 0;
    for (int i = 0; i < conns; i++) {
        memcpy(all + k, out[i].lat, out[i].n * sizeof *all);
        k += out[i].n;
        free(out[i].lat);
    }
    qsort(all, total, sizeof *all, cmp);
#define PCT(p) (total ? all[(size_t)((double)(total - 1) * (p))] : 0.0)
    printf("{\"requests\":%zu,\"errors\":%ld,\"rps\":%.0f,\"p50_ms\":%.3f,\"p99_ms\":%.3f,"
           "\"p999_ms\":%.3f,\"max_ms\":%.3f}\n",
           total, errors, (double)total / el, PCT(0.5), PCT(0.99), PCT(0.999),
           total ? all[total - 1] : 0.0);
    free(all);
    free(th);
    free(out);
    return 0;
}
