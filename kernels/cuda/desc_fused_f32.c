/* desc_fused_f32.c -- the fused f32 kernel (`fused/acc=f32/...`,
 * cuda_fused_f32.cu) as a descriptor (kernels/variant.h): what it owns and
 * what it costs. Plain C, built everywhere (a CPU-only host costs an
 * H200's tactics); its configurations come from cuda_fused_f32.h, the
 * lines the kernel is built from. The kernel ops (ops_fused_f32.cu) are
 * the CUDA backend's, present when it is built. */
#include <math.h>
#include <string.h>

#include "../variant.h"
#include "cuda_fused_f32.h"

/* A fused tactic with acc=f32 and a tile: the family's key. No other
 * fused family takes acc (theirs is f32 accumulation of f16/bf16 inputs,
 * implied), so acc=f32 on fused names this kernel. */
static int owns_f32(const attn_tactic *t)
{
    return t->variant == ATTN_FUSED && t->acc == ATTN_ACC_F32 && attn_tactic_no_sm90a_keys(t) &&
           t->tile_m > 0 && t->tile_n > 0 && t->warps > 0 && t->splits == 0 && t->stages == 0;
}

/* The configuration of t at head dim bucket D: its CG (threads per row
 * group) and MINB (blocks per SM it is built for); 0 when none is built. */
static int config_of(const attn_tactic *t, int64_t D, int *minb)
{
#define F32_CFG(D_, BR_, BC_, NW_, CG_, MINB_)                                                 \
    if (D == D_ && t->tile_m == BR_ && t->tile_n == BC_ && t->warps == NW_) {                 \
        *minb = MINB_;                                                                         \
        return CG_;                                                                            \
    }
    F32_CONFIGS(F32_CFG)
#undef F32_CFG
    return 0;
}

/* As the tiled fused kernels of desc_fused.c: whole row tiles of the real
 * rows against the keys in whole key tiles, causal tiles past a block's
 * last row skipped, each block paying its Q tile in and O tile out as
 * tile_m keys of the same bytes; b * hq * row tiles blocks in waves over
 * the SMs, issued longest first when causal. Registers (the launch
 * bound's budget) and shared memory from cuda_fused_f32.h. A tile this
 * head dim does not build (or a pad other
 * than 1, or data other than f32) is described as the nearest thing and
 * answered ATTUNE_EUNSUPP. */
static int describe_f32(const attn_shape *s, const attn_tactic *t, const attn_device_info *dev,
                        unsigned hints, attn_cost *out)
{
    (void)hints;
    int64_t D = F32_KERNEL_DIM(s->d);
    int minb = 1;
    int cg = D != 0 ? config_of(t, D, &minb) : 0;
    int runs = cg != 0 && s->dtype == ATTN_F32 && t->pad == 1;
    if (D == 0)
        D = s->d;
    if (cg == 0)
        cg = 8; /* for the estimate */
    const int br = t->tile_m, bc = t->tile_n, nw = t->warps;
    attn_cost_base(s, t, dev, out);
    int pad = t->pad > 1 ? t->pad : 1;
    int64_t skvp = attn_round_up(s->skv, pad);
    double rb = (double)((s->sq + br - 1) / br);
    out->rows = (double)attn_round_up(s->sq, br);
    out->block_keys = (double)br;
    out->keys = (double)attn_round_up(skvp, bc) + out->block_keys;
    out->head_dim = D;
    out->blocks = (double)(s->b * s->hq) * rb;
    out->quantized = 1;
    out->row_tile = br;
    out->longest_first = 1;
    out->threads = 32 * nw;
    out->regs = (double)F32_REGS(nw, minb);
    out->smem = (double)F32_SMEM(D, br, bc, cg);
    if (attn_cost_gpu(dev)) {
        out->blocks_sm = attn_blocks_per_sm(dev, out->threads, out->regs, out->smem);
        out->waves = ceil(out->blocks / ((double)dev->sm_count * out->blocks_sm));
        out->launches = 1;
    }
    return runs ? 0 : ATTUNE_EUNSUPP;
}

/* Kernel ops: the CUDA backend's, when it is built. */
#if defined(ATTUNE_HAVE_CUDA)
extern const attn_kernel_ops cuda_fused_f32_ops;
#define OPS_F32 (&cuda_fused_f32_ops)
#else
#define OPS_F32 NULL
#endif

const attn_variant_desc attn_cuda_fused_f32 = {
    ATTN_FUSED, "fused", "fused/acc=f32", "cuda",
    "FlashAttention-2 in FP32 on the SIMT cores (FFMA, no tensor cores, no TF32), one block per "
    "row tile and query head; f32 data, any d <= 256, any strides",
    "acc=f32, pad=1, tile=BrxBc, warps=N (the configurations built: cuda_fused_f32.h)",
    "#4e79a7", owns_f32, describe_f32, OPS_F32, ATTN_DTYPE_BIT(ATTN_F32), NULL,
};
