/* select.c -- the selection rule: fastest accurate measurement wins. */
#include "select.h"

#include <math.h>

void select_policy_default(select_policy *p)
{
    p->max_rel_err[ATTN_F16] = SELECT_DEFAULT_F16;
    p->max_rel_err[ATTN_BF16] = SELECT_DEFAULT_BF16;
    p->max_rel_err[ATTN_F32] = SELECT_DEFAULT_F32;
    p->max_rel_err[ATTN_E4M3] = SELECT_DEFAULT_E4M3;
    p->max_ratio = SELECT_DEFAULT_RATIO;
}

double select_max_rel_err(const select_policy *p, attn_dtype t)
{
    static const double defaults[ATTN_NDTYPES] = {SELECT_DEFAULT_F16, SELECT_DEFAULT_BF16,
                                                  SELECT_DEFAULT_F32, SELECT_DEFAULT_E4M3};
    if ((unsigned)t >= ATTN_NDTYPES)
        return 0;
    if (p != NULL && p->max_rel_err[t] > 0)
        return p->max_rel_err[t];
    return defaults[t];
}

double select_time(const store_measurement *m)
{
    /* never under the kernels' own time: the copies come on top of them.
     * Older builds timed the two apart and could store copies a hair
     * under the kernel (a table of 2026-12-01: 166.301 against 166.336),
     * and an imported table is checked for form, not for its numbers (a
     * pad=8 row of 370 us with copies of 1 us won every shape). */
    return isfinite(m->time_us_copies) ? fmax(m->time_us_copies, m->time_us) : m->time_us;
}

/* A row that can compete: ok, or inaccurate when the query set its own
 * bound (max_rel_err may loosen the default), with a time and an error,
 * and not noisy (its time is no figure to pick by: tuner/noise.h). */
static int usable(const store_measurement *m, int override)
{
    int status_ok = m->status == STORE_OK || (override && m->status == STORE_INACCURATE);
    return status_ok && !m->noisy && isfinite(select_time(m)) && isfinite(m->rel_err) &&
           m->rel_err >= 0;
}

/* A row whose error counts for the relative bound (the most accurate
 * tactic's): ok, or inaccurate under a query's bound, with an error. Its
 * time does not matter: a noisy or untimed row's error is still a valid
 * measure of what the shape's tactics reach. */
static int accuracy_counts(const store_measurement *m, int override)
{
    int status_ok = m->status == STORE_OK || (override && m->status == STORE_INACCURATE);
    return status_ok && isfinite(m->rel_err) && m->rel_err >= 0;
}

double select_best_err(const store_measurement *m, int n, int override)
{
    double best_err = INFINITY;
    for (int i = 0; i < n; i++)
        if (accuracy_counts(&m[i], override) && m[i].rel_err < best_err)
            best_err = m[i].rel_err;
    return best_err;
}

int select_winner(const store_measurement *m, int n, const select_policy *p,
                  double override_max_rel_err)
{
    if (n <= 0)
        return -1;
    int ov = override_max_rel_err > 0;
    double best_err = select_best_err(m, n, ov);
    if (!isfinite(best_err))
        return -1;
    double bound = override_max_rel_err > 0 ? override_max_rel_err
                                            : select_max_rel_err(p, m[0].shape.dtype);
    double ratio = (p != NULL && p->max_ratio > 0) ? p->max_ratio : SELECT_DEFAULT_RATIO;
    /* The relative bound only bites when the best error is not ~0: a best
     * of exactly 0 (f32 data where the reference rounds the same way) must
     * not exclude tactics within the absolute bound. A query's own bound
     * replaces both: it says how much error its caller accepts. */
    double rel_bound = (best_err > 0 && !ov) ? ratio * best_err : INFINITY;
    int win = -1;
    for (int i = 0; i < n; i++) {
        const store_measurement *c = &m[i];
        if (!usable(c, ov) || c->rel_err > bound || c->rel_err > rel_bound)
            continue;
        double t = select_time(c), tw = win < 0 ? INFINITY : select_time(&m[win]);
        if (win < 0 || t < tw || (t == tw && c->rel_err < m[win].rel_err))
            win = i;
    }
    /* Hysteresis: the winner of the last tune stays while it is eligible and
     * the fastest does not beat it beyond the measured noise, so re-tunes
     * do not flip answers on jitter. */
    for (int i = 0; win >= 0 && i < n; i++) {
        const store_measurement *c = &m[i];
        if (i != win && c->incumbent && usable(c, ov) && c->rel_err <= bound &&
            c->rel_err <= rel_bound && !select_beats(&m[win], c))
            return i;
    }
    return win;
}

/* How far below its median a measurement's samples reached, relative: the
 * run-to-run spread that a faster median must exceed. The slow tail (max)
 * is left out: cold first samples and preemption only ever add time. */
static double low_spread(const store_measurement *m)
{
    double s = (m->time_us - m->time_us_min) / m->time_us;
    return isfinite(s) && s > 0 ? s : 0;
}

int select_beats(const store_measurement *challenger, const store_measurement *incumbent)
{
    if (!usable(challenger, 1))
        return 0;
    if (!usable(incumbent, 1))
        return 1;
    double noise = fmax(low_spread(challenger), low_spread(incumbent));
    return select_time(challenger) < select_time(incumbent) * (1.0 - noise);
}

int select_complete(const store_measurement *m, int n, int need_mark)
{
    if (!need_mark)
        return n > 0;
    for (int i = 0; i < n; i++)
        if (m[i].incumbent)
            return 1;
    return 0;
}
