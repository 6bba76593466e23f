/* dtype.c -- f16 and bf16 <-> float conversions in software (RNE), typed access.
 *
 * Bit layouts (IEEE 754 binary16 and the bfloat16 truncation of binary32):
 *   f32  s eeeeeeee mmmmmmmmmmmmmmmmmmmmmmm   bias 127
 *   f16  s eeeee mmmmmmmmmm                   bias 15, subnormal unit 2^-24
 *   bf16 s eeeeeeee mmmmmmm                   bias 127 (the top half of an f32)
 * Everything is integer arithmetic on the bits, so the result does not
 * depend on the FPU rounding mode, flush-to-zero or half hardware. */
#include "dtype.h"

#include <assert.h>
#include <math.h>
#include <string.h>

static uint32_t f32_bits(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    return x;
}

static float f32_from_bits(uint32_t x)
{
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

uint16_t dtype_f32_to_f16(float f)
{
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;

    if (ax > 0x7f800000u) /* NaN: set the quiet bit, keep the top 9 payload bits */
        return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    /* 65520 = 0x477ff000 is halfway between 65504 (largest finite, odd
     * mantissa 0x3ff) and 65536: ties go to even, i.e. up, i.e. to Inf. */
    if (ax >= 0x477ff000u)
        return (uint16_t)(sign | 0x7c00u);
    if (ax >= 0x38800000u) { /* >= 2^-14: a normal half */
        /* Rebias the exponent 127 -> 15 (subtract 112 << 23), drop 13 bits. */
        uint32_t h = (ax - 0x38000000u) >> 13;
        uint32_t rest = ax & 0x1fffu;
        if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
            h++; /* a carry out of the mantissa bumps the exponent: still right */
        return (uint16_t)(sign | h);
    }
    /* Subnormal half (or zero). With e the biased float exponent and m the
     * mantissa with its implicit bit, the value is m * 2^(e-150), which is
     * m * 2^(e-126) units of 2^-24. e <= 112 here, so the shift is >= 14.
     * Values <= 2^-25 (e < 102, or e == 102 exactly at the tie) give 0. */
    uint32_t e = ax >> 23;
    if (e < 102)
        return sign;
    uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e; /* 14..24 */
    uint32_t h = m >> shift;
    uint32_t rest = m & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rest > half || (rest == half && (h & 1u)))
        h++; /* 0x3ff + 1 = 0x400 is the smallest normal: also right */
    return (uint16_t)(sign | h);
}

float dtype_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu;
    uint32_t m = h & 0x3ffu;
    uint32_t x;

    if (e == 0x1f) { /* Inf, or NaN made quiet with its payload kept */
        x = sign | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0);
    } else if (e != 0) {
        x = sign | ((e + 112) << 23) | (m << 13);
    } else if (m == 0) {
        x = sign; /* +-0 */
    } else {
        /* Subnormal m * 2^-24: with the leading one at bit p, the value is
         * 1.f * 2^(p-24), biased float exponent p + 103. Shift the leading
         * one up to bit 10 (the implicit position), counting down from 113. */
        e = 113;
        while (!(m & 0x400u)) {
            m <<= 1;
            e--;
        }
        x = sign | (e << 23) | ((m & 0x3ffu) << 13);
    }
    return f32_from_bits(x);
}

uint16_t dtype_f32_to_bf16(float f)
{
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) /* NaN: quiet, keep sign and top payload */
        return (uint16_t)((x >> 16) | 0x0040u);
    /* Round to nearest even on the low 16 bits. Adding 0x7fff (+1 when the
     * kept part is odd) carries exactly when the rest is above half, or at
     * half with an odd kept part; the carry may ripple into the exponent,
     * and from the largest finite value into Inf, as RNE requires. Cannot
     * overflow 32 bits: the largest non-NaN pattern is 0xff800000. */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

float dtype_bf16_to_f32(uint16_t h)
{
    uint32_t x = (uint32_t)h << 16;
    if ((x & 0x7fffffffu) > 0x7f800000u)
        x |= 0x400000u; /* quiet a signalling NaN */
    return f32_from_bits(x);
}

float dtype_round(attn_dtype t, float f)
{
    switch (t) {
    case ATTN_F16:
        return dtype_f16_to_f32(dtype_f32_to_f16(f));
    case ATTN_BF16:
        return dtype_bf16_to_f32(dtype_f32_to_bf16(f));
    case ATTN_F32:
        break;
    }
    return f;
}

float dtype_load(const void *buf, attn_dtype t, size_t i)
{
    switch (t) {
    case ATTN_F16:
        return dtype_f16_to_f32(((const uint16_t *)buf)[i]);
    case ATTN_BF16:
        return dtype_bf16_to_f32(((const uint16_t *)buf)[i]);
    case ATTN_F32:
        break;
    }
    return ((const float *)buf)[i];
}

double dtype_load_f64(const void *buf, attn_dtype t, size_t i)
{
    return (double)dtype_load(buf, t, i);
}

void dtype_store(void *buf, attn_dtype t, size_t i, float f)
{
    switch (t) {
    case ATTN_F16:
        ((uint16_t *)buf)[i] = dtype_f32_to_f16(f);
        return;
    case ATTN_BF16:
        ((uint16_t *)buf)[i] = dtype_f32_to_bf16(f);
        return;
    case ATTN_F32:
        break;
    }
    ((float *)buf)[i] = f;
}

void dtype_load_n(const void *src, attn_dtype t, float *dst, size_t n)
{
    const uint16_t *h = (const uint16_t *)src;
    switch (t) {
    case ATTN_F16:
        for (size_t i = 0; i < n; i++)
            dst[i] = dtype_f16_to_f32(h[i]);
        return;
    case ATTN_BF16:
        for (size_t i = 0; i < n; i++)
            dst[i] = dtype_bf16_to_f32(h[i]);
        return;
    case ATTN_F32:
        break;
    }
    memcpy(dst, src, n * sizeof(float));
}

void dtype_store_n(void *dst, attn_dtype t, const float *src, size_t n)
{
    uint16_t *h = (uint16_t *)dst;
    switch (t) {
    case ATTN_F16:
        for (size_t i = 0; i < n; i++)
            h[i] = dtype_f32_to_f16(src[i]);
        return;
    case ATTN_BF16:
        for (size_t i = 0; i < n; i++)
            h[i] = dtype_f32_to_bf16(src[i]);
        return;
    case ATTN_F32:
        break;
    }
    memcpy(dst, src, n * sizeof(float));
}

void dtype_fill_nan(void *buf, attn_dtype t, size_t n)
{
    if (t == ATTN_F32) {
        float *f = (float *)buf;
        for (size_t i = 0; i < n; i++)
            f[i] = NAN;
        return;
    }
    assert(t == ATTN_F16 || t == ATTN_BF16);
    uint16_t nan = t == ATTN_F16 ? 0x7e00u : 0x7fc0u;
    uint16_t *h = (uint16_t *)buf;
    for (size_t i = 0; i < n; i++)
        h[i] = nan;
}
