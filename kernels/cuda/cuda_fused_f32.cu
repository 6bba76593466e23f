/* cuda_fused_f32.cu -- fused attention in FP32 (`fused/acc=f32/...`):
 * FlashAttention-2's algorithm on the SIMT cores for f32 data. Every
 * product and sum is an fp32 FFMA or FADD: no tensor cores, no TF32, so
 * its error against the float64 reference is that of fp32 arithmetic
 * (DESIGN.md's f32 bound, 1e-4 relative L2; ~1e-6 expected).
 *
 * o[b,h,i,:] = sum_j softmax_j(q[b,h,i,:] . k[b,h/g,j,:] / sqrt(d)) v[b,h/g,j,:]
 * over the keys j that row i may see: j < skv, and for causal j <= i + skv - sq
 * (bottom-right aligned, from this call's lengths); a row that sees none is 0.
 * GQA/MQA read KV head h / g directly (g = hq / hkv), never a copy.
 *
 * Compile alone, with the resource report (registers, spills) per configuration:
 *   nvcc -O3 -arch=sm_90 -Xptxas -v -I. -c kernels/cuda/cuda_fused_f32.cu -o /tmp/f32.o
 * Check and time: tests/gpu/test_fused_f32.c (every listed tactic against a
 * float64 CPU reference, on strided views and shorter call lengths, timed
 * beside split/acc=f32).
 *
 * version 1: one block per BR query rows of one (batch, head). Q stays in
 *   shared memory for the whole block; K and V tiles of BC keys stream
 *   through one buffer each by cp.async, V[t] landing while S = Q K[t]^T is
 *   computed and K[t-1] while O += P V[t] is (FA2's single-buffered scheme,
 *   two barriers per tile). Each thread computes a TM x TN block of S and
 *   a TM x TD block of O from float4 reads of shared memory; the online
 *   softmax runs in registers (row max over the CG lanes of a row group by
 *   shuffles) and P goes through shared memory, read back only by the
 *   warp that wrote it. Causal blocks skip the key tiles past their last
 *   row's diagonal and are issued longest first; key tiles are visited
 *   last first, so the masked ones come first. Views with 16-byte aligned
 *   rows (d % 4 == 0) load and store float4s; any other strides run the
 *   same kernel with 4-byte copies (VEC = false).
 */
#include "cuda_fused_f32.h"
#include "cuda_fused_common.cuh" /* smem_u32, ex2, FUSED_CAUSAL_ORDER */
#include "cuda_fused_configs.h"   /* sm90_causal_item (FUSED_CAUSAL_ORDER) */
#include "launch.cuh"             /* cu_launch, cu_ok */
#include "../variant.h"         /* attn_sm_limits_of */

#include <cuda_runtime.h>

#include <limits.h>
#include <math.h>

/* ---- CPU reference
 *
 * What the kernel computes, in float64 from the f32 inputs;
 * tests/gpu/test_fused_f32.c implements exactly this (ref_row):
 *
 *   for each (bi, h, i < sq): kv = h / g; n = visible(i) = causal ?
 *       clamp(i + skv - sq + 1, 0, skv) : skv
 *     s_j = sum_c q[bi,h,i,c] k[bi,kv,j,c] / sqrt(d)       for j < n
 *     o[bi,h,i,c] = n ? sum_j exp(s_j - max s) v[bi,kv,j,c] / sum_j exp(s_j - max s) : 0
 *
 * The kernel differs from it by fp32 rounding only: the scores' sums of d
 * products, exp2 of the scaled scores (ex2.approx, 2 ulp), the running
 * rescales and the PV sums. */

/* ---- GPU kernels */

namespace {

/* Everything the kernel needs, by value. Lengths are ints (checked at
 * launch); strides are elements, the head dim contiguous. */
struct f32_args {
    const float *q, *k, *v;
    float *o;
    int64_t qsb, qsh, qss, ksb, ksh, kss, vsb, vsh, vss, osb, osh, oss;
    int hq, g, sq, skv, d;
    int causal;
    int nrb;   /* row blocks per (batch, head) */
    float sl2; /* log2(e) / sqrt(d): scores go straight to the exp2 domain */
#if FUSED_CAUSAL_ORDER
    int chunk, clast; /* causal: sm90_causal_item's order */
#endif
};

/* Global -> shared copies, zero-filling what they do not read: src-size 0
 * writes zeros and reads nothing, which is how rows past the real length
 * and columns past d are predicated. 16 bytes (.cg, past L1: tiles are
 * reused from shared memory, not L1) or 4 bytes (.ca: the only size
 * below 16 .cg does not take). */
__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, bool ok)
{
    const int n = ok ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(n));
}

__device__ __forceinline__ void cp_async4(uint32_t dst, const void *src, bool ok)
{
    const int n = ok ? 4 : 0;
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(n));
}

__device__ __forceinline__ void cp_async_commit()
{
    asm volatile("cp.async.commit_group;\n" ::);
}

__device__ __forceinline__ void cp_async_wait_all()
{
    asm volatile("cp.async.wait_group 0;\n" ::);
}

/* Copy ROWS rows of a tile at g (row stride ld floats) into shared memory
 * at s (row stride F32_ROW(D) floats), all NTH threads of the block
 * together; rows >= nrows and columns >= d are zero-filled, never read.
 * VEC: 16-byte chunks (g and ld in whole float4s, d % 4 == 0); otherwise
 * 4-byte elements. Each thread keeps one column (chunk) and steps down the
 * rows, so consecutive threads copy consecutive chunks of a row
 * (coalesced), and a thread's addresses are one pointer advanced by a
 * fixed row step: the pointer passes through an opaque move per step, or
 * ptxas hoists every step's 64-bit address out of the key loop (32 more
 * registers at d = 64, 64x64: 254 instead of ~170). Only issued: the
 * caller commits and waits. */
template <int ROWS, int D, int NTH, bool VEC>
__device__ __forceinline__ void load_tile(float *s, const float *g, int64_t ld, int nrows, int d,
                                          int tid)
{
    constexpr int RS = F32_ROW(D);
    constexpr int W = VEC ? 4 : 1;           /* floats per copy */
    constexpr int CPR = D / W;               /* copies per row */
    static_assert(NTH % CPR == 0 || CPR % NTH == 0, "threads tile the rows");
    if constexpr (NTH >= CPR) {
        constexpr int RSTEP = NTH / CPR, ITERS = (ROWS + RSTEP - 1) / RSTEP;
        const int c = (tid % CPR) * W, r0 = tid / CPR;
        const bool cok = c < d;
        const float *src = g + r0 * ld + c;
        const int64_t step = RSTEP * ld;
        uint32_t dst = smem_u32(s + r0 * RS + c);
#pragma unroll
        for (int it = 0; it < ITERS; it++) {
            const int r = r0 + it * RSTEP;
            if (ROWS % RSTEP != 0 && r >= ROWS)
                break;
            const bool ok = cok && r < nrows;
            if constexpr (VEC)
                cp_async16(dst, ok ? src : g, ok);
            else
                cp_async4(dst, ok ? src : g, ok);
            src += step;
            dst += RSTEP * RS * 4;
            asm volatile("mov.b64 %0, %0;" : "+l"(src));
        }
    } else { /* a row takes CPR / NTH passes (d = 256, 4-byte copies, 128 threads) */
        const float *src = g;
#pragma unroll 1
        for (int r = 0; r < ROWS; r++, src += ld)
#pragma unroll
            for (int k = 0; k < CPR / NTH; k++) {
                const int c = (tid + k * NTH) * W;
                const bool ok = r < nrows && c < d;
                const uint32_t dst = smem_u32(s + r * RS + c);
                if constexpr (VEC)
                    cp_async16(dst, ok ? src + c : g, ok);
                else
                    cp_async4(dst, ok ? src + c : g, ok);
            }
    }
}

/* The kernel. Block = BR query rows [m0, m0 + BR) of one (batch bi, query
 * head h), NW warps, NTH = 32 * NW threads.
 *
 * Thread layout. Lane l of warp w is column group cg = l % CG of row group
 * rg = w * (32 / CG) + l / CG; there are RG = NTH / CG row groups, and
 * the CG lanes of one row group are adjacent lanes of one warp (so a row's
 * max and sum reduce by xor shuffles over them). Thread (rg, cg) owns
 *   rows    m0 + rg + RG * a,   a < TM = BR / RG       (strided: a warp's
 *           row groups read adjacent rows of Q and P)
 *   of S:   keys n0 + cg + CG * t,   t < TN = BC / CG  (strided: the CG
 *           lanes read adjacent rows of K)
 *   of O:   columns 4 cg + 4 CG u + e,  u < TD / 4, e < 4 (float4s; the CG
 *           lanes cover 4 * CG adjacent columns, 16 * CG bytes)
 * in registers s[TM][TN] and o[TM][TD]. The same rows in S and O, so the
 * online softmax's rescale of a row touches only this thread's
 * registers; every thread of a row group holds the same running max m
 * (reduced each tile) and its own partial row sum l (summed once at the
 * end: the rescales are row-uniform).
 *
 * Shared memory (floats): sQ [BR][RS], sK [BC][RS], sV [BC][RS] with RS =
 * D + 4, then sP [BR][PS] with PS = BC + CG. Shared memory and FFMAs:
 *   S += Q K^T: per 4 columns k, a thread reads TN float4s of K (its keys,
 *     K[key][k..k+3]) and TM of Q, and does 4 TM TN FFMAs. RS / 4 = D / 4
 *     + 1 is odd for D >= 32, so the 8 adjacent rows a quarter-warp reads
 *     (CG lanes' keys; a warp's row groups' rows) fall on 8 distinct
 *     16-byte bank slots; lanes of one row group read the same Q address
 *     (broadcast).
 *   P: each thread writes its TM x TN probabilities to sP[row][key]; a
 *     warp's 32 lanes write 32 adjacent-or-PS-apart words, PS = CG (mod
 *     32), so the row groups land CG banks apart: conflict-free.
 *   O += P V: per 4 keys j, a thread reads TM float4s of P (its rows,
 *     P[row][j..j+3], the same address across its row group) and 4 x TD / 4
 *     float4s of V (V[key][its columns]: the CG lanes read 16 CG adjacent
 *     bytes), and does 4 TM TD FFMAs.
 *   Rows of sP are written and read by the lanes of one row group only,
 *   i.e. one warp: the tile's barriers order them, no extra sync.
 *
 * Pipeline per key tile t (tiles last first; K[t] in sK on entry):
 *   wait + barrier (K[t] landed; every warp is done with V[t+1] and P)
 *   issue V[t] -> sV
 *   S = Q K[t]^T, mask, online softmax, P -> sP
 *   wait + barrier (V[t] landed; every warp is done with K[t])
 *   issue K[t-1] -> sK
 *   O += P V[t]
 * Loads are predicated on this call's lengths: rows past sq (Q) or skv
 * (K, V) and columns past d are zero-filled, so nothing past a view's real
 * rows is read and masked keys contribute 0 * 0. */
template <int D, int BR, int BC, int NW, int CG, int MINB, bool VEC>
__global__ void __launch_bounds__(NW * 32, MINB) fused_f32_kernel(const f32_args p)
{
    constexpr int NTH = NW * 32, RGW = 32 / CG, RG = NW * RGW;
    constexpr int TM = F32_TM(BR, NW, CG), TN = F32_TN(BC, CG), TD = F32_TD(D, CG);
    constexpr int RS = F32_ROW(D), PS = F32_PROW(BC, CG);
    static_assert(CG == 4 || CG == 8 || CG == 16, "a row group is 4, 8 or 16 lanes");
    static_assert(TM >= 1 && TM * RG == BR, "BR must be a multiple of the row groups");
    static_assert(TN >= 1 && TN * CG == BC && BC % 4 == 0, "BC a multiple of CG and of 4");
    static_assert(TD % 4 == 0 && TD * CG == D, "D a multiple of 4 * CG");
    static_assert(F32_TM(BR, NW, CG) == BR / RG, "F32_TM agrees with the layout");

    extern __shared__ __align__(16) float smem[];
    float *const sQ = smem;
    float *const sK = sQ + BR * RS;
    float *const sV = sK + BC * RS;
    float *const sP = sV + BC * RS;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int cg = lane % CG, rg = warp * RGW + lane / CG;

    /* Block -> (row block, batch*head). Row blocks vary fastest, so the
     * blocks resident together share a few heads' K/V in L2. Causal: the
     * last row blocks see the most keys; start them first so the short
     * ones fill the tail of the grid. */
#if FUSED_CAUSAL_ORDER
    int bh = blockIdx.x / p.nrb;
    int mb = blockIdx.x - bh * p.nrb;
    if (p.causal)
        sm90_causal_item((int)blockIdx.x, p.chunk, p.clast, (int)(gridDim.x / p.nrb), p.nrb, &bh, &mb);
#else
    const int bh = blockIdx.x / p.nrb;
    int mb = blockIdx.x - bh * p.nrb;
    if (p.causal)
        mb = p.nrb - 1 - mb;
#endif
    const int bi = bh / p.hq, h = bh - bi * p.hq, kvh = h / p.g;
    const int m0 = mb * BR;
    const int off = p.skv - p.sq; /* causal: row i sees keys j <= i + off */

    const float *gQ = p.q + bi * p.qsb + h * p.qsh + (int64_t)m0 * p.qss;
    const float *gK = p.k + bi * p.ksb + kvh * p.ksh;
    const float *gV = p.v + bi * p.vsb + kvh * p.vsh;

    /* Keys this block visits: all real keys, or (causal) up to its last
     * real row's diagonal; tiles past that are skipped whole. */
    int kend = p.skv;
    if (p.causal)
        kend = min(kend, min(m0 + BR, p.sq) - 1 + off + 1);
    const int ntiles = kend > 0 ? (kend + BC - 1) / BC : 0;

    float o[TM][TD];
    float m[TM], l[TM];
#pragma unroll
    for (int a = 0; a < TM; a++) {
#pragma unroll
        for (int c = 0; c < TD; c++)
            o[a][c] = 0.f;
        m[a] = -INFINITY;
        l[a] = 0.f;
    }

    if (ntiles > 0) {
        load_tile<BR, D, NTH, VEC>(sQ, gQ, p.qss, p.sq - m0, p.d, tid);
        load_tile<BC, D, NTH, VEC>(sK, gK + (int64_t)(ntiles - 1) * BC * p.kss, p.kss,
                                   p.skv - (ntiles - 1) * BC, p.d, tid);
        cp_async_commit();
    }

    for (int t = ntiles - 1; t >= 0; --t) {
        const int n0 = t * BC;
        cp_async_wait_all(); /* this thread's copies of K[t] (and Q) landed ... */
        __syncthreads();     /* ... and everyone's; all warps are done with sV, sP */
        load_tile<BC, D, NTH, VEC>(sV, gV + (int64_t)n0 * p.vss, p.vss, p.skv - n0, p.d, tid);
        cp_async_commit();

        /* S = Q K^T over the D columns in float4 steps: of the TM float4s
         * of Q and TN of K a step reads, the smaller side is held and the
         * other streamed one float4 at a time (16 fewer live registers at
         * TM = 4, TN = 8 than holding K). */
        float s[TM][TN];
#pragma unroll
        for (int a = 0; a < TM; a++)
#pragma unroll
            for (int j = 0; j < TN; j++)
                s[a][j] = 0.f;
        {
            const float *qr = sQ + rg * RS;
            const float *kr = sK + cg * RS;
            /* Unrolled fully, except for compute_110 (Thor, which the
             * build's architecture check compiles on every make test):
             * from compute_100 on cicc's optimizer takes 2.5-3x
             * compute_87's time over this loop fully unrolled, for the same
             * instructions (docs/build.md, "cicc for compute_110"); rolled,
             * an iteration is still 4 TM TN FFMAs over TM TN independent
             * accumulators. sm_100 and sm_120 keep the unrolled loop: their
             * speed either way is unmeasured, and no check compiles them.
             * Not unroll 2, 4 or 8: each spills 4 bytes on sm_110 at d64
             * 64x64 (MINB 3, 4-byte copies), which the architecture check
             * fails. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1100 && __CUDA_ARCH__ < 1200
#pragma unroll 1
#else
#pragma unroll
#endif
            for (int k4 = 0; k4 < D / 4; k4++) {
                if constexpr (TM <= TN) {
                    float4 qv[TM];
#pragma unroll
                    for (int a = 0; a < TM; a++)
                        qv[a] = *reinterpret_cast<const float4 *>(qr + a * RG * RS + 4 * k4);
#pragma unroll
                    for (int j = 0; j < TN; j++) {
                        const float4 kv =
                            *reinterpret_cast<const float4 *>(kr + j * CG * RS + 4 * k4);
#pragma unroll
                        for (int a = 0; a < TM; a++) {
                            s[a][j] = fmaf(qv[a].x, kv.x, s[a][j]);
                            s[a][j] = fmaf(qv[a].y, kv.y, s[a][j]);
                            s[a][j] = fmaf(qv[a].z, kv.z, s[a][j]);
                            s[a][j] = fmaf(qv[a].w, kv.w, s[a][j]);
                        }
                    }
                } else {
                    float4 kv[TN];
#pragma unroll
                    for (int j = 0; j < TN; j++)
                        kv[j] = *reinterpret_cast<const float4 *>(kr + j * CG * RS + 4 * k4);
#pragma unroll
                    for (int a = 0; a < TM; a++) {
                        const float4 qv =
                            *reinterpret_cast<const float4 *>(qr + a * RG * RS + 4 * k4);
#pragma unroll
                        for (int j = 0; j < TN; j++) {
                            s[a][j] = fmaf(qv.x, kv[j].x, s[a][j]);
                            s[a][j] = fmaf(qv.y, kv[j].y, s[a][j]);
                            s[a][j] = fmaf(qv.z, kv[j].z, s[a][j]);
                            s[a][j] = fmaf(qv.w, kv[j].w, s[a][j]);
                        }
                    }
                }
            }
        }

        /* Mask keys past the real skv (the partial last tile) and, causal,
         * past each row's diagonal; tiles wholly below the block's first
         * row's diagonal need neither. */
        if (n0 + BC > p.skv || (p.causal && n0 + BC - 1 > m0 + off)) {
#pragma unroll
            for (int a = 0; a < TM; a++) {
                const int i = m0 + rg + RG * a;
                const int lim = p.causal ? min(p.skv, i + off + 1) : p.skv;
#pragma unroll
                for (int j = 0; j < TN; j++)
                    if (n0 + cg + CG * j >= lim)
                        s[a][j] = -INFINITY;
            }
        }

        /* Online softmax, one row at a time: the tile's row max over the
         * row group's CG lanes (xor shuffles stay inside the group), then
         * P = 2^(s sl2 - m sl2), the old sum and outputs rescaled by
         * 2^(m_old sl2 - m sl2). A row with no visible key so far keeps
         * m = -inf and takes 0 as its exponent base, so every term is
         * 2^-inf = 0 and nothing is NaN. P goes to this row group's rows
         * of sP. */
#pragma unroll
        for (int a = 0; a < TM; a++) {
            float mx = m[a];
#pragma unroll
            for (int j = 0; j < TN; j++)
                mx = fmaxf(mx, s[a][j]);
#pragma unroll
            for (int w = CG / 2; w >= 1; w /= 2)
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, w));
            const float ms = mx == -INFINITY ? 0.f : mx * p.sl2;
            const float alpha = ex2(m[a] * p.sl2 - ms); /* old m = -inf -> 0 */
            m[a] = mx;
            float sum = 0.f;
            float *pr = sP + (rg + RG * a) * PS + cg;
#pragma unroll
            for (int j = 0; j < TN; j++) {
                const float pj = ex2(fmaf(s[a][j], p.sl2, -ms));
                sum += pj;
                pr[CG * j] = pj;
            }
            l[a] = l[a] * alpha + sum;
#pragma unroll
            for (int c = 0; c < TD; c++)
                o[a][c] *= alpha;
        }

        cp_async_wait_all(); /* V[t] landed ... */
        __syncthreads();     /* ... for all; every warp is done reading sK; sP written */
        if (t > 0) {
            load_tile<BC, D, NTH, VEC>(sK, gK + (int64_t)(n0 - BC) * p.kss, p.kss,
                                       p.skv - (n0 - BC), p.d, tid);
            cp_async_commit();
        }

        /* O += P V over the BC keys in steps of 4. */
        {
            const float *pr = sP + rg * PS;
            const float *vr = sV + 4 * cg;
#pragma unroll
            for (int j4 = 0; j4 < BC / 4; j4++) {
                float4 pv[TM];
#pragma unroll
                for (int a = 0; a < TM; a++)
                    pv[a] = *reinterpret_cast<const float4 *>(pr + a * RG * PS + 4 * j4);
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    float4 vv[TD / 4];
#pragma unroll
                    for (int u = 0; u < TD / 4; u++)
                        vv[u] = *reinterpret_cast<const float4 *>(vr + (4 * j4 + e) * RS +
                                                                  4 * CG * u);
#pragma unroll
                    for (int a = 0; a < TM; a++) {
                        const float pe = e == 0   ? pv[a].x
                                         : e == 1 ? pv[a].y
                                         : e == 2 ? pv[a].z
                                                  : pv[a].w;
#pragma unroll
                        for (int u = 0; u < TD / 4; u++) {
                            o[a][4 * u + 0] = fmaf(pe, vv[u].x, o[a][4 * u + 0]);
                            o[a][4 * u + 1] = fmaf(pe, vv[u].y, o[a][4 * u + 1]);
                            o[a][4 * u + 2] = fmaf(pe, vv[u].z, o[a][4 * u + 2]);
                            o[a][4 * u + 3] = fmaf(pe, vv[u].w, o[a][4 * u + 3]);
                        }
                    }
                }
            }
        }
    }

    /* Epilogue: the row sums over the row group, normalise (a row that saw
     * no key has l = 0 and o = 0 and writes 0), write this thread's
     * columns of its real rows: the CG lanes of a row group write 16 CG
     * adjacent bytes of one row per float4 step. */
#pragma unroll
    for (int a = 0; a < TM; a++) {
        float sum = l[a];
#pragma unroll
        for (int w = CG / 2; w >= 1; w /= 2)
            sum += __shfl_xor_sync(0xffffffffu, sum, w);
        const float inv = sum > 0.f ? 1.f / sum : 0.f;
        const int i = m0 + rg + RG * a;
        if (i >= p.sq)
            continue;
        float *go = p.o + bi * p.osb + h * p.osh + (int64_t)i * p.oss;
#pragma unroll
        for (int u = 0; u < TD / 4; u++) {
            const int c = 4 * cg + 4 * CG * u;
            if constexpr (VEC) {
                if (c < p.d)
                    *reinterpret_cast<float4 *>(go + c) =
                        make_float4(o[a][4 * u] * inv, o[a][4 * u + 1] * inv,
                                    o[a][4 * u + 2] * inv, o[a][4 * u + 3] * inv);
            } else {
#pragma unroll
                for (int e = 0; e < 4; e++)
                    if (c + e < p.d)
                        go[c + e] = o[a][4 * u + e] * inv;
            }
        }
    }
}

} /* namespace */

/* ---- launchers */

template <int D, int BR, int BC, int NW, int CG, int MINB>
static int launch_f32(const f32_args &p, bool vec, int64_t blocks, cudaStream_t stream)
{
    constexpr size_t smem = F32_SMEM(D, BR, BC, CG);
    void (*kern)(const f32_args) = vec ? fused_f32_kernel<D, BR, BC, NW, CG, MINB, true>
                                       : fused_f32_kernel<D, BR, BC, NW, CG, MINB, false>;
    /* Not a stream operation: allowed while a graph is being captured. */
    if (!cu_ok(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem)))
        return ATTUNE_EGPU;
#if FUSED_CAUSAL_ORDER
    f32_args q = p; /* version 1.2: the causal order's chunks */
    const int64_t kv = (int64_t)p.skv * p.d * 2 * (int64_t)sizeof(float) / p.g; /* a head's K and V */
    const int rc = p.causal ? cuda_fused_causal_order((const void *)kern, NW * 32, smem, blocks / p.nrb, p.nrb,
                                                      kv, &q.chunk, &q.clast)
                            : 0;
    if (rc != 0)
        return rc;
#else
    const f32_args &q = p;
#endif
    return cu_launch(kern, (unsigned)blocks, NW * 32, smem, stream, q) == cudaSuccess ? 0
                                                                               : ATTUNE_EGPU;
}

/* ---- listing and dispatcher */

extern "C" int cuda_fused_f32_tactics(const attn_shape *s, int cc_major, int cc_minor,
                                      attn_tactic *out, int max)
{
    if (s == NULL || out == NULL || max <= 0 || cc_major < 8 || s->dtype != ATTN_F32)
        return 0;
    const int D = F32_KERNEL_DIM(s->d);
    attn_sm_limits lim;
    attn_sm_limits_of(cc_major, cc_minor, &lim);
    int n = 0;
#define F32_TACTIC(D_, BR_, BC_, NW_, CG_, MINB_)                                              \
    if (D == D_ && n < max && (double)F32_SMEM(D_, BR_, BC_, CG_) <= lim.smem_block) {          \
        attn_tactic t = {};                                                                    \
        t.variant = ATTN_FUSED;                                                                \
        t.acc = ATTN_ACC_F32;                                                                  \
        t.pad = 1;                                                                             \
        t.tile_m = BR_, t.tile_n = BC_, t.warps = NW_;                                         \
        out[n++] = t;                                                                          \
    }
    F32_CONFIGS(F32_TACTIC)
#undef F32_TACTIC
    return n;
}

extern "C" int cuda_fused_f32_listed(const attn_shape *s, int cc_major, int cc_minor,
                                     const attn_tactic *t)
{
    attn_tactic list[16];
    const int n = cuda_fused_f32_tactics(s, cc_major, cc_minor, list, 16);
    for (int i = 0; i < n; i++)
        if (t->variant == list[i].variant && t->acc == list[i].acc && t->pad == list[i].pad &&
            t->tile_m == list[i].tile_m && t->tile_n == list[i].tile_n &&
            t->warps == list[i].warps && t->splits == 0 && t->stages == 0 &&
            attn_tactic_no_sm90a_keys(t))
            return 1;
    return 0;
}

/* 1 when view x is 16-byte aligned with strides in whole float4s. */
static bool vec_view(const attn_tensor *x)
{
    return (uintptr_t)x->data % 16 == 0 && x->sb % 4 == 0 && x->sh % 4 == 0 && x->ss % 4 == 0;
}

static bool view_ok(const attn_tensor *x)
{
    return x->data != NULL && x->sb >= 0 && x->sh >= 0 && x->ss >= 0;
}

/* Contract in cuda_fused_f32.h. */
extern "C" int cuda_fused_f32_launch(const attn_shape *s, const attn_tactic *t, const attn_io *io,
                                     void *stream)
{
    if (s == NULL || t == NULL || io == NULL || !view_ok(&io->q) || !view_ok(&io->k) ||
        !view_ok(&io->v) || !view_ok(&io->o) || s->b < 1 || s->hq < 1 || s->hkv < 1 ||
        s->hq % s->hkv != 0 || s->sq < 1 || s->skv < 1 || s->d < 1 || s->sq > INT_MAX / 2 ||
        s->skv > INT_MAX / 2 || s->hq > INT_MAX)
        return ATTUNE_EINVAL;
    if (s->dtype != ATTN_F32 || t->variant != ATTN_FUSED || t->acc != ATTN_ACC_F32 ||
        t->splits != 0 || t->stages != 0 || !attn_tactic_no_sm90a_keys(t))
        return ATTUNE_EUNSUPP;
    const int D = F32_KERNEL_DIM(s->d);
    if (D == 0)
        return ATTUNE_EUNSUPP;

    f32_args p = {};
    p.q = (const float *)io->q.data, p.k = (const float *)io->k.data;
    p.v = (const float *)io->v.data, p.o = (float *)io->o.data;
    p.qsb = io->q.sb, p.qsh = io->q.sh, p.qss = io->q.ss;
    p.ksb = io->k.sb, p.ksh = io->k.sh, p.kss = io->k.ss;
    p.vsb = io->v.sb, p.vsh = io->v.sh, p.vss = io->v.ss;
    p.osb = io->o.sb, p.osh = io->o.sh, p.oss = io->o.ss;
    p.hq = (int)s->hq, p.g = (int)(s->hq / s->hkv);
    p.sq = (int)s->sq, p.skv = (int)s->skv, p.d = (int)s->d;
    p.causal = s->causal ? 1 : 0;
    p.sl2 = (float)(1.4426950408889634 / sqrt((double)s->d));
    const bool vec = s->d % 4 == 0 && vec_view(&io->q) && vec_view(&io->k) && vec_view(&io->v) &&
                     vec_view(&io->o);
    cudaStream_t st = (cudaStream_t)stream;

#define F32_LAUNCH(D_, BR_, BC_, NW_, CG_, MINB_)                                              \
    if (D == D_ && t->tile_m == BR_ && t->tile_n == BC_ && t->warps == NW_) {                 \
        const int64_t nrb = (s->sq + BR_ - 1) / BR_, blocks = nrb * s->b * s->hq;              \
        if (blocks > INT_MAX)                                                                  \
            return ATTUNE_EUNSUPP;                                                             \
        p.nrb = (int)nrb;                                                                      \
        return launch_f32<D_, BR_, BC_, NW_, CG_, MINB_>(p, vec, blocks, st);                  \
    }
    F32_CONFIGS(F32_LAUNCH)
#undef F32_LAUNCH
    return ATTUNE_EUNSUPP; /* no such tile for this head dim */
}
