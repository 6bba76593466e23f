/* admit.h -- admission for tuning: what a shape's whole tune is predicted
 * to cost, and whether that fits a budget (issue 29 item 1).
 *
 * A lookup can name any valid shape; before this, tune on miss queued one
 * whose single call the model put at 576 s on the CPU, and the tuner was
 * gone for hours. The cost of a tune is, over the tactics the backend
 * lists for the shape, the calls the tuner makes times each tactic's
 * predicted time per call (index_predict_times): the screening of every
 * tactic (checked run, calibration call, a warm-up and 3 short samples,
 * never below one call each), the full timing of the fastest eighth (the
 * screening keeps those within 1.25x of the best; samples bound by the
 * per-tactic budget, never below one call; as much again for pad copies),
 * and tune on miss's quick pass over the fastest 3; and its buffers (q, k,
 * v and out, padded copies) must fit in half the device's memory. A tactic the model has no
 * word on costs the slowest predicted one; a device with no model at all
 * costs a roofline of its FLOPs at a deliberately low rate (refusing a
 * cheap shape is cheaper than admitting an hour). */
#ifndef ATTUNED_ADMIT_H
#define ATTUNED_ADMIT_H

#include <stddef.h>

#include "../lookup/index.h"

typedef struct admit_cost {
    double seconds;    /* the whole tune, predicted */
    double call_us;    /* the slowest tactic's predicted call */
    double bytes;      /* buffers the session allocates */
    double max_bytes;  /* what the device allows them (half its memory) */
    int ntactics;      /* tactics listed for the shape */
    int roofline;      /* 1: no model evidence, the roofline guess */
} admit_cost;

/* Predict the cost of tuning shape s on local device dev (the index's
 * model; tactic_budget_ms: the tuner's timing budget per tactic). Fills
 * *out; 0, ATTUNE_ENODEV, or ATTUNE_EBUSY while the index's builder makes
 * the device's listing of s (index_predict_times: never waits on a
 * backend; index_listing_make to wait). Reads the index under its read
 * lock: no SQLite, microseconds per listed tactic. */
int admit_estimate(index_state *ix, const attn_device_info *dev, const attn_shape *s,
                   double tactic_budget_ms, admit_cost *out);

/* 1 when the predicted tune fits budget_s seconds and its buffers fit the
 * device, else 0. */
int admit_fits(const admit_cost *c, double budget_s);

/* "predicted 9.6 min" (or "buffers of 12.0 GB over 8.0 GB"): why c does
 * not fit, in words for an answer, into buf. Returns buf. */
char *admit_describe(const admit_cost *c, double budget_s, char *buf, size_t len);

#endif
