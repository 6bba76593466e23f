/* libattune.c -- the public runtime ABI (libattune.h) over the backends'
 * plan/launch interface (attn.h): devices by attune's words, tactics by
 * canonical text, runs on caller tensors. Nothing here but translation and
 * checking: what runs is exactly what the tuner times. */
#include "libattune.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"
#include "libattune_priv.h"

_Static_assert(ATTUNE_RT_EINVAL == (int)ATTUNE_EINVAL && ATTUNE_RT_ENOMEM == (int)ATTUNE_ENOMEM &&
                   ATTUNE_RT_ENODEV == (int)ATTUNE_ENODEV &&
                   ATTUNE_RT_EUNSUPP == (int)ATTUNE_EUNSUPP && ATTUNE_RT_EGPU == (int)ATTUNE_EGPU &&
                   ATTUNE_RT_EBLAS == (int)ATTUNE_EBLAS && ATTUNE_RT_EBUSY == (int)ATTUNE_EBUSY,
               "libattune.h's codes are attune_err.h's");
_Static_assert(ATTUNE_DTYPE_F16 == (int)ATTN_F16 && ATTUNE_DTYPE_BF16 == (int)ATTN_BF16 &&
                   ATTUNE_DTYPE_F32 == (int)ATTN_F32 && ATTUNE_DTYPE_E4M3 == (int)ATTN_E4M3,
               "libattune.h's dtypes are attn.h's");

struct attune_dev {
    attn_device d;
};

struct attune_plan {
    const attn_ops *ops;
    attn_plan *p;
    attn_shape s;
    char tactic[ATTN_TACTIC_STR_MAX];
    char shape[ATTN_SHAPE_KEY_MAX];
    const float *descale[3]; /* e4m3: q, k, v (attune_plan_set_descales) */
};

int attune_abi(void) { return LIBATTUNE_ABI; }

int64_t attune_bucket_len(int64_t n)
{
    if (n <= 8)
        return n;
    int64_t base = 8;
    while (base * 2 < n)
        base *= 2;
    /* base < n <= 2 base: four steps per octave */
    for (int i = 1; i < 4; i++)
        if (base + i * (base / 4) >= n)
            return base + i * (base / 4);
    return 2 * base;
}

int attune_dev_open(const char *device, attune_dev **out, char *err, size_t errlen)
{
    if (out == NULL)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "no place for the device");
    *out = NULL;
    if (device == NULL)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "no device named");
    attune_dev *dev = calloc(1, sizeof *dev);
    if (dev == NULL)
        return attune_fail(err, errlen, ATTUNE_ENOMEM, "out of memory");
    int rc = attn_device_resolve(device, &dev->d, err, errlen);
    if (rc != 0) {
        free(dev);
        return rc;
    }
    *out = dev;
    return 0;
}

void attune_dev_close(attune_dev *dev) { free(dev); }

const char *attune_dev_id(const attune_dev *dev) { return dev != NULL ? dev->d.info.id : ""; }

const char *attune_dev_name(const attune_dev *dev) { return dev != NULL ? dev->d.info.name : ""; }

/* The attn_shape of dims, validated. */
static int to_shape(const attune_dims *dims, attn_shape *s, char *err, size_t errlen)
{
    if (dims == NULL)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "no shape");
    if (dims->dtype < ATTUNE_DTYPE_F16 || dims->dtype > ATTUNE_DTYPE_E4M3)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "unknown dtype %d", dims->dtype);
    if (dims->causal != 0 && dims->causal != 1)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "causal=%d is not 0 or 1", dims->causal);
    *s = (attn_shape){dims->b, dims->hq, dims->hkv, dims->sq, dims->skv, dims->d,
                      (attn_dtype)dims->dtype, dims->causal};
    int rc = attn_shape_validate(s, err, errlen);
    /* over the size limits is a bad shape to the ABI (libattune.h lists
     * no ETOOBIG) */
    return rc == ATTUNE_ETOOBIG ? ATTUNE_EINVAL : rc;
}

int attune_dims_ok(const attune_dims *shape)
{
    attn_shape s;
    return shape != NULL && to_shape(shape, &s, NULL, 0) == 0;
}

int attune_shape_key(const attune_dims *shape, char *buf, size_t len, char *err, size_t errlen)
{
    attn_shape s;
    int rc = to_shape(shape, &s, err, errlen);
    if (rc != 0)
        return rc;
    if (buf == NULL || len < ATTN_SHAPE_KEY_MAX)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "key buffer under %d bytes",
                           ATTN_SHAPE_KEY_MAX);
    attn_shape_key(&s, buf, len);
    return 0;
}

int attune_tactics(attune_dev *dev, const attune_dims *shape, char (*out)[ATTUNE_TACTIC_MAX],
                   int max, char *err, size_t errlen)
{
    attn_shape s;
    int rc;
    if (dev == NULL || max < 0 || (max > 0 && out == NULL))
        return attune_fail(err, errlen, ATTUNE_EINVAL, "no device or no room for the list");
    if ((rc = to_shape(shape, &s, err, errlen)) != 0)
        return rc;
    /* backends write at most their buffer (CUDA returns no total beyond
     * it): one generous buffer, as the tuner lists */
    const int cap = 8192;
    attn_tactic *list = calloc((size_t)cap, sizeof *list);
    if (list == NULL)
        return attune_fail(err, errlen, ATTUNE_ENOMEM, "out of memory");
    int got = dev->d.ops->tactics(dev->d.index, &s, list, cap);
    for (int i = 0; i < got && i < max; i++)
        attn_tactic_str(&list[i], out[i], ATTUNE_TACTIC_MAX);
    free(list);
    return got < 0 ? attune_fail(err, errlen, got, "listing tactics: %s", attune_strerror(got))
                   : got;
}

int attune_plan_create(attune_dev *dev, const attune_dims *shape, const char *tactic,
                       attune_plan **out, char *err, size_t errlen)
{
    attn_shape s;
    attn_tactic t;
    char note[160] = "";
    int rc;

    if (out == NULL)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "no place for the plan");
    *out = NULL;
    if (dev == NULL || tactic == NULL)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "no device or no tactic");
    if ((rc = to_shape(shape, &s, err, errlen)) != 0)
        return rc;
    if ((rc = attn_tactic_parse(tactic, &t, err, errlen)) != 0)
        return rc;
    if (dev->d.ops->plan_new == NULL)
        return attune_fail(err, errlen, ATTUNE_EUNSUPP, "backend %s runs no plans",
                           dev->d.ops->name);
    attune_plan *ap = calloc(1, sizeof *ap);
    if (ap == NULL)
        return attune_fail(err, errlen, ATTUNE_ENOMEM, "out of memory");
    rc = dev->d.ops->plan_new(dev->d.index, &s, &t, 0, &ap->p, note, sizeof note);
    if (rc != 0) {
        char key[ATTN_SHAPE_KEY_MAX];
        free(ap);
        return attune_fail(err, errlen, rc, "%s on %s (%s): %s%s%s", tactic,
                           attn_shape_key(&s, key, sizeof key), dev->d.info.name,
                           attune_strerror(rc), note[0] ? ": " : "", note);
    }
    ap->ops = dev->d.ops;
    ap->s = s;
    attn_tactic_str(&t, ap->tactic, sizeof ap->tactic);
    attn_shape_key(&s, ap->shape, sizeof ap->shape);
    *out = ap;
    return 0;
}

static attn_tensor to_tensor(const attune_tensor *t)
{
    attn_tensor r = {t->data, t->stride_b, t->stride_h, t->stride_s};
    return r;
}

int attune_plan_run(attune_plan *plan, const attune_tensor *q, const attune_tensor *k,
                    const attune_tensor *v, const attune_tensor *out, int64_t sq, int64_t skv,
                    void *stream)
{
    if (plan == NULL || q == NULL || k == NULL || v == NULL || out == NULL)
        return ATTUNE_EINVAL;
    attn_io io = {to_tensor(q), to_tensor(k), to_tensor(v), to_tensor(out), sq, skv,
                  {plan->descale[0], plan->descale[1], plan->descale[2]}};
    return plan->ops->launch(plan->p, &io, stream);
}

int attune_plan_set_descales(attune_plan *plan, const float *q, const float *k, const float *v)
{
    if (plan == NULL)
        return ATTUNE_EINVAL;
    plan->descale[0] = q;
    plan->descale[1] = k;
    plan->descale[2] = v;
    return 0;
}

int attune_plan_set_views(attune_plan *plan, const attune_tensor *q, const attune_tensor *k,
                          const attune_tensor *v, const attune_tensor *out, void *stream,
                          char *err, size_t errlen)
{
    if (plan == NULL || q == NULL || k == NULL || v == NULL || out == NULL)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "no plan or no tensor");
    if (plan->ops->plan_views == NULL)
        return 0;
    attn_io io = {to_tensor(q), to_tensor(k), to_tensor(v), to_tensor(out), 0, 0, {0}};
    char note[160] = "";
    int rc = plan->ops->plan_views(plan->p, &io, stream, note, sizeof note);
    if (rc != 0)
        return attune_fail(err, errlen, rc, "%s on %s: %s%s%s", plan->tactic, plan->shape,
                           rc == ATTUNE_EBUSY ? "the stream is capturing a CUDA graph"
                                              : attune_strerror(rc),
                           note[0] ? ": " : "", note);
    return 0;
}

/* Contract in libattune_priv.h. */
int attune_dev_capturing(const attune_dev *dev, void *stream)
{
    return dev != NULL && dev->d.ops->capturing != NULL && dev->d.ops->capturing(stream);
}

const char *attune_plan_tactic(const attune_plan *plan) { return plan != NULL ? plan->tactic : ""; }

const char *attune_plan_shape(const attune_plan *plan) { return plan != NULL ? plan->shape : ""; }

void attune_plan_destroy(attune_plan *plan)
{
    if (plan == NULL)
        return;
    plan->ops->plan_free(plan->p);
    free(plan);
}
