/* test_libattune.c (gpu) -- libattune's public ABI on CUDA device 0, as a
 * runtime uses it (libattune.so and the CUDA runtime only): every tactic
 * the device lists for a small grid runs on device views against a float64
 * host reference, in [b, h, s, d] and [b, s, h, d] layouts with gaps in the
 * rows, at the planned and at shorter lengths (cuDNN tactics refuse those:
 * checked), writing its output rows and nothing else; a run captured in a
 * CUDA graph and replayed; two threads, each with its own plan and stream,
 * at once; attune_auto under a capture plans nothing (an unprepared shape
 * is EBUSY, the capture stays whole). Skips (77) without a GPU. */
#include "../test.h"

#include "../libattune_ref.h"

#ifdef ATTUNE_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <pthread.h>

#define CU(x)                                                                            \
    do {                                                                                 \
        cudaError_t e_ = (x);                                                            \
        if (e_ != cudaSuccess) {                                                         \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(2);                                                                     \
        }                                                                                \
    } while (0)

/* Host and device copies of one call's four views. */
typedef struct views {
    attune_tensor q, k, v, o;     /* device */
    void *hq, *hk, *hv, *ho, *before;
    size_t nq, nk, es;
} views;

static void views_make(views *w, const attune_dims *s, int lay, int64_t pad, uint64_t seed)
{
    memset(w, 0, sizeof *w);
    w->es = ref_es(s->dtype);
    w->nq = ref_view(lay, s->b, s->hq, s->sq, s->d, pad, NULL, &w->q);
    w->nk = ref_view(lay, s->b, s->hkv, s->skv, s->d, pad, NULL, &w->k);
    ref_view(lay, s->b, s->hkv, s->skv, s->d, pad, NULL, &w->v);
    ref_view(lay, s->b, s->hq, s->sq, s->d, pad, NULL, &w->o);
    w->hq = malloc(w->nq * w->es), w->hk = malloc(w->nk * w->es), w->hv = malloc(w->nk * w->es);
    w->ho = malloc(w->nq * w->es), w->before = malloc(w->nq * w->es);
    ref_fill(w->hq, s->dtype, w->nq, &seed);
    ref_fill(w->hk, s->dtype, w->nk, &seed);
    ref_fill(w->hv, s->dtype, w->nk, &seed);
    ref_poison(w->before, s->dtype, w->nq);
    CU(cudaMalloc(&w->q.data, w->nq * w->es));
    CU(cudaMalloc(&w->k.data, w->nk * w->es));
    CU(cudaMalloc(&w->v.data, w->nk * w->es));
    CU(cudaMalloc(&w->o.data, w->nq * w->es));
    CU(cudaMemcpy(w->q.data, w->hq, w->nq * w->es, cudaMemcpyHostToDevice));
    CU(cudaMemcpy(w->k.data, w->hk, w->nk * w->es, cudaMemcpyHostToDevice));
    CU(cudaMemcpy(w->v.data, w->hv, w->nk * w->es, cudaMemcpyHostToDevice));
}

static void views_poison(views *w)
{
    CU(cudaMemcpy(w->o.data, w->before, w->nq * w->es, cudaMemcpyHostToDevice));
}

static void views_free(views *w)
{
    cudaFree(w->q.data), cudaFree(w->k.data), cudaFree(w->v.data), cudaFree(w->o.data);
    free(w->hq), free(w->hk), free(w->hv), free(w->ho), free(w->before);
}

/* The host views of w (for the reference and the comparison). */
static void host_views(const views *w, attune_tensor *q, attune_tensor *k, attune_tensor *v,
                       attune_tensor *o)
{
    *q = (attune_tensor){w->hq, w->q.stride_b, w->q.stride_h, w->q.stride_s};
    *k = (attune_tensor){w->hk, w->k.stride_b, w->k.stride_h, w->k.stride_s};
    *v = (attune_tensor){w->hv, w->v.stride_b, w->v.stride_h, w->v.stride_s};
    *o = (attune_tensor){w->ho, w->o.stride_b, w->o.stride_h, w->o.stride_s};
}

/* Fetch the output and check it against ref (rows sampled every `every`). */
static void views_check(views *w, const attune_dims *s, int64_t sq, const double *ref,
                        const char *what, const char *tac, int every)
{
    ref_errs e;
    attune_tensor q, k, v, o;
    CU(cudaMemcpy(w->ho, w->o.data, w->nq * w->es, cudaMemcpyDeviceToHost));
    host_views(w, &q, &k, &v, &o);
    ref_compare(s, sq, w->ho, &o, every, ref, &e);
    e.touched = ref_touched(s, sq, &o, w->ho, w->before, w->nq);
    CHECK_MSG(e.compared > 0 && e.nonfinite == 0 && e.touched == 0 &&
                  e.rel <= ref_bound(s->dtype, tac),
              "%s %s: sq %lld: rel %.3g (bound %.3g), %lld non-finite, %lld touched", tac, what,
              (long long)sq, e.rel, ref_bound(s->dtype, tac), (long long)e.nonfinite,
              (long long)e.touched);
}

static int g_ran, g_cudnn_short, g_cudnn_views;

/* One shape's views in one layout, with the references at the planned
 * lengths and at shorter ones (fewer keys, decode-like; one query fewer). */
typedef struct layout_run {
    views w;
    int lay, every;
    int64_t sq2, skv2;
    double *ref, *ref2;
} layout_run;

static void layout_make(layout_run *L, const attune_dims *s, int lay)
{
    attune_tensor q, k, v, o;
    L->lay = lay;
    L->every = s->sq > 64 ? 7 : 1;
    views_make(&L->w, s, lay, lay ? 8 : 0, 100 + (uint64_t)lay);
    host_views(&L->w, &q, &k, &v, &o);
    L->sq2 = s->sq > 1 ? s->sq - 1 : 1;
    L->skv2 = s->skv - 7;
    L->ref = malloc(ref_size(s, s->sq, L->every) * sizeof(double) + 1);
    L->ref2 = malloc(ref_size(s, L->sq2, L->every) * sizeof(double) + 1);
    ref_compute(s, s->sq, s->skv, L->w.hq, &q, L->w.hk, &k, L->w.hv, &v, L->every, L->ref);
    ref_compute(s, L->sq2, L->skv2, L->w.hq, &q, L->w.hk, &k, L->w.hv, &v, L->every, L->ref2);
}

static void layout_free(layout_run *L)
{
    views_free(&L->w);
    free(L->ref);
    free(L->ref2);
}

/* One tactic on both layouts: planned lengths, a shorter call, and (second
 * layout) a run captured in a CUDA graph and replayed. */
static void one_tactic(attune_dev *dev, const attune_dims *s, const char *tac, layout_run L[2])
{
    char err[256];
    attune_plan *plan = NULL;
    int rc = attune_plan_create(dev, s, tac, &plan, err, sizeof err);
    if (rc == ATTUNE_RT_EUNSUPP && strncmp(tac, "cudnn", 5) == 0)
        return; /* cuDNN may refuse an engine it listed (docs/cudnn.md) */
    CHECK_MSG(rc == 0, "plan %s: %s", tac, err);
    if (rc != 0)
        return;
    const int cudnn = strncmp(tac, "cudnn", 5) == 0;
    cudaStream_t st;
    CU(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    for (int li = 0; li < 2; li++) {
        views *w = &L[li].w;
        const char *name = li ? "bshd+gaps" : "bhsd";
        views_poison(w);
        /* an error the caller left pending on the thread is not the run's
         * (our kernels only: what cuBLAS and cuDNN make of one is theirs) */
        const int plant = li == 0 && strncmp(tac, "fused", 5) == 0;
        if (plant)
            (void)cudaSetDevice(1 << 20); /* fails: cudaErrorInvalidDevice, left pending */
        rc = attune_plan_run(plan, &w->q, &w->k, &w->v, &w->o, 0, 0, st);
        if (plant)
            (void)cudaGetLastError();
        CU(cudaStreamSynchronize(st));
        CHECK_MSG(rc == 0, "%s %s: %s", tac, name, attune_strerror(rc));
        if (rc == 0)
            views_check(w, s, s->sq, L[li].ref, name, tac, L[li].every);
        views_poison(w);
        rc = attune_plan_run(plan, &w->q, &w->k, &w->v, &w->o, L[li].sq2, L[li].skv2, st);
        CU(cudaStreamSynchronize(st));
        if (cudnn) {
            CHECK_EQ_INT(rc, ATTUNE_RT_EUNSUPP);
            g_cudnn_short++;
        } else {
            CHECK_MSG(rc == 0, "%s %s shorter: %s", tac, name, attune_strerror(rc));
            if (rc == 0)
                views_check(w, s, L[li].sq2, L[li].ref2, "shorter", tac, L[li].every);
        }
        if (li == 1) { /* captured in a graph, replayed twice */
            cudaGraph_t graph;
            cudaGraphExec_t exec;
            views_poison(w);
            CU(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
            rc = attune_plan_run(plan, &w->q, &w->k, &w->v, &w->o, 0, 0, st);
            CU(cudaStreamEndCapture(st, &graph));
            CHECK_MSG(rc == 0, "%s captured: %s", tac, attune_strerror(rc));
            CU(cudaGraphInstantiate(&exec, graph, 0));
            CU(cudaGraphLaunch(exec, st));
            CU(cudaGraphLaunch(exec, st));
            CU(cudaStreamSynchronize(st));
            if (rc == 0)
                views_check(w, s, s->sq, L[li].ref, "graph replay", tac, L[li].every);
            cudaGraphExecDestroy(exec);
            cudaGraphDestroy(graph);
        }
    }
    if (cudnn) { /* told the second layout's strides: a graph reads them in place */
        views *w = &L[1].w;
        CU(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
        rc = attune_plan_set_views(plan, &w->q, &w->k, &w->v, &w->o, st, err, sizeof err);
        cudaGraph_t none;
        CU(cudaStreamEndCapture(st, &none));
        cudaGraphDestroy(none);
        CHECK_EQ_INT(rc, ATTUNE_RT_EBUSY); /* nothing is built while capturing */
        rc = attune_plan_set_views(plan, &w->q, &w->k, &w->v, &w->o, st, err, sizeof err);
        CHECK_MSG(rc == 0 || (rc == ATTUNE_RT_EUNSUPP && err[0]), "%s set_views: %s", tac, err);
        for (int li = 1; rc == 0 && li >= 0; li--) { /* its strides, then others (copies) */
            views_poison(&L[li].w);
            int r2 = attune_plan_run(plan, &L[li].w.q, &L[li].w.k, &L[li].w.v, &L[li].w.o, 0,
                                     0, st);
            CU(cudaStreamSynchronize(st));
            CHECK_MSG(r2 == 0, "%s after set_views: %s", tac, attune_strerror(r2));
            if (r2 == 0)
                views_check(&L[li].w, s, s->sq, L[li].ref, li ? "views in place" : "other views",
                            tac, L[li].every);
        }
        g_cudnn_views += rc == 0;
    }
    g_ran++;
    cudaStreamDestroy(st);
    attune_plan_destroy(plan);
}

static void every_tactic_should_run_on_views(void)
{
    attune_dev *dev = NULL;
    char err[256];
    CHECK_EQ_INT(attune_dev_open("0", &dev, err, sizeof err), 0);
    if (dev == NULL)
        return;
    /* small enough for a host reference, large enough for every kernel
     * family (sm90a tiles, split-KV, folds) to be listed */
    const attune_dims shapes[] = {
        {2, 8, 2, 77, 300, 128, ATTUNE_DTYPE_F16, 1},
        {1, 8, 1, 50, 1018, 256, ATTUNE_DTYPE_BF16, 0},
        {2, 4, 4, 130, 257, 64, ATTUNE_DTYPE_F16, 0},
        {1, 16, 4, 3, 700, 128, ATTUNE_DTYPE_BF16, 1},
        {1, 4, 4, 40, 40, 32, ATTUNE_DTYPE_F32, 1},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const attune_dims *s = &shapes[i];
        char (*list)[ATTUNE_TACTIC_MAX] = calloc(2048, ATTUNE_TACTIC_MAX);
        int n = attune_tactics(dev, s, list, 2048, err, sizeof err);
        CHECK_MSG(n > 0 && n <= 2048, "tactics %d: %s", n, err);
        char key[128];
        attune_shape_key(s, key, sizeof key, NULL, 0);
        layout_run L[2];
        layout_make(&L[0], s, REF_BHSD);
        layout_make(&L[1], s, REF_BSHD);
        for (int j = 0; j < n && j < 2048; j++)
            one_tactic(dev, s, list[j], L);
        fprintf(stderr, "%s: %d tactics listed\n", key, n);
        layout_free(&L[0]);
        layout_free(&L[1]);
        free(list);
    }
    CHECK(g_ran > 100);
    fprintf(stderr, "cudnn tactics run on views in place after set_views: %d (%d shorter calls "
                    "refused)\n", g_cudnn_views, g_cudnn_short);
    CHECK(g_cudnn_short == 0 || g_cudnn_views > 0); /* cuDNN here: some engine reads them */
    attune_dev_close(dev);
}

/* ---- two threads at once */

typedef struct worker {
    attune_dev *dev;
    const attune_dims *s;
    const char *tac;
    uint64_t seed;
    int rc, runs;
    ref_errs e;
} worker;

static void *work(void *arg)
{
    worker *wk = arg;
    attune_plan *plan = NULL;
    cudaStream_t st;
    views w;
    char err[256];
    wk->rc = attune_plan_create(wk->dev, wk->s, wk->tac, &plan, err, sizeof err);
    if (wk->rc != 0)
        return NULL;
    CU(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    views_make(&w, wk->s, REF_BSHD, 0, wk->seed);
    for (int it = 0; it < 50 && wk->rc == 0; it++) {
        views_poison(&w);
        wk->rc = attune_plan_run(plan, &w.q, &w.k, &w.v, &w.o, 0, 0, st);
        CU(cudaStreamSynchronize(st));
        wk->runs++;
    }
    CU(cudaMemcpy(w.ho, w.o.data, w.nq * w.es, cudaMemcpyDeviceToHost));
    const attune_tensor q = {w.hq, w.q.stride_b, w.q.stride_h, w.q.stride_s};
    const attune_tensor k = {w.hk, w.k.stride_b, w.k.stride_h, w.k.stride_s};
    const attune_tensor v = {w.hv, w.v.stride_b, w.v.stride_h, w.v.stride_s};
    const attune_tensor o = {w.ho, w.o.stride_b, w.o.stride_h, w.o.stride_s};
    ref_check(wk->s, wk->s->sq, wk->s->skv, w.hq, &q, w.hk, &k, w.hv, &v, w.ho, &o, 5, &wk->e);
    views_free(&w);
    cudaStreamDestroy(st);
    attune_plan_destroy(plan);
    return NULL;
}

static void two_threads_should_run_their_plans_at_once(void)
{
    attune_dev *dev = NULL;
    char err[256];
    CHECK_EQ_INT(attune_dev_open("0", &dev, err, sizeof err), 0);
    const attune_dims s = {2, 8, 2, 200, 333, 128, ATTUNE_DTYPE_F16, 1};
    /* a GEMM plan (cuBLAS handle, S/P workspace, pad copies) and the
     * first fused one listed */
    char tacs[2][ATTUNE_TACTIC_MAX] = {"split/acc=f32/pad=8", ""};
    char (*list)[ATTUNE_TACTIC_MAX] = calloc(2048, ATTUNE_TACTIC_MAX);
    int n = attune_tactics(dev, &s, list, 2048, err, sizeof err);
    for (int i = 0; i < n && i < 2048 && !tacs[1][0]; i++)
        if (strncmp(list[i], "fused/", 6) == 0)
            snprintf(tacs[1], sizeof tacs[1], "%s", list[i]);
    free(list);
    for (int t = 0; t < 2; t++) {
        worker wk[2];
        memset(wk, 0, sizeof wk);
        for (int i = 0; i < 2; i++)
            wk[i].dev = dev, wk[i].s = &s, wk[i].tac = tacs[t], wk[i].seed = 1 + (uint64_t)i;
        pthread_t th[2];
        for (int i = 0; i < 2; i++)
            pthread_create(&th[i], NULL, work, &wk[i]);
        for (int i = 0; i < 2; i++) {
            pthread_join(th[i], NULL);
            CHECK_MSG(wk[i].rc == 0 && wk[i].runs == 50, "%s thread %d: rc %d after %d runs",
                      tacs[t], i, wk[i].rc, wk[i].runs);
            CHECK_MSG(wk[i].e.compared > 0 && wk[i].e.nonfinite == 0 &&
                          wk[i].e.rel <= ref_bound(s.dtype, tacs[t]),
                      "%s thread %d: rel %.3g, %lld non-finite", tacs[t], i, wk[i].e.rel,
                      (long long)wk[i].e.nonfinite);
        }
    }
    attune_dev_close(dev);
}

/* ---- e4m3: descale factors reach the kernel, read at each run */

/* The value of e4m3 pattern x (OCP FP8 E4M3: bias 7, no infinities). */
static float e4m3_value(int x)
{
    int e = (x >> 3) & 15, m = x & 7;
    float v = e == 0 ? ldexpf((float)m, -9) : ldexpf(1.0f + m / 8.0f, e - 7);
    return (x & 0x80) ? -v : v;
}

/* The nearest e4m3 pattern to f, |f| <= 448 (ties: either; the reference
 * reads what is stored, so the rounding need not be the library's). */
static uint8_t e4m3_nearest(float f)
{
    int best = 0;
    for (int x = 0; x < 256; x++)
        if ((x & 0x7f) != 0x7f && fabsf(e4m3_value(x) - f) < fabsf(e4m3_value(best) - f))
            best = x;
    return (uint8_t)best;
}

static float bf16_value(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Relative L2 error of the device bf16 output o against ref. */
static double e4m3_rel(const void *o, size_t n, const double *ref)
{
    uint16_t *h = malloc(n * 2);
    CU(cudaMemcpy(h, o, n * 2, cudaMemcpyDeviceToHost));
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double x = bf16_value(h[i]), d = x - ref[i];
        num += isfinite(x) ? d * d : 1e30;
        den += ref[i] * ref[i];
    }
    free(h);
    return sqrt(num / den);
}

/* The float64 reference of e4m3_descales_should_reach_the_kernel's shape
 * (b1, hq 4, hkv 2, sq 128, skv 256, d 128, non-causal) into ref, from the
 * stored q, k, v values x8 times their descales desc. */
static void e4m3_reference(const uint8_t *const x8[3], const float desc[3], double *ref)
{
    double p[256];
    for (int h = 0; h < 4; h++)
        for (int i = 0; i < 128; i++) {
            const uint8_t *q = x8[0] + ((size_t)h * 128 + i) * 128;
            const uint8_t *kb = x8[1] + (size_t)(h / 2) * 256 * 128, *vb = x8[2] + (size_t)(h / 2) * 256 * 128;
            double m = -INFINITY, l = 0;
            for (int j = 0; j < 256; j++) {
                double a = 0;
                for (int c = 0; c < 128; c++)
                    a += (double)e4m3_value(q[c]) * desc[0] * e4m3_value(kb[j * 128 + c]) * desc[1];
                p[j] = a / sqrt(128.0);
                m = p[j] > m ? p[j] : m;
            }
            for (int j = 0; j < 256; j++)
                l += (p[j] = exp(p[j] - m));
            for (int c = 0; c < 128; c++) {
                double o = 0;
                for (int j = 0; j < 256; j++)
                    o += p[j] * e4m3_value(vb[j * 128 + c]) * desc[2];
                ref[((size_t)h * 128 + i) * 128 + c] = o / l;
            }
        }
}

/* attune_auto on the e4m3 shape s with the descales ddesc (device) set by
 * attune_auto_set_descales: the lookup goes to a port nothing listens on,
 * so the device's listed default runs. The relative error of its output
 * against ref, with descales (*with) and after they are unset (*none);
 * 0, or 1 when attune_auto is not built. */
static int e4m3_auto_rel(attune_dev *dev, const attune_dims *s, const attune_tensor t[4],
                         const float *ddesc, const double *ref, size_t nq, double *with,
                         double *none)
{
    attune_auto *a = NULL;
    attune_choice ch;
    char err[256];
    int rc = attune_auto_new(dev, "http://127.0.0.1:9", 0, &a, err, sizeof err);
    if (rc == ATTUNE_RT_EUNSUPP) {
        fprintf(stderr, "  e4m3 attune_auto: not built (%s)\n", err);
        return 1;
    }
    CHECK_MSG(rc == 0, "attune_auto_new: %s", err);
    if (rc != 0)
        return 1;
    CHECK_EQ_INT(attune_auto_set_descales(a, ddesc, ddesc + 1, ddesc + 2), 0);
    CHECK_EQ_INT(attune_auto_prepare(a, s, NULL, &ch, err, sizeof err), 0);
    CU(cudaMemset(t[3].data, 0xff, nq * 2));
    CHECK_EQ_INT(attune_auto_run(a, s, &t[0], &t[1], &t[2], &t[3], NULL, err, sizeof err), 0);
    CU(cudaDeviceSynchronize());
    *with = e4m3_rel(t[3].data, nq, ref);
    CHECK_EQ_INT(attune_auto_set_descales(a, NULL, NULL, NULL), 0);
    CHECK_EQ_INT(attune_auto_run(a, s, &t[0], &t[1], &t[2], &t[3], NULL, err, sizeof err), 0);
    CU(cudaDeviceSynchronize());
    *none = e4m3_rel(t[3].data, nq, ref);
    fprintf(stderr, "  e4m3 attune_auto ran %s (%s): rel %.2e; unset %.2f\n", ch.tactic,
            ch.source, *with, *none);
    attune_auto_free(a);
    return 0;
}

static void e4m3_descales_should_reach_the_kernel(void)
{
    const attune_dims s = {1, 4, 2, 128, 256, 128, ATTUNE_DTYPE_E4M3, 0};
    const size_t nq = 4 * 128 * 128, nk = 2 * 256 * 128;
    attune_dev *dev = NULL;
    char err[256], (*tac)[ATTUNE_TACTIC_MAX] = malloc(64 * sizeof *tac);
    CHECK_EQ_INT(attune_dev_open("0", &dev, err, sizeof err), 0);
    int nt = dev != NULL ? attune_tactics(dev, &s, tac, 64, err, sizeof err) : 0;
    int major = 0;
    CU(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
    if (major < 9) { /* no FP8 engines */
        CHECK_EQ_INT(nt, 0);
        goto out;
    }
    CHECK_MSG(nt > 0, "no e4m3 tactic listed: %s", err);
    if (nt <= 0)
        goto out;
    /* inputs: uneven values, per-tensor descale = amax / 448 */
    size_t n[3] = {nq, nk, nk};
    float *x[3], desc[3];
    uint8_t *x8[3];
    void *d8[3];
    uint64_t st = 0x9e3779b97f4a7c15ull;
    for (int t = 0; t < 3; t++) {
        x[t] = malloc(n[t] * sizeof(float));
        x8[t] = malloc(n[t]);
        float amax = 0;
        for (size_t i = 0; i < n[t]; i++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            float u = (float)((st >> 40) & 0xffffff) / 16777216.0f - 0.5f;
            x[t][i] = u * (1.0f + 3.0f * (float)((i * 7) % 5));
            amax = fmaxf(amax, fabsf(x[t][i]));
        }
        desc[t] = amax / 448.0f;
        for (size_t i = 0; i < n[t]; i++)
            x8[t][i] = e4m3_nearest(x[t][i] / desc[t]);
        CU(cudaMalloc(&d8[t], n[t]));
        CU(cudaMemcpy(d8[t], x8[t], n[t], cudaMemcpyHostToDevice));
    }
    /* float64 reference from the stored values times their descales */
    double *ref = malloc(nq * sizeof(double));
    e4m3_reference((const uint8_t *const *)x8, desc, ref);
    float *ddesc;
    void *dout;
    CU(cudaMalloc((void **)&ddesc, 3 * sizeof(float)));
    CU(cudaMemcpy(ddesc, desc, sizeof desc, cudaMemcpyHostToDevice));
    CU(cudaMalloc(&dout, nq * 2));
    attune_tensor tq = {d8[0], 4 * 128 * 128, 128 * 128, 128}, tk = {d8[1], 2 * 256 * 128, 256 * 128, 128},
                  tv = {d8[2], 2 * 256 * 128, 256 * 128, 128}, to = {dout, 4 * 128 * 128, 128 * 128, 128};
    int ran = 0;
    for (int i = 0; i < nt; i++) {
        attune_plan *pl = NULL;
        int rc = attune_plan_create(dev, &s, tac[i], &pl, err, sizeof err);
        if (rc == ATTUNE_RT_EUNSUPP) {
            fprintf(stderr, "  e4m3 %s: unsupported: %s\n", tac[i], err);
            continue;
        }
        CHECK_MSG(rc == 0, "e4m3 %s: plan: %s", tac[i], err);
        if (rc != 0)
            continue;
        CHECK_EQ_INT(attune_plan_set_descales(pl, ddesc, ddesc + 1, ddesc + 2), 0);
        CU(cudaMemset(dout, 0xff, nq * 2));
        CHECK_EQ_INT(attune_plan_run(pl, &tq, &tk, &tv, &to, 0, 0, NULL), 0);
        CU(cudaDeviceSynchronize());
        double right = e4m3_rel(dout, nq, ref);
        /* a changed descale_v in place: read at the next run, the output doubles */
        float twice = 2 * desc[2];
        CU(cudaMemcpy(ddesc + 2, &twice, sizeof twice, cudaMemcpyHostToDevice));
        CHECK_EQ_INT(attune_plan_run(pl, &tq, &tk, &tv, &to, 0, 0, NULL), 0);
        CU(cudaDeviceSynchronize());
        double doubled = e4m3_rel(dout, nq, ref);
        CU(cudaMemcpy(ddesc + 2, &desc[2], sizeof desc[2], cudaMemcpyHostToDevice));
        /* no descales: 1 each, far from the reference */
        CHECK_EQ_INT(attune_plan_set_descales(pl, NULL, NULL, NULL), 0);
        CHECK_EQ_INT(attune_plan_run(pl, &tq, &tk, &tv, &to, 0, 0, NULL), 0);
        CU(cudaDeviceSynchronize());
        double none = e4m3_rel(dout, nq, ref);
        CHECK_MSG(right <= 0.1, "e4m3 %s: rel %.3g", tac[i], right);
        CHECK_MSG(fabs(doubled - 1.0) < 0.2, "e4m3 %s: descale_v x2 gave rel %.3g, not ~1", tac[i],
                  doubled);
        CHECK_MSG(none > 0.5, "e4m3 %s: without descales rel %.3g", tac[i], none);
        fprintf(stderr, "  e4m3 %s: rel %.2e; descale_v x2 %.2f; none %.2f\n", tac[i], right,
                doubled, none);
        attune_plan_destroy(pl);
        ran++;
    }
    CHECK_MSG(ran > 0, "%s", "no e4m3 tactic ran");
    /* the same through attune_auto: its descales reach the plan it makes */
    const attune_tensor all[4] = {tq, tk, tv, to};
    double with = 0, unset = 0;
    if (e4m3_auto_rel(dev, &s, all, ddesc, ref, nq, &with, &unset) == 0) {
        CHECK_MSG(with <= 0.1, "e4m3 attune_auto: rel %.3g", with);
        CHECK_MSG(unset > 0.5, "e4m3 attune_auto without descales: rel %.3g", unset);
    }
    for (int t = 0; t < 3; t++) {
        free(x[t]);
        free(x8[t]);
        cudaFree(d8[t]);
    }
    free(ref);
    cudaFree(ddesc);
    cudaFree(dout);
out:
    free(tac);
    attune_dev_close(dev);
}

/* attune_auto under a CUDA graph capture (libattune 1.4): a shape prepared
 * on the capturing stream runs its plan, captured and replayed right; a
 * shape met first under the capture is ATTUNE_RT_EBUSY and leaves the
 * capture whole (nothing planned, allocated or freed: the counters say
 * so), where before it planned, and cudaMalloc broke the capture. */
static void auto_should_not_plan_under_capture(void)
{
    attune_dev *dev = NULL;
    attune_auto *a = NULL;
    char err[256];
    CHECK_EQ_INT(attune_dev_open("0", &dev, err, sizeof err), 0);
    if (dev == NULL)
        return;
    int rc = attune_auto_new(dev, "http://127.0.0.1:9", 0, &a, err, sizeof err);
    if (rc == ATTUNE_RT_EUNSUPP) {
        fprintf(stderr, "  attune_auto: not built (%s)\n", err);
        attune_dev_close(dev);
        return;
    }
    CHECK_MSG(rc == 0, "attune_auto_new: %s", err);
    const attune_dims s = {1, 4, 4, 64, 64, 64, ATTUNE_DTYPE_F16, 0};
    attune_dims other = s;
    other.skv = 48; /* its own bucket (48), never prepared */
    views w;
    attune_tensor q, k, v, o;
    views_make(&w, &s, REF_BHSD, 0, 41);
    host_views(&w, &q, &k, &v, &o);
    double *ref = malloc(ref_size(&s, s.sq, 1) * sizeof *ref + 1);
    ref_compute(&s, s.sq, s.skv, w.hq, &q, w.hk, &k, w.hv, &v, 1, ref);
    cudaStream_t st;
    CU(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    attune_choice ch;
    CHECK_EQ_INT(attune_auto_prepare(a, &s, st, &ch, err, sizeof err), 0);
    attune_auto_stats before, after;
    CHECK_EQ_INT(attune_auto_get_stats(a, &before, sizeof before), 0);
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    views_poison(&w);
    CU(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    int prepared = attune_auto_run(a, &s, &w.q, &w.k, &w.v, &w.o, st, err, sizeof err);
    int unprepared = attune_auto_run(a, &other, &w.q, &w.k, &w.v, &w.o, st, err, sizeof err);
    cudaError_t ended = cudaStreamEndCapture(st, &graph);
    CHECK_EQ_INT(attune_auto_get_stats(a, &after, sizeof after), 0);
    CHECK_MSG(prepared == 0, "prepared shape under capture: %s", attune_strerror(prepared));
    CHECK_MSG(unprepared == ATTUNE_RT_EBUSY && err[0] != 0,
              "unprepared shape under capture: %d (%s), want EBUSY", unprepared, err);
    CHECK_MSG(ended == cudaSuccess, "the capture ends whole: %s", cudaGetErrorString(ended));
    CHECK_MSG(after.plans == before.plans && after.evictions == before.evictions,
              "nothing planned under the capture (%llu -> %llu plans)",
              (unsigned long long)before.plans, (unsigned long long)after.plans);
    if (ended == cudaSuccess && prepared == 0) {
        CU(cudaGraphInstantiate(&exec, graph, 0));
        CU(cudaGraphLaunch(exec, st));
        CU(cudaStreamSynchronize(st));
        views_check(&w, &s, s.sq, ref, "attune_auto graph replay", ch.tactic, 1);
        cudaGraphExecDestroy(exec);
    }
    if (ended == cudaSuccess)
        cudaGraphDestroy(graph);
    /* after the capture the new shape plans as usual */
    CHECK_EQ_INT(attune_auto_run(a, &other, &w.q, &w.k, &w.v, &w.o, st, err, sizeof err), 0);
    CU(cudaStreamSynchronize(st));
    cudaStreamDestroy(st);
    free(ref);
    views_free(&w);
    attune_auto_free(a);
    attune_dev_close(dev);
}

int main(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
        fprintf(stderr, "skip: no CUDA device\n");
        return TEST_SKIP_CODE;
    }
    RUN(every_tactic_should_run_on_views);
    fprintf(stderr, "%d tactics ran; %d cudnn calls at other lengths refused\n", g_ran,
            g_cudnn_short);
    RUN(two_threads_should_run_their_plans_at_once);
    RUN(e4m3_descales_should_reach_the_kernel);
    RUN(auto_should_not_plan_under_capture);
    return test_summary();
}
#else
int main(void)
{
    fprintf(stderr, "skip: built without CUDA\n");
    return TEST_SKIP_CODE;
}
#endif
