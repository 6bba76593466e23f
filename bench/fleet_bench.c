/* fleet_bench.c -- the fleet server at scale: a synthetic fleet pushed
 * through attune's own push path (fleet_pg_push: binary COPY straight into
 * measurements for a device's first push), then the aggregates, one
 * device's pull (fleet_local_pull into a local SQLite store), a sibling's
 * merged push and the pulls after it.
 *
 *   fleet_bench --fleet URL [--devices 1000] [--models 10] [--shapes 200]
 *               [--tactics 40] [--jobs 2] [--reset] [--db FILE]
 *               [--server-pid PID] [--push-only] [--per-push 1]
 *
 * Defaults are issue 11's fleet: 1,000 devices of 10 models, 200 shapes,
 * 40 tactics = 8,000,000 rows. Each device is one push (8,000 rows, one
 * server transaction, its own watermark), --jobs connections push devices
 * in parallel as that many attuned would (each connection one
 * fleet_pg_push_stream, as one store's bulk push makes it); --per-push N
 * puts N devices' rows in each push (larger transactions, as an initial
 * load with a larger --batch would). Times: wall clock, printed with
 * rows/s and the load average; with --server-pid (the postmaster) also the
 * CPU time of the server's processes and of this client, which the
 * neighbours on a shared machine do not change. --reset drops attune's
 * tables first (use a database of its own); --push-only stops after the
 * push (bench/push_copy.py compares it with a plain COPY of its rows).
 * bench/fleet_bench.py starts a private PostgreSQL and runs this. */
#include <inttypes.h>
#include <math.h>
#include <dirent.h>
#include <pthread.h>
#include <sys/resource.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/hash.h"
#include "db/fleet_local.h"
#include "db/fleet_pg.h"
#include "db/store.h"

#define CHECK(x, what)                                                               \
    do {                                                                             \
        int rc_ = (x);                                                               \
        if (rc_ != 0) {                                                              \
            fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", __FILE__, __LINE__, what, \
                    attune_strerror(rc_), err);                                      \
            exit(1);                                                                 \
        }                                                                            \
    } while (0)

static const char *url;
static int ndev = 1000, nmodels = 10, nshapes = 200, ntactics = 40, jobs = 2;
static char tactics[64][ATTN_TACTIC_STR_MAX];
static attn_stack stack;
static atomic_int next_dev;
static atomic_llong rows_sent;

static int server_pid; /* postmaster, for CPU accounting (0: none) */

/* CPU seconds of the server: the postmaster (with its reaped children:
 * backends that exited) plus every live child. 0 without --server-pid. */
static double server_cpu_s(void)
{
    if (server_pid <= 0)
        return 0;
    double tick = (double)sysconf(_SC_CLK_TCK), total = 0;
    DIR *d = opendir("/proc");
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        int pid = atoi(e->d_name);
        if (pid <= 0)
            continue;
        char path[64], buf[1024];
        snprintf(path, sizeof path, "/proc/%d/stat", pid);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = 0;
        char *p = strrchr(buf, ')'); /* the command may hold spaces */
        if (p == NULL)
            continue;
        int ppid = 0;
        unsigned long long ut = 0, st = 0, cut = 0, cst = 0;
        /* fields after ")": state ppid pgrp session tty tpgid flags minflt
         * cminflt majflt cmajflt utime stime cutime cstime */
        if (sscanf(p + 2, "%*c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %llu %llu",
                   &ppid, &ut, &st, &cut, &cst) != 5)
            continue;
        if (pid == server_pid)
            total += (double)(ut + st + cut + cst) / tick;
        else if (ppid == server_pid)
            total += (double)(ut + st) / tick;
    }
    if (d)
        closedir(d);
    return total;
}

static double client_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
           (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
}

/* CPU seconds of the calling thread. */
static double thread_cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* CPU the pushers spent making the synthetic rows (not the push path's):
 * microseconds, summed over threads. */
static atomic_llong gen_cpu_us;

static void gen_cpu_add(double s)
{
    atomic_fetch_add(&gen_cpu_us, (long long)(s * 1e6));
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The 1-minute load average (/proc/loadavg), -1 when unknown: on a shared
 * machine it says how much of the wall time was the neighbours'. */
static double load1(void)
{
    double v = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f != NULL) {
        if (fscanf(f, "%lf", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

/* 40 distinct canonical tactics: every variant family with its pads. */
static void make_tactics(void)
{
    int n = 0;
    static const int pads[] = {1, 8, 16, 64};
    static const int tiles[] = {16, 32, 64, 128};
    for (int p = 0; p < 4; p++)
        for (int t = 0; t < 4; t++)
            snprintf(tactics[n++], ATTN_TACTIC_STR_MAX, "fused/pad=%d/tile=%dx64", pads[p],
                     tiles[t]);
    static const char *const gemm[] = {"split", "split_repeat", "folded"};
    for (int v = 0; v < 3; v++)
        for (int a = 0; a < 2; a++)
            for (int p = 0; p < 4; p++)
                snprintf(tactics[n++], ATTN_TACTIC_STR_MAX, "%s/acc=%s/pad=%d", gemm[v],
                         a ? "f32" : "f16", pads[p]);
}

static void model_of(int dev, attn_device_info *d)
{
    memset(d, 0, sizeof *d);
    int m = dev % nmodels;
    snprintf(d->id, sizeof d->id, "GPU-bench-%06d", dev);
    snprintf(d->name, sizeof d->name, "Bench GPU %d", m);
    snprintf(d->kind, sizeof d->kind, "cuda");
    d->index = -1;
    d->cc_major = 8 + m % 2;
    d->cc_minor = 0;
    d->sm_count = 100 + m;
    d->memory_mb = 80000;
}

static void shape_of(int i, attn_shape *s)
{
    memset(s, 0, sizeof *s);
    s->b = 1 + i % 4;
    s->hq = 8 * (1 + i % 4);
    s->hkv = 1 + (i / 4) % 2;
    s->sq = 16 + 7 * i;
    s->skv = 512 + 13 * i;
    s->d = 64;
    s->dtype = ATTN_F16;
    s->causal = i % 2;
}

/* Deterministic noise in [-1, 1). */
static double noise(uint64_t a, uint64_t b)
{
    uint64_t s = a * 0x9e3779b97f4a7c15ULL ^ b;
    return (double)(hash_splitmix64(&s) >> 11) / (double)(1ULL << 52) - 1.0;
}

/* The fields of a row that no device changes (shape, tactic, status,
 * mode, ...), one per (shape, tactic), made once: device_rows copies them,
 * so making a device's rows costs little beside pushing them (the push's
 * wall time is the push path's, bench/push_copy.py). */
static store_measurement *row_template;

static void make_template(void)
{
    int per = nshapes * ntactics, k = 0;
    row_template = calloc((size_t)per, sizeof *row_template);
    if (row_template == NULL)
        exit(1);
    for (int i = 0; i < nshapes; i++)
        for (int t = 0; t < ntactics; t++, k++) {
            store_measurement *m = &row_template[k];
            snprintf(m->stack_id, sizeof m->stack_id, "%s", stack.id);
            shape_of(i, &m->shape);
            snprintf(m->tactic, sizeof m->tactic, "%s", tactics[t]);
            m->status = t % 13 == 12 ? STORE_UNSUPPORTED : STORE_OK;
            m->time_us_copies = NAN;
            m->n = 20;
            m->rel_err = m->status == STORE_OK ? 1e-4 * (1 + t % 5) : NAN;
            m->max_abs_err = m->rel_err;
            snprintf(m->mode, sizeof m->mode, "cuda-graph");
            snprintf(m->l2, sizeof m->l2, "flushed");
            m->rows_checked = 256;
            snprintf(m->note, sizeof m->note, "%s", m->status == STORE_OK ? "" : "bench");
        }
}

/* One device's rows: times vary 3% around a model/shape/tactic base; every
 * 97th device is a slow card (+60%), for the outlier flags. */
static void device_rows(int dev, store_measurement *rows)
{
    attn_device_info d;
    char host[sizeof rows->host];
    model_of(dev, &d);
    snprintf(host, sizeof host, "host-%04d", dev);
    memcpy(rows, row_template, sizeof *rows * (size_t)(nshapes * ntactics));
    int k = 0;
    for (int i = 0; i < nshapes; i++)
        for (int t = 0; t < ntactics; t++, k++) {
            store_measurement *m = &rows[k];
            memcpy(m->device_id, d.id, sizeof m->device_id);
            memcpy(m->host, host, sizeof m->host);
            double base = (10.0 + i) * (1.0 + 0.05 * t) * (1.0 + 0.1 * (dev % nmodels));
            double f = (1.0 + 0.03 * noise((uint64_t)dev, (uint64_t)k)) *
                       (dev % 97 == 5 ? 1.6 : 1.0);
            m->time_us = m->status == STORE_OK ? base * f : NAN;
            m->time_us_min = m->status == STORE_OK ? base * f * 0.98 : NAN;
            m->time_us_max = m->status == STORE_OK ? base * f * 1.05 : NAN;
            m->taken_at = 1767000000 + dev;
        }
}

/* Devices per push (--per-push; fleet_local's batches name at most 16). */
static int per_push = 1;

/* One pusher's stream: the devices whose rows it made last, two batches
 * in turn (fleet_pg_push_stream holds two). */
typedef struct pusher_state {
    store_measurement *rows[2];
    attn_device_info d[2][16];
    char host[2][16][64], source[2][64];
    const char *hosts[2][16];
    int turn;
} pusher_state;

/* The next per_push devices' rows (fleet_push_next_fn): one batch, its
 * own transaction and watermark. */
static int pusher_next(void *arg, fleet_batch *b)
{
    pusher_state *ps = arg;
    int dev0 = atomic_fetch_add(&next_dev, per_push), t = ps->turn ^= 1, per = nshapes * ntactics;
    int n = ndev - dev0 < per_push ? ndev - dev0 : per_push;
    if (n <= 0)
        return 0;
    double g0 = thread_cpu_s();
    for (int i = 0; i < n; i++) {
        model_of(dev0 + i, &ps->d[t][i]);
        device_rows(dev0 + i, ps->rows[t] + (size_t)i * (size_t)per);
        snprintf(ps->host[t][i], sizeof ps->host[t][i], "host-%04d", dev0 + i);
        ps->hosts[t][i] = ps->host[t][i];
    }
    gen_cpu_add(thread_cpu_s() - g0);
    snprintf(ps->source[t], sizeof ps->source[t], "bench-%06d", dev0);
    *b = (fleet_batch){.devices = ps->d[t], .device_hosts = ps->hosts[t], .ndevices = n,
                       .stacks = &stack, .nstacks = 1, .rows = ps->rows[t], .nrows = n * per,
                       .source = ps->source[t], .last_seq = 1};
    return 1;
}

static int pusher_done(void *arg, const fleet_push_done *d)
{
    (void)arg;
    if (d->rejected != 0 || d->skipped) {
        fprintf(stderr, "rows rejected or batch skipped: %s\n", d->first_bad);
        exit(1);
    }
    atomic_fetch_add(&rows_sent, d->sent);
    return 0;
}

/* One connection's pushes, as one store's bulk push makes them
 * (fleet_pg_push_stream: the next device's rows made and copied while
 * the last one's are). */
static void *pusher(void *arg)
{
    (void)arg;
    char err[512] = "";
    fleet_pg *c = NULL;
    CHECK(fleet_pg_connect(url, &c, err, sizeof err), "connect");
    pusher_state ps;
    memset(&ps, 0, sizeof ps);
    for (int t = 0; t < 2; t++)
        if ((ps.rows[t] = malloc(sizeof *ps.rows[t] * (size_t)(nshapes * ntactics) *
                                 (size_t)per_push)) == NULL)
            exit(1);
    CHECK(fleet_pg_push_stream(c, pusher_next, pusher_done, &ps, err, sizeof err), "push");
    free(ps.rows[0]);
    free(ps.rows[1]);
    fleet_pg_close(c);
    return NULL;
}

/* One fleet_local_pull of d's model into st, timed. */
static void pull_into(store *st, fleet_pg *c, const attn_device_info *d, int refresh_after_s,
                      const char *what)
{
    char err[512] = "";
    int64_t got = 0;
    double t0 = now_s(), scpu = server_cpu_s(), ccpu = client_cpu_s();
    CHECK(fleet_local_pull(st, c, d, 1, refresh_after_s, &got, NULL, err, sizeof err), "local pull");
    printf("%s: %" PRId64 " rows in %.3f s (CPU server %.3f s, client %.3f s; load average "
           "%.1f)\n",
           what, got, now_s() - t0, server_cpu_s() - scpu, client_cpu_s() - ccpu, load1());
    fflush(stdout);
}

static const char reset_sql[] =
    "DROP TABLE IF EXISTS attune_meta, models, devices, stacks, shapes, tactics, measurements,"
    " sources, dirty, aggregates, outliers, pins CASCADE";

static int push_only;

static int parse_args(int argc, char **argv, int *reset, const char **dbpath)
{
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(o, "--reset") == 0) {
            *reset = 1;
            continue;
        }
        if (strcmp(o, "--push-only") == 0) {
            push_only = 1;
            continue;
        }
        if (v == NULL)
            return 2;
        i++;
        if (strcmp(o, "--fleet") == 0)
            url = v;
        else if (strcmp(o, "--db") == 0)
            *dbpath = v;
        else if (strcmp(o, "--devices") == 0)
            ndev = atoi(v);
        else if (strcmp(o, "--models") == 0)
            nmodels = atoi(v);
        else if (strcmp(o, "--shapes") == 0)
            nshapes = atoi(v);
        else if (strcmp(o, "--tactics") == 0)
            ntactics = atoi(v);
        else if (strcmp(o, "--jobs") == 0)
            jobs = atoi(v);
        else if (strcmp(o, "--server-pid") == 0)
            server_pid = atoi(v);
        else if (strcmp(o, "--per-push") == 0)
            per_push = atoi(v);
        else
            return 2;
    }
    if (url == NULL || ndev < 1 || nmodels < 1 || nshapes < 1 || ntactics < 1 ||
        ntactics > 40 || jobs < 1 || jobs > 64 || per_push < 1 || per_push > 16)
        return 2;
    return 0;
}

/* Every device pushes its rows, jobs connections at a time. */
static void push_all(void)
{
    int64_t total = (int64_t)ndev * nshapes * ntactics;
    printf("fleet: %d devices x %d models, %d shapes x %d tactics = %" PRId64
           " rows, %d push connections\n",
           ndev, nmodels, nshapes, ntactics, total, jobs);
    fflush(stdout);
    double t0 = now_s(), scpu = server_cpu_s(), ccpu = client_cpu_s(), l0 = load1();
    pthread_t th[64];
    for (int j = 0; j < jobs; j++)
        pthread_create(&th[j], NULL, pusher, NULL);
    for (int j = 0; j < jobs; j++)
        pthread_join(th[j], NULL);
    double push_s = now_s() - t0;
    double sent = (double)atomic_load(&rows_sent);
    printf("push: %.0f rows in %.1f s = %.0f rows/s (%.1f ms per %d-row push; load "
           "average %.1f before, %.1f after)\n",
           sent, push_s, sent / push_s, 1e3 * push_s * jobs * per_push / ndev,
           nshapes * ntactics * per_push, l0,
           load1());
    /* On a shared machine wall time says as much about the neighbours as
     * about the push: CPU time per row does not. */
    if (server_pid > 0) {
        double gen = 1e-6 * (double)atomic_load(&gen_cpu_us);
        double s_cpu = server_cpu_s() - scpu, c_cpu = client_cpu_s() - ccpu - gen;
        printf("push CPU: server %.1f s + client %.1f s = %.2f us per row, %.0f rows per "
               "CPU-second (client excludes %.1f s making the synthetic rows)\n",
               s_cpu, c_cpu, 1e6 * (s_cpu + c_cpu) / sent, sent / (s_cpu + c_cpu), gen);
    }
    fflush(stdout);
}

/* One pull of d's model read and decoded, not stored: the server's part. */
static void pull_stream(fleet_pg *c, const attn_device_info *d)
{
    char err[512] = "";
    double t0 = now_s(), scpu = server_cpu_s(), ccpu = client_cpu_s();
    fleet_pg_pull *pl = NULL;
    int64_t nrows = 0;
    store_measurement m;
    int more;
    CHECK(fleet_pg_pull_open(c, d, 0, &pl, err, sizeof err), "pull");
    while (pl != NULL && (more = fleet_pg_pull_next(pl, &m, err, sizeof err)) != 0) {
        CHECK(more < 0 ? more : 0, "pull row");
        nrows++;
    }
    fleet_pg_pull_close(pl);
    printf("pull (server query + rows decoded, not stored): %" PRId64 " aggregate rows of one "
           "model in %.3f s (CPU server %.3f s, client %.3f s; load average %.1f)\n",
           nrows, now_s() - t0, server_cpu_s() - scpu, client_cpu_s() - ccpu, load1());
}

/* A sibling of d0 pushes fresh numbers (8000 rows, every one merged),
 * then d0's host pulls into st (may be NULL: no local store): as attuned
 * does (the model was just refreshed: the aggregates as they are), then
 * after the refresh that push made due (every row replaced). */
static void sibling_then_pull(fleet_pg *c, store *st, const attn_device_info *d0)
{
    char err[512] = "";
    int per = nshapes * ntactics, dev = nmodels; /* model 0, not device 0 */
    store_measurement *rows = malloc(sizeof *rows * (size_t)per);
    attn_device_info d;
    if (rows == NULL)
        exit(1);
    model_of(dev, &d);
    device_rows(dev, rows);
    for (int i = 0; i < per; i++)
        rows[i].taken_at += 86400;
    const char *hosts[] = {"host"};
    fleet_batch b = {.devices = &d, .device_hosts = hosts, .ndevices = 1, .stacks = &stack,
                     .nstacks = 1, .rows = rows, .nrows = per};
    fleet_push_stats ps = {0, 0, 0};
    double t0 = now_s(), scpu = server_cpu_s();
    CHECK(fleet_pg_push(c, &b, &ps, err, sizeof err), "re-push");
    printf("a sibling's push of %d newer rows (merged): %.3f s (server CPU %.3f s)\n", per,
           now_s() - t0, server_cpu_s() - scpu);
    if (st != NULL)
        pull_into(st, c, d0, 300, "attuned's pull after it (no refresh due)");
    int64_t g = 0;
    t0 = now_s();
    scpu = server_cpu_s();
    CHECK(fleet_pg_refresh(c, d0, &g, err, sizeof err), "refresh");
    printf("refresh of the model after that push: %" PRId64 " groups in %.3f s "
           "(server CPU %.3f s)\n",
           g, now_s() - t0, server_cpu_s() - scpu);
    if (st != NULL)
        pull_into(st, c, d0, 300, "pull after the refresh (every row replaced)");
    free(rows);
}

int main(int argc, char **argv)
{
    int reset = 0;
    const char *dbpath = NULL;
    if (parse_args(argc, argv, &reset, &dbpath) != 0) {
        fprintf(stderr, "usage: fleet_bench --fleet URL [--devices N] [--models N] "
                        "[--shapes N] [--tactics N<=40] [--jobs N] [--reset] [--db FILE] "
                        "[--server-pid PID] [--push-only] [--per-push N<=16]\n");
        return 2;
    }
    make_tactics();
    snprintf(stack.driver, sizeof stack.driver, "560.35.03");
    snprintf(stack.runtime, sizeof stack.runtime, "12.6");
    snprintf(stack.blas, sizeof stack.blas, "12.6.4.1");
    snprintf(stack.attune, sizeof stack.attune, "0.1.0");
    snprintf(stack.kernels, sizeof stack.kernels, "3f1c0d2a9b8e7f60");
    attn_stack_finish(&stack);
    make_template();

    char err[512] = "";
    fleet_pg *c = NULL;
    if (reset) {
        CHECK(fleet_pg_connect(url, &c, err, sizeof err), "connect");
        CHECK(fleet_pg_exec(c, reset_sql, err, sizeof err), "reset");
        fleet_pg_close(c);
    }
    CHECK(fleet_pg_connect(url, &c, err, sizeof err), "connect");
    push_all();
    if (push_only) {
        fleet_pg_close(c);
        return 0;
    }

    attn_device_info d0;
    model_of(0, &d0);
    double t0 = now_s(), scpu = server_cpu_s();
    int64_t groups = 0;
    CHECK(fleet_pg_refresh(c, NULL, &groups, err, sizeof err), "refresh");
    printf("aggregates: %" PRId64 " (model, stack, shape) groups from %" PRId64
           " rows in %.1f s (server CPU %.1f s)\n",
           groups, (int64_t)ndev * nshapes * ntactics, now_s() - t0, server_cpu_s() - scpu);
    fflush(stdout);

    pull_stream(c, &d0);
    store *st = NULL;
    if (dbpath != NULL) {
        unlink(dbpath);
        CHECK(store_open(dbpath, 1, &st, err, sizeof err), "store_open");
        pull_into(st, c, &d0, 0, "pull into a fresh local SQLite store");
    }
    sibling_then_pull(c, st, &d0);
    store_close(st);
    fleet_pg_info info;
    CHECK(fleet_pg_info_get(c, NULL, &info, err, sizeof err), "info");
    printf("server: %" PRId64 " models, %" PRId64 " devices, %" PRId64 " measurements, %" PRId64
           " aggregates, %" PRId64 " outliers\n",
           info.models, info.devices, info.measurements, info.aggregates, info.outliers);
    fleet_pg_close(c);
    return 0;
}
