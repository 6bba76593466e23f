/* test_libattune.c -- libattune's public ABI on the CPU device, as a
 * runtime uses it (linked against libattune.so only): every tactic the CPU
 * lists runs on caller views against a float64 reference, in [b, h, s, d]
 * and [b, s, h, d] layouts with gaps in the rows, at the planned lengths
 * and shorter ones (a growing KV cache), writing its output rows and
 * nothing else; bad arguments are refused with a reason; attune_auto runs
 * every length of a bucket from one plan per stream. */
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

int main(void)
{
    RUN(plans_should_run_every_cpu_tactic_on_views);
    RUN(auto_should_run_every_length_of_a_bucket);
    RUN(auto_should_plan_a_length_run_alone_exactly);
    RUN(bad_arguments_should_be_refused_with_a_reason);
    return test_summary();
}
