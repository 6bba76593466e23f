/* dtype_device.h -- which dtypes a device can run at all.
 *
 * FP8 (e4m3) needs FP8 tensor cores: a CUDA device of compute capability
 * 8.9 or later (Ada, Hopper, Blackwell), not Ampere (8.0, 8.6) nor the
 * Jetson Orin (8.7). The CUDA backend lists no e4m3 tactic below 8.9;
 * attuned answers a lookup or a tune of an e4m3 shape on such a device
 * with this reason instead of queueing a tune that would find nothing
 * (issue 30 item 5). The CPU emulates e4m3 (kernels/cpu), so it runs it.
 * The 16- and 32-bit dtypes run everywhere. */
#ifndef ATTUNE_DTYPE_DEVICE_H
#define ATTUNE_DTYPE_DEVICE_H

#include <stddef.h>

#include "device_id.h"
#include "shape.h"

/* The first compute capability with FP8 tensor cores, as major * 10 + minor. */
#define DTYPE_FP8_MIN_CC 89

/* 1 when device d (a description: local, or known from a table) can run
 * dtype t; 0 with why (may be NULL) saying which device and why not. */
int dtype_device_runs(const attn_device_info *d, attn_dtype t, char *why, size_t whylen);

#endif
