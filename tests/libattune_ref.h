/* libattune_ref.h -- what the libattune tests share (tests/test_libattune.c
 * on the CPU, tests/gpu/test_libattune.c on a GPU): host buffers in the
 * storage dtypes, strided views of them, a float64 reference over views,
 * and the error of an output view against it. Only libattune.h is used:
 * the tests see the library as a runtime does. */
#ifndef ATTUNE_TESTS_LIBATTUNE_REF_H
#define ATTUNE_TESTS_LIBATTUNE_REF_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/libattune.h"

/* ---- storage dtypes on the host (round to nearest even) */

static inline size_t ref_es(int dtype) { return dtype == ATTUNE_DTYPE_F32 ? 4 : 2; }

static inline float ref_f16_to_f(uint16_t h)
{
    uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, m = h & 1023, u;
    if (e == 0) {
        float f = ldexpf((float)m, -24);
        return s ? -f : f;
    }
    u = e == 31 ? s | 0x7f800000u | (m << 13) : s | ((e + 112) << 23) | (m << 13);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint16_t ref_f_to_f16(float f)
{
    if (isnan(f))
        return 0x7e00;
    uint16_t s = signbit(f) ? 0x8000 : 0;
    float a = fabsf(f);
    if (a >= 65520.0f)
        return s | 0x7c00;
    if (a < ldexpf(1.0f, -14)) /* subnormal: multiples of 2^-24 */
        return s | (uint16_t)lrintf(a * ldexpf(1.0f, 24));
    int e;
    float m = frexpf(a, &e); /* a = m 2^e, m in [0.5, 1) */
    long q = lrintf(m * 2048.0f); /* 11 significant bits */
    if (q == 2048) {
        q = 1024;
        e++;
    }
    return s | (uint16_t)((e + 14) << 10) | (uint16_t)(q - 1024);
}

static inline float ref_bf16_to_f(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint16_t ref_f_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if (isnan(f))
        return 0x7fc0;
    u += 0x7fff + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

static inline double ref_load(const void *buf, int dtype, size_t i)
{
    if (dtype == ATTUNE_DTYPE_F32)
        return ((const float *)buf)[i];
    uint16_t h = ((const uint16_t *)buf)[i];
    return dtype == ATTUNE_DTYPE_F16 ? ref_f16_to_f(h) : ref_bf16_to_f(h);
}

static inline void ref_store(void *buf, int dtype, size_t i, float x)
{
    if (dtype == ATTUNE_DTYPE_F32)
        ((float *)buf)[i] = x;
    else
        ((uint16_t *)buf)[i] = dtype == ATTUNE_DTYPE_F16 ? ref_f_to_f16(x) : ref_f_to_bf16(x);
}

/* n elements of standard-normal data (Box-Muller on an xorshift stream). */
static inline void ref_fill(void *buf, int dtype, size_t n, uint64_t *st)
{
    for (size_t i = 0; i < n; i++) {
        double u[2];
        for (int k = 0; k < 2; k++) {
            *st ^= *st << 13, *st ^= *st >> 7, *st ^= *st << 17;
            u[k] = ((double)(*st >> 11) + 1.0) * 0x1p-53;
        }
        ref_store(buf, dtype, i, (float)(sqrt(-2.0 * log(u[0])) * cos(6.283185307179586 * u[1])));
    }
}

/* NaN in n elements. */
static inline void ref_poison(void *buf, int dtype, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ref_store(buf, dtype, i, NAN);
}

/* ---- views */

/* The two layouts the tests use for a tensor of b x heads x rows x d,
 * rows_cap >= rows rows allotted per head (a KV cache longer than the
 * call): BHSD [b, heads, rows_cap, d], BSHD [b, rows_cap, heads, d]; pad
 * extra elements at the end of every row (a view into a wider tensor).
 * Returns the elements the buffer needs. */
enum { REF_BHSD = 0, REF_BSHD = 1 };
static inline size_t ref_view(int layout, int64_t b, int64_t heads, int64_t rows_cap, int64_t d,
                              int64_t pad, void *data, attune_tensor *t)
{
    const int64_t row = d + pad;
    t->data = data;
    if (layout == REF_BHSD) {
        t->stride_s = row;
        t->stride_h = rows_cap * row;
        t->stride_b = heads * rows_cap * row;
    } else {
        t->stride_h = row;
        t->stride_s = heads * row;
        t->stride_b = rows_cap * heads * row;
    }
    return (size_t)(b * heads * rows_cap * row);
}

static inline size_t ref_at(const attune_tensor *t, int64_t bi, int64_t h, int64_t i, int64_t c)
{
    return (size_t)(bi * t->stride_b + h * t->stride_h + i * t->stride_s + c);
}

/* ---- reference and errors */

typedef struct ref_errs {
    double rel;         /* ||out - ref|| / ||ref|| */
    double max_abs;
    int64_t nonfinite;  /* output elements not finite (poison left) */
    int64_t touched;    /* elements outside the output's real rows that changed */
    int64_t compared;   /* output elements compared (finite or not) */
} ref_errs;

/* 1 when row i of sq is among the rows checked: every row when every is
 * 1, else every every-th and the last. */
static inline int ref_row_checked(int64_t i, int64_t sq, int every)
{
    return every <= 1 || i % every == 0 || i == sq - 1;
}

/* Number of doubles ref_compute writes. */
static inline size_t ref_size(const attune_dims *s, int64_t sq, int every)
{
    int64_t rows = 0;
    for (int64_t i = 0; i < sq; i++)
        rows += ref_row_checked(i, sq, every);
    return (size_t)(s->b * s->hq * rows * s->d);
}

/* float64 attention of the views (host memory; data as stored) at lengths
 * sq, skv for shape dims (b, hq, hkv, d, causal bottom-right, scale
 * 1/sqrt(d)) into ref, the checked rows in (bi, h, i) order. */
static inline void ref_compute(const attune_dims *s, int64_t sq, int64_t skv, const void *qb,
                               const attune_tensor *q, const void *kb, const attune_tensor *k,
                               const void *vb, const attune_tensor *v, int every, double *ref)
{
    const int64_t g = s->hq / s->hkv, d = s->d;
    const double scale = 1.0 / sqrt((double)d);
    double *sc = malloc((size_t)skv * sizeof *sc);
    size_t at = 0;
    for (int64_t bi = 0; bi < s->b; bi++)
        for (int64_t h = 0; h < s->hq; h++)
            for (int64_t i = 0; i < sq; i++) {
                if (!ref_row_checked(i, sq, every))
                    continue;
                int64_t n = s->causal ? i + (skv - sq) + 1 : skv;
                n = n < 0 ? 0 : (n > skv ? skv : n);
                double mx = -INFINITY, l = 0;
                for (int64_t j = 0; j < n; j++) {
                    double dot = 0;
                    for (int64_t c = 0; c < d; c++)
                        dot += ref_load(qb, s->dtype, ref_at(q, bi, h, i, c)) *
                               ref_load(kb, s->dtype, ref_at(k, bi, h / g, j, c));
                    sc[j] = dot * scale;
                    mx = sc[j] > mx ? sc[j] : mx;
                }
                double *acc = ref + at;
                for (int64_t c = 0; c < d; c++)
                    acc[c] = 0;
                for (int64_t j = 0; j < n; j++) {
                    double p = exp(sc[j] - mx);
                    l += p;
                    for (int64_t c = 0; c < d; c++)
                        acc[c] += p * ref_load(vb, s->dtype, ref_at(v, bi, h / g, j, c));
                }
                for (int64_t c = 0; c < d; c++)
                    acc[c] = n > 0 ? acc[c] / l : 0.0;
                at += (size_t)d;
            }
    free(sc);
}

/* The output view o (host copy ob) against ref (ref_compute's rows) into e. */
static inline void ref_compare(const attune_dims *s, int64_t sq, const void *ob,
                               const attune_tensor *o, int every, const double *ref, ref_errs *e)
{
    double num = 0, den = 0;
    size_t at = 0;
    memset(e, 0, sizeof *e);
    for (int64_t bi = 0; bi < s->b; bi++)
        for (int64_t h = 0; h < s->hq; h++)
            for (int64_t i = 0; i < sq; i++) {
                if (!ref_row_checked(i, sq, every))
                    continue;
                for (int64_t c = 0; c < s->d; c++) {
                    const double r = ref[at + (size_t)c];
                    const double got = ref_load(ob, s->dtype, ref_at(o, bi, h, i, c));
                    e->compared++;
                    if (!isfinite(got)) {
                        e->nonfinite++;
                        continue;
                    }
                    num += (got - r) * (got - r);
                    den += r * r;
                    e->max_abs = fabs(got - r) > e->max_abs ? fabs(got - r) : e->max_abs;
                }
                at += (size_t)s->d;
            }
    e->rel = den > 0 ? sqrt(num / den) : sqrt(num);
}

/* ref_compute then ref_compare, for one-off checks. */
static inline void ref_check(const attune_dims *s, int64_t sq, int64_t skv, const void *qb,
                             const attune_tensor *q, const void *kb, const attune_tensor *k,
                             const void *vb, const attune_tensor *v, const void *ob,
                             const attune_tensor *o, int every, ref_errs *e)
{
    double *ref = malloc(ref_size(s, sq, every) * sizeof *ref + 1);
    ref_compute(s, sq, skv, qb, q, kb, k, vb, v, every, ref);
    ref_compare(s, sq, ob, o, every, ref, e);
    free(ref);
}

/* Elements of buffer ob (n elements) outside the real rows of view o at
 * length sq that differ from before (the same buffer before the run): a
 * run must write only its output rows. */
static inline int64_t ref_touched(const attune_dims *s, int64_t sq, const attune_tensor *o,
                                  const void *ob, const void *before, size_t n)
{
    const size_t es = ref_es(s->dtype);
    char *mask = calloc(n, 1);
    int64_t bad = 0;
    for (int64_t bi = 0; bi < s->b; bi++)
        for (int64_t h = 0; h < s->hq; h++)
            for (int64_t i = 0; i < sq; i++)
                memset(mask + ref_at(o, bi, h, i, 0), 1, (size_t)s->d);
    for (size_t x = 0; x < n; x++)
        if (!mask[x] && memcmp((const char *)ob + x * es, (const char *)before + x * es, es) != 0)
            bad++;
    free(mask);
    return bad;
}

/* The relative-error bound a tactic of dtype must meet against float64:
 * tests/gpu/gpu_check.c's gpu_tol (f16 accumulation of acc=f16 GEMMs is
 * allowed 1e-2). These catch wrong rows and masks, not rounding. */
static inline double ref_bound(int dtype, const char *tactic)
{
    if (dtype == ATTUNE_DTYPE_F32)
        return 1e-5;
    if (dtype == ATTUNE_DTYPE_BF16)
        return 2e-2;
    return strstr(tactic, "acc=f16") != NULL ? 1e-2 : 3e-3;
}

#endif
