/* cuda_blas.h -- the C view of the CUDA backend's cuBLAS loader
 * (cuda_blas.cu), for tests: the backend itself uses cuda_internal.cuh. */
#ifndef ATTUNE_CUDA_BLAS_H
#define ATTUNE_CUDA_BLAS_H

#ifdef __cplusplus
extern "C" {
#endif

/* Open cuBLAS as the backend does on first use, and read its version.
 * Needs no GPU. Returns 0, or ATTUNE_EBLAS when it cannot be opened. */
int cuda_blas_version(int *major, int *minor, int *patch);

#ifdef __cplusplus
}
#endif

#endif
