/* winners.h -- every tuned shape of a device with its winner, runner-up and
 * margin: what GET /v1/winners, `attune winners` and the dashboard show.
 *
 * The winner of a shape follows the rule of the daemon's lookups (index.h
 * "measured"): select_winner among the complete rows (select_complete, see
 * winners_filter.need_mark) of the device's current stack;
 * when that stack has none, among the rows of the most recent other stack
 * that has one (stale; unlike the lookups, which serve a stale winner only
 * when the backend still lists its tactic, no listing is asked here: a
 * stale winner may be a tactic the backend no longer lists, docs/api.md
 * GET /v1/winners). Only stacks of the current stack's power mode count:
 * a row taken in another mode belongs to another device state and is never
 * served (kernels/power.h), so a shape measured only in other modes is not
 * listed. A shape whose rows give no eligible tactic is still listed,
 * without a winner, so a broken or all-inaccurate shape shows up. */
#ifndef ATTUNE_WINNERS_H
#define ATTUNE_WINNERS_H

#include <jansson.h>

#include "../db/store.h"
#include "select.h"
#include "variant_set.h"

/* Which shapes to keep; -1 / 0 fields match anything. */
typedef struct winners_filter {
    int dtype;  /* attn_dtype, or -1 */
    int d;      /* head size, or 0 */
    int causal; /* 0, 1, or -1 */
    int stale;  /* 0: fresh winners only, 1: stale ones only, -1: all */
    /* 1 (a device of this host): a stack's rows give a winner only once
     * complete (select_complete: the tuner marked one), as the daemon's
     * lookups do; a tune in flight lists the shape without a winner.
     * 0 (fleet devices; winners_filter_all): every stack's rows count. */
    int need_mark;
    /* The variants a winner may be of (0: all; the API's variants=): the
     * winner, runner-up and counts of a shape among those rows alone
     * (variant_set_winner), the view of a runtime that runs only them. */
    variant_set variants;
} winners_filter;

/* Fill f with "everything" (need_mark 0). */
void winners_filter_all(winners_filter *f);

typedef struct winners_row {
    attn_shape shape;
    char stack_id[24];     /* stack of the rows the winner was chosen among
                              (the current one when no stack has a winner
                              and it has rows, else the newest) */
    int stale;             /* stack_id is not the device's current stack */
    int has_winner;
    store_measurement winner;
    int has_runner_up;     /* the next eligible tactic of the same stack */
    store_measurement runner_up;
    /* select_time(runner_up) / select_time(winner): the speedup the choice
     * buys. Below 1 when hysteresis kept a winner within the noise. NaN
     * without a runner-up. */
    double margin;
    int ntactics;          /* rows of stack_id */
    int nok, ninaccurate, nfailed, nunsupported;
    int has_previous;      /* the winner of the most recent other stack of
                              the same power mode */
    store_measurement previous;
} winners_row;

/* Group m[0..n) (rows of one device, any shapes and stacks, any order) by
 * shape and fill *out (malloc'd, caller frees; NULL when *nout == 0) with
 * one row per shape kept by f (NULL: all), sorted by (dtype, d, g, causal,
 * sq, skv, b, hq). p: selection policy (NULL: defaults). cur: the device's
 * current stack (its id and power mode). m is not modified. 0 or
 * ATTUNE_ENOMEM. */
int winners_compute(const store_measurement *m, int n, const attn_stack *cur,
                    const select_policy *p, const winners_filter *f, winners_row **out,
                    int *nout);

/* The rows as the "winners" array of GET /v1/winners (docs/api.md), one
 * object per shape; `attune winners --json` prints the same. New
 * reference, NULL on ENOMEM. */
json_t *winners_json(const winners_row *rows, int n);

#endif
