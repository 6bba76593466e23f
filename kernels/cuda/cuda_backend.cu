/* cuda_backend.cu -- the CUDA backend behind kernels/attn.h: sessions,
 * plans, the shared pad/unpad path, CUDA-graph timing and attn_cuda_ops.
 *
 * A session holds one shape's inputs (seeded normal data, generated on the
 * device), the output, one stream, one cuBLAS handle with its own workspace
 * (so cuBLAS never allocates while a graph is captured) and two events.
 * A plan is one tactic on a session: when its pad changes a length it owns
 * padded copies of q/k/v/o, and every variant (the GEMM variants of
 * cuda_split.cu and the fused kernels of cuda_fused.cu) sees padded buffers
 * and the real lengths; pad and unpad are this file's job, once for all.
 *
 * Timing: time() replays a CUDA graph of `iters` back-to-back calls of the
 * plan between two events, so launch gaps do not count; the graph is
 * captured once per (plan, iters, with_copies), cached, and replayed once
 * as a warm-up right after capture. Build: every .cu file of kernels/cuda
 * is globbed into attune_cuda by CMake when nvcc is found. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.cuh"

/* The fused kernels live in cuda_fused.cu (another module); until that
 * file lands, or when built with -DATTUNE_CUDA_NO_FUSED, fused tactics are
 * simply absent. */
#if defined(__has_include)
#if __has_include("cuda_fused.h") && !defined(ATTUNE_CUDA_NO_FUSED)
#include "cuda_fused.h"
#define HAVE_FUSED 1
#endif
#endif
#ifndef HAVE_FUSED
static int cuda_fused_tactics(const attn_shape *, int, int, attn_tactic *, int) { return 0; }
static size_t cuda_fused_workspace_bytes(const attn_shape *, const attn_tactic *) { return 0; }
static int cuda_fused_launch(const attn_shape *, const attn_tactic *, const void *,
                             const void *, const void *, void *, int64_t, int64_t, void *,
                             cudaStream_t)
{
    return ATTUNE_EUNSUPP;
}
#endif

/* The cudnn variant (cuda_cudnn.c, plain C) when CMake found cuDNN;
 * otherwise cudnn tactics are absent and planning one is unsupported. */
#ifdef ATTUNE_HAVE_CUDNN
#include "cuda_cudnn.h"
#else
static int cuda_cudnn_tactics(int, const attn_shape *, attn_tactic *, int) { return 0; }
#endif

/* cuBLAS workspace per session: 32 MiB is what cuBLAS recommends on
 * Hopper; set explicitly so graph capture never makes it allocate. */
#define BLAS_WS_BYTES ((size_t)32 << 20)
#define MAX_FUSED_TACTICS 512

static int is_fused(attn_variant v) { return v == ATTN_FUSED || v == ATTN_FUSED_SPLITKV; }

static int valid_pad(int pad)
{
    for (int i = 0; i < ATTN_NPADS; i++)
        if (attn_pads[i] == pad)
            return 1;
    return 0;
}

/* ---- devices */

static int ops_device_count(void) { return cuda_device_count(); }

static int ops_device_info(int index, attn_device_info *info, attn_stack *stack)
{
    return cuda_device_info(index, info, stack);
}

/* Fused tactics first (from cuda_fused.cu), then the GEMM variants: split
 * always, split_repeat and folded when hkv < hq; acc f16 for f16 data only,
 * f32 always; every pad of attn_pads (docs/tuning.md: a pad that changes no
 * length is still listed and measured, it costs one tactic). Writes at most
 * max tactics, returns the number written. */
static int ops_tactics(int index, const attn_shape *s, attn_tactic *out, int max)
{
    int rc = 0, n = 0, cmaj = 0, cmin = 0;
    char err[ATTUNE_ERRLEN];
    static const attn_variant gemm_variants[] = {ATTN_SPLIT, ATTN_SPLIT_REPEAT, ATTN_FOLDED};

    if (s == NULL || (out == NULL && max > 0) || max < 0)
        return ATTUNE_EINVAL;
    if ((rc = attn_shape_validate(s, err, sizeof err)) != 0)
        return rc;
    if (index < 0 || index >= cuda_device_count())
        return ATTUNE_ENODEV;
    CU_TRY(cudaDeviceGetAttribute(&cmaj, cudaDevAttrComputeCapabilityMajor, index));
    CU_TRY(cudaDeviceGetAttribute(&cmin, cudaDevAttrComputeCapabilityMinor, index));

    if (max > 0) {
        int nf = cuda_fused_tactics(s, cmaj, cmin, out, max);
        n = nf < 0 ? 0 : (nf > max ? max : nf);
    }
    for (size_t vi = 0; vi < sizeof gemm_variants / sizeof gemm_variants[0]; vi++) {
        attn_variant v = gemm_variants[vi];
        if (v != ATTN_SPLIT && s->hkv == s->hq)
            continue;
        for (int acc = ATTN_ACC_F16; acc <= ATTN_ACC_F32; acc++) {
            if (acc == ATTN_ACC_F16 && s->dtype != ATTN_F16)
                continue;
            for (int pi = 0; pi < ATTN_NPADS; pi++) {
                if (n >= max)
                    return n;
                memset(&out[n], 0, sizeof out[n]);
                out[n].variant = v;
                out[n].acc = (attn_acc)acc;
                out[n].pad = attn_pads[pi];
                n++;
            }
        }
    }
    if (n < max) {
        int nd = cuda_cudnn_tactics(index, s, out + n, max - n);
        n += nd > 0 ? nd : 0;
    }
    return n;
fail:
    return rc;
}

/* ---- sessions */

static void ops_session_close(attn_session *ss);

/* Allocate one buffer; ENOMEM when it does not fit. */
static int dev_alloc(void **p, size_t bytes)
{
    int rc = 0;
    CU_TRY(cudaMalloc(p, bytes));
    return 0;
fail:
    *p = NULL;
    return rc;
}

/* Buffers for s on device index, inputs filled from seed (q, k, v draw
 * independent streams 0, 1, 2), output poisoned. On error *out is NULL and
 * everything made so far is released. */
static int ops_session_open(int index, const attn_shape *s, uint64_t seed, attn_session **out)
{
    int rc = 0;
    char err[ATTUNE_ERRLEN];
    attn_session *ss = NULL;

    if (out == NULL || s == NULL)
        return ATTUNE_EINVAL;
    *out = NULL;
    if ((rc = attn_shape_validate(s, err, sizeof err)) != 0)
        return rc;
    if (index < 0 || index >= cuda_device_count())
        return ATTUNE_ENODEV;
    ss = (attn_session *)calloc(1, sizeof *ss);
    if (ss == NULL)
        return ATTUNE_ENOMEM;
    ss->dev = index;
    ss->s = *s;
    ss->seed = seed;
    ss->es = attn_dtype_size(s->dtype);
    ss->nq = s->b * s->hq * s->sq * s->d;
    ss->nkv = s->b * s->hkv * s->skv * s->d;

    CU_TRY(cudaSetDevice(index));
    CU_TRY(cudaStreamCreateWithFlags(&ss->stream, cudaStreamNonBlocking));
    CU_TRY(cudaEventCreate(&ss->ev0));
    CU_TRY(cudaEventCreate(&ss->ev1));
    RC_TRY(dev_alloc(&ss->q, (size_t)ss->nq * ss->es));
    RC_TRY(dev_alloc(&ss->o, (size_t)ss->nq * ss->es));
    RC_TRY(dev_alloc(&ss->k, (size_t)ss->nkv * ss->es));
    RC_TRY(dev_alloc(&ss->v, (size_t)ss->nkv * ss->es));
    RC_TRY(dev_alloc(&ss->blas_ws, BLAS_WS_BYTES));
    ss->blas_ws_bytes = BLAS_WS_BYTES;
    RC_TRY(cuda_blas_open());
    BLAS_TRY(cuda_blas.create(&ss->blas));
    BLAS_TRY(cuda_blas.set_stream(ss->blas, ss->stream));
    BLAS_TRY(cuda_blas.set_workspace(ss->blas, ss->blas_ws, ss->blas_ws_bytes));
    /* Default math: f32 GEMMs stay f32 (no TF32); 16-bit inputs still use
     * tensor cores. */
    BLAS_TRY(cuda_blas.set_math_mode(ss->blas, CUBLAS_DEFAULT_MATH));

    RC_TRY(cuda_fill_normal(ss->q, s->dtype, ss->nq, seed, 0, ss->stream));
    RC_TRY(cuda_fill_normal(ss->k, s->dtype, ss->nkv, seed, 1, ss->stream));
    RC_TRY(cuda_fill_normal(ss->v, s->dtype, ss->nkv, seed, 2, ss->stream));
    RC_TRY(cuda_fill_nan(ss->o, s->dtype, ss->nq, ss->stream));
    CU_TRY(cudaStreamSynchronize(ss->stream));
#ifdef ATTUNE_HAVE_CUDNN
    cuda_cudnn_prefetch(index, s); /* cudnn plans build while others are measured */
#endif
    *out = ss;
    return 0;
fail:
    ops_session_close(ss);
    return rc;
}

static void ops_plan_free(attn_plan *p);

static void ops_session_close(attn_session *ss)
{
    if (ss == NULL)
        return;
    cudaSetDevice(ss->dev);
#ifdef ATTUNE_HAVE_CUDNN
    cuda_cudnn_prefetch_cancel(ss->dev, &ss->s);
#endif
    if (ss->stream != NULL)
        cudaStreamSynchronize(ss->stream);
    while (ss->plans != NULL) /* plans the caller forgot */
        ops_plan_free(ss->plans);
    if (ss->blas != NULL)
        cuda_blas.destroy(ss->blas); /* a handle exists: the library is open */
    cudaFree(ss->blas_ws);
    cudaFree(ss->dnn_ws);
    cudaFree(ss->q);
    cudaFree(ss->k);
    cudaFree(ss->v);
    cudaFree(ss->o);
    if (ss->ev0 != NULL)
        cudaEventDestroy(ss->ev0);
    if (ss->ev1 != NULL)
        cudaEventDestroy(ss->ev1);
    if (ss->stream != NULL)
        cudaStreamDestroy(ss->stream);
    cudaGetLastError(); /* leave no error behind for the next caller */
    free(ss);
}

static int check_rows(const attn_session *ss, const int64_t *rows, int nrows)
{
    const int64_t total = ss->s.b * ss->s.hq * ss->s.sq;
    if (nrows < 0 || (nrows > 0 && rows == NULL))
        return ATTUNE_EINVAL;
    for (int k = 0; k < nrows; k++)
        if (rows[k] < 0 || rows[k] >= total)
            return ATTUNE_EINVAL;
    return 0;
}

/* Copy rows to the device, run fn's kernel into a device double buffer of
 * nrows*d, copy back to host out. which: 0 reference, 1 fetch. */
static int rows_op(attn_session *ss, const int64_t *rows, int nrows, double *out, int which)
{
    int rc = 0;
    int64_t *drows = NULL;
    double *dout = NULL;
    size_t out_bytes = (size_t)nrows * (size_t)ss->s.d * sizeof(double);

    if (ss == NULL || (nrows > 0 && out == NULL))
        return ATTUNE_EINVAL;
    if ((rc = check_rows(ss, rows, nrows)) != 0 || nrows == 0)
        return rc;
    CU_TRY(cudaSetDevice(ss->dev));
    RC_TRY(dev_alloc((void **)&drows, (size_t)nrows * sizeof(int64_t)));
    RC_TRY(dev_alloc((void **)&dout, out_bytes));
    CU_TRY(cudaMemcpyAsync(drows, rows, (size_t)nrows * sizeof(int64_t),
                           cudaMemcpyHostToDevice, ss->stream));
    if (which == 0)
        RC_TRY(cuda_reference_rows(ss, drows, nrows, dout, ss->stream));
    else
        RC_TRY(cuda_gather_rows(dout, ss->o, ss->s.dtype, drows, nrows, ss->s.d, ss->stream));
    CU_TRY(cudaMemcpyAsync(out, dout, out_bytes, cudaMemcpyDeviceToHost, ss->stream));
    CU_TRY(cudaStreamSynchronize(ss->stream));
    rc = 0;
fail:
    if (rc != 0)
        cudaStreamSynchronize(ss->stream);
    cudaFree(drows);
    cudaFree(dout);
    return rc;
}

static int ops_reference(attn_session *ss, const int64_t *rows, int nrows, double *ref)
{
    return rows_op(ss, rows, nrows, ref, 0);
}

static int ops_fetch_rows(attn_session *ss, const int64_t *rows, int nrows, double *out)
{
    return rows_op(ss, rows, nrows, out, 1);
}

/* NaN into the output and into every live plan's padded output, so a
 * variant that skips rows shows up even behind the unpad copy. */
static int ops_poison(attn_session *ss)
{
    int rc = 0;
    if (ss == NULL)
        return ATTUNE_EINVAL;
    CU_TRY(cudaSetDevice(ss->dev));
    RC_TRY(cuda_fill_nan(ss->o, ss->s.dtype, ss->nq, ss->stream));
    for (attn_plan *p = ss->plans; p != NULL; p = p->next)
        if (p->own_q)
            RC_TRY(cuda_fill_nan(p->op, ss->s.dtype,
                                 ss->s.b * ss->s.hq * p->sq_pad * ss->s.d, ss->stream));
    CU_TRY(cudaStreamSynchronize(ss->stream));
    return 0;
fail:
    return rc;
}

/* ---- plans */

/* 1 when t is among the fused tactics listed for the session's shape. */
static int fused_listed(const attn_session *ss, const attn_tactic *t)
{
    attn_tactic *list;
    int cmaj = 0, cmin = 0, n, found = 0;
    if (cudaDeviceGetAttribute(&cmaj, cudaDevAttrComputeCapabilityMajor, ss->dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&cmin, cudaDevAttrComputeCapabilityMinor, ss->dev) != cudaSuccess)
        return 0;
    list = (attn_tactic *)malloc(MAX_FUSED_TACTICS * sizeof *list);
    if (list == NULL)
        return 0;
    n = cuda_fused_tactics(&ss->s, cmaj, cmin, list, MAX_FUSED_TACTICS);
    for (int i = 0; i < n && !found; i++)
        found = list[i].variant == t->variant && list[i].pad == t->pad &&
                list[i].acc == t->acc && list[i].tile_m == t->tile_m &&
                list[i].tile_n == t->tile_n && list[i].splits == t->splits &&
                list[i].warps == t->warps && list[i].arch == t->arch &&
                list[i].stages == t->stages && list[i].fold == t->fold;
    free(list);
    return found;
}

/* Prepare t on ss. Padded copies exist only for lengths the pad changes:
 * qp/op when sq_pad != sq, kp/vp when skv_pad != skv; otherwise they alias
 * the session's buffers. On error *out is NULL and nothing is leaked:
 * EUNSUPP (t does not apply), EINVAL (bad pad), ENOMEM, EGPU. */
static int ops_plan(attn_session *ss, const attn_tactic *t, attn_plan **out)
{
    int rc = 0;
    attn_plan *p = NULL;
    const attn_shape *s;

    if (out == NULL || ss == NULL || t == NULL)
        return ATTUNE_EINVAL;
    *out = NULL;
    s = &ss->s;
    if (!valid_pad(t->pad) || (unsigned)t->variant >= ATTN_NVARIANTS)
        return ATTUNE_EINVAL;
    ss->plan_note[0] = 0;
    if (is_fused(t->variant) && !fused_listed(ss, t))
        return ATTUNE_EUNSUPP;
#ifndef ATTUNE_HAVE_CUDNN
    if (t->variant == ATTN_CUDNN) {
        snprintf(ss->plan_note, sizeof ss->plan_note, "cudnn: not built in (no cuDNN found by CMake)");
        return ATTUNE_EUNSUPP;
    }
#endif
    p = (attn_plan *)calloc(1, sizeof *p);
    if (p == NULL)
        return ATTUNE_ENOMEM;
    p->ss = ss;
    p->t = *t;
    p->sq_pad = attn_round_up(s->sq, t->pad);
    p->skv_pad = attn_round_up(s->skv, t->pad);
    p->own_q = p->sq_pad != s->sq;
    p->own_kv = p->skv_pad != s->skv;
    p->qp = ss->q;
    p->op = ss->o;
    p->kp = ss->k;
    p->vp = ss->v;
    CU_TRY(cudaSetDevice(ss->dev));
    if (p->own_q) {
        size_t bytes = (size_t)(s->b * s->hq * p->sq_pad * s->d) * ss->es;
        p->qp = p->op = NULL;
        RC_TRY(dev_alloc(&p->qp, bytes));
        RC_TRY(dev_alloc(&p->op, bytes));
    }
    if (p->own_kv) {
        size_t bytes = (size_t)(s->b * s->hkv * p->skv_pad * s->d) * ss->es;
        p->kp = p->vp = NULL;
        RC_TRY(dev_alloc(&p->kp, bytes));
        RC_TRY(dev_alloc(&p->vp, bytes));
    }
    if (is_fused(t->variant)) {
        p->fused_ws_bytes = cuda_fused_workspace_bytes(s, t);
        if (p->fused_ws_bytes > 0)
            RC_TRY(dev_alloc(&p->fused_ws, p->fused_ws_bytes));
    } else if (t->variant == ATTN_CUDNN) {
#ifdef ATTUNE_HAVE_CUDNN
        /* the note says what the plan's build cost (once per shape, tactic
         * and process, not per call): it rides in the measurement's note */
        RC_TRY(cuda_cudnn_plan_get(ss->dev, s, t, p->sq_pad, p->skv_pad, &p->dnn, NULL,
                                   ss->plan_note, sizeof ss->plan_note));
        if (cuda_cudnn_workspace_bytes(p->dnn) > 0 && ss->dnn_ws == NULL) {
            RC_TRY(dev_alloc(&ss->dnn_ws, CUDA_CUDNN_WS_CAP));
            ss->dnn_ws_bytes = CUDA_CUDNN_WS_CAP;
        }
#endif
    } else {
        RC_TRY(cuda_split_prepare(p));
    }
    p->next = ss->plans;
    ss->plans = p;
    *out = p;
    return 0;
fail:
    if (p != NULL) {
#ifdef ATTUNE_HAVE_CUDNN
        cuda_cudnn_plan_put(p->dnn);
#endif
        if (p->own_q) {
            cudaFree(p->qp);
            cudaFree(p->op);
        }
        if (p->own_kv) {
            cudaFree(p->kp);
            cudaFree(p->vp);
        }
        cudaFree(p->fused_ws);
        free(p);
    }
    return rc;
}

static void ops_plan_free(attn_plan *p)
{
    if (p == NULL)
        return;
    attn_session *ss = p->ss;
    cudaSetDevice(ss->dev);
    cudaStreamSynchronize(ss->stream);
    for (attn_plan **pp = &ss->plans; *pp != NULL; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    for (int i = 0; i < p->ngraphs; i++)
        cudaGraphExecDestroy(p->graphs[i].exec);
#ifdef ATTUNE_HAVE_CUDNN
    cuda_cudnn_plan_put(p->dnn);
#endif
    if (!is_fused(p->t.variant) && p->t.variant != ATTN_CUDNN)
        cuda_split_release(p);
    cudaFree(p->fused_ws);
    if (p->own_q) {
        cudaFree(p->qp);
        cudaFree(p->op);
    }
    if (p->own_kv) {
        cudaFree(p->kp);
        cudaFree(p->vp);
    }
    cudaGetLastError();
    free(p);
}

/* Enqueue one call of the plan: pad copies, the variant, unpad copy.
 * Asynchronous and capturable. with_copies = 0 leaves the copies out (the
 * padded inputs must hold the session's data already: see warm). */
static int plan_enqueue(attn_plan *p, int with_copies)
{
    int rc = 0;
    attn_session *ss = p->ss;
    const attn_shape *s = &ss->s;
    if (with_copies && p->own_q)
        RC_TRY(cuda_pad_rows(p->qp, ss->q, ss->es, s->b * s->hq, s->sq, p->sq_pad, s->d,
                             ss->stream));
    if (with_copies && p->own_kv) {
        RC_TRY(cuda_pad_rows(p->kp, ss->k, ss->es, s->b * s->hkv, s->skv, p->skv_pad, s->d,
                             ss->stream));
        RC_TRY(cuda_pad_rows(p->vp, ss->v, ss->es, s->b * s->hkv, s->skv, p->skv_pad, s->d,
                             ss->stream));
    }
    if (is_fused(p->t.variant))
        RC_TRY(cuda_fused_launch(s, &p->t, p->qp, p->kp, p->vp, p->op, p->sq_pad, p->skv_pad,
                                 p->fused_ws, ss->stream));
#ifdef ATTUNE_HAVE_CUDNN
    else if (p->t.variant == ATTN_CUDNN)
        RC_TRY(cuda_cudnn_launch(p->dnn, p->qp, p->kp, p->vp, p->op, ss->dnn_ws, ss->stream));
#endif
    else
        RC_TRY(cuda_split_launch(p));
    if (with_copies && p->own_q)
        RC_TRY(cuda_unpad_rows(ss->o, p->op, ss->es, s->b * s->hq, s->sq, p->sq_pad, s->d,
                               ss->stream));
    return 0;
fail:
    return rc;
}

static int ops_run(attn_plan *p)
{
    int rc = 0;
    if (p == NULL)
        return ATTUNE_EINVAL;
    CU_TRY(cudaSetDevice(p->ss->dev));
    RC_TRY(plan_enqueue(p, 1));
    CU_TRY(cudaStreamSynchronize(p->ss->stream));
    p->warmed = 1;
    return 0;
fail:
    cudaStreamSynchronize(p->ss->stream);
    return rc;
}

/* The cached graph of (iters, with_copies), captured now if absent. */
static int plan_graph(attn_plan *p, int iters, int with_copies, cudaGraphExec_t *out)
{
    int rc = 0;
    attn_session *ss = p->ss;
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    int capturing = 0;
    cuda_graph_entry *e;

    for (int i = 0; i < p->ngraphs; i++)
        if (p->graphs[i].iters == iters && p->graphs[i].with_copies == with_copies) {
            *out = p->graphs[i].exec;
            return 0;
        }
    /* Thread-local capture: another thread's unrelated CUDA calls neither
     * break this capture nor get captured. */
    CU_TRY(cudaStreamBeginCapture(ss->stream, cudaStreamCaptureModeThreadLocal));
    capturing = 1;
    for (int it = 0; it < iters; it++)
        RC_TRY(plan_enqueue(p, with_copies));
    capturing = 0;
    CU_TRY(cudaStreamEndCapture(ss->stream, &graph));
    CU_TRY(cudaGraphInstantiate(&exec, graph, 0));
    cudaGraphDestroy(graph);
    graph = NULL;
    /* first replay uploads the graph and warms caches: not timed */
    CU_TRY(cudaGraphLaunch(exec, ss->stream));
    CU_TRY(cudaStreamSynchronize(ss->stream));

    if (p->ngraphs < CUDA_GRAPH_CACHE) {
        e = &p->graphs[p->ngraphs++];
    } else {
        e = &p->graphs[p->graph_next];
        p->graph_next = (p->graph_next + 1) % CUDA_GRAPH_CACHE;
        cudaGraphExecDestroy(e->exec);
    }
    e->iters = iters;
    e->with_copies = with_copies;
    e->exec = exec;
    *out = exec;
    return 0;
fail:
    if (capturing) { /* end the broken capture so the stream is usable */
        cudaStreamEndCapture(ss->stream, &graph);
        cudaGetLastError();
    }
    if (graph != NULL)
        cudaGraphDestroy(graph);
    if (exec != NULL)
        cudaGraphExecDestroy(exec);
    return rc;
}

static int ops_time(attn_plan *p, int iters, int with_copies, attn_timing *out)
{
    int rc = 0;
    attn_session *ss;
    cudaGraphExec_t exec = NULL;
    float ms = 0.f;

    if (p == NULL || out == NULL || iters < 1)
        return ATTUNE_EINVAL;
    ss = p->ss;
    /* no padding: both modes are the same graph */
    with_copies = (with_copies && (p->own_q || p->own_kv)) ? 1 : 0;
    CU_TRY(cudaSetDevice(ss->dev));
    if (!p->warmed) /* padded inputs filled, modules loaded before capture */
        RC_TRY(ops_run(p));
    RC_TRY(plan_graph(p, iters, with_copies, &exec));
    CU_TRY(cudaEventRecord(ss->ev0, ss->stream));
    CU_TRY(cudaGraphLaunch(exec, ss->stream));
    CU_TRY(cudaEventRecord(ss->ev1, ss->stream));
    CU_TRY(cudaEventSynchronize(ss->ev1));
    CU_TRY(cudaEventElapsedTime(&ms, ss->ev0, ss->ev1));
    out->us = (double)ms * 1000.0 / (double)iters;
    return 0;
fail:
    cudaStreamSynchronize(ss->stream);
    return rc;
}

static const char *ops_plan_note(attn_session *ss)
{
    return ss != NULL ? ss->plan_note : "";
}

/* Positional: attn_ops's field order (kernels/attn.h). */
extern "C" const attn_ops attn_cuda_ops = {
    "cuda",
    ops_device_count,
    ops_device_info,
    ops_tactics,
    ops_session_open,
    ops_session_close,
    ops_reference,
    ops_poison,
    ops_fetch_rows,
    ops_plan,
    ops_plan_free,
    ops_run,
    ops_time,
    ops_plan_note,
};
