/* gpu_check.c -- what the GPU tests share (gpu_check.h). */
#include "gpu_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

void *gpu_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL) {
        perror("malloc");
        exit(2);
    }
    return p;
}

double gpu_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int64_t *gpu_all_rows(const attn_shape *s, int *n)
{
    int64_t total = s->b * s->hq * s->sq;
    int64_t *rows = gpu_xmalloc((size_t)total * sizeof *rows);
    for (int64_t r = 0; r < total; r++)
        rows[r] = r;
    *n = (int)total;
    return rows;
}

int64_t *gpu_sample_rows(const attn_shape *s, int max, int *n)
{
    int64_t total = s->b * s->hq * s->sq;
    int64_t *rows = gpu_xmalloc((size_t)max * sizeof *rows);
    int k = 0;
    if (total <= max) {
        for (int64_t r = 0; r < total; r++)
            rows[k++] = r;
    } else {
        /* first and last row of each head: where masks and pads go wrong */
        int64_t step = total / (max / 2) + 1;
        for (int64_t bh = 0; bh < s->b * s->hq && k < max / 4; bh++) {
            rows[k++] = bh * s->sq;
            rows[k++] = bh * s->sq + s->sq - 1;
        }
        for (int64_t r = 7; r < total && k < max; r += step)
            rows[k++] = r;
    }
    *n = k;
    return rows;
}

gpu_errs gpu_compare(const attn_shape *s, const int64_t *rows, int nrows, const double *out,
                     const double *ref)
{
    gpu_errs e = {0, 0, 0, 0};
    double num = 0, den = 0;
    for (int k = 0; k < nrows; k++) {
        int empty = attn_visible_keys(s, rows[k] % s->sq) == 0;
        for (int64_t c = 0; c < s->d; c++) {
            double o = out[k * s->d + c], r = ref[k * s->d + c];
            if (!isfinite(o)) {
                e.nonfinite++;
                continue;
            }
            if (empty && o != 0.0)
                e.nonzero_empty++;
            double a = fabs(o - r);
            if (a > e.max_abs)
                e.max_abs = a;
            num += a * a;
            den += r * r;
        }
    }
    e.rel = den > 0 ? sqrt(num / den) : sqrt(num);
    return e;
}

double gpu_tol(attn_dtype t, attn_acc acc)
{
    switch (t) {
    case ATTN_F32: return 1e-5;
    case ATTN_BF16: return 2e-2;
    case ATTN_E4M3: return GPU_TOL_E4M3;
    default: return acc == ATTN_ACC_F16 ? 1e-2 : 3e-3;
    }
}

double gpu_cross_error(const attn_ops *ops, const attn_shape *run, const attn_shape *refs,
                       const attn_tactic *t, uint64_t seed)
{
    attn_session *a = NULL, *b = NULL;
    attn_plan *p = NULL;
    int nrows;
    double rel = -1;
    int64_t *rows = gpu_sample_rows(run, 3000, &nrows);
    double *ref = gpu_xmalloc((size_t)nrows * run->d * sizeof *ref);
    double *out = gpu_xmalloc((size_t)nrows * run->d * sizeof *out);
    if (ops->session_open(0, run, seed, &a) != 0 || ops->session_open(0, refs, seed, &b) != 0 ||
        ops->plan(a, t, &p) != 0)
        goto done;
    if (ops->poison(a) == 0 && ops->run(p) == 0 && ops->fetch_rows(a, rows, nrows, out) == 0 &&
        ops->reference(b, rows, nrows, ref) == 0) {
        gpu_errs e = gpu_compare(run, rows, nrows, out, ref);
        rel = e.nonfinite ? 1e9 : e.rel;
    }
done:
    if (p != NULL)
        ops->plan_free(p);
    if (a != NULL)
        ops->session_close(a);
    if (b != NULL)
        ops->session_close(b);
    free(rows);
    free(ref);
    free(out);
    return rel;
}
