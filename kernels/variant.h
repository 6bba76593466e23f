/* variant.h -- a variant describes itself: one descriptor per kernel
 * family, registered in one table (kernels/variants.c) that every layer
 * reads.
 *
 * A *variant* is the first word of a tactic (fused, split, cudnn, ...):
 * what the API, the store, the page and a runtime's variants= filter speak
 * of. A *family* is one kernel of a variant on one backend: the CPU's
 * fused, the CUDA fused tiles (version 1), the sm90a kernels, cuDNN's
 * engines. Its descriptor says
 *
 *   who it is       name (the variant word), family (what tells it apart
 *                   within its variant), backend, a summary, its
 *                   parameters and their text, the page's colour;
 *   what it runs    owns(t): the tactics whose parameters it reads;
 *                   kernel->list, plan, run, free: the backend lists and
 *                   runs its tactics only through these (NULL kernel: not
 *                   built into this binary; it is still described);
 *   what it costs   describe(shape, tactic, device): the kernel's own
 *                   facts a cost model needs (blocks and waves, rows and
 *                   keys computed with padding and tile rounding, the head
 *                   dim as computed, launches and copies, bytes moved,
 *                   shared memory and registers per block). Plain C,
 *                   compiled everywhere: a CPU-only host costs an H200's
 *                   tactics from a table it imported.
 *
 * The backends (kernels/cpu, kernels/cuda) list, plan and run through the
 * table; the prediction model (tuner/predict.c) reads describe() and the
 * measurements and nothing else of a kernel; the page takes its colours
 * and the CLI its variant names from it (GET /v1/variants, attune
 * variants). docs/kernels.md "Adding a variant" lists the files a new
 * family touches: its kernel file, its descriptor, one line in the table,
 * its tests. */
#ifndef ATTN_VARIANT_H
#define ATTN_VARIANT_H

#include <stddef.h>
#include <stdint.h>

#include "attn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Variant ids (ATTN_MAX_VARIANTS and the built-in ones, ATTN_FUSED ...
 * ATTN_CUDNN) and their words are common/tactic.h's: a family registered
 * at run time (attn_family_register) registers its variant's word there. */
/* Families the table holds at most, built-in and registered. */
#define ATTN_MAX_FAMILIES 48

/* What a kernel knows about itself on one shape, tactic and device
 * (describe). Counts are per call; "0" means "does not apply" unless said
 * otherwise. */
typedef struct attn_cost {
    /* work: the model's FLOPs are 4 * b * hq * pairs * head_dim, pairs the
     * (query, key) pairs visible to the shape (all of them when
     * !causal_skip) scaled by rows / sq and keys / skv */
    double rows;        /* query rows computed per query head: the real rows
                           rounded up to the row tile (or the pad, for a
                           kernel on the padded buffer) */
    double keys;        /* keys computed per query row: the padded keys in
                           whole key tiles, plus block_keys */
    double block_keys;  /* of keys, each block's fixed prologue and epilogue
                           (its Q tile in, its O tile out) in keys of the
                           same cost, summed over its key splits */
    int64_t head_dim;   /* head dim as computed (kernels instantiated for
                           a few sizes run the next one up) */
    int causal_skip;    /* 1: masked tiles of a causal mask are skipped; 0:
                           the whole score matrix is computed (GEMMs) */
    double bytes;       /* bytes q, k, v and out move (the padded buffers'
                           rows, the real head dim) */
    /* the grid, on dev (0 without a GPU device) */
    double blocks;      /* thread blocks of its main kernel on s */
    int quantized;      /* 1: its blocks run in whole waves over the SMs
                           (a tiled kernel): a last wave's idle slots cost */
    double blocks_sm;   /* blocks of it resident per SM (threads, shared
                           memory and registers against the SM's); 0: no
                           wave model (no GPU device) */
    double waves;       /* waves of blocks, each paying a block's latency
                           (issue, Q tile in, O tile out) */
    int row_tile;       /* query rows of a block, for the causal balance */
    int longest_first;  /* 1: causal blocks are issued longest first */
    double byte_share;  /* share of the device's byte rate it can reach (a
                           launch of few blocks streams at less, cuBLAS at
                           unaligned leading dimensions too); 1 */
    double flop_share;  /* share of the device's arithmetic rate it can
                           reach (a launch of few blocks, not run in
                           waves, computes at less, cuBLAS at unaligned
                           leading dimensions too); 1 */
    /* per call */
    int launches;       /* kernel launches, pad copies apart (1 when dev is
                           not a GPU: a call's overhead counts once) */
    int copies;         /* pad and unpad copy launches (0 off a GPU) */
    double copy_bytes;  /* bytes those copies read and write */
    /* resources of one block (GPU kernels; 0 when not known) */
    double smem;        /* shared memory, bytes */
    double regs;        /* 32-bit registers per thread (estimated) */
    int threads;        /* threads */
    double work_bytes;  /* scratch memory a plan of it holds */
} attn_cost;

/* Hints to describe(): what the caller measured of the family. */
enum {
    /* The family was listed (and measured) on single-query steps (sq = 1)
     * of this device: a library that picks other engines for decode steps
     * (cuDNN) runs this one as it runs them there. */
    ATTN_HINT_DECODE = 1,
};

/* One call as a backend's kernels see it. Each backend defines it
 * (kernels/cpu: the problem on its buffers; kernels/cuda: the views, the
 * lengths and the stream); a family's kernel ops are called only by the
 * backend it names, on that backend's plans and calls. */
typedef struct attn_call attn_call;

/* How a backend drives a family's kernels. */
typedef struct attn_kernel_ops {
    int strided;       /* 1: reads any views its backend's copies could make
                          (16-byte strides on CUDA) in place at pad 1: a
                          plan keeps no layout copies for them */
    int fixed_lengths; /* 1: a plan runs at its planned lengths only */

    /* Its tactics for s on device dev (dev->index: the backend's index),
     * into out[0..max). Returns the count written (0: none apply; stops at
     * max) or a negative error. */
    int (*list)(const attn_device_info *dev, const attn_shape *s, attn_tactic *out, int max);
    /* Make the family's state in plan p for calls like c (NULL: the
     * planned lengths). note (may be NULL) gets why it was refused or what
     * it cost. 0, ATTUNE_EUNSUPP (p's tactic does not run here), ENOMEM,
     * EGPU; on error nothing is left held (free is still safe). */
    int (*plan)(attn_plan *p, const attn_call *c, char *note, size_t notelen);
    /* One call (on the GPU: enqueued, capturable). */
    int (*run)(attn_plan *p, const attn_call *c);
    /* Release the family's state in p (safe on a failed or empty plan). */
    void (*free)(attn_plan *p);
    /* Optional: 1 when the kernel reads call c's views in place; NULL:
     * contiguous buffers of c's rows only. */
    int (*reads)(const attn_plan *p, const attn_call *c);
    /* Optional: a session of shape s opened on / closed on device index
     * (cuDNN builds its plans ahead while other families are timed). */
    void (*warm)(int index, const attn_shape *s);
    void (*cool)(int index, const attn_shape *s);
    /* Optional: let plan p read and write tensors at the strides of views
     * in place from now on, where the kernel fixes strides when it is
     * built (attn_ops.plan_views; the backend has checked that stream is
     * not capturing). NULL: it reads strides at run time, nothing to do. */
    int (*plan_views)(attn_plan *p, const attn_io *views, void *stream, char *note,
                      size_t notelen);
} attn_kernel_ops;

typedef struct attn_variant_desc {
    attn_variant variant;   /* the variant's id */
    const char *name;       /* the variant word: "fused" */
    const char *family;     /* within the variant: "fused", "fused/arch=sm90a" */
    const char *backend;    /* "cpu" or "cuda": whose plans its kernel ops take */
    const char *summary;    /* one line: what it computes, how */
    const char *params;     /* its parameters and their values, text */
    const char *color;      /* the page's colour of the variant, "#rrggbb"
                               (families of one variant give the same) */
    /* 1 when t is one of its tactics (variant and parameters). */
    int (*owns)(const attn_tactic *t);
    /* What t costs on s on dev (NULL: no device known; hints:
     * ATTN_HINT_*): fills *out, returns 0, or ATTUNE_EUNSUPP when t does
     * not run on s (then *out still holds a usable estimate). */
    int (*describe)(const attn_shape *s, const attn_tactic *t, const attn_device_info *dev,
                    unsigned hints, attn_cost *out);
    const attn_kernel_ops *kernel; /* NULL: not built into this binary */
    /* The dtypes its kernels may run, ATTN_DTYPE_BIT(t) each (list() says
     * which shapes); 0: f16, bf16 and f32 (ATTN_DTYPES_WIDE). A family
     * is asked to list tactics only for the dtypes it names, so e4m3 data
     * never reaches a kernel written for wider elements. */
    unsigned dtypes;
    /* Its parameters that the backend sets from the shape rather than
     * offering a choice of, as keys separated by spaces ("stages"; NULL:
     * none): a tactic that differs from another only in them is the same
     * kernel at another shape. The prediction model costs a tactic no row
     * measured by the rows of such a sibling (tuner/predict.c). */
    const char *shape_params;
} attn_variant_desc;

#define ATTN_DTYPE_BIT(t) (1u << (unsigned)(t))
#define ATTN_DTYPES_WIDE (ATTN_DTYPE_BIT(ATTN_F16) | ATTN_DTYPE_BIT(ATTN_BF16) | ATTN_DTYPE_BIT(ATTN_F32))

/* The dtypes family f may run (its dtypes, or ATTN_DTYPES_WIDE for 0). */
static inline unsigned attn_family_dtypes(const attn_variant_desc *f)
{
    return f->dtypes != 0 ? f->dtypes : ATTN_DTYPES_WIDE;
}

/* ---- the table (kernels/variants.c) */

/* The families, built-in first (in listing order: a backend lists the
 * tactics of its families in this order), then registered ones. *n gets
 * the count. The array stays valid (registration appends). */
const attn_variant_desc *const *attn_families(int *n);

/* The family of tactic t on backend ("cpu", "cuda"; NULL: any, the first
 * that owns t), or NULL. */
const attn_variant_desc *attn_family_of(const attn_tactic *t, const char *backend);

/* The first family of variant v (its name, colour, summary), or NULL. */
const attn_variant_desc *attn_family_variant(attn_variant v);

/* Add a family (tests, plug-ins): before any other thread reads the
 * table. Its variant id is a built-in one, or a new one below
 * ATTN_MAX_VARIANTS whose name no other id has; a new id's name becomes
 * a variant word (attn_variant_register). 0, ATTUNE_EINVAL (fields
 * missing, a name taken by another id, not a word), ATTUNE_ERANGE (table
 * full). */
int attn_family_register(const attn_variant_desc *d);

/* Unregister the families registered since the built-in ones, and their
 * variant words (tests). */
void attn_family_reset(void);

/* The tactics every family of backend lists for s on dev, in table order,
 * into out[0..max). Returns the total written, or the first family's
 * negative error. */
int attn_family_list(const char *backend, const attn_device_info *dev, const attn_shape *s,
                     attn_tactic *out, int max);

/* describe() of t's family on dev's backend (dev NULL: any family that
 * owns t). A tactic no family owns (another build's) is described as a
 * kernel on the padded buffers at the real head dim: rows sq, keys the
 * padded skv, one launch. Returns describe's result, or ATTUNE_ENOTFOUND
 * for such a fallback (*out filled). */
int attn_describe(const attn_shape *s, const attn_tactic *t, const attn_device_info *dev,
                  unsigned hints, attn_cost *out);

/* ---- helpers for descriptors */

/* The shared pad path of the backends: bytes the pad and unpad copies of
 * t on s read and write (Q in and O out where the pad changes sq, K and V
 * in where it changes skv), and the copies (launches) they take. */
void attn_pad_copies(const attn_shape *s, const attn_tactic *t, double *bytes, int *copies);

/* The plain part of a description every family starts from: rows sq,
 * keys the padded skv, the real head dim, masked tiles skipped, the
 * padded buffers' bytes, one launch, the pad copies (copies counted only
 * on a GPU device), byte share 1. */
void attn_cost_base(const attn_shape *s, const attn_tactic *t, const attn_device_info *dev,
                    attn_cost *out);

/* 1 when dev is a GPU whose SMs a wave model can count. */
int attn_cost_gpu(const attn_device_info *dev);

/* Per-SM and per-block limits of compute capability major.minor (the CUDA
 * programming guide's table; the one copy the kernels and descriptors
 * read). Unknown ones get the smallest values of the table. */
typedef struct attn_sm_limits {
    double smem_sm;    /* shared memory per SM, bytes */
    double smem_block; /* largest opt-in dynamic shared memory of a block */
    int threads_sm;    /* resident threads per SM */
    int regs_sm;       /* 32-bit registers per SM */
} attn_sm_limits;
void attn_sm_limits_of(int cc_major, int cc_minor, attn_sm_limits *out);

/* Blocks resident per SM of a block of `threads` threads, `regs`
 * registers per thread and `smem` bytes of shared memory on dev: the
 * least of the three limits, at least 1. */
double attn_blocks_per_sm(const attn_device_info *dev, int threads, double regs, double smem);

#ifdef __cplusplus
}
#endif

#endif
