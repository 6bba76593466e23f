/* cuda_data.cu -- data movement kernels of the CUDA backend: seeded normal
 * fill, NaN poison, pad/unpad of sequence rows, repeat_kv, row gather.
 *
 * All copies are memory-bound: they move 16-byte words when the row length
 * in bytes allows it (d*es % 16 == 0, true for every head size that is a
 * multiple of 8 in f16/bf16, 4 in f32), else 4- or 2-byte words, and index
 * in 32 bits when the element counts fit (64-bit division would make a copy
 * of a large tensor arithmetic-bound). */
#include <math.h>

#include "cuda_internal.cuh"

/* ---- GPU kernels */

static __device__ __forceinline__ uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Element e of stream (seed, id): Box-Muller on the 64-bit hash of the pair
 * e/2; even elements take the cosine, odd ones the sine. u1 is in (0, 1]
 * so log(u1) is finite. */
template <typename T>
__global__ void fill_normal_kernel(T *x, int64_t n, uint64_t seed, uint32_t id)
{
    const uint64_t key = mix64(seed ^ (0x9e3779b97f4a7c15ULL * (uint64_t)(id + 1)));
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * blockDim.x) {
        uint64_t h = mix64(key + 0x9e3779b97f4a7c15ULL * (uint64_t)(e >> 1));
        float u1 = ((float)(h >> 40) + 1.0f) * (1.0f / 16777216.0f);
        float u2 = (float)(h & 0xffffffULL) * (1.0f / 16777216.0f);
        float r = sqrtf(-2.0f * logf(u1));
        float z = (e & 1) ? r * sinpif(2.0f * u2) : r * cospif(2.0f * u2);
        x[e] = dt_traits<T>::from_f(z);
    }
}

template <typename T>
__global__ void fill_nan_kernel(T *x, int64_t n)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * blockDim.x)
        x[e] = dt_traits<T>::from_f(__int_as_float(0x7fc00000));
}

template <typename T>
__global__ void gather_rows_kernel(double *out, const T *x, const int64_t *rows, int nrows,
                                   int64_t d)
{
    int64_t n = (int64_t)nrows * d;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * blockDim.x) {
        int64_t k = e / d, c = e - k * d;
        out[e] = dt_traits<T>::to_d(x[rows[k] * d + c]);
    }
}

/* ---- launchers */

/* Grid for a grid-stride loop over n items: enough blocks to fill the
 * device several times over, no more (the loop covers the rest). */
static unsigned grid_for(int64_t n, int threads)
{
    int64_t b = (n + threads - 1) / threads;
    const int64_t cap = 132 * 32; /* H200: 132 SMs x 32 blocks deep */
    if (b > cap)
        b = cap;
    return (unsigned)(b < 1 ? 1 : b);
}

int cuda_fill_normal(void *x, attn_dtype t, int64_t n, uint64_t seed, uint32_t id,
                     cudaStream_t stream)
{
    int rc = 0;
    unsigned gr = grid_for(n, 256);
    switch (t) {
    case ATTN_F16: fill_normal_kernel<__half><<<gr, 256, 0, stream>>>((__half *)x, n, seed, id); break;
    case ATTN_BF16: fill_normal_kernel<__nv_bfloat16><<<gr, 256, 0, stream>>>((__nv_bfloat16 *)x, n, seed, id); break;
    case ATTN_F32: fill_normal_kernel<float><<<gr, 256, 0, stream>>>((float *)x, n, seed, id); break;
    default: return ATTUNE_EINVAL;
    }
    CU_LAUNCHED();
    return 0;
fail:
    return rc;
}

int cuda_fill_nan(void *x, attn_dtype t, int64_t n, cudaStream_t stream)
{
    int rc = 0;
    unsigned gr = grid_for(n, 256);
    switch (t) {
    case ATTN_F16: fill_nan_kernel<__half><<<gr, 256, 0, stream>>>((__half *)x, n); break;
    case ATTN_BF16: fill_nan_kernel<__nv_bfloat16><<<gr, 256, 0, stream>>>((__nv_bfloat16 *)x, n); break;
    case ATTN_F32: fill_nan_kernel<float><<<gr, 256, 0, stream>>>((float *)x, n); break;
    default: return ATTUNE_EINVAL;
    }
    CU_LAUNCHED();
    return 0;
fail:
    return rc;
}

/* ---- e4m3 inputs (attn_ops.reference_source says how they are made) */

/* *amax_bits = max |x| over x's n elements, as float bits (a non-negative
 * float orders like its bits); *amax_bits must start at 0. */
__global__ void amax_kernel(const __nv_bfloat16 *x, int64_t n, unsigned *amax_bits)
{
    float m = 0.0f;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * blockDim.x)
        m = fmaxf(m, fabsf(__bfloat162float(x[e])));
    for (int o = 16; o > 0; o >>= 1)
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if ((threadIdx.x & 31) == 0)
        atomicMax(amax_bits, __float_as_uint(m));
}

/* x8 = e4m3(src / descale), descale = amax / 448 (1 for an all-zero src):
 * round to nearest even, saturating (the constructor's cvt.rn.satfinite). */
__global__ void quantize_kernel(__nv_fp8_e4m3 *x8, const __nv_bfloat16 *src, int64_t n,
                                const unsigned *amax_bits)
{
    float amax = __uint_as_float(*amax_bits);
    float descale = amax > 0.0f ? amax / 448.0f : 1.0f;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * blockDim.x)
        x8[e] = __nv_fp8_e4m3(__bfloat162float(src[e]) / descale);
}

__global__ void descale_kernel(float *descale, const unsigned *amax_bits)
{
    float amax = __uint_as_float(*amax_bits);
    *descale = amax > 0.0f ? amax / 448.0f : 1.0f;
}

int cuda_fill_e4m3(void *x8, void *src, int64_t n, uint64_t seed, uint32_t id, float *descale,
                   unsigned *scratch, cudaStream_t stream)
{
    int rc = 0;
    unsigned gr = grid_for(n, 256);
    RC_TRY(cuda_fill_normal(src, ATTN_BF16, n, seed, id, stream));
    CU_TRY(cudaMemsetAsync(scratch, 0, sizeof *scratch, stream));
    amax_kernel<<<gr, 256, 0, stream>>>((const __nv_bfloat16 *)src, n, scratch);
    CU_LAUNCHED();
    quantize_kernel<<<gr, 256, 0, stream>>>((__nv_fp8_e4m3 *)x8, (const __nv_bfloat16 *)src, n,
                                            scratch);
    CU_LAUNCHED();
    descale_kernel<<<1, 1, 0, stream>>>(descale, scratch);
    CU_LAUNCHED();
    return 0;
fail:
    return rc;
}

/* ---- views: strided copies to and from contiguous buffers */

/* One word w of row i of head h of batch bi of a [b, heads, rows_pad, d]
 * contiguous buffer, per thread. pack: from view (head h / rep), rows past
 * `rows` zero; unpack: the real rows back into the view. Strides in words. */
template <typename W>
__global__ void pack_view_kernel(W *dst, const W *src, int64_t total, int64_t wpr, int64_t rows,
                                 int64_t rows_pad, int64_t heads, int64_t rep, int64_t sb, int64_t sh,
                                 int64_t ss)
{
    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += (int64_t)gridDim.x * blockDim.x) {
        int64_t w = idx % wpr, r = idx / wpr;
        const int64_t i = r % rows_pad;
        r /= rows_pad;
        const int64_t h = r % heads, bi = r / heads;
        W x;
        if (i < rows)
            x = src[bi * sb + (h / rep) * sh + i * ss + w];
        else
            memset(&x, 0, sizeof x);
        dst[idx] = x;
    }
}

template <typename W>
__global__ void unpack_view_kernel(W *dst, const W *src, int64_t total, int64_t wpr, int64_t rows,
                                   int64_t rows_pad, int64_t heads, int64_t sb, int64_t sh, int64_t ss)
{
    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += (int64_t)gridDim.x * blockDim.x) {
        int64_t w = idx % wpr, r = idx / wpr;
        const int64_t i = r % rows;
        r /= rows;
        const int64_t h = r % heads, bi = r / heads;
        dst[bi * sb + h * sh + i * ss + w] = src[((bi * heads + h) * rows_pad + i) * wpr + w];
    }
}

/* The widest word (16, 4, 2 or 1 bytes) dividing the row, the view's
 * strides (elements of es bytes) and its base address. */
static size_t view_word(const attn_tensor *v, size_t es, int64_t d)
{
    const uint64_t bytes = (uint64_t)d * es, sb = (uint64_t)v->sb * es, sh = (uint64_t)v->sh * es,
                   ss = (uint64_t)v->ss * es, base = (uint64_t)(uintptr_t)v->data;
    const uint64_t all = bytes | sb | sh | ss | base;
    return all % 16 == 0 ? 16 : (all % 4 == 0 ? 4 : (all % 2 == 0 ? 2 : 1));
}


int cuda_pack_view(void *dst, const attn_tensor *src, size_t es, int64_t b, int64_t heads, int64_t rep,
                   int64_t rows, int64_t rows_pad, int64_t d, cudaStream_t stream)
{
    int rc = 0;
    const size_t w = view_word(src, es, d);
    const int64_t k = (int64_t)(w / es), wpr = d / k, total = b * heads * rows_pad * wpr;
    if (total == 0)
        return 0;
    const unsigned gr = grid_for(total, 256);
#define PACK(W_) \
    CU_TRY(cu_launch(pack_view_kernel<W_>, gr, 256, 0, stream, (W_ *)dst, (const W_ *)src->data, total, \
                     wpr, rows, rows_pad, heads, rep, src->sb / k, src->sh / k, src->ss / k))
    if (w == 16)
        PACK(uint4);
    else if (w == 4)
        PACK(uint32_t);
    else if (w == 2)
        PACK(uint16_t);
    else
        PACK(uint8_t);
#undef PACK
    return 0;
fail:
    return rc;
}

int cuda_unpack_view(const attn_tensor *dst, const void *src, size_t es, int64_t b, int64_t heads,
                     int64_t rows, int64_t rows_pad, int64_t d, cudaStream_t stream)
{
    int rc = 0;
    const size_t w = view_word(dst, es, d);
    const int64_t k = (int64_t)(w / es), wpr = d / k, total = b * heads * rows * wpr;
    if (total == 0)
        return 0;
    const unsigned gr = grid_for(total, 256);
#define UNPACK(W_) \
    CU_TRY(cu_launch(unpack_view_kernel<W_>, gr, 256, 0, stream, (W_ *)dst->data, (const W_ *)src, total, \
                     wpr, rows, rows_pad, heads, dst->sb / k, dst->sh / k, dst->ss / k))
    if (w == 16)
        UNPACK(uint4);
    else if (w == 4)
        UNPACK(uint32_t);
    else if (w == 2)
        UNPACK(uint16_t);
    else
        UNPACK(uint8_t);
#undef UNPACK
    return 0;
fail:
    return rc;
}

int cuda_gather_rows(double *out, const void *x, attn_dtype t, const int64_t *rows,
                     int nrows, int64_t d, cudaStream_t stream)
{
    int rc = 0;
    unsigned gr = grid_for((int64_t)nrows * d, 256);
    switch (t) {
    case ATTN_F16: gather_rows_kernel<__half><<<gr, 256, 0, stream>>>(out, (const __half *)x, rows, nrows, d); break;
    case ATTN_BF16: gather_rows_kernel<__nv_bfloat16><<<gr, 256, 0, stream>>>(out, (const __nv_bfloat16 *)x, rows, nrows, d); break;
    case ATTN_F32: gather_rows_kernel<float><<<gr, 256, 0, stream>>>(out, (const float *)x, rows, nrows, d); break;
    default: return ATTUNE_EINVAL;
    }
    CU_LAUNCHED();
    return 0;
fail:
    return rc;
}
