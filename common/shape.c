/* shape.c -- shapes and dtypes: validation and canonical text (shape.h). */
#include "shape.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const dtype_names[ATTN_NDTYPES] = {"f16", "bf16", "f32", "e4m3"};

const char *attn_dtype_name(attn_dtype t)
{
    return (unsigned)t < ATTN_NDTYPES ? dtype_names[t] : "?";
}

int attn_dtype_parse(const char *s, attn_dtype *out)
{
    for (int i = 0; i < ATTN_NDTYPES; i++)
        if (strcmp(s, dtype_names[i]) == 0) {
            *out = (attn_dtype)i;
            return 0;
        }
    return ATTUNE_EINVAL;
}

size_t attn_dtype_size(attn_dtype t)
{
    return t == ATTN_F32 ? 4 : t == ATTN_E4M3 ? 1 : 2;
}

int attn_shape_validate(const attn_shape *s, char *err, size_t errlen)
{
    const struct { const char *name; int64_t v; } f[] = {
        {"b", s->b}, {"hq", s->hq}, {"hkv", s->hkv},
        {"sq", s->sq}, {"skv", s->skv}, {"d", s->d}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        if (f[i].v < 1)
            return attune_fail(err, errlen, ATTUNE_EINVAL,
                               "%s=%lld must be at least 1", f[i].name, (long long)f[i].v);
        if (f[i].v > ATTN_MAX_DIM)
            return attune_fail(err, errlen, ATTUNE_ETOOBIG,
                               "%s=%lld exceeds the limit %lld", f[i].name,
                               (long long)f[i].v, (long long)ATTN_MAX_DIM);
    }
    if (s->d > ATTN_MAX_HEADDIM)
        return attune_fail(err, errlen, ATTUNE_ETOOBIG, "d=%lld exceeds the limit %d",
                           (long long)s->d, ATTN_MAX_HEADDIM);
    if (s->hq % s->hkv != 0)
        return attune_fail(err, errlen, ATTUNE_EINVAL,
                           "hq=%lld is not a multiple of hkv=%lld",
                           (long long)s->hq, (long long)s->hkv);
    if ((unsigned)s->dtype >= ATTN_NDTYPES)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "unknown dtype %d", (int)s->dtype);
    if (s->causal != 0 && s->causal != 1)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "causal must be 0 or 1");
    /* Each factor is <= 2^20, so pairwise products fit; check stepwise. */
    double q = (double)s->b * (double)s->hq * (double)s->sq * (double)s->d;
    double kv = (double)s->b * (double)s->hkv * (double)s->skv * (double)s->d;
    if (q > (double)ATTN_MAX_ELEMS || kv > (double)ATTN_MAX_ELEMS)
        return attune_fail(err, errlen, ATTUNE_ETOOBIG,
                           "shape has %.3g query / %.3g key elements, over the limit %lld",
                           q, kv, (long long)ATTN_MAX_ELEMS);
    return 0;
}

char *attn_shape_key(const attn_shape *s, char *buf, size_t buflen)
{
    snprintf(buf, buflen, "b%lld.hq%lld.hkv%lld.sq%lld.skv%lld.d%lld.%s.%s",
             (long long)s->b, (long long)s->hq, (long long)s->hkv, (long long)s->sq,
             (long long)s->skv, (long long)s->d, attn_dtype_name(s->dtype),
             s->causal ? "c" : "nc");
    return buf;
}

/* Parse "<prefix><decimal>" from *p up to the next '.', advancing *p. */
static int parse_field(const char **p, const char *prefix, int64_t *out,
                       char *err, size_t errlen)
{
    size_t n = strlen(prefix);
    if (strncmp(*p, prefix, n) != 0)
        return attune_fail(err, errlen, ATTUNE_EINVAL,
                           "expected field '%s' at '%.20s'", prefix, *p);
    const char *s = *p + n;
    if (*s < '0' || *s > '9')
        return attune_fail(err, errlen, ATTUNE_EINVAL, "field '%s' needs a number", prefix);
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno == ERANGE || v > ATTN_MAX_DIM)
        return attune_fail(err, errlen, ATTUNE_ETOOBIG, "field '%s' is too large", prefix);
    if (*end != '.')
        return attune_fail(err, errlen, ATTUNE_EINVAL,
                           "field '%s' must be followed by '.'", prefix);
    *out = v;
    *p = end + 1;
    return 0;
}

int attn_shape_parse(const char *key, attn_shape *out, char *err, size_t errlen)
{
    if (key == NULL || strlen(key) >= ATTN_SHAPE_KEY_MAX)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "shape key missing or too long");
    attn_shape s = {0};
    const char *p = key;
    int rc;
    if ((rc = parse_field(&p, "b", &s.b, err, errlen)) ||
        (rc = parse_field(&p, "hq", &s.hq, err, errlen)) ||
        (rc = parse_field(&p, "hkv", &s.hkv, err, errlen)) ||
        (rc = parse_field(&p, "sq", &s.sq, err, errlen)) ||
        (rc = parse_field(&p, "skv", &s.skv, err, errlen)) ||
        (rc = parse_field(&p, "d", &s.d, err, errlen)))
        return rc;
    const char *dot = strchr(p, '.');
    if (dot == NULL)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "shape key '%s' lacks the causal flag", key);
    char dt[8];
    size_t dl = (size_t)(dot - p);
    if (dl >= sizeof dt)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "unknown dtype in '%s'", key);
    memcpy(dt, p, dl);
    dt[dl] = 0;
    if (attn_dtype_parse(dt, &s.dtype) != 0)
        return attune_fail(err, errlen, ATTUNE_EINVAL,
                           "unknown dtype '%s' (expected f16, bf16, f32 or e4m3)", dt);
    if (strcmp(dot + 1, "c") == 0)
        s.causal = 1;
    else if (strcmp(dot + 1, "nc") == 0)
        s.causal = 0;
    else
        return attune_fail(err, errlen, ATTUNE_EINVAL,
                           "causal flag must be 'c' or 'nc', not '%s'", dot + 1);
    if ((rc = attn_shape_validate(&s, err, errlen)) != 0)
        return rc;
    /* one spelling per shape: keys name rows in files, logs and caches, so
     * "b01.hq08..." (which strtoll reads as b1.hq8) is refused, not folded */
    char canon[ATTN_SHAPE_KEY_MAX];
    if (strcmp(attn_shape_key(&s, canon, sizeof canon), key) != 0)
        return attune_fail(err, errlen, ATTUNE_EINVAL,
                           "shape key '%.80s' is not canonical (expected %s)", key, canon);
    *out = s;
    return 0;
}

double attn_shape_flops(const attn_shape *s)
{
    double pairs;
    if (!s->causal) {
        pairs = (double)s->sq * (double)s->skv;
    } else {
        pairs = 0;
        for (int64_t i = 0; i < s->sq; i++)
            pairs += (double)attn_visible_keys(s, i);
    }
    return 4.0 * (double)s->b * (double)s->hq * pairs * (double)s->d;
}
