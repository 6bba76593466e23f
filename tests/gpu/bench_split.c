/* bench_split.c -- where the time of a GEMM tactic goes: QK^T GEMMs, softmax,
 * PV GEMMs (and repeat_kv), through attn_cuda_ops and cuda_split_profile().
 *
 *   bench_split SHAPE_KEY TACTIC [ITERS]
 *   bench_split b2.hq16.hkv16.sq8192.skv8192.d128.bf16.nc split/acc=f32/pad=64 10
 *
 * Prints one JSON object: the whole call's time (kernels alone and with pad
 * copies, CUDA-graph replays of ITERS calls, median of 5 samples), each
 * stage's time, and the relative error of 64 sampled rows against the
 * float64 reference. Not a ctest: tests/gpu/run.sh builds it by hand and
 * bench/peers.py runs it. Exits 77 without a GPU, 1 on error. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/attn.h"
#include "kernels/cuda/cuda_profile.h"

#define DIE(...)                                                              \
    do {                                                                      \
        fprintf(stderr, "bench_split: " __VA_ARGS__);                         \
        fputc('\n', stderr);                                                  \
        exit(1);                                                              \
    } while (0)

#define TRY(call)                                                             \
    do {                                                                      \
        int rc_ = (call);                                                     \
        if (rc_ != 0)                                                         \
            DIE("%s:%d: %s: %s", __FILE__, __LINE__, #call, attune_strerror(rc_)); \
    } while (0)

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_time(const attn_ops *ops, attn_plan *p, int iters, int copies)
{
    double v[5];
    for (int i = 0; i < 5; i++) {
        attn_timing t;
        TRY(ops->time(p, iters, copies, &t));
        v[i] = t.us;
    }
    qsort(v, 5, sizeof v[0], cmp_double);
    return v[2];
}

int main(int argc, char **argv)
{
    const attn_ops *ops = &attn_cuda_ops;
    attn_shape s;
    attn_tactic t;
    attn_session *ss = NULL;
    attn_plan *p = NULL;
    char err[ATTUNE_ERRLEN];
    double stage[4];
    int iters = argc > 3 ? atoi(argv[3]) : 10;

    if (argc < 3)
        DIE("usage: bench_split SHAPE_KEY TACTIC [ITERS]");
    if (ops->device_count() == 0)
        return 77;
    if (attn_shape_parse(argv[1], &s, err, sizeof err) != 0)
        DIE("bad shape %s: %s", argv[1], err);
    if (attn_tactic_parse(argv[2], &t, err, sizeof err) != 0)
        DIE("bad tactic %s: %s", argv[2], err);
    TRY(ops->session_open(0, &s, 1234, &ss));
    TRY(ops->plan(ss, &t, &p));
    TRY(ops->run(p));

    /* 64 rows spread over the output, checked against float64 */
    int64_t total = s.b * s.hq * s.sq, rows[64];
    int nrows = total < 64 ? (int)total : 64;
    for (int k = 0; k < nrows; k++)
        rows[k] = (int64_t)((double)k * (double)(total - 1) / (nrows > 1 ? nrows - 1 : 1));
    double *ref = malloc((size_t)nrows * s.d * sizeof *ref);
    double *out = malloc((size_t)nrows * s.d * sizeof *out);
    if (ref == NULL || out == NULL)
        DIE("out of memory");
    TRY(ops->reference(ss, rows, nrows, ref));
    TRY(ops->fetch_rows(ss, rows, nrows, out));
    double num = 0, den = 0;
    for (int64_t e = 0; e < nrows * s.d; e++) {
        num += (out[e] - ref[e]) * (out[e] - ref[e]);
        den += ref[e] * ref[e];
    }

    double kern = median_time(ops, p, iters, 0), copies = median_time(ops, p, iters, 1);
    TRY(cuda_split_profile(p, iters, stage));
    printf("{\"shape\": \"%s\", \"tactic\": \"%s\", \"iters\": %d, \"time_us\": %.3f, "
           "\"time_us_copies\": %.3f, \"qk_us\": %.3f, \"softmax_us\": %.3f, \"pv_us\": %.3f, "
           "\"repeat_us\": %.3f, \"rel_err\": %.3e}\n",
           argv[1], argv[2], iters, kern, copies, stage[0], stage[1], stage[2], stage[3],
           den > 0 ? sqrt(num / den) : sqrt(num));
    free(ref);
    free(out);
    ops->plan_free(p);
    ops->session_close(ss);
    return 0;
}
