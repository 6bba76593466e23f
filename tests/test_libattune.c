/* test_libattune.c -- libattune's public ABI on the CPU device, as a
 * runtime uses it (linked against libattune.so only): every tactic the CPU
 * lists runs on caller views against a float64 reference, in [b, h, s, d]
 * and [b, s, h, d] layouts with gaps in the rows, at the planned lengths
 * and shorter ones (a growing KV cache), writing its output rows and
 * nothing else; bad arguments are refused with a reason; attune_auto runs
 * every length of a bucket from one plan per stream; e4m3 plans read the
 * descales set on them (host memory on the CPU) at each run, and so do
 * attune_auto's e4m3 runs (attune_auto_set_descales). */
#include "test.h"

#include "libattune_ref.h"

/* What runs the views: a plan at given lengths, or an attune_auto. */
typedef struct runner {
    attune_plan *plan;
    attune_auto *autop;
    void *stream;
} runner;

static int runner_run(runner *r, const attune_dims *s, attune_tensor *q, attune_tensor *k,
                      attune_tensor *v, attune_tensor *o, int64_t sq, int64_t skv,
                      const char **tac)
{
    if (r->plan != NULL) {
        *tac = attune_plan_tactic(r->plan);
        return attune_plan_run(r->plan, q, k, v, o, sq, skv, NULL);
    }
    static attune_choice c;
    attune_dims call = *s;
    call.sq = sq, call.skv = skv;
    char err[256] = "";
    int rc = attune_auto_prepare(r->autop, &call, r->stream, &c, err, sizeof err);
    *tac = c.tactic;
    if (rc == 0)
        rc = attune_auto_run(r->autop, &call, q, k, v, o, r->stream, err, sizeof err);
    CHECK_MSG(rc == 0, "attune_auto at sq %lld skv %lld: %s", (long long)sq, (long long)skv,
              err);
    return rc;
}

/* One run of r on fresh views of layout lay at lengths sq, skv (rows
 * allotted per head: s's lengths). Checks the output against the
 * reference, the poison gone, nothing outside the output rows touched. */
static void run_views(runner *r, const attune_dims *s, int lay, int64_t pad, int64_t sq,
                      int64_t skv, uint64_t seed)
{
    const char *tac = "";
    const size_t es = ref_es(s->dtype);
    attune_tensor q, k, v, o;
    size_t nq = ref_view(lay, s->b, s->hq, s->sq, s->d, pad, NULL, &q);
    size_t nk = ref_view(lay, s->b, s->hkv, s->skv, s->d, pad, NULL, &k);
    ref_view(lay, s->b, s->hkv, s->skv, s->d, pad, NULL, &v);
    ref_view(lay, s->b, s->hq, s->sq, s->d, pad, NULL, &o);
    void *qb = malloc(nq * es), *kb = malloc(nk * es), *vb = malloc(nk * es);
    void *ob = malloc(nq * es), *before = malloc(nq * es);
    q.data = qb, k.data = kb, v.data = vb, o.data = ob;
    ref_fill(qb, s->dtype, nq, &seed);
    ref_fill(kb, s->dtype, nk, &seed);
    ref_fill(vb, s->dtype, nk, &seed);
    ref_poison(ob, s->dtype, nq);
    memcpy(before, ob, nq * es);

    int rc = runner_run(r, s, &q, &k, &v, &o, sq, skv, &tac);
    CHECK_MSG(rc == 0, "%s layout %d sq %lld skv %lld: %s", tac, lay, (long long)sq,
              (long long)skv, attune_strerror(rc));
    if (rc == 0) {
        ref_errs e;
        const int64_t rsq = sq != 0 ? sq : s->sq, rskv = skv != 0 ? skv : s->skv;
        ref_check(s, rsq, rskv, qb, &q, kb, &k, vb, &v, ob, &o, 1, &e);
        e.touched = ref_touched(s, rsq, &o, ob, before, nq);
        CHECK_EQ_INT(e.compared, s->b * s->hq * rsq * s->d); /* no vacuous pass */
        CHECK_MSG(e.nonfinite == 0 && e.touched == 0 && e.rel <= ref_bound(s->dtype, tac),
                  "%s layout %d pad %lld sq %lld skv %lld: rel %.3g (bound %.3g), %lld "
                  "non-finite, %lld touched outside",
                  tac, lay, (long long)pad, (long long)sq, (long long)skv, e.rel,
                  ref_bound(s->dtype, tac), (long long)e.nonfinite, (long long)e.touched);
    }
    free(qb), free(kb), free(vb), free(ob), free(before);
}

/* Every listed tactic of s: planned lengths in both layouts, then shorter
 * lengths (decode-like: fewer keys; and fewer queries) on the same plan. */
static void every_tactic(attune_dev *dev, const attune_dims *s)
{
    char (*list)[ATTUNE_TACTIC_MAX] = calloc(256, ATTUNE_TACTIC_MAX);
    char err[256];
    int n = attune_tactics(dev, s, list, 256, err, sizeof err);
    CHECK_MSG(n > 0 && n <= 256, "tactics: %d %s", n, err);
    for (int i = 0; i < n && i < 256; i++) {
        attune_plan *plan = NULL;
        int rc = attune_plan_create(dev, s, list[i], &plan, err, sizeof err);
        CHECK_MSG(rc == 0, "plan %s: %s", list[i], err);
        if (rc != 0)
            continue;
        CHECK_STR(attune_plan_tactic(plan), list[i]);
        runner r = {.plan = plan};
        run_views(&r, s, REF_BHSD, 0, 0, 0, 11 + (uint64_t)i);
        run_views(&r, s, REF_BSHD, 8, 0, 0, 12 + (uint64_t)i);
        run_views(&r, s, REF_BSHD, 0, s->sq, s->skv - 3, 13 + (uint64_t)i);
        run_views(&r, s, REF_BHSD, 8, s->sq > 2 ? s->sq - 2 : 1, s->skv - 5, 14 + (uint64_t)i);
        attune_plan_destroy(plan);
    }
    free(list);
}

static void plans_should_run_every_cpu_tactic_on_views(void)
{
    attune_dev *dev = NULL;
    char err[256];
    CHECK_EQ_INT(attune_dev_open("cpu", &dev, err, sizeof err), 0);
    if (dev == NULL)
        return;
    CHECK(strncmp(attune_dev_id(dev), "CPU-", 4) == 0);
    const attune_dims shapes[] = {
        {2, 4, 4, 13, 21, 16, ATTUNE_DTYPE_F16, 0},  /* MHA, odd lengths: pads change them */
        {1, 8, 2, 9, 40, 32, ATTUNE_DTYPE_BF16, 1},  /* GQA, causal, bottom-right */
        {2, 6, 1, 24, 24, 8, ATTUNE_DTYPE_F32, 1},   /* MQA, f32 */
        {1, 2, 1, 30, 17, 16, ATTUNE_DTYPE_F16, 1},  /* sq > skv: first rows see no key */
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        every_tactic(dev, &shapes[i]);
    attune_dev_close(dev);
}

static void bad_arguments_should_be_refused_with_a_reason(void)
{
    attune_dev *dev = NULL;
    attune_plan *plan = NULL;
    char err[256] = "";
    CHECK_EQ_INT(attune_abi(), LIBATTUNE_ABI);
    CHECK_EQ_INT(attune_dev_open("GPU-nonexistent", &dev, err, sizeof err), ATTUNE_RT_ENODEV);
    CHECK(dev == NULL && err[0] != 0);
    CHECK_EQ_INT(attune_dev_open("cpu", &dev, err, sizeof err), 0);
    attune_dims s = {1, 4, 3, 8, 8, 16, ATTUNE_DTYPE_F16, 0}; /* hq % hkv != 0 */
    CHECK_EQ_INT(attune_plan_create(dev, &s, "fused/pad=1", &plan, err, sizeof err),
                 ATTUNE_RT_EINVAL);
    CHECK_MSG(strstr(err, "hkv") != NULL, "%s", err);
    s.hkv = 2;
    CHECK_EQ_INT(attune_plan_create(dev, &s, "fused/pad=3", &plan, err, sizeof err),
                 ATTUNE_RT_EINVAL);
    CHECK_EQ_INT(attune_plan_create(dev, &s, "cudnn/eng=9/graph=sdpa/kcfg=0/pad=1", &plan, err,
                                    sizeof err),
                 ATTUNE_RT_EUNSUPP);
    CHECK_MSG(strstr(err, "cudnn") != NULL, "%s", err);
    CHECK(plan == NULL);
    char key[128];
    attune_dims huge = s; /* over the size limits: a bad shape (EINVAL), as
                             libattune.h lists; it was an unlisted ETOOBIG */
    huge.b = 1 << 21;
    CHECK_EQ_INT(attune_shape_key(&huge, key, sizeof key, err, sizeof err), ATTUNE_RT_EINVAL);
    CHECK_EQ_INT(attune_plan_create(dev, &huge, "fused/pad=1", &plan, err, sizeof err),
                 ATTUNE_RT_EINVAL);
    CHECK(plan == NULL && err[0] != 0);
    CHECK_EQ_INT(attune_shape_key(&s, key, sizeof key, err, sizeof err), 0);
    CHECK_STR(key, "b1.hq4.hkv2.sq8.skv8.d16.f16.nc");

    CHECK_EQ_INT(attune_plan_create(dev, &s, "fused/pad=1", &plan, err, sizeof err), 0);
    uint16_t buf[4 * 8 * 16];
    attune_tensor q, k, o;
    ref_view(REF_BHSD, 1, 4, 8, 16, 0, buf, &q);
    ref_view(REF_BHSD, 1, 2, 8, 16, 0, buf, &k);
    ref_view(REF_BHSD, 1, 4, 8, 16, 0, buf, &o);
    /* longer than planned, a NULL pointer, a negative stride */
    CHECK_EQ_INT(attune_plan_run(plan, &q, &k, &k, &o, 9, 8, NULL), ATTUNE_RT_EINVAL);
    CHECK_EQ_INT(attune_plan_run(plan, &q, &k, &k, &o, 8, 9, NULL), ATTUNE_RT_EINVAL);
    attune_tensor bad = k;
    bad.data = NULL;
    CHECK_EQ_INT(attune_plan_run(plan, &q, &bad, &k, &o, 0, 0, NULL), ATTUNE_RT_EINVAL);
    bad = k;
    bad.stride_s = -16;
    CHECK_EQ_INT(attune_plan_run(plan, &q, &bad, &k, &o, 0, 0, NULL), ATTUNE_RT_EINVAL);
    attune_plan_destroy(plan);
    attune_dev_close(dev);
}

/* attune_auto with nothing answering (a closed port): the device's
 * default tactic, planned at the bucket's ceiling, runs every length of
 * the bucket right, a decode step too, in both layouts; a second stream
 * has its own plan; past its capacity (2) the least recently used plan
 * goes and the calls still run right. */
static void auto_should_run_every_length_of_a_bucket(void)
{
    attune_dev *dev = NULL;
    attune_auto *a = NULL;
    char err[256] = "";
    CHECK(attune_dev_open("cpu", &dev, err, sizeof err) == 0);
    int rc = attune_auto_new(dev, "http://127.0.0.1:9", 2, &a, err, sizeof err);
    CHECK_MSG(rc == 0 || rc == ATTUNE_RT_EUNSUPP, "attune_auto_new: %s", err);
    if (rc != 0) { /* built without libattune_client: said so */
        CHECK(err[0] != 0);
        attune_dev_close(dev);
        return;
    }
    attune_dims s = {1, 4, 2, 13, 100, 32, ATTUNE_DTYPE_F32, 1};
    attune_choice c;
    CHECK(attune_auto_prepare(a, &s, NULL, &c, err, sizeof err) == 0);
    CHECK_STR(c.planned, "b1.hq4.hkv2.sq14.skv112.d32.f32.c");
    CHECK_STR(c.source, "default");
    CHECK(strncmp(c.tactic, "fused/", 6) == 0 && strstr(c.tactic, "pad=8") != NULL);
    const int64_t lens[][2] = {{13, 100}, {14, 112}, {13, 99}, {14, 105}};
    int stream_b = 0;
    for (int i = 0; i < 4; i++) {
        attune_dims at = s;
        at.sq = lens[i][0], at.skv = lens[i][1];
        runner r = {.autop = a, .stream = i % 2 ? (void *)&stream_b : NULL};
        run_views(&r, &at, i % 2 ? REF_BSHD : REF_BHSD, i % 2 ? 8 : 0, at.sq, at.skv, 40 + i);
        attune_choice ci;
        CHECK(attune_auto_prepare(a, &at, r.stream, &ci, err, sizeof err) == 0);
        CHECK_STR(ci.planned, c.planned); /* one bucket, one plan per stream */
    }
    /* a decode step and another shape: three entries in a capacity of 2 */
    attune_dims dec = {1, 4, 2, 1, 57, 32, ATTUNE_DTYPE_F16, 0};
    attune_dims mha = {2, 2, 2, 20, 20, 16, ATTUNE_DTYPE_F32, 0};
    for (int round = 0; round < 2; round++) {
        runner r = {.autop = a};
        run_views(&r, &dec, REF_BHSD, 0, dec.sq, dec.skv, 50 + round);
        run_views(&r, &mha, REF_BSHD, 0, mha.sq, mha.skv, 52 + round);
        run_views(&r, &s, REF_BHSD, 0, s.sq, s.skv, 54 + round);
    }
    attune_dims bad = s;
    bad.sq = 0;
    CHECK(attune_auto_run(a, &bad, NULL, NULL, NULL, NULL, NULL, err, sizeof err) ==
          ATTUNE_RT_EINVAL);
    CHECK(strstr(err, "under 1") != NULL);
    attune_auto_free(a);
    attune_dev_close(dev);
}

/* The plan key attune_auto reports for shape at lengths sq, skv after
 * one run there. */
static void auto_run_once(attune_auto *a, const attune_dims *s, int64_t sq, int64_t skv,
                          uint64_t seed, attune_choice *c)
{
    char err[256] = "";
    attune_dims at = *s;
    at.sq = sq, at.skv = skv;
    runner r = {.autop = a};
    run_views(&r, &at, REF_BHSD, 0, sq, skv, seed);
    CHECK(attune_auto_prepare(a, &at, NULL, c, err, sizeof err) == 0);
}

/* A bucket run at one length only (an encoder) plans that length exactly
 * once it has run it AUTO_EXACT_CALLS (128) times; a bucket that meets two
 * lengths (a decode step) keeps its ceiling's plan however often it runs;
 * both compute right throughout (run_views checks every output). */
static void auto_should_plan_a_length_run_alone_exactly(void)
{
    attune_dev *dev = NULL;
    attune_auto *a = NULL;
    char err[256] = "";
    CHECK(attune_dev_open("cpu", &dev, err, sizeof err) == 0);
    if (attune_auto_new(dev, "http://127.0.0.1:9", 0, &a, err, sizeof err) != 0) {
        attune_dev_close(dev); /* built without libattune_client: the test above says */
        return;
    }
    attune_dims s = {1, 2, 1, 9, 9, 8, ATTUNE_DTYPE_F32, 0};
    attune_choice c;
    auto_run_once(a, &s, 9, 9, 60, &c);
    CHECK_STR(c.planned, "b1.hq2.hkv1.sq10.skv10.d8.f32.nc"); /* the ceiling at first */
    for (int i = 0; i < 130; i++)
        auto_run_once(a, &s, 9, 9, 61 + (uint64_t)i, &c);
    CHECK_STR(c.planned, "b1.hq2.hkv1.sq9.skv9.d8.f32.nc");
    int other_stream = 0; /* promoted on one stream: on another at once */
    attune_dims nine = s;
    CHECK(attune_auto_prepare(a, &nine, &other_stream, &c, err, sizeof err) == 0);
    CHECK_STR(c.planned, "b1.hq2.hkv1.sq9.skv9.d8.f32.nc");
    for (int i = 0; i < 200; i++) /* 17 and 18: bucket 20 */
        auto_run_once(a, &s, 17 + i % 2, 17 + i % 2, 300 + (uint64_t)i, &c);
    CHECK_STR(c.planned, "b1.hq2.hkv1.sq20.skv20.d8.f32.nc");
    attune_auto_free(a);
    attune_dev_close(dev);
}

/* ---- e4m3: the descales set on a plan, read at each run (libattune 1.2)
 *
 * The CPU emulates FP8 (its kernels descale each element as they convert
 * it to fp32, compute in fp32, store bf16), so against the float64
 * reference of the stored values times their descales the error is the
 * bf16 store's: at most 2^-8 relative, plus 1e-5 for fp32 arithmetic
 * (tests/test_cpu_e4m3.c says why). */

static const double e4m3_tol = 0x1p-8 + 1e-5;

/* The value of e4m3 pattern x (OCP FP8 E4M3: bias 7, S.1111.111 NaN). */
static double e4m3_value(uint8_t x)
{
    const int e = (x >> 3) & 15, m = x & 7;
    const double sign = (x & 0x80) ? -1.0 : 1.0;
    if (e == 15 && m == 7)
        return NAN;
    return e == 0 ? sign * m * 0x1p-9 : sign * (1.0 + m / 8.0) * ldexp(1.0, e - 7);
}

/* The nearest finite e4m3 pattern to f (|f| <= 448; a tie goes either way:
 * the reference reads what is stored). */
static uint8_t e4m3_nearest(double f)
{
    int best = 0;
    for (int x = 1; x < 256; x++)
        if ((x & 0x7f) != 0x7f &&
            fabs(e4m3_value((uint8_t)x) - f) < fabs(e4m3_value((uint8_t)best) - f))
            best = x;
    return (uint8_t)best;
}

/* float64 attention of the stored e4m3 values x8[t] (contiguous [b, h, s, d])
 * times desc[t] (NULL: 1) into ref, every row. */
static void e4m3_reference(const attune_dims *s, uint8_t *const x8[3], const float *desc,
                           double *ref)
{
    const int64_t g = s->hq / s->hkv, d = s->d;
    double *p = malloc((size_t)s->skv * sizeof *p);
    for (int64_t bi = 0; bi < s->b; bi++)
        for (int64_t h = 0; h < s->hq; h++)
            for (int64_t i = 0; i < s->sq; i++) {
                const uint8_t *q = x8[0] + ((bi * s->hq + h) * s->sq + i) * d;
                const size_t kv = (size_t)((bi * s->hkv + h / g) * s->skv * d);
                int64_t n = s->causal ? i + (s->skv - s->sq) + 1 : s->skv;
                n = n < 0 ? 0 : n > s->skv ? s->skv : n;
                double mx = -INFINITY, l = 0, *o = ref + ((bi * s->hq + h) * s->sq + i) * d;
                for (int64_t j = 0; j < n; j++) {
                    double dot = 0;
                    for (int64_t c = 0; c < d; c++)
                        dot += e4m3_value(q[c]) * (desc ? desc[0] : 1.0) *
                               e4m3_value(x8[1][kv + (size_t)(j * d + c)]) * (desc ? desc[1] : 1.0);
                    p[j] = dot / sqrt((double)d);
                    mx = p[j] > mx ? p[j] : mx;
                }
                for (int64_t c = 0; c < d; c++)
                    o[c] = 0;
                for (int64_t j = 0; j < n; j++) {
                    p[j] = exp(p[j] - mx);
                    l += p[j];
                    for (int64_t c = 0; c < d; c++)
                        o[c] += p[j] * e4m3_value(x8[2][kv + (size_t)(j * d + c)]) *
                                (desc ? desc[2] : 1.0);
                }
                for (int64_t c = 0; c < d; c++)
                    o[c] = n > 0 ? o[c] / l : 0.0;
            }
    free(p);
}

/* ||out - k ref|| / ||k ref|| of the bf16 output view o (buffer ob); *bad
 * counts non-finite elements. */
static double e4m3_rel(const attune_dims *s, const uint16_t *ob, const attune_tensor *o,
                       const double *ref, double k, int64_t *bad)
{
    double num = 0, den = 0;
    *bad = 0;
    for (int64_t bi = 0; bi < s->b; bi++)
        for (int64_t h = 0; h < s->hq; h++)
            for (int64_t i = 0; i < s->sq; i++)
                for (int64_t c = 0; c < s->d; c++) {
                    const double r = k * ref[((bi * s->hq + h) * s->sq + i) * s->d + c];
                    const double got = ref_bf16_to_f(ob[ref_at(o, bi, h, i, c)]);
                    if (!isfinite(got)) {
                        ++*bad;
                        continue;
                    }
                    num += (got - r) * (got - r);
                    den += r * r;
                }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* One e4m3 case: values spread far from 1 per tensor, stored as attune's
 * sessions store them (descale = amax / 448, stored e4m3(x / descale)),
 * written into views of layout lay (row padding pad) with the bf16 output
 * view; ref and ref1 the float64 references with the descales and without
 * (1 each). */
typedef struct e4m3_case {
    uint8_t *x8[3];   /* contiguous [b, h, s, d] stored values */
    float desc[3];
    attune_tensor v[4]; /* q, k, v, out views */
    uint8_t *in[3];
    uint16_t *ob;
    size_t nview[4];
    double *ref, *ref1;
} e4m3_case;

static void e4m3_case_new(e4m3_case *c, const attune_dims *s, int lay, int64_t pad)
{
    const int64_t nq = s->b * s->hq * s->sq * s->d, nk = s->b * s->hkv * s->skv * s->d;
    const int64_t n[3] = {nq, nk, nk};
    const double spread[3] = {3.0, 0.5, 7.0}; /* descales far from 1 */
    uint64_t seed = 77 + (uint64_t)lay;
    for (int t = 0; t < 3; t++) {
        float *x = malloc((size_t)n[t] * sizeof *x);
        ref_fill(x, ATTUNE_DTYPE_F32, (size_t)n[t], &seed);
        float amax = 0;
        for (int64_t i = 0; i < n[t]; i++) {
            x[i] *= (float)spread[t];
            amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
        }
        c->desc[t] = amax / 448.0f;
        c->x8[t] = malloc((size_t)n[t]);
        for (int64_t i = 0; i < n[t]; i++)
            c->x8[t][i] = e4m3_nearest(x[i] / c->desc[t]);
        free(x);
    }
    c->ref = malloc((size_t)nq * sizeof *c->ref);
    c->ref1 = malloc((size_t)nq * sizeof *c->ref1);
    e4m3_reference(s, c->x8, c->desc, c->ref);
    e4m3_reference(s, c->x8, NULL, c->ref1);

    const int64_t heads[4] = {s->hq, s->hkv, s->hkv, s->hq};
    const int64_t rows[4] = {s->sq, s->skv, s->skv, s->sq};
    for (int t = 0; t < 4; t++)
        c->nview[t] = ref_view(lay, s->b, heads[t], rows[t], s->d, pad, NULL, &c->v[t]);
    for (int t = 0; t < 3; t++) { /* the stored values into the views */
        c->in[t] = calloc(c->nview[t], 1);
        c->v[t].data = c->in[t];
        for (int64_t bi = 0; bi < s->b; bi++)
            for (int64_t h = 0; h < heads[t]; h++)
                for (int64_t i = 0; i < rows[t]; i++)
                    for (int64_t k = 0; k < s->d; k++)
                        c->in[t][ref_at(&c->v[t], bi, h, i, k)] =
                            c->x8[t][((bi * heads[t] + h) * rows[t] + i) * s->d + k];
    }
    c->ob = malloc(c->nview[3] * sizeof *c->ob);
    c->v[3].data = c->ob;
}

static void e4m3_case_free(e4m3_case *c)
{
    for (int t = 0; t < 3; t++)
        free(c->x8[t]), free(c->in[t]);
    free(c->ob), free(c->ref), free(c->ref1);
}

/* Every CPU e4m3 tactic of s on views of layout lay (row padding pad):
 * descales set once and changed in place (read at the next run), then
 * none (1 each), each against its float64 reference. */
static void e4m3_tactics_on(attune_dev *dev, const attune_dims *s, int lay, int64_t pad)
{
    e4m3_case c;
    e4m3_case_new(&c, s, lay, pad);
    attune_tensor *v = c.v;
    float used[3];
    char (*list)[ATTUNE_TACTIC_MAX] = calloc(64, ATTUNE_TACTIC_MAX);
    char err[256];
    int nt = attune_tactics(dev, s, list, 64, err, sizeof err);
    CHECK_MSG(nt >= 8 && nt <= 64, "e4m3 tactics: %d %s", nt, err); /* fused, split x 4 pads, ... */
    for (int i = 0; i < nt && i < 64; i++) {
        attune_plan *plan = NULL;
        int rc = attune_plan_create(dev, s, list[i], &plan, err, sizeof err);
        CHECK_MSG(rc == 0, "e4m3 plan %s: %s", list[i], err);
        if (rc != 0)
            continue;
        memcpy(used, c.desc, sizeof used);
        CHECK_EQ_INT(attune_plan_set_descales(plan, &used[0], &used[1], &used[2]), 0);
        int64_t bad;
        double e[3];
        for (int run = 0; run < 3; run++) {
            if (run == 1)
                used[2] = 2 * c.desc[2]; /* in place: the next run reads it */
            if (run == 2)
                CHECK_EQ_INT(attune_plan_set_descales(plan, NULL, NULL, NULL), 0);
            ref_poison(c.ob, ATTUNE_DTYPE_BF16, c.nview[3]);
            rc = attune_plan_run(plan, &v[0], &v[1], &v[2], &v[3], 0, 0, NULL);
            CHECK_MSG(rc == 0, "e4m3 %s run %d: %s", list[i], run, attune_strerror(rc));
            e[run] = e4m3_rel(s, c.ob, &v[3], run == 2 ? c.ref1 : c.ref, run == 1 ? 2.0 : 1.0,
                              &bad);
            CHECK_MSG(bad == 0 && e[run] <= e4m3_tol,
                      "e4m3 %s layout %d run %d: rel %.3g (bound %.3g), %lld non-finite", list[i],
                      lay, run, e[run], e4m3_tol, (long long)bad);
        }
        /* and the runs differ: no descales is far from the right answer */
        CHECK(e4m3_rel(s, c.ob, &v[3], c.ref, 1.0, &bad) > 10 * e4m3_tol);
        attune_plan_destroy(plan);
    }
    free(list);
    e4m3_case_free(&c);
}

static void e4m3_plans_should_read_their_descales(void)
{
    attune_dev *dev = NULL;
    char err[256];
    CHECK_EQ_INT(attune_dev_open("cpu", &dev, err, sizeof err), 0);
    if (dev == NULL)
        return;
    const attune_dims shapes[] = {
        {1, 4, 2, 21, 45, 24, ATTUNE_DTYPE_E4M3, 1}, /* GQA, causal, odd lengths */
        {2, 4, 4, 13, 21, 16, ATTUNE_DTYPE_E4M3, 0}, /* MHA */
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        e4m3_tactics_on(dev, &shapes[i], REF_BHSD, 0);
        e4m3_tactics_on(dev, &shapes[i], REF_BSHD, 8);
    }
    char key[128];
    CHECK_EQ_INT(attune_shape_key(&shapes[0], key, sizeof key, err, sizeof err), 0);
    CHECK_STR(key, "b1.hq4.hkv2.sq21.skv45.d24.e4m3.c");
    CHECK_EQ_INT(attune_plan_set_descales(NULL, NULL, NULL, NULL), ATTUNE_RT_EINVAL);
    attune_dev_close(dev);
}

/* One attune_auto run of the e4m3 case c (shape s) on stream into a
 * poisoned output; its relative error against k ref (non-finite: 1e9). */
static double auto_e4m3_run(attune_auto *a, const attune_dims *s, e4m3_case *c, void *stream,
                            const double *ref, double k)
{
    char err[256] = "";
    ref_poison(c->ob, ATTUNE_DTYPE_BF16, c->nview[3]);
    int rc = attune_auto_run(a, s, &c->v[0], &c->v[1], &c->v[2], &c->v[3], stream, err,
                             sizeof err);
    CHECK_MSG(rc == 0, "attune_auto_run e4m3: %s", err);
    int64_t bad;
    double e = e4m3_rel(s, c->ob, &c->v[3], ref, k, &bad);
    return bad == 0 ? e : 1e9;
}

/* attune_auto on an e4m3 shape (libattune 1.3) with nothing answering
 * (the default tactic, planned at the bucket's ceiling): the descales set
 * through attune_auto_set_descales (far from 1) reach the plan it runs,
 * so its output is the plan path's with the same descales bit for bit
 * and within the bound of the float64 reference; a value changed in
 * place between two runs is read by the second; a second stream's new
 * plan gets them too; NULL pointers run as 1, far from the scaled
 * answer; an f32 shape through the same attune_auto is untouched. */
static void auto_should_run_e4m3_with_its_descales(void)
{
    attune_dev *dev = NULL;
    attune_auto *a = NULL;
    char err[256] = "";
    CHECK_EQ_INT(attune_dev_open("cpu", &dev, err, sizeof err), 0);
    if (dev == NULL)
        return;
    if (attune_auto_new(dev, "http://127.0.0.1:9", 0, &a, err, sizeof err) != 0) {
        /* built without libattune_client: said so */
        CHECK_EQ_INT(attune_auto_set_descales(NULL, NULL, NULL, NULL), ATTUNE_RT_EUNSUPP);
        attune_dev_close(dev);
        return;
    }
    CHECK_EQ_INT(attune_auto_set_descales(NULL, NULL, NULL, NULL), ATTUNE_RT_EINVAL);
    const attune_dims s = {1, 4, 2, 21, 45, 24, ATTUNE_DTYPE_E4M3, 1}; /* bucket 24 x 48 */
    e4m3_case c;
    e4m3_case_new(&c, &s, REF_BSHD, 8);
    float used[3];
    memcpy(used, c.desc, sizeof used);
    CHECK_EQ_INT(attune_auto_set_descales(a, &used[0], &used[1], &used[2]), 0);
    attune_choice ch;
    CHECK_EQ_INT(attune_auto_prepare(a, &s, NULL, &ch, err, sizeof err), 0);
    CHECK_STR(ch.planned, "b1.hq4.hkv2.sq24.skv48.d24.e4m3.c");

    /* the plan path: the tactic attune_auto planned, at its planned shape,
     * run at the call's lengths with the same descales */
    attune_dims at = s;
    at.sq = 24, at.skv = 48;
    attune_plan *plan = NULL;
    CHECK_EQ_INT(attune_plan_create(dev, &at, ch.tactic, &plan, err, sizeof err), 0);
    uint16_t *want = malloc(c.nview[3] * sizeof *want);
    if (plan != NULL) {
        CHECK_EQ_INT(attune_plan_set_descales(plan, &c.desc[0], &c.desc[1], &c.desc[2]), 0);
        ref_poison(c.ob, ATTUNE_DTYPE_BF16, c.nview[3]);
        CHECK_EQ_INT(attune_plan_run(plan, &c.v[0], &c.v[1], &c.v[2], &c.v[3], s.sq, s.skv, NULL),
                     0);
        memcpy(want, c.ob, c.nview[3] * sizeof *want);
        attune_plan_destroy(plan);
    }
    double e = auto_e4m3_run(a, &s, &c, NULL, c.ref, 1.0);
    CHECK_MSG(e <= e4m3_tol, "attune_auto e4m3 with descales: rel %.3g (bound %.3g)", e, e4m3_tol);
    CHECK_MSG(memcmp(c.ob, want, c.nview[3] * sizeof *want) == 0,
              "attune_auto e4m3 output differs from the plan path's (%s)", ch.tactic);
    used[2] = 2 * c.desc[2]; /* in place: the next run reads it */
    e = auto_e4m3_run(a, &s, &c, NULL, c.ref, 2.0);
    CHECK_MSG(e <= e4m3_tol, "V's descale doubled in place: rel %.3g to twice the reference", e);
    int other_stream = 0; /* a new plan, the descales set on it */
    e = auto_e4m3_run(a, &s, &c, &other_stream, c.ref, 2.0);
    CHECK_MSG(e <= e4m3_tol, "second stream's plan: rel %.3g to twice the reference", e);
    CHECK_EQ_INT(attune_auto_set_descales(a, NULL, NULL, NULL), 0);
    e = auto_e4m3_run(a, &s, &c, NULL, c.ref1, 1.0);
    CHECK_MSG(e <= e4m3_tol, "no descales: rel %.3g to the unscaled reference", e);
    e = e4m3_rel(&s, c.ob, &c.v[3], c.ref, 1.0, &(int64_t){0});
    CHECK_MSG(e > 10 * e4m3_tol, "no descales: rel %.3g to the scaled reference, not far", e);
    CHECK_EQ_INT(attune_auto_set_descales(a, &used[0], &used[1], &used[2]), 0);
    runner r = {.autop = a};
    const attune_dims f32 = {1, 4, 2, 21, 45, 24, ATTUNE_DTYPE_F32, 1};
    run_views(&r, &f32, REF_BHSD, 0, f32.sq, f32.skv, 90);
    free(want);
    e4m3_case_free(&c);
    attune_auto_free(a);
    attune_dev_close(dev);
}

int main(void)
{
    RUN(plans_should_run_every_cpu_tactic_on_views);
    RUN(auto_should_run_every_length_of_a_bucket);
    RUN(auto_should_plan_a_length_run_alone_exactly);
    RUN(bad_arguments_should_be_refused_with_a_reason);
    RUN(e4m3_plans_should_read_their_descales);
    RUN(auto_should_run_e4m3_with_its_descales);
    return test_summary();
}
