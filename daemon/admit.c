/* admit.c -- tune_cost priced by the lookup index's model. */
#include "admit.h"

/* tune_cost_predict_fn over the index (ctx). */
static int predict(void *ctx, const char *device_id, const attn_shape *s, double *us, int max,
                   int sample)
{
    return index_predict_times(ctx, device_id, s, us, max, sample);
}

int admit_estimate(index_state *ix, const attn_device_info *dev, const attn_shape *s,
                   double tactic_budget_ms, admit_cost *out)
{
    return tune_cost_estimate(predict, ix, dev, s, tactic_budget_ms, out);
}

int admit_fits(const admit_cost *c, double budget_s)
{
    return tune_cost_fits(c, budget_s);
}

char *admit_describe(const admit_cost *c, double budget_s, char *buf, size_t len)
{
    return tune_cost_describe(c, budget_s, buf, len);
}
