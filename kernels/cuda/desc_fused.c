/* desc_fused.c -- the CUDA fused kernels as descriptors (kernels/variant.h):
 * version 1 (`fused`, tiles of cuda_fused.cu), version 2
 * (`fused_splitkv`, flash-decoding, cuda_fused.cu) and version 3
 * (`fused/arch=sm90a`, wgmma and TMA, cuda_fused_sm90a.cu): what they own
 * and what they cost. Plain C, built everywhere (a CPU-only host costs an
 * H200's tactics); their configurations come from cuda_fused_configs.h,
 * the lines the kernels are built from. The kernel ops (list, plan, run)
 * are the CUDA backend's, present when it is built. */
#include <math.h>
#include <string.h>

#include "../variant.h"
#include "cuda_fused_configs.h"

/* ---- what they own */

static int owns_v1(const attn_tactic *t)
{
    return t->variant == ATTN_FUSED && attn_tactic_no_sm90a_keys(t) && t->tile_m > 0 && t->tile_n > 0 &&
           t->warps > 0 && t->splits == 0 && t->stages == 0 && t->acc == ATTN_ACC_NONE;
}

static int owns_sm90a(const attn_tactic *t)
{
    return t->variant == ATTN_FUSED && t->arch == ATTN_ARCH_SM90A && t->acc == ATTN_ACC_NONE;
}

static int owns_splitkv(const attn_tactic *t)
{
    return t->variant == ATTN_FUSED_SPLITKV && attn_tactic_no_sm90a_keys(t) && t->acc == ATTN_ACC_NONE;
}

/* ---- registers
 *
 * Resident blocks per SM come from a block's threads, shared memory and
 * registers (attn_blocks_per_sm). ptxas decides the registers; estimated
 * here from the accumulators a thread holds, rows per warp x (Bc + D) /
 * 32 floats (the S tile and the O tile), plus a base for addresses,
 * indices and the softmax state; checked against ptxas -v for sm_90
 * (docs/tuning.md "Predicted answers"). */
#define REGS_BASE 40.0   /* addresses, indices, softmax state */
#define REGS_PER_ACC 1.5 /* per accumulator float a thread holds */
#define REGS_MAX 255.0

static double regs_of(int tile_m, int tile_n, int warps, int64_t D)
{
    /* a warp holds 16 rows at least (one MMA's): a configuration with more
     * warps than its rows' 16-row tiles splits the keys among key groups
     * (version 1.1's 64x64 with 16 warps: 105-128 registers, not 58) */
    double rows = fmax(16.0, (double)tile_m / warps);
    double acc = rows * (double)(tile_n + D) / 32.0;
    return fmin(REGS_BASE + REGS_PER_ACC * acc, REGS_MAX);
}

/* The version 1 configuration's shared memory at head dim D; a single-
 * buffered estimate for a tile no configuration has. */
static double v1_smem(const attn_tactic *t, int64_t D)
{
#define V1_SMEM(D_, BR_, BC_, NW_, KVST_)                                                      \
    if (D == D_ && t->tile_m == BR_ && t->tile_n == BC_ && t->warps == NW_)                   \
        return (double)FUSED_SMEM(D_, BR_, BC_, NW_, KVST_);
    FUSED_CONFIGS(V1_SMEM)
#undef V1_SMEM
    return (double)FUSED_SMEM(D, t->tile_m, t->tile_n, t->warps, 1);
}

static double splitkv_smem(const attn_tactic *t, int64_t D)
{
#define V2_SMEM(D_, BC_, NW_)                                                                  \
    if (t->stages == 0 && D == D_ && t->tile_n == BC_ && t->warps == NW_)                     \
        return (double)SPLITKV_SMEM(D_, BC_, NW_);
    SPLITKV_CONFIGS(V2_SMEM)
#undef V2_SMEM
#define V21_SMEM(D_, BC_, NW_)                                                                 \
    if (t->stages > 0 && D == D_ && t->tile_n == BC_ && t->warps == NW_)                      \
        return (double)SPLITKV_BULK_SMEM(D_, BC_, NW_, t->stages);
    SPLITKV_BULK_CONFIGS(V21_SMEM)
#undef V21_SMEM
    return 0;
}

/* ---- costs
 *
 * A tiled kernel computes whole row tiles of the real rows (never the
 * pad's rows: a decode step, sq = 1, took 151 us with 128-row tiles on the
 * H200, 97 with 64-row ones) against the padded keys in whole key tiles
 * (77 keys cost 128), skipping the tiles a causal mask hides. Each block
 * also pays a fixed prologue and epilogue, its Q tile in and its O tile
 * out: tile_m / tile_n key steps of the same bytes (192x128: 1.5, 128x64:
 * 2, 64x64: 1), no fitted constant. Taken as half a step for every tile,
 * these kernels were predicted 1.17-1.33x too fast on the many-query,
 * short-key shapes of the held-out sets (b8.hq1.sq16384.skv256,
 * b2.hq32.sq6144.skv128, b32.hq5.sq1024.skv77, b32.hq5.sq2560.skv77, d =
 * 64) and answered there at 1.21-1.45x cuDNN's time; so counted, those
 * four came to 1.00-1.01 (docs/tuning.md). */
static void tiled(const attn_shape *s, const attn_tactic *t, const attn_device_info *dev,
                  int64_t D, double rows, double blocks, double smem, int launches,
                  attn_cost *out)
{
    attn_cost_base(s, t, dev, out);
    int pad = t->pad > 1 ? t->pad : 1, splits = t->splits > 1 ? t->splits : 1;
    int64_t skvp = attn_round_up(s->skv, pad);
    out->rows = rows;
    out->block_keys = (double)t->tile_m * splits; /* tile_m / tile_n steps of tile_n keys */
    out->keys = (double)attn_round_up(skvp, t->tile_n) + out->block_keys;
    out->head_dim = D;
    out->blocks = blocks;
    out->quantized = 1;
    out->row_tile = t->tile_m;
    out->threads = 32 * t->warps;
    out->regs = regs_of(t->tile_m, t->tile_n, t->warps, D);
    out->smem = smem;
    if (attn_cost_gpu(dev)) {
        out->blocks_sm = attn_blocks_per_sm(dev, out->threads, out->regs, smem);
        out->waves = ceil(blocks / ((double)dev->sm_count * out->blocks_sm));
        out->launches = launches;
    }
}

/* Version 1: b * hq * row tiles blocks, one launch. */
static int describe_v1(const attn_shape *s, const attn_tactic *t, const attn_device_info *dev,
                       unsigned hints, attn_cost *out)
{
    (void)hints;
    int64_t D = FUSED_KERNEL_DIM(s->d);
    int runs = D != 0 && s->d % 8 == 0 && s->dtype != ATTN_F32;
    if (D == 0)
        D = s->d;
    double rb = (double)((s->sq + t->tile_m - 1) / t->tile_m);
    tiled(s, t, dev, D, (double)attn_round_up(s->sq, t->tile_m), (double)(s->b * s->hq) * rb,
          v1_smem(t, D), 1, out);
    return runs ? 0 : ATTUNE_EUNSUPP;
}

/* Queries of each query head in one folded block (fold=1: the g query
 * heads of a KV head share a block's 128 rows, 128 / g queries of each,
 * as the kernel runs them at any sq), or 0 when t does not fold on s. A
 * few-query step of a large group fills whole blocks: 16 queries of group
 * 8 are one 128-row block per KV head, not 8 blocks of 16 real rows in 128
 * (costed so, the fold+split kernel was predicted 3.6x its 17.8 us on
 * b1.hq64.hkv8.sq16.skv8192 d128 and folded answered at 2.3x). The model
 * of 7386a7d took sq > 128 / g as unfolded 128-row tiles; costed as the
 * kernel runs, the leave-one-out medians of test_loo fell on eight of the
 * thirteen H200 evaluations (1.020 -> 1.010 on the seventh run's table)
 * and rose on one (1.014 -> 1.018), no worst changed. */
static int64_t fold_queries(const attn_shape *s, const attn_tactic *t)
{
    int64_t g = attn_shape_group(s);
    if (!t->fold || t->tile_m != SM90_FOLD_ROWS || !SM90_FOLD_APPLIES(g))
        return 0;
    return SM90_FOLD_ROWS / g;
}

/* Version 3: b * hq * row tiles blocks, or folded b * hkv * row blocks of
 * the fold, times its key splits (a second launch combines them). Causal
 * blocks are issued longest first, so its last wave holds the shortest.
 * A grid of more than one wave pays each block's fixed cost (tiled's
 * tile_m / tile_n key steps) SM90_FIXED_QUEUED times: one block fills an
 * SM (its shared memory), so a queued block's prologue and epilogue
 * overlap nothing of its own SM, where a single wave's run side by side
 * with the other SMs'. The H100 table of bench/loo-h100-458045a.json.gz
 * shows it: the 128x128 d64 kernel took 4.77 us on b8.hq12.sq128 (96
 * blocks, 0.77 of cuDNN's time) but 1.15-1.6x cuDNN's on every multi-wave
 * neighbour of 197-577 keys, so at one fixed step everywhere the model
 * carried those neighbours' slowness to the one-wave shape (regret
 * 1.315). At 2: that table's worst 1.285, its geomean 1.045 -> 1.029;
 * of test_loo's 23 evaluations, 9 geomeans lower, 3 higher by 0.001-
 * 0.004, none past its bounds (the eleventh real-model set's worst 1.063
 * -> 1.169). 1.5 to 3 did about as well; a one-wave grid without its fixed
 * cost failed a bound (bench/loo-model-20261207.txt, the sweep).
 * A persistent grid (persist=1, version 3.28) pays it once: its block
 * loads the next item's Q and runs on into its tiles under this item's
 * end, which is what it is for; and a launch more, the memset of its
 * counter. */
#define SM90_FIXED_QUEUED 2.0
static int describe_sm90a(const attn_shape *s, const attn_tactic *t, const attn_device_info *dev,
                          unsigned hints, attn_cost *out)
{
    (void)hints;
    int64_t D = SM90_KERNEL_DIM(s->d), qb = fold_queries(s, t);
    int runs = D != 0 && s->d % 8 == 0 && s->dtype != ATTN_F32 && t->tile_m > 0 &&
               t->tile_n > 0 && t->warps > 0;
    if (D == 0)
        D = s->d;
    int tm = t->tile_m > 0 ? t->tile_m : SM90_FOLD_ROWS, tn = t->tile_n > 0 ? t->tile_n : 64;
    attn_tactic tt = *t;
    tt.tile_m = tm, tt.tile_n = tn, tt.warps = t->warps > 0 ? t->warps : 4 + tm / 16;
    double rows, blocks;
    if (qb > 0) {
        rows = (double)attn_round_up(s->sq, qb);
        blocks = (double)(s->b * s->hkv) * (double)((s->sq + qb - 1) / qb) *
                 (double)(t->splits > 1 ? t->splits : 1);
    } else {
        rows = (double)attn_round_up(s->sq, tm);
        blocks = (double)(s->b * s->hq) * (double)((s->sq + tm - 1) / tm) *
                 (double)(t->splits > 1 ? t->splits : 1);
    }
    int stages = t->stages > 1 ? t->stages : 1, e4m3 = s->dtype == ATTN_E4M3;
    if (e4m3) { /* version 3.5: D = 128, V^T made by a launch of its own */
        runs = runs && s->d % 16 == 0 && s->d <= 128 && !t->fold && t->splits <= 1;
        D = 128;
    }
    /* Version 3.12's cut of the last wave, by the launch's rule: its
     * waves as the cut makes them, and the combine's launch. */
    int cut = sm90_tail_cut(s->causal, t->fold, t->splits, t->tile_m, t->tile_n, s->b, s->hq, s->sq,
                            s->skv);
    /* the kernel, + the combine, + e4m3's V^T pass, + a persistent grid's
     * counter's memset */
    int launches = 1 + (t->splits > 1 || cut) + e4m3 + (t->persist != 0);
    runs = runs && !(t->persist && t->splits > 1); /* persistent grids are unsplit */
    tiled(s, &tt, dev, D, rows, blocks,
          (double)(e4m3 ? SM90_SMEM_E4M3(D, tm, tn, stages) : SM90_SMEM(D, tm, tn, stages)), launches, out);
    if (cut && attn_cost_gpu(dev) && out->blocks_sm > 0)
        out->waves = sm90_tail_waves((long long)blocks, dev->sm_count * out->blocks_sm, cut);
    if (attn_cost_gpu(dev) && out->waves > 1 && !t->persist) {
        /* blocks that queue for their SM pay the fixed cost twice */
        out->keys += out->block_keys * (SM90_FIXED_QUEUED - 1.0);
        out->block_keys *= SM90_FIXED_QUEUED;
    }
    out->longest_first = 1;
    return runs ? 0 : ATTUNE_EUNSUPP;
}

/* Version 2 (flash-decoding): blocks of 16 of the group's folded rows
 * (query heads x queries of one KV head) times the key splits, so a decode
 * step of group 4 fills 4 of 16 rows; a combine launch when split. Its
 * grid is set by its split count, not run in waves. Each split's block
 * pays a fixed cost of half a key tile (its Q rows in, its partial O out,
 * the combine after: BLOCK_FIXED_TILES). A launch of B blocks streams the
 * keys at no more than B / (SPLIT_OCC x SMs) of the device's byte rate:
 * a block reads its keys at about twice an SM's share of the bandwidth,
 * not all of it (without it, one split over 8 KV heads, 8 blocks on 132
 * SMs, was costed at the full rate and answered at 2.9x the winner on a
 * group-16 decode step, b1.hq128.hkv8.sq1.skv2048 d64). */
#define BLOCK_FIXED_TILES 0.5
#define SPLIT_OCC 0.5
/* Version 2.1 (stages=N): TMA keeps N tiles in flight per block, so a
 * block streams at more than an SM's share: on the H200's Llama decode
 * step (b8.hq32.hkv8.sq1.skv2049 d128) 64 blocks took 21.2 us and 128
 * took 22.0 (bench/decode-v21-h200-20261204.txt, block 3): 64 blocks at
 * ~0.8 of the full rate, 64 / (0.6 x 132). Its arithmetic runs on the
 * blocks' SMs only: B / SMs of the device's rate (flop_share). Without
 * it a few-block launch was costed as if it computed on every SM: on an
 * H100 table (bench/loo-h100-458045a.json.gz) the d256 anchor
 * b1.hq8.hkv1.sq50.skv1018, 25 blocks at one split, was predicted 8.1 us
 * and took 19.1 (the winner, 4 splits, 11.7: regret 1.64). */
#define SPLIT_OCC_BULK 0.6

static int describe_splitkv(const attn_shape *s, const attn_tactic *t,
                            const attn_device_info *dev, unsigned hints, attn_cost *out)
{
    (void)hints;
    attn_cost_base(s, t, dev, out);
    int64_t D = FUSED_KERNEL_DIM(s->d), g = attn_shape_group(s);
    int runs = D != 0 && s->d % 8 == 0 && s->dtype != ATTN_F32 && t->tile_n > 0 && t->warps > 0;
    if (D == 0)
        D = s->d;
    int tm = t->tile_m > 0 ? t->tile_m : 16, tn = t->tile_n, splits = t->splits > 1 ? t->splits : 1;
    int pad = t->pad > 1 ? t->pad : 1;
    int64_t skvp = attn_round_up(s->skv, pad);
    out->rows = (double)attn_round_up(g * s->sq, tm) / (double)g;
    if (tn > 0) {
        out->block_keys = BLOCK_FIXED_TILES * tn * splits;
        out->keys = (double)attn_round_up(skvp, tn) + out->block_keys;
    }
    out->head_dim = D;
    out->blocks = (double)(s->b * s->hkv) * (double)((g * s->sq + tm - 1) / tm) * splits;
    out->row_tile = tm;
    out->threads = 32 * (t->warps + (t->stages > 0)); /* version 2.1: and its producer warp */
    out->smem = splitkv_smem(t, D);
    if (attn_cost_gpu(dev)) {
        out->byte_share = fmin(1.0, out->blocks / ((t->stages > 0 ? SPLIT_OCC_BULK : SPLIT_OCC) * dev->sm_count));
        out->flop_share = fmin(1.0, out->blocks / dev->sm_count);
        out->launches = splits > 1 ? 2 : 1;
    }
    return runs ? 0 : ATTUNE_EUNSUPP;
}

/* ---- the descriptors (one line each in kernels/variants.c's table) */

/* Kernel ops: the CUDA backend's, when it is built. */
#if defined(ATTUNE_HAVE_CUDA)
extern const attn_kernel_ops cuda_fused_ops, cuda_fused_sm90a_ops, cuda_fused_splitkv_ops;
#define OPS(x) (&(x))
#else
#define OPS(x) NULL
#endif

const attn_variant_desc attn_cuda_fused = {
    ATTN_FUSED, "fused", "fused", "cuda",
    "FlashAttention-2 on tensor cores (mma.sync, cp.async), one block per row tile and query "
    "head; f16/bf16, d <= 256 in steps of 8",
    "pad=1|8|16|64, tile=BrxBc, warps=N (the configurations built: cuda_fused_configs.h)",
    "#4e79a7", owns_v1, describe_v1, OPS(cuda_fused_ops),
    ATTN_DTYPE_BIT(ATTN_F16) | ATTN_DTYPE_BIT(ATTN_BF16), NULL,
};

const attn_variant_desc attn_cuda_fused_sm90a = {
    ATTN_FUSED, "fused", "fused/arch=sm90a", "cuda",
    "FlashAttention-3-like for compute capability 9.0 only (wgmma, TMA, warp specialization); "
    "fold=1 packs a KV head's query heads into one block's rows, with key splits",
    "arch=sm90a, pad=1|8|16|64, tile=BrxBc, warps=N, stages=N, fold=1, splits=N, persist=1 (one block "
    "per SM over the grid's blocks)",
    "#4e79a7", owns_sm90a, describe_sm90a, OPS(cuda_fused_sm90a_ops),
    /* e4m3: version 3.5, d <= 128 (cuda_fused_sm90a.h) */
    ATTN_DTYPE_BIT(ATTN_F16) | ATTN_DTYPE_BIT(ATTN_BF16) | ATTN_DTYPE_BIT(ATTN_E4M3),
    "stages", /* 3 up to d = 64, 2 above (cuda_fused_configs.h) */
};

const attn_variant_desc attn_cuda_fused_splitkv = {
    ATTN_FUSED_SPLITKV, "fused_splitkv", "fused_splitkv", "cuda",
    "flash-decoding: the keys split across blocks of 16 folded query rows, then a combine; "
    "for g * sq <= 512 and skv >= 128",
    "pad=1|8|16|64, splits=N, tile=16xBc, warps=N, stages=N (compute capability 9.0+: K/V by "
    "bulk copies, N tiles in flight, pad=1)", "#76b7b2", owns_splitkv, describe_splitkv,
    OPS(cuda_fused_splitkv_ops),
    ATTN_DTYPE_BIT(ATTN_F16) | ATTN_DTYPE_BIT(ATTN_BF16), NULL,
};
