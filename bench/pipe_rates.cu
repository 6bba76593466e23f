// pipe_rates.cu -- how many of the softmax's instructions an SM retires
// per clock: ex2.approx.ftz.f32 (MUFU.EX2), the f32 -> e4m3x2 and
// f32 -> bf16x2 packs (F2FP), FFMA and FMNMX, alone and ex2 mixed with
// the e4m3 pack as the e4m3 kernel issues them (two exponentials per
// pack). Each thread runs 8 chains (the ex2 and FFMA ones independent;
// the packs and FMNMX also read a neighbour's value); as many blocks of
// 1024 threads as the occupancy calculator says fit on every SM at once.
// Each block records its SM (%smid) and its first and last clock64
// (SM-local); an SM's window is its blocks' earliest start to latest end,
// its work their sum. A rate over 128 thread-instructions a clock (4
// schedulers x 32 lanes) is impossible and is flagged as a harness error.
//
//   nvcc -O3 -arch=sm_90 -o pipe_rates bench/pipe_rates.cu && ./pipe_rates
//
// Prints per instruction: thread-instructions per clock per SM.
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

#define ITERS 4096
#define CHAINS 8 /* the end fence below names 8 */

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
__global__ void __launch_bounds__(1024, 1) rates(float *sink, long long *t, unsigned *sm)
{
    float x[CHAINS];
    uint32_t acc = 0, zero;
    long long t0, t1;
    __syncthreads();
    /* The window's ends are fenced by data: the chains start from a value
     * the first clock read hands out (an opaque 0), and the last read
     * takes every chain's result as an input, so no chain's work can be
     * moved out of the window (an earlier form of this harness read 231
     * FFMA a clock per SM, past the 128 an SM can issue). */
    asm volatile("mov.u64 %0, %%clock64;\n\tmov.b32 %1, 0;" : "=l"(t0), "=r"(zero));
    for (int c = 0; c < CHAINS; c++)
        x[c] = -1.f - 0.001f * (threadIdx.x + c) + __int_as_float((int)zero);
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
    asm volatile("" ::"f"(x[0]), "f"(x[1]), "f"(x[2]), "f"(x[3]), "f"(x[4]), "f"(x[5]), "f"(x[6]), "f"(x[7]),
                 "r"(acc));
    __syncthreads(); /* every warp's chains done */
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(t1));
    float s = (float)acc;
    for (int c = 0; c < CHAINS; c++)
        s += x[c];
    if (s == 12345.f)
        sink[threadIdx.x] = s;
    if (threadIdx.x == 0) {
        unsigned id;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
        t[2 * blockIdx.x] = t0;
        t[2 * blockIdx.x + 1] = t1;
        sm[blockIdx.x] = id;
    }
}

template <int OP>
static void run(const char *name, double per_iter, int sms, float *sink, long long *dt, unsigned *dsm)
{
    int per_sm = 0;
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, rates<OP>, 1024, 0);
    if (per_sm < 1) {
        printf("%s: does not fit on an SM\n", name);
        return;
    }
    const int blocks = per_sm * sms;
    static long long ht[2 * 4096];
    static unsigned hsm[4096];
    rates<OP><<<blocks, 1024>>>(sink, dt, dsm); // warm
    rates<OP><<<blocks, 1024>>>(sink, dt, dsm);
    if (cudaDeviceSynchronize() != cudaSuccess) {
        printf("%s: %s\n", name, cudaGetErrorString(cudaGetLastError()));
        return;
    }
    cudaMemcpy(ht, dt, 2 * blocks * sizeof *ht, cudaMemcpyDeviceToHost);
    cudaMemcpy(hsm, dsm, blocks * sizeof *hsm, cudaMemcpyDeviceToHost);
    double rate = 0, win = 0;
    int seen = 0;
    for (int id = 0; id < 1024; id++) { // each SM: its blocks' work over its window
        long long lo = 0, hi = 0;
        int n = 0;
        for (int b = 0; b < blocks; b++)
            if ((int)hsm[b] == id) {
                lo = n == 0 || ht[2 * b] < lo ? ht[2 * b] : lo;
                hi = n == 0 || ht[2 * b + 1] > hi ? ht[2 * b + 1] : hi;
                n++;
            }
        if (n > 0 && hi > lo) {
            rate += (double)n * 1024 * ITERS * per_iter / (double)(hi - lo);
            win += (double)(hi - lo);
            seen++;
        }
    }
    rate /= seen;
    printf("%-38s %7.2f per clock per SM (%d blocks of 1024 an SM, %.0f cycles)%s\n", name, rate, per_sm,
           win / seen, rate > 128.5 ? "  HARNESS ERROR: over 128" : "");
}

int main(void)
{
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    float *sink;
    long long *dt;
    unsigned *dsm;
    cudaMalloc(&sink, 1024 * sizeof(float));
    cudaMalloc(&dt, 2 * 4096 * sizeof(long long));
    cudaMalloc(&dsm, 4096 * sizeof(unsigned));
    cudaDeviceProp p;
    cudaGetDeviceProperties(&p, 0);
    printf("# %s, %d SMs; thread-instructions retired per clock per SM\n", p.name, sms);
    run<OP_EX2>("ex2.approx.ftz.f32", CHAINS, sms, sink, dt, dsm);
    run<OP_E4M3>("cvt.rn.satfinite.e4m3x2.f32", CHAINS, sms, sink, dt, dsm);
    run<OP_BF16>("cvt.rn.bf16x2.f32", CHAINS, sms, sink, dt, dsm);
    run<OP_FFMA>("fma.rn.f32", CHAINS, sms, sink, dt, dsm);
    run<OP_FMNMX>("max.f32", CHAINS, sms, sink, dt, dsm);
    run<OP_EX2_E4M3>("ex2 + e4m3x2 pack (2:1), ex2 counted", CHAINS, sms, sink, dt, dsm);
    return 0;
}
