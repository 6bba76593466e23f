/* device_id.c -- stack ids and device specs (device_id.h). */
#include "device_id.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hash.h"

void attn_stack_finish(attn_stack *st)
{
    uint64_t h = hash_fnv1a64_init();
    const char *parts[] = {st->driver, st->runtime, st->blas, st->attune, st->kernels};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        h = hash_fnv1a64(h, parts[i], strlen(parts[i]) + 1); /* NUL separates */
    }
    /* A measurement belongs to (device, power mode, stack): another mode is
     * another stack, so its rows are never this mode's own. */
    if (st->power[0] != 0)
        h = hash_fnv1a64(h, st->power, strlen(st->power) + 1);
    snprintf(st->id, sizeof st->id, "%016llx", (unsigned long long)h);
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

int attn_device_match(const char *spec, const attn_device_info *info, int local)
{
    if (spec == NULL || *spec == 0)
        return ATTN_MATCH_NONE;
    if (strcasecmp(spec, "cpu") == 0)
        return local && strcmp(info->kind, "cpu") == 0 ? ATTN_MATCH_EXACT : ATTN_MATCH_NONE;
    int ordinal = attn_device_ordinal(spec);
    if (ordinal != -1)
        return local && strcmp(info->kind, "cuda") == 0 && info->index == ordinal
                   ? ATTN_MATCH_EXACT
                   : ATTN_MATCH_NONE;
    if (strcmp(spec, info->id) == 0)
        return ATTN_MATCH_EXACT;
    return strcasecmp(spec, info->name) == 0 ? ATTN_MATCH_NAME : ATTN_MATCH_NONE;
}
