/* registry.c -- the backends (compiled in, or registered at run time), their
 * devices, and device specs. */
#include "attn.h"

#include <string.h>

/* The compiled-in backends, then those registered at run time. */
static const attn_ops *backends[ATTN_MAX_BACKENDS] = {
    &attn_cpu_ops,
#ifdef ATTUNE_HAVE_CUDA
    &attn_cuda_ops,
#endif
};
#ifdef ATTUNE_HAVE_CUDA
#define NBUILTIN 2
#else
#define NBUILTIN 1
#endif
static size_t nbackends = NBUILTIN;

/* The devices of backends[b], appended to out[*total..max) (counted
 * beyond max). */
static void backend_devices(size_t b, attn_device *out, int max, int *total)
{
    int n = backends[b]->device_count();
    for (int i = 0; i < n; i++) {
        if (*total < max) {
            attn_device *d = &out[*total];
            memset(d, 0, sizeof *d);
            d->ops = backends[b];
            d->index = i;
            if (backends[b]->device_info(i, &d->info, &d->stack) != 0)
                continue; /* a device we cannot describe is not offered */
        }
        (*total)++;
    }
}

const attn_ops *attn_backend(const char *kind)
{
    for (size_t b = 0; kind != NULL && b < nbackends; b++)
        if (strcmp(backends[b]->name, kind) == 0)
            return backends[b];
    return NULL;
}

int attn_backend_register(const attn_ops *ops)
{
    if (ops == NULL || ops->name == NULL || ops->tactics == NULL || ops->device_count == NULL ||
        ops->device_info == NULL ||
        attn_backend(ops->name) != NULL)
        return ATTUNE_EINVAL;
    if (nbackends >= ATTN_MAX_BACKENDS)
        return ATTUNE_ERANGE;
    backends[nbackends++] = ops;
    return 0;
}

void attn_backend_reset(void)
{
    for (size_t b = NBUILTIN; b < nbackends; b++)
        backends[b] = NULL;
    nbackends = NBUILTIN;
}

int attn_devices(attn_device *out, int max)
{
    int total = 0;
    for (size_t b = 0; b < nbackends; b++)
        backend_devices(b, out, max, &total);
    return total;
}

int attn_device_resolve(const char *spec, attn_device *out, char *err, size_t errlen)
{
    if (spec == NULL || *spec == 0)
        return attune_fail(err, errlen, ATTUNE_ENODEV, "no device given");
    attn_device devs[64];
    int n = 0, best = -1, best_score = ATTN_MATCH_NONE;
    for (size_t b = 0; b < nbackends && best_score < ATTN_MATCH_EXACT; b++) {
        int from = n;
        backend_devices(b, devs, 64, &n);
        for (int i = from; i < n && i < 64; i++) {
            int score = attn_device_match(spec, &devs[i].info, 1);
            if (score > best_score) {
                best = i;
                best_score = score;
            }
        }
    }
    if (best >= 0) {
        *out = devs[best];
        return 0;
    }
    if (attn_device_ordinal(spec) != -1)
        return attune_fail(err, errlen, ATTUNE_ENODEV,
                           "no CUDA device with ordinal %.16s on this host (see `attune devices`)",
                           spec);
    return attune_fail(err, errlen, ATTUNE_ENODEV,
                       "unknown device '%.64s' (use cpu, a CUDA ordinal, a UUID or a name; "
                       "see `attune devices`)", spec);
}
