/* ops_cudnn.cu -- how the CUDA backend drives cuDNN's SDPA (kernels/variant.h
 * kernel ops of the family desc_cudnn.c describes; the cuDNN calls are
 * kernels/cuda/cuda_cudnn.c's). A plan holds a cached execution plan
 * built for its padded lengths and the planned contiguous layout, and,
 * once told the strides of its runs (plan_views), a second one that reads
 * and writes them in place; its lengths are fixed; sessions build their
 * shape's plans ahead (warm). Compiled only with cuDNN (ATTUNE_HAVE_CUDNN):
 * without it the family is described but not built. */
#ifdef ATTUNE_HAVE_CUDNN
#include <limits.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include <cuda_fp8.h>

#include "cuda_cudnn.h"
#include "cuda_internal.cuh"

static int list_cudnn(const attn_device_info *dev, const attn_shape *s, attn_tactic *out, int max)
{
    if (max <= 0 || out == NULL)
        return 0;
    int n = cuda_cudnn_tactics(dev->index, s, out, max);
    return n > 0 ? n : 0;
}

/* The second stream and events of a plan whose cuDNN plan d runs in
 * chunks (cuda_cudnn_launch), made once; nothing for one chunk. */
static int cudnn_fork_make(attn_plan *p, const cuda_cudnn_plan *d)
{
    if (cuda_cudnn_chunks(d) <= 1 || p->dnn_side != NULL)
        return 0; /* all three are made together, or none */
    cudaStream_t side = NULL;
    cudaEvent_t fork = NULL, join = NULL;
    if (cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking) != cudaSuccess ||
        cudaEventCreateWithFlags(&fork, cudaEventDisableTiming) != cudaSuccess ||
        cudaEventCreateWithFlags(&join, cudaEventDisableTiming) != cudaSuccess) {
        cudaGetLastError();
        if (join != NULL)
            cudaEventDestroy(join);
        if (fork != NULL)
            cudaEventDestroy(fork);
        if (side != NULL)
            cudaStreamDestroy(side);
        return ATTUNE_EGPU;
    }
    p->dnn_side = side;
    p->dnn_fork = fork;
    p->dnn_join = join;
    return 0;
}

/* The execution plan of the tactic for the plan's padded lengths (built
 * on first use, or ahead by warm), and its workspace. note says what its
 * build cost (once per shape, tactic and process, not per call: it rides
 * in the measurement's note) or why cuDNN refused it. */
static int cudnn_plan(attn_plan *p, const attn_call *c, char *note, size_t notelen)
{
    (void)c;
    int rc = 0;
    char dnote[128] = "";
    rc = cuda_cudnn_plan_get(p->dev, &p->s, &p->t, p->sq_pad, p->skv_pad, &p->dnn, NULL, dnote,
                             sizeof dnote);
    if (note != NULL && notelen > 0)
        snprintf(note, notelen, "%s", dnote);
    if (rc != 0)
        return rc;
    p->dnn_ws_bytes = cuda_cudnn_workspace_bytes(p->dnn);
    if (p->dnn_ws_bytes > 0)
        RC_TRY(cuda_dev_alloc(&p->dnn_ws, p->dnn_ws_bytes));
    RC_TRY(cudnn_fork_make(p, p->dnn));
    return 0;
fail:
    return rc;
}

static int same_strides(const attn_tensor *a, const attn_tensor *b)
{
    return a->sb == b->sb && a->sh == b->sh && a->ss == b->ss;
}

/* Does call c run at p's planned lengths on views at the strides p's
 * cuDNN graph of views was built for (attn_ops.plan_views)? */
static int views_adopted(const attn_plan *p, const attn_call *c)
{
    return p->dnn_views != NULL && c->s.sq == p->s.sq && c->s.skv == p->s.skv &&
           c->sqp == p->s.sq && c->skvp == p->s.skv && same_strides(&c->q, &p->views.q) &&
           same_strides(&c->k, &p->views.k) && same_strides(&c->v, &p->views.v) &&
           same_strides(&c->o, &p->views.o);
}

/* ATTUNE_CUDNN_WS_FILL=zero or nan: the plan's workspace (cuDNN's own and,
 * for FP8, the FP8 O after it) filled with 0x00 or 0xff bytes (NaN in
 * f32, bf16 and e4m3) before every launch, timed with it. A diagnostic for
 * an engine whose output depends on what the workspace held (engine 2's
 * FP8 kcfg=0 and 8 were right in some tunes of a shape and 11-12x off in
 * others, docs/cudnn.md); unset, nothing is filled. -1: off. */
static int ws_fill_read(void)
{
    const char *e = getenv("ATTUNE_CUDNN_WS_FILL");
    return e == NULL ? -1 : strcmp(e, "zero") == 0 ? 0x00 : strcmp(e, "nan") == 0 ? 0xff : -1;
}

static int ws_fill_byte(void)
{
    static const int fill = ws_fill_read(); /* read once (C++: initialised once, thread-safe) */
    return fill;
}

static int cudnn_run(attn_plan *p, const attn_call *c)
{
    const cuda_cudnn_fork fk = {p->dnn_side, p->dnn_fork, p->dnn_join};
    const int fill = ws_fill_byte();
    if (fill >= 0 && p->dnn_ws != NULL &&
        cudaMemsetAsync(p->dnn_ws, fill, p->dnn_ws_bytes, c->stream) != cudaSuccess)
        return ATTUNE_EGPU;
    return cuda_cudnn_launch(views_adopted(p, c) ? p->dnn_views : p->dnn, c->q.data, c->k.data,
                             c->v.data, c->o.data, c->descale, p->dnn_ws, c->stream, &fk);
}

/* out (bf16) <- FP8 O times descale_v; the rows before q0, and any past
 * q0 + sqv, zero. One
 * thread per 16 elements of a row (d is a multiple of 16 for FP8 graphs):
 * one 16-byte load (the workspace is 256-aligned, its rows d bytes), two
 * 16-byte stores where out's row is 16-byte aligned. It is memory-bound
 * (8k d128: 34 MB read, 67 MB written) once its index math is 32-bit and
 * per 16 elements: the form with 64-bit divisions per 8 elements spent
 * more on them than on the bytes. rows = b hq q_rows, under 2^31 (the
 * caller checks). */
__global__ void fp8_out_kernel(__nv_bfloat16 *out, int64_t sb, int64_t sh, int64_t ss,
                               const __nv_fp8_e4m3 *o8, int hq, int q_rows, int q0, int sqv,
                               int d, const float *descale_v, int rows)
{
    const int cpr = d / 16; /* 16-element chunks per row */
    const int i = (int)blockIdx.x * (int)blockDim.x + (int)threadIdx.x;
    if (i >= rows * cpr)
        return;
    const int row = i / cpr, c = (i - row * cpr) * 16;
    const int bh = row / q_rows, r = row - bh * q_rows;
    const int bi = bh / hq, h = bh - bi * hq;
    __nv_bfloat16 *dst = out + bi * sb + h * sh + r * ss + c;
    const float dv = descale_v != NULL ? *descale_v : 1.0f;
    union {
        uint4 w;
        __nv_fp8_e4m3 x[16];
    } in;
    union {
        uint4 w[2];
        __nv_bfloat16 y[16];
    } res;
    in.w = make_uint4(0, 0, 0, 0); /* rows before q0 (and past the graph's): zeros */
    if (r >= q0 && r - q0 < sqv)
        in.w = *(const uint4 *)(o8 + ((int64_t)bh * sqv + (r - q0)) * d + c);
#pragma unroll
    for (int u = 0; u < 16; u++)
        res.y[u] = __float2bfloat16_rn((float)in.x[u] * dv);
    if (((uintptr_t)dst & 15) == 0) {
        ((uint4 *)dst)[0] = res.w[0];
        ((uint4 *)dst)[1] = res.w[1];
    } else {
#pragma unroll
        for (int u = 0; u < 16; u++)
            dst[u] = res.y[u];
    }
}

extern "C" int cuda_cudnn_fp8_out(void *out, const int64_t st[3], const void *o8, int64_t b,
                                  int64_t hq, int64_t q_rows, int64_t q0, int64_t sqv, int64_t d,
                                  const float *descale_v, cudaStream_t stream)
{
    int rc = 0;
    const int64_t rows = b * hq * q_rows, n16 = rows * (d / 16);
    if (d % 16 != 0 || q0 + sqv > q_rows || n16 > INT_MAX)
        return ATTUNE_EINVAL;
    if (n16 == 0)
        return 0;
    CU_TRY(cu_launch(fp8_out_kernel, (unsigned)((n16 + 255) / 256), 256, 0, stream,
                     (__nv_bfloat16 *)out, st[0], st[1], st[2], (const __nv_fp8_e4m3 *)o8, (int)hq,
                     (int)q_rows, (int)q0, (int)sqv, (int)d, descale_v, (int)rows));
    return 0;
fail:
    return rc;
}

static void cudnn_free(attn_plan *p)
{
    cuda_cudnn_plan_put(p->dnn);
    cuda_cudnn_plan_put(p->dnn_views);
    p->dnn = p->dnn_views = NULL;
    cudaFree(p->dnn_ws);
    p->dnn_ws = NULL;
    p->dnn_ws_bytes = 0;
    if (p->dnn_side != NULL)
        cudaStreamDestroy(p->dnn_side);
    if (p->dnn_fork != NULL)
        cudaEventDestroy(p->dnn_fork);
    if (p->dnn_join != NULL)
        cudaEventDestroy(p->dnn_join);
    p->dnn_side = NULL;
    p->dnn_fork = p->dnn_join = NULL;
}

/* The views its graph of views was built for, or the planned contiguous
 * layout at the planned (padded) rows. */
static int cudnn_reads(const attn_plan *p, const attn_call *c)
{
    return views_adopted(p, c) ||
           (c->sqp == p->sq_pad && c->skvp == p->skv_pad &&
            attn_tensor_contiguous(&c->q, c->s.hq, c->sqp, c->s.d) &&
            attn_tensor_contiguous(&c->o, c->s.hq, c->sqp, c->s.d) &&
            attn_tensor_contiguous(&c->k, c->s.hkv, c->skvp, c->s.d) &&
            attn_tensor_contiguous(&c->v, c->s.hkv, c->skvp, c->s.d));
}

static void cudnn_warm(int index, const attn_shape *s)
{
    cuda_cudnn_prefetch(index, s); /* plans build while other families are measured */
}

static void cudnn_cool(int index, const attn_shape *s)
{
    cuda_cudnn_prefetch_cancel(index, s);
}

/* Contract in variant.h (attn_kernel_ops.plan_views): cuDNN's graphs fix
 * the strides they read, so a graph for views' strides is built. */
static int cudnn_plan_views(attn_plan *p, const attn_io *views, void *stream, char *note,
                            size_t notelen)
{
    int rc = 0, prev = -1;
    cuda_cudnn_plan *dv = NULL;
    void *ws = NULL;
    if (p->sq_pad != p->s.sq || p->skv_pad != p->s.skv) {
        if (note != NULL && notelen > 0)
            snprintf(note, notelen, "a padded cudnn tactic runs on its own padded copies");
        return ATTUNE_EUNSUPP;
    }
    if (p->dnn_views != NULL && same_strides(&views->q, &p->views.q) &&
        same_strides(&views->k, &p->views.k) && same_strides(&views->v, &p->views.v) &&
        same_strides(&views->o, &p->views.o))
        return 0;
    cudaGetDevice(&prev);
    CU_TRY(cudaSetDevice(p->dev));
    RC_TRY(cuda_cudnn_plan_get_views(p->dev, &p->s, &p->t, views, &dv, NULL, note, notelen));
    if (cuda_cudnn_workspace_bytes(dv) > p->dnn_ws_bytes) {
        RC_TRY(cuda_dev_alloc(&ws, cuda_cudnn_workspace_bytes(dv)));
        CU_TRY(cudaStreamSynchronize((cudaStream_t)stream)); /* runs in flight use the old */
        cudaFree(p->dnn_ws);
        p->dnn_ws = ws;
        p->dnn_ws_bytes = cuda_cudnn_workspace_bytes(dv);
        ws = NULL;
    }
    RC_TRY(cudnn_fork_make(p, dv));
    cuda_cudnn_plan_put(p->dnn_views);
    p->dnn_views = dv;
    p->views = *views;
    dv = NULL;
fail:
    cuda_cudnn_plan_put(dv);
    cudaFree(ws);
    if (prev >= 0)
        cudaSetDevice(prev);
    return rc;
}

/* strided: no (its graphs fix strides); fixed lengths: a cuDNN graph is
 * built for its lengths. */
extern "C" const attn_kernel_ops cuda_cudnn_ops = {
    0, 1, list_cudnn, cudnn_plan, cudnn_run, cudnn_free, cudnn_reads, cudnn_warm, cudnn_cool,
    cudnn_plan_views,
};
#endif
