/* shape_json.c -- attention shapes to and from JSON objects. */
#include "shape_json.h"

#include <string.h>

static const char *const int_fields[] = {"b", "hq", "hkv", "sq", "skv", "d"};

int shape_json_parse(const json_t *obj, int allow_extra, attn_shape *out, char *err,
                     size_t errlen)
{
    if (!json_is_object(obj))
        return attune_fail(err, errlen, ATTUNE_EINVAL, "shape must be a JSON object");
    attn_shape s = {0};
    int64_t *dst[] = {&s.b, &s.hq, &s.hkv, &s.sq, &s.skv, &s.d};
    for (size_t i = 0; i < 6; i++) {
        json_t *v = json_object_get(obj, int_fields[i]);
        if (v == NULL)
            return attune_fail(err, errlen, ATTUNE_EINVAL, "shape lacks \"%s\"", int_fields[i]);
        if (!json_is_integer(v))
            return attune_fail(err, errlen, ATTUNE_EINVAL, "shape field \"%s\" must be an integer",
                               int_fields[i]);
        *dst[i] = (int64_t)json_integer_value(v);
    }
    json_t *dt = json_object_get(obj, "dtype");
    if (!json_is_string(dt))
        return attune_fail(err, errlen, ATTUNE_EINVAL, "shape field \"dtype\" must be a string");
    if (attn_dtype_parse(json_string_value(dt), &s.dtype) != 0)
        return attune_fail(err, errlen, ATTUNE_EINVAL,
                           "unknown dtype \"%.16s\" (expected f16, bf16, f32 or e4m3)",
                           json_string_value(dt));
    json_t *c = json_object_get(obj, "causal");
    if (json_is_boolean(c))
        s.causal = json_is_true(c);
    else if (json_is_integer(c) && (json_integer_value(c) == 0 || json_integer_value(c) == 1))
        s.causal = (int)json_integer_value(c);
    else
        return attune_fail(err, errlen, ATTUNE_EINVAL, "shape field \"causal\" must be a boolean");
    if (!allow_extra) {
        const char *key;
        json_t *val;
        json_object_foreach((json_t *)obj, key, val) {
            int known = strcmp(key, "dtype") == 0 || strcmp(key, "causal") == 0;
            for (size_t i = 0; i < 6 && !known; i++)
                known = strcmp(key, int_fields[i]) == 0;
            if (!known)
                return attune_fail(err, errlen, ATTUNE_EINVAL, "unknown shape field \"%.32s\"", key);
        }
    }
    int rc = attn_shape_validate(&s, err, errlen);
    if (rc != 0)
        return rc;
    *out = s;
    return 0;
}

json_t *shape_json_new(const attn_shape *s)
{
    return json_pack("{sI sI sI sI sI sI ss sb}", "b", (json_int_t)s->b, "hq",
                     (json_int_t)s->hq, "hkv", (json_int_t)s->hkv, "sq", (json_int_t)s->sq,
                     "skv", (json_int_t)s->skv, "d", (json_int_t)s->d, "dtype",
                     attn_dtype_name(s->dtype), "causal", s->causal);
}
