/* cpu_reference.c -- float64 attention for chosen rows: what every variant
 * (CPU and GPU) is checked against.
 *
 * Inputs are read as stored (f16/bf16/e4m3 values are exact in float, so
 * nothing is lost reading them; e4m3 ones times their tensor's descale,
 * factored out of the sums), every product, sum, exp and division is done
 * in double. Causal masking is bottom-right aligned from the real lengths;
 * a row that sees no key is 0. No padding exists here: the reference is the
 * unpadded problem by definition. */
#include <math.h>
#include <stdlib.h>

#include "../dtype.h"
#include "../cancel.h"
#include "cpu_internal.h"

/* The K and V rows of one KV head as float: a pointer into the buffer for
 * f32 data, else a converted copy in scratch (2 * skv * d floats). */
static void kv_head(const attn_shape *s, const void *k, const void *v, int64_t bi,
                    int64_t kvh, float *scratch, const float **kf, const float **vf)
{
    size_t n = (size_t)(s->skv * s->d);
    size_t off = (size_t)((bi * s->hkv + kvh) * s->skv * s->d);
    if (s->dtype == ATTN_F32) {
        *kf = (const float *)k + off;
        *vf = (const float *)v + off;
        return;
    }
    size_t es = attn_dtype_size(s->dtype);
    dtype_load_n((const char *)k + off * es, s->dtype, scratch, n);
    dtype_load_n((const char *)v + off * es, s->dtype, scratch + n, n);
    *kf = scratch;
    *vf = scratch + n;
}

/* Contract in cpu_internal.h. Rows may come in any order; consecutive rows
 * of one KV head reuse its converted copy, so callers that sort rows pay
 * the f16/bf16/e4m3 conversion once per head. */
int cpu_reference_descaled(const attn_shape *s, const void *q, const void *k, const void *v,
                           const float *descale, const int64_t *rows, int nrows, double *ref)
{
    const int64_t d = s->d, sq = s->sq, skv = s->skv, hq = s->hq;
    const int64_t g = s->hq / s->hkv, nrows_total = s->b * hq * sq;
    /* sum_c (q_c dq)(k_c dk) = dq dk sum_c q_c k_c; sum_j p_j (v_j dv) = dv sum_j p_j v_j */
    const double dq = descale ? (double)descale[0] : 1.0, dk = descale ? (double)descale[1] : 1.0;
    const double dv = descale ? (double)descale[2] : 1.0;
    const double scale = 1.0 / sqrt((double)d) * dq * dk;
    float *scratch = NULL;
    double *p = NULL, *qd = NULL;
    int rc = ATTUNE_EINVAL;

    if (nrows < 0 || (nrows > 0 && (rows == NULL || ref == NULL)))
        goto fail;
    for (int n = 0; n < nrows; n++)
        if (rows[n] < 0 || rows[n] >= nrows_total)
            goto fail;
    rc = ATTUNE_ENOMEM;
    p = malloc((size_t)skv * sizeof *p);
    qd = malloc((size_t)d * sizeof *qd);
    if (p == NULL || qd == NULL)
        goto fail;
    if (s->dtype != ATTN_F32) {
        scratch = malloc(2 * (size_t)(skv * d) * sizeof *scratch);
        if (scratch == NULL)
            goto fail;
    }

    int64_t cached_b = -1, cached_kvh = -1;
    const float *kf = NULL, *vf = NULL;
    for (int n = 0; n < nrows; n++) {
        if (attn_cancel_poll()) { /* a row of a long prefill: a few ms */
            rc = ATTUNE_ECANCELED;
            goto fail;
        }
        const int64_t r = rows[n];
        const int64_t i = r % sq, h = (r / sq) % hq, bi = r / (sq * hq);
        const int64_t kvh = h / g;
        double *o = ref + (size_t)n * (size_t)d;

        if (bi != cached_b || kvh != cached_kvh) {
            kv_head(s, k, v, bi, kvh, scratch, &kf, &vf);
            cached_b = bi;
            cached_kvh = kvh;
        }
        for (int64_t c = 0; c < d; c++)
            qd[c] = dtype_load_f64(q, s->dtype, (size_t)(r * d + c));

        const int64_t nvis = attn_visible_keys(s, i);
        for (int64_t c = 0; c < d; c++)
            o[c] = 0.0;
        if (nvis == 0)
            continue; /* sees no key: zeros, by definition */

        double m = -INFINITY;
        for (int64_t j = 0; j < nvis; j++) {
            const float *kr = kf + j * d;
            double acc = 0.0;
            for (int64_t c = 0; c < d; c++)
                acc += qd[c] * (double)kr[c];
            p[j] = acc * scale;
            if (p[j] > m)
                m = p[j];
        }
        double sum = 0.0;
        for (int64_t j = 0; j < nvis; j++) {
            p[j] = exp(p[j] - m);
            sum += p[j];
        }
        for (int64_t j = 0; j < nvis; j++) {
            const float *vr = vf + j * d;
            const double w = p[j];
            for (int64_t c = 0; c < d; c++)
                o[c] += w * (double)vr[c];
        }
        for (int64_t c = 0; c < d; c++)
            o[c] = o[c] / sum * dv;
    }
    rc = 0;
fail:
    free(scratch);
    free(qd);
    free(p);
    return rc;
}

int cpu_reference(const attn_shape *s, const void *q, const void *k, const void *v,
                  const int64_t *rows, int nrows, double *ref)
{
    return cpu_reference_descaled(s, q, k, v, NULL, rows, nrows, ref);
}
