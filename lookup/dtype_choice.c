/* dtype_choice.c -- the cross-dtype question over the lookup index
 * (dtype_choice.h). */
#include "dtype_choice.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/dtype_device.h"
#include "../common/json_num.h"
#include "answer_json.h"

const char *dtype_verdict_name(dtype_verdict v)
{
    static const char *const names[] = {"chosen",       "slower", "over",       "no_source_error",
                                        "not_measured", "pinned", "unsupported"};
    return (unsigned)v < sizeof names / sizeof names[0] ? names[v] : "?";
}

/* The error of answer row m of dtype t against the bf16 answer
 * (dtype_choice.h). */
static double err_vs_bf16(const store_measurement *m, attn_dtype t)
{
    return t == ATTN_E4M3 ? m->src_rel_err : m->rel_err;
}

/* The candidate of dtype t: its measured answer under max_err, or the
 * verdict that refuses it. ATTUNE_ENODEV / ENOMEM; 0 otherwise. */
static int candidate(index_state *ix, const char *device, const attn_device_info *dev,
                     const attn_shape *dims, attn_dtype t, double max_err, variant_set vs,
                     dtype_candidate *c)
{
    attn_shape s = *dims;
    char key[ATTN_SHAPE_KEY_MAX], tac[ATTN_TACTIC_STR_MAX]; /* copies: snprintf into c->why */
    s.dtype = t;
    c->dtype = t;
    c->err = NAN;
    attn_shape_key(&s, key, sizeof key);
    memcpy(c->key, key, sizeof key);
    if (!dtype_device_runs(dev, t, c->why, sizeof c->why)) {
        c->verdict = DTYPE_UNSUPPORTED;
        return 0;
    }
    index_measured_info info;
    const int src = t == ATTN_E4M3;
    int rc = index_lookup_measured(ix, device, &s, max_err, src, vs, &c->ans, &info);
    if (rc == 0) {
        c->verdict = DTYPE_SLOWER; /* until it is the fastest */
        c->err = err_vs_bf16(&c->ans.m, t);
        return 0;
    }
    if (rc != ATTUNE_ENOTFOUND)
        return rc;
    const char *what = src ? "src_rel_err, against its bf16 source" : "rel_err";
    snprintf(tac, sizeof tac, "%s", c->ans.m.tactic);
    if (c->ans.source == INDEX_PINNED) {
        c->verdict = DTYPE_PINNED;
        double e = err_vs_bf16(&c->ans.m, t);
        if (c->ans.m.stack_id[0] == 0 || isnan(e))
            snprintf(c->why, sizeof c->why,
                     "pin %lld forces %s for %s, and this device has no error of it measured",
                     (long long)c->ans.pinned.id, tac, key);
        else
            snprintf(c->why, sizeof c->why,
                     "pin %lld forces %s for %s, whose error (%s) is %.3g, over max_err %.3g",
                     (long long)c->ans.pinned.id, tac, key, what, e, max_err);
        c->err = e;
    } else if (info.rows == 0) {
        c->verdict = DTYPE_UNMEASURED;
        snprintf(c->why, sizeof c->why, "%s is not measured on this device (tune it)", key);
    } else if (src && info.rows_err == 0) {
        c->verdict = DTYPE_NO_SOURCE;
        snprintf(c->why, sizeof c->why,
                 "%s was measured without an error against its bf16 source (src_rel_err: "
                 "its backend had no reference_source); tune it again",
                 key);
    } else if (info.rows_err > 0 && info.best_err > max_err) {
        c->verdict = DTYPE_OVER;
        c->err = info.best_err;
        snprintf(c->why, sizeof c->why,
                 "its most accurate tactic's error (%s) is %.3g, over max_err %.3g", what,
                 info.best_err, max_err);
    } else {
        c->verdict = DTYPE_UNMEASURED;
        snprintf(c->why, sizeof c->why,
                 "no complete tune of %s in this device's stack and power mode answers within "
                 "max_err%s (a tune in flight, or its tactics left out by variants= or pins)",
                 key, vs != 0 ? " among the variants asked" : "");
    }
    return 0;
}

/* The sizes of dims as a key with '*' for the dtype. */
static void dims_key(const attn_shape *dims, char *buf, size_t len)
{
    snprintf(buf, len, "b%lld.hq%lld.hkv%lld.sq%lld.skv%lld.d%lld.*.%s", (long long)dims->b,
             (long long)dims->hq, (long long)dims->hkv, (long long)dims->sq,
             (long long)dims->skv, (long long)dims->d, dims->causal ? "c" : "nc");
}

int dtype_choose(index_state *ix, const char *device, const attn_shape *dims, unsigned set,
                 double max_err, variant_set vs, dtype_choice *out)
{
    memset(out, 0, sizeof *out);
    out->chosen = -1;
    out->set = set;
    out->max_err = max_err;
    dims_key(dims, out->dims, sizeof out->dims);
    if ((set & DTYPE_SET_ALL) == 0 || !(max_err > 0 && max_err <= 1))
        return ATTUNE_EINVAL;
    index_device_view dev;
    if (index_device_find(ix, device, &dev) != 0)
        return ATTUNE_ENODEV;
    snprintf(out->device_id, sizeof out->device_id, "%s", dev.info.id);
    for (int t = 0; t < ATTN_NDTYPES; t++) {
        if (!(set & (1u << t)))
            continue;
        dtype_candidate *c = &out->c[out->n++];
        int rc = candidate(ix, dev.info.id, &dev.info, dims, (attn_dtype)t, max_err, vs, c);
        if (rc != 0)
            return rc;
        if (c->verdict != DTYPE_SLOWER)
            continue;
        if (out->chosen < 0)
            out->chosen = out->n - 1;
        const dtype_candidate *w = &out->c[out->chosen];
        double tc = select_time(&c->ans.m), tw = select_time(&w->ans.m);
        if (tc < tw || (tc == tw && c->err < w->err))
            out->chosen = out->n - 1;
    }
    if (out->chosen < 0)
        return 0;
    dtype_candidate *w = &out->c[out->chosen];
    char tac[ATTN_TACTIC_STR_MAX]; /* copies: snprintf into a why */
    w->verdict = DTYPE_CHOSEN;
    snprintf(tac, sizeof tac, "%s", w->ans.m.tactic);
    snprintf(w->why, sizeof w->why,
             "the fastest within max_err: %s at %.4g us, error %.3g against the bf16 answer",
             tac, select_time(&w->ans.m), w->err);
    for (int i = 0; i < out->n; i++) {
        dtype_candidate *c = &out->c[i];
        snprintf(tac, sizeof tac, "%s", c->ans.m.tactic);
        if (c->verdict == DTYPE_SLOWER)
            snprintf(c->why, sizeof c->why,
                     "within max_err (error %.3g) but slower: %s at %.4g us against %s's %.4g us",
                     c->err, tac, select_time(&c->ans.m), attn_dtype_name(w->dtype),
                     select_time(&w->ans.m));
    }
    return 0;
}

void dtype_choice_refusal(const dtype_choice *c, char *buf, size_t len)
{
    char set[64];
    size_t k = (size_t)snprintf(buf, len, "no dtype of %s within max_err=%.3g for %s on %s",
                                dtype_set_str(c->set, set, sizeof set), c->max_err, c->dims,
                                c->device_id);
    for (int i = 0; i < c->n && k < len; i++)
        k += (size_t)snprintf(buf + k, len - k, "%s %s: %s", i ? ";" : ":",
                              attn_dtype_name(c->c[i].dtype), c->c[i].why);
}

/* One candidate as an object of "candidates". */
static json_t *candidate_json(const dtype_candidate *c)
{
    const int has = c->verdict == DTYPE_CHOSEN || c->verdict == DTYPE_SLOWER ||
                    (c->verdict == DTYPE_PINNED && c->ans.m.stack_id[0] != 0);
    json_t *o = json_pack("{s:s, s:s, s:s, s:s}", "dtype", attn_dtype_name(c->dtype), "shape",
                          c->key, "verdict", dtype_verdict_name(c->verdict), "why", c->why);
    if (o == NULL)
        return NULL;
    int bad = json_object_set_new(o, "tactic", has ? json_string(c->ans.m.tactic) : json_null());
    bad |= json_object_set_new(o, "time_us", json_num(has ? select_time(&c->ans.m) : NAN));
    bad |= json_object_set_new(o, "err", json_num(c->err));
    bad |= json_object_set_new(o, "rel_err", json_num(has ? c->ans.m.rel_err : NAN));
    if (c->dtype == ATTN_E4M3)
        bad |= json_object_set_new(o, "src_rel_err", json_num(has ? c->ans.m.src_rel_err : NAN));
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

char *dtype_choice_json(const dtype_choice *c, variant_set vs, size_t *len)
{
    json_t *o = NULL;
    char set[64];
    if (c->chosen >= 0) {
        size_t n = 0;
        char *text = answer_json(&c->c[c->chosen].ans, 0, vs, NULL, &n);
        o = text != NULL ? json_loadb(text, n, 0, NULL) : NULL;
        free(text);
        if (o != NULL &&
            (json_object_set_new(o, "dtype", json_string(attn_dtype_name(c->c[c->chosen].dtype))) ||
             json_object_set_new(o, "err", json_num(c->c[c->chosen].err)))) {
            json_decref(o);
            o = NULL;
        }
    } else {
        char why[2560];
        dtype_choice_refusal(c, why, sizeof why);
        o = json_pack("{s:s, s:s, s:s}", "error", why, "device", c->device_id, "shape", c->dims);
    }
    json_t *arr = json_array();
    for (int i = 0; i < c->n && arr != NULL && o != NULL; i++)
        if (json_array_append_new(arr, candidate_json(&c->c[i])) != 0) {
            json_decref(arr);
            arr = NULL;
        }
    if (o == NULL || arr == NULL) {
        json_decref(o);
        json_decref(arr);
        return NULL;
    }
    if (json_object_set_new(o, "candidates", arr) || /* takes arr, failing or not */
        json_object_set_new(o, "max_err", json_num(c->max_err)) ||
        json_object_set_new(o, "dtypes", json_string(dtype_set_str(c->set, set, sizeof set)))) {
        json_decref(o);
        return NULL;
    }
    char *text = json_num_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (text != NULL && len != NULL)
        *len = strlen(text);
    return text;
}
