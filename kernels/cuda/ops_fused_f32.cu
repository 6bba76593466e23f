/* ops_fused_f32.cu -- how the CUDA backend drives the fused f32 kernel
 * (kernels/variant.h kernel ops of `fused/acc=f32`, described in
 * desc_fused_f32.c, run by cuda_fused_f32.cu). Listing:
 * cuda_fused_f32_tactics for the device's compute capability. A plan holds
 * nothing of its own; a call launches on the views in place: the kernel
 * reads any non-negative strides (float4s where aligned), so no layout
 * copy is ever needed, and pad 1 is the only pad it lists. */
#include <stdio.h>
#include <string.h>

#include "cuda_fused_f32.h"
#include "cuda_internal.cuh"

static int list_f32(const attn_device_info *dev, const attn_shape *s, attn_tactic *out, int max)
{
    if (max <= 0 || out == NULL)
        return 0;
    return cuda_fused_f32_tactics(s, dev->cc_major, dev->cc_minor, out, max);
}

/* A listed tactic only: a tile not built for this head dim, one that does
 * not fit this device's shared memory, or a pad other than 1 is refused
 * with the reason in note. */
static int plan_f32(attn_plan *p, const attn_call *c, char *note, size_t notelen)
{
    (void)c;
    int cmaj = 0, cmin = 0;
    if (cudaDeviceGetAttribute(&cmaj, cudaDevAttrComputeCapabilityMajor, p->dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&cmin, cudaDevAttrComputeCapabilityMinor, p->dev) != cudaSuccess)
        return ATTUNE_EGPU;
    if (cuda_fused_f32_listed(&p->s, cmaj, cmin, &p->t))
        return 0;
    if (note != NULL && notelen > 0) {
        if (p->t.pad != 1)
            snprintf(note, notelen,
                     "fused/acc=f32 runs at pad=1 only (its loads are predicated on the real "
                     "lengths)");
        else
            snprintf(note, notelen,
                     "fused/acc=f32: no tile %dx%d/warps=%d for f32 d=%lld on sm_%d%d "
                     "(cuda_fused_f32.h)",
                     p->t.tile_m, p->t.tile_n, p->t.warps, (long long)p->s.d, cmaj, cmin);
    }
    return ATTUNE_EUNSUPP;
}

static int run_f32(attn_plan *p, const attn_call *c)
{
    attn_io io;
    memset(&io, 0, sizeof io);
    io.q = c->q, io.k = c->k, io.v = c->v, io.o = c->o;
    return cuda_fused_f32_launch(&c->s, &p->t, &io, c->stream);
}

static void free_f32(attn_plan *p)
{
    (void)p; /* no state of its own */
}

/* Any views attn_io_check passed (non-negative strides): the kernel takes
 * 4-byte copies where float4s do not fit. */
static int reads_f32(const attn_plan *p, const attn_call *c)
{
    (void)p;
    const attn_tensor *v[4] = {&c->q, &c->k, &c->v, &c->o};
    for (int i = 0; i < 4; i++)
        if (v[i]->sb < 0 || v[i]->sh < 0 || v[i]->ss < 0)
            return 0;
    return 1;
}

extern "C" const attn_kernel_ops cuda_fused_f32_ops = {
    1, 0, list_f32, plan_f32, run_f32, free_f32, reads_f32, NULL, NULL, NULL,
};
