/* cuda_fused.h -- fused attention on tensor cores: `fused` (FlashAttention-2
 * style prefill) and `fused_splitkv` (flash-decoding), as the CUDA backend
 * calls them.
 *
 * Layouts: q and o are [b, hq, sq_pad, d], k and v [b, hkv, skv_pad, d],
 * contiguous, f16 or bf16. The real lengths are s->sq and s->skv; the padded
 * lengths (sq_pad >= sq, skv_pad >= skv) are the buffers' row counts that the
 * backend made. Keys at or past the real skv are masked, padded query rows
 * are computed or not but never needed. Rows between the real and the padded
 * length of k and v must hold finite values (the backend zero-fills them):
 * the aligned fast path reads them unpredicated and multiplies them by zero
 * probabilities, and 0 * Inf is NaN. */
#ifndef CUDA_FUSED_H
#define CUDA_FUSED_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime.h>

#include "../attn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Tactics of the fused variants that apply to shape s on a device of compute
 * capability cc_major.cc_minor, written to out[0..max): each kernel
 * configuration (tile=BrxBc, warps, and splits for fused_splitkv) combined
 * with every pad in attn_pads. Only the configurations the architecture
 * gets: within its shared memory per block, and none that spills registers
 * there (ARCH_EXCLUDED in cuda_fused.cu, docs/kernels.md "Architectures").
 * Returns the number written; 0 when none apply
 * (f32 data, d not a multiple of 8 or over 256, a device older than sm_80).
 * Stops at max without error. */
int cuda_fused_tactics(const attn_shape *s, int cc_major, int cc_minor,
                       attn_tactic *out, int max);

/* Dynamic shared memory per block the kernel of tactic t asks for at head
 * dim d (bytes); 0 when t is not a fused configuration. The tactics listed
 * for a compute capability all fit its per-block limit (tests/test_fused_arch.c). */
size_t cuda_fused_smem_bytes(const attn_tactic *t, int64_t d);

/* Bytes of device workspace cuda_fused_launch needs for tactic t on shape s:
 * the split-KV partial outputs and log-sum-exps (f32) of `fused_splitkv` and
 * of the folded sm90a `fused` tactics with splits > 1, and what else an
 * sm90a tactic needs (cuda_fused_sm90a_workspace_bytes: e4m3's V^T, the
 * cut last wave's partials, a persistent grid's counter); 0 otherwise. */
size_t cuda_fused_workspace_bytes(const attn_shape *s, const attn_tactic *t);

/* Enqueue tactic t for shape s on stream: o = softmax(q k^T / sqrt(d)) v with
 * the shape's masks. Asynchronous, no allocation and no synchronisation, so
 * it can be captured in a CUDA graph. workspace holds at least
 * cuda_fused_workspace_bytes(s, t) bytes (may be NULL when that is 0).
 * Returns 0; ATTUNE_EUNSUPP when the tactic or shape is not one these
 * kernels run (f32, d > 256, d % 8 != 0, an unknown tile); ATTUNE_EINVAL on
 * bad arguments (NULL pointers, padded lengths shorter than the real ones);
 * ATTUNE_EGPU when the launch fails. Only the real rows of o are written. */
int cuda_fused_launch(const attn_shape *s, const attn_tactic *t,
                      const void *q, const void *k, const void *v, void *o,
                      int64_t sq_pad, int64_t skv_pad, /* rows in the buffers */
                      void *workspace, cudaStream_t stream);

/* cuda_fused_launch on views (kernels/attn.h attn_tensor): element
 * (bi, h, i, c) of each tensor at data + bi*sb + h*sh + i*ss + c, so
 * [b, s, h, d] and cache-backed views run in place. s holds this call's
 * lengths (io's are not read); sq_rows and skv_rows are the rows readable
 * per head in the q/o and k/v views (the real lengths, or the padded ones
 * of a plan's padded copies: rows up to the next tile are read without
 * predicates only when these cover them). Views must be 16-byte aligned
 * with strides in whole 16-byte units and row strides >= d (the cp.async
 * rows; the sm90a kernels' TMA needs the same): ATTUNE_EINVAL otherwise. */
int cuda_fused_launch_views(const attn_shape *s, const attn_tactic *t, const attn_io *io,
                            int64_t sq_rows, int64_t skv_rows, void *workspace,
                            cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
