/* pins_route.c -- the pin routes (pins_route.h). */
#include "pins_route.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../db/store_pins.h"
#include "../common/pin_json.h"
#include "log.h"

const char *const pins_route_args[] = {"device", NULL};

enum MHD_Result pins_route_list(req *r, const char *url, const http_args *a)
{
    index_device_view dev;
    enum MHD_Result ret;
    const char *spec = http_arg(a, "device");
    if (spec != NULL && http_device(r, spec, &dev, &ret) != 0)
        return ret;
    pin *p = NULL;
    int n = 0, k = 0;
    if (index_pins(r->d->ix, &p, &n) != 0)
        return http_fail(r, ATTUNE_ENOMEM, "out of memory");
    for (int i = 0; i < n; i++)
        if (spec == NULL || pin_device_covers(&p[i], &dev.info))
            p[k++] = p[i];
    json_t *arr = pin_json_array(p, k);
    free(p);
    if (arr == NULL)
        return http_fail(r, ATTUNE_ENOMEM, "out of memory");
    return http_send_json(r, 200, json_pack("{s:o}", "pins", arr));
}

/* The device spec of p (any spec: cpu, ordinal, id, name) as one device
 * id; a force for one shape and one device must be a tactic its backend
 * lists for the shape. 0, or the error (queued on r). */
static int resolve_and_list(req *r, pin *p)
{
    index_device_view dev;
    if (p->device[0] != 0) {
        if (index_device_find(r->d->ix, p->device, &dev) != 0) {
            req_fail(r, ATTUNE_ENODEV, "unknown device '%.64s' (see GET /v1/devices; to pin "
                     "every device of a model, give model)", p->device);
            return ATTUNE_ENODEV;
        }
        snprintf(p->device, sizeof p->device, "%s", dev.info.id);
    }
    attn_shape s;
    if (p->action != PIN_FORCE || p->device[0] == 0 || p->shape[0] == 0 ||
        strchr(p->shape, '*') != NULL || attn_shape_parse(p->shape, &s, NULL, 0) != 0)
        return 0; /* checked at each lookup instead (docs/api.md "Pins") */
    int rc = index_tactic_listed(r->d->ix, p->device, &s, p->tactic);
    if (rc == 0) {
        req_fail(r, ATTUNE_EINVAL, "device %s does not list tactic %s for %s (attune tactics "
                 "--device %s --shape %s lists them)", p->device, p->tactic, p->shape,
                 p->device, p->shape);
        return ATTUNE_EINVAL;
    }
    return 0;
}

static void work_add(req *r, store *st)
{
    char err[ATTUNE_ERRLEN];
    pin p;
    json_error_t je;
    json_t *o = json_loadb(r->body, r->len, JSON_REJECT_DUPLICATES, &je);
    if (o == NULL) {
        req_fail(r, ATTUNE_EINVAL, "invalid JSON at line %d column %d: %.120s", je.line,
                 je.column, je.text);
        return;
    }
    int rc = pin_from_json(o, "pin", &p, err, sizeof err);
    json_decref(o);
    if (rc != 0) {
        req_fail(r, rc, "%s", err);
        return;
    }
    p.created_at = 0; /* a new pin is made now */
    int added = 0;
    if (resolve_and_list(r, &p) != 0)
        return;
    if ((rc = store_pin_put(st, &p, &added, err, sizeof err)) != 0) {
        req_fail(r, rc, "%s", err);
        return;
    }
    sync_pins(&r->d->sync, st);
    log_event(LOGL_INFO, "pin_added", "id=%lld action=%s tactic=%s shape=%s device=%s "
              "model=%s author=%s new=%d", (long long)p.id, pin_action_name(p.action),
              LOG_Q(p.tactic), LOG_Q(p.shape), LOG_Q(p.device), LOG_Q(p.model),
              LOG_Q(p.author), added);
    req_result(r, added ? 201 : 200, json_pack("{s:o}", "pin", pin_json(&p)));
}

enum MHD_Result pins_route_add(req *r, const char *url, const http_args *a)
{
    if (r->len == 0)
        return http_fail(r, ATTUNE_EINVAL, "empty body: a pin object is expected");
    if (!http_json_depth_ok(r->body, r->len, ATTUNED_JSON_DEPTH_MAX))
        return http_fail(r, ATTUNE_EINVAL, "JSON nested deeper than %d levels",
                         ATTUNED_JSON_DEPTH_MAX);
    return http_defer(r, work_add);
}

static void work_delete(req *r, store *st)
{
    pin p;
    int rc = store_pin_delete(st, r->job_id, &p);
    if (rc == ATTUNE_ENOTFOUND) {
        req_fail(r, rc, "no pin %lld (see GET /v1/pins)", (long long)r->job_id);
        return;
    }
    if (rc != 0) {
        req_fail(r, rc, "removing pin %lld failed: %s", (long long)r->job_id,
                 attune_strerror(rc));
        return;
    }
    sync_pins(&r->d->sync, st);
    log_event(LOGL_INFO, "pin_removed", "id=%lld tactic=%s", (long long)p.id, LOG_Q(p.tactic));
    req_result(r, 200, json_pack("{s:o}", "deleted", pin_json(&p)));
}

enum MHD_Result pins_route_delete(req *r, const char *url, const http_args *a)
{
    const char *p = url + strlen("/v1/pins/");
    size_t n = strlen(p);
    int digits = n > 0 && n <= 18;
    for (size_t i = 0; i < n && digits; i++)
        digits = p[i] >= '0' && p[i] <= '9';
    if (!digits || (r->job_id = strtoll(p, NULL, 10)) < 1)
        return http_fail(r, ATTUNE_EINVAL, "pin id must be a positive integer");
    return http_defer(r, work_delete);
}
