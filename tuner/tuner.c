/* tuner.c -- the measuring protocol: check every tactic, then time it. */
#include "tuner.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/hash.h"

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

/* Sampled rows: for every (batch, head) pair the first and last query row
 * (every head of the first and last batch when there are too many pairs),
 * the rows around each pad boundary (the last full multiple of 8, 16 and 64
 * below sq, where padding starts), then seeded random rows until there are
 * at least o->sample_rows beyond the fixed ones. */
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
    int64_t cap = (all_batches ? pairs : 2 * s->hq) * 8 + o->sample_rows;
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
    uint64_t st = tuner_shape_seed(s) ^ 0x5eedc0de5eedc0deULL;
    for (int k = 0; k < o->sample_rows; k++)
        r[cnt++] = (int64_t)(hash_splitmix64(&st) % (uint64_t)total);
    qsort(r, (size_t)cnt, sizeof *r, cmp_i64);
    int u = 0;
    for (int i = 0; i < cnt; i++)
        if (u == 0 || r[i] != r[u - 1])
            r[u++] = r[i];
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
    int rc = dev->ops->time(p, 1, with_copies, &t);
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
        if (o->cancel && *o->cancel) {
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

/* Time a checked tactic into m: the kernels alone, then for a padded
 * tactic (not cut short) with its pad/unpad copies. 0 or time_plan's error. */
static int time_tactic(const attn_device *dev, attn_plan *p, const attn_tactic *t,
                       const tuner_opts *o, double best_us, store_measurement *m)
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
    if (t->pad > 1 && !ts.cut) {
        timing_stats tc;
        prc = time_plan(dev, p, 1, o, INFINITY, o->min_samples, &tc);
        if (prc == 0)
            m->time_us_copies = tc.median;
    }
    return prc;
}

/* time_tactic under the throttling check (throttle.h): a tactic timed
 * while the clock was down is timed again; if the clock is still down the
 * second timing stays, and its row says so ahead of any other note. */
static int time_checked(const attn_device *dev, attn_plan *p, const attn_tactic *t,
                        const tuner_opts *o, double best_us, tuner_throttle *thr,
                        store_measurement *m, tuner_shape_result *res)
{
    char before[sizeof m->note];
    memcpy(before, m->note, sizeof before);
    for (int attempt = 0; attempt < 2; attempt++) {
        memcpy(m->note, before, sizeof before);
        m->time_us_copies = NAN;
        tuner_throttle_begin(thr, dev);
        int prc = time_tactic(dev, p, t, o, best_us, m);
        if (prc != 0 || !tuner_throttle_end(thr, dev))
            return prc;
        if (attempt == 0)
            res->retimed++;
    }
    res->throttled++;
    char note[sizeof m->note];
    tuner_throttle_note(thr, note, sizeof note);
    size_t n = strlen(note);
    if (m->note[0] != 0 && n + 3 < sizeof note) /* the rest, truncated to fit */
        snprintf(note + n, sizeof note - n, "; %.*s", (int)(sizeof note - n - 3), m->note);
    memcpy(m->note, note, sizeof note);
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

    attn_tactic *tactics = NULL;
    attn_session *ss = NULL;
    int64_t *rows = NULL;
    double *ref = NULL, *got = NULL;
    store_measurement *ms = NULL;
    char (*names)[ATTN_TACTIC_STR_MAX] = NULL;
    int *todo = NULL;
    int nms = 0;
    char key[ATTN_SHAPE_KEY_MAX], host[64];
    attn_shape_key(s, key, sizeof key);
    if (o->host)
        snprintf(host, sizeof host, "%s", o->host);
    else if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "unknown");
    host[sizeof host - 1] = 0;

    tuner_throttle thr = {.clock = o->clock, .ctx = o->clock_ctx,
                          .rel = o->throttle_rel > 0 ? o->throttle_rel : 0.05,
                          .ref_mhz = o->clock_ref_mhz};
    res->clock_ref_mhz = o->clock_ref_mhz;
    if ((rc = store_device_put(st, &dev->info, &dev->stack)) != 0)
        goto done;
    tactics = malloc(MAX_TACTICS * sizeof *tactics);
    if (tactics == NULL) {
        rc = ATTUNE_ENOMEM;
        goto done;
    }
    int nt = dev->ops->tactics(dev->index, s, tactics, MAX_TACTICS);
    if (nt < 0) {
        rc = nt;
        goto done;
    }
    if (nt > MAX_TACTICS)
        nt = MAX_TACTICS;

    /* What is already committed for this stack is not measured again. */
    names = malloc((size_t)(nt > 0 ? nt : 1) * sizeof *names);
    todo = malloc((size_t)(nt > 0 ? nt : 1) * sizeof *todo);
    if (names == NULL || todo == NULL) {
        rc = ATTUNE_ENOMEM;
        goto done;
    }
    int ntodo = 0;
    for (int i = 0; i < nt; i++) {
        attn_tactic_str(&tactics[i], names[i], sizeof names[i]);
        int ex = o->force ? 0 : store_measurement_exists(st, dev->info.id, dev->stack.id, s,
                                                         names[i]);
        if (ex < 0) {
            rc = ex;
            goto done;
        }
        if (ex)
            res->skipped++;
        else
            todo[ntodo++] = i;
    }

    double best_us = INFINITY;
    if (ntodo > 0) {
        /* The best time already stored feeds the early cut of a resumed run. */
        if (store_measurements_get(st, dev->info.id, dev->stack.id, s, &ms, &nms) == 0) {
            int w = select_winner(ms, nms, o->policy, 0);
            if (w >= 0)
                best_us = select_time(&ms[w]);
            free(ms);
            ms = NULL;
            nms = 0;
        }
        int nrows = 0;
        rc = dev->ops->session_open(dev->index, s, tuner_shape_seed(s), &ss);
        if (rc == 0)
            rc = tuner_check_rows(s, o, &rows, &nrows);
        if (rc == 0) {
            size_t cells = (size_t)nrows * (size_t)s->d;
            ref = malloc(cells * sizeof *ref);
            got = malloc(cells * sizeof *got);
            rc = (ref && got) ? dev->ops->reference(ss, rows, nrows, ref) : ATTUNE_ENOMEM;
        }
        double bound = select_max_rel_err(o->policy, s->dtype);
        double t0 = now_s();
        tuner_progress pr = {.shape_index = shape_index, .shape_count = shape_count,
                             .tactic_count = ntodo, .shape_key = key};
        for (int k = 0; rc == 0 && k < ntodo; k++) {
            const attn_tactic *t = &tactics[todo[k]];
            pr.tactic_index = k;
            pr.tactic = names[todo[k]];
            if (report(o, &pr, t0, k) != 0 || (o->cancel && *o->cancel)) {
                rc = ATTUNE_ECANCELED;
                break;
            }
            store_measurement m;
            memset(&m, 0, sizeof m);
            snprintf(m.device_id, sizeof m.device_id, "%s", dev->info.id);
            snprintf(m.stack_id, sizeof m.stack_id, "%s", dev->stack.id);
            m.shape = *s;
            snprintf(m.tactic, sizeof m.tactic, "%s", names[todo[k]]);
            snprintf(m.mode, sizeof m.mode, "%s",
                     strcmp(dev->info.kind, "cuda") == 0 ? "cuda-graph" : "wall");
            snprintf(m.l2, sizeof m.l2, "warm");
            snprintf(m.host, sizeof m.host, "%s", host);
            m.time_us = m.time_us_min = m.time_us_max = m.time_us_copies = NAN;
            m.max_abs_err = m.rel_err = m.err_ratio = NAN;
            m.rows_checked = nrows;

            attn_plan *p = NULL;
            int prc = dev->ops->plan(ss, t, &p);
            if (prc == ATTUNE_EUNSUPP) {
                m.status = STORE_UNSUPPORTED;
                snprintf(m.note, sizeof m.note, "plan: %s", attune_strerror(prc));
            } else if (prc != 0) {
                m.status = STORE_FAILED;
                snprintf(m.note, sizeof m.note, "plan: %s", attune_strerror(prc));
            } else {
                /* Checked run: poisoned output, every row compared. */
                size_t nonfinite = 0;
                prc = dev->ops->poison(ss);
                if (prc == 0)
                    prc = dev->ops->run(p);
                if (prc == 0)
                    prc = dev->ops->fetch_rows(ss, rows, nrows, got);
                if (prc != 0) {
                    m.status = STORE_FAILED;
                    snprintf(m.note, sizeof m.note, "run: %s", attune_strerror(prc));
                } else {
                    compare(got, ref, (size_t)nrows * (size_t)s->d, &m.max_abs_err, &m.rel_err,
                            &nonfinite);
                    if (nonfinite > 0) {
                        m.status = STORE_FAILED;
                        snprintf(m.note, sizeof m.note,
                                 "%zu output elements non-finite or unwritten", nonfinite);
                    } else if (m.rel_err > bound) {
                        m.status = STORE_INACCURATE;
                        snprintf(m.note, sizeof m.note, "rel_err %.3g over the bound %.3g",
                                 m.rel_err, bound);
                    } else {
                        m.status = STORE_OK;
                    }
                }
                /* Correct tactics are timed, and inaccurate ones within 10x
                 * the bound: a query may loosen the bound (max_rel_err) and
                 * then wants their speed. A failed one, or one off by more
                 * (a wrong mask: errors of 0.1 and up), is no candidate. */
                if (m.status == STORE_OK ||
                    (m.status == STORE_INACCURATE && m.rel_err <= TUNER_TIME_INACCURATE * bound)) {
                    prc = time_checked(dev, p, t, o, best_us, &thr, &m, res);
                    if (prc == ATTUNE_ECANCELED) {
                        dev->ops->plan_free(p);
                        rc = prc;
                        break; /* a half-timed tactic is not committed */
                    }
                    if (prc != 0) {
                        m.status = STORE_FAILED;
                        snprintf(m.note, sizeof m.note, "timing: %s", attune_strerror(prc));
                    } else if (m.status == STORE_OK && select_time(&m) < best_us) {
                        best_us = select_time(&m);
                    }
                }
                dev->ops->plan_free(p);
            }
            m.taken_at = (int64_t)time(NULL);
            if ((rc = store_measurement_put(st, &m)) != 0)
                break;
            res->measured++;
            if (m.status == STORE_FAILED || m.status == STORE_INACCURATE)
                res->failed++;
        }
        res->clock_ref_mhz = thr.ref_mhz;
        if (rc == 0) {
            pr.tactic_index = ntodo;
            pr.tactic = NULL;
            report(o, &pr, t0, ntodo);
        }
    }
    if (rc != 0)
        goto done;

    if ((rc = store_measurements_get(st, dev->info.id, dev->stack.id, s, &ms, &nms)) != 0)
        goto done;
    int w = select_winner(ms, nms, o->policy, 0);
    /* Record the choice, so the next re-tune keeps it unless beaten beyond
     * the noise (select_winner's hysteresis). */
    if (w >= 0 && !ms[w].incumbent &&
        (rc = store_winner_mark(st, dev->info.id, dev->stack.id, s, ms[w].tactic)) != 0)
        goto done;
    if (w >= 0) {
        snprintf(res->winner, sizeof res->winner, "%s", ms[w].tactic);
        res->winner_us = select_time(&ms[w]);
    }
done:
    free(names);
    free(todo);
    free(ms);
    free(ref);
    free(got);
    free(rows);
    if (ss)
        dev->ops->session_close(ss);
    free(tactics);
    return rc;
}
