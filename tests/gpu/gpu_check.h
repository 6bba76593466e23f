/* gpu_check.h -- what the GPU tests share: allocation that exits on
 * failure, a clock, the rows to compare, and the error of an output
 * against the backend's float64 reference (tests/gpu/gpu_check.c).
 *
 * Linked into every tests/gpu/test_*.c executable; plain C over
 * kernels/attn.h, so it builds (and the tests skip) without CUDA. */
#ifndef ATTUNE_TESTS_GPU_CHECK_H
#define ATTUNE_TESTS_GPU_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/attn.h"

/* malloc that exits with status 2 when memory is out (tests only). */
void *gpu_xmalloc(size_t n);

/* Monotonic seconds. */
double gpu_now_s(void);

/* Every row (b, h, i) of s as flat indices; *n the count. Caller frees. */
int64_t *gpu_all_rows(const attn_shape *s, int *n);

/* At most max rows: all when there are no more, else both ends of every
 * head's rows (up to a quarter of max) and a stride through the rest.
 * Caller frees. */
int64_t *gpu_sample_rows(const attn_shape *s, int max, int *n);

typedef struct gpu_errs {
    double rel;            /* ||out - ref|| / ||ref|| over the finite cells */
    double max_abs;
    int64_t nonfinite;     /* cells not finite (poison left, NaN, inf) */
    int64_t nonzero_empty; /* cells of rows that see no key, not exactly 0 */
} gpu_errs;

/* Errors of out against ref, both nrows x d (rows as flat indices). */
gpu_errs gpu_compare(const attn_shape *s, const int64_t *rows, int nrows, const double *out,
                     const double *ref);

/* Bound on the relative L2 error for dtype t and accumulator acc (fused
 * and cudnn tactics, with no acc, take their dtype's acc=f32 bound):
 *   f32           1e-5  plain f32 GEMMs and softmax, no TF32
 *   f16, acc=f32  3e-3  P and O rounded to f16 (2^-11 each, ~4e-4 L2)
 *   f16, acc=f16  1e-2  plus S stored in f16 and f16 accumulation
 *   bf16          2e-2  P and O rounded to bf16 (2^-8 each, ~4e-3 L2) */
/* e4m3's bound on the relative L2 error against the float64 reference of
 * the stored (quantized) inputs: docs/tuning.md "e4m3" says where it comes
 * from (P in FP8 for the second GEMM, and on Hopper O in FP8). */
#define GPU_TOL_E4M3 0.1
double gpu_tol(attn_dtype t, attn_acc acc);

/* Relative error of tactic t's output on shape `run` against the reference
 * of shape `refs`, both sessions seeded with seed (same inputs where the
 * shapes overlap), over gpu_sample_rows(run, 3000); 1e9 when an output
 * cell is not finite, -1 when a step fails. A planted-error check runs t
 * against the reference of a wrong mask and wants a large error. */
double gpu_cross_error(const attn_ops *ops, const attn_shape *run, const attn_shape *refs,
                       const attn_tactic *t, uint64_t seed);

#endif
