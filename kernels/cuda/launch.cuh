/* launch.cuh -- kernel launches that answer for themselves.
 *
 * `kern<<<grid, block, smem, stream>>>(args)` reports a bad launch only
 * through cudaGetLastError(), which also returns (and clears) an error the
 * caller left pending on its thread: a runtime that called libattune after
 * a failed call of its own saw attune's run fail with that error. cu_launch
 * returns the launch's own status (cudaLaunchKernelEx); cu_ok tells a
 * call's status and, when it failed, clears the thread's last error (the
 * failure is reported by attune's return code; launch and attribute
 * errors are not sticky). Not installed, not included by C code. */
#ifndef ATTUNE_CUDA_LAUNCH_CUH
#define ATTUNE_CUDA_LAUNCH_CUH

#include <cuda_runtime.h>

#include <utility>

/* True when e is cudaSuccess; else the thread's last error is cleared. */
static inline bool cu_ok(cudaError_t e)
{
    if (e != cudaSuccess)
        (void)cudaGetLastError();
    return e == cudaSuccess;
}

/* kern<<<grid, block, smem, stream>>>(args...), its own status returned
 * (arguments converted to the kernel's parameter types, as <<<>>> does);
 * a failed launch leaves no error pending (cu_ok inside: callers compare
 * with cudaSuccess). */
template <typename... KArgs, typename... Args>
static inline cudaError_t cu_launch(void (*kern)(KArgs...), dim3 grid, dim3 block, size_t smem,
                                    cudaStream_t stream, Args &&...args)
{
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    const cudaError_t e = cudaLaunchKernelEx(&cfg, kern, std::forward<Args>(args)...);
    cu_ok(e);
    return e;
}

#endif
