/* decode_floor.cu -- what a decode step's memory traffic costs at least on
 * this GPU, with nothing else in the kernel: the floor the fused_splitkv
 * figures of docs/perf.md are read against.
 *
 *   nvcc -O3 -arch=sm_90 -o decode_floor bench/decode_floor.cu
 *   ./decode_floor [MB ...]          (default: 16.8 67.2, the K+V bytes of
 *                                     the e2e Gemma and Llama decode steps)
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
 *   memcpy     cudaMemcpyAsync device to device of half the bytes (reads
 *              half and writes half)
 * Prints one line per measurement: us per launch and TB/s. */
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                                   \
    do {                                                                                        \
        cudaError_t e_ = (x);                                                                   \
        if (e_ != cudaSuccess) {                                                                \
            std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));   \
            std::exit(1);                                                                       \
        }                                                                                       \
    } while (0)

__global__ void empty_kernel(int *out)
{
    if (out == nullptr)
        asm volatile("");
}

/* Block b reads words [b*per, (b+1)*per) of src (16-byte words). */
__global__ void __launch_bounds__(256) read_kernel(const uint4 *__restrict__ src, size_t words, int *out)
{
    const size_t per = (words + gridDim.x - 1) / gridDim.x;
    const size_t beg = blockIdx.x * per, end = beg + per < words ? beg + per : words;
    unsigned acc = 0;
    size_t i = beg + threadIdx.x;
    for (; i + 7 * 256 < end; i += 8 * 256) {
        uint4 x[8];
#pragma unroll
        for (int u = 0; u < 8; u++)
            x[u] = __ldg(src + i + u * 256);
#pragma unroll
        for (int u = 0; u < 8; u++)
            acc ^= x[u].x ^ x[u].y ^ x[u].z ^ x[u].w;
    }
    for (; i < end; i += 256) {
        const uint4 x = __ldg(src + i);
        acc ^= x.x ^ x.y ^ x.z ^ x.w;
    }
    if (acc == 0x9e3779b9u) /* never, as far as the compiler knows: the loads stay */
        out[blockIdx.x] = (int)acc;
}

typedef void (*enqueue_fn)(cudaStream_t, int set, void *ctx);

struct ctx_t {
    std::vector<char *> sets;
    size_t bytes;
    int grid;
    int *out;
    char *dst;
};

static double graph_us(cudaStream_t st, enqueue_fn fn, ctx_t *c, int nsets)
{
    const int per_graph = 20;
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < per_graph; i++)
        fn(st, i % nsets, c);
    CK(cudaStreamEndCapture(st, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    CK(cudaGraphLaunch(ge, st));
    CK(cudaStreamSynchronize(st));
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    std::vector<float> t;
    for (int r = 0; r < 5; r++) {
        CK(cudaEventRecord(a, st));
        CK(cudaGraphLaunch(ge, st));
        CK(cudaEventRecord(b, st));
        CK(cudaEventSynchronize(b));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms * 1000.f / per_graph);
    }
    std::sort(t.begin(), t.end());
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    return t[t.size() / 2];
}

static void enq_empty(cudaStream_t st, int, void *p)
{
    empty_kernel<<<1, 32, 0, st>>>(static_cast<ctx_t *>(p)->out);
}

static void enq_read(cudaStream_t st, int set, void *p)
{
    ctx_t *c = static_cast<ctx_t *>(p);
    read_kernel<<<c->grid, 256, 0, st>>>(reinterpret_cast<const uint4 *>(c->sets[set]), c->bytes / 16, c->out);
}

static void enq_read_tail(cudaStream_t st, int set, void *p)
{
    ctx_t *c = static_cast<ctx_t *>(p);
    read_kernel<<<132, 256, 0, st>>>(reinterpret_cast<const uint4 *>(c->sets[set]), c->bytes / 16, c->out);
    read_kernel<<<64, 256, 0, st>>>(reinterpret_cast<const uint4 *>(c->sets[(set + 1) % c->sets.size()]),
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
