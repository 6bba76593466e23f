/* test_dtype.c -- f16/bf16/e4m3 <-> float conversions: exhaustive round trips,
 * an independent rint()-based oracle for float -> half rounding, and the
 * edge cases spelled out (ties, overflow, subnormals, -0, NaN). */
#include <float.h>
#include <math.h>
#include <stdint.h>

#include "kernels/dtype.h"
#include "common/hash.h"
#include "test.h"

static uint32_t bits_of(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    return x;
}

static float float_of(uint32_t x)
{
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

static int f16_is_nan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }
static int bf16_is_nan(uint16_t h) { return (h & 0x7f80u) == 0x7f80u && (h & 0x7fu) != 0; }

/* The value of f16 pattern h computed from the definition, in double. */
static double f16_value(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double sign = (h & 0x8000u) ? -1.0 : 1.0;
    if (e == 0x1f)
        return m ? NAN : sign * INFINITY;
    if (e == 0)
        return sign * ldexp(m, -24);
    return sign * ldexp(1024 + m, e - 25);
}

/* Nearest-even f16 value of f, from the definition: scale f so that the
 * half's last mantissa bit is the units digit (exponent clamped at the
 * subnormal floor -14), rint() (round-half-even in the default mode),
 * scale back; magnitudes that reach 2^16 are Inf. Independent of the
 * bit-twiddling under test. */
static float f16_oracle(float f)
{
    if (isnan(f) || isinf(f) || f == 0.0f)
        return f;
    int e = ilogb(f);
    if (e < -14)
        e = -14;
    double v = ldexp(rint(ldexp((double)f, 10 - e)), e - 10);
    if (fabs(v) >= 65536.0)
        return copysignf(INFINITY, f);
    return (float)v;
}

/* Same for bf16: 7 fraction bits, subnormal floor -126, Inf from 2^128. */
static float bf16_oracle(float f)
{
    if (isnan(f) || isinf(f) || f == 0.0f)
        return f;
    int e = ilogb(f);
    if (e < -126)
        e = -126;
    double v = ldexp(rint(ldexp((double)f, 7 - e)), e - 7);
    if (fabs(v) >= ldexp(1.0, 128))
        return copysignf(INFINITY, f);
    return (float)v;
}

/* Floats to test rounding on: every exponent with mantissas at and around
 * the rounding boundaries, then random bit patterns. */
static float sample_float(uint64_t i, uint64_t *rng)
{
    if (i < 256 * 64) {
        uint32_t e = (uint32_t)(i / 64), k = (uint32_t)(i % 64);
        uint32_t m;
        if (k < 16)
            m = (k << 13) | 0x1000u; /* f16 ties (bit 12 set, below zero) */
        else if (k < 32)
            m = ((k - 16) << 16) | 0x8000u; /* bf16 ties */
        else if (k < 48)
            m = ((k - 32) << 13) | 0x1000u | 1u; /* just above an f16 tie */
        else
            m = ((k - 48) << 13) | 0x0fffu; /* just below an f16 tie */
        return float_of((e << 23) | (m & 0x7fffffu) | ((k & 1u) << 31));
    }
    return float_of((uint32_t)hash_splitmix64(rng));
}

static void f16_should_round_trip_every_bit_pattern(void)
{
    int bad_value = 0, bad_trip = 0, bad_nan = 0;
    for (uint32_t h = 0; h <= 0xffffu; h++) {
        float f = dtype_f16_to_f32((uint16_t)h);
        uint16_t back = dtype_f32_to_f16(f);
        if (f16_is_nan((uint16_t)h)) {
            bad_nan += !isnan(f) || !f16_is_nan(back) || (back & 0x8000u) != (h & 0x8000u) ||
                       !(back & 0x200u);
            continue;
        }
        bad_value += (double)f != f16_value((uint16_t)h) || (signbit(f) != 0) != ((h & 0x8000u) != 0);
        bad_trip += back != h;
    }
    CHECK_EQ_INT(bad_value, 0);
    CHECK_EQ_INT(bad_trip, 0);
    CHECK_EQ_INT(bad_nan, 0);
}

static void bf16_should_round_trip_every_bit_pattern(void)
{
    int bad_value = 0, bad_trip = 0, bad_nan = 0;
    for (uint32_t h = 0; h <= 0xffffu; h++) {
        float f = dtype_bf16_to_f32((uint16_t)h);
        uint16_t back = dtype_f32_to_bf16(f);
        if (bf16_is_nan((uint16_t)h)) {
            bad_nan += !isnan(f) || !bf16_is_nan(back) || (back & 0x8000u) != (h & 0x8000u) ||
                       !(back & 0x40u);
            continue;
        }
        bad_value += bits_of(f) != (h << 16);
        bad_trip += back != h;
    }
    CHECK_EQ_INT(bad_value, 0);
    CHECK_EQ_INT(bad_trip, 0);
    CHECK_EQ_INT(bad_nan, 0);
}

static void f32_to_f16_should_match_rint_oracle(void)
{
    uint64_t rng = 0x5eed;
    int bad = 0;
    for (uint64_t i = 0; i < (1u << 21); i++) {
        float f = sample_float(i, &rng);
        if (isnan(f))
            continue;
        float got = dtype_f16_to_f32(dtype_f32_to_f16(f));
        float want = f16_oracle(f);
        if (bits_of(got) != bits_of(want) && bad++ < 5)
            fprintf(stderr, "  f16(%a [%08x]) = %a, oracle %a\n", (double)f, bits_of(f),
                    (double)got, (double)want);
    }
    CHECK_EQ_INT(bad, 0);
}

static void f32_to_bf16_should_match_rint_oracle(void)
{
    uint64_t rng = 0xbf16;
    int bad = 0;
    for (uint64_t i = 0; i < (1u << 21); i++) {
        float f = sample_float(i, &rng);
        if (isnan(f))
            continue;
        float got = dtype_bf16_to_f32(dtype_f32_to_bf16(f));
        float want = bf16_oracle(f);
        if (bits_of(got) != bits_of(want) && bad++ < 5)
            fprintf(stderr, "  bf16(%a [%08x]) = %a, oracle %a\n", (double)f, bits_of(f),
                    (double)got, (double)want);
    }
    CHECK_EQ_INT(bad, 0);
}

#ifdef __FLT16_MANT_DIG__
/* Where the compiler has _Float16 (GCC >= 12 on x86-64, via libgcc's
 * soft conversion or F16C), it is a second, independent oracle. */
static void f32_to_f16_should_match_compiler_float16(void)
{
    uint64_t rng = 0xf16f16;
    int bad = 0;
    for (uint64_t i = 0; i < (1u << 20); i++) {
        float f = sample_float(i, &rng);
        if (isnan(f))
            continue;
        _Float16 hf = (_Float16)f;
        uint16_t want;
        memcpy(&want, &hf, sizeof want);
        bad += dtype_f32_to_f16(f) != want;
    }
    CHECK_EQ_INT(bad, 0);
}
#endif

static void f32_to_f16_should_round_ties_to_even(void)
{
    CHECK_EQ_INT(dtype_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);         /* 1 + half ulp -> 1 (even) */
    CHECK_EQ_INT(dtype_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);     /* 1.5 ulp -> 2 ulp (even) */
    CHECK_EQ_INT(dtype_f32_to_f16(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01); /* above the tie -> up */
    CHECK_EQ_INT(dtype_f32_to_f16(1.0f + 0x1p-11f - 0x1p-20f), 0x3c00); /* below the tie -> down */
    CHECK_EQ_INT(dtype_f32_to_f16(2049.0f), 0x6800);                 /* spacing 2: 2049 -> 2048 */
    CHECK_EQ_INT(dtype_f32_to_f16(2051.0f), 0x6802);                 /* 2051 -> 2052 */
    CHECK_EQ_INT(dtype_f32_to_f16(-(1.0f + 0x1p-11f)), 0xbc00);
    CHECK_EQ_INT(dtype_f32_to_f16(0.1f), 0x2e66);                    /* 0.0999755859375 */
    CHECK_EQ_INT(dtype_f32_to_f16(1.0f + 0x1p-10f * 1023 + 0x1p-11f), 0x4000); /* carry into exponent */
}

static void f32_to_bf16_should_round_ties_to_even(void)
{
    CHECK_EQ_INT(dtype_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);
    CHECK_EQ_INT(dtype_f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
    CHECK_EQ_INT(dtype_f32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
    CHECK_EQ_INT(dtype_f32_to_bf16(-(1.0f + 0x1p-8f)), 0xbf80);
    CHECK_EQ_INT(dtype_f32_to_bf16(0.1f), 0x3dcd); /* 0x3dcccccd rounds up */
    CHECK_EQ_INT(dtype_f32_to_bf16(float_of(0x3f7f8000u)), 0x3f80); /* tie, odd -> carry to 1.0 */
}

static void f32_to_f16_should_overflow_to_inf(void)
{
    CHECK_EQ_INT(dtype_f32_to_f16(65504.0f), 0x7bff);   /* largest finite */
    CHECK_EQ_INT(dtype_f32_to_f16(65519.996f), 0x7bff); /* below the tie */
    CHECK_EQ_INT(dtype_f32_to_f16(65520.0f), 0x7c00);   /* the tie goes to even: Inf */
    CHECK_EQ_INT(dtype_f32_to_f16(1e10f), 0x7c00);
    CHECK_EQ_INT(dtype_f32_to_f16(FLT_MAX), 0x7c00);
    CHECK_EQ_INT(dtype_f32_to_f16(-65520.0f), 0xfc00);
    CHECK_EQ_INT(dtype_f32_to_f16(INFINITY), 0x7c00);
    CHECK_EQ_INT(dtype_f32_to_f16(-INFINITY), 0xfc00);
    CHECK(isinf(dtype_f16_to_f32(0x7c00)) && dtype_f16_to_f32(0x7c00) > 0);
    CHECK(isinf(dtype_f16_to_f32(0xfc00)) && dtype_f16_to_f32(0xfc00) < 0);
}

static void f32_to_bf16_should_overflow_to_inf(void)
{
    CHECK_EQ_INT(dtype_f32_to_bf16(FLT_MAX), 0x7f80); /* beyond 0x7f7f's tie */
    CHECK_EQ_INT(dtype_f32_to_bf16(float_of(0x7f7f7fffu)), 0x7f7f);
    CHECK_EQ_INT(dtype_f32_to_bf16(float_of(0x7f7f8000u)), 0x7f80); /* tie, odd -> Inf */
    CHECK_EQ_INT(dtype_f32_to_bf16(-FLT_MAX), 0xff80);
    CHECK_EQ_INT(dtype_f32_to_bf16(INFINITY), 0x7f80);
    CHECK_EQ_INT(dtype_f32_to_bf16(-INFINITY), 0xff80);
}

static void f16_should_handle_subnormals(void)
{
    CHECK_EQ_INT(dtype_f32_to_f16(0x1p-24f), 0x0001); /* smallest subnormal */
    CHECK_EQ_INT(dtype_f32_to_f16(0x1p-25f), 0x0000); /* half of it: tie -> 0 (even) */
    CHECK_EQ_INT(dtype_f32_to_f16(nextafterf(0x1p-25f, 1.0f)), 0x0001);
    CHECK_EQ_INT(dtype_f32_to_f16(3 * 0x1p-25f), 0x0002); /* 1.5 units -> 2 */
    CHECK_EQ_INT(dtype_f32_to_f16(5 * 0x1p-25f), 0x0002); /* 2.5 units -> 2 */
    CHECK_EQ_INT(dtype_f32_to_f16(1023 * 0x1p-24f), 0x03ff); /* largest subnormal */
    CHECK_EQ_INT(dtype_f32_to_f16(1023.5f * 0x1p-24f), 0x0400); /* tie -> smallest normal */
    CHECK_EQ_INT(dtype_f32_to_f16(0x1p-14f), 0x0400);
    CHECK_EQ_INT(dtype_f32_to_f16(-0x1p-24f), 0x8001);
    CHECK_EQ_INT(dtype_f32_to_f16(FLT_TRUE_MIN), 0x0000);
    CHECK_EQ_INT(dtype_f32_to_f16(-FLT_TRUE_MIN), 0x8000);
    CHECK(dtype_f16_to_f32(0x0001) == 0x1p-24f);
    CHECK(dtype_f16_to_f32(0x03ff) == 1023 * 0x1p-24f);
    CHECK(dtype_f16_to_f32(0x0200) == 0x1p-15f);
    CHECK(dtype_f16_to_f32(0x8001) == -0x1p-24f);
}

static void bf16_should_handle_subnormals(void)
{
    CHECK_EQ_INT(dtype_f32_to_bf16(float_of(0x00010000u)), 0x0001);
    CHECK_EQ_INT(dtype_f32_to_bf16(float_of(0x00008000u)), 0x0000); /* tie -> 0 (even) */
    CHECK_EQ_INT(dtype_f32_to_bf16(float_of(0x00018000u)), 0x0002); /* tie, odd -> up */
    CHECK_EQ_INT(dtype_f32_to_bf16(FLT_TRUE_MIN), 0x0000);
    CHECK_EQ_INT(dtype_f32_to_bf16(float_of(0x007fffffu)), 0x0080); /* rounds up to FLT_MIN */
    CHECK(dtype_bf16_to_f32(0x0001) == float_of(0x00010000u));
}

static void conversions_should_keep_negative_zero(void)
{
    CHECK_EQ_INT(dtype_f32_to_f16(-0.0f), 0x8000);
    CHECK_EQ_INT(dtype_f32_to_f16(0.0f), 0x0000);
    CHECK_EQ_INT(dtype_f32_to_bf16(-0.0f), 0x8000);
    CHECK(dtype_f16_to_f32(0x8000) == 0.0f && signbit(dtype_f16_to_f32(0x8000)));
    CHECK(dtype_bf16_to_f32(0x8000) == 0.0f && signbit(dtype_bf16_to_f32(0x8000)));
    CHECK(signbit(dtype_round(ATTN_F16, -0x1p-30f))); /* underflow keeps the sign */
}

static void conversions_should_keep_nan_quiet(void)
{
    const float snan = float_of(0x7f800001u), nnan = float_of(0xffc00000u);
    uint16_t h;
    h = dtype_f32_to_f16(NAN);
    CHECK(f16_is_nan(h) && (h & 0x200u));
    h = dtype_f32_to_f16(snan); /* payload only in the low bits: still NaN */
    CHECK(f16_is_nan(h) && (h & 0x200u));
    h = dtype_f32_to_f16(nnan);
    CHECK(f16_is_nan(h) && (h & 0x8000u));
    h = dtype_f32_to_bf16(snan);
    CHECK(bf16_is_nan(h) && (h & 0x40u));
    h = dtype_f32_to_bf16(nnan);
    CHECK(bf16_is_nan(h) && (h & 0x8000u));
    /* signalling halves come back as quiet float NaNs */
    CHECK(isnan(dtype_f16_to_f32(0x7c01)) && (bits_of(dtype_f16_to_f32(0x7c01)) & 0x400000u));
    CHECK(isnan(dtype_bf16_to_f32(0x7f81)) && (bits_of(dtype_bf16_to_f32(0x7f81)) & 0x400000u));
}

static void buffer_access_should_round_like_scalars(void)
{
    const attn_dtype types[] = {ATTN_F16, ATTN_BF16, ATTN_F32};
    const float vals[] = {1.0f, -2.5f, 0.1f, 1e-7f, 70000.0f, -0.0f, 3.14159265f, 1e-30f};
    const size_t n = sizeof vals / sizeof vals[0];
    for (size_t ti = 0; ti < 3; ti++) {
        attn_dtype t = types[ti];
        float buf4[8], back[8];
        uint16_t buf2[8];
        void *buf = t == ATTN_F32 ? (void *)buf4 : (void *)buf2;
        dtype_store_n(buf, t, vals, n);
        dtype_load_n(buf, t, back, n);
        for (size_t i = 0; i < n; i++) {
            float want = dtype_round(t, vals[i]);
            CHECK(bits_of(back[i]) == bits_of(want));
            CHECK(bits_of(dtype_load(buf, t, i)) == bits_of(want));
            CHECK(dtype_load_f64(buf, t, i) == (double)want);
            dtype_store(buf, t, i, -vals[i]);
            CHECK(bits_of(dtype_load(buf, t, i)) == bits_of(dtype_round(t, -vals[i])));
        }
        dtype_fill_nan(buf, t, n);
        for (size_t i = 0; i < n; i++)
            CHECK(isnan(dtype_load(buf, t, i)));
    }
    CHECK(dtype_round(ATTN_F16, 70000.0f) == INFINITY);
    CHECK(dtype_round(ATTN_F32, 0.1f) == 0.1f);
}

/* The bulk loads take a grouped fast path for ordinary values; every bit
 * pattern, in ordinary groups and in groups with specials, must convert
 * exactly as the scalar functions do. */
static void bulk_loads_should_match_scalar_conversions(void)
{
    uint16_t *h = malloc(65536 * sizeof *h);
    float *f = malloc(65537 * sizeof *f);
    for (uint32_t i = 0; i < 65536; i++)
        h[i] = (uint16_t)i;
    int bad16 = 0, badbf = 0;
    for (size_t off = 0; off < 3; off++) { /* shift the groups against the patterns */
        dtype_load_n(h + off, ATTN_F16, f, 65536 - off);
        for (uint32_t i = 0; i < 65536 - off; i++) {
            float want = dtype_f16_to_f32(h[i + off]);
            bad16 += bits_of(f[i]) != bits_of(want);
        }
        dtype_load_n(h + off, ATTN_BF16, f, 65536 - off);
        for (uint32_t i = 0; i < 65536 - off; i++) {
            float want = dtype_bf16_to_f32(h[i + off]);
            badbf += bits_of(f[i]) != bits_of(want);
        }
    }
    CHECK_EQ_INT(bad16, 0);
    CHECK_EQ_INT(badbf, 0);
    free(h);
    free(f);
}

/* The value of e4m3 pattern x from the definition (OCP FP8 E4M3), in double;
 * NaN for S.1111.111. */
static double e4m3_value(uint8_t x)
{
    int e = (x >> 3) & 15, m = x & 7;
    double sign = (x & 0x80) ? -1.0 : 1.0;
    if (e == 15 && m == 7)
        return NAN;
    if (e == 0)
        return sign * m / 8.0 / 64.0;
    return sign * (1.0 + m / 8.0) * pow(2.0, e - 7);
}

static void e4m3_should_decode_and_round_trip_every_pattern(void)
{
    int bad = 0;
    for (int x = 0; x < 256; x++) {
        double want = e4m3_value((uint8_t)x);
        float f = dtype_e4m3_to_f32((uint8_t)x);
        if (isnan(want)) {
            bad += !isnan(f);
            bad += (dtype_f32_to_e4m3(f) & 0x7f) != 0x7f;
            continue;
        }
        bad += (double)f != want || (signbit(f) != 0) != ((x & 0x80) != 0);
        bad += dtype_f32_to_e4m3(f) != (uint8_t)x;
    }
    CHECK_EQ_INT(bad, 0);
    CHECK_NEAR(dtype_e4m3_to_f32(0x7e), 448.0, 0.0);
    CHECK_NEAR(dtype_e4m3_to_f32(0x01), 0x1p-9, 0.0);
    CHECK_NEAR(dtype_e4m3_to_f32(0x08), 0x1p-6, 0.0);
    CHECK_NEAR(dtype_e4m3_to_f32(0x38), 1.0, 0.0);
}

/* Every float between two neighbouring e4m3 values goes to the nearer one,
 * the even one at the midpoint: checked against the definition at the
 * midpoints and a float either side of each, over every pair of
 * neighbours. */
static void f32_to_e4m3_should_round_to_nearest_even(void)
{
    int bad = 0;
    for (int x = 0; x < 0x7e; x++) { /* positive neighbours x, x + 1 */
        float lo = dtype_e4m3_to_f32((uint8_t)x), hi = dtype_e4m3_to_f32((uint8_t)(x + 1));
        float mid = (float)(((double)lo + (double)hi) / 2); /* exact in float */
        uint8_t even = (x & 1) ? (uint8_t)(x + 1) : (uint8_t)x;
        bad += dtype_f32_to_e4m3(mid) != even;
        bad += dtype_f32_to_e4m3(nextafterf(mid, 0.0f)) != (uint8_t)x;
        bad += dtype_f32_to_e4m3(nextafterf(mid, 1000.0f)) != (uint8_t)(x + 1);
        bad += dtype_f32_to_e4m3(-mid) != (uint8_t)(0x80 | even);
    }
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(dtype_f32_to_e4m3(1.0f + 1.0f / 16), 0x38);   /* tie -> even (1.0) */
    CHECK_EQ_INT(dtype_f32_to_e4m3(1.0f + 3.0f / 16), 0x3a);   /* tie -> even (1.25) */
    CHECK_EQ_INT(dtype_f32_to_e4m3(0x1p-10f), 0x00);           /* half the least: even 0 */
    CHECK_EQ_INT(dtype_f32_to_e4m3(0x1p-10f * 3), 0x02);       /* 1.5 units -> 2 */
    CHECK_EQ_INT(dtype_f32_to_e4m3(0x1p-6f - 0x1p-10f), 0x08); /* carries into the normals */
}

static void f32_to_e4m3_should_saturate_and_keep_nan(void)
{
    CHECK_EQ_INT(dtype_f32_to_e4m3(448.0f), 0x7e);
    CHECK_EQ_INT(dtype_f32_to_e4m3(463.0f), 0x7e);
    CHECK_EQ_INT(dtype_f32_to_e4m3(1e30f), 0x7e);
    CHECK_EQ_INT(dtype_f32_to_e4m3(INFINITY), 0x7e);
    CHECK_EQ_INT(dtype_f32_to_e4m3(-INFINITY), 0xfe);
    CHECK_EQ_INT(dtype_f32_to_e4m3(NAN), 0x7f);
    CHECK_EQ_INT(dtype_f32_to_e4m3(-NAN), 0xff);
    CHECK_EQ_INT(dtype_f32_to_e4m3(-0.0f), 0x80);
    CHECK_EQ_INT(dtype_f32_to_e4m3(0x1p-12f), 0x00);
    CHECK_EQ_INT(dtype_f32_to_e4m3(-0x1p-12f), 0x80);
    uint8_t buf[5];
    dtype_fill_nan(buf, ATTN_E4M3, 5);
    CHECK(isnan(dtype_load(buf, ATTN_E4M3, 4)));
    dtype_store(buf, ATTN_E4M3, 2, 3.3f);
    CHECK_NEAR(dtype_load(buf, ATTN_E4M3, 2), 3.25, 0.0);
    CHECK_NEAR(dtype_round(ATTN_E4M3, 3.3f), 3.25, 0.0);
    float back[5];
    dtype_load_n(buf, ATTN_E4M3, back, 5);
    CHECK_NEAR(back[2], 3.25, 0.0);
    CHECK(isnan(back[0]));
    const float src[3] = {0.3f, -500.0f, 17.0f};
    dtype_store_n(buf, ATTN_E4M3, src, 3);
    CHECK_EQ_INT(buf[0], dtype_f32_to_e4m3(0.3f));
    CHECK_EQ_INT(buf[1], 0xfe);
    CHECK_NEAR(dtype_load(buf, ATTN_E4M3, 2), 16.0, 0.0); /* 17 between 16 and 18: even 16 */
}

int main(void)
{
    RUN(f16_should_round_trip_every_bit_pattern);
    RUN(bf16_should_round_trip_every_bit_pattern);
    RUN(f32_to_f16_should_match_rint_oracle);
    RUN(f32_to_bf16_should_match_rint_oracle);
#ifdef __FLT16_MANT_DIG__
    RUN(f32_to_f16_should_match_compiler_float16);
#endif
    RUN(f32_to_f16_should_round_ties_to_even);
    RUN(f32_to_bf16_should_round_ties_to_even);
    RUN(f32_to_f16_should_overflow_to_inf);
    RUN(f32_to_bf16_should_overflow_to_inf);
    RUN(f16_should_handle_subnormals);
    RUN(bf16_should_handle_subnormals);
    RUN(conversions_should_keep_negative_zero);
    RUN(conversions_should_keep_nan_quiet);
    RUN(buffer_access_should_round_like_scalars);
    RUN(bulk_loads_should_match_scalar_conversions);
    RUN(e4m3_should_decode_and_round_trip_every_pattern);
    RUN(f32_to_e4m3_should_round_to_nearest_even);
    RUN(f32_to_e4m3_should_saturate_and_keep_nan);
    return test_summary();
}
