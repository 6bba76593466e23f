/* loo.c -- leave-one-out regret of predicted answers over tuned shapes. */
#include "loo.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOO_MAX_TACTICS 4096

typedef struct keyed {
    char key[ATTN_SHAPE_KEY_MAX];
    int i;
} keyed;

static int cmp_keyed(const void *a, const void *b)
{
    const keyed *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c != 0 ? c : (x->i > y->i) - (x->i < y->i);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void loo_result_free(loo_result *r)
{
    if (r == NULL)
        return;
    free(r->shapes);
    memset(r, 0, sizeof *r);
}

/* Score one hidden shape whose rows (of the truth's stack) are own[0..nown). */
static void score(const store_measurement *own, int nown, const select_policy *p,
                  const predict_answer *a, int answered, loo_shape *ls)
{
    int w = select_winner(own, nown, p, 0);
    snprintf(ls->winner, sizeof ls->winner, "%s", own[w].tactic);
    ls->winner_us = select_time(&own[w]);
    ls->regret = INFINITY;
    ls->answer_us = NAN;
    ls->predicted_us = NAN;
    if (!answered)
        return;
    snprintf(ls->answer, sizeof ls->answer, "%s", a->tactic_str);
    snprintf(ls->from, sizeof ls->from, "%s", a->nfrom > 0 ? a->from[0] : "");
    ls->predicted_us = a->time_us;
    /* eligible on the hidden shape: the selection rule over the answered
     * row alone plus the rows that set the relative bound */
    double best_err = select_best_err(own, nown, 0);
    for (int k = 0; k < nown; k++) {
        if (strcmp(own[k].tactic, a->tactic_str) != 0)
            continue;
        ls->answer_us = select_time(&own[k]);
        double ratio = p != NULL && p->max_ratio > 0 ? p->max_ratio : SELECT_DEFAULT_RATIO;
        int ok = own[k].status == STORE_OK && isfinite(ls->answer_us) &&
                 own[k].rel_err <= select_max_rel_err(p, own[k].shape.dtype) &&
                 (best_err <= 0 || own[k].rel_err <= ratio * best_err);
        if (ok)
            ls->regret = ls->answer_us / ls->winner_us;
    }
}

/* The candidates for hidden shape s whose rows are own[0..nown): the
 * device's listing, or without a device the tactics measured on s (what
 * the backend listed for it when it was tuned). Returns how many, or the
 * listing's error. */
static int candidates(const attn_device *dev, const attn_shape *s, const store_measurement *own,
                      int nown, attn_tactic *cand)
{
    if (dev != NULL) {
        int nc = dev->ops->tactics(dev->index, s, cand, LOO_MAX_TACTICS);
        return nc > LOO_MAX_TACTICS ? LOO_MAX_TACTICS : nc;
    }
    int nc = 0;
    for (int k = 0; k < nown && nc < LOO_MAX_TACTICS; k++)
        if (attn_tactic_parse(own[k].tactic, &cand[nc], NULL, 0) == 0)
            nc++;
    return nc;
}

static int in_set(const attn_shape *s, const attn_shape *set, int nset)
{
    for (int i = 0; i < nset; i++)
        if (memcmp(s, &set[i], sizeof *s) == 0)
            return 1;
    return 0;
}

int loo_run(const store_measurement *m, int n, const char *cur_stack, const select_policy *p,
            const attn_device *dev, loo_result *out)
{
    return loo_run_opts(m, n, cur_stack, p, dev, NULL, out);
}

int loo_run_opts(const store_measurement *m, int n, const char *cur_stack, const select_policy *p,
                 const attn_device *dev, const loo_opts *o, loo_result *out)
{
    const attn_shape *hold = o != NULL ? o->hold : NULL;
    int nhold = o != NULL ? o->nhold : 0;
    const store_measurement *train = o != NULL && o->train != NULL ? o->train : m;
    const attn_device_info *info = o != NULL && o->info != NULL ? o->info
                                   : dev != NULL                ? &dev->info
                                                                : NULL;
    int rc = ATTUNE_ENOMEM;
    keyed *kr = NULL;
    store_measurement *rest = NULL, *own = NULL;
    attn_tactic *cand = NULL;
    double *reg = NULL;
    predict_model *shared = NULL; /* holdout: one model from the rows outside it */
    memset(out, 0, sizeof *out);
    if (n <= 0)
        return 0;
    if ((kr = malloc((size_t)n * sizeof *kr)) == NULL ||
        (rest = malloc((size_t)n * sizeof *rest)) == NULL ||
        (own = malloc((size_t)n * sizeof *own)) == NULL ||
        (cand = malloc(LOO_MAX_TACTICS * sizeof *cand)) == NULL ||
        (out->shapes = calloc((size_t)n, sizeof *out->shapes)) == NULL ||
        (reg = malloc((size_t)n * sizeof *reg)) == NULL)
        goto fail;
    for (int i = 0; i < n; i++) {
        attn_shape_key(&m[i].shape, kr[i].key, sizeof kr[i].key);
        kr[i].i = i;
    }
    qsort(kr, (size_t)n, sizeof *kr, cmp_keyed);
    if (hold != NULL) {
        int nrest = 0;
        for (int i = 0; i < n; i++)
            if (!in_set(&m[i].shape, hold, nhold))
                rest[nrest++] = train[i];
        if ((shared = predict_build_on(rest, nrest, cur_stack, p, info)) == NULL)
            goto fail;
        predict_set_trace(shared, o->trace);
    }
    for (int lo = 0; lo < n;) {
        int hi = lo + 1;
        while (hi < n && strcmp(kr[hi].key, kr[lo].key) == 0)
            hi++;
        const attn_shape *s = &m[kr[lo].i].shape;
        /* the hidden shape's truth: its rows of cur_stack, else all of them */
        int nown = 0, nrest = 0, cur = 0;
        for (int k = lo; k < hi; k++)
            cur |= cur_stack != NULL && strcmp(m[kr[k].i].stack_id, cur_stack) == 0;
        for (int k = lo; k < hi; k++)
            if (!cur || strcmp(m[kr[k].i].stack_id, cur_stack) == 0)
                own[nown++] = m[kr[k].i];
        if ((hold != NULL && !in_set(s, hold, nhold)) || select_winner(own, nown, p, 0) < 0) {
            lo = hi;
            continue;
        }
        predict_model *pm = shared;
        if (pm == NULL) {
            for (int k = 0; k < lo; k++)
                rest[nrest++] = train[kr[k].i];
            for (int k = hi; k < n; k++)
                rest[nrest++] = train[kr[k].i];
            if ((pm = predict_build_on(rest, nrest, cur_stack, p, info)) == NULL)
                goto fail;
            predict_set_trace(pm, o != NULL ? o->trace : NULL);
        }
        predict_answer a;
        int nc = candidates(dev, s, own, nown, cand), arc = ATTUNE_ENOTFOUND;
        if (nc > 0)
            arc = predict_answer_for(pm, s, cand, nc, 0, &a);
        if (pm != shared)
            predict_free(pm);
        if (nc < 0) {
            rc = nc;
            goto fail;
        }
        loo_shape *ls = &out->shapes[out->n];
        memcpy(ls->key, kr[lo].key, sizeof ls->key);
        score(own, nown, p, &a, arc == 0, ls);
        reg[out->n++] = ls->regret;
        lo = hi;
    }
    if (out->n > 0) {
        qsort(reg, (size_t)out->n, sizeof *reg, cmp_double);
        out->median = out->n % 2 ? reg[out->n / 2] : 0.5 * (reg[out->n / 2 - 1] + reg[out->n / 2]);
        out->worst = reg[out->n - 1];
        double sl = 0;
        for (int i = 0; i < out->n; i++)
            sl += log(reg[i]);
        out->geomean = exp(sl / out->n);
    }
    rc = 0;
fail:
    if (rc != 0)
        loo_result_free(out);
    free(kr);
    free(rest);
    free(own);
    free(cand);
    free(reg);
    predict_free(shared);
    return rc;
}
