/* winners.c -- GET /v1/winners: every tuned shape of a device with its
 * winner, the runner-up and the margin between them (tuner/winners.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "page.h"

/* A boolean argument: true/false or 1/0. 0, or -1 when malformed. */
static int arg_bool(const char *v, int *out)
{
    if (strcmp(v, "true") == 0 || strcmp(v, "1") == 0)
        *out = 1;
    else if (strcmp(v, "false") == 0 || strcmp(v, "0") == 0)
        *out = 0;
    else
        return -1;
    return 0;
}

/* Runs on the read pool: the device's rows from the store (every stack),
 * reduced by the index's policy against its current stack. */
static void work_winners(req *r, store *st)
{
    index_device_view dev;
    if (index_device_find(r->d->ix, r->device_id, &dev) != 0) {
        req_fail(r, ATTUNE_ENODEV, "unknown device '%.64s'", r->device_id);
        return;
    }
    store_measurement *m = NULL;
    winners_row *rows = NULL;
    int n = 0, nrows = 0;
    const select_policy *p = index_policy(r->d->ix);
    int rc = store_measurements_all(st, dev.info.id, &m, &n);
    if (rc != 0) {
        req_fail(r, rc, "reading the measurements failed: %s", attune_strerror(rc));
        goto out;
    }
    rc = winners_compute(m, n, &dev.stack, p, &r->winners, &rows, &nrows);
    if (rc != 0) {
        req_fail(r, ATTUNE_ENOMEM, "out of memory");
        goto out;
    }
    json_t *arr = winners_json(rows, nrows);
    json_t *bounds = json_pack("{s:f, s:f, s:f, s:f}", "f16", select_max_rel_err(p, ATTN_F16),
                               "bf16", select_max_rel_err(p, ATTN_BF16), "f32",
                               select_max_rel_err(p, ATTN_F32), "e4m3",
                               select_max_rel_err(p, ATTN_E4M3));
    if (arr == NULL || bounds == NULL) {
        json_decref(arr);
        json_decref(bounds);
        req_fail(r, ATTUNE_ENOMEM, "out of memory");
        goto out;
    }
    char vt[96];
    variant_set_str(r->winners.variants, vt, sizeof vt);
    req_result(r, 200,
               json_pack("{s:s, s:s, s:s, s:o, s:f, s:s, s:o}", "device", dev.info.id, "name",
                         dev.info.name, "stack", dev.stack.id, "max_rel_err", bounds,
                         "max_ratio", p->max_ratio > 0 ? p->max_ratio : SELECT_DEFAULT_RATIO,
                         "variants", vt, "winners", arr));
out:
    free(m);
    free(rows);
}

const char *const winners_args[] = {"device", "dtype", "d", "causal", "stale", "variants",
                                     NULL};

enum MHD_Result winners_get(req *r, const char *url, const http_args *a)
{
    char err[ATTUNE_ERRLEN];
    const char *spec = http_arg(a, "device");
    index_device_view dev;
    enum MHD_Result ret;
    if (http_device(r, spec, &dev, &ret) != 0)
        return ret;
    winners_filter *f = &r->winners;
    winners_filter_all(f);
    f->need_mark = dev.local; /* the rule of the lookups (select_complete) */
    const char *v = http_arg(a, "dtype");
    attn_dtype dt;
    if (v != NULL) {
        if (attn_dtype_parse(v, &dt) != 0)
            return http_fail(r, ATTUNE_EINVAL, "dtype='%.16s' must be f16, bf16, f32 or e4m3", v);
        f->dtype = (int)dt;
    }
    if (http_arg(a, "d") != NULL) {
        int64_t d;
        if (http_arg_int(a, "d", 1, ATTN_MAX_HEADDIM, &d, err, sizeof err) != 0)
            return http_fail(r, ATTUNE_EINVAL, "%s", err);
        f->d = (int)d;
    }
    if ((v = http_arg(a, "causal")) != NULL && arg_bool(v, &f->causal) != 0)
        return http_fail(r, ATTUNE_EINVAL, "causal='%.16s' must be true or false", v);
    if ((v = http_arg(a, "stale")) != NULL && arg_bool(v, &f->stale) != 0)
        return http_fail(r, ATTUNE_EINVAL, "stale='%.16s' must be true or false", v);
    if (variant_set_parse(v = http_arg(a, "variants"), &f->variants, err, sizeof err) != 0)
        return http_fail(r, ATTUNE_EINVAL, "variants='%.64s': %s", v, err);
    snprintf(r->device_id, sizeof r->device_id, "%s", dev.info.id);
    return http_defer_read(r, work_winners);
}
