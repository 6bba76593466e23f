/* cuda_split.cu -- attention as GEMM -> softmax -> GEMM through cuBLAS:
 * the `split`, `split_repeat` and `folded` variants.
 *
 *   split        S = Q K^T per query head (cuBLAS strided batched GEMM), a
 *                softmax kernel (scale, causal bottom-right mask from the
 *                real lengths, padded keys masked, f32 math), O = P V.
 *                GQA/MQA read the shared KV head through the GEMM strides
 *                (stride 0 or one call per head of the group): no copies.
 *   split_repeat the Hugging Face eager path: repeat_kv copies K and V to
 *                hq heads, then split as for MHA. The copy is part of every
 *                call, as it is in the eager model.
 *   folded       the g query heads of a KV head are g*sq_pad consecutive
 *                rows of one GEMM per (batch, KV head); the softmax is the
 *                same kernel (a row's query position is its index modulo
 *                sq_pad). Only when hkv < hq.
 *
 * acc is the cuBLAS compute type: f32 -> CUBLAS_COMPUTE_32F, S stored in
 * f32 (the scores keep their accumulator precision until the softmax);
 * f16 -> CUBLAS_COMPUTE_16F, S stored in f16 (a 16F GEMM can only write
 * 16-bit C: the accumulator's own precision). P is always stored in the
 * storage dtype, because the PV GEMM takes A and B of one type, as in the
 * eager frameworks (softmax in f32, cast back to the dtype). f32 data uses
 * CUBLAS_COMPUTE_32F with the default math mode: no TF32.
 *
 * All variants run on the call's views: the caller's where they flatten
 * to one head stride (cuda_split_reads), else the plan's padded or
 * contiguous copies [b, h, sqp|skvp, d]; padded key rows are zero
 * (cuda_pack_view) and masked here, padded query rows get zero
 * probabilities and are dropped by the copy out.
 *
 * Memory: S and P for every head at once can reach gigabytes (b=2, h=16,
 * 8192^2 scores: 13 GB). The workspace holds `chunk` KV groups and the
 * three stages loop over chunks, so it stays under CUDA_SPLIT_BUDGET. */
#include <limits.h>
#include <math.h>

#include <string.h>

#include "cuda_internal.cuh"
#include "cuda_profile.h"

#define CUDA_SPLIT_BUDGET ((size_t)2 << 30) /* bytes of S + P per chunk */

/* ---- GPU kernels */

template <int NT>
static __device__ __forceinline__ float block_max(float x, float *red)
{
    for (int o = 16; o > 0; o >>= 1)
        x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
    if ((threadIdx.x & 31) == 0)
        red[threadIdx.x >> 5] = x;
    __syncthreads();
    float m = red[0];
#pragma unroll
    for (int w = 1; w < NT / 32; w++)
        m = fmaxf(m, red[w]);
    __syncthreads(); /* red is reused by the next reduction */
    return m;
}

template <int NT>
static __device__ __forceinline__ float block_sum(float x, float *red)
{
    for (int o = 16; o > 0; o >>= 1)
        x += __shfl_xor_sync(0xffffffffu, x, o);
    if ((threadIdx.x & 31) == 0)
        red[threadIdx.x >> 5] = x;
    __syncthreads();
    float s = 0.f;
#pragma unroll
    for (int w = 0; w < NT / 32; w++)
        s += red[w];
    __syncthreads();
    return s;
}

typedef struct softmax_args {
    int64_t nrows;      /* rows of S in this chunk */
    int64_t ld;         /* skv_pad: row stride of S and P */
    int64_t sq_pad, sq, skv;
    int causal;
    float scale_log2e;  /* 1/sqrt(d) * log2(e): exp2 of scaled scores */
} softmax_args;

/* One block per row. Row r's query position is r % sq_pad (true for split,
 * where rows are [head][i], and for folded, where a KV group's rows are
 * [query head][i] too). Keys j >= n (causal mask, padded keys) get p = 0;
 * padded query rows (i >= sq) and rows that see no key get all zeros.
 * ITEMS > 0: the row is held in registers, ITEMS per thread (one read of
 * S); ITEMS == 0: long rows, S is read twice (online max/sum, then write). */
template <typename ST, typename PT, int NT, int ITEMS>
__global__ void __launch_bounds__(NT)
softmax_kernel(const ST *__restrict__ S, PT *__restrict__ P, softmax_args a)
{
    __shared__ float red[NT / 32];
    for (int64_t r = blockIdx.x; r < a.nrows; r += gridDim.x) {
        const ST *srow = S + r * a.ld;
        PT *prow = P + r * a.ld;
        const int64_t i = r % a.sq_pad;
        int64_t n = a.skv;
        if (i >= a.sq)
            n = 0;
        else if (a.causal) {
            n = i + (a.skv - a.sq) + 1;
            n = n < 0 ? 0 : (n > a.skv ? a.skv : n);
        }
        if (n == 0) { /* uniform over the block: no divergence at barriers */
            for (int64_t j = threadIdx.x; j < a.ld; j += NT)
                prow[j] = dt_traits<PT>::from_f(0.f);
            continue;
        }
        if (ITEMS > 0) {
            float x[ITEMS > 0 ? ITEMS : 1];
            float m = -INFINITY;
#pragma unroll
            for (int it = 0; it < ITEMS; it++) {
                int64_t j = (int64_t)it * NT + threadIdx.x;
                x[it] = j < n ? dt_traits<ST>::to_f(srow[j]) * a.scale_log2e : -INFINITY;
                m = fmaxf(m, x[it]);
            }
            m = block_max<NT>(m, red);
            float l = 0.f;
#pragma unroll
            for (int it = 0; it < ITEMS; it++) {
                x[it] = exp2f(x[it] - m); /* masked: exp2(-inf) = 0 */
                l += x[it];
            }
            l = block_sum<NT>(l, red);
            float inv = 1.f / l;
#pragma unroll
            for (int it = 0; it < ITEMS; it++) {
                int64_t j = (int64_t)it * NT + threadIdx.x;
                if (j < a.ld)
                    prow[j] = dt_traits<PT>::from_f(x[it] * inv);
            }
        } else {
            float m = -INFINITY, l = 0.f;
            for (int64_t j = threadIdx.x; j < n; j += NT) {
                float x = dt_traits<ST>::to_f(srow[j]) * a.scale_log2e;
                if (x > m) {
                    l = l * exp2f(m - x) + 1.f;
                    m = x;
                } else {
                    l += exp2f(x - m);
                }
            }
            float M = block_max<NT>(m, red);
            l = (m == -INFINITY) ? 0.f : l * exp2f(m - M);
            float inv = 1.f / block_sum<NT>(l, red);
            for (int64_t j = threadIdx.x; j < a.ld; j += NT) {
                float p = j < n ? exp2f(dt_traits<ST>::to_f(srow[j]) * a.scale_log2e - M) * inv
                                : 0.f;
                prow[j] = dt_traits<PT>::from_f(p);
            }
        }
    }
}

/* ---- launchers */

template <typename ST, typename PT, int NT, int ITEMS>
static cudaError_t softmax_go(const void *S, void *P, const softmax_args *a, cudaStream_t st)
{
    int64_t g = a->nrows < (int64_t)INT_MAX ? a->nrows : (int64_t)INT_MAX;
    return cu_launch(softmax_kernel<ST, PT, NT, ITEMS>, (unsigned)g, NT, 0, st, (const ST *)S,
                     (PT *)P, *a);
}

/* Threads and register items per row length: enough threads to cover the
 * row with <= 16 items each, up to 8192 keys; longer rows stream. */
template <typename ST, typename PT>
static cudaError_t softmax_pick(const void *S, void *P, const softmax_args *a, cudaStream_t st)
{
    if (a->ld <= 512)
        return softmax_go<ST, PT, 128, 4>(S, P, a, st);
    if (a->ld <= 1024)
        return softmax_go<ST, PT, 256, 4>(S, P, a, st);
    if (a->ld <= 2048)
        return softmax_go<ST, PT, 256, 8>(S, P, a, st);
    if (a->ld <= 4096)
        return softmax_go<ST, PT, 512, 8>(S, P, a, st);
    if (a->ld <= 8192)
        return softmax_go<ST, PT, 512, 16>(S, P, a, st);
    return softmax_go<ST, PT, 1024, 0>(S, P, a, st);
}

static int softmax_launch(const void *S, int s_f16, void *P, attn_dtype pt,
                          const softmax_args *a, cudaStream_t st)
{
    int rc = 0;
    if (s_f16) /* acc=f16 exists only for f16 data */
        CU_TRY((softmax_pick<__half, __half>(S, P, a, st)));
    else if (pt == ATTN_F16)
        CU_TRY((softmax_pick<float, __half>(S, P, a, st)));
    else if (pt == ATTN_BF16)
        CU_TRY((softmax_pick<float, __nv_bfloat16>(S, P, a, st)));
    else
        CU_TRY((softmax_pick<float, float>(S, P, a, st)));
    return 0;
fail:
    return rc;
}

/* ---- GEMM schedule
 *
 * One strided batched GEMM call per entry: offsets (in elements) of the
 * first Q/O head, K/V head and S/P block, the batch strides, the batch
 * count and the number of query rows per batch entry. QK^T and PV use the
 * same entries: K and V share offsets, as do S and P, and Q and O (their
 * views have equal strides: cuda_split_reads). Heads are flat indices
 * bi * h + head, at one stride each (the views flatten). */
typedef struct gemm_call {
    int64_t qo, ko, so;    /* element offsets: Q/O, K/V (absolute), S/P (chunk) */
    int64_t qst, kst, sst; /* batch strides, elements; kst 0 = shared KV head */
    int batch;
    int64_t rows;          /* query rows per batch entry (sqp or g*sqp) */
} gemm_call;

#define MAX_CALLS_INLINE 64

/* 1 when view v of b x heads heads flattens to one head stride. */
static int flattens(const attn_tensor *v, int64_t b, int64_t heads)
{
    return b == 1 || v->sb == heads * v->sh;
}

static int same_view(const attn_tensor *a, const attn_tensor *b)
{
    return a->sb == b->sb && a->sh == b->sh && a->ss == b->ss;
}

int cuda_split_reads(const attn_plan *p, const cuda_call *c)
{
    const attn_shape *s = &c->s;
    if (!same_view(&c->q, &c->o) || !flattens(&c->q, s->b, s->hq) || c->q.ss > INT_MAX ||
        c->q.ss < s->d)
        return 0;
    if (p->t.variant == ATTN_FOLDED && s->hq / s->hkv > 1 && c->q.sh != c->sqp * c->q.ss)
        return 0; /* a group's rows are one matrix */
    if (p->t.variant == ATTN_SPLIT_REPEAT)
        return 1; /* K and V are read by the repeat copy, any strides */
    return same_view(&c->k, &c->v) && flattens(&c->k, s->b, s->hkv) && c->k.ss <= INT_MAX &&
           c->k.ss >= s->d;
}

/* The calls covering KV groups [u0, u0 + U) of call c into out (capacity
 * cap); returns the count, or -1 if over cap (the caller loops then). */
static int schedule(const attn_plan *p, const cuda_call *c, int64_t u0, int64_t U, gemm_call *out,
                    int cap)
{
    const int64_t g = p->sp.g, sqp = c->sqp, skp = c->skvp;
    const int64_t head_q = c->q.sh, head_s = sqp * skp;
    const int64_t head_k = p->t.variant == ATTN_SPLIT_REPEAT ? skp * c->s.d : c->k.sh;
    int n = 0;
    switch (p->t.variant) {
    case ATTN_FOLDED: /* one entry per KV group, g*sqp rows */
        out[n++] = (gemm_call){u0 * g * head_q, u0 * head_k, 0,
                               g * head_q, head_k, g * head_s, (int)U, g * sqp};
        break;
    case ATTN_SPLIT_REPEAT: /* repeated K/V: head (u, j) at u*g + j, MHA */
        out[n++] = (gemm_call){u0 * g * head_q, u0 * g * head_k, 0,
                               head_q, head_k, head_s, (int)(U * g), sqp};
        break;
    default: /* split */
        if (g == 1) {
            out[n++] = (gemm_call){u0 * head_q, u0 * head_k, 0,
                                   head_q, head_k, head_s, (int)U, sqp};
        } else if (g <= U) {
            /* head j of every group in one call: K steps by KV head,
             * Q and S by whole groups */
            if (g > cap)
                return -1;
            for (int64_t j = 0; j < g; j++)
                out[n++] = (gemm_call){(u0 * g + j) * head_q, u0 * head_k, j * head_s,
                                       g * head_q, head_k, g * head_s, (int)U, sqp};
        } else {
            /* all heads of one group in one call, K broadcast (stride 0) */
            if (U > cap)
                return -1;
            for (int64_t u = 0; u < U; u++)
                out[n++] = (gemm_call){(u0 + u) * g * head_q, (u0 + u) * head_k,
                                       u * g * head_s, head_q, 0, head_s, (int)g, sqp};
        }
    }
    return n;
}

/* ---- plan */

int cuda_split_prepare(attn_plan *p)
{
    int rc = 0;
    const attn_shape *s = &p->s;
    const attn_tactic *t = &p->t;
    cuda_split_state *sp = &p->sp;
    size_t per_unit, s_bytes, p_bytes;

    if (t->tile_m || t->tile_n || t->splits || t->warps || t->arch || t->stages)
        return ATTUNE_EUNSUPP;
    if ((t->variant == ATTN_FOLDED || t->variant == ATTN_SPLIT_REPEAT) && s->hkv == s->hq)
        return ATTUNE_EUNSUPP;
    if (t->acc == ATTN_ACC_F16 && s->dtype != ATTN_F16)
        return ATTUNE_EUNSUPP; /* 16F compute needs 16F data */
    if (t->acc != ATTN_ACC_F16 && t->acc != ATTN_ACC_F32)
        return ATTUNE_EUNSUPP;

    sp->g = s->hq / s->hkv;
    sp->units = s->b * s->hkv;
    sp->s_es = t->acc == ATTN_ACC_F16 ? 2 : 4;
    /* cuBLAS takes int sizes and leading dimensions */
    if (p->skv_pad > INT_MAX || sp->g * p->sq_pad > INT_MAX || s->b * s->hq > INT_MAX)
        return ATTUNE_EUNSUPP;
    /* sized for the planned lengths: a call at shorter ones needs less */
    per_unit = (size_t)(sp->g * p->sq_pad) * (size_t)p->skv_pad * (sp->s_es + p->es);
    sp->chunk = (int64_t)(CUDA_SPLIT_BUDGET / per_unit);
    if (sp->chunk < 1)
        sp->chunk = 1;
    if (sp->chunk > sp->units)
        sp->chunk = sp->units;
    s_bytes = (size_t)sp->chunk * sp->g * p->sq_pad * p->skv_pad * sp->s_es;
    p_bytes = (size_t)sp->chunk * sp->g * p->sq_pad * p->skv_pad * p->es;
    CU_TRY(cudaMalloc(&sp->S, s_bytes));
    CU_TRY(cudaMalloc(&sp->P, p_bytes));
    if (t->variant == ATTN_SPLIT_REPEAT) {
        size_t kv = (size_t)(s->b * s->hq * p->skv_pad * s->d) * p->es;
        CU_TRY(cudaMalloc(&sp->kr, kv));
        CU_TRY(cudaMalloc(&sp->vr, kv));
    }
    return 0;
fail:
    cuda_split_release(p);
    return rc;
}

void cuda_split_release(attn_plan *p)
{
    cuda_split_state *sp = &p->sp;
    cudaFree(sp->S);
    cudaFree(sp->P);
    cudaFree(sp->kr);
    cudaFree(sp->vr);
    sp->S = sp->P = sp->kr = sp->vr = NULL;
}

/* The stages of a GEMM variant, as bits: cuda_split_launch runs them all,
 * cuda_split_profile one at a time. */
enum { STAGE_REPEAT = 1, STAGE_QK = 2, STAGE_SOFTMAX = 4, STAGE_PV = 8, STAGE_ALL = 15 };

static int split_enqueue(attn_plan *p, const cuda_call *cl, int stages)
{
    int rc = 0;
    const attn_shape *s = &cl->s;
    cuda_split_state *sp = &p->sp;
    const size_t es = p->es;
    const int d = (int)s->d, skp = (int)cl->skvp;
    const int64_t sqp = cl->sqp;
    const cudaDataType dt = cuda_blas_type(s->dtype);
    const int f16acc = p->t.acc == ATTN_ACC_F16;
    const cudaDataType st = f16acc ? CUDA_R_16F : CUDA_R_32F;
    const cublasComputeType_t ct = f16acc ? CUBLAS_COMPUTE_16F : CUBLAS_COMPUTE_32F;
    /* alpha/beta have the compute type's type; the scale is applied in
     * the softmax (f32), so S holds the raw dot products */
    const float one_f = 1.f, zero_f = 0.f;
    const __half one_h = __float2half(1.f), zero_h = __float2half(0.f);
    const void *one = f16acc ? (const void *)&one_h : (const void *)&one_f;
    const void *zero = f16acc ? (const void *)&zero_h : (const void *)&zero_f;
    const char *K = (const char *)cl->k.data, *V = (const char *)cl->v.data;
    int ldk = (int)cl->k.ss;
    const int ldq = (int)cl->q.ss;
    gemm_call calls[MAX_CALLS_INLINE];
    softmax_args sa;

    if (p->t.variant == ATTN_SPLIT_REPEAT && (stages & STAGE_REPEAT)) {
        RC_TRY(cuda_pack_view(sp->kr, &cl->k, es, s->b, s->hq, sp->g, s->skv, cl->skvp, s->d,
                              cl->stream));
        RC_TRY(cuda_pack_view(sp->vr, &cl->v, es, s->b, s->hq, sp->g, s->skv, cl->skvp, s->d,
                              cl->stream));
    }
    if (p->t.variant == ATTN_SPLIT_REPEAT) {
        K = (const char *)sp->kr;
        V = (const char *)sp->vr;
        ldk = d;
    }
    sa.ld = cl->skvp;
    sa.sq_pad = sqp;
    sa.sq = s->sq;
    sa.skv = s->skv;
    sa.causal = s->causal;
    sa.scale_log2e = (float)(1.4426950408889634 / sqrt((double)s->d));

    for (int64_t u0 = 0; u0 < sp->units; u0 += sp->chunk) {
        int64_t U = sp->units - u0 < sp->chunk ? sp->units - u0 : sp->chunk;
        /* a long schedule (g or U over the inline capacity) is issued in
         * slices of MAX_CALLS_INLINE groups: a slice smaller than g takes
         * the broadcast form, one call per group, so it always fits */
        int n = schedule(p, cl, u0, U, calls, MAX_CALLS_INLINE);
        int64_t step = n < 0 ? MAX_CALLS_INLINE : U;
        for (int64_t done = 0; done < U; done += step) {
            int64_t Us = U - done < step ? U - done : step;
            int64_t so_base = done * sp->g * sqp * cl->skvp;
            if (step != U && (n = schedule(p, cl, u0 + done, Us, calls, MAX_CALLS_INLINE)) < 0) {
                rc = ATTUNE_EUNSUPP; /* unreachable: Us <= cap < g */
                goto fail;
            }
            for (int c = 0; c < n && (stages & STAGE_QK); c++) {
                const gemm_call *gc = &calls[c];
                /* S^T = K Q^T in column-major terms. Row-major K [skvp, d]
                 * (row stride ldk) is column-major d x skvp (ld ldk), so
                 * op(A) = T gives skvp x d; row-major Q [rows, d] is
                 * column-major d x rows (ld ldq), op(B) = N; column-major
                 * C = S^T, skvp x rows (ld skvp) is row-major S [rows, skvp].
                 * m = skvp, n = rows, k = d. */
                BLAS_TRY(cuda_blas.gemm_strided_batched_ex(
                    p->blas, CUBLAS_OP_T, CUBLAS_OP_N, skp, (int)gc->rows, d, one,
                    K + gc->ko * es, dt, ldk, gc->kst,
                    (const char *)cl->q.data + gc->qo * es, dt, ldq, gc->qst, zero,
                    (char *)sp->S + (so_base + gc->so) * sp->s_es, st, skp, gc->sst, gc->batch,
                    ct, CUBLAS_GEMM_DEFAULT));
            }
            sa.nrows = Us * sp->g * sqp;
            if (stages & STAGE_SOFTMAX)
                RC_TRY(softmax_launch((const char *)sp->S + so_base * sp->s_es, f16acc,
                                      (char *)sp->P + so_base * es, s->dtype, &sa, cl->stream));
            for (int c = 0; c < n && (stages & STAGE_PV); c++) {
                const gemm_call *gc = &calls[c];
                /* O^T = V^T P^T in column-major terms. Row-major V
                 * [skvp, d] is column-major d x skvp (ld ldk), op(A) = N;
                 * row-major P [rows, skvp] is column-major skvp x rows
                 * (ld skvp), op(B) = N; C = O^T, d x rows (ld of O's row
                 * stride, equal to Q's) is row-major O [rows, d].
                 * m = d, n = rows, k = skvp. */
                BLAS_TRY(cuda_blas.gemm_strided_batched_ex(
                    p->blas, CUBLAS_OP_N, CUBLAS_OP_N, d, (int)gc->rows, skp, one,
                    V + gc->ko * es, dt, ldk, gc->kst,
                    (const char *)sp->P + (so_base + gc->so) * es, dt, skp, gc->sst, zero,
                    (char *)cl->o.data + gc->qo * es, dt, ldq, gc->qst, gc->batch, ct,
                    CUBLAS_GEMM_DEFAULT));
            }
        }
    }
    return 0;
fail:
    return rc;
}

int cuda_split_launch(attn_plan *p, const cuda_call *c)
{
    return split_enqueue(p, c, STAGE_ALL);
}

/* The session's buffers as a call of p (the plan's own copies where it
 * has them, already filled by a full run). */
static void session_call(attn_plan *p, cuda_call *c)
{
    attn_session *ss = p->ss;
    memset(c, 0, sizeof *c);
    c->s = ss->s;
    c->stream = ss->stream;
    c->sqp = p->qp != NULL ? p->sq_pad : ss->s.sq;
    c->skvp = p->kp != NULL ? p->skv_pad : ss->s.skv;
    attn_shape rows = ss->s;
    rows.sq = c->sqp, rows.skv = c->skvp;
    attn_io io;
    attn_io_contiguous(&rows, p->qp != NULL ? p->qp : ss->q, p->kp != NULL ? p->kp : ss->k,
                       p->kp != NULL ? p->vp : ss->v, p->qp != NULL ? p->op : ss->o, &io);
    c->q = io.q, c->k = io.k, c->v = io.v, c->o = io.o;
}

/* Time `iters` back-to-back runs of the given stages in one graph replay
 * (after one untimed replay); microseconds per run. */
static int time_stages(attn_plan *p, int stages, int iters, double *us)
{
    int rc = 0, capturing = 0;
    attn_session *ss = p->ss;
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    float ms = 0.f;
    cuda_call c;
    session_call(p, &c);

    CU_TRY(cudaStreamBeginCapture(ss->stream, cudaStreamCaptureModeThreadLocal));
    capturing = 1;
    for (int it = 0; it < iters; it++)
        RC_TRY(split_enqueue(p, &c, stages));
    capturing = 0;
    CU_TRY(cudaStreamEndCapture(ss->stream, &graph));
    CU_TRY(cudaGraphInstantiate(&exec, graph, 0));
    CU_TRY(cudaGraphLaunch(exec, ss->stream));
    CU_TRY(cudaEventRecord(ss->ev0, ss->stream));
    CU_TRY(cudaGraphLaunch(exec, ss->stream));
    CU_TRY(cudaEventRecord(ss->ev1, ss->stream));
    CU_TRY(cudaEventSynchronize(ss->ev1));
    CU_TRY(cudaEventElapsedTime(&ms, ss->ev0, ss->ev1));
    *us = (double)ms * 1000.0 / iters;
fail:
    if (capturing) {
        cudaStreamEndCapture(ss->stream, &graph);
        cudaGetLastError();
    }
    if (graph != NULL)
        cudaGraphDestroy(graph);
    if (exec != NULL)
        cudaGraphExecDestroy(exec);
    return rc;
}

/* cuBLAS workspace per GEMM plan: 32 MiB is what cuBLAS recommends on
 * Hopper; set explicitly so graph capture never makes it allocate. */
#define BLAS_WS_BYTES ((size_t)32 << 20)

/* The call's stream on p's handle, then p's own workspace again:
 * cublasSetStream resets a handle's workspace to cuBLAS's default pool
 * (cuBLAS guide, cublasSetStream), so without the second call every run
 * would plan its GEMMs against the default pool, shared by every handle
 * of the process, and not against the 32 MiB the plan owns. */
static int blas_bind(attn_plan *p, cudaStream_t stream)
{
    int rc = 0;
    BLAS_TRY(cuda_blas.set_stream(p->blas, stream));
    BLAS_TRY(cuda_blas.set_workspace(p->blas, p->blas_ws, BLAS_WS_BYTES));
    return 0;
fail:
    return rc;
}

int cuda_split_profile(attn_plan *p, int iters, double us[4])
{
    int rc = 0;
    static const int stage[4] = {STAGE_QK, STAGE_SOFTMAX, STAGE_PV, STAGE_REPEAT};
    if (p == NULL || p->ss == NULL || us == NULL || iters < 1 ||
        (p->t.variant != ATTN_SPLIT && p->t.variant != ATTN_SPLIT_REPEAT &&
         p->t.variant != ATTN_FOLDED))
        return ATTUNE_EINVAL;
    CU_TRY(cudaSetDevice(p->dev));
    /* one full run first: the own copies, S and P hold real values, so each
     * stage alone reads the data it would read in a real call */
    RC_TRY(attn_cuda_ops.run(p));
    RC_TRY(blas_bind(p, p->ss->stream));
    for (int i = 0; i < 4; i++) {
        us[i] = 0.0;
        if (stage[i] == STAGE_REPEAT && p->t.variant != ATTN_SPLIT_REPEAT)
            continue;
        RC_TRY(time_stages(p, stage[i], iters, &us[i]));
    }
    return 0;
fail:
    cudaStreamSynchronize(p->ss->stream);
    return rc;
}

/* ---- kernel ops (kernels/variant.h) of the families desc_split.c
 * describes: the backend lists, plans and runs the GEMM variants only
 * through these */

/* Variant v for every acc (f16 for f16 data only, f32 always) and pad of
 * attn_pads (docs/tuning.md: a pad that changes no length is still listed
 * and measured, it costs one tactic); the grouped variants (split_repeat,
 * folded) when hkv < hq. Writes up to max, returns the count written. */
static int list_gemm(attn_variant v, const attn_shape *s, attn_tactic *out, int max)
{
    int n = 0;
    if (v != ATTN_SPLIT && s->hkv == s->hq)
        return 0;
    for (int acc = ATTN_ACC_F16; acc <= ATTN_ACC_F32; acc++) {
        if (acc == ATTN_ACC_F16 && s->dtype != ATTN_F16)
            continue;
        for (int pi = 0; pi < ATTN_NPADS && n < max; pi++) {
            memset(&out[n], 0, sizeof out[n]);
            out[n].variant = v;
            out[n].acc = (attn_acc)acc;
            out[n].pad = attn_pads[pi];
            n++;
        }
    }
    return n;
}

static int list_split(const attn_device_info *dev, const attn_shape *s, attn_tactic *out, int max)
{
    (void)dev;
    return list_gemm(ATTN_SPLIT, s, out, max);
}

static int list_split_repeat(const attn_device_info *dev, const attn_shape *s, attn_tactic *out,
                             int max)
{
    (void)dev;
    return list_gemm(ATTN_SPLIT_REPEAT, s, out, max);
}

static int list_folded(const attn_device_info *dev, const attn_shape *s, attn_tactic *out,
                       int max)
{
    (void)dev;
    return list_gemm(ATTN_FOLDED, s, out, max);
}

/* The S/P workspace, and the plan's own cuBLAS handle and workspace. */
static int gemm_plan(attn_plan *p, const attn_call *c, char *note, size_t notelen)
{
    (void)c, (void)note, (void)notelen;
    int rc = 0;
    RC_TRY(cuda_split_prepare(p));
    RC_TRY(cuda_dev_alloc(&p->blas_ws, BLAS_WS_BYTES));
    RC_TRY(cuda_blas_open());
    BLAS_TRY(cuda_blas.create(&p->blas));
    BLAS_TRY(cuda_blas.set_workspace(p->blas, p->blas_ws, BLAS_WS_BYTES));
    /* Default math: f32 GEMMs stay f32 (no TF32); 16-bit inputs still use
     * tensor cores. */
    BLAS_TRY(cuda_blas.set_math_mode(p->blas, CUBLAS_DEFAULT_MATH));
    return 0;
fail:
    return rc;
}

static int gemm_run(attn_plan *p, const attn_call *c)
{
    int rc = 0;
    RC_TRY(blas_bind(p, c->stream));
    return cuda_split_launch(p, c);
fail:
    return rc;
}

static void gemm_free(attn_plan *p)
{
    if (p->blas != NULL)
        cuda_blas.destroy(p->blas); /* a handle exists: the library is open */
    p->blas = NULL;
    cuda_split_release(p);
    cudaFree(p->blas_ws);
    p->blas_ws = NULL;
}

extern "C" const attn_kernel_ops cuda_split_ops = {
    0, 0, list_split, gemm_plan, gemm_run, gemm_free, cuda_split_reads, NULL, NULL, NULL,
};
extern "C" const attn_kernel_ops cuda_split_repeat_ops = {
    0, 0, list_split_repeat, gemm_plan, gemm_run, gemm_free, cuda_split_reads, NULL, NULL, NULL,
};
extern "C" const attn_kernel_ops cuda_folded_ops = {
    0, 0, list_folded, gemm_plan, gemm_run, gemm_free, cuda_split_reads, NULL, NULL, NULL,
};
