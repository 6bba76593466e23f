/* test_client.c -- the C client library against a scripted HTTP server.
 *
 * A thread of this test plays attuned on a loopback port: it records each
 * request line and answers by the device asked for (a measured answer, a
 * 404, a 500, a malformed body), so parsing, caching, escaping, the retry
 * interval and every fallback are checked without a daemon. The real
 * daemon is exercised by tests/it_daemon.py.
 *
 * The library is loaded with dlopen from $ATTUNE_CLIENT_LIB, as a runtime
 * might load it: a build without libcurl has no libattune_client, and the
 * test then skips (77) instead of failing to link. */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../client/attune.h"
#include "test.h"

/* The API through dlsym; the macros keep the calls below as a runtime
 * would write them. */
static struct {
    attune_client *(*client_new)(const char *, long);
    void (*client_free)(attune_client *);
    int (*set_cache)(attune_client *, int, long);
    void (*set_retry)(attune_client *, long);
    int (*lookup)(attune_client *, const attune_shape_q *, double, attune_answer *);
    int (*request)(attune_client *, const char *, const char *, const char *, long *,
                   char **);
    void (*free_)(void *);
    void (*default_answer)(attune_answer *, const char *);
    const char *(*client_url)(const attune_client *);
    int (*lookup_in)(attune_client *, const attune_shape_q *, const char *, double,
                     attune_answer *);
} api;
#define attune_client_new (*api.client_new)
#define attune_client_free (*api.client_free)
#define attune_client_set_cache (*api.set_cache)
#define attune_client_set_retry (*api.set_retry)
#define attune_lookup (*api.lookup)
#define attune_request (*api.request)
#define attune_free (*api.free_)
#define attune_default_answer (*api.default_answer)
#define attune_client_url (*api.client_url)
#define attune_lookup_in (*api.lookup_in)

/* Load the library; 0 or -1 (message printed). */
static int load_api(void)
{
    const char *path = getenv("ATTUNE_CLIENT_LIB");
    if (path == NULL || *path == 0)
        return -1;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
        return -1;
    }
    /* POSIX: a data pointer from dlsym converts to a function pointer */
    *(void **)&api.client_new = dlsym(h, "attune_client_new");
    *(void **)&api.client_free = dlsym(h, "attune_client_free");
    *(void **)&api.set_cache = dlsym(h, "attune_client_set_cache");
    *(void **)&api.set_retry = dlsym(h, "attune_client_set_retry");
    *(void **)&api.lookup = dlsym(h, "attune_lookup");
    *(void **)&api.request = dlsym(h, "attune_request");
    *(void **)&api.free_ = dlsym(h, "attune_free");
    *(void **)&api.default_answer = dlsym(h, "attune_default_answer");
    *(void **)&api.client_url = dlsym(h, "attune_client_url");
    *(void **)&api.lookup_in = dlsym(h, "attune_lookup_in");
    if (!api.client_new || !api.client_free || !api.set_cache || !api.set_retry ||
        !api.lookup || !api.request || !api.free_ || !api.default_answer || !api.client_url ||
        !api.lookup_in) {
        fprintf(stderr, "%s lacks part of the attune.h API\n", path);
        exit(1);
    }
    return 0;
}

/* ---- the scripted server */

static int srv_fd = -1;
static int srv_port;
static volatile int srv_stop;
static int srv_count;               /* requests answered */
static char srv_last[1024];         /* last request line */
static pthread_mutex_t srv_mu = PTHREAD_MUTEX_INITIALIZER;
/* GET /v1/devices: what the daemon reports (srv_mu); NULL: a 500 */
static const char *srv_devices =
    "{\"devices\":[{\"id\":\"CPU-00\",\"kind\":\"cpu\",\"local\":true}]}";

static const char answer_ok[] =
    "{\"device\":\"CPU-00\",\"shape\":\"b1.hq8.hkv1.sq50.skv1018.d256.f16.nc\","
    "\"tactic\":\"split/acc=f32/pad=16\",\"variant\":\"split\",\"pad\":16,"
    "\"source\":\"measured\",\"stale\":true,\"time_us\":12.5,\"rel_err\":1e-06,"
    "\"max_abs_err\":2e-06,\"stack\":\"0123456789abcdef\","
    "\"measured_stack\":\"fedcba9876543210\"}";

static const char answer_nearest[] =
    "{\"device\":\"CPU-00\",\"shape\":\"b4.hq8.hkv1.sq50.skv1018.d256.f16.nc\","
    "\"tactic\":\"folded/acc=f32/pad=8\",\"variant\":\"folded\",\"pad\":8,"
    "\"source\":\"nearest\",\"stale\":false,\"stack\":\"0123456789abcdef\","
    "\"time_us\":7.25,\"time_us_copies\":null,\"rel_err\":3e-06,\"max_abs_err\":4e-06,"
    "\"measured_stack\":\"0123456789abcdef\","
    "\"from_shape\":\"b1.hq8.hkv1.sq50.skv1018.d256.f16.nc\",\"distance\":2.0}";

static const char answer_predicted[] =
    "{\"device\":\"CPU-00\",\"shape\":\"b3.hq8.hkv1.sq50.skv1018.d256.f16.nc\","
    "\"tactic\":\"folded/acc=f32/pad=8\",\"variant\":\"folded\",\"pad\":8,"
    "\"source\":\"predicted\",\"stale\":false,\"stack\":\"0123456789abcdef\","
    "\"time_us\":9.5,\"predicted_us\":9.5,\"rel_err\":3e-06,\"max_abs_err\":null,"
    "\"from_shape\":\"b1.hq8.hkv1.sq50.skv1018.d256.f16.nc\",\"distance\":0.79,"
    "\"from_shapes\":\"b1.hq8.hkv1.sq50.skv1018.d256.f16.nc\",\"tuning\":\"queued\"}";

static void reply(int fd, int status, const char *body)
{
    char head[256];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %d X\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                     status, strlen(body));
    if (write(fd, head, (size_t)n) < 0 || write(fd, body, strlen(body)) < 0)
        perror("write");
}

static void *server_main(void *arg)
{
    (void)arg;
    while (!srv_stop) {
        int fd = accept(srv_fd, NULL, NULL);
        if (fd < 0)
            continue;
        char buf[4096];
        size_t len = 0;
        while (len < sizeof buf - 1) {
            ssize_t r = read(fd, buf + len, sizeof buf - 1 - len);
            if (r <= 0)
                break;
            len += (size_t)r;
            buf[len] = 0;
            if (strstr(buf, "\r\n\r\n") != NULL)
                break;
        }
        buf[len] = 0;
        if (srv_stop) {
            close(fd);
            break;
        }
        pthread_mutex_lock(&srv_mu);
        srv_count++;
        size_t line = strcspn(buf, "\r\n");
        snprintf(srv_last, sizeof srv_last, "%.*s", (int)line, buf);
        pthread_mutex_unlock(&srv_mu);
        if (strstr(buf, "device=gone") != NULL)
            reply(fd, 404, "{\"error\":\"unknown device 'gone'\"}");
        else if (strstr(buf, "device=broken") != NULL)
            reply(fd, 500, "{\"error\":\"database is on fire\"}");
        else if (strstr(buf, "device=near") != NULL)
            reply(fd, 200, answer_nearest);
        else if (strstr(buf, "device=pred") != NULL)
            reply(fd, 200, answer_predicted);
        else if (strstr(buf, "device=junk") != NULL)
            reply(fd, 200, "this is not json");
        else if (strncmp(buf, "GET /v1/health", 14) == 0)
            reply(fd, 200, "{\"status\":\"ok\"}");
        else if (strncmp(buf, "GET /v1/devices", 15) == 0) {
            pthread_mutex_lock(&srv_mu);
            const char *devs = srv_devices;
            pthread_mutex_unlock(&srv_mu);
            if (devs != NULL)
                reply(fd, 200, devs);
            else
                reply(fd, 500, "{\"error\":\"database is on fire\"}");
        }
        else
            reply(fd, 200, answer_ok);
        close(fd);
    }
    return NULL;
}

static pthread_t server_start(void)
{
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    srv_fd = socket(AF_INET, SOCK_STREAM, 0);
    socklen_t sl = sizeof sa;
    if (srv_fd < 0 || bind(srv_fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        listen(srv_fd, 16) != 0 || getsockname(srv_fd, (struct sockaddr *)&sa, &sl) != 0) {
        perror("server");
        exit(2);
    }
    srv_port = ntohs(sa.sin_port);
    pthread_t th;
    if (pthread_create(&th, NULL, server_main, NULL) != 0)
        exit(2);
    return th;
}

static void server_stop(pthread_t th)
{
    srv_stop = 1;
    /* wake accept() with one last connection */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)srv_port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
        perror("connect");
    close(fd);
    pthread_join(th, NULL);
    close(srv_fd);
}

static int requests_seen(char *last, size_t len)
{
    pthread_mutex_lock(&srv_mu);
    int n = srv_count;
    if (last != NULL)
        snprintf(last, len, "%s", srv_last);
    pthread_mutex_unlock(&srv_mu);
    return n;
}

static char server_url[64];

static attune_shape_q query(const char *device)
{
    attune_shape_q q = {.device = device, .b = 1, .hq = 8, .hkv = 1, .sq = 50, .skv = 1018,
                        .d = 256, .dtype = "f16", .causal = 0};
    return q;
}

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- tests */

static void lookup_should_parse_the_daemon_answer(void)
{
    attune_client *c = attune_client_new(server_url, 2000);
    attune_shape_q q = query("cpu");
    attune_answer a;
    char last[1024];
    CHECK(c != NULL);
    CHECK_EQ_INT(attune_lookup(c, &q, 0, &a), ATTUNE_CLIENT_OK);
    CHECK_STR(a.tactic, "split/acc=f32/pad=16");
    CHECK_STR(a.variant, "split");
    CHECK_EQ_INT(a.pad, 16);
    CHECK_STR(a.source, "measured");
    CHECK_EQ_INT(a.stale, 1);
    CHECK_NEAR(a.time_us, 12.5, 1e-12);
    CHECK_NEAR(a.rel_err, 1e-6, 1e-18);
    CHECK_STR(a.device, "CPU-00");
    CHECK_STR(a.error, "");
    CHECK_STR(a.stack, "0123456789abcdef");
    CHECK_STR(a.measured_stack, "fedcba9876543210");
    CHECK_STR(a.from_shape, "b1.hq8.hkv1.sq50.skv1018.d256.f16.nc"); /* measured: itself */
    CHECK_NEAR(a.distance, 0, 0);
    requests_seen(last, sizeof last);
    CHECK_MSG(strstr(last, "GET /v1/tactic?device=cpu&b=1&hq=8&hkv=1&sq=50&skv=1018&d=256"
                           "&dtype=f16&causal=0 ") != NULL, "request line: %s", last);
    attune_client_free(c);
}

static void lookup_should_tell_where_a_nearest_answer_comes_from(void)
{
    attune_client *c = attune_client_new(server_url, 2000);
    attune_shape_q q = query("near");
    attune_answer a;
    q.b = 4;
    CHECK_EQ_INT(attune_lookup(c, &q, 0, &a), ATTUNE_CLIENT_OK);
    CHECK_STR(a.source, "nearest");
    CHECK_STR(a.tactic, "folded/acc=f32/pad=8");
    CHECK_STR(a.shape, "b4.hq8.hkv1.sq50.skv1018.d256.f16.nc");
    CHECK_STR(a.from_shape, "b1.hq8.hkv1.sq50.skv1018.d256.f16.nc");
    CHECK_NEAR(a.distance, 2.0, 0);
    CHECK_EQ_INT(a.stale, 0);
    CHECK_STR(a.measured_stack, "0123456789abcdef");
    CHECK_STR(a.stack, "0123456789abcdef");
    /* the cache keeps the appended fields too */
    CHECK_EQ_INT(attune_lookup(c, &q, 0, &a), ATTUNE_CLIENT_OK);
    CHECK_STR(a.from_shape, "b1.hq8.hkv1.sq50.skv1018.d256.f16.nc");
    attune_client_free(c);
}

/* A predicted answer (tune on miss queued) is cached for the short TTL
 * only, so the runtime picks up the measured winner soon after. */
static void predicted_answer_should_be_re_asked_after_the_short_ttl(void)
{
    attune_client *c = attune_client_new(server_url, 2000);
    attune_shape_q q = query("pred");
    attune_answer a;
    q.b = 3;
    int before = requests_seen(NULL, 0);
    CHECK_EQ_INT(attune_lookup(c, &q, 0, &a), ATTUNE_CLIENT_OK);
    CHECK_STR(a.source, "predicted");
    CHECK_STR(a.tuning, "queued");
    CHECK_STR(a.from_shape, "b1.hq8.hkv1.sq50.skv1018.d256.f16.nc");
    CHECK_NEAR(a.distance, 0.79, 0);
    CHECK_NEAR(a.time_us, 9.5, 0);
    CHECK(isnan(a.max_abs_err));
    CHECK_EQ_INT(attune_lookup(c, &q, 0, &a), ATTUNE_CLIENT_OK); /* within the TTL: cached */
    CHECK_EQ_INT(requests_seen(NULL, 0), before + 1);
    struct timespec ts = {.tv_sec = ATTUNE_CLIENT_SHORT_TTL_MS / 1000,
                          .tv_nsec = (ATTUNE_CLIENT_SHORT_TTL_MS % 1000) * 1000000L + 100000000L};
    nanosleep(&ts, NULL);
    CHECK_EQ_INT(attune_lookup(c, &q, 0, &a), ATTUNE_CLIENT_OK); /* expired: asked again */
    CHECK_EQ_INT(requests_seen(NULL, 0), before + 2);
    attune_client_free(c);
}

static void client_url_should_be_the_resolved_one(void)
{
    attune_client *c = attune_client_new("http://127.0.0.1:9//", 100);
    CHECK_STR(attune_client_url(c), "http://127.0.0.1:9");
    attune_client_free(c);
    setenv("ATTUNE_URL", "http://127.0.0.2:7", 1);
    c = attune_client_new(NULL, 100);
    CHECK_STR(attune_client_url(c), "http://127.0.0.2:7");
    attune_client_free(c);
    unsetenv("ATTUNE_URL");
    c = attune_client_new(NULL, 100);
    CHECK_STR(attune_client_url(c), ATTUNE_CLIENT_DEFAULT_URL);
    attune_client_free(c);
    CHECK_STR(attune_client_url(NULL), "");
}

static void lookup_should_cache_answers(void)
{
    attune_client *c = attune_client_new(server_url, 2000);
    attune_shape_q q = query("cache");
    attune_answer a;
    char last[1024];
    int before = requests_seen(NULL, 0);
    CHECK_EQ_INT(attune_lookup(c, &q, 0, &a), ATTUNE_CLIENT_OK);
    CHECK_EQ_INT(attune_lookup(c, &q, 0, &a), ATTUNE_CLIENT_OK);
    CHECK_STR(a.tactic, "split/acc=f32/pad=16");
    CHECK_EQ_INT(requests_seen(NULL, 0), before + 1);
    /* another bound is another question */
    CHECK_EQ_INT(attune_lookup(c, &q, 1e-3, &a), ATTUNE_CLIENT_OK);
    CHECK_EQ_INT(requests_seen(last, sizeof last), before + 2);
    CHECK_MSG(strstr(last, "&max_rel_err=0.001") != NULL, "request line: %s", last);
    /* no cache: every lookup asks */
    CHECK_EQ_INT(attune_client_set_cache(c, 0, 0), ATTUNE_CLIENT_OK);
    attune_lookup(c, &q, 0, &a);
    attune_lookup(c, &q, 0, &a);
    CHECK_EQ_INT(requests_seen(NULL, 0), before + 4);
    CHECK_EQ_INT(attune_client_set_cache(c, -1, 0), ATTUNE_CLIENT_EINVAL);
    /* a tiny cache still answers correctly when entries are evicted */
    CHECK_EQ_INT(attune_client_set_cache(c, 1, 60000), ATTUNE_CLIENT_OK);
    for (int i = 1; i <= 20; i++) {
        q.b = i;
        CHECK_EQ_INT(attune_lookup(c, &q, 0, &a), ATTUNE_CLIENT_OK);
    }
    attune_client_free(c);
}

static void lookup_should_escape_device_names(void)
{
    attune_client *c = attune_client_new(server_url, 2000);
    attune_shape_q q = query("NVIDIA H200&x=1");
    attune_answer a;
    char last[1024];
    CHECK_EQ_INT(attune_lookup(c, &q, 0, &a), ATTUNE_CLIENT_OK);
    requests_seen(last, sizeof last);
    CHECK_MSG(strstr(last, "device=NVIDIA%20H200%26x%3D1&") != NULL, "request line: %s", last);
    attune_client_free(c);
}

static void set_devices(const char *json)
{
    pthread_mutex_lock(&srv_mu);
    srv_devices = json;
    pthread_mutex_unlock(&srv_mu);
}

/* No device: the first local GPU the daemon reports, else its first local
 * device (a CPU-only host: the CPU, not "0", which it does not know),
 * asked once and kept; a daemon that cannot say is a fallback. */
static void lookup_without_device_should_ask_the_first_local_device(void)
{
    attune_shape_q q = query(NULL);
    attune_answer a;
    char last[1024];
    set_devices("{\"devices\":[{\"id\":\"GPU-far\",\"kind\":\"cuda\",\"local\":false},"
                "{\"id\":\"CPU-00\",\"kind\":\"cpu\",\"local\":true}]}");
    attune_client *c = attune_client_new(server_url, 2000);
    int before = requests_seen(NULL, 0);
    CHECK_EQ_INT(attune_lookup(c, &q, 0, &a), ATTUNE_CLIENT_OK);
    CHECK_EQ_INT(requests_seen(last, sizeof last), before + 2);
    CHECK_MSG(strstr(last, "GET /v1/tactic?device=CPU-00&") == last, "request line: %s", last);
    CHECK_STR(a.tactic, "split/acc=f32/pad=16");
    q.b = 2; /* another shape: the device is known, one request */
    CHECK_EQ_INT(attune_lookup(c, &q, 0, &a), ATTUNE_CLIENT_OK);
    CHECK_EQ_INT(requests_seen(last, sizeof last), before + 3);
    CHECK_MSG(strstr(last, "device=CPU-00&") != NULL, "request line: %s", last);
    CHECK_EQ_INT(attune_lookup(c, &q, 0, &a), ATTUNE_CLIENT_OK); /* cached */
    CHECK_EQ_INT(requests_seen(NULL, 0), before + 3);
    attune_client_free(c);

    set_devices("{\"devices\":[{\"id\":\"CPU-00\",\"kind\":\"cpu\",\"local\":true},"
                "{\"id\":\"GPU-aa\",\"kind\":\"cuda\",\"local\":true},"
                "{\"id\":\"GPU-bb\",\"kind\":\"cuda\",\"local\":true}]}");
    c = attune_client_new(server_url, 2000);
    CHECK_EQ_INT(attune_lookup(c, &q, 0, &a), ATTUNE_CLIENT_OK);
    requests_seen(last, sizeof last);
    CHECK_MSG(strstr(last, "device=GPU-aa&") != NULL, "request line: %s", last);
    attune_client_free(c);

    set_devices("{\"devices\":[]}");
    c = attune_client_new(server_url, 2000);
    CHECK_EQ_INT(attune_lookup(c, &q, 0, &a), ATTUNE_CLIENT_FALLBACK);
    CHECK_STR(a.source, "default");
    CHECK_MSG(strstr(a.error, "no local device") != NULL, "error: %s", a.error);
    attune_client_free(c);
    set_devices(NULL);
    c = attune_client_new(server_url, 2000);
    CHECK_EQ_INT(attune_lookup(c, &q, 0, &a), ATTUNE_CLIENT_FALLBACK);
    CHECK_MSG(strstr(a.error, "HTTP 500") != NULL, "error: %s", a.error);
    attune_client_free(c);
    set_devices("{\"devices\":[{\"id\":\"CPU-00\",\"kind\":\"cpu\",\"local\":true}]}");
}

static void lookup_should_report_a_rejection_with_the_default(void)
{
    attune_client *c = attune_client_new(server_url, 2000);
    attune_shape_q q = query("gone");
    attune_answer a;
    CHECK_EQ_INT(attune_lookup(c, &q, 0, &a), ATTUNE_CLIENT_REJECTED);
    CHECK_STR(a.tactic, ATTUNE_CLIENT_DEFAULT_TACTIC);
    CHECK_STR(a.source, "default");
    CHECK_EQ_INT(a.pad, 8);
    CHECK(isnan(a.time_us));
    CHECK_MSG(strstr(a.error, "unknown device") != NULL, "error: %s", a.error);
    attune_client_free(c);
}

static void lookup_should_fall_back_on_server_errors_then_wait(void)
{
    attune_client *c = attune_client_new(server_url, 2000);
    attune_shape_q q = query("broken");
    attune_answer a;
    attune_client_set_retry(c, 60000);
    int before = requests_seen(NULL, 0);
    CHECK_EQ_INT(attune_lookup(c, &q, 0, &a), ATTUNE_CLIENT_FALLBACK);
    CHECK_STR(a.tactic, "fused/pad=8");
    CHECK_MSG(strstr(a.error, "HTTP 500") != NULL, "error: %s", a.error);
    /* within the retry interval nothing is sent */
    q.device = "cpu";
    CHECK_EQ_INT(attune_lookup(c, &q, 0, &a), ATTUNE_CLIENT_FALLBACK);
    CHECK_EQ_INT(requests_seen(NULL, 0), before + 1);
    attune_client_set_retry(c, 0);
    CHECK_EQ_INT(attune_lookup(c, &q, 0, &a), ATTUNE_CLIENT_OK);
    attune_client_free(c);
}

static void lookup_should_fall_back_on_a_malformed_answer(void)
{
    attune_client *c = attune_client_new(server_url, 2000);
    attune_shape_q q = query("junk");
    attune_answer a;
    CHECK_EQ_INT(attune_lookup(c, &q, 0, &a), ATTUNE_CLIENT_FALLBACK);
    CHECK_STR(a.source, "default");
    attune_client_free(c);
}

static void lookup_should_fall_back_fast_when_unreachable(void)
{
    /* a port nobody listens on: bind one, close it */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof sa;
    bind(fd, (struct sockaddr *)&sa, sizeof sa);
    getsockname(fd, (struct sockaddr *)&sa, &sl);
    close(fd);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", ntohs(sa.sin_port));
    attune_client *c = attune_client_new(url, 300);
    attune_shape_q q = query("0");
    attune_answer a;
    double t0 = seconds();
    CHECK_EQ_INT(attune_lookup(c, &q, 0, &a), ATTUNE_CLIENT_FALLBACK);
    CHECK_STR(a.tactic, ATTUNE_CLIENT_DEFAULT_TACTIC);
    CHECK(a.error[0] != 0);
    for (int i = 0; i < 100; i++)
        CHECK_EQ_INT(attune_lookup(c, &q, 0, &a), ATTUNE_CLIENT_FALLBACK);
    CHECK_MSG(seconds() - t0 < 1.0, "101 fallbacks took %.3f s", seconds() - t0);
    long status = 0;
    char *body = (char *)"x";
    CHECK_EQ_INT(attune_request(c, "GET", "/v1/health", NULL, &status, &body),
                 ATTUNE_CLIENT_EIO);
    CHECK(body == NULL);
    attune_client_free(c);
}

static void lookup_should_reject_invalid_queries(void)
{
    attune_client *c = attune_client_new(server_url, 2000);
    attune_answer a;
    attune_shape_q q = query("cpu");
    int before = requests_seen(NULL, 0);
    q.hkv = 3;
    CHECK_EQ_INT(attune_lookup(c, &q, 0, &a), ATTUNE_CLIENT_EINVAL);
    CHECK_STR(a.tactic, ATTUNE_CLIENT_DEFAULT_TACTIC);
    q = query("cpu");
    q.dtype = "f64";
    CHECK_EQ_INT(attune_lookup(c, &q, 0, &a), ATTUNE_CLIENT_EINVAL);
    q = query("cpu");
    q.sq = 0;
    CHECK_EQ_INT(attune_lookup(c, &q, 0, &a), ATTUNE_CLIENT_EINVAL);
    q = query("cpu");
    q.causal = 2;
    CHECK_EQ_INT(attune_lookup(c, &q, 0, &a), ATTUNE_CLIENT_EINVAL);
    q = query("cpu");
    CHECK_EQ_INT(attune_lookup(c, &q, -1, &a), ATTUNE_CLIENT_EINVAL);
    CHECK_EQ_INT(attune_lookup(c, &q, NAN, &a), ATTUNE_CLIENT_EINVAL);
    CHECK_EQ_INT(attune_lookup(NULL, &q, 0, &a), ATTUNE_CLIENT_EINVAL);
    CHECK_STR(a.source, "default");
    CHECK_EQ_INT(attune_lookup(c, NULL, 0, &a), ATTUNE_CLIENT_EINVAL);
    CHECK_EQ_INT(attune_lookup(c, &q, 0, NULL), ATTUNE_CLIENT_EINVAL);
    CHECK_EQ_INT(requests_seen(NULL, 0), before);
    attune_client_free(c);
    attune_client_free(NULL);
}

/* variants= (issue 24 item 4): sent in one canonical spelling, part of the
 * cache key; a list that is not names is refused without a request; a
 * refusal of a set without fused falls back to no tactic. */
static void lookup_in_should_send_and_cache_by_the_variants(void)
{
    attune_client *c = attune_client_new(server_url, 2000);
    attune_shape_q q = query("cpu");
    attune_answer a;
    char last[1024];
    q.b = 5;
    int before = requests_seen(NULL, 0);
    CHECK_EQ_INT(attune_lookup_in(c, &q, " split,cudnn ,split", 0, &a), ATTUNE_CLIENT_OK);
    requests_seen(last, sizeof last);
    CHECK_MSG(strstr(last, "&causal=0&variants=cudnn,split ") != NULL, "request line: %s", last);
    CHECK_EQ_INT(attune_lookup_in(c, &q, "cudnn,split", 0, &a), ATTUNE_CLIENT_OK); /* cached */
    CHECK_EQ_INT(requests_seen(NULL, 0), before + 1);
    CHECK_EQ_INT(attune_lookup_in(c, &q, "split", 0, &a), ATTUNE_CLIENT_OK); /* another set */
    CHECK_EQ_INT(attune_lookup(c, &q, 0, &a), ATTUNE_CLIENT_OK);  /* no set: another key */
    CHECK_EQ_INT(attune_lookup_in(c, &q, "", 0, &a), ATTUNE_CLIENT_OK); /* = no set: cached */
    CHECK_EQ_INT(requests_seen(NULL, 0), before + 3);
    requests_seen(last, sizeof last);
    CHECK_MSG(strstr(last, "variants") == NULL, "no set, no variants=: %s", last);
    static const char *const bad[] = {"split;fused", ",", "Split", "split,,fused", " "};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_EQ_INT(attune_lookup_in(c, &q, bad[i], 0, &a), ATTUNE_CLIENT_EINVAL);
        CHECK_STR(a.source, "none");
        CHECK_STR(a.tactic, "");
        CHECK(strstr(a.error, "variants") != NULL);
    }
    CHECK_EQ_INT(requests_seen(NULL, 0), before + 3);
    q = query("gone"); /* a 404 */
    CHECK_EQ_INT(attune_lookup_in(c, &q, "cudnn,split", 0, &a), ATTUNE_CLIENT_REJECTED);
    CHECK_STR(a.tactic, "");
    CHECK_STR(a.source, "none");
    CHECK_EQ_INT(attune_lookup_in(c, &q, "split,fused_splitkv,fused", 0, &a),
                 ATTUNE_CLIENT_REJECTED);
    CHECK_STR(a.tactic, ATTUNE_CLIENT_DEFAULT_TACTIC); /* fused is allowed: the default */
    attune_client_free(c);
}

static void request_should_return_raw_answers(void)
{
    attune_client *c = attune_client_new(server_url, 2000);
    long status = 0;
    char *body = NULL;
    CHECK_EQ_INT(attune_request(c, "GET", "/v1/health", NULL, &status, &body),
                 ATTUNE_CLIENT_OK);
    CHECK_EQ_INT(status, 200);
    CHECK(body != NULL && strcmp(body, "{\"status\":\"ok\"}") == 0);
    attune_free(body);
    CHECK_EQ_INT(attune_request(c, "GET", "no-slash", NULL, &status, &body),
                 ATTUNE_CLIENT_EINVAL);
    attune_client_free(c);
}

static void default_answer_should_be_the_documented_one(void)
{
    attune_answer a;
    attune_default_answer(&a, "why");
    CHECK_STR(a.tactic, "fused/pad=8");
    CHECK_STR(a.variant, "fused");
    CHECK_EQ_INT(a.pad, 8);
    CHECK_STR(a.source, "default");
    CHECK_EQ_INT(a.stale, 0);
    CHECK(isnan(a.rel_err) && isnan(a.max_abs_err) && isnan(a.distance));
    CHECK_STR(a.from_shape, "");
    CHECK_STR(a.measured_stack, "");
    CHECK_STR(a.error, "why");
}

int main(void)
{
    if (load_api() != 0) {
        fprintf(stderr, "skip: no client library (ATTUNE_CLIENT_LIB unset: libcurl missing?)\n");
        return TEST_SKIP_CODE;
    }
    unsetenv("http_proxy");
    unsetenv("HTTP_PROXY");
    pthread_t th = server_start();
    snprintf(server_url, sizeof server_url, "http://127.0.0.1:%d/", srv_port);
    RUN(lookup_should_parse_the_daemon_answer);
    RUN(lookup_should_tell_where_a_nearest_answer_comes_from);
    RUN(predicted_answer_should_be_re_asked_after_the_short_ttl);
    RUN(client_url_should_be_the_resolved_one);
    RUN(lookup_should_cache_answers);
    RUN(lookup_should_escape_device_names);
    RUN(lookup_without_device_should_ask_the_first_local_device);
    RUN(lookup_should_report_a_rejection_with_the_default);
    RUN(lookup_should_fall_back_on_server_errors_then_wait);
    RUN(lookup_should_fall_back_on_a_malformed_answer);
    RUN(lookup_should_fall_back_fast_when_unreachable);
    RUN(lookup_should_reject_invalid_queries);
    RUN(lookup_in_should_send_and_cache_by_the_variants);
    RUN(request_should_return_raw_answers);
    RUN(default_answer_should_be_the_documented_one);
    server_stop(th);
    return test_summary();
}
