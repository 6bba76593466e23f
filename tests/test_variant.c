/* test_variant.c -- the table of kernel families (kernels/variant.h): one
 * name and colour per variant, tactics owned by the right family per
 * backend, what each descriptor says a tactic costs, the SM limits, and a
 * toy variant added by one descriptor that the CPU backend, the tactic
 * text, variant sets, the variants list and the prediction model know. */
#include <math.h>

#include "kernels/cpu/cpu_internal.h"
#include "kernels/variant.h"
#include "test.h"
#include "tuner/predict.h"
#include "tuner/variant_set.h"
#include "tuner/variants_json.h"

static attn_tactic tac(const char *s)
{
    attn_tactic t;
    if (attn_tactic_parse(s, &t, NULL, 0) != 0) {
        fprintf(stderr, "bad tactic %s\n", s);
        exit(2);
    }
    return t;
}

static attn_shape shp(int64_t b, int64_t hq, int64_t hkv, int64_t sq, int64_t skv, int64_t d,
                      attn_dtype t, int causal)
{
    attn_shape s = {b, hq, hkv, sq, skv, d, t, causal};
    return s;
}

static attn_device_info h200(void)
{
    attn_device_info d;
    memset(&d, 0, sizeof d);
    snprintf(d.kind, sizeof d.kind, "cuda");
    snprintf(d.name, sizeof d.name, "NVIDIA H200");
    d.cc_major = 9;
    d.sm_count = 132;
    return d;
}

/* ---- the table */

static void table_should_give_each_variant_one_name_and_colour(void)
{
    int n;
    const attn_variant_desc *const *f = attn_families(&n);
    CHECK(n >= 11);
    for (int i = 0; i < n; i++) {
        CHECK_MSG(f[i]->name && f[i]->family && f[i]->backend && f[i]->summary && f[i]->params &&
                      f[i]->owns && f[i]->describe,
                  "family %d has a field missing", i);
        CHECK_MSG(f[i]->color != NULL && f[i]->color[0] == '#' && strlen(f[i]->color) == 7,
                  "%s: colour '%s'", f[i]->family, f[i]->color);
        attn_variant v;
        CHECK_EQ_INT(attn_variant_parse(f[i]->name, &v), 0);
        CHECK_EQ_INT((int)v, (int)f[i]->variant);
        for (int j = 0; j < i; j++)
            if (f[j]->variant == f[i]->variant) {
                CHECK_STR(f[j]->name, f[i]->name);
                CHECK_STR(f[j]->color, f[i]->color);
            }
    }
    static const char *const names[] = {"fused", "fused_splitkv", "split", "split_repeat",
                                        "folded", "cudnn"};
    for (int v = 0; v < ATTN_NVARIANTS; v++)
        CHECK_STR(attn_variant_name((attn_variant)v), names[v]);
    CHECK_STR(attn_variant_name((attn_variant)(ATTN_MAX_VARIANTS - 1)), "?");
    attn_variant v;
    CHECK_EQ_INT(attn_variant_parse("toy", &v), ATTUNE_EINVAL);
}

/* family text of t on backend, "" when none owns it */
static const char *family(const char *tactic, const char *backend)
{
    attn_tactic t = tac(tactic);
    const attn_variant_desc *f = attn_family_of(&t, backend);
    return f != NULL ? f->family : "";
}

static void families_should_own_their_tactics(void)
{
    CHECK_STR(family("fused/pad=8", "cpu"), "fused");
    CHECK_STR(family("fused/pad=8", "cuda"), "");
    CHECK_STR(family("split/acc=f32/pad=1", "cpu"), "split");
    CHECK_STR(family("split/acc=f16/pad=1", "cpu"), ""); /* CPU arithmetic is fp32 */
    CHECK_STR(family("split/acc=f16/pad=1", "cuda"), "split");
    CHECK_STR(family("fused/pad=1/tile=128x64/warps=4", "cuda"), "fused");
    CHECK_STR(family("fused/pad=1/tile=128x64/warps=4", "cpu"), "");
    CHECK_STR(family("fused/arch=sm90a/pad=1/stages=2/tile=128x128/warps=12", "cuda"),
              "fused/arch=sm90a");
    CHECK_STR(family("fused_splitkv/pad=1/splits=4/tile=16x64/warps=4", "cuda"), "fused_splitkv");
    /* acc=f32 on fused: the FP32 kernel, not the 16-bit tiles; not the CPU's */
    CHECK_STR(family("fused/acc=f32/pad=1/tile=64x64/warps=4", "cuda"), "fused/acc=f32");
    CHECK_STR(family("fused/acc=f32/pad=1/tile=64x64/warps=4", "cpu"), "");
    CHECK_STR(family("fused/acc=f32/pad=1", "cuda"), ""); /* no tile */
    CHECK_STR(family("fused/acc=f16/pad=1/tile=64x64/warps=4", "cuda"), "");
    CHECK_STR(family("fused_splitkv/pad=1/splits=4/tile=16x64/warps=4", "cpu"), "");
    CHECK_STR(family("cudnn/eng=9/graph=sdpa/kcfg=7/pad=1", "cuda"), "cudnn");
    CHECK_STR(family("cudnn/eng=9/graph=sdpa/kcfg=7/pad=1", NULL), "cudnn");
}

/* The CPU families always run here; the CUDA ones only in a CUDA build
 * (cudnn also needs cuDNN): the rest are described, not built. */
static void families_should_be_built_with_their_backend(void)
{
    int n;
    const attn_variant_desc *const *f = attn_families(&n);
    for (int i = 0; i < n; i++) {
        int want = strcmp(f[i]->backend, "cpu") == 0;
#ifdef ATTUNE_HAVE_CUDA
        want |= strcmp(f[i]->backend, "cuda") == 0 && f[i]->variant != ATTN_CUDNN;
#ifdef ATTUNE_HAVE_CUDNN
        want |= f[i]->variant == ATTN_CUDNN;
#endif
#endif
        CHECK_MSG((f[i]->kernel != NULL) == want, "%s on %s: kernel ops %s", f[i]->family,
                  f[i]->backend, f[i]->kernel != NULL ? "built" : "absent");
        if (f[i]->kernel != NULL)
            CHECK(f[i]->kernel->list != NULL && f[i]->kernel->plan != NULL &&
                  f[i]->kernel->run != NULL && f[i]->kernel->free != NULL);
    }
}

static void cpu_listing_should_be_the_tables(void)
{
    attn_shape s = shp(1, 8, 2, 50, 100, 64, ATTN_F16, 0);
    attn_tactic a[64], b[64];
    int na = attn_cpu_ops.tactics(0, &s, a, 64);
    attn_device_info cpu = {.kind = "cpu", .index = -1};
    int nb = attn_family_list("cpu", &cpu, &s, b, 64);
    CHECK_EQ_INT(na, 16); /* fused, split, split_repeat, folded x 4 pads */
    CHECK_EQ_INT(nb, na);
    CHECK(memcmp(a, b, sizeof a[0] * (size_t)na) == 0);
    for (int i = 0; i < na; i++)
        CHECK(attn_family_of(&a[i], "cpu") != NULL);
}

/* ---- what the descriptors say */

static attn_cost describe(const char *tactic, const attn_shape *s, const attn_device_info *dev,
                          unsigned hints)
{
    attn_cost c;
    attn_tactic t = tac(tactic);
    attn_describe(s, &t, dev, hints, &c);
    return c;
}

static void fused_tiles_should_describe_their_grid(void)
{
    attn_device_info dev = h200();
    /* d = 40 runs the d = 64 kernel; 100 rows in 128-row tiles */
    attn_shape s = shp(2, 8, 8, 100, 77, 40, ATTN_F16, 0);
    attn_cost c = describe("fused/pad=1/tile=128x64/warps=4", &s, &dev, 0);
    CHECK_EQ_INT((int)c.head_dim, 64);
    CHECK_NEAR(c.rows, 128, 0);
    CHECK_NEAR(c.keys, 128 + 128, 0); /* 77 keys in two tiles, and the block's Q in, O out */
    CHECK_NEAR(c.blocks, 2 * 8 * 1, 0);
    CHECK_EQ_INT(c.quantized, 1);
    CHECK_EQ_INT(c.threads, 128);
    /* (128 + 2 stages x 2 x 64) rows of 2 x 64 + 16 bytes: FUSED_SMEM */
    CHECK_NEAR(c.smem, (128 + 2 * 2 * 64) * 144, 0);
    /* 128 threads x 232 registers: 2 blocks of the 64 K registers */
    CHECK_NEAR(c.blocks_sm, 2, 0);
    CHECK_NEAR(c.waves, 1, 0);
    CHECK_EQ_INT(c.launches, 1);
    CHECK_EQ_INT(c.copies, 0);
    /* no device: no grid model, one launch */
    c = describe("fused/pad=1/tile=128x64/warps=4", &s, NULL, 0);
    CHECK_NEAR(c.blocks_sm, 0, 0);
    CHECK_NEAR(c.waves, 0, 0);
    /* a pad that changes both lengths: four copies on the GPU */
    c = describe("fused/pad=8/tile=128x64/warps=4", &s, &dev, 0);
    CHECK_EQ_INT(c.copies, 4);
    CHECK_NEAR(c.copy_bytes, 4.0 * 2 * (2 * 8 * 100 * 40 + 2 * 8 * 77 * 40), 0);
    /* four key groups (version 1.1): 16 warps on 64 rows, each warp still
     * 16 rows x (64 keys + 32 columns) of accumulators: 40 + 1.5 x 48 =
     * 112 registers (ptxas 105-128), so 512 threads take one block an SM;
     * counted as 4 rows a warp it was 58 registers and two blocks */
    attn_shape s32 = shp(1, 8, 8, 900, 900, 32, ATTN_F16, 0);
    c = describe("fused/pad=1/tile=64x64/warps=16", &s32, &dev, 0);
    CHECK_EQ_INT(c.threads, 512);
    CHECK_NEAR(c.regs, 112, 0);
    CHECK_NEAR(c.blocks_sm, 1, 0);
    CHECK_NEAR(c.blocks, 8 * 15, 0);
}

static void fused_f32_should_describe_its_tiles(void)
{
    attn_device_info dev = h200();
    /* d = 40 runs the d = 64 kernel; 100 rows in 64-row tiles; 77 keys in
     * two 64-key tiles, plus the block's Q in and O out (64 keys) */
    attn_shape s = shp(2, 8, 2, 100, 77, 40, ATTN_F32, 1);
    attn_cost c = describe("fused/acc=f32/pad=1/tile=64x64/warps=4", &s, &dev, 0);
    attn_tactic t = tac("fused/acc=f32/pad=1/tile=64x64/warps=4");
    CHECK_EQ_INT(attn_describe(&s, &t, &dev, 0, &c), 0);
    CHECK_EQ_INT((int)c.head_dim, 64);
    CHECK_NEAR(c.rows, 128, 0);
    CHECK_NEAR(c.keys, 128 + 64, 0);
    CHECK_NEAR(c.blocks, 2 * 8 * 2, 0);
    CHECK_EQ_INT(c.threads, 128);
    CHECK_EQ_INT(c.longest_first, 1);
    CHECK_EQ_INT(c.causal_skip, 1);
    /* Q, K, V rows of 64 + 4 floats, P 64 rows of 64 + 8 (cuda_fused_f32.h) */
    CHECK_NEAR(c.smem, ((64 + 2 * 64) * 68 + 64 * 72) * 4, 0);
    CHECK_NEAR(c.blocks_sm, 3, 0); /* 228 KB / 69 KB */
    CHECK_EQ_INT(c.launches, 1);
    CHECK_EQ_INT(c.copies, 0);
    /* f16 data, a pad, a tile not built at this head dim: described, refused */
    s.dtype = ATTN_F16;
    CHECK_EQ_INT(attn_describe(&s, &t, &dev, 0, &c), ATTUNE_EUNSUPP);
    s.dtype = ATTN_F32;
    t = tac("fused/acc=f32/pad=8/tile=64x64/warps=4");
    CHECK_EQ_INT(attn_describe(&s, &t, &dev, 0, &c), ATTUNE_EUNSUPP);
    t = tac("fused/acc=f32/pad=1/tile=64x32/warps=4"); /* a d = 128 tile */
    CHECK_EQ_INT(attn_describe(&s, &t, &dev, 0, &c), ATTUNE_EUNSUPP);
    s.d = 128;
    CHECK_EQ_INT(attn_describe(&s, &t, &dev, 0, &c), 0);
    CHECK_EQ_INT((int)c.head_dim, 128);
    s.d = 300;
    CHECK_EQ_INT(attn_describe(&s, &t, &dev, 0, &c), ATTUNE_EUNSUPP);
}

static void sm90a_fold_should_fill_its_rows_with_the_group(void)
{
    attn_device_info dev = h200();
    /* 16 queries of group 8: one 128-row block per KV head and split */
    attn_shape s = shp(1, 64, 8, 16, 8192, 128, ATTN_BF16, 0);
    attn_cost c =
        describe("fused/arch=sm90a/fold=1/pad=1/splits=4/stages=2/tile=128x128/warps=12", &s,
                 &dev, 0);
    CHECK_NEAR(c.rows, 16, 0);
    CHECK_NEAR(c.blocks, 8 * 1 * 4, 0);
    CHECK_EQ_INT(c.launches, 2); /* the splits' combine */
    CHECK_EQ_INT(c.longest_first, 1);
    CHECK_NEAR(c.smem, 128 * 128 * 2 + 2 * 2 * 128 * 128 * 2 + 1024, 0);
    /* unfolded: 128-row tiles of each query head */
    c = describe("fused/arch=sm90a/pad=1/stages=2/tile=128x128/warps=12", &s, &dev, 0);
    CHECK_NEAR(c.rows, 128, 0);
    CHECK_NEAR(c.blocks, 64, 0);
    CHECK_EQ_INT((int)c.head_dim, 128);
}

/* Version 3.12's cut of the last wave, as the launch makes it: the 8k
 * d128 anchors' 192x128 grid (32 heads x 43 row tiles = 1376 blocks, 10
 * waves and 56 blocks on 132 SMs) cut in 2 is 10.5 waves and a combine;
 * causal, folded and split grids are not cut. */
static void sm90a_cost_should_count_the_cut_last_wave(void)
{
    attn_device_info dev = h200();
    attn_shape s = shp(2, 16, 16, 8192, 8192, 128, ATTN_BF16, 0);
    const char *t = "fused/arch=sm90a/pad=1/stages=2/tile=192x128/warps=16";
    attn_cost c = describe(t, &s, &dev, 0);
    CHECK_NEAR(c.blocks, 1376, 0);
    CHECK_NEAR(c.waves, 10.5, 1e-12);
    CHECK_EQ_INT(c.launches, 2);
    /* 128-row tiles: 2048 blocks, 15 waves and 68: cut in 3, 15 + 2/3 */
    c = describe("fused/arch=sm90a/pad=1/stages=2/tile=128x128/warps=12", &s, &dev, 0);
    CHECK_NEAR(c.waves, 15.0 + 2.0 / 3.0, 1e-12);
    s.causal = 1;
    c = describe(t, &s, &dev, 0);
    CHECK_NEAR(c.waves, 11, 0);
    CHECK_EQ_INT(c.launches, 1);
    /* e4m3: its V^T pass, the kernel and the combine */
    s.causal = 0;
    s.dtype = ATTN_E4M3;
    c = describe("fused/arch=sm90a/pad=1/stages=2/tile=192x128/warps=16", &s, &dev, 0);
    CHECK_NEAR(c.waves, 10.5, 1e-12);
    CHECK_EQ_INT(c.launches, 3);
    /* a whole number of waves has nothing to cut: 4 x 33 = 132 blocks */
    attn_shape w = shp(1, 4, 4, 33 * 128, 33 * 128, 128, ATTN_BF16, 0);
    c = describe("fused/arch=sm90a/pad=1/stages=2/tile=128x128/warps=12", &w, &dev, 0);
    CHECK_NEAR(c.waves, 1, 0);
    CHECK_EQ_INT(c.launches, 1);
}

/* Version 3.28's persistent grid (persist=1): the same grid and waves as
 * the plain tactic, its blocks' fixed cost paid once however many waves
 * (a queued plain block pays it SM90_FIXED_QUEUED = 2 times), one launch
 * more (its counter's memset); with key splits it does not run; no other
 * family owns persist=1. */
static void sm90a_persist_should_pay_the_fixed_cost_once(void)
{
    attn_device_info dev = h200();
    attn_shape s = shp(4, 32, 8, 2048, 2048, 128, ATTN_BF16, 1); /* 2048 blocks of 128 rows */
    attn_cost c = describe("fused/arch=sm90a/pad=1/stages=2/tile=128x128/warps=12", &s, &dev, 0);
    attn_cost p = describe("fused/arch=sm90a/pad=1/persist=1/stages=2/tile=128x128/warps=12", &s, &dev, 0);
    CHECK_NEAR(p.blocks, c.blocks, 0);
    CHECK_NEAR(p.waves, c.waves, 0);
    CHECK(c.waves > 1);
    CHECK_NEAR(c.block_keys, 2.0 * 128, 0);
    CHECK_NEAR(p.block_keys, 128, 0);
    CHECK_NEAR(c.keys - p.keys, 128, 0);
    CHECK_EQ_INT(p.launches, c.launches + 1);
    attn_tactic t = tac("fused/arch=sm90a/fold=1/pad=1/persist=1/splits=2/stages=2/tile=128x128/warps=12");
    CHECK_EQ_INT(attn_describe(&s, &t, &dev, 0, &p), ATTUNE_EUNSUPP);
    /* the version 1 tile with persist=1 is no family's */
    t = tac("fused/pad=1/tile=64x64/warps=4");
    CHECK_EQ_INT(attn_describe(&s, &t, &dev, 0, &p), 0);
    t.persist = 1;
    CHECK(attn_describe(&s, &t, &dev, 0, &p) != 0);
}

static void splitkv_should_stream_at_its_blocks_share(void)
{
    attn_device_info dev = h200();
    /* group 16 decode: 16 folded rows of 8 KV heads, one split: 8 blocks */
    attn_shape s = shp(1, 128, 8, 1, 2048, 64, ATTN_F16, 0);
    attn_cost c = describe("fused_splitkv/pad=1/splits=1/tile=16x64/warps=4", &s, &dev, 0);
    CHECK_NEAR(c.blocks, 8, 0);
    CHECK_NEAR(c.byte_share, 8.0 / 66.0, 1e-12);
    CHECK_NEAR(c.flop_share, 8.0 / 132.0, 1e-12); /* 8 SMs of 132 compute */
    CHECK_EQ_INT(c.launches, 1);
    CHECK_EQ_INT(c.quantized, 0);
    CHECK_NEAR(c.rows, 1, 0); /* 16 rows of the group's 16 queries */
    c = describe("fused_splitkv/pad=1/splits=16/tile=16x64/warps=4", &s, &dev, 0);
    CHECK_NEAR(c.byte_share, 1, 0);
    CHECK_NEAR(c.flop_share, 128.0 / 132.0, 1e-12);
    CHECK_EQ_INT(c.launches, 2);
    CHECK_NEAR(c.keys, 2048 + 0.5 * 64 * 16, 0);
}

static void gemms_should_compute_the_whole_padded_matrix(void)
{
    attn_device_info dev = h200();
    attn_shape s = shp(1, 8, 1, 50, 1018, 256, ATTN_F16, 1);
    attn_cost c = describe("folded/acc=f32/pad=8", &s, &dev, 0);
    CHECK_EQ_INT(c.causal_skip, 0);
    CHECK_NEAR(c.rows, 56, 0);
    CHECK_NEAR(c.keys, 1024, 0);
    CHECK_EQ_INT(c.launches, 3);
    /* one matrix of 400 rows: 4 x 8 tiles, two GEMMs */
    CHECK_NEAR(c.waves, 2, 0);
    c = describe("folded/acc=f32/pad=8", &s, NULL, 0);
    CHECK_EQ_INT(c.launches, 1);
    /* the CPU's split: the same matrix, its workspace counted */
    attn_device_info cpu = {.kind = "cpu", .index = -1};
    c = describe("split/acc=f32/pad=8", &s, &cpu, 0);
    CHECK_EQ_INT(c.causal_skip, 0);
    CHECK_NEAR(c.rows, 56, 0);
    CHECK(c.work_bytes > 56.0 * 1024 * 4);
}

/* cuBLAS's GEMMs at a key count whose rows are not 16-byte aligned (pad
 * 1 on 1018 keys) run slower kernels: the descriptor says so in both
 * shares (desc_split.c, GEMM_UNALIGNED_SHARE); aligned keys, a pad that
 * aligns them, f32's 4-element alignment and a CPU are not charged. */
static void gemms_should_run_slower_on_unaligned_keys(void)
{
    attn_device_info dev = h200();
    attn_shape s = shp(1, 8, 1, 50, 1018, 256, ATTN_F16, 0);
    const char *tacs[3] = {"folded/acc=f32/pad=1", "split/acc=f16/pad=1", "split_repeat/acc=f32/pad=1"};
    for (int i = 0; i < 3; i++) {
        attn_cost c = describe(tacs[i], &s, &dev, 0);
        CHECK_MSG(c.flop_share > 0.6 && c.flop_share < 0.75, "%s: flop share %g", tacs[i], c.flop_share);
        CHECK_NEAR(c.byte_share, c.flop_share, 0);
    }
    attn_cost c = describe("folded/acc=f32/pad=8", &s, &dev, 0);
    CHECK_NEAR(c.flop_share, 1, 0);
    CHECK_NEAR(c.byte_share, 1, 0);
    s.skv = 1024;
    c = describe("folded/acc=f32/pad=1", &s, &dev, 0);
    CHECK_NEAR(c.flop_share, 1, 0);
    s = shp(1, 8, 8, 50, 1020, 64, ATTN_F32, 0); /* 1020 x 4 bytes: aligned */
    c = describe("split/acc=f32/pad=1", &s, &dev, 0);
    CHECK_NEAR(c.flop_share, 1, 0);
    s.skv = 1018;
    c = describe("split/acc=f32/pad=1", &s, &dev, 0);
    CHECK(c.flop_share < 0.75);
    attn_device_info cpu = {.kind = "cpu", .index = -1};
    c = describe("split/acc=f32/pad=1", &s, &cpu, 0);
    CHECK_NEAR(c.flop_share, 1, 0);
}

static void cudnn_should_tile_but_on_its_decode_engines(void)
{
    attn_device_info dev = h200();
    attn_shape s = shp(1, 32, 32, 2048, 2048, 80, ATTN_F16, 1);
    attn_cost c = describe("cudnn/eng=2/graph=sdpa/kcfg=0/pad=1", &s, &dev, 0);
    CHECK_EQ_INT((int)c.head_dim, 128); /* causal 64 < d < 128 runs as 128 */
    s.causal = 0;
    c = describe("cudnn/eng=2/graph=sdpa/kcfg=0/pad=1", &s, &dev, 0);
    CHECK_EQ_INT((int)c.head_dim, 80);
    s.d = 32;
    c = describe("cudnn/eng=2/graph=sdpa/kcfg=0/pad=1", &s, &dev, 0);
    CHECK_EQ_INT((int)c.head_dim, 64);
    attn_shape dec = shp(1, 32, 32, 1, 4096, 128, ATTN_BF16, 0);
    c = describe("cudnn/eng=8/graph=sdpa/kcfg=36/pad=1", &dec, &dev, 0);
    CHECK_NEAR(c.rows, 128, 0); /* a prefill engine on a decode step */
    CHECK_EQ_INT(c.quantized, 1);
    c = describe("cudnn/eng=8/graph=sdpa/kcfg=36/pad=1", &dec, &dev, ATTN_HINT_DECODE);
    CHECK_NEAR(c.rows, 1, 0); /* a decode engine splits the keys */
    CHECK_EQ_INT(c.quantized, 0);
    CHECK_NEAR(c.waves, 0, 0);
}

static void unknown_tactics_should_get_the_plain_description(void)
{
    attn_tactic t = {0};
    t.variant = (attn_variant)(ATTN_MAX_VARIANTS - 1);
    t.pad = 8;
    attn_shape s = shp(1, 2, 2, 10, 10, 64, ATTN_F16, 0);
    attn_cost c;
    CHECK_EQ_INT(attn_describe(&s, &t, NULL, 0, &c), ATTUNE_ENOTFOUND);
    CHECK_NEAR(c.rows, 10, 0);
    CHECK_NEAR(c.keys, 16, 0);
    CHECK_EQ_INT(c.launches, 1);
}

static void sm_limits_should_follow_the_programming_guide(void)
{
    attn_sm_limits l;
    attn_sm_limits_of(9, 0, &l);
    CHECK_NEAR(l.smem_sm, 228 * 1024, 0);
    CHECK_NEAR(l.smem_block, 227 * 1024, 0);
    CHECK_EQ_INT(l.threads_sm, 2048);
    attn_sm_limits_of(8, 7, &l); /* Orin */
    CHECK_NEAR(l.smem_block, 163 * 1024, 0);
    CHECK_EQ_INT(l.threads_sm, 1536);
    attn_sm_limits_of(8, 6, &l);
    CHECK_NEAR(l.smem_block, 99 * 1024, 0);
    attn_sm_limits_of(11, 0, &l); /* Thor */
    CHECK_NEAR(l.smem_sm, 228 * 1024, 0);
    attn_device_info dev = h200();
    CHECK_NEAR(attn_blocks_per_sm(&dev, 128, 32, 0), 16, 0);          /* threads */
    CHECK_NEAR(attn_blocks_per_sm(&dev, 128, 128, 0), 4, 0);          /* registers */
    CHECK_NEAR(attn_blocks_per_sm(&dev, 128, 32, 100 * 1024), 2, 0);  /* shared memory */
    CHECK_NEAR(attn_blocks_per_sm(&dev, 1024, 255, 0), 1, 0);         /* at least one */
}

/* ---- a toy variant: its kernel (the CPU's fused kernel under another
 * name, pads 1 and 8 only) and its descriptor, registered at run time */

#define TOY ((attn_variant)ATTN_NVARIANTS)

static int toy_owns(const attn_tactic *t)
{
    return t->variant == TOY && t->tile_m == 0 && t->splits == 0 && t->acc == ATTN_ACC_NONE;
}

static int toy_list(const attn_device_info *dev, const attn_shape *s, attn_tactic *out, int max)
{
    (void)dev, (void)s;
    for (int i = 0; i < 2 && i < max; i++) {
        memset(&out[i], 0, sizeof out[i]);
        out[i].variant = TOY;
        out[i].pad = i == 0 ? 1 : 8;
    }
    return 2;
}

static int toy_plan(attn_plan *p, const attn_call *c, char *note, size_t notelen)
{
    (void)note, (void)notelen;
    cpu_work_free(p->w);
    p->w = NULL;
    return cpu_work_alloc(&cpu_fused_kernel, c, &p->w);
}

static int toy_run(attn_plan *p, const attn_call *c)
{
    return cpu_kernel_run(&cpu_fused_kernel, c, p->w);
}

static void toy_free(attn_plan *p)
{
    cpu_work_free(p->w);
    p->w = NULL;
}

static int toy_describe(const attn_shape *s, const attn_tactic *t, const attn_device_info *dev,
                        unsigned hints, attn_cost *out)
{
    (void)hints;
    attn_cost_base(s, t, dev, out);
    return 0;
}

static const attn_kernel_ops toy_ops = {
    .list = toy_list, .plan = toy_plan, .run = toy_run, .free = toy_free};
static const attn_variant_desc toy = {
    TOY, "toy", "toy", "cpu", "the CPU's fused kernel under another name", "pad=1|8",
    "#123456", toy_owns, toy_describe, &toy_ops, ATTN_DTYPES_WIDE, NULL};

static store_measurement row(const attn_shape *s, const char *tactic, double us)
{
    store_measurement m;
    memset(&m, 0, sizeof m);
    snprintf(m.device_id, sizeof m.device_id, "CPU-test");
    snprintf(m.stack_id, sizeof m.stack_id, "stack-a");
    m.shape = *s;
    snprintf(m.tactic, sizeof m.tactic, "%s", tactic);
    m.status = STORE_OK;
    m.time_us = m.time_us_min = m.time_us_max = us;
    m.time_us_copies = NAN;
    m.n = 10;
    m.rel_err = m.max_abs_err = 1e-6; /* within every dtype's bound */
    m.taken_at = 1000;
    return m;
}

/* The winner of a model where toy was measured as `measured` only, asked
 * between fused/pad=1 and toy/pad=1 (toy twice as fast on every row). */
static void toy_answer(const char *measured, const char *want)
{
    store_measurement m[8];
    int k = 0;
    for (int64_t len = 64; len <= 512; len *= 2) {
        attn_shape q = shp(1, 4, 4, len, len, 64, ATTN_F32, 0);
        double w = 1e-4 * (double)(len * len);
        m[k++] = row(&q, "fused/pad=1", 2 * w);
        m[k++] = row(&q, measured, w);
    }
    predict_model *pm = predict_build(m, k, "stack-a", NULL);
    CHECK(pm != NULL);
    attn_tactic cand[2] = {tac("fused/pad=1"), tac("toy/pad=1")};
    attn_shape q = shp(1, 4, 4, 200, 200, 64, ATTN_F32, 0);
    predict_answer a;
    CHECK_EQ_INT(predict_answer_for(pm, &q, cand, 2, 0, &a), 0);
    CHECK_STR(a.tactic_str, want);
    predict_free(pm);
}

static void toy_variant_should_be_known_everywhere_by_its_descriptor(void)
{
    CHECK_EQ_INT(attn_family_register(&toy), 0);
    /* tactic text */
    attn_tactic t;
    char buf[ATTN_TACTIC_STR_MAX];
    CHECK_EQ_INT(attn_tactic_parse("toy/pad=8", &t, NULL, 0), 0);
    CHECK_EQ_INT((int)t.variant, (int)TOY);
    CHECK_STR(attn_tactic_str(&t, buf, sizeof buf), "toy/pad=8");
    /* the CPU backend lists it after its own and runs it */
    attn_shape s = shp(1, 4, 2, 20, 30, 32, ATTN_F32, 1);
    attn_tactic list[64];
    int n = attn_cpu_ops.tactics(0, &s, list, 64);
    CHECK_EQ_INT(n, 18);
    CHECK_EQ_INT((int)list[16].variant, (int)TOY);
    attn_session *ss = NULL;
    attn_plan *p = NULL;
    CHECK_EQ_INT(attn_cpu_ops.session_open(0, &s, 7, &ss), 0);
    CHECK_EQ_INT(attn_cpu_ops.plan(ss, &t, &p), 0);
    CHECK_EQ_INT(attn_cpu_ops.run(p), 0);
    int64_t rows[2] = {0, 4 * 20 - 1};
    double got[2 * 32], ref[2 * 32];
    CHECK_EQ_INT(attn_cpu_ops.fetch_rows(ss, rows, 2, got), 0);
    CHECK_EQ_INT(attn_cpu_ops.reference(ss, rows, 2, ref), 0);
    double err = 0;
    for (int i = 0; i < 2 * 32; i++)
        err = fmax(err, fabs(got[i] - ref[i]));
    CHECK_MSG(err < 1e-4, "toy output off the reference by %g", err);
    attn_cpu_ops.plan_free(p);
    attn_cpu_ops.session_close(ss);
    /* variant sets and the variants list */
    variant_set vs;
    CHECK_EQ_INT(variant_set_parse("toy,split", &vs, NULL, 0), 0);
    CHECK(variant_set_has(vs, TOY));
    CHECK(strstr(variant_set_names(), "toy") != NULL);
    json_t *j = variants_json();
    CHECK(j != NULL);
    char *text = json_dumps(j, 0);
    CHECK(text != NULL && strstr(text, "\"toy\"") != NULL && strstr(text, "#123456") != NULL);
    /* each family names the dtypes it runs: toy the wide ones */
    CHECK(text != NULL && strstr(text, "\"dtypes\": [\"f16\", \"bf16\", \"f32\"]") != NULL);
    free(text);
    json_decref(j);
    /* the model: toy is twice as fast as fused on every neighbour */
    toy_answer("toy/pad=1", "toy/pad=1");
    attn_family_reset();
    CHECK_EQ_INT(attn_tactic_parse("toy/pad=8", &t, NULL, 0), ATTUNE_EINVAL);
    CHECK_EQ_INT(attn_cpu_ops.tactics(0, &s, list, 64), 16);
}

/* A parameter the descriptor names among its shape_params (the backend
 * sets it from the shape) makes a tactic nobody measured the same kernel
 * as its measured sibling: the model costs it by the sibling's rows. The
 * model knows of it only from the descriptor. */
static void shape_params_should_give_an_unmeasured_tactic_its_siblings_rows(void)
{
    attn_variant_desc knob = toy;
    knob.shape_params = "warps pad";
    CHECK_EQ_INT(attn_family_register(&knob), 0);
    toy_answer("toy/pad=8", "toy/pad=1");
    attn_family_reset();
    /* the control: without it, toy/pad=1 has no rows of its own kind */
    CHECK_EQ_INT(attn_family_register(&toy), 0);
    toy_answer("toy/pad=8", "fused/pad=1");
    attn_family_reset();
}

static void register_should_refuse_a_name_of_another_id(void)
{
    attn_variant_desc bad = toy;
    bad.name = "fused"; /* id TOY, name of ATTN_FUSED */
    CHECK_EQ_INT(attn_family_register(&bad), ATTUNE_EINVAL);
    bad = toy;
    bad.variant = ATTN_SPLIT; /* id of split, another name */
    CHECK_EQ_INT(attn_family_register(&bad), ATTUNE_EINVAL);
    bad = toy;
    bad.describe = NULL;
    CHECK_EQ_INT(attn_family_register(&bad), ATTUNE_EINVAL);
    int n;
    attn_families(&n);
    CHECK_EQ_INT(n, 12);
}

int main(void)
{
    RUN(table_should_give_each_variant_one_name_and_colour);
    RUN(families_should_own_their_tactics);
    RUN(families_should_be_built_with_their_backend);
    RUN(cpu_listing_should_be_the_tables);
    RUN(fused_tiles_should_describe_their_grid);
    RUN(fused_f32_should_describe_its_tiles);
    RUN(sm90a_fold_should_fill_its_rows_with_the_group);
    RUN(sm90a_cost_should_count_the_cut_last_wave);
    RUN(sm90a_persist_should_pay_the_fixed_cost_once);
    RUN(splitkv_should_stream_at_its_blocks_share);
    RUN(gemms_should_compute_the_whole_padded_matrix);
    RUN(gemms_should_run_slower_on_unaligned_keys);
    RUN(cudnn_should_tile_but_on_its_decode_engines);
    RUN(unknown_tactics_should_get_the_plain_description);
    RUN(sm_limits_should_follow_the_programming_guide);
    RUN(toy_variant_should_be_known_everywhere_by_its_descriptor);
    RUN(shape_params_should_give_an_unmeasured_tactic_its_siblings_rows);
    RUN(register_should_refuse_a_name_of_another_id);
    return test_summary();
}
