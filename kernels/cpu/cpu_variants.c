/* cpu_variants.c -- the CPU backend's families as descriptors
 * (kernels/variant.h): fused, split, split_repeat and folded in plain C
 * (the kernels: cpu_attn.c), what they list, how a plan runs them, and
 * what they cost.
 *
 * No fused_splitkv (flash-decoding fills GPU SMs when sq is small, which
 * means nothing to a single-threaded CPU) and no cudnn (a GPU library).
 * The GEMM variants take acc=f32 only: CPU arithmetic is fp32. Every
 * family takes f16, bf16, f32 and e4m3 (emulated: CPU_DTYPES). */
#include <string.h>

#include "cpu_internal.h"

/* ---- tactics */

/* 1 when t sets nothing but its variant, pad and acc (the CPU kernels
 * have no tiles, splits, warps or architectures to choose). */
static int plain(const attn_tactic *t)
{
    return t->splits == 0 && t->warps == 0 && t->tile_m == 0 && t->tile_n == 0 && t->stages == 0 &&
           attn_tactic_no_sm90a_keys(t);
}

static int owns_fused(const attn_tactic *t)
{
    return t->variant == ATTN_FUSED && plain(t) && t->acc == ATTN_ACC_NONE;
}

static int owns_split(const attn_tactic *t)
{
    return t->variant == ATTN_SPLIT && plain(t) && t->acc == ATTN_ACC_F32;
}

static int owns_split_repeat(const attn_tactic *t)
{
    return t->variant == ATTN_SPLIT_REPEAT && plain(t) && t->acc == ATTN_ACC_F32;
}

static int owns_folded(const attn_tactic *t)
{
    return t->variant == ATTN_FOLDED && plain(t) && t->acc == ATTN_ACC_F32;
}

/* Every pad of variant v with acc (a pad at or beyond the lengths is
 * still listed: it is a distinct tactic, with its copies), unless the
 * variant needs hkv < hq (grouped) and s has none. Writes up to max,
 * returns the count (ATTN_NPADS or 0). */
static int list_pads(const attn_shape *s, attn_variant v, attn_acc acc, int grouped,
                     attn_tactic *out, int max)
{
    if (grouped && s->hkv == s->hq)
        return 0; /* DESIGN.md: they apply to hkv < hq only */
    for (int pi = 0; pi < ATTN_NPADS && pi < max; pi++) {
        memset(&out[pi], 0, sizeof out[pi]);
        out[pi].variant = v;
        out[pi].pad = attn_pads[pi];
        out[pi].acc = acc;
    }
    return ATTN_NPADS;
}

static int list_fused(const attn_device_info *dev, const attn_shape *s, attn_tactic *out, int max)
{
    (void)dev;
    return list_pads(s, ATTN_FUSED, ATTN_ACC_NONE, 0, out, max);
}

static int list_split(const attn_device_info *dev, const attn_shape *s, attn_tactic *out, int max)
{
    (void)dev;
    return list_pads(s, ATTN_SPLIT, ATTN_ACC_F32, 0, out, max);
}

static int list_split_repeat(const attn_device_info *dev, const attn_shape *s, attn_tactic *out,
                             int max)
{
    (void)dev;
    return list_pads(s, ATTN_SPLIT_REPEAT, ATTN_ACC_F32, 1, out, max);
}

static int list_folded(const attn_device_info *dev, const attn_shape *s, attn_tactic *out,
                       int max)
{
    (void)dev;
    return list_pads(s, ATTN_FOLDED, ATTN_ACC_F32, 1, out, max);
}

/* ---- plans: the workspace of a call's lengths (cpu_backend.c calls
 * plan again when a call comes at other lengths) */

static int family_plan(const cpu_kernel *k, attn_plan *p, const attn_call *c)
{
    cpu_work_free(p->w);
    p->w = NULL;
    if (c == NULL)
        return ATTUNE_EINVAL; /* the CPU backend always says which lengths */
    return cpu_work_alloc(k, c, &p->w);
}

static void family_free(attn_plan *p)
{
    cpu_work_free(p->w);
    p->w = NULL;
}

#define CPU_KERNEL_OPS(name, kernel)                                                          \
    static int name##_plan(attn_plan *p, const attn_call *c, char *note, size_t notelen)      \
    {                                                                                         \
        (void)note, (void)notelen;                                                            \
        return family_plan(&kernel, p, c);                                                    \
    }                                                                                         \
    static int name##_run(attn_plan *p, const attn_call *c)                                   \
    {                                                                                         \
        return cpu_kernel_run(&kernel, c, p->w);                                              \
    }                                                                                         \
    static const attn_kernel_ops name##_ops = {                                               \
        .list = list_##name, .plan = name##_plan, .run = name##_run, .free = family_free,     \
    };

CPU_KERNEL_OPS(fused, cpu_fused_kernel)
CPU_KERNEL_OPS(split, cpu_split_kernel)
CPU_KERNEL_OPS(split_repeat, cpu_split_repeat_kernel)
CPU_KERNEL_OPS(folded, cpu_folded_kernel)

/* ---- costs */

/* The problem of s at t's pad (sizes only). */
static cpu_problem sizes_of(const attn_shape *s, const attn_tactic *t)
{
    cpu_problem pb;
    memset(&pb, 0, sizeof pb);
    pb.dtype = s->dtype;
    pb.b = s->b, pb.hq = s->hq, pb.hkv = s->hkv, pb.d = s->d;
    pb.sq = s->sq, pb.skv = s->skv;
    pb.sqp = attn_round_up(s->sq, t->pad > 1 ? t->pad : 1);
    pb.skvp = attn_round_up(s->skv, t->pad > 1 ? t->pad : 1);
    pb.diag = s->skv - s->sq;
    pb.causal = s->causal;
    return pb;
}

/* fused: the real query rows against the padded keys, tiles past a
 * causal row's last visible key skipped (the early exit). */
static int describe_fused(const attn_shape *s, const attn_tactic *t, const attn_device_info *dev,
                          unsigned hints, attn_cost *out)
{
    (void)hints;
    attn_cost_base(s, t, dev, out);
    cpu_problem pb = sizes_of(s, t);
    out->work_bytes = cpu_work_bytes(&cpu_fused_kernel, &pb);
    return 0;
}

/* The GEMM variants compute the whole padded score matrix, as a BLAS call
 * would: every padded query row, every key, causal or not. */
static void describe_gemm(const cpu_kernel *k, const attn_shape *s, const attn_tactic *t,
                          const attn_device_info *dev, attn_cost *out)
{
    attn_cost_base(s, t, dev, out);
    cpu_problem pb = sizes_of(s, t);
    out->rows = (double)pb.sqp;
    out->causal_skip = 0;
    out->work_bytes = cpu_work_bytes(k, &pb);
}

static int describe_split(const attn_shape *s, const attn_tactic *t, const attn_device_info *dev,
                          unsigned hints, attn_cost *out)
{
    (void)hints;
    describe_gemm(&cpu_split_kernel, s, t, dev, out);
    return 0;
}

static int describe_split_repeat(const attn_shape *s, const attn_tactic *t,
                                 const attn_device_info *dev, unsigned hints, attn_cost *out)
{
    (void)hints;
    describe_gemm(&cpu_split_repeat_kernel, s, t, dev, out);
    return 0;
}

static int describe_folded(const attn_shape *s, const attn_tactic *t, const attn_device_info *dev,
                           unsigned hints, attn_cost *out)
{
    (void)hints;
    describe_gemm(&cpu_folded_kernel, s, t, dev, out);
    return 0;
}

/* ---- the descriptors (one line each in kernels/variants.c's table) */

/* Every CPU family runs e4m3 too: the kernels descale e4m3 inputs as they
 * convert them to fp32 (cpu_attn.c), an emulation of FP8's arithmetic for
 * checking and tests, with none of its speed. */
#define CPU_DTYPES (ATTN_DTYPES_WIDE | ATTN_DTYPE_BIT(ATTN_E4M3))

const attn_variant_desc attn_cpu_fused = {
    ATTN_FUSED, "fused", "fused", "cpu",
    "FlashAttention-2 over 64x64 tiles in fp32: online softmax, no score matrix",
    "pad=1|8|16|64", "#4e79a7", owns_fused, describe_fused, &fused_ops,
    CPU_DTYPES, NULL,
};

const attn_variant_desc attn_cpu_split = {
    ATTN_SPLIT, "split", "split", "cpu",
    "per query head: S = QK^T, masked softmax, O = PV (GQA by indexing the KV head)",
    "acc=f32, pad=1|8|16|64", "#f28e2b", owns_split, describe_split, &split_ops,
    CPU_DTYPES, NULL,
};

const attn_variant_desc attn_cpu_split_repeat = {
    ATTN_SPLIT_REPEAT, "split_repeat", "split_repeat", "cpu",
    "Hugging Face's path: K and V copied per query head (repeat_kv), then split; hkv < hq",
    "acc=f32, pad=1|8|16|64", "#e15759", owns_split_repeat, describe_split_repeat,
    &split_repeat_ops,
    CPU_DTYPES, NULL,
};

const attn_variant_desc attn_cpu_folded = {
    ATTN_FOLDED, "folded", "folded", "cpu",
    "the g query heads of a KV head folded into the rows of one GEMM; hkv < hq",
    "acc=f32, pad=1|8|16|64", "#59a14f", owns_folded, describe_folded, &folded_ops,
    CPU_DTYPES, NULL,
};
