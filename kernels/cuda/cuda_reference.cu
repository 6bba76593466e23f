/* cuda_reference.cu -- float64 attention of selected output rows, on the GPU.
 *
 * The reference every tactic is checked against: inputs read as stored
 * (after rounding to the storage dtype), every product, sum and exp in
 * double. One block per requested row, two passes over the visible keys:
 *   pass 1: scores s_j = scale * q.k_j -> running max M and sum L;
 *   pass 2: scores again (recomputing costs less than a scratch buffer of
 *           nrows x skv doubles would), p_j = exp(s_j - M), out += p_j v_j.
 * A row that sees no key (causal with sq > skv) is all zeros. The tuner
 * picks the rows (all of a small shape, a sample of a large one). */
#include "cuda_internal.cuh"

#define REF_THREADS 256
#define REF_WARPS (REF_THREADS / 32)
#define REF_CHUNK 256            /* keys scored per pass-2 round */
#define REF_MAXD ATTN_MAX_HEADDIM
#define REF_ACC (REF_MAXD / REF_THREADS) /* output columns per thread */

typedef struct ref_args {
    int64_t b, hq, hkv, sq, skv, d;
    int causal;
    double scale; /* 1/sqrt(d), times q's and k's descale (e4m3) */
    double dv;    /* v's descale (e4m3), else 1 */
} ref_args;

static __device__ __forceinline__ double warp_sum(double x)
{
    for (int o = 16; o > 0; o >>= 1)
        x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

/* s_j for key j: one warp, lanes stride over d. Every lane gets the sum. */
template <typename T>
static __device__ __forceinline__ double score(const double *qs, const T *krow, int64_t d,
                                               double scale, int lane)
{
    double acc = 0.0;
    for (int64_t c = lane; c < d; c += 32)
        acc += qs[c] * dt_traits<T>::to_d(krow[c]);
    return warp_sum(acc) * scale;
}

template <typename T>
__global__ void __launch_bounds__(REF_THREADS)
reference_kernel(const T *__restrict__ q, const T *__restrict__ k, const T *__restrict__ v,
                 const int64_t *__restrict__ rows, ref_args a, double *__restrict__ out)
{
    __shared__ double qs[REF_MAXD];
    __shared__ double ps[REF_CHUNK];
    __shared__ double wm[REF_WARPS], wl[REF_WARPS];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

    const int64_t r = rows[blockIdx.x];
    const int64_t i = r % a.sq;           /* query position */
    const int64_t bh = r / a.sq;          /* bi * hq + h */
    const int64_t bi = bh / a.hq, h = bh % a.hq;
    const int64_t kvh = bi * a.hkv + h / (a.hq / a.hkv);
    const T *kb = k + kvh * a.skv * a.d;
    const T *vb = v + kvh * a.skv * a.d;
    int64_t n = a.skv;                    /* visible keys, bottom-right causal */
    if (a.causal) {
        n = i + (a.skv - a.sq) + 1;
        n = n < 0 ? 0 : (n > a.skv ? a.skv : n);
    }

    for (int64_t c = tid; c < a.d; c += REF_THREADS)
        qs[c] = dt_traits<T>::to_d(q[r * a.d + c]);
    __syncthreads();

    /* pass 1: each warp keeps an online (max, sum) over its keys */
    double m = -INFINITY, l = 0.0;
    for (int64_t j = warp; j < n; j += REF_WARPS) {
        double s = score(qs, kb + j * a.d, a.d, a.scale, lane);
        if (s > m) {
            l = l * exp(m - s) + 1.0;
            m = s;
        } else {
            l += exp(s - m);
        }
    }
    if (lane == 0) {
        wm[warp] = m;
        wl[warp] = l;
    }
    __syncthreads();
    double M = -INFINITY, L = 0.0;
    for (int w = 0; w < REF_WARPS; w++)
        M = fmax(M, wm[w]);
    for (int w = 0; w < REF_WARPS; w++)
        if (wl[w] > 0.0)
            L += wl[w] * exp(wm[w] - M);

    /* pass 2: accumulate p_j v_j; thread tid owns columns tid + 256*u */
    double acc[REF_ACC];
#pragma unroll
    for (int u = 0; u < REF_ACC; u++)
        acc[u] = 0.0;
    for (int64_t j0 = 0; j0 < n; j0 += REF_CHUNK) {
        int64_t cn = n - j0 < REF_CHUNK ? n - j0 : REF_CHUNK;
        for (int64_t jj = warp; jj < cn; jj += REF_WARPS) {
            double s = score(qs, kb + (j0 + jj) * a.d, a.d, a.scale, lane);
            if (lane == 0)
                ps[jj] = exp(s - M);
        }
        __syncthreads();
        for (int64_t jj = 0; jj < cn; jj++) {
            const T *vr = vb + (j0 + jj) * a.d;
            double p = ps[jj];
#pragma unroll
            for (int u = 0; u < REF_ACC; u++) {
                int64_t c = tid + (int64_t)u * REF_THREADS;
                if (c < a.d)
                    acc[u] += p * dt_traits<T>::to_d(vr[c]);
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int u = 0; u < REF_ACC; u++) {
        int64_t c = tid + (int64_t)u * REF_THREADS;
        if (c < a.d)
            out[(int64_t)blockIdx.x * a.d + c] = n > 0 ? acc[u] / L * a.dv : 0.0;
    }
}

/* e4m3 -> bf16, exactly (3 mantissa bits fit in 7, e4m3's exponents in
 * bf16's). */
__global__ void e4m3_widen_kernel(__nv_bfloat16 *dst, const __nv_fp8_e4m3 *src, int64_t n)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * blockDim.x)
        dst[e] = __float2bfloat16_rn(e4m3_to_float(src[e]));
}

/* The e4m3 reference: the stored values widened to bf16 (exact) in
 * scratch, then the bf16 kernel with a's descales (one instantiation
 * fewer: an fp8 one spilled on sm_87). */
static int e4m3_reference(const attn_session *ss, const int64_t *rows, int nrows, ref_args a,
                          double *ref, cudaStream_t stream)
{
    int rc = 0;
    void *w[3] = {NULL, NULL, NULL};
    const void *src[3] = {ss->q, ss->k, ss->v};
    const int64_t n[3] = {ss->nq, ss->nkv, ss->nkv};
    for (int i = 0; i < 3; i++) {
        CU_TRY(cudaMallocAsync(&w[i], (size_t)n[i] * 2, stream));
        unsigned gr = (unsigned)((n[i] + 255) / 256 < 4096 ? (n[i] + 255) / 256 : 4096);
        e4m3_widen_kernel<<<gr, 256, 0, stream>>>((__nv_bfloat16 *)w[i],
                                                   (const __nv_fp8_e4m3 *)src[i], n[i]);
        CU_LAUNCHED();
    }
    reference_kernel<__nv_bfloat16><<<nrows, REF_THREADS, 0, stream>>>(
        (const __nv_bfloat16 *)w[0], (const __nv_bfloat16 *)w[1], (const __nv_bfloat16 *)w[2], rows,
        a, ref);
    CU_LAUNCHED();
fail:
    for (int i = 0; i < 3; i++)
        if (w[i] != NULL)
            cudaFreeAsync(w[i], stream);
    return rc;
}

int cuda_reference_rows(const attn_session *ss, const int64_t *rows, int nrows, double *ref,
                        cudaStream_t stream)
{
    int rc = 0;
    const attn_shape *s = &ss->s;
    ref_args a = {s->b, s->hq, s->hkv, s->sq, s->skv, s->d, s->causal, 0.0, 1.0};
    a.scale = 1.0 / sqrt((double)s->d);
    if (nrows <= 0)
        return 0;
    if (s->d > REF_MAXD)
        return ATTUNE_EUNSUPP;
    switch (s->dtype) {
    case ATTN_F16:
        reference_kernel<__half><<<nrows, REF_THREADS, 0, stream>>>(
            (const __half *)ss->q, (const __half *)ss->k, (const __half *)ss->v, rows, a, ref);
        break;
    case ATTN_BF16:
        reference_kernel<__nv_bfloat16><<<nrows, REF_THREADS, 0, stream>>>(
            (const __nv_bfloat16 *)ss->q, (const __nv_bfloat16 *)ss->k,
            (const __nv_bfloat16 *)ss->v, rows, a, ref);
        break;
    case ATTN_F32:
        reference_kernel<float><<<nrows, REF_THREADS, 0, stream>>>(
            (const float *)ss->q, (const float *)ss->k, (const float *)ss->v, rows, a, ref);
        break;
    case ATTN_E4M3: /* the stored values times their descale factors */
        a.scale *= (double)ss->descale_h[0] * (double)ss->descale_h[1];
        a.dv = (double)ss->descale_h[2];
        return e4m3_reference(ss, rows, nrows, a, ref, stream);
    default:
        return ATTUNE_EINVAL;
    }
    CU_LAUNCHED();
    return 0;
fail:
    return rc;
}

int cuda_reference_source_rows(const attn_session *ss, const int64_t *rows, int nrows,
                               double *ref, cudaStream_t stream)
{
    int rc = 0;
    const attn_shape *s = &ss->s;
    ref_args a = {s->b, s->hq, s->hkv, s->sq, s->skv, s->d, s->causal, 0.0, 1.0};
    a.scale = 1.0 / sqrt((double)s->d);
    if (s->dtype != ATTN_E4M3 || ss->src[0] == NULL)
        return ATTUNE_EUNSUPP;
    if (nrows <= 0)
        return 0;
    if (s->d > REF_MAXD)
        return ATTUNE_EUNSUPP;
    reference_kernel<__nv_bfloat16><<<nrows, REF_THREADS, 0, stream>>>(
        (const __nv_bfloat16 *)ss->src[0], (const __nv_bfloat16 *)ss->src[1],
        (const __nv_bfloat16 *)ss->src[2], rows, a, ref);
    CU_LAUNCHED();
    return 0;
fail:
    return rc;
}
