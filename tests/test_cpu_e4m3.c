/* test_cpu_e4m3.c -- FP8 (e4m3) on the CPU backend: sessions filled from a
 * bf16 source as attn_ops.reference_source says, every CPU e4m3 tactic
 * against the float64 reference of the stored values times their
 * descales, planted errors the same check catches, the reference of the
 * source, and plans on caller buffers reading attn_io.descale.
 *
 * Tolerance (relative L2 over all rows) against `reference`: the kernels
 * load each stored e4m3 value (exact in float) and multiply it by its
 * tensor's descale (one float rounding, 2^-24 relative), compute in fp32
 * and store bf16. The bf16 store bounds the relative L2 error by its unit
 * roundoff 2^-8 (test_cpu_kernels.c says why); the descale's rounding and
 * fp32 arithmetic add about 1e-7, covered by 1e-5: 2^-8 + 1e-5. The CPU
 * emulates FP8's arithmetic, so an error above it is a bug.
 *
 * Against `reference_source` the input rounding joins in: e4m3 keeps 3
 * mantissa bits (relative rounding 2^-4 at most), so ||ref - ref_src|| /
 * ||ref_src|| is well above the bf16 store's 2^-8 and well below 1; and
 * by the triangle inequality a kernel's error against the source is that
 * difference give or take its own error against the reference. */
#include <stdint.h>

#include "common/hash.h"
#include "kernels/attn.h"
#include "kernels/cpu/cpu_internal.h"
#include "kernels/dtype.h"
#include "test.h"

static const attn_ops *ops = &attn_cpu_ops;

static const double tol = 0x1p-8 + 1e-5;

static attn_shape mkshape(int64_t b, int64_t hq, int64_t hkv, int64_t sq, int64_t skv, int64_t d,
                          int causal)
{
    attn_shape s = {b, hq, hkv, sq, skv, d, ATTN_E4M3, causal};
    return s;
}

static int64_t nrows_of(const attn_shape *s) { return s->b * s->hq * s->sq; }

static int64_t *all_rows(const attn_shape *s)
{
    int64_t n = nrows_of(s);
    int64_t *rows = malloc((size_t)n * sizeof *rows);
    for (int64_t r = 0; rows != NULL && r < n; r++)
        rows[r] = r;
    return rows;
}

/* ||a - b|| / ||b|| over n values; non-finite entries of a count in *bad. */
static double rel_l2(const double *a, const double *b, size_t n, size_t *bad)
{
    double num = 0, den = 0;
    size_t nb = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i])) {
            nb++;
            continue;
        }
        num += (a[i] - b[i]) * (a[i] - b[i]);
        den += b[i] * b[i];
    }
    if (bad != NULL)
        *bad = nb;
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static double norm(const double *a, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += a[i] * a[i];
    return sqrt(s);
}

/* ---- sessions */

static void quantize_should_map_amax_to_448_and_round_the_rest(void)
{
    uint16_t src[6];
    const float vals[6] = {0.75f, -3.5f, 1.0f / 3.0f, 1e-4f, -2.0f, 0.1f};
    for (int i = 0; i < 6; i++)
        src[i] = dtype_f32_to_bf16(vals[i]);
    uint8_t q[6];
    float ds = 0;
    cpu_quantize_e4m3(src, 6, q, &ds);
    CHECK_NEAR(ds, 3.5f / 448.0f, 0.0);
    CHECK_EQ_INT(q[1], 0xfe); /* -amax is -448 */
    int bad = 0;
    for (int i = 0; i < 6; i++) {
        float x = dtype_bf16_to_f32(src[i]) / ds;
        bad += q[i] != dtype_f32_to_e4m3(x);
        /* 3 mantissa bits: within 2^-4 relative (normals), 2^-10 absolute (subnormals) */
        double back = (double)dtype_e4m3_to_f32(q[i]);
        bad += fabs(back - x) > fmax(fabs(x) * 0x1p-4, 0x1p-10);
    }
    CHECK_EQ_INT(bad, 0);
    uint16_t zeros[2] = {0, 0x8000};
    cpu_quantize_e4m3(zeros, 2, q, &ds);
    CHECK_NEAR(ds, 1.0, 0.0); /* nothing to scale */
    CHECK(q[0] == 0 && q[1] == 0x80);
}

static void e4m3_tactics_should_list_every_cpu_family(void)
{
    attn_tactic t[32];
    attn_shape gqa = mkshape(1, 8, 2, 50, 300, 64, 0), mha = mkshape(1, 4, 4, 50, 300, 64, 1);
    /* fused, split, split_repeat, folded x 4 pads; MHA: fused, split */
    CHECK_EQ_INT(ops->tactics(0, &gqa, t, 32), 16);
    CHECK_EQ_INT(ops->tactics(0, &mha, t, 32), 8);
}

/* What an e4m3 call moves, as the cost model reads it: q, k, v at one
 * byte, out (bf16) at two, in the bytes of a call and of its pad copies. */
static void e4m3_costs_should_count_a_bf16_output(void)
{
    attn_shape s = mkshape(2, 8, 2, 50, 300, 64, 0);
    attn_tactic t = {0};
    t.variant = ATTN_FUSED;
    t.pad = 8; /* 50 -> 56 and 300 -> 304: both sides copied */
    attn_cost c;
    attn_cost_base(&s, &t, NULL, &c);
    const double q = 2.0 * 8 * 56 * 64, kv = 2.0 * 2 * 304 * 64; /* padded elements */
    CHECK_NEAR(c.bytes, (1 + 2) * q + 2 * 1 * kv, 0);
    double bytes;
    int copies;
    attn_pad_copies(&s, &t, &bytes, &copies);
    CHECK_EQ_INT(copies, 4);
    /* Q in (1 byte read, 1 written), O out (2 and 2), K and V in (1 and 1) */
    CHECK_NEAR(bytes, 2.0 * (1 + 2) * (2.0 * 8 * 50 * 64) + 2.0 * 2 * 1 * (2.0 * 2 * 300 * 64), 0);
    s.dtype = ATTN_BF16; /* 16-bit: every tensor at two */
    attn_cost_base(&s, &t, NULL, &c);
    CHECK_NEAR(c.bytes, 2 * 2 * q + 2 * 2 * kv, 0);
}

/* The same seed gives the same stored inputs, descales and source; the
 * two references differ by the input rounding; reference_source is
 * e4m3's only. */
static void session_should_keep_its_source_and_descales(void)
{
    attn_shape s = mkshape(1, 4, 2, 33, 70, 40, 1);
    attn_session *a = NULL, *b = NULL;
    CHECK_EQ_INT(ops->session_open(0, &s, 77, &a), 0);
    CHECK_EQ_INT(ops->session_open(0, &s, 77, &b), 0);
    if (a == NULL || b == NULL)
        goto done;
    int64_t n = nrows_of(&s);
    int64_t *rows = all_rows(&s);
    size_t cells = (size_t)(n * s.d);
    double *ra = malloc(cells * sizeof *ra), *rb = malloc(cells * sizeof *rb);
    double *sa = malloc(cells * sizeof *sa), *sb = malloc(cells * sizeof *sb);
    CHECK_EQ_INT(ops->reference(a, rows, (int)n, ra), 0);
    CHECK_EQ_INT(ops->reference(b, rows, (int)n, rb), 0);
    CHECK_EQ_INT(ops->reference_source(a, rows, (int)n, sa), 0);
    CHECK_EQ_INT(ops->reference_source(b, rows, (int)n, sb), 0);
    CHECK(memcmp(ra, rb, cells * sizeof *ra) == 0);
    CHECK(memcmp(sa, sb, cells * sizeof *sa) == 0);
    double diff = rel_l2(ra, sa, cells, NULL);
    fprintf(stderr, "  reference vs reference_source: rel L2 %.4g\n", diff);
    CHECK_MSG(diff > 0x1p-8 && diff < 0.25, "input rounding's error %.4g", diff);
    /* the references are of the same order: descales restore the scale */
    CHECK_NEAR(norm(ra, cells) / norm(sa, cells), 1.0, 0.25);
    const int64_t bad[] = {n};
    CHECK_EQ_INT(ops->reference_source(a, bad, 1, sa), ATTUNE_EINVAL);
    free(ra);
    free(rb);
    free(sa);
    free(sb);
    free(rows);

    attn_shape bs = s;
    bs.dtype = ATTN_BF16;
    attn_session *c = NULL;
    CHECK_EQ_INT(ops->session_open(0, &bs, 77, &c), 0);
    if (c != NULL) {
        const int64_t r0[] = {0};
        double x[40];
        CHECK_EQ_INT(ops->reference_source(c, r0, 1, x), ATTUNE_EUNSUPP);
        ops->session_close(c);
    }
done:
    ops->session_close(a);
    ops->session_close(b);
}

/* ---- every e4m3 tactic against the reference */

typedef struct {
    int64_t b, hq, hkv, d;
} heads;

static void every_e4m3_tactic_should_match_the_reference(void)
{
    /* d = 20 and 36 are not multiples of the kernels' 8-float groups */
    const heads hs[] = {{2, 2, 2, 20}, {1, 4, 2, 64}, {2, 3, 1, 36}};
    const int64_t lens[] = {1, 7, 50, 197};
    char key[ATTN_SHAPE_KEY_MAX], tstr[ATTN_TACTIC_STR_MAX];
    double worst = 0, worst_src_gap = 0;
    int runs = 0;
    for (size_t hi = 0; hi < sizeof hs / sizeof hs[0]; hi++)
        for (int causal = 0; causal <= 1; causal++)
            for (size_t qi = 0; qi < 4; qi++)
                for (size_t ki = 0; ki < 4; ki++) {
                    attn_shape s = mkshape(hs[hi].b, hs[hi].hq, hs[hi].hkv, lens[qi], lens[ki],
                                           hs[hi].d, causal);
                    attn_shape_key(&s, key, sizeof key);
                    attn_session *ss = NULL;
                    uint64_t seed = hash_fnv1a64(hash_fnv1a64_init(), key, strlen(key));
                    CHECK_MSG(ops->session_open(0, &s, seed, &ss) == 0, "%s: session", key);
                    if (ss == NULL)
                        continue;
                    int64_t n = nrows_of(&s);
                    size_t cells = (size_t)(n * s.d);
                    int64_t *rows = all_rows(&s);
                    double *ref = malloc(cells * sizeof *ref), *src = malloc(cells * sizeof *src);
                    double *out = malloc(cells * sizeof *out);
                    attn_tactic ts[32];
                    int nt = ops->tactics(0, &s, ts, 32);
                    CHECK_MSG(nt == (s.hkv < s.hq ? 16 : 8), "%s: %d tactics", key, nt);
                    if (ops->reference(ss, rows, (int)n, ref) != 0 ||
                        ops->reference_source(ss, rows, (int)n, src) != 0) {
                        CHECK_MSG(0, "%s: references failed", key);
                        nt = 0;
                    }
                    const double qdiff = rel_l2(ref, src, cells, NULL);
                    const double scale = norm(ref, cells) / norm(src, cells);
                    for (int i = 0; i < nt; i++) {
                        attn_plan *p = NULL;
                        attn_tactic_str(&ts[i], tstr, sizeof tstr);
                        int rc = ops->plan(ss, &ts[i], &p);
                        if (rc == 0 && (rc = ops->poison(ss)) == 0 && (rc = ops->run(p)) == 0)
                            rc = ops->fetch_rows(ss, rows, (int)n, out);
                        ops->plan_free(p);
                        CHECK_MSG(rc == 0, "%s %s: %d", key, tstr, rc);
                        if (rc != 0)
                            continue;
                        runs++;
                        size_t bad = 0;
                        double e = rel_l2(out, ref, cells, &bad);
                        CHECK_MSG(bad == 0, "%s %s: %zu non-finite", key, tstr, bad);
                        CHECK_MSG(e <= tol, "%s %s: rel L2 %.3g > %.3g", key, tstr, e, tol);
                        worst = e > worst ? e : worst;
                        /* against the source: qdiff, give or take e (rescaled to ||src||) */
                        double es = rel_l2(out, src, cells, NULL);
                        double gap = fabs(es - qdiff);
                        CHECK_MSG(gap <= e * scale * (1 + 1e-9) + 1e-12,
                                  "%s %s: error vs source %.4g, input rounding %.4g, own %.3g",
                                  key, tstr, es, qdiff, e);
                        worst_src_gap = gap > worst_src_gap ? gap : worst_src_gap;
                    }
                    free(rows);
                    free(ref);
                    free(src);
                    free(out);
                    ops->session_close(ss);
                }
    fprintf(stderr, "  %d runs; worst rel L2 %.3g (tol %.3g); worst |err vs source - input "
                    "rounding| %.3g\n",
            runs, worst, tol, worst_src_gap);
}

/* ---- planted errors: the same check must catch them */

/* A caller-buffer call of an e4m3 plan: q, k, v quantized from bf16
 * normals with their descales, out in bf16. */
typedef struct {
    attn_shape s;
    uint16_t *src[3];
    uint8_t *in[3];
    float descale[3];
    uint16_t *out;
    size_t nq, nkv;
} call;

static int call_open(call *c, const attn_shape *s, uint64_t seed)
{
    memset(c, 0, sizeof *c);
    c->s = *s;
    c->nq = (size_t)(s->b * s->hq * s->sq * s->d);
    c->nkv = (size_t)(s->b * s->hkv * s->skv * s->d);
    uint64_t st = seed;
    for (int i = 0; i < 3; i++) {
        size_t n = i == 0 ? c->nq : c->nkv;
        c->src[i] = malloc(n * 2);
        c->in[i] = malloc(n);
        if (c->src[i] == NULL || c->in[i] == NULL)
            return -1;
        cpu_fill_normal(c->src[i], ATTN_BF16, n, &st);
        cpu_quantize_e4m3(c->src[i], n, c->in[i], &c->descale[i]);
    }
    c->out = malloc(c->nq * 2);
    return c->out != NULL ? 0 : -1;
}

static void call_close(call *c)
{
    for (int i = 0; i < 3; i++) {
        free(c->src[i]);
        free(c->in[i]);
    }
    free(c->out);
}

/* Launch plan p on c's contiguous buffers with descales ds (NULL entries:
 * 1), out poisoned first; the output as double into got. */
static int call_run(call *c, attn_plan *p, const float *const ds[3], double *got)
{
    attn_io io;
    attn_io_contiguous(&c->s, c->in[0], c->in[1], c->in[2], c->out, &io);
    for (int i = 0; i < 3; i++)
        io.descale[i] = ds[i];
    dtype_fill_nan(c->out, ATTN_BF16, c->nq);
    int rc = ops->launch(p, &io, NULL);
    for (size_t i = 0; rc == 0 && i < c->nq; i++)
        got[i] = dtype_load_f64(c->out, ATTN_BF16, i);
    return rc;
}

static void check_should_catch_planted_errors(void)
{
    attn_shape s = mkshape(1, 4, 2, 40, 90, 32, 0);
    call c;
    CHECK_EQ_INT(call_open(&c, &s, 5), 0);
    int64_t n = nrows_of(&s);
    int64_t *rows = all_rows(&s);
    double *ref = malloc(c.nq * sizeof *ref), *got = malloc(c.nq * sizeof *got);
    CHECK_EQ_INT(cpu_reference_descaled(&s, c.in[0], c.in[1], c.in[2], c.descale, rows, (int)n,
                                        ref),
                 0);
    const attn_variant vars[] = {ATTN_FUSED, ATTN_SPLIT, ATTN_SPLIT_REPEAT, ATTN_FOLDED};
    for (int vi = 0; vi < 4; vi++) {
        attn_tactic t = {0};
        t.variant = vars[vi];
        t.pad = 8;
        t.acc = vars[vi] == ATTN_FUSED ? ATTN_ACC_NONE : ATTN_ACC_F32;
        attn_plan *p = NULL;
        CHECK_EQ_INT(ops->plan_new(0, &s, &t, 0, &p, NULL, 0), 0);
        if (p == NULL)
            continue;
        const float *right[3] = {&c.descale[0], &c.descale[1], &c.descale[2]};
        CHECK_EQ_INT(call_run(&c, p, right, got), 0);
        double e = rel_l2(got, ref, c.nq, NULL);
        CHECK_MSG(e <= tol, "variant %d: rel L2 %.3g", vi, e);

        /* one output element off by 8 bf16 ulps' worth of the output's
         * norm: the relative L2 check sees it */
        double keep = got[123];
        got[123] += 8 * 0x1p-8 * norm(ref, c.nq);
        CHECK(rel_l2(got, ref, c.nq, NULL) > tol);
        got[123] = keep;
        CHECK(rel_l2(got, ref, c.nq, NULL) <= tol);

        /* V's descale 2% off: every output 2% off */
        float v_off = c.descale[2] * 1.02f;
        const float *wrong_v[3] = {right[0], right[1], &v_off};
        CHECK_EQ_INT(call_run(&c, p, wrong_v, got), 0);
        e = rel_l2(got, ref, c.nq, NULL);
        CHECK_MSG(e > tol && fabs(e - 0.02) < 0.002, "wrong v descale: rel L2 %.4g", e);
        /* K's descale doubled: a sharper softmax */
        float k_off = c.descale[1] * 2.0f;
        const float *wrong_k[3] = {right[0], &k_off, right[2]};
        CHECK_EQ_INT(call_run(&c, p, wrong_k, got), 0);
        CHECK(rel_l2(got, ref, c.nq, NULL) > tol);
        /* no descales at all (NULL: 1): the stored values taken as meant */
        const float *none[3] = {NULL, NULL, NULL};
        CHECK_EQ_INT(call_run(&c, p, none, got), 0);
        CHECK(rel_l2(got, ref, c.nq, NULL) > tol);
        /* ... which is what the reference of descales 1 says */
        double *ref1 = malloc(c.nq * sizeof *ref1);
        CHECK_EQ_INT(cpu_reference_descaled(&s, c.in[0], c.in[1], c.in[2], NULL, rows, (int)n,
                                            ref1),
                     0);
        CHECK(rel_l2(got, ref1, c.nq, NULL) <= tol);
        free(ref1);
        ops->plan_free(p);
    }
    free(rows);
    free(ref);
    free(got);
    call_close(&c);
}

/* A plan made for caller buffers reads io->descale on every call (a new
 * value in place is the next call's), on strided views too, through the
 * copies in and out (e4m3 in, bf16 out). */
static void plan_should_read_descales_at_each_call_on_any_layout(void)
{
    attn_shape s = mkshape(2, 4, 1, 21, 45, 24, 1);
    call c;
    CHECK_EQ_INT(call_open(&c, &s, 11), 0);
    int64_t n = nrows_of(&s);
    int64_t *rows = all_rows(&s);
    double *ref = malloc(c.nq * sizeof *ref), *got = malloc(c.nq * sizeof *got);
    attn_tactic t = {0};
    t.variant = ATTN_FUSED;
    t.pad = 16;
    attn_plan *p = NULL;
    CHECK_EQ_INT(ops->plan_new(0, &s, &t, 0, &p, NULL, 0), 0);
    float ds[3] = {c.descale[0], c.descale[1], c.descale[2]};
    const float *dp[3] = {&ds[0], &ds[1], &ds[2]};
    CHECK_EQ_INT(call_run(&c, p, dp, got), 0);
    CHECK_EQ_INT(cpu_reference_descaled(&s, c.in[0], c.in[1], c.in[2], ds, rows, (int)n, ref), 0);
    CHECK(rel_l2(got, ref, c.nq, NULL) <= tol);
    ds[2] *= 0.5f; /* in place: the next call halves the output */
    CHECK_EQ_INT(call_run(&c, p, dp, got), 0);
    for (size_t i = 0; i < c.nq; i++)
        ref[i] *= 0.5;
    CHECK(rel_l2(got, ref, c.nq, NULL) <= tol);
    ds[2] = c.descale[2];

    /* [b, s, h, d] views of q and out (k, v contiguous) */
    const int64_t d = s.d, hq = s.hq, sq = s.sq;
    uint8_t *qt = malloc(c.nq);
    uint16_t *ot = malloc(c.nq * 2);
    for (int64_t bi = 0; bi < s.b; bi++)
        for (int64_t h = 0; h < hq; h++)
            for (int64_t i = 0; i < sq; i++)
                memcpy(qt + ((bi * sq + i) * hq + h) * d, c.in[0] + ((bi * hq + h) * sq + i) * d,
                       (size_t)d);
    attn_io io;
    attn_io_contiguous(&s, qt, c.in[1], c.in[2], ot, &io);
    io.q = (attn_tensor){qt, sq * hq * d, d, hq * d};
    io.o = (attn_tensor){ot, sq * hq * d, d, hq * d};
    for (int i = 0; i < 3; i++)
        io.descale[i] = dp[i];
    dtype_fill_nan(ot, ATTN_BF16, c.nq);
    CHECK_EQ_INT(ops->launch(p, &io, NULL), 0);
    CHECK_EQ_INT(cpu_reference_descaled(&s, c.in[0], c.in[1], c.in[2], ds, rows, (int)n, ref), 0);
    size_t bad = 0;
    for (int64_t bi = 0; bi < s.b; bi++)
        for (int64_t h = 0; h < hq; h++)
            for (int64_t i = 0; i < sq; i++)
                for (int64_t x = 0; x < d; x++)
                    got[((bi * hq + h) * sq + i) * d + x] =
                        dtype_load_f64(ot, ATTN_BF16, (size_t)(((bi * sq + i) * hq + h) * d + x));
    CHECK(rel_l2(got, ref, c.nq, &bad) <= tol);
    CHECK_EQ_INT(bad, 0);
    free(qt);
    free(ot);
    ops->plan_free(p);
    free(rows);
    free(ref);
    free(got);
    call_close(&c);
}

int main(void)
{
    RUN(quantize_should_map_amax_to_448_and_round_the_rest);
    RUN(e4m3_tactics_should_list_every_cpu_family);
    RUN(e4m3_costs_should_count_a_bf16_output);
    RUN(session_should_keep_its_source_and_descales);
    RUN(every_e4m3_tactic_should_match_the_reference);
    RUN(check_should_catch_planted_errors);
    RUN(plan_should_read_descales_at_each_call_on_any_layout);
    return test_summary();
}
