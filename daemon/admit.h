/* admit.h -- admission for tuning, priced by the lookup index's model: the
 * predicted cost of a shape's whole tune and whether it fits a budget
 * (issue 29 item 1). The pricing and its rules are tuner/tune_cost.h's;
 * this binds them to attuned's index (index_predict_times gives the
 * predictions), for tune on miss (daemon/jobs_miss.c, its verdict by
 * tuner/miss_policy.h) and explicit tunes (daemon/routes.c). */
#ifndef ATTUNED_ADMIT_H
#define ATTUNED_ADMIT_H

#include <stddef.h>

#include "../lookup/index.h"
#include "../tuner/tune_cost.h"

typedef tune_cost admit_cost;

/* Predict the cost of tuning shape s on local device dev (the index's
 * model; tactic_budget_ms: the tuner's timing budget per tactic). Fills
 * *out; 0, ATTUNE_ENODEV, or ATTUNE_EBUSY while the index's builder makes
 * the device's listing of s (index_predict_times: never waits on a
 * backend; index_listing_make to wait). Reads the index under its read
 * lock: no SQLite, microseconds per listed tactic. */
int admit_estimate(index_state *ix, const attn_device_info *dev, const attn_shape *s,
                   double tactic_budget_ms, admit_cost *out);

/* tune_cost_fits: 1 when the predicted tune fits budget_s seconds and its
 * buffers fit the device, else 0. */
int admit_fits(const admit_cost *c, double budget_s);

/* tune_cost_describe: "predicted 9.6 min (budget 60 s)" (or "buffers of
 * 12.0 GB over 8.0 GB"), why c does not fit, into buf. Returns buf. */
char *admit_describe(const admit_cost *c, double budget_s, char *buf, size_t len);

#endif
