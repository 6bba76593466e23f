/* mbar_timeout.cu -- the bounded mbarrier wait (cuda_fused_common.cuh):
 * a wait whose phase completes returns; a wait on a barrier nobody
 * arrives at ends the kernel with an illegal-address fault after about
 * FUSED_MBAR_TIMEOUT_NS (4 s) instead of hanging the process, and the
 * backend then says the context is lost (attn_ops.health), which is how
 * the tuner stops (tuner.c run_commit). Exit 77 (skipped) without a GPU
 * of compute capability 9.0 or newer; built for sm_90 only. */
#include <stdio.h>
#include <time.h>

#include "kernels/attn.h"
#include "kernels/cuda/cuda_fused_common.cuh"

/* One thread: a fresh barrier of count 1, arrived at first or not, then
 * the wait on its phase 0; *done = 1 after it. */
__global__ void wait_kernel(int arrive_first, int *done)
{
    __shared__ __align__(8) uint64_t bar;
    const uint32_t b = smem_u32(&bar);
    mbar_init(b, 1);
#ifdef FUSED_SM90_PTX
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
    if (arrive_first)
        mbar_arrive(b);
    mbar_wait(b, 0);
    *done = 1;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int failures;
#define EXPECT(cond, ...)                                                                      \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            failures++;                                                                        \
            fprintf(stderr, "%s:%d: %s failed: ", __FILE__, __LINE__, #cond);                  \
            fprintf(stderr, __VA_ARGS__);                                                      \
            fputc('\n', stderr);                                                               \
        }                                                                                      \
    } while (0)

int main(void)
{
    attn_device dev;
    char err[ATTUNE_ERRLEN];
    int major = 0;
    if (attn_device_resolve("0", &dev, err, sizeof err) != 0 || strcmp(dev.info.kind, "cuda") != 0 ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev.index) != cudaSuccess ||
        major < 9) {
        printf("skip: no CUDA device of compute capability 9.0 or newer\n");
        return 77;
    }
    cudaSetDevice(dev.index);
    int *done = NULL, got = 0;
    EXPECT(cudaMalloc(&done, sizeof *done) == cudaSuccess, "cudaMalloc");
    EXPECT(cudaMemset(done, 0, sizeof *done) == cudaSuccess, "cudaMemset");

    /* the phase completes: the wait returns at once */
    wait_kernel<<<1, 1>>>(1, done);
    cudaError_t e = cudaDeviceSynchronize();
    EXPECT(e == cudaSuccess, "%s", cudaGetErrorString(e));
    EXPECT(cudaMemcpy(&got, done, sizeof got, cudaMemcpyDeviceToHost) == cudaSuccess, "copy");
    EXPECT(got == 1, "done %d", got);
    EXPECT(dev.ops->health(dev.index) == 0, "health before the fault");

    /* nobody arrives: a fault after the bound, not a hang */
    double t0 = now_s();
    wait_kernel<<<1, 1>>>(0, done);
    e = cudaDeviceSynchronize();
    double dt = now_s() - t0;
    printf("the endless wait ended after %.2f s: %s\n", dt, cudaGetErrorString(e));
    EXPECT(e == cudaErrorIllegalAddress, "%s", cudaGetErrorString(e));
    EXPECT(dt > 0.9 * FUSED_MBAR_TIMEOUT_NS * 1e-9 && dt < 60, "%.2f s", dt);
    EXPECT(dev.ops->health(dev.index) == ATTUNE_EGPULOST, "health after the fault");
    printf("%d failed\n", failures);
    return failures ? 1 : 0;
}
