/* cuda_fused_sm90a.cu -- fused attention for Hopper (sm_90a): the `fused`
 * tactics with arch=sm90a. wgmma (warpgroup MMA) for both products, TMA
 * (cp.async.bulk.tensor) tile loads into 128-byte-swizzled shared memory
 * completing on mbarriers, one producer warp and two consumer warpgroups
 * (setmaxnreg), online softmax in f32 in the base-2 domain.
 *
 * Computes exactly what cuda_fused.cu's version 1 computes (its CPU
 * reference section is the definition; tests/gpu/test_fused.c checks both
 * against a float64 reference): bottom-right causal from the real lengths,
 * GQA/MQA by reading KV head h / g, padded query rows never written,
 * padded keys masked, d padded with zero columns to D = 64, 128 or 256.
 *
 * Compile alone, with the resource report docs/kernels.md records:
 *   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Xptxas -v -I. \
 *        -c kernels/cuda/cuda_fused_sm90a.cu -o /tmp/sm90a.o
 * Built by CMake only when nvcc can target sm_90a (a target of its own
 * that carries only that code: the wgmma and setmaxnreg instructions do
 * not exist on plain sm_90 or older), listed only on compute capability 9.0.
 *
 * version 3 (fused, arch=sm90a): block = 3 warpgroups, BR = 128 query rows
 *   of one (batch, head) (4 warpgroups and 192 rows: version 3.3). Warpgroup 0 is the producer: after giving back
 *   its registers (setmaxnreg.dec) one thread issues the TMA loads: Q once,
 *   then K and V tiles of BC keys into a ring of STAGES buffers, each
 *   guarded by a full barrier (TMA transaction bytes) and an empty barrier
 *   (the 8 consumer warps arrive when their wgmma have read it).
 *   Warpgroups 1 and 2 (setmaxnreg.inc) own 64 query rows each. Per key
 *   tile j: S_j = Q K_j^T by SS wgmma (both operands in shared memory, K
 *   is K-major as stored), issued together with O += P_{j-1} V_{j-1} by
 *   RS wgmma (P from registers, V read MN-major through the descriptor's
 *   transpose bit); the softmax of S_j runs while the PV product of the
 *   previous tile is still in the tensor cores (FA3's intra-warpgroup
 *   overlap), and O is rescaled only after that product retired. The two
 *   consumer warpgroups take turns issuing their products (pingpong, two
 *   named barriers), so one's softmax runs under the other's GEMMs. Key
 *   tiles are visited last-first so that the masked ones (the partial last
 *   tile, the causal diagonal) come first; causal blocks skip whole tiles
 *   past their last row's diagonal. The output is normalised, staged in
 *   shared memory and stored in 16-byte pieces (only real rows and columns).
 * version 3.1 (fold=1): for GQA/MQA with g in {2, 4, 8, 16}, a block owns one
 *   KV head and QB = 128 / g queries of each of its g query heads: packed
 *   row r of the 128 is query head r / QB, query i0 + r % QB. Q arrives as
 *   g TMA boxes of QB rows (one per head, each a whole number of 1024-byte
 *   swizzle atoms since QB >= 8), and every K/V tile is loaded once for the
 *   g heads instead of once per head. Each row's mask comes from its own
 *   query index. For short queries the keys can also be cut into `splits`
 *   ranges of whole tiles, one block each, writing f32 partials that
 *   version 2's combine kernel merges (cuda_fused.cu).
 * version 3.2: causal grids in longest-first order over chunks of heads
 *   whose K/V fit in about 8 MB of L2 (was: head after head, longest row
 *   block first within each), so the last wave holds the shortest blocks.
 * version 3.3: d <= 64 also gets 192-row blocks, three consumer warpgroups
 *   (160 registers each) taking turns in a ring: at d = 64 a tile's GEMMs
 *   are short next to its softmax, and a third warpgroup keeps the tensor
 *   cores fed (FA3's tile for d = 64).
 * version 3.4: key splits unfolded too (every tile, where the fold does not
 *   apply: g = 1 or g not a power of two up to 16), so a shape of one or
 *   two heads over tens of thousands of keys runs on more than a few SMs;
 *   the partials and the combine are version 3.1's.
 * version 3.6: wide key tiles, 128x176 at d <= 128 and 128x80 at d = 256
 *   (n176 and n80 wgmma for S; P V's k slices are 16 keys at any width),
 *   listed plain only (cuda_fused_configs.h says why).
 * version 3.7: e4m3 with 192- and 224-key tiles (FlashAttention-3's FP8
 *   width at d128 is 224). In e4m3 a tile's two GEMMs take half the tensor
 *   core time of 16-bit ones while its per-tile work (row max shuffles,
 *   O's rescale, the turns and barriers) stays, so that work is a larger
 *   share; a wider tile spreads it over more keys. V^T's tile is then two
 *   128-key chunks (D x 128 bytes each), the second loaded whole.
 * version 3.11: 192x128 tiles at d = 128 (e4m3 and 16-bit): three consumer
 *   warpgroups at 160 registers. A turn issues P_{j-1} V_{j-1} from
 *   registers and waits for it before S_j, so that P and S are never live
 *   together. (The orders with P in shared memory and SS wgmma for P V,
 *   SM90_3WG = 1 and 2, measured 4.7-5.8% slower and were taken out:
 *   docs/kernels.md; their code is in commit 6565b0d.)
 * version 3.12: a plain non-causal grid whose last wave is partly empty
 *   has that wave's blocks cut into k key ranges (cuda_fused_configs.h's
 *   sm90_tail_k): their partials merged by the split combine over those
 *   blocks' rows, the last wave k times shorter or nearly.
 * version 3.13: consumer warpgroups whose rows are all padding (a short
 *   last row block) leave at once; the turns and the stages' empty
 *   barriers are of the active ones.
 * (version 3.14, e4m3's V transposed in shared memory by the producer
 *   warpgroup instead of sm90_vt_kernel's pass, measured 2.2-5.8% slower
 *   and taken out: docs/kernels.md; its code is in commit 5d96873.)
 * version 3.15: in e4m3 kernels S's first k-slice writes its accumulators
 *   without reading them (SM90_S_W), so S_{j-1} is dead after its softmax
 *   (about 1% on e4m3's 192x128 tiles; 16-bit kernels measured slower).
 * version 3.17: a warp none of whose rows grew past their maxima by more
 *   than tau takes the tile's exponentials against the old maxima, with
 *   no shuffles, alpha or O rescale (SM90_SPEC, below: the 16-bit d = 128
 *   kernels, 0.5-1.8% on the 8k anchors; e4m3 since SM90_P_LOG2 is 6).
 * (version 3.19, e4m3's Q in registers and S by RS wgmma, measured
 *   0.5-4.7% slower and taken out: docs/kernels.md; its code is in
 *   commit 8ad86fa.)
 * (version 3.18, e4m3's exponentials in turns, 3.6-6.8% slower; 3.20,
 *   e4m3's P converted by integer arithmetic, its rate alone no faster;
 *   3.21, e4m3's row sums from P V's product with each tile's from zero,
 *   8-20% slower: all taken out, docs/kernels.md; code in cef78e2.)
 * (version 3.22, the next tile's barriers tested under the softmax:
 *   e4m3 192x128 1.2-2.4% slower, taken out; code in 3a12ebb.)
 * (version 3.23, e4m3's speculation check as one vote: 0.996 at 2
 *   stages, 1.017-1.019 at 3, no gain, taken out; version 3.24, the
 *   check after the exponentials: its forms spill at 160 registers,
 *   1.22-2.0x slower, taken out, code in 097acc4; version 3.25, S in two
 *   halves, the first half's softmax under the second's product:
 *   1.02-1.05x on e4m3, 1.18x on bf16, taken out, code in 61b752e.)
 * (version 3.26, e4m3's P without an exponential: its code by one FFMA
 *   onto 1.5 * 2^23 (the byte linear in log2 of its value), the row sums
 *   from the code shifted into f32's fields; right (3.1e-2 against
 *   2.66e-2) but 1.02-1.10x slower on every e4m3 tile, 1.09-1.10x on
 *   192x128: taken out, code in e99b3ec.)
 * (version 3.30, a warpgroup whose rows see none of its first (causal
 *   diagonal) tile's last 64 keys running that tile's S and P V over its
 *   first 64 only (SM90_DIAG_HALF, plain 16-bit 128-key tiles): 1.3-4.6%
 *   slower on an H100 (bench/switches-h100-851756e.txt), taken out:
 *   docs/kernels.md, version 3.30; code in f57dcb2.)
 */
#include "cuda_fused_sm90a.h"
#include "cuda_fused_common.cuh" /* smem_u32, pack2, ex2, the split-KV combine */
#include "launch.cuh"             /* cu_launch, cu_ok */
#include "cuda_fused_configs.h" /* SM90_CONFIGS, head dims, shared memory, the fold */

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <type_traits>

/* The device code exists only in the sm_90a pass; any other pass (a build
 * that forgot the target) gets kernels that trap, and the host side lists
 * nothing unless the device is 9.0. */
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define SM90A_DEVICE 1
#endif

namespace {

/* SM90_PERSIST: 0 in this unit, the claim order (1 or 2) in
 * cuda_fused_persist_sm90a.cu's (version 3.28, below). */
#ifdef SM90_PERSIST
#error "SM90_PERSIST is set by cuda_fused_persist_sm90a.cu, not by hand: persist=1 is a tactic; SM90_PERSIST_CLAIM=1|2 picks its claim order"
#endif
#ifdef SM90_PERSIST_UNIT
#ifndef SM90_PERSIST_CLAIM
#define SM90_PERSIST_CLAIM 2
#endif
#if SM90_PERSIST_CLAIM != 1 && SM90_PERSIST_CLAIM != 2
#error "SM90_PERSIST_CLAIM: 1 (the next item claimed early) or 2 (claimed late)"
#endif
#define SM90_PERSIST SM90_PERSIST_CLAIM
#else
#define SM90_PERSIST 0
#endif

struct sm90_args {
    void *o;
    float *part_o, *part_lse; /* splits > 1: cuda_fused_common.cuh's partials */
    int b, hq, hkv, g, sq, skv, d;
    int64_t osb, osh, oss; /* element strides of the o view (batch, head, row) */
    int causal;
    float sl2;       /* log2(e) / sqrt(d) */
    int units;       /* blocks' heads: b*hq, or b*hkv folded (one unit = one KV head's g heads) */
    int nrb;         /* row blocks per unit: ceil(sq / QB) */
    int lqb;         /* folded: log2 QB, QB = 128 / g queries per head in a block */
    int splits;      /* key ranges per row block (1: none); the host's, the kernel reads tail0 and tailk */
    int tail0, tailk; /* blocks from tail0 on are cut into tailk key ranges each (splits: 0 and
                         splits; version 3.12's cut last wave: its first block and k; none: INT_MAX, 1) */
    int64_t prow0, prows; /* the partials hold rows [prow0, prow0 + prows) of the b*hq*sq rows */
    int chunk;       /* causal: units per longest-first chunk */
    int clast;       /* causal: the last chunk's index; it runs to the last unit (version 3.31) */
    const float *dsc[3]; /* e4m3: the descale factors of q, k, v (device) */
#if SM90_PERSIST
    int items;           /* the grid's blocks, now items */
    unsigned *work;      /* the items' counter (workspace, zeroed before the launch) */
#endif
};

/* e4m3 (version 3.5): P is quantised as P * 2^SM90_P_LOG2 (P <= 1, so at
 * most 64 of e4m3's 448 at 6), the scale folded into the exponent, and
 * O's denominator sums the scaled P alike: small probabilities keep
 * e4m3's normal range, as cuDNN's FP8 graph does. 6, the default since
 * 2026-12-07 (version 3.5 to 3.20: 8), leaves SM90_SPEC's tau room (2.8
 * instead of 0.8, below), so e4m3 kernels speculate: 0.982-0.994 of the
 * time on the 8k anchors' 192x128 tiles, error 2.57e-2 -> 2.66e-2, in
 * two runs on two H100s; the GPU suite passed built so (docs/kernels.md
 * 3.17). -DSM90_P_LOG2=8.0f builds the old form. */
#ifndef SM90_P_LOG2
#define SM90_P_LOG2 6.0f
#endif

/* Version 3.17: where no row of a warp grew past the maximum of its
 * tiles before by more than SM90_SPEC_TAU (log2 units of the scaled
 * scores), the warp takes the tile's exponentials against those old
 * maxima: no shuffles for the quad's maxima, no alpha, no O rescale.
 * Each thread checks its own keys of its rows (so the whole quad's row
 * is seen by the warp's vote); the check's max chain runs over four
 * partials. A warp where some row grew runs the exact softmax. TAU keeps
 * P = 2^(x - m) under 2^TAU: 8 for 16-bit data, and for e4m3, whose
 * scaled P = 2^(x - m + SM90_P_LOG2) must stay under 448, log2(448) -
 * SM90_P_LOG2 less a margin for ex2.approx. */
/* SM90_SPEC: 0 none (the exact softmax always); 1 every kernel; 2 (the
 * default since 2026-12-07) where it was measured faster: the d = 128
 * kernels not folded, 16-bit (0.982-0.996 of the time on bf16's 192x128
 * and 128x176 tiles of the 8k anchors), and e4m3 only where SM90_P_LOG2
 * leaves a tau of 2 or more (at 8, tau 0.8, nearly every tile fell back
 * to the exact softmax after the check: 1.06-1.08; at 6, 0.983-0.994).
 * H100, docs/kernels.md 3.17; the GPU suite passed built with 1. */
#ifndef SM90_SPEC
#define SM90_SPEC 2
#endif
static_assert(SM90_SPEC >= 0 && SM90_SPEC <= 2, "SM90_SPEC: 0, 1 or 2");
#define SM90_SPEC_ON(D, FOLD, F8)                                                                 \
    (SM90_SPEC == 1 || (SM90_SPEC == 2 && (D) == 128 && !(FOLD) && (!(F8) || SM90_SPEC_TAU(true) >= 2.f)))
#define SM90_SPEC_TAU(F8) ((F8) ? 8.8f - SM90_P_LOG2 : 8.f)

/* Independent partial maxima and sums per row in the softmax (version
 * 3.10): one running value is a chain of BC/8 dependent instructions
 * between S's wgmma and the first exponential, and ncu finds the e4m3
 * kernel's warps waiting on such fixed-latency dependencies more than on
 * anything else. sm90_tree gives the partials per configuration, from
 * ABBA A/Bs on an H100 (docs/kernels.md, version 3.10): 2 for e4m3 up to
 * 192-key tiles (2.4-6.1% faster at 128x128, 1-3.6% at 128x192), 1 at 224
 * (2 and 4 were 1.2-3% slower there) and for 16-bit tiles (4 was 1.7%
 * slower at bf16 128x128; 2 not measured). SM90_TREE=N, when defined,
 * sets N everywhere (bench/build_ab.sh -DSM90_TREE=N); a power of two. */
template <bool F8, int BC>
__device__ constexpr int sm90_tree()
{
#ifdef SM90_TREE
    static_assert(SM90_TREE >= 1 && (SM90_TREE & (SM90_TREE - 1)) == 0, "SM90_TREE: a power of two");
    return SM90_TREE;
#else
    return F8 && BC <= 192 ? 2 : 1;
#endif
}

/* e4m3: of every 16 key columns' 8-wide tiles, this many (0, 1, 2, 4 or
 * 8) have their exponentials taken on the FMA pipe (sm90_ex2_fma), the
 * rest on the MUFU, which at 16 a cycle per SM takes as long as a 64 x
 * 128 x 128 tile's two FP8 GEMMs. 0 (MUFU only) by default; an A/B
 * switch (bench/build_ab.sh -DSM90_E4M3_POLY=N). Measured slower on the
 * best tiles each time: version 3.5's 128x128 with 2-8 (H200), and
 * 3.11's 192x128 and 128x192 with 1 and 2, 2-6% (H100, 2026-12-06;
 * docs/kernels.md). */
#ifndef SM90_E4M3_POLY
#define SM90_E4M3_POLY 0
#endif
static_assert(SM90_E4M3_POLY >= 0 && SM90_E4M3_POLY <= 8 && (SM90_E4M3_POLY & (SM90_E4M3_POLY - 1)) == 0,
              "SM90_E4M3_POLY: 0, 1, 2, 4 or 8");
/* 8-key tile nt takes the FMA pipe where nt % this == 0 (with POLY > 0) */
constexpr int SM90_POLY_EVERY = SM90_E4M3_POLY > 0 ? 16 / SM90_E4M3_POLY : 1;

/* 2^x on the FMA pipe for x <= 8 (-inf included), not the MUFU: x's
 * nearest integer j into the exponent, 2^(x - j) on [-0.5, 0.5] by a
 * degree-2 minimax polynomial (relative error under 1.8e-3; e4m3's P
 * rounds by up to 6.25% after it). x is clamped at -126, so -inf and
 * anything under 2^-126 read as about 1.2e-38: P's e4m3 value of it is
 * 0 (P is stored as P * 256), and a row sum meets it only beside terms
 * >= 1 (the row's max). */
__device__ __forceinline__ float sm90_ex2_fma(float x)
{
    x = fmaxf(x, -126.f);
    const float t = x + 12582912.f; /* 1.5 * 2^23: round(x) in its low mantissa bits */
    const float f = x - (t - 12582912.f);
    const float q = fmaf(fmaf(0.238428913f, f, 0.703448004f), f, 1.00044314f);
    return __int_as_float(__float_as_int(q) + (__float_as_int(t) << 23));
}

/* 1: the producer ends with a bounded wait until the last STAGES tiles'
 * stages are freed (see the kernel), so that no consumer wait can hang
 * unbounded; 0: that gap stays, as before 2026-12-05. 0 by default until
 * the GPU suite and an A/B of its cost have run with 1 (written in a
 * session with no GPU; docs/kernels.md, version 3.11). */
#ifndef SM90_TAIL_WAIT
#define SM90_TAIL_WAIT 0
#endif

/* Version 3.29 (1 by default since version 3.32, after its A/B on an
 * H100: 0.955-1.003 of the copy loop's time, median 0.985, on both units'
 * winners; docs/kernels.md): 1 sends a warpgroup's staged output tile out
 * by TMA (cp.async.bulk.tensor, shared to global, one thread) instead of
 * every thread's 16-byte loads and stores, so that the warpgroup waits
 * only for the bulk copy's read of shared memory before its next item
 * (persist=1) or its end. TMA clips the rows past sq and the columns past
 * d, as the copy loop skips them. A fourth tensor map, over o (box 64
 * rows, or a folded block's QB per head). 0: the copy loop, for the A/B
 * (bench/build_ab.sh -DSM90_TMA_STORE=0). */
#ifndef SM90_TMA_STORE
#define SM90_TMA_STORE 1
#endif
#if SM90_TMA_STORE
#define SM90_TO_PARAM , const __grid_constant__ CUtensorMap to
#define SM90_TO_TYPE , CUtensorMap
#define SM90_TO_ARG , to
#else
#define SM90_TO_PARAM
#define SM90_TO_TYPE
#define SM90_TO_ARG
#endif

/* 1 (default): a block's consumer warpgroups with no real row leave at
 * once (version 3.13); 0: they run the key loop on padding as before, for
 * the A/B (bench/build_ab.sh -DSM90_SKIP_IDLE=0). */
#ifndef SM90_SKIP_IDLE
#define SM90_SKIP_IDLE 1
#endif

/* Version 3.27, a tactic since version 3.28 (persist=1; docs/kernels.md):
 * the grid persistent. One block per SM takes the items (the blocks of
 * the grid it replaces, in their order: causal longest first) from a
 * counter in the workspace, zeroed before each launch; its producer loads
 * the next item's Q into a second buffer under this item's tiles, the K/V
 * ring runs on across items, and the consumer warpgroups' turns run on
 * from one item into the next, so a block's start (Q's latency, the first
 * tile's S and softmax alone) and end (the last P V and the epilogue) no
 * longer leave the tensor cores idle once per item. Every consumer
 * warpgroup stays for every item (version 3.13's leaving is off).
 *
 * This file is built twice: as itself (SM90_PERSIST 0, every other
 * tactic) and by cuda_fused_persist_sm90a.cu, which defines
 * SM90_PERSIST_UNIT and so builds the same kernels persistent, with one
 * entry point, cuda_fused_sm90a_persist_launch, where this unit's launch
 * sends the persist=1 tactics. So the other tactics' code is what it was,
 * byte for byte (bench/sass_diff.sh), and each form keeps its own text
 * where they differ. SM90_PERSIST_CLAIM picks when a block claims its
 * next item: 2 (the default since 2026-12-07: late) or 1 (early, as 3.27
 * was first measured); the producer's comment says both. SM90_PERSIST is
 * defined at the top, before sm90_args. */

template <typename T>
struct sm90_is_fp8 : std::is_same<T, __nv_fp8_e4m3> {};
/* the output type: the input's, bf16 for e4m3 */
template <typename T>
using sm90_out_t = typename std::conditional<sm90_is_fp8<T>::value, __nv_bfloat16, T>::type;
/* Whether S's first k-slice is written without being read (SM90_S_W:
 * 0 never, 1 always, 2 for e4m3 only). */
template <typename T>
__host__ __device__ constexpr bool sm90_s_w()
{
    return SM90_S_W == 1 || (SM90_S_W == 2 && sm90_is_fp8<T>::value);
}

/* ---- PTX wrappers (sm_90a) */

#ifdef SM90A_DEVICE
/* mbar_init, mbar_expect_tx, mbar_arrive, mbar_wait (bounded),
 * mbar_wait_hot, tma_load_4d: cuda_fused_common.cuh */

__device__ __forceinline__ void wgmma_fence()
{
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

__device__ __forceinline__ void wgmma_commit()
{
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

/* Wait until at most N committed wgmma groups of this warp are pending. */
template <int N>
__device__ __forceinline__ void wgmma_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

/* Named barriers of the two consumer warpgroups' turns (ids 1, 2; 0 is
 * __syncthreads): sync waits for the barrier's 256 threads, arrive counts
 * this warp's and goes on. */
__device__ __forceinline__ void named_sync(int id)
{
    asm volatile("bar.sync %0, 256;\n" ::"r"(id) : "memory");
}

__device__ __forceinline__ void named_arrive(int id)
{
    asm volatile("bar.arrive %0, 256;\n" ::"r"(id) : "memory");
}

/* The accumulators of an in-flight wgmma are not to be touched by other
 * instructions: this empty asm makes the compiler treat them as rewritten
 * here, so no read of them is moved above the wait that precedes it. */
template <int N>
__device__ __forceinline__ void reg_fence(float (&r)[N])
{
#pragma unroll
    for (int i = 0; i < N; i++)
        asm volatile("" : "+f"(r[i])::"memory");
}
#endif

#ifdef SM90A_DEVICE
/* Four floats -> one register of four e4m3 (a in the lowest byte): round
 * to nearest, saturating at 448. */
__device__ __forceinline__ uint32_t pack4_e4m3(float a, float b, float c, float d)
{
    const uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
    const uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(c, d), __NV_SATFINITE, __NV_E4M3);
    return lo | (hi << 16);
}

/* A descale factor (attn_io.descale: NULL means 1). */
__device__ __forceinline__ float descale(const float *x)
{
    return x != NULL ? *x : 1.f;
}
#endif

/* Shared-memory matrix descriptor of wgmma: start address, leading and
 * stride byte offsets (all >> 4), 128-byte swizzle (mode 1 in bits 62-63).
 * Tiles are stored as TMA's SWIZZLE_128B writes them: 64-column chunks of
 * 128-byte rows, 8 rows forming one 1024-byte swizzle atom.
 *   K-major operand (Q as A, K as B): rows (M or N) at 128 B, groups of 8
 *     rows at SBO = 1024; LBO unused (the k16 slice lies inside one row);
 *     the k-th 16-column slice starts 32*k bytes into the row (the swizzle
 *     applies to address bits, so the start moves plainly).
 *   MN-major operand (V as B, transposed): 64 N-columns contiguous per key
 *     row, keys at 128 B, groups of 8 keys at SBO = 1024, the next 64
 *     N-columns one chunk further at LBO = chunk bytes. */
__device__ __forceinline__ uint64_t sw128_desc(uint32_t addr, uint32_t lbo, uint32_t sbo)
{
    return (uint64_t)((addr & 0x3ffff) >> 4) | ((uint64_t)(lbo >> 4) << 16) | ((uint64_t)(sbo >> 4) << 32) |
           (1ull << 62);
}

/* Byte offset of 16-byte unit u of row r in a tile of 128-byte rows with
 * the 128-byte swizzle (as TMA's SWIZZLE_128B writes it, the tile on a
 * 1024-byte atom): the unit lands at u ^ (r % 8). */
__device__ __forceinline__ uint32_t sw128_off(int r, int u)
{
    return (uint32_t)(r * 128 + ((u ^ (r & 7)) << 4));
}

#ifdef SM90A_DEVICE
__device__ __forceinline__ void st_shared_b32(uint32_t addr, uint32_t v)
{
    asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}
#endif

#ifdef SM90A_DEVICE
/* ---- wgmma m64nNk16, f32 accumulators: N = 64, 80, 128 or 176 for S (the
 * key tile), 64 or 128 for O (its columns per instruction).
 * ss: A and B from shared memory by descriptor; rs: A from registers in
 * mma.sync's A-fragment layout (per warp 16 rows of the 64). TB: B is
 * MN-major (transposed). scale_d = 0 overwrites d instead of adding.
 * Accumulator d[4*j + e] of warp w, lane 4*gr + tq: row 16w + gr + 8*(e/2),
 * column 8j + 2tq + e%2 (mma.sync's C layout, one 8-column tile per j).
 * The accumulators are operands %0 .. %(N/2 - 1); the operands after them
 * are numbered on from N/2, which the macros' OPS strings spell out. */
#define WG_R32 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
               "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define WG_R40 WG_R32 ", %32, %33, %34, %35, %36, %37, %38, %39"
#define WG_R64 WG_R32 ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
               "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define WG_R88 WG_R64 ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
               "%80, %81, %82, %83, %84, %85, %86, %87"
#define WG_R96 WG_R88 ", %88, %89, %90, %91, %92, %93, %94, %95"
#define WG_R112 WG_R96 ", %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, " \
               "%110, %111"
/* C: the accumulators' constraint, "+f" (read and written) or "=f"
 * (written only: the _w products, scale_d = 0, so that S's old values are
 * not kept live up to the next S_j's issue). */
#define WG_D8(C, d, i) C(d[i]), C(d[i + 1]), C(d[i + 2]), C(d[i + 3]), C(d[i + 4]), C(d[i + 5]), C(d[i + 6]), \
                       C(d[i + 7])
#define WG_ACC32(C, d) WG_D8(C, d, 0), WG_D8(C, d, 8), WG_D8(C, d, 16), WG_D8(C, d, 24)
#define WG_ACC40(C, d) WG_ACC32(C, d), WG_D8(C, d, 32)
#define WG_ACC64(C, d) WG_ACC32(C, d), WG_D8(C, d, 32), WG_D8(C, d, 40), WG_D8(C, d, 48), WG_D8(C, d, 56)
#define WG_ACC88(C, d) WG_ACC64(C, d), WG_D8(C, d, 64), WG_D8(C, d, 72), WG_D8(C, d, 80)
#define WG_ACC96(C, d) WG_ACC88(C, d), WG_D8(C, d, 88)
#define WG_ACC112(C, d) WG_ACC96(C, d), WG_D8(C, d, 96), WG_D8(C, d, 104)
/* One instruction's text: PRED is the scale_d operand, OPS the A, B and
 * immediate operands after the accumulators. */
#define WG_TEXT(N, TY, REGS, PRED, OPS)                                                         \
    "{\n.reg .pred p;\nsetp.ne.b32 p, " PRED ", 0;\n"                                          \
    "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TY "." TY " " REGS "}, " OPS ";\n}\n"
#define WG_SS_DEF(N, REGS, ACC, PRED, OPS)                                                      \
    template <typename T, int TB>                                                                \
    __device__ __forceinline__ void wgmma_ss_n##N(float (&d)[N / 2], uint64_t da, uint64_t db, int scale_d) \
    {                                                                                            \
        if constexpr (std::is_same<T, __nv_bfloat16>::value)                                     \
            asm volatile(WG_TEXT(N, "bf16", REGS, PRED, OPS)                                     \
                         : ACC("+f", d) : "l"(da), "l"(db), "r"(scale_d), "n"(TB));               \
        else                                                                                     \
            asm volatile(WG_TEXT(N, "f16", REGS, PRED, OPS)                                      \
                         : ACC("+f", d) : "l"(da), "l"(db), "r"(scale_d), "n"(TB));               \
    }                                                                                            \
    template <typename T, int TB>                                                                \
    __device__ __forceinline__ void wgmma_ss_n##N##_w(float (&d)[N / 2], uint64_t da, uint64_t db) \
    {                                                                                            \
        if constexpr (std::is_same<T, __nv_bfloat16>::value)                                     \
            asm volatile(WG_TEXT(N, "bf16", REGS, PRED, OPS)                                     \
                         : ACC("=f", d) : "l"(da), "l"(db), "r"(0), "n"(TB));                     \
        else                                                                                     \
            asm volatile(WG_TEXT(N, "f16", REGS, PRED, OPS)                                      \
                         : ACC("=f", d) : "l"(da), "l"(db), "r"(0), "n"(TB));                     \
    }
#define WG_RS_DEF(N, REGS, ACC, PRED, OPS)                                                      \
    template <typename T, int TB>                                                                \
    __device__ __forceinline__ void wgmma_rs_n##N(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t db, \
                                                  int scale_d)                                   \
    {                                                                                            \
        if constexpr (std::is_same<T, __nv_bfloat16>::value)                                     \
            asm volatile(WG_TEXT(N, "bf16", REGS, PRED, OPS)                                     \
                         : ACC("+f", d)                                                          \
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d), "n"(TB)); \
        else                                                                                     \
            asm volatile(WG_TEXT(N, "f16", REGS, PRED, OPS)                                      \
                         : ACC("+f", d)                                                          \
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d), "n"(TB)); \
    }
WG_SS_DEF(64, WG_R32, WG_ACC32, "%34", "%32, %33, p, 1, 1, 0, %35")
WG_SS_DEF(128, WG_R64, WG_ACC64, "%66", "%64, %65, p, 1, 1, 0, %67")
WG_SS_DEF(80, WG_R40, WG_ACC40, "%42", "%40, %41, p, 1, 1, 0, %43")
WG_SS_DEF(176, WG_R88, WG_ACC88, "%90", "%88, %89, p, 1, 1, 0, %91")
WG_RS_DEF(64, WG_R32, WG_ACC32, "%37", "{%32, %33, %34, %35}, %36, p, 1, 1, %38")
WG_RS_DEF(128, WG_R64, WG_ACC64, "%69", "{%64, %65, %66, %67}, %68, p, 1, 1, %70")
/* e4m3 x e4m3 -> f32, k32 (no transpose: both operands K-major); S's N
 * is the key tile: 128, 192 or 224. */
#define WG8_TEXT(N, REGS, PRED, OPS)                                                            \
    "{\n.reg .pred p;\nsetp.ne.b32 p, " PRED ", 0;\n"                                          \
    "wgmma.mma_async.sync.aligned.m64n" #N "k32.f32.e4m3.e4m3 " REGS "}, " OPS ";\n}\n"
#define WG8_SS_DEF(N, REGS, ACC, PRED, OPS)                                                     \
    __device__ __forceinline__ void wgmma8_ss_n##N(float (&d)[N / 2], uint64_t da, uint64_t db, int scale_d) \
    {                                                                                            \
        asm volatile(WG8_TEXT(N, REGS, PRED, OPS) : ACC("+f", d) : "l"(da), "l"(db), "r"(scale_d)); \
    }                                                                                            \
    __device__ __forceinline__ void wgmma8_ss_n##N##_w(float (&d)[N / 2], uint64_t da, uint64_t db) \
    {                                                                                            \
        asm volatile(WG8_TEXT(N, REGS, PRED, OPS) : ACC("=f", d) : "l"(da), "l"(db), "r"(0));    \
    }
WG8_SS_DEF(128, WG_R64, WG_ACC64, "%66", "%64, %65, p, 1, 1")
WG8_SS_DEF(192, WG_R96, WG_ACC96, "%98", "%96, %97, p, 1, 1")
WG8_SS_DEF(224, WG_R112, WG_ACC112, "%114", "%112, %113, p, 1, 1")
#undef WG8_SS_DEF
__device__ __forceinline__ void wgmma8_rs_n128(float (&d)[64], const uint32_t (&a)[4], uint64_t db, int scale_d)
{
    asm volatile(WG8_TEXT(128, WG_R64, "%69", "{%64, %65, %66, %67}, %68, p, 1, 1")
                 : WG_ACC64("+f", d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d));
}
#undef WG8_TEXT
#undef WG_SS_DEF
#undef WG_RS_DEF
#undef WG_TEXT
#undef WG_ACC112
#undef WG_ACC96
#undef WG_ACC88
#undef WG_ACC64
#undef WG_ACC40
#undef WG_ACC32
#undef WG_D8
#undef WG_R112
#undef WG_R96
#undef WG_R88
#undef WG_R64
#undef WG_R40
#undef WG_R32

/* TMA of one tile: its column chunks of 128 bytes (boxes of 128 / ES
 * columns x rows, chunk_bytes apart in shared memory) at row c1 of head c2
 * of batch c3 of map, all completing on bar. ES: element bytes. */
template <int D, int ES = 2>
__device__ __forceinline__ void tma_load_tile(uint32_t dst, uint32_t chunk_bytes, const CUtensorMap *map, int c1,
                                              int c2, int c3, uint32_t bar)
{
#pragma unroll
    for (int c = 0; c < D * ES / 128; c++)
        tma_load_4d(dst + c * chunk_bytes, map, c * (128 / ES), c1, c2, c3, bar);
}
#if SM90_TMA_STORE
/* TMA store of one box from shared memory (src) to map at (c0 .. c3), in
 * this thread's bulk group (version 3.29). */
__device__ __forceinline__ void tma_store_4d(const CUtensorMap *map, uint32_t src, int c0, int c1, int c2, int c3)
{
    asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n" ::"l"(map),
                 "r"(src), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
                 : "memory");
}
#endif
#endif

/* One k-slice of S (SS wgmma, N keys): the first (first: scale_d = 0)
 * writes the accumulators without reading them where SM90_S_W says so
 * (2: e4m3 only), so that the old S is not kept live (the "+f" of the
 * others reads it). */
template <typename T, int N>
__device__ __forceinline__ void wgmma_s(float (&d)[N / 2], uint64_t da, uint64_t db, bool first)
{
#ifdef SM90A_DEVICE
#define WG_S_CASE(F, ...)                                                                        \
    if (sm90_s_w<T>() && first)                                                                  \
        F##_w __VA_ARGS__(d, da, db);                                                            \
    else                                                                                         \
        F __VA_ARGS__(d, da, db, !first);
    if constexpr (sm90_is_fp8<T>::value) {
        static_assert(N == 128 || N == 192 || N == 224, "e4m3 S widths built");
        if constexpr (N == 128) { WG_S_CASE(wgmma8_ss_n128) }
        else if constexpr (N == 192) { WG_S_CASE(wgmma8_ss_n192) }
        else { WG_S_CASE(wgmma8_ss_n224) }
    } else {
        static_assert(N == 64 || N == 80 || N == 128 || N == 176, "16-bit S widths built");
        if constexpr (N == 64) { WG_S_CASE(wgmma_ss_n64, <T, 0>) }
        else if constexpr (N == 80) { WG_S_CASE(wgmma_ss_n80, <T, 0>) }
        else if constexpr (N == 128) { WG_S_CASE(wgmma_ss_n128, <T, 0>) }
        else { WG_S_CASE(wgmma_ss_n176, <T, 0>) }
    }
#undef WG_S_CASE
#endif
}

/* S += Q K^T over D (SS wgmma, N = BC), zero-initialised by the first
 * slice. A slice is 32 bytes of each row (k16 of 16-bit data, k32 of
 * e4m3), four to a 128-byte chunk. */
template <typename T, int D, int BC, int BR>
__device__ __forceinline__ void gemm_qk(float (&s)[BC / 2], uint32_t aQ, uint32_t aK)
{
    if constexpr (sm90_is_fp8<T>::value) {
        static_assert(D == 128 && (BC == 128 || BC == 192 || BC == 224), "e4m3: one 128-byte chunk per row");
#pragma unroll
        for (int kk = 0; kk < 4; kk++)
            wgmma_s<T, BC>(s, sw128_desc(aQ + kk * 32, 16, 1024), sw128_desc(aK + kk * 32, 16, 1024), kk == 0);
    } else {
        static_assert(BC == 64 || BC == 80 || BC == 128 || BC == 176, "the key tiles built");
#pragma unroll
        for (int kk = 0; kk < D / 16; kk++)
            wgmma_s<T, BC>(s, sw128_desc(aQ + (kk / 4) * BR * 128 + (kk % 4) * 32, 16, 1024),
                           sw128_desc(aK + (kk / 4) * BC * 128 + (kk % 4) * 32, 16, 1024), kk == 0);
    }
}

/* O += P V over BC keys (RS wgmma, N = ON columns per instruction, D / ON
 * instructions per 16-key slice). */
template <typename T, int D, int BC, int ON, int KS>
__device__ __forceinline__ void gemm_pv(float (&o)[D / ON][ON / 2], const uint32_t (&p)[BC / KS][4], uint32_t aV)
{
#ifdef SM90A_DEVICE
    if constexpr (sm90_is_fp8<T>::value) {
        /* e4m3: V^T's tile, D rows of BC keys in 128-key chunks (D x 128
         * bytes each), K-major like K in gemm_qk; its keys permuted within
         * each 32 as P's registers hold them (sm90_vt_kernel). */
        static_assert(D == 128 && BC % 32 == 0 && ON == 128, "e4m3: D = 128, whole k32 slices");
#pragma unroll
        for (int kk = 0; kk < BC / 32; kk++)
            wgmma8_rs_n128(o[0], p[kk], sw128_desc(aV + (kk / 4) * D * 128 + (kk % 4) * 32, 16, 1024), 1);
    } else {
#pragma unroll
        for (int kk = 0; kk < BC / 16; kk++)
#pragma unroll
            for (int c = 0; c < D / ON; c++) {
                const uint64_t db = sw128_desc(aV + c * (ON / 64) * BC * 128 + kk * 16 * 128, BC * 128, 1024);
                if constexpr (ON == 128)
                    wgmma_rs_n128<T, 1>(o[c], p[kk], db, 1);
                else
                    wgmma_rs_n64<T, 1>(o[c], p[kk], db, 1);
            }
    }
#endif
}

/* Shared memory of one configuration: Q, then STAGES K buffers, then
 * STAGES V buffers, each [128-byte chunks][rows][128 B] (e4m3's V^T: D
 * rows of BC keys, in 128-key chunks, a partial last chunk loaded whole:
 * vt bytes); e4m3 then the bf16 output's staging (BR x D x 2: Q's buffer
 * is half that); 1024 more bytes to align the start to a swizzle atom.
 * ES: element bytes. */
template <int D, int BR, int BC, int STAGES, int ES = 2>
struct sm90_smem {
    static constexpr uint32_t q = BR * D * ES, kv = BC * D * ES, ost = ES == 1 ? BR * D * 2 : 0;
    static constexpr uint32_t vt = ES == 1 ? SM90_E4M3_VT_CHUNKS(BC) * 128 * D : kv; /* one V buffer */
    static constexpr size_t bytes = ES == 1 ? SM90_SMEM_E4M3(D, BR, BC, STAGES) : SM90_SMEM(D, BR, BC, STAGES);
    static_assert(bytes == (size_t)q + STAGES * ((size_t)kv + vt) + ost + 1024, "the layout below");
    static_assert(kv % 1024 == 0 && vt % 1024 == 0, "buffers on whole swizzle atoms");
};

/* SM90_PERSIST: Q's buffers, 2 where a second fits in a block's 227 KB
 * (after the layout above; 256 bytes kept for the static barriers and
 * slots), else 1. */
#define SM90_SMEM_MAX 232448
template <int D, int BR, int BC, int STAGES, int ES>
__host__ __device__ constexpr int sm90_qbuf()
{
    using L = sm90_smem<D, BR, BC, STAGES, ES>;
    return L::bytes + L::q + 256 <= SM90_SMEM_MAX ? 2 : 1;
}
template <int D, int BR, int BC, int STAGES, int ES>
constexpr size_t sm90_smem_bytes()
{
    using L = sm90_smem<D, BR, BC, STAGES, ES>;
    return L::bytes + (SM90_PERSIST ? (size_t)(sm90_qbuf<D, BR, BC, STAGES, ES>() - 1) * L::q : 0);
}

/* setmaxnreg's register pool, for a block of nwg consumer warpgroups
 * and one producer warpgroup: each thread starts with the launch bounds'
 * registers (65536 / threads, down to a multiple of 8: ptxas allocates so
 * for a kernel that uses setmaxnreg), and the consumers' increase must
 * fit in what the producer's decrease frees, or it waits forever. Two
 * consumer warpgroups at 240 with the producer at 24 fit exactly; at 32
 * (version 3.14's transposers, docs/kernels.md) they did not. Checked
 * here, outside the kernel: a static_assert inside it changed the PTX's
 * register numbering, and ptxas's allocation with it. */
constexpr bool sm90_regs_fit(int nwg, int producer, int consumer)
{
    return ((65536 / (128 * (nwg + 1))) / 8 * 8 - producer) * 128 >=
           (consumer - (65536 / (128 * (nwg + 1))) / 8 * 8) * 128 * nwg;
}
static_assert(sm90_regs_fit(2, 24, 240) && sm90_regs_fit(3, 24, 160) && !sm90_regs_fit(2, 32, 240),
              "the setmaxnreg values of fused_sm90_kernel (24; 240 for two consumer warpgroups, 160 for three)");

/* Version 3. Tensor maps: q over [b*hq][sq][d] (box 64 x 128 rows, or
 * 64 x QB folded), k and v over [b*hkv][skv][d] (box 64 x BC), all with the
 * real lengths as their extents, so rows past sq or skv and columns past d
 * arrive as zeros (TMA fills out-of-bounds elements with 0 and still counts
 * the whole box). FOLD: the block's rows are the g query heads of one KV
 * head (version 3.1). p.splits key ranges per row block, folded or not. */
#if SM90_TRACE
/* The trace (SM90_TRACE=1 builds only): per block b < SM90_TR_BLOCKS,
 * slot [b][cw][it][e] the clock64 of event e of key tile it in consumer
 * warpgroup cw's thread 0, and [b][SM90_TR_WG][0][*] the block's header:
 * %smid, the clock at its start (thread 0), at its last consumer's end,
 * ntiles, nact, BR, BC, the dtype's bytes plus 256 where the turns are in
 * the overlapped order. Events of a tile, turn order 0
 * (the 192x128 tiles): 0 start, 1 V_{j-1} arrived, 2 turn taken, 3 P V
 * retired, 4 K_j arrived, 5 S_j issued and the turn given, 6 S_j retired,
 * 7 softmax and O's rescale done. Overlapped order (the 2-warpgroup
 * tiles): 0 start, 1 K_j arrived, 2 turn taken, 3 both issued and the turn
 * given, 4 S_j retired, 5 softmax done, 6 P V retired, 7 O rescaled.
 * [b][SM90_TR_WG][1][0]: the last consumer's epilogue done (its stores
 * issued; not for key splits); [1][1]: Q arrived, as warpgroup 0 saw it.
 * SM90_PERSIST: row b is item b (the block it replaces), its start when
 * warpgroup 0 read its slot, and 512 added to the header's flags. */
#define SM90_TR_BLOCKS 528
#define SM90_TR_WG 4
#define SM90_TR_IT 80
#define SM90_TR_EV 8
__device__ unsigned long long sm90_trace[SM90_TR_BLOCKS][SM90_TR_WG + 1][SM90_TR_IT][SM90_TR_EV];
#define SM90_TR(itv, ev)                                                                             \
    (tr_on && (itv) < SM90_TR_IT ? (void)(sm90_trace[trb][cw][itv][ev] = clock64()) : (void)0)
#else
#define SM90_TR(itv, ev) ((void)0)
#endif

/* A block's work (fused_sm90_kernel's item_of): its key split sp of nsp,
 * its first query head (b*hq + h) and row, both as the tensor maps'
 * (batch, head) coordinates, its KV head's, its key tiles [tlo, thi) and
 * the consumer warpgroups with a real row (nact). */
struct sm90_item {
    int sp, nsp, head0, qb_, qh0, kb_, kh_, i0, tlo, thi, ntiles, nact;
};

template <typename T, int D, int BR, int BC, int STAGES, bool PP, bool FOLD>
__global__ void __launch_bounds__(128 * (BR / 64 + 1), 1)
    fused_sm90_kernel(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tk,
                      const __grid_constant__ CUtensorMap tv SM90_TO_PARAM, const sm90_args p)
{
#ifndef SM90A_DEVICE
    __trap();
#else
    constexpr int NWG = BR / 64, NT = BC / 8, ON = D < 128 ? D : 128, OC = D / ON;
    constexpr int ES = (int)sizeof(T), KS = 32 / ES; /* element bytes, keys per k-slice */
    constexpr bool F8 = sm90_is_fp8<T>::value;
    constexpr int TR = sm90_tree<F8, BC>();
    /* Intra-warpgroup overlap (S_j issued before P_{j-1} V_{j-1}, the
     * softmax of S_j under that product) keeps S_j, O and P_{j-1} live
     * together: e4m3 at 128x128 needs about 176 registers a consumer so
     * (ptxas). Three consumer warpgroups get 160, so at d = 128 (version
     * 3.11: e4m3 and 16-bit 192x128 tiles; d = 64 fits as it is) the
     * overlap goes: turn order 0, P_{j-1} V_{j-1} from registers, waited
     * for inside the turn, then S_j; only the other warpgroups' turns
     * overlap a softmax. (P in shared memory by SS wgmma, orders 1 and 2,
     * then order 3, order 1 with P from registers, and ending order 0's
     * turn after P V's issue or dropping the turns were measured slower on
     * 2026-12-06 and taken out: docs/kernels.md, version 3.11; so was
     * order 4, S_j's first keys issued behind P V: version 3.15.) */
    constexpr bool W3 = SM90_W3(D, BR); /* e4m3 is always D = 128 */
    constexpr bool OVL = !W3;
    static_assert(!FOLD || BR == 128, "folded blocks are 128 rows");
    static_assert(!F8 || !FOLD, "e4m3 is not folded");
    static_assert(!F8 || BC >= 128, "e4m3: V^T in whole 128-key boxes (L::vt counts them)");
    using L = sm90_smem<D, BR, BC, STAGES, ES>;
    using TO = sm90_out_t<T>;
    extern __shared__ unsigned char smem_raw[];
    __shared__ __align__(8) uint64_t bars[1 + 4 * STAGES];

    const uint32_t base = (smem_u32(smem_raw) + 1023u) & ~1023u;
    const uint32_t aQ = base, aK0 = base + L::q, aV0 = aK0 + STAGES * L::kv, aOst = aV0 + STAGES * L::vt;
    const uint32_t bQ = smem_u32(&bars[0]);
    /* full K, empty K, full V, empty V of stage s */
#define BAR_FK(s) (bQ + 8u * (1 + (s)))
#define BAR_EK(s) (bQ + 8u * (1 + STAGES + (s)))
#define BAR_FV(s) (bQ + 8u * (1 + 2 * STAGES + (s)))
#define BAR_EV(s) (bQ + 8u * (1 + 3 * STAGES + (s)))

    const int tid = threadIdx.x, wg = tid / 128;
#if SM90_PERSIST
    /* (The persistent unit's copy of the mapping below, as a function of
     * the item, as the producer's load_kv further down is a copy taking
     * the item's KV head: the default keeps its own text so that its code
     * stays byte for byte what was measured (bench/sass_diff.sh). Merged,
     * the default unit's mapping as item_of(blockIdx.x) changed 27 of its
     * 28 kernels' code (tried 2026-12-07, with no device time left to
     * measure it), so each pair becomes one with a GPU A/B, not before.)
     * Block x -> its item (split sp of nsp, unit u, row block mb, and
     * what follows from them). Blocks from p.tail0 on are cut into
     * p.tailk key ranges, splits fastest (every block with key splits;
     * version 3.12: the last wave's). Causal: sm90_causal_item's order
     * (cuda_fused_configs.h: longest-first chunks of units, the last one
     * merged up to two waves, version 3.31). Otherwise unit after unit. */
    auto item_of = [&](int x) {
        const int qb = FOLD ? 1 << p.lqb : BR; /* QB, below */
        sm90_item w;
        w.sp = 0, w.nsp = 1;
        if (x >= p.tail0) {
            const int t = x - p.tail0;
            w.nsp = p.tailk;
            w.sp = t % w.nsp;
            x = p.tail0 + t / w.nsp;
        }
        int u, mb;
        if (p.causal) {
            sm90_causal_item(x, p.chunk, p.clast, p.units, p.nrb, &u, &mb);
        } else {
            u = x / p.nrb;
            mb = x - u * p.nrb;
        }
        w.head0 = FOLD ? u * p.g : u; /* b*hq + h of the block's first query head */
        const int kvrow = FOLD ? u : u / p.g; /* b*hkv + its KV head */
        /* as (batch, head) coordinates of the 4-d maps: a folded block's g
         * heads lie in one batch (g divides hq) */
        w.qb_ = w.head0 / p.hq, w.qh0 = w.head0 - w.qb_ * p.hq;
        w.kb_ = kvrow / p.hkv, w.kh_ = kvrow - w.kb_ * p.hkv;
        w.i0 = mb * qb;
        int kend = p.skv;
        if (p.causal)
            kend = min(kend, min(w.i0 + qb, p.sq) + p.skv - p.sq);
        /* Key tiles [tlo, thi) of this block: all that its last query sees,
         * or this split's share of them (whole tiles; a share may be empty). */
        const int nall = kend > 0 ? (kend + BC - 1) / BC : 0;
        w.tlo = 0, w.thi = nall;
        if (w.nsp > 1) {
            const int tps = (nall + w.nsp - 1) / w.nsp;
            w.tlo = min(nall, w.sp * tps);
            w.thi = min(nall, w.tlo + tps);
        }
        w.ntiles = w.thi - w.tlo;
        /* Version 3.13: the consumer warpgroups with a real row (the first
         * nact; a block's last row block may hold fewer than BR real rows).
         * The others leave at once and take no turn: a 192-row block of 128
         * real rows runs as a 128-row one. Folded blocks: every warpgroup
         * holds each head's first query. SM90_SKIP_IDLE=0 keeps them all
         * (the A/B); so does SM90_PERSIST (its turns run on across items). */
        w.nact = !SM90_PERSIST && SM90_SKIP_IDLE && !FOLD ? min(NWG, (p.sq - w.i0 + 63) / 64) : NWG;
        return w;
    };
#define SM90_ITEM_VARS(w)                                                                              \
    const int sp = (w).sp, nsp = (w).nsp, head0 = (w).head0, qb_ = (w).qb_, qh0 = (w).qh0, kb_ = (w).kb_, \
              kh_ = (w).kh_;                                                                                \
    const int i0 = (w).i0, tlo = (w).tlo, thi = (w).thi, ntiles = (w).ntiles, nact = (w).nact
    /* Persistent (SM90_PERSIST, above): Q in QBUF buffers (the second after
     * the whole layout), each with a full and an empty barrier and a slot
     * for its item's index (-1: no more). */
    constexpr int QBUF = sm90_qbuf<D, BR, BC, STAGES, ES>();
    __shared__ __align__(8) uint64_t qbars[4];
    __shared__ int qslot[2];
    const uint32_t aQ1 = base + (uint32_t)(L::bytes - 1024);
#define BAR_QF(b) smem_u32(&qbars[(b)])
#define BAR_QE(b) smem_u32(&qbars[2 + (b)])
    /* Packed row r (0..127) of a folded block is query head head0 + (r >> lqb),
     * query i0 + (r & (QB - 1)); unfolded, QB = BR and row r is query i0 + r
     * of head0. */
    const int lqb = FOLD ? p.lqb : 0, QB = FOLD ? 1 << lqb : BR;
    auto qrow = [&](int r) { return FOLD ? (r & (QB - 1)) : r; };
    auto hrow = [&](int r) { return FOLD ? r >> lqb : 0; };
    const int off = p.skv - p.sq; /* causal: query i sees keys j <= i + off */

#define SM90_NWARPS (4 * NWG) /* every consumer warpgroup stays for every item */
#else
    /* Block -> (split sp of nsp, unit u, row block mb). Blocks from
     * p.tail0 on are cut into p.tailk key ranges, splits fastest (every
     * block with key splits; version 3.12: the last wave's). Causal:
     * sm90_causal_item's order (cuda_fused_configs.h: longest-first chunks
     * of units, the last one merged up to two waves, version 3.31).
     * Otherwise unit after unit. */
    int sp = 0, nsp = 1, x = (int)blockIdx.x;
    if (x >= p.tail0) {
        const int t = x - p.tail0;
        nsp = p.tailk;
        sp = t % nsp;
        x = p.tail0 + t / nsp;
    }
    int u, mb;
    if (p.causal) {
        sm90_causal_item(x, p.chunk, p.clast, p.units, p.nrb, &u, &mb);
    } else {
        u = x / p.nrb;
        mb = x - u * p.nrb;
    }
    /* Packed row r (0..127) of a folded block is query head head0 + (r >> lqb),
     * query i0 + (r & (QB - 1)); unfolded, QB = BR and row r is query i0 + r
     * of head0. */
    const int lqb = FOLD ? p.lqb : 0, QB = FOLD ? 1 << lqb : BR;
    auto qrow = [&](int r) { return FOLD ? (r & (QB - 1)) : r; };
    auto hrow = [&](int r) { return FOLD ? r >> lqb : 0; };
    const int head0 = FOLD ? u * p.g : u; /* b*hq + h of the block's first query head */
    const int kvrow = FOLD ? u : u / p.g; /* b*hkv + its KV head */
    /* as (batch, head) coordinates of the 4-d maps: a folded block's g
     * heads lie in one batch (g divides hq) */
    const int qb_ = head0 / p.hq, qh0 = head0 - qb_ * p.hq;
    const int kb_ = kvrow / p.hkv, kh_ = kvrow - kb_ * p.hkv;
    const int i0 = mb * QB;
    const int off = p.skv - p.sq; /* causal: query i sees keys j <= i + off */
    int kend = p.skv;
    if (p.causal)
        kend = min(kend, min(i0 + QB, p.sq) + off);
    /* Key tiles [tlo, thi) of this block: all that its last query sees, or
     * this split's share of them (whole tiles; a share may be empty). */
    const int nall = kend > 0 ? (kend + BC - 1) / BC : 0;
    int tlo = 0, thi = nall;
    if (nsp > 1) {
        const int tps = (nall + nsp - 1) / nsp;
        tlo = min(nall, sp * tps);
        thi = min(nall, tlo + tps);
    }
    const int ntiles = thi - tlo;
    /* Version 3.13: the consumer warpgroups with a real row (the first
     * nact; a block's last row block may hold fewer than BR real rows).
     * The others leave at once and take no turn: a 192-row block of 128
     * real rows runs as a 128-row one. Folded blocks: every warpgroup
     * holds each head's first query. SM90_SKIP_IDLE=0 keeps them all (the
     * A/B). */
    const int nact = SM90_SKIP_IDLE && !FOLD ? min(NWG, (p.sq - i0 + 63) / 64) : NWG;

#define SM90_NWARPS (4 * nact)
#endif

    if (tid == 0) {
        mbar_init(bQ, 1);
        for (int s = 0; s < STAGES; s++) {
            mbar_init(BAR_FK(s), 1);
            mbar_init(BAR_EK(s), SM90_NWARPS); /* lane 0 of each active consumer warp */
            mbar_init(BAR_FV(s), 1);
            mbar_init(BAR_EV(s), SM90_NWARPS);
        }
#if SM90_PERSIST
        for (int b = 0; b < 2; b++) {
            mbar_init(BAR_QF(b), 1);
            mbar_init(BAR_QE(b), SM90_NWARPS);
        }
#endif
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    }
#if SM90_TRACE && !SM90_PERSIST
    if (tid == 0 && blockIdx.x < SM90_TR_BLOCKS) {
        unsigned long long *h = sm90_trace[blockIdx.x][SM90_TR_WG][0];
        uint32_t smid;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
        h[0] = smid, h[1] = clock64(), h[3] = (unsigned long long)ntiles, h[4] = (unsigned long long)nact;
        h[5] = BR, h[6] = BC, h[7] = sizeof(T) | (SM90_W3(D, BR) ? 0 : 256);
    }
#endif
    __syncthreads();

    if (wg == 0) {
        /* ---- producer: Q (one box per query head), then K_t and V_t for
         * t = thi - 1 down to tlo through the ring. */
#if SM90_PERSIST
        asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n");
        /* (The default's load_kv below, the item's KV head as arguments;
         * see the mapping's copy above for why there are two.)
         * Wait until the consumers freed stage s, then refill it. */
        /* e4m3's V is V^T (keys along its rows): boxes of 128 keys x D,
         * one per 128-key chunk of the tile (a partial last chunk is
         * loaded whole: its keys past the tile are never multiplied).
         * A chunk that starts at or past skv holds only masked keys (P
         * = 0 there): it is loaded from the chunk holding the last key
         * instead, so that no box lies wholly outside the tensor and
         * the buffer holds finite values (0 x NaN would poison O). */
        auto load_kv = [&](uint32_t empty, uint32_t full, uint32_t dst, const CUtensorMap *map, int row,
                           uint32_t ph, bool vt, int kh, int kb) {
            mbar_wait(empty, ph ^ 1u);
            mbar_expect_tx(full, F8 && vt ? L::vt : L::kv);
            if (F8 && vt) {
#pragma unroll
                for (int c = 0; c < SM90_E4M3_VT_CHUNKS(BC); c++) {
                    const int r = row + c * 128;
                    tma_load_4d(dst + c * D * 128, map, r < p.skv ? r : (p.skv - 1) / 128 * 128, 0, kh, kb, full);
                }
            } else {
                tma_load_tile<D, ES>(dst, BC * 128, map, row, kh, kb, full);
            }
        };
        /* Tiles [a, e) of an item, the ring's count at its tile 0 kv. */
        auto load_tiles = [&](const sm90_item &v, int a, int e, uint32_t kv) {
            for (int it = a; it < e; it++) {
                const int row = (v.thi - 1 - it) * BC, s = (int)((kv + it) % STAGES);
                const uint32_t ph = ((kv + it) / STAGES) & 1u;
                load_kv(BAR_EK(s), BAR_FK(s), aK0 + s * L::kv, &tk, row, ph, false, v.kh_, v.kb_);
                load_kv(BAR_EV(s), BAR_FV(s), aV0 + s * L::vt, &tv, row, ph, true, v.kh_, v.kb_);
            }
        };
        if (tid == 0) {
            /* Items from the launch's counter, in the grid's order (causal:
             * longest first). The kq-th item published goes to Q buffer kq
             * % QBUF once the consumers freed it: its slot, then its Q (or,
             * none left, -1 and a plain arrive). Two buffers: the next
             * item's Q loads under this one's tiles; one: after them (the
             * item published after its own first STAGES tiles).
             * When the next item is claimed, with two buffers: SM90_PERSIST
             * 1, after this item's first STAGES tiles (measured so, 1118c53:
             * a long causal item then holds its claim on the next one for
             * its whole length, where the hardware's scheduler gives a
             * block to the SM that frees first); 2 (the default), after
             * this item's last tile is loaded (the ring's STAGES tiles
             * before its end: late enough for longest-first, early enough
             * to hide Q's load). On an H100 (bench/persist-claim-h100-
             * 2026-12-07.txt) 2 took 0.948 of 1's time on the 8k causal
             * anchor's 128x128 and 192x128 tiles, 0.97-1.00 on the 2k
             * causal one's, 0.995-1.017 on the 8k e4m3 non-causal one's. */
            int kq = 0;
            auto publish = [&](int xi) {
                const int b = kq % QBUF;
                mbar_wait(BAR_QE(b), ((uint32_t)(kq / QBUF) & 1u) ^ 1u);
                qslot[b] = xi < p.items ? xi : -1;
                if (xi < p.items) {
                    const sm90_item v = item_of(xi);
                    mbar_expect_tx(BAR_QF(b), L::q);
                    for (int hh = 0; hh < (FOLD ? p.g : 1); hh++)
                        tma_load_tile<D, ES>((b ? aQ1 : aQ) + hh * QB * 128, BR * 128, &tq, v.i0, v.qh0 + hh,
                                             v.qb_, BAR_QF(b));
                } else {
                    mbar_arrive(BAR_QF(b));
                }
                kq++;
            };
            uint32_t kv = 0;
            int x = (int)atomicAdd(p.work, 1u);
            if (QBUF == 2)
                publish(x);
            constexpr bool late = SM90_PERSIST == 2;
            while (x < p.items) {
                const sm90_item v = item_of(x);
                const int nfirst = min(STAGES, v.ntiles);
                load_tiles(v, 0, nfirst, kv);
                int xn = x;
                if (QBUF == 2 && !late)
                    publish(xn = (int)atomicAdd(p.work, 1u));
                else if (QBUF == 1)
                    publish(x);
                load_tiles(v, nfirst, v.ntiles, kv);
                kv += (uint32_t)v.ntiles;
                if (QBUF == 2 && late)
                    publish(xn = (int)atomicAdd(p.work, 1u));
                x = QBUF == 2 ? xn : (int)atomicAdd(p.work, 1u);
            }
            if (QBUF == 1)
                publish(x); /* none left */
        }
        return;
    }
#else
        asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n");
        if (tid == 0 && ntiles > 0) {
            mbar_expect_tx(bQ, L::q);
            for (int hh = 0; hh < (FOLD ? p.g : 1); hh++)
                tma_load_tile<D, ES>(aQ + hh * QB * 128, BR * 128, &tq, i0, qh0 + hh, qb_, bQ);
            /* Wait until the consumers freed stage s, then refill it. */
            /* e4m3's V is V^T (keys along its rows): boxes of 128 keys x D,
             * one per 128-key chunk of the tile (a partial last chunk is
             * loaded whole: its keys past the tile are never multiplied).
             * A chunk that starts at or past skv holds only masked keys (P
             * = 0 there): it is loaded from the chunk holding the last key
             * instead, so that no box lies wholly outside the tensor and
             * the buffer holds finite values (0 x NaN would poison O). */
            auto load_kv = [&](uint32_t empty, uint32_t full, uint32_t dst, const CUtensorMap *map, int row,
                               uint32_t ph, bool vt) {
                mbar_wait(empty, ph ^ 1u);
                mbar_expect_tx(full, F8 && vt ? L::vt : L::kv);
                if (F8 && vt) {
#pragma unroll
                    for (int c = 0; c < SM90_E4M3_VT_CHUNKS(BC); c++) {
                        const int r = row + c * 128;
                        tma_load_4d(dst + c * D * 128, map, r < p.skv ? r : (p.skv - 1) / 128 * 128, 0, kh_, kb_,
                                    full);
                    }
                } else {
                    tma_load_tile<D, ES>(dst, BC * 128, map, row, kh_, kb_, full);
                }
            };
            for (int it = 0; it < ntiles; it++) {
                const int row = (thi - 1 - it) * BC, s = it % STAGES;
                const uint32_t ph = (uint32_t)(it / STAGES) & 1u;
                load_kv(BAR_EK(s), BAR_FK(s), aK0 + s * L::kv, &tk, row, ph, false);
                load_kv(BAR_EV(s), BAR_FV(s), aV0 + s * L::vt, &tv, row, ph, true);
            }
#if SM90_TAIL_WAIT
            /* The consumers' per-tile waits are unbounded (mbar_wait_hot);
             * one stuck in tile it is ended by the bounded wait above for
             * tile it + STAGES's stage, which the last STAGES tiles lack.
             * So the producer waits, bounded, until the consumers have
             * freed those tiles' stages too (they free the last V after
             * its product), and a hang there faults the kernel as well. */
            for (int it = ntiles > STAGES ? ntiles - STAGES : 0; it < ntiles; it++) {
                const uint32_t ph = (uint32_t)(it / STAGES) & 1u;
                mbar_wait(BAR_EK(it % STAGES), ph);
                mbar_wait(BAR_EV(it % STAGES), ph);
            }
#endif
        }
        return;
    }

#endif

    /* ---- consumers: warpgroup cw owns packed rows 64 cw .. 64 cw + 63
     * (none real past the first nact: those leave).
     * Registers: 24 x 128 for the producer leaves 240 for 2 consumer
     * warpgroups, 160 for 3, within the 64K of the SM. */
#if !SM90_PERSIST
    if (wg - 1 >= nact)
        return;
#endif
    if constexpr (NWG == 2)
        asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n");
    else
        asm volatile("setmaxnreg.inc.sync.aligned.u32 160;\n");
    const int cw = wg - 1, lane = tid & 31, wq = (tid / 32) & 3;
    const int gr = lane >> 2, tq4 = lane & 3;
#if SM90_TRACE && !SM90_PERSIST
    const int trb = (int)blockIdx.x; /* the trace's row: the block's */
    const bool tr_on = trb < SM90_TR_BLOCKS && (tid & 127) == 0;
#endif
    const int lr0 = cw * 64 + wq * 16 + gr; /* this thread's packed rows: lr0, lr0 + 8 */
    /* e4m3: S of the stored values times descale_q descale_k */
    const float sl2 = F8 ? p.sl2 * descale(p.dsc[0]) * descale(p.dsc[1]) : p.sl2;
#if SM90_PERSIST
    /* The items as the producer published them (its slot, Q's buffer
     * kq % QBUF), until -1; kv0: the ring's count at the item's first
     * tile; started: the turn ring has begun (its first arrive made). */
    int kv0 = 0;
    bool started = false;
    for (int kq = 0;; kq++) {
        const int qbi = kq % QBUF;
        mbar_wait(BAR_QF(qbi), (uint32_t)(kq / QBUF) & 1u);
        const int x = *reinterpret_cast<volatile int *>(&qslot[qbi]);
        if (x < 0) {
            /* the last warpgroup's last arrive on warpgroup 0's turn */
            if (PP && NWG > 1 && started && cw == 0)
                named_sync(1);
            break;
        }
        const sm90_item w = item_of(x);
        SM90_ITEM_VARS(w);
        (void)kb_, (void)kh_, (void)tlo; /* the producer's */
#if SM90_TRACE
        /* persistent: the trace's rows are items (x < SM90_TR_BLOCKS), each
         * with its header as a block's, started when its slot was read */
        const int trb = x;
        const bool tr_on = trb < SM90_TR_BLOCKS && (tid & 127) == 0;
        if (tr_on && cw == 0) {
            unsigned long long *h = sm90_trace[trb][SM90_TR_WG][0];
            uint32_t smid;
            asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
            h[0] = smid, h[1] = clock64(), h[3] = (unsigned long long)ntiles, h[4] = (unsigned long long)nact;
            h[5] = BR, h[6] = BC, h[7] = sizeof(T) | (SM90_W3(D, BR) ? 0 : 256) | 512;
        }
#endif
        const uint32_t aQc = qbi ? aQ1 : aQ;
#else
    {
        constexpr int kv0 = 0;
        constexpr bool started = false;
        const uint32_t aQc = aQ;
#endif
    const int qi[2] = {i0 + qrow(lr0), i0 + qrow(lr0 + 8)}; /* their queries */
    const int qmin = i0 + qrow(cw * 64); /* the warpgroup's first query */
    const uint32_t aQw = aQc + cw * 64 * 128;
    /* The ring's stage and phase of the item's key tile i */
    auto stg = [&](int i) { return (kv0 + i) % STAGES; };
    auto phs = [&](int i) { return (uint32_t)((kv0 + i) / STAGES) & 1u; };
    float o[OC][ON / 2];
#pragma unroll
    for (int c = 0; c < OC; c++)
#pragma unroll
        for (int i = 0; i < ON / 2; i++)
            o[c][i] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
    float s[BC / 2];
#pragma unroll
    for (int i = 0; i < BC / 2; i++)
        s[i] = 0.f;
    uint32_t pf[BC / KS][4];

    /* The tile of keys n0 .. n0 + BC - 1 holds keys some row must not
     * see: past the real skv or, causal, past the first query's diagonal.
     * (A macro: as a lambda it renumbered the PTX's registers, and
     * ptxas's allocation may follow; this way softmax and softmax_spec
     * share it with the kernels' PTX unchanged.) */
#define SM90_TILE_MASKED(n0) ((n0) + BC > p.skv || (p.causal && (n0) + BC - 1 > qmin + off))
    /* The exponent base of a row whose scaled max is ms: e4m3's P is
     * scaled by 2^SM90_P_LOG2 (into e4m3's range), 16-bit P is not. */
    auto p_base = [&](float ms) { return F8 ? ms - SM90_P_LOG2 : ms; };
    /* Row rh's exponentials 2^(s sl2 - mp), P in place in s, and its
     * denominator l = l alpha + the row's sum (TR partials). */
    auto exps = [&](int rh, float mp, const float (&alpha)[2]) {
        float ps[TR];
#pragma unroll
        for (int t = 0; t < TR; t++)
            ps[t] = 0.f;
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
            const float x0 = fmaf(s[4 * nt + 2 * rh], sl2, -mp), x1 = fmaf(s[4 * nt + 2 * rh + 1], sl2, -mp);
            if (F8 && SM90_E4M3_POLY > 0 && nt % SM90_POLY_EVERY == 0) {
                s[4 * nt + 2 * rh] = sm90_ex2_fma(x0);
                s[4 * nt + 2 * rh + 1] = sm90_ex2_fma(x1);
            } else {
                s[4 * nt + 2 * rh] = ex2(x0);
                s[4 * nt + 2 * rh + 1] = ex2(x1);
            }
            ps[nt % TR] += s[4 * nt + 2 * rh] + s[4 * nt + 2 * rh + 1];
        }
#pragma unroll
        for (int w = 1; w < TR; w *= 2)
#pragma unroll
            for (int t = 0; t + w < TR; t += 2 * w)
                ps[t] += ps[t + w];
        l[rh] = l[rh] * alpha[rh] + ps[0];
    };
    /* Mask keys past the real skv and, causal, past each row's diagonal
     * (its own query's: folded rows of one warpgroup hold several heads'
     * queries; tiles wholly below the first query's diagonal need neither);
     * then the online softmax (version 1's softmax_step): max over the quad,
     * P in place in s, the row sums; O's rescale by alpha is left to the
     * caller, which must first let the PV product in flight retire. A row
     * with no visible key yet keeps m = -inf and uses 0 as its exponent
     * base, so every term is 2^-inf = 0. */
    auto softmax = [&](int n0, float (&alpha)[2]) {
        if (SM90_TILE_MASKED(n0)) {
#pragma unroll
            for (int rh = 0; rh < 2; rh++) {
                const int lim = p.causal ? min(p.skv, qi[rh] + off + 1) : p.skv;
#pragma unroll
                for (int nt = 0; nt < NT; nt++)
#pragma unroll
                    for (int e = 0; e < 2; e++)
                        if (n0 + nt * 8 + 2 * tq4 + e >= lim)
                            s[4 * nt + 2 * rh + e] = -INFINITY;
            }
        }
#pragma unroll
        for (int rh = 0; rh < 2; rh++) {
            /* The row's max and sum over TR independent partials
             * (sm90_tree: 1 is one running value). */
            float pm[TR];
#pragma unroll
            for (int t = 0; t < TR; t++)
                pm[t] = t == 0 ? m[rh] : -INFINITY;
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
                pm[nt % TR] = fmaxf(pm[nt % TR], fmaxf(s[4 * nt + 2 * rh], s[4 * nt + 2 * rh + 1]));
#pragma unroll
            for (int w = 1; w < TR; w *= 2)
#pragma unroll
                for (int t = 0; t + w < TR; t += 2 * w)
                    pm[t] = fmaxf(pm[t], pm[t + w]);
            float mx = pm[0];
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            const float ms = mx == -INFINITY ? 0.f : mx * sl2;
            alpha[rh] = ex2(m[rh] * sl2 - ms);
            m[rh] = mx;
            exps(rh, p_base(ms), alpha);
        }
    };
    /* O *= alpha, then P as the A operand of the next 16-key slices: the
     * accumulator fragment of two adjacent 8-key tiles is the A fragment
     * of one k16 slice (a repack, no shuffle). */
    /* Named barrier of this warpgroup's 128 threads alone: ids past the
     * turn barriers 1 .. NWG (one id used with two thread counts is an
     * illegal instruction: the first 3-warpgroup build shared id 3). */
    auto wg_sync = [&]() { asm volatile("bar.sync %0, 128;\n" ::"r"(1 + NWG + cw) : "memory"); };
    auto rescale_pack = [&](const float (&alpha)[2], bool rescale = true) {
        if (rescale) {
#pragma unroll
            for (int c = 0; c < OC; c++)
#pragma unroll
                for (int j = 0; j < ON / 8; j++) {
                    o[c][4 * j + 0] *= alpha[0];
                    o[c][4 * j + 1] *= alpha[0];
                    o[c][4 * j + 2] *= alpha[1];
                    o[c][4 * j + 3] *= alpha[1];
                }
        }
        if constexpr (F8) {
            /* e4m3, k32: register r of the A fragment holds 4 keys of one
             * row (r even: row gr, odd: gr + 8), logical keys 4 tq4 .. +3
             * (+16 for r >= 2); it takes the thread's accumulator pairs of
             * two adjacent 8-key tiles, physical keys 2 tq4, +1, 8 + 2 tq4,
             * +1, so V^T's keys are permuted alike (sm90_vt_kernel). */
#pragma unroll
            for (int kk = 0; kk < BC / 32; kk++)
#pragma unroll
                for (int r = 0; r < 4; r++) {
                    const int t0 = 4 * kk + 2 * (r / 2), e = 2 * (r % 2);
                    pf[kk][r] = pack4_e4m3(s[4 * t0 + e], s[4 * t0 + e + 1], s[4 * t0 + 4 + e], s[4 * t0 + 5 + e]);
                }
        } else {
#pragma unroll
            for (int kk = 0; kk < BC / 16; kk++) {
                pf[kk][0] = pack2<T>(s[8 * kk + 0], s[8 * kk + 1]);
                pf[kk][1] = pack2<T>(s[8 * kk + 2], s[8 * kk + 3]);
                pf[kk][2] = pack2<T>(s[8 * kk + 4], s[8 * kk + 5]);
                pf[kk][3] = pack2<T>(s[8 * kk + 6], s[8 * kk + 7]);
            }
        }
    };

    /* SM90_SPEC (version 3.17, above): the softmax of an unmasked tile
     * against the maxima m of the tiles before, P in place in s. Returns
     * true if it ran (l updated; O needs no rescale), false if the warp
     * must run softmax() instead (s, m, l untouched): a tile that needs
     * masking, a row with no key seen yet, or one grown past its max by
     * more than SM90_SPEC_TAU. */
    auto softmax_spec = [&](int n0) -> bool {
        if constexpr (!SM90_SPEC_ON(D, FOLD, F8)) {
            return false;
        } else {
            const bool masked = SM90_TILE_MASKED(n0);
            if (__any_sync(0xffffffffu, masked || m[0] == -INFINITY || m[1] == -INFINITY))
                return false;
            bool grew = false;
#pragma unroll
            for (int rh = 0; rh < 2; rh++) {
                float pm[4] = {m[rh], -INFINITY, -INFINITY, -INFINITY};
#pragma unroll
                for (int nt = 0; nt < NT; nt++)
                    pm[nt % 4] = fmaxf(pm[nt % 4], fmaxf(s[4 * nt + 2 * rh], s[4 * nt + 2 * rh + 1]));
                grew = grew || fmaxf(fmaxf(pm[0], pm[1]), fmaxf(pm[2], pm[3])) * sl2 - m[rh] * sl2 >
                                   SM90_SPEC_TAU(F8);
            }
            if (__any_sync(0xffffffffu, grew))
                return false;
            const float keep[2] = {1.f, 1.f}; /* l's alpha: the maxima stay */
#pragma unroll
            for (int rh = 0; rh < 2; rh++)
                exps(rh, p_base(m[rh] * sl2), keep);
            return true;
        }
    };

    /* Pingpong (PP): the consumer warpgroups take turns issuing their
     * products, in a ring, so that one's softmax runs under another's GEMMs.
     * Turn barrier 1 + cw is warpgroup cw's: it syncs on it before issuing
     * and arrives on the next one's after. Each warpgroup has ntiles + 1
     * turns; the last warpgroup lets warpgroup 0 go first and skips its last
     * arrive, so every arrive meets a sync. The ring is of the nact active
     * warpgroups; one alone takes no turns. */
    const bool pp = PP && nact > 1;
    auto turn_begin = [&]() {
        if (pp)
            named_sync(1 + cw);
    };
    auto turn_end = [&](bool last) {
        if (pp && !(!SM90_PERSIST && last && cw == nact - 1))
            named_arrive(cw + 1 < nact ? 2 + cw : 1);
    };

    if (ntiles > 0) {
#if !SM90_PERSIST
        mbar_wait(bQ, 0);
#endif
#if SM90_TRACE
        if (tr_on && cw == 0)
            sm90_trace[trb][SM90_TR_WG][1][1] = clock64();
#endif
        if (pp && cw == nact - 1 && !started)
            named_arrive(1);
#if SM90_PERSIST
        started = true;
#endif
        /* First tile (the last keys): S alone. */
        {
            float alpha[2];
            mbar_wait(BAR_FK(stg(0)), phs(0));
            turn_begin();
            wgmma_fence();
            gemm_qk<T, D, BC, BR>(s, aQw, aK0 + stg(0) * L::kv);
            wgmma_commit();
            turn_end(false);
            wgmma_wait<0>();
            reg_fence(s);
            if (lane == 0)
                mbar_arrive(BAR_EK(stg(0)));
            softmax((thi - 1) * BC, alpha);
            rescale_pack(alpha);
        }
        /* Tile j: S_j = Q K_j^T issued, O += P_{j-1} V_{j-1} behind it; the
         * softmax of S_j runs while the PV product is in flight. */
        for (int it = 1; it < ntiles; it++) {
            const int st = stg(it), pst = stg(it - 1);
            float alpha[2];
            if constexpr (!OVL) {
                /* In one turn: O += P_{j-1} V_{j-1}, waited for (P_{j-1}'s
                 * registers are free after it), then S_j; the softmax of
                 * S_j runs under the other warpgroups' turns. */
                SM90_TR(it, 0);
                mbar_wait_hot(BAR_FV(pst), phs(it - 1));
                SM90_TR(it, 1);
                turn_begin();
                SM90_TR(it, 2);
                wgmma_fence();
                gemm_pv<T, D, BC, ON, KS>(o, pf, aV0 + pst * L::vt);
                wgmma_commit();
                wgmma_wait<0>();
#pragma unroll
                for (int c = 0; c < OC; c++)
                    reg_fence(o[c]);
                SM90_TR(it, 3);
                if (lane == 0)
                    mbar_arrive(BAR_EV(pst));
                mbar_wait_hot(BAR_FK(st), phs(it));
                SM90_TR(it, 4);
                wgmma_fence();
                gemm_qk<T, D, BC, BR>(s, aQw, aK0 + st * L::kv);
                wgmma_commit();
                turn_end(false);
                SM90_TR(it, 5);
                wgmma_wait<0>();
                reg_fence(s);
                SM90_TR(it, 6);
                if (lane == 0)
                    mbar_arrive(BAR_EK(st));
                const bool fast = softmax_spec((thi - 1 - it) * BC);
                if (!fast)
                    softmax((thi - 1 - it) * BC, alpha);
                rescale_pack(alpha, !fast);
                SM90_TR(it, 7);
                continue;
            }
            SM90_TR(it, 0);
            mbar_wait_hot(BAR_FK(st), phs(it));
            SM90_TR(it, 1);
            turn_begin();
            SM90_TR(it, 2);
            wgmma_fence();
            gemm_qk<T, D, BC, BR>(s, aQw, aK0 + st * L::kv);
            wgmma_commit();
            mbar_wait_hot(BAR_FV(pst), phs(it - 1));
            wgmma_fence();
            gemm_pv<T, D, BC, ON, KS>(o, pf, aV0 + pst * L::vt);
            wgmma_commit();
            turn_end(false);
            SM90_TR(it, 3);
            wgmma_wait<1>(); /* S_j done */
            reg_fence(s);
            SM90_TR(it, 4);
            if (lane == 0)
                mbar_arrive(BAR_EK(st));
            const bool fast = softmax_spec((thi - 1 - it) * BC);
            if (!fast)
                softmax((thi - 1 - it) * BC, alpha);
            SM90_TR(it, 5);
            wgmma_wait<0>(); /* P_{j-1} V_{j-1} done */
#pragma unroll
            for (int c = 0; c < OC; c++)
                reg_fence(o[c]);
            SM90_TR(it, 6);
            if (lane == 0)
                mbar_arrive(BAR_EV(pst));
            rescale_pack(alpha, !fast);
            SM90_TR(it, 7);
        }
        const int lst = stg(ntiles - 1);
        mbar_wait(BAR_FV(lst), phs(ntiles - 1));
        turn_begin();
        wgmma_fence();
        gemm_pv<T, D, BC, ON, KS>(o, pf, aV0 + lst * L::vt);
        wgmma_commit();
        turn_end(true);
        wgmma_wait<0>();
#pragma unroll
        for (int c = 0; c < OC; c++)
            reg_fence(o[c]);
        if ((SM90_TAIL_WAIT || SM90_PERSIST) && lane == 0)
            mbar_arrive(BAR_EV(lst)); /* the producer's tail wait; persistent: the ring runs on */
#if SM90_TRACE
        if (tr_on && cw == nact - 1)
            sm90_trace[trb][SM90_TR_WG][0][2] = clock64();
#endif
    }
#undef BAR_FK
#undef BAR_EK
#undef BAR_FV
#undef BAR_EV
#undef SM90_TILE_MASKED

    /* ---- epilogue. The softmax denominators of this thread's two rows
     * (the quad's partial sums added up), 0 for a row that saw no key. */
    float den[2];
#pragma unroll
    for (int rh = 0; rh < 2; rh++) {
        den[rh] = l[rh];
        den[rh] += __shfl_xor_sync(0xffffffffu, den[rh], 1);
        den[rh] += __shfl_xor_sync(0xffffffffu, den[rh], 2);
    }
    /* e4m3: O of the stored V, times descale_v (P's scale is in den) */
    const float oscale = F8 ? descale(p.dsc[2]) : 1.f;
    if (nsp > 1) {
        /* A split's f32 partial, normalised by its own denominator, and its
         * log2-sum-exp (cuda_fused_common.cuh's layout over rows p.prow0
         * on, which version 2's combine kernel reads), straight from the
         * accumulators: 8 bytes per thread and row. Real rows and columns
         * only. */
#pragma unroll
        for (int rh = 0; rh < 2; rh++) {
            if (qi[rh] >= p.sq)
                continue;
            const float inv = den[rh] > 0.f ? oscale / den[rh] : 0.f;
            const int64_t rg = sp * p.prows + (int64_t)(head0 + hrow(lr0 + 8 * rh)) * p.sq + qi[rh] - p.prow0;
            float *dst = p.part_o + rg * p.d;
#pragma unroll
            for (int c = 0; c < OC; c++)
#pragma unroll
                for (int j = 0; j < ON / 8; j++) {
                    const int col = c * ON + 8 * j + 2 * tq4;
                    if (col < p.d)
                        *reinterpret_cast<float2 *>(dst + col) =
                            make_float2(o[c][4 * j + 2 * rh] * inv, o[c][4 * j + 2 * rh + 1] * inv);
                }
            if (tq4 == 0)
                p.part_lse[rg] =
                    den[rh] > 0.f ? m[rh] * sl2 + __log2f(den[rh]) - (F8 ? SM90_P_LOG2 : 0.f) : -INFINITY;
        }
#if SM90_PERSIST
    } else { /* the staged store below, as one block */
#else
        return;
    }
#endif
    /* Normalise, stage this warpgroup's 64 x D outputs in its own rows of
     * the Q buffer (no longer read: its last S product retired; the other
     * warpgroup's rows are elsewhere), in the same 128-byte swizzle, so
     * that the 4-byte fragment writes are conflict-free, then send the real
     * rows and columns out: by TMA (SM90_TMA_STORE, the default), or in
     * 16-byte pieces, 8 threads per 128 contiguous bytes. Padded rows are
     * never written. */
    const uint32_t aO = (F8 ? aOst : aQc) + cw * 64 * 128;
#pragma unroll
    for (int rh = 0; rh < 2; rh++) {
        const float inv = den[rh] > 0.f ? oscale / den[rh] : 0.f;
        const int r = wq * 16 + gr + rh * 8;
#pragma unroll
        for (int c = 0; c < OC; c++)
#pragma unroll
            for (int j = 0; j < ON / 8; j++) {
                const int col = c * ON + 8 * j + 2 * tq4;
                const uint32_t a = aO + (col / 64) * BR * 128 + sw128_off(r, (col % 64) / 8) + (col % 8) * 2;
                st_shared_b32(a, pack2<TO>(o[c][4 * j + 2 * rh] * inv, o[c][4 * j + 2 * rh + 1] * inv));
            }
    }
#if SM90_TMA_STORE
    /* Version 3.29: the staged rows out by TMA, box after box (64 rows, or
     * a folded block's QB rows of one head), each D / 64 chunks of 128
     * bytes; the staging is reused (the next item's, or Q's buffer freed
     * to the producer) only once the copies have read it. */
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    wg_sync();
    if ((tid & 127) == 0) {
        const int ob = QB < 64 ? QB : 64;
        for (int k = 0; k < 64; k += ob) {
            const int lr = cw * 64 + k;
#pragma unroll
            for (int c = 0; c < D / 64; c++)
                tma_store_4d(&to, aO + c * BR * 128 + k * 128, c * 64, i0 + qrow(lr), qh0 + hrow(lr), qb_);
        }
        asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
        asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
    }
    wg_sync();
#else
    wg_sync();
    TO *go = reinterpret_cast<TO *>(p.o);
    const int ctid = tid - 128 * wg; /* 0..127 in this warpgroup */
#pragma unroll 4
    for (int idx = ctid; idx < 64 * (D / 8); idx += 128) {
        const int r = idx / (D / 8), cu = idx % (D / 8);
        const int lr = cw * 64 + r, i = i0 + qrow(lr), col = cu * 8;
        if (i >= p.sq || col >= p.d) /* d % 8 == 0: a 16-byte piece is all in or all out */
            continue;
        const uint32_t a = aO + (cu / 8) * BR * 128 + sw128_off(r, cu % 8);
        uint4 v4;
        asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(v4.x), "=r"(v4.y), "=r"(v4.z), "=r"(v4.w)
                     : "r"(a)
                     : "memory");
        *reinterpret_cast<uint4 *>(go + qb_ * p.osb + (int64_t)(qh0 + hrow(lr)) * p.osh + (int64_t)i * p.oss +
                                   col) = v4;
    }
#endif
#if SM90_TRACE
    if (tr_on && cw == nact - 1)
        sm90_trace[trb][SM90_TR_WG][1][0] = clock64();
#endif
#if SM90_PERSIST
        } /* the staged store */
        /* this warp is done with Q's buffer (its S products retired, its
         * staging read back) */
        if (lane == 0)
            mbar_arrive(BAR_QE(qbi));
        kv0 += ntiles;
#endif
    } /* the item */
#undef BAR_QF
#undef BAR_QE
#undef SM90_NWARPS
#endif
}

} /* namespace */

/* ---- launchers */

/* The configurations built, the fold's limits: SM90_CONFIGS and
 * SM90_FOLD_* of cuda_fused_configs.h (their descriptor reads the same). */
/* Key splits are listed while the previous count's grid stays under one
 * block per SM of an H200 (132), as version 2 lists its splits. */
#define SM90_SMS 132
#define SM90_MAX_SPLITS 64
static int sm90_kernel_dim(int64_t d)
{
    return SM90_KERNEL_DIM(d);
}

static bool fold_applies(const attn_shape *s)
{
    const int64_t g = s->hq / s->hkv;
    return SM90_FOLD_APPLIES(g);
}

static int ilog2(int64_t x)
{
    int l = 0;
    while ((1ll << (l + 1)) <= x)
        l++;
    return l;
}

/* Tensor maps: cuda_tma_encode_map, cuda_tma_make_map (cuda_fused_common.cuh). */

/* ---- e4m3: V transposed (version 3.5)
 *
 * FP8 wgmma reads B K-major only, so P V needs V^T: keys along its rows.
 * Byte c of a 32-key group of the k32 A fragment holds the P of physical
 * key sm90_vt_key(c) (rescale_pack: a thread's accumulators of two
 * adjacent 8-key tiles), so V^T's keys are permuted alike within each 32
 * and no shuffle of P is needed. */
__host__ __device__ constexpr int sm90_vt_key(int c)
{
    return (c / 16) * 16 + 8 * ((c % 4) / 2) + 2 * ((c % 16) / 4) + (c % 2);
}

/* vt[bh][r][j] = v[b][h][key][r], key = 32 (j / 32) + sm90_vt_key(j % 32),
 * for r < D and j < keys (rows r >= d and keys >= skv: 0); bh = b * hkv +
 * h. One block of 256 threads per (SM90_VT_KEYS keys, bh): 64 key rows of
 * d bytes in through shared memory, 128 rows of 64 bytes out. */
#if SM90_PERSIST /* the persistent unit's copy, under a name of its own (external linkage) */
#define sm90_vt_kernel sm90_vt_kernel_persist
#endif
__global__ void sm90_vt_kernel(const uint8_t *v, int64_t sb, int64_t sh, int64_t ss, uint8_t *vt, int hkv,
                               int skv, int d, int keys)
{
    constexpr int D = 128, K = SM90_VT_KEYS, RS = D + 16; /* row stride: 16-byte stores */
    __shared__ __align__(16) uint8_t tile[K * RS];
    const int bh = blockIdx.y, b = bh / hkv, h = bh % hkv, k0 = blockIdx.x * K;
    for (int i = threadIdx.x; i < K * (D / 16); i += blockDim.x) {
        const int r = i / (D / 16), c = (i % (D / 16)) * 16;
        uint4 x = make_uint4(0, 0, 0, 0);
        if (k0 + r < skv && c < d)
            x = *reinterpret_cast<const uint4 *>(v + b * sb + h * sh + (int64_t)(k0 + r) * ss + c);
        *reinterpret_cast<uint4 *>(tile + r * RS + c) = x;
    }
    __syncthreads();
    uint8_t *dst = vt + ((int64_t)bh * D) * keys + k0;
    for (int i = threadIdx.x; i < D * (K / 16); i += blockDim.x) {
        const int r = i / (K / 16), j0 = (i % (K / 16)) * 16;
        union {
            uint4 w;
            uint8_t x[16];
        } out;
#pragma unroll
        for (int u = 0; u < 16; u++) {
            const int j = j0 + u, key = (j / 32) * 32 + sm90_vt_key(j % 32);
            out.x[u] = r < d ? tile[key * RS + r] : 0;
        }
        *reinterpret_cast<uint4 *>(dst + (int64_t)r * keys + j0) = out.w;
    }
}

/* Keys per V^T row of shape s (the real keys rounded up to the kernel's
 * block), and its bytes: b * hkv * 128 rows. */
static int64_t sm90_vt_keys(const attn_shape *s)
{
    return (s->skv + SM90_VT_KEYS - 1) / SM90_VT_KEYS * SM90_VT_KEYS;
}

#if !SM90_PERSIST
extern "C" size_t cuda_fused_sm90a_vt_bytes(const attn_shape *s)
{
    return s != NULL && s->dtype == ATTN_E4M3 ? (size_t)(s->b * s->hkv * 128) * (size_t)sm90_vt_keys(s) : 0;
}
#endif

/* 1 when the current device is compute capability 9.0 (sm_90a code runs
 * on nothing else). */
static bool device_is_sm90()
{
    int dev = 0, maj = 0, min = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&maj, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&min, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
        return false;
    return maj == 9 && min == 0;
}

/* The causal order's chunks (cuda_fused_configs.h, sm90_causal_item):
 * *chunk units each, as many as have their K/V (skv x D elements of es
 * bytes, K and V (e4m3: V^T), per KV head; an unfolded unit is one of the
 * g heads sharing it; before 3.31 e4m3's were counted at 2 bytes) within
 * SM90_CHUNK_BYTES, and *clast, the last chunk's index (version 3.31: it
 * takes the units of the chunks before it while short of two waves).
 * For comparisons: ATTUNE_SM90_CHUNK_MB=N sets the budget instead (0
 * gives one unit per chunk, version 3's order: head after head, the
 * longest row block of each first, and no merge);
 * ATTUNE_SM90_TAIL_MERGE=N sets the merged chunk's cap to N MB of K/V
 * (default SM90_TAIL_BUDGETS budgets; 0 keeps the last chunk as it
 * falls: for 16-bit types the order before 3.31; e4m3's chunks count a
 * byte an element since). */
static void sm90_order(const attn_shape *s, int D, int es, bool fold, int64_t units, int64_t nrb, int *chunk,
                       int *clast)
{
    static const int64_t budget = [] {
        const char *e = getenv("ATTUNE_SM90_CHUNK_MB");
        return e != NULL ? (int64_t)atoi(e) << 20 : (int64_t)SM90_CHUNK_BYTES;
    }();
    static const int64_t cap = [] {
        const char *e = getenv("ATTUNE_SM90_TAIL_MERGE");
        return e != NULL ? (int64_t)atoi(e) << 20 : SM90_TAIL_BUDGETS * budget;
    }();
    const int64_t per = s->skv * D * 2 * es / (fold ? 1 : s->hq / s->hkv);
    const int64_t c = budget / (per > 0 ? per : 1);
    *chunk = (int)(c < 1 ? 1 : c > units ? units : c);
    *clast = sm90_causal_clast(units, nrb, *chunk, per, cap);
}

/* Version 3.12: k of the cut of the last wave (cuda_fused_configs.h's
 * sm90_tail_cut, the rule the cost descriptor applies too) for tactic t
 * on shape s, 0 where none, planned for SM90_TAIL_SMS SMs whatever the
 * device (so the workspace is a function of
 * the shape and tactic alone; on another SM count the pieces still end
 * the grid, in a wave the plan did not aim at). ATTUNE_SM90_TAIL=0 turns
 * the cut off, for comparisons (bench/ab_env.py). */
static int sm90_tail(const attn_shape *s, const attn_tactic *t)
{
    static const bool off = [] {
        const char *e = getenv("ATTUNE_SM90_TAIL");
        return e != NULL && strcmp(e, "0") == 0;
    }();
    return off ? 0
               : sm90_tail_cut(s->causal, t->fold, t->splits, t->tile_m, t->tile_n, s->b, s->hq, s->sq,
                               s->skv);
}

/* Rows of the cut's partials: those of the last blocks % SM90_TAIL_SMS
 * blocks (the grid is unit after unit, so they are one run of the b*hq*sq
 * rows, from row0). */
static int64_t sm90_tail_rows(const attn_shape *s, const attn_tactic *t, int64_t *row0)
{
    const int64_t nrb = (s->sq + t->tile_m - 1) / t->tile_m, blocks = nrb * s->b * s->hq;
    const int64_t first = blocks - blocks % SM90_TAIL_SMS;
    *row0 = first / nrb * s->sq + first % nrb * t->tile_m;
    return s->b * s->hq * s->sq - *row0;
}

/* Where the cut's partials start in the workspace: after e4m3's V^T,
 * 256-byte aligned (0 for the other dtypes). */
static size_t sm90_vt_offset(const attn_shape *s)
{
    return (cuda_fused_sm90a_vt_bytes(s) + 255) / 256 * 256;
}

#if !SM90_PERSIST
extern "C" int cuda_fused_sm90a_cut(const attn_shape *s, const attn_tactic *t)
{
    if (s == NULL || t == NULL || t->variant != ATTN_FUSED || t->arch != ATTN_ARCH_SM90A)
        return 0;
    return sm90_tail(s, t);
}
#endif

/* The workspace but for a persistent grid's counter. */
static size_t sm90_ws_core(const attn_shape *s, const attn_tactic *t)
{
    const int k = sm90_tail(s, t);
    const size_t vt = sm90_vt_offset(s); /* 0 but for e4m3 */
    if (k > 0) { /* after e4m3's V^T: k partials of the cut's rows */
        int64_t row0;
        return vt + cuda_fused_partials_bytes(sm90_tail_rows(s, t, &row0), s->d, k);
    }
    if (t->splits > 1)
        return cuda_fused_partials_bytes(s->b * s->hq * s->sq, s->d, t->splits);
    return vt;
}

/* persist=1: where the items' counter lies in the workspace (after the
 * rest, 256-byte aligned; 256 bytes). */
static size_t sm90_work_offset(const attn_shape *s, const attn_tactic *t)
{
    return (sm90_ws_core(s, t) + 255) / 256 * 256;
}

#if !SM90_PERSIST
extern "C" size_t cuda_fused_sm90a_workspace_bytes(const attn_shape *s, const attn_tactic *t)
{
    if (s == NULL || t == NULL || t->variant != ATTN_FUSED || t->arch != ATTN_ARCH_SM90A)
        return 0;
    return t->persist ? sm90_work_offset(s, t) + 256 : sm90_ws_core(s, t);
}
#endif

/* One configuration's launch: e4m3's V^T pass, the tensor maps, the
 * kernel over the grid (with version 3.12's cut last wave when tail = k >
 * 0, as cuda_fused_sm90a_launch planned it: sm90_tail), then the combine
 * of the splits' or the cut's partials. vt: the workspace
 * (cuda_fused_sm90a_workspace_bytes). */
#if SM90_TRACE
/* Whether this launch is traced (ATTUNE_SM90_TRACE names a file and the
 * stream is not being captured); if so the trace is zeroed first. */
static bool sm90_trace_clear(cudaStream_t stream)
{
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    void *a = NULL;
    if (!getenv("ATTUNE_SM90_TRACE") || cudaStreamIsCapturing(stream, &cs) != cudaSuccess ||
        cs != cudaStreamCaptureStatusNone || cudaGetSymbolAddress(&a, sm90_trace) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    return cudaMemsetAsync(a, 0, sizeof sm90_trace, stream) == cudaSuccess;
}

/* After a traced launch: wait for it and write the file ATTUNE_SM90_TRACE
 * names (replaced): a line "attune-sm90-trace 1 BLOCKS WG IT EV GRID
 * TACTIC\n", then the u64 array as the device holds it (little-endian).
 * Best effort: a failure leaves no file or a stale one. */
static void sm90_trace_dump(cudaStream_t stream, int64_t grid, const attn_tactic *t)
{
    static unsigned long long h[SM90_TR_BLOCKS][SM90_TR_WG + 1][SM90_TR_IT][SM90_TR_EV];
    char name[ATTN_TACTIC_STR_MAX];
    if (cudaStreamSynchronize(stream) != cudaSuccess || cudaMemcpyFromSymbol(h, sm90_trace, sizeof h) != cudaSuccess)
        return;
    if (!attn_tactic_str(t, name, sizeof name))
        snprintf(name, sizeof name, "?");
    FILE *f = fopen(getenv("ATTUNE_SM90_TRACE"), "wb");
    if (!f)
        return;
    fprintf(f, "attune-sm90-trace 1 %d %d %d %d %lld %s\n", SM90_TR_BLOCKS, SM90_TR_WG + 1, SM90_TR_IT,
            SM90_TR_EV, (long long)grid, name);
    fwrite(h, sizeof h, 1, f);
    fclose(f);
}
#endif

template <typename T, int D, int BR, int BC, int STAGES, bool PP, bool FOLD>
static int launch_sm90(const attn_shape *s, const attn_tactic *t, const attn_io *io, sm90_args &p, void *vt,
                       int tail, cudaStream_t stream)
{
    constexpr bool F8 = sm90_is_fp8<T>::value;
    constexpr int ES = (int)sizeof(T);
    const CUtensorMapDataType dt = F8 ? CU_TENSOR_MAP_DATA_TYPE_UINT8
                                   : std::is_same<T, __nv_bfloat16>::value ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                                           : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    CUtensorMap tq, tk, tv;
    int rc;
    const int qb = FOLD ? 1 << p.lqb : BR; /* query rows per head in a block */
    if ((rc = cuda_tma_make_map(&tq, &io->q, dt, ES, s->b, s->hq, s->sq, s->d, qb)) != 0 ||
        (rc = cuda_tma_make_map(&tk, &io->k, dt, ES, s->b, s->hkv, s->skv, s->d, BC)) != 0)
        return rc;
#if SM90_TMA_STORE
    /* version 3.29: o's map, 16-bit (bf16 for e4m3), a warpgroup's 64 rows
     * a box (a folded block's QB rows of one head where QB < 64) */
    CUtensorMap to;
    if ((rc = cuda_tma_make_map(&to, &io->o, F8 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : dt, 2, s->b, s->hq, s->sq, s->d,
                                qb < 64 ? qb : 64)) != 0)
        return rc;
#endif
    if (F8) {
        /* V^T into the workspace, then its map: {keys, D, hkv, b}, box
         * {128 keys, D rows} (one box per 128-key chunk of a tile) */
        const int64_t keys = sm90_vt_keys(s);
        if (s->b * s->hkv > SM90_VT_MAX_BH) /* e4m3_configs lists none */
            return ATTUNE_EUNSUPP;
        dim3 grid((unsigned)(keys / SM90_VT_KEYS), (unsigned)(s->b * s->hkv));
        if (cu_launch(sm90_vt_kernel, grid, 256, 0, stream, (const uint8_t *)io->v.data, io->v.sb,
                      io->v.sh, io->v.ss, (uint8_t *)vt, (int)s->hkv, (int)s->skv, (int)s->d,
                      (int)keys) != cudaSuccess)
            return ATTUNE_EGPU;
        cuuint64_t dims[4] = {(cuuint64_t)keys, (cuuint64_t)D, (cuuint64_t)s->hkv, (cuuint64_t)s->b};
        cuuint64_t strides[3] = {(cuuint64_t)keys, (cuuint64_t)(keys * D), (cuuint64_t)(keys * D * s->hkv)};
        rc = cuda_tma_encode_map(&tv, dt, vt, dims, strides, 128, D); /* L::vt counts whole boxes */
    } else {
        rc = cuda_tma_make_map(&tv, &io->v, dt, ES, s->b, s->hkv, s->skv, s->d, BC);
    }
    if (rc != 0)
        return rc;
    const size_t smem = sm90_smem_bytes<D, BR, BC, STAGES, ES>();
    void (*kern)(CUtensorMap, CUtensorMap, CUtensorMap SM90_TO_TYPE, sm90_args) =
        fused_sm90_kernel<T, D, BR, BC, STAGES, PP, FOLD>;
    if (!cu_ok(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem)))
        return ATTUNE_EGPU;
    p.nrb = (int)((s->sq + qb - 1) / qb);
    if (s->causal) /* the kernel reads the order's chunks only there */
        sm90_order(s, D, (int)sizeof(T), FOLD, p.units, p.nrb, &p.chunk, &p.clast);
    const int64_t base = (int64_t)p.nrb * p.units;
    int64_t blocks = base * p.splits;
    p.tail0 = INT_MAX, p.tailk = 1;
    p.prow0 = 0, p.prows = s->b * s->hq * s->sq;
    if (p.splits > 1) {
        p.tail0 = 0, p.tailk = p.splits;
    } else if (tail > 0) {
        /* version 3.12: the last base % SM90_TAIL_SMS blocks cut in tail key
         * ranges, their partials after V^T in the workspace */
        const int64_t r = base % SM90_TAIL_SMS;
        p.tail0 = (int)(base - r), p.tailk = tail;
        blocks = base - r + r * tail;
        p.prows = sm90_tail_rows(s, t, &p.prow0);
        cuda_fused_partials(p.prows, s->d, tail, static_cast<char *>(vt) + sm90_vt_offset(s), &p.part_o,
                            &p.part_lse);
    }
    if (blocks > INT_MAX)
        return ATTUNE_EUNSUPP;
#if SM90_TRACE
    const bool traced = sm90_trace_clear(stream);
#endif
    int64_t grid = blocks;
#if SM90_PERSIST
    /* one block per SM over the items, the counter zeroed first */
    int dev = 0, sms = 0;
    if (!cu_ok(cudaGetDevice(&dev)) || !cu_ok(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) ||
        sms < 1)
        return ATTUNE_EGPU;
    p.items = (int)blocks;
    p.work = reinterpret_cast<unsigned *>(static_cast<char *>(vt) + sm90_work_offset(s, t));
    if (!cu_ok(cudaMemsetAsync(p.work, 0, sizeof(unsigned), stream)))
        return ATTUNE_EGPU;
    grid = blocks < sms ? blocks : sms;
#endif
    if (cu_launch(kern, (unsigned)grid, 128 * (BR / 64 + 1), smem, stream, tq, tk, tv SM90_TO_ARG, p) !=
        cudaSuccess)
        return ATTUNE_EGPU;
#if SM90_TRACE
    if (traced) /* its rows: the blocks, or the persistent grid's items */
        sm90_trace_dump(stream, blocks, t);
#endif
    if (p.tailk > 1) /* splits or the cut */
        return cuda_fused_combine(s, p.tailk, p.part_o, p.part_lse, &io->o, p.prow0, p.prows, stream);
    return 0;
}

#if !SM90_PERSIST
/* Version 3.28: a configuration is also listed persistent (persist=1)
 * where its grid of `blocks` (no key splits) has more than one wave on an
 * H200 (more blocks than SM90_SMS): there a block's start and end recur
 * on each SM, and a persistent block overlaps them with its next item's;
 * one wave has no next item. The tuner measures which wins: on an H100
 * (bench/persist-tactic-h100-7d4820b.txt, claiming late) the persistent
 * tiles took 0.89-0.96 of the plain ones' time on the 2k causal anchor,
 * 0.95-0.98 on the 8k causal one, 0.95-1.00 on the 8k e4m3 one. */
static bool persist_listed(int64_t blocks)
{
    return blocks > SM90_SMS;
}

/* e4m3's configurations (SM90_E4M3_CONFIGS): d a multiple of 16 up to 128. */
static int e4m3_configs(const attn_shape *s, attn_tactic *out, int max)
{
    int n = 0;
    if (s->d % 16 != 0 || s->d > 128 || s->b * s->hkv > SM90_VT_MAX_BH)
        return 0;
#define SM90_E4M3_TACTIC(D_, BR_, BC_, ST_)                                                           \
    for (int ps = 0; ps < 2 && n < max; ps++) {                                                       \
        attn_tactic t = {};                                                                           \
        t.variant = ATTN_FUSED;                                                                       \
        t.arch = ATTN_ARCH_SM90A;                                                                     \
        t.tile_m = BR_, t.tile_n = BC_, t.warps = 4 + BR_ / 16, t.stages = ST_;                       \
        t.persist = ps;                                                                               \
        if (ps == 0 || persist_listed((s->sq + BR_ - 1) / BR_ * s->b * s->hq))                        \
            out[n++] = t;                                                                             \
    }
    SM90_E4M3_CONFIGS(SM90_E4M3_TACTIC)
#undef SM90_E4M3_TACTIC
    return n;
}

extern "C" int cuda_fused_sm90a_configs(const attn_shape *s, attn_tactic *out, int max)
{
    if (s != NULL && out != NULL && s->dtype == ATTN_E4M3 && s->hkv >= 1 && s->hq % s->hkv == 0)
        return e4m3_configs(s, out, max);
    if (s == NULL || out == NULL || (s->dtype != ATTN_F16 && s->dtype != ATTN_BF16) || s->d % 8 != 0 ||
        sm90_kernel_dim(s->d) == 0 || s->hkv < 1 || s->hq % s->hkv != 0)
        return 0;
    const int D = sm90_kernel_dim(s->d);
    const bool fold = fold_applies(s);
    int n = 0;
    /* Splits 1, 2, 4, ... while the previous count's grid is under one
     * block per SM and each split keeps a key tile: folded (128-row tiles)
     * where the fold applies, unfolded (every tile) where it does not, so
     * a shape of a few heads over many keys fills the GPU (issue 25).
     * Each unsplit one persistent too where persist_listed. */
#define SM90_TACTIC(D_, BR_, BC_, ST_, ALL_)                                                          \
    if (D == D_) {                                                                                    \
        attn_tactic t = {};                                                                           \
        t.variant = ATTN_FUSED;                                                                       \
        t.arch = ATTN_ARCH_SM90A;                                                                     \
        t.tile_m = BR_, t.tile_n = BC_, t.warps = 4 + BR_ / 16, t.stages = ST_;                       \
        if (n < max)                                                                                  \
            out[n++] = t;                                                                             \
        if (n < max && persist_listed((s->sq + BR_ - 1) / BR_ * s->b * s->hq)) {                      \
            out[n] = t;                                                                               \
            out[n++].persist = 1;                                                                     \
        }                                                                                             \
        const int64_t qb = fold ? 128 / (s->hq / s->hkv) : BR_;                                       \
        const int64_t base = (s->sq + qb - 1) / qb * s->b * (fold ? s->hkv : s->hq);                  \
        const int64_t ktiles = (s->skv + BC_ - 1) / BC_;                                              \
        t.fold = fold ? 1 : 0;                                                                        \
        for (int sp = fold ? 1 : 2; ALL_ && (!fold || BR_ == 128) && sp <= SM90_MAX_SPLITS && sp <= ktiles && \
                                    n < max;                                                          \
             sp *= 2) {                                                                               \
            if (sp > 1 && base * (sp / 2) >= SM90_SMS)                                                \
                break;                                                                                \
            t.splits = sp > 1 ? sp : 0;                                                               \
            out[n++] = t;                                                                             \
            if (sp == 1 && n < max && persist_listed(base)) {                                         \
                out[n] = t;                                                                           \
                out[n++].persist = 1;                                                                 \
            }                                                                                         \
        }                                                                                             \
    }
    SM90_CONFIGS(SM90_TACTIC)
#undef SM90_TACTIC
    return n;
}
#endif /* !SM90_PERSIST */

/* e4m3 views: q, k, v of bytes and o of bf16, every base and stride in
 * whole 16-byte units (TMA, and the V^T kernel's loads), rows >= d. */
static bool e4m3_views_ok(const attn_shape *s, const attn_io *io)
{
    const attn_tensor *v[3] = {&io->q, &io->k, &io->v};
    for (int i = 0; i < 3; i++)
        if (v[i]->sb < 0 || v[i]->sh < 0 || v[i]->ss < s->d || v[i]->ss > INT_MAX / 2 ||
            (v[i]->sb | v[i]->sh | v[i]->ss) % 16 != 0 || (uintptr_t)v[i]->data % 16 != 0)
            return false;
    const attn_tensor *o = &io->o;
    return o->sb >= 0 && o->sh >= 0 && o->ss >= s->d && o->ss <= INT_MAX / 2 && (o->sb | o->sh | o->ss) % 8 == 0 &&
           (uintptr_t)o->data % 16 == 0;
}

/* The persist=1 tactics' launch: this file as cuda_fused_persist_sm90a.cu
 * builds it (SM90_PERSIST_UNIT), cuda_fused_sm90a_launch's contract; only
 * that function calls it. */
extern "C" int cuda_fused_sm90a_persist_launch(const attn_shape *s, const attn_tactic *t, const attn_io *io,
                                               int64_t sq_rows, int64_t skv_rows, void *workspace,
                                               cudaStream_t stream);
#if SM90_PERSIST
#define SM90_LAUNCH_ENTRY cuda_fused_sm90a_persist_launch
#else
#define SM90_LAUNCH_ENTRY cuda_fused_sm90a_launch
#endif

extern "C" int SM90_LAUNCH_ENTRY(const attn_shape *s, const attn_tactic *t, const attn_io *io, int64_t sq_rows,
                                 int64_t skv_rows, void *workspace, cudaStream_t stream)
{
    if (!cuda_fused_args_ok(s, t, io, sq_rows, skv_rows))
        return ATTUNE_EINVAL;
#if !SM90_PERSIST
    if (t->persist)
        return cuda_fused_sm90a_persist_launch(s, t, io, sq_rows, skv_rows, workspace, stream);
#else
    if (t->persist != 1 || t->splits > 1) /* listed unsplit only (persist_listed) */
        return ATTUNE_EUNSUPP;
#endif
    const bool e4m3 = s->dtype == ATTN_E4M3;
    if (t->variant != ATTN_FUSED || t->arch != ATTN_ARCH_SM90A ||
        (s->dtype != ATTN_F16 && s->dtype != ATTN_BF16 && !e4m3) || s->d % 8 != 0 || sm90_kernel_dim(s->d) == 0)
        return ATTUNE_EUNSUPP;
    if (e4m3 && (s->d % 16 != 0 || s->d > 128 || t->fold || t->splits > 1))
        return ATTUNE_EUNSUPP;
    if (e4m3 && workspace == NULL)
        return ATTUNE_EINVAL; /* V^T */
    const bool fold = t->fold != 0;
    const int splits = t->splits > 1 ? t->splits : 1;
    if ((fold && !fold_applies(s)) || splits > SM90_MAX_SPLITS)
        return ATTUNE_EUNSUPP;
    const int tail = sm90_tail(s, t); /* version 3.12's cut (k), 0: none; never with splits or folded */
    if ((SM90_PERSIST || splits > 1 || tail > 0) && workspace == NULL)
        return ATTUNE_EINVAL;
    /* TMA: 16-byte aligned bases and strides (cuda_fused_args_ok); block
     * and row counts are ints in the kernel. */
    if (s->b * s->hq > INT_MAX || s->b * s->hq * s->sq > INT_MAX)
        return ATTUNE_EUNSUPP;
    if (!device_is_sm90())
        return ATTUNE_EUNSUPP;
    if (e4m3 ? !e4m3_views_ok(s, io) : !cuda_fused_views_ok(s, io))
        return ATTUNE_EINVAL;

    sm90_args p = {};
    for (int i = 0; i < 3; i++)
        p.dsc[i] = io->descale[i];
    p.o = io->o.data;
    p.osb = io->o.sb, p.osh = io->o.sh, p.oss = io->o.ss;
    p.b = (int)s->b, p.hq = (int)s->hq, p.hkv = (int)s->hkv, p.g = (int)(s->hq / s->hkv);
    p.sq = (int)s->sq, p.skv = (int)s->skv, p.d = (int)s->d;
    p.causal = s->causal ? 1 : 0;
    p.sl2 = (float)(1.4426950408889634 / sqrt((double)s->d));
    p.lqb = fold ? 7 - ilog2(p.g) : 0;
    p.units = fold ? p.b * p.hkv : p.b * p.hq;
    p.splits = splits;
    if (splits > 1)
        cuda_fused_partials(s->b * s->hq * s->sq, s->d, splits, workspace, &p.part_o, &p.part_lse);
    const int D = sm90_kernel_dim(s->d);
    const bool bf = s->dtype == ATTN_BF16;
    /* Pingpong on in every configuration: against the same kernel without
     * it (H200, 2026-12-01), 8192^2 d128 causal 565 -> 630 TFLOP/s,
     * non-causal 677 -> 682, d64 causal 298 -> 346, d256 GQA causal
     * 369 -> 378. The template keeps the other form for such comparisons. */
    constexpr bool pp = true;
    /* e4m3 with the turns too: without them 8k d128 took 1479 us against
     * 1290 (H200, 2026-12-03); docs/kernels.md "Version 3.5" lists what
     * else was tried against its softmax. */
#define SM90_E4M3_LAUNCH(D_, BR_, BC_, ST_)                                                         \
    if (e4m3 && t->tile_m == BR_ && t->tile_n == BC_ && t->warps == 4 + BR_ / 16 && t->stages == ST_) \
        return launch_sm90<__nv_fp8_e4m3, D_, BR_, BC_, ST_, pp, false>(s, t, io, p, workspace, tail, stream);
    SM90_E4M3_CONFIGS(SM90_E4M3_LAUNCH)
#undef SM90_E4M3_LAUNCH
    if (e4m3)
        return ATTUNE_EUNSUPP;
#define SM90_LAUNCH_AS(T_, D_, BR_, BC_, ST_, ALL_)                                                 \
    (fold ? launch_sm90<T_, D_, BR_, BC_, ST_, pp, ALL_ && BR_ == 128>(s, t, io, p, workspace, tail, stream) \
          : launch_sm90<T_, D_, BR_, BC_, ST_, pp, false>(s, t, io, p, workspace, tail, stream))
#define SM90_LAUNCH(D_, BR_, BC_, ST_, ALL_)                                                        \
    if (D == D_ && t->tile_m == BR_ && t->tile_n == BC_ && t->warps == 4 + BR_ / 16 && t->stages == ST_ && \
        !(fold && BR_ != 128) && (ALL_ || (!fold && splits == 1)))                                  \
        return bf ? SM90_LAUNCH_AS(__nv_bfloat16, D_, BR_, BC_, ST_, ALL_)                          \
                  : SM90_LAUNCH_AS(__half, D_, BR_, BC_, ST_, ALL_);
    SM90_CONFIGS(SM90_LAUNCH)
#undef SM90_LAUNCH
#undef SM90_LAUNCH_AS
    return ATTUNE_EUNSUPP;
}
