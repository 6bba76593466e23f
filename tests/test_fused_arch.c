/* test_fused_arch.c -- which fused kernel configurations each architecture
 * gets (docs/kernels.md, "Architectures"): every listed one fits the
 * architecture's shared memory per block, the ones that spill there
 * (scripts/check_arch.sh) are not listed, and the H200 (9.0) keeps all.
 * Host code only: runs in a CUDA build without a GPU; skipped without CUDA. */
#include "test.h"

#ifndef ATTUNE_HAVE_CUDA
int main(void)
{
    puts("built without CUDA: skipped");
    return TEST_SKIP_CODE;
}
#else
#include "kernels/cuda/cuda_fused.h"
#include "kernels/cuda/cuda_fused_configs.h"
#include "kernels/cuda/cuda_fused_f32.h"

/* Per-block opt-in shared memory, from the CUDA programming guide's table,
 * written out here independently of cuda_fused.cu's copy. */
static size_t limit(int cc)
{
    switch (cc) {
    case 80: case 87: return 166912;
    case 90: case 100: case 110: return 232448;
    default: return 101376;
    }
}

static const int ccs[] = {80, 86, 87, 89, 90, 100, 110, 120};
static const int dims[] = {32, 64, 128, 256};

/* Distinct configurations (pad 1 only) listed for cc over every head dim,
 * for a decode-like shape that gets both variants; of fused_splitkv,
 * version 2 (no stages) or, with bulk, version 2.1 (stages=N). */
static int configs_of(int cc, attn_variant v, int bulk, char (*names)[ATTN_TACTIC_STR_MAX], int max)
{
    int n = 0;
    for (size_t k = 0; k < sizeof dims / sizeof dims[0]; k++) {
        attn_shape s = {1, 8, 1, 64, 4096, dims[k], ATTN_F16, 0};
        attn_tactic t[512];
        int nt = cuda_fused_tactics(&s, cc / 10, cc % 10, t, 512);
        for (int i = 0; i < nt; i++) {
            /* arch=sm90a tactics (cuda_fused_sm90a.cu) are 9.0's own family,
             * not configurations of these kernels */
            if (t[i].variant != v || t[i].pad != 1 || t[i].arch != 0 ||
                (v == ATTN_FUSED_SPLITKV && (t[i].splits != 1 || (t[i].stages > 0) != bulk)))
                continue;
            size_t smem = cuda_fused_smem_bytes(&t[i], s.d);
            CHECK_MSG(smem > 0 && smem <= limit(cc), "cc %d d %d: %zu B", cc, dims[k], smem);
            if (n < max) {
                char buf[ATTN_TACTIC_STR_MAX];
                snprintf(names[n], ATTN_TACTIC_STR_MAX, "d%d:%s", dims[k],
                         attn_tactic_str(&t[i], buf, sizeof buf));
            }
            n++;
        }
    }
    return n;
}

static int configs(int cc, attn_variant v, char (*names)[ATTN_TACTIC_STR_MAX], int max)
{
    return configs_of(cc, v, 0, names, max);
}

static int listed(char (*names)[ATTN_TACTIC_STR_MAX], int n, const char *want)
{
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], want) == 0)
            return 1;
    return 0;
}

static void every_listed_config_should_fit_its_architecture(void)
{
    char names[64][ATTN_TACTIC_STR_MAX];
    for (size_t i = 0; i < sizeof ccs / sizeof ccs[0]; i++) {
        int f = configs(ccs[i], ATTN_FUSED, names, 64);
        int k = configs(ccs[i], ATTN_FUSED_SPLITKV, names, 64);
        printf("sm_%d: %d fused, %d fused_splitkv configurations\n", ccs[i], f, k);
        CHECK(f > 0 && k > 0);
    }
}

static void h200_should_keep_every_configuration(void)
{
    char names[64][ATTN_TACTIC_STR_MAX];
    int n = configs(90, ATTN_FUSED, names, 64);
    CHECK_EQ_INT(n, 17);
    /* version 1.1's four key groups */
    CHECK(listed(names, n, "d32:fused/pad=1/tile=64x64/warps=16"));
    CHECK(listed(names, n, "d64:fused/pad=1/tile=32x64/warps=8"));
    CHECK_EQ_INT(configs(90, ATTN_FUSED_SPLITKV, names, 64), 8);
}

/* Version 2.1 (bulk copies, 9.0 and later): none before 9.0; on 9.0 each
 * of its 5 configurations at the most stages a block holds (8 at d = 64, 6
 * at d = 128 and d = 256 with 32-key tiles, 3 with 64, 3 at d = 128 with
 * 128-key tiles) and at the most that let two blocks share an SM (6, 3, 3;
 * none for 64-key tiles at d = 256 nor 128-key ones at d = 128: one stage
 * of 66 or 64 KB). */
static void bulk_configs_should_start_at_hopper(void)
{
    char names[64][ATTN_TACTIC_STR_MAX];
    CHECK_EQ_INT(configs_of(80, ATTN_FUSED_SPLITKV, 1, names, 64), 0);
    CHECK_EQ_INT(configs_of(89, ATTN_FUSED_SPLITKV, 1, names, 64), 0);
    int n = configs_of(90, ATTN_FUSED_SPLITKV, 1, names, 64);
    CHECK_EQ_INT(n, 8);
    CHECK(listed(names, n, "d64:fused_splitkv/pad=1/splits=1/stages=8/tile=16x64/warps=4"));
    CHECK(listed(names, n, "d64:fused_splitkv/pad=1/splits=1/stages=6/tile=16x64/warps=4"));
    CHECK(listed(names, n, "d128:fused_splitkv/pad=1/splits=1/stages=6/tile=16x64/warps=4"));
    CHECK(listed(names, n, "d128:fused_splitkv/pad=1/splits=1/stages=3/tile=16x64/warps=4"));
    CHECK(listed(names, n, "d128:fused_splitkv/pad=1/splits=1/stages=3/tile=16x128/warps=8"));
    CHECK(listed(names, n, "d256:fused_splitkv/pad=1/splits=1/stages=6/tile=16x32/warps=2"));
    CHECK(listed(names, n, "d256:fused_splitkv/pad=1/splits=1/stages=3/tile=16x32/warps=2"));
    CHECK(listed(names, n, "d256:fused_splitkv/pad=1/splits=1/stages=3/tile=16x64/warps=4"));
}

static void orin_and_thor_should_lose_what_spills_or_does_not_fit(void)
{
    char f[64][ATTN_TACTIC_STR_MAX], k[64][ATTN_TACTIC_STR_MAX];
    int nf = configs(87, ATTN_FUSED, f, 64), nk = configs(87, ATTN_FUSED_SPLITKV, k, 64);
    /* spills on sm_87 */
    CHECK(!listed(f, nf, "d128:fused/pad=1/tile=128x64/warps=4"));
    CHECK(!listed(f, nf, "d256:fused/pad=1/tile=64x64/warps=8"));
    CHECK(!listed(k, nk, "d128:fused_splitkv/pad=1/splits=1/tile=16x32/warps=2"));
    CHECK(!listed(k, nk, "d256:fused_splitkv/pad=1/splits=1/tile=16x32/warps=2"));
    /* over 163 KB */
    CHECK(!listed(f, nf, "d128:fused/pad=1/tile=128x128/warps=8"));
    CHECK(!listed(f, nf, "d256:fused/pad=1/tile=128x64/warps=8"));
    CHECK(!listed(f, nf, "d256:fused/pad=1/tile=64x32/warps=8"));
    /* kept: 99 KB at d = 256 fits */
    CHECK(listed(f, nf, "d256:fused/pad=1/tile=64x64/warps=4"));
    CHECK(listed(k, nk, "d256:fused_splitkv/pad=1/splits=1/tile=16x64/warps=4"));
    CHECK(listed(f, nf, "d32:fused/pad=1/tile=64x64/warps=16")); /* 85 KB, 102-105 registers */
    CHECK(listed(f, nf, "d64:fused/pad=1/tile=32x64/warps=8"));  /* 77 KB */
    CHECK_EQ_INT(nf, 12);
    CHECK_EQ_INT(nk, 6);

    nf = configs(110, ATTN_FUSED, f, 64);
    nk = configs(110, ATTN_FUSED_SPLITKV, k, 64);
    CHECK(!listed(f, nf, "d128:fused/pad=1/tile=128x64/warps=4"));
    CHECK(!listed(f, nf, "d256:fused/pad=1/tile=64x64/warps=4"));
    CHECK(!listed(f, nf, "d256:fused/pad=1/tile=64x64/warps=8"));
    CHECK(!listed(k, nk, "d64:fused_splitkv/pad=1/splits=1/tile=16x128/warps=4"));
    CHECK(listed(f, nf, "d256:fused/pad=1/tile=128x64/warps=8")); /* 198 KB < 227 KB */
    CHECK_EQ_INT(nf, 14);
    CHECK_EQ_INT(nk, 7);
}

/* The fused f32 kernel (cuda_fused_f32.h): f32 only, pad 1 only, every
 * listed configuration within the architecture's shared memory; all 15 on
 * 9.0 (4 per head-dim bucket, 3 at d = 256), the 11 of 99 KB or less on
 * 8.6 / 8.9 / 12.0, none before 8.0. */
static void f32_configs_should_fit_their_architecture(void)
{
    for (size_t i = 0; i < sizeof ccs / sizeof ccs[0]; i++) {
        int total = 0;
        for (size_t k = 0; k < sizeof dims / sizeof dims[0]; k++) {
            attn_shape s = {1, 8, 1, 64, 4096, dims[k], ATTN_F32, 0};
            attn_tactic t[64];
            int n = cuda_fused_f32_tactics(&s, ccs[i] / 10, ccs[i] % 10, t, 64);
            for (int j = 0; j < n; j++) {
                int cg = 0;
#define F32_SMEM_OF(D_, BR_, BC_, NW_, CG_, MINB_)                                              \
    if (dims[k] == D_ && t[j].tile_m == BR_ && t[j].tile_n == BC_ && t[j].warps == NW_)         \
        cg = CG_;
                F32_CONFIGS(F32_SMEM_OF)
#undef F32_SMEM_OF
                size_t smem = F32_SMEM(dims[k], t[j].tile_m, t[j].tile_n, cg);
                CHECK_MSG(cg > 0 && smem <= limit(ccs[i]), "cc %d d %d: %zu B", ccs[i], dims[k],
                          smem);
                CHECK(t[j].variant == ATTN_FUSED && t[j].acc == ATTN_ACC_F32 && t[j].pad == 1);
                CHECK(cuda_fused_f32_listed(&s, ccs[i] / 10, ccs[i] % 10, &t[j]));
            }
            total += n;
            s.dtype = ATTN_F16;
            CHECK_EQ_INT(cuda_fused_f32_tactics(&s, ccs[i] / 10, ccs[i] % 10, t, 64), 0);
        }
        int big = ccs[i] == 80 || ccs[i] == 87 || ccs[i] == 90 || ccs[i] == 100 || ccs[i] == 110;
        CHECK_MSG(total == (big ? 15 : 11), "sm_%d: %d fused/acc=f32 configurations", ccs[i],
                  total);
    }
    attn_shape s = {1, 8, 1, 64, 64, 64, ATTN_F32, 0};
    attn_tactic t[64];
    CHECK_EQ_INT(cuda_fused_f32_tactics(&s, 7, 5, t, 64), 0);
    s.d = 257;
    CHECK_EQ_INT(cuda_fused_f32_tactics(&s, 9, 0, t, 64), 0);
    s.d = 64;
    CHECK_EQ_INT(cuda_fused_f32_tactics(&s, 9, 0, t, 2), 2); /* stops at max */
    attn_tactic x = t[0];
    x.pad = 8;
    CHECK(!cuda_fused_f32_listed(&s, 9, 0, &x));
}

#ifdef ATTUNE_HAVE_SM90A
/* The sm90a kernel's static shared memory: its mbarriers (1 + 4 x stages
 * of 8 bytes), as ptxas reports it, in 16-byte units (80 at 2 stages, 112
 * at 3). */
static size_t sm90a_static_smem(int stages)
{
    return ((size_t)8 * (1 + 4 * (size_t)stages) + 15) / 16 * 16;
}

/* Version 3 (arch=sm90a) on 9.0 only: every listed configuration within
 * a block's shared memory (with the kernel's static bytes), and the
 * wide key tiles of version 3.6 (128x176 at d <= 128, 128x80 at d = 256)
 * listed plain only, at every pad: never folded, never split, even on a
 * grouped shape where the 128-key tiles are listed both ways. */
static void sm90a_wide_tiles_should_be_listed_plain(void)
{
    static const struct {
        int64_t d;
        int tile_n; /* the wide key tile at d, 0: none */
    } cases[] = {{64, 0}, {80, 176}, {128, 176}, {200, 80}, {256, 80}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        attn_shape s = {1, 8, 2, 256, 4096, cases[k].d, ATTN_BF16, 0}; /* g = 4: folded too */
        attn_tactic t[256];
        int n = cuda_fused_tactics(&s, 9, 0, t, 256), wide = 0, folded = 0, split = 0;
        for (int i = 0; i < n; i++) {
            if (t[i].arch != ATTN_ARCH_SM90A)
                continue;
            int64_t D = SM90_KERNEL_DIM(s.d);
            size_t smem = SM90_SMEM(D, t[i].tile_m, t[i].tile_n, t[i].stages);
            CHECK_MSG(smem + sm90a_static_smem(t[i].stages) <= limit(90), "d %lld tile %dx%d: %zu B", (long long)s.d, t[i].tile_m,
                      t[i].tile_n, smem);
            folded += t[i].fold;
            split += t[i].splits > 1;
            if (t[i].tile_n == 64 || t[i].tile_n == 128)
                continue;
            CHECK_MSG(t[i].tile_n == cases[k].tile_n && t[i].tile_m == 128 && t[i].warps == 12 &&
                          t[i].stages == 2,
                      "d %lld: tile %dx%d listed", (long long)s.d, t[i].tile_m, t[i].tile_n);
            CHECK(t[i].fold == 0 && t[i].splits == 0);
            wide++;
        }
        CHECK_MSG(wide == (cases[k].tile_n > 0 ? ATTN_NPADS : 0), "d %lld: %d wide-tile tactics", (long long)s.d,
                  wide);
        CHECK(folded > 0 && split > 0);
        n = cuda_fused_tactics(&s, 8, 9, t, 256);
        CHECK(n > 0);
        for (int i = 0; i < n; i++)
            CHECK(t[i].arch == 0);
    }
}

/* e4m3 (versions 3.5, 3.7 and 3.11): on 9.0 the five configurations of
 * 128-row tiles of 128, 192 and 224 keys and the two 192-row tiles of 128
 * keys (16 warps: three consumer warpgroups); pad 1, plain, each within a
 * block's shared memory (V^T's partial 128-key chunk counted whole); none
 * before 9.0. The 8k anchor's grids are many waves: each also persistent
 * (version 3.28), right after it. */
static void sm90a_e4m3_configs_should_fit(void)
{
    attn_shape s = {2, 16, 16, 8192, 8192, 128, ATTN_E4M3, 0};
    attn_tactic t[64];
    int n = cuda_fused_tactics(&s, 9, 0, t, 64), by_width[3] = {0, 0, 0}, tall = 0;
    CHECK_EQ_INT(n, 14);
    for (int i = 0; i < n; i++) {
        if (t[i].persist) {
            attn_tactic plain = t[i];
            plain.persist = 0;
            CHECK_MSG(t[i].persist == 1 && i > 0 && memcmp(&t[i - 1], &plain, sizeof plain) == 0,
                      "e4m3 tactic %d: persist=%d not after its plain form", i, t[i].persist);
            continue;
        }
        size_t smem = SM90_SMEM_E4M3(128, t[i].tile_m, t[i].tile_n, t[i].stages);
        CHECK_MSG(smem + sm90a_static_smem(t[i].stages) <= limit(90), "e4m3 tile %dx%d stages %d: %zu B", t[i].tile_m, t[i].tile_n,
                  t[i].stages, smem);
        CHECK(t[i].arch == ATTN_ARCH_SM90A && t[i].pad == 1 && t[i].fold == 0 && t[i].splits == 0);
        CHECK_MSG(t[i].warps == 4 + t[i].tile_m / 16, "tile %dx%d: %d warps", t[i].tile_m, t[i].tile_n, t[i].warps);
        if (t[i].tile_m == 192) {
            tall++;
            CHECK(t[i].tile_n == 128);
            continue;
        }
        CHECK(t[i].tile_m == 128);
        by_width[t[i].tile_n == 128 ? 0 : t[i].tile_n == 192 ? 1 : t[i].tile_n == 224 ? 2 : 0] +=
            t[i].tile_n == 128 || t[i].tile_n == 192 || t[i].tile_n == 224;
    }
    CHECK(by_width[0] == 2 && by_width[1] == 2 && by_width[2] == 1);
    CHECK_EQ_INT(tall, 2);
    CHECK(SM90_SMEM_E4M3(128, 192, 128, 3) == 24576 + 3 * (128 * 128 + 128 * 128) + 49152 + 1024);
    /* the V^T chunks: 128 keys one chunk, 192 and 224 two */
    CHECK_EQ_INT(SM90_E4M3_VT_CHUNKS(128), 1);
    CHECK_EQ_INT(SM90_E4M3_VT_CHUNKS(224), 2);
    CHECK(SM90_SMEM_E4M3(128, 128, 224, 2) == 16384 + 2 * (224 * 128 + 2 * 128 * 128) + 32768 + 1024);
    n = cuda_fused_tactics(&s, 8, 9, t, 64);
    CHECK_EQ_INT(n, 0);
}

/* Version 3.12's cut of a partly empty last wave (cuda_fused_configs.h):
 * the 8k d128 anchors' grids on 132 SMs, and where it must not cut. */
static void sm90a_tail_cut_should_shorten_only_partial_last_waves(void)
{
    /* 1376 blocks of 192 rows: 10 waves and 56 blocks; cut in 2, 10.5 */
    CHECK_EQ_INT(sm90_tail_k(1376, 64, 132), 2);
    CHECK(fabs(sm90_tail_waves(1376, 132, 2) - 10.5) < 1e-12);
    CHECK(fabs(sm90_tail_waves(1376, 132, 0) - 11.0) < 1e-12);
    /* 2048 of 128 rows: 15 waves and 68; 2 pieces each would still take a
     * whole wave (136 > 132), 3 take two thirds, 4 three quarters */
    CHECK_EQ_INT(sm90_tail_k(2048, 64, 132), 3);
    CHECK(fabs(sm90_tail_waves(2048, 132, 3) - (15.0 + 2.0 / 3.0)) < 1e-12);
    CHECK(fabs(sm90_tail_waves(2048, 132, 2) - 16.0) < 1e-12);
    /* whole waves, or no full wave before the last (key splits serve
     * those), or too few key tiles to cut */
    CHECK_EQ_INT(sm90_tail_k(1320, 64, 132), 0);
    CHECK_EQ_INT(sm90_tail_k(100, 64, 132), 0);
    CHECK_EQ_INT(sm90_tail_k(132, 64, 132), 0);
    CHECK_EQ_INT(sm90_tail_k(1376, 7, 132), 0);
    /* a cut that saves under SM90_TAIL_MIN_SAVED key tiles: 136 blocks,
     * 4 in the last wave, 8 tiles: 2 pieces of 4 save half of 8 */
    CHECK_EQ_INT(sm90_tail_k(136, 8, 132), 0);
    /* the grids it applies to (sm90_tail_cut, the launch's and the cost
     * descriptor's rule): b2.hq16.sq8192.skv8192 at 192x128 cut in 2;
     * causal, folded and split tactics, and no tile, never */
    CHECK_EQ_INT(sm90_tail_cut(0, 0, 0, 192, 128, 2, 16, 8192, 8192), 2);
    CHECK_EQ_INT(sm90_tail_cut(0, 0, 1, 192, 128, 2, 16, 8192, 8192), 2); /* splits=1: one range */
    CHECK_EQ_INT(sm90_tail_cut(1, 0, 0, 192, 128, 2, 16, 8192, 8192), 0);
    CHECK_EQ_INT(sm90_tail_cut(0, 1, 0, 192, 128, 2, 16, 8192, 8192), 0);
    CHECK_EQ_INT(sm90_tail_cut(0, 0, 2, 192, 128, 2, 16, 8192, 8192), 0);
    CHECK_EQ_INT(sm90_tail_cut(0, 0, 0, 0, 128, 2, 16, 8192, 8192), 0);
    CHECK_EQ_INT(sm90_tail_k(136, 16, 132), 4);
    /* a nearly full last wave: no k under SM90_TAIL_MAX_K helps */
    CHECK_EQ_INT(sm90_tail_k(263, 64, 132), 0);
    /* every k it gives is in range, keeps SM90_TAIL_MIN_TILES tiles a
     * piece and shortens the grid */
    for (long long b = 1; b < 2000; b += 7)
        for (long long kt = 1; kt < 70; kt += 5) {
            int k = sm90_tail_k(b, kt, 132);
            if (k == 0)
                continue;
            CHECK(k >= 2 && k <= SM90_TAIL_MAX_K && kt / k >= SM90_TAIL_MIN_TILES);
            CHECK(sm90_tail_waves(b, 132, k) < sm90_tail_waves(b, 132, 0));
        }
}

/* 16-bit 192x128 tiles at d = 128 (version 3.11): plain (never folded or
 * split) at every pad, 16 warps, within a block's shared memory (no P
 * buffer in the default turn order); d = 64's 192-row tile (version 3.3)
 * too. */
static void sm90a_192_row_tiles_should_be_listed_plain(void)
{
    for (int64_t d = 64; d <= 128; d += 64) {
        attn_shape s = {1, 8, 2, 4096, 4096, d, ATTN_BF16, 0};
        attn_tactic t[256];
        int n = cuda_fused_tactics(&s, 9, 0, t, 256), tall = 0;
        for (int i = 0; i < n; i++) {
            if (t[i].arch != ATTN_ARCH_SM90A || t[i].tile_m != 192 || t[i].persist)
                continue;
            tall++;
            CHECK(t[i].tile_n == 128 && t[i].warps == 16);
            size_t smem = SM90_SMEM(d, 192, 128, t[i].stages);
            CHECK_MSG(smem + sm90a_static_smem(t[i].stages) <= limit(90), "d %lld 192x128: %zu B",
                      (long long)d, smem);
            if (d == 128)
                CHECK(t[i].fold == 0 && t[i].splits == 0 && t[i].stages == 2);
        }
        if (d == 128) {
            CHECK_MSG(tall == ATTN_NPADS, "d 128: %d tactics of 192 rows", tall);
            /* turn order 0 keeps P in registers: no P buffer reserved
             * (the orders with P in shared memory, taken out, added
             * 192 x 128 x 2 bytes) */
            CHECK(SM90_SMEM(128, 192, 128, 2) == 49152 + 2 * 2 * 32768 + 1024);
        } else {
            CHECK_MSG(tall > 0, "d 64: %d tactics of 192 rows", tall);
        }
    }
}
#endif

/* Version 3.28: a 16-bit configuration is also listed persistent
 * (persist=1) exactly where its unsplit grid is more than one wave of an
 * H200 (> 132 blocks): plain, and folded unsplit where the fold applies;
 * never with key splits. A persistent tactic's workspace holds a 256-byte
 * counter after the rest (256-byte aligned); launching one with splits is
 * unsupported. */
static void sm90a_persist_should_be_listed_for_many_waves_only(void)
{
    /* b4.hq32.hkv8.sq2048: 128-row tiles 4 x 32 x 16 = 2048 blocks, folded
     * 4 x 8 x 64 = 2048; one head of 1024 queries: 8 blocks */
    attn_shape many = {4, 32, 8, 2048, 2048, 128, ATTN_BF16, 1};
    attn_shape one = {1, 8, 2, 1024, 1024, 128, ATTN_BF16, 1};
    attn_tactic t[256];
    int n = cuda_fused_tactics(&many, 9, 0, t, 256), plain = 0, pplain = 0, fold = 0, pfold = 0;
    for (int i = 0; i < n; i++) {
        if (t[i].arch != ATTN_ARCH_SM90A)
            continue;
        CHECK(!(t[i].persist && t[i].splits > 1));
        if (t[i].splits > 1)
            continue;
        int *count = t[i].fold ? (t[i].persist ? &pfold : &fold) : (t[i].persist ? &pplain : &plain);
        (*count)++;
        if (t[i].persist) {
            char name[ATTN_TACTIC_STR_MAX];
            attn_tactic_str(&t[i], name, sizeof name);
            CHECK_MSG(strstr(name, "/persist=1/") != NULL, "%s", name);
            attn_tactic back;
            CHECK_EQ_INT(attn_tactic_parse(name, &back, NULL, 0), 0);
            CHECK_EQ_INT(back.persist, 1);
            size_t ws = cuda_fused_workspace_bytes(&many, &t[i]);
            attn_tactic p0 = t[i];
            p0.persist = 0;
            size_t ws0 = cuda_fused_workspace_bytes(&many, &p0);
            CHECK_MSG(ws == (ws0 + 255) / 256 * 256 + 256, "%s: %zu bytes, %zu without", name, ws, ws0);
        }
    }
    /* d128: 128x128, 128x176, 192x128 plain; 128x128 folded; 4 pads each */
    CHECK_EQ_INT(plain, 3 * ATTN_NPADS);
    CHECK_EQ_INT(pplain, plain);
    CHECK_EQ_INT(fold, ATTN_NPADS);
    CHECK_EQ_INT(pfold, fold);
    n = cuda_fused_tactics(&one, 9, 0, t, 256);
    CHECK(n > 0);
    for (int i = 0; i < n; i++)
        CHECK(t[i].persist == 0);
    /* the rule at its edge, d64's 128-row tiles: b1.hq33.sq512 is 132
     * blocks, one wave; hq34, 136 blocks (its 192-row tiles: 102) */
    attn_shape edge = {1, 33, 33, 512, 512, 64, ATTN_F16, 0};
    int p132 = 0, p136 = 0;
    n = cuda_fused_tactics(&edge, 9, 0, t, 256);
    for (int i = 0; i < n; i++)
        p132 += t[i].persist && t[i].tile_m == 128;
    edge.hq = edge.hkv = 34;
    n = cuda_fused_tactics(&edge, 9, 0, t, 256);
    for (int i = 0; i < n; i++)
        p136 += t[i].persist && t[i].tile_m == 128;
    CHECK_EQ_INT(p132, 0);
    CHECK_EQ_INT(p136, ATTN_NPADS);
    /* gpu_fused's persistent GQA shapes (tests/gpu/test_fused.c) list a
     * folded persistent tactic at each head dim kernel */
    const attn_shape gqa[] = {{2, 32, 8, 600, 900, 128, ATTN_F16, 0},
                              {1, 16, 2, 1100, 1100, 64, ATTN_BF16, 1},
                              {1, 24, 3, 720, 700, 256, ATTN_F16, 1}};
    for (int k = 0; k < 3; k++) {
        int pf = 0;
        n = cuda_fused_tactics(&gqa[k], 9, 0, t, 256);
        for (int i = 0; i < n; i++)
            pf += t[i].persist && t[i].fold;
        CHECK_MSG(pf == ATTN_NPADS, "gpu_fused's GQA shape %d: %d persistent folded tactics", k, pf);
    }
}

/* Version 3.31: the causal order visits every (unit, row block) once,
 * chunk after chunk, each chunk's row blocks longest first (mb from the
 * last down), and its last chunk, merged, runs to the last unit. */
static void sm90a_causal_order_should_visit_each_item_once_longest_first(void)
{
    static int seen[48 * 40];
    int cases = 0, bad = 0;
    for (int units = 1; units <= 48; units += 5)
        for (int nrb = 1; nrb <= 40; nrb += 3)
            for (int chunk = 1; chunk <= units; chunk += 2)
                for (int merge = 0; merge < 2; merge++) {
                    /* units of 1 MB, a 24 MB cap (three 8 MB budgets): merges up to 24 units */
                    const int clast = sm90_causal_clast(units, nrb, chunk, 1 << 20, merge ? 24 << 20 : 0);
                    const int n = units * nrb;
                    memset(seen, 0, sizeof seen);
                    int pc = 0, pmb = nrb, pu = -1;
                    for (int x = 0; x < n; x++) {
                        int u = -1, mb = -1;
                        sm90_causal_item(x, chunk, clast, units, nrb, &u, &mb);
                        if (u < 0 || u >= units || mb < 0 || mb >= nrb) {
                            bad++;
                            continue;
                        }
                        seen[u * nrb + mb]++;
                        const int c = u / chunk < clast ? u / chunk : clast;
                        if (c < pc || (c == pc && mb > pmb) || (c == pc && mb == pmb && u <= pu))
                            bad++; /* out of order within or across chunks */
                        pc = c, pmb = mb, pu = u;
                    }
                    for (int i = 0; i < n; i++)
                        bad += seen[i] != 1;
                    cases++;
                }
    CHECK_EQ_INT(bad, 0);
    CHECK(cases > 1000);

    /* The 8k causal anchor (b2.hq16.hkv16.sq8192 d128: 32 heads of 4 MB
     * of K/V, chunks of 2 in 8 MB). 192-row tiles, 43 row blocks: the last
     * 2 heads are 86 items, under two waves of 132; 8 heads would be 32 MB,
     * past three budgets, so the last chunk takes 6 heads (258 items). */
    CHECK_EQ_INT(sm90_causal_clast(32, 43, 2, 4 << 20, 0), 15);
    CHECK_EQ_INT(sm90_causal_clast(32, 43, 2, 4 << 20, 24 << 20), 13);
    /* 128-row tiles, 64 row blocks: 128 and 256 items are short, 384 not */
    CHECK_EQ_INT(sm90_causal_clast(32, 64, 2, 4 << 20, 24 << 20), 13);
    /* b1.hq40.hkv40.sq2048 d128 128x128: chunks of 8 heads of 1 MB, 16 row
     * blocks: 128, 256, then 384 items in the last 24 heads */
    CHECK_EQ_INT(sm90_causal_clast(40, 16, 8, 1 << 20, 24 << 20), 2);
    /* a last chunk of exactly two waves (2 x 132 items): no merge */
    CHECK_EQ_INT(sm90_causal_clast(34, 132, 32, 1, 24 << 20), 1);
    /* one item short of two waves: merged */
    CHECK_EQ_INT(sm90_causal_clast(34, 131, 32, 1, 24 << 20), 0);
    /* a last chunk of two waves already: no merge */
    CHECK_EQ_INT(sm90_causal_clast(64, 16, 32, 1 << 18, 24 << 20), 1);
    /* no budget (ATTUNE_SM90_CHUNK_MB=0): one unit a chunk, none merged */
    CHECK_EQ_INT(sm90_causal_clast(32, 64, 1, 4 << 20, 0), 31);
    /* a 32 MB cap (ATTUNE_SM90_TAIL_MERGE=32): the anchor's 192-row
     * tiles take 8 heads, 344 items */
    CHECK_EQ_INT(sm90_causal_clast(32, 43, 2, 4 << 20, 32 << 20), 12);
    /* b1.hq24.hkv24.sq2048.skv2500 d64 (gpu_fused's): chunks of 13 heads of
     * 625 KB, then 11 (176 items): merged into one */
    CHECK_EQ_INT(sm90_causal_clast(24, 16, 13, 640000, 24 << 20), 0);
    /* one chunk, degenerate input */
    CHECK_EQ_INT(sm90_causal_clast(5, 4, 8, 1, 24 << 20), 0);
    CHECK_EQ_INT(sm90_causal_clast(0, 4, 1, 1, 24 << 20), 0);
}

/* Version 1.2 (FUSED_CAUSAL_ORDER, cuda_fused.cu): the same rule over a
 * device's resident blocks (slots), and one unit a chunk, none merged, is
 * version 1's own order (head after head, each head's last row block
 * first), so an empty budget gives the order the switch replaces. */
static void fused_causal_order_should_follow_the_slots(void)
{
    /* Orin-like: 32 slots, a 4 MB L2 (budget 4 MB / 6, cap four budgets,
     * as fused_causal_order computes them); b1.hq8 sq2048 d128, 64-row
     * tiles: 32 row blocks of 1 MB heads, one a chunk. The last head's 32
     * items are under two waves (64), and two heads fit the cap: merged
     * once. */
    const long long orin_cap = 4 * ((4LL << 20) / 6);
    CHECK_EQ_INT(fused_causal_clast(8, 32, 1, 1 << 20, orin_cap, 32), 6);
    /* 264 slots (132 SMs x 2): still under two waves, but three heads
     * (3 MB) are past the cap */
    CHECK_EQ_INT(fused_causal_clast(8, 32, 1, 1 << 20, orin_cap, 264), 6);
    /* a cap of the whole grid (8 MB): one chunk on 264 slots */
    CHECK_EQ_INT(fused_causal_clast(8, 32, 1, 1 << 20, 8 << 20, 264), 0);
    /* and on 32 slots the last chunk stops at two waves (64 items) */
    CHECK_EQ_INT(fused_causal_clast(8, 32, 1, 1 << 20, 8 << 20, 32), 6);
    /* sm90a's rule is this one on SM90_TAIL_SMS slots (a guard on the
     * wrapper, which calls it) */
    for (int units = 1; units <= 40; units += 3)
        for (int nrb = 1; nrb <= 70; nrb += 7)
            CHECK_EQ_INT(sm90_causal_clast(units, nrb, 2, 1 << 20, 24 << 20),
                         fused_causal_clast(units, nrb, 2, 1 << 20, 24 << 20, SM90_TAIL_SMS));
    /* chunks of one, no cap: x -> (x / nrb, nrb - 1 - x % nrb) */
    int bad = 0;
    for (int units = 1; units <= 20; units += 3)
        for (int nrb = 1; nrb <= 30; nrb += 4) {
            const int clast = fused_causal_clast(units, nrb, 1, 1 << 20, 0, 32);
            for (int x = 0; x < units * nrb; x++) {
                int u = -1, mb = -1;
                sm90_causal_item(x, 1, clast, units, nrb, &u, &mb);
                bad += u != x / nrb || mb != nrb - 1 - x % nrb;
            }
        }
    CHECK_EQ_INT(bad, 0);
}

int main(void)
{
    RUN(sm90a_causal_order_should_visit_each_item_once_longest_first);
    RUN(fused_causal_order_should_follow_the_slots);
#ifdef ATTUNE_HAVE_SM90A
    RUN(sm90a_wide_tiles_should_be_listed_plain);
    RUN(sm90a_e4m3_configs_should_fit);
    RUN(sm90a_192_row_tiles_should_be_listed_plain);
    RUN(sm90a_tail_cut_should_shorten_only_partial_last_waves);
    RUN(sm90a_persist_should_be_listed_for_many_waves_only);
#endif
    RUN(every_listed_config_should_fit_its_architecture);
    RUN(f32_configs_should_fit_their_architecture);
    RUN(h200_should_keep_every_configuration);
    RUN(bulk_configs_should_start_at_hopper);
    RUN(orin_and_thor_should_lose_what_spills_or_does_not_fit);
    return test_summary();
}
#endif
