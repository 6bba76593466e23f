/* graph_timing.cuh -- how bench/decode_floor.cu and bench/decode_tma.cu
 * time a launch (../.library/device/METHOD.md): a CUDA graph of
 * `per_graph` launches captured from enqueue(i), i = 0 .. per_graph-1 (the
 * caller rotates its input sets by i), one untimed replay, then `reps`
 * replays between CUDA events; the median, per launch, in microseconds.
 * CK(x) stops the program on a CUDA error (these are programs, not
 * library code). */
#ifndef BENCH_GRAPH_TIMING_CUH
#define BENCH_GRAPH_TIMING_CUH

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

template <typename F>
static double bench_graph_us(cudaStream_t st, F enqueue, int per_graph = 20, int reps = 5)
{
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < per_graph; i++)
        enqueue(i);
    CK(cudaStreamEndCapture(st, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    CK(cudaGraphLaunch(ge, st));
    CK(cudaStreamSynchronize(st));
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    std::vector<float> t;
    for (int r = 0; r < reps; r++) {
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

#endif
