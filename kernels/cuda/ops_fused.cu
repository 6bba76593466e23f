/* ops_fused.cu -- how the CUDA backend drives the fused kernels
 * (kernels/variant.h kernel ops of the families described in
 * desc_fused.c): version 1 (`fused` tiles), version 3 (`fused/arch=sm90a`)
 * and version 2 (`fused_splitkv`). Listing: cuda_fused_tactics, each
 * family keeping the tactics it owns (v1, then sm90a, then split-KV, as
 * that function lists them). A plan holds the split tactics' partials
 * workspace; a call launches on the views in place (any 16-byte strides)
 * or on the plan's copies. */
#include <stdlib.h>
#include <string.h>

#include "cuda_fused.h"
#include "cuda_fused_common.cuh"
#include "cuda_internal.cuh"

#define MAX_FUSED_TACTICS 512

extern "C" const attn_variant_desc attn_cuda_fused, attn_cuda_fused_sm90a, attn_cuda_fused_splitkv;

/* The fused tactics of s on dev that family f owns, into out[0..max).
 * Returns the count written. */
static int list_owned(const attn_variant_desc *f, const attn_device_info *dev,
                      const attn_shape *s, attn_tactic *out, int max)
{
    if (max <= 0 || out == NULL)
        return 0;
    attn_tactic *all = (attn_tactic *)malloc(MAX_FUSED_TACTICS * sizeof *all);
    if (all == NULL)
        return ATTUNE_ENOMEM;
    int n = cuda_fused_tactics(s, dev->cc_major, dev->cc_minor, all, MAX_FUSED_TACTICS), k = 0;
    for (int i = 0; i < n && k < max; i++)
        if (f->owns(&all[i]))
            out[k++] = all[i];
    free(all);
    return k;
}

static int list_v1(const attn_device_info *dev, const attn_shape *s, attn_tactic *out, int max)
{
    return list_owned(&attn_cuda_fused, dev, s, out, max);
}

static int list_sm90a(const attn_device_info *dev, const attn_shape *s, attn_tactic *out, int max)
{
    return list_owned(&attn_cuda_fused_sm90a, dev, s, out, max);
}

static int list_splitkv(const attn_device_info *dev, const attn_shape *s, attn_tactic *out,
                        int max)
{
    return list_owned(&attn_cuda_fused_splitkv, dev, s, out, max);
}

/* 1 when t is among the fused tactics listed for shape s on device dev:
 * a configuration not built for this head dim, or one this architecture
 * does not get, is refused at plan time. */
static int fused_listed(int dev, const attn_shape *s, const attn_tactic *t)
{
    attn_tactic *list;
    int cmaj = 0, cmin = 0, n, found = 0;
    if (cudaDeviceGetAttribute(&cmaj, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&cmin, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
        return 0;
    list = (attn_tactic *)malloc(MAX_FUSED_TACTICS * sizeof *list);
    if (list == NULL)
        return 0;
    n = cuda_fused_tactics(s, cmaj, cmin, list, MAX_FUSED_TACTICS);
    for (int i = 0; i < n && !found; i++)
        found = list[i].variant == t->variant && list[i].pad == t->pad &&
                list[i].acc == t->acc && list[i].tile_m == t->tile_m &&
                list[i].tile_n == t->tile_n && list[i].splits == t->splits &&
                list[i].warps == t->warps && list[i].arch == t->arch &&
                list[i].stages == t->stages && list[i].fold == t->fold &&
                list[i].persist == t->persist;
    free(list);
    return found;
}

/* A listed tactic, and the split partials' workspace. */
static int fused_plan(attn_plan *p, const attn_call *c, char *note, size_t notelen)
{
    (void)c, (void)note, (void)notelen;
    int rc = 0;
    if (!fused_listed(p->dev, &p->s, &p->t))
        return ATTUNE_EUNSUPP;
    p->fused_ws_bytes = cuda_fused_workspace_bytes(&p->s, &p->t);
    if (p->fused_ws_bytes > 0)
        RC_TRY(cuda_dev_alloc(&p->fused_ws, p->fused_ws_bytes));
    return 0;
fail:
    return rc;
}

static int fused_run(attn_plan *p, const attn_call *c)
{
    attn_io views;
    memset(&views, 0, sizeof views);
    views.q = c->q, views.k = c->k, views.v = c->v, views.o = c->o;
    for (int i = 0; i < 3; i++)
        views.descale[i] = c->descale[i];
    return cuda_fused_launch_views(&c->s, &p->t, &views, c->sqp, c->skvp, p->fused_ws, c->stream);
}

static void fused_free(attn_plan *p)
{
    cudaFree(p->fused_ws);
    p->fused_ws = NULL;
    p->fused_ws_bytes = 0;
}

/* 1 when tensors a (q or o) and b (k or v) suit the fused kernels
 * (16-byte aligned, strides in 16-byte units, row strides >= d). */
static int fused_views(const attn_shape *s, const attn_tensor *a, const attn_tensor *b)
{
    attn_io io;
    memset(&io, 0, sizeof io);
    io.q = io.o = *a;
    io.k = io.v = *b;
    return cuda_fused_views_ok(s, &io);
}

/* Versions 1 and 2 read K and V at one set of strides. */
static int reads_v1(const attn_plan *p, const attn_call *c)
{
    (void)p;
    return fused_views(&c->s, &c->q, &c->o) && fused_views(&c->s, &c->k, &c->v) &&
           c->k.sb == c->v.sb && c->k.sh == c->v.sh && c->k.ss == c->v.ss;
}

/* Version 3's TMA maps take each tensor's strides. */
static int reads_sm90a(const attn_plan *p, const attn_call *c)
{
    (void)p;
    return fused_views(&c->s, &c->q, &c->o) && fused_views(&c->s, &c->k, &c->v);
}

extern "C" const attn_kernel_ops cuda_fused_ops = {
    1, 0, list_v1, fused_plan, fused_run, fused_free, reads_v1, NULL, NULL, NULL,
};
extern "C" const attn_kernel_ops cuda_fused_sm90a_ops = {
    1, 0, list_sm90a, fused_plan, fused_run, fused_free, reads_sm90a, NULL, NULL, NULL,
};
extern "C" const attn_kernel_ops cuda_fused_splitkv_ops = {
    1, 0, list_splitkv, fused_plan, fused_run, fused_free, reads_v1, NULL, NULL, NULL,
};
