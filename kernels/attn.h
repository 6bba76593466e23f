/* attn.h -- caller buffers, the backend interface and the device registry.
 *
 * A backend (kernels/cpu/, kernels/cuda/) fills an attn_ops table;
 * everything above the kernels (tuner, store, daemon, CLI) talks to devices
 * only through it. The words it speaks (shapes and dtypes, tactics, device
 * identity and stacks: DESIGN.md "Words") live in the lowest layer,
 * common/shape.h, common/tactic.h and common/device_id.h, included here so
 * every file of the kernels has them; a file above the kernels that needs
 * only the words includes those (docs/design.md "Layers").
 *
 * Data layout: q [b, hq, sq, d], k and v [b, hkv, skv, d], out [b, hq, sq, d],
 * contiguous, in the shape's storage dtype (out: attn_dtype_out of it). Query head
 * h reads KV head h / (hq / hkv). Scale 1/sqrt(d). Causal: query i may see key j
 * iff j <= i + (skv - sq), from the real lengths; a row that sees no key is 0. */
#ifndef ATTN_H
#define ATTN_H

#include <stddef.h>
#include <stdint.h>

#include "../common/attune_err.h"
#include "../common/device_id.h"
#include "../common/shape.h"
#include "../common/tactic.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- caller buffers
 *
 * A tensor view: element (bi, h, i, c) of q, k, v or out lies at
 * data[bi * sb + h * sh + i * ss + c] (strides in elements, the head dim
 * contiguous), so both [b, h, s, d] and [b, s, h, d] views of one buffer
 * run without a copy where the kernel reads strides (docs/libattune.md
 * says which do). Strides are >= 0; a stride may be anything, but views
 * whose rows overlap give undefined results. */
typedef struct attn_tensor {
    void *data;
    int64_t sb, sh, ss;
} attn_tensor;

/* One call's buffers and lengths. sq and skv are this call's lengths:
 * 1 <= sq <= the planned sq and 1 <= skv <= the planned skv (decode with a
 * growing KV cache runs one plan at every length); 0 means the planned
 * length. The causal mask comes from these lengths (bottom-right). */
typedef struct attn_io {
    attn_tensor q, k, v, o;
    int64_t sq, skv;
    /* e4m3: the descale factors of q, k and v, one float each, in memory
     * the backend reads (device memory on CUDA, read when the call runs:
     * a captured graph reads the values current at replay). NULL: 1.
     * Ignored for other dtypes. */
    const float *descale[3];
} attn_io;

/* The contiguous [b, h, s, d] views of shape s over q, k, v and o (lengths
 * s->sq and s->skv). */
void attn_io_contiguous(const attn_shape *s, const void *q, const void *k, const void *v,
                        void *o, attn_io *io);

/* 0 when io can run on a plan of shape s: pointers set, strides >= 0,
 * lengths within the plan's; ATTUNE_EINVAL with a message otherwise.
 * *run gets s with io's lengths (the shape of this call). */
int attn_io_check(const attn_shape *s, const attn_io *io, attn_shape *run, char *err,
                  size_t errlen);

/* 1 when view t of nheads heads of rows x d elements is exactly the
 * contiguous [b, heads, rows, d] layout. */
static inline int attn_tensor_contiguous(const attn_tensor *t, int64_t heads, int64_t rows,
                                         int64_t d)
{
    return t->ss == d && t->sh == rows * d && t->sb == heads * rows * d;
}

/* Flags of attn_ops.plan_new. */
enum {
    /* The caller promises contiguous [b, h, s, d] buffers of the call's
     * lengths (the tuner's sessions): no layout-conversion buffers are
     * made for tactics whose kernel reads only that layout, and a call with
     * other strides is refused (ATTUNE_EINVAL). */
    ATTN_PLAN_CONTIGUOUS = 1,
};

/* ---- the backend interface
 *
 * A plan is one tactic prepared for one shape on one device (workspace,
 * padded copies, cuBLAS handles, cuDNN graphs): attn_ops.plan_new. It runs
 * on caller buffers (attn_io) on a caller stream: attn_ops.launch, which
 * neither allocates nor synchronizes on the GPU and can be captured in a
 * CUDA graph. The tuner is one user of it: a session owns one shape's
 * buffers on one device (inputs filled with seeded standard-normal data,
 * the output, a stream), plans made through it (attn_ops.plan) launch on
 * the session's buffers and stream; rows are addressed by their flat index
 * r = (bi * hq + h) * sq + i over the real (unpadded) output. */

typedef struct attn_session attn_session;
typedef struct attn_plan attn_plan;

typedef struct attn_timing {
    double us;        /* time per call, microseconds, one sample */
} attn_timing;

typedef struct attn_ops {
    const char *name; /* "cpu", "cuda" */

    /* Number of devices this backend drives (0 when none), never < 0. */
    int (*device_count)(void);

    /* Identity and stack of device index (0-based within the backend). */
    int (*device_info)(int index, attn_device_info *info, attn_stack *stack);

    /* Applicable tactics for shape s on device index, into out[0..max).
     * Returns the count (may be 0) or a negative error. Tactics that do not
     * apply (folded with hkv == hq, acc=f16 for f32 data) are not listed. */
    int (*tactics)(int index, const attn_shape *s, attn_tactic *out, int max);

    /* Allocate buffers for s and fill q, k, v with standard-normal values
     * from seed (converted to the storage dtype, never zeros). On error
     * *out is NULL and nothing is leaked; ATTUNE_ENOMEM when buffers do not
     * fit on the device. */
    int (*session_open)(int index, const attn_shape *s, uint64_t seed,
                        attn_session **out);
    void (*session_close)(attn_session *ss);

    /* float64 reference of the given rows, from the session's inputs as
     * stored (after dtype rounding; e4m3: the stored values times their
     * tensor's descale): ref[k * d + c] for rows[k]. */
    int (*reference)(attn_session *ss, const int64_t *rows, int nrows, double *ref);

    /* Optional (NULL: none): for an e4m3 session, the float64 reference
     * of the given rows from the bf16 values its inputs were quantized
     * from, so an error against it is the whole cost of going to FP8
     * (input rounding included). An e4m3 session is filled so: standard
     * normal values rounded to bf16 (the source), descale = amax / 448
     * per tensor, stored = e4m3(source / descale). ATTUNE_EUNSUPP for a
     * session of another dtype. */
    int (*reference_source)(attn_session *ss, const int64_t *rows, int nrows, double *ref);

    /* Fill the output with NaN. */
    int (*poison)(attn_session *ss);

    /* Read rows of the output, converted to double: out[k * d + c]. */
    int (*fetch_rows)(attn_session *ss, const int64_t *rows, int nrows, double *out);

    /* Prepare tactic t on the session. ATTUNE_EUNSUPP when t cannot run on
     * this shape/device (then *out is NULL). */
    int (*plan)(attn_session *ss, const attn_tactic *t, attn_plan **out);
    void (*plan_free)(attn_plan *p);

    /* Run the plan once, to completion, writing the session's output
     * (pad copies included). */
    int (*run)(attn_plan *p);

    /* One timing sample: run `iters` calls back to back and report the
     * time per call. with_copies = 0 times the kernels alone (for padded
     * tactics: on already padded buffers), 1 includes pad/unpad copies. */
    int (*time)(attn_plan *p, int iters, int with_copies, attn_timing *out);

    /* Optional (NULL when the backend has none): a note on the session's
     * last plan() call, "" when nothing to say: why it was refused
     * (ATTUNE_EUNSUPP), or what building it cost ("cudnn plan built in
     * 840 ms"). Valid until the next call on the session. */
    const char *(*plan_note)(attn_session *ss);

    /* Prepare tactic t for shape s (the largest lengths it will run at) on
     * device index, for caller buffers. flags: ATTN_PLAN_*. note (may be
     * NULL) gets why it was refused or what it cost, "" when nothing to
     * say. Slow is fine (allocates, builds cuDNN graphs). Returns 0, or
     * ATTUNE_EUNSUPP (t does not run on s here), ATTUNE_EINVAL, ENOMEM,
     * EGPU; on error *out is NULL and nothing is leaked. Free with
     * plan_free. */
    int (*plan_new)(int index, const attn_shape *s, const attn_tactic *t, int flags,
                    attn_plan **out, char *note, size_t notelen);

    /* Enqueue one call of plan p on io (pad and layout copies included)
     * on stream (a cudaStream_t; NULL is the legacy default stream; the
     * CPU runs synchronously and ignores it). On the GPU: no allocation,
     * no synchronization, capturable in a CUDA graph; the device current
     * on the calling thread is left as it was. A plan owns scratch
     * buffers, so calls of one plan must be ordered (one stream, or the
     * caller serializes them): use one plan per concurrent stream.
     * Distinct plans may be launched from distinct threads at once.
     * Returns 0, ATTUNE_EINVAL (io does not fit the plan: attn_io_check,
     * or strides this plan cannot read), ATTUNE_EUNSUPP (lengths other
     * than the planned ones on a tactic fixed to them, cuDNN), EGPU. */
    int (*launch)(attn_plan *p, const attn_io *io, void *stream);

    /* Optional (NULL: nothing to do): let plan p (a plan_new plan) read
     * and write tensors at the strides of views (data pointers ignored) in
     * place from now on, where the variant fixes strides when it is built
     * (cuDNN: a graph for them; the others read strides at run time and
     * return 0). Slow and allocates, like plan_new; never while stream (the
     * stream runs come on) is capturing a CUDA graph: ATTUNE_EBUSY then.
     * ATTUNE_EUNSUPP (note says why) when the variant cannot: runs on such
     * views keep the plan's copies. Calls of p must not run meanwhile. */
    int (*plan_views)(attn_plan *p, const attn_io *views, void *stream, char *note,
                      size_t notelen);

    /* Optional (NULL: never): 1 while stream is capturing a CUDA graph, so
     * nothing may allocate or build on it; else 0. */
    int (*capturing)(void *stream);

    /* 1 when tactics() is cheap and pure (no device call, no library
     * heuristics, no lock held long): a lookup may list on its request
     * thread. 0 (the CUDA backend: cuDNN's heuristics, the first time a
     * shape is listed) when a listing may block: the lookup index lists
     * it on its builder thread and answers as if nothing listed meanwhile
     * (lookup/index.h). */
    int list_cheap;

    /* Optional (NULL: never lost): ATTUNE_EGPULOST when device index's
     * context is lost (a kernel faulted: a sticky error, so every later
     * call fails until the process ends), else 0. Asked after a failure,
     * to tell a tactic's own failure from the end of all work. */
    int (*health)(int index);
} attn_ops;

/* ---- device registry (kernels/registry.c) */

typedef struct attn_device {
    const attn_ops *ops;
    int index;              /* within ops */
    attn_device_info info;
    attn_stack stack;
} attn_device;

/* All devices of all compiled-in backends: the CPU first, then CUDA
 * ordinals. Writes up to max into out; returns the total count. */
int attn_devices(attn_device *out, int max);

/* The device of this host that spec names (attn_device_match: the best
 * match, the first of equals). Backends are asked in order and the search
 * stops at an exact match, so "cpu" and CPU ids never start the CUDA
 * backend. Returns 0, or ATTUNE_ENODEV with a message in err. */
int attn_device_resolve(const char *spec, attn_device *out, char *err, size_t errlen);

/* The backend compiled in that drives devices of kind ("cpu", "cuda": an
 * attn_device_info.kind), or NULL: callers above the kernels find a
 * backend here, never by its name. */
const attn_ops *attn_backend(const char *kind);

/* Add a backend after the compiled-in ones (tests, plug-ins): before any
 * other thread reads the registry. Its devices are offered and its kind
 * found like theirs. 0, ATTUNE_EINVAL (no name, tactics, device_count or
 * device_info, or a kind taken), ATTUNE_ERANGE (ATTN_MAX_BACKENDS held). */
#define ATTN_MAX_BACKENDS 8
int attn_backend_register(const attn_ops *ops);

/* Unregister the backends attn_backend_register added (tests). */
void attn_backend_reset(void);

/* A device's index within its backend: its CUDA ordinal, 0 for the CPU
 * (whose info.index is -1). */
static inline int attn_backend_index(const attn_device_info *info)
{
    return info->index >= 0 ? info->index : 0;
}

/* The backends compiled in (CPU always; CUDA when built with it). */
extern const attn_ops attn_cpu_ops;
#ifdef ATTUNE_HAVE_CUDA
extern const attn_ops attn_cuda_ops;
#endif

#ifdef __cplusplus
}
#endif

#endif
