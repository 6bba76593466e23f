/* throttle.c -- clock samples around timed tactics (see throttle.h). */
#include "throttle.h"

#include <math.h>
#include <stdio.h>

#include "../common/power.h"

static void sample(tuner_throttle *t, const attn_device *dev)
{
    double mhz = 0, temp = NAN;
    int rc = t->clock != NULL ? t->clock(t->ctx, dev, &mhz, &temp)
                              : attn_power_sample(&dev->info, &mhz, &temp);
    if (rc != 0 || !(mhz > 0))
        return;
    if (t->low_mhz == 0 || mhz < t->low_mhz)
        t->low_mhz = mhz;
    if (isfinite(temp) && (!isfinite(t->temp_c) || temp > t->temp_c))
        t->temp_c = temp;
    if (mhz > t->ref_mhz)
        t->ref_mhz = mhz; /* the first sample, or a start that was idle */
}

void tuner_throttle_begin(tuner_throttle *t, const attn_device *dev)
{
    t->low_mhz = 0;
    t->temp_c = NAN;
    sample(t, dev);
}

int tuner_throttle_end(tuner_throttle *t, const attn_device *dev)
{
    sample(t, dev);
    return t->low_mhz > 0 && t->low_mhz < (1.0 - t->rel) * t->ref_mhz;
}

void tuner_throttle_note(const tuner_throttle *t, char *buf, size_t len)
{
    int n = snprintf(buf, len, "throttled: clock %.0f MHz, %.0f%% below the run's start (%.0f MHz)",
                     t->low_mhz, 100.0 * (1.0 - t->low_mhz / t->ref_mhz), t->ref_mhz);
    if (isfinite(t->temp_c) && n > 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, ", %.0f C", t->temp_c);
}
