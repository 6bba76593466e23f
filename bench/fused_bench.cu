/* fused_bench.cu -- times every fused / fused_splitkv tactic on the target
 * shapes of the fused-kernels issue; bench/fused_bench.py times PyTorch's
 * SDPA backends on the same shapes in the same run.
 *
 * Build (from the repository root):
 *   nvcc -O3 -arch=sm_90 -I. -o fused_bench bench/fused_bench.cu \
 *        kernels/cuda/cuda_fused.cu kernels/attn.c common/attune_err.c
 * with the Hopper kernels (version 3, arch=sm90a), as tests/gpu/sm90a_check.sh does:
 *   nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -I. -c kernels/cuda/cuda_fused_sm90a.cu
 *   nvcc -O3 -arch=sm_90 -DATTUNE_HAVE_SM90A=1 -I. -o fused_bench bench/fused_bench.cu \
 *        kernels/cuda/cuda_fused.cu cuda_fused_sm90a.o kernels/attn.c common/attune_err.c
 * Run: ./fused_bench [filter [tfilter]]   (substrings of the shape key and
 * of the tactic name; either may list alternatives separated by '|')
 *
 * Time: per tactic, a CUDA graph of N back-to-back launches on padded
 * buffers (kernel time only, no pad copies), replayed after a warm-up; each
 * replay timed with events; the median replay / N is the time per call.
 * Inputs: standard-normal-ish values from a hash (never zeros). */
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/attn.h"
#include "kernels/cuda/cuda_fused.h"

#define CUDA_CHECK(x)                                                                     \
    do {                                                                                  \
        cudaError_t e_ = (x);                                                             \
        if (e_ != cudaSuccess) {                                                          \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

/* Sum of 4 uniforms, centred and scaled: close enough to N(0,1) for timing. */
__global__ void fill_kernel(uint16_t *x, size_t n, uint64_t seed, int bf16)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint64_t z = (i + 1) * 0x9e3779b97f4a7c15ULL ^ seed;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        z ^= z >> 31;
        float u = ((z & 0xffff) + ((z >> 16) & 0xffff) + ((z >> 32) & 0xffff) + (z >> 48)) / 65536.f - 2.f;
        float f = u * 1.732f;
        uint32_t b;
        memcpy(&b, &f, 4);
        if (bf16) {
            x[i] = (uint16_t)((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
        } else {
            __half h = __float2half_rn(f);
            memcpy(&x[i], &h, 2);
        }
    }
}

struct bench_shape {
    attn_shape s;
    const char *note;
};

/* 1 when text holds one of the '|'-separated alternatives of pat ("" matches all). */
static bool matches(const char *text, const char *pat)
{
    if (!*pat)
        return true;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", pat);
    char *save = NULL;
    for (char *alt = strtok_r(buf, "|", &save); alt != NULL; alt = strtok_r(NULL, "|", &save))
        if (strstr(text, alt))
            return true;
    return false;
}

static double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Median time per call (us) of tactic t, or a negative error code. */
static double time_tactic(const attn_shape *s, const attn_tactic *t, void *q, void *k, void *v, void *o,
                          int64_t sq_pad, int64_t skv_pad, void *ws, cudaStream_t st)
{
    int rc = cuda_fused_launch(s, t, q, k, v, o, sq_pad, skv_pad, ws, st);
    if (rc != 0)
        return rc;
    CUDA_CHECK(cudaStreamSynchronize(st));
    /* One untimed call sizes the graph: about 2 ms of work per replay. */
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    CUDA_CHECK(cudaEventRecord(e0, st));
    for (int i = 0; i < 3; i++)
        cuda_fused_launch(s, t, q, k, v, o, sq_pad, skv_pad, ws, st);
    CUDA_CHECK(cudaEventRecord(e1, st));
    CUDA_CHECK(cudaEventSynchronize(e1));
    float ms0;
    CUDA_CHECK(cudaEventElapsedTime(&ms0, e0, e1));
    int n = (int)std::max(1.0, std::min(200.0, 2.0 / (ms0 / 3)));

    cudaGraph_t g;
    cudaGraphExec_t ge;
    CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < n; i++)
        if (cuda_fused_launch(s, t, q, k, v, o, sq_pad, skv_pad, ws, st) != 0) {
            fprintf(stderr, "launch failed during capture\n");
            exit(1);
        }
    CUDA_CHECK(cudaStreamEndCapture(st, &g));
    CUDA_CHECK(cudaGraphInstantiate(&ge, g, 0));
    for (int i = 0; i < 3; i++)
        CUDA_CHECK(cudaGraphLaunch(ge, st));
    std::vector<double> times;
    for (int r = 0; r < 15; r++) {
        CUDA_CHECK(cudaEventRecord(e0, st));
        CUDA_CHECK(cudaGraphLaunch(ge, st));
        CUDA_CHECK(cudaEventRecord(e1, st));
        CUDA_CHECK(cudaEventSynchronize(e1));
        float ms;
        CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
        times.push_back(1000.0 * ms / n);
    }
    CUDA_CHECK(cudaGraphExecDestroy(ge));
    CUDA_CHECK(cudaGraphDestroy(g));
    CUDA_CHECK(cudaEventDestroy(e0));
    CUDA_CHECK(cudaEventDestroy(e1));
    return median(times);
}

/* Copy ceiling: 2 GiB device-to-device on st, bytes read + written. */
static void print_copy_ceiling(cudaStream_t st)
{
    size_t nb = (size_t)2 << 30;
    void *a, *b;
    CUDA_CHECK(cudaMalloc(&a, nb));
    CUDA_CHECK(cudaMalloc(&b, nb));
    CUDA_CHECK(cudaMemset(a, 1, nb));
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    std::vector<double> ts;
    for (int r = 0; r < 7; r++) {
        CUDA_CHECK(cudaEventRecord(e0, st));
        CUDA_CHECK(cudaMemcpyAsync(b, a, nb, cudaMemcpyDeviceToDevice, st));
        CUDA_CHECK(cudaEventRecord(e1, st));
        CUDA_CHECK(cudaEventSynchronize(e1));
        float ms;
        CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
        if (r > 1)
            ts.push_back(ms);
    }
    printf("CEILING D2D cudaMemcpy 2 GiB: %.0f GB/s (read + write, median of 5)\n",
           2.0 * nb / median(ts) / 1e6);
    CUDA_CHECK(cudaEventDestroy(e0));
    CUDA_CHECK(cudaEventDestroy(e1));
    CUDA_CHECK(cudaFree(a));
    CUDA_CHECK(cudaFree(b));
}

int main(int argc, char **argv)
{
    const char *filter = argc > 1 ? argv[1] : "";
    const char *tfilter = argc > 2 ? argv[2] : ""; /* substring of the tactic name */
    std::vector<bench_shape> shapes = {
        {{2, 16, 16, 8192, 8192, 128, ATTN_BF16, 0}, "target >= 330 TFLOP/s"},
        {{2, 16, 16, 8192, 8192, 128, ATTN_BF16, 1}, "target >= 300 TFLOP/s"},
        {{1, 8, 1, 968, 968, 256, ATTN_F16, 0}, "target < 42 us"},
        {{16, 32, 8, 1, 4096, 128, ATTN_BF16, 0}, "target < 70 us (floor ~62 us)"},
        {{1, 8, 1, 50, 1018, 256, ATTN_F16, 0}, "DESIGN.md: torch best 13.8 us"},
        {{4, 32, 32, 2048, 2048, 64, ATTN_F16, 1}, "d=64 prefill"},
        {{4, 32, 32, 2048, 2048, 64, ATTN_F16, 0}, "d=64 prefill, non-causal"},
        {{2, 8, 1, 2048, 2048, 256, ATTN_BF16, 1}, "issue 9: within 1.1x of cuDNN"},
        {{2, 16, 16, 4096, 4096, 256, ATTN_BF16, 0}, "d=256 prefill (issue 25: 1.05x cuDNN)"},
        {{2, 16, 16, 4096, 4096, 256, ATTN_BF16, 1}, "d=256 prefill, causal"},
        {{4, 32, 8, 2048, 2048, 128, ATTN_BF16, 1}, "issue 9: within 1.1x of cuDNN"},
        {{1, 32, 8, 16, 4096, 128, ATTN_BF16, 0}, "fold: GQA, short queries"},
        {{1, 32, 8, 16, 4096, 128, ATTN_BF16, 1}, "fold: GQA, short queries, causal"},
        {{8, 8, 1, 64, 2048, 128, ATTN_BF16, 0}, "fold: MQA prefill, small sq"},
        {{8, 8, 1, 64, 2048, 128, ATTN_BF16, 1}, "fold: MQA prefill, small sq, causal"},
    };
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    printf("device %s, %d SMs\n", prop.name, prop.multiProcessorCount);
    cudaStream_t st;
    CUDA_CHECK(cudaStreamCreate(&st));
    print_copy_ceiling(st);
    for (const bench_shape &bs : shapes) {
        const attn_shape *s = &bs.s;
        char key[ATTN_SHAPE_KEY_MAX];
        attn_shape_key(s, key, sizeof key);
        if (!matches(key, filter))
            continue;
        attn_tactic tac[256];
        int nt = cuda_fused_tactics(s, prop.major, prop.minor, tac, 256);
        double flops = attn_shape_flops(s);
        double bytes = 2.0 * (2 * s->b * s->hq * s->sq * s->d + 2 * s->b * s->hkv * s->skv * s->d);
        printf("\n%s  (%s)  %.3g GFLOP, %.3g MB min traffic\n", key, bs.note, flops / 1e9, bytes / 1e6);
        double best = 1e30, best3 = 1e30, bestf = 1e30;
        char bestname[ATTN_TACTIC_STR_MAX] = "", best3name[ATTN_TACTIC_STR_MAX] = "";
        char bestfname[ATTN_TACTIC_STR_MAX] = "";
        for (int pad : {1, 64}) {
            int64_t sq_pad = attn_round_up(s->sq, pad), skv_pad = attn_round_up(s->skv, pad);
            size_t nq = (size_t)(s->b * s->hq * sq_pad * s->d), nkv = (size_t)(s->b * s->hkv * skv_pad * s->d);
            void *q, *k, *v, *o;
            CUDA_CHECK(cudaMalloc(&q, 2 * nq));
            CUDA_CHECK(cudaMalloc(&k, 2 * nkv));
            CUDA_CHECK(cudaMalloc(&v, 2 * nkv));
            CUDA_CHECK(cudaMalloc(&o, 2 * nq));
            int bf = s->dtype == ATTN_BF16;
            fill_kernel<<<1024, 256>>>((uint16_t *)q, nq, 1, bf);
            fill_kernel<<<1024, 256>>>((uint16_t *)k, nkv, 2, bf);
            fill_kernel<<<1024, 256>>>((uint16_t *)v, nkv, 3, bf);
            CUDA_CHECK(cudaDeviceSynchronize());
            for (int i = 0; i < nt; i++) {
                char tn[ATTN_TACTIC_STR_MAX];
                if (tac[i].pad != pad || !matches(attn_tactic_str(&tac[i], tn, sizeof tn), tfilter))
                    continue;
                size_t wsb = cuda_fused_workspace_bytes(s, &tac[i]);
                void *ws = NULL;
                if (wsb)
                    CUDA_CHECK(cudaMalloc(&ws, wsb));
                double us = time_tactic(s, &tac[i], q, k, v, o, sq_pad, skv_pad, ws, st);
                char name[ATTN_TACTIC_STR_MAX];
                attn_tactic_str(&tac[i], name, sizeof name);
                if (us < 0)
                    printf("  %-46s error %d\n", name, (int)us);
                else
                    printf("  %-46s %9.2f us  %6.1f TFLOP/s  %6.0f GB/s\n", name, us, flops / us / 1e6,
                           bytes / us / 1e3);
                if (us > 0 && us < best) {
                    best = us;
                    strcpy(bestname, name);
                }
                if (us > 0 && us < best3 && tac[i].arch == ATTN_ARCH_SM90A && !tac[i].fold) {
                    best3 = us;
                    strcpy(best3name, name);
                }
                if (us > 0 && us < bestf && tac[i].fold) {
                    bestf = us;
                    strcpy(bestfname, name);
                }
                if (ws)
                    CUDA_CHECK(cudaFree(ws));
            }
            CUDA_CHECK(cudaFree(q));
            CUDA_CHECK(cudaFree(k));
            CUDA_CHECK(cudaFree(v));
            CUDA_CHECK(cudaFree(o));
        }
        printf("BEST %s %s %.2f us %.1f TFLOP/s %.0f GB/s\n", key, bestname, best, flops / best / 1e6,
               bytes / best / 1e3);
        if (best3name[0])
            printf("BEST-SM90A %s %s %.2f us %.1f TFLOP/s\n", key, best3name, best3, flops / best3 / 1e6);
        if (bestfname[0])
            printf("BEST-FOLD %s %s %.2f us %.1f TFLOP/s\n", key, bestfname, bestf, flops / bestf / 1e6);
    }
    return 0;
}
