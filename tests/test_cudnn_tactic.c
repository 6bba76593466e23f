/* test_cudnn_tactic.c -- the cudnn variant's tactic text, and its clean
 * absence where it cannot run (no GPU here; GPU checks are in
 * tests/gpu/test_cudnn.c).
 *
 * A cudnn tactic names one cuDNN execution plan: engine global index,
 * graph form and knob code, all three always written (engine 0 and knob
 * code 0 are real values), keys sorted like every tactic's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "kernels/attn.h"
#ifdef ATTUNE_HAVE_CUDNN
#include "kernels/cuda/cuda_cudnn.h"
#endif

static void cudnn_tactic_should_round_trip_canonically(void)
{
    const char *canon[] = {"cudnn/eng=9/graph=sdpa/kcfg=7/pad=1", "cudnn/eng=0/graph=comp/kcfg=0/pad=64",
                           "cudnn/eng=1000000/graph=comp/kcfg=2147483647/pad=8"};
    for (size_t i = 0; i < sizeof canon / sizeof canon[0]; i++) {
        attn_tactic t;
        char buf[ATTN_TACTIC_STR_MAX], err[ATTUNE_ERRLEN] = "";
        CHECK_MSG(attn_tactic_parse(canon[i], &t, err, sizeof err) == 0, "%s: %s", canon[i], err);
        CHECK_STR(attn_tactic_str(&t, buf, sizeof buf), canon[i]);
    }
    /* any key order: the same tactic, printed sorted */
    attn_tactic t;
    char buf[ATTN_TACTIC_STR_MAX];
    CHECK_EQ_INT(attn_tactic_parse("cudnn/pad=16/kcfg=3/graph=comp/eng=41", &t, NULL, 0), 0);
    CHECK_EQ_INT(t.variant, ATTN_CUDNN);
    CHECK_EQ_INT(t.eng, 41);
    CHECK_EQ_INT(t.graph, ATTN_GRAPH_COMP);
    CHECK_EQ_INT(t.kcfg, 3);
    CHECK_EQ_INT(t.pad, 16);
    CHECK_EQ_INT(t.acc, ATTN_ACC_NONE);
    CHECK(t.tile_m == 0 && t.tile_n == 0 && t.splits == 0 && t.warps == 0);
    CHECK_STR(attn_tactic_str(&t, buf, sizeof buf), "cudnn/eng=41/graph=comp/kcfg=3/pad=16");
    /* the other variants print no cudnn keys */
    CHECK_EQ_INT(attn_tactic_parse("split/acc=f32/pad=1", &t, NULL, 0), 0);
    CHECK_STR(attn_tactic_str(&t, buf, sizeof buf), "split/acc=f32/pad=1");
    CHECK_STR(attn_variant_name(ATTN_CUDNN), "cudnn");
}

static void cudnn_tactic_parse_should_reject_bad_text(void)
{
    const char *bad[] = {
        "cudnn/pad=1",                                   /* no plan named */
        "cudnn/eng=9/graph=sdpa/pad=1",                  /* kcfg missing */
        "cudnn/eng=9/kcfg=7/pad=1",                      /* graph missing */
        "cudnn/graph=sdpa/kcfg=7/pad=1",                 /* eng missing */
        "cudnn/eng=9/graph=sdpa/kcfg=7",                 /* pad missing */
        "cudnn/eng=9/graph=fused/kcfg=7/pad=1",          /* unknown form */
        "cudnn/eng=-1/graph=sdpa/kcfg=7/pad=1",
        "cudnn/eng=9/graph=sdpa/kcfg=2147483648/pad=1",  /* over int32 */
        "cudnn/eng=9x/graph=sdpa/kcfg=7/pad=1",
        "cudnn/eng=9/eng=9/graph=sdpa/kcfg=7/pad=1",
        "cudnn/acc=f32/eng=9/graph=sdpa/kcfg=7/pad=1",   /* not a cudnn key */
        "cudnn/eng=9/graph=sdpa/kcfg=7/pad=1/tile=64x64",
        "split/acc=f32/eng=9/pad=1",                     /* cudnn keys elsewhere */
        "fused/graph=comp/pad=1",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        attn_tactic t;
        char err[ATTUNE_ERRLEN] = "";
        CHECK_MSG(attn_tactic_parse(bad[i], &t, err, sizeof err) < 0, "accepted '%s'", bad[i]);
        CHECK_MSG(err[0] != 0, "no message for '%s'", bad[i]);
    }
}

/* The CPU backend never lists cudnn and refuses to plan it: unsupported,
 * not failed. */
static void cpu_should_not_offer_cudnn(void)
{
    const attn_ops *ops = &attn_cpu_ops;
    attn_shape s = {1, 4, 2, 16, 24, 32, ATTN_F16, 1};
    attn_tactic list[256], t;
    attn_session *ss = NULL;
    attn_plan *p = NULL;
    int n = ops->tactics(0, &s, list, 256);
    CHECK(n > 0);
    for (int i = 0; i < n; i++)
        CHECK(list[i].variant != ATTN_CUDNN);
    CHECK_EQ_INT(attn_tactic_parse("cudnn/eng=0/graph=comp/kcfg=0/pad=1", &t, NULL, 0), 0);
    CHECK_EQ_INT(ops->session_open(0, &s, 1, &ss), 0);
    if (ss == NULL)
        return;
    CHECK_EQ_INT(ops->plan(ss, &t, &p), ATTUNE_EUNSUPP);
    CHECK(p == NULL);
    ops->session_close(ss);
}

/* Built with cuDNN: the library loads and reports its version without a
 * GPU, in the form the stack carries. Built without: nothing to load. */
static void cudnn_version_should_be_readable(void)
{
#ifdef ATTUNE_HAVE_CUDNN
    char v[32];
    int maj = 0, min = 0, pat = 0;
    int rc = cuda_cudnn_version(v, sizeof v);
    CHECK(rc == 0 || rc == ATTUNE_EUNSUPP);
    CHECK_MSG(sscanf(v, "cudnn-%d.%d.%d", &maj, &min, &pat) == 3, "'%s'", v);
    CHECK(maj >= 9);
    fprintf(stderr, "  loaded %s\n", v);
#else
    fprintf(stderr, "  built without cuDNN: the cudnn variant is absent\n");
    CHECK(1);
#endif
}

/* ATTUNE_CUDNN_KCFGS (experiments, bench/cudnn_knobs.py) lists exactly
 * its configs, in its order, for each graph form of the unpadded graph
 * and none for the padded ones; a malformed value is ignored (what
 * heuristics propose is listed instead: nothing without a GPU). The
 * pinned path asks no device, so this runs here. */
static void pinned_kcfgs_should_list_exactly_those(void)
{
#ifdef ATTUNE_HAVE_CUDNN
    attn_shape s = {1, 4, 2, 100, 100, 64, ATTN_BF16, 0}; /* 100: pads 8, 16, 64 change it */
    attn_tactic t[256];
    const int want[] = {0, 8, 33};
    char v[32];
    if (cuda_cudnn_version(v, sizeof v) != 0) { /* a cuDNN the variant refuses lists one refusal */
        fprintf(stderr, "  %s refused: nothing pinned to list\n", v);
        CHECK(1);
        return;
    }
    CHECK_EQ_INT(setenv("ATTUNE_CUDNN_KCFGS", "2:0,8,33", 1), 0);
    int n = cuda_cudnn_tactics(0, &s, t, 256);
    CHECK_EQ_INT(n, 6); /* comp and sdpa, unpadded only */
    for (int i = 0; i < n && i < 6; i++) {
        CHECK_EQ_INT(t[i].variant, ATTN_CUDNN);
        CHECK_EQ_INT(t[i].eng, 2);
        CHECK_EQ_INT(t[i].kcfg, want[i % 3]);
        CHECK_EQ_INT(t[i].graph, i < 3 ? ATTN_GRAPH_COMP : ATTN_GRAPH_SDPA);
        CHECK_EQ_INT(t[i].pad, 1);
    }
    char many[1024];
    size_t o = (size_t)snprintf(many, sizeof many, "7:123456");
    for (int i = 1; i <= 64; i++) /* 65 codes: one more than it takes */
        o += (size_t)snprintf(many + o, sizeof many - o, ",%d", 123456 + i);
    const char *bad[] = {"7:123456,,1", "7:123456,", "7:123456 ", "7:-1", "7:2147483648", ":1", many};
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
        CHECK_EQ_INT(setenv("ATTUNE_CUDNN_KCFGS", bad[b], 1), 0);
        n = cuda_cudnn_tactics(0, &s, t, 256);
        CHECK(n >= 0);
        for (int i = 0; i < n; i++) /* heuristics' own list, never the malformed one */
            CHECK_MSG(!(t[i].eng == 7 && t[i].kcfg >= 123456), "'%.20s' listed eng %d kcfg %d",
                      bad[b], t[i].eng, t[i].kcfg);
    }
    unsetenv("ATTUNE_CUDNN_KCFGS");
#else
    CHECK(1);
#endif
}

int main(void)
{
    RUN(cudnn_tactic_should_round_trip_canonically);
    RUN(cudnn_tactic_parse_should_reject_bad_text);
    RUN(cpu_should_not_offer_cudnn);
    RUN(cudnn_version_should_be_readable);
    RUN(pinned_kcfgs_should_list_exactly_those);
    return test_summary();
}
