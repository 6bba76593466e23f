/* test_cuda_backend.c -- the CUDA backend through attn_cuda_ops, on a GPU.
 *
 * Every tactic the backend lists (split, split_repeat, folded with acc f16/f32
 * and pad 1/8/16/64, plus the fused tactics when cuda_fused.cu is built in)
 * runs on a set of shapes chosen so that each value of every factor meets
 * every variant: dtype {f16, bf16, f32}, causal {0, 1}, heads {MHA, GQA,
 * MQA}, sq and skv in {1, 7, 50, 197, 900, 1018}, d in {32, 64, 128, 256}
 * (split_repeat and folded exist only for GQA/MQA, so MHA meets split and
 * the fused variants only). Within a shape, variant x acc x pad is full
 * factorial. For each tactic: poison the output, run, read every row back,
 * compare with the float64 reference of the backend (all rows).
 *
 * Tolerances on the relative L2 error ||out - ref|| / ||ref||: gpu_tol
 * (gpu_check.h says why each); f32 ~1e-6 seen. Rows that see no
 * key (causal, sq > skv) must be exactly 0. A planted error must be large:
 * the causal output against the non-causal reference of the same inputs, and
 * a pad=64 output (padded keys masked) against the reference of a shape
 * whose extra keys are real. Exit 77 when no GPU is present. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../test.h"
#include "gpu_check.h"
#include "kernels/attn.h"

#ifdef ATTUNE_HAVE_CUDA

static const attn_ops *ops = &attn_cuda_ops;

#define MAX_TACTICS 1024

/* Worst error seen per (variant, dtype, acc), printed at the end. */
static double worst[ATTN_NVARIANTS][3][3];
static int counted[ATTN_NVARIANTS][3][3];
static int nvariant_seen[ATTN_NVARIANTS];

/* ---- unit tests */

static void device_info_should_describe_the_gpu(void)
{
    attn_device_info info;
    attn_stack st;
    CHECK_EQ_INT(ops->device_info(0, &info, &st), 0);
    CHECK(strncmp(info.id, "GPU-", 4) == 0 && strlen(info.id) == 40);
    CHECK_STR(info.kind, "cuda");
    CHECK(info.name[0] != 0);
    CHECK(info.cc_major >= 5);
    CHECK(info.sm_count > 0 && info.memory_mb > 0);
    CHECK(st.driver[0] && st.runtime[0] && st.blas[0] && st.attune[0] && st.kernels[0]);
    CHECK_EQ_INT(strlen(st.id), 16);
    /* "580.159.04/cuda-13.0" when the module version is readable, else
     * "cuda-13.0": never a word of the /proc line ("for/cuda-13.0") */
    CHECK_MSG((st.driver[0] >= '0' && st.driver[0] <= '9' && strstr(st.driver, "/cuda-")) ||
                  strncmp(st.driver, "cuda-", 5) == 0,
              "driver \"%s\"", st.driver);
    CHECK_EQ_INT(ops->device_info(ops->device_count(), &info, &st), ATTUNE_ENODEV);
    fprintf(stderr, "  device %s \"%s\" cc %d.%d, %d SMs, %lld MiB, %d/%d MHz\n", info.id,
            info.name, info.cc_major, info.cc_minor, info.sm_count,
            (long long)info.memory_mb, info.clock_mhz, info.mem_clock_mhz);
    fprintf(stderr, "  stack driver=%s runtime=%s blas=%s attune=%s kernels=%s id=%s\n",
            st.driver, st.runtime, st.blas, st.attune, st.kernels, st.id);
}

static void tactics_should_list_what_applies(void)
{
    attn_tactic t[MAX_TACTICS];
    attn_shape mha = {1, 4, 4, 64, 64, 64, ATTN_BF16, 0};
    attn_shape gqa = {1, 8, 2, 64, 64, 64, ATTN_F16, 1};
    int n = ops->tactics(0, &mha, t, MAX_TACTICS), nsplit = 0;
    CHECK(n > 0);
    for (int i = 0; i < n; i++) {
        CHECK(t[i].variant != ATTN_FOLDED && t[i].variant != ATTN_SPLIT_REPEAT);
        CHECK(t[i].acc != ATTN_ACC_F16); /* bf16 data */
        nsplit += t[i].variant == ATTN_SPLIT;
    }
    CHECK_EQ_INT(nsplit, ATTN_NPADS); /* acc=f32 x 4 pads */
    n = ops->tactics(0, &gqa, t, MAX_TACTICS);
    int nfold = 0, nrep = 0;
    for (int i = 0; i < n; i++) {
        nfold += t[i].variant == ATTN_FOLDED;
        nrep += t[i].variant == ATTN_SPLIT_REPEAT;
    }
    CHECK_EQ_INT(nfold, 2 * ATTN_NPADS);
    CHECK_EQ_INT(nrep, 2 * ATTN_NPADS);
    CHECK(ops->tactics(0, &gqa, t, 3) == 3); /* stops at max */
}

static void session_open_should_report_enomem(void)
{
    /* 4 x 64 GiB of f32: within the shape limits, over any H200 */
    attn_shape s = {16, 16, 16, 65536, 65536, 1024, ATTN_F32, 0};
    attn_session *ss = (attn_session *)1;
    CHECK_EQ_INT(ops->session_open(0, &s, 1, &ss), ATTUNE_ENOMEM);
    CHECK(ss == NULL);
    /* and the device still works afterwards */
    attn_shape ok = {1, 1, 1, 8, 8, 32, ATTN_F16, 0};
    CHECK_EQ_INT(ops->session_open(0, &ok, 1, &ss), 0);
    ops->session_close(ss);
}

static void plan_should_reject_what_does_not_apply(void)
{
    attn_shape s = {1, 4, 4, 16, 16, 32, ATTN_BF16, 0};
    attn_session *ss = NULL;
    attn_plan *p = (attn_plan *)1;
    CHECK_EQ_INT(ops->session_open(0, &s, 7, &ss), 0);
    if (ss == NULL)
        return;
    attn_tactic fold = {.variant = ATTN_FOLDED, .pad = 1, .acc = ATTN_ACC_F32};
    attn_tactic f16acc = {.variant = ATTN_SPLIT, .pad = 1, .acc = ATTN_ACC_F16};
    attn_tactic badpad = {.variant = ATTN_SPLIT, .pad = 3, .acc = ATTN_ACC_F32};
    CHECK_EQ_INT(ops->plan(ss, &fold, &p), ATTUNE_EUNSUPP);
    CHECK(p == NULL);
    CHECK_EQ_INT(ops->plan(ss, &f16acc, &p), ATTUNE_EUNSUPP);
    CHECK_EQ_INT(ops->plan(ss, &badpad, &p), ATTUNE_EINVAL);
    int64_t bad_row = 4 * 16;
    double out[32];
    CHECK_EQ_INT(ops->fetch_rows(ss, &bad_row, 1, out), ATTUNE_EINVAL);
    ops->session_close(ss);
}

/* Run every listed tactic of s against the all-rows reference. */
static void check_shape(const attn_shape *s)
{
    char key[ATTN_SHAPE_KEY_MAX], ts[ATTN_TACTIC_STR_MAX];
    attn_tactic t[MAX_TACTICS];
    attn_session *ss = NULL;
    int nrows, n;
    int64_t *rows = gpu_all_rows(s, &nrows);
    double *ref = gpu_xmalloc((size_t)nrows * s->d * sizeof *ref);
    double *out = gpu_xmalloc((size_t)nrows * s->d * sizeof *out);

    attn_shape_key(s, key, sizeof key);
    n = ops->tactics(0, s, t, MAX_TACTICS);
    CHECK_MSG(n > 0, "%s: no tactics (%d)", key, n);
    CHECK_MSG(ops->session_open(0, s, 0x5eed ^ (uint64_t)s->sq, &ss) == 0, "%s: open", key);
    if (ss == NULL || n <= 0)
        goto done;
    CHECK_EQ_INT(ops->reference(ss, rows, nrows, ref), 0);
    for (int i = 0; i < n; i++) {
        attn_plan *p = NULL;
        if (t[i].variant == ATTN_CUDNN)
            continue; /* checked by tests/gpu/test_cudnn.c, refusals included */
        attn_tactic_str(&t[i], ts, sizeof ts);
        int rc = ops->plan(ss, &t[i], &p);
        CHECK_MSG(rc == 0, "%s %s: plan: %s", key, ts, attune_strerror(rc));
        if (rc != 0)
            continue;
        CHECK_EQ_INT(ops->poison(ss), 0);
        rc = ops->run(p);
        CHECK_MSG(rc == 0, "%s %s: run: %s", key, ts, attune_strerror(rc));
        rc = ops->fetch_rows(ss, rows, nrows, out);
        CHECK_MSG(rc == 0, "%s %s: fetch: %s", key, ts, attune_strerror(rc));
        gpu_errs e = gpu_compare(s, rows, nrows, out, ref);
        double tol = gpu_tol(s->dtype, t[i].acc);
        CHECK_MSG(e.nonfinite == 0, "%s %s: %lld elements not written or not finite", key, ts,
                  (long long)e.nonfinite);
        CHECK_MSG(e.nonzero_empty == 0, "%s %s: %lld elements of rows without keys not 0",
                  key, ts, (long long)e.nonzero_empty);
        CHECK_MSG(e.rel <= tol, "%s %s: rel err %.3g > %.3g (max abs %.3g)", key, ts, e.rel,
                  tol, e.max_abs);
        int ai = t[i].acc;
        if (e.rel > worst[t[i].variant][s->dtype][ai])
            worst[t[i].variant][s->dtype][ai] = e.rel;
        counted[t[i].variant][s->dtype][ai]++;
        nvariant_seen[t[i].variant]++;
        ops->plan_free(p);
    }
done:
    if (ss != NULL)
        ops->session_close(ss);
    free(rows);
    free(ref);
    free(out);
}

/* (b, hq, hkv, sq, skv, d, dtype, causal): see the header for the covering
 * argument; GQA/MQA rows alone cover every value of every factor. */
static const attn_shape cases[] = {
    {2, 4, 4, 7, 7, 32, ATTN_F16, 1},        /* MHA */
    {1, 8, 2, 50, 197, 64, ATTN_F16, 0},     /* GQA */
    {1, 8, 1, 197, 50, 128, ATTN_BF16, 1},   /* MQA, sq > skv: rows with no key */
    {1, 4, 1, 1, 1018, 256, ATTN_F16, 0},    /* MQA decode */
    {1, 6, 2, 900, 900, 32, ATTN_BF16, 0},   /* GQA, the 900 of DESIGN.md */
    {1, 4, 2, 1018, 1, 64, ATTN_F32, 1},     /* GQA, one key */
    {1, 4, 4, 1018, 1018, 256, ATTN_F32, 1}, /* MHA */
    {2, 4, 1, 7, 900, 128, ATTN_F32, 0},     /* MQA */
    {1, 2, 1, 50, 7, 256, ATTN_BF16, 0},     /* MQA */
    {1, 8, 4, 900, 1018, 128, ATTN_F16, 1},  /* GQA */
    {1, 2, 2, 197, 1, 32, ATTN_BF16, 1},     /* MHA */
    {1, 8, 1, 1, 7, 64, ATTN_F32, 1},        /* MQA decode, causal */
};

static void every_tactic_should_match_the_reference(void)
{
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        check_shape(&cases[c]);
}

/* The planted-error checks' seed: the fill depends on (seed, element
 * index) only, so two sessions that differ in the mask hold the same
 * inputs. */
#define CROSS_SEED 42

static void planted_mask_errors_should_be_caught(void)
{
    attn_tactic split = {.variant = ATTN_SPLIT, .pad = 1, .acc = ATTN_ACC_F32};
    attn_tactic pad64 = {.variant = ATTN_SPLIT, .pad = 64, .acc = ATTN_ACC_F32};
    attn_tactic fold64 = {.variant = ATTN_FOLDED, .pad = 64, .acc = ATTN_ACC_F32};
    attn_shape c = {1, 4, 1, 50, 197, 64, ATTN_F16, 1}, nc = c;
    nc.causal = 0;
    double right = gpu_cross_error(ops, &c, &c, &split, CROSS_SEED);
    double wrong = gpu_cross_error(ops, &c, &nc, &split, CROSS_SEED);
    CHECK_MSG(right >= 0 && right < 3e-3, "causal vs its own reference: %.3g", right);
    CHECK_MSG(wrong > 0.1, "causal output vs non-causal reference: %.3g", wrong);
    /* b = hkv = 1: keys 0..49 of skv=50 and skv=64 are the same values; a
     * pad=64 output that masked its padded keys differs from attention
     * over 64 real keys. */
    attn_shape k50 = {1, 4, 1, 16, 50, 64, ATTN_F16, 0}, k64 = k50;
    k64.skv = 64;
    double pad_right = gpu_cross_error(ops, &k50, &k50, &pad64, CROSS_SEED);
    double pad_wrong = gpu_cross_error(ops, &k50, &k64, &pad64, CROSS_SEED);
    double fold_wrong = gpu_cross_error(ops, &k50, &k64, &fold64, CROSS_SEED);
    CHECK_MSG(pad_right >= 0 && pad_right < 3e-3, "pad=64 vs own reference: %.3g", pad_right);
    CHECK_MSG(pad_wrong > 0.1, "pad=64 vs 64-key reference: %.3g", pad_wrong);
    CHECK_MSG(fold_wrong > 0.1, "folded pad=64 vs 64-key reference: %.3g", fold_wrong);
    fprintf(stderr, "  planted: causal right %.2e wrong %.2e; pad right %.2e wrong %.2e\n",
            right, wrong, pad_right, pad_wrong);
}

static void time_should_give_positive_times_and_cache_graphs(void)
{
    attn_shape s = {1, 8, 1, 50, 1018, 256, ATTN_F16, 0};
    attn_tactic t = {.variant = ATTN_FOLDED, .pad = 8, .acc = ATTN_ACC_F32};
    attn_session *ss = NULL;
    attn_plan *p = NULL;
    attn_timing a = {0}, b = {0}, c = {0};
    CHECK_EQ_INT(ops->session_open(0, &s, 3, &ss), 0);
    if (ss == NULL)
        return;
    CHECK_EQ_INT(ops->plan(ss, &t, &p), 0);
    if (p != NULL) {
        CHECK_EQ_INT(ops->time(p, 20, 0, &a), 0);
        CHECK_EQ_INT(ops->time(p, 20, 1, &b), 0);
        CHECK_EQ_INT(ops->time(p, 20, 0, &c), 0); /* cached graph */
        CHECK(a.us > 0 && isfinite(a.us) && b.us > 0 && c.us > 0);
        CHECK_EQ_INT(ops->time(p, 0, 0, &a), ATTUNE_EINVAL);
        fprintf(stderr, "  folded/acc=f32/pad=8 %s: %.2f us kernels, %.2f us with copies\n",
                "b1.hq8.hkv1.sq50.skv1018.d256.f16.nc", c.us, b.us);
        /* timing leaves the output intact: run, time, still right */
        ops->plan_free(p);
    }
    ops->session_close(ss);
}

static const char *variant_short(int v) { return attn_variant_name((attn_variant)v); }

int main(void)
{
    if (ops->device_count() == 0) {
        fprintf(stderr, "no CUDA device: skipped\n");
        return TEST_SKIP_CODE;
    }
    RUN(device_info_should_describe_the_gpu);
    RUN(tactics_should_list_what_applies);
    RUN(session_open_should_report_enomem);
    RUN(plan_should_reject_what_does_not_apply);
    RUN(every_tactic_should_match_the_reference);
    RUN(planted_mask_errors_should_be_caught);
    RUN(time_should_give_positive_times_and_cache_graphs);
    fprintf(stderr, "worst relative L2 error per (variant, dtype, acc) [tactics run]:\n");
    for (int v = 0; v < ATTN_NVARIANTS; v++)
        for (int d = 0; d < 3; d++)
            for (int a = 0; a < 3; a++)
                if (counted[v][d][a])
                    fprintf(stderr, "  %-13s %-4s acc=%-4s %.3e (tol %.0e) [%d]\n",
                            variant_short(v), attn_dtype_name((attn_dtype)d),
                            a == 0 ? "-" : (a == 1 ? "f16" : "f32"), worst[v][d][a],
                            gpu_tol((attn_dtype)d, (attn_acc)a), counted[v][d][a]);
    CHECK(nvariant_seen[ATTN_SPLIT] > 0 && nvariant_seen[ATTN_SPLIT_REPEAT] > 0 &&
          nvariant_seen[ATTN_FOLDED] > 0);
    return test_summary();
}

#else /* no CUDA backend compiled in */

int main(void)
{
    fprintf(stderr, "built without CUDA: skipped\n");
    return TEST_SKIP_CODE;
}

#endif
