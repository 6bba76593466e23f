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
 * q and out are [b, hq, sqp, d], k and v [b, hkv, skvp, d], contiguous;
 * out is in attn_dtype_out(dtype) (bf16 for e4m3 inputs).
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
    /* e4m3: the descale factors of q, k and v, applied as each element is
     * loaded (stored value x descale = the value meant); ignored for the
     * other dtypes. Values, not pointers: a plan reads attn_io.descale once
     * per call, as a GPU kernel reads its descale at launch. */
    float descale[3];
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
    size_t q_cap, o_cap, kv_cap; /* bytes of qp, op, and each of kp and vp (out
                                    is wider than q for e4m3) */
    cpu_work *w;       /* for the lengths of pb */
};

/* float64 attention of the given rows of shape s (flat row index
 * r = (bi * hq + h) * sq + i) from unpadded q, k, v in s->dtype, read as
 * stored; ref[n * d + c] for rows[n]. Returns 0, ATTUNE_EINVAL for a row
 * out of range, ATTUNE_ENOMEM. */
int cpu_reference(const attn_shape *s, const void *q, const void *k, const void *v,
                  const int64_t *rows, int nrows, double *ref);

/* cpu_reference with per-tensor descale factors: element x of q, k, v
 * means x * descale[0], [1], [2] (descale NULL: 1 each). The factors are
 * taken out of the sums (q.k scaled by descale[0] * descale[1] with the
 * softmax scale, the output by descale[2]), so in float64 the result is
 * that of the dequantized inputs to within a few ulps. What an e4m3
 * session's reference is (attn_ops.reference). */
int cpu_reference_descaled(const attn_shape *s, const void *q, const void *k, const void *v,
                           const float *descale, const int64_t *rows, int nrows, double *ref);

/* Fill n elements of buf (dtype t) with standard-normal values drawn from
 * the SplitMix64 stream *state (Box-Muller), redrawing any value that is
 * zero once stored, so the buffer holds no zeros. Advances *state.
 * Returns 0, or ATTUNE_ECANCELED when the thread's cancel hook fired
 * (kernels/cancel.h; polled every 2^20 elements: a long prefill's q is
 * tens of millions, seconds to draw) with buf partly filled. */
int cpu_fill_normal(void *buf, attn_dtype t, size_t n, uint64_t *state);

/* The e4m3 form of n bf16 source values (attn_ops.reference_source): the
 * descale amax / 448 of the tensor (float; 1 when every value is 0) into
 * *descale, and dst[i] = e4m3(src[i] / descale) (float division, round
 * to nearest even, saturating). Values below descale * 2^-10 become 0:
 * that is FP8's own cost, part of what reference_source measures. */
void cpu_quantize_e4m3(const uint16_t *src, size_t n, uint8_t *dst, float *descale);

/* Bytes of memory the CPU backend lets one session and a plan use
 * together: half the physical memory (8 GiB when that is unknown). */
double cpu_mem_budget(void);

#endif
