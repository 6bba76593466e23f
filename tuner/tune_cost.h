/* tune_cost.h -- what a shape's whole tune is predicted to cost, and
 * whether that fits a budget (issue 29 item 1; moved from daemon/admit.c,
 * issue 26 item 5).
 *
 * A lookup can name any valid shape; before this, tune on miss queued one
 * whose single call the model put at 576 s on the CPU, and the tuner was
 * gone for hours. The cost of a tune is, over the tactics the backend
 * lists for the shape, the calls the tuner makes times each tactic's
 * predicted time per call: the screening of every tactic (checked run,
 * calibration call, a warm-up and 3 short samples, never below one call
 * each), the full timing of the fastest eighth (the screening keeps those
 * within 1.25x of the best; samples bound by the per-tactic budget, never
 * below one call; as much again for pad copies), and tune on miss's quick
 * pass over the fastest 3; and its buffers (q, k, v and out, padded
 * copies) must fit in half the device's memory. A tactic the model has no
 * word on costs the slowest predicted one; a device with no model at all
 * costs a roofline of its FLOPs at a deliberately low rate (refusing a
 * cheap shape is cheaper than admitting an hour).
 *
 * The predictions come from the caller (tune_cost_predict_fn: attuned's is
 * the lookup index's model, daemon/admit.c), so this layer knows no index.
 * Plain functions: no lock, no I/O. */
#ifndef ATTUNE_TUNE_COST_H
#define ATTUNE_TUNE_COST_H

#include <stddef.h>

#include "../kernels/attn.h"

typedef struct tune_cost {
    double seconds;    /* the whole tune, predicted */
    double call_us;    /* the slowest tactic's predicted call */
    double bytes;      /* buffers the session allocates */
    double max_bytes;  /* what the device allows them (half its memory) */
    int ntactics;      /* tactics listed for the shape */
    int roofline;      /* 1: no model evidence, the roofline guess */
} tune_cost;

/* Predicted time per call (us) of every tactic listed for s on device
 * device_id into us[0..max): NaN where the model has no word on one, -1
 * for those not priced when sample > 0 (about `sample` are, evenly
 * spread). Returns how many were written (0: nothing lists) or a negative
 * error, which tune_cost_estimate passes on (attuned: ATTUNE_EBUSY while
 * the listing is being made, ATTUNE_ENODEV). index_predict_times has this
 * contract. */
typedef int (*tune_cost_predict_fn)(void *ctx, const char *device_id, const attn_shape *s,
                                    double *us, int max, int sample);

/* Price the times us[0..n) (as predict writes them; modified: filled and
 * sorted) of the tactics listed for s on dev, under a per-tactic timing
 * budget of tactic_budget_ms (<= 0: the tuner's default, 200 ms), into
 * *out. n == 0 prices one tactic at the roofline; us must then have room
 * for one. */
void tune_cost_of_times(double *us, int n, const attn_device_info *dev, const attn_shape *s,
                        double tactic_budget_ms, tune_cost *out);

/* Predict the cost of tuning s on local device dev: predict (with ctx)
 * gives the times, at most 1024 tactics of which about 24 priced (the
 * rest cost their mean: microseconds per priced tactic, so a lookup's
 * miss or a 4096-shape job's admission stays in the milliseconds). 0 with
 * *out filled, or predict's negative error (*out zeroed). */
int tune_cost_estimate(tune_cost_predict_fn predict, void *ctx, const attn_device_info *dev,
                       const attn_shape *s, double tactic_budget_ms, tune_cost *out);

/* 1 when the predicted tune fits budget_s seconds and its buffers fit the
 * device, else 0. */
int tune_cost_fits(const tune_cost *c, double budget_s);

/* "predicted 9.6 min (budget 60 s)" (or "buffers of 12.0 GB over 8.0 GB"):
 * why c does not fit, in words for an answer, into buf. Returns buf. */
char *tune_cost_describe(const tune_cost *c, double budget_s, char *buf, size_t len);

#endif
