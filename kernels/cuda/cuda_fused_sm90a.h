/* cuda_fused_sm90a.h -- the Hopper (sm_90a) family of the `fused` variant:
 * tactics `fused/arch=sm90a/...`, as cuda_fused.c lists and launches them.
 * Same layouts, lengths and pad rules as cuda_fused.h; the functions exist
 * only when the build could target sm_90a (ATTUNE_HAVE_SM90A). */
#ifndef CUDA_FUSED_SM90A_H
#define CUDA_FUSED_SM90A_H

#include <stdint.h>

#include <cuda_runtime.h>

#include "../attn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The sm90a kernel configurations for shape s, pad left 0, written to
 * out[0..max): f16/bf16, d a multiple of 8 up to 256 (run on D = 64, 128
 * or 256 with zero columns); e4m3 (SM90_E4M3_CONFIGS), d a multiple of 16
 * up to 128. Each configuration plain, and for g = hq/hkv
 * in {2, 4, 8, 16} also folded (fold=1: the g heads of a KV head share a
 * block's rows) with splits 1, 2, 4, ... while the grid stays small;
 * each unsplit one also persistent (persist=1: one block per SM takes
 * the grid's blocks in turn) where its grid is more than one wave of 132
 * SMs. Returns the count (0: none apply). The caller decides whether the
 * device is one they run on (9.0 only). */
int cuda_fused_sm90a_configs(const attn_shape *s, attn_tactic *out, int max);

/* Enqueue tactic t (variant fused, arch sm90a) on stream; contract of
 * cuda_fused_launch_views (workspace: cuda_fused_workspace_bytes(s, t),
 * needed by folded tactics with splits > 1). The views become 4-d TMA maps
 * (d, rows, heads, batch), so any strides in whole 16-byte units run.
 * ATTUNE_EUNSUPP also when the current device is not compute capability
 * 9.0, for fold=1 where g is not one of 2, 4, 8, 16, or persist=1 with key
 * splits; ATTUNE_EINVAL for views not 16-byte aligned (TMA) or a missing
 * workspace (persist=1 always needs one: its items' counter). */
int cuda_fused_sm90a_launch(const attn_shape *s, const attn_tactic *t, const attn_io *io, int64_t sq_rows,
                            int64_t skv_rows, void *workspace, cudaStream_t stream);

/* e4m3 (version 3.5): bytes of the V^T its launch writes into the
 * workspace first (b * hkv * 128 rows of the keys rounded up to 64); 0 for
 * other dtypes. e4m3 tactics: d a multiple of 16 up to 128, q/k/v e4m3
 * with io->descale, o bf16, SM90_E4M3_CONFIGS' tiles, not folded, no
 * splits. */
size_t cuda_fused_sm90a_vt_bytes(const attn_shape *s);

/* Workspace bytes of tactic t (fused, arch sm90a) on s: e4m3's V^T, then
 * the f32 partials of its key splits or of version 3.12's cut last wave
 * (a plain non-causal grid whose last wave is partly empty:
 * cuda_fused_configs.h's sm90_tail_k, planned for SM90_TAIL_SMS SMs),
 * then for persist=1 a 256-byte counter (256-byte aligned); 0 when it
 * needs none. A function of s and t alone (and of
 * ATTUNE_SM90_TAIL, read once: 0 turns the cut off). */
size_t cuda_fused_sm90a_workspace_bytes(const attn_shape *s, const attn_tactic *t);

/* k, the key ranges each block of the last wave is cut into when tactic
 * t runs on s (version 3.12: a plain non-causal grid whose last wave is
 * partly empty), 0 when the launch does not cut; what the launch and the
 * workspace above go by, for tests and tools. */
int cuda_fused_sm90a_cut(const attn_shape *s, const attn_tactic *t);

#ifdef __cplusplus
}
#endif

#endif
