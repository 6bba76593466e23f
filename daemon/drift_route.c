/* drift_route.c -- GET /v1/drift (docs/api.md). The report reads every row
 * of the device (or of every device of its model) from SQLite, so it runs
 * on the read pool (http_defer_read), never on an HTTP thread nor on the
 * DB worker, whose writes it would hold up. */
#include "drift_route.h"

#include <string.h>

#include "../tuner/drift.h"

static void work_drift(req *r, store *st)
{
    select_policy p;
    select_policy_default(&p);
    drift_report rep;
    char err[ATTUNE_ERRLEN] = "";
    int rc = drift_compare(st, r->device_id, r->extra_flag,
                           r->extra[0][0] ? r->extra[0] : NULL,
                           r->extra[1][0] ? r->extra[1] : NULL, &p, &rep, err, sizeof err);
    if (rc != 0) {
        req_fail(r, rc, "%s", err[0] ? err : attune_strerror(rc));
        return;
    }
    json_t *j = drift_report_json(&rep);
    drift_report_free(&rep);
    if (j == NULL) {
        req_fail(r, ATTUNE_ENOMEM, "out of memory");
        return;
    }
    req_result(r, 200, j);
}

/* 16 lowercase hex digits: a stack id. */
static int stack_id_ok(const char *s)
{
    if (strlen(s) != 16)
        return 0;
    for (const char *p = s; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return 0;
    return 1;
}

const char *const drift_route_args[] = {"device", "model", "from", "to", NULL};

enum MHD_Result drift_route_get(req *r, const char *url, const http_args *a)
{
    index_device_view dev;
    const char *spec = http_arg(a, "device"), *model = http_arg(a, "model");
    const char *from = http_arg(a, "from"), *to = http_arg(a, "to");
    enum MHD_Result ret;
    if (http_device(r, spec, &dev, &ret) != 0)
        return ret;
    if (model != NULL && strcmp(model, "0") != 0 && strcmp(model, "1") != 0)
        return http_fail(r, ATTUNE_EINVAL, "model must be 0 or 1");
    if ((from == NULL) != (to == NULL))
        return http_fail(r, ATTUNE_EINVAL, "give both 'from' and 'to' stacks, or neither");
    if (from != NULL && (!stack_id_ok(from) || !stack_id_ok(to)))
        return http_fail(r, ATTUNE_EINVAL, "'from' and 'to' are stack ids (16 hex digits)");
    snprintf(r->device_id, sizeof r->device_id, "%s", dev.info.id);
    snprintf(r->extra[0], sizeof r->extra[0], "%s", from ? from : "");
    snprintf(r->extra[1], sizeof r->extra[1], "%s", to ? to : "");
    r->extra_flag = model != NULL && strcmp(model, "1") == 0;
    return http_defer_read(r, work_drift);
}
