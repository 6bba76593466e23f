/* short_floor.cu -- where the time of a short few-head shape goes: the
 * real tactic against kernels on its grid that do only part of its work
 * (issue 25; docs/kernels.md "What is left": version 1.1's key groups took
 * the d32 anchors from 10.3 to 9.3 us, not the 4-6 predicted, so measure
 * the per-block floor before more tiling).
 *
 *   nvcc -O3 -std=c++17 -arch=sm_90a -I kernels -o short_floor bench/short_floor.cu \
 *        -L BUILD -lattune -Xlinker -rpath=BUILD
 *   ./short_floor
 *
 * For each case (a shape, its version-1 tile), timed as the tuner times a
 * tactic (METHOD.md, bench/graph_timing.cuh): a CUDA graph of 20 launches,
 * input sets rotated so that each launch reads bytes no launch before it
 * left in L2 (sets cover >= 3x the L2), 5 replays, the median per launch:
 *   empty        the grid and block of the tile, its shared memory, nothing
 *                done: what launching these blocks costs
 *   io           each block copies its Q tile in (cp.async) and writes its
 *                O tile out: a block's own bytes, nothing of K or V
 *   walk d=2     io, and each key group walks its key tiles as the kernel
 *                does (the group's K and V tile t copied while t-1 is
 *                read, one barrier a tile), reading one word of each: the
 *                loads' chain without the arithmetic
 *   walk all     the same bytes, every tile of a group issued at once,
 *                one wait: the loads' latency paid once
 *   tactic ...   the real tactic through libattune (attune_plan_run), the
 *                same graph and rotation
 *   mc walk PLACE C= S= P= (d32 only) the walk with each K/V tile brought
 *                once to a cluster of C row blocks of a head by multicast
 *                copies, S stages, issued as P says (mc_walk_kernel
 *                below; C = 1 without multicast; PLACE: blocks as they
 *                fit, or one an SM). Measured 2026-12-06 on H100s
 *                (docs/kernels.md, "The plan for the first direction"):
 *                multicast 2.7-5x slower than the cp.async walk; plain
 *                bulk copies 8 stages deep 1 us faster.
 * Prints one line per measurement (us per launch). Output is not checked
 * here: gpu_fused checks every tactic against the float64 reference. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include "../kernels/cuda/cuda_fused_common.cuh"
#include "../kernels/cuda/cuda_fused_configs.h"
#include "../kernels/libattune.h"
#include "graph_timing.cuh"
#include "tma_encoder.cuh"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

__device__ __forceinline__ void cp16(uint32_t dst, const void *src)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}

__device__ __forceinline__ void commit()
{
    asm volatile("cp.async.commit_group;\n" ::);
}

template <int N>
__device__ __forceinline__ void wait_groups()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void bar(int id, int n)
{
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}

/* rows x D b16 elements (global rows D apart) into a padded tile. */
template <int ROWS, int D, int NTH>
__device__ __forceinline__ void copy_tile(uint32_t s, const __half *g, int nrows, int tid)
{
    constexpr int CPR = D / 8, RS = FUSED_TILE_RS(D);
    for (int L = tid; L < ROWS * CPR; L += NTH) {
        const int row = L / CPR, c = L % CPR;
        if (row < nrows)
            cp16(s + (uint32_t)(row * RS + c * 16), g + (size_t)row * D + c * 8);
    }
}

/* O: the rows x D tile of Q at smem back out to g (global rows D apart),
 * plus acc where it is not a known value, so no read before is dead. */
template <int D, int NTH>
__device__ __forceinline__ void store_o(const unsigned char *smem, __half *g, int rows, unsigned acc, int tid)
{
    constexpr int CPR = D / 8, RS = FUSED_TILE_RS(D);
    for (int L = tid; L < rows * CPR; L += NTH) {
        const int row = L / CPR, c = L % CPR;
        uint4 x = *reinterpret_cast<const uint4 *>(smem + row * RS + c * 16);
        x.x ^= acc == 0x9e3779b9u ? 1u : 0u;
        *reinterpret_cast<uint4 *>(g + (size_t)row * D + c * 8) = x;
    }
}

struct args {
    const __half *q, *k, *v;
    __half *o;
    int hq, g, sq, skv, nrb;
    int per; /* walk all: key tiles a group holds at once */
};

__global__ void empty_kernel(args) {}

/* MODE 0: io only; MODE 2: walk with two buffers; MODE 9: walk, all at once. */
template <int D, int BR, int BC, int NW, int MODE>
__global__ void __launch_bounds__(NW * 32) floor_kernel(args p)
{
    constexpr int KG = NW * 16 > BR ? NW * 16 / BR : 1, GTH = NW / KG * 32, NTH = NW * 32;
    constexpr int RS = FUSED_TILE_RS(D), KVB = BC * RS;
    extern __shared__ __align__(128) unsigned char smem[];
    const int tid = threadIdx.x, kg = tid / GTH, gtid = tid - kg * GTH;
    const int bh = blockIdx.x / p.nrb, mb = blockIdx.x - bh * p.nrb, kvh = bh / p.g;
    const int m0 = mb * BR, rows = min(BR, p.sq - m0);
    const uint32_t aQ = smem_u32(smem);
    const uint32_t aKV = aQ + BR * RS + (uint32_t)kg * (MODE == 9 ? p.per : 2) * 2 * KVB;
    copy_tile<BR, D, NTH>(aQ, p.q + ((size_t)bh * p.sq + m0) * D, rows, tid);
    commit();
    unsigned acc = 0;
    if (MODE != 0) {
        const __half *gK = p.k + (size_t)kvh * p.skv * D, *gV = p.v + (size_t)kvh * p.skv * D;
        const int ntiles = (p.skv + BC - 1) / BC;
        const uint32_t *w = reinterpret_cast<const uint32_t *>(smem);
        if (MODE == 9) {
            int n = 0;
            for (int t = ntiles - 1 - kg; t >= 0 && n < p.per; t -= KG, n++) {
                copy_tile<BC, D, GTH>(aKV + n * 2 * KVB, gK + (size_t)t * BC * D, p.skv - t * BC, gtid);
                copy_tile<BC, D, GTH>(aKV + n * 2 * KVB + KVB, gV + (size_t)t * BC * D, p.skv - t * BC, gtid);
            }
            commit();
            wait_groups<0>();
            bar(1 + kg, GTH);
            for (int j = 0; j < n; j++)
                acc ^= w[(aKV - aQ) / 4 + j * 2 * KVB / 4 + gtid] ^ w[(aKV - aQ) / 4 + (j * 2 + 1) * KVB / 4 + gtid];
        } else {
            int t = ntiles - 1 - kg, j = 0;
            if (t >= 0) {
                copy_tile<BC, D, GTH>(aKV, gK + (size_t)t * BC * D, p.skv - t * BC, gtid);
                copy_tile<BC, D, GTH>(aKV + KVB, gV + (size_t)t * BC * D, p.skv - t * BC, gtid);
            }
            commit();
            for (; t >= 0; t -= KG, j++) {
                const uint32_t cur = (uint32_t)(j & 1);
                wait_groups<0>();
                bar(1 + kg, GTH);
                if (t - KG >= 0) {
                    const int n = t - KG;
                    copy_tile<BC, D, GTH>(aKV + (cur ^ 1u) * 2 * KVB, gK + (size_t)n * BC * D, p.skv - n * BC, gtid);
                    copy_tile<BC, D, GTH>(aKV + (cur ^ 1u) * 2 * KVB + KVB, gV + (size_t)n * BC * D, p.skv - n * BC,
                                          gtid);
                }
                commit();
                acc ^= w[(aKV - aQ) / 4 + cur * 2 * KVB / 4 + gtid] ^ w[(aKV - aQ) / 4 + (cur * 2 + 1) * KVB / 4 + gtid];
            }
        }
    }
    wait_groups<0>();
    __syncthreads();
    store_o<D, NTH>(smem, p.o + ((size_t)bh * p.sq + m0) * D, rows, acc, tid);
}

/* ---- the multicast walk (docs/kernels.md, "The plan for the first
 * direction"; sm_90a: multicast bulk copies). Clusters of C consecutive
 * row blocks of one head (the grid padded to a multiple of C row blocks
 * per head; a padded block moves no Q or O but takes its part in the
 * copies). Every K and V tile of 64 keys x 32 columns (4 KB, contiguous
 * in [b, h, s, d]) reaches all C blocks' shared memory once: each block
 * copies 1/C of it with a multicast bulk copy, S stages deep. Stage s of a
 * block: `full` (1 arrival, its own, and the tile's 8 KB of transactions,
 * from all C blocks' copies) and `empty` (C arrivals: every block of the
 * cluster released the tile, so a refill, which writes into all of them,
 * may go). P = 0: thread 0 of each block issues, after the block read the
 * tile S back and the cluster released it; P = 1: one producer lane (warp
 * 15) issues as far ahead as the empties allow, warps 0-14 wait for each
 * tile and read one word of it; P = 2: the same with tensor-map copies
 * (a box of 64 / C rows each block, multicast), the way CUTLASS and
 * FlashAttention-3 multicast; P = 3: launched in clusters of C but every
 * block brings whole tiles itself by plain bulk copies and releases them
 * locally (no multicast, no remote arrive: what the cluster launch alone
 * costs). C = 1 uses plain copies and a local arrive (no cluster scope). Bounded waits (mbar_wait: a fault, not a hang,
 * on a bug). */
__device__ __forceinline__ uint32_t cluster_rank()
{
    uint32_t r = 0;
#ifdef FUSED_SM90_PTX
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
#endif
    return r;
}

__device__ __forceinline__ void cluster_sync_all()
{
#ifdef FUSED_SM90_PTX
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#endif
}

/* Arrive on the mbarrier at shared offset `bar` of cluster block `peer`. */
__device__ __forceinline__ void mbar_arrive_peer(uint32_t bar, uint32_t peer)
{
#ifdef FUSED_SM90_PTX
    uint32_t remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(bar), "r"(peer));
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(remote) : "memory");
#else
    (void)bar, (void)peer;
#endif
}

/* bytes from src into shared offset dst of every block in mask, each
 * block's mbarrier at offset bar counting them. */
__device__ __forceinline__ void bulk_multicast(uint32_t dst, const void *src, uint32_t bytes, uint32_t bar,
                                               uint16_t mask)
{
#if defined(FUSED_SM90_PTX) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1], %2, [%3], %4;\n" ::"r"(dst),
                 "l"(src), "r"(bytes), "r"(bar), "h"(mask)
                 : "memory");
#else
    (void)dst, (void)src, (void)bytes, (void)bar, (void)mask;
#endif
}

/* A 2-d box of `rows` rows of 64 bytes at row c1 of the tensor map into
 * shared dst of every block in mask (mask 0: this block only, no
 * multicast), bar of each counting the bytes. */
__device__ __forceinline__ void tma_rows_multicast(uint32_t dst, const CUtensorMap *map, int c1, uint32_t bar,
                                                   uint16_t mask)
{
#if defined(FUSED_SM90_PTX) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    if (mask == 0)
        asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                     " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
                     "l"((uint64_t)map), "r"(0), "r"(c1), "r"(bar)
                     : "memory");
    else
        asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
                     " [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(dst),
                     "l"((uint64_t)map), "r"(0), "r"(c1), "r"(bar), "h"(mask)
                     : "memory");
#else
    (void)dst, (void)map, (void)c1, (void)bar, (void)mask;
#endif
}

struct mc_args {
    CUtensorMap mk, mv; /* P = 2: K and V as rows of 32 columns, box 64 / C rows */
    const __half *q, *k, *v;
    __half *o;
    int sq, skv, nrb, nrbp; /* real and padded row blocks per head */
};

template <int C, int S, int P>
__global__ void __launch_bounds__(512) mc_walk_kernel(const __grid_constant__ mc_args p)
{
    constexpr int D = 32, BR = 64, BC = 64, NTH = 512, RS = FUSED_TILE_RS(D), NC = NTH - 32;
    constexpr uint32_t TILE = BC * D * 2, SLICE = TILE / C; /* bytes */
    extern __shared__ __align__(128) unsigned char smem[];
    const int tid = threadIdx.x;
    const int bh = blockIdx.x / p.nrbp, mb = blockIdx.x - bh * p.nrbp;
    const bool real = mb < p.nrb;
    const int m0 = mb * BR, rows = real ? min(BR, p.sq - m0) : 0;
    const uint32_t aQ = smem_u32(smem);
    const uint32_t aKV = aQ + (uint32_t)((BR * RS + 127) / 128 * 128); /* stage s: K at +2s*TILE, V after */
    const uint32_t aBar = aKV + S * 2 * TILE;                           /* full[S], then empty[S] */
    const uint32_t rank = cluster_rank();
    const int ntiles = (p.skv + BC - 1) / BC;
    const char *gK = reinterpret_cast<const char *>(p.k + (size_t)bh * p.skv * D);
    const char *gV = reinterpret_cast<const char *>(p.v + (size_t)bh * p.skv * D);
    if (tid == 0) {
        for (int s = 0; s < S; s++) {
            mbar_init(aBar + 8 * s, 1);
            mbar_init(aBar + 8 * (S + s), P == 3 ? 1 : C);
        }
#ifdef FUSED_SM90_PTX
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
    }
    if (real)
        copy_tile<BR, D, NTH>(aQ, p.q + ((size_t)bh * p.sq + m0) * D, rows, tid);
    commit();
    cluster_sync_all(); /* every block's barriers exist before any copy or arrive */
    auto issue = [&](int j) {
        const int s = j % S;
        mbar_expect_tx(aBar + 8 * s, 2 * TILE);
        const uint32_t off = rank * SLICE;
        if (P == 2) {
            const int row = bh * p.skv + j * BC + (int)rank * (BC / C);
            const uint16_t mask = C == 1 ? 0 : (uint16_t)((1u << C) - 1);
            tma_rows_multicast(aKV + 2 * s * TILE + off, &p.mk, row, aBar + 8 * s, mask);
            tma_rows_multicast(aKV + (2 * s + 1) * TILE + off, &p.mv, row, aBar + 8 * s, mask);
        } else if (C == 1 || P == 3) {
            bulk_load(aKV + 2 * s * TILE, gK + (size_t)j * TILE, TILE, aBar + 8 * s);
            bulk_load(aKV + (2 * s + 1) * TILE, gV + (size_t)j * TILE, TILE, aBar + 8 * s);
        } else {
            bulk_multicast(aKV + 2 * s * TILE + off, gK + (size_t)j * TILE + off, SLICE, aBar + 8 * s,
                           (uint16_t)((1u << C) - 1));
            bulk_multicast(aKV + (2 * s + 1) * TILE + off, gV + (size_t)j * TILE + off, SLICE, aBar + 8 * s,
                           (uint16_t)((1u << C) - 1));
        }
    };
    auto release = [&](int s) { /* this block is done with stage s: tell every block of the cluster */
        if (C == 1 || P == 3)
            mbar_arrive(aBar + 8 * (S + s));
        else
            for (uint32_t peer = 0; peer < C; peer++)
                mbar_arrive_peer(aBar + 8 * (S + s), peer);
    };
    const uint32_t *w = reinterpret_cast<const uint32_t *>(smem);
    unsigned acc = 0;
    if (P == 0) { /* thread 0 consumes and issues: refill j + S after the cluster released j */
        if (tid == 0)
            for (int j = 0; j < S && j < ntiles; j++)
                issue(j);
        for (int j = 0; j < ntiles; j++) {
            const int s = j % S;
            mbar_wait(aBar + 8 * s, (uint32_t)((j / S) & 1));
            acc ^= w[(aKV - aQ) / 4 + 2 * s * TILE / 4 + tid] ^ w[(aKV - aQ) / 4 + (2 * s + 1) * TILE / 4 + tid];
            __syncthreads(); /* the whole block is done with tile j */
            if (tid == 0) {
                release(s);
                if (j + S < ntiles) {
                    mbar_wait(aBar + 8 * (S + s), (uint32_t)((j / S) & 1)); /* all C released tile j */
                    issue(j + S);
                }
            }
        }
    } else if (tid == NC) { /* P = 1, 2, 3: one producer lane (warp 15) runs ahead, bounded by the empties */
        for (int j = 0; j < ntiles; j++) {
            if (j >= S)
                mbar_wait(aBar + 8 * (S + j % S), (uint32_t)((j / S - 1) & 1));
            issue(j);
        }
    } else if (tid < NC) { /* P = 1, 2, 3: warps 0-14 consume */
        for (int j = 0; j < ntiles; j++) {
            const int s = j % S;
            mbar_wait(aBar + 8 * s, (uint32_t)((j / S) & 1));
            acc ^= w[(aKV - aQ) / 4 + 2 * s * TILE / 4 + tid] ^ w[(aKV - aQ) / 4 + (2 * s + 1) * TILE / 4 + tid];
            bar(1, NC); /* the consumers are done with tile j */
            if (tid == 0)
                release(s);
        }
    }
    wait_groups<0>();
    __syncthreads();
    store_o<D, NTH>(smem, p.o + ((size_t)bh * p.sq + m0) * D, rows, acc, tid);
    cluster_sync_all(); /* no peer copies into this block or arrives on its barriers after it ends */
}

__global__ void has_multicast_kernel(int *f)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    *f = 1;
#else
    *f = 0;
#endif
}

/* 1 when this program's device code has multicast bulk copies (built for
 * sm_90a). */
static int has_multicast(cudaStream_t st)
{
    int *d = nullptr, h = 0;
    CK(cudaMalloc(&d, sizeof *d));
    has_multicast_kernel<<<1, 1, 0, st>>>(d);
    CK(cudaMemcpyAsync(&h, d, sizeof h, cudaMemcpyDeviceToHost, st));
    CK(cudaStreamSynchronize(st));
    CK(cudaFree(d));
    return h;
}

/* A tensor map over rows of 32 halves (64 bytes), box of box_rows rows, no
 * swizzle (the walk reads one word a thread). */
static void rows_map(CUtensorMap *map, const __half *data, size_t rows, int box_rows)
{
    PFN_cuTensorMapEncodeTiled_v12000 enc = bench_tma_encoder();
    const cuuint64_t dims[2] = {32, (cuuint64_t)rows}, strides[1] = {64};
    const cuuint32_t box[2] = {32, (cuuint32_t)box_rows}, estr[2] = {1, 1};
    if (enc(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, (void *)data, dims, strides, box, estr,
            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
        std::fprintf(stderr, "short_floor: cuTensorMapEncodeTiled refused the map\n");
        std::exit(1);
    }
}

template <int C, int S, int P>
static void launch_mc(cudaStream_t st, const mc_args &a, int heads, bool one_per_sm)
{
    size_t smem = (size_t)((64 * FUSED_TILE_RS(32) + 127) / 128 * 128) + (size_t)S * 2 * 4096 + 16 * S;
    if (one_per_sm) /* room for one block an SM, as the real tactic's 87 KB nearly is */
        smem = std::max(smem, (size_t)120 * 1024);
    CK(cudaFuncSetAttribute(mc_walk_kernel<C, S, P>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)(heads * a.nrbp));
    cfg.blockDim = dim3(512);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = st;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = C;
    at[0].val.clusterDim.y = 1;
    at[0].val.clusterDim.z = 1;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    CK(cudaLaunchKernelEx(&cfg, mc_walk_kernel<C, S, P>, a));
}

struct io_set {
    __half *q, *k, *v, *o;
};

struct the_case {
    const char *name;
    int hq, hkv, sq, skv, d;
    const char *tactics[4];
};

template <int D, int BR, int BC, int NW>
static void run_floors(cudaStream_t st, const the_case &c, std::vector<io_set> &sets)
{
    constexpr int KG = NW * 16 > BR ? NW * 16 / BR : 1, RS = FUSED_TILE_RS(D), KVB = BC * RS;
    const int nrb = (c.sq + BR - 1) / BR, grid = c.hq * nrb;
    const int per = ((c.skv + BC - 1) / BC + KG - 1) / KG;
    const size_t sm2 = (size_t)BR * RS + (size_t)KG * 2 * 2 * KVB, sm9 = (size_t)BR * RS + (size_t)KG * per * 2 * KVB;
    CK(cudaFuncSetAttribute(empty_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024));
    CK(cudaFuncSetAttribute(floor_kernel<D, BR, BC, NW, 0>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm2));
    CK(cudaFuncSetAttribute(floor_kernel<D, BR, BC, NW, 2>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm2));
    if (sm9 <= 227 * 1024)
        CK(cudaFuncSetAttribute(floor_kernel<D, BR, BC, NW, 9>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                (int)sm9));
    auto A = [&](int i) {
        const io_set &s = sets[i % sets.size()];
        return args{s.q, s.k, s.v, s.o, c.hq, c.hq / c.hkv, c.sq, c.skv, nrb, per};
    };
    std::printf("## %s, tile %dx%d, %d warps (%d key groups): %d blocks, %zu B shared\n", c.name, BR, BC, NW, KG,
                grid, sm2);
    double us = bench_graph_us(st, [&](int i) { empty_kernel<<<grid, NW * 32, sm2, st>>>(A(i)); });
    std::printf("  empty        %7.2f us\n", us);
    us = bench_graph_us(st, [&](int i) { floor_kernel<D, BR, BC, NW, 0><<<grid, NW * 32, sm2, st>>>(A(i)); });
    std::printf("  io           %7.2f us\n", us);
    us = bench_graph_us(st, [&](int i) { floor_kernel<D, BR, BC, NW, 2><<<grid, NW * 32, sm2, st>>>(A(i)); });
    std::printf("  walk d=2     %7.2f us\n", us);
    if (sm9 <= 227 * 1024) {
        us = bench_graph_us(st, [&](int i) { floor_kernel<D, BR, BC, NW, 9><<<grid, NW * 32, sm9, st>>>(A(i)); });
        std::printf("  walk all     %7.2f us\n", us);
    }
    CK(cudaGetLastError());
}

/* The multicast walk on c's grid (d = 32, 64-row blocks), clusters of 1
 * (plain bulk copies: the baseline), 2 and 4; 2, 4 and 8 stages; issued
 * by a consumer (P = 0) or a producer lane (P = 1); the blocks placed as
 * they fit (any) or one an SM (1/SM, as the real tactic's 87 KB of shared
 * memory nearly is). docs/kernels.md has the results. */
static void run_mc(cudaStream_t st, const the_case &c, std::vector<io_set> &sets)
{
    if (!has_multicast(st)) {
        std::printf("  mc walk: not built (needs sm_90a device code: bench/short_floor.sh)\n");
        return;
    }
    const int nrb = (c.sq + 63) / 64;
    bool one = false;
    auto time_mc = [&](int C, auto launch) {
        const int nrbp = (nrb + C - 1) / C * C;
        const double us = bench_graph_us(st, [&](int i) {
            const io_set &s = sets[i % sets.size()];
            mc_args a = {};
            a.q = s.q, a.k = s.k, a.v = s.v, a.o = s.o, a.sq = c.sq, a.skv = c.skv, a.nrb = nrb, a.nrbp = nrbp;
            rows_map(&a.mk, s.k, c.hkv * (size_t)c.skv + 64, 64 / C);
            rows_map(&a.mv, s.v, c.hkv * (size_t)c.skv + 64, 64 / C);
            launch(a);
        });
        return us;
    };
#define MC_ROW(C, S, P)                                                                                     \
    std::printf("  mc walk %s C=%d S=%d P=%d %7.2f us\n", one ? "1/SM" : "any ", C, S, P,                      \
                time_mc(C, [&](const mc_args &a) { launch_mc<C, S, P>(st, a, c.hq, one); }))
    for (int o = 0; o < 2; o++) {
        one = o == 1;
        MC_ROW(1, 2, 0);
        MC_ROW(2, 2, 0);
        MC_ROW(4, 2, 0);
        MC_ROW(1, 4, 0);
        MC_ROW(2, 4, 0);
        MC_ROW(4, 4, 0);
        MC_ROW(1, 2, 1);
        MC_ROW(2, 2, 1);
        MC_ROW(4, 2, 1);
        MC_ROW(1, 4, 1);
        MC_ROW(2, 4, 1);
        MC_ROW(4, 4, 1);
        MC_ROW(1, 8, 1);
        MC_ROW(2, 8, 1);
        MC_ROW(4, 8, 1);
        MC_ROW(1, 8, 2);
        MC_ROW(2, 8, 2);
        MC_ROW(4, 8, 2);
        MC_ROW(2, 4, 2);
        MC_ROW(4, 4, 2);
        MC_ROW(2, 8, 3);
        MC_ROW(4, 8, 3);
    }
#undef MC_ROW
    CK(cudaGetLastError());
}

int main()
{
    /* The d32 anchors (tuner's winner 64x64/16 since version 1.1, and
     * version 1's 64x64/4) and ViT-B/16 at b = 1 (32x64/8). */
    const the_case cases[] = {
        {"b1.hq8.hkv8.sq900.skv900.d32.f16.nc", 8, 8, 900, 900, 32,
         {"fused/pad=1/tile=64x64/warps=16", "fused/pad=1/tile=64x64/warps=4", nullptr}},
        {"b1.hq12.hkv12.sq197.skv197.d64.f16.nc", 12, 12, 197, 197, 64,
         {"fused/pad=1/tile=32x64/warps=8", "fused/pad=1/tile=64x64/warps=4", nullptr}},
    };
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    std::printf("# short_floor: %s, %d SMs, L2 %.0f MB; graph of 20 launches, median of 5 replays\n", prop.name,
                prop.multiProcessorCount, prop.l2CacheSize / 1e6);
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    attune_dev *dev = nullptr;
    char err[256];
    if (attune_dev_open("0", &dev, err, sizeof err) != 0) {
        std::fprintf(stderr, "short_floor: %s\n", err);
        return 1;
    }
    for (const the_case &c : cases) {
        const size_t nq = (size_t)c.hq * c.sq * c.d, nkv = (size_t)c.hkv * c.skv * c.d;
        const size_t bytes = (nq * 2 + nkv * 2) * sizeof(__half);
        const int nsets = (int)std::max<size_t>(3, (3 * (size_t)prop.l2CacheSize + bytes - 1) / bytes);
        std::vector<io_set> sets(nsets);
        std::vector<__half> h(std::max(nq, nkv));
        for (size_t i = 0; i < h.size(); i++)
            h[i] = __float2half((float)((i * 2654435761u) % 1000) / 1000.f - 0.5f);
        for (io_set &s : sets) {
            CK(cudaMalloc(&s.q, nq * 2));
            CK(cudaMalloc(&s.o, nq * 2));
            /* 64 keys of slack: the multicast walk copies whole 64-key tiles */
            CK(cudaMalloc(&s.k, (nkv + 64 * (size_t)c.d) * 2));
            CK(cudaMalloc(&s.v, (nkv + 64 * (size_t)c.d) * 2));
            CK(cudaMemset(s.k, 0, (nkv + 64 * (size_t)c.d) * 2));
            CK(cudaMemset(s.v, 0, (nkv + 64 * (size_t)c.d) * 2));
            CK(cudaMemcpy(s.q, h.data(), nq * 2, cudaMemcpyHostToDevice));
            CK(cudaMemcpy(s.k, h.data(), nkv * 2, cudaMemcpyHostToDevice));
            CK(cudaMemcpy(s.v, h.data(), nkv * 2, cudaMemcpyHostToDevice));
        }
        if (c.d == 32) {
            run_floors<32, 64, 64, 16>(st, c, sets);
            run_mc(st, c, sets);
            run_floors<32, 64, 64, 4>(st, c, sets);
        } else {
            run_floors<64, 32, 64, 8>(st, c, sets);
            run_floors<64, 64, 64, 4>(st, c, sets);
        }
        attune_dims dims = {};
        dims.b = 1, dims.hq = c.hq, dims.hkv = c.hkv, dims.sq = c.sq, dims.skv = c.skv, dims.d = c.d;
        dims.dtype = ATTUNE_DTYPE_F16, dims.causal = 0;
        for (const char *const *t = c.tactics; *t != nullptr; t++) {
            attune_plan *plan = nullptr;
            if (attune_plan_create(dev, &dims, *t, &plan, err, sizeof err) != 0) {
                std::printf("  tactic %s: %s\n", *t, err);
                continue;
            }
            int rc = 0;
            const double us = bench_graph_us(st, [&](int i) {
                const io_set &s = sets[i % nsets];
                attune_tensor q = {s.q, (int64_t)nq, (int64_t)c.sq * c.d, c.d};
                attune_tensor k = {s.k, (int64_t)nkv, (int64_t)c.skv * c.d, c.d};
                attune_tensor v = {s.v, (int64_t)nkv, (int64_t)c.skv * c.d, c.d};
                attune_tensor o = {s.o, (int64_t)nq, (int64_t)c.sq * c.d, c.d};
                rc |= attune_plan_run(plan, &q, &k, &v, &o, 0, 0, st);
            });
            std::printf("  tactic %-34s %7.2f us%s\n", *t, us, rc ? " (a run failed)" : "");
            attune_plan_destroy(plan);
        }
        for (io_set &s : sets) {
            CK(cudaFree(s.q));
            CK(cudaFree(s.o));
            CK(cudaFree(s.k));
            CK(cudaFree(s.v));
        }
    }
    attune_dev_close(dev);
    return 0;
}
