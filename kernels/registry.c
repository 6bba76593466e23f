/* registry.c -- the devices of every compiled-in backend, and device specs. */
#include "attn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const attn_ops *const backends[] = {
    &attn_cpu_ops,
#ifdef ATTUNE_HAVE_CUDA
    &attn_cuda_ops,
#endif
};
#define NBACKENDS (sizeof backends / sizeof backends[0])

int attn_devices(attn_device *out, int max)
{
    int total = 0;
    for (size_t b = 0; b < NBACKENDS; b++) {
        int n = backends[b]->device_count();
        for (int i = 0; i < n; i++) {
            if (total < max) {
                attn_device *d = &out[total];
                memset(d, 0, sizeof *d);
                d->ops = backends[b];
                d->index = i;
                if (backends[b]->device_info(i, &d->info, &d->stack) != 0)
                    continue; /* a device we cannot describe is not offered */
            }
            total++;
        }
    }
    return total;
}

int attn_device_ordinal(const char *spec)
{
    size_t n = 0;
    for (; spec[n]; n++)
        if (spec[n] < '0' || spec[n] > '9')
            return -1;
    if (n == 0)
        return -1;
    return n <= 6 ? atoi(spec) : -2; /* <= 6 digits: atoi cannot overflow */
}

int attn_device_resolve(const char *spec, attn_device *out, char *err, size_t errlen)
{
    if (spec == NULL || *spec == 0)
        return attune_fail(err, errlen, ATTUNE_ENODEV, "no device given");
    int ordinal = attn_device_ordinal(spec);
    attn_device devs[64];
    int n = attn_devices(devs, 64);
    if (n > 64)
        n = 64;
    for (int i = 0; i < n; i++) {
        const attn_device *d = &devs[i];
        int match;
        if (strcasecmp(spec, "cpu") == 0)
            match = strcmp(d->info.kind, "cpu") == 0;
        else if (ordinal != -1)
            match = strcmp(d->info.kind, "cuda") == 0 && d->index == ordinal;
        else
            match = strcasecmp(spec, d->info.id) == 0 || strcasecmp(spec, d->info.name) == 0;
        if (match) {
            *out = *d;
            return 0;
        }
    }
    if (ordinal != -1)
        return attune_fail(err, errlen, ATTUNE_ENODEV,
                           "no CUDA device with ordinal %.16s on this host (see `attune devices`)",
                           spec);
    return attune_fail(err, errlen, ATTUNE_ENODEV,
                       "unknown device '%.64s' (use cpu, a CUDA ordinal, a UUID or a name; "
                       "see `attune devices`)", spec);
}
