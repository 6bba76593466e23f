/* tune_cost.c -- the predicted cost of a shape's whole tune, and the budget. */
#include "tune_cost.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "miss_policy.h"

/* Tactics priced at most (the CPU lists 16 or so, an H200 a few hundred). */
#define TUNE_COST_MAX_TACTICS 1024
/* Tactics priced by the model, evenly spread over the listing (the rest
 * cost their mean): about 5 us each, so a lookup's miss or a 4096-shape
 * job's admission stays in the milliseconds and the second at worst. */
#define TUNE_COST_SAMPLE 24
/* The roofline's rates when the model knows nothing: low on purpose. */
#define TUNE_COST_CPU_FLOPS 1e9
#define TUNE_COST_GPU_FLOPS 2e13
/* Tune on miss's quick pass (miss_policy.h): its tactics, each timed for
 * about MISS_QUICK_BUDGET_MS. */
#define TUNE_COST_QUICK_TACTICS MISS_QUICK
#define TUNE_COST_QUICK_BUDGET_S (MISS_QUICK_BUDGET_MS * 1e-3)
/* The screening pass (tuner/tuner.c run_screen): a warm-up and 3 samples
 * of about 0.5 ms (never below one call). */
#define TUNE_COST_SCREEN_SAMPLES 4
#define TUNE_COST_SCREEN_SAMPLE_S 0.0005
/* Tactics the full tune times in full at least (docs/tuning.md). */
#define TUNE_COST_MIN_KEPT 3

/* Seconds the full protocol costs one tactic of t seconds a call under a
 * per-tactic timing budget of b seconds: the checked run and the
 * calibration call, then timed samples bound by b but never fewer than
 * one call, as much again for a padded tactic's copies (time_plan,
 * time_copies). */
static double full_s(double t, double b)
{
    double timed = t > b ? t : b;
    return 2.0 * t + 2.0 * timed;
}

/* Seconds the screening costs it: the checked run, the calibration call
 * and the screening samples (and as many for the copies' pairs). */
static double screen_s(double t)
{
    double sample = t > TUNE_COST_SCREEN_SAMPLE_S ? t : TUNE_COST_SCREEN_SAMPLE_S;
    return 2.0 * t + 2.0 * TUNE_COST_SCREEN_SAMPLES * sample;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The whole tune of tactics of us[0..n) (sorted here, fastest first):
 * the quick pass times the fastest 3 for about 30 ms each; the full tune
 * screens every one and times in full the fastest eighth (at least 3:
 * those screened within 1.25x of the best, docs/tuning.md). Seconds. */
static double tune_s(double *us, int n, double b)
{
    qsort(us, (size_t)n, sizeof *us, cmp_double);
    int kept = n / 8 > TUNE_COST_MIN_KEPT ? n / 8 : TUNE_COST_MIN_KEPT;
    double sum = 0;
    for (int i = 0; i < n; i++) {
        double t = us[i] * 1e-6;
        sum += n > 1 ? screen_s(t) : 0;
        sum += i < kept ? full_s(t, b) : 0;
        sum += i < TUNE_COST_QUICK_TACTICS ? full_s(t, TUNE_COST_QUICK_BUDGET_S) : 0;
    }
    return sum;
}

/* FLOPs of the shape's two GEMMs, causal or not. */
static double shape_flops(const attn_shape *s)
{
    double f = 4.0 * (double)s->b * (double)s->hq * (double)s->sq * (double)s->skv * (double)s->d;
    return s->causal ? f / 2 : f;
}

/* Buffers a session holds: q, k and v in the storage dtype, out in its
 * output dtype, and their copies padded to 64 (the largest pad); an e4m3
 * session also the bf16 source of q, k and v (attn_ops.reference_source). */
static double shape_bytes(const attn_shape *s)
{
    double es = (double)attn_dtype_size(s->dtype) * (double)s->d;
    double eo = (double)attn_dtype_size(attn_dtype_out(s->dtype)) * (double)s->d;
    double q = (double)s->b * (double)s->hq * (double)attn_round_up(s->sq, 64);
    double kv = (double)s->b * (double)s->hkv * (double)attn_round_up(s->skv, 64);
    double src = s->dtype == ATTN_E4M3 ? 2.0 * (double)s->d * (q + 2.0 * kv) : 0.0;
    return 2.0 * ((es + eo) * q + 2.0 * es * kv) + src;
}

/* Fill the times of us[0..n) the model has no word on (NaN) with the
 * slowest predicted one, or the roofline when none is (*roofline = 1);
 * those not priced (negative: outside the predictor's sample) with the mean
 * of the others. */
static void fill_unknown(double *us, int n, const attn_device_info *dev, const attn_shape *s,
                         int *roofline)
{
    double worst = NAN, sum = 0;
    int k = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(us[i]) && us[i] >= 0 && !(us[i] <= worst))
            worst = us[i];
    if (!isfinite(worst)) {
        int cpu = strcmp(dev->kind, "cpu") == 0; /* "cuda" starts with 'c' too */
        worst = shape_flops(s) / (cpu ? TUNE_COST_CPU_FLOPS : TUNE_COST_GPU_FLOPS) * 1e6;
        *roofline = 1;
    }
    for (int i = 0; i < n; i++) {
        if (!isfinite(us[i]))
            us[i] = worst;
        if (us[i] >= 0) {
            sum += us[i];
            k++;
        }
    }
    for (int i = 0; i < n; i++)
        if (us[i] < 0)
            us[i] = k > 0 ? sum / k : worst;
}

void tune_cost_of_times(double *us, int n, const attn_device_info *dev, const attn_shape *s,
                        double tactic_budget_ms, tune_cost *out)
{
    *out = (tune_cost){0};
    if (n == 0) /* nothing lists (or no model): one tactic at the roofline */
        us[n++] = NAN;
    fill_unknown(us, n, dev, s, &out->roofline);
    for (int i = 0; i < n; i++)
        if (us[i] > out->call_us)
            out->call_us = us[i];
    out->seconds = tune_s(us, n, tactic_budget_ms > 0 ? tactic_budget_ms * 1e-3 : 0.2);
    out->ntactics = n;
    out->bytes = shape_bytes(s);
    out->max_bytes = dev->memory_mb > 0 ? 0.5 * (double)dev->memory_mb * 1048576.0
                                             : INFINITY;
}

int tune_cost_estimate(tune_cost_predict_fn predict, void *ctx, const attn_device_info *dev,
                       const attn_shape *s, double tactic_budget_ms, tune_cost *out)
{
    static _Thread_local double us[TUNE_COST_MAX_TACTICS];
    *out = (tune_cost){0};
    int n = predict(ctx, dev->id, s, us, TUNE_COST_MAX_TACTICS, TUNE_COST_SAMPLE);
    if (n < 0)
        return n;
    tune_cost_of_times(us, n, dev, s, tactic_budget_ms, out);
    return 0;
}

int tune_cost_fits(const tune_cost *c, double budget_s)
{
    return c->seconds <= budget_s && c->bytes <= c->max_bytes;
}

/* A duration in words: "42 s", "9.6 min", "3.1 h", "2.0 days". */
static void duration(double s, char *buf, size_t len)
{
    if (s < 120)
        snprintf(buf, len, "%.0f s", s);
    else if (s < 7200)
        snprintf(buf, len, "%.1f min", s / 60);
    else if (s < 172800)
        snprintf(buf, len, "%.1f h", s / 3600);
    else
        snprintf(buf, len, "%.1f days", s / 86400);
}

char *tune_cost_describe(const tune_cost *c, double budget_s, char *buf, size_t len)
{
    char t[32], b[32];
    if (c->bytes > c->max_bytes) {
        snprintf(buf, len, "buffers of %.1f GB over %.1f GB", c->bytes / 1e9, c->max_bytes / 1e9);
        return buf;
    }
    duration(c->seconds, t, sizeof t);
    duration(budget_s, b, sizeof b);
    snprintf(buf, len, "predicted %s (budget %s)", t, b);
    return buf;
}
