/* cuda_device.cu -- CUDA device identity and software stack, and the
 * backend's error mapping.
 *
 * Identity: the UUID as nvidia-smi prints it ("GPU-8-4-4-4-12" hex), name,
 * compute capability, SMs, memory, peak clocks. Stack: driver (the kernel
 * module's version when readable, e.g. "580.159.03", with the CUDA API
 * version it offers), CUDA runtime, cuBLAS (+ cuDNN when the cudnn variant
 * is built in), ATTUNE_VERSION and
 * ATTUNE_KERNELS_HASH (compile definitions from CMake).
 *
 * A host without a GPU or without a driver has 0 devices: every query
 * fails quietly (no print, no error code out of device_count). */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.cuh"
#include "../../common/power.h"
#ifdef ATTUNE_HAVE_CUDNN
#include "cuda_cudnn.h"
#endif

#ifndef ATTUNE_VERSION
#define ATTUNE_VERSION "0.0.0"
#endif
#ifndef ATTUNE_KERNELS_HASH
#define ATTUNE_KERNELS_HASH "unknown"
#endif

/* ---- errors */

static int verbose(void)
{
    static int v = -1; /* racy first read is harmless: same value */
    if (v < 0) {
        const char *e = getenv("ATTUNE_CUDA_VERBOSE");
        v = (e != NULL && *e != '\0' && strcmp(e, "0") != 0);
    }
    return v;
}

void cuda_note(const char *fmt, ...)
{
    if (!verbose())
        return;
    va_list ap;
    va_start(ap, fmt);
    fputs("attune-cuda: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int cuda_err(cudaError_t e, const char *what, const char *file, int line)
{
    cuda_note("%s:%d: %s: %s", file, line, what, cudaGetErrorString(e));
    if (e == cudaErrorMemoryAllocation) {
        cudaGetLastError(); /* not sticky: clear it so later calls work */
        return ATTUNE_ENOMEM;
    }
    return ATTUNE_EGPU;
}

int cuda_blas_err(cublasStatus_t e, const char *what, const char *file, int line)
{
    cuda_note("%s:%d: %s: cuBLAS status %d", file, line, what, (int)e);
    if (e == CUBLAS_STATUS_ALLOC_FAILED)
        return ATTUNE_ENOMEM;
    if (e == CUBLAS_STATUS_NOT_SUPPORTED || e == CUBLAS_STATUS_ARCH_MISMATCH)
        return ATTUNE_EUNSUPP;
    return ATTUNE_EBLAS;
}

/* ---- identity */

int cuda_device_count(void)
{
    int n = 0;
    /* cudaErrorNoDevice / InsufficientDriver / a missing libcuda all land
     * here: no GPU for us, not an error. */
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n < 0 ? 0 : n;
}

/* The version in the first line of /proc/driver/nvidia/version:
 * "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.03  ..." or
 * "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04 ...":
 * the first token after "Kernel Module" made of digits and dots with at
 * least one dot. Returns 0 and fills buf, or -1. */
static int parse_nvrm_line(const char *line, char *buf, size_t len)
{
    const char *p = strstr(line, "Kernel Module");
    if (p == NULL)
        return -1;
    p += strlen("Kernel Module");
    for (;;) {
        p += strspn(p, " \t");
        size_t n = strcspn(p, " \t\n");
        if (n == 0)
            return -1;
        if (strspn(p, "0123456789.") == n && p[0] != '.' && memchr(p, '.', n) != NULL &&
            n < len) {
            memcpy(buf, p, n);
            buf[n] = '\0';
            return 0;
        }
        p += n;
    }
}

/* The kernel module's version ("580.159.03"), from /proc when the driver
 * exposes it, else from NVML loaded at run time (no link dependency).
 * Returns 0 and fills buf, or -1. */
static int driver_module_version(char *buf, size_t len)
{
    FILE *f = fopen("/proc/driver/nvidia/version", "r");
    if (f != NULL) {
        char line[512];
        int found = fgets(line, sizeof line, f) != NULL && parse_nvrm_line(line, buf, len) == 0;
        fclose(f);
        if (found)
            return 0;
    }
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL)
        return -1;
    typedef int (*init_fn)(void);
    typedef int (*ver_fn)(char *, unsigned);
    init_fn init = (init_fn)dlsym(h, "nvmlInit_v2");
    init_fn shut = (init_fn)dlsym(h, "nvmlShutdown");
    ver_fn ver = (ver_fn)dlsym(h, "nvmlSystemGetDriverVersion");
    int rc = -1;
    if (init != NULL && ver != NULL && init() == 0) {
        if (ver(buf, (unsigned)len) == 0)
            rc = 0;
        if (shut != NULL)
            shut();
    }
    dlclose(h);
    return rc;
}

static void version_str(char *buf, size_t len, int v)
{
    /* CUDA encodes 13.0 as 13000 */
    snprintf(buf, len, "%d.%d", v / 1000, (v % 1000) / 10);
}

int cuda_device_info(int index, attn_device_info *info, attn_stack *stack)
{
    int rc = 0;
    cudaDeviceProp prop;
    int clk = 0, mclk = 0, drv = 0, rt = 0;
    int bmaj = 0, bmin = 0, bpat = 0;
    char api[16], mod[24], uuid[64];
    const unsigned char *u;

    if (index < 0 || index >= cuda_device_count())
        return ATTUNE_ENODEV;
    CU_TRY(cudaGetDeviceProperties(&prop, index));
    /* Peak clocks in kHz; cudaDeviceProp lost these fields in CUDA 13. */
    if (cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, index) != cudaSuccess)
        clk = 0;
    if (cudaDeviceGetAttribute(&mclk, cudaDevAttrMemoryClockRate, index) != cudaSuccess)
        mclk = 0;
    cudaGetLastError();

    u = (const unsigned char *)prop.uuid.bytes;
    snprintf(uuid, sizeof uuid,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
             "%02x%02x%02x%02x%02x%02x",
             u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
             u[13], u[14], u[15]);
    if (info != NULL) {
        memset(info, 0, sizeof *info);
        snprintf(info->id, sizeof info->id, "%s", uuid);
        snprintf(info->name, sizeof info->name, "%.127s", prop.name); /* name[128] */
        snprintf(info->kind, sizeof info->kind, "cuda");
        info->index = index;
        info->cc_major = prop.major;
        info->cc_minor = prop.minor;
        info->sm_count = prop.multiProcessorCount;
        info->memory_mb = (int64_t)(prop.totalGlobalMem >> 20);
        info->clock_mhz = clk / 1000;
        info->mem_clock_mhz = mclk / 1000;
    }
    if (stack != NULL) {
        memset(stack, 0, sizeof *stack);
        CU_TRY(cudaDriverGetVersion(&drv));
        CU_TRY(cudaRuntimeGetVersion(&rt));
        version_str(api, sizeof api, drv);
        /* The module version pins the driver build; the API version alone
         * would call two different 13.0 drivers the same stack. */
        if (driver_module_version(mod, sizeof mod) == 0)
            snprintf(stack->driver, sizeof stack->driver, "%.16s/cuda-%.8s", mod, api);
        else
            snprintf(stack->driver, sizeof stack->driver, "cuda-%.8s", api);
        version_str(stack->runtime, sizeof stack->runtime, rt);
        if (cuda_blas_open() != 0 ||
            cuda_blas.get_property(MAJOR_VERSION, &bmaj) != CUBLAS_STATUS_SUCCESS ||
            cuda_blas.get_property(MINOR_VERSION, &bmin) != CUBLAS_STATUS_SUCCESS ||
            cuda_blas.get_property(PATCH_LEVEL, &bpat) != CUBLAS_STATUS_SUCCESS)
            return ATTUNE_EBLAS;
        snprintf(stack->blas, sizeof stack->blas, "cublas-%d.%d.%d", bmaj, bmin, bpat);
#ifdef ATTUNE_HAVE_CUDNN
        {
            /* The vendor libraries field carries cuDNN too ("cublas-13.1.0
             * +cudnn-9.14.0"): the version loaded at run time, so results
             * from another cuDNN are another stack (stale), with no schema
             * change. */
            char dnn[24];
            size_t used = strlen(stack->blas);
            cuda_cudnn_version(dnn, sizeof dnn);
            snprintf(stack->blas + used, sizeof stack->blas - used, "+%s", dnn);
        }
#endif
        snprintf(stack->attune, sizeof stack->attune, "%s", ATTUNE_VERSION);
        snprintf(stack->kernels, sizeof stack->kernels, "%s", ATTUNE_KERNELS_HASH);
        /* The power mode the results will belong to (common/power.h):
         * nvpmodel on a Jetson, the power limit through NVML elsewhere. */
        attn_device_info self;
        memset(&self, 0, sizeof self);
        snprintf(self.kind, sizeof self.kind, "cuda");
        snprintf(self.id, sizeof self.id, "%s", uuid);
        attn_power pw;
        attn_power_read(&self, &pw);
        attn_power_key(&pw, stack->power, sizeof stack->power);
        attn_stack_finish(stack);
    }
    return 0;
fail:
    return rc;
}
