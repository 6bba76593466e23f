/* libattune_time.c -- time tactics through libattune from a plain C process
 * (no PyTorch in it), the way the tuner and bench/libattune_store.py time:
 * a CUDA graph of back-to-back runs replayed between two events, median of
 * the replays, per call. Each placement is a fresh plan on fresh cudaMalloc'd
 * q, k, v and o ([b, h, s, d], random values), after a spacer allocation of a
 * pseudo-random size so that the addresses move; earlier placements (their
 * buffers and plans) stay allocated until the end, as in the tuner.
 *
 *   libattune_time SHAPE_KEY TACTIC [TACTIC...] [--placements N] [--reps N]
 *                  [--calls N] [--prelude[=PREFIX]] [--stack BYTES]
 *
 * --prelude first plans, runs three times and destroys every tactic the
 * device lists for the shape (=PREFIX: those whose text starts with it,
 * e.g. cudnn, fused/arch=sm90a, split), in the listing's order, as a
 * tuner's process does before it times the later ones: whether a tactic's
 * time depends on what the process ran before (docs/perf.md, 2026-12-04
 * 17:10). Each placement's line gives q's address and its offset in a
 * 2 MiB page, to set the fast places' layouts beside the slow ones'.
 * The context's limits (per-thread stack, L2 fetch granularity, persisting
 * L2) are printed at the start and after the prelude; --stack BYTES sets
 * the stack before anything runs (a prelude's kernels may grow it: is the
 * fast mode of docs/perf.md, 2026-12-04 19:58, a grown stack?).
 *
 * Prints one line per placement and tactic, then per tactic the mean over
 * placements (what the tuner stores for a short call) and their median.
 * Exit 0, 1 when a tactic cannot be planned or run, 2 on bad arguments.
 * Built with the CUDA backend as the CMake target libattune_time
 * (tests/gpu/run.sh --no-tests builds it; bench/process_history.sh runs it).
 */
#include <cuda_runtime.h>
#include <libattune.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LT_MAX_PLACES 16
#define LT_MAX_REPS 101

/* The elements' size of an attune dtype (e4m3 is not timed here). */
static size_t lt_esize(int dtype)
{
    return dtype == ATTUNE_DTYPE_F32 ? 4 : 2;
}

/* Parse a canonical shape key (b1.hq8.hkv1.sq50.skv1018.d256.f16.nc).
 * Returns 0 or -1. */
static int lt_parse_key(const char *key, attune_dims *s)
{
    long long b, hq, hkv, sq, skv, d;
    char dt[8], c[4];
    if (sscanf(key, "b%lld.hq%lld.hkv%lld.sq%lld.skv%lld.d%lld.%7[^.].%3s", &b, &hq, &hkv, &sq,
               &skv, &d, dt, c) != 8)
        return -1;
    *s = (attune_dims){b, hq, hkv, sq, skv, d, 0, strcmp(c, "c") == 0};
    if (strcmp(dt, "f16") == 0)
        s->dtype = ATTUNE_DTYPE_F16;
    else if (strcmp(dt, "bf16") == 0)
        s->dtype = ATTUNE_DTYPE_BF16;
    else if (strcmp(dt, "f32") == 0)
        s->dtype = ATTUNE_DTYPE_F32;
    else
        return -1;
    return strcmp(c, "c") == 0 || strcmp(c, "nc") == 0 ? 0 : -1;
}

static int lt_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A device buffer of n elements of dtype filled with pseudo-random values
 * of magnitude under 1. Returns NULL on failure. */
static void *lt_fill(size_t n, int dtype, unsigned *seed)
{
    size_t es = lt_esize(dtype);
    unsigned char *h = malloc(n * es);
    void *d = NULL;
    if (h == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        *seed = *seed * 1103515245u + 12345u;
        float f = (float)((*seed >> 8) & 0xffff) / 32768.0f - 1.0f;
        uint16_t sign = (uint16_t)((*seed >> 30) & 1u), mant = (uint16_t)(*seed >> 8);
        if (es == 4) {
            memcpy(h + 4 * i, &f, 4);
        } else { /* magnitudes in [0.5, 1) */
            uint16_t v = dtype == ATTUNE_DTYPE_BF16
                             ? (uint16_t)(sign << 15 | 126u << 7 | (mant & 0x7fu))
                             : (uint16_t)(sign << 15 | 14u << 10 | (mant & 0x3ffu));
            memcpy(h + 2 * i, &v, 2);
        }
    }
    if (cudaMalloc(&d, n * es) != cudaSuccess ||
        cudaMemcpy(d, h, n * es, cudaMemcpyHostToDevice) != cudaSuccess) {
        cudaFree(d);
        d = NULL;
    }
    free(h);
    return d;
}

/* q, k, v and o of s ([b, h, s, d], filled) and their views. */
typedef struct lt_io {
    void *q, *k, *v, *o;
    attune_tensor tq, tk, tv, to;
} lt_io;

/* Allocate and fill io for s. Returns 0, or -1 with what was allocated
 * still in io (lt_io_free releases it). */
static int lt_io_alloc(const attune_dims *s, unsigned *seed, lt_io *io)
{
    size_t nq = (size_t)(s->b * s->hq * s->sq * s->d);
    size_t nk = (size_t)(s->b * s->hkv * s->skv * s->d);
    io->q = lt_fill(nq, s->dtype, seed), io->k = lt_fill(nk, s->dtype, seed);
    io->v = lt_fill(nk, s->dtype, seed), io->o = lt_fill(nq, s->dtype, seed);
    io->tq = (attune_tensor){io->q, s->hq * s->sq * s->d, s->sq * s->d, s->d};
    io->tk = (attune_tensor){io->k, s->hkv * s->skv * s->d, s->skv * s->d, s->d};
    io->tv = (attune_tensor){io->v, io->tk.stride_b, io->tk.stride_h, io->tk.stride_s};
    io->to = (attune_tensor){io->o, io->tq.stride_b, io->tq.stride_h, io->tq.stride_s};
    return io->q && io->k && io->v && io->o ? 0 : -1;
}

static void lt_io_free(lt_io *io)
{
    cudaFree(io->q), cudaFree(io->k), cudaFree(io->v), cudaFree(io->o);
}

/* Time one placement of tactic: median us per call over reps replays of a
 * graph of calls runs. Returns 0 or -1 (message printed). */
static int lt_time(attune_dev *dev, const attune_dims *s, const char *tactic, int calls, int reps,
                   unsigned *seed, void **held, int *nheld, attune_plan **plans, int *nplans,
                   double *us, uintptr_t *q_at)
{
    char err[256] = "";
    attune_plan *plan = NULL;
    void *spacer = NULL;
    lt_io io;
    cudaMalloc(&spacer, (size_t)(*seed % 4096u + 1u) * 2048u); /* moves what follows */
    held[(*nheld)++] = spacer;
    int arc = lt_io_alloc(s, seed, &io);
    held[(*nheld)++] = io.q, held[(*nheld)++] = io.k, held[(*nheld)++] = io.v;
    held[(*nheld)++] = io.o;
    *q_at = (uintptr_t)io.q;
    if (arc != 0) {
        fprintf(stderr, "libattune_time: out of device memory\n");
        return -1;
    }
    int rc = attune_plan_create(dev, s, tactic, &plan, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "libattune_time: %s: %s\n", tactic, err[0] ? err : attune_strerror(rc));
        return -1;
    }
    cudaStream_t st = NULL;
    cudaGraph_t g = NULL;
    cudaGraphExec_t ge = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    double t[LT_MAX_REPS];
    int ok = cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) == cudaSuccess;
    ok = ok && attune_plan_run(plan, &io.tq, &io.tk, &io.tv, &io.to, 0, 0, st) == 0; /* warm-up */
    ok = ok && cudaStreamSynchronize(st) == cudaSuccess;
    ok = ok && cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal) == cudaSuccess;
    for (int i = 0; ok && i < calls; i++)
        ok = attune_plan_run(plan, &io.tq, &io.tk, &io.tv, &io.to, 0, 0, st) == 0;
    if (st != NULL && cudaStreamEndCapture(st, &g) != cudaSuccess)
        ok = 0;
    ok = ok && cudaGraphInstantiate(&ge, g, 0) == cudaSuccess;
    ok = ok && cudaEventCreate(&e0) == cudaSuccess && cudaEventCreate(&e1) == cudaSuccess;
    ok = ok && cudaGraphLaunch(ge, st) == cudaSuccess && cudaStreamSynchronize(st) == cudaSuccess;
    for (int r = 0; ok && r < reps; r++) {
        float ms = 0;
        ok = cudaEventRecord(e0, st) == cudaSuccess && cudaGraphLaunch(ge, st) == cudaSuccess &&
             cudaEventRecord(e1, st) == cudaSuccess && cudaEventSynchronize(e1) == cudaSuccess &&
             cudaEventElapsedTime(&ms, e0, e1) == cudaSuccess;
        t[r] = 1000.0 * ms / calls;
    }
    if (ok) {
        qsort(t, (size_t)reps, sizeof t[0], lt_cmp);
        *us = t[reps / 2];
    } else {
        fprintf(stderr, "libattune_time: %s: run or capture failed: %s\n", tactic,
                cudaGetErrorString(cudaGetLastError()));
    }
    if (e0)
        cudaEventDestroy(e0);
    if (e1)
        cudaEventDestroy(e1);
    if (ge)
        cudaGraphExecDestroy(ge);
    if (g)
        cudaGraphDestroy(g);
    if (st)
        cudaStreamDestroy(st);
    plans[(*nplans)++] = plan; /* held: the next placement's buffers lie elsewhere */
    return ok ? 0 : -1;
}

/* --prelude: every listed tactic of s whose text starts with prefix ("":
 * all) planned, run three times on one set of buffers and destroyed.
 * Returns how many ran, or -1. */
static int lt_prelude(attune_dev *dev, const attune_dims *s, const char *prefix)
{
    enum { MAXT = 1024 };
    char(*list)[ATTUNE_TACTIC_MAX] = calloc(MAXT, sizeof *list);
    char err[256] = "";
    unsigned seed = 7;
    lt_io io;
    int arc = lt_io_alloc(s, &seed, &io);
    int n = list ? attune_tactics(dev, s, list, MAXT, err, sizeof err) : -1, ran = 0;
    if (n > MAXT)
        n = MAXT;
    for (int i = 0; arc == 0 && i < n; i++) {
        attune_plan *plan = NULL;
        if (strncmp(list[i], prefix, strlen(prefix)) != 0 ||
            attune_plan_create(dev, s, list[i], &plan, err, sizeof err) != 0)
            continue; /* the listing's unsupported ones */
        int ok = 1;
        for (int r = 0; r < 3 && ok; r++)
            ok = attune_plan_run(plan, &io.tq, &io.tk, &io.tv, &io.to, 0, 0, NULL) == 0;
        ok = ok && cudaDeviceSynchronize() == cudaSuccess;
        ran += ok;
        attune_plan_destroy(plan);
    }
    lt_io_free(&io);
    free(list);
    return n < 0 || arc != 0 ? -1 : ran;
}

/* The context's limits that a launch can change behind the caller's back
 * (the per-thread stack grows for a kernel that needs more and stays
 * grown: CUDA runtime API, cudaDeviceSetLimit) or that a library may set,
 * on one line: whether a process's mode follows one of them. */
static void lt_limits(const char *when)
{
    size_t stack = 0, gran = 0, persist = 0;
    cudaDeviceGetLimit(&stack, cudaLimitStackSize);
    cudaDeviceGetLimit(&gran, cudaLimitMaxL2FetchGranularity);
    cudaDeviceGetLimit(&persist, cudaLimitPersistingL2CacheSize);
    printf("limits %s: stack %zu B a thread, L2 fetch granularity %zu B, persisting L2 %zu B\n",
           when, stack, gran, persist);
}

/* The command line: the shape, its tactics and the options. */
typedef struct lt_opts {
    int places, reps, calls, ntac;
    long long stack; /* -1: not set */
    const char *key, *tac[64], *prelude;
    attune_dims s;
} lt_opts;

/* Parse argv into o. Returns -1 to go on, else the exit status: 0 after
 * --help (usage on stdout), 2 on bad arguments (a message or the usage on
 * stderr). */
static int lt_args(int argc, char **argv, lt_opts *o)
{
    int bad = 0, help = 0;
    *o = (lt_opts){.places = 3, .reps = 15, .stack = -1};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--placements") == 0 && i + 1 < argc)
            o->places = atoi(argv[++i]);
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
            o->reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--calls") == 0 && i + 1 < argc)
            o->calls = atoi(argv[++i]);
        else if (strcmp(argv[i], "--stack") == 0 && i + 1 < argc) {
            char *end = NULL;
            o->stack = strtoll(argv[++i], &end, 10);
            bad |= end == argv[i] || *end != '\0' || o->stack < 0;
        } else if (strcmp(argv[i], "--prelude") == 0)
            o->prelude = "";
        else if (strncmp(argv[i], "--prelude=", 10) == 0)
            o->prelude = argv[i] + 10;
        else if (strcmp(argv[i], "--help") == 0)
            help = 1;
        else if (argv[i][0] == '-')
            bad = 1;
        else if (o->key == NULL)
            o->key = argv[i];
        else if (o->ntac < 64)
            o->tac[o->ntac++] = argv[i];
        else
            bad = 1; /* more tactics than one run times */
    }
    if (!help && o->key != NULL && lt_parse_key(o->key, &o->s) != 0) {
        fprintf(stderr, "libattune_time: %s is not a shape key of f16, bf16 or f32 "
                        "(b1.hq8.hkv1.sq50.skv1018.d256.f16.nc)\n", o->key);
        return 2;
    }
    if (!help && !bad && o->key != NULL && o->ntac > 0 && o->places >= 1 &&
        o->places <= LT_MAX_PLACES && o->reps >= 1 && o->reps <= LT_MAX_REPS && o->calls >= 0)
        return -1;
    fprintf(help ? stdout : stderr,
            "usage: libattune_time SHAPE_KEY TACTIC [TACTIC...] [--placements 1-%d (default 3)]\n"
            "       [--reps 1-%d (default 15)] [--calls N (default 0: about 2 ms of calls)]\n"
            "       [--prelude[=PREFIX]] [--stack BYTES]\n"
            "Times each TACTIC (at most 64) on SHAPE_KEY through libattune on CUDA device 0:\n"
            "a graph of back-to-back runs replayed between events, median of the replays,\n"
            "on each placement's fresh plan and buffers. Prints every placement (q's address\n"
            "and its offset in a 2 MiB page), then the mean over placements.\n"
            "--prelude first plans and runs every tactic the device lists for the shape\n"
            "(=PREFIX: those whose text starts with PREFIX). --stack sets the context's\n"
            "per-thread stack first (cudaLimitStackSize). The context's limits are printed\n"
            "before the prelude and before the timing.\n",
            LT_MAX_PLACES, LT_MAX_REPS);
    return help ? 0 : 2;
}

int main(int argc, char **argv)
{
    lt_opts o;
    int arc = lt_args(argc, argv, &o);
    if (arc >= 0)
        return arc;
    const int places = o.places, reps = o.reps, calls = o.calls, ntac = o.ntac;
    const long long stack = o.stack;
    const char *key = o.key, *const *tac = o.tac, *prelude = o.prelude;
    const attune_dims s = o.s;
    char err[256] = "";
    attune_dev *dev = NULL;
    if (attune_dev_open("0", &dev, err, sizeof err) != 0) {
        fprintf(stderr, "libattune_time: %s\n", err);
        return 1;
    }
    if (stack >= 0 && cudaDeviceSetLimit(cudaLimitStackSize, (size_t)stack) != cudaSuccess) {
        fprintf(stderr, "libattune_time: --stack %lld: %s\n", stack,
                cudaGetErrorString(cudaGetLastError()));
        attune_dev_close(dev);
        return 1;
    }
    lt_limits("at start");
    if (prelude != NULL) {
        int ran = lt_prelude(dev, &s, prelude);
        if (ran < 0) {
            fprintf(stderr, "libattune_time: --prelude: cannot list or allocate\n");
            attune_dev_close(dev);
            return 1;
        }
        printf("prelude: %d tactics%s%s planned and run\n", ran, *prelude ? " of " : "", prelude);
        lt_limits("after the prelude");
    }
    unsigned seed = 1;
    void **held = calloc((size_t)(10 * places * ntac), sizeof *held);
    attune_plan **plans = calloc((size_t)(2 * places * ntac), sizeof *plans);
    int nheld = 0, nplans = 0, failed = 0;
    if (held == NULL || plans == NULL) {
        fprintf(stderr, "libattune_time: out of memory\n");
        return 1;
    }
    for (int j = 0; j < ntac; j++) {
        double us[LT_MAX_PLACES], first = 0;
        uintptr_t q_at = 0;
        int n = 0;
        for (int p = 0; p < places; p++) {
            int c = calls;
            if (c == 0) { /* calibrate on a first placement of 10 calls */
                if (lt_time(dev, &s, tac[j], 10, 3, &seed, held, &nheld, plans, &nplans,
                            &first, &q_at) != 0)
                    break;
                c = first > 0 ? (int)(2000.0 / first) : 10;
                c = c < 1 ? 1 : c > 1000 ? 1000 : c;
            }
            if (lt_time(dev, &s, tac[j], c, reps, &seed, held, &nheld, plans, &nplans, &us[n],
                        &q_at) != 0)
                break;
            printf("  %-60s place %d: %.2f us (%d calls; q at %#llx, +%llu in its 2 MiB)\n",
                   tac[j], p, us[n], c, (unsigned long long)q_at,
                   (unsigned long long)(q_at & ((2u << 20) - 1)));
            n++;
        }
        if (n < places) {
            failed = 1;
            continue;
        }
        double sorted[LT_MAX_PLACES], mean = 0;
        memcpy(sorted, us, sizeof(double) * (size_t)n);
        qsort(sorted, (size_t)n, sizeof sorted[0], lt_cmp);
        for (int p = 0; p < n; p++)
            mean += us[p] / n;
        printf("%-40s %-60s mean %.2f us over %d placements (median %.2f, min %.2f, max %.2f)\n",
               key, tac[j], mean, n, sorted[n / 2], sorted[0], sorted[n - 1]);
        fflush(stdout);
    }
    for (int i = 0; i < nplans; i++)
        attune_plan_destroy(plans[i]);
    for (int i = 0; i < nheld; i++)
        cudaFree(held[i]);
    free(plans);
    free(held);
    attune_dev_close(dev);
    return failed;
}
