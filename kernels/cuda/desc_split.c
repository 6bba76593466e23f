/* desc_split.c -- the CUDA GEMM variants as descriptors (kernels/variant.h):
 * split, split_repeat and folded, two cuBLAS GEMMs around a softmax kernel
 * (cuda_split.cu): what they own and what they cost. Plain C, built
 * everywhere; the kernel ops are the CUDA backend's. */
#include <math.h>
#include <string.h>

#include "../variant.h"

static int plain_gemm(const attn_tactic *t)
{
    return t->tile_m == 0 && t->tile_n == 0 && t->splits == 0 && t->warps == 0 && t->stages == 0 &&
           attn_tactic_no_sm90a_keys(t) && (t->acc == ATTN_ACC_F16 || t->acc == ATTN_ACC_F32);
}

static int owns_split(const attn_tactic *t)
{
    return t->variant == ATTN_SPLIT && plain_gemm(t);
}

static int owns_split_repeat(const attn_tactic *t)
{
    return t->variant == ATTN_SPLIT_REPEAT && plain_gemm(t);
}

static int owns_folded(const attn_tactic *t)
{
    return t->variant == ATTN_FOLDED && plain_gemm(t);
}

/* Output tile of a cuBLAS block on the batched score and output matrices,
 * taken as 128 x 128, one block resident per SM. */
#define GEMM_TILE 128.0

/* cuBLAS's tensor-core GEMMs want every leading dimension 16-byte
 * aligned; the score matrix's is the padded key count, and at a count
 * that is not (pad 1 on 1018 keys) cuBLAS runs slower kernels. Over the
 * 15 tables in bench/ (H100 and H200), a GEMM variant at pad 1 with such a
 * key count took a median 1.38x (f16, aligned query count) to 1.72x
 * (bf16) the time of the same variant at pad 8 (its kernels, the copies
 * apart), and 1.00x where the keys were aligned; the d256 anchor
 * (b1.hq8.hkv1.sq50.skv1018) 15.9 us against 9.7. The model takes both
 * its rates at this share there. */
#define GEMM_UNALIGNED_SHARE (1.0 / 1.45)

/* The GEMM variants compute the whole padded score matrix (a GEMM cannot
 * skip the masked half of a causal one), in three launches (Q.K^T,
 * softmax, P.V): on shapes too small to fill the device the launch floor
 * is most of the time, and three are not the price of one (the H200 ran
 * b1.hq71.hkv1.sq1.skv2048 d64 in 5.5 us with cuDNN's one kernel, 9.3
 * with folded's three). The two GEMMs run one block per GEMM_TILE x
 * GEMM_TILE output tile of each batched matrix (folded: b * hkv matrices
 * of the group's g * sq rows; the others b * hq of sq rows), each wave of
 * them paying a block's latency: a batch of many tiny matrices is all
 * block latency (AnimateDiff's b8192.hq8.sq16.skv16 d40, 65536 matrices of
 * 16 x 16, was answered with a GEMM at 2.37x the fused kernel without
 * it). g: rows folded per matrix (1 unless folded). */
static void describe_gemm(const attn_shape *s, const attn_tactic *t, const attn_device_info *dev,
                          int64_t g, attn_cost *out)
{
    attn_cost_base(s, t, dev, out);
    int pad = t->pad > 1 ? t->pad : 1;
    out->rows = (double)attn_round_up(s->sq, pad);
    out->causal_skip = 0;
    double mats = (double)s->b * (double)(s->hq / g);
    double tiles = ceil((double)(g * s->sq) / GEMM_TILE) * ceil((double)s->skv / GEMM_TILE);
    out->blocks = mats * tiles;
    if (attn_cost_gpu(dev)) {
        out->blocks_sm = 1;
        out->waves = 2.0 * ceil(out->blocks / (double)dev->sm_count);
        out->launches = 3;
        int64_t align = 16 / attn_dtype_size(s->dtype);
        if (attn_round_up(s->skv, pad) % align != 0) {
            out->flop_share = GEMM_UNALIGNED_SHARE;
            out->byte_share = GEMM_UNALIGNED_SHARE;
        }
    }
}

static int describe_split(const attn_shape *s, const attn_tactic *t, const attn_device_info *dev,
                          unsigned hints, attn_cost *out)
{
    (void)hints;
    describe_gemm(s, t, dev, 1, out);
    return 0;
}

/* split_repeat holds K and V copied per query head (repeat_kv) in its
 * workspace. */
static int describe_split_repeat(const attn_shape *s, const attn_tactic *t,
                                 const attn_device_info *dev, unsigned hints, attn_cost *out)
{
    (void)hints;
    describe_gemm(s, t, dev, 1, out);
    out->work_bytes = 2.0 * (double)s->b * (double)s->hq *
                      (double)attn_round_up(s->skv, t->pad > 1 ? t->pad : 1) * (double)s->d *
                      (double)attn_dtype_size(s->dtype);
    return 0;
}

static int describe_folded(const attn_shape *s, const attn_tactic *t, const attn_device_info *dev,
                           unsigned hints, attn_cost *out)
{
    (void)hints;
    describe_gemm(s, t, dev, attn_shape_group(s), out);
    return 0;
}

/* Kernel ops: the CUDA backend's, when it is built. */
#if defined(ATTUNE_HAVE_CUDA)
extern const attn_kernel_ops cuda_split_ops, cuda_split_repeat_ops, cuda_folded_ops;
#define OPS(x) (&(x))
#else
#define OPS(x) NULL
#endif

const attn_variant_desc attn_cuda_split = {
    ATTN_SPLIT, "split", "split", "cuda",
    "cuBLAS GEMM -> softmax kernel -> GEMM per (b, query head); GQA by strides, no copies",
    "acc=f16|f32 (f16 for f16 data only), pad=1|8|16|64", "#f28e2b", owns_split, describe_split,
    OPS(cuda_split_ops),
    ATTN_DTYPES_WIDE, NULL,
};

const attn_variant_desc attn_cuda_split_repeat = {
    ATTN_SPLIT_REPEAT, "split_repeat", "split_repeat", "cuda",
    "the Hugging Face path: K/V copied per query head (repeat_kv), then split; hkv < hq",
    "acc=f16|f32, pad=1|8|16|64", "#e15759", owns_split_repeat, describe_split_repeat,
    OPS(cuda_split_repeat_ops),
    ATTN_DTYPES_WIDE, NULL,
};

const attn_variant_desc attn_cuda_folded = {
    ATTN_FOLDED, "folded", "folded", "cuda",
    "the g query heads of each KV head folded into the rows of one GEMM of g * sq rows; hkv < hq",
    "acc=f16|f32, pad=1|8|16|64", "#59a14f", owns_folded, describe_folded, OPS(cuda_folded_ops),
    ATTN_DTYPES_WIDE, NULL,
};
