/* cpu_internal.h -- what the CPU backend's files share: the problem a
 * kernel runs on, its workspace, the float64 reference and the input fill.
 *
 * Not part of the backend interface (kernels/attn.h is); tests include it to
 * drive the kernels directly, e.g. with a deliberately wrong mask. */
#ifndef CPU_INTERNAL_H
#define CPU_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "../attn.h"

/* One attention problem on buffers in the storage dtype, possibly padded.
 * q and out are [b, hq, sqp, d], k and v [b, hkv, skvp, d], contiguous.
 * The mask comes from the real lengths only: query row i (0 <= i < sqp)
 * sees key j iff j < skv and, when causal, j <= i + diag, where diag is
 * skv - sq of the real lengths. Rows i >= sq (padding) are computed like
 * any other row; the caller drops them. */
typedef struct cpu_problem {
    attn_dtype dtype;
    int64_t b, hq, hkv, d;
    int64_t sq, skv;   /* real lengths */
    int64_t sqp, skvp; /* buffer lengths: sq, skv rounded up to the pad */
    int64_t diag;      /* skv - sq (real lengths) */
    int causal;
    const void *q, *k, *v;
    void *out;
} cpu_problem;

/* Keys visible to query row i of pb (0 when none). */
static inline int64_t cpu_visible(const cpu_problem *pb, int64_t i)
{
    if (!pb->causal)
        return pb->skv;
    int64_t n = i + pb->diag + 1;
    return n < 0 ? 0 : (n > pb->skv ? pb->skv : n);
}

/* Scratch a variant needs beyond the problem's buffers (fp32 tiles, score
 * matrices, split_repeat's copies of K/V per query head). */
typedef struct cpu_work cpu_work;

/* Bytes cpu_work_alloc would allocate for variant v on pb, as a double so
 * that absurd shapes do not overflow: callers compare it to a budget. */
double cpu_work_bytes(attn_variant v, const cpu_problem *pb);

/* Allocate the workspace of variant v for pb (only its sizes are read).
 * Returns 0, ATTUNE_ENOMEM (nothing leaked, *out NULL) or ATTUNE_EUNSUPP
 * for a variant the CPU does not implement (fused_splitkv). */
int cpu_work_alloc(attn_variant v, const cpu_problem *pb, cpu_work **out);
void cpu_work_free(cpu_work *w);

/* Run variant v on pb with a workspace allocated for it (same variant,
 * same sizes): every element of pb->out is written. Returns 0, or
 * ATTUNE_EINVAL when w does not belong to v. Single-threaded. */
int cpu_attn_run(attn_variant v, const cpu_problem *pb, cpu_work *w);

/* float64 attention of the given rows of shape s (flat row index
 * r = (bi * hq + h) * sq + i) from unpadded q, k, v in s->dtype, read as
 * stored; ref[n * d + c] for rows[n]. Returns 0, ATTUNE_EINVAL for a row
 * out of range, ATTUNE_ENOMEM. */
int cpu_reference(const attn_shape *s, const void *q, const void *k, const void *v,
                  const int64_t *rows, int nrows, double *ref);

/* Fill n elements of buf (dtype t) with standard-normal values drawn from
 * the SplitMix64 stream *state (Box-Muller), redrawing any value that is
 * zero once stored, so the buffer holds no zeros. Advances *state.
 * Returns 0, or ATTUNE_ECANCELED when the thread's cancel hook fired
 * (kernels/cancel.h; polled every 2^20 elements: a long prefill's q is
 * tens of millions, seconds to draw) with buf partly filled. */
int cpu_fill_normal(void *buf, attn_dtype t, size_t n, uint64_t *state);

/* Bytes of memory the CPU backend lets one session and a plan use
 * together: half the physical memory (8 GiB when that is unknown). */
double cpu_mem_budget(void);

#endif
