/* winners.c -- per-shape winners, runner-ups and margins of one device. */
#include "winners.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/grow.h"

void winners_filter_all(winners_filter *f)
{
    f->dtype = -1;
    f->d = 0;
    f->causal = -1;
    f->stale = -1;
    f->need_mark = 0;
    f->variants = 0;
}

static int cmp_i64(int64_t a, int64_t b)
{
    return a < b ? -1 : a > b;
}

/* The order of the answer: the winner map's panels (dtype, d, g, causal),
 * then its axes (sq, skv), then the rest. */
static int cmp_shape(const attn_shape *x, const attn_shape *y)
{
    int c;
    if ((c = cmp_i64(x->dtype, y->dtype)) || (c = cmp_i64(x->d, y->d)) ||
        (c = cmp_i64(attn_shape_group(x), attn_shape_group(y))) ||
        (c = cmp_i64(x->causal, y->causal)) || (c = cmp_i64(x->sq, y->sq)) ||
        (c = cmp_i64(x->skv, y->skv)) || (c = cmp_i64(x->b, y->b)) ||
        (c = cmp_i64(x->hq, y->hq)))
        return c;
    return cmp_i64(x->hkv, y->hkv);
}

static int cmp_rows(const void *a, const void *b)
{
    const store_measurement *x = a, *y = b;
    int c = cmp_shape(&x->shape, &y->shape);
    if (c == 0)
        c = strcmp(x->stack_id, y->stack_id);
    return c != 0 ? c : strcmp(x->tactic, y->tactic);
}

static int keep_shape(const attn_shape *s, const winners_filter *f)
{
    return f == NULL || ((f->dtype < 0 || (int)s->dtype == f->dtype) &&
                         (f->d <= 0 || s->d == f->d) &&
                         (f->causal < 0 || s->causal == f->causal));
}

/* One stack's rows of a shape: m[lo..hi). */
typedef struct group {
    int lo, hi;
    int64_t newest; /* latest taken_at */
    int win;        /* absolute row index of its winner, -1 */
} group;

/* Fastest eligible row of g other than its winner, by the same bounds:
 * the winner is kept in the copy (so the bound relative to the most
 * accurate tactic is unchanged) but made the slowest possible, and no row
 * is an incumbent (hysteresis is about replacing a winner, not ranking). */
static int runner_up(const store_measurement *m, const group *g, const select_policy *p,
                     variant_set vs, store_measurement *out)
{
    int n = g->hi - g->lo;
    store_measurement *c = malloc((size_t)n * sizeof *c);
    if (c == NULL)
        return ATTUNE_ENOMEM;
    memcpy(c, m + g->lo, (size_t)n * sizeof *c);
    for (int i = 0; i < n; i++)
        c[i].incumbent = 0;
    int w = g->win - g->lo;
    c[w].time_us = c[w].time_us_copies = DBL_MAX;
    int r = variant_set_winner(c, n, p, 0, vs);
    int found = r >= 0 && r != w;
    if (found)
        *out = m[g->lo + r];
    free(c);
    return r == ATTUNE_ENOMEM ? r : found;
}

/* Fill row from the rows m[lo..hi) of one shape, sorted by stack, leaving
 * out stacks of another power mode than cur's. f (may be NULL) gives
 * need_mark and the variants the winner may be of (the counts then count
 * their rows alone). 1 when filled, 0 when no row of cur's mode exists,
 * or ATTUNE_ENOMEM. */
static int shape_row(const store_measurement *m, int lo, int hi, const attn_stack *cur,
                     const select_policy *p, const winners_filter *f, winners_row *row)
{
    int need_mark = f != NULL && f->need_mark;
    variant_set vs = f != NULL ? f->variants : 0;
    const char *cur_stack = cur->id;
    group gs[16];
    int ng = 0, rc = 0;
    group *g = gs;
    int cap = (int)(sizeof gs / sizeof gs[0]);
    for (int i = lo; i < hi;) {
        int j = i + 1;
        int64_t newest = m[i].taken_at;
        while (j < hi && strcmp(m[j].stack_id, m[i].stack_id) == 0) {
            if (m[j].taken_at > newest)
                newest = m[j].taken_at;
            j++;
        }
        if (strcmp(m[i].power, cur->power) != 0) {
            i = j;
            continue;
        }
        if (ng == cap) { /* many stacks: rare, grow off the stack */
            group *bigger = malloc((size_t)cap * 2 * sizeof *bigger);
            if (bigger == NULL) {
                rc = ATTUNE_ENOMEM;
                goto out;
            }
            memcpy(bigger, g, (size_t)ng * sizeof *g);
            if (g != gs)
                free(g);
            g = bigger;
            cap *= 2;
        }
        int w = select_complete(m + i, j - i, need_mark)
                    ? variant_set_winner(m + i, j - i, p, 0, vs)
                    : -1;
        if (w == ATTUNE_ENOMEM) {
            rc = w;
            goto out;
        }
        g[ng++] = (group){i, j, newest, w >= 0 ? i + w : -1};
        i = j;
    }
    /* chosen: the current stack's group when it has a winner, else the
     * most recent group with a winner, else (no winner anywhere) the
     * current stack's group, else the most recent one */
    if (ng == 0)
        goto out; /* rc 0: nothing in this power mode */
    int here = -1, best_w = -1, newest = -1;
    for (int k = 0; k < ng; k++) {
        if (strcmp(m[g[k].lo].stack_id, cur_stack) == 0)
            here = k;
        if (g[k].win >= 0 && (best_w < 0 || g[k].newest > g[best_w].newest))
            best_w = k;
        if (newest < 0 || g[k].newest > g[newest].newest)
            newest = k;
    }
    int ch = (here >= 0 && g[here].win >= 0) ? here
             : best_w >= 0                    ? best_w
             : here >= 0                      ? here
                                              : newest;
    memset(row, 0, sizeof *row);
    row->shape = m[lo].shape;
    row->margin = NAN;
    snprintf(row->stack_id, sizeof row->stack_id, "%s", m[g[ch].lo].stack_id);
    row->stale = strcmp(row->stack_id, cur_stack) != 0;
    for (int i = g[ch].lo; i < g[ch].hi; i++) {
        if (!variant_set_has_tactic(vs, m[i].tactic))
            continue;
        row->ntactics++;
        switch (m[i].status) {
        case STORE_OK: row->nok++; break;
        case STORE_INACCURATE: row->ninaccurate++; break;
        case STORE_FAILED: row->nfailed++; break;
        case STORE_UNSUPPORTED: row->nunsupported++; break;
        }
    }
    if (g[ch].win >= 0) {
        row->has_winner = 1;
        row->winner = m[g[ch].win];
        int r = runner_up(m, &g[ch], p, vs, &row->runner_up);
        if (r < 0) {
            rc = r;
            goto out;
        }
        row->has_runner_up = r;
        if (r)
            row->margin = select_time(&row->runner_up) / select_time(&row->winner);
    }
    /* previous: the most recent other stack's winner (what changed) */
    int prev = -1;
    for (int k = 0; k < ng; k++)
        if (k != ch && g[k].win >= 0 && (prev < 0 || g[k].newest > g[prev].newest))
            prev = k;
    if (prev >= 0) {
        row->has_previous = 1;
        row->previous = m[g[prev].win];
    }
    rc = 1;
out:
    if (g != gs)
        free(g);
    return rc;
}

int winners_compute(const store_measurement *m, int n, const attn_stack *cur,
                    const select_policy *p, const winners_filter *f, winners_row **out,
                    int *nout)
{
    *out = NULL;
    *nout = 0;
    if (n <= 0)
        return 0;
    select_policy def;
    if (p == NULL) {
        select_policy_default(&def);
        p = &def;
    }
    winners_row *rows = NULL;
    int nrows = 0, cap = 0, rc = 0;
    store_measurement *s = malloc((size_t)n * sizeof *s);
    if (s == NULL)
        return ATTUNE_ENOMEM;
    memcpy(s, m, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_rows);
    for (int lo = 0; lo < n;) {
        int hi = lo + 1;
        while (hi < n && cmp_shape(&s[hi].shape, &s[lo].shape) == 0)
            hi++;
        if (keep_shape(&s[lo].shape, f)) {
            if ((rc = grow_array(&rows, &cap, nrows, sizeof *rows)) != 0)
                goto fail;
            if ((rc = shape_row(s, lo, hi, cur, p, f, &rows[nrows])) < 0)
                goto fail;
            const winners_row *w = &rows[nrows];
            /* stale filter: a shape without a winner is neither */
            if (rc == 1 &&
                (f == NULL || f->stale < 0 || (w->has_winner && w->stale == f->stale)))
                nrows++;
            rc = 0;
        }
        lo = hi;
    }
    free(s);
    *out = rows;
    *nout = nrows;
    return 0;
fail:
    free(s);
    free(rows);
    return rc;
}
