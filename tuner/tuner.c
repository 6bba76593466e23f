/* tuner.c -- the measuring protocol: check every tactic, then time it. */
#include "tuner.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/hash.h"
#include "../kernels/cancel.h"

#define MAX_TACTICS 256
/* Inaccurate tactics within this factor of the bound are still timed. */
#define TUNER_TIME_INACCURATE 10.0

void tuner_opts_default(tuner_opts *o)
{
    memset(o, 0, sizeof *o);
    o->budget_ms = 200;
    o->min_samples = 5;
    o->max_samples = 50;
    o->stable_rel = 0.01;
    o->cut_factor = 3.0;
    o->target_sample_ms = 2.0;
    o->full_check_rows = 4096;
    o->sample_rows = 256;
    o->throttle_rel = 0.05;
    o->noise_spread = TUNER_NOISE_SPREAD;
    o->noise_share = TUNER_NOISE_SHARE;
    o->noise_retries = TUNER_NOISE_RETRIES;
    o->noise_pause_ms = TUNER_NOISE_PAUSE_MS;
    /* ATTUNE_NOISE_CHECK=0: no noise check, for runs whose answers must not
     * depend on what else the machine does (the test suite on a shared box,
     * tests/CMakeLists.txt; tests/test_noise.c and it_noisy_hog.py turn it
     * on for themselves) */
    const char *nc = getenv("ATTUNE_NOISE_CHECK");
    if (nc != NULL && strcmp(nc, "0") == 0)
        o->noise_spread = o->noise_share = 0;
    /* 1.25: on the H200's anchors a screening read its tactic's full time
     * within 0.87-1.04x, and the full protocol's winner was screened within
     * 1.02x of the best in every run (docs/perf.md, tune time) */
    o->screen_factor = 1.25;
    o->screen_samples = 3;
    o->screen_sample_ms = 0.5;
    o->placement_us = TUNER_PLACEMENT_US;
}

uint64_t tuner_shape_seed(const attn_shape *s)
{
    char key[ATTN_SHAPE_KEY_MAX];
    attn_shape_key(s, key, sizeof key);
    return hash_fnv1a64(hash_fnv1a64_init(), key, strlen(key));
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of v[0..n) (sorts a copy into tmp). */
static double median(const double *v, int n, double *tmp)
{
    memcpy(tmp, v, (size_t)n * sizeof *v);
    qsort(tmp, (size_t)n, sizeof *tmp, cmp_double);
    return n % 2 ? tmp[n / 2] : 0.5 * (tmp[n / 2 - 1] + tmp[n / 2]);
}

/* Sort r[0..n) and drop repeats; returns the count left. */
static int sort_unique(int64_t *r, int n)
{
    qsort(r, (size_t)n, sizeof *r, cmp_i64);
    int u = 0;
    for (int i = 0; i < n; i++)
        if (u == 0 || r[i] != r[u - 1])
            r[u++] = r[i];
    return u;
}

/* Sampled rows: for every (batch, head) pair the first and last query row
 * (every head of the first and last batch when there are too many pairs),
 * the rows around each pad boundary (the last full multiple of 8, 16 and 64
 * below sq, where padding starts), then seeded random rows until
 * o->sample_rows distinct ones are in beyond the fixed ones (or every row). */
int tuner_check_rows(const attn_shape *s, const tuner_opts *o, int64_t **rows, int *n)
{
    int64_t total = s->b * s->hq * s->sq;
    int64_t *r = NULL;
    int cnt = 0;
    if (total <= o->full_check_rows) {
        r = malloc((size_t)total * sizeof *r);
        if (r == NULL)
            return ATTUNE_ENOMEM;
        for (int64_t i = 0; i < total; i++)
            r[i] = i;
        *rows = r;
        *n = (int)total;
        return 0;
    }
    int64_t pairs = s->b * s->hq;
    int all_batches = pairs <= 1024;
    int64_t extra = o->sample_rows > 0 ? o->sample_rows : 0;
    int64_t cap = (all_batches ? pairs : 2 * s->hq) * 8 + extra;
    r = malloc((size_t)cap * sizeof *r);
    if (r == NULL)
        return ATTUNE_ENOMEM;
    for (int64_t bi = 0; bi < s->b; bi++) {
        if (!all_batches && bi != 0 && bi != s->b - 1)
            continue;
        for (int64_t h = 0; h < s->hq; h++) {
            int64_t base = (bi * s->hq + h) * s->sq;
            r[cnt++] = base;
            r[cnt++] = base + s->sq - 1;
            /* Around the first row of the partial tile for pads 8, 16, 64
             * (64 covers 16 and 8 when they coincide): where padding starts. */
            static const int bounds[3] = {8, 16, 64};
            for (int k = 0; k < 3; k++) {
                int64_t edge = s->sq / bounds[k] * bounds[k];
                if (edge > 0 && edge < s->sq) {
                    r[cnt++] = base + edge - 1;
                    r[cnt++] = base + edge;
                }
            }
        }
    }
    /* Random rows until o->sample_rows distinct ones join the distinct
     * fixed rows (or every row is in): a draw that repeats a row draws
     * again. Each round draws what is missing, so the buffer (fixed rows
     * + sample_rows) always has room. */
    int u = sort_unique(r, cnt);
    int64_t want = u + extra;
    if (want >= total) { /* every row (r holds fixed rows + sample_rows >= total) */
        for (int64_t i = 0; i < total; i++)
            r[i] = i;
        *rows = r;
        *n = (int)total;
        return 0;
    }
    int target = (int)want;
    uint64_t st = tuner_shape_seed(s) ^ 0x5eedc0de5eedc0deULL;
    while (u < target) {
        for (cnt = u; cnt < target; cnt++)
            r[cnt] = (int64_t)(hash_splitmix64(&st) % (uint64_t)total);
        u = sort_unique(r, cnt);
    }
    *rows = r;
    *n = u;
    return 0;
}

/* Accuracy of the output rows got[] against ref[]: max abs error, relative
 * L2 error, and the count of non-finite outputs (unwritten poison or NaN/Inf
 * produced by the kernel). */
static void compare(const double *got, const double *ref, size_t n, double *max_abs,
                    double *rel_l2, size_t *nonfinite)
{
    double num = 0, den = 0, mx = 0;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i])) {
            bad++;
            continue;
        }
        double e = got[i] - ref[i];
        num += e * e;
        den += ref[i] * ref[i];
        if (fabs(e) > mx)
            mx = fabs(e);
    }
    *max_abs = mx;
    /* A reference of all zeros (every row masked) makes any nonzero output
     * an error of its own size. */
    *rel_l2 = den > 0 ? sqrt(num / den) : sqrt(num);
    *nonfinite = bad;
}

typedef struct timing_stats {
    double median, min, max;
    int n;
    int cut;
} timing_stats;

/* Time plan p: one calibration call, a warm-up sample, then samples of
 * `iters` calls each until the median is stable, the budget is spent, the
 * sample cap is reached, or the candidate is hopeless against best_us.
 * The budget binds slow tactics too: when the warm-up and min_samples
 * single calls would not fit in it, as many samples as fit are taken (at
 * least one), and a call over half the budget skips the warm-up (the
 * checked run and the calibration call already warmed it). */
static int time_plan(const attn_device *dev, attn_plan *p, int with_copies, const tuner_opts *o,
                     double best_us, int min_samples, timing_stats *ts)
{
    attn_timing t;
    int rc = attn_cancel_poll() ? ATTUNE_ECANCELED : dev->ops->time(p, 1, with_copies, &t);
    if (rc != 0)
        return rc;
    double est = t.us > 0.01 ? t.us : 0.01;
    int iters = (int)(o->target_sample_ms * 1000.0 / est);
    if (iters < 1)
        iters = 1;
    if (iters > 1000)
        iters = 1000;
    double budget_us = o->budget_ms * 1000.0;
    if (est * (min_samples + 1) > budget_us) {
        min_samples = (int)(budget_us / est);
        if (min_samples < 1)
            min_samples = 1;
    }
    if (est <= budget_us / 2 &&
        (rc = dev->ops->time(p, iters, with_copies, &t)) != 0) /* warm-up */
        return rc;
    int cap = o->max_samples > min_samples ? o->max_samples : min_samples;
    if (cap < 1)
        cap = 1;
    double *v = malloc(2 * (size_t)cap * sizeof *v);
    if (v == NULL)
        return ATTUNE_ENOMEM;
    double *tmp = v + cap;
    int n = 0;
    double start = now_s(), prev_med = NAN, spent_us = 0;
    memset(ts, 0, sizeof *ts);
    while (n < cap) {
        if (attn_cancel_poll()) { /* o->cancel or the deadline: no new call */
            rc = ATTUNE_ECANCELED;
            goto done;
        }
        if ((rc = dev->ops->time(p, iters, with_copies, &t)) != 0)
            goto done;
        v[n++] = t.us;
        spent_us += t.us * iters;
        if (n < min_samples)
            continue;
        double med = median(v, n, tmp);
        if (isfinite(best_us) && med > o->cut_factor * best_us) {
            ts->cut = 1;
            break;
        }
        if (n % 2 == 1 && isfinite(prev_med) && fabs(med - prev_med) <= o->stable_rel * med)
            break;
        if (n % 2 == 1)
            prev_med = med;
        /* The budget counts the calls' own time as well as the wall clock
         * (which also holds graph capture and host overhead). */
        if ((now_s() - start) * 1000.0 > o->budget_ms || spent_us > budget_us)
            break;
    }
    ts->n = n;
    ts->median = median(v, n, tmp);
    ts->min = tmp[0];
    ts->max = tmp[n - 1];
    rc = 0;
done:
    free(v);
    return rc;
}

/* The pad/unpad copies' own cost per call, for a padded plan whose kernels
 * alone take kernel_us: samples in pairs, the kernels alone then with the
 * copies, back to back on the same plan so both halves see the same clocks,
 * caches and load; the median of the pairs' differences, never below 0.
 * The with-copies time stored is the kernel time plus this, so it can never
 * read below the kernels alone (issue 13: timed in two separate runs, 24 of
 * 52 padded CPU rows did, and a padded tactic won on the impossible
 * figure). At least one pair, then pairs until `pairs` or the budget.
 * 0, ATTUNE_ECANCELED or the backend's error. */
static int time_copies(const attn_device *dev, attn_plan *p, const tuner_opts *o,
                       double kernel_us, int pairs, double *extra_us)
{
    attn_timing a, b;
    double est = kernel_us > 0.01 ? kernel_us : 0.01;
    int iters = (int)(o->target_sample_ms * 1000.0 / est);
    iters = iters < 1 ? 1 : iters > 1000 ? 1000 : iters;
    int cap = pairs;
    if (cap < 1)
        cap = 1;
    double *d = malloc(2 * (size_t)cap * sizeof *d);
    if (d == NULL)
        return ATTUNE_ENOMEM;
    /* Warm the copy path (its buffers were last touched by the check),
     * unless one call is over half the budget (as time_plan's warm-up). */
    double spent_us = 0, budget_us = o->budget_ms * 1000.0;
    int rc = est <= budget_us / 2 ? dev->ops->time(p, 1, 1, &b) : 0;
    int n = 0;
    while (rc == 0 && n < cap) {
        if (attn_cancel_poll()) {
            rc = ATTUNE_ECANCELED;
            break;
        }
        if ((rc = dev->ops->time(p, iters, 0, &a)) != 0 ||
            (rc = dev->ops->time(p, iters, 1, &b)) != 0)
            break;
        d[n++] = b.us - a.us;
        spent_us += (a.us + b.us) * iters;
        if (spent_us > budget_us)
            break;
    }
    if (rc == 0) {
        double med = median(d, n, d + cap);
        *extra_us = med > 0 ? med : 0;
    }
    free(d);
    return rc;
}

/* Time a checked tactic into m: the kernels alone, then for a padded
 * tactic with its pad/unpad copies, in `pairs` pairs at most (one when
 * the kernels' timing was cut short: the row is no contender, but its
 * stored figure is what a caller of that tactic pays, select_time, and a
 * query restricted to some variants may answer with it: the padded rows
 * stored at over 3x their shape's best, kernels alone, ran 1.13-1.31x
 * that through libattune, bench/libattune-store-h200.txt). 0 or
 * time_plan's error. */
static int time_tactic(const attn_device *dev, attn_plan *p, const attn_tactic *t,
                       const tuner_opts *o, double best_us, int pairs, store_measurement *m)
{
    timing_stats ts;
    int prc = time_plan(dev, p, 0, o, best_us, o->min_samples, &ts);
    if (prc != 0)
        return prc;
    m->time_us = ts.median;
    m->time_us_min = ts.min;
    m->time_us_max = ts.max;
    m->n = ts.n;
    if (ts.cut)
        snprintf(m->note, sizeof m->note, "cut after %d samples: over %.1fx the best", ts.n,
                 o->cut_factor);
    if (t->pad > 1) {
        double extra = 0;
        prc = time_copies(dev, p, o, ts.median, ts.cut ? 1 : pairs, &extra);
        if (prc == 0)
            m->time_us_copies = m->time_us + extra;
    }
    return prc;
}

/* Prefix m's note with text: "text; <the note before>", cut to fit. */
static void note_prefix(store_measurement *m, const char *text)
{
    char note[sizeof m->note];
    int n = snprintf(note, sizeof note, "%s", text);
    if (n < 0)
        return;
    if (m->note[0] != 0 && (size_t)n + 3 < sizeof note) /* the rest, truncated to fit */
        snprintf(note + n, sizeof note - (size_t)n, "; %.*s", (int)(sizeof note - (size_t)n - 3),
                 m->note);
    memcpy(m->note, note, sizeof note);
}

/* time_tactic under the throttling check (throttle.h) and the noise check
 * (noise.h). A tactic timed while the clock was down is timed again once;
 * one whose timing was noisy, up to o->noise_retries times after a pause.
 * The last timing stays: still throttled, its note says so; still noisy,
 * the row is flagged noisy and its note says why, ahead of any other. */
static int time_checked(const attn_device *dev, attn_plan *p, const attn_tactic *t,
                        const tuner_opts *o, double best_us, tuner_throttle *thr,
                        tuner_noise *nz, store_measurement *m, tuner_shape_result *res)
{
    char before[sizeof m->note], why[64] = "";
    memcpy(before, m->note, sizeof before);
    int throttled = 0, noisy = 0, retries = o->noise_retries > 0 ? o->noise_retries : 0;
    for (int attempt = 0;; attempt++) {
        memcpy(m->note, before, sizeof before);
        m->time_us_copies = NAN;
        tuner_throttle_begin(thr, dev);
        tuner_noise_begin(nz, dev);
        int prc = time_tactic(dev, p, t, o, best_us, o->min_samples * 2 + 1, m);
        tuner_noise_end(nz, dev);
        if (prc != 0)
            return prc;
        throttled = tuner_throttle_end(thr, dev);
        noisy = tuner_noise_judge(nz, m->time_us, m->time_us_min, m->n, why, sizeof why);
        int again = (throttled && attempt < 1) || (noisy && attempt < retries);
        if (attempt == 0) {
            res->retimed += throttled && again;
            res->noise_retimed += noisy && again;
        }
        if (!again)
            break;
        if (noisy && tuner_noise_pause(o->noise_pause_ms))
            return ATTUNE_ECANCELED;
    }
    if (throttled) {
        char note[sizeof m->note];
        res->throttled++;
        tuner_throttle_note(thr, note, sizeof note);
        note_prefix(m, note);
    }
    m->noisy = noisy;
    if (noisy) {
        char note[sizeof m->note];
        res->noisy++;
        snprintf(note, sizeof note, "noisy: %s", why);
        note_prefix(m, note);
    }
    return 0;
}

/* Report progress; returns non-zero when the callback asks to cancel. */
static int report(const tuner_opts *o, tuner_progress *pr, double t0, int done_tactics)
{
    pr->elapsed_s = now_s() - t0;
    pr->eta_s = done_tactics > 0
                    ? pr->elapsed_s / done_tactics * (pr->tactic_count - done_tactics)
                    : -1;
    return o->progress ? o->progress(o->ctx, pr) : 0;
}

/* A tactic the screening pass timed, waiting for the pass's verdict. */
typedef struct screened {
    int k;               /* its index in the todo list */
    store_measurement m; /* its checked row with the screening's times */
    double low_mhz;      /* lowest GPU clock sampled around the screening, 0: none */
    int noisy;           /* the screening was noisy (noise.h): no verdict on it */
    char plan_note[sizeof ((store_measurement *)0)->note]; /* the backend's, at its plan */
} screened;

/* One shape's tune in progress: what tuner_run_shape's steps share. */
typedef struct shape_run {
    store *st;
    const attn_device *dev;
    const attn_shape *s;
    const tuner_opts *o;
    char key[ATTN_SHAPE_KEY_MAX];
    char host[64];
    attn_tactic *tactics;               /* every applicable tactic */
    char (*names)[ATTN_TACTIC_STR_MAX]; /* their canonical text */
    int *todo;                          /* indexes of those not stored yet */
    int nt, ntodo;
    int *twin, *twin_of;                /* not stored yet, and stored from a twin
                                           (run_twin_of): twin[k]'s row is the row
                                           of tactic twin_of[k] */
    int ntwin;
    attn_session *ss;
    int64_t *rows;                      /* query rows checked */
    int nrows;
    double *ref, *got;                  /* reference and output of those rows */
    double *src_ref;                    /* e4m3: the reference of the bf16 source
                                           (attn_ops.reference_source); NULL when
                                           none */
    double bound;                       /* the dtype's error bound */
    double best_us;                     /* best time so far, for the early cut */
    tuner_throttle thr;                 /* clock check around each timing */
    tuner_noise nz;                     /* noise check of each timing */
    screened *scr;                      /* the screening pass's timed tactics */
    int nscr;
    int committed;                      /* rows committed so far (progress) */
    tuner_shape_result *res;
} shape_run;

static void run_free(shape_run *r)
{
    free(r->scr);
    free(r->names);
    free(r->todo);
    free(r->twin);
    free(r->twin_of);
    free(r->ref);
    free(r->got);
    free(r->src_ref);
    free(r->rows);
    if (r->ss)
        r->dev->ops->session_close(r->ss);
    free(r->tactics);
}

/* The tactic of r->tactics[0..nt) that tactic i repeats on r's shape:
 * the same tactic at a smaller pad that gives the shape the same lengths
 * (the smallest such pad), -1 when none. A pad that changes no length
 * runs its twin's kernel on the same buffers with no copies (the
 * backends alias them): pad=16 of a 2048-token shape is pad=1. */
static int run_twin_of(const shape_run *r, int i)
{
    const attn_tactic *t = &r->tactics[i];
    for (int pi = 0; pi < ATTN_NPADS && attn_pads[pi] < t->pad; pi++) {
        if (!attn_pads_same_lengths(r->s->sq, r->s->skv, attn_pads[pi], t->pad))
            continue;
        attn_tactic u = *t;
        char name[ATTN_TACTIC_STR_MAX];
        u.pad = attn_pads[pi];
        attn_tactic_str(&u, name, sizeof name);
        for (int k = 0; k < r->nt; k++)
            if (strcmp(name, r->names[k]) == 0)
                return k;
    }
    return -1;
}

/* 1 when only (tuner_opts.only: comma-separated texts, NULL: all) lets
 * tactic name through: name holds one of the texts. */
static int run_only(const char *only, const char *name)
{
    if (only == NULL)
        return 1;
    for (const char *p = only; *p;) {
        size_t n = strcspn(p, ",");
        for (const char *q = name; n > 0 && *q; q++)
            if (strncmp(q, p, n) == 0)
                return 1;
        p += n + (p[n] == ',');
    }
    return 0;
}

/* Step 1: the applicable tactics (the caller's candidates, else the
 * device's listing), and which of them still need measuring (what is
 * committed for this stack is not measured again unless forced): those
 * with a twin among the tactics (run_twin_of) are stored from its row
 * (run_twins), the others measured; tactics tuner_opts.only leaves out are
 * neither. */
static int run_list_tactics(shape_run *r, tuner_shape_result *res)
{
    const attn_device *dev = r->dev;
    if ((r->tactics = malloc(MAX_TACTICS * sizeof *r->tactics)) == NULL)
        return ATTUNE_ENOMEM;
    int nt;
    if (r->o->candidates != NULL) {
        nt = r->o->ncandidates < MAX_TACTICS ? r->o->ncandidates : MAX_TACTICS;
        if (nt > 0)
            memcpy(r->tactics, r->o->candidates, (size_t)nt * sizeof *r->tactics);
    } else {
        nt = dev->ops->tactics(dev->index, r->s, r->tactics, MAX_TACTICS);
    }
    if (nt < 0)
        return nt;
    r->nt = nt > MAX_TACTICS ? MAX_TACTICS : nt;
    size_t cap = (size_t)(r->nt > 0 ? r->nt : 1);
    r->names = malloc(cap * sizeof *r->names);
    r->todo = malloc(cap * sizeof *r->todo);
    r->twin = malloc(cap * sizeof *r->twin);
    r->twin_of = malloc(cap * sizeof *r->twin_of);
    if (r->names == NULL || r->todo == NULL || r->twin == NULL || r->twin_of == NULL)
        return ATTUNE_ENOMEM;
    for (int i = 0; i < r->nt; i++)
        attn_tactic_str(&r->tactics[i], r->names[i], sizeof r->names[i]);
    for (int i = 0; i < r->nt; i++) {
        if (!run_only(r->o->only, r->names[i]))
            continue;
        int ex = r->o->force ? 0
                             : store_measurement_exists(r->st, dev->info.id, dev->stack.id,
                                                        r->s, r->names[i]);
        if (ex < 0)
            return ex;
        int tw = ex ? -1 : run_twin_of(r, i);
        if (tw >= 0 && !run_only(r->o->only, r->names[tw]))
            tw = -1; /* its twin is not measured: measured itself */
        if (ex)
            res->skipped++;
        else if (tw >= 0)
            r->twin[r->ntwin] = i, r->twin_of[r->ntwin++] = tw;
        else
            r->todo[r->ntodo++] = i;
    }
    return 0;
}

/* Step 2: the best time already stored (it feeds the early cut of a
 * resumed run), the session with the shape's seeded inputs, the rows to
 * check and their float64 reference. */
static int run_prepare(shape_run *r)
{
    store_measurement *ms = NULL;
    int nms = 0;
    const attn_device *dev = r->dev;
    r->best_us = INFINITY;
    if (store_measurements_get(r->st, dev->info.id, dev->stack.id, r->s, &ms, &nms) == 0) {
        int w = select_winner(ms, nms, r->o->policy, 0);
        if (w >= 0)
            r->best_us = select_time(&ms[w]);
        free(ms);
    }
    r->bound = select_max_rel_err(r->o->policy, r->s->dtype);
    int rc = dev->ops->session_open(dev->index, r->s, tuner_shape_seed(r->s), &r->ss);
    if (rc == 0)
        rc = tuner_check_rows(r->s, r->o, &r->rows, &r->nrows);
    if (rc != 0)
        return rc;
    size_t cells = (size_t)r->nrows * (size_t)r->s->d;
    r->ref = malloc(cells * sizeof *r->ref);
    r->got = malloc(cells * sizeof *r->got);
    if (r->ref == NULL || r->got == NULL)
        return ATTUNE_ENOMEM;
    if ((rc = dev->ops->reference(r->ss, r->rows, r->nrows, r->ref)) != 0)
        return rc;
    /* e4m3: also the reference of the bf16 values the inputs came from, so
     * each row says what FP8 costs in all (src_rel_err); a backend without
     * one leaves the column empty */
    if (r->s->dtype == ATTN_E4M3 && dev->ops->reference_source != NULL) {
        if ((r->src_ref = malloc(cells * sizeof *r->src_ref)) == NULL)
            return ATTUNE_ENOMEM;
        rc = dev->ops->reference_source(r->ss, r->rows, r->nrows, r->src_ref);
        if (rc == ATTUNE_EUNSUPP) {
            free(r->src_ref);
            r->src_ref = NULL;
            rc = 0;
        }
    }
    return rc;
}

/* A row for tactic k of the todo list, before any result: identity,
 * provenance, every statistic unknown. */
static void run_blank_row(const shape_run *r, int k, store_measurement *m)
{
    const attn_device *dev = r->dev;
    memset(m, 0, sizeof *m);
    snprintf(m->device_id, sizeof m->device_id, "%s", dev->info.id);
    snprintf(m->stack_id, sizeof m->stack_id, "%s", dev->stack.id);
    m->shape = *r->s;
    snprintf(m->tactic, sizeof m->tactic, "%s", r->names[r->todo[k]]);
    snprintf(m->mode, sizeof m->mode, "%s",
             strcmp(dev->info.kind, "cuda") == 0 ? "cuda-graph" : "wall");
    snprintf(m->l2, sizeof m->l2, "warm");
    snprintf(m->host, sizeof m->host, "%s", r->host);
    m->time_us = m->time_us_min = m->time_us_max = m->time_us_copies = NAN;
    m->max_abs_err = m->rel_err = m->err_ratio = m->src_rel_err = NAN;
    m->rows_checked = r->nrows;
}

/* Step 3a: the checked run: poisoned output, every checked row compared
 * with the reference; sets m's errors and status. poll: whether a cancel
 * stops it before the run (ATTUNE_ECANCELED). */
static int run_check(shape_run *r, attn_plan *p, store_measurement *m, int poll)
{
    const attn_device *dev = r->dev;
    size_t nonfinite = 0;
    int prc = dev->ops->poison(r->ss);
    if (prc == 0)
        prc = poll && attn_cancel_poll() ? ATTUNE_ECANCELED : dev->ops->run(p);
    if (prc == ATTUNE_ECANCELED)
        return prc; /* stopped, not failed: the row is not committed */
    if (prc == 0)
        prc = dev->ops->fetch_rows(r->ss, r->rows, r->nrows, r->got);
    if (prc != 0) {
        m->status = STORE_FAILED;
        snprintf(m->note, sizeof m->note, "run: %s", attune_strerror(prc));
        return 0;
    }
    compare(r->got, r->ref, (size_t)r->nrows * (size_t)r->s->d, &m->max_abs_err, &m->rel_err,
            &nonfinite);
    if (r->src_ref != NULL && nonfinite == 0) {
        double src_abs; /* not stored: the relative error is what a query bounds */
        size_t nf;
        compare(r->got, r->src_ref, (size_t)r->nrows * (size_t)r->s->d, &src_abs,
                &m->src_rel_err, &nf);
    }
    if (nonfinite > 0) {
        m->status = STORE_FAILED;
        snprintf(m->note, sizeof m->note, "%zu output elements non-finite or unwritten",
                 nonfinite);
    } else if (m->rel_err > r->bound) {
        m->status = STORE_INACCURATE;
        snprintf(m->note, sizeof m->note, "rel_err %.3g over the bound %.3g", m->rel_err,
                 r->bound);
    } else {
        m->status = STORE_OK;
    }
    return 0;
}

/* Step 3c: the checked run again, after an ok row's timing. A plan whose
 * output depends on what its earlier launches left (a counter or a flag
 * in its workspace, state the graph replays changed) can be right on its
 * first launch only, and a runtime launches it many times: the row takes
 * the second run's status when that one is not ok (its note says so), and
 * the larger of the two errors otherwise. One launch, run even after a
 * cancel, so a row timed whole is committed whole. */
static void run_recheck(shape_run *r, attn_plan *p, store_measurement *m)
{
    store_measurement again = *m;
    double t0 = now_s();
    (void)run_check(r, p, &again, 0); /* 0: nothing to cancel without a poll */
    r->res->check_s += now_s() - t0;
    if (again.status == STORE_OK) {
        if (again.rel_err > m->rel_err) {
            m->rel_err = again.rel_err;
            m->src_rel_err = again.src_rel_err;
        }
        if (again.max_abs_err > m->max_abs_err)
            m->max_abs_err = again.max_abs_err;
        return;
    }
    m->status = again.status;
    m->rel_err = again.rel_err;
    m->max_abs_err = again.max_abs_err;
    m->src_rel_err = again.src_rel_err;
    snprintf(m->note, sizeof m->note, "after its timing: %.80s (right before it)",
             again.note);
}

static void run_plan_free(shape_run *r, attn_plan *p)
{
    double t0 = now_s();
    r->dev->ops->plan_free(p);
    r->res->plan_s += now_s() - t0;
}

/* In how many places a short call is timed (tuner_opts.placements). */
static int placements_of(const shape_run *r)
{
    int n = r->o->placements;
    if (n <= 0)
        n = strcmp(r->dev->info.kind, "cuda") == 0 ? TUNER_PLACEMENTS : 1;
    return n > TUNER_PLACEMENTS_MAX ? TUNER_PLACEMENTS_MAX : n;
}

/* The rest of tuner_opts.placements for tactic t, whose first plan's
 * timing is in *m (base: the row as checked, before any timing): each a
 * fresh session of the shape (the same inputs, from the same seed) and a
 * fresh plan on it, all held until the last is timed, so each one's
 * buffers, the inputs and output as well as the plan's own, lie
 * elsewhere; each timed as the first was (their retimes and noise go to
 * no counter: the first plan's count once for the tactic). *m keeps the
 * first plan's row with the mean of the placements' times (and their
 * extremes), its note prefixed with every placement's time. A session or
 * plan that cannot be made or timed, a cancel or the deadline (tune on miss's quick
 * pass) end the extra ones: the row keeps the places timed, the first
 * always (a complete timing: the next tactic then sees the cancel). */
static void run_placements(shape_run *r, const attn_tactic *t, const store_measurement *base,
                           store_measurement *m)
{
    const int want = placements_of(r);
    const double first = select_time(m);
    if (want <= 1 || !isfinite(first) || first >= r->o->placement_us ||
        (isfinite(r->best_us) && first > r->o->cut_factor * r->best_us))
        return;
    attn_session *sess[TUNER_PLACEMENTS_MAX];
    attn_plan *held[TUNER_PLACEMENTS_MAX];
    store_measurement *got = malloc((size_t)want * sizeof *got);
    if (got == NULL)
        return; /* the first plan's row stands */
    int n = 1, nsess = 0, nheld = 0;
    got[0] = *m;
    while (n < want && !attn_cancel_poll()) {
        double t0 = now_s();
        attn_session *ss = NULL;
        attn_plan *q = NULL;
        int prc = r->dev->ops->session_open(r->dev->index, r->s, tuner_shape_seed(r->s), &ss);
        if (prc == 0)
            sess[nsess++] = ss;
        if (prc == 0 && (prc = r->dev->ops->plan(ss, t, &q)) == 0 && q != NULL)
            held[nheld++] = q;
        r->res->plan_s += now_s() - t0;
        if (prc != 0 || q == NULL)
            break;
        tuner_shape_result scratch = *r->res;
        got[n] = *base;
        prc = time_checked(r->dev, q, t, r->o, r->best_us, &r->thr, &r->nz, &got[n], &scratch);
        if (prc != 0) /* ECANCELED too: what was timed stands */
            break;
        n++;
    }
    for (int i = 0; i < nheld; i++)
        run_plan_free(r, held[i]);
    for (int i = 0; i < nsess; i++)
        r->dev->ops->session_close(sess[i]);
    if (n > 1) {
        /* *m, the first plan's row (its checks, its counts), takes the
         * placements' mean times: the time a runtime's call should expect,
         * wherever its buffers lie, where one plan's figure, or the median
         * of a few, is one mode of a bimodal time */
        double sum = 0, sum_copies = 0;
        for (int i = 0; i < n; i++) {
            sum += got[i].time_us;
            sum_copies += got[i].time_us_copies;
            if (got[i].time_us_min < m->time_us_min)
                m->time_us_min = got[i].time_us_min;
            if (got[i].time_us_max > m->time_us_max)
                m->time_us_max = got[i].time_us_max;
        }
        m->time_us = sum / n;
        m->time_us_copies = sum_copies / n; /* NaN stays NaN (pad=1) */
        char note[sizeof m->note];
        int len = snprintf(note, sizeof note, "mean of %d placements:", n);
        for (int i = 0; i < n && len > 0 && (size_t)len < sizeof note; i++)
            len += snprintf(note + len, sizeof note - (size_t)len, "%s %.2f", i ? "," : "",
                            select_time(&got[i]));
        if (len > 0 && (size_t)len < sizeof note)
            snprintf(note + len, sizeof note - (size_t)len, " us");
        note_prefix(m, note);
    }
    free(got);
}

/* Step 3b: timing of a checked tactic t (plan p) under the throttling
 * check, a short one on more plans (run_placements), then for an ok row
 * the check again (step 3c, run_recheck) before its time may become the
 * best so far. ATTUNE_ECANCELED when canceled (the row is then not
 * committed); other timing errors mark the row failed. */
static int run_time(shape_run *r, const attn_tactic *t, attn_plan *p, store_measurement *m)
{
    store_measurement base = *m;
    int prc = time_checked(r->dev, p, t, r->o, r->best_us, &r->thr, &r->nz, m, r->res);
    if (prc == 0)
        run_placements(r, t, &base, m);
    if (prc == ATTUNE_ECANCELED)
        return prc;
    if (prc != 0) {
        m->status = STORE_FAILED;
        snprintf(m->note, sizeof m->note, "timing: %s", attune_strerror(prc));
        return 0;
    }
    if (m->status == STORE_OK)
        run_recheck(r, p, m);
    if (m->status == STORE_OK && select_time(m) < r->best_us)
        r->best_us = select_time(m);
    return 0;
}

/* Step 3, first part: plan tactic k of the todo list into *p for row m
 * (blanked here). The backend's word on the plan rides in the note: a
 * refusal's reason, or what building it cost (cudnn); a later note (a cut,
 * a failed check) replaces it. prior (may be NULL) is the word of an
 * earlier plan of the same tactic in this tune, kept when the backend says
 * nothing now (cudnn reports a build once: the screening's plan had it). On
 * a refusal *p is NULL and m is final (unsupported or failed). */
static void run_plan(shape_run *r, int k, const char *prior, store_measurement *m,
                     attn_plan **p)
{
    const attn_tactic *t = &r->tactics[r->todo[k]];
    double t0 = now_s();
    *p = NULL;
    run_blank_row(r, k, m);
    int prc = r->dev->ops->plan(r->ss, t, p);
    const char *pnote = r->dev->ops->plan_note ? r->dev->ops->plan_note(r->ss) : NULL;
    if (pnote != NULL && *pnote)
        snprintf(m->note, sizeof m->note, "%s", pnote);
    else if (prior != NULL && *prior)
        snprintf(m->note, sizeof m->note, "%s", prior);
    if (prc != 0) {
        *p = NULL;
        m->status = prc == ATTUNE_EUNSUPP ? STORE_UNSUPPORTED : STORE_FAILED;
        if (pnote == NULL || *pnote == 0)
            snprintf(m->note, sizeof m->note, "plan: %s", attune_strerror(prc));
    }
    r->res->plan_s += now_s() - t0;
}

/* Whether a checked row is timed: the correct ones and the inaccurate ones
 * within TUNER_TIME_INACCURATE x the bound (a query may loosen the bound
 * with max_rel_err and then wants their speed; a failed one, or one off by
 * more, a wrong mask with errors of 0.1 and up, is no candidate). */
static int run_timeable(const shape_run *r, const store_measurement *m)
{
    return m->status == STORE_OK ||
           (m->status == STORE_INACCURATE && m->rel_err <= TUNER_TIME_INACCURATE * r->bound);
}

/* Step 3: measure tactic k of the todo list into m with the full protocol:
 * plan (prior: as run_plan), check, and time it if run_timeable. 0 or
 * ATTUNE_ECANCELED. */
static int run_measure(shape_run *r, int k, const char *prior, store_measurement *m)
{
    const attn_tactic *t = &r->tactics[r->todo[k]];
    attn_plan *p = NULL;
    int rc = 0;
    run_plan(r, k, prior, m, &p);
    if (p == NULL)
        return 0;
    double t0 = now_s();
    rc = run_check(r, p, m, 1);
    r->res->check_s += now_s() - t0;
    if (rc == 0 && run_timeable(r, m)) {
        t0 = now_s();
        double plans_before = r->res->plan_s; /* run_placements' plans count there */
        double checks_before = r->res->check_s; /* run_recheck's run counts there */
        rc = run_time(r, t, p, m);
        r->res->time_s +=
            now_s() - t0 - (r->res->plan_s - plans_before) - (r->res->check_s - checks_before);
        r->res->full++;
    }
    run_plan_free(r, p);
    return rc;
}

/* The screening pass for tactic k of the todo list: plan, check, and for a
 * timeable row a short timing (screen_samples samples of about
 * screen_sample_ms, the copies in as many pairs) between two clock
 * samples. A timeable row joins r->scr (*pending = 1) for the verdict at
 * the pass's end; any other row is final in m (*pending = 0). 0 or
 * ATTUNE_ECANCELED. */
static int run_screen(shape_run *r, int k, store_measurement *m, int *pending)
{
    const tuner_opts *o = r->o;
    const attn_tactic *t = &r->tactics[r->todo[k]];
    attn_plan *p = NULL;
    *pending = 0;
    run_plan(r, k, NULL, m, &p);
    if (p == NULL)
        return 0;
    char plan_note[sizeof m->note];
    memcpy(plan_note, m->note, sizeof plan_note);
    double t0 = now_s();
    int crc = run_check(r, p, m, 1);
    r->res->check_s += now_s() - t0;
    if (crc != 0 || !run_timeable(r, m)) {
        run_plan_free(r, p);
        return crc;
    }
    tuner_opts so = *o;
    so.min_samples = so.max_samples = o->screen_samples > 0 ? o->screen_samples : 1;
    if (o->screen_sample_ms > 0)
        so.target_sample_ms = o->screen_sample_ms;
    t0 = now_s();
    tuner_throttle_begin(&r->thr, r->dev);
    tuner_noise_begin(&r->nz, r->dev);
    int prc = time_tactic(r->dev, p, t, &so, INFINITY, so.min_samples, m);
    tuner_noise_end(&r->nz, r->dev);
    tuner_throttle_end(&r->thr, r->dev);
    r->res->screen_s += now_s() - t0;
    r->res->screened++;
    run_plan_free(r, p);
    if (prc == ATTUNE_ECANCELED)
        return prc;
    if (prc != 0) {
        m->status = STORE_FAILED;
        snprintf(m->note, sizeof m->note, "timing: %s", attune_strerror(prc));
        return 0;
    }
    screened *e = &r->scr[r->nscr++];
    e->k = k;
    e->m = *m;
    e->low_mhz = r->thr.low_mhz;
    e->noisy = tuner_noise_judge(&r->nz, m->time_us, m->time_us_min, m->n, NULL, 0);
    memcpy(e->plan_note, plan_note, sizeof e->plan_note);
    *pending = 1;
    return 0;
}

/* One line per tactic and pass on o->trace: what it came to and what it
 * cost, for finding where a tune's time goes. */
static void run_trace(const shape_run *r, const char *pass, const store_measurement *m,
                      double t0)
{
    if (r->o->trace == NULL)
        return;
    static const char *names[] = {"ok", "unsupported", "failed", "inaccurate"};
    unsigned st = (unsigned)m->status;
    fprintf(r->o->trace, "tuner %s %s %s: %s %.2f us n=%d in %.1f ms\n", r->key, pass, m->tactic,
            st < 4 ? names[st] : "?", select_time(m), m->n, 1e3 * (now_s() - t0));
}

/* How long a tune's store write keeps trying while another writer holds
 * the database past the store's busy timeout (a large import's one
 * transaction). */
#define TUNER_WRITE_WAIT_S 60.0

/* After a store write of the tune that began at t0 and returned rc: 1
 * (after a short pause) when it found the database locked (ATTUNE_EBUSY:
 * locked past the store's busy timeout) and may be tried again, up to
 * TUNER_WRITE_WAIT_S in all and while the tune is not canceled; a
 * measurement just taken is not thrown away, nor the job failed, for a
 * lock. */
static int write_again(int rc, double t0)
{
    if (rc != ATTUNE_EBUSY || now_s() - t0 >= TUNER_WRITE_WAIT_S || attn_cancel_poll())
        return 0;
    struct timespec pause = {0, 20 * 1000 * 1000}; /* no spin when busy came at once */
    nanosleep(&pause, NULL);
    return 1;
}

/* Step 4: commit row m at once (a crash loses at most the tactic in
 * flight; a long lock is waited out: write_again) and tell the caller. 0
 * or the store's error. A failed row whose failure left the device's
 * context lost (attn_ops.health: a kernel faulted; every later call would
 * fail too, and be stored as the failure of tactics that never ran) is
 * committed noted, and ATTUNE_EGPULOST returned: the tune stops there. */
static int run_commit(shape_run *r, store_measurement *m)
{
    const tuner_opts *o = r->o;
    const attn_ops *ops = r->dev->ops;
    int lost = m->status == STORE_FAILED && ops->health != NULL &&
               ops->health(r->dev->index) == ATTUNE_EGPULOST;
    if (lost)
        note_prefix(m, "GPU context lost in this tactic's run (a kernel faulted): the tune "
                       "stopped here");
    double t0 = now_s();
    m->taken_at = (int64_t)time(NULL);
    int rc;
    do
        rc = store_measurement_put(r->st, m);
    while (write_again(rc, t0));
    r->res->store_s += now_s() - t0;
    if (rc != 0)
        return rc;
    if (o->committed != NULL) {
        snprintf(m->power, sizeof m->power, "%s", r->dev->stack.power);
        o->committed(o->committed_ctx, m);
    }
    r->res->measured++;
    r->committed++;
    if (m->status == STORE_FAILED || m->status == STORE_INACCURATE)
        r->res->failed++;
    return lost ? ATTUNE_EGPULOST : 0;
}

/* Progress before a tactic (tactic NULL: after the last); tactic_index
 * counts the rows committed so far. Non-zero when canceled. */
static int run_report(shape_run *r, tuner_progress *pr, double t0, const char *tactic)
{
    const tuner_opts *o = r->o;
    pr->tactic_index = r->committed;
    pr->tactic = tactic;
    if (report(o, pr, t0, r->committed) != 0)
        return 1;
    return tactic != NULL && attn_cancel_poll();
}

/* 1 when tactic text t is on the todo list (measured again by this tune). */
static int run_in_todo(const shape_run *r, const char *t)
{
    for (int k = 0; k < r->ntodo; k++)
        if (strcmp(r->names[r->todo[k]], t) == 0)
            return 1;
    return 0;
}

/* Where the mark goes among m[0..n) (one shape's rows): the winner by the
 * selection rule, else, when no row is eligible, the fastest timed one
 * (run_mark_winner says why); -1 when there is none. */
static int run_mark_pick(const store_measurement *m, int n, const select_policy *p)
{
    int w = select_winner(m, n, p, 0);
    return w >= 0 ? w : select_winner(m, n, p, INFINITY);
}

/* The time the screening's verdicts are measured against: the winner's
 * time by the selection rule (hysteresis left out: every row competes on
 * its time) over the screened rows and the stored rows this tune keeps;
 * when no row is eligible, the fastest timed one (as run_mark_winner
 * marks). INFINITY when there is none. */
static double run_screen_best(const shape_run *r)
{
    store_measurement *stored = NULL, *all;
    int ns = 0, n = 0;
    const attn_device *dev = r->dev;
    if (store_measurements_get(r->st, dev->info.id, dev->stack.id, r->s, &stored, &ns) != 0)
        ns = 0, stored = NULL;
    all = malloc((size_t)(ns + r->nscr > 0 ? ns + r->nscr : 1) * sizeof *all);
    if (all == NULL) {
        free(stored);
        return INFINITY; /* nothing screened out: the full protocol for all */
    }
    for (int i = 0; i < ns; i++)
        if (!run_in_todo(r, stored[i].tactic))
            all[n++] = stored[i];
    for (int i = 0; i < r->nscr; i++)
        all[n++] = r->scr[i].m;
    for (int i = 0; i < n; i++)
        all[i].incumbent = 0;
    int w = run_mark_pick(all, n, r->o->policy);
    double best = w >= 0 ? select_time(&all[w]) : INFINITY;
    free(all);
    free(stored);
    return best;
}

/* Whether screened tactic e gets the full timing against the best
 * screened time: within screen_factor x best, or screened while the GPU
 * clock was more than throttle_rel below the run's start (its screening
 * time may read slow: a tactic screened while the clock ramped up from
 * idle is not judged on it), or noisily (noise.h: the host was busy), or
 * there is no best to judge by. */
static int run_screen_keep(const shape_run *r, const screened *e, double best)
{
    if (!isfinite(best) || e->noisy)
        return 1;
    if (e->low_mhz > 0 && e->low_mhz < (1.0 - r->thr.rel) * r->thr.ref_mhz)
        return 1;
    return select_time(&e->m) <= r->o->screen_factor * best;
}

/* A screened-out row's note: its screening, then what the plan said. */
static void run_screen_note(const tuner_opts *o, store_measurement *m, double best)
{
    char old[sizeof m->note];
    memcpy(old, m->note, sizeof old);
    int n = snprintf(m->note, sizeof m->note,
                     "screened out: %.4g us in %d samples, over %.3gx the best screened (%.4g us)",
                     select_time(m), m->n, o->screen_factor, best);
    if (old[0] != 0 && n > 0 && (size_t)n + 3 < sizeof m->note)
        snprintf(m->note + n, sizeof m->note - (size_t)n, "; %s", old);
}

static int cmp_screen_time(const void *a, const void *b)
{
    double x = select_time(&((const screened *)a)->m);
    double y = select_time(&((const screened *)b)->m);
    return (x > y) - (x < y);
}

/* The screened-out row out[0..nout) that the mark would go to (the
 * selection, as run_mark_winner makes it, over the stack's stored rows
 * with these rows, not yet committed, in place of their tactics' stored
 * ones: a commit replaces a row's values and keeps its mark), or -1 when
 * it goes to a fully timed row. */
static int run_screened_winner(const shape_run *r, const screened *out, int nout)
{
    store_measurement *ms = NULL, *all;
    int nms = 0, n = nout;
    const attn_device *dev = r->dev;
    if (nout == 0 ||
        store_measurements_get(r->st, dev->info.id, dev->stack.id, r->s, &ms, &nms) != 0)
        return -1;
    if ((all = malloc((size_t)(nms + nout) * sizeof *all)) == NULL) {
        free(ms);
        return -1;
    }
    /* all[0..nout): the screened-out rows; then the other stored rows */
    for (int o = 0; o < nout; o++) {
        all[o] = out[o].m;
        all[o].incumbent = 0;
    }
    for (int i = 0; i < nms; i++) {
        int o = 0;
        while (o < nout && strcmp(out[o].m.tactic, ms[i].tactic) != 0)
            o++;
        if (o < nout)
            all[o].incumbent = ms[i].incumbent;
        else
            all[n++] = ms[i];
    }
    int w = run_mark_pick(all, n, r->o->policy);
    free(all);
    free(ms);
    return w < nout ? w : -1;
}

/* Steps 3 and 4 with screening: the screening pass over every tactic to do
 * (final rows committed at once), the verdicts, the full protocol for the
 * kept ones, fastest screened first, then the rows screened out committed.
 * A winner is never a screening: when a screened-out row would take the
 * mark after the full pass (the kept ones' full timings read slower than
 * their screenings: a noisy host), that tactic is timed in full instead,
 * until the mark goes to a fully timed row. Each tactic is committed once. */
static int run_tactics_screened(shape_run *r, tuner_progress *pr, double t0)
{
    int rc = 0, pending = 0;
    if ((r->scr = malloc((size_t)r->ntodo * sizeof *r->scr)) == NULL)
        return ATTUNE_ENOMEM;
    for (int k = 0; k < r->ntodo; k++) {
        if (run_report(r, pr, t0, r->names[r->todo[k]]))
            return ATTUNE_ECANCELED;
        store_measurement m;
        double ts = now_s();
        if ((rc = run_screen(r, k, &m, &pending)) != 0)
            return rc; /* canceled: the pending rows are not committed */
        run_trace(r, "screen", &m, ts);
        if (!pending && (rc = run_commit(r, &m)) != 0)
            return rc;
    }
    double best = run_screen_best(r);
    /* the kept ones to the front, the screened-out ones (noted) behind */
    int nkeep = 0;
    for (int i = 0; i < r->nscr; i++) {
        screened e = r->scr[i];
        if (!run_screen_keep(r, &e, best)) {
            run_screen_note(r->o, &r->scr[i].m, best);
            continue;
        }
        r->scr[i] = r->scr[nkeep];
        r->scr[nkeep++] = e;
    }
    int nout = r->nscr - nkeep;
    screened *out = r->scr + nkeep;
    qsort(r->scr, (size_t)nkeep, sizeof *r->scr, cmp_screen_time);
    for (int i = 0, j = -1; i < nkeep || (j = run_screened_winner(r, out, nout)) >= 0; i++) {
        const screened *e = i < nkeep ? &r->scr[i] : &out[j];
        if (run_report(r, pr, t0, r->names[r->todo[e->k]]))
            return ATTUNE_ECANCELED; /* the screened-out rows are screened again */
        store_measurement m;
        double ts = now_s();
        if ((rc = run_measure(r, e->k, e->plan_note, &m)) != 0)
            return rc;
        run_trace(r, "full", &m, ts);
        if ((rc = run_commit(r, &m)) != 0)
            return rc;
        if (i >= nkeep)
            out[j] = out[--nout];
    }
    for (int i = 0; i < nout; i++) {
        /* canceled between two rows: what is committed is final, the rest
         * is screened again by the next tune */
        if (r->o->cancel && *r->o->cancel)
            return ATTUNE_ECANCELED;
        r->res->screened_out++;
        if ((rc = run_commit(r, &out[i].m)) != 0)
            return rc;
    }
    return 0;
}

/* Steps 3 and 4 for every tactic to do: screened (run_tactics_screened),
 * or every tactic measured with the full protocol and committed at once.
 * Progress is reported before each tactic and once after the last. */
static int run_tactics(shape_run *r, int shape_index, int shape_count)
{
    int rc = 0;
    double t0 = now_s();
    tuner_progress pr = {.shape_index = shape_index, .shape_count = shape_count,
                         .tactic_count = r->ntodo, .shape_key = r->key};
    if (r->o->screen_factor > 0 && r->ntodo > 1) {
        rc = run_tactics_screened(r, &pr, t0);
    } else {
        for (int k = 0; k < r->ntodo && rc == 0; k++) {
            if (run_report(r, &pr, t0, r->names[r->todo[k]]))
                return ATTUNE_ECANCELED;
            store_measurement m;
            double ts = now_s();
            if ((rc = run_measure(r, k, NULL, &m)) != 0)
                return rc; /* canceled: a half-timed tactic is not committed */
            run_trace(r, "full", &m, ts);
            rc = run_commit(r, &m);
        }
    }
    if (rc == 0)
        run_report(r, &pr, t0, NULL);
    return rc;
}

/* Twin row m's note: "pad=P changes no length: the row of TWIN, not
 * timed again", ahead of the twin's note, or after its first part when
 * that says it is noisy (a noisy row's note starts with why). */
static void run_twin_note(store_measurement *m, int pad, const char *twin)
{
    char text[sizeof m->note], note[3 * sizeof m->note];
    snprintf(text, sizeof text, "pad=%d changes no length: the row of %s, not timed again", pad,
             twin);
    if (!m->noisy || strncmp(m->note, "noisy: ", 7) != 0) {
        note_prefix(m, text);
        return;
    }
    const char *rest = strstr(m->note, "; ");
    int head = rest != NULL ? (int)(rest - m->note) : (int)strlen(m->note);
    snprintf(note, sizeof note, "%.*s; %s%s", head, m->note, text, rest != NULL ? rest : "");
    memcpy(m->note, note, sizeof m->note - 1); /* cut to fit */
    m->note[sizeof m->note - 1] = 0;
}

/* Step 4c: each twin's row (run_list_tactics) from the stored row of
 * the tactic it repeats, renamed, its note saying so, committed; not
 * timed. A twin whose tactic has no stored row (a tune canceled before
 * it) is left for the next tune. 0 or the store's error. */
static int run_twins(shape_run *r)
{
    store_measurement *ms = NULL;
    int n = 0;
    if (r->ntwin == 0)
        return 0;
    int rc = store_measurements_get(r->st, r->dev->info.id, r->dev->stack.id, r->s, &ms, &n);
    for (int k = 0; rc == 0 && k < r->ntwin; k++) {
        const char *of = r->names[r->twin_of[k]];
        for (int i = 0; i < n; i++) {
            if (strcmp(ms[i].tactic, of) != 0)
                continue;
            store_measurement m = ms[i];
            const attn_tactic *t = &r->tactics[r->twin[k]];
            snprintf(m.tactic, sizeof m.tactic, "%s", r->names[r->twin[k]]);
            m.incumbent = 0;
            if (t->pad > 1 && isnan(m.time_us_copies))
                m.time_us_copies = m.time_us; /* its pad changes no length: no copies */
            run_twin_note(&m, t->pad, of);
            if ((rc = run_commit(r, &m)) == 0) {
                r->res->twins++;
                r->res->noisy += m.noisy; /* flagged as its twin is: counted alike */
            }
            break;
        }
    }
    free(ms);
    return rc;
}

/* Step 5: the winner over the stack's rows, recorded as the incumbent so
 * the next re-tune keeps it unless beaten beyond the noise
 * (select_winner's hysteresis). */
static int run_mark_winner(shape_run *r, tuner_shape_result *res)
{
    const attn_device *dev = r->dev;
    store_measurement *ms = NULL;
    int nms = 0;
    int rc = store_measurements_get(r->st, dev->info.id, dev->stack.id, r->s, &ms, &nms);
    if (rc != 0)
        return rc;
    int w = select_winner(ms, nms, r->o->policy, 0);
    /* No eligible winner (every timed tactic inaccurate): the fastest timed
     * one is marked all the same, because the mark also says "this tune
     * completed" (select_complete): a query that loosens the bound
     * (max_rel_err) may then be answered from these rows. Not eligible
     * under the policy, the mark changes no default answer. */
    int mark = w >= 0 ? w : select_winner(ms, nms, r->o->policy, INFINITY);
    double t0 = now_s();
    if (mark >= 0 && !ms[mark].incumbent) {
        do
            rc = store_winner_mark(r->st, dev->info.id, dev->stack.id, r->s, ms[mark].tactic);
        while (write_again(rc, t0));
    }
    /* Nothing to mark because the timed rows are noisy (select_winner
     * passes over them): an older mark goes, so the shape does not read as
     * tuned and the next tune (or a miss) measures it again. */
    for (int i = 0; mark < 0 && rc == 0 && i < nms; i++)
        if (ms[i].noisy) {
            do
                rc = store_winner_mark(r->st, dev->info.id, dev->stack.id, r->s, NULL);
            while (write_again(rc, t0));
            break;
        }
    if (rc == 0 && mark >= 0) {
        ms[mark].incumbent = 1;
        if (r->o->committed != NULL)
            r->o->committed(r->o->committed_ctx, &ms[mark]);
    }
    if (rc == 0 && w >= 0) {
        snprintf(res->winner, sizeof res->winner, "%s", ms[w].tactic);
        res->winner_us = select_time(&ms[w]);
    }
    free(ms);
    return rc;
}

int tuner_run_shape(store *st, const attn_device *dev, const attn_shape *s,
                    const tuner_opts *o_in, int shape_index, int shape_count,
                    tuner_shape_result *res)
{
    tuner_opts defaults;
    const tuner_opts *o = o_in;
    if (o == NULL) {
        tuner_opts_default(&defaults);
        o = &defaults;
    }
    memset(res, 0, sizeof *res);
    int rc = attn_shape_validate(s, NULL, 0);
    if (rc != 0)
        return rc;
    shape_run r = {.st = st, .dev = dev, .s = s, .o = o, .res = res};
    r.thr = (tuner_throttle){.clock = o->clock, .ctx = o->clock_ctx,
                             .rel = o->throttle_rel > 0 ? o->throttle_rel : 0.05,
                             .ref_mhz = o->clock_ref_mhz};
    res->clock_ref_mhz = o->clock_ref_mhz;
    r.nz = (tuner_noise){.spread = o->noise_spread, .share = o->noise_share, .cpu = o->cpu,
                         .ctx = o->cpu_ctx};
    attn_shape_key(s, r.key, sizeof r.key);
    if (o->host)
        snprintf(r.host, sizeof r.host, "%s", o->host);
    else if (gethostname(r.host, sizeof r.host) != 0)
        snprintf(r.host, sizeof r.host, "unknown");
    r.host[sizeof r.host - 1] = 0;

    attn_cancel_arm(o->cancel, o->deadline_s); /* reaches into the kernel calls */
    double t0 = now_s();
    do
        rc = store_device_put(st, &dev->info, &dev->stack);
    while (write_again(rc, t0));
    if (rc != 0 || (rc = run_list_tactics(&r, res)) != 0)
        goto done;
    res->prepare_s = now_s() - t0;
    if (r.ntodo > 0) {
        t0 = now_s();
        rc = run_prepare(&r);
        res->prepare_s += now_s() - t0;
        if (rc == 0)
            rc = run_tactics(&r, shape_index, shape_count);
        res->clock_ref_mhz = r.thr.ref_mhz;
        if (rc != 0)
            goto done;
    }
    if ((rc = run_twins(&r)) != 0)
        goto done;
    if (!o->no_mark && o->only == NULL) /* a winner of part of the listing is not the shape's */
        rc = run_mark_winner(&r, res);
done:
    attn_cancel_arm(NULL, 0);
    run_free(&r);
    return rc;
}
