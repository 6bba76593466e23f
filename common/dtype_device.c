/* dtype_device.c -- which dtypes a device can run at all (dtype_device.h). */
#include "dtype_device.h"

#include <stdio.h>
#include <string.h>

int dtype_device_runs(const attn_device_info *d, attn_dtype t, char *why, size_t whylen)
{
    if (t != ATTN_E4M3 || strcmp(d->kind, "cuda") != 0)
        return 1;
    if (d->cc_major * 10 + d->cc_minor >= DTYPE_FP8_MIN_CC)
        return 1;
    if (why != NULL && whylen > 0)
        snprintf(why, whylen,
                 "device %s (%s, compute capability %d.%d) has no FP8 tensor cores: no e4m3 "
                 "tactics (they need compute capability %d.%d or later)",
                 d->name, d->id, d->cc_major, d->cc_minor, DTYPE_FP8_MIN_CC / 10,
                 DTYPE_FP8_MIN_CC % 10);
    return 0;
}
