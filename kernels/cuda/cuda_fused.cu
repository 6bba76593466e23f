/* cuda_fused.cu -- fused attention on tensor cores: FlashAttention-2 style
 * prefill (`fused`) and split-KV decode with a log-sum-exp combine
 * (`fused_splitkv`), f16/bf16 inputs, f32 accumulation, mma.sync m16n8k16.
 *
 * o[b,h,i,:] = sum_j softmax_j(q[b,h,i,:] . k[b,h/g,j,:] / sqrt(d)) v[b,h/g,j,:]
 * over the keys j that row i may see: j < skv, and for causal j <= i + skv - sq
 * (bottom-right aligned, from the real lengths); a row that sees none is 0.
 * GQA/MQA read KV head h / g directly (g = hq / hkv), never a copy.
 *
 * Compile alone, with the resource report that docs/kernels.md records:
 *   nvcc -O3 -arch=sm_90 -Xptxas -v -c kernels/cuda/cuda_fused.cu -o /tmp/cuda_fused.o
 * Check: tests/gpu/test_fused.c. Time: bench/fused_bench.cu (+ fused_bench.py, PyTorch).
 *
 * version 1 (fused): one block per Br query rows of one head; each warp owns
 *   16*MI rows. Q stays in shared memory, K and V tiles of Bc keys stream
 *   through it by cp.async (V lands while S = QK^T is computed, the next K
 *   while O += PV is), ldmatrix feeds mma.sync; online softmax in f32 in the
 *   base-2 domain, P converted in registers from the accumulator layout to
 *   the A-operand layout. Causal blocks skip whole key tiles past their last
 *   row's diagonal and mask only the tiles that cross it; key tiles are
 *   visited last-first so the masked ones come first. An aligned fast path
 *   (padded lengths multiples of the tile, d a power of two) drops the
 *   bounds predicates on loads. H200: 335 TFLOP/s at 8192^2, d = 128.
 * version 1.1: double-buffered K/V (tile t-1 copied while tile t is
 *   computed, one barrier per tile) as a per-configuration choice: it wins
 *   on some tiles and loses on others (docs/kernels.md), so the config
 *   table fixes it per tile.
 * version 1.2: key groups. A config with twice the warps its rows need
 *   (64 rows, 8 warps) runs two groups of 4 warps on alternate key tiles,
 *   with their own buffers and named barriers, merged in shared memory: for
 *   grids of about one block per SM (d = 256, 968 queries: 44.7 -> 40.6 us).
 * version 2 (fused_splitkv): for decode (small sq, long skv). The keys are cut
 *   into `splits` ranges, one block each; inside a block each warp takes its
 *   own slice of every key tile (2-4 cp.async stages in flight), so a block
 *   of 16 query rows still keeps all warps busy. The g query heads of a KV
 *   head are folded into those 16 rows, so each K/V element is read once per
 *   row tile, not once per query head. Warps merge in shared memory; splits
 *   merge in a second kernel (log-sum-exp weighted), skipped for one split.
 *   H200: 67.8 us, 3.96 TB/s on the 16x32x8 x 4096 decode target.
 * version 2.1 (fused_splitkv, stages=N, compute capability 9.0+): version
 *   2's blocks and arithmetic with K/V brought in by TMA (tensor maps,
 *   128-byte-swizzled boxes) from a producer warp, N tiles in flight
 *   behind mbarriers. H200: Llama's decode step 22.6 -> 21.2 us, Gemma's
 *   15.4 -> 13.0 (docs/kernels.md).
 */
#include "cuda_fused.h"
#include "cuda_fused_common.cuh" /* smem_u32, pack2, ex2, the split-KV combine */
#include "launch.cuh"             /* cu_launch, cu_ok */
#include "cuda_fused_configs.h" /* the configurations, head dims, shared memory */
#include "../variant.h"         /* attn_sm_limits_of */
#ifdef ATTUNE_HAVE_SM90A
#include "cuda_fused_sm90a.h" /* version 3: the arch=sm90a tactics */
#endif

#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <limits.h>
#include <stdlib.h> /* getenv (FUSED_CAUSAL_ORDER) */
#include <math.h>
#include <atomic>
#include <type_traits>

/* ---- CPU reference
 *
 * What every version computes, in float64 from the inputs as stored (after
 * rounding to f16/bf16); tests/gpu/test_fused.c implements exactly this
 * (ref_row) and checks every configuration against it:
 *
 *   for each (bi, h, i < sq): kv = h / g; n = visible(i) = causal ?
 *       clamp(i + skv - sq + 1, 0, skv) : skv
 *     s_j = sum_c q[bi,h,i,c] k[bi,kv,j,c] / sqrt(d)       for j < n
 *     o[bi,h,i,c] = n ? sum_j exp(s_j - max s) v[bi,kv,j,c] / sum_j exp(s_j - max s) : 0
 *
 * The GPU versions differ from it by f32 accumulation and by rounding the
 * probabilities P to the input type before the PV product (as FA2 does). */

/* ---- GPU kernels */

namespace {

/* Everything a kernel needs, by value. Lengths are ints: ATTN_MAX_DIM is 2^20. */
struct fused_args {
    const void *q, *k, *v;
    void *o;
    float *part_o;   /* splitkv, splits > 1: [splits][b*hq*sq][d] normalised partial outputs */
    float *part_lse; /* splitkv, splits > 1: [splits][b*hq*sq] log2-sum-exp of each partial */
    int b, hq, hkv, g, sq, skv, d;
    int sq_pad, skv_pad; /* rows readable per head in the q/o and k/v views */
    /* element strides of the views (batch, head, row); the head dim is
     * contiguous. Row strides are ints (load_tile's ld), checked at launch. */
    int64_t qsb, qsh, ksb, ksh, osb, osh; /* V's view: K's strides (launch checks) */
    int qss, kss, oss;
    int causal;
    float sl2;           /* log2(e) / sqrt(d): scores go straight to the exp2 domain */
    int nrb;             /* fused: row blocks per head; splitkv: 16-row tiles per KV head */
    int splits, tps;     /* splitkv: number of key ranges, key tiles per range */
    int stages;          /* splitkv, version 2.1: K/V stages in shared memory (0: version 2) */
    /* the combine: the partials hold rows [prow0, prow0 + prows) of the
     * b*hq*sq rows (prows 0: all of them) */
    int64_t prow0, prows;
#if FUSED_CAUSAL_ORDER
    int chunk, clast; /* fused, causal: sm90_causal_item's order */
#endif
};

/* 16-byte global->shared copies that bypass L1 (.cg): K/V tiles are reused
 * from shared memory, never from L1. The zfill form copies src_size bytes
 * and zero-fills the rest of the 16: src_size 0 writes zeros and reads
 * nothing, which is how rows past the real length and columns past d are
 * predicated. */
__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}

__device__ __forceinline__ void cp_async16_zfill(uint32_t dst, const void *src, bool ok)
{
    int n = ok ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(n));
}

/* Programmatic dependent launch (compute capability 9.0+; no-ops before):
 * a kernel lets the next one, launched with the programmatic attribute,
 * be scheduled early; that one waits for this one's end and writes. */
__device__ __forceinline__ void pdl_launch_dependents()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void cp_async_commit()
{
    asm volatile("cp.async.commit_group;\n" ::);
}

/* Wait until at most N committed groups are still in flight. */
template <int N>
__device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

/* Four 8x8 b16 matrices; lane l supplies the address of row l%8 of matrix
 * l/8 and receives, of each matrix m, row l/4, columns 2(l%4), 2(l%4)+1 in
 * r[m] (.trans: column l/4, rows 2(l%4), 2(l%4)+1). */
__device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t r[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

/* c += a (16x16, row) * b (16x8, col), f32 accumulators. Fragments, with
 * lane = 4*gr + tq: a0 = A[gr][2tq..+1], a1 = A[gr+8][2tq..+1], a2 =
 * A[gr][2tq+8..+9], a3 = A[gr+8][2tq+8..+9]; b0 = B[2tq..+1][gr], b1 =
 * B[2tq+8..+9][gr]; c0,c1 = C[gr][2tq..+1], c2,c3 = C[gr+8][2tq..+1]. */
template <typename T>
__device__ __forceinline__ void mma16816(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
    if constexpr (std::is_same<T, __nv_bfloat16>::value) {
        asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
            "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    } else {
        asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
            "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
}

/* Shared-memory tiles are rows of D b16 elements padded by one 16-byte
 * chunk: row stride RS = 2D + 16 bytes. ldmatrix reads 8 rows at one chunk
 * column per phase; with a plain 2D-byte stride (a multiple of 128 for
 * D >= 64) all 8 would hit the same 4 banks. With RS/16 = D/8 + 1 odd, 8
 * consecutive rows fall on 8 distinct 16-byte slots of a 128-byte line:
 * conflict-free. Padding rather than an XOR swizzle keeps every address a
 * per-lane base plus a compile-time offset (one register per operand, no
 * per-(k, n) address registers, which pushed the 128-row tiles into spills).
 * Costs 16/(2D) more shared memory (3-25%). */
template <int D>
struct tile_rs {
    static constexpr int value = FUSED_TILE_RS(D);
};

/* Copy ROWS rows of D elements (global row stride ld) into a padded tile
 * at sbase, all threads of the block together. PRED: rows >= nrows and
 * columns >= d are zero-filled, never read; otherwise every row is read
 * and ld must equal D. The copies are only issued: commit and wait elsewhere. */
template <int ROWS, int D, int NTH, bool PRED, typename T>
__device__ __forceinline__ void load_tile(uint32_t sbase, const T *g, int ld, int nrows, int d, int tid)
{
    constexpr int CPR = D / 8, RS = tile_rs<D>::value, N = ROWS * CPR, ITERS = (N + NTH - 1) / NTH;
#pragma unroll
    for (int it = 0; it < ITERS; it++) {
        int L = tid + it * NTH;
        if (N % NTH != 0 && L >= N)
            break;
        int row = L / CPR, c = L % CPR;
        uint32_t dst = sbase + (uint32_t)(row * RS + c * 16);
        if (!PRED) {
            /* row stride D, a constant: the EVEN path runs only on views
             * whose rows are D apart (dispatch); a run-time stride here cost
             * 60-200 bytes of spills in the d = 128 and 256 tiles */
            cp_async16(dst, g + (int64_t)row * D + c * 8);
        } else {
            /* g, ld and nrows pass through opaque moves per chunk: otherwise
             * ptxas hoists every chunk's 64-bit address out of the key loop
             * (16-32 registers, spilled on the large tiles: 144 bytes at
             * d = 256, 64x64) instead of recomputing it. */
            asm volatile("mov.b32 %0, %0;" : "+r"(ld));
            asm volatile("mov.b64 %0, %0;" : "+l"(g));
            asm volatile("mov.b32 %0, %0;" : "+r"(nrows));
            bool ok = row < nrows && c * 8 < d;
            cp_async16_zfill(dst, ok ? (const void *)(g + (int64_t)row * ld + c * 8) : (const void *)g, ok);
        }
    }
}

/* One online-softmax step for one 16-row MMA tile: s holds this tile's raw
 * scores (NT 8-key tiles, masked ones -inf); m and l are the running max
 * (raw units) and this thread's partial row sums for rows gr and gr+8, o the
 * output accumulators (DT 8-column tiles). On return s holds P = 2^(s*sl2 -
 * m*sl2). The max is reduced over the quad of lanes that share a row; l
 * stays per-lane (summed once at the end, as the scale factors are
 * row-uniform). A row with no visible key yet keeps m = -inf and uses 0 as
 * its exponent base, so every term is 2^-inf = 0 and nothing is NaN.
 * Version 2 passes LAZY = true and hi: rows 8-15 (rh = 1) are skipped when
 * !hi (no real row there: their s stay 0 from Q's zero rows, so P = 0 and
 * their o stay 0), and, from d = 128 (32 or more multiplies a row half),
 * O's rescale is skipped when no lane of the warp saw its max move (alpha
 * = 1 exactly: the skip changes no bit; at d = 64 the vote made ptxas
 * spill version 2.1 on sm_110). hi must be uniform over the warp. */
template <int NT, int DT, bool LAZY = false>
__device__ __forceinline__ void softmax_step(float (&s)[NT][4], float (&o)[DT][4], float (&m)[2],
                                             float (&l)[2], float sl2, bool hi = true)
{
#pragma unroll
    for (int rh = 0; rh < 2; rh++) {
        if (LAZY && rh == 1 && !hi)
            continue;
        float mx = m[rh];
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
            mx = fmaxf(mx, fmaxf(s[nt][2 * rh], s[nt][2 * rh + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float ms = mx == -INFINITY ? 0.f : mx * sl2;
        const float alpha = ex2(m[rh] * sl2 - ms); /* old m = -inf -> 0 */
        m[rh] = mx;
        float sum = 0.f;
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
            s[nt][2 * rh] = ex2(fmaf(s[nt][2 * rh], sl2, -ms));
            s[nt][2 * rh + 1] = ex2(fmaf(s[nt][2 * rh + 1], sl2, -ms));
            sum += s[nt][2 * rh] + s[nt][2 * rh + 1];
        }
        l[rh] = l[rh] * alpha + sum;
        if (LAZY && DT >= 16 && !__any_sync(0xffffffffu, alpha != 1.f))
            continue;
#pragma unroll
        for (int dt = 0; dt < DT; dt++) {
            o[dt][2 * rh] *= alpha;
            o[dt][2 * rh + 1] *= alpha;
        }
    }
}

/* P (accumulator layout, keys 16kk..16kk+15 = 8-key tiles 2kk and 2kk+1)
 * as the A operand of P V: the C fragment of two adjacent n8 tiles is
 * exactly the A fragment of one k16 step, so this is a repack, no shuffle. */
template <typename T, int NT>
__device__ __forceinline__ void p_fragment(uint32_t a[4], const float (&s)[NT][4], int kk)
{
    a[0] = pack2<T>(s[2 * kk][0], s[2 * kk][1]);
    a[1] = pack2<T>(s[2 * kk][2], s[2 * kk][3]);
    a[2] = pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]);
    a[3] = pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
}

/* Named barrier for the NT threads of one warp group (ids 1..; 0 is
 * __syncthreads). "memory": shared accesses are not moved across it. */
__device__ __forceinline__ void group_sync(int id, int nthreads)
{
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(nthreads) : "memory");
}

/* Version 1: fused. Block = BR query rows of one (batch, head), NW warps in
 * KG key groups of WG warps: warp w of group kg owns rows [w*16*MI,
 * (w+1)*16*MI) and the key tiles t with t = ntiles-1-kg (mod KG). KG = 1
 * is plain FA2; KG = 2 (a config with warps = 2 * BR/16) doubles the
 * warps per SM when the grid has only about one block per SM, each group
 * with its own K/V buffers and named barrier, the groups merged in shared
 * memory at the end. Shared memory: Q (BR x D), then per group KVST
 * buffers each of K and V (BC x D), rows padded. KVST = 2: tile t-KG is
 * copied while tile t is computed (one barrier per tile); KVST = 1: V[t]
 * lands during S = QK^T and K[t-KG] during O += PV (two barriers, half the
 * buffers, FA2's scheme). Which is faster depends on the tile: the config
 * table says (docs/kernels.md has the measurements). EVEN: sq_pad % BR ==
 * 0, skv_pad % BC == 0, d == D and the q/k/v rows D apart (contiguous
 * rows; other views take the predicated loads), so every tile the loop touches lies
 * inside the buffers and loads need no predicates; padded keys are still
 * masked (by the real skv) on the last tile. */
template <typename T, int D, int BR, int BC, int NW, int KVST, bool EVEN>
__global__ void __launch_bounds__(NW * 32, NW <= 4 ? 2 : 1) fused_fwd_kernel(const fused_args p)
{
    constexpr int KG = NW * 16 > BR ? NW * 16 / BR : 1; /* key groups */
    constexpr int WG = NW / KG;                          /* warps per group */
    constexpr int MI = BR / (16 * WG);                   /* 16-row MMA tiles per warp */
    constexpr int NT = BC / 8;                           /* 8-key tiles of S */
    constexpr int DT = D / 8;                            /* 8-column tiles of O */
    constexpr int CPR = D / 8;                           /* 16-byte chunks per row */
    constexpr int NTH = NW * 32, GTH = WG * 32;
    constexpr int RS = tile_rs<D>::value;                /* bytes per shared row */
    constexpr uint32_t KVB = BC * RS;                    /* bytes of one K (or V) buffer */
    static_assert(MI >= 1 && BR == MI * 16 * WG && NW == KG * WG, "BR must be 16 * MI * warps/KG");
    static_assert(BC % 16 == 0 && (KVST == 1 || KVST == 2), "BC multiple of 16, 1 or 2 buffers");
    static_assert(KG == 1 || (size_t)(KG - 1) * (BR * D + 2 * MI * 2 * GTH) * 4 <= (size_t)KG * 2 * KVST * KVB,
                  "the group merge must fit in the K/V buffers");

    extern __shared__ __align__(128) unsigned char smem[];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    /* KG == 1 spelled out as constants: the compiler cannot know warp < WG,
     * and the extra live values cost the 128-row tiles spills. */
    const int kg = KG == 1 ? 0 : warp / WG;
    const int wi = KG == 1 ? warp : warp - kg * WG, gtid = KG == 1 ? tid : tid - kg * GTH;
    const int gr = lane >> 2, tq = lane & 3; /* fragment row group, column pair */

    const uint32_t aQ = smem_u32(smem);
    const uint32_t aK = aQ + BR * RS + (uint32_t)kg * 2 * KVST * KVB; /* this group's K buffers */
    const uint32_t aV = aK + KVST * KVB;                               /* ... and V buffers */
    /* Per-lane ldmatrix offsets (bytes); every tile address below is one
     * of these plus a compile-time constant. Q (A operand, x4 = rows 0-7 |
     * 8-15 x k 0-7 | 8-15): lane l points at row l%16, chunk l/16. K (B
     * operand, x4 = keys 0-7 x k 0-7, 0-7 x 8-15, 8-15 x 0-7, 8-15 x 8-15):
     * key l%8 + 8(l/16), chunk (l/8)%2. V (B operand, .trans, x4 = keys
     * 0-7 | 8-15 x cols 0-7, then cols 8-15): key l%8 + 8((l/8)%2), chunk l/16. */
    const uint32_t qoff = (uint32_t)((wi * MI * 16 + (lane & 15)) * RS + (lane >> 4) * 16);
    const uint32_t koff = (uint32_t)(((lane & 7) + ((lane >> 4) << 3)) * RS + ((lane >> 3) & 1) * 16);
    const uint32_t voff = (uint32_t)(((lane & 7) + ((lane >> 3) & 1) * 8) * RS + (lane >> 4) * 16);

    /* Block -> (row block, batch*head). Row blocks vary fastest, so the
     * blocks resident together share a few heads' K/V in L2. Causal: the
     * last row blocks see the most keys; start them first so the short
     * ones fill the tail of the grid. */
#if FUSED_CAUSAL_ORDER
    int bh = blockIdx.x / p.nrb;
    int mb = blockIdx.x - bh * p.nrb;
    if (p.causal)
        sm90_causal_item((int)blockIdx.x, p.chunk, p.clast, p.b * p.hq, p.nrb, &bh, &mb);
#else
    const int bh = blockIdx.x / p.nrb;
    int mb = blockIdx.x - bh * p.nrb;
    if (p.causal)
        mb = p.nrb - 1 - mb;
#endif
    const int bi = bh / p.hq, h = bh - bi * p.hq, kvh = h / p.g;
    const int m0 = mb * BR;
    const int off = p.skv - p.sq; /* causal: row i sees keys j <= i + off */

    const T *gQ = reinterpret_cast<const T *>(p.q) + bi * p.qsb + h * p.qsh + (int64_t)m0 * p.qss;
    /* K and V views share strides (launch checks): one offset stays live,
     * as one did before views (a second cost 4 B of spills on sm_87) */
    const int64_t kvoff = bi * p.ksb + kvh * p.ksh;
    const T *gK = reinterpret_cast<const T *>(p.k) + kvoff;
    const T *gV = reinterpret_cast<const T *>(p.v) + kvoff;

    /* Keys this block visits: all real keys, or (causal) up to its last real
     * row's diagonal. Tiles past that are skipped whole. */
    int kend = p.skv;
    if (p.causal)
        kend = min(kend, min(m0 + BR, p.sq) - 1 + off + 1);
    const int ntiles = kend > 0 ? (kend + BC - 1) / BC : 0;

    float o[MI][DT][4];
    float m[MI][2], l[MI][2];
#pragma unroll
    for (int mi = 0; mi < MI; mi++) {
#pragma unroll
        for (int dt = 0; dt < DT; dt++)
            o[mi][dt][0] = o[mi][dt][1] = o[mi][dt][2] = o[mi][dt][3] = 0.f;
        m[mi][0] = m[mi][1] = -INFINITY;
        l[mi][0] = l[mi][1] = 0.f;
    }

    /* Loads: EVEN copies unpredicated; otherwise rows past the real length
     * and columns past d are zero-filled. (Branching per tile between the
     * two forms, so full tiles skip the predicates, cost 20-70 registers
     * of spills in ptxas 13.0 on the 128-row tiles: not done.) The group's
     * threads copy its own K/V tiles; all threads copy Q. */
#define LOAD_K(buf, n)                                                                    \
    load_tile<BC, D, GTH, !EVEN>(aK + (buf) * KVB, gK + (int64_t)(n) * p.kss, p.kss, p.skv - (n), p.d, gtid)
#define LOAD_V(buf, n)                                                                    \
    load_tile<BC, D, GTH, !EVEN>(aV + (buf) * KVB, gV + (int64_t)(n) * p.kss, p.kss, p.skv - (n), p.d, gtid)

    if (ntiles > 0) {
        if (EVEN || (p.d == D && p.qss == D && m0 + BR <= p.sq)) /* rows D apart: load_tile */
            load_tile<BR, D, NTH, false>(aQ, gQ, p.qss, BR, D, tid);
        else
            load_tile<BR, D, NTH, true>(aQ, gQ, p.qss, p.sq - m0, p.d, tid);
        /* Last tile first: the tiles that need masks (the partial last one,
         * the causal diagonal) come first, then the loop runs unmasked. */
        const int t0 = ntiles - 1 - kg; /* this group's first tile */
        if (t0 >= 0) {
            LOAD_K(0u, t0 * BC);
            if (KVST == 2)
                LOAD_V(0u, t0 * BC);
        }
        cp_async_commit();
        cp_async_wait<0>();
        __syncthreads(); /* Q (copied by all groups) visible to all */

        int j = 0; /* this group's tile count: tile j uses buffer j & 1 (KVST = 2) */
        for (int t = t0; t >= 0; t -= KG, ++j) {
            const int n0 = t * BC;
            const uint32_t cur = KVST == 2 ? (uint32_t)(j & 1) : 0u;
            const uint32_t bK = aK + cur * KVB, bV = aV + cur * KVB;
            cp_async_wait<0>(); /* this thread's copies of tile t landed ... */
            if (KG == 1)        /* ... and everyone's; the group is done with the */
                __syncthreads(); /* previous tile, whose buffers the next copy refills */
            else
                group_sync(1 + kg, GTH);
            if (KVST == 2) {
                if (t - KG >= 0) {
                    LOAD_K(cur ^ 1u, n0 - KG * BC);
                    LOAD_V(cur ^ 1u, n0 - KG * BC);
                }
            } else {
                LOAD_V(0u, n0);
            }
            cp_async_commit();

            /* S = Q K^T: A = Q rows of this warp, B = K rows (keys) read
             * non-transposed, since B[k][n] = K[n][k] is K's row-major
             * layout seen column-major. */
            float s[MI][NT][4];
#pragma unroll
            for (int mi = 0; mi < MI; mi++)
#pragma unroll
                for (int nt = 0; nt < NT; nt++)
                    s[mi][nt][0] = s[mi][nt][1] = s[mi][nt][2] = s[mi][nt][3] = 0.f;
#pragma unroll
            for (int kk = 0; kk < D / 16; kk++) {
                uint32_t qa[MI][4];
#pragma unroll
                for (int mi = 0; mi < MI; mi++)
                    ldmatrix_x4(qa[mi], aQ + qoff + mi * 16 * RS + kk * 32);
#pragma unroll
                for (int nj = 0; nj < NT / 2; nj++) {
                    uint32_t kb[4];
                    ldmatrix_x4(kb, bK + koff + nj * 16 * RS + kk * 32);
#pragma unroll
                    for (int mi = 0; mi < MI; mi++) {
                        mma16816<T>(s[mi][2 * nj], qa[mi], kb[0], kb[1]);
                        mma16816<T>(s[mi][2 * nj + 1], qa[mi], kb[2], kb[3]);
                    }
                }
            }

            /* Mask keys past the real skv (the partial or padded last tile)
             * and, causal, past each row's diagonal; tiles wholly below the
             * first row's diagonal need neither. */
            if (n0 + BC > p.skv || (p.causal && n0 + BC - 1 > m0 + off)) {
#pragma unroll
                for (int mi = 0; mi < MI; mi++)
#pragma unroll
                    for (int rh = 0; rh < 2; rh++) {
                        const int i = m0 + wi * MI * 16 + mi * 16 + gr + rh * 8;
                        const int lim = p.causal ? min(p.skv, i + off + 1) : p.skv;
#pragma unroll
                        for (int nt = 0; nt < NT; nt++)
#pragma unroll
                            for (int e = 0; e < 2; e++)
                                if (n0 + nt * 8 + 2 * tq + e >= lim)
                                    s[mi][nt][2 * rh + e] = -INFINITY;
                    }
            }
#pragma unroll
            for (int mi = 0; mi < MI; mi++)
                softmax_step<NT, DT>(s[mi], o[mi], m[mi], l[mi], p.sl2);

            if (KVST == 1) {
                cp_async_wait<0>(); /* V[t] landed ... */
                if (KG == 1)        /* ... for the group; all its warps are done with K[t] */
                    __syncthreads();
                else
                    group_sync(1 + kg, GTH);
                if (t - KG >= 0)
                    LOAD_K(0u, n0 - KG * BC);
                cp_async_commit();
            }

            /* O += P V: B[k][n] = V[key k][col n] is row-major, so ldmatrix
             * .trans hands each lane two consecutive keys of one column. */
#pragma unroll
            for (int kk = 0; kk < BC / 16; kk++) {
                uint32_t pa[MI][4];
#pragma unroll
                for (int mi = 0; mi < MI; mi++)
                    p_fragment<T, NT>(pa[mi], s[mi], kk);
#pragma unroll
                for (int dn = 0; dn < D / 16; dn++) {
                    uint32_t vb[4];
                    ldmatrix_x4_trans(vb, bV + voff + kk * 16 * RS + dn * 32);
#pragma unroll
                    for (int mi = 0; mi < MI; mi++) {
                        mma16816<T>(o[mi][2 * dn], pa[mi], vb[0], vb[1]);
                        mma16816<T>(o[mi][2 * dn + 1], pa[mi], vb[2], vb[3]);
                    }
                }
            }
        }
    }
#undef LOAD_K
#undef LOAD_V

    if (KG > 1) {
        /* Merge the key groups into group 0. Thread (wi, lane) of every
         * group holds the same fragment elements, so group g > 0 parks its
         * m, l (per lane, before the quad sum) and o in the K/V buffers,
         * [g-1][wi][mi][dt][lane] float4s, lanes adjacent (no conflicts),
         * and group 0 rescales both sides to the common max. */
        cp_async_wait<0>();
        __syncthreads(); /* every group done: no copy in flight, no reader of the buffers */
        float *scr = reinterpret_cast<float *>(smem + BR * RS);
        constexpr int SLOT = BR * D + 2 * MI * 2 * GTH; /* floats per parked group */
        if (kg > 0) {
            float *so = scr + (kg - 1) * SLOT;
#pragma unroll
            for (int mi = 0; mi < MI; mi++) {
#pragma unroll
                for (int dt = 0; dt < DT; dt++)
                    *reinterpret_cast<float4 *>(so + (((wi * MI + mi) * DT + dt) * 32 + lane) * 4) =
                        make_float4(o[mi][dt][0], o[mi][dt][1], o[mi][dt][2], o[mi][dt][3]);
#pragma unroll
                for (int rh = 0; rh < 2; rh++) {
                    so[BR * D + ((wi * MI + mi) * 2 + rh) * 32 + lane] = m[mi][rh];
                    so[BR * D + MI * 2 * GTH + ((wi * MI + mi) * 2 + rh) * 32 + lane] = l[mi][rh];
                }
            }
        }
        __syncthreads();
        if (kg > 0)
            return;
#pragma unroll 1
        for (int g = 1; g < KG; g++) {
            const float *so = scr + (g - 1) * SLOT;
#pragma unroll
            for (int mi = 0; mi < MI; mi++)
#pragma unroll
                for (int rh = 0; rh < 2; rh++) {
                    const float m1 = so[BR * D + ((wi * MI + mi) * 2 + rh) * 32 + lane];
                    const float l1 = so[BR * D + MI * 2 * GTH + ((wi * MI + mi) * 2 + rh) * 32 + lane];
                    const float mx = fmaxf(m[mi][rh], m1);
                    const float ms = mx == -INFINITY ? 0.f : mx * p.sl2;
                    const float a0 = ex2(m[mi][rh] * p.sl2 - ms), a1 = ex2(m1 * p.sl2 - ms);
                    m[mi][rh] = mx;
                    l[mi][rh] = l[mi][rh] * a0 + l1 * a1;
#pragma unroll
                    for (int dt = 0; dt < DT; dt++) {
                        const float4 x = *reinterpret_cast<const float4 *>(
                            so + (((wi * MI + mi) * DT + dt) * 32 + lane) * 4);
                        o[mi][dt][2 * rh] = o[mi][dt][2 * rh] * a0 + (rh ? x.z : x.x) * a1;
                        o[mi][dt][2 * rh + 1] = o[mi][dt][2 * rh + 1] * a0 + (rh ? x.w : x.y) * a1;
                    }
                }
        }
    }

    /* Epilogue (group 0): full row sums over the quad, normalise (a row
     * that saw no key has l = 0 and o = 0 and stays 0), stage the warp's
     * rows in its own rows of sQ (only this warp ever read them, and no copy
     * is in flight), then write 16-byte chunks, coalesced. */
    __syncwarp();
#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
        for (int rh = 0; rh < 2; rh++) {
            float sum = l[mi][rh];
            sum += __shfl_xor_sync(0xffffffffu, sum, 1);
            sum += __shfl_xor_sync(0xffffffffu, sum, 2);
            const float inv = sum > 0.f ? 1.f / sum : 0.f;
            const int row = wi * MI * 16 + mi * 16 + gr + rh * 8;
#pragma unroll
            for (int dt = 0; dt < DT; dt++) {
                uint32_t w = pack2<T>(o[mi][dt][2 * rh] * inv, o[mi][dt][2 * rh + 1] * inv);
                *reinterpret_cast<uint32_t *>(smem + row * RS + dt * 16 + 4 * tq) = w;
            }
        }
    __syncwarp();
    T *gO = reinterpret_cast<T *>(p.o) + bi * p.osb + h * p.osh + (int64_t)m0 * p.oss;
#pragma unroll
    for (int it = 0; it < MI * 16 * CPR / 32; it++) {
        const int L = lane + it * 32;
        const int row = wi * MI * 16 + L / CPR, c = L % CPR;
        if (m0 + row < p.sq && (EVEN || c * 8 < p.d))
            *reinterpret_cast<uint4 *>(gO + (int64_t)row * p.oss + c * 8) =
                *reinterpret_cast<const uint4 *>(smem + row * RS + c * 16);
    }
}

/* Pipeline depth and shared memory of version 2: cuda_fused_configs.h. */
template <int D, int BC>
struct splitkv_stages {
    static constexpr int value = SPLITKV_STAGES(D, BC);
};

template <int D, int BC, int NW>
constexpr size_t splitkv_smem()
{
    return SPLITKV_SMEM(D, BC, NW);
}

/* ---- version 2's parts, shared by its two loaders (cp.async, bulk) */

/* Where a version 2 block works: block -> (row tile, split, batch*KV
 * head), row tiles fastest (they share this split's K/V in L2), then
 * splits; the key tiles of its range (nt_blk from tile tb); the key limits
 * of lane rows gr and gr+8. */
struct splitkv_block {
    int bi, kvh, r0, R, split, tb, nt_blk;
    int lim[2];
    bool hi; /* a real row among the tile's rows 8-15 (g sq <= 8 has none) */
};

template <int BC>
__device__ __forceinline__ splitkv_block splitkv_where(const fused_args &p, int gr)
{
    splitkv_block w;
    int idx = blockIdx.x;
    const int rt = idx % p.nrb;
    idx /= p.nrb;
    w.split = idx % p.splits;
    const int bk = idx / p.splits;
    w.bi = bk / p.hkv, w.kvh = bk - w.bi * p.hkv;
    w.R = p.g * p.sq; /* folded rows of this KV head */
    w.r0 = rt * 16;
    w.hi = w.R - w.r0 > 8;
    const int off = p.skv - p.sq;
    /* Keys the block's rows see (causal: up to the largest i among them;
     * a tile that wraps to the next head holds i = sq-1), cut to this
     * split's range of tiles. */
    int kend = p.skv;
    const int rlast = min(w.r0 + 16, w.R) - 1;
    if (p.causal) {
        const int imax = (w.r0 / p.sq != rlast / p.sq) ? p.sq - 1 : rlast % p.sq;
        kend = min(kend, imax + off + 1);
    }
    const int ntot = kend > 0 ? (kend + BC - 1) / BC : 0;
    w.tb = w.split * p.tps;
    w.nt_blk = max(0, min(ntot, w.tb + p.tps) - w.tb);
#pragma unroll
    for (int rh = 0; rh < 2; rh++) {
        const int r = w.r0 + gr + rh * 8;
        const int i = r < w.R ? r % p.sq : 0;
        w.lim[rh] = p.causal ? min(p.skv, i + off + 1) : p.skv;
    }
    return w;
}

/* Q: the block's 16 folded rows into aQ (cp.async, rows past R and
 * columns past d zero), by threads [0, NTH); one commit group. Every
 * folded row has its own (head, position) address. */
template <typename T, int D, int NTH>
__device__ __forceinline__ void splitkv_load_q(const fused_args &p, const splitkv_block &w, uint32_t aQ, int tid)
{
    constexpr int CPR = D / 8, RS = tile_rs<D>::value;
    const T *q = reinterpret_cast<const T *>(p.q);
    for (int L = tid; L < 16 * CPR; L += NTH) {
        const int row = L / CPR, c = L % CPR, r = w.r0 + row;
        const bool ok = r < w.R && c * 8 < p.d;
        const T *src = q;
        if (ok) {
            const int hg = r / p.sq, i = r - hg * p.sq;
            src = q + w.bi * p.qsb + (int64_t)(w.kvh * p.g + hg) * p.qsh + (int64_t)i * p.qss + c * 8;
        }
        cp_async16_zfill(aQ + (uint32_t)(row * RS + c * 16), src, ok);
    }
    cp_async_commit();
}

/* One key tile for one warp: S = Q K^T over the warp's KW keys (first key
 * n0; K rows at aK, V rows at aV, both already offset to this lane's
 * ldmatrix rows, Q at aQ likewise), keys at or past a row's limit masked,
 * the online softmax (rows 8-15 skipped when !hi), O += P V. K and V are
 * padded rows (SBC = 0: RS bytes a row) or, SBC > 0, TMA's
 * 128-byte-swizzled boxes of 64 columns x SBC rows, one after the other:
 * the 16-byte chunk c of row r at box c/8, r*128 + ((c%8) ^ (r%8))*16. A
 * lane's ldmatrix rows are r%8 = lane%8 in every step, so the swizzle is
 * one XOR with a per-lane constant, yk (K) or yv (V): the lane's chunk bit
 * ^ lane%8. */
template <typename T, int D, int KW, int SBC = 0>
__device__ __forceinline__ void splitkv_tile(uint32_t aQ, uint32_t aK, uint32_t aV, int n0, int tq,
                                             const int (&lim)[2], bool hi, float (&o)[D / 8][4], float (&m)[2],
                                             float (&l)[2], float sl2, uint32_t yk = 0, uint32_t yv = 0)
{
    constexpr int NT = KW / 8, RS = SBC ? 128 : tile_rs<D>::value;
    /* Two accumulators from d = 128, even and odd k16 steps, added at the
     * end: two dependent MMA chains of D/32 instead of one of D/16 (one
     * warp per scheduler has no other warp to hide a chain behind). On
     * the H200's decode steps, with the skips of softmax_step, within
     * tactics_time's noise: those wait on their loads (docs/kernels.md). */
    constexpr int CH = D >= 128 ? 2 : 1;
    float s[NT][4], s2[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; nt++) {
        s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
        s2[nt][0] = s2[nt][1] = s2[nt][2] = s2[nt][3] = 0.f;
    }
    /* Q fragments are re-read from shared memory each tile rather than
     * held: 4*D/16 registers (64 at d = 256) this kernel spends better
     * on the accumulators; shared bandwidth is not its limit. */
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
        uint32_t qa[4];
        ldmatrix_x4(qa, aQ + kk * 32);
#pragma unroll
        for (int nj = 0; nj < NT / 2; nj++) {
            uint32_t kb[4];
            if constexpr (SBC == 0)
                ldmatrix_x4(kb, aK + nj * 16 * RS + kk * 32);
            else
                ldmatrix_x4(kb, aK + nj * 16 * RS + (kk / 4) * SBC * 128 + ((((2 * kk) & 7) ^ yk) << 4));
            float(&acc)[NT][4] = (CH == 2 && (kk & 1)) ? s2 : s;
            mma16816<T>(acc[2 * nj], qa, kb[0], kb[1]);
            mma16816<T>(acc[2 * nj + 1], qa, kb[2], kb[3]);
        }
    }
    if constexpr (CH == 2) {
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                s[nt][e] += s2[nt][e];
    }
#pragma unroll
    for (int rh = 0; rh < 2; rh++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int e = 0; e < 2; e++)
                if ((rh == 0 || hi) && n0 + nt * 8 + 2 * tq + e >= lim[rh])
                    s[nt][2 * rh + e] = -INFINITY;
    softmax_step<NT, D / 8, true>(s, o, m, l, sl2, hi);
#pragma unroll
    for (int kk = 0; kk < KW / 16; kk++) {
        uint32_t pa[4];
        p_fragment<T, NT>(pa, s, kk);
#pragma unroll
        for (int dn = 0; dn < D / 16; dn++) {
            uint32_t vb[4];
            if constexpr (SBC == 0)
                ldmatrix_x4_trans(vb, aV + kk * 16 * RS + dn * 32);
            else
                ldmatrix_x4_trans(vb, aV + kk * 16 * RS + (dn / 4) * SBC * 128 + ((((2 * dn) & 7) ^ yv) << 4));
            mma16816<T>(o[2 * dn], pa, vb[0], vb[1]);
            mma16816<T>(o[2 * dn + 1], pa, vb[2], vb[3]);
        }
    }
}

/* The end of a version 2 block, called by all NTH threads once no copy is
 * in flight and no warp reads the K/V stages (they become the scratch at
 * `scratch`): warps [0, NW) write their max, row sum and unnormalised
 * output rows; then every thread merges 4 columns of one row across the
 * warps, weighting warp w by 2^(m_w*sl2 - M*sl2), and writes o (one
 * split) or this split's partial row and its log2-sum-exp. */
template <typename T, int D, int NW, int NTH>
__device__ __forceinline__ void splitkv_merge_store(const fused_args &p, const splitkv_block &w,
                                                    unsigned char *scratch, int warp, int lane,
                                                    const float (&o)[D / 8][4], const float (&m)[2],
                                                    const float (&l)[2])
{
    constexpr int DT = D / 8;
    const int gr = lane >> 2, tq = lane & 3, tid = warp * 32 + lane;
    float *so = reinterpret_cast<float *>(scratch); /* [NW][16][D+4] (+4: fewer bank conflicts) */
    float *sm = so + NW * 16 * (D + 4);             /* [NW][16] */
    float *sl = sm + NW * 16;                       /* [NW][16] */
    if (warp < NW) {
#pragma unroll
        for (int rh = 0; rh < 2; rh++) {
            float sum = l[rh];
            sum += __shfl_xor_sync(0xffffffffu, sum, 1);
            sum += __shfl_xor_sync(0xffffffffu, sum, 2);
            const int row = gr + rh * 8;
            if (tq == 0) {
                sm[warp * 16 + row] = m[rh];
                sl[warp * 16 + row] = sum;
            }
#pragma unroll
            for (int dt = 0; dt < DT; dt++)
                *reinterpret_cast<float2 *>(so + (warp * 16 + row) * (D + 4) + dt * 8 + 2 * tq) =
                    make_float2(o[dt][2 * rh], o[dt][2 * rh + 1]);
        }
    }
    __syncthreads();

    const int NR = p.b * p.hq * p.sq; /* flat real rows of the output */
    for (int L = tid; L < 16 * (D / 4); L += NTH) {
        const int row = L / (D / 4), c4 = (L % (D / 4)) * 4, r = w.r0 + row;
        if (r >= w.R || c4 >= p.d)
            continue;
        float M = -INFINITY;
#pragma unroll
        for (int x = 0; x < NW; x++)
            M = fmaxf(M, sm[x * 16 + row]);
        const float ms = M == -INFINITY ? 0.f : M * p.sl2;
        float den = 0.f;
        float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
        for (int x = 0; x < NW; x++) {
            const float sc = ex2(sm[x * 16 + row] * p.sl2 - ms);
            const float4 v = *reinterpret_cast<const float4 *>(so + (x * 16 + row) * (D + 4) + c4);
            den += sc * sl[x * 16 + row];
            acc.x += sc * v.x;
            acc.y += sc * v.y;
            acc.z += sc * v.z;
            acc.w += sc * v.w;
        }
        /* den >= 1 (the split holding the max contributes 2^0) and <= splits,
         * well inside __fdividef's range; its 2 ulp are far below the f16/bf16
         * output's rounding. IEEE division's slow-path call made ptxas report
         * 8 B of spills on sm_87 (scripts/check_arch.sh). */
        const float inv = den > 0.f ? __fdividef(1.f, den) : 0.f;
        const int hg = r / p.sq, i = r - hg * p.sq;
        const int64_t bh = (int64_t)w.bi * p.hq + w.kvh * p.g + hg;
        if (p.splits == 1) {
            uint2 w2;
            w2.x = pack2<T>(acc.x * inv, acc.y * inv);
            w2.y = pack2<T>(acc.z * inv, acc.w * inv);
            *reinterpret_cast<uint2 *>(reinterpret_cast<T *>(p.o) + w.bi * p.osb +
                                       (int64_t)(w.kvh * p.g + hg) * p.osh + (int64_t)i * p.oss + c4) = w2;
        } else {
            const int64_t rg = (int64_t)w.split * NR + bh * p.sq + i;
            *reinterpret_cast<float4 *>(p.part_o + rg * p.d + c4) =
                make_float4(acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv);
            if (c4 == 0) /* log2 of this split's softmax denominator, in the 2^(s*sl2) scale */
                p.part_lse[rg] = den > 0.f ? ms + __log2f(den) : -INFINITY;
        }
    }
}

/* Version 2: fused_splitkv. Block = 16 folded rows r = (query head within
 * the group) * sq + i of one (batch, KV head), one key range (split). Key
 * tiles of BC keys; warp w takes keys [w*KW, (w+1)*KW) of each tile, with its
 * own running max/sum/output; the warps merge at the end. Loads are always
 * predicated: this kernel waits on memory, not on instructions. */
template <typename T, int D, int BC, int NW>
__global__ void __launch_bounds__(NW * 32) splitkv_fwd_kernel(const fused_args p)
{
    constexpr int KW = BC / NW; /* keys per warp per tile */
    constexpr int DT = D / 8, NTH = NW * 32;
    constexpr int STAGES = splitkv_stages<D, BC>::value;
    constexpr int RS = tile_rs<D>::value;
    static_assert(KW % 16 == 0, "each warp needs whole k16 steps of keys");

    extern __shared__ __align__(128) unsigned char smem[];
    const uint32_t aQ = smem_u32(smem);
    const uint32_t aK = aQ + 16 * RS;          /* STAGES x BC rows */
    const uint32_t aV = aK + STAGES * BC * RS; /* STAGES x BC rows */

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int gr = lane >> 2, tq = lane & 3;
    /* ldmatrix lane offsets as in version 1; K and V from this warp's keys. */
    const uint32_t qoff = (uint32_t)((lane & 15) * RS + (lane >> 4) * 16);
    const uint32_t koff = (uint32_t)((warp * KW + (lane & 7) + ((lane >> 4) << 3)) * RS + ((lane >> 3) & 1) * 16);
    const uint32_t voff = (uint32_t)((warp * KW + (lane & 7) + ((lane >> 3) & 1) * 8) * RS + (lane >> 4) * 16);

    const splitkv_block w = splitkv_where<BC>(p, gr);
    pdl_launch_dependents(); /* the combine may be scheduled now: it waits for us */
    splitkv_load_q<T, D, NTH>(p, w, aQ, tid);

    /* K and V views share strides (launch checks): one offset stays live,
     * as one did before views (a second cost 4 B of spills on sm_87) */
    const int64_t kvoff = w.bi * p.ksb + w.kvh * p.ksh;
    const T *gK = reinterpret_cast<const T *>(p.k) + kvoff;
    const T *gV = reinterpret_cast<const T *>(p.v) + kvoff;
    auto load_kv = [&](int stage, int tile) {
        const int n0 = tile * BC;
        const uint32_t off_s = (uint32_t)(stage * BC * RS);
        load_tile<BC, D, NTH, true>(aK + off_s, gK + (int64_t)n0 * p.kss, p.kss, p.skv - n0, p.d, tid);
        load_tile<BC, D, NTH, true>(aV + off_s, gV + (int64_t)n0 * p.kss, p.kss, p.skv - n0, p.d, tid);
    };

    /* Prologue: STAGES-1 tiles in flight (one commit group each, empty
     * groups included, so the wait counts below stay exact). */
#pragma unroll
    for (int st = 0; st < STAGES - 1; st++) {
        if (st < w.nt_blk)
            load_kv(st, w.tb + st);
        cp_async_commit();
    }
    float o[DT][4];
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
#pragma unroll
    for (int dt = 0; dt < DT; dt++)
        o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.f;

    for (int it = 0; it < w.nt_blk; ++it) {
        cp_async_wait<STAGES - 2>(); /* tile it landed ... */
        __syncthreads();             /* ... for all; all warps are done with tile it-1 */
        {
            const int nx = it + STAGES - 1; /* refill the buffer tile it-1 used */
            if (nx < w.nt_blk)
                load_kv(nx % STAGES, w.tb + nx);
            cp_async_commit();
        }
        const uint32_t bofs = (uint32_t)((it % STAGES) * BC * RS);
        splitkv_tile<T, D, KW>(aQ + qoff, aK + bofs + koff, aV + bofs + voff, (w.tb + it) * BC + warp * KW, tq,
                               w.lim, w.hi, o, m, l, p.sl2);
    }
    cp_async_wait<0>();
    __syncthreads(); /* no copy in flight, no warp reading: the stages become scratch */
    splitkv_merge_store<T, D, NW, NTH>(p, w, smem + 16 * RS, warp, lane, o, m, l);
}

/* Version 2.1: fused_splitkv with stages=S (compute capability 9.0+).
 * Version 2's blocks and arithmetic, its K/V brought in by the TMA unit:
 * one producer thread (warp NW) loads each key tile as 128-byte-swizzled
 * boxes of 64 columns x BC rows (4-16 KB a copy: a bulk copy per 256-byte
 * row ran at a quarter of the bandwidth, bench/decode_floor.cu) through
 * the K and V views' tensor maps (any row stride: a KV cache's [b, h, s, d]
 * or [b, s, h, d]) into S stages behind "full" mbarriers (the bytes) and
 * "empty" ones (the NW consumer warps). Up to S tiles are in flight per
 * block, so one block per SM streams at the SM's share of the bandwidth,
 * where version 2 needs about two. TMA zero-fills rows past skv and
 * columns past d. The consumers load Q with cp.async, as version 2. */
template <typename T, int D, int BC, int NW>
__global__ void __launch_bounds__((NW + 1) * 32)
    splitkv_bulk_kernel(const __grid_constant__ CUtensorMap tk, const __grid_constant__ CUtensorMap tv,
                        const fused_args p)
{
#ifdef FUSED_SM90_PTX
    constexpr int KW = BC / NW, DT = D / 8, NTH = (NW + 1) * 32, NC = NW * 32;
    constexpr int RS = tile_rs<D>::value;
    constexpr uint32_t HALF = (uint32_t)BC * D * 2; /* K (or V) of one stage: D/64 boxes of BC rows */
    static_assert(KW % 16 == 0, "each warp needs whole k16 steps of keys");
    static_assert(D % 64 == 0, "whole 128-byte boxes");

    extern __shared__ __align__(128) unsigned char smem[];
    const int S = p.stages;
    const uint32_t bars = smem_u32(smem); /* full[S], then empty[S] */
    const uint32_t aQ = bars + 128;
    /* stage st: K at aK + st*2*HALF, V HALF after; aligned to 1 KB */
    const uint32_t aK = (aQ + 16 * RS + 1023u) & ~1023u;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int gr = lane >> 2, tq = lane & 3;
    const splitkv_block w = splitkv_where<BC>(p, gr);
    pdl_launch_dependents(); /* the combine may be scheduled now: it waits for us */
    if (tid == 0) {
        for (int st = 0; st < S; st++) {
            mbar_init(bars + 8 * st, 1);
            mbar_init(bars + 8 * (S + st), NW);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    float o[DT][4];
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
#pragma unroll
    for (int dt = 0; dt < DT; dt++)
        o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.f;

    if (warp == NW) {
        /* Producer: tile it into stage it % S once the consumers freed it. */
        if (lane == 0)
            for (int it = 0; it < w.nt_blk; it++) {
                const int st = it % S;
                mbar_wait(bars + 8 * (S + st), ((it / S) & 1) ^ 1);
                const uint32_t full = bars + 8 * st, dK = aK + (uint32_t)st * 2 * HALF;
                mbar_expect_tx(full, 2 * HALF);
                const int n0 = (w.tb + it) * BC;
#pragma unroll
                for (int c = 0; c < D / 64; c++) {
                    tma_load_4d(dK + c * BC * 128, &tk, c * 64, n0, w.kvh, w.bi, full);
                    tma_load_4d(dK + HALF + c * BC * 128, &tv, c * 64, n0, w.kvh, w.bi, full);
                }
            }
    } else {
        splitkv_load_q<T, D, NC>(p, w, aQ, tid);
        cp_async_wait<0>();
        group_sync(1, NC);
        const uint32_t qoff = (uint32_t)((lane & 15) * RS + (lane >> 4) * 16);
        const uint32_t koff = (uint32_t)((warp * KW + (lane & 7) + ((lane >> 4) << 3)) * 128);
        const uint32_t voff = HALF + (uint32_t)((warp * KW + (lane & 7) + ((lane >> 3) & 1) * 8) * 128);
        const uint32_t yk = (uint32_t)(((lane >> 3) & 1) ^ (lane & 7)), yv = (uint32_t)((lane >> 4) ^ (lane & 7));
        for (int it = 0; it < w.nt_blk; it++) {
            const int st = it % S;
            mbar_wait(bars + 8 * st, (it / S) & 1);
            const uint32_t base = aK + (uint32_t)st * 2 * HALF;
            splitkv_tile<T, D, KW, BC>(aQ + qoff, base + koff, base + voff, (w.tb + it) * BC + warp * KW, tq, w.lim,
                                       w.hi, o, m, l, p.sl2, yk, yv);
            __syncwarp();
            if (lane == 0)
                mbar_arrive(bars + 8 * (S + st));
        }
    }
    __syncthreads(); /* every tile consumed, so every copy landed: the stages become scratch */
    splitkv_merge_store<T, D, NW, NTH>(p, w, smem + (aK - bars), warp, lane, o, m, l);
#else
    (void)tk, (void)tv, (void)p; /* a pass before 9.0: never launched (launch_splitkv_bulk checks the code's version) */
    __trap();
#endif
}

/* Version 2, second kernel: o[row] = sum_s w_s part_o[s][row] / sum_s w_s,
 * w_s = 2^(lse_s - max lse). One thread per 4 columns of an output row
 * (d % 4 == 0, as the kernels that write the partials require), so a row
 * of d = 256 has 64 threads and the grid spreads over the SMs; the splits
 * are read 4 or 8 at a time, their loads in flight together (one warp per
 * row reading one split after another, a load's latency each, took 7.1 us
 * for 64 rows x 8 splits in ncu, this 5.3: bench/decode-v22-h200-20261204.txt).
 * The sums run in split order, as before. A row that no split saw (all lse =
 * -inf) is 0. */
template <typename T>
__global__ void __launch_bounds__(128) splitkv_combine_kernel(const fused_args p)
{
    const int C4 = p.d / 4;
    const int64_t NR = p.prows > 0 ? p.prows : (int64_t)p.b * p.hq * p.sq; /* rows of one split */
    const int64_t idx = (int64_t)blockIdx.x * 128 + threadIdx.x;
    if (idx >= NR * C4)
        return;
    const int64_t rg = idx / C4; /* of the partials; the output's row is p.prow0 + rg */
    const int c4 = (int)(idx - rg * C4) * 4;
    pdl_wait(); /* the partials' kernel has finished and its writes are visible */
    const float *lse = p.part_lse + rg;
    float mx = -INFINITY;
    int s = 0;
    for (; s + 8 <= p.splits; s += 8) {
        float x[8];
#pragma unroll
        for (int u = 0; u < 8; u++)
            x[u] = lse[(int64_t)(s + u) * NR];
#pragma unroll
        for (int u = 0; u < 8; u++)
            mx = fmaxf(mx, x[u]);
    }
    for (; s < p.splits; s++)
        mx = fmaxf(mx, lse[(int64_t)s * NR]);
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    float den = 0.f;
    if (mx != -INFINITY) {
        const float *po = p.part_o + rg * p.d + c4;
        const int64_t ss = NR * p.d; /* one split's partials */
        s = 0;
        for (; s + 4 <= p.splits; s += 4) {
            float l[4];
            float4 x[4];
#pragma unroll
            for (int u = 0; u < 4; u++) {
                l[u] = lse[(int64_t)(s + u) * NR];
                x[u] = *reinterpret_cast<const float4 *>(po + (int64_t)(s + u) * ss);
            }
#pragma unroll
            for (int u = 0; u < 4; u++) {
                const float w = ex2(l[u] - mx);
                den += w;
                acc.x += w * x[u].x;
                acc.y += w * x[u].y;
                acc.z += w * x[u].z;
                acc.w += w * x[u].w;
            }
        }
        for (; s < p.splits; s++) {
            const float w = ex2(lse[(int64_t)s * NR] - mx);
            const float4 x = *reinterpret_cast<const float4 *>(po + (int64_t)s * ss);
            den += w;
            acc.x += w * x.x;
            acc.y += w * x.y;
            acc.z += w * x.z;
            acc.w += w * x.w;
        }
    }
    /* den >= 1 (the split holding the max contributes 2^0) and <= splits,
     * well inside __fdividef's range; its 2 ulp are far below the f16/bf16
     * output's rounding. IEEE division's slow-path call made ptxas report
     * 8 B of spills on sm_87 (scripts/check_arch.sh). */
    const float inv = den > 0.f ? __fdividef(1.f, den) : 0.f;
    const int64_t ro = p.prow0 + rg, bh = ro / p.sq, i = ro - bh * p.sq, bi = bh / p.hq, h = bh - bi * p.hq;
    T *dst = reinterpret_cast<T *>(p.o) + bi * p.osb + h * p.osh + i * p.oss;
    uint2 w2;
    w2.x = pack2<T>(acc.x * inv, acc.y * inv);
    w2.y = pack2<T>(acc.z * inv, acc.w * inv);
    *reinterpret_cast<uint2 *>(dst + c4) = w2;
}

} /* namespace */

/* ---- tensor maps (contracts in cuda_fused_common.cuh) */

/* cuTensorMapEncodeTiled, looked up once, thread-safe (a C++ local
 * static); NULL when the driver lacks it. */
static PFN_cuTensorMapEncodeTiled_v12000 encode_fn()
{
    static PFN_cuTensorMapEncodeTiled_v12000 fn = []() -> PFN_cuTensorMapEncodeTiled_v12000 {
        void *f = NULL;
        cudaDriverEntryPointQueryResult q;
#if CUDART_VERSION >= 12050
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) !=
            cudaSuccess)
            return NULL;
#else
        if (cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &f, cudaEnableDefault, &q) != cudaSuccess)
            return NULL;
#endif
        return q == cudaDriverEntryPointSuccess ? (PFN_cuTensorMapEncodeTiled_v12000)f : NULL;
    }();
    return fn;
}

int cuda_tma_encode_map(CUtensorMap *map, CUtensorMapDataType dt, void *data, const cuuint64_t dims[4],
                        const cuuint64_t strides[3], uint32_t box0, uint32_t box1)
{
    PFN_cuTensorMapEncodeTiled_v12000 enc = encode_fn();
    if (enc == NULL)
        return ATTUNE_EGPU;
    cuuint32_t box[4] = {box0, box1, 1, 1};
    cuuint32_t estr[4] = {1, 1, 1, 1};
    CUresult r = enc(map, dt, 4, data, dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                     CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                     CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return r == CUDA_SUCCESS ? 0 : ATTUNE_EINVAL;
}

int cuda_tma_make_map(CUtensorMap *map, const attn_tensor *t, CUtensorMapDataType dt, int es, int64_t b,
                      int64_t heads, int64_t rows, int64_t d, int box_rows)
{
    cuuint64_t dims[4] = {(cuuint64_t)d, (cuuint64_t)rows, (cuuint64_t)heads, (cuuint64_t)b};
    /* a stride of a dimension of size 1 is never used: give TMA a legal one */
    cuuint64_t strides[3] = {(cuuint64_t)t->ss * es, (cuuint64_t)(heads > 1 ? t->sh : t->ss) * es,
                             (cuuint64_t)(b > 1 ? t->sb : t->ss) * es};
    return cuda_tma_encode_map(map, dt, t->data, dims, strides, 128 / es, (uint32_t)box_rows);
}

/* ---- launchers

/* The kernel configurations built: FUSED_CONFIGS and SPLITKV_CONFIGS of
 * cuda_fused_configs.h (their descriptors read the same lines). */

/* Configurations an architecture does not get, because ptxas spills
 * registers in them there (scripts/check_arch.sh compiles every kernel for
 * sm_87 and sm_110 and fails on any other spill; it reads these lines):
 * (sm, variant, D, Br, Bc, warps), Br = 16 for fused_splitkv. Those over the
 * architecture's shared memory per block are left out by smem_fits. */
#define ARCH_EXCLUDED(X)                                                         \
    X(87, ATTN_FUSED, 128, 128, 64, 4)    /* 4 B spilled on the aligned path */  \
    X(87, ATTN_FUSED, 256, 64, 64, 8)     /* 24-36 B (and over 163 KB smem) */   \
    X(87, ATTN_FUSED_SPLITKV, 128, 16, 32, 2) /* 12 B */                         \
    X(87, ATTN_FUSED_SPLITKV, 256, 16, 32, 2) /* 8 B */                          \
    X(110, ATTN_FUSED, 128, 128, 64, 4)   /* 20 B on the unaligned path */       \
    X(110, ATTN_FUSED, 256, 64, 64, 4)    /* 8 B */                              \
    X(110, ATTN_FUSED, 256, 64, 64, 8)    /* 8-12 B */                           \
    X(110, ATTN_FUSED_SPLITKV, 64, 16, 128, 4) /* 8 B */

/* Largest dynamic shared memory one block may opt in to, per compute
 * capability (kernels/variants.c holds the table). */
static size_t smem_block_max(int cc_major, int cc_minor)
{
    attn_sm_limits lim;
    attn_sm_limits_of(cc_major, cc_minor, &lim);
    return (size_t)lim.smem_block;
}

template <int D, int BR, int BC, int NW, int KVST>
constexpr size_t fused_smem()
{
    return FUSED_SMEM(D, BR, BC, NW, KVST);
}

/* Does architecture cc get this configuration? Shared memory within its
 * per-block limit and not in ARCH_EXCLUDED. */
static bool arch_gets(int cc_major, int cc_minor, attn_variant v, int d, int br, int bc, int nw,
                      size_t smem)
{
    if (smem > smem_block_max(cc_major, cc_minor))
        return false;
    const int cc = cc_major * 10 + cc_minor;
#define EXCLUDED(SM_, V_, D_, BR_, BC_, NW_)                                      \
    if (cc == SM_ && v == V_ && d == D_ && br == BR_ && bc == BC_ && nw == NW_)   \
        return false;
    ARCH_EXCLUDED(EXCLUDED)
#undef EXCLUDED
    return true;
}

extern "C" size_t cuda_fused_smem_bytes(const attn_tactic *t, int64_t d)
{
    const int D = FUSED_KERNEL_DIM(d);
    if (t == NULL)
        return 0;
#define V1_SMEM_OF(D_, BR_, BC_, NW_, KVST_)                                     \
    if (t->variant == ATTN_FUSED && D == D_ && t->tile_m == BR_ && t->tile_n == BC_ && \
        t->warps == NW_)                                                         \
        return fused_smem<D_, BR_, BC_, NW_, KVST_>();
    FUSED_CONFIGS(V1_SMEM_OF)
#undef V1_SMEM_OF
#define V2_SMEM_OF(D_, BC_, NW_)                                                 \
    if (t->variant == ATTN_FUSED_SPLITKV && t->stages == 0 && D == D_ && t->tile_n == BC_ && \
        t->warps == NW_)                                                         \
        return splitkv_smem<D_, BC_, NW_>();
    SPLITKV_CONFIGS(V2_SMEM_OF)
#undef V2_SMEM_OF
#define V21_SMEM_OF(D_, BC_, NW_)                                                \
    if (t->variant == ATTN_FUSED_SPLITKV && t->stages > 0 && D == D_ && t->tile_n == BC_ && \
        t->warps == NW_)                                                         \
        return SPLITKV_BULK_SMEM(D_, BC_, NW_, t->stages);
    SPLITKV_BULK_CONFIGS(V21_SMEM_OF)
#undef V21_SMEM_OF
    return 0;
}

/* Padded kernel head dim for d: the next of 32, 64, 128, 256; 0 if none. */
static int kernel_dim(int64_t d)
{
    return FUSED_KERNEL_DIM(d);
}

#if FUSED_CAUSAL_ORDER
/* Contract in cuda_fused_common.cuh. */
int cuda_fused_causal_order(const void *kern, int threads, size_t smem, int64_t units, int nrb, int64_t unit_bytes,
                            int *chunk, int *clast)
{
    int dev = 0, sms = 0, l2 = 0, per_sm = 0;
    if (!cu_ok(cudaGetDevice(&dev)) || !cu_ok(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) ||
        !cu_ok(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev)) ||
        !cu_ok(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, threads, smem)))
        return ATTUNE_EGPU;
    static const int64_t mb = [] {
        const char *e = getenv("ATTUNE_FUSED_CHUNK_MB");
        return e != NULL ? (int64_t)atoi(e) : (int64_t)-1;
    }();
    const int64_t budget = mb >= 0 ? mb << 20 : (int64_t)l2 / 6;
    const int64_t per = unit_bytes > 0 ? unit_bytes : 1, c = budget / per;
    *chunk = (int)(c < 1 ? 1 : c > units ? units : c);
    *clast = fused_causal_clast(units, nrb, *chunk, per, SM90_TAIL_BUDGETS * budget,
                                (long long)sms * (per_sm > 0 ? per_sm : 1));
    return 0;
}
#endif

template <typename T, int D, int BR, int BC, int NW, int KVST>
static int launch_fused(const fused_args &p, bool even, cudaStream_t stream)
{
    const size_t smem = fused_smem<D, BR, BC, NW, KVST>();
    void (*kern)(const fused_args) = even ? fused_fwd_kernel<T, D, BR, BC, NW, KVST, true>
                                          : fused_fwd_kernel<T, D, BR, BC, NW, KVST, false>;
    /* Not a stream operation: allowed while a graph is being captured. */
    if (!cu_ok(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem)))
        return ATTUNE_EGPU;
    const int64_t blocks = (int64_t)p.nrb * p.b * p.hq;
    if (blocks > INT_MAX)
        return ATTUNE_EUNSUPP;
#if FUSED_CAUSAL_ORDER
    fused_args q = p; /* version 1.2: the causal order's chunks */
    const int rc = p.causal ? cuda_fused_causal_order((const void *)kern, NW * 32, smem, blocks / p.nrb, p.nrb,
                                                      (int64_t)p.skv * p.d * 2 * (int64_t)sizeof(T) / p.g,
                                                      &q.chunk, &q.clast)
                            : 0;
    if (rc != 0)
        return rc;
#else
    const fused_args &q = p;
#endif
    return cu_launch(kern, (unsigned)blocks, NW * 32, smem, stream, q) == cudaSuccess ? 0
                                                                               : ATTUNE_EGPU;
}

/* Was the code of kern that runs on the current device compiled for 9.0
 * or later (ptxVersion and binaryVersion >= 90)? Asked before a combine
 * is made a programmatic dependent launch (a kernel JIT-compiled from
 * compute_87 PTX on a Hopper has no griddepcontrol.wait, and launched
 * with the attribute it could read the partials before they are written)
 * and before version 2.1 runs at all (its body traps in such code).
 * Asked once per device (cudaFuncGetAttributes), kept in `cache` (0:
 * unknown, 1: no, 2: yes); any error is cleared and answers no. */
static bool runs_sm90_code(const void *kern, std::atomic<int> *cache, int ncache)
{
    int dev = 0;
    if (!cu_ok(cudaGetDevice(&dev)))
        return false;
    if (dev >= 0 && dev < ncache) {
        const int c = cache[dev].load(std::memory_order_relaxed);
        if (c != 0)
            return c == 2;
    }
    cudaFuncAttributes fa;
    const bool ok = cu_ok(cudaFuncGetAttributes(&fa, kern)) && fa.ptxVersion >= 90 &&
                    fa.binaryVersion >= 90;
    if (dev >= 0 && dev < ncache)
        cache[dev].store(ok ? 2 : 1, std::memory_order_relaxed);
    return ok;
}

/* The combine step of p.splits > 1 key ranges: one warp per output row.
 * Where runs_sm90_code, it is a programmatic dependent launch: its blocks may
 * be scheduled while the partials' kernel still runs (fused_splitkv lets
 * them once all its blocks started; the folded sm90a kernel at its end)
 * and wait in pdl_wait for that kernel's end and writes, so the launch
 * latency between the two kernels is hidden. Streams and CUDA graphs keep
 * the order (a graph records the edge as a programmatic one). */
template <typename T>
static int launch_combine(const fused_args &p, cudaStream_t stream)
{
    static std::atomic<int> pdl_cache[64];
    const int64_t rows = p.prows > 0 ? p.prows : (int64_t)p.b * p.hq * p.sq;
    void (*kern)(const fused_args) = splitkv_combine_kernel<T>;
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    const int64_t threads = rows * (p.d / 4);
    if ((threads + 127) / 128 > INT_MAX)
        return ATTUNE_EUNSUPP;
    cfg.gridDim = dim3((unsigned)((threads + 127) / 128));
    cfg.blockDim = dim3(128);
    cfg.dynamicSmemBytes = 0;
    cfg.stream = stream;
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = runs_sm90_code((const void *)kern, pdl_cache, 64) ? 1 : 0;
    return cu_ok(cudaLaunchKernelEx(&cfg, kern, p)) ? 0 : ATTUNE_EGPU;
}

template <typename T, int D, int BC, int NW>
static int launch_splitkv(const fused_args &p, cudaStream_t stream)
{
    const size_t smem = splitkv_smem<D, BC, NW>();
    void (*kern)(const fused_args) = splitkv_fwd_kernel<T, D, BC, NW>;
    if (!cu_ok(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem)))
        return ATTUNE_EGPU;
    const int64_t blocks = (int64_t)p.nrb * p.splits * p.b * p.hkv;
    if (blocks > INT_MAX)
        return ATTUNE_EUNSUPP;
    if (cu_launch(kern, (unsigned)blocks, NW * 32, smem, stream, p) != cudaSuccess)
        return ATTUNE_EGPU;
    return p.splits > 1 ? launch_combine<T>(p, stream) : 0;
}

/* Version 2.1's launch: refused (EUNSUPP) when the code the device runs
 * was built for an architecture before 9.0 (a compute_87 PTX JIT-compiled
 * on a Hopper has no bulk copies: its kernel body traps). */
template <typename T, int D, int BC, int NW>
static int launch_splitkv_bulk(const fused_args &p, cudaStream_t stream)
{
    static std::atomic<int> ok_cache[64];
    const size_t smem = SPLITKV_BULK_SMEM(D, BC, NW, p.stages);
    void (*kern)(CUtensorMap, CUtensorMap, fused_args) = splitkv_bulk_kernel<T, D, BC, NW>;
    if (p.stages < 1 || p.stages > SPLITKV_BULK_MAX_STAGES)
        return ATTUNE_EUNSUPP;
    if (!runs_sm90_code((const void *)kern, ok_cache, 64))
        return ATTUNE_EUNSUPP;
    /* K and V share strides (launch checks); d columns, skv rows: TMA
     * zero-fills the rest of the last tile and of the last box */
    attn_tensor kt = {}, vt = {};
    kt.data = const_cast<void *>(p.k), kt.sb = p.ksb, kt.sh = p.ksh, kt.ss = p.kss;
    vt = kt;
    vt.data = const_cast<void *>(p.v);
    const CUtensorMapDataType dt =
        std::is_same<T, __nv_bfloat16>::value ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    CUtensorMap tk, tv;
    int rc;
    if ((rc = cuda_tma_make_map(&tk, &kt, dt, 2, p.b, p.hkv, p.skv, p.d, BC)) != 0 ||
        (rc = cuda_tma_make_map(&tv, &vt, dt, 2, p.b, p.hkv, p.skv, p.d, BC)) != 0)
        return rc;
    if (!cu_ok(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem)))
        return ATTUNE_EGPU;
    const int64_t blocks = (int64_t)p.nrb * p.splits * p.b * p.hkv;
    if (blocks > INT_MAX)
        return ATTUNE_EUNSUPP;
    if (cu_launch(kern, (unsigned)blocks, (NW + 1) * 32, smem, stream, tk, tv, p) != cudaSuccess)
        return ATTUNE_EGPU;
    return p.splits > 1 ? launch_combine<T>(p, stream) : 0;
}

/* Version 2's combine kernel for version 3's key splits (the same
 * partials layout, over rows row0 on). */
int cuda_fused_combine(const attn_shape *s, int splits, const float *part_o, const float *part_lse,
                       const attn_tensor *o, int64_t row0, int64_t rows, cudaStream_t stream)
{
    if (rows <= 0 || row0 < 0 || row0 + rows > s->b * s->hq * s->sq)
        return ATTUNE_EINVAL;
    fused_args p = {};
    p.o = o->data;
    p.osb = o->sb, p.osh = o->sh, p.oss = (int)o->ss;
    p.part_o = const_cast<float *>(part_o), p.part_lse = const_cast<float *>(part_lse);
    p.b = (int)s->b, p.hq = (int)s->hq, p.sq = (int)s->sq, p.d = (int)s->d;
    p.splits = splits;
    p.prow0 = row0, p.prows = rows;
    /* e4m3's output is bf16 */
    return s->dtype == ATTN_BF16 || s->dtype == ATTN_E4M3 ? launch_combine<__nv_bfloat16>(p, stream)
                                                           : launch_combine<__half>(p, stream);
}

/* ---- dispatcher */

/* Is shape s one these kernels take at all? f16/bf16, d a multiple of 8
 * (16-byte rows for cp.async) up to 256. */
static int shape_supported(const attn_shape *s)
{
    return (s->dtype == ATTN_F16 || s->dtype == ATTN_BF16) && s->d % 8 == 0 && kernel_dim(s->d) != 0;
}

/* Key tiles of BC keys over the real skv. */
static int64_t kv_tiles(const attn_shape *s, int bc)
{
    return (s->skv + bc - 1) / bc;
}

/* Is split count sp (1, 2, 4, ...) listed for a grid of `base` blocks per
 * split over nt key tiles? While the grid of the previous count stayed
 * under ~8 blocks per SM of a large GPU (132 SMs), and a split keeps at
 * least one key tile. */
static bool splitkv_split_listed(int sp, int64_t base, int64_t nt)
{
    return sp <= 64 && sp <= nt && (sp == 1 || base * (sp / 2) < 8 * 132);
}

/* fused_splitkv is for decode-like shapes: the folded rows of a KV head
 * (g * sq) fill at most 32 16-row tiles, and there are enough keys to
 * split. Up to 512 rows, not just a few, so that grouped shapes with few
 * query rows per head (DESIGN.md's b1.hq8.hkv1.sq50.skv1018.d256: 8 blocks
 * of fused 64-row tiles on 132 SMs) get key-split candidates too. */
static int splitkv_applies(const attn_shape *s)
{
    return attn_shape_group(s) * s->sq <= SPLITKV_MAX_ROWS && s->skv >= SPLITKV_MIN_KEYS;
}

extern "C" int cuda_fused_tactics(const attn_shape *s, int cc_major, int cc_minor, attn_tactic *out, int max)
{
    if (s != NULL && out != NULL && max > 0 && s->dtype == ATTN_E4M3) {
        /* e4m3: version 3.5 alone, on 9.0, at pad 1 (TMA reads any length) */
        int n = 0;
#ifdef ATTUNE_HAVE_SM90A
        if (cc_major == 9 && cc_minor == 0)
            n = cuda_fused_sm90a_configs(s, out, max);
        for (int i = 0; i < n; i++)
            out[i].pad = 1;
#else
        (void)cc_minor;
#endif
        return n;
    }
    if (s == NULL || out == NULL || max <= 0 || cc_major < 8 || !shape_supported(s))
        return 0;
    const int D = kernel_dim(s->d);
    int n = 0;
#define ADD(t_)                                                              \
    do {                                                                     \
        for (int pi = 0; pi < ATTN_NPADS && n < max; pi++) {                 \
            out[n] = (t_);                                                   \
            out[n++].pad = attn_pads[pi];                                    \
        }                                                                    \
    } while (0)
#define FUSED_TACTIC(D_, BR_, BC_, NW_, KVST_)                               \
    if (D == D_ && arch_gets(cc_major, cc_minor, ATTN_FUSED, D_, BR_, BC_, NW_,  \
                             fused_smem<D_, BR_, BC_, NW_, KVST_>())) {      \
        attn_tactic t = {};                                                  \
        t.variant = ATTN_FUSED;                                              \
        t.tile_m = BR_, t.tile_n = BC_, t.warps = NW_;                       \
        ADD(t);                                                              \
    }
    FUSED_CONFIGS(FUSED_TACTIC)
#undef FUSED_TACTIC
#ifdef ATTUNE_HAVE_SM90A
    /* Version 3 (cuda_fused_sm90a.cu): sm_90a code runs on 9.0 only. */
    if (cc_major == 9 && cc_minor == 0) {
        attn_tactic v3[32];
        int nv3 = cuda_fused_sm90a_configs(s, v3, 32);
        for (int i = 0; i < nv3; i++)
            ADD(v3[i]);
    }
#endif
    if (splitkv_applies(s)) {
        /* splits: 1, 2, 4, ... while the grid of the previous count stayed
         * under ~8 blocks per SM of a large GPU (132 SMs), and a split keeps
         * at least one key tile. The tuner measures which wins. */
        const int64_t rows = (attn_shape_group(s) * s->sq + 15) / 16;
        const int64_t base = rows * s->b * s->hkv;
#define SPLITKV_TACTIC(D_, BC_, NW_)                                         \
    if (D == D_ && arch_gets(cc_major, cc_minor, ATTN_FUSED_SPLITKV, D_, 16, BC_, NW_, \
                             splitkv_smem<D_, BC_, NW_>()))                  \
        for (int sp = 1; splitkv_split_listed(sp, base, kv_tiles(s, BC_)); sp *= 2) { \
            attn_tactic t = {};                                              \
            t.variant = ATTN_FUSED_SPLITKV;                                  \
            t.tile_m = 16, t.tile_n = BC_, t.warps = NW_, t.splits = sp;     \
            ADD(t);                                                          \
        }
        SPLITKV_CONFIGS(SPLITKV_TACTIC)
#undef SPLITKV_TACTIC
        /* Version 2.1 (9.0+, bulk copies read any length: pad 1 only): the
         * same splits, at two depths, the most stages a block may hold and
         * the most that let two blocks share an SM. */
        if (cc_major >= 9) {
            attn_sm_limits lim;
            attn_sm_limits_of(cc_major, cc_minor, &lim);
#define SPLITKV_BULK_TACTIC(D_, BC_, NW_)                                    \
    if (D == D_) {                                                           \
        int depth[2] = {0, 0};                                               \
        for (int st = 2; st <= SPLITKV_BULK_MAX_STAGES; st++) {              \
            const double b = (double)SPLITKV_BULK_SMEM(D_, BC_, NW_, st);    \
            if (b <= lim.smem_block)                                         \
                depth[0] = st;                                               \
            if (b + 1024.0 <= lim.smem_sm / 2)                               \
                depth[1] = st;                                               \
        }                                                                    \
        for (int di = 0; di < 2; di++) {                                     \
            if (depth[di] == 0 || (di == 1 && depth[1] == depth[0]))         \
                continue;                                                    \
            for (int sp = 1; splitkv_split_listed(sp, base, kv_tiles(s, BC_)) && n < max; sp *= 2) { \
                attn_tactic t = {};                                          \
                t.variant = ATTN_FUSED_SPLITKV;                              \
                t.tile_m = 16, t.tile_n = BC_, t.warps = NW_, t.splits = sp; \
                t.stages = depth[di], t.pad = 1;                             \
                out[n++] = t;                                                \
            }                                                                \
        }                                                                    \
    }
            SPLITKV_BULK_CONFIGS(SPLITKV_BULK_TACTIC)
#undef SPLITKV_BULK_TACTIC
        }
    }
#undef ADD
    return n;
}

/* part_o's bytes, 256-aligned: part_lse follows them */
static size_t partials_o_bytes(int64_t rows, int64_t d, int splits)
{
    return ((size_t)rows * (size_t)splits * (size_t)d * 4 + 255) / 256 * 256;
}

size_t cuda_fused_partials_bytes(int64_t rows, int64_t d, int splits)
{
    return partials_o_bytes(rows, d, splits) + ((size_t)rows * (size_t)splits * 4 + 255) / 256 * 256;
}

void cuda_fused_partials(int64_t rows, int64_t d, int splits, void *ws, float **part_o, float **part_lse)
{
    *part_o = static_cast<float *>(ws);
    *part_lse = reinterpret_cast<float *>(static_cast<char *>(ws) + partials_o_bytes(rows, d, splits));
}

/* Split tactics: fused_splitkv and the folded sm90a kernel (fused, arch,
 * splits > 1) write partials that a combine step merges. */
extern "C" size_t cuda_fused_workspace_bytes(const attn_shape *s, const attn_tactic *t)
{
    if (s == NULL || t == NULL)
        return 0;
#ifdef ATTUNE_HAVE_SM90A
    if (t->variant == ATTN_FUSED && t->arch == ATTN_ARCH_SM90A)
        return cuda_fused_sm90a_workspace_bytes(s, t); /* e4m3's V^T, the splits', the cut last wave's */
#endif
    if (t->splits <= 1 || !(t->variant == ATTN_FUSED_SPLITKV || (t->variant == ATTN_FUSED && t->arch != 0)))
        return 0;
    return cuda_fused_partials_bytes(s->b * s->hq * s->sq, s->d, t->splits);
}

template <typename T>
static int dispatch(const attn_shape *s, const attn_tactic *t, fused_args &p, int64_t sq_pad,
                    int64_t skv_pad, cudaStream_t stream)
{
    const int D = kernel_dim(s->d);
    switch (t->variant) {
    case ATTN_FUSED: {
        if (t->splits > 1)
            return ATTUNE_EUNSUPP;
#define FUSED_LAUNCH(D_, BR_, BC_, NW_, KVST_)                                   \
    if (D == D_ && t->tile_m == BR_ && t->tile_n == BC_ && t->warps == NW_) {     \
        p.nrb = (int)((s->sq + BR_ - 1) / BR_);                                  \
        const bool even = sq_pad % BR_ == 0 && skv_pad % BC_ == 0 && s->d == D_ &&   \
                          p.qss == D_ && p.kss == D_;                              \
        return launch_fused<T, D_, BR_, BC_, NW_, KVST_>(p, even, stream);      \
    }
        FUSED_CONFIGS(FUSED_LAUNCH)
#undef FUSED_LAUNCH
        return ATTUNE_EUNSUPP; /* no such tile for this head dim */
    }
    case ATTN_FUSED_SPLITKV: {
        if (t->tile_m != 16 || t->splits < 1)
            return ATTUNE_EUNSUPP;
#define SPLITKV_LAUNCH(D_, BC_, NW_)                                             \
    if (D == D_ && t->tile_n == BC_ && t->warps == NW_) {                        \
        const int64_t nt = kv_tiles(s, BC_);                                     \
        p.nrb = (int)((attn_shape_group(s) * s->sq + 15) / 16);                  \
        p.splits = t->splits;                                                    \
        p.tps = (int)((nt + t->splits - 1) / t->splits);                         \
        return launch_splitkv<T, D_, BC_, NW_>(p, stream);                       \
    }
        if (t->stages == 0) {
            SPLITKV_CONFIGS(SPLITKV_LAUNCH)
        }
#undef SPLITKV_LAUNCH
#define SPLITKV_BULK_LAUNCH(D_, BC_, NW_)                                        \
    if (D == D_ && t->tile_n == BC_ && t->warps == NW_) {                        \
        const int64_t nt = kv_tiles(s, BC_);                                     \
        p.nrb = (int)((attn_shape_group(s) * s->sq + 15) / 16);                  \
        p.splits = t->splits;                                                    \
        p.tps = (int)((nt + t->splits - 1) / t->splits);                         \
        p.stages = t->stages;                                                    \
        return launch_splitkv_bulk<T, D_, BC_, NW_>(p, stream);                  \
    }
        if (t->stages > 0) {
            SPLITKV_BULK_CONFIGS(SPLITKV_BULK_LAUNCH)
        }
#undef SPLITKV_BULK_LAUNCH
        return ATTUNE_EUNSUPP;
    }
    default: /* split, folded, ...: GEMM variants, not these kernels */
        return ATTUNE_EUNSUPP;
    }
}

bool cuda_fused_args_ok(const attn_shape *s, const attn_tactic *t, const attn_io *io, int64_t sq_rows,
                        int64_t skv_rows)
{
    return s != NULL && t != NULL && io != NULL && io->q.data != NULL && io->k.data != NULL &&
           io->v.data != NULL && io->o.data != NULL && s->b >= 1 && s->hq >= 1 && s->hkv >= 1 &&
           s->hq % s->hkv == 0 && s->sq >= 1 && s->skv >= 1 && s->d >= 1 && sq_rows >= s->sq &&
           skv_rows >= s->skv && sq_rows <= INT_MAX / 2 && skv_rows <= INT_MAX / 2;
}

bool cuda_fused_views_ok(const attn_shape *s, const attn_io *io)
{
    const attn_tensor *v[4] = {&io->q, &io->k, &io->v, &io->o};
    for (int i = 0; i < 4; i++)
        if (v[i]->sb < 0 || v[i]->sh < 0 || v[i]->ss < s->d || v[i]->ss > INT_MAX / 2 ||
            (v[i]->sb | v[i]->sh | v[i]->ss) % 8 != 0 || (uintptr_t)v[i]->data % 16 != 0)
            return false;
    return true;
}

/* Contract in cuda_fused.h. */
extern "C" int cuda_fused_launch_views(const attn_shape *s, const attn_tactic *t, const attn_io *io,
                                       int64_t sq_rows, int64_t skv_rows, void *workspace,
                                       cudaStream_t stream)
{
    if (!cuda_fused_args_ok(s, t, io, sq_rows, skv_rows))
        return ATTUNE_EINVAL;
    if (t->arch != 0) {
#ifdef ATTUNE_HAVE_SM90A
        return cuda_fused_sm90a_launch(s, t, io, sq_rows, skv_rows, workspace, stream);
#else
        return ATTUNE_EUNSUPP;
#endif
    }
    if (!shape_supported(s) || (t->stages != 0 && t->variant != ATTN_FUSED_SPLITKV))
        return ATTUNE_EUNSUPP;
    /* Block and row counts are ints in the kernels. */
    if (s->b * s->hq > INT_MAX || s->b * s->hq * s->sq > INT_MAX)
        return ATTUNE_EUNSUPP;
    if (!cuda_fused_views_ok(s, io) || io->k.sb != io->v.sb || io->k.sh != io->v.sh ||
        io->k.ss != io->v.ss)
        return ATTUNE_EINVAL; /* versions 1 and 2 read K and V at one set of strides */

    fused_args p = {};
    p.q = io->q.data, p.k = io->k.data, p.v = io->v.data, p.o = io->o.data;
    p.qsb = io->q.sb, p.qsh = io->q.sh, p.qss = (int)io->q.ss;
    p.ksb = io->k.sb, p.ksh = io->k.sh, p.kss = (int)io->k.ss;
    p.osb = io->o.sb, p.osh = io->o.sh, p.oss = (int)io->o.ss;
    p.b = (int)s->b, p.hq = (int)s->hq, p.hkv = (int)s->hkv, p.g = (int)(s->hq / s->hkv);
    p.sq = (int)s->sq, p.skv = (int)s->skv, p.d = (int)s->d;
    p.sq_pad = (int)sq_rows, p.skv_pad = (int)skv_rows;
    p.causal = s->causal ? 1 : 0;
    p.sl2 = (float)(1.4426950408889634 / sqrt((double)s->d));
    p.splits = 1;
    if (t->variant == ATTN_FUSED_SPLITKV && t->splits > 1) {
        if (workspace == NULL)
            return ATTUNE_EINVAL;
        cuda_fused_partials(s->b * s->hq * s->sq, s->d, t->splits, workspace, &p.part_o, &p.part_lse);
    }
    return s->dtype == ATTN_BF16 ? dispatch<__nv_bfloat16>(s, t, p, sq_rows, skv_rows, stream)
                                 : dispatch<__half>(s, t, p, sq_rows, skv_rows, stream);
}

/* Contract in cuda_fused.h: contiguous padded buffers as views. */
extern "C" int cuda_fused_launch(const attn_shape *s, const attn_tactic *t, const void *q, const void *k,
                                 const void *v, void *o, int64_t sq_pad, int64_t skv_pad, void *workspace,
                                 cudaStream_t stream)
{
    if (s == NULL || t == NULL || sq_pad < 1 || skv_pad < 1)
        return ATTUNE_EINVAL;
    attn_shape padded = *s;
    padded.sq = sq_pad, padded.skv = skv_pad;
    attn_io io;
    attn_io_contiguous(&padded, q, k, v, o, &io);
    return cuda_fused_launch_views(s, t, &io, sq_pad, skv_pad, workspace, stream);
}
