/* cuda_fused_common.cuh -- what the fused kernel files share: the device
 * helpers of cuda_fused.cu (versions 1 and 2) and cuda_fused_sm90a.cu
 * (version 3), and the split-KV combine step that version 2 and version 3's
 * folded form (splits > 1) end with. Defined in cuda_fused.cu; C++ only. */
#ifndef ATTUNE_CUDA_FUSED_COMMON_CUH
#define ATTUNE_CUDA_FUSED_COMMON_CUH

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <type_traits>

#include "../attn.h"

/* Shared-window address of a generic pointer into shared memory. */
__device__ __forceinline__ uint32_t smem_u32(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* Two floats -> one register of two T, lo in the low half (the lower
 * column, as the mma fragments want). */
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi)
{
    if constexpr (std::is_same<T, __nv_bfloat16>::value) {
        __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
        return *reinterpret_cast<uint32_t *>(&h);
    } else {
        __half2 h = __floats2half2_rn(lo, hi);
        return *reinterpret_cast<uint32_t *>(&h);
    }
}

/* 2^x, MUFU.EX2 (flushes denormals; ex2(-inf) = +0, which masking relies on). */
__device__ __forceinline__ float ex2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

/* ---- mbarriers and bulk copies (compute capability 9.0+; the bodies are
 * empty in a pass for an earlier architecture, whose callers never run:
 * version 2.1 checks the code's version at launch, version 3 is built for
 * sm_90a alone). */

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define FUSED_SM90_PTX 1
#endif

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count)
{
#ifdef FUSED_SM90_PTX
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
#else
    (void)bar, (void)count;
#endif
}

/* Arrive and add bytes to the transactions the current phase waits for. */
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes)
{
#ifdef FUSED_SM90_PTX
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
#else
    (void)bar, (void)bytes;
#endif
}

__device__ __forceinline__ void mbar_arrive(uint32_t bar)
{
#ifdef FUSED_SM90_PTX
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
#else
    (void)bar;
#endif
}

/* A wait that would never end (a barrier nobody arrives at, a copy that
 * never completes: a bug) faults after FUSED_MBAR_TIMEOUT_NS nanoseconds
 * of the GPU's clock instead of hanging its process and the GPU forever:
 * the launch fails with a sticky error (the context lost), which the
 * tuner stores as that tactic's failure before it stops
 * (attn_ops.health). No wait of a correct kernel comes near: a tile's
 * copy takes microseconds. 0: wait forever. */
#ifndef FUSED_MBAR_TIMEOUT_NS
#define FUSED_MBAR_TIMEOUT_NS 4000000000ull
#endif

/* 1 once the phase of parity `parity` has completed (mbarrier.try_wait:
 * may suspend the thread a while first). */
__device__ __forceinline__ uint32_t mbar_try(uint32_t bar, uint32_t parity)
{
    uint32_t ok = 1;
#ifdef FUSED_SM90_PTX
    asm volatile("{\n.reg .pred p;\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(ok)
                 : "r"(bar), "r"(parity)
                 : "memory");
#else
    (void)bar, (void)parity;
#endif
    return ok;
}

__device__ __forceinline__ uint64_t globaltimer_ns()
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(t));
    return t;
}

/* The deliberate end of a kernel that cannot go on: a store to address
 * 0, an illegal address (a sticky error, as __trap()'s launch failure;
 * __trap() itself made ptxas spill up to 1.8 KB in every sm90a kernel
 * that waits, CUDA 13.0, where this spills nothing). */
__device__ __forceinline__ void fused_fault()
{
    asm volatile("st.global.u32 [%0], %1;\n" ::"l"(0ull), "r"(1u) : "memory");
}

/* mbar_wait without the bound, for the waits of a kernel's innermost loop
 * (the sm90a consumers' per-tile K and V waits): the bound cost the 8k
 * d128 anchors 0.2-1.1% there (H200, 2026-12-05, docs/kernels.md). A
 * consumer stuck in one of them at tile it is still ended by the
 * producer's bounded wait for a free stage when the producer has a tile
 * it + STAGES or later left to load; stuck in one of the last STAGES
 * tiles' waits (the last tile's K wait included), it spins until the
 * process is killed, unless the kernel was built with SM90_TAIL_WAIT=1
 * (cuda_fused_sm90a.cu: the producer then waits, bounded, for those
 * tiles too; off until measured). The first tile's waits and the last V
 * wait are bounded. */
__device__ __forceinline__ void mbar_wait_hot(uint32_t bar, uint32_t parity)
{
    while (!mbar_try(bar, parity)) {
    }
}

/* Wait until the phase of parity `parity` has completed (a fresh barrier
 * is in phase 0, so waiting on parity 1 returns at once: that is how a
 * producer's first pass over the empty barriers goes through); a fault
 * (fused_fault) past FUSED_MBAR_TIMEOUT_NS. The clock is read only once
 * the first try failed, then every 64 tries. */
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity)
{
    if (mbar_try(bar, parity))
        return;
#if FUSED_MBAR_TIMEOUT_NS > 0
    const uint64_t t0 = globaltimer_ns();
    for (uint32_t n = 1; !mbar_try(bar, parity); n++)
        if ((n & 63u) == 0 && (int64_t)(globaltimer_ns() - t0) > (int64_t)FUSED_MBAR_TIMEOUT_NS)
            fused_fault();
#else
    mbar_wait_hot(bar, parity);
#endif
}

/* One bulk copy (the TMA unit, no tensor map) of `bytes` (a multiple of
 * 16, both addresses 16-byte aligned) from global src to shared dst,
 * completing on bar's transaction count. */
__device__ __forceinline__ void bulk_load(uint32_t dst, const void *src, uint32_t bytes, uint32_t bar)
{
#ifdef FUSED_SM90_PTX
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
                 "l"(src), "r"(bytes), "r"(bar)
                 : "memory");
#else
    (void)dst, (void)src, (void)bytes, (void)bar;
#endif
}

/* TMA: box {128 bytes of columns, rows, 1, 1} at coordinates (c0 column,
 * c1 row, c2 head, c3 batch) of the tensor map into shared memory at dst,
 * completing on bar. Four dimensions, so any (batch, head, row) strides of
 * a view ([b, h, s, d], [b, s, h, d], a KV cache) are the map's, not the
 * kernel's. */
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const CUtensorMap *map, int c0, int c1, int c2, int c3,
                                            uint32_t bar)
{
#ifdef FUSED_SM90_PTX
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(dst),
                 "l"((uint64_t)map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
                 : "memory");
#else
    (void)dst, (void)map, (void)c0, (void)c1, (void)c2, (void)c3, (void)bar;
#endif
}

/* A 4-d tensor map over data (dims[0] contiguous; strides of dims 1..3 in
 * bytes, multiples of 16), box {box0, box1, 1, 1}, 128-byte swizzle, zero
 * fill past the dims; cuTensorMapEncodeTiled through the runtime's driver
 * entry point (no -lcuda). 0, ATTUNE_EGPU (no such entry point) or
 * ATTUNE_EINVAL (refused). */
int cuda_tma_encode_map(CUtensorMap *map, CUtensorMapDataType dt, void *data, const cuuint64_t dims[4],
                        const cuuint64_t strides[3], uint32_t box0, uint32_t box1);

/* Tensor map over view t of elements of es bytes (dt): dims {d, rows,
 * heads, b} with the view's strides (TMA wants multiples of 16 bytes: the
 * caller checks), box {128 bytes of columns, box_rows}, zero fill past the
 * real rows and columns. */
int cuda_tma_make_map(CUtensorMap *map, const attn_tensor *t, CUtensorMapDataType dt, int es, int64_t b,
                      int64_t heads, int64_t rows, int64_t d, int box_rows);

/* 1 when the launch arguments every fused kernel shares are sound: no NULL
 * pointer, positive sizes, hq a multiple of hkv, readable rows at least
 * the real lengths and under INT_MAX / 2 (lengths are ints in the
 * kernels). */
bool cuda_fused_args_ok(const attn_shape *s, const attn_tactic *t, const attn_io *io, int64_t sq_rows,
                        int64_t skv_rows);

/* 1 when io's views suit the 16-bit fused kernels: 16-byte aligned bases,
 * strides non-negative and in whole 16-byte units (cp.async rows, vector
 * stores, TMA), row strides >= d and under INT_MAX / 2. */
bool cuda_fused_views_ok(const attn_shape *s, const attn_io *io);

/* The split-KV workspace of `splits` key ranges over `rows` output rows
 * (b*hq*sq for a whole split grid; the cut last wave's rows for sm90a's
 * version 3.12), as cuda_fused_workspace_bytes sizes it: part_o
 * [splits][rows][d] f32 partial outputs (each normalised by its own
 * denominator), then part_lse [splits][rows] f32 log2-sum-exp of each (in
 * the 2^(score * log2(e) / sqrt(d)) scale; -inf for a range that saw no
 * key), 256-byte aligned parts. */
size_t cuda_fused_partials_bytes(int64_t rows, int64_t d, int splits);
void cuda_fused_partials(int64_t rows, int64_t d, int splits, void *ws, float **part_o, float **part_lse);

/* o[row0 + r] = sum_s 2^(lse_s - max lse) part_o[s][r] / sum of the
 * weights, for r < rows of the b*hq*sq real rows of s (o a view, bf16 for
 * e4m3; padded rows untouched; a row no range saw is 0); the partials
 * hold `rows` rows per split. Enqueued on stream; 0, ATTUNE_EINVAL (rows
 * outside s) or ATTUNE_EGPU. */
int cuda_fused_combine(const attn_shape *s, int splits, const float *part_o, const float *part_lse,
                       const attn_tensor *o, int64_t row0, int64_t rows, cudaStream_t stream);

/* Version 1.2 (an A/B switch, 0 by default; written 2026-12-08 with no
 * device time left, not yet run): 1 orders the causal grids of version
 * 1's kernels (`fused` in cuda_fused.cu, `fused/acc=f32` in
 * cuda_fused_f32.cu) as the sm90a kernel's (version 3.31:
 * sm90_causal_item, cuda_fused_configs.h): chunks of heads whose K/V fit
 * in a sixth of the L2 (ATTUNE_FUSED_CHUNK_MB sets the budget), the
 * longest row blocks of the whole chunk first, the last chunk merged
 * while it holds under two waves of the device's resident blocks (within
 * four budgets). 0: head after head, each head's longest row block
 * first. bench/sched_sim.py gave small grids the most (a grid of few
 * heads ends on one head's long blocks otherwise). With
 * it on, ptxas gives several kernels 1-2 more registers (none past an
 * occupancy step) and d256 64x64 (8 warps, unaligned) 4/8 more bytes of
 * spills (sm_90). The launch asks the occupancy and the L2 size each
 * time (host calls; while the switch is an A/B). bench/owed.sh v1order
 * times it. */
#ifndef FUSED_CAUSAL_ORDER
#define FUSED_CAUSAL_ORDER 0
#endif
#if FUSED_CAUSAL_ORDER
/* Version 1.2: *chunk and *clast of a causal grid of kern (threads a
 * block, smem bytes of dynamic shared memory) over units heads of nrb row
 * blocks (unit_bytes: one head's K and V, shared by its group), for the
 * current device: chunks within a sixth of its L2 (ATTUNE_FUSED_CHUNK_MB
 * instead), merged under two waves of its resident blocks (SMs x blocks
 * an SM), as cuda_fused_configs.h's fused_causal_clast. Not stream
 * operations: allowed while a graph is captured. 0, or ATTUNE_EGPU if
 * the device cannot be asked. */
int cuda_fused_causal_order(const void *kern, int threads, size_t smem, int64_t units, int nrb, int64_t unit_bytes,
                            int *chunk, int *clast);
#endif

#endif
