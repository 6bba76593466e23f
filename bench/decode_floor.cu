/* decode_floor.cu -- what a decode step's memory traffic costs at least on
 * this GPU, with nothing else in the kernel: the floor the fused_splitkv
 * figures of docs/perf.md are read against.
 *
 *   nvcc -O3 -arch=sm_90 -o decode_floor bench/decode_floor.cu
 *   ./decode_floor [MB ...]          (default: 16.8 67.2, the K+V bytes of
 *                                     the e2e Gemma and Llama decode steps;
 *                                     add 70 for the power-of-two check)
 *
 * For each size, timed as tests/gpu/run.sh times tactics (METHOD.md): a
 * CUDA graph of 20 launches, input sets rotated so that each launch reads
 * bytes no launch before it left in L2 (sets cover >= 3x the L2), CUDA
 * events around 5 replays after a warm-up, the median per launch:
 *   empty      one block that does nothing: the cost of a launch in a graph
 *   read G     G blocks of 256 threads read the bytes once (16-byte
 *              non-coherent loads, 8 in flight per thread), one word out
 *              per block: the streaming floor at that grid
 *   read+tail  read at G = 132, then a 64-block kernel that reads 64 KB:
 *              what a second kernel after it (a combine) costs
 *   read 132 x 1024  132 blocks of 1024 threads: one block per SM with
 *              four times the loads in flight (is one block per SM
 *              limited by its loads in flight, or by the SM?)
 *   bulk C x S 132 blocks, one warp issuing bulk copies (the TMA unit,
 *              cp.async.bulk) of C bytes into S stages of 32 KB behind
 *              mbarriers, one warp taking each stage and freeing it: the
 *              floor of a bulk-copy pipeline at one block per SM, by copy
 *              size (a per-row copy of a d = 128 key is 256 bytes)
 *   bulk pow2  the same with 16 KB copies, 4 stages, over 132 chunks of
 *              exactly 512 KB (sizes of at least 69.2 MB): do streams a
 *              power of two apart collide in the memory's channels (as a
 *              decode step's K/V heads of 2048 keys would)?
 *   memcpy     cudaMemcpyAsync device to device of half the bytes (reads
 *              half and writes half)
 * Prints one line per measurement: us per launch and TB/s. */
#include <cuda_runtime.h>

#include "../kernels/cuda/cuda_fused_common.cuh"
#include "graph_timing.cuh"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>


__global__ void empty_kernel(int *out)
{
    if (out == nullptr)
        asm volatile("");
}

/* Block b reads words [b*per, (b+1)*per) of src (16-byte words). */
template <int NT>
__global__ void __launch_bounds__(NT) read_kernel(const uint4 *__restrict__ src, size_t words, int *out)
{
    const size_t per = (words + gridDim.x - 1) / gridDim.x;
    const size_t beg = blockIdx.x * per, end = beg + per < words ? beg + per : words;
    unsigned acc = 0;
    size_t i = beg + threadIdx.x;
    for (; i + 7 * NT < end; i += 8 * NT) {
        uint4 x[8];
#pragma unroll
        for (int u = 0; u < 8; u++)
            x[u] = __ldg(src + i + u * NT);
#pragma unroll
        for (int u = 0; u < 8; u++)
            acc ^= x[u].x ^ x[u].y ^ x[u].z ^ x[u].w;
    }
    for (; i < end; i += NT) {
        const uint4 x = __ldg(src + i);
        acc ^= x.x ^ x.y ^ x.z ^ x.w;
    }
    if (acc == 0x9e3779b9u) /* never, as far as the compiler knows: the loads stay */
        out[blockIdx.x] = (int)acc;
}

/* Block b brings bytes [b*per, (b+1)*per) of src into shared memory by
 * bulk copies of `copy` bytes, 32 KB a stage, `stages` stages: warp 0
 * issues (its lanes taking the copies of a stage in turn), warp 1 reads
 * one word of each stage and frees it. Sizes are multiples of the copy.
 * The mbarrier and bulk-copy helpers are the fused kernels' own
 * (kernels/cuda/cuda_fused_common.cuh). */

__global__ void __launch_bounds__(64) bulk_kernel(const char *__restrict__ src, size_t bytes, int copy, int stages,
                                                   int *out)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    constexpr int SB = 32768;
    extern __shared__ __align__(128) unsigned char sm[];
    const unsigned bars = smem_u32(sm), buf = bars + 128;
    const size_t per = (bytes / gridDim.x) / SB * SB;
    const char *g = src + blockIdx.x * per;
    const int tiles = (int)(per / SB), lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (threadIdx.x == 0) {
        for (int s = 0; s < stages; s++) {
            mbar_init(bars + 8 * s, 1);
            mbar_init(bars + 8 * (stages + s), 1);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    unsigned acc = 0;
    for (int t = 0; t < tiles; t++) {
        const int s = t % stages;
        const unsigned full = bars + 8 * s, empty = bars + 8 * (stages + s);
        const unsigned ph = (t / stages) & 1;
        if (warp == 0) {
            mbar_wait(empty, ph ^ 1);
            if (lane == 0)
                mbar_expect_tx(full, SB);
            __syncwarp();
            for (int c = lane; c < SB / copy; c += 32)
                bulk_load(buf + s * SB + c * copy, g + (size_t)t * SB + (size_t)c * copy, (uint32_t)copy, full);
        } else {
            mbar_wait(full, ph);
            acc ^= reinterpret_cast<const unsigned *>(sm + 128 + s * SB)[lane];
            __syncwarp();
            if (lane == 0)
                mbar_arrive(empty);
        }
    }
    if (acc == 0x9e3779b9u)
        out[blockIdx.x] = (int)acc;
#else
    (void)src, (void)bytes, (void)copy, (void)stages, (void)out;
#endif
}

typedef void (*enqueue_fn)(cudaStream_t, int set, void *ctx);

struct ctx_t {
    std::vector<char *> sets;
    size_t bytes;
    int grid;
    int copy, stages;
    int *out;
    char *dst;
};

static double graph_us(cudaStream_t st, enqueue_fn fn, ctx_t *c, int nsets)
{
    return bench_graph_us(st, [&](int i) { fn(st, i % nsets, c); });
}

static void enq_empty(cudaStream_t st, int, void *p)
{
    empty_kernel<<<1, 32, 0, st>>>(static_cast<ctx_t *>(p)->out);
}

static void enq_read(cudaStream_t st, int set, void *p)
{
    ctx_t *c = static_cast<ctx_t *>(p);
    read_kernel<256><<<c->grid, 256, 0, st>>>(reinterpret_cast<const uint4 *>(c->sets[set]), c->bytes / 16, c->out);
}

static void enq_read1024(cudaStream_t st, int set, void *p)
{
    ctx_t *c = static_cast<ctx_t *>(p);
    read_kernel<1024><<<c->grid, 1024, 0, st>>>(reinterpret_cast<const uint4 *>(c->sets[set]), c->bytes / 16, c->out);
}

static void enq_bulk(cudaStream_t st, int set, void *p)
{
    ctx_t *c = static_cast<ctx_t *>(p);
    bulk_kernel<<<132, 64, 128 + c->stages * 32768, st>>>(c->sets[set], c->bytes, c->copy, c->stages, c->out);
}

static void enq_read_tail(cudaStream_t st, int set, void *p)
{
    ctx_t *c = static_cast<ctx_t *>(p);
    read_kernel<256><<<132, 256, 0, st>>>(reinterpret_cast<const uint4 *>(c->sets[set]), c->bytes / 16, c->out);
    read_kernel<256><<<64, 256, 0, st>>>(reinterpret_cast<const uint4 *>(c->sets[(set + 1) % c->sets.size()]),
                                    65536 / 16, c->out);
}

static void enq_memcpy(cudaStream_t st, int set, void *p)
{
    ctx_t *c = static_cast<ctx_t *>(p);
    CK(cudaMemcpyAsync(c->dst, c->sets[set], c->bytes / 2, cudaMemcpyDeviceToDevice, st));
}

int main(int argc, char **argv)
{
    std::vector<double> mbs;
    for (int i = 1; i < argc; i++)
        mbs.push_back(std::atof(argv[i]));
    if (mbs.empty())
        mbs = {16.79, 67.17};
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    std::printf("# decode_floor: %s, %d SMs, L2 %.0f MB; graph of 20 launches, median of 5 replays\n",
                prop.name, prop.multiProcessorCount, prop.l2CacheSize / 1e6);
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    ctx_t c;
    CK(cudaMalloc(&c.out, 1 << 16));
    {
        const double us = graph_us(st, enq_empty, &c, 1);
        std::printf("empty                 %8.2f us\n", us);
    }
    for (double mb : mbs) {
        c.bytes = (size_t)(mb * 1e6) / 16 * 16;
        const int nsets = (int)std::max<size_t>(3, (3 * (size_t)prop.l2CacheSize + c.bytes - 1) / c.bytes);
        c.sets.assign(nsets, nullptr);
        for (auto &s : c.sets) {
            CK(cudaMalloc(&s, c.bytes));
            CK(cudaMemset(s, 1, c.bytes));
        }
        CK(cudaMalloc(&c.dst, c.bytes / 2 + 16));
        std::printf("## %.2f MB, %d sets\n", c.bytes / 1e6, nsets);
        for (int grid : {128, 132, 264, 528, 1056, 2112}) {
            c.grid = grid;
            const double us = graph_us(st, enq_read, &c, nsets);
            std::printf("read %5d blocks      %8.2f us  %5.2f TB/s\n", grid, us, c.bytes / us / 1e6);
        }
        {
            const double us = graph_us(st, enq_read_tail, &c, nsets);
            std::printf("read 132 + tail 64    %8.2f us  %5.2f TB/s\n", us, c.bytes / us / 1e6);
        }
        c.grid = 132;
        {
            const double us = graph_us(st, enq_read1024, &c, nsets);
            std::printf("read 132 x 1024       %8.2f us  %5.2f TB/s\n", us, c.bytes / us / 1e6);
        }
        CK(cudaFuncSetAttribute(bulk_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 128 + 6 * 32768));
        for (int stages : {2, 6})
            for (int copy : {256, 1024, 4096, 32768}) {
                c.copy = copy, c.stages = stages;
                const double us = graph_us(st, enq_bulk, &c, nsets);
                /* bytes actually moved: 132 blocks x whole 32 KB stages */
                const double moved = 132.0 * (double)((c.bytes / 132) / 32768 * 32768);
                std::printf("bulk %5d B x %d st   %8.2f us  %5.2f TB/s\n", copy, stages, us, moved / us / 1e6);
            }
        if (c.bytes >= (size_t)132 << 19) {
            /* 132 chunks of exactly 512 KB: streams a power of two apart */
            const size_t keep = c.bytes;
            c.bytes = (size_t)132 << 19, c.copy = 16384, c.stages = 4;
            const double us = graph_us(st, enq_bulk, &c, nsets);
            std::printf("bulk pow2 512KB chunks %8.2f us  %5.2f TB/s\n", us, c.bytes / us / 1e6);
            c.bytes = keep;
        }
        {
            const double us = graph_us(st, enq_memcpy, &c, nsets);
            std::printf("memcpy d2d (half)     %8.2f us  %5.2f TB/s (read+write)\n", us, c.bytes / us / 1e6);
        }
        for (auto &s : c.sets)
            CK(cudaFree(s));
        CK(cudaFree(c.dst));
    }
    return 0;
}
