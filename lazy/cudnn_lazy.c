/* cudnn_lazy.c -- the cuDNN entry points the cudnn variant calls
 * (kernels/cuda/cuda_cudnn.c), opened on first use instead of linked.
 *
 * Linked, libcudnn.so.9 is a DT_NEEDED of every program and library that
 * holds the CUDA backend (attune, attuned, libattune.so.1,
 * libattune_lookup.so.1): none of them would start on a host without
 * cuDNN, even to run on the CPU (issue 27). Here each function the variant
 * calls is defined with cuDNN's own prototype (from its header, so a
 * mismatch does not compile) and forwards to the library, opened once with
 * dlopen: "libcudnn.so.9" through the loader's search (LD_LIBRARY_PATH,
 * ld.so.cache: the NVIDIA and JetPack packages), then the file CMake found
 * at build time (ATTUNE_CUDNN_PATH: a toolkit or pip wheel directory).
 * RTLD_GLOBAL, as a linked library would be: cuDNN opens its sub-libraries
 * itself. Not found (or an entry point missing): cudnnGetVersion() is 0,
 * every call answers CUDNN_STATUS_NOT_INITIALIZED and the error strings say
 * why, so the variant lists no tactic and plans none; with
 * ATTUNE_CUDA_VERBOSE set the reason is printed once on stderr. A new
 * cuDNN call in cuda_cudnn.c needs its forwarder here (the CUDA build's
 * link fails without it). */
#include <cudnn.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef ATTUNE_CUDNN_PATH
#define ATTUNE_CUDNN_PATH "libcudnn.so.9"
#endif

static pthread_once_t lazy_once = PTHREAD_ONCE_INIT;
static char lazy_why[256]; /* why cuDNN is not there; "" when it is */

static struct {
    size_t (*get_version)(void);
    const char *(*get_error_string)(cudnnStatus_t);
    void (*get_last_error_string)(char *, size_t);
    cudnnStatus_t (*create)(cudnnHandle_t *);
    cudnnStatus_t (*destroy)(cudnnHandle_t);
    cudnnStatus_t (*set_stream)(cudnnHandle_t, cudaStream_t);
    cudnnStatus_t (*create_descriptor)(cudnnBackendDescriptorType_t, cudnnBackendDescriptor_t *);
    cudnnStatus_t (*destroy_descriptor)(cudnnBackendDescriptor_t);
    cudnnStatus_t (*finalize)(cudnnBackendDescriptor_t);
    cudnnStatus_t (*set_attribute)(cudnnBackendDescriptor_t, cudnnBackendAttributeName_t,
                                   cudnnBackendAttributeType_t, int64_t, const void *);
    cudnnStatus_t (*get_attribute)(cudnnBackendDescriptor_t const, cudnnBackendAttributeName_t,
                                   cudnnBackendAttributeType_t, int64_t, int64_t *, void *);
    cudnnStatus_t (*execute)(cudnnHandle_t, cudnnBackendDescriptor_t, cudnnBackendDescriptor_t);
} fn;

/* dlsym into a function pointer (POSIX: the object/function pointer cast
 * goes through the pointer's storage). 0, or -1 with lazy_why set. */
static int sym(void *lib, const char *name, void *slot)
{
    void *p = dlsym(lib, name);
    if (p == NULL) {
        snprintf(lazy_why, sizeof lazy_why, "cuDNN lacks %s", name);
        return -1;
    }
    memcpy(slot, &p, sizeof p);
    return 0;
}

static void lazy_load(void)
{
    static const char *const names[] = {"libcudnn.so.9", ATTUNE_CUDNN_PATH};
    void *lib = NULL;
    for (size_t i = 0; i < sizeof names / sizeof names[0] && lib == NULL; i++)
        lib = dlopen(names[i], RTLD_NOW | RTLD_GLOBAL);
    if (lib == NULL) {
        const char *e = dlerror();
        snprintf(lazy_why, sizeof lazy_why, "cuDNN not loaded (libcudnn.so.9, %s): %s",
                 ATTUNE_CUDNN_PATH, e ? e : "not found");
    } else if (sym(lib, "cudnnGetVersion", &fn.get_version) != 0 ||
               sym(lib, "cudnnGetErrorString", &fn.get_error_string) != 0 ||
               sym(lib, "cudnnGetLastErrorString", &fn.get_last_error_string) != 0 ||
               sym(lib, "cudnnCreate", &fn.create) != 0 ||
               sym(lib, "cudnnDestroy", &fn.destroy) != 0 ||
               sym(lib, "cudnnSetStream", &fn.set_stream) != 0 ||
               sym(lib, "cudnnBackendCreateDescriptor", &fn.create_descriptor) != 0 ||
               sym(lib, "cudnnBackendDestroyDescriptor", &fn.destroy_descriptor) != 0 ||
               sym(lib, "cudnnBackendFinalize", &fn.finalize) != 0 ||
               sym(lib, "cudnnBackendSetAttribute", &fn.set_attribute) != 0 ||
               sym(lib, "cudnnBackendGetAttribute", &fn.get_attribute) != 0 ||
               sym(lib, "cudnnBackendExecute", &fn.execute) != 0) {
        memset(&fn, 0, sizeof fn); /* all or nothing */
    }
    const char *v = getenv("ATTUNE_CUDA_VERBOSE");
    if (lazy_why[0] && v != NULL && *v != 0 && strcmp(v, "0") != 0)
        fprintf(stderr, "attune: cudnn variant off: %s\n", lazy_why);
}

/* 1 when cuDNN's entry points are there. */
static int lazy_ok(void)
{
    pthread_once(&lazy_once, lazy_load);
    return fn.get_version != NULL;
}

size_t CUDNNWINAPI cudnnGetVersion(void)
{
    return lazy_ok() ? fn.get_version() : 0;
}

const char *CUDNNWINAPI cudnnGetErrorString(cudnnStatus_t status)
{
    return lazy_ok() ? fn.get_error_string(status) : lazy_why;
}

void CUDNNWINAPI cudnnGetLastErrorString(char *message, size_t max_size)
{
    if (lazy_ok())
        fn.get_last_error_string(message, max_size);
    else if (message != NULL && max_size > 0)
        snprintf(message, max_size, "%s", lazy_why);
}

cudnnStatus_t CUDNNWINAPI cudnnCreate(cudnnHandle_t *handle)
{
    return lazy_ok() ? fn.create(handle) : CUDNN_STATUS_NOT_INITIALIZED;
}

cudnnStatus_t CUDNNWINAPI cudnnDestroy(cudnnHandle_t handle)
{
    return lazy_ok() ? fn.destroy(handle) : CUDNN_STATUS_NOT_INITIALIZED;
}

cudnnStatus_t CUDNNWINAPI cudnnSetStream(cudnnHandle_t handle, cudaStream_t streamId)
{
    return lazy_ok() ? fn.set_stream(handle, streamId) : CUDNN_STATUS_NOT_INITIALIZED;
}

cudnnStatus_t CUDNNWINAPI cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t descriptorType,
                                                       cudnnBackendDescriptor_t *descriptor)
{
    return lazy_ok() ? fn.create_descriptor(descriptorType, descriptor)
                     : CUDNN_STATUS_NOT_INITIALIZED;
}

cudnnStatus_t CUDNNWINAPI cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t descriptor)
{
    return lazy_ok() ? fn.destroy_descriptor(descriptor) : CUDNN_STATUS_NOT_INITIALIZED;
}

cudnnStatus_t CUDNNWINAPI cudnnBackendFinalize(cudnnBackendDescriptor_t descriptor)
{
    return lazy_ok() ? fn.finalize(descriptor) : CUDNN_STATUS_NOT_INITIALIZED;
}

cudnnStatus_t CUDNNWINAPI cudnnBackendSetAttribute(cudnnBackendDescriptor_t descriptor,
                                                   cudnnBackendAttributeName_t attributeName,
                                                   cudnnBackendAttributeType_t attributeType,
                                                   int64_t elementCount,
                                                   const void *arrayOfElements)
{
    return lazy_ok() ? fn.set_attribute(descriptor, attributeName, attributeType, elementCount,
                                        arrayOfElements)
                     : CUDNN_STATUS_NOT_INITIALIZED;
}

cudnnStatus_t CUDNNWINAPI cudnnBackendGetAttribute(cudnnBackendDescriptor_t const descriptor,
                                                   cudnnBackendAttributeName_t attributeName,
                                                   cudnnBackendAttributeType_t attributeType,
                                                   int64_t requestedElementCount,
                                                   int64_t *elementCount, void *arrayOfElements)
{
    return lazy_ok() ? fn.get_attribute(descriptor, attributeName, attributeType,
                                        requestedElementCount, elementCount, arrayOfElements)
                     : CUDNN_STATUS_NOT_INITIALIZED;
}

cudnnStatus_t CUDNNWINAPI cudnnBackendExecute(cudnnHandle_t handle,
                                              cudnnBackendDescriptor_t executionPlan,
                                              cudnnBackendDescriptor_t variantPack)
{
    return lazy_ok() ? fn.execute(handle, executionPlan, variantPack)
                     : CUDNN_STATUS_NOT_INITIALIZED;
}
