/* device_model.c -- a device's model, memory rounded to its built size
 * (see device_model.h). */
#include "device_model.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* The sizes memory is built in, GiB, ascending (device_model.h). */
static const int64_t sizes[] = {1,  2,  3,  4,  6,  8,  10,  11,  12,  16,  20,  24,  32,
                                40, 48, 64, 80, 94, 96, 128, 144, 180, 192, 256, 288};

int64_t device_model_memory_gib(int64_t memory_mb)
{
    if (memory_mb <= 0)
        return 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (memory_mb <= sizes[i] * 1024)
            return sizes[i];
    return (memory_mb + 32 * 1024 - 1) / (32 * 1024) * 32;
}

int device_model_same(const attn_device_info *a, const attn_device_info *b)
{
    return strcmp(a->kind, b->kind) == 0 && strcmp(a->name, b->name) == 0 &&
           a->cc_major == b->cc_major && a->cc_minor == b->cc_minor &&
           a->sm_count == b->sm_count &&
           device_model_memory_gib(a->memory_mb) == device_model_memory_gib(b->memory_mb);
}

void device_model_text(const attn_device_info *d, char *out, size_t len)
{
    snprintf(out, len, "%s|%s|%d.%d|%d|%" PRId64 "G", d->name, d->kind, d->cc_major, d->cc_minor,
             d->sm_count, device_model_memory_gib(d->memory_mb));
}
