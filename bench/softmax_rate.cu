/* softmax_rate.cu -- what one element of e4m3's softmax costs on this SM,
 * by instruction form, with nothing else in the kernel: the data for
 * docs/kernels.md's "cut instructions per element" (version 3.5's FMA-pipe
 * exponential moved work, it did not remove it).
 *
 *   nvcc -O3 -arch=sm_90 -o softmax_rate bench/softmax_rate.cu
 *   ./softmax_rate
 *
 * Each form runs in one kernel of 132 x 4 blocks of 128 threads (four
 * warps per SMSP, as a 3-warpgroup tile's consumers and producer), every
 * thread over 16 independent elements per iteration, 4096 iterations; the
 * clock64 cycles of the slowest block give elements per cycle per SM:
 *   ex2 f32      FFMA (x * scale - max) then MUFU.EX2: today's softmax core
 *   ex2 f16x2    HFMA2 then ex2.approx.f16x2 on packed halves: two
 *                elements per instruction if the MUFU takes a pair at once
 *   ex2 bf16x2   the same with ex2.approx.ftz.bf16x2 (sm_90)
 *   cvt f32      cvt.rn.satfinite.e4m3x2.f32 of two f32 (P to e4m3)
 *   cvt f16x2    cvt.rn.satfinite.e4m3x2.f16x2 of one packed pair
 *   max f32      fmax over f32 (the row max)
 *   max f16x2    max over packed halves (HMNMX2)
 *   ex2+cvt      ex2 f32 of a pair, then cvt f32 of it: at ex2's rate if
 *                the conversion has a pipe of its own, at 1 / (1 / ex2 +
 *                1 / cvt) if it shares the MUFU's
 *   softmax      the sm90a kernel's e4m3 softmax per element, as its SASS
 *                has it (bench/sass-e4m3-192x128-loop-h100-8ad86fa.txt):
 *                FMNMX into two partial maxima, a shuffle each 16, FFMA,
 *                MUFU.EX2, FADD into two partial sums, a cvt a pair, and
 *                O's FMUL: the rate three warpgroups' softmaxes could
 *                reach with nothing else on the SM
 *   softmax icvt the same with P to e4m3 by integer arithmetic instead of
 *                F2FP: the exponent lowered by 120 (so that the float's
 *                exponent field is e4m3's, bias 7), half an e4m3 ulp added
 *                (round to nearest), bits 20-26 taken, two bytes put
 *                together by PRMT; P under 2^-6 comes out 0 (ex2.ftz),
 *                where F2FP gives e4m3's subnormals: whether moving the
 *                conversion off the XU pipe pays for its four more
 *                instructions a pair
 *   softmax lin  the same with no exponential at all (version 3.26's
 *                SM90_E4M3_LIN, measured slower in the kernel and taken
 *                out, code in e99b3ec; docs/kernels.md): P's e4m3 code
 *                floor(8 (x + 7)) by one FFMA rounded down onto
 *                1.5 * 2^23, clamped at 0 (ptxas merges the two uses'
 *                clamps), the row sums adding the code shifted into a
 *                float's fields (the code's value times 2^-120), the
 *                bytes put together by PRMT. Read 11.10 on an H100
 *                (bench/owed-h100-5bf3a66.txt), softmax 9.76
 * Prints one line per form: elements per cycle per SM and the result's
 * checksum (so the compiler keeps the work). The SASS of each form:
 * cuobjdump -sass softmax_rate | grep -E "MUFU|HMNMX2|F2FP|FMNMX". */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdint>

#define ITERS 4096
#define ELEMS 16

enum { F_EX2_F32, F_EX2_F16X2, F_EX2_BF16X2, F_CVT_F32, F_CVT_F16X2, F_MAX_F32, F_MAX_F16X2, F_EX2_CVT, F_SOFTMAX, F_SOFTMAX_ICVT, F_SOFTMAX_LIN, F_N };
static const char *names[F_N] = {"ex2 f32", "ex2 f16x2", "ex2 bf16x2",   "cvt f32",     "cvt f16x2", "max f32",
                                 "max f16x2", "ex2+cvt", "softmax", "softmax icvt", "softmax lin"};

__device__ __forceinline__ uint32_t ex2_h2(uint32_t x)
{
    uint32_t y;
    asm volatile("ex2.approx.f16x2 %0, %1;" : "=r"(y) : "r"(x));
    return y;
}

__device__ __forceinline__ uint32_t ex2_bh2(uint32_t x)
{
    uint32_t y;
    asm volatile("ex2.approx.ftz.bf16x2 %0, %1;" : "=r"(y) : "r"(x));
    return y;
}

/* SM90_E4M3_LIN's code float, its clamped value (times 2^-120) and byte */
__device__ __forceinline__ float lin_code(float v, float a, float b)
{
    float t;
    asm volatile("fma.rm.f32 %0, %1, %2, %3;" : "=f"(t) : "f"(v), "f"(a), "f"(b));
    return t;
}
__device__ __forceinline__ float lin_value(float t)
{
    return __uint_as_float(__float_as_uint(fmaxf(t, 12582912.f)) << 20);
}
__device__ __forceinline__ uint32_t lin_bytes(float t0, float t1)
{
    return __byte_perm(__float_as_uint(fmaxf(t0, 12582912.f)), __float_as_uint(fmaxf(t1, 12582912.f)), 0x0040);
}

/* One tile's e4m3 softmax over a thread's ELEMS scores v, as the sm90a
 * kernel's: the row max (two partials and a shuffle), the exponentials
 * against it, the row sums, P to e4m3, O's rescale by alpha. F, one of
 * the softmax forms: F_SOFTMAX converts by F2FP, F_SOFTMAX_ICVT by
 * integer arithmetic, F_SOFTMAX_LIN takes no exponential (the code by
 * one FFMA); see the file's comment. */
template <int F>
__device__ __forceinline__ void softmax_step(float (&v)[ELEMS], float (&o)[ELEMS], float (&lsum)[2], float &mrun,
                                             uint32_t &acc)
{
    constexpr bool IC = F == F_SOFTMAX_ICVT, LIN = F == F_SOFTMAX_LIN;
    float pm[2] = {mrun, -INFINITY};
#pragma unroll
    for (int i = 0; i < ELEMS; i++)
        pm[i % 2] = fmaxf(pm[i % 2], v[i]);
    float mx = fmaxf(pm[0], pm[1]);
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    float alpha;
    asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(alpha) : "f"(0.125f * (mrun - mx)));
    const float mp = mx * 0.125f + (IC ? 120.f : 0.f);
    mrun = mx;
    if constexpr (LIN) {
        const float b = 12582912.f + 56.f - ceilf(mx); /* 8 times the base on its 1/8 grid */
#pragma unroll
        for (int i = 0; i < ELEMS / 2; i++) {
            const float t0 = lin_code(v[2 * i], 1.f, b), t1 = lin_code(v[2 * i + 1], 1.f, b);
            const float y0 = lin_value(t0), y1 = lin_value(t1);
            lsum[i % 2] += y0 + y1;
            acc += lin_bytes(t0, t1);
            v[2 * i] += y1; /* new scores next time */
            v[2 * i + 1] += y0;
        }
    } else {
#pragma unroll
        for (int i = 0; i < ELEMS / 2; i++) {
            float y0, y1;
            asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(y0) : "f"(fmaf(v[2 * i], 0.125f, -mp)));
            asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(y1) : "f"(fmaf(v[2 * i + 1], 0.125f, -mp)));
            lsum[i % 2] += y0 + y1;
            if constexpr (IC) {
                const uint32_t b0 = (__float_as_uint(y0) + 0x80000u) >> 20;
                const uint32_t b1 = (__float_as_uint(y1) + 0x80000u) >> 20;
                acc += __byte_perm(b0, b1, 0x0040);
            } else {
                uint16_t r;
                asm volatile("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(y0), "f"(y1));
                acc += r;
            }
            v[2 * i] += y1; /* new scores next time */
            v[2 * i + 1] += y0;
        }
    }
#pragma unroll
    for (int i = 0; i < ELEMS; i++)
        o[i] *= alpha;
}

template <int F>
__global__ void rate_kernel(float seed, unsigned long long *cycles, float *sink)
{
    float v[ELEMS];
    uint32_t h[ELEMS / 2];
    for (int i = 0; i < ELEMS; i++)
        v[i] = seed * (float)(threadIdx.x % 7 + i) * -0.01f;
    for (int i = 0; i < ELEMS / 2; i++) {
        __half2 t = __floats2half2_rn(v[2 * i], v[2 * i + 1]);
        h[i] = *reinterpret_cast<uint32_t *>(&t);
    }
    uint32_t hb[ELEMS / 2];
    for (int i = 0; i < ELEMS / 2; i++) {
        __nv_bfloat162 t = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
        hb[i] = *reinterpret_cast<uint32_t *>(&t);
    }
    uint32_t acc = 0;
    float o[ELEMS]; /* softmax: O's accumulators, rescaled once an element */
    for (int i = 0; i < ELEMS; i++)
        o[i] = v[i] + 1.f;
    float lsum[2] = {0.f, 0.f}, mrun = -1.f;
    __syncthreads();
    const unsigned long long t0 = clock64();
#pragma unroll 1
    for (int it = 0; it < ITERS; it++) {
        if constexpr (F == F_EX2_F32) {
#pragma unroll
            for (int i = 0; i < ELEMS; i++) {
                float y;
                asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(fmaf(v[i], 0.9f, -0.1f)));
                v[i] = y;
            }
        } else if constexpr (F == F_EX2_F16X2) {
            const __half2 sc = __float2half2_rn(0.9f), of = __float2half2_rn(-0.1f);
#pragma unroll
            for (int i = 0; i < ELEMS / 2; i++) {
                __half2 x = __hfma2(*reinterpret_cast<__half2 *>(&h[i]), sc, of);
                h[i] = ex2_h2(*reinterpret_cast<uint32_t *>(&x));
            }
        } else if constexpr (F == F_EX2_BF16X2) {
            const __nv_bfloat162 sc = __float2bfloat162_rn(0.9f), of = __float2bfloat162_rn(-0.1f);
#pragma unroll
            for (int i = 0; i < ELEMS / 2; i++) {
                __nv_bfloat162 x = __hfma2(*reinterpret_cast<__nv_bfloat162 *>(&hb[i]), sc, of);
                hb[i] = ex2_bh2(*reinterpret_cast<uint32_t *>(&x));
            }
        } else if constexpr (F == F_CVT_F32) {
#pragma unroll
            for (int i = 0; i < ELEMS / 2; i++) {
                uint16_t r;
                asm volatile("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(v[2 * i]), "f"(v[2 * i + 1]));
                acc += r;
                v[2 * i] += 1.0f; /* a new input each time */
            }
        } else if constexpr (F == F_CVT_F16X2) {
#pragma unroll
            for (int i = 0; i < ELEMS / 2; i++) {
                uint16_t r;
                asm volatile("cvt.rn.satfinite.e4m3x2.f16x2 %0, %1;" : "=h"(r) : "r"(h[i]));
                acc += r;
                h[i] += 1u;
            }
        } else if constexpr (F == F_EX2_CVT) {
#pragma unroll
            for (int i = 0; i < ELEMS / 2; i++) {
                float y0, y1;
                asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(y0) : "f"(fmaf(v[2 * i], 0.9f, -0.1f)));
                asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(y1) : "f"(fmaf(v[2 * i + 1], 0.9f, -0.1f)));
                uint16_t r;
                asm volatile("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(y0), "f"(y1));
                acc += r;
                v[2 * i] = y0;
                v[2 * i + 1] = y1;
            }
        } else if constexpr (F == F_SOFTMAX || F == F_SOFTMAX_ICVT || F == F_SOFTMAX_LIN) {
            softmax_step<F>(v, o, lsum, mrun, acc);
        } else if constexpr (F == F_MAX_F32) {
#pragma unroll
            for (int i = 0; i < ELEMS; i++)
                asm volatile("max.f32 %0, %0, %1;" : "+f"(v[i]) : "f"(v[(i + 1) % ELEMS]));
        } else {
#pragma unroll
            for (int i = 0; i < ELEMS / 2; i++)
                asm volatile("max.f16x2 %0, %0, %1;" : "+r"(h[i]) : "r"(h[(i + 1) % (ELEMS / 2)]));
        }
    }
    const unsigned long long t1 = clock64();
    float s = (float)acc;
    for (int i = 0; i < ELEMS; i++)
        s += v[i] + o[i];
    s += lsum[0] + lsum[1];
    for (int i = 0; i < ELEMS / 2; i++)
        s += (float)(h[i] & 0xffu) + (float)(hb[i] & 0xffu);
    sink[blockIdx.x * blockDim.x + threadIdx.x] = s;
    if (threadIdx.x == 0)
        atomicMax(cycles, t1 - t0);
}

template <int F>
static int run_form(int sms, unsigned long long *d_cyc, float *d_sink)
{
    const int blocks = sms * 4, threads = 128;
    unsigned long long cyc = 0;
    cudaMemset(d_cyc, 0, sizeof(cyc));
    rate_kernel<F><<<blocks, threads>>>(1.0f, d_cyc, d_sink); /* warm-up */
    cudaMemset(d_cyc, 0, sizeof(cyc));
    rate_kernel<F><<<blocks, threads>>>(1.0f, d_cyc, d_sink);
    if (cudaDeviceSynchronize() != cudaSuccess) {
        fprintf(stderr, "%s: %s\n", names[F], cudaGetErrorString(cudaGetLastError()));
        return 1;
    }
    cudaMemcpy(&cyc, d_cyc, sizeof(cyc), cudaMemcpyDeviceToHost);
    /* 4 blocks per SM, each 128 threads x ELEMS x ITERS elements */
    const double per_sm = 4.0 * threads * ELEMS * (double)ITERS;
    printf("%-13s %7.2f elements/cycle/SM (%llu cycles)\n", names[F], per_sm / (double)cyc, cyc);
    return 0;
}

int main(void)
{
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
        fprintf(stderr, "softmax_rate: no CUDA device\n");
        return 2;
    }
    printf("# softmax_rate: %s, %d SMs, 4 blocks of 128 threads per SM, %d elements x %d iterations a thread\n",
           prop.name, prop.multiProcessorCount, ELEMS, ITERS);
    unsigned long long *d_cyc;
    float *d_sink;
    cudaMalloc(&d_cyc, sizeof(*d_cyc));
    cudaMalloc(&d_sink, sizeof(float) * prop.multiProcessorCount * 4 * 128);
    int rc = 0;
    rc |= run_form<F_EX2_F32>(prop.multiProcessorCount, d_cyc, d_sink);
    rc |= run_form<F_EX2_F16X2>(prop.multiProcessorCount, d_cyc, d_sink);
    rc |= run_form<F_EX2_BF16X2>(prop.multiProcessorCount, d_cyc, d_sink);
    rc |= run_form<F_CVT_F32>(prop.multiProcessorCount, d_cyc, d_sink);
    rc |= run_form<F_CVT_F16X2>(prop.multiProcessorCount, d_cyc, d_sink);
    rc |= run_form<F_MAX_F32>(prop.multiProcessorCount, d_cyc, d_sink);
    rc |= run_form<F_MAX_F16X2>(prop.multiProcessorCount, d_cyc, d_sink);
    rc |= run_form<F_EX2_CVT>(prop.multiProcessorCount, d_cyc, d_sink);
    rc |= run_form<F_SOFTMAX>(prop.multiProcessorCount, d_cyc, d_sink);
    rc |= run_form<F_SOFTMAX_LIN>(prop.multiProcessorCount, d_cyc, d_sink);
    rc |= run_form<F_SOFTMAX_ICVT>(prop.multiProcessorCount, d_cyc, d_sink);
    return rc;
}
