/* cuda_fused_f32.h -- the fused f32 kernel (`fused/acc=f32/...`,
 * cuda_fused_f32.cu): its configurations, shared memory and registers,
 * read by the kernel that is built from them and by its descriptor
 * (desc_fused_f32.c), and its launcher as the kernel ops (ops_fused_f32.cu)
 * and tests call it.
 *
 * Plain C, no CUDA header: a host without CUDA costs these tactics from an
 * imported table. The macros are constant expressions, so the kernel's
 * templates use them for their launch sizes. */
#ifndef CUDA_FUSED_F32_H
#define CUDA_FUSED_F32_H

#include <stddef.h>
#include <stdint.h>

#include "../attn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- configurations
 *
 * X(D, BR, BC, NW, CG, MINB): head dim bucket D, BR query rows and BC keys
 * per tile, NW warps, CG threads per row group (the lanes that share a
 * query row: they split its BC keys in S and its D columns in O), MINB
 * the blocks per SM the kernel is built for (__launch_bounds__: ptxas keeps
 * registers within 65536 / (32 NW MINB)). A tactic names the first four
 * (tile=BRxBC, warps=NW); CG and MINB belong to the configuration. A
 * thread holds TM x TN scores and TM x TD outputs (F32_TM, F32_TN, F32_TD
 * below); outside the 16-row tiles TM >= 2, so every float4 read from
 * shared memory feeds >= 8 FFMAs (cuda_fused_f32.cu, the kernel's comment).
 * MINB is what shared memory allows on an H200 where registers allow it
 * without spills, else the most that does not spill (ptxas 13.0, sm_90:
 * MINB = 2 spilled 20-68 bytes on the 128-row tiles, 5 and 6 spilled 8-44
 * on the 16- and 32-row d <= 64 ones). Registers (ptxas -v, float4 /
 * 4-byte form) and blocks per SM on an H200 (228 KB, 1 KB reserved per
 * block, 64 K registers, 2048 threads):
 *
 *   D    tile/warps  CG  TM TN TD  smem    MINB  registers  H200  for
 *   32   16x64/4     8   1  8  4    25 KB  4     122 / 128  4     decode, short query blocks
 *   32   32x64/4     8   2  8  4    32 KB  4     128 / 128  4
 *   32   64x64/4     8   4  8  4    45 KB  3     168 / 168  3
 *   32   128x64/8    8   4  8  4    72 KB  1     168 / 168  1     K/V read once per 128 rows
 *   64   16x64/4     8   1  8  8    43 KB  4     128 / 128  4
 *   64   32x64/4     8   2  8  8    52 KB  4     128 / 128  4
 *   64   64x64/4     8   4  8  8    69 KB  3     168 / 168  3     encoders (PyTorch's tile)
 *   64   128x64/8    8   4  8  8   104 KB  1     168 / 204  1
 *   128  16x64/4     16  2  4  8    79 KB  2     128 / 182  2
 *   128  32x64/4     16  4  4  8    92 KB  2     168 / 220  2
 *   128  64x32/4     8   4  4  16   76 KB  2     206 / 236  2
 *   128  64x64/8     16  4  4  8   119 KB  1     168 / 188  1
 *   256  16x32/4     16  2  2  16   84 KB  2     152 / 132  2
 *   256  32x32/4     16  4  2  16  104 KB  2     212 / 168  2
 *   256  64x32/8     16  4  2  16  142 KB  1     206 / 232  1
 *
 * Each configuration is listed on a device whose per-block shared memory
 * holds it (attn_sm_limits_of): all on 8.0, 8.7, 9.0, 10.x and 11.0; on
 * 8.6, 8.9 and 12.x (99 KB) all but 64:128x64/8, 128:64x64/8, 256:32x32/4
 * and 256:64x32/8. */
#define F32_CONFIGS(X)                                                                         \
    X(32, 16, 64, 4, 8, 4) X(32, 32, 64, 4, 8, 4) X(32, 64, 64, 4, 8, 3)                       \
    X(32, 128, 64, 8, 8, 1) X(64, 16, 64, 4, 8, 4) X(64, 32, 64, 4, 8, 4)                      \
    X(64, 64, 64, 4, 8, 3) X(64, 128, 64, 8, 8, 1) X(128, 16, 64, 4, 16, 2)                    \
    X(128, 32, 64, 4, 16, 2) X(128, 64, 32, 4, 8, 2) X(128, 64, 64, 8, 16, 1)                  \
    X(256, 16, 32, 4, 16, 2) X(256, 32, 32, 4, 16, 2) X(256, 64, 32, 8, 16, 1)

/* Head dim the kernel computes for d: the next of 32, 64, 128, 256
 * (columns past d are zero-filled in shared memory and never written); 0
 * over 256. */
#define F32_KERNEL_DIM(d)                                                                      \
    ((d) <= 32 ? 32 : (d) <= 64 ? 64 : (d) <= 128 ? 128 : (d) <= 256 ? 256 : 0)

/* Per-thread blocking of a configuration: rows TM (strided by the row
 * groups), keys TN of S (strided by CG), columns TD of O (float4 chunks
 * strided by 4 * CG). */
#define F32_TM(BR, NW, CG) ((BR) * (CG) / (32 * (NW)))
#define F32_TN(BC, CG) ((BC) / (CG))
#define F32_TD(D, CG) ((D) / (CG))

/* Shared memory, floats: Q (BR rows), K and V (BC rows each), rows of D
 * floats padded by 4 (a 16-byte chunk: consecutive rows start on
 * consecutive 16-byte bank slots); then P, BR rows of BC floats padded by
 * CG (the row groups of a warp start CG banks apart). */
#define F32_ROW(D) ((D) + 4)
#define F32_PROW(BC, CG) ((BC) + (CG))
#define F32_SMEM(D, BR, BC, CG)                                                                \
    ((size_t)(((BR) + 2 * (BC)) * F32_ROW(D) + (BR) * F32_PROW(BC, CG)) * sizeof(float))

/* Registers per thread for the cost model: the launch bound's budget,
 * 65536 / (32 NW MINB), at most 255. ptxas's counts (the table above) are
 * at or under it, and where they are under, shared memory or threads
 * already limit the blocks per SM to MINB or fewer: costed so, every
 * configuration's blocks per SM on an H200 are the table's. */
#define F32_REGS(NW, MINB)                                                                     \
    (65536 / (32 * (NW) * (MINB)) < 255 ? 65536 / (32 * (NW) * (MINB)) : 255)

/* ---- the launcher */

/* Tactics of the fused f32 kernel for shape s on a device of compute
 * capability cc_major.cc_minor, into out[0..max): one per configuration
 * of s's head dim bucket that fits the device's shared memory per block,
 * at pad 1 only (loads are predicated on the real lengths: a pad would add
 * copies and change nothing in the kernel). 0 when none apply: not f32, d
 * over 256, compute capability under 8.0 (cp.async). Stops at max. */
int cuda_fused_f32_tactics(const attn_shape *s, int cc_major, int cc_minor, attn_tactic *out,
                           int max);

/* 1 when t is one of the tactics cuda_fused_f32_tactics lists for s on
 * cc_major.cc_minor. */
int cuda_fused_f32_listed(const attn_shape *s, int cc_major, int cc_minor, const attn_tactic *t);

/* Enqueue tactic t on views io (element (bi, h, i, c) of each at data +
 * bi*sb + h*sh + i*ss + c, f32) with this call's lengths s->sq, s->skv
 * (io's lengths are not read), on stream (a cudaStream_t). Any
 * non-negative strides: 16-byte aligned views with strides in whole
 * float4s and d % 4 == 0 take float4 loads and stores, any other the
 * scalar form of the same kernel. Writes the real rows' d columns of o,
 * nothing else. Asynchronous, no allocation: capturable. Returns 0;
 * ATTUNE_EINVAL (NULL pointers, hq % hkv, lengths or strides out of
 * range); ATTUNE_EUNSUPP (not f32, no such configuration for this head
 * dim, acc other than f32, a key this kernel does not take); ATTUNE_EGPU
 * (the launch failed). */
int cuda_fused_f32_launch(const attn_shape *s, const attn_tactic *t, const attn_io *io,
                          void *stream);

#ifdef __cplusplus
}
#endif

#endif
