/* cuda_fused_configs.h -- the fused kernels' configurations, head dims and
 * shared memory: one copy, read by the kernels that are built from it
 * (cuda_fused.cu, cuda_fused_sm90a.cu) and by their descriptors
 * (desc_fused.c), which describe them to the cost model. Plain C, no CUDA
 * header: a host without CUDA costs these kernels from an imported table.
 * The macros are constant expressions, so the kernels' templates use them
 * for their launch sizes. */
#ifndef CUDA_FUSED_CONFIGS_H
#define CUDA_FUSED_CONFIGS_H

#include <stddef.h>
#include <stdint.h>

/* ---- versions 1 and 2 (cuda_fused.cu)
 *
 * The kernel configurations built: (D, Br, Bc, warps, K/V buffers) for
 * fused, (D, Bc, warps) for fused_splitkv (16 rows per block). A tactic
 * names the first four (tile=BrxBc, warps); the buffer count belongs to the
 * configuration, chosen by measurement on an H200 (docs/kernels.md):
 * double buffering won on 64x64/d128 (+4-9%), 128x128/8 warps and d <= 64,
 * lost on 128x64/d128 (335 -> 315 TFLOP/s) and 64x64/d256 (44.7 -> 48.5 us).
 * Br = 16 * MI * warps (per key group); MI = 2 halves the shared-memory
 * reads of K and V per MMA (each B fragment feeds two row tiles), FA2's
 * choice for d <= 128; d = 256 keeps MI = 1 for registers (the O
 * accumulators alone take 128 per thread). 64x64 and 64x32 with 8 warps at
 * d = 256 are two key groups of 4 warps (KG = 2): for grids of about one
 * block per SM (b1.hq8.sq968.d256: 128 blocks, 44.7 -> 42.3 us at 64x64).
 * Four key groups (version 1.1, issue 25): 64x64 with 16 warps at d = 32
 * and 32x64 with 8 (single-buffered) at d = 64, for short few-head shapes
 * whose grid is about one block of 4 warps per SM; each group walks a
 * quarter of the key tiles. Measured on an H100 (docs/kernels.md): the d32
 * anchors (8 heads x 900 queries) 10.28 -> 9.26 us, ViT-B/16's 197 tokens
 * at b = 1 (d64) 5.13 -> 4.81; 32- and 16-row tiles at d = 32 and 16 warps
 * at d = 64 won nowhere and are not built. */
#define FUSED_CONFIGS(X)                                                         \
    X(32, 128, 64, 4, 2) X(32, 64, 64, 4, 2) X(32, 128, 128, 4, 2)               \
    X(32, 64, 64, 16, 2)                                                         \
    X(64, 128, 64, 4, 2) X(64, 64, 64, 4, 2) X(64, 128, 128, 8, 2)               \
    X(64, 32, 64, 8, 1)                                                          \
    X(128, 128, 64, 4, 1) X(128, 64, 64, 4, 2) X(128, 128, 32, 4, 1)             \
    X(128, 128, 128, 8, 2)                                                       \
    X(256, 64, 64, 4, 1) X(256, 128, 64, 8, 2) X(256, 64, 32, 4, 2) X(256, 64, 64, 8, 1)    \
    X(256, 64, 32, 8, 2)

#define SPLITKV_CONFIGS(X)                                                  \
    X(32, 64, 4) X(32, 128, 4) X(64, 64, 4) X(64, 128, 4)                   \
    X(128, 64, 4) X(128, 32, 2) X(256, 32, 2) X(256, 64, 4)

/* Head dim a version 1 or 2 kernel computes for d: the next of 32, 64,
 * 128, 256 (columns past d are zero); 0 when d is over 256. */
#define FUSED_KERNEL_DIM(d) ((d) <= 32 ? 32 : (d) <= 64 ? 64 : (d) <= 128 ? 128 : (d) <= 256 ? 256 : 0)

/* Shared-memory tiles are rows of D b16 elements padded by one 16-byte
 * chunk: row stride 2D + 16 bytes (cuda_fused.cu says why). */
#define FUSED_TILE_RS(D) (2 * (D) + 16)

/* Version 1's shared memory: the Q tile, then per key group double-or-
 * single-buffered K and V tiles. */
#define FUSED_SMEM(D, BR, BC, NW, KVST)                                                        \
    ((size_t)((BR) + ((NW) * 16 > (BR) ? (NW) * 16 / (BR) : 1) * 2 * (KVST) * (BC)) *          \
     (size_t)FUSED_TILE_RS(D))

/* Version 2's pipeline depth: as many stages of K+V as fit, with the Q
 * tile, in 110 KB (two blocks per SM: 228 KB less 1 KB per block), 2 to
 * 4. At d = 128, Bc = 64 that is 3 stages: two tiles in flight while one
 * is computed. (A 96 KB budget gave 2 with the padded rows: 72 us, 3.7
 * TB/s on the decode target; see docs/kernels.md.) */
#define SPLITKV_FIT(D, BC) ((112640 - 16 * FUSED_TILE_RS(D)) / (2 * (BC) * FUSED_TILE_RS(D)))
#define SPLITKV_STAGES(D, BC)                                                                  \
    (SPLITKV_FIT(D, BC) < 2 ? 2 : (SPLITKV_FIT(D, BC) > 4 ? 4 : SPLITKV_FIT(D, BC)))

/* Version 2's shared memory: its 16-row Q tile, then the larger of the K/V
 * pipeline and the warps' merge buffers (f32 partial rows and their
 * max/sum). */
#define SPLITKV_PIPE(D, BC) ((size_t)SPLITKV_STAGES(D, BC) * 2 * (BC) * FUSED_TILE_RS(D))
#define SPLITKV_MERGE(D, NW) ((size_t)(NW) * 16 * ((D) + 4) * 4 + (size_t)(NW) * 16 * 2 * 4)
#define SPLITKV_SMEM(D, BC, NW)                                                                \
    ((size_t)16 * FUSED_TILE_RS(D) +                                                           \
     (SPLITKV_PIPE(D, BC) > SPLITKV_MERGE(D, NW) ? SPLITKV_PIPE(D, BC) : SPLITKV_MERGE(D, NW)))

/* Version 2.1 (fused_splitkv with stages=N, compute capability 9.0+):
 * the configurations built, (D, Bc, warps), warps counting the consumer
 * warps (one producer warp more), each warp 16 keys of a tile. Its shared
 * memory: the stages' mbarriers (128 bytes) and the padded Q tile, then up
 * to 1 KB to align the stages (TMA's 128-byte swizzle wants 1 KB-aligned
 * boxes; the kernel aligns at run time), then the
 * larger of N stages of K+V (unpadded, swizzled rows) and the warps' merge
 * buffers. N is a tactic parameter: the most that fit in a block's limit
 * (up to 8), and the most that let two blocks share an SM (cuda_fused.cu
 * lists both). 128 x 8 at d = 128 puts 8 consumer warps on an SM when the
 * grid has one block per SM (a decode step of b hkv = 64): the Llama step
 * took 21.2 us with it, 21.4 with 64 x 4 at 6 stages (docs/kernels.md). */
#define SPLITKV_BULK_CONFIGS(X) X(64, 64, 4) X(128, 64, 4) X(128, 128, 8) X(256, 32, 2) X(256, 64, 4)
#define SPLITKV_BULK_MAX_STAGES 8
#define SPLITKV_BULK_STAGE(D, BC) ((size_t)2 * (BC) * (D) * 2)
#define SPLITKV_BULK_FIXED(D) ((size_t)128 + (size_t)16 * FUSED_TILE_RS(D) + 1024)
#define SPLITKV_BULK_SMEM(D, BC, NW, S)                                                        \
    (SPLITKV_BULK_FIXED(D) + ((size_t)(S) * SPLITKV_BULK_STAGE(D, BC) > SPLITKV_MERGE(D, NW)     \
                                  ? (size_t)(S) * SPLITKV_BULK_STAGE(D, BC)                      \
                                  : SPLITKV_MERGE(D, NW)))

/* Version 2 applies to decode-like shapes: the folded rows of a KV head
 * (g * sq) fill at most 32 16-row tiles, and there are enough keys to
 * split (cuda_fused.cu says why). */
#define SPLITKV_MAX_ROWS 512
#define SPLITKV_MIN_KEYS 128

/* ---- version 3 (cuda_fused_sm90a.cu)
 *
 * The configurations built: (D, BR, BC, STAGES, ALL); a producer warpgroup
 * and BR / 64 consumer warpgroups (warps = 4 + BR / 16). ALL = 1: the
 * 128-row ones are also listed folded and with key splits; ALL = 0: listed
 * (and run) plain only. Shared memory: d64 128x128x3: 112 KB, 192x128x3:
 * 120 KB; d128 128x128x2: 160 KB, 128x176x2: 209 KB; d256 128x64x2: 192
 * KB, 128x80x2: 225 KB (of the 227 KB a block may have); version 3.11's
 * d128 192x128x2: 177 KB.
 *
 * Version 3.6's wide key tiles (128x176 at d128, 128x80 at d256; the
 * widths FlashAttention-3 chose for non-causal d128 and for d256) carry a
 * tile's fixed work (the row max's shuffles, O's rescale, the barriers and
 * turns) over more keys, for long-key prefill; plain only, since the fold
 * and the splits serve short queries, where a wider tile rounds more keys
 * up. */
#define SM90_CONFIGS(X)                                                                        \
    X(64, 128, 128, 3, 1) X(64, 192, 128, 3, 1) X(128, 128, 128, 2, 1) X(128, 128, 176, 2, 0)  \
    X(128, 192, 128, 2, 0)                                                                     \
    X(256, 128, 64, 2, 1) X(256, 128, 80, 2, 0)

/* e4m3 (version 3.5): q, k, v in e4m3, out bf16; D = 128 (any d <= 128,
 * d % 16 == 0), 128-row tiles, not folded, no key splits. Shared memory:
 * Q (BR x D bytes), the K stages (BC x D bytes each), the V^T stages (D
 * rows of BC keys in 128-key chunks: D x 128 bytes per chunk, a partial
 * chunk loaded whole), the bf16 output's staging (BR x D x 2): 128x128, 2
 * stages 113 KB, 3 stages 145 KB. Version 3.7's wide key tiles: 128x192,
 * 2 stages 161 KB, 3 stages 217 KB; 128x224, 2 stages 169 KB (3 would be
 * 229 KB, over a block's 227). FlashAttention-3's FP8 width at d128 is
 * 224 (cuda_fused_sm90a.cu says why). Version 3.11's 192x128 (three
 * consumer warpgroups): 2 stages 137 KB, 3 stages 169 KB. */
#define SM90_E4M3_CONFIGS(X)                                                                   \
    X(128, 128, 128, 2) X(128, 128, 128, 3) X(128, 128, 192, 2) X(128, 128, 192, 3) X(128, 128, 224, 2) \
    X(128, 192, 128, 2) X(128, 192, 128, 3)
#define SM90_E4M3_VT_CHUNKS(BC) (((BC) + 127) / 128)
#define SM90_SMEM_E4M3(D, BR, BC, STAGES)                                                      \
    ((size_t)(BR) * (D) +                                                                      \
     (size_t)(STAGES) * ((size_t)(BC) * (D) + (size_t)SM90_E4M3_VT_CHUNKS(BC) * 128 * (D)) +  \
     (size_t)(BR) * (D) * 2 + 1024)
/* The rows of e4m3's V^T per (batch, KV head) hold the keys rounded up to
 * this (sm90_vt_kernel's key block). */
#define SM90_VT_KEYS 64
/* Its grid.y is b hkv: at most CUDA's 65535 (more lists no e4m3 tactic). */
#define SM90_VT_MAX_BH 65535

/* Head dim a version 3 kernel computes for d: 64, 128 or 256; 0 over 256. */
#define SM90_KERNEL_DIM(d) ((d) <= 64 ? 64 : (d) <= 128 ? 128 : (d) <= 256 ? 256 : 0)

/* Version 3's shared memory: Q, then STAGES K buffers, then STAGES V
 * buffers, each [D/64 chunks][rows][128 B]; 1024 more bytes to align the
 * start to a swizzle atom. */
#define SM90_SMEM(D, BR, BC, STAGES)                                                           \
    ((size_t)(BR) * (D) * 2 + 2 * (size_t)(STAGES) * (size_t)(BC) * (D) * 2 + 1024)
/* S's first k-slice of S_j writes its accumulators without reading them
 * ("=f"), so the previous S_{j-1} is not live up to S_j's issue; else
 * "+f" throughout (scale_d = 0 all the same). 2 (the default): e4m3
 * kernels only; 1: every dtype; 0: none. On H100s e4m3's 192x128 tiles
 * took 0.981-0.998 of "+f"'s time over four A/Bs and passed gpu_cudnn
 * and gpu_fused with it (2026-12-07); 16-bit took 1.004-1.014, so it
 * keeps "+f" (docs/kernels.md, version 3.15). */
#ifndef SM90_S_W
#define SM90_S_W 2
#endif
/* 1: a trace build for bench/sm90_trace.py, never the default. Thread 0
 * of each consumer warpgroup of the first SM90_TR_BLOCKS blocks stamps
 * clock64 at eight points of each key tile's turn (SM90_TR_EV),
 * and the launch writes them to the file ATTUNE_SM90_TRACE names when the
 * stream is not being captured (cuda_fused_sm90a.cu: sm90_trace_dump). */
#ifndef SM90_TRACE
#define SM90_TRACE 0
#endif
#define SM90_W3(D, BR) ((BR) > 128 && (D) == 128)

/* Folded blocks want g | 128 with QB = 128 / g >= 8 rows per head (so each
 * head's Q box fills whole 1024-byte swizzle atoms); g = 1 is the plain
 * kernel. A folded block holds 128 rows: 128 / g queries of each of the g
 * query heads of one KV head. */
#define SM90_FOLD_MAX_G 16
#define SM90_FOLD_ROWS 128

/* 1 when the fold applies to group size g: a power of two in 2..16. */
#define SM90_FOLD_APPLIES(g) ((g) >= 2 && (g) <= SM90_FOLD_MAX_G && ((g) & ((g) - 1)) == 0)

/* Version 3.12: the last wave of a non-causal grid cut by keys. A plain
 * grid of `blocks` equal blocks, one per SM at a time, takes ceil(blocks
 * / sms) waves; where the last one is partly empty (r = blocks % sms
 * blocks in it), each of those r blocks is cut into k key ranges of
 * whole tiles, r k pieces of about 1 / k of a block's time, so that wave
 * takes ceil(r k / sms) / k of a block's time instead of 1 (the pieces'
 * partials merged by the split combine). sm90_tail_k gives k: the
 * smallest in 2..SM90_TAIL_MAX_K that makes that wave shortest, each range
 * keeping SM90_TAIL_MIN_TILES key tiles, and only where the whole grid
 * has a full wave before it and the time saved is at least
 * SM90_TAIL_MIN_SAVED key tiles of one block (the combine's launch and
 * its bytes); 0: no cut. The 8k d128 anchors' 192x128 tiles (1376
 * blocks on 132 SMs: 10 waves and 56 blocks) take 10.5 waves so, not 11.
 * sm90_tail_waves: the grid's waves with cut k (0: none). Both are C and
 * C++: the launch (cuda_fused_sm90a.cu's sm90_tail), the cost descriptor
 * (desc_fused.c's describe_sm90a: the cut grid's waves and the combine's
 * launch) and test_fused_arch read them. */
#define SM90_TAIL_MAX_K 4
#define SM90_TAIL_MIN_TILES 4
#define SM90_TAIL_MIN_SAVED 8
/* The SMs every plan is made for (H100 SXM, H200), whatever the device,
 * so that the cut and its workspace follow from the shape and tactic. */
#define SM90_TAIL_SMS 132

static inline double sm90_tail_waves(long long blocks, int sms, int k)
{
    const long long r = blocks % sms, full = blocks / sms;
    if (k < 2 || r == 0)
        return (double)((blocks + sms - 1) / sms);
    return (double)full + (double)((r * k + sms - 1) / sms) / k;
}

static inline int sm90_tail_k(long long blocks, long long ktiles, int sms)
{
    if (sms < 1 || blocks <= sms || blocks % sms == 0)
        return 0;
    int best = 0;
    const double w0 = sm90_tail_waves(blocks, sms, 0);
    double bw = w0;
    for (int k = 2; k <= SM90_TAIL_MAX_K && ktiles / k >= SM90_TAIL_MIN_TILES; k++) {
        const double w = sm90_tail_waves(blocks, sms, k);
        if (w < bw - 1e-9)
            bw = w, best = k;
    }
    if (best != 0 && (w0 - bw) * (double)ktiles < SM90_TAIL_MIN_SAVED)
        return 0;
    return best;
}

/* The cut of a tactic's grid on a shape: only plain non-causal grids
 * (causal ones end on their shortest blocks already; folded and split
 * tactics have key splits of their own), of b * hq * ceil(sq / tile_m)
 * blocks over ceil(skv / tile_n) key tiles, planned for SM90_TAIL_SMS.
 * The one rule the launch (cuda_fused_sm90a.cu's sm90_tail) and the cost
 * descriptor (desc_fused.c) both apply. */
static inline int sm90_tail_cut(int causal, int fold, int splits, int tile_m, int tile_n, long long b,
                                long long hq, long long sq, long long skv)
{
    if (causal || fold || splits > 1 || tile_m <= 0 || tile_n <= 0)
        return 0;
    return sm90_tail_k((sq + tile_m - 1) / tile_m * b * hq, (skv + tile_n - 1) / tile_n, SM90_TAIL_SMS);
}

#ifdef __CUDACC__
#define SM90_HOST_DEVICE __host__ __device__
#else
#define SM90_HOST_DEVICE
#endif

/* Version 3.31: the causal grid's order (the item mapping of both of
 * cuda_fused_sm90a.cu's units, and of version 1's kernels under the
 * FUSED_CAUSAL_ORDER switch, cuda_fused_common.cuh; bench/sched_sim.py
 * models it). Chunks of `chunk` units (heads, or KV heads folded) one
 * after the other; inside a chunk the row blocks that see the most keys
 * first (every unit's last row block, then the one before, ...), so the
 * chunk's K/V stay in L2 and the grid ends on short blocks. Chunks are filled in order, so a chunk
 * of few items ends the grid badly: its long blocks start together at the
 * end and nothing is left for the SMs that drew its short ones (the 8k
 * causal anchor's 192-row tiles: 43 row blocks x 2 heads, 86 items on 132
 * SMs, modelled 0.935 of the ideal: most of what the 192-row tile was
 * measured to lose to the 128-row one there). So the last chunk takes the
 * units of the chunks before it while it holds fewer than SM90_TAIL_WAVES
 * waves of items (planned for SM90_TAIL_SMS SMs, as the tail cut) and its
 * K/V stay within SM90_TAIL_BUDGETS chunk budgets: 32 MB at the 8 MB
 * default (measured: docs/kernels.md, version 3.31; whole chunks of 24 MB
 * cost the 8k causal anchor no more than the model gives their order, on
 * an H200, version 3.2). clast is the index of that last chunk:
 * ceil(units / chunk) - 1 unmerged (cap = 0: for 16-bit types the order
 * before 3.31). unit_bytes: one unit's K and V; cap: the most bytes of K/V
 * the merged chunk may hold (SM90_TAIL_BUDGETS chunk budgets;
 * ATTUNE_SM90_TAIL_MERGE=N MB sets it for A/Bs). */
#define SM90_TAIL_WAVES 2
/* 4 since its A/B (H100, 2026-12-07, bench/order-h100-2026-12-07.txt):
 * against 3 (24 MB), 0.997 of the time over 24 tile-shapes, the 8k causal
 * anchor's persistent 192x128 tile 0.982 (782.2 against 796.3 us) */
#define SM90_TAIL_BUDGETS 4
/* The chunk budget: units whose K/V fit in this much of the L2 (50 MB on
 * an H100, 60 on an H200). Version 3.2's first reading had 24 MB 10%
 * slower on the 8k causal anchor; timed alternately it was 3%
 * (docs/kernels.md), and the schedule model gives a 24 MB order's last
 * chunk (2 heads of 4 MB after five chunks of 6) about 4% by itself: no
 * sign of the L2 there (an H200). */
#define SM90_CHUNK_BYTES (8 << 20)
/* The rule for any grid: the last chunk merged while it holds fewer than
 * SM90_TAIL_WAVES x slots items (slots: the blocks the device runs at
 * once; version 1's grids under FUSED_CAUSAL_ORDER,
 * cuda_fused_common.cuh). */
static inline int fused_causal_clast(long long units, long long nrb, long long chunk, long long unit_bytes,
                                     long long cap, long long slots)
{
    if (units < 1 || chunk < 1)
        return 0;
    long long c = (units + chunk - 1) / chunk - 1;
    while (c > 0 && (units - c * chunk) * nrb < (long long)SM90_TAIL_WAVES * slots &&
           (units - (c - 1) * chunk) * unit_bytes <= cap)
        c--;
    return (int)c;
}

/* sm90a's: planned for SM90_TAIL_SMS SMs, one block each. */
static inline int sm90_causal_clast(long long units, long long nrb, long long chunk, long long unit_bytes,
                                    long long cap)
{
    return fused_causal_clast(units, nrb, chunk, unit_bytes, cap, SM90_TAIL_SMS);
}

/* Item x of a causal grid (sm90_causal_clast's order) -> its unit *u and
 * row block *mb. Chunks before clast hold chunk units, the last one the
 * units - clast * chunk left; 0 <= x < units * nrb. In unsigned arithmetic
 * (every value is >= 0): so written, ptxas spills nothing more than before
 * 3.31 in the persistent unit (signed, e4m3's 192x128 kernel at 2 stages
 * spilled 4 bytes; unsigned, its 3-stage one spills 4 bytes fewer). */
static inline SM90_HOST_DEVICE void sm90_causal_item(int x, int chunk, int clast, int units, int nrb, int *u,
                                                     int *mb)
{
    const unsigned per = (unsigned)(chunk * nrb), q = (unsigned)x / per;
    const unsigned c = q < (unsigned)clast ? q : (unsigned)clast, r = (unsigned)x - c * per;
    const unsigned hc = c < (unsigned)clast ? (unsigned)chunk : (unsigned)units - c * (unsigned)chunk, mr = r / hc;
    *u = (int)(c * (unsigned)chunk + (r - mr * hc));
    *mb = nrb - 1 - (int)mr;
}

#endif
