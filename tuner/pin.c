/* pin.c -- pins at a lookup: matching the rules of one (device, shape) (pin.h). */
#include "pin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../common/attune_err.h"

int pin_force_listed(const pin *p, const attn_device *dev)
{
    attn_shape s;
    if (p->action != PIN_FORCE || p->shape[0] == 0 || strchr(p->shape, '*') != NULL ||
        attn_shape_parse(p->shape, &s, NULL, 0) != 0)
        return -1;
    int n = dev->ops->tactics(dev->index, &s, NULL, 0);
    int cap = n > 4096 ? n : 4096; /* the CPU counts; CUDA writes at most max */
    attn_tactic *t = n >= 0 ? malloc((size_t)cap * sizeof *t) : NULL;
    int listed = -1;
    if (t != NULL && (n = dev->ops->tactics(dev->index, &s, t, cap)) >= 0) {
        listed = 0;
        for (int i = 0; i < n && i < cap && !listed; i++) {
            char ts[ATTN_TACTIC_STR_MAX];
            listed = strcmp(attn_tactic_str(&t[i], ts, sizeof ts), p->tactic) == 0;
        }
    }
    free(t);
    return listed;
}

int pin_match_init(pin_match *m, const pin *pins, int n, const attn_device_info *dev,
                   const char *key)
{
    memset(m, 0, sizeof *m);
    m->pins = pins;
    m->n = n;
    m->dev = dev;
    m->key = key;
    for (int i = 0; i < n; i++)
        if (pin_applies(&pins[i], dev, key)) {
            m->nforce += pins[i].action == PIN_FORCE;
            m->nexclude += pins[i].action == PIN_EXCLUDE;
        }
    return m->nforce + m->nexclude;
}

const pin *pin_match_excluded(const pin_match *m, const char *tactic)
{
    if (m == NULL || m->nexclude == 0)
        return NULL;
    for (int i = 0; i < m->n; i++) {
        const pin *p = &m->pins[i];
        if (p->action == PIN_EXCLUDE && pin_applies(p, m->dev, m->key) &&
            pin_tactic_matches(p, tactic))
            return p;
    }
    return NULL;
}

const pin *pin_match_force(const pin_match *m, int k)
{
    const pin *prev = NULL;
    /* the k-th by pin_beats: pick the best below prev, k + 1 times (few apply) */
    for (int round = 0; round <= k; round++) {
        const pin *best = NULL;
        for (int i = 0; i < m->n; i++) {
            const pin *p = &m->pins[i];
            if (p->action != PIN_FORCE || !pin_applies(p, m->dev, m->key) ||
                (prev != NULL && !pin_beats(prev, p)) || (best != NULL && !pin_beats(p, best)))
                continue;
            best = p;
        }
        if (best == NULL)
            return NULL;
        prev = best;
    }
    return prev;
}

int pin_winner(const store_measurement *m, int n, const select_policy *p, double mre,
               variant_set vs, const pin_match *pm)
{
    int hit = 0;
    for (int i = 0; i < n && pm != NULL && pm->nexclude > 0 && !hit; i++)
        hit = pin_match_excluded(pm, m[i].tactic) != NULL;
    if (!hit)
        return variant_set_winner(m, n, p, mre, vs);
    store_measurement *c = malloc((size_t)n * sizeof *c);
    int *from = malloc((size_t)n * sizeof *from);
    int k = 0, w = ATTUNE_ENOMEM;
    if (c != NULL && from != NULL) {
        for (int i = 0; i < n; i++)
            if (pin_match_excluded(pm, m[i].tactic) == NULL) {
                from[k] = i;
                c[k++] = m[i];
            }
        w = variant_set_winner(c, k, p, mre, vs);
        w = w >= 0 ? from[w] : w;
    }
    free(c);
    free(from);
    return w;
}
