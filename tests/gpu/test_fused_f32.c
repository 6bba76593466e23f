/* test_fused_f32.c -- the fused f32 kernel (`fused/acc=f32`,
 * kernels/cuda/cuda_fused_f32.cu) against a float64 CPU reference, through
 * the CUDA backend's plans on caller views (attn_cuda_ops.plan_new and
 * launch: what libattune and the tuner run).
 *
 * Every tactic the backend lists of the family (acc=f32 on fused) runs on
 * a grid of shapes: d 32, 40, 64, 128, 256 and three that are not
 * multiples of 4 (the kernel's scalar form), causal and not, sq < skv and
 * sq > skv (rows that see no key), MHA, GQA and MQA, decode (sq = 1),
 * lengths off every tile, views in [b, h, s, d] and [b, s, h, d] with
 * padded rows and unaligned bases, and calls at lengths shorter than the
 * planned ones. Inputs are seeded standard normals (ATTUNE_TEST_SEED
 * replays a run); every element of a view outside this call's rows and d
 * columns is NaN, so a kernel that reads past them shows; the output
 * buffer is poisoned (all bits set) and must stay so outside the call's
 * rows and columns. Each tactic runs twice (bit-identical, else a race),
 * then is timed (CUDA events over back-to-back launches). Checks: every
 * real output finite, rows that see no key exactly 0, relative L2 error
 * against the float64 reference <= 1e-4 (DESIGN.md's f32 bound; fp32
 * arithmetic gives ~1e-6), and planted errors caught: the output against
 * the reference of the opposite mask, here and through a session (the
 * tuner's path, with the backend's own float64 reference).
 *
 * Output: one line per (shape, tactic) with the error, the time and the
 * TFLOP/s, and on the bench shapes the best tactic's time beside
 * split/acc=f32's (cuBLAS SGEMM, the f32 path before this kernel), so a
 * single run says what is wrong and what it is worth. Exit 77 without a
 * GPU. ATTUNE_TEST_TACTIC=TEXT runs only tactics whose name holds TEXT;
 * ATTUNE_TEST_QUICK=1 keeps small cases and times one launch of each
 * (compute-sanitizer). */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../test.h"
#include "gpu_check.h"

#ifndef ATTUNE_HAVE_CUDA
int main(void)
{
    fprintf(stderr, "test_fused_f32: built without CUDA, skipped\n");
    return TEST_SKIP_CODE;
}
#else

#include <cuda_runtime.h>

#include "common/hash.h"
#include "kernels/attn.h"

/* What runs now, for a fatal CUDA error (an illegal address surfaces at
 * the next synchronisation, not at the launch that made it). */
static char g_ctx[512] = "setup";

#define CUDA_CHECK(x)                                                                          \
    do {                                                                                       \
        cudaError_t e_ = (x);                                                                  \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "%s:%d: %s: %s (while running %s)\n", __FILE__, __LINE__, #x,      \
                    cudaGetErrorString(e_), g_ctx);                                            \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

/* DESIGN.md's f32 bound on the relative L2 error (tuner/select.h
 * SELECT_DEFAULT_F32). */
#define TOL_F32 1e-4
/* A planted error must exceed the bound by this factor: a mask error moves
 * the output by O(1), not by rounding. */
#define PLANTED_MIN (100 * TOL_F32)

static const attn_ops *ops = &attn_cuda_ops;
static const char *g_filter;
static int g_big_smem; /* the device opts blocks in to >= 163 KB of shared memory */
static int g_quick;
static uint64_t g_seed;
static int n_cases, n_runs, n_planted;
static double worst_rel;
static char worst_what[256];

/* ---- views */

/* How a tensor's view lies in its buffer: [b, h, s, d] or [b, s, h, d],
 * rows `extra` floats longer than d, the first element `off` floats into
 * the buffer (off % 4 != 0 or extra % 4 != 0 takes the scalar form). */
typedef struct layout {
    const char *name;
    int bshd, extra, off;
} layout;

static const layout L_CONTIG = {"bhsd", 0, 0, 0};
static const layout L_BSHD = {"bshd+4", 1, 4, 0};
static const layout L_PADDED = {"bhsd+8", 0, 8, 4};
static const layout L_ODD = {"bshd+1@1", 1, 1, 1};

/* The view of heads x rows x d of batch b in layout ly over base (NULL:
 * strides only); *n gets the floats the buffer needs. */
static attn_tensor view_of(float *base, const layout *ly, int64_t b, int64_t heads, int64_t rows,
                           int64_t d, int64_t *n)
{
    attn_tensor t;
    int64_t ld = d + ly->extra;
    if (ly->bshd) {
        t.ss = heads * ld, t.sh = ld, t.sb = rows * heads * ld;
    } else {
        t.ss = ld, t.sh = rows * ld, t.sb = heads * rows * ld;
    }
    t.data = base != NULL ? base + ly->off : NULL;
    *n = ly->off + b * t.sb;
    return t;
}

static float *elem(const attn_tensor *t, int64_t bi, int64_t h, int64_t i, int64_t c)
{
    return (float *)t->data + bi * t->sb + h * t->sh + i * t->ss + c;
}

/* ---- inputs */

static double normal(uint64_t *st)
{
    double u1 = ((hash_splitmix64(st) >> 11) + 1.0) / 9007199254740993.0;
    double u2 = (hash_splitmix64(st) >> 11) / 9007199254740992.0;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* One tensor: host buffer (NaN everywhere but the view's first `rows`
 * rows and d columns, which hold standard normals), device copy, view on
 * each. */
typedef struct tensor {
    float *h, *dv;
    int64_t n;
    attn_tensor vh, vd; /* host and device views */
} tensor;

static void tensor_make(tensor *x, const layout *ly, int64_t b, int64_t heads, int64_t plan_rows,
                        int64_t rows, int64_t d, int fill, uint64_t *st)
{
    int64_t n;
    view_of(NULL, ly, b, heads, plan_rows, d, &n);
    x->n = n;
    x->h = gpu_xmalloc((size_t)n * sizeof(float));
    x->vh = view_of(x->h, ly, b, heads, plan_rows, d, &n);
    uint32_t nan_bits = 0xffffffffu;
    for (int64_t e = 0; e < n; e++)
        memcpy(&x->h[e], &nan_bits, 4);
    if (fill)
        for (int64_t bi = 0; bi < b; bi++)
            for (int64_t h = 0; h < heads; h++)
                for (int64_t i = 0; i < rows; i++)
                    for (int64_t c = 0; c < d; c++)
                        *elem(&x->vh, bi, h, i, c) = (float)normal(st);
    CUDA_CHECK(cudaMalloc((void **)&x->dv, (size_t)n * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(x->dv, x->h, (size_t)n * sizeof(float), cudaMemcpyHostToDevice));
    x->vd = x->vh;
    x->vd.data = x->dv + ((float *)x->vh.data - x->h);
}

static void tensor_free(tensor *x)
{
    free(x->h);
    CUDA_CHECK(cudaFree(x->dv));
}

/* ---- float64 reference (cuda_fused_f32.cu's CPU reference section) */

typedef struct ref_job {
    const attn_shape *s; /* this call's shape */
    const attn_tensor *q, *k, *v; /* host views */
    const int64_t *rows;          /* flat rows r = (bi * hq + h) * sq + i */
    int nrows;
    double *out; /* [nrows][d] */
    int next;
    pthread_mutex_t lock;
} ref_job;

static void ref_row(const ref_job *j, int64_t r, double *out, double *sc)
{
    const attn_shape *s = j->s;
    int64_t bh = r / s->sq, i = r % s->sq, bi = bh / s->hq, h = bh % s->hq;
    int64_t kv = h / (s->hq / s->hkv), d = s->d, n = attn_visible_keys(s, i);
    const float *q = elem(j->q, bi, h, i, 0);
    for (int64_t c = 0; c < d; c++)
        out[c] = 0;
    if (n == 0)
        return;
    double mx = -INFINITY, scale = 1.0 / sqrt((double)d), den = 0;
    for (int64_t t = 0; t < n; t++) {
        const float *k = elem(j->k, bi, kv, t, 0);
        double acc = 0;
        for (int64_t c = 0; c < d; c++)
            acc += (double)q[c] * (double)k[c];
        sc[t] = acc * scale;
        mx = sc[t] > mx ? sc[t] : mx;
    }
    for (int64_t t = 0; t < n; t++) {
        double e = exp(sc[t] - mx);
        const float *v = elem(j->v, bi, kv, t, 0);
        den += e;
        for (int64_t c = 0; c < d; c++)
            out[c] += e * (double)v[c];
    }
    for (int64_t c = 0; c < d; c++)
        out[c] /= den;
}

static void *ref_worker(void *arg)
{
    ref_job *j = arg;
    double *sc = gpu_xmalloc(sizeof(double) * (size_t)j->s->skv);
    for (;;) {
        pthread_mutex_lock(&j->lock);
        int k = j->next;
        j->next += 4;
        pthread_mutex_unlock(&j->lock);
        if (k >= j->nrows)
            break;
        for (int e = k; e < k + 4 && e < j->nrows; e++)
            ref_row(j, j->rows[e], j->out + (int64_t)e * j->s->d, sc);
    }
    free(sc);
    return NULL;
}

static void reference(ref_job *j)
{
    enum { MAXT = 32 };
    pthread_t th[MAXT];
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int nt = ncpu < 1 ? 1 : ncpu > MAXT ? MAXT : (int)ncpu;
    j->next = 0;
    pthread_mutex_init(&j->lock, NULL);
    for (int t = 0; t < nt; t++)
        if (pthread_create(&th[t], NULL, ref_worker, j) != 0) {
            nt = t;
            break;
        }
    if (nt == 0)
        ref_worker(j);
    for (int t = 0; t < nt; t++)
        pthread_join(th[t], NULL);
    pthread_mutex_destroy(&j->lock);
}

/* Rows checked against the reference: all when there are few; else per
 * (batch, head) the first and last rows, the rows at every tile boundary
 * (15/16 ... 127/128), around the causal start (the first row that sees a
 * key), and a few random ones. Returns the count (<= max). */
static int pick_rows(const attn_shape *s, int64_t *rows, int max, uint64_t *st)
{
    int n = 0;
    if (s->b * s->hq * s->sq <= max) {
        for (int64_t r = 0; r < s->b * s->hq * s->sq; r++)
            rows[n++] = r;
        return n;
    }
    int64_t c0 = s->sq - s->skv;
    int64_t fixed[] = {0, 1, 15, 16, 31, 32, 63, 64, 127, 128, c0 - 1, c0, c0 + 1,
                       s->sq - 2, s->sq - 1};
    for (int64_t bh = 0; bh < s->b * s->hq; bh++) {
        for (size_t f = 0; f < sizeof fixed / sizeof fixed[0] && n < max; f++)
            if (fixed[f] >= 0 && fixed[f] < s->sq)
                rows[n++] = bh * s->sq + fixed[f];
        for (int k = 0; k < 4 && n < max; k++)
            rows[n++] = bh * s->sq + (int64_t)(hash_splitmix64(st) % (uint64_t)s->sq);
    }
    return n;
}

/* ---- one case */

typedef struct tcase {
    int64_t b, hq, hkv, sq, skv, d; /* planned */
    int causal;
    int64_t call_sq, call_skv;      /* this call's lengths (0: the planned ones) */
    const layout *lq, *lkv, *lo;
    int bench;                      /* also time split/acc=f32 beside it */
} tcase;

static int is_f32_fused(const attn_tactic *t)
{
    return t->variant == ATTN_FUSED && t->acc == ATTN_ACC_F32;
}

/* Error of out (host view, call shape s) at rows against ref. */
static double rel_error(const attn_shape *s, const attn_tensor *out, const int64_t *rows,
                        int nrows, const double *ref, double *max_abs)
{
    double num = 0, den = 0, ma = 0;
    for (int e = 0; e < nrows; e++) {
        int64_t bh = rows[e] / s->sq, i = rows[e] % s->sq;
        const float *o = elem(out, bh / s->hq, bh % s->hq, i, 0);
        for (int64_t c = 0; c < s->d; c++) {
            double g = o[c], r = ref[(int64_t)e * s->d + c], df = fabs(g - r);
            if (!(df <= ma))
                ma = isnan(df) ? INFINITY : df;
            num += (g - r) * (g - r);
            den += r * r;
        }
    }
    *max_abs = ma;
    double rel = den > 0 ? sqrt(num / den) : sqrt(num);
    return isnan(rel) ? INFINITY : rel;
}

/* Time plan p on io: warm-up launches (3, or 1 for a single timed one),
 * then `iters` between events. Microseconds per launch, or -1. */
static double time_plan(attn_plan *p, const attn_io *io, int iters)
{
    cudaEvent_t a, b;
    float ms = 0;
    CUDA_CHECK(cudaEventCreate(&a));
    CUDA_CHECK(cudaEventCreate(&b));
    int rc = 0;
    for (int i = 0; i < (iters > 1 ? 3 : 1) && rc == 0; i++)
        rc = ops->launch(p, io, NULL);
    CUDA_CHECK(cudaEventRecord(a, 0));
    for (int i = 0; i < iters && rc == 0; i++)
        rc = ops->launch(p, io, NULL);
    CUDA_CHECK(cudaEventRecord(b, 0));
    CUDA_CHECK(cudaEventSynchronize(b));
    CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    CUDA_CHECK(cudaEventDestroy(a));
    CUDA_CHECK(cudaEventDestroy(b));
    return rc == 0 ? 1000.0 * ms / iters : -1;
}

/* One case's data: its planned and call shapes, tensors on both sides,
 * the checked rows and their references. */
typedef struct case_run {
    attn_shape plan, s; /* s: this call's lengths */
    char key[ATTN_SHAPE_KEY_MAX], ckey[ATTN_SHAPE_KEY_MAX], where[96];
    uint64_t seed;
    tensor q, k, v, o;
    float *o2;              /* the second run's output */
    unsigned char *is_real; /* per cell of o: inside the call's rows and d columns */
    attn_io io;
    int64_t *rows;
    int nrows;
    double *ref, *ref_flip; /* ref_flip: the opposite mask's, NULL when it changes too little */
    double planted_rel;     /* the planted error's, once measured (else NAN) */
} case_run;

/* Check one launch's output (o.h, and o2 from a second run): every real
 * element written and finite, rows without keys 0, the two runs
 * identical, every other cell still poison, the error within the bound;
 * the first time, the planted mask error caught. Returns the error. */
static double check_output(case_run *c, const char *tname, int *planted, double *max_abs)
{
    const attn_shape *s = &c->s;
    int64_t bad = 0, nonzero = 0, moved = 0, touched = 0;
    memset(c->is_real, 0, (size_t)c->o.n);
    for (int64_t bi = 0; bi < s->b; bi++)
        for (int64_t h = 0; h < s->hq; h++)
            for (int64_t i = 0; i < s->sq; i++) {
                int empty = attn_visible_keys(s, i) == 0;
                for (int64_t col = 0; col < s->d; col++) {
                    const float *x = elem(&c->o.vh, bi, h, i, col);
                    size_t at = (size_t)(x - c->o.h);
                    c->is_real[at] = 1;
                    bad += !isfinite(*x);
                    nonzero += empty && *x != 0.0f;
                    moved += memcmp(&c->o.h[at], &c->o2[at], 4) != 0;
                }
            }
    for (int64_t e = 0; e < c->o.n; e++) {
        uint32_t bits;
        memcpy(&bits, &c->o.h[e], 4);
        touched += !c->is_real[e] && bits != 0xffffffffu;
    }
    CHECK_MSG(bad == 0, "%s %s %s: %lld real outputs not written or not finite", c->ckey, tname,
              c->where, (long long)bad);
    CHECK_MSG(nonzero == 0, "%s %s %s: %lld outputs of rows without keys not 0", c->ckey, tname,
              c->where, (long long)nonzero);
    CHECK_MSG(moved == 0, "%s %s %s: %lld outputs differ between two runs (race?)", c->ckey,
              tname, c->where, (long long)moved);
    CHECK_MSG(touched == 0, "%s %s %s: %lld cells outside the call's rows/columns written",
              c->ckey, tname, c->where, (long long)touched);
    double rel = rel_error(s, &c->o.vh, c->rows, c->nrows, c->ref, max_abs);
    CHECK_MSG(rel <= TOL_F32, "%s %s %s: rel err %.3g > %.0e (max abs %.3g)", c->ckey, tname,
              c->where, rel, TOL_F32, *max_abs);
    if (rel > worst_rel || worst_what[0] == 0) {
        worst_rel = rel > worst_rel ? rel : worst_rel;
        snprintf(worst_what, sizeof worst_what, "%s %s", c->ckey, tname);
    }
    if (c->ref_flip != NULL && !*planted) { /* the opposite mask's reference */
        double ma;
        double wrong = rel_error(s, &c->o.vh, c->rows, c->nrows, c->ref_flip, &ma);
        CHECK_MSG(wrong > PLANTED_MIN, "%s %s: planted mask error not caught (rel %.3g)",
                  c->ckey, tname, wrong);
        n_planted += wrong > PLANTED_MIN;
        *planted = 1;
        c->planted_rel = wrong;
    }
    return rel;
}

/* Plan tactic t on the case, run it twice, check, time (iters launches).
 * Returns microseconds per launch, or -1 when it did not run. */
static double run_tactic(case_run *c, const attn_tactic *t, int iters, int *planted)
{
    char tname[ATTN_TACTIC_STR_MAX], note[160] = "";
    attn_tactic_str(t, tname, sizeof tname);
    snprintf(g_ctx, sizeof g_ctx, "%s %s, %s, seed %llu", c->ckey, tname, c->where,
             (unsigned long long)c->seed);
    attn_plan *p = NULL;
    int rc = ops->plan_new(0, &c->plan, t, 0, &p, note, sizeof note);
    CHECK_MSG(rc == 0, "%s %s: plan_new: %s (%s)", c->key, tname, attune_strerror(rc), note);
    if (rc != 0)
        return -1;
    for (int r = 0; r < 2 && rc == 0; r++) {
        CUDA_CHECK(cudaMemset(c->o.dv, 0xff, (size_t)c->o.n * sizeof(float)));
        rc = ops->launch(p, &c->io, NULL);
        CHECK_MSG(rc == 0, "%s %s: launch: %s", c->ckey, tname, attune_strerror(rc));
        CUDA_CHECK(cudaDeviceSynchronize());
        CUDA_CHECK(cudaMemcpy(r ? c->o2 : c->o.h, c->o.dv, (size_t)c->o.n * sizeof(float),
                              cudaMemcpyDeviceToHost));
    }
    double us = -1;
    if (rc == 0) {
        n_runs += 2;
        double max_abs;
        double rel = check_output(c, tname, planted, &max_abs);
        us = time_plan(p, &c->io, iters);
        CHECK_MSG(us > 0, "%s %s: timing failed", c->ckey, tname);
        fprintf(stderr, "  %-40s %-44s rel %.2e max %.2e %9.2f us %6.2f TFLOP/s\n", c->ckey,
                tname, rel, max_abs, us, us > 0 ? attn_shape_flops(&c->s) / us * 1e-6 : 0);
        if (!isnan(c->planted_rel))
            fprintf(stderr, "    planted: this output against the %s reference, rel err %.3g\n",
                    c->s.causal ? "non-causal" : "causal", c->planted_rel);
        c->planted_rel = NAN;
    }
    ops->plan_free(p);
    return us;
}

/* split/acc=f32 (cuBLAS SGEMM) timed on the case's call, beside the best
 * fused f32 tactic's time. */
static void time_split(case_run *c, const char *best, double best_us)
{
    attn_tactic sp = {.variant = ATTN_SPLIT, .pad = 1, .acc = ATTN_ACC_F32};
    attn_plan *p = NULL;
    char note[160];
    snprintf(g_ctx, sizeof g_ctx, "%s split/acc=f32/pad=1 (timing)", c->ckey);
    if (ops->plan_new(0, &c->plan, &sp, 0, &p, note, sizeof note) != 0)
        return;
    double us = time_plan(p, &c->io, 50);
    fprintf(stderr, "  %-40s %-44s %31.2f us %6.2f TFLOP/s\n", c->ckey, "split/acc=f32/pad=1",
            us, us > 0 ? attn_shape_flops(&c->s) / us * 1e-6 : 0);
    fprintf(stderr, "  => best %s: %.2f us, %.2fx split/acc=f32's %.2f us\n", best, best_us,
            us / best_us, us);
    ops->plan_free(p);
}

/* Inputs, views and references of case tc into c. */
static void case_open(case_run *c, const tcase *tc, uint64_t seed)
{
    memset(c, 0, sizeof *c);
    attn_shape plan = {tc->b, tc->hq, tc->hkv, tc->sq, tc->skv, tc->d, ATTN_F32, tc->causal};
    c->plan = c->s = plan;
    c->s.sq = tc->call_sq ? tc->call_sq : tc->sq;
    c->s.skv = tc->call_skv ? tc->call_skv : tc->skv;
    c->seed = seed;
    c->planted_rel = NAN;
    attn_shape_key(&c->plan, c->key, sizeof c->key);
    attn_shape_key(&c->s, c->ckey, sizeof c->ckey);
    snprintf(c->where, sizeof c->where, "q %s kv %s o %s%s", tc->lq->name, tc->lkv->name,
             tc->lo->name, c->s.sq != plan.sq || c->s.skv != plan.skv ? ", shorter call" : "");
    uint64_t st = seed;
    tensor_make(&c->q, tc->lq, plan.b, plan.hq, plan.sq, c->s.sq, plan.d, 1, &st);
    tensor_make(&c->k, tc->lkv, plan.b, plan.hkv, plan.skv, c->s.skv, plan.d, 1, &st);
    tensor_make(&c->v, tc->lkv, plan.b, plan.hkv, plan.skv, c->s.skv, plan.d, 1, &st);
    tensor_make(&c->o, tc->lo, plan.b, plan.hq, plan.sq, c->s.sq, plan.d, 0, &st);
    c->o2 = gpu_xmalloc((size_t)c->o.n * sizeof(float));
    c->is_real = gpu_xmalloc((size_t)c->o.n);
    c->io.q = c->q.vd, c->io.k = c->k.vd, c->io.v = c->v.vd, c->io.o = c->o.vd;
    c->io.sq = c->s.sq, c->io.skv = c->s.skv;

    enum { MAXROWS = 2048 };
    c->rows = gpu_xmalloc(sizeof(int64_t) * MAXROWS);
    c->nrows = pick_rows(&c->s, c->rows, MAXROWS, &st);
    c->ref = gpu_xmalloc(sizeof(double) * (size_t)c->nrows * (size_t)c->s.d);
    ref_job job = {.s = &c->s, .q = &c->q.vh, .k = &c->k.vh, .v = &c->v.vh, .rows = c->rows,
                   .nrows = c->nrows, .out = c->ref};
    reference(&job);
    /* the opposite mask's reference, where row 0's keys differ by > 10% */
    attn_shape flip = c->s;
    flip.causal = !c->s.causal;
    int64_t va = attn_visible_keys(&c->s, 0), vb = attn_visible_keys(&flip, 0);
    if (10 * (va < vb ? va : vb) < 9 * (va < vb ? vb : va)) {
        c->ref_flip = gpu_xmalloc(sizeof(double) * (size_t)c->nrows * (size_t)c->s.d);
        ref_job jf = job;
        jf.s = &flip, jf.out = c->ref_flip;
        reference(&jf);
    }
}

static void case_close(case_run *c)
{
    tensor_free(&c->q), tensor_free(&c->k), tensor_free(&c->v), tensor_free(&c->o);
    free(c->o2), free(c->is_real), free(c->rows), free(c->ref), free(c->ref_flip);
}

/* Every listed fused/acc=f32 tactic on case tc; on bench cases, split's
 * time beside the best. */
static void run_case(const tcase *tc, uint64_t seed)
{
    case_run c;
    case_open(&c, tc, seed);
    enum { MAXT = 1024 };
    attn_tactic all[MAXT];
    int n = ops->tactics(0, &c.plan, all, MAXT), ran = 0, planted = 0;
    double best_us = -1;
    char best[ATTN_TACTIC_STR_MAX] = "";
    for (int ti = 0; ti < n; ti++) {
        if (!is_f32_fused(&all[ti]))
            continue;
        char tname[ATTN_TACTIC_STR_MAX];
        attn_tactic_str(&all[ti], tname, sizeof tname);
        CHECK_MSG(all[ti].pad == 1, "%s %s: listed at a pad other than 1", c.key, tname);
        if (g_filter != NULL && strstr(tname, g_filter) == NULL)
            continue;
        double us = run_tactic(&c, &all[ti], g_quick ? 1 : tc->bench ? 50 : 10, &planted);
        ran += us > 0;
        if (us > 0 && (best_us < 0 || us < best_us)) {
            best_us = us;
            snprintf(best, sizeof best, "%s", tname);
        }
    }
    CHECK_MSG(ran > 0 || g_filter != NULL, "%s: no fused/acc=f32 tactic ran", c.key);
    if (tc->bench && best_us > 0)
        time_split(&c, best, best_us);
    fprintf(stderr, "  -- %s (%s): %d tactics, %d rows checked\n", c.key, c.where, ran,
            c.nrows);
    n_cases++;
    case_close(&c);
}

/* ---- tests */

static void tactics_should_list_f32_only_at_pad_1(void)
{
    static const int64_t dims[] = {1, 7, 32, 33, 40, 64, 100, 128, 200, 256};
    attn_tactic t[1024];
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++) {
        attn_shape s = {2, 8, 2, 100, 300, dims[di], ATTN_F32, 1};
        int n = ops->tactics(0, &s, t, 1024), nf = 0;
        for (int i = 0; i < n; i++) {
            if (!is_f32_fused(&t[i]))
                continue;
            nf++;
            char buf[ATTN_TACTIC_STR_MAX], err[ATTUNE_ERRLEN];
            attn_tactic back;
            attn_tactic_str(&t[i], buf, sizeof buf);
            CHECK_MSG(t[i].pad == 1 && t[i].tile_m > 0 && t[i].warps > 0, "%s", buf);
            CHECK_MSG(attn_tactic_parse(buf, &back, err, sizeof err) == 0 &&
                          memcmp(&back, &t[i], sizeof back) == 0,
                      "%s does not round-trip", buf);
        }
        /* all of cuda_fused_f32.h's configurations of the bucket where the
         * shared memory holds them (8.0, 9.0: 4 per bucket, 3 at d = 256),
         * at least the smallest tile elsewhere */
        int want = g_big_smem ? (dims[di] > 128 ? 3 : 4) : 1;
        CHECK_MSG(g_big_smem ? nf == want : nf >= want, "d=%lld: %d fused/acc=f32 tactics",
                  (long long)dims[di], nf);
        s.dtype = ATTN_BF16; /* not for 16-bit data */
        n = ops->tactics(0, &s, t, 1024);
        for (int i = 0; i < n; i++)
            CHECK(!is_f32_fused(&t[i]));
    }
    attn_shape big = {1, 2, 2, 16, 16, 264, ATTN_F32, 0};
    int n = ops->tactics(0, &big, t, 1024);
    for (int i = 0; i < n; i++)
        CHECK(!is_f32_fused(&t[i])); /* d over 256 */
}

static void plans_should_refuse_what_is_not_listed(void)
{
    attn_shape s = {1, 4, 4, 64, 64, 64, ATTN_F32, 0};
    attn_tactic t = {.variant = ATTN_FUSED, .acc = ATTN_ACC_F32, .pad = 1, .tile_m = 64,
                     .tile_n = 64, .warps = 4};
    attn_plan *p = NULL;
    char note[160] = "";
    CHECK_EQ_INT(ops->plan_new(0, &s, &t, 0, &p, note, sizeof note), 0);
    if (p != NULL)
        ops->plan_free(p);
    p = NULL;
    t.pad = 8;
    CHECK_EQ_INT(ops->plan_new(0, &s, &t, 0, &p, note, sizeof note), ATTUNE_EUNSUPP);
    CHECK_MSG(strstr(note, "pad=1") != NULL, "note: %s", note);
    t.pad = 1, t.tile_m = 48; /* no such tile */
    CHECK_EQ_INT(ops->plan_new(0, &s, &t, 0, &p, note, sizeof note), ATTUNE_EUNSUPP);
    t.tile_m = 64;
    s.d = 128; /* 64x64/4 warps is not a d = 128 configuration */
    CHECK_EQ_INT(ops->plan_new(0, &s, &t, 0, &p, note, sizeof note), ATTUNE_EUNSUPP);
    s.d = 64;
    s.dtype = ATTN_F16;
    CHECK_EQ_INT(ops->plan_new(0, &s, &t, 0, &p, note, sizeof note), ATTUNE_EUNSUPP);
    CHECK(p == NULL);
}

/* d x mask x lengths x heads, the layouts and the shorter calls rotating
 * with them so that each d meets every layout, grouping and length kind. */
static void every_tactic_should_match_the_reference(void)
{
    static const int64_t dims[] = {32, 40, 64, 128, 256, 7, 33, 100};
    static const int64_t lens[][4] = {/* sq, skv planned; call sq, skv (0: planned) */
                                      {1, 1018, 0, 0},   {7, 7, 0, 0},     {50, 1018, 0, 0},
                                      {197, 197, 0, 0},  {1018, 50, 0, 0}, {300, 77, 0, 0},
                                      {129, 700, 0, 0},  {513, 513, 0, 0}, {256, 1024, 200, 1000},
                                      {300, 300, 77, 250}, {1, 4096, 0, 3001}, {64, 64, 63, 33}};
    static const int64_t heads[][2] = {{2, 2}, {8, 2}, {4, 1}}; /* MHA, GQA g=4, MQA g=4 */
    const layout *lays[] = {&L_CONTIG, &L_BSHD, &L_PADDED, &L_ODD};
    const int nl = (int)(sizeof lens / sizeof lens[0]), nd = (int)(sizeof dims / sizeof dims[0]);
    int k = 0;
    for (int di = 0; di < nd; di++)
        for (int causal = 0; causal < 2; causal++)
            for (int li = 0; li < nl; li++, k++) {
                if (g_quick && (lens[li][0] * lens[li][1] > 300 * 300 || (li + di) % 3 != 0))
                    continue;
                if (dims[di] % 4 != 0 && (li % 3) != 0)
                    continue; /* odd d: the scalar form on a third of the lengths */
                tcase tc = {0};
                int hi = (li + di + causal) % 3;
                tc.b = lens[li][0] * lens[li][1] >= 256 * 1024 ? 1 : 2;
                tc.hq = heads[hi][0], tc.hkv = heads[hi][1];
                tc.sq = lens[li][0], tc.skv = lens[li][1];
                tc.call_sq = lens[li][2], tc.call_skv = lens[li][3];
                tc.d = dims[di];
                tc.causal = causal;
                const layout *ly = lays[(li + di + causal) % 4];
                tc.lq = ly;
                tc.lkv = lays[(li + 2 * di + 1) % 4];
                tc.lo = lays[(li + di + 2 * causal + 3) % 4];
                run_case(&tc, g_seed + (uint64_t)k * 7919u);
            }
}

/* The tuner's path: a session's plan, the backend's own float64 reference
 * on the device, and the planted mask error through it. */
static void sessions_should_match_and_catch_planted_errors(void)
{
    static const int64_t dims[] = {32, 64, 128, 256};
    for (int di = 0; di < 4; di++) {
        attn_shape c = {2, 8, 2, 200, 333, dims[di], ATTN_F32, 1}, nc = c;
        nc.causal = 0;
        attn_tactic t[1024];
        int n = ops->tactics(0, &c, t, 1024), done = 0;
        for (int i = 0; i < n && !done; i++) {
            if (!is_f32_fused(&t[i]))
                continue;
            char tname[ATTN_TACTIC_STR_MAX];
            attn_tactic_str(&t[i], tname, sizeof tname);
            double right = gpu_cross_error(ops, &c, &c, &t[i], 42);
            double wrong = gpu_cross_error(ops, &c, &nc, &t[i], 42);
            double wrong2 = gpu_cross_error(ops, &nc, &c, &t[i], 42);
            CHECK_MSG(right >= 0 && right <= TOL_F32, "d=%lld %s: session rel err %.3g",
                      (long long)dims[di], tname, right);
            CHECK_MSG(wrong > PLANTED_MIN && wrong2 > PLANTED_MIN,
                      "d=%lld %s: planted mask errors %.3g, %.3g not caught", (long long)dims[di],
                      tname, wrong, wrong2);
            n_planted += (wrong > PLANTED_MIN) + (wrong2 > PLANTED_MIN);
            fprintf(stderr, "  session d=%lld %s: rel %.2e; planted %.3g, %.3g\n",
                    (long long)dims[di], tname, right, wrong, wrong2);
            done = 1;
        }
        CHECK(done);
    }
}

/* Shapes to time (contiguous views, the tuner's layout): encoders in f32
 * (the reason for this kernel), a long prefill, GQA and decode. */
static void bench_shapes_should_match_and_be_timed(void)
{
    static const int64_t shapes[][7] = {/* b, hq, hkv, sq, skv, d, causal */
                                        {8, 12, 12, 512, 512, 64, 0},  /* BERT-base */
                                        {32, 12, 12, 128, 128, 64, 0}, /* BERT-base, short */
                                        {8, 12, 12, 197, 197, 64, 0},  /* ViT-B/16 */
                                        {4, 16, 16, 1024, 1024, 64, 0},
                                        {2, 8, 8, 577, 577, 32, 0},    /* small heads */
                                        {1, 16, 16, 2048, 2048, 128, 1},
                                        {2, 32, 8, 1024, 1024, 128, 0},
                                        {1, 8, 1, 50, 1018, 256, 0},   /* DESIGN.md's anchor */
                                        {4, 32, 8, 1, 4096, 128, 0}};  /* decode */
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        if (g_quick)
            break;
        tcase tc = {shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3], shapes[i][4],
                    shapes[i][5], (int)shapes[i][6], 0, 0, &L_CONTIG, &L_CONTIG, &L_CONTIG, 1};
        run_case(&tc, g_seed + 5000011u * (uint64_t)(i + 1));
    }
}

int main(void)
{
    if (ops->device_count() == 0) {
        fprintf(stderr, "test_fused_f32: no CUDA device, skipped\n");
        return TEST_SKIP_CODE;
    }
    g_quick = getenv("ATTUNE_TEST_QUICK") != NULL;
    g_filter = getenv("ATTUNE_TEST_TACTIC");
    const char *env = getenv("ATTUNE_TEST_SEED");
    g_seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) * 1000003u ^ (uint64_t)getpid();
    struct cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    g_big_smem = prop.sharedMemPerBlockOptin >= 163 * 1024;
    fprintf(stderr, "test_fused_f32: device %s (sm_%d%d), seed %llu (ATTUNE_TEST_SEED to replay)\n",
            prop.name, prop.major, prop.minor, (unsigned long long)g_seed);
    double t0 = gpu_now_s();
    RUN(tactics_should_list_f32_only_at_pad_1);
    RUN(plans_should_refuse_what_is_not_listed);
    RUN(every_tactic_should_match_the_reference);
    RUN(sessions_should_match_and_catch_planted_errors);
    RUN(bench_shapes_should_match_and_be_timed);
    fprintf(stderr,
            "test_fused_f32: %d cases, %d launches checked, %d planted mask errors caught, worst "
            "rel err %.3g (%s), %.1f s\n",
            n_cases, n_runs, n_planted, worst_rel, worst_what, gpu_now_s() - t0);
    CHECK(n_planted > 0 || g_filter != NULL);
    return test_summary();
}

#endif
