/* test_cuda_blas.c -- the CUDA backend opens cuBLAS on first use, not at
 * start (kernels/cuda/cuda_blas.cu), and finds every entry point it calls.
 * Needs the CUDA backend built, not a GPU; skipped (77) without it. */
#include "test.h"

#ifdef ATTUNE_HAVE_CUDA
#include <dlfcn.h>

#include "kernels/attn.h"
#include "kernels/cuda/cuda_blas.h"

static void cublas_should_load_on_first_use_only(void)
{
    char soname[32];
    int cuda_major = atoi(ATTUNE_CUDA_VERSION);
    snprintf(soname, sizeof soname, "libcublas.so.%d", cuda_major);
    /* RTLD_NOLOAD: a handle only if the library is already in the process */
    void *before = dlopen(soname, RTLD_NOW | RTLD_NOLOAD);
    CHECK_MSG(before == NULL, "%s loaded before the backend asked for it", soname);
    /* enumerating devices opens nothing when there is no GPU (describing a
     * GPU reads cuBLAS's version for its stack) */
    attn_device devs[8];
    int n = attn_devices(devs, 8);
    CHECK(n >= 1);
    if (n == 1)
        CHECK(dlopen(soname, RTLD_NOW | RTLD_NOLOAD) == NULL);

    int major = -1, minor = -1, patch = -1;
    CHECK_EQ_INT(cuda_blas_version(&major, &minor, &patch), 0);
    CHECK_EQ_INT(major, cuda_major); /* cuBLAS follows the toolkit's major */
    CHECK(minor >= 0 && patch >= 0);
    void *after = dlopen(soname, RTLD_NOW | RTLD_NOLOAD);
    CHECK_MSG(after != NULL, "%s not loaded after cuda_blas_version", soname);
    if (after != NULL)
        dlclose(after);
    /* a second call reuses the first result */
    int major2 = -1, minor2 = -1, patch2 = -1;
    CHECK_EQ_INT(cuda_blas_version(&major2, &minor2, &patch2), 0);
    CHECK(major2 == major && minor2 == minor && patch2 == patch);
}
#endif

int main(void)
{
#ifdef ATTUNE_HAVE_CUDA
    RUN(cublas_should_load_on_first_use_only);
    return test_summary();
#else
    fprintf(stderr, "skipped: built without the CUDA backend\n");
    return TEST_SKIP_CODE;
#endif
}
