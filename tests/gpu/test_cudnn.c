/* test_cudnn.c -- the cudnn variant on a GPU, through attn_cuda_ops and the
 * plan cache of kernels/cuda/cuda_cudnn.h.
 *
 * Every cudnn tactic the backend lists for a covering set of shapes is
 * planned, run on a poisoned output and compared with the float64
 * reference: d in {32, 40, 64, 128, 256}, f16 and bf16, causal and not,
 * g = hq / hkv in {1, 4, 8}, sq in {1, 50, 900, 2048}, skv equal to sq or
 * not, sq > skv causal (rows with no key must be exact zeros) included.
 * Each (d, dtype, causal) meets at least one value of every other factor
 * (the table below). A tactic cuDNN refuses at plan time is `unsupported`
 * (it must say why); every shape needs at least one tactic that runs.
 * Tolerances on the relative L2 error: f16 3e-3, bf16 2e-2 (P and O
 * rounded to the storage type; see test_cuda_backend.c). Also: planted
 * mask errors are caught (causal output vs the non-causal reference,
 * padded keys vs real keys), the plan cache serves a repeat plan without
 * building, the tactic string rebuilds the plan it names (engine and knob
 * code read back from cuDNN), f32 is refused with a reason, and timing
 * runs inside CUDA graphs. Exit 77 when no GPU; built without cuDNN, it
 * checks that no cudnn tactic is listed and that planning one is refused. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../test.h"
#include "gpu_check.h"
#include "kernels/attn.h"

#ifdef ATTUNE_HAVE_CUDA
#ifdef ATTUNE_HAVE_CUDNN
#include "kernels/cuda/cuda_cudnn.h"
#ifdef ATTUNE_HAVE_SM90A
#include "kernels/cuda/cuda_fused_sm90a.h" /* cuda_fused_sm90a_cut: which grids the launch cuts */
#endif
#endif

static const attn_ops *ops = &attn_cuda_ops;

#define MAX_TACTICS 1024
/* Rows compared per shape: all of them when there are fewer. */
#define MAX_ROWS 3000

static attn_shape mk(int64_t b, int64_t hq, int64_t hkv, int64_t sq, int64_t skv, int64_t d,
                     attn_dtype t, int causal)
{
    attn_shape s = {b, hq, hkv, sq, skv, d, t, causal};
    return s;
}

/* The cudnn tactics listed for s, into t (at most max). */
/* The tactics of variant v the backend lists for s, into t[0..max). */
static int variant_tactics(const attn_shape *s, attn_variant v, attn_tactic *t, int max)
{
    attn_tactic *all = gpu_xmalloc(MAX_TACTICS * sizeof *all);
    int n = ops->tactics(0, s, all, MAX_TACTICS), k = 0;
    for (int i = 0; i < n && k < max; i++)
        if (all[i].variant == v)
            t[k++] = all[i];
    free(all);
    return k;
}

static int cudnn_tactics(const attn_shape *s, attn_tactic *t, int max)
{
    return variant_tactics(s, ATTN_CUDNN, t, max);
}

#ifdef ATTUNE_HAVE_CUDNN

static double worst[2][2]; /* [dtype][causal] */
static int nchecked, nrefused, nshapes_ok;
static double build_s;

/* Check every cudnn tactic of s against the reference. */
static void check_shape(const attn_shape *s)
{
    char key[ATTN_SHAPE_KEY_MAX], ts[ATTN_TACTIC_STR_MAX];
    attn_tactic t[64];
    attn_session *ss = NULL;
    int nrows, ok = 0, ok_comp = 0, refused = 0;
    const double tol = gpu_tol(s->dtype, ATTN_ACC_NONE);
    int64_t *rows = gpu_sample_rows(s, MAX_ROWS, &nrows);
    double *ref = gpu_xmalloc((size_t)nrows * s->d * sizeof *ref);
    double *out = gpu_xmalloc((size_t)nrows * s->d * sizeof *out);
    double worst_here = 0, t0 = gpu_now_s();

    attn_shape_key(s, key, sizeof key);
    int n = cudnn_tactics(s, t, 64);
    CHECK_MSG(n > 0, "%s: no cudnn tactic listed", key);
    CHECK_MSG(ops->session_open(0, s, 0xc0ffee ^ (uint64_t)s->skv, &ss) == 0, "%s: open", key);
    if (ss == NULL || n <= 0)
        goto done;
    CHECK_EQ_INT(ops->reference(ss, rows, nrows, ref), 0);
    for (int i = 0; i < n; i++) {
        attn_plan *p = NULL;
        attn_tactic_str(&t[i], ts, sizeof ts);
        double b0 = gpu_now_s();
        int rc = ops->plan(ss, &t[i], &p);
        build_s += gpu_now_s() - b0;
        const char *note = ops->plan_note(ss);
        if (rc == ATTUNE_EUNSUPP) {
            refused++;
            CHECK_MSG(note != NULL && note[0] != 0, "%s %s: refused without a reason", key, ts);
            fprintf(stderr, "  %s %s: unsupported: %s\n", key, ts, note ? note : "");
            continue;
        }
        CHECK_MSG(rc == 0, "%s %s: plan: %s (%s)", key, ts, attune_strerror(rc), note ? note : "");
        if (rc != 0)
            continue;
        CHECK_EQ_INT(ops->poison(ss), 0);
        rc = ops->run(p);
        CHECK_MSG(rc == 0, "%s %s: run: %s", key, ts, attune_strerror(rc));
        rc = ops->fetch_rows(ss, rows, nrows, out);
        CHECK_MSG(rc == 0, "%s %s: fetch: %s", key, ts, attune_strerror(rc));
        gpu_errs e = gpu_compare(s, rows, nrows, out, ref);
        CHECK_MSG(e.nonfinite == 0, "%s %s: %lld elements not written or not finite", key, ts,
                  (long long)e.nonfinite);
        CHECK_MSG(e.nonzero_empty == 0, "%s %s: %lld elements of rows without keys not 0", key,
                  ts, (long long)e.nonzero_empty);
        CHECK_MSG(e.rel <= tol, "%s %s: rel err %.3g > %.3g (max abs %.3g)", key, ts, e.rel, tol,
                  e.max_abs);
        if (e.nonfinite == 0 && e.rel > worst_here)
            worst_here = e.rel;
        ok++;
        ok_comp += t[i].graph == ATTN_GRAPH_COMP;
        ops->plan_free(p);
    }
    CHECK_MSG(ok > 0, "%s: none of %d cudnn tactics ran", key, n);
    /* the composite graph alone must serve every shape: it is all that
     * cuDNN < 9.13.1 has (JetPack 6: 9.3), whatever SDPA_FWD does here */
    CHECK_MSG(ok_comp > 0, "%s: no composite-graph tactic ran", key);
    if (worst_here > worst[s->dtype == ATTN_BF16][s->causal])
        worst[s->dtype == ATTN_BF16][s->causal] = worst_here;
    nchecked += ok;
    nrefused += refused;
    nshapes_ok += ok > 0;
    fprintf(stderr, "  %-40s %2d tactics: %2d ok (%d comp), %d unsupported, worst rel %.2e, %.2f s\n",
            key, n, ok, ok_comp, refused, worst_here, gpu_now_s() - t0);
done:
    if (ss != NULL)
        ops->session_close(ss);
    free(rows);
    free(ref);
    free(out);
}

/* (b, hq, hkv, sq, skv, d, dtype, causal). hkv = 2 unless MQA-like; g =
 * hq / hkv cycles 1, 4, 8 within each d; sq cycles 1, 50, 900, 2048. */
static const attn_shape cases[] = {
    {1, 2, 2, 1, 1, 32, ATTN_F16, 0},          /* one query, one key */
    {1, 8, 2, 50, 50, 32, ATTN_BF16, 1},
    {1, 16, 2, 900, 1018, 32, ATTN_F16, 1},    /* bottom-right shift 118 */
    {1, 2, 2, 2048, 2048, 32, ATTN_BF16, 0},
    {2, 8, 2, 2048, 2048, 40, ATTN_F16, 1},    /* d = 40: not a power of 2 */
    {1, 16, 2, 1, 900, 40, ATTN_BF16, 0},
    {1, 2, 2, 50, 197, 40, ATTN_F16, 0},
    {1, 2, 2, 900, 50, 40, ATTN_BF16, 1},      /* sq > skv: 850 empty rows */
    {1, 16, 2, 2048, 900, 64, ATTN_BF16, 1},   /* sq > skv */
    {1, 8, 2, 900, 900, 64, ATTN_F16, 0},
    {1, 2, 2, 1, 2048, 64, ATTN_BF16, 0},
    {1, 2, 2, 50, 7, 64, ATTN_F16, 1},         /* sq > skv */
    {1, 2, 2, 900, 900, 128, ATTN_F16, 1},
    {1, 8, 2, 1, 1018, 128, ATTN_BF16, 1},     /* decode, causal: sees all */
    {2, 16, 2, 2048, 50, 128, ATTN_F16, 0},
    {1, 8, 2, 50, 50, 128, ATTN_BF16, 0},
    {1, 16, 2, 50, 2048, 128, ATTN_F16, 1},
    {1, 2, 2, 2048, 2048, 256, ATTN_BF16, 1},
    {1, 8, 2, 900, 1018, 256, ATTN_F16, 0},
    {1, 16, 2, 900, 197, 256, ATTN_BF16, 1},   /* sq > skv */
    {1, 8, 2, 1, 1, 256, ATTN_F16, 1},
    {1, 16, 2, 50, 900, 256, ATTN_BF16, 0},
    {1, 8, 1, 50, 1018, 256, ATTN_F16, 0},     /* MQA: the DESIGN.md case */
};

static void every_tactic_should_match_the_reference(void)
{
    double t0 = gpu_now_s();
    /* every config heuristics offer, not the head the tuner lists */
    cuda_cudnn_prefetch_wait(); /* no builder beside setenv */
    setenv("ATTUNE_CUDNN_CONFIGS", "64", 1);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_shape(&cases[i]);
    fprintf(stderr, "  %d tactic runs checked, %d unsupported, %d/%zu shapes with a tactic; "
                    "%.1f s (%.1f s planning)\n",
            nchecked, nrefused, nshapes_ok, sizeof cases / sizeof cases[0], gpu_now_s() - t0, build_s);
    cuda_cudnn_prefetch_wait();
    unsetenv("ATTUNE_CUDNN_CONFIGS");
    fprintf(stderr, "  worst relative L2: f16 nc %.2e c %.2e; bf16 nc %.2e c %.2e\n", worst[0][0],
            worst[0][1], worst[1][0], worst[1][1]);
}

static void tactics_should_be_canonical_and_distinct(void)
{
    attn_shape s = mk(1, 8, 2, 50, 1018, 128, ATTN_F16, 1);
    attn_tactic t[64];
    char a[ATTN_TACTIC_STR_MAX], b[ATTN_TACTIC_STR_MAX];
    int n = cudnn_tactics(&s, t, 64);
    CHECK(n > 0);
    for (int i = 0; i < n; i++) {
        attn_tactic back;
        attn_tactic_str(&t[i], a, sizeof a);
        CHECK_EQ_INT(attn_tactic_parse(a, &back, NULL, 0), 0);
        CHECK_STR(attn_tactic_str(&back, b, sizeof b), a);
        CHECK(back.eng == t[i].eng && back.kcfg == t[i].kcfg && back.graph == t[i].graph &&
              back.pad == t[i].pad);
        for (int j = 0; j < i; j++) {
            attn_tactic_str(&t[j], b, sizeof b);
            CHECK_MSG(strcmp(a, b) != 0, "listed twice: %s", a);
        }
        fprintf(stderr, "  %s\n", a);
    }
    /* pad=1 is always there; a pad that changes no length is not listed
     * (it would be pad=1's plan again) */
    int pad1 = 0;
    for (int i = 0; i < n; i++)
        pad1 += t[i].pad == 1;
    CHECK(pad1 > 0);
    attn_shape al = mk(1, 8, 2, 64, 1024, 128, ATTN_F16, 0);
    n = cudnn_tactics(&al, t, 64);
    for (int i = 0; i < n; i++)
        CHECK(t[i].pad == 1); /* 64 and 1024 are multiples of every pad */
}

static void f32_should_be_unsupported_with_a_reason(void)
{
    attn_shape s = mk(1, 4, 4, 16, 16, 64, ATTN_F32, 0);
    attn_tactic t[8];
    attn_session *ss = NULL;
    attn_plan *p = (attn_plan *)1;
    /* the family names the dtypes it runs (f16, bf16, e4m3): none listed
     * for f32; asked by its text, a cudnn tactic is refused with the reason */
    CHECK_EQ_INT(cudnn_tactics(&s, t, 8), 0);
    CHECK_EQ_INT(attn_tactic_parse("cudnn/eng=0/graph=comp/kcfg=0/pad=1", &t[0], NULL, 0), 0);
    CHECK_EQ_INT(ops->session_open(0, &s, 5, &ss), 0);
    if (ss == NULL)
        return;
    CHECK_EQ_INT(ops->plan(ss, &t[0], &p), ATTUNE_EUNSUPP);
    CHECK(p == NULL);
    const char *note = ops->plan_note(ss);
    CHECK_MSG(note != NULL && strstr(note, "f32") != NULL, "note '%s'", note ? note : "(null)");
    ops->session_close(ss);
}

static void stack_should_name_the_loaded_cudnn(void)
{
    attn_device_info info;
    attn_stack st;
    char v[32];
    CHECK_EQ_INT(ops->device_info(0, &info, &st), 0);
    cuda_cudnn_version(v, sizeof v);
    CHECK_MSG(strstr(st.blas, "+cudnn-9.") != NULL && strstr(st.blas, v) != NULL,
              "blas \"%s\", loaded %s", st.blas, v);
    fprintf(stderr, "  stack blas=%s id=%s\n", st.blas, st.id);
}

/* The string alone rebuilds the plan: parse it, get the plan (from the
 * cache), and read the engine and knob code back from cuDNN's plan. */
static void tactic_string_should_rebuild_its_plan(void)
{
    attn_shape s = mk(1, 8, 2, 900, 1018, 128, ATTN_BF16, 1);
    attn_tactic t[64];
    int n = cudnn_tactics(&s, t, 64), described = 0;
    CHECK(n > 0);
    for (int i = 0; i < n; i++) {
        char str[ATTN_TACTIC_STR_MAX], note[128] = "";
        attn_tactic back;
        cuda_cudnn_plan *p = NULL;
        int eng = -1, kcfg = -1;
        attn_tactic_str(&t[i], str, sizeof str);
        CHECK_EQ_INT(attn_tactic_parse(str, &back, NULL, 0), 0);
        int rc = cuda_cudnn_plan_get(0, &s, &back, attn_round_up(s.sq, back.pad),
                                     attn_round_up(s.skv, back.pad), &p, NULL, note, sizeof note);
        if (rc == ATTUNE_EUNSUPP) {
            CHECK_MSG(note[0] != 0, "%s refused without a reason", str);
            continue;
        }
        CHECK_MSG(rc == 0, "%s: %s (%s)", str, attune_strerror(rc), note);
        if (rc != 0)
            continue;
        CHECK_EQ_INT(cuda_cudnn_plan_describe(p, &eng, &kcfg), 0);
        CHECK_MSG(eng == back.eng && kcfg == back.kcfg, "%s: plan holds eng=%d kcfg=%d", str,
                  eng, kcfg);
        described++;
        cuda_cudnn_plan_put(p);
    }
    CHECK(described > 0);
}

/* A repeat plan of the same (shape, tactic), from another session, is
 * served by the cache: no build. */
static void plan_cache_should_serve_repeat_plans(void)
{
    attn_shape s = mk(1, 4, 4, 900, 900, 64, ATTN_F16, 0);
    attn_tactic t[64];
    attn_session *a = NULL, *b = NULL;
    attn_plan *pa = NULL, *pb = NULL;
    int builds0, hits0, builds1, hits1, builds2, hits2, held;
    int n = cudnn_tactics(&s, t, 64);
    CHECK(n > 0);
    CHECK_EQ_INT(ops->session_open(0, &s, 1, &a), 0);
    CHECK_EQ_INT(ops->session_open(0, &s, 2, &b), 0);
    if (a == NULL || b == NULL || n <= 0)
        goto done;
    int i = 0;
    while (i < n && ops->plan(a, &t[i], &pa) != 0)
        i++;
    CHECK(pa != NULL);
    if (pa == NULL)
        goto done;
    cuda_cudnn_cache_stats(&builds0, &hits0, &held);
    CHECK(held >= 1);
    CHECK_EQ_INT(ops->plan(b, &t[i], &pb), 0);
    cuda_cudnn_cache_stats(&builds1, &hits1, NULL);
    CHECK_EQ_INT(builds1, builds0);
    CHECK_EQ_INT(hits1, hits0 + 1);
    /* and it computes the second session's data, not the first's */
    if (pb != NULL) {
        int nrows;
        int64_t *rows = gpu_sample_rows(&s, MAX_ROWS, &nrows);
        double *ref = gpu_xmalloc((size_t)nrows * s.d * sizeof *ref);
        double *out = gpu_xmalloc((size_t)nrows * s.d * sizeof *out);
        CHECK_EQ_INT(ops->reference(b, rows, nrows, ref), 0);
        CHECK_EQ_INT(ops->poison(b), 0);
        CHECK_EQ_INT(ops->run(pb), 0);
        CHECK_EQ_INT(ops->fetch_rows(b, rows, nrows, out), 0);
        gpu_errs e = gpu_compare(&s, rows, nrows, out, ref);
        CHECK_MSG(e.rel < 3e-3 && e.nonfinite == 0, "second session: rel %.3g", e.rel);
        free(rows);
        free(ref);
        free(out);
        ops->plan_free(pb);
    }
    ops->plan_free(pa);
    /* freed plans stay cached: planning again builds nothing */
    CHECK_EQ_INT(ops->plan(a, &t[i], &pa), 0);
    cuda_cudnn_cache_stats(&builds2, &hits2, NULL);
    CHECK_EQ_INT(builds2, builds0);
    if (pa != NULL)
        ops->plan_free(pa);
done:
    if (a)
        ops->session_close(a);
    if (b)
        ops->session_close(b);
}

/* Opening a session builds its shape's plans ahead on builder threads:
 * once they are done, planning every tactic builds nothing in the caller,
 * and a plan built on a builder's handle computes the right output. With
 * ATTUNE_CUDNN_PREFETCH=first the builds wait for the shape's first plan,
 * which then finds them all done. */
static void prefetch_should_build_plans_ahead(void)
{
    attn_shape s = mk(1, 8, 2, 300, 700, 128, ATTN_BF16, 1), s2 = s;
    attn_tactic t[64];
    attn_session *ss = NULL;
    int builds0, builds1, hits0, hits1, pre0, pre1, nb = 0, ok = 0;
    int n = cudnn_tactics(&s, t, 64);
    double t0;
    CHECK(n > 0);
    cuda_cudnn_prefetch_wait();
    cuda_cudnn_cache_stats(&builds0, &hits0, NULL);
    cuda_cudnn_prefetch_stats(&pre0, NULL);
    t0 = gpu_now_s();
    CHECK_EQ_INT(ops->session_open(0, &s, 9, &ss), 0);
    if (ss == NULL || n <= 0)
        return;
    cuda_cudnn_prefetch_wait();
    cuda_cudnn_prefetch_stats(&pre1, &nb);
    fprintf(stderr, "  %d tactics: %d plans built ahead by %d builders in %.2f s\n", n, pre1 - pre0,
            nb, gpu_now_s() - t0);
    CHECK(nb >= 1);
    CHECK(pre1 > pre0);
    int nrows;
    int64_t *rows = gpu_sample_rows(&s, MAX_ROWS, &nrows);
    double *ref = gpu_xmalloc((size_t)nrows * s.d * sizeof *ref);
    double *out = gpu_xmalloc((size_t)nrows * s.d * sizeof *out);
    CHECK_EQ_INT(ops->reference(ss, rows, nrows, ref), 0);
    for (int i = 0; i < n; i++) {
        attn_plan *p = NULL;
        int rc = ops->plan(ss, &t[i], &p);
        const char *note = ops->plan_note(ss);
        if (rc == ATTUNE_EUNSUPP) {
            CHECK_MSG(note != NULL && note[0] != 0, "refused without a reason");
            continue;
        }
        CHECK_EQ_INT(rc, 0);
        if (p == NULL)
            continue;
        CHECK_MSG(note != NULL && strstr(note, "builder thread") != NULL, "note '%s'",
                  note ? note : "(null)");
        CHECK_EQ_INT(ops->poison(ss), 0);
        CHECK_EQ_INT(ops->run(p), 0);
        CHECK_EQ_INT(ops->fetch_rows(ss, rows, nrows, out), 0);
        gpu_errs e = gpu_compare(&s, rows, nrows, out, ref);
        CHECK_MSG(e.nonfinite == 0 && e.rel <= gpu_tol(s.dtype, ATTN_ACC_NONE),
                  "built ahead: rel %.3g, %lld not finite", e.rel, (long long)e.nonfinite);
        ok++;
        ops->plan_free(p);
    }
    CHECK(ok > 0);
    cuda_cudnn_cache_stats(&builds1, &hits1, NULL);
    CHECK_EQ_INT(builds1, builds0); /* nothing built in the caller */
    CHECK_EQ_INT(hits1, hits0 + ok);
    ops->session_close(ss);
    ss = NULL;

    /* first: nothing queued at open; the first plan queues and waits for
     * all, so it is served from the builders too */
    cuda_cudnn_prefetch_wait(); /* no builder beside setenv */
    setenv("ATTUNE_CUDNN_PREFETCH", "first", 1);
    s2.skv = 701;
    n = cudnn_tactics(&s2, t, 64);
    cuda_cudnn_prefetch_stats(&pre0, NULL);
    cuda_cudnn_cache_stats(&builds0, NULL, NULL);
    CHECK_EQ_INT(ops->session_open(0, &s2, 9, &ss), 0);
    cuda_cudnn_prefetch_wait();
    cuda_cudnn_prefetch_stats(&pre1, NULL);
    CHECK_EQ_INT(pre1, pre0); /* nothing built at open */
    int planned = 0;
    for (int i = 0; i < n && ss != NULL; i++) {
        attn_plan *p = NULL;
        if (ops->plan(ss, &t[i], &p) == 0) {
            planned++;
            ops->plan_free(p);
        }
    }
    CHECK(planned > 0);
    cuda_cudnn_prefetch_stats(&pre1, NULL);
    cuda_cudnn_cache_stats(&builds1, NULL, NULL);
    CHECK_EQ_INT(builds1, builds0); /* every plan came from the builders */
    CHECK_MSG(pre1 - pre0 >= planned, "first mode: %d plans built ahead, %d planned",
              pre1 - pre0, planned);
    cuda_cudnn_prefetch_wait();
    unsetenv("ATTUNE_CUDNN_PREFETCH");
    if (ss != NULL)
        ops->session_close(ss);
    free(rows);
    free(ref);
    free(out);
}

/* The planted-error checks' seed (gpu_cross_error). */
#define CROSS_SEED 11

/* The first listed cudnn tactic of s with the given pad that plans. */
static int first_tactic(const attn_shape *s, int pad, attn_tactic *out)
{
    attn_tactic t[64];
    int n = cudnn_tactics(s, t, 64);
    for (int i = 0; i < n; i++)
        if (t[i].pad == pad && t[i].graph == ATTN_GRAPH_COMP) {
            *out = t[i];
            return 1;
        }
    return 0;
}

static void planted_mask_errors_should_be_caught(void)
{
    attn_tactic t;
    attn_shape c = mk(1, 4, 1, 50, 197, 64, ATTN_F16, 1), nc = c;
    nc.causal = 0;
    CHECK(first_tactic(&c, 1, &t));
    double right = gpu_cross_error(ops, &c, &c, &t, CROSS_SEED);
    double wrong = gpu_cross_error(ops, &c, &nc, &t, CROSS_SEED);
    CHECK_MSG(right >= 0 && right < 3e-3, "causal vs its own reference: %.3g", right);
    CHECK_MSG(wrong > 0.1, "causal output vs non-causal reference: %.3g", wrong);
    /* b = hkv = 1: keys 0..49 of skv=50 and skv=64 hold the same values;
     * a pad=64 output that masks its padded keys differs from attention
     * over 64 real keys */
    attn_shape k50 = mk(1, 4, 1, 16, 50, 64, ATTN_F16, 0), k64 = k50;
    k64.skv = 64;
    attn_tactic tp;
    CHECK(first_tactic(&k50, 64, &tp));
    double pad_right = gpu_cross_error(ops, &k50, &k50, &tp, CROSS_SEED);
    double pad_wrong = gpu_cross_error(ops, &k50, &k64, &tp, CROSS_SEED);
    CHECK_MSG(pad_right >= 0 && pad_right < 3e-3, "pad=64 vs own reference: %.3g", pad_right);
    CHECK_MSG(pad_wrong > 0.1, "pad=64 vs 64-key reference: %.3g", pad_wrong);
    fprintf(stderr, "  planted: causal right %.2e wrong %.2e; pad right %.2e wrong %.2e\n", right,
            wrong, pad_right, pad_wrong);
}

/* e4m3 (FP8): every tactic listed against the float64 reference of the
 * stored inputs (times their descales), and, for the whole cost of FP8,
 * against the reference of the bf16 values they were quantized from. */
static const attn_shape e4m3_cases[] = {
    {1, 8, 8, 900, 900, 128, ATTN_E4M3, 0},
    {2, 16, 4, 2048, 2048, 128, ATTN_E4M3, 1},
    {1, 8, 1, 50, 1018, 64, ATTN_E4M3, 0},     /* MQA, short query */
    {4, 8, 8, 1, 4096, 128, ATTN_E4M3, 0},     /* decode */
    {1, 8, 2, 257, 257, 64, ATTN_E4M3, 0},     /* 257: no multiple of any tile */
    {1, 4, 4, 2048, 1024, 128, ATTN_E4M3, 1},  /* sq > skv: 1024 empty rows */
    {1, 4, 1, 4096, 4096, 128, ATTN_E4M3, 1},
    /* sm90a version 3.12: 192 blocks of 128 rows, 144 of 192, the last
     * wave's cut into key ranges (2 and 4) */
    {1, 24, 24, 1024, 2048, 128, ATTN_E4M3, 0},
};

static double e4m3_worst, e4m3_worst_src;

static int cc_major(void)
{
    attn_device_info info;
    attn_stack st;
    return ops->device_info(0, &info, &st) == 0 ? info.cc_major : 0;
}

/* Every e4m3 tactic of variant v (cudnn, or fused: the sm90a kernel's
 * version 3.5) for s against the float64 references of the stored inputs
 * and of their bf16 source. */
static void e4m3_check_shape(const attn_shape *s, attn_variant v)
{
    char key[ATTN_SHAPE_KEY_MAX], ts[ATTN_TACTIC_STR_MAX];
    attn_tactic t[64];
    attn_session *ss = NULL;
    int nrows, ok = 0;
    int64_t *rows = gpu_sample_rows(s, MAX_ROWS, &nrows);
    double *ref = gpu_xmalloc((size_t)nrows * s->d * sizeof *ref);
    double *src = gpu_xmalloc((size_t)nrows * s->d * sizeof *src);
    double *out = gpu_xmalloc((size_t)nrows * s->d * sizeof *out);
    double worst_here = 0, worst_src = 0;

    attn_shape_key(s, key, sizeof key);
    int n = variant_tactics(s, v, t, 64);
    CHECK_MSG(n > 0, "%s: no %s tactic listed", key, attn_variant_name(v));
    CHECK_MSG(ops->session_open(0, s, 0xf8 ^ (uint64_t)s->skv, &ss) == 0, "%s: open", key);
    if (ss == NULL || n <= 0)
        goto done;
    CHECK_EQ_INT(ops->reference(ss, rows, nrows, ref), 0);
    CHECK_MSG(ops->reference_source != NULL, "%s", "cuda: no reference_source");
    if (ops->reference_source == NULL)
        goto done;
    CHECK_EQ_INT(ops->reference_source(ss, rows, nrows, src), 0);
    /* the two references differ by the input rounding alone: e4m3's 3
     * mantissa bits, a few per cent, never nothing */
    gpu_errs q = gpu_compare(s, rows, nrows, ref, src);
    CHECK_MSG(q.rel > 1e-3 && q.rel < 0.1, "%s: stored vs source reference %.3g", key, q.rel);
    for (int i = 0; i < n; i++) {
        attn_plan *p = NULL;
        attn_tactic_str(&t[i], ts, sizeof ts);
        int rc = ops->plan(ss, &t[i], &p);
        const char *note = ops->plan_note(ss);
        if (rc == ATTUNE_EUNSUPP) {
            CHECK_MSG(note != NULL && note[0] != 0, "%s %s: refused without a reason", key, ts);
            fprintf(stderr, "  %s %s: unsupported: %s\n", key, ts, note ? note : "");
            continue;
        }
        CHECK_MSG(rc == 0, "%s %s: plan: %s (%s)", key, ts, attune_strerror(rc), note ? note : "");
        if (rc != 0)
            continue;
        CHECK_EQ_INT(ops->poison(ss), 0);
        rc = ops->run(p);
        CHECK_MSG(rc == 0, "%s %s: run: %s", key, ts, attune_strerror(rc));
        CHECK_EQ_INT(ops->fetch_rows(ss, rows, nrows, out), 0);
        gpu_errs e = gpu_compare(s, rows, nrows, out, ref);
        gpu_errs es = gpu_compare(s, rows, nrows, out, src);
        CHECK_MSG(e.nonfinite == 0, "%s %s: %lld elements not written or not finite", key, ts,
                  (long long)e.nonfinite);
        CHECK_MSG(e.nonzero_empty == 0, "%s %s: %lld elements of rows without keys not 0", key,
                  ts, (long long)e.nonzero_empty);
        CHECK_MSG(e.rel <= GPU_TOL_E4M3, "%s %s: rel err %.3g > %.3g (max abs %.3g)", key, ts,
                  e.rel, GPU_TOL_E4M3, e.max_abs);
        fprintf(stderr, "  %s %s: rel %.3e (vs bf16 source %.3e)\n", key, ts, e.rel, es.rel);
        worst_here = e.rel > worst_here ? e.rel : worst_here;
        worst_src = es.rel > worst_src ? es.rel : worst_src;
        ok++;
        ops->plan_free(p);
    }
    CHECK_MSG(ok > 0, "%s: none of %d e4m3 %s tactics ran", key, n, attn_variant_name(v));
    e4m3_worst = worst_here > e4m3_worst ? worst_here : e4m3_worst;
    e4m3_worst_src = worst_src > e4m3_worst_src ? worst_src : e4m3_worst_src;
    fprintf(stderr, "  %-40s %2d tactics: %2d ok, worst rel %.2e (vs source %.2e, inputs alone %.2e)\n",
            key, n, ok, worst_here, worst_src, q.rel);
done:
    if (ss != NULL)
        ops->session_close(ss);
    free(rows);
    free(ref);
    free(src);
    free(out);
}

static void e4m3_tactics_should_match_the_reference(void)
{
    if (cc_major() < 9) { /* no FP8 engines: nothing listed */
        attn_tactic t[4];
        CHECK_EQ_INT(cudnn_tactics(&e4m3_cases[0], t, 4), 0);
        return;
    }
    for (size_t i = 0; i < sizeof e4m3_cases / sizeof e4m3_cases[0]; i++) {
        e4m3_check_shape(&e4m3_cases[i], ATTN_CUDNN);
#ifdef ATTUNE_HAVE_SM90A
        if (cc_major() == 9) /* attune's own FP8 kernel: sm_90a code, 9.0 only */
            e4m3_check_shape(&e4m3_cases[i], ATTN_FUSED);
#endif
    }
    fprintf(stderr, "  e4m3 worst relative L2: %.2e against the stored inputs, %.2e against "
                    "the bf16 source\n", e4m3_worst, e4m3_worst_src);
}

/* Causal with sq < skv needs the bottom-right mask, which cuDNN's FP8
 * path has on Blackwell only; d = 256 faulted the GPU (cuda_cudnn.c): one
 * tactic each, refused with the reason. */
static void e4m3_refusals_should_say_why(void)
{
    const struct { attn_shape s; const char *why; } c[] = {
        {{1, 4, 4, 50, 1018, 128, ATTN_E4M3, 1}, "Blackwell"},
        {{1, 4, 4, 256, 256, 256, ATTN_E4M3, 0}, "d = 128"},
    };
    if (cc_major() < 9)
        return;
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        attn_tactic t[8];
        attn_session *ss = NULL;
        attn_plan *p = NULL;
        int n = cudnn_tactics(&c[i].s, t, 8);
        CHECK_EQ_INT(n, 1);
        CHECK_EQ_INT(ops->session_open(0, &c[i].s, 5, &ss), 0);
        if (ss == NULL || n < 1)
            continue;
        CHECK_EQ_INT(ops->plan(ss, &t[0], &p), ATTUNE_EUNSUPP);
        const char *note = ops->plan_note(ss);
        CHECK_MSG(note != NULL && strstr(note, c[i].why) != NULL, "note '%s'", note ? note : "(null)");
        ops->session_close(ss);
    }
}

/* The check catches what it must: a causal e4m3 output against the
 * non-causal reference of the same inputs. */
static void e4m3_planted_errors_should_be_caught(void)
{
    attn_tactic t;
    attn_shape c = mk(1, 4, 2, 512, 512, 128, ATTN_E4M3, 1), nc = c;
    nc.causal = 0;
    if (cc_major() < 9)
        return;
    CHECK(first_tactic(&c, 1, &t));
    double right = gpu_cross_error(ops, &c, &c, &t, CROSS_SEED);
    double wrong = gpu_cross_error(ops, &c, &nc, &t, CROSS_SEED);
    CHECK_MSG(right >= 0 && right <= GPU_TOL_E4M3, "causal e4m3 vs its own reference: %.3g", right);
    CHECK_MSG(wrong > 3 * GPU_TOL_E4M3, "causal e4m3 vs the non-causal reference: %.3g", wrong);
    fprintf(stderr, "  planted e4m3: right %.2e wrong %.2e\n", right, wrong);
#ifdef ATTUNE_HAVE_SM90A
    /* the sm90a kernel's FP8 versions alike: every configuration (3.5's
     * 128-key tiles, 3.7's 192 and 224) */
    if (cc_major() == 9) {
        attn_tactic ft[16];
        char ts[ATTN_TACTIC_STR_MAX];
        int nf = variant_tactics(&c, ATTN_FUSED, ft, 16), wide = 0;
        CHECK(nf > 0);
        for (int i = 0; i < nf; i++) {
            attn_tactic_str(&ft[i], ts, sizeof ts);
            wide += ft[i].tile_n > 128;
            right = gpu_cross_error(ops, &c, &c, &ft[i], CROSS_SEED);
            wrong = gpu_cross_error(ops, &c, &nc, &ft[i], CROSS_SEED);
            CHECK_MSG(right >= 0 && right <= GPU_TOL_E4M3, "%s causal e4m3 vs its own reference: %.3g", ts, right);
            CHECK_MSG(wrong > 3 * GPU_TOL_E4M3, "%s causal e4m3 vs the non-causal reference: %.3g", ts, wrong);
            fprintf(stderr, "  planted e4m3 (%s): right %.2e wrong %.2e\n", ts, right, wrong);
        }
        CHECK_MSG(wide > 0, "%s", "no wide-tile e4m3 tactic (version 3.7) listed");
        /* version 3.12: the non-causal grids whose last wave is cut into
         * key ranges, against the causal reference of the same inputs */
        attn_shape cut = mk(1, 24, 24, 1024, 2048, 128, ATTN_E4M3, 0), cutc = cut;
        cutc.causal = 1;
        int ncut = 0;
        nf = variant_tactics(&cut, ATTN_FUSED, ft, 16);
        for (int i = 0; i < nf; i++) {
            if (cuda_fused_sm90a_cut(&cut, &ft[i]) == 0)
                continue;
            attn_tactic_str(&ft[i], ts, sizeof ts);
            right = gpu_cross_error(ops, &cut, &cut, &ft[i], CROSS_SEED);
            wrong = gpu_cross_error(ops, &cut, &cutc, &ft[i], CROSS_SEED);
            CHECK_MSG(right >= 0 && right <= GPU_TOL_E4M3, "%s cut e4m3 vs its own reference: %.3g", ts, right);
            CHECK_MSG(wrong > 3 * GPU_TOL_E4M3, "%s cut e4m3 vs the causal reference: %.3g", ts, wrong);
            fprintf(stderr, "  planted e4m3, cut last wave (%s): right %.2e wrong %.2e\n", ts, right, wrong);
            ncut++;
        }
        CHECK_MSG(ncut >= 2, "%d e4m3 tactics with a cut last wave (version 3.12) on %s", ncut,
                  "b1.hq24.sq1024.skv2048");
    }
#endif
}

static void time_should_run_in_cuda_graphs(void)
{
    attn_shape s = mk(1, 8, 1, 50, 1018, 256, ATTN_F16, 0);
    attn_tactic t;
    attn_session *ss = NULL;
    attn_plan *p = NULL;
    attn_timing a = {0}, b = {0};
    char str[ATTN_TACTIC_STR_MAX];
    CHECK(first_tactic(&s, 1, &t));
    CHECK_EQ_INT(ops->session_open(0, &s, 3, &ss), 0);
    if (ss == NULL)
        return;
    CHECK_EQ_INT(ops->plan(ss, &t, &p), 0);
    if (p != NULL) {
        CHECK_EQ_INT(ops->time(p, 20, 0, &a), 0);
        CHECK_EQ_INT(ops->time(p, 20, 0, &b), 0); /* cached graph */
        CHECK(a.us > 0 && isfinite(a.us) && b.us > 0);
        fprintf(stderr, "  %s b1.hq8.hkv1.sq50.skv1018.d256.f16.nc: %.2f us\n",
                attn_tactic_str(&t, str, sizeof str), b.us);
        ops->plan_free(p);
    }
    ops->session_close(ss);
}

#else /* CUDA without cuDNN: the variant is absent */

static void cudnn_should_be_absent(void)
{
    attn_shape s = mk(1, 8, 2, 50, 197, 64, ATTN_F16, 1);
    attn_tactic t[8], c;
    attn_session *ss = NULL;
    attn_plan *p = NULL;
    CHECK_EQ_INT(cudnn_tactics(&s, t, 8), 0);
    CHECK_EQ_INT(attn_tactic_parse("cudnn/eng=0/graph=comp/kcfg=0/pad=1", &c, NULL, 0), 0);
    CHECK_EQ_INT(ops->session_open(0, &s, 1, &ss), 0);
    if (ss == NULL)
        return;
    CHECK_EQ_INT(ops->plan(ss, &c, &p), ATTUNE_EUNSUPP);
    CHECK(p == NULL);
    ops->session_close(ss);
}

#endif

int main(void)
{
    if (ops->device_count() == 0) {
        fprintf(stderr, "no CUDA device: skipped\n");
        return TEST_SKIP_CODE;
    }
#ifdef ATTUNE_HAVE_CUDNN
    RUN(stack_should_name_the_loaded_cudnn);
    RUN(tactics_should_be_canonical_and_distinct);
    RUN(f32_should_be_unsupported_with_a_reason);
    RUN(tactic_string_should_rebuild_its_plan);
    RUN(plan_cache_should_serve_repeat_plans);
    RUN(prefetch_should_build_plans_ahead);
    RUN(planted_mask_errors_should_be_caught);
    RUN(time_should_run_in_cuda_graphs);
    RUN(e4m3_refusals_should_say_why);
    RUN(e4m3_planted_errors_should_be_caught);
    RUN(e4m3_tactics_should_match_the_reference);
    RUN(every_tactic_should_match_the_reference);
#else
    RUN(cudnn_should_be_absent);
#endif
    return test_summary();
}

#else

int main(void)
{
    fprintf(stderr, "built without CUDA: skipped\n");
    return TEST_SKIP_CODE;
}

#endif
