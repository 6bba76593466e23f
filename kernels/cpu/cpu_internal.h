/* cpu_internal.h -- what the CPU backend's files share: the problem a
 * kernel runs on, the kernels and their workspace, the plan, the float64
 * reference and the input fill.
 *
 * Not part of the backend interface (kernels/attn.h is); tests include it to
 * drive the kernels directly, e.g. with a deliberately wrong mask. */
#ifndef CPU_INTERNAL_H
#define CPU_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "../attn.h"
#include "../variant.h"

/* One attention problem on buffers in the storage dtype, possibly padded.
 * q and out are [b, hq, sqp, d], k and v [b, hkv, skvp, d], contiguous.
 * The mask comes from the real lengths only: query row i (0 <= i < sqp)
 * sees key j iff j < skv and, when causal, j <= i + diag, where diag is
 * skv - sq of the real lengths. Rows i >= sq (padding) are computed like
 * any other row; the caller drops them. */
typedef struct attn_call { /* the CPU's call (kernels/variant.h) */
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

/* Scratch a kernel needs beyond the problem's buffers (fp32 tiles, score
 * matrices, split_repeat's copies of K/V per query head). */
typedef struct cpu_work cpu_work;

/* One CPU kernel (cpu_attn.c): its run and the block its workspace holds.
 * The CPU families' descriptors (cpu_variants.c) name them. */
typedef struct cpu_kernel {
    /* every element of pb->out written, unless the cancel hook fired */
    void (*run)(const cpu_problem *pb, cpu_work *w);
    void (*dims)(const cpu_problem *pb, int64_t *rows, int64_t *keys); /* a block */
    int repeat_kv; /* 1: the workspace holds K/V copied per query head */
} cpu_kernel;

extern const cpu_kernel cpu_fused_kernel;        /* FlashAttention-2 over key tiles */
extern const cpu_kernel cpu_split_kernel;        /* S = QK^T, softmax, PV per query head */
extern const cpu_kernel cpu_split_repeat_kernel; /* repeat_kv, then split */
extern const cpu_kernel cpu_folded_kernel;       /* a KV head's g query heads as one GEMM */

/* Bytes cpu_work_alloc would allocate for kernel k on pb, as a double so
 * that absurd shapes do not overflow: callers compare it to a budget. */
double cpu_work_bytes(const cpu_kernel *k, const cpu_problem *pb);

/* Allocate the workspace of kernel k for pb (only its sizes are read).
 * Returns 0 or ATTUNE_ENOMEM (nothing leaked, *out NULL). */
int cpu_work_alloc(const cpu_kernel *k, const cpu_problem *pb, cpu_work **out);
void cpu_work_free(cpu_work *w);

/* Run kernel k on pb with a workspace allocated for it (same kernel, same
 * sizes): every element of pb->out is written. Returns 0, ATTUNE_ECANCELED
 * (the thread's cancel hook fired: kernels/cancel.h), or ATTUNE_EINVAL
 * when w does not belong to k. Single-threaded. */
int cpu_kernel_run(const cpu_kernel *k, const cpu_problem *pb, cpu_work *w);

/* A CPU plan (attn_ops.plan_new, plan): one tactic for the longest
 * lengths it runs at; its family's kernel ops (cpu_variants.c) keep the
 * workspace in w. */
struct attn_plan {
    attn_session *ss;  /* made through a session (plan()), else NULL */
    attn_shape s;      /* planned: the longest lengths a call may have */
    attn_tactic t;
    const attn_variant_desc *fam; /* t's family */
    int flags;         /* ATTN_PLAN_* */
    cpu_problem pb;    /* the last call's problem, on the buffers it ran on */
    void *qp, *op;     /* contiguous (padded) copies of q and out, NULL until needed */
    void *kp, *vp;     /* of k and v */
    size_t q_cap, kv_cap; /* bytes of each */
    cpu_work *w;       /* for the lengths of pb */
};

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
