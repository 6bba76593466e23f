/* test_cpu_kernels.c -- the CPU backend: every variant x pad x dtype
 * against the float64 reference through attn_cpu_ops, masks that must
 * fail the same check when wrong, full output coverage, tactic listing,
 * device identity, memory limits and timing.
 *
 * Tolerance (relative L2 error ||out - ref|| / ||ref|| over all rows):
 * the CPU computes in fp32 from inputs that are exact in fp32 (f16/bf16
 * values are floats), so the storage dtype enters only when the output is
 * stored. Round-to-nearest-even bounds each element's relative error by the
 * unit roundoff u (2^-11 for f16, 2^-8 for bf16, 2^-24 for f32), and
 * |e_i| <= u |x_i| for all i gives ||e|| <= u ||x||: the store alone keeps
 * the relative L2 error under u. fp32 arithmetic (d-term dot products, sums
 * over <= 256 keys, expf) adds about 1e-7 here; 1e-5 covers it with a wide
 * margin. Hence f32 1e-5, f16 2^-11 + 1e-5 = 4.98e-4, bf16 2^-8 + 1e-5 =
 * 3.92e-3 -- tighter than the GPU defaults (2e-3, 1.5e-2), which must allow
 * half-precision arithmetic; the CPU has none, so a CPU error above u is a
 * bug, not noise. The largest errors observed are printed. */
#include <stdint.h>

#include "common/hash.h"
#include "kernels/attn.h"
#include "kernels/cpu/cpu_internal.h"
#include "kernels/dtype.h"
#include "test.h"

static const attn_ops *ops = &attn_cpu_ops;

static double tolerance(attn_dtype t)
{
    switch (t) {
    case ATTN_F16:
        return 0x1p-11 + 1e-5;
    case ATTN_BF16:
    case ATTN_E4M3: /* out is bf16 */
        return 0x1p-8 + 1e-5;
    case ATTN_F32:
        break;
    }
    return 1e-5;
}

static attn_shape mkshape(int64_t b, int64_t hq, int64_t hkv, int64_t sq, int64_t skv, int64_t d,
                          attn_dtype t, int causal)
{
    attn_shape s = {b, hq, hkv, sq, skv, d, t, causal};
    return s;
}

static attn_tactic mktactic(attn_variant v, int pad)
{
    attn_tactic t = {0};
    t.variant = v;
    t.pad = pad;
    t.acc = v == ATTN_FUSED ? ATTN_ACC_NONE : ATTN_ACC_F32;
    return t;
}

static int64_t nrows_of(const attn_shape *s) { return s->b * s->hq * s->sq; }

/* Errors of out against ref (n rows of d): relative L2, max abs, count of
 * non-finite outputs, and rows that should be exactly 0 (ref row all 0,
 * i.e. no visible key) but are not. */
typedef struct {
    double rel_l2, max_abs;
    int64_t nonfinite, bad_zero_rows;
} errors;

static errors compare(const double *out, const double *ref, int64_t n, int64_t d)
{
    errors e = {0, 0, 0, 0};
    double num = 0, den = 0;
    for (int64_t r = 0; r < n; r++) {
        int ref_zero = 1, out_zero = 1;
        for (int64_t c = 0; c < d; c++) {
            double o = out[r * d + c], x = ref[r * d + c];
            if (!isfinite(o)) {
                e.nonfinite++;
                continue;
            }
            num += (o - x) * (o - x);
            den += x * x;
            if (fabs(o - x) > e.max_abs)
                e.max_abs = fabs(o - x);
            ref_zero &= x == 0.0;
            out_zero &= o == 0.0;
        }
        e.bad_zero_rows += ref_zero && !out_zero;
    }
    e.rel_l2 = den > 0 ? sqrt(num / den) : sqrt(num);
    return e;
}

/* Every row index of s, in order. */
static int64_t *all_rows(const attn_shape *s)
{
    int64_t n = nrows_of(s);
    int64_t *rows = malloc((size_t)n * sizeof *rows);
    for (int64_t r = 0; rows != NULL && r < n; r++)
        rows[r] = r;
    return rows;
}

/* plan, poison, run, fetch every row, compare with ref. Returns the plan's
 * error code (0 on success), errors in *e. */
static int run_and_compare(attn_session *ss, const attn_shape *s, const attn_tactic *t,
                           const int64_t *rows, const double *ref, double *out, errors *e)
{
    attn_plan *p = NULL;
    int rc = ops->plan(ss, t, &p);
    if (rc != 0)
        return rc;
    int64_t n = nrows_of(s);
    if ((rc = ops->poison(ss)) == 0 && (rc = ops->run(p)) == 0 &&
        (rc = ops->fetch_rows(ss, rows, (int)n, out)) == 0)
        *e = compare(out, ref, n, s->d);
    ops->plan_free(p);
    return rc;
}

/* ---- variants against the reference */

typedef struct {
    int64_t b, hq, hkv, d;
    const char *what;
} heads;

static void variants_should_match_reference(void)
{
    /* d = 20 and 36 are not multiples of the kernels' 8-float groups. */
    const heads hs[] = {{2, 2, 2, 20, "MHA"}, {1, 4, 2, 64, "GQA 4/2"},
                        {1, 8, 2, 8, "GQA 8/2"}, {2, 3, 1, 36, "MQA"}};
    const int64_t lens[] = {1, 7, 50, 197};
    const attn_dtype types[] = {ATTN_F32, ATTN_F16, ATTN_BF16};
    const attn_variant vars[] = {ATTN_FUSED, ATTN_SPLIT, ATTN_SPLIT_REPEAT, ATTN_FOLDED};
    double worst[3] = {0, 0, 0};
    char key[ATTN_SHAPE_KEY_MAX], tstr[ATTN_TACTIC_STR_MAX];
    int runs = 0;

    for (size_t hi = 0; hi < sizeof hs / sizeof hs[0]; hi++)
        for (int causal = 0; causal <= 1; causal++)
            for (size_t qi = 0; qi < 4; qi++)
                for (size_t ki = 0; ki < 4; ki++)
                    for (size_t ti = 0; ti < 3; ti++) {
                        attn_shape s = mkshape(hs[hi].b, hs[hi].hq, hs[hi].hkv, lens[qi],
                                               lens[ki], hs[hi].d, types[ti], causal);
                        attn_shape_key(&s, key, sizeof key);
                        attn_session *ss = NULL;
                        int rc = ops->session_open(0, &s, hash_fnv1a64(hash_fnv1a64_init(), key,
                                                                       strlen(key)), &ss);
                        CHECK_MSG(rc == 0, "%s: session_open %d", key, rc);
                        if (rc != 0)
                            continue;
                        int64_t n = nrows_of(&s);
                        int64_t *rows = all_rows(&s);
                        double *ref = malloc((size_t)(n * s.d) * sizeof *ref);
                        double *out = malloc((size_t)(n * s.d) * sizeof *out);
                        CHECK(rows && ref && out);
                        if (rows && ref && out &&
                            ops->reference(ss, rows, (int)n, ref) == 0) {
                            for (size_t vi = 0; vi < 4; vi++)
                                for (int pi = 0; pi < ATTN_NPADS; pi++) {
                                    attn_tactic t = mktactic(vars[vi], attn_pads[pi]);
                                    errors e;
                                    rc = run_and_compare(ss, &s, &t, rows, ref, out, &e);
                                    attn_tactic_str(&t, tstr, sizeof tstr);
                                    runs++;
                                    CHECK_MSG(rc == 0, "%s %s: %d", key, tstr, rc);
                                    if (rc != 0)
                                        continue;
                                    CHECK_MSG(e.nonfinite == 0, "%s %s: %lld non-finite", key,
                                              tstr, (long long)e.nonfinite);
                                    CHECK_MSG(e.bad_zero_rows == 0,
                                              "%s %s: %lld rows should be 0", key, tstr,
                                              (long long)e.bad_zero_rows);
                                    CHECK_MSG(e.rel_l2 <= tolerance(s.dtype),
                                              "%s %s: rel L2 %.3g > %.3g", key, tstr, e.rel_l2,
                                              tolerance(s.dtype));
                                    if (e.rel_l2 > worst[ti])
                                        worst[ti] = e.rel_l2;
                                }
                        } else {
                            CHECK_MSG(0, "%s: reference failed", key);
                        }
                        free(rows);
                        free(ref);
                        free(out);
                        ops->session_close(ss);
                    }
    fprintf(stderr, "  %d runs; worst rel L2: f32 %.3g (tol %.3g), f16 %.3g (tol %.3g), "
                    "bf16 %.3g (tol %.3g)\n",
            runs, worst[0], tolerance(ATTN_F32), worst[1], tolerance(ATTN_F16), worst[2],
            tolerance(ATTN_BF16));
}

/* Rows that see no key (causal, sq > skv) are exactly 0, and every output
 * element is written: poison, run, nothing left NaN -- padded or not. */
static void variants_should_write_every_output_element(void)
{
    attn_shape s = mkshape(2, 4, 2, 60, 13, 24, ATTN_F16, 1);
    attn_session *ss = NULL;
    CHECK_EQ_INT(ops->session_open(0, &s, 7, &ss), 0);
    if (ss == NULL)
        return;
    int64_t n = nrows_of(&s);
    int64_t *rows = all_rows(&s);
    double *out = malloc((size_t)(n * s.d) * sizeof *out);
    const attn_variant vars[] = {ATTN_FUSED, ATTN_SPLIT, ATTN_SPLIT_REPEAT, ATTN_FOLDED};
    for (size_t vi = 0; vi < 4; vi++)
        for (int pi = 0; pi < ATTN_NPADS; pi++) {
            attn_tactic t = mktactic(vars[vi], attn_pads[pi]);
            attn_plan *p = NULL;
            CHECK_EQ_INT(ops->plan(ss, &t, &p), 0);
            if (p == NULL)
                continue;
            CHECK_EQ_INT(ops->poison(ss), 0);
            CHECK_EQ_INT(ops->fetch_rows(ss, rows, (int)n, out), 0);
            CHECK(isnan(out[0]) && isnan(out[n * s.d - 1])); /* poison took */
            CHECK_EQ_INT(ops->run(p), 0);
            CHECK_EQ_INT(ops->fetch_rows(ss, rows, (int)n, out), 0);
            int64_t nan = 0, nonzero_blind = 0;
            for (int64_t r = 0; r < n; r++)
                for (int64_t c = 0; c < s.d; c++) {
                    double o = out[r * s.d + c];
                    nan += isnan(o);
                    /* query i sees no key while i + (skv - sq) < 0 */
                    nonzero_blind += (r % s.sq) < s.sq - s.skv && o != 0.0;
                }
            CHECK_EQ_INT(nan, 0);
            CHECK_EQ_INT(nonzero_blind, 0);
            ops->plan_free(p);
        }
    free(rows);
    free(out);
    ops->session_close(ss);
}

/* ---- the check must catch wrong masks
 *
 * These drive the kernels directly (cpu_internal.h) on hand-made padded
 * buffers, once with the right mask and once with a wrong one, and apply
 * the same relative-L2 check as above: right passes, wrong fails. */

typedef struct {
    attn_shape s;
    int pad;
    void *q, *k, *v;      /* unpadded, for the reference */
    void *qp, *kp, *vp, *op; /* padded copies, padded rows zero */
    double *ref, *out;
} handmade;

static void *pad_copy(const void *src, int64_t heads_, int64_t len, int64_t lenp, int64_t d,
                      size_t es)
{
    char *dst = calloc((size_t)(heads_ * lenp * d), es);
    for (int64_t h = 0; dst != NULL && h < heads_; h++)
        memcpy(dst + (size_t)(h * lenp * d) * es, (const char *)src + (size_t)(h * len * d) * es,
               (size_t)(len * d) * es);
    return dst;
}

static int handmade_open(handmade *hm, attn_shape s, int pad)
{
    memset(hm, 0, sizeof *hm);
    hm->s = s;
    hm->pad = pad;
    size_t es = attn_dtype_size(s.dtype);
    int64_t sqp = attn_round_up(s.sq, pad), skvp = attn_round_up(s.skv, pad);
    size_t nq = (size_t)(s.b * s.hq * s.sq * s.d), nkv = (size_t)(s.b * s.hkv * s.skv * s.d);
    hm->q = malloc(nq * es);
    hm->k = malloc(nkv * es);
    hm->v = malloc(nkv * es);
    hm->ref = malloc(nq * sizeof(double));
    hm->out = malloc(nq * sizeof(double));
    if (!hm->q || !hm->k || !hm->v || !hm->ref || !hm->out)
        return -1;
    uint64_t st = 42;
    cpu_fill_normal(hm->q, s.dtype, nq, &st);
    cpu_fill_normal(hm->k, s.dtype, nkv, &st);
    cpu_fill_normal(hm->v, s.dtype, nkv, &st);
    hm->qp = pad_copy(hm->q, s.b * s.hq, s.sq, sqp, s.d, es);
    hm->kp = pad_copy(hm->k, s.b * s.hkv, s.skv, skvp, s.d, es);
    hm->vp = pad_copy(hm->v, s.b * s.hkv, s.skv, skvp, s.d, es);
    hm->op = calloc((size_t)(s.b * s.hq * sqp * s.d), es);
    if (!hm->qp || !hm->kp || !hm->vp || !hm->op)
        return -1;
    int64_t *rows = all_rows(&s);
    int rc = rows ? cpu_reference(&s, hm->q, hm->k, hm->v, rows, (int)nrows_of(&s), hm->ref) : -1;
    free(rows);
    return rc;
}

static void handmade_close(handmade *hm)
{
    free(hm->q);
    free(hm->k);
    free(hm->v);
    free(hm->qp);
    free(hm->kp);
    free(hm->vp);
    free(hm->op);
    free(hm->ref);
    free(hm->out);
}

/* The problem as the backend's plan builds it: real lengths for the mask. */
static cpu_problem handmade_problem(const handmade *hm)
{
    cpu_problem pb = {0};
    pb.dtype = hm->s.dtype;
    pb.b = hm->s.b;
    pb.hq = hm->s.hq;
    pb.hkv = hm->s.hkv;
    pb.d = hm->s.d;
    pb.sq = hm->s.sq;
    pb.skv = hm->s.skv;
    pb.sqp = attn_round_up(hm->s.sq, hm->pad);
    pb.skvp = attn_round_up(hm->s.skv, hm->pad);
    pb.diag = hm->s.skv - hm->s.sq;
    pb.causal = hm->s.causal;
    pb.q = hm->qp;
    pb.k = hm->kp;
    pb.v = hm->vp;
    pb.out = hm->op;
    return pb;
}

/* Run variant v on pb, drop the padded query rows, relative L2 vs ref. */
static double handmade_error(handmade *hm, attn_variant v, const cpu_problem *pb)
{
    static const cpu_kernel *const kernels[] = {&cpu_fused_kernel, &cpu_split_kernel,
                                                &cpu_split_repeat_kernel, &cpu_folded_kernel};
    const cpu_kernel *k = kernels[v == ATTN_FUSED ? 0 : v == ATTN_SPLIT ? 1
                                  : v == ATTN_SPLIT_REPEAT ? 2 : 3];
    cpu_work *w = NULL;
    if (cpu_work_alloc(k, pb, &w) != 0 || cpu_kernel_run(k, pb, w) != 0) {
        cpu_work_free(w);
        return INFINITY;
    }
    cpu_work_free(w);
    const attn_shape *s = &hm->s;
    for (int64_t bh = 0; bh < s->b * s->hq; bh++)
        for (int64_t i = 0; i < s->sq; i++)
            for (int64_t c = 0; c < s->d; c++)
                hm->out[(bh * s->sq + i) * s->d + c] =
                    dtype_load_f64(hm->op, s->dtype, (size_t)((bh * pb->sqp + i) * s->d + c));
    errors e = compare(hm->out, hm->ref, nrows_of(s), s->d);
    return e.nonfinite ? INFINITY : e.rel_l2;
}

static const attn_variant kernel_vars[] = {ATTN_FUSED, ATTN_SPLIT, ATTN_SPLIT_REPEAT, ATTN_FOLDED};

static void check_should_fail_without_padded_key_masking(void)
{
    /* skv 50 padded to 64: 14 zero keys, each with score 0, would take
     * weight away from the real ones if left in the softmax. */
    handmade hm;
    attn_shape s = mkshape(1, 4, 2, 50, 50, 32, ATTN_F32, 0);
    CHECK_EQ_INT(handmade_open(&hm, s, 64), 0);
    for (size_t vi = 0; vi < 4; vi++) {
        cpu_problem pb = handmade_problem(&hm);
        double right = handmade_error(&hm, kernel_vars[vi], &pb);
        pb.skv = pb.skvp; /* wrong: the mask from the padded length */
        double wrong = handmade_error(&hm, kernel_vars[vi], &pb);
        CHECK_MSG(right <= tolerance(s.dtype), "%s right mask: %.3g",
                  attn_variant_name(kernel_vars[vi]), right);
        CHECK_MSG(wrong > tolerance(s.dtype), "%s unmasked padded keys pass: %.3g",
                  attn_variant_name(kernel_vars[vi]), wrong);
    }
    handmade_close(&hm);
}

static void check_should_fail_with_top_left_causal_mask(void)
{
    /* 50 queries, 197 keys: bottom-right, query i sees keys <= i + 147;
     * top-left (FlashAttention < 2.1's convention) sees keys <= i. Even in
     * bf16, whose tolerance is the loosest, the difference must show. */
    handmade hm;
    attn_shape s = mkshape(1, 2, 1, 50, 197, 32, ATTN_BF16, 1);
    CHECK_EQ_INT(handmade_open(&hm, s, 8), 0);
    for (size_t vi = 0; vi < 4; vi++) {
        cpu_problem pb = handmade_problem(&hm);
        double right = handmade_error(&hm, kernel_vars[vi], &pb);
        pb.diag = 0; /* wrong: top-left aligned */
        double wrong = handmade_error(&hm, kernel_vars[vi], &pb);
        CHECK_MSG(right <= tolerance(s.dtype), "%s right mask: %.3g",
                  attn_variant_name(kernel_vars[vi]), right);
        CHECK_MSG(wrong > tolerance(s.dtype), "%s top-left mask passes: %.3g",
                  attn_variant_name(kernel_vars[vi]), wrong);
    }
    handmade_close(&hm);
}

static void check_should_fail_with_causal_mask_from_padded_lengths(void)
{
    /* sq 50, skv 60, pad 64: real diagonal offset 10, padded 0. */
    handmade hm;
    attn_shape s = mkshape(1, 4, 2, 50, 60, 16, ATTN_F16, 1);
    CHECK_EQ_INT(handmade_open(&hm, s, 64), 0);
    for (size_t vi = 0; vi < 4; vi++) {
        cpu_problem pb = handmade_problem(&hm);
        double right = handmade_error(&hm, kernel_vars[vi], &pb);
        pb.diag = pb.skvp - pb.sqp;
        double wrong = handmade_error(&hm, kernel_vars[vi], &pb);
        CHECK_MSG(right <= tolerance(s.dtype), "%s right mask: %.3g",
                  attn_variant_name(kernel_vars[vi]), right);
        CHECK_MSG(wrong > tolerance(s.dtype), "%s padded-length diagonal passes: %.3g",
                  attn_variant_name(kernel_vars[vi]), wrong);
    }
    handmade_close(&hm);
}

/* ---- the reference itself */

static void reference_should_match_hand_computation(void)
{
    /* d = 2, one query [1, 0], keys [0, 0] and [2, 0]: scores 0 and
     * 2/sqrt(2) = sqrt(2); out = (v0 + e^sqrt2 v1) / (1 + e^sqrt2). */
    attn_shape s = mkshape(1, 1, 1, 1, 2, 2, ATTN_F32, 0);
    const float q[] = {1, 0}, k[] = {0, 0, 2, 0}, v[] = {1, 2, -3, 5};
    const int64_t row = 0;
    double ref[2];
    CHECK_EQ_INT(cpu_reference(&s, q, k, v, &row, 1, ref), 0);
    double w = exp(sqrt(2.0));
    CHECK_NEAR(ref[0], (1 - 3 * w) / (1 + w), 1e-14);
    CHECK_NEAR(ref[1], (2 + 5 * w) / (1 + w), 1e-14);

    /* Causal, sq == skv: query 0 sees key 0 only, so its output is v0. */
    s = mkshape(1, 1, 1, 2, 2, 2, ATTN_F32, 1);
    const float q2[] = {1, 0, 1, 0};
    CHECK_EQ_INT(cpu_reference(&s, q2, k, v, &row, 1, ref), 0);
    CHECK(ref[0] == 1.0 && ref[1] == 2.0);

    /* Causal, sq > skv: query 0 of 3 with 2 keys sees none: zeros. */
    s = mkshape(1, 1, 1, 3, 2, 2, ATTN_F32, 1);
    const float q3[] = {1, 0, 1, 0, 1, 0};
    CHECK_EQ_INT(cpu_reference(&s, q3, k, v, &row, 1, ref), 0);
    CHECK(ref[0] == 0.0 && ref[1] == 0.0);
    const int64_t bad = 3;
    CHECK_EQ_INT(cpu_reference(&s, q3, k, v, &bad, 1, ref), ATTUNE_EINVAL);
}

/* ---- tactics */

static int count_variant(const attn_tactic *t, int n, attn_variant v)
{
    int c = 0;
    for (int i = 0; i < n; i++)
        c += t[i].variant == v;
    return c;
}

static void tactics_should_list_applicable_variants_and_pads(void)
{
    attn_tactic t[32];
    attn_shape mha = mkshape(1, 8, 8, 50, 1018, 64, ATTN_F16, 0);
    int n = ops->tactics(0, &mha, t, 32);
    CHECK_EQ_INT(n, 8); /* fused x 4 pads, split x 4 pads */
    CHECK_EQ_INT(count_variant(t, n, ATTN_FUSED), 4);
    CHECK_EQ_INT(count_variant(t, n, ATTN_SPLIT), 4);
    CHECK_EQ_INT(count_variant(t, n, ATTN_FOLDED), 0);
    CHECK_EQ_INT(count_variant(t, n, ATTN_SPLIT_REPEAT), 0);
    CHECK_EQ_INT(count_variant(t, n, ATTN_FUSED_SPLITKV), 0);

    attn_shape gqa = mkshape(1, 8, 2, 50, 1018, 64, ATTN_F32, 1);
    attn_shape mqa = mkshape(1, 8, 1, 1, 1, 256, ATTN_BF16, 0); /* pads beyond the lengths too */
    const attn_shape *gs[] = {&gqa, &mqa};
    for (int si = 0; si < 2; si++) {
        n = ops->tactics(0, gs[si], t, 32);
        CHECK_EQ_INT(n, 16);
        for (int v = 0; v < ATTN_NVARIANTS; v++)
            CHECK_EQ_INT(count_variant(t, n, (attn_variant)v),
                     (v == ATTN_FUSED_SPLITKV || v == ATTN_CUDNN) ? 0 : 4);
        for (int i = 0; i < n; i++) {
            CHECK_EQ_INT(t[i].pad, attn_pads[i % ATTN_NPADS]);
            CHECK_EQ_INT(t[i].acc, t[i].variant == ATTN_FUSED ? ATTN_ACC_NONE : ATTN_ACC_F32);
            CHECK(t[i].tile_m == 0 && t[i].tile_n == 0 && t[i].splits == 0 && t[i].warps == 0);
        }
        for (int i = 0; i < n; i++)
            for (int j = i + 1; j < n; j++)
                CHECK(memcmp(&t[i], &t[j], sizeof t[i]) != 0);
    }
    char buf[ATTN_TACTIC_STR_MAX];
    n = ops->tactics(0, &gqa, t, 32);
    CHECK_STR(attn_tactic_str(&t[0], buf, sizeof buf), "fused/pad=1");
    CHECK_STR(attn_tactic_str(&t[n - 1], buf, sizeof buf), "folded/acc=f32/pad=64");

    /* max below the count: the total comes back, only max are written */
    attn_tactic few[4];
    memset(few, 0xab, sizeof few);
    CHECK_EQ_INT(ops->tactics(0, &gqa, few, 3), 16);
    CHECK_EQ_INT(few[2].variant, ATTN_FUSED);
    CHECK(few[3].pad == (int)0xabababab);
    CHECK_EQ_INT(ops->tactics(0, &gqa, NULL, 0), 16);

    CHECK_EQ_INT(ops->tactics(1, &gqa, t, 32), ATTUNE_ENODEV);
    attn_shape bad = gqa;
    bad.hkv = 3;
    CHECK_EQ_INT(ops->tactics(0, &bad, t, 32), ATTUNE_EINVAL);
}

static void plan_should_refuse_tactics_the_cpu_does_not_run(void)
{
    attn_shape s = mkshape(1, 4, 2, 8, 8, 16, ATTN_F16, 0);
    attn_session *ss = NULL;
    CHECK_EQ_INT(ops->session_open(0, &s, 1, &ss), 0);
    if (ss == NULL)
        return;
    attn_plan *p = (attn_plan *)&s; /* must be reset to NULL on failure */
    attn_tactic t = mktactic(ATTN_FUSED_SPLITKV, 1);
    t.splits = 4;
    CHECK_EQ_INT(ops->plan(ss, &t, &p), ATTUNE_EUNSUPP);
    CHECK(p == NULL);
    t = mktactic(ATTN_SPLIT, 8);
    t.acc = ATTN_ACC_F16;
    CHECK_EQ_INT(ops->plan(ss, &t, &p), ATTUNE_EUNSUPP);
    t = mktactic(ATTN_FUSED, 1);
    t.tile_m = t.tile_n = 64;
    CHECK_EQ_INT(ops->plan(ss, &t, &p), ATTUNE_EUNSUPP);
    t = mktactic(ATTN_FOLDED, 3);
    CHECK_EQ_INT(ops->plan(ss, &t, &p), ATTUNE_EINVAL);
    t = mktactic(ATTN_FOLDED, 16);
    CHECK_EQ_INT(ops->plan(ss, &t, &p), 0);
    ops->plan_free(p);
    ops->session_close(ss);
}

/* ---- device, sessions, memory, timing */

static void device_info_should_describe_the_cpu(void)
{
    attn_device_info info;
    attn_stack st;
    CHECK_EQ_INT(ops->device_count(), 1);
    CHECK_STR(ops->name, "cpu");
    CHECK_EQ_INT(ops->device_info(0, &info, &st), 0);
    CHECK(strncmp(info.id, "CPU-", 4) == 0 && strlen(info.id) == 20);
    CHECK(strspn(info.id + 4, "0123456789abcdef") == 16);
    CHECK(info.name[0] != 0);
    CHECK_STR(info.kind, "cpu");
    CHECK_EQ_INT(info.index, -1);
    CHECK(info.cc_major == 0 && info.cc_minor == 0);
    CHECK(info.sm_count >= 1);
    CHECK(info.memory_mb > 0);
    CHECK_STR(st.driver, "");
    CHECK_STR(st.runtime, "cpu");
    CHECK_STR(st.blas, "");
    CHECK_STR(st.attune, ATTUNE_VERSION);
    CHECK_STR(st.kernels, ATTUNE_KERNELS_HASH);
    CHECK(strlen(st.id) == 16);
    attn_device_info again;
    CHECK_EQ_INT(ops->device_info(0, &again, NULL), 0);
    CHECK_STR(again.id, info.id); /* stable */
    CHECK_EQ_INT(ops->device_info(1, &info, &st), ATTUNE_ENODEV);
    fprintf(stderr, "  %s \"%s\" %d cores %lld MB, stack %s\n", info.id, info.name,
            info.sm_count, (long long)info.memory_mb, st.id);
}

static void fill_normal_should_give_nonzero_standard_normals(void)
{
    const size_t n = 200000;
    uint16_t *h = malloc(n * sizeof *h);
    uint64_t st = 99;
    cpu_fill_normal(h, ATTN_F16, n, &st);
    double sum = 0, sum2 = 0;
    size_t zeros = 0;
    for (size_t i = 0; i < n; i++) {
        double x = dtype_load_f64(h, ATTN_F16, i);
        zeros += x == 0.0;
        sum += x;
        sum2 += x * x;
    }
    double mean = sum / (double)n, var = sum2 / (double)n - mean * mean;
    CHECK_EQ_INT(zeros, 0);
    CHECK_NEAR(mean, 0.0, 0.01); /* 4.5 sigma of the mean */
    CHECK_NEAR(var, 1.0, 0.02);
    free(h);
}

static void session_should_be_deterministic_per_seed(void)
{
    attn_shape s = mkshape(1, 2, 1, 5, 9, 16, ATTN_BF16, 1);
    attn_session *a = NULL, *b = NULL, *c = NULL;
    CHECK_EQ_INT(ops->session_open(0, &s, 1234, &a), 0);
    CHECK_EQ_INT(ops->session_open(0, &s, 1234, &b), 0);
    CHECK_EQ_INT(ops->session_open(0, &s, 1235, &c), 0);
    if (a && b && c) {
        const int64_t rows[] = {4, 9, 0};
        double ra[3 * 16], rb[3 * 16], rc[3 * 16];
        CHECK_EQ_INT(ops->reference(a, rows, 3, ra), 0);
        CHECK_EQ_INT(ops->reference(b, rows, 3, rb), 0);
        CHECK_EQ_INT(ops->reference(c, rows, 3, rc), 0);
        CHECK(memcmp(ra, rb, sizeof ra) == 0);
        CHECK(memcmp(ra, rc, sizeof ra) != 0);
        const int64_t bad[] = {10};
        CHECK_EQ_INT(ops->reference(a, bad, 1, ra), ATTUNE_EINVAL);
        CHECK_EQ_INT(ops->fetch_rows(a, bad, 1, ra), ATTUNE_EINVAL);
        const int64_t neg[] = {-1};
        CHECK_EQ_INT(ops->fetch_rows(a, neg, 1, ra), ATTUNE_EINVAL);
    }
    ops->session_close(a);
    ops->session_close(b);
    ops->session_close(c);
    CHECK_EQ_INT(ops->session_open(1, &s, 1, &a), ATTUNE_ENODEV);
    CHECK(a == NULL);
}

static void session_open_should_return_enomem_beyond_memory(void)
{
    /* 4 buffers of 2^34 f32 elements: 256 GiB, every size within limits. */
    attn_shape s = mkshape(1, 16, 16, 1 << 20, 1 << 20, 1024, ATTN_F32, 0);
    CHECK_EQ_INT(attn_shape_validate(&s, NULL, 0), 0);
    if (cpu_mem_budget() >= 4.0 * 4.0 * 17179869184.0) {
        fprintf(stderr, "  skipped: this host's budget holds 256 GiB\n");
        return;
    }
    attn_session *ss = (attn_session *)&s;
    CHECK_EQ_INT(ops->session_open(0, &s, 1, &ss), ATTUNE_ENOMEM);
    CHECK(ss == NULL);
}

static void plan_should_return_enomem_for_a_huge_score_matrix(void)
{
    /* 2^18 x 2^18 scores are 256 GiB for split; fused needs only tiles. */
    attn_shape s = mkshape(1, 1, 1, 1 << 18, 1 << 18, 8, ATTN_F16, 0);
    attn_session *ss = NULL;
    CHECK_EQ_INT(ops->session_open(0, &s, 1, &ss), 0);
    if (ss == NULL)
        return;
    attn_plan *p = NULL;
    attn_tactic t = mktactic(ATTN_SPLIT, 1);
    if (cpu_mem_budget() < 256.0 * 1073741824.0) {
        CHECK_EQ_INT(ops->plan(ss, &t, &p), ATTUNE_ENOMEM);
        CHECK(p == NULL);
    }
    t = mktactic(ATTN_FUSED, 64);
    CHECK_EQ_INT(ops->plan(ss, &t, &p), 0);
    ops->plan_free(p);
    ops->session_close(ss);
}

static void time_should_report_microseconds_per_call(void)
{
    attn_shape s = mkshape(1, 4, 1, 50, 100, 64, ATTN_F16, 1);
    attn_session *ss = NULL;
    CHECK_EQ_INT(ops->session_open(0, &s, 5, &ss), 0);
    if (ss == NULL)
        return;
    attn_tactic t = mktactic(ATTN_FOLDED, 64);
    attn_plan *p = NULL;
    CHECK_EQ_INT(ops->plan(ss, &t, &p), 0);
    attn_timing kernel = {0}, with = {0};
    CHECK_EQ_INT(ops->time(p, 5, 0, &kernel), 0);
    CHECK_EQ_INT(ops->time(p, 5, 1, &with), 0);
    CHECK(kernel.us > 0 && kernel.us < 1e6);
    CHECK(with.us > 0 && with.us < 1e6);
    CHECK_EQ_INT(ops->time(p, 0, 0, &kernel), ATTUNE_EINVAL);
    /* timing with copies leaves a complete output */
    int64_t n = nrows_of(&s);
    int64_t *rows = all_rows(&s);
    double *out = malloc((size_t)(n * s.d) * sizeof *out);
    double *ref = malloc((size_t)(n * s.d) * sizeof *ref);
    CHECK_EQ_INT(ops->poison(ss), 0);
    CHECK_EQ_INT(ops->time(p, 2, 1, &with), 0);
    CHECK_EQ_INT(ops->fetch_rows(ss, rows, (int)n, out), 0);
    CHECK_EQ_INT(ops->reference(ss, rows, (int)n, ref), 0);
    CHECK(compare(out, ref, n, s.d).rel_l2 <= tolerance(s.dtype));
    free(rows);
    free(out);
    free(ref);
    ops->plan_free(p);
    ops->session_close(ss);
}

int main(void)
{
    RUN(variants_should_match_reference);
    RUN(variants_should_write_every_output_element);
    RUN(check_should_fail_without_padded_key_masking);
    RUN(check_should_fail_with_top_left_causal_mask);
    RUN(check_should_fail_with_causal_mask_from_padded_lengths);
    RUN(reference_should_match_hand_computation);
    RUN(tactics_should_list_applicable_variants_and_pads);
    RUN(plan_should_refuse_tactics_the_cpu_does_not_run);
    RUN(device_info_should_describe_the_cpu);
    RUN(fill_normal_should_give_nonzero_standard_normals);
    RUN(session_should_be_deterministic_per_seed);
    RUN(session_open_should_return_enomem_beyond_memory);
    RUN(plan_should_return_enomem_for_a_huge_score_matrix);
    RUN(time_should_report_microseconds_per_call);
    return test_summary();
}
