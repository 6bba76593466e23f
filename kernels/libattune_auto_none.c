/* libattune_auto_none.c -- attune_auto where libattune_client is not built
 * (no libcurl at configure time): its functions say why they
 * cannot run. libattune_auto.c is the real one. */
#include "libattune.h"

#include "../common/attune_err.h"

int attune_auto_new(attune_dev *dev, const char *url, int capacity, attune_auto **out,
                    char *err, size_t errlen)
{
    (void)dev, (void)url, (void)capacity;
    if (out != NULL)
        *out = NULL;
    return attune_fail(err, errlen, ATTUNE_EUNSUPP,
                       "attune_auto needs libattune_client (libcurl was not found at build)");
}

int attune_auto_prepare(attune_auto *a, const attune_dims *shape, void *stream,
                        attune_choice *out, char *err, size_t errlen)
{
    (void)a, (void)shape, (void)stream, (void)out;
    return attune_fail(err, errlen, ATTUNE_EUNSUPP, "attune_auto is not built");
}

int attune_auto_run(attune_auto *a, const attune_dims *shape, const attune_tensor *q,
                    const attune_tensor *k, const attune_tensor *v, const attune_tensor *out,
                    void *stream, char *err, size_t errlen)
{
    (void)a, (void)shape, (void)q, (void)k, (void)v, (void)out, (void)stream;
    return attune_fail(err, errlen, ATTUNE_EUNSUPP, "attune_auto is not built");
}

int attune_auto_set_descales(attune_auto *a, const float *q, const float *k, const float *v)
{
    (void)a, (void)q, (void)k, (void)v;
    return ATTUNE_EUNSUPP;
}

int attune_auto_get_stats(attune_auto *a, attune_auto_stats *out, size_t size)
{
    (void)a, (void)out, (void)size;
    return ATTUNE_EUNSUPP;
}

void attune_auto_free(attune_auto *a) { (void)a; }
