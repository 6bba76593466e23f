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

/* The conversions proper, static inline so that the bulk loops below
 * inline them: random-normal data is nearly all normal numbers, which take
 * one predictable branch and a few integer operations. */

static inline uint16_t f32_to_f16(float f)
{
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;

    /* 2^-14 <= |f| < 65520: a normal half. Rebias the exponent 127 -> 15
     * (subtract 112 << 23) and round away the low 13 bits to nearest even:
     * adding 0xfff, plus 1 when the kept part is odd, carries exactly when
     * the rest is above half, or at half with an odd kept part. A carry out
     * of the mantissa bumps the exponent, which is still right. */
    if (ax - 0x38800000u < 0x477ff000u - 0x38800000u)
        return (uint16_t)(sign | ((ax - 0x38000000u + 0x0fffu + ((ax >> 13) & 1u)) >> 13));
    if (ax > 0x7f800000u) /* NaN: set the quiet bit, keep the top 9 payload bits */
        return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    /* 65520 = 0x477ff000 is halfway between 65504 (largest finite, odd
     * mantissa 0x3ff) and 65536: ties go to even, i.e. up, i.e. to Inf. */
    if (ax >= 0x477ff000u)
        return (uint16_t)(sign | 0x7c00u);
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

/* The rare f16 cases: +-0, subnormals, Inf, NaN. */
static float f16_to_f32_special(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu;
    uint32_t m = h & 0x3ffu;
    uint32_t x;

    if (e == 0x1f) { /* Inf, or NaN made quiet with its payload kept */
        x = sign | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0);
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

static inline float f16_to_f32(uint16_t h)
{
    uint32_t em = h & 0x7fffu;
    /* normal: exponent field 1..30; rebias 15 -> 127 (add 112 << 23) */
    if (em - 0x0400u < 0x7800u)
        return f32_from_bits(((uint32_t)(h & 0x8000u) << 16) | ((em << 13) + 0x38000000u));
    return f16_to_f32_special(h);
}

static inline uint16_t f32_to_bf16(float f)
{
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) /* NaN: quiet, keep sign and top payload */
        return (uint16_t)((x >> 16) | 0x0040u);
    /* Round to nearest even on the low 16 bits, as for f16 above; the carry
     * may ripple into the exponent, and from the largest finite value into
     * Inf, as RNE requires. Cannot overflow 32 bits: the largest non-NaN
     * pattern is 0xff800000. Subnormals need nothing special: bf16 has
     * f32's exponent range. */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

static inline float bf16_to_f32(uint16_t h)
{
    uint32_t x = (uint32_t)h << 16;
    if ((x & 0x7fffffffu) > 0x7f800000u)
        x |= 0x400000u; /* quiet a signalling NaN */
    return f32_from_bits(x);
}

/* e4m3: sign, 4 exponent bits (bias 7), 3 mantissa bits; exponent 0 is
 * subnormal (m/8 * 2^-6); S.1111.111 is NaN, so the largest finite value
 * is 1.75 * 2^8 = 448. */
static float e4m3_to_f32(uint8_t x)
{
    const uint32_t e = (x >> 3) & 15u, m = x & 7u, sign = (uint32_t)(x & 0x80u) << 24;
    if (e == 15 && m == 7)
        return f32_from_bits(sign | 0x7fc00000u);
    if (e == 0) /* m * 2^-9, exact */
        return f32_from_bits(sign | f32_bits((float)m * 0x1p-9f));
    return f32_from_bits(sign | ((e - 7 + 127) << 23) | (m << 20));
}

/* x >= 0 rounded to the nearest integer, ties to even, with no dependence
 * on the FPU's rounding mode (x - floor(x) is exact for x < 2^52). */
static double round_even(double x)
{
    double fl = floor(x), fr = x - fl;
    if (fr > 0.5 || (fr == 0.5 && fmod(fl, 2.0) != 0.0))
        fl += 1.0;
    return fl;
}

static uint8_t f32_to_e4m3(float f)
{
    const uint8_t sign = signbit(f) ? 0x80u : 0;
    if (isnan(f))
        return (uint8_t)(sign | 0x7fu);
    double a = fabs((double)f);
    if (a >= 448.0) /* saturate: the largest finite, infinities included */
        return (uint8_t)(sign | 0x7eu);
    if (a < 0x1p-6) /* subnormal: units of 2^-9; 8 units is the smallest normal */
        return (uint8_t)(sign | (uint8_t)round_even(a * 512.0));
    int e;
    (void)frexp(a, &e); /* a = fr * 2^e, fr in [0.5, 1): a in [2^(e-1), 2^e) */
    double q = round_even(ldexp(a, 4 - e));  /* 8..16: the significand in eighths */
    int code = ((e - 1 + 7) << 3) + (int)q - 8; /* 16 carries into the exponent */
    return (uint8_t)(sign | (code > 0x7e ? 0x7e : code));
}

uint8_t dtype_f32_to_e4m3(float f) { return f32_to_e4m3(f); }
float dtype_e4m3_to_f32(uint8_t x) { return e4m3_to_f32(x); }

uint16_t dtype_f32_to_f16(float f) { return f32_to_f16(f); }
float dtype_f16_to_f32(uint16_t h) { return f16_to_f32(h); }
uint16_t dtype_f32_to_bf16(float f) { return f32_to_bf16(f); }
float dtype_bf16_to_f32(uint16_t h) { return bf16_to_f32(h); }

float dtype_round(attn_dtype t, float f)
{
    switch (t) {
    case ATTN_F16:
        return f16_to_f32(f32_to_f16(f));
    case ATTN_BF16:
        return bf16_to_f32(f32_to_bf16(f));
    case ATTN_E4M3:
        return e4m3_to_f32(f32_to_e4m3(f));
    case ATTN_F32:
        break;
    }
    return f;
}

float dtype_load(const void *buf, attn_dtype t, size_t i)
{
    switch (t) {
    case ATTN_F16:
        return f16_to_f32(((const uint16_t *)buf)[i]);
    case ATTN_BF16:
        return bf16_to_f32(((const uint16_t *)buf)[i]);
    case ATTN_E4M3:
        return e4m3_to_f32(((const uint8_t *)buf)[i]);
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
        ((uint16_t *)buf)[i] = f32_to_f16(f);
        return;
    case ATTN_BF16:
        ((uint16_t *)buf)[i] = f32_to_bf16(f);
        return;
    case ATTN_E4M3:
        ((uint8_t *)buf)[i] = f32_to_e4m3(f);
        return;
    case ATTN_F32:
        break;
    }
    ((float *)buf)[i] = f;
}

/* Bulk loads go in groups of GROUP elements: when a whole group is
 * ordinary (f16: normal numbers; bf16: not NaN), it converts with no branch
 * per element, a loop GCC vectorizes, twice as fast as the scalar form on
 * attention data, where nearly every group is ordinary. Any other group
 * takes the scalar path, so results are identical. */
#define GROUP 8

static void f16_load_n(const uint16_t *restrict h, float *restrict dst, size_t n)
{
    size_t i = 0;
    for (; i + GROUP <= n; i += GROUP) {
        uint32_t x[GROUP], special = 0;
        for (int u = 0; u < GROUP; u++) {
            uint32_t em = h[i + u] & 0x7fffu;
            special |= em - 0x0400u >= 0x7800u;
            x[u] = ((uint32_t)(h[i + u] & 0x8000u) << 16) | ((em << 13) + 0x38000000u);
        }
        if (special)
            for (int u = 0; u < GROUP; u++)
                dst[i + u] = f16_to_f32(h[i + u]);
        else
            memcpy(dst + i, x, sizeof x);
    }
    for (; i < n; i++)
        dst[i] = f16_to_f32(h[i]);
}

static void bf16_load_n(const uint16_t *restrict h, float *restrict dst, size_t n)
{
    size_t i = 0;
    for (; i + GROUP <= n; i += GROUP) {
        uint32_t x[GROUP], nan = 0;
        for (int u = 0; u < GROUP; u++) {
            x[u] = (uint32_t)h[i + u] << 16;
            nan |= (x[u] & 0x7fffffffu) > 0x7f800000u;
        }
        if (nan)
            for (int u = 0; u < GROUP; u++)
                dst[i + u] = bf16_to_f32(h[i + u]);
        else
            memcpy(dst + i, x, sizeof x);
    }
    for (; i < n; i++)
        dst[i] = bf16_to_f32(h[i]);
}

void dtype_load_n(const void *src, attn_dtype t, float *dst, size_t n)
{
    switch (t) {
    case ATTN_F16:
        f16_load_n((const uint16_t *)src, dst, n);
        return;
    case ATTN_BF16:
        bf16_load_n((const uint16_t *)src, dst, n);
        return;
    case ATTN_E4M3:
        for (size_t i = 0; i < n; i++)
            dst[i] = e4m3_to_f32(((const uint8_t *)src)[i]);
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
            h[i] = f32_to_f16(src[i]);
        return;
    case ATTN_BF16:
        for (size_t i = 0; i < n; i++)
            h[i] = f32_to_bf16(src[i]);
        return;
    case ATTN_E4M3:
        for (size_t i = 0; i < n; i++)
            ((uint8_t *)dst)[i] = f32_to_e4m3(src[i]);
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
    if (t == ATTN_E4M3) {
        memset(buf, 0x7f, n);
        return;
    }
    assert(t == ATTN_F16 || t == ATTN_BF16);
    uint16_t nan = t == ATTN_F16 ? 0x7e00u : 0x7fc0u;
    uint16_t *h = (uint16_t *)buf;
    for (size_t i = 0; i < n; i++)
        h[i] = nan;
}
