/* cuda_profile.h -- stage timings of the CUDA backend's GEMM variants, for
 * benchmarks (tests/gpu/bench_split.c, bench/peers.py). Not part of
 * attn_ops: the tuner never needs it. */
#ifndef CUDA_PROFILE_H
#define CUDA_PROFILE_H

#include "../attn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Time each stage of plan p (a split, split_repeat or folded plan of
 * attn_cuda_ops) alone, as `iters` back-to-back runs in one CUDA graph
 * replay after one untimed replay: us[0] the QK^T GEMMs, us[1] the softmax,
 * us[2] the PV GEMMs, us[3] the repeat_kv copies (0 unless split_repeat);
 * microseconds per call, pad copies excluded. Runs the whole plan once
 * first. Returns 0, ATTUNE_EINVAL (not a GEMM plan, iters < 1), EGPU or
 * EBLAS. */
int cuda_split_profile(attn_plan *p, int iters, double us[4]);

#ifdef __cplusplus
}
#endif

#endif
