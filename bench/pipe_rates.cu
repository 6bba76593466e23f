// pipe_rates.cu -- how many of the softmax's instructions an SM retires
// per clock: ex2.approx.ftz.f32 (MUFU.EX2), the f32 -> e4m3x2 and
// f32 -> bf16x2 packs (F2FP), FFMA and FMNMX, alone and ex2 mixed with
// the e4m3 pack as the e4m3 kernel issues them (two exponentials per
// pack). Each thread runs 8 independent chains; 2 blocks of 1024 threads
// per SM, all resident; cycles from clock64 in each block.
//
//   nvcc -O3 -arch=sm_90 -o pipe_rates bench/pipe_rates.cu && ./pipe_rates
//
// Prints per instruction: thread-instructions per clock per SM.
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

#define ITERS 4096
#define CHAINS 8

enum { OP_EX2, OP_E4M3, OP_BF16, OP_FFMA, OP_FMNMX, OP_EX2_E4M3 };

__device__ __forceinline__ float ex2f(float x)
{
    float y;
    asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ uint32_t e4m3x2(float a, float b)
{
    uint16_t r;
    asm volatile("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(a), "f"(b));
    return r;
}

__device__ __forceinline__ uint32_t bf16x2(float a, float b)
{
    uint32_t r;
    asm volatile("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(a), "f"(b));
    return r;
}

template <int OP>
__global__ void __launch_bounds__(1024, 2) rates(float *sink, long long *cycles)
{
    float x[CHAINS];
    uint32_t acc = 0;
    for (int c = 0; c < CHAINS; c++)
        x[c] = -1.f - 0.001f * (threadIdx.x + c);
    __syncthreads();
    long long t0 = clock64();
    for (int i = 0; i < ITERS; i++) {
#pragma unroll
        for (int c = 0; c < CHAINS; c++) {
            if (OP == OP_EX2)
                x[c] = ex2f(x[c]);
            else if (OP == OP_E4M3)
                acc ^= e4m3x2(x[c], x[(c + 1) % CHAINS]), x[c] = __int_as_float(__float_as_int(x[c]) ^ (int)acc);
            else if (OP == OP_BF16)
                acc ^= bf16x2(x[c], x[(c + 1) % CHAINS]), x[c] = __int_as_float(__float_as_int(x[c]) ^ (int)acc);
            else if (OP == OP_FFMA)
                x[c] = fmaf(x[c], 0.999f, 0.001f);
            else if (OP == OP_FMNMX)
                x[c] = fmaxf(x[c], x[(c + 3) % CHAINS]) - 0.f;
            else if (OP == OP_EX2_E4M3) {
                x[c] = ex2f(x[c]);
                if (c % 2 == 1)
                    acc ^= e4m3x2(x[c - 1], x[c]);
            }
        }
    }
    __syncthreads();
    long long t1 = clock64();
    float s = (float)acc;
    for (int c = 0; c < CHAINS; c++)
        s += x[c];
    if (s == 12345.f)
        sink[threadIdx.x] = s;
    if (threadIdx.x == 0)
        cycles[blockIdx.x] = t1 - t0;
}

template <int OP>
static void run(const char *name, double per_iter, int sms, float *sink, long long *dcyc, long long *hcyc)
{
    const int blocks = 2 * sms;
    rates<OP><<<blocks, 1024>>>(sink, dcyc); // warm
    rates<OP><<<blocks, 1024>>>(sink, dcyc);
    if (cudaDeviceSynchronize() != cudaSuccess) {
        printf("%s: %s\n", name, cudaGetErrorString(cudaGetLastError()));
        return;
    }
    cudaMemcpy(hcyc, dcyc, blocks * sizeof *hcyc, cudaMemcpyDeviceToHost);
    double mean = 0;
    for (int b = 0; b < blocks; b++)
        mean += (double)hcyc[b] / blocks;
    const double ops = 2.0 * 1024 * ITERS * per_iter; // per SM: two blocks
    printf("%-34s %7.2f per clock per SM (%.0f cycles a block)\n", name, ops / mean, mean);
}

int main(void)
{
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    float *sink;
    long long *dcyc, hcyc[4096];
    cudaMalloc(&sink, 1024 * sizeof(float));
    cudaMalloc(&dcyc, 4096 * sizeof(long long));
    cudaDeviceProp p;
    cudaGetDeviceProperties(&p, 0);
    printf("# %s, %d SMs; thread-instructions retired per clock per SM\n", p.name, sms);
    run<OP_EX2>("ex2.approx.ftz.f32", CHAINS, sms, sink, dcyc, hcyc);
    run<OP_E4M3>("cvt.rn.satfinite.e4m3x2.f32", CHAINS, sms, sink, dcyc, hcyc);
    run<OP_BF16>("cvt.rn.bf16x2.f32", CHAINS, sms, sink, dcyc, hcyc);
    run<OP_FFMA>("fma.rn.f32", CHAINS, sms, sink, dcyc, hcyc);
    run<OP_FMNMX>("max.f32", CHAINS, sms, sink, dcyc, hcyc);
    run<OP_EX2_E4M3>("ex2 + e4m3x2 pack (2:1), ex2 counted", CHAINS, sms, sink, dcyc, hcyc);
    return 0;
}
