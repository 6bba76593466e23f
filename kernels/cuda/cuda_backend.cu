/* cuda_backend.cu -- the CUDA backend behind kernels/attn.h: plans on
 * caller views, the shared pad and layout copies, sessions, CUDA-graph
 * timing and attn_cuda_ops.
 *
 * A plan is one tactic for one shape (the longest lengths it runs at) on
 * one device. A call (launch) gets the caller's views and stream: where
 * the variant reads the views in place (fused: any 16-byte strides; GEMM
 * variants: views that flatten to one head stride; cudnn: the planned
 * contiguous layout) and the pad changes no length of this call, it runs
 * on them; otherwise the plan's own contiguous copies are packed first and
 * the output copied back. Every variant (the GEMM variants of cuda_split.cu,
 * the fused kernels of cuda_fused.cu, cuDNN) sees views and the real
 * lengths; pad and layout copies are this file's job, once for all. This
 * file names no variant: it lists, plans and runs each tactic through its
 * family's kernel ops in the table of kernels/variant.h (cuda_split.cu,
 * ops_fused.cu, ops_cudnn.cu).
 *
 * A session (the tuner's) holds one shape's inputs (seeded normal data,
 * generated on the device), the output, one stream and two events; its
 * plans launch on its buffers and stream, so what the tuner times is what
 * a runtime runs.
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

/* Contract in cuda_internal.cuh. */
int cuda_dev_alloc(void **p, size_t bytes)
{
    int rc = 0;
    CU_TRY(cudaMalloc(p, bytes > 0 ? bytes : 1));
    return 0;
fail:
    *p = NULL;
    return rc;
}

/* Device index as the families' listings see it: its ordinal, compute
 * capability and SM count. */
static int list_device(int index, attn_device_info *dev)
{
    int rc = 0;
    memset(dev, 0, sizeof *dev);
    snprintf(dev->kind, sizeof dev->kind, "cuda");
    dev->index = index;
    CU_TRY(cudaDeviceGetAttribute(&dev->cc_major, cudaDevAttrComputeCapabilityMajor, index));
    CU_TRY(cudaDeviceGetAttribute(&dev->cc_minor, cudaDevAttrComputeCapabilityMinor, index));
    CU_TRY(cudaDeviceGetAttribute(&dev->sm_count, cudaDevAttrMultiProcessorCount, index));
    return 0;
fail:
    return rc;
}

/* The tactics of every CUDA family built in, in the table's order (the
 * fused kernels, then the GEMM variants, then cuDNN's engines). Writes at
 * most max tactics, returns the number written. */
static int ops_tactics(int index, const attn_shape *s, attn_tactic *out, int max)
{
    int rc = 0;
    char err[ATTUNE_ERRLEN];
    attn_device_info dev;

    if (s == NULL || (out == NULL && max > 0) || max < 0)
        return ATTUNE_EINVAL;
    if ((rc = attn_shape_validate(s, err, sizeof err)) != 0)
        return rc;
    if (index < 0 || index >= cuda_device_count())
        return ATTUNE_ENODEV;
    if ((rc = list_device(index, &dev)) != 0)
        return rc;
    return attn_family_list("cuda", &dev, s, out, max);
}

/* ---- sessions */

static void ops_session_close(attn_session *ss);

/* Allocate one buffer; ENOMEM when it does not fit. */
static int dev_alloc(void **p, size_t bytes)
{
    return cuda_dev_alloc(p, bytes);
}

/* Tell every family's kernels that a session of s opened (warm) or closes
 * (cool) on device index. */
static void sessions_hook(int index, const attn_shape *s, int open)
{
    int n;
    const attn_variant_desc *const *f = attn_families(&n);
    for (int i = 0; i < n; i++) {
        const attn_kernel_ops *k = f[i]->kernel;
        if (strcmp(f[i]->backend, "cuda") != 0 || k == NULL)
            continue;
        if (open && k->warm != NULL)
            k->warm(index, s);
        if (!open && k->cool != NULL)
            k->cool(index, s);
    }
}

/* The size of the n-th session's spacer (n counts the process's
 * sessions): 256 bytes to 2 MiB, scattered by a multiplicative hash. The
 * same call can take two times some 5% apart depending on where its
 * buffers lie (docs/tuning.md, "Placement"); the spacer moves each
 * session's buffers, and the plans allocated after them, so that the
 * tuner's placements of one tactic sample different layouts instead of
 * repeating one. */
static size_t session_spacer_bytes(unsigned n)
{
    return 256u * (1u + ((n * 2654435761u) >> 12) % 8192u);
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
    ss->es_out = attn_dtype_size(attn_dtype_out(s->dtype));
    ss->nq = s->b * s->hq * s->sq * s->d;
    ss->nkv = s->b * s->hkv * s->skv * s->d;

    CU_TRY(cudaSetDevice(index));
    CU_TRY(cudaStreamCreateWithFlags(&ss->stream, cudaStreamNonBlocking));
    CU_TRY(cudaEventCreate(&ss->ev0));
    CU_TRY(cudaEventCreate(&ss->ev1));
    static unsigned sessions_opened; /* sessions open from several threads */
    RC_TRY(dev_alloc(&ss->spacer, session_spacer_bytes(
                                      __atomic_fetch_add(&sessions_opened, 1u, __ATOMIC_RELAXED))));
    RC_TRY(dev_alloc(&ss->q, (size_t)ss->nq * ss->es));
    RC_TRY(dev_alloc(&ss->o, (size_t)ss->nq * ss->es_out));
    RC_TRY(dev_alloc(&ss->k, (size_t)ss->nkv * ss->es));
    RC_TRY(dev_alloc(&ss->v, (size_t)ss->nkv * ss->es));

    if (s->dtype == ATTN_E4M3) { /* attn_ops.reference_source says how */
        void *x8[3] = {ss->q, ss->k, ss->v};
        int64_t n[3] = {ss->nq, ss->nkv, ss->nkv};
        RC_TRY(dev_alloc((void **)&ss->descale, 4 * sizeof(float)));
        for (int i = 0; i < 3; i++) {
            RC_TRY(dev_alloc(&ss->src[i], (size_t)n[i] * 2));
            RC_TRY(cuda_fill_e4m3(x8[i], ss->src[i], n[i], seed, (uint32_t)i, ss->descale + i,
                                  (unsigned *)(ss->descale + 3), ss->stream));
        }
        CU_TRY(cudaMemcpyAsync(ss->descale_h, ss->descale, sizeof ss->descale_h,
                               cudaMemcpyDeviceToHost, ss->stream));
    } else {
        RC_TRY(cuda_fill_normal(ss->q, s->dtype, ss->nq, seed, 0, ss->stream));
        RC_TRY(cuda_fill_normal(ss->k, s->dtype, ss->nkv, seed, 1, ss->stream));
        RC_TRY(cuda_fill_normal(ss->v, s->dtype, ss->nkv, seed, 2, ss->stream));
    }
    RC_TRY(cuda_fill_nan(ss->o, attn_dtype_out(s->dtype), ss->nq, ss->stream));
    CU_TRY(cudaStreamSynchronize(ss->stream));
    sessions_hook(index, s, 1); /* cudnn plans build while others are measured */
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
    sessions_hook(ss->dev, &ss->s, 0);
    if (ss->stream != NULL)
        cudaStreamSynchronize(ss->stream);
    while (ss->plans != NULL) /* plans the caller forgot */
        ops_plan_free(ss->plans);
    cudaFree(ss->q);
    cudaFree(ss->k);
    cudaFree(ss->v);
    cudaFree(ss->o);
    cudaFree(ss->spacer);
    for (int i = 0; i < 3; i++)
        cudaFree(ss->src[i]);
    cudaFree(ss->descale);
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
 * nrows*d, copy back to host out. which: 0 reference, 1 fetch, 2 the
 * reference from an e4m3 session's source values. */
static int rows_op(attn_session *ss, const int64_t *rows, int nrows, double *out, int which)
{
    int rc = 0;
    int64_t *drows = NULL;
    double *dout = NULL;
    size_t out_bytes;

    if (ss == NULL || (nrows > 0 && out == NULL))
        return ATTUNE_EINVAL;
    out_bytes = (size_t)nrows * (size_t)ss->s.d * sizeof(double);
    if ((rc = check_rows(ss, rows, nrows)) != 0 || nrows == 0)
        return rc;
    CU_TRY(cudaSetDevice(ss->dev));
    RC_TRY(dev_alloc((void **)&drows, (size_t)nrows * sizeof(int64_t)));
    RC_TRY(dev_alloc((void **)&dout, out_bytes));
    CU_TRY(cudaMemcpyAsync(drows, rows, (size_t)nrows * sizeof(int64_t),
                           cudaMemcpyHostToDevice, ss->stream));
    if (which == 0)
        RC_TRY(cuda_reference_rows(ss, drows, nrows, dout, ss->stream));
    else if (which == 2)
        RC_TRY(cuda_reference_source_rows(ss, drows, nrows, dout, ss->stream));
    else
        RC_TRY(cuda_gather_rows(dout, ss->o, attn_dtype_out(ss->s.dtype), drows, nrows, ss->s.d,
                                ss->stream));
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

static int ops_reference_source(attn_session *ss, const int64_t *rows, int nrows, double *ref)
{
    if (ss != NULL && ss->s.dtype != ATTN_E4M3)
        return ATTUNE_EUNSUPP;
    return rows_op(ss, rows, nrows, ref, 2);
}

static int ops_fetch_rows(attn_session *ss, const int64_t *rows, int nrows, double *out)
{
    return rows_op(ss, rows, nrows, out, 1);
}

/* NaN into the output and into every live plan's own output copy, so a
 * variant that skips rows shows up even behind the copy out. */
static int ops_poison(attn_session *ss)
{
    int rc = 0;
    if (ss == NULL)
        return ATTUNE_EINVAL;
    CU_TRY(cudaSetDevice(ss->dev));
    RC_TRY(cuda_fill_nan(ss->o, attn_dtype_out(ss->s.dtype), ss->nq, ss->stream));
    for (attn_plan *p = ss->plans; p != NULL; p = p->next)
        if (p->op != NULL)
            RC_TRY(cuda_fill_nan(p->op, attn_dtype_out(ss->s.dtype),
                                 ss->s.b * ss->s.hq * p->sq_pad * ss->s.d, ss->stream));
    CU_TRY(cudaStreamSynchronize(ss->stream));
    return 0;
fail:
    return rc;
}

/* ---- plans */

static void ops_plan_free(attn_plan *p)
{
    if (p == NULL)
        return;
    int prev = -1;
    cudaGetDevice(&prev);
    cudaSetDevice(p->dev);
    attn_session *ss = p->ss;
    if (ss != NULL) {
        cudaStreamSynchronize(ss->stream);
        for (attn_plan **pp = &ss->plans; *pp != NULL; pp = &(*pp)->next)
            if (*pp == p) {
                *pp = p->next;
                break;
            }
    }
    for (int i = 0; i < p->ngraphs; i++)
        cudaGraphExecDestroy(p->graphs[i].exec);
    if (p->fam != NULL)
        p->fam->kernel->free(p);
    cudaFree(p->qp);
    cudaFree(p->op);
    cudaFree(p->kp);
    cudaFree(p->vp);
    cudaGetLastError();
    if (prev >= 0)
        cudaSetDevice(prev);
    free(p);
}

/* Does the plan keep its own copies? Where the pad changes a planned
 * length, always. A contiguous plan (the tuner's) needs no others. Any
 * other may be called at shorter lengths (a pad then changes them) or on
 * views its variant cannot read in place: all but the families that read
 * any 16-byte strides (the fused kernels: kernel ops' strided) at pad 1
 * keep copies. */
static void own_copies(const attn_plan *p, int *q, int *kv)
{
    *q = p->sq_pad != p->s.sq;
    *kv = p->skv_pad != p->s.skv;
    if (!(p->flags & ATTN_PLAN_CONTIGUOUS) && !(p->fam->kernel->strided && p->t.pad == 1))
        *q = *kv = 1;
}

/* Contract in attn.h (attn_ops.plan_new). The tactic's family (the table
 * of kernels/variant.h) makes the rest: note gets its refusal or build
 * cost (cuDNN's). A variant no CUDA family owns is ATTUNE_EINVAL when no
 * family knows it at all, else ATTUNE_EUNSUPP, as a family described but
 * not built into this binary (cudnn without cuDNN). */
static int plan_make(int dev, const attn_shape *s, const attn_tactic *t, int flags, attn_plan **out,
                     char *note, size_t notelen)
{
    int rc = 0, need_q, need_kv, prev = -1;
    char err[ATTUNE_ERRLEN];
    attn_plan *p = NULL;

    if (note != NULL && notelen > 0)
        note[0] = 0;
    if (out == NULL || s == NULL || t == NULL)
        return ATTUNE_EINVAL;
    *out = NULL;
    if (attn_shape_validate(s, err, sizeof err) != 0 || !valid_pad(t->pad) ||
        attn_family_variant(t->variant) == NULL)
        return ATTUNE_EINVAL;
    if (dev < 0 || dev >= cuda_device_count())
        return ATTUNE_ENODEV;
    const attn_variant_desc *fam = attn_family_of(t, "cuda");
    if (fam == NULL)
        return ATTUNE_EUNSUPP;
    if (fam->kernel == NULL) {
        if (note != NULL && notelen > 0)
            snprintf(note, notelen, "%s: not built in (its library was not found by CMake)",
                     fam->family);
        return ATTUNE_EUNSUPP;
    }
    p = (attn_plan *)calloc(1, sizeof *p);
    if (p == NULL)
        return ATTUNE_ENOMEM;
    p->dev = dev;
    p->s = *s;
    p->t = *t;
    p->fam = fam;
    p->flags = flags;
    p->es = attn_dtype_size(s->dtype);
    p->es_out = attn_dtype_size(attn_dtype_out(s->dtype));
    p->sq_pad = attn_round_up(s->sq, t->pad);
    p->skv_pad = attn_round_up(s->skv, t->pad);
    cudaGetDevice(&prev);
    CU_TRY(cudaSetDevice(dev));
    own_copies(p, &need_q, &need_kv);
    if (need_q) {
        size_t bytes = (size_t)(s->b * s->hq * p->sq_pad * s->d) * p->es;
        RC_TRY(dev_alloc(&p->qp, bytes));
        RC_TRY(dev_alloc(&p->op, (size_t)(s->b * s->hq * p->sq_pad * s->d) * p->es_out));
        /* zero, not garbage: padded rows of a first kernel-only timing */
        CU_TRY(cudaMemset(p->qp, 0, bytes));
    }
    if (need_kv) {
        size_t bytes = (size_t)(s->b * s->hkv * p->skv_pad * s->d) * p->es;
        RC_TRY(dev_alloc(&p->kp, bytes));
        RC_TRY(dev_alloc(&p->vp, bytes));
        CU_TRY(cudaMemset(p->kp, 0, bytes));
        CU_TRY(cudaMemset(p->vp, 0, bytes));
    }
    RC_TRY(fam->kernel->plan(p, NULL, note, notelen));
    if (prev >= 0)
        cudaSetDevice(prev);
    *out = p;
    return 0;
fail:
    if (prev >= 0)
        cudaSetDevice(prev);
    ops_plan_free(p);
    return rc;
}

static int ops_plan_new(int index, const attn_shape *s, const attn_tactic *t, int flags,
                        attn_plan **out, char *note, size_t notelen)
{
    return plan_make(index, s, t, flags, out, note, notelen);
}

/* Does p's family read call c's views in place? Without a reads op:
 * contiguous views of c's rows only. */
static int reads(const attn_plan *p, const cuda_call *c)
{
    if (p->fam->kernel->reads != NULL)
        return p->fam->kernel->reads(p, c);
    return attn_tensor_contiguous(&c->q, c->s.hq, c->sqp, c->s.d) &&
           attn_tensor_contiguous(&c->o, c->s.hq, c->sqp, c->s.d) &&
           attn_tensor_contiguous(&c->k, c->s.hkv, c->skvp, c->s.d) &&
           attn_tensor_contiguous(&c->v, c->s.hkv, c->skvp, c->s.d);
}

/* The view of an own copy: contiguous, rows rows per head. */
static attn_tensor own_view(void *data, int64_t heads, int64_t rows, int64_t d)
{
    attn_tensor t = {data, heads * rows * d, rows * d, d};
    return t;
}

/* Choose, for call io on p, which side (q/o, k/v) runs on the caller's
 * views and which on the own copies: in place where the pad changes no
 * length of this call and the variant reads the views, the caller's
 * first. Fills c (views, rows) and *copy_q / *copy_kv. ATTUNE_EINVAL when
 * no choice works (strides nothing reads and no copies: a contiguous
 * plan, or a fused plan at pad 1 on views that are not 16-byte aligned). */
static int choose(const attn_plan *p, const attn_io *io, const attn_shape *rs, cudaStream_t stream,
                  cuda_call *c, int *copy_q, int *copy_kv)
{
    const int64_t sqp = attn_round_up(rs->sq, p->t.pad), skvp = attn_round_up(rs->skv, p->t.pad);
    for (int k = 0; k < 4; k++) {
        const int cq = k & 1, ckv = k >> 1;
        if ((!cq && sqp != rs->sq) || (!ckv && skvp != rs->skv))
            continue; /* a padded length needs the copy */
        if ((cq && p->qp == NULL) || (ckv && p->kp == NULL))
            continue;
        memset(c, 0, sizeof *c);
        c->s = *rs;
        c->stream = stream;
        for (int i = 0; i < 3; i++)
            c->descale[i] = io->descale[i];
        c->sqp = cq ? sqp : rs->sq;
        c->skvp = ckv ? skvp : rs->skv;
        c->q = cq ? own_view(p->qp, rs->hq, sqp, rs->d) : io->q;
        c->o = cq ? own_view(p->op, rs->hq, sqp, rs->d) : io->o;
        c->k = ckv ? own_view(p->kp, rs->hkv, skvp, rs->d) : io->k;
        c->v = ckv ? own_view(p->vp, rs->hkv, skvp, rs->d) : io->v;
        if (reads(p, c)) {
            *copy_q = cq;
            *copy_kv = ckv;
            return 0;
        }
    }
    return ATTUNE_EINVAL;
}

/* Enqueue one call of p on io: copies in, the variant, copy out.
 * Asynchronous and capturable. with_copies = 0 leaves the copies out (the
 * own copies must hold the call's inputs already: the session's warm run). */
static int plan_enqueue(attn_plan *p, const attn_io *io, cudaStream_t stream, int with_copies)
{
    int rc = 0, copy_q = 0, copy_kv = 0;
    attn_shape rs;
    cuda_call c;

    if ((rc = attn_io_check(&p->s, io, &rs, NULL, 0)) != 0)
        return rc;
    if ((p->flags & ATTN_PLAN_CONTIGUOUS) &&
        !(attn_tensor_contiguous(&io->q, rs.hq, rs.sq, rs.d) &&
          attn_tensor_contiguous(&io->o, rs.hq, rs.sq, rs.d) &&
          attn_tensor_contiguous(&io->k, rs.hkv, rs.skv, rs.d) &&
          attn_tensor_contiguous(&io->v, rs.hkv, rs.skv, rs.d)))
        return ATTUNE_EINVAL;
    if (p->fam->kernel->fixed_lengths && (rs.sq != p->s.sq || rs.skv != p->s.skv))
        return ATTUNE_EUNSUPP; /* a cuDNN graph is built for its lengths */
    if ((rc = choose(p, io, &rs, stream, &c, &copy_q, &copy_kv)) != 0)
        return rc;
    if (with_copies && copy_q)
        RC_TRY(cuda_pack_view(p->qp, &io->q, p->es, rs.b, rs.hq, 1, rs.sq, c.sqp, rs.d, stream));
    if (with_copies && copy_kv) {
        RC_TRY(cuda_pack_view(p->kp, &io->k, p->es, rs.b, rs.hkv, 1, rs.skv, c.skvp, rs.d, stream));
        RC_TRY(cuda_pack_view(p->vp, &io->v, p->es, rs.b, rs.hkv, 1, rs.skv, c.skvp, rs.d, stream));
    }
    RC_TRY(p->fam->kernel->run(p, &c));
    if (with_copies && copy_q)
        RC_TRY(cuda_unpack_view(&io->o, p->op, p->es_out, rs.b, rs.hq, rs.sq, c.sqp, rs.d, stream));
    return 0;
fail:
    return rc;
}

/* Contract in attn.h (attn_ops.launch). */
static int ops_launch(attn_plan *p, const attn_io *io, void *stream)
{
    int rc = 0, prev = -1;
    if (p == NULL || io == NULL)
        return ATTUNE_EINVAL;
    CU_TRY(cudaGetDevice(&prev));
    if (prev != p->dev)
        CU_TRY(cudaSetDevice(p->dev));
    rc = plan_enqueue(p, io, (cudaStream_t)stream, 1);
    if (prev != p->dev)
        cudaSetDevice(prev);
    return rc;
fail:
    return rc;
}

/* Contract in attn.h (attn_ops.capturing). */
static int ops_capturing(void *stream)
{
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing((cudaStream_t)stream, &st) != cudaSuccess) {
        cudaGetLastError();
        return 1; /* cannot tell: assume the worst (nothing is built) */
    }
    return st != cudaStreamCaptureStatusNone;
}

/* Contract in attn.h (attn_ops.plan_views): a family whose kernels fix
 * the strides they read when built (cuDNN's graphs) builds for views';
 * every other reads the views' strides at run time (or copies what it
 * cannot read). */
static int ops_plan_views(attn_plan *p, const attn_io *views, void *stream, char *note,
                          size_t notelen)
{
    if (note != NULL && notelen > 0)
        note[0] = 0;
    if (p == NULL || views == NULL)
        return ATTUNE_EINVAL;
    if (p->fam->kernel->plan_views == NULL)
        return 0;
    if (ops_capturing(stream))
        return ATTUNE_EBUSY;
    return p->fam->kernel->plan_views(p, views, stream, note, notelen);
}

/* ---- session plans: the tuner's */

/* A plan for the session's shape, bound to it (contiguous: the session's
 * buffers at the planned lengths). */
static int ops_plan(attn_session *ss, const attn_tactic *t, attn_plan **out)
{
    int rc;
    if (out == NULL || ss == NULL || t == NULL)
        return ATTUNE_EINVAL;
    *out = NULL;
    ss->plan_note[0] = 0;
    if ((rc = plan_make(ss->dev, &ss->s, t, ATTN_PLAN_CONTIGUOUS, out, ss->plan_note,
                        sizeof ss->plan_note)) != 0)
        return rc;
    (*out)->ss = ss;
    (*out)->next = ss->plans;
    ss->plans = *out;
    return 0;
}

static void session_io(const attn_session *ss, attn_io *io)
{
    attn_io_contiguous(&ss->s, ss->q, ss->k, ss->v, ss->o, io);
    if (ss->descale != NULL)
        for (int i = 0; i < 3; i++)
            io->descale[i] = ss->descale + i;
}

static int ops_run(attn_plan *p)
{
    int rc = 0;
    attn_io io;
    if (p == NULL || p->ss == NULL)
        return ATTUNE_EINVAL;
    CU_TRY(cudaSetDevice(p->dev));
    session_io(p->ss, &io);
    RC_TRY(plan_enqueue(p, &io, p->ss->stream, 1));
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
    attn_io io;

    for (int i = 0; i < p->ngraphs; i++)
        if (p->graphs[i].iters == iters && p->graphs[i].with_copies == with_copies) {
            *out = p->graphs[i].exec;
            return 0;
        }
    session_io(ss, &io);
    /* Thread-local capture: another thread's unrelated CUDA calls neither
     * break this capture nor get captured. */
    CU_TRY(cudaStreamBeginCapture(ss->stream, cudaStreamCaptureModeThreadLocal));
    capturing = 1;
    for (int it = 0; it < iters; it++)
        RC_TRY(plan_enqueue(p, &io, ss->stream, with_copies));
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

    if (p == NULL || p->ss == NULL || out == NULL || iters < 1)
        return ATTUNE_EINVAL;
    ss = p->ss;
    /* no own copies: both modes are the same graph */
    with_copies = (with_copies && (p->qp != NULL || p->kp != NULL)) ? 1 : 0;
    CU_TRY(cudaSetDevice(ss->dev));
    if (!p->warmed) /* own copies filled, modules loaded before capture */
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

/* Contract in attn.h (attn_ops.health). A sticky error (an illegal
 * address, a trap: cudaErrorLaunchFailure, ...) comes back from every
 * synchronization; any other error once, then the last error is cleared:
 * so the context is lost when a synchronization fails twice. */
static int ops_health(int index)
{
    int prev = -1;
    cudaError_t e = cudaGetDevice(&prev);
    if (e == cudaSuccess && prev != index)
        e = cudaSetDevice(index);
    if (e == cudaSuccess)
        e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        e = cudaDeviceSynchronize();
    }
    if (prev >= 0 && prev != index)
        (void)cudaSetDevice(prev);
    return e == cudaSuccess ? 0 : ATTUNE_EGPULOST;
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
    ops_reference_source,
    ops_poison,
    ops_fetch_rows,
    ops_plan,
    ops_plan_free,
    ops_run,
    ops_time,
    ops_plan_note,
    ops_plan_new,
    ops_launch,
    ops_plan_views,
    ops_capturing,
    0, /* list_cheap: a shape's first listing waits on cuDNN's heuristics */
    ops_health,
};
