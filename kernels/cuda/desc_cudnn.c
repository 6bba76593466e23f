/* desc_cudnn.c -- cuDNN's SDPA engines as a descriptor (kernels/variant.h):
 * what the cudnn variant owns and what attune knows of its engines' costs.
 * Plain C, built everywhere; the kernel ops (cuDNN's heuristics, plans
 * and launches) are the CUDA backend's, present when cuDNN is built in.
 *
 * cuDNN's tiling is not in its tactic (engine and knob codes), so what is
 * said here was read off the H200 tables (docs/tuning.md, "Predicted
 * answers"): its SDPA engines for sm_90 behave as FlashAttention-3-like
 * kernels of 128-row blocks, one block per SM, except the engines it lists
 * for single-query decode steps, which split the keys. */
#include <math.h>
#include <string.h>

#include "../variant.h"

static int owns_cudnn(const attn_tactic *t)
{
    return t->variant == ATTN_CUDNN && t->tile_m == 0 && t->splits == 0 && t->warps == 0 &&
           t->stages == 0 && attn_tactic_no_sm90a_keys(t) && t->acc == ATTN_ACC_NONE;
}

/* Rows (and keys) of a block of the prefill engines: a shape that leaves
 * most SMs idle is no cheaper for them than for the tiled kernels that
 * know it. */
#define CUDNN_TILE_ROWS 128
/* Single-query decode steps: there the engines cuDNN lists for them split
 * the keys, as split-KV does (on the H200 kcfg=36 ran b1.hq32.sq1.skv4096
 * d128 at 3.1 TB/s, which 32 one-per-head blocks could not), so no row
 * tile or wave is charged. Only there: with 8 queries
 * (b1.hq32.hkv8.sq8.skv4096 d128, speculative verification) every engine
 * cuDNN listed ran whole 128-row tiles over all the keys, 54-108 us
 * against split-KV's 12-14, and costed as key-splitting the prefill
 * engine was answered at 4.5x the winner. An engine never measured on a
 * decode step (no ATTN_HINT_DECODE) is a prefill engine there too: the
 * backend lists other engines for decode steps. */
#define CUDNN_DECODE_ROWS 2
/* Fixed work of a block in key tiles: half the fused kernels' (its Q tile
 * in, O tile out): cuDNN's tiled engines pay less per block on a short
 * key loop than the kernels here (LTX-Video's 6144 queries on 128 keys,
 * d = 64: eng=2 ran at 1.00x its cost, the sm90a kernel at 1.45x; an
 * engine that overlaps one tile's O store with the next one's Q load
 * would, but its insides are not visible). On the ten H200 tables it took
 * the default-grid leave-one-out worst from 1.256 to 1.229; flat from
 * 0.125 to 0.375. */
#define CUDNN_BLOCK_FIXED_TILES 0.25

/* Head dim the engines compute at d: the causal prefill engines run a
 * head dim between 64 and 128 as 128 (on the H200, b1.hq32.sq2048 causal:
 * 82-85 us at d = 80, 84 at d = 96, 82-85 at d = 128; costed at d = 80,
 * eng=2 was answered for Phi-2 at 1.27x sm90a), while without a mask they
 * run near their head dim (PixArt d = 72 cross-attention 28.6 us against
 * sm90a's 46.6, ViT-H d = 80 43.5 against 50.7: costed at 128 there,
 * 1.4-1.6x misses); below 64 they cost a head dim of 64 (costed at d,
 * engines 2 and 9 were predicted 1.2-1.5x too fast at d = 32 on every
 * held-out set that asked one, and answered at 1.23-1.58x a fused
 * kernel: OneFormer, Sparse R-CNN, b4.hq8.sq500). */
static int64_t head_dim(const attn_shape *s)
{
    if (s->causal && s->d > 64 && s->d < 128)
        return 128;
    return s->d < 64 ? 64 : s->d;
}

static int describe_cudnn(const attn_shape *s, const attn_tactic *t, const attn_device_info *dev,
                          unsigned hints, attn_cost *out)
{
    attn_cost_base(s, t, dev, out);
    out->head_dim = head_dim(s);
    int tiled = s->sq >= CUDNN_DECODE_ROWS || !(hints & ATTN_HINT_DECODE);
    if (tiled) {
        int pad = t->pad > 1 ? t->pad : 1;
        int64_t skvp = attn_round_up(s->skv, pad);
        out->rows = (double)attn_round_up(s->sq, CUDNN_TILE_ROWS);
        out->block_keys = CUDNN_BLOCK_FIXED_TILES * CUDNN_TILE_ROWS;
        out->keys = (double)attn_round_up(skvp, CUDNN_TILE_ROWS) + out->block_keys;
        out->blocks = (double)(s->b * s->hq) *
                      (double)((s->sq + CUDNN_TILE_ROWS - 1) / CUDNN_TILE_ROWS);
        out->quantized = 1;
        out->row_tile = CUDNN_TILE_ROWS;
        if (attn_cost_gpu(dev)) {
            out->blocks_sm = 1;
            out->waves = ceil(out->blocks / (double)dev->sm_count);
        }
    }
    /* f32 and shapes cuDNN refuses are measured unsupported */
    return s->dtype == ATTN_F32 ? ATTUNE_EUNSUPP : 0;
}

/* Kernel ops: the CUDA backend's, when it is built. */
#if defined(ATTUNE_HAVE_CUDA) && defined(ATTUNE_HAVE_CUDNN)
extern const attn_kernel_ops cuda_cudnn_ops;
#define OPS (&cuda_cudnn_ops)
#else
#define OPS NULL
#endif

const attn_variant_desc attn_cuda_cudnn = {
    ATTN_CUDNN, "cudnn", "cudnn", "cuda",
    "cuDNN's fused SDPA forward (backend API): one tactic per engine configuration, the string "
    "alone rebuilds the plan; e4m3 by its FP8 graph (compute capability 9.0 on)",
    "eng=N, graph=sdpa|comp, kcfg=N (the engine's knobs: cuda_cudnn.h), pad=1|8|16|64",
    "#b07aa1", owns_cudnn, describe_cudnn, OPS,
    /* e4m3: the FP8 graph, on compute capability 9.0 on (cuda_cudnn.c) */
    ATTN_DTYPE_BIT(ATTN_F16) | ATTN_DTYPE_BIT(ATTN_BF16) | ATTN_DTYPE_BIT(ATTN_E4M3), NULL,
};
