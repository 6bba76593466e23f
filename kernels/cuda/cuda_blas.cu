/* cuda_blas.cu -- cuBLAS, opened on first use (dlopen) instead of linked.
 *
 * A binary linked against libcublas runs libcublasLt's static initialisers
 * before main(): about 1 s of CPU, 3 s on a loaded 2-core VM, paid by every
 * start of `attune` and `attuned` whether it touches a GPU or not
 * (`attune --help`, `attune results`, each CLI test). The backend calls
 * cuBLAS only through cuda_blas (cuda_internal.cuh), filled here the first
 * time a CUDA device is described or a session is opened; a process that
 * never gets that far never loads the library. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "cuda_blas.h"
#include "cuda_internal.cuh"

/* The exported name of a cuBLAS entry point: cublas_v2.h maps several
 * names to their _v2 symbols with macros, so expand before quoting. */
#define SYM_STR2(x) #x
#define SYM_STR(x) SYM_STR2(x)

/* The library of the headers compiled against: libcublas.so.13 for 13.x.
 * ATTUNE_CUBLAS_PATH (CMakeLists.txt) is the same file in the toolkit. */
#define CUBLAS_SONAME "libcublas.so." SYM_STR(CUBLAS_VER_MAJOR)

cuda_blas_api cuda_blas;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int open_rc = ATTUNE_EBLAS;

/* Look sym up into *fn; 0 or -1 (noted). */
template <typename F> static int bind(void *lib, F *fn, const char *sym)
{
    *fn = (F)dlsym(lib, sym);
    if (*fn == NULL) {
        cuda_note("%s: no symbol %s", CUBLAS_SONAME, sym);
        return -1;
    }
    return 0;
}

static void open_once(void)
{
    /* The soname first (LD_LIBRARY_PATH, the binary's run path, the
     * loader's cache: where a linked libcublas would have come from), then
     * the toolkit this was built with. */
    void *lib = dlopen(CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
#ifdef ATTUNE_CUBLAS_PATH
    if (lib == NULL)
        lib = dlopen(ATTUNE_CUBLAS_PATH, RTLD_NOW | RTLD_LOCAL);
#endif
    if (lib == NULL) {
        cuda_note("cannot open cuBLAS: %s", dlerror());
        return;
    }
    cuda_blas_api b;
    int bad = 0;
    bad |= bind(lib, &b.create, SYM_STR(cublasCreate));
    bad |= bind(lib, &b.destroy, SYM_STR(cublasDestroy));
    bad |= bind(lib, &b.set_stream, SYM_STR(cublasSetStream));
    bad |= bind(lib, &b.set_workspace, SYM_STR(cublasSetWorkspace));
    bad |= bind(lib, &b.set_math_mode, SYM_STR(cublasSetMathMode));
    bad |= bind(lib, &b.get_property, SYM_STR(cublasGetProperty));
    bad |= bind(lib, &b.gemm_strided_batched_ex, SYM_STR(cublasGemmStridedBatchedEx));
    if (bad) {
        dlclose(lib);
        return;
    }
    cuda_blas = b; /* the library stays open for the life of the process */
    open_rc = 0;
}

int cuda_blas_open(void)
{
    pthread_once(&once, open_once);
    return open_rc;
}

int cuda_blas_version(int *major, int *minor, int *patch)
{
    if (cuda_blas_open() != 0 ||
        cuda_blas.get_property(MAJOR_VERSION, major) != CUBLAS_STATUS_SUCCESS ||
        cuda_blas.get_property(MINOR_VERSION, minor) != CUBLAS_STATUS_SUCCESS ||
        cuda_blas.get_property(PATCH_LEVEL, patch) != CUBLAS_STATUS_SUCCESS)
        return ATTUNE_EBLAS;
    return 0;
}
