/* select.h -- the selection rule: the fastest accurate measurement wins.
 *
 * A measurement is eligible when its status is ok, it is not flagged noisy
 * (tuner/noise.h: kept out of answers until measured again), its time is
 * finite, and its relative L2 error is within both bounds:
 *   rel_err <= max_rel_err              (absolute, per dtype by default)
 *   rel_err <= max_ratio * best_rel_err (relative to the most accurate ok
 *                                        tactic of the same shape, noisy
 *                                        or untimed ones included)
 * Time compared is select_time(): for padded tactics the time including the
 * pad/unpad copies (what a runtime that holds unpadded tensors pays), else
 * the kernel time.
 * Defaults (docs/tuning.md explains them): f16 5e-3, bf16 3e-2, f32 1e-4,
 * e4m3 1e-1 (against the stored FP8 inputs: P, and on Hopper O, in FP8);
 * max_ratio 8 (folding in f16 was measured at up to 7x the unfolded error). */
#ifndef ATTUNE_SELECT_H
#define ATTUNE_SELECT_H

#include "../db/store.h"

typedef struct select_policy {
    double max_rel_err[ATTN_NDTYPES]; /* indexed by attn_dtype; <= 0 means default */
    double max_ratio;      /* <= 0 means default */
} select_policy;

#define SELECT_DEFAULT_F16 5e-3
#define SELECT_DEFAULT_BF16 3e-2
#define SELECT_DEFAULT_F32 1e-4
#define SELECT_DEFAULT_E4M3 1e-1
#define SELECT_DEFAULT_RATIO 8.0

/* The time a measurement competes with: time_us_copies when stored (and
 * not under time_us: the larger of the two), else time_us. */
double select_time(const store_measurement *m);

/* Fill p with the defaults. */
void select_policy_default(select_policy *p);

/* Absolute bound for dtype under p (default if unset). */
double select_max_rel_err(const select_policy *p, attn_dtype t);

/* The error the relative bound is over, among m[0..n) (all of one shape):
 * the least rel_err of the rows that are ok (with override, inaccurate
 * ones too: a query's own bound) and have a finite error >= 0, noisy or
 * untimed ones included (their time is in doubt, not their error);
 * INFINITY when none. select_winner, the prediction model (tuner/predict.h)
 * and leave-one-out scoring (tuner/loo.h) all bound by it. */
double select_best_err(const store_measurement *m, int n, int override);

/* Index of the winner among m[0..n) (all of one shape), or -1 if none is
 * eligible: the fastest eligible row (ties on time go to the lower error),
 * where eligible means status ok within both bounds; with
 * override_max_rel_err > 0 (the API's max_rel_err=) rows within that one
 * bound alone, inaccurate ones included (their caller accepts the error),
 * unless a row marked incumbent (the last tune's winner) is eligible and
 * the fastest does not beat it beyond the noise (select_beats): then the
 * incumbent. */
int select_winner(const store_measurement *m, int n, const select_policy *p,
                  double override_max_rel_err);

/* 1 when the rows m[0..n) of one (device, stack, shape) come from a
 * completed tune and may answer as measured: one of them carries the
 * winner mark that the tuner sets as the shape's last step
 * (tuner_run_shape; schema v3's migration marked the rows of older
 * databases the same way), or need_mark is 0 (a fleet device's rows come
 * from an imported table, whole by construction; marks are not exported).
 * Rows of a tune still in flight, in this process or another, carry no
 * mark yet and are not a winner's source (issue 15 item 5). A completed
 * tune whose timed tactics are all inaccurate marks its fastest one (a
 * query's looser max_rel_err may pick among them); one with no timed
 * tactic marks nothing and has no winner anyway. The daemon's lookups and
 * GET /v1/winners (tuner/winners.h) apply this same rule. */
int select_complete(const store_measurement *m, int n, int need_mark);

/* 1 when challenger's time is below incumbent's by more than the measured
 * noise: the larger of the two relative (median - min) / median spreads,
 * so a re-tune replaces a winner only on a real margin. */
int select_beats(const store_measurement *challenger, const store_measurement *incumbent);

#endif
