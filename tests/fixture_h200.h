/* fixture_h200.h -- the H200 device and stack the store and fleet tests
 * record their rows under (one GPU, one driver per call: two drivers make
 * two stacks of one device). Header-only, like test.h. */
#ifndef ATTUNE_FIXTURE_H200_H
#define ATTUNE_FIXTURE_H200_H

#include <stdio.h>
#include <string.h>

#include "common/device_id.h"

/* d: an H200 (132 SMs, 143,771 MiB); s: its stack with driver `driver`
 * (CUDA 12.4, cuBLAS 12.4.5.8), finished (s->id set). */
static inline void fixture_h200(attn_device_info *d, attn_stack *s, const char *driver)
{
    memset(d, 0, sizeof *d);
    snprintf(d->id, sizeof d->id, "GPU-2f6c3a1e-8b7d-4c5e-9a0b-1c2d3e4f5a6b");
    snprintf(d->name, sizeof d->name, "NVIDIA H200");
    snprintf(d->kind, sizeof d->kind, "cuda");
    d->index = 0;
    d->cc_major = 9;
    d->cc_minor = 0;
    d->sm_count = 132;
    d->memory_mb = 143771;
    d->clock_mhz = 1980;
    d->mem_clock_mhz = 3201;
    memset(s, 0, sizeof *s);
    snprintf(s->driver, sizeof s->driver, "%s", driver);
    snprintf(s->runtime, sizeof s->runtime, "12.4");
    snprintf(s->blas, sizeof s->blas, "12.4.5.8");
    snprintf(s->attune, sizeof s->attune, "0.1.0");
    snprintf(s->kernels, sizeof s->kernels, "3f1c0d2a9b8e7f60");
    attn_stack_finish(s);
}

#endif
