/* pin_json.c -- pins as JSON (pin_json.h). */
#include "pin_json.h"

#include <stdio.h>
#include <string.h>

#include "attune_err.h"

json_t *pin_json(const pin *p)
{
    return json_pack("{s:I, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:I}", "id", (json_int_t)p->id,
                     "action", pin_action_name(p->action), "tactic", p->tactic, "shape",
                     p->shape, "device", p->device, "model", p->model, "reason", p->reason,
                     "author", p->author, "created_at", (json_int_t)p->created_at);
}

json_t *pin_json_array(const pin *p, int n)
{
    json_t *arr = json_array();
    for (int i = 0; i < n && arr != NULL; i++)
        if (json_array_append_new(arr, pin_json(&p[i])) != 0) {
            json_decref(arr);
            arr = NULL;
        }
    return arr;
}

/* o[key] as a string into buf (len bytes); optional keys may be absent. */
static int str_field(const json_t *o, const char *key, int need, char *buf, size_t len,
                     const char *where, char *err, size_t errlen)
{
    const json_t *v = json_object_get(o, key);
    buf[0] = 0;
    if (v == NULL && !need)
        return 0;
    if (v == NULL)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "%s: \"%s\" is missing", where, key);
    if (!json_is_string(v))
        return attune_fail(err, errlen, ATTUNE_EINVAL, "%s: \"%s\" must be a string", where,
                           key);
    if (json_string_length(v) >= len)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "%s: \"%s\" is too long (at most %zu "
                           "bytes)", where, key, len - 1);
    memcpy(buf, json_string_value(v), json_string_length(v) + 1);
    return 0;
}

static const char *const pin_keys[] = {"id",     "action", "tactic", "shape",      "device",
                                       "model",  "reason", "author", "created_at", NULL};

/* Refuse keys outside pin_keys. */
static int known_keys(const json_t *o, const char *where, char *err, size_t errlen)
{
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)o, k, v) {
        int known = 0;
        for (int i = 0; pin_keys[i] != NULL && !known; i++)
            known = strcmp(k, pin_keys[i]) == 0;
        if (!known)
            return attune_fail(err, errlen, ATTUNE_EINVAL, "%s: unknown key '%.32s' (expected "
                               "action, tactic, shape, device, model, reason, author)", where, k);
    }
    return 0;
}

int pin_from_json(const json_t *o, const char *where, pin *out, char *err, size_t errlen)
{
    char action[16];
    int rc;
    memset(out, 0, sizeof *out);
    if (!json_is_object(o))
        return attune_fail(err, errlen, ATTUNE_EINVAL, "%s must be an object", where);
    const json_t *at = json_object_get(o, "created_at");
    if ((rc = known_keys(o, where, err, errlen)) != 0 ||
        (rc = str_field(o, "action", 1, action, sizeof action, where, err, errlen)) != 0 ||
        (rc = str_field(o, "tactic", 1, out->tactic, sizeof out->tactic, where, err, errlen)) ||
        (rc = str_field(o, "shape", 0, out->shape, sizeof out->shape, where, err, errlen)) ||
        (rc = str_field(o, "device", 0, out->device, sizeof out->device, where, err, errlen)) ||
        (rc = str_field(o, "model", 0, out->model, sizeof out->model, where, err, errlen)) ||
        (rc = str_field(o, "reason", 1, out->reason, sizeof out->reason, where, err, errlen)) ||
        (rc = str_field(o, "author", 1, out->author, sizeof out->author, where, err, errlen)))
        return rc;
    if (pin_action_parse(action, &out->action) != 0)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "%s: \"action\" must be \"force\" or "
                           "\"exclude\"", where);
    if (at != NULL && (!json_is_integer(at) || json_integer_value(at) < 0 ||
                       json_integer_value(at) > 4102444800LL))
        return attune_fail(err, errlen, ATTUNE_EINVAL, "%s: \"created_at\" must be unix "
                           "seconds", where);
    out->created_at = at != NULL ? (int64_t)json_integer_value(at) : 0;
    char why[ATTUNE_ERRLEN];
    if ((rc = pin_check(out, why, sizeof why)) != 0)
        return attune_fail(err, errlen, rc, "%s: %s", where, why);
    return 0;
}
