/* decode_tma.cu -- the memory floor of fused_splitkv version 2.1's loads,
 * by the shape of its TMA boxes: the kernel's blocks (one per batch, KV
 * head and split), its stages and mbarriers, its K and V tensor maps, and
 * no arithmetic (the consumer warps free a stage as soon as it lands). So
 * the time is what the copies alone cost in the kernel's own pattern,
 * read against bench/decode_floor.cu's flat streams.
 *
 *   nvcc -O3 -arch=sm_90 -o decode_tma bench/decode_tma.cu
 *   ./decode_tma
 *
 * Box shapes (K and V each [b, h, skv, D] bf16, rows D apart):
 *   box   the kernel's: 128-byte-swizzled boxes of 64 columns x BC keys,
 *         D/64 of them a tile (each box row is half or a quarter of a key
 *         row: a strided 128-byte read per key)
 *   flat  the same bytes seen as rows of 64 columns (a key row is D/64 of
 *         them): one box of BC*D/64 such rows a tile, contiguous in memory
 *         (needs rows exactly D apart)
 *   wide  no swizzle, one box of D columns x BC keys (whole key rows)
 * Timed as decode_floor.cu (graph_timing.cuh): a CUDA graph of 20
 * launches over input sets that cover 3x the L2, median of 5 replays, per
 * launch. */
#include <cuda.h>
#include <cudaTypedefs.h>

#include <cuda_runtime.h>

#include "../kernels/cuda/cuda_fused_common.cuh" /* the kernel's mbarrier and TMA helpers */
#include "graph_timing.cuh"
#include "tma_encoder.cuh"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>


enum { MODE_BOX, MODE_FLAT, MODE_WIDE };

struct args_t {
    int h, skv, D, BC, S, splits, tps, mode, nw;
};

/* Block = (batch, KV head, split): tiles [split*tps, min(ntiles, +tps)). */
__global__ void __launch_bounds__(288) tma_kernel(const __grid_constant__ CUtensorMap tk,
                                                  const __grid_constant__ CUtensorMap tv, const args_t a)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    extern __shared__ __align__(128) unsigned char sm[];
    const uint32_t bars = smem_u32(sm);
    const uint32_t buf = (bars + 128 + 1023u) & ~1023u;
    const uint32_t half = (uint32_t)a.BC * a.D * 2;
    const int split = blockIdx.x % a.splits, bh = blockIdx.x / a.splits;
    const int bi = bh / a.h, h = bh % a.h;
    const int ntiles = (a.skv + a.BC - 1) / a.BC;
    const int tb = split * a.tps, nt = max(0, min(ntiles, tb + a.tps) - tb);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (threadIdx.x == 0) {
        for (int s = 0; s < a.S; s++) {
            mbar_init(bars + 8 * s, 1);
            mbar_init(bars + 8 * (a.S + s), (uint32_t)a.nw);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    if (warp == a.nw) {
        if (lane == 0)
            for (int it = 0; it < nt; it++) {
                const int st = it % a.S;
                mbar_wait(bars + 8 * (a.S + st), ((it / a.S) & 1) ^ 1);
                const uint32_t full = bars + 8 * st, dK = buf + (uint32_t)st * 2 * half;
                mbar_expect_tx(full, 2 * half);
                const int n0 = (tb + it) * a.BC;
                if (a.mode == MODE_BOX) {
                    for (int c = 0; c < a.D / 64; c++) {
                        tma_load_4d(dK + c * a.BC * 128, &tk, c * 64, n0, h, bi, full);
                        tma_load_4d(dK + half + c * a.BC * 128, &tv, c * 64, n0, h, bi, full);
                    }
                } else if (a.mode == MODE_FLAT) {
                    tma_load_4d(dK, &tk, 0, n0 * (a.D / 64), h, bi, full);
                    tma_load_4d(dK + half, &tv, 0, n0 * (a.D / 64), h, bi, full);
                } else {
                    tma_load_4d(dK, &tk, 0, n0, h, bi, full);
                    tma_load_4d(dK + half, &tv, 0, n0, h, bi, full);
                }
            }
    } else if (warp < a.nw) {
        for (int it = 0; it < nt; it++) {
            const int st = it % a.S;
            mbar_wait(bars + 8 * st, (it / a.S) & 1);
            __syncwarp();
            if (lane == 0)
                mbar_arrive(bars + 8 * (a.S + st));
        }
    }
    __syncthreads();
#endif
}

/* Map of one [b, h, skv, D] bf16 tensor for a mode. */
static bool make_map(CUtensorMap *m, void *data, int b, int h, int skv, int D, int BC, int mode)
{
    static PFN_cuTensorMapEncodeTiled_v12000 enc = bench_tma_encoder();
    cuuint64_t dims[4], strides[3];
    cuuint32_t box[4] = {64, (cuuint32_t)BC, 1, 1}, es[4] = {1, 1, 1, 1};
    CUtensorMapSwizzle sw = CU_TENSOR_MAP_SWIZZLE_128B;
    const cuuint64_t row = (cuuint64_t)D * 2, head = row * skv, batch = head * h;
    if (mode == MODE_FLAT) {
        dims[0] = 64, dims[1] = (cuuint64_t)skv * (D / 64), dims[2] = h, dims[3] = b;
        strides[0] = 128, strides[1] = head, strides[2] = batch;
        box[1] = (cuuint32_t)(BC * (D / 64));
    } else {
        dims[0] = D, dims[1] = skv, dims[2] = h, dims[3] = b;
        strides[0] = row, strides[1] = head, strides[2] = batch;
        if (mode == MODE_WIDE)
            box[0] = (cuuint32_t)D, sw = CU_TENSOR_MAP_SWIZZLE_NONE;
    }
    if (h == 1)
        strides[1] = row; /* a size-1 dimension's stride is never used */
    CUresult r = enc(m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, data, dims, strides, box, es,
                     CU_TENSOR_MAP_INTERLEAVE_NONE, sw, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                     CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return r == CUDA_SUCCESS;
}

struct set_t {
    void *k, *v;
    CUtensorMap tk, tv;
};

static double time_case(cudaStream_t st, std::vector<set_t> &sets, const args_t &a, int blocks, size_t smem)
{
    return bench_graph_us(st, [&](int i) {
        const set_t &s = sets[i % sets.size()];
        tma_kernel<<<blocks, (a.nw + 1) * 32, smem, st>>>(s.tk, s.tv, a);
    });
}

int main()
{
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    std::printf("# decode_tma: %s, %d SMs, L2 %.0f MB; graph of 20 launches, median of 5 replays\n", prop.name,
                prop.multiProcessorCount, prop.l2CacheSize / 1e6);
    CK(cudaFuncSetAttribute(tma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024));
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    struct shape_t {
        const char *name;
        int b, h, skv, D;
    } shapes[] = {{"llama b8.hkv8 d128", 8, 8, 2049, 128}, {"gemma b8.hkv1 d256", 8, 1, 2049, 256}};
    const char *mname[] = {"box", "flat", "wide"};
    for (const shape_t &sh : shapes) {
        const size_t bytes = (size_t)sh.b * sh.h * sh.skv * sh.D * 2;
        const int nsets = (int)std::max<size_t>(3, (3 * (size_t)prop.l2CacheSize + 2 * bytes - 1) / (2 * bytes));
        std::vector<set_t> sets(nsets);
        for (set_t &s : sets) {
            CK(cudaMalloc(&s.k, bytes));
            CK(cudaMalloc(&s.v, bytes));
            CK(cudaMemset(s.k, 1, bytes));
            CK(cudaMemset(s.v, 1, bytes));
        }
        std::printf("## %s skv %d: K+V %.2f MB, %d sets\n", sh.name, sh.skv, 2 * bytes / 1e6, nsets);
        for (int BC : {64, 128})
            for (int splits : {1, 2, 4, 8, 16})
                for (int S : {3, 6})
                    for (int mode = 0; mode < 3; mode++) {
                        args_t a = {sh.h, sh.skv, sh.D, BC, S, splits, 0, mode, BC / 16};
                        const int ntiles = (sh.skv + BC - 1) / BC;
                        a.tps = (ntiles + splits - 1) / splits;
                        const int blocks = sh.b * sh.h * splits;
                        const size_t smem = 128 + 1024 + (size_t)S * 2 * BC * sh.D * 2;
                        if (smem > 227 * 1024 || blocks > 4 * prop.multiProcessorCount || blocks < 32 ||
                            (mode == MODE_FLAT && BC * (sh.D / 64) > 256) || (mode == MODE_WIDE && sh.D > 256))
                            continue;
                        bool ok = true;
                        for (set_t &s : sets)
                            ok = ok && make_map(&s.tk, s.k, sh.b, sh.h, sh.skv, sh.D, BC, mode) &&
                                 make_map(&s.tv, s.v, sh.b, sh.h, sh.skv, sh.D, BC, mode);
                        if (!ok) {
                            std::printf("%-5s BC %3d splits %2d S %d: map refused\n", mname[mode], BC, splits, S);
                            continue;
                        }
                        const double us = time_case(st, sets, a, blocks, smem);
                        std::printf("%-5s BC %3d splits %2d S %d  %4d blocks  %8.2f us  %5.2f TB/s\n", mname[mode],
                                    BC, splits, S, blocks, us, 2 * bytes / us / 1e6);
                    }
        for (set_t &s : sets) {
            CK(cudaFree(s.k));
            CK(cudaFree(s.v));
        }
    }
    return 0;
}
