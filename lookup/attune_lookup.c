/* attune_lookup.c -- the exported interface of libattune_lookup
 * (attune_lookup.h) over lookup_file.h and answer_json.h. */
#include "attune_lookup.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/jbuf.h"
#include "answer_json.h"
#include "lookup_file.h"

struct attune_table {
    index_state *ix;
};

int attune_table_abi(void)
{
    return ATTUNE_TABLE_ABI;
}

int attune_table_open(const char *path, attune_table **out, char *err, size_t errlen)
{
    *out = NULL;
    attune_table *t = calloc(1, sizeof *t);
    if (t == NULL)
        return attune_fail(err, errlen, ATTUNE_ENOMEM, "out of memory");
    int rc = lookup_file_open(path, &t->ix, err, errlen);
    if (rc != 0) {
        free(t);
        return rc;
    }
    *out = t;
    return 0;
}

void attune_table_close(attune_table *t)
{
    if (t == NULL)
        return;
    index_free(t->ix);
    free(t);
}

void attune_table_free(void *p)
{
    free(p);
}

/* {"error": text}: *json, and status. */
static int fail(char **json, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(char **json, int status, const char *fmt, ...)
{
    char text[ATTUNE_ERRLEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    jbuf b;
    size_t len;
    jbuf_init(&b, 64 + strlen(text));
    jbuf_str(&b, "error", text);
    *json = jbuf_finish(&b, &len);
    return *json != NULL ? status : 500;
}

/* The shape of dims/dtype/causal into s, checked as attuned checks a
 * query's shape. 0, or -1 with why. */
static int shape_of(const long long dims[6], const char *dtype, int causal, attn_shape *s,
                    char *why, size_t whylen)
{
    memset(s, 0, sizeof *s);
    if (dims == NULL || dtype == NULL || attn_dtype_parse(dtype, &s->dtype) != 0) {
        snprintf(why, whylen, "dtype='%.16s' must be f16, bf16, f32 or e4m3", dtype ? dtype : "");
        return -1;
    }
    if (causal != 0 && causal != 1) {
        snprintf(why, whylen, "causal must be 0 or 1");
        return -1;
    }
    s->b = dims[0];
    s->hq = dims[1];
    s->hkv = dims[2];
    s->sq = dims[3];
    s->skv = dims[4];
    s->d = dims[5];
    s->causal = causal;
    return attn_shape_validate(s, why, whylen) == 0 ? 0 : -1;
}

int attune_table_tactic(attune_table *t, const char *device, const long long dims[6],
                        const char *dtype, int causal, double max_rel_err,
                        const char *variants, char **json)
{
    char why[ATTUNE_ERRLEN];
    attn_shape s;
    variant_set vs;
    *json = NULL;
    if (t == NULL)
        return fail(json, 400, "no table");
    if (device == NULL || device[0] == 0 || strlen(device) > 128)
        return fail(json, 400, "missing parameter 'device'");
    if (shape_of(dims, dtype, causal, &s, why, sizeof why) != 0)
        return fail(json, 400, "%s", why);
    if (!(max_rel_err == 0 || (max_rel_err > 0 && max_rel_err <= 1)))
        return fail(json, 400, "max_rel_err=%g must be a number in (0, 1]", max_rel_err);
    if (variant_set_parse(variants, &vs, why, sizeof why) != 0)
        return fail(json, 400, "variants='%.64s': %s", variants, why);
    index_answer ans;
    int rc = index_lookup_in(t->ix, device, &s, max_rel_err, vs, &ans);
    if (rc == ATTUNE_ENOTFOUND) {
        answer_no_tactic_text(&ans, vs, why, sizeof why);
        return fail(json, 404, "%s", why);
    }
    if (rc == ATTUNE_ENOMEM)
        return fail(json, 500, "out of memory");
    if (rc != 0)
        return fail(json, 404, "unknown device '%.64s' (not in the table)", device);
    size_t len;
    *json = answer_json(&ans, max_rel_err, vs, NULL, &len);
    return *json != NULL ? 200 : 500;
}
