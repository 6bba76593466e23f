/* fp8_chunks.h -- how many chunks an e4m3 cuDNN graph whose O is written in
 * FP8 runs in (kernels/cuda/cuda_cudnn.c; docs/cudnn.md "Chunks"): the
 * rule alone, plain C and free of CUDA, so the CPU tests check it. */
#ifndef FP8_CHUNKS_H
#define FP8_CHUNKS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The chunk count (1, 2, 4 or 8) of a graph over b batches, hq query and
 * hkv KV heads (hq a multiple of hkv) of sqv query rows, on a device of
 * sms multiprocessors (0: unknown), and *by_heads: 1 when the chunks cut
 * the heads (hq and hkv alike), 0 when they cut the batches (or there is
 * one chunk). By default the largest of 4 and 2 that divides b or hkv and
 * leaves each chunk at least two waves of 128-row tiles (b hq
 * ceil(sqv / 128) / n >= 2 sms); none with sms unknown. want (the text of
 * ATTUNE_CUDNN_FP8_CHUNKS, may be NULL): "1", "2", "4" or "8" asks for
 * that count, or the largest power of two under it that divides b or hkv,
 * whatever the waves; any other text is ignored. Batches are cut when b
 * divides, else heads. */
int attn_fp8_chunks(int64_t b, int64_t hq, int64_t hkv, int64_t sqv, int sms, const char *want,
                    int *by_heads);

#ifdef __cplusplus
}
#endif

#endif
