/* routes.c -- the route table of API v1 and its handlers.
 *
 * One static table {method, path, auth, body limit, query arguments,
 * handler} ending in a 404 row; one access handler looks the route up,
 * checks Host, token and body size, gathers the body, checks the query
 * arguments against the row's list (run_handler), and calls the handler. Per-request state lives in *req_cls and
 * is freed in routes_completed. Handlers never block: lookups read the
 * in-memory index; anything that touches SQLite is deferred to the DB
 * worker (http_defer). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "../common/dtype_device.h"
#include "../common/answer_cache.h"
#include "../common/json_num.h"
#include "../common/shape_json.h"
#include "../lookup/answer_json.h"
#include "../lookup/dtype_choice.h"
#include "../tuner/variants_json.h"
#include "admit.h"
#include "conn.h"
#include "drift_route.h"
#include "export.h"
#include "http.h"
#include "log.h"
#include "metrics.h"
#include "page.h"
#include "pins_route.h"
#include "tactic_cache.h"

typedef enum MHD_Result (*handler_fn)(req *r, const char *url, const http_args *a);

typedef struct route {
    const char *method;   /* NULL: the final 404 row */
    const char *path;
    int prefix;           /* path is a prefix: "/v1/jobs/" + ID */
    int auth;             /* needs Authorization: Bearer <token> */
    size_t body_max;      /* 0: the route takes no body */
    const char *const *args; /* the query arguments it takes (NULL-ended),
                                checked before fn runs; NULL: not read */
    handler_fn fn;
    const char *label;    /* metrics label */
} route;

static enum MHD_Result h_health(req *r, const char *url, const http_args *a);
static enum MHD_Result h_variants(req *r, const char *url, const http_args *a);
/* Append o to *arr; on failure drop the whole list (*arr NULL), so that
 * send_list answers 500 rather than a silently shortened list. */
static void list_add(json_t **arr, json_t *o)
{
    if (*arr == NULL) {
        json_decref(o);
    } else if (json_array_append_new(*arr, o) != 0) {
        json_decref(*arr);
        *arr = NULL;
    }
}

/* Answer {key: arr} (taking arr); NULL arr: 500 out of memory. */
static enum MHD_Result send_list(req *r, const char *key, json_t *arr)
{
    if (arr == NULL)
        return http_fail(r, ATTUNE_ENOMEM, "out of memory");
    return http_send_json(r, 200, json_pack("{s:o}", key, arr));
}

static enum MHD_Result h_devices(req *r, const char *url, const http_args *a);
static enum MHD_Result h_tactic(req *r, const char *url, const http_args *a);
static enum MHD_Result h_results(req *r, const char *url, const http_args *a);
static enum MHD_Result h_tune(req *r, const char *url, const http_args *a);
static enum MHD_Result h_jobs_list(req *r, const char *url, const http_args *a);
static enum MHD_Result h_job_get(req *r, const char *url, const http_args *a);
static enum MHD_Result h_job_cancel(req *r, const char *url, const http_args *a);
static enum MHD_Result h_export(req *r, const char *url, const http_args *a);
static enum MHD_Result h_import(req *r, const char *url, const http_args *a);
static enum MHD_Result h_metrics(req *r, const char *url, const http_args *a);
static enum MHD_Result h_not_found(req *r, const char *url, const http_args *a);

/* The query arguments of each route: anything else is a 400. */
static const char *const no_args[] = {NULL};
static const char *const device_arg[] = {"device", NULL};
static const char *const shape_args[] = {"device", "shape", "b", "hq", "hkv", "sq",
                                         "skv", "d", "dtype", "causal", "max_rel_err",
                                         "variants", "max_err", NULL};
static const char *const results_args[] = {"device", "shape", "b", "hq", "hkv", "sq",
                                           "skv", "d", "dtype", "causal", NULL};
static const char *const jobs_args[] = {"state", "device", "limit", "kind", NULL};

static const route routes[] = {
    {"GET", "/v1/health", 0, 0, 0, no_args, h_health, "/v1/health"},
    {"GET", "/v1/devices", 0, 0, 0, no_args, h_devices, "/v1/devices"},
    {"GET", "/v1/tactic", 0, 0, 0, shape_args, h_tactic, "/v1/tactic"},
    {"GET", "/v1/results", 0, 0, 0, results_args, h_results, "/v1/results"},
    {"POST", "/v1/tune", 0, 1, ATTUNED_TUNE_BODY_MAX, no_args, h_tune, "/v1/tune"},
    {"GET", "/v1/jobs", 0, 0, 0, jobs_args, h_jobs_list, "/v1/jobs"},
    {"GET", "/v1/jobs/", 1, 0, 0, no_args, h_job_get, "/v1/jobs/ID"},
    {"DELETE", "/v1/jobs/", 1, 1, 0, no_args, h_job_cancel, "/v1/jobs/ID"},
    {"GET", "/v1/export", 0, 0, 0, device_arg, h_export, "/v1/export"},
    {"POST", "/v1/import", 0, 1, ATTUNED_IMPORT_BODY_MAX, no_args, h_import, "/v1/import"},
    {"GET", "/v1/drift", 0, 0, 0, drift_route_args, drift_route_get, "/v1/drift"},
    {"GET", "/v1/pins", 0, 0, 0, pins_route_args, pins_route_list, "/v1/pins"},
    {"POST", "/v1/pins", 0, 1, PINS_ROUTE_BODY_MAX, no_args, pins_route_add, "/v1/pins"},
    {"DELETE", "/v1/pins/", 1, 1, 0, no_args, pins_route_delete, "/v1/pins/ID"},
    {"GET", "/metrics", 0, 0, 0, no_args, h_metrics, "/metrics"},
    {"GET", "/v1/winners", 0, 0, 0, winners_args, winners_get, "/v1/winners"},
    {"GET", "/v1/variants", 0, 0, 0, no_args, h_variants, "/v1/variants"},
    {"GET", "/", 0, 0, 0, NULL, page_get, "/"},
    {"GET", "/ui/", 1, 0, 0, NULL, page_get, "/ui/ASSET"},
    {NULL, NULL, 0, 0, 0, NULL, h_not_found, "unmatched"},
};
#define NROUTES ((int)(sizeof routes / sizeof routes[0]))
#define ROW_NOT_FOUND (NROUTES - 1)
#define ROW_TACTIC 2

void routes_init(void)
{
    /* label sets of attune_http_requests_total: method and route */
    static char labels[NROUTES][96];
    static const char *ptrs[NROUTES];
    for (int i = 0; i < NROUTES; i++) {
        snprintf(labels[i], sizeof labels[i], "method=\"%s\",route=\"%s\"",
                 routes[i].method ? routes[i].method : "any", routes[i].label);
        ptrs[i] = labels[i];
    }
    metrics_init(ptrs, NROUTES);
}

static int path_matches(const route *rt, const char *url)
{
    if (rt->prefix)
        return strncmp(url, rt->path, strlen(rt->path)) == 0;
    return strcmp(url, rt->path) == 0;
}

/* ---- small JSON helpers */

static json_t *device_json(const index_device_view *v)
{
    char cc[16];
    snprintf(cc, sizeof cc, "%d.%d", v->info.cc_major, v->info.cc_minor);
    return json_pack("{s:s, s:i, s:s, s:s, s:s, s:i, s:I, s:i, s:i, "
                     "s:{s:s, s:s, s:s, s:s, s:s, s:s, s:s}, s:b, s:i, s:I}",
                     "id", v->info.id, "index", v->info.index, "name", v->info.name,
                     "kind", v->info.kind, "cc", cc, "sm_count", v->info.sm_count,
                     "memory_mb", (json_int_t)v->info.memory_mb, "clock_mhz",
                     v->info.clock_mhz, "mem_clock_mhz", v->info.mem_clock_mhz, "stack",
                     "id", v->stack.id, "driver", v->stack.driver, "runtime",
                     v->stack.runtime, "blas", v->stack.blas, "attune", v->stack.attune,
                     "kernels", v->stack.kernels, "power", v->stack.power, "local", v->local,
                     "shapes", v->nshapes,
                     "measurements", (json_int_t)v->nmeasurements);
}

/* ---- GET /v1/health, /v1/devices, /metrics */

static enum MHD_Result h_health(req *r, const char *url, const http_args *a)
{
    return http_send_json(r, 200, json_pack("{s:s, s:s, s:i}", "status",
                                            atomic_load(&r->d->stopping) ? "stopping" : "ok",
                                            "version", ATTUNE_VERSION, "devices",
                                            r->d->ndevices));
}

static enum MHD_Result h_devices(req *r, const char *url, const http_args *a)
{
    index_device_view *v = NULL;
    int n = 0;
    if (index_devices(r->d->ix, &v, &n) != 0)
        return http_fail(r, ATTUNE_ENOMEM, "out of memory");
    json_t *arr = json_array();
    for (int i = 0; i < n && arr != NULL; i++)
        list_add(&arr, device_json(&v[i]));
    free(v);
    return send_list(r, "devices", arr);
}

/* GET /v1/variants: the table of kernel families (kernels/variant.h), so
 * the page colours and names every variant this build knows. */
static enum MHD_Result h_variants(req *r, const char *url, const http_args *a)
{
    json_t *j = variants_json();
    if (j == NULL)
        return http_fail(r, ATTUNE_ENOMEM, "out of memory");
    return http_send_json(r, 200, j);
}

static enum MHD_Result h_metrics(req *r, const char *url, const http_args *a)
{
    metrics_snapshot snap;
    memset(&snap, 0, sizeof snap);
    jobs_counts(r->d->jobs, snap.jobs);
    snap.nqueues = jobs_queue_depths(r->d->jobs, snap.queues, METRICS_MAX_DEVICES);
    index_stats(r->d->ix, &snap.devices_local, &snap.devices_fleet, &snap.index_measurements);
    index_pending(r->d->ix, &snap.pending_models, &snap.pending_listings);
    if (r->d->answers != NULL)
        answer_cache_counts(r->d->answers, &snap.answers_kept_hits, &snap.answers_kept_misses);
    char *text = NULL;
    size_t len = 0;
    if (metrics_render(&snap, &text, &len) != 0)
        return http_fail(r, ATTUNE_ENOMEM, "out of memory");
    return http_send(r, 200, "text/plain; version=0.0.4; charset=utf-8", text, len, NULL,
                     NULL);
}

/* ---- GET /v1/tactic */

/* 422 with why: a question this device can never answer (an e4m3 shape on
 * a GPU without FP8 tensor cores), said at once rather than by a default
 * answer and a tune that would list nothing. */
static enum MHD_Result send_unprocessable(req *r, const char *why)
{
    return http_send_json(r, 422, json_pack("{s:s}", "error", why));
}

/* 1 (422 queued in *ret) when the device spec names cannot run dtype t
 * (common/dtype_device.h); 0 otherwise, an unknown device included (the
 * lookup says so). */
static int refuse_dtype(req *r, const char *spec, attn_dtype t, enum MHD_Result *ret)
{
    char why[256];
    index_device_view dev;
    if (t != ATTN_E4M3 || strlen(spec) > 128 || index_device_find(r->d->ix, spec, &dev) != 0 ||
        dtype_device_runs(&dev.info, t, why, sizeof why))
        return 0;
    *ret = send_unprocessable(r, why);
    return 1;
}

/* GET /v1/tactic with dtype=any, a list of dtypes, or max_err=: the
 * fastest tactic of those dtypes within max_err of the bf16 answer
 * (lookup/dtype_choice.h); 404 with every dtype's reason when none
 * qualifies. Measurements only: nothing is queued for tuning. */
static enum MHD_Result h_tactic_dtypes(req *r, const char *spec, const http_args *a)
{
    char err[ATTUNE_ERRLEN];
    attn_shape dims;
    unsigned set;
    double max_err;
    variant_set vs;
    if (http_arg(a, "max_rel_err") != NULL)
        return http_fail(r, ATTUNE_EINVAL, "max_rel_err does not apply to a question over "
                                           "dtypes: its bound is max_err=");
    if (http_args_dims(a, &dims, &set, err, sizeof err) != 0 ||
        http_arg_max_err(a, &max_err, err, sizeof err) != 0)
        return http_fail(r, ATTUNE_EINVAL, "%s", err);
    if (max_err == 0)
        return http_fail(r, ATTUNE_EINVAL, "dtype=%.32s needs max_err=X: the error against the "
                                           "bf16 answer a tactic may have, in (0, 1]",
                         http_arg(a, "dtype"));
    const char *vl = http_arg(a, "variants");
    if (variant_set_parse(vl, &vs, err, sizeof err) != 0)
        return http_fail(r, ATTUNE_EINVAL, "variants='%.64s': %s", vl, err);
    dtype_choice *c = malloc(sizeof *c);
    if (c == NULL)
        return http_fail(r, ATTUNE_ENOMEM, "out of memory");
    int rc = strlen(spec) > 128 ? ATTUNE_ENODEV
                                : dtype_choose(r->d->ix, spec, &dims, set, max_err, vs, c);
    if (rc != 0) {
        free(c);
        if (rc == ATTUNE_ENODEV)
            return http_fail(r, rc, "unknown device '%.64s' (see GET /v1/devices)", spec);
        return http_fail(r, rc, "%s", attune_strerror(rc));
    }
    size_t len = 0;
    char *text = dtype_choice_json(c, vs, &len);
    int chosen = c->chosen;
    if (chosen >= 0)
        metrics_lookup((int)c->c[chosen].ans.source, c->c[chosen].ans.stale, req_elapsed(r));
    free(c);
    if (text == NULL)
        return http_fail(r, ATTUNE_ENOMEM, "out of memory");
    return http_send(r, chosen >= 0 ? 200 : 404, "application/json", text, len, NULL, NULL);
}

/* handler -> index -> answer: the arguments (checked against the route
 * row) are parsed here, the device is resolved and the shape key built
 * once, in index_lookup_in, and both are reused for the answer and tune on
 * miss (docs/design.md). The answer's text: lookup/answer_json.h. */
static enum MHD_Result h_tactic(req *r, const char *url, const http_args *a)
{
    char err[ATTUNE_ERRLEN];
    attn_shape s;
    double mre;
    variant_set vs;
    /* read before the lookup: an answer kept for it is dropped by any
     * change the lookup might not have seen (tactic_cache.h) */
    uint64_t gen = index_generation(r->d->ix);
    const char *spec = http_arg(a, "device");
    if (spec == NULL)
        return http_fail(r, ATTUNE_EINVAL, "missing parameter 'device'");
    if (dtype_set_text(http_arg(a, "dtype")) || http_arg(a, "max_err") != NULL)
        return h_tactic_dtypes(r, spec, a);
    if (http_args_shape(a, &s, err, sizeof err) != 0 ||
        http_arg_max_rel_err(a, &mre, err, sizeof err) != 0)
        return http_fail(r, ATTUNE_EINVAL, "%s", err);
    enum MHD_Result refused;
    if (refuse_dtype(r, spec, s.dtype, &refused))
        return refused;
    const char *vl = http_arg(a, "variants");
    if (variant_set_parse(vl, &vs, err, sizeof err) != 0)
        return http_fail(r, ATTUNE_EINVAL, "variants='%.64s': %s", vl, err);
    index_answer ans;
    int rc = strlen(spec) > 128 ? ATTUNE_ENODEV
                                : index_lookup_in(r->d->ix, spec, &s, mre, vs, &ans);
    if (rc == ATTUNE_ENOTFOUND) {
        answer_no_tactic_text(&ans, vs, err, sizeof err);
        return http_fail(r, rc, "%s", err);
    }
    if (rc == ATTUNE_ENOMEM)
        return http_fail(r, rc, "out of memory answering the lookup");
    if (rc != 0)
        return http_fail(r, rc, "unknown device '%.64s' (see GET /v1/devices)", spec);
    /* tune on miss: a shape whose tune on this (local) device is not
     * complete is queued (a partial one resumes), if admitted */
    char why[128] = "";
    int asks_miss = ans.source != INDEX_MEASURED && !ans.complete && ans.local;
    int tuning = asks_miss ? jobs_miss(r->d->jobs, ans.device_id, &s, ans.key, why, sizeof why)
                           : JOBS_MISS_NONE;
    if ((ans.source == INDEX_MEASURED || ans.complete) && ans.local)
        jobs_asked(r->d->jobs, ans.device_id, ans.key); /* retention of miss-tuned shapes */
    size_t len = 0;
    char *text = answer_json(&ans, mre, vs,
                             tuning == JOBS_MISS_QUEUED    ? "queued"
                             : tuning == JOBS_MISS_RUNNING ? "running"
                             : tuning == JOBS_MISS_REFUSED ? why
                                                           : NULL,
                             &len);
    if (text == NULL)
        return http_fail(r, ATTUNE_ENOMEM, "out of memory");
    /* kept unless tune on miss was asked: its state is asked anew each time */
    enum MHD_Result ret = tactic_cache_send(r, gen, &ans, !asks_miss, text, len);
    metrics_lookup((int)ans.source, ans.stale, req_elapsed(r));
    return ret;
}

/* ---- GET /v1/results */

static json_t *measurement_json(const store_measurement *m, const char *cur_stack)
{
    char variant[32];
    int pad;
    answer_tactic_parts(m->tactic, variant, sizeof variant, &pad);
    json_t *o = json_pack("{s:s, s:s, s:i, s:i, s:s, s:s, s:b, s:s, s:s, s:i, s:s, s:s, s:I}",
                          "tactic", m->tactic, "variant", variant, "pad", pad, "n", m->n,
                          "status", store_status_name(m->status), "stack", m->stack_id,
                          "stale", strcmp(m->stack_id, cur_stack) != 0, "mode", m->mode,
                          "l2", m->l2, "rows_checked", m->rows_checked, "note", m->note,
                          "host", m->host, "taken_at", (json_int_t)m->taken_at);
    if (o == NULL)
        return NULL;
    json_object_set_new(o, "time_us", json_num(m->time_us));
    json_object_set_new(o, "time_us_min", json_num(m->time_us_min));
    json_object_set_new(o, "time_us_max", json_num(m->time_us_max));
    json_object_set_new(o, "time_us_copies", json_num(m->time_us_copies));
    json_object_set_new(o, "time_us_paid", json_num(select_time(m))); /* what wins */
    json_object_set_new(o, "noisy", json_boolean(m->noisy)); /* never wins: tuner/noise.h */
    json_object_set_new(o, "rel_err", json_num(m->rel_err));
    json_object_set_new(o, "max_abs_err", json_num(m->max_abs_err));
    json_object_set_new(o, "err_ratio", json_num(m->err_ratio));
    if (m->shape.dtype == ATTN_E4M3) /* FP8's whole cost: vs the bf16 source */
        json_object_set_new(o, "src_rel_err", json_num(m->src_rel_err));
    json_object_set_new(o, "power", json_string(m->power)); /* the row's power mode */
    return o;
}

static enum MHD_Result h_results(req *r, const char *url, const http_args *a)
{
    char err[ATTUNE_ERRLEN];
    enum MHD_Result ret;
    index_device_view dev;
    attn_shape s;
    if (http_device(r, http_arg(a, "device"), &dev, &ret) != 0)
        return ret;
    if (http_args_shape(a, &s, err, sizeof err) != 0)
        return http_fail(r, ATTUNE_EINVAL, "%s", err);
    store_measurement *m = NULL;
    int n = 0;
    char stack[24];
    int rc = index_results(r->d->ix, dev.info.id, &s, &m, &n, stack);
    if (rc != 0) /* ENODEV (the device went since arg_device): 404, not 500 */
        return http_fail(r, rc, "device '%.64s': %s", dev.info.id, attune_strerror(rc));
    json_t *arr = json_array();
    for (int i = 0; i < n && arr != NULL; i++)
        if (json_array_append_new(arr, measurement_json(&m[i], stack)) != 0) {
            json_decref(arr);
            arr = NULL;
        }
    free(m);
    if (arr == NULL)
        return http_fail(r, ATTUNE_ENOMEM, "out of memory");
    char key[ATTN_SHAPE_KEY_MAX];
    const select_policy *p = index_policy(r->d->ix);
    return http_send_json(
        r, 200,
        json_pack("{s:s, s:s, s:s, s:f, s:f, s:o}", "device", dev.info.id, "shape",
                  attn_shape_key(&s, key, sizeof key), "stack", stack, "max_rel_err",
                  select_max_rel_err(p, s.dtype), "max_ratio",
                  p->max_ratio > 0 ? p->max_ratio : SELECT_DEFAULT_RATIO, "measurements",
                  arr));
}

/* ---- jobs */

static json_t *job_json(const jobs_view *v)
{
    json_t *o = json_pack("{s:I, s:s, s:s, s:s, s:i, s:i, s:I, s:I}", "id", (json_int_t)v->id,
                          "kind", store_job_kind_name(v->kind),
                          "device", v->device_id, "state", store_job_state_name(v->state),
                          "done", v->done, "total", v->total, "created_at",
                          (json_int_t)v->created_at, "updated_at", (json_int_t)v->updated_at);
    if (o == NULL)
        return NULL;
    if (v->state == STORE_JOB_RUNNING) {
        json_object_set_new(o, "tactic_index", json_integer(v->tactic_index));
        json_object_set_new(o, "tactic_count", json_integer(v->tactic_count));
        if (v->shape[0] != 0)
            json_object_set_new(o, "shape", json_string(v->shape));
        if (v->tactic[0] != 0)
            json_object_set_new(o, "tactic", json_string(v->tactic));
    }
    if (v->cancel_requested)
        json_object_set_new(o, "cancel_requested", json_true());
    if (v->error[0] != 0)
        json_object_set_new(o, "error", json_string(v->error));
    return o;
}

/* Job id from "/v1/jobs/<id>": 1..2^63-1, digits only. 0 or -1. */
static int parse_job_id(const char *url, int64_t *id)
{
    const char *p = url + strlen("/v1/jobs/");
    size_t n = strlen(p);
    if (n == 0 || n > 18)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (p[i] < '0' || p[i] > '9')
            return -1;
    *id = strtoll(p, NULL, 10);
    return *id >= 1 ? 0 : -1;
}

static enum MHD_Result h_jobs_list(req *r, const char *url, const http_args *a)
{
    char err[ATTUNE_ERRLEN];
    int64_t limit = 100;
    if (http_arg(a, "limit") != NULL &&
        http_arg_int(a, "limit", 1, 10000, &limit, err, sizeof err) != 0)
        return http_fail(r, ATTUNE_EINVAL, "%s", err);
    int state = -1;
    const char *sv = http_arg(a, "state");
    if (sv != NULL) {
        for (int s = 0; s < 5 && state < 0; s++)
            if (strcmp(sv, store_job_state_name((store_job_state)s)) == 0)
                state = s;
        if (state < 0)
            return http_fail(r, ATTUNE_EINVAL, "unknown state '%.32s' (queued, running, done, "
                                   "failed, canceled)", sv);
    }
    const char *kv = http_arg(a, "kind"); /* tune or miss (issue 28 item 2) */
    if (kv != NULL && strcmp(kv, "tune") != 0 && strcmp(kv, "miss") != 0)
        return http_fail(r, ATTUNE_EINVAL, "unknown kind '%.32s' (tune, miss)", kv);
    index_device_view dev;
    enum MHD_Result ret;
    const char *dv = http_arg(a, "device"); /* optional here */
    if (dv != NULL && http_device(r, dv, &dev, &ret) != 0)
        return ret;
    jobs_view *v = NULL;
    int n = 0;
    if (jobs_list(r->d->jobs, &v, &n) != 0)
        return http_fail(r, ATTUNE_ENOMEM, "out of memory");
    json_t *arr = json_array();
    int shown = 0;
    /* newest first, up to limit */
    for (int i = n - 1; i >= 0 && arr != NULL && shown < limit; i--) {
        if ((state >= 0 && (int)v[i].state != state) ||
            (kv != NULL && strcmp(store_job_kind_name(v[i].kind), kv) != 0) ||
            (dv != NULL && strcmp(v[i].device_id, dev.info.id) != 0))
            continue;
        list_add(&arr, job_json(&v[i]));
        shown++;
    }
    free(v);
    return send_list(r, "jobs", arr);
}

static enum MHD_Result h_job_get(req *r, const char *url, const http_args *a)
{
    int64_t id;
    if (parse_job_id(url, &id) != 0)
        return http_fail(r, ATTUNE_EINVAL, "job id must be a positive integer");
    jobs_view v;
    if (jobs_get(r->d->jobs, id, &v) != 0)
        return http_fail(r, ATTUNE_ENOTFOUND, "no job %lld", (long long)id);
    return http_send_json(r, 200, job_json(&v));
}

static void work_cancel(req *r, store *st)
{
    jobs_view v;
    int rc = jobs_cancel(r->d->jobs, st, r->job_id, &v);
    if (rc == ATTUNE_ESTATE) {
        req_fail(r, rc, "job %lld is already %s", (long long)r->job_id,
                 store_job_state_name(v.state));
    } else if (rc != 0) {
        req_fail(r, rc, "cannot cancel job %lld: %s", (long long)r->job_id,
                 attune_strerror(rc));
    } else {
        log_event(LOGL_INFO, "job_cancel", "job=%lld state=%s", (long long)v.id,
                  store_job_state_name(v.state));
        req_result(r, 200, job_json(&v));
    }
}

static enum MHD_Result h_job_cancel(req *r, const char *url, const http_args *a)
{
    if (parse_job_id(url, &r->job_id) != 0)
        return http_fail(r, ATTUNE_EINVAL, "job id must be a positive integer");
    jobs_view v;
    if (jobs_get(r->d->jobs, r->job_id, &v) != 0)
        return http_fail(r, ATTUNE_ENOTFOUND, "no job %lld", (long long)r->job_id);
    return http_defer(r, work_cancel);
}

/* ---- POST /v1/tune */

/* Admission of an explicit job (issue 29 item 1): 1 with why refused
 * when a shape's whole tune is predicted over --job-budget-s, else 0; a
 * job that says "force": true (r->force) is let through, a warning logged
 * per such shape and counted in r->extra_flag. Runs on the DB worker
 * (work_tune), not on a request thread: pricing a shape may wait for its
 * listing (cuDNN's heuristics: up to about a second for a new shape, for
 * up to JOBS_MAX_SHAPES of them), and a request thread that waits holds up
 * every lookup on its connections. The worker's later items (imports,
 * cancels, other jobs) wait meanwhile; only a token's holder can post. */
static int tune_over_budget(req *r, const attn_device_info *dev, char *why, size_t whylen)
{
    double budget = r->d->cfg.job_budget_s > 0 ? r->d->cfg.job_budget_s : 3600;
    for (int i = 0; i < r->nshapes; i++) {
        admit_cost c;
        char key[ATTN_SHAPE_KEY_MAX], desc[96];
        /* not a lookup: it may wait for the device's listing of the shape */
        index_listing_make(r->d->ix, dev->id, &r->shapes[i]);
        if (admit_estimate(r->d->ix, dev, &r->shapes[i], r->d->cfg.tune_budget_ms, &c) != 0 ||
            admit_fits(&c, budget))
            continue;
        attn_shape_key(&r->shapes[i], key, sizeof key);
        log_event(LOGL_WARN, "tune_over_budget", "device=%s shape=%s cost_s=%.0f forced=%d",
                  dev->id, key, c.seconds, r->force);
        if (r->force) {
            r->extra_flag++; /* work_tune's 202 warns */
            continue;
        }
        snprintf(why, whylen, "shapes[%d] %s: %s; to tune it all the same, send \"force\": "
                 "true (attune tune --force-long)", i, key,
                 admit_describe(&c, budget, desc, sizeof desc));
        return 1;
    }
    return 0;
}

static void work_tune(req *r, store *st)
{
    jobs_view v;
    index_device_view dev;
    char why[384];
    if (index_device_find(r->d->ix, r->device_id, &dev) != 0) {
        req_fail(r, ATTUNE_ENODEV, "unknown device '%s'", r->device_id);
        return;
    }
    if (tune_over_budget(r, &dev.info, why, sizeof why)) {
        req_fail(r, ATTUNE_ERANGE, "%s", why);
        return;
    }
    int rc = jobs_submit(r->d->jobs, st, r->device_id, r->shapes, r->nshapes, &v);
    if (rc == ATTUNE_EBUSY && jobs_stopping(r->d->jobs)) {
        req_fail(r, rc, "attuned is stopping; retry once it is back");
        return;
    }
    if (rc == ATTUNE_EBUSY) {
        req_fail(r, rc, "the job queue of device %s is full; retry later", r->device_id);
        return;
    }
    if (rc != 0) {
        req_fail(r, rc, "cannot create the job: %s", attune_strerror(rc));
        return;
    }
    log_event(LOGL_INFO, "job_queued", "job=%lld device=%s shapes=%d", (long long)v.id,
              v.device_id, v.total);
    snprintf(r->location, sizeof r->location, "/v1/jobs/%lld", (long long)v.id);
    json_t *o = json_pack("{s:I, s:s, s:s, s:i}", "job", (json_int_t)v.id, "state", "queued",
                          "device", v.device_id, "total", v.total);
    char warn[160];
    snprintf(warn, sizeof warn, "%d shape(s) predicted over the job budget, queued because "
             "of \"force\": true", r->extra_flag);
    if (o != NULL && r->extra_flag > 0) /* tune_over_budget counted them */
        json_object_set_new(o, "warning", json_string(warn));
    req_result(r, 202, o);
}

/* Parse a request body as a JSON object; on failure the error is queued. */
static json_t *body_object(req *r, enum MHD_Result *ret)
{
    if (r->len == 0) {
        *ret = http_fail(r, ATTUNE_EINVAL, "empty body: a JSON object is expected");
        return NULL;
    }
    if (!http_json_depth_ok(r->body, r->len, ATTUNED_JSON_DEPTH_MAX)) {
        *ret = http_fail(r, ATTUNE_EINVAL, "JSON nested deeper than %d levels",
                               ATTUNED_JSON_DEPTH_MAX);
        return NULL;
    }
    json_error_t je;
    json_t *root = json_loadb(r->body, r->len, JSON_REJECT_DUPLICATES, &je);
    if (root == NULL) {
        *ret = http_fail(r, ATTUNE_EINVAL, "invalid JSON at line %d column %d: %.120s",
                               je.line, je.column, je.text);
        return NULL;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        *ret = http_fail(r, ATTUNE_EINVAL, "the body must be a JSON object");
        return NULL;
    }
    return root;
}


static enum MHD_Result h_tune(req *r, const char *url, const http_args *a)
{
    char err[ATTUNE_ERRLEN];
    enum MHD_Result ret;
    json_t *root = body_object(r, &ret);
    if (root == NULL)
        return ret;
    const char *k;
    json_t *val;
    json_object_foreach(root, k, val) {
        if (strcmp(k, "device") != 0 && strcmp(k, "shapes") != 0 && strcmp(k, "force") != 0) {
            ret = http_fail(r, ATTUNE_EINVAL, "unknown key '%.32s' (expected device, shapes, "
                            "force)", k);
            goto out;
        }
    }
    json_t *jf = json_object_get(root, "force");
    if (jf != NULL && !json_is_boolean(jf)) {
        ret = http_fail(r, ATTUNE_EINVAL, "'force' must be true or false");
        goto out;
    }
    json_t *jd = json_object_get(root, "device");
    char spec[32];
    const char *devspec;
    if (json_is_string(jd)) {
        devspec = json_string_value(jd);
    } else if (json_is_integer(jd) && json_integer_value(jd) >= 0 &&
               json_integer_value(jd) < 1000000) {
        snprintf(spec, sizeof spec, "%lld", (long long)json_integer_value(jd));
        devspec = spec;
    } else {
        ret = http_fail(r, ATTUNE_EINVAL, "%s: it must be a string (cpu, ordinal, id, name) "
                                          "or an ordinal from 0 to 999999",
                        jd == NULL ? "'device' is missing" : "'device' is of the wrong type");
        goto out;
    }
    index_device_view dev;
    if (http_device(r, devspec, &dev, &ret) != 0)
        goto out;
    if (!dev.local) {
        ret = http_fail(r, ATTUNE_EINVAL, "device %s is not on this host: it cannot be tuned "
                              "here", dev.info.id);
        goto out;
    }
    json_t *js = json_object_get(root, "shapes");
    size_t ns = json_array_size(js);
    if (!json_is_array(js) || ns == 0) {
        ret = http_fail(r, ATTUNE_EINVAL, "'shapes' must be a non-empty array of shapes");
        goto out;
    }
    if (ns > JOBS_MAX_SHAPES) {
        ret = http_fail(r, ATTUNE_ETOOBIG, "%zu shapes in one job; at most %d", ns,
                              JOBS_MAX_SHAPES);
        goto out;
    }
    r->shapes = malloc(ns * sizeof *r->shapes);
    if (r->shapes == NULL) {
        ret = http_fail(r, ATTUNE_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < ns; i++) {
        json_t *sj = json_array_get(js, i);
        if (!json_is_object(sj)) {
            ret = http_fail(r, ATTUNE_EINVAL, "shapes[%zu] must be an object", i);
            goto out;
        }
        if (shape_json_parse(sj, 0, &r->shapes[i], err, sizeof err) != 0) {
            ret = http_fail(r, ATTUNE_EINVAL, "shapes[%zu]: %s", i, err);
            goto out;
        }
    }
    r->nshapes = (int)ns;
    for (int i = 0; i < r->nshapes; i++) { /* e4m3 on a GPU without FP8: nothing to tune */
        char why[256];
        if (!dtype_device_runs(&dev.info, r->shapes[i].dtype, why, sizeof why)) {
            char msg[320];
            snprintf(msg, sizeof msg, "shapes[%d]: %s", i, why);
            ret = send_unprocessable(r, msg);
            goto out;
        }
    }
    r->force = json_is_true(jf); /* priced by work_tune (tune_over_budget) */
    int rc = jobs_check_room(r->d->jobs, dev.info.id);
    if (rc != 0) {
        ret = jobs_stopping(r->d->jobs)
                  ? http_fail(r, ATTUNE_EBUSY, "attuned is stopping; retry once it is back")
                  : http_fail(r, ATTUNE_EBUSY, "the job queue of device %s is full; retry later",
                              dev.info.id);
        goto out;
    }
    snprintf(r->device_id, sizeof r->device_id, "%s", dev.info.id);
    ret = http_defer(r, work_tune);
out:
    json_decref(root);
    return ret;
}

/* ---- GET /v1/export, POST /v1/import */

static enum MHD_Result h_export(req *r, const char *url, const http_args *a)
{
    enum MHD_Result ret;
    index_device_view dev;
    if (http_device(r, http_arg(a, "device"), &dev, &ret) != 0)
        return ret;
    return export_stream(r, dev.info.id); /* no token: see export.h */
}

static void work_import(req *r, store *st)
{
    char err[ATTUNE_ERRLEN] = "";
    store_import_stats stats;
    memset(&stats, 0, sizeof stats);
    int rc = store_import(st, r->body, r->len, &stats, err, sizeof err);
    /* the table's text (up to 64 MiB) is done with: freed before the index
     * reload below, whose arrays are the import's other peak (issue 29
     * item 8; the budget it was charged is given back at completion) */
    free(r->body);
    r->body = NULL;
    r->len = r->cap = 0;
    if (rc != 0) {
        /* a bad table is the client's (4xx), a failing store the server's */
        req_fail(r, rc, "%s: %s", attune_http_status(rc) < 500 ? "fleet table rejected"
                                                                 : "import failed",
                 err[0] ? err : attune_strerror(rc));
        return;
    }
    /* the index follows the store: the devices the table changed (a table
     * may carry rows of devices the index already has) */
    sync_refresh(&r->d->sync, st, "import");
#ifdef __GLIBC__
    malloc_trim(0); /* what the import and the reload freed goes back to the system */
#endif
    log_event(LOGL_INFO, "import", "devices=%d stacks=%d measurements=%d skipped=%d pins=%d",
              stats.devices, stats.stacks, stats.measurements, stats.skipped, stats.pins);
    req_result(r, 200, json_pack("{s:{s:i, s:i, s:i, s:i, s:i}}", "imported", "devices",
                                 stats.devices, "stacks", stats.stacks, "measurements",
                                 stats.measurements, "skipped", stats.skipped, "pins",
                                 stats.pins));
}

static enum MHD_Result h_import(req *r, const char *url, const http_args *a)
{
    if (r->len == 0)
        return http_fail(r, ATTUNE_EINVAL, "empty body: a fleet table is expected");
    if (r->len >= 2 && (unsigned char)r->body[0] == 0x1f && (unsigned char)r->body[1] == 0x8b)
        return http_fail(r, ATTUNE_EFORMAT, "the body is gzip-compressed: POST the table's "
                                            "JSON (gunzip it first), or `attune import "
                                            "FILE.json.gz`, which reads it");
    if (!http_json_depth_ok(r->body, r->len, ATTUNED_JSON_DEPTH_MAX))
        return http_fail(r, ATTUNE_EINVAL, "JSON nested deeper than %d levels",
                               ATTUNED_JSON_DEPTH_MAX);
    return http_defer(r, work_import);
}

static enum MHD_Result h_not_found(req *r, const char *url, const http_args *a)
{
    (void)a;
    return http_fail(r, ATTUNE_ENOTFOUND, "no route for %.100s", url);
}

/* ---- the access handler */

/* Grow r's body buffer to hold need bytes, charging the global budget. */
static int body_reserve(req *r, size_t need)
{
    if (need <= r->cap)
        return 0;
    size_t cap = r->cap ? r->cap : 4096;
    while (cap < need)
        cap *= 2;
    if (cap > r->limit)
        cap = r->limit;
    size_t delta = cap - r->cap;
    long long before = atomic_fetch_add(&r->d->body_bytes, (long long)delta);
    if (before + (long long)delta > (long long)ATTUNED_BODY_BUDGET) {
        atomic_fetch_sub(&r->d->body_bytes, (long long)delta);
        return 503;
    }
    char *b = realloc(r->body, cap);
    if (b == NULL) {
        atomic_fetch_sub(&r->d->body_bytes, (long long)delta);
        return 503;
    }
    r->body = b;
    r->cap = cap;
    r->reserved += delta;
    return 0;
}

static enum MHD_Result reject_body(req *r, unsigned status)
{
    if (status == 413)
        return http_fail(r, ATTUNE_ETOOBIG, "request body too large (at most %zu bytes here)",
                               r->limit);
    return http_fail(r, ATTUNE_EBUSY, "too many request bodies in flight; retry later");
}

/* First call for a request: route, Host, token, declared body size. */
static enum MHD_Result first_call(req *r, const char *url, const char *method)
{
    attuned *d = r->d;
    int row = -1, path_row = -1;

    for (int i = 0; routes[i].method != NULL; i++)
        if (path_matches(&routes[i], url)) {
            if (path_row < 0)
                path_row = i;
            if (strcmp(method, routes[i].method) == 0) {
                row = i;
                break;
            }
        }
    r->route = row >= 0 ? row : (path_row >= 0 ? path_row : ROW_NOT_FOUND);
    char err[ATTUNE_ERRLEN];
    unsigned bad = http_request_check(r, err, sizeof err);
    if (bad != 0)
        return http_send_error(r, bad, "%s", err);

    const char *host = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
                                                   MHD_HTTP_HEADER_HOST);
    if (host == NULL)
        return http_fail(r, ATTUNE_EINVAL, "missing Host header");
    if (!auth_host_allowed(host, d->cfg.allow_hosts, d->cfg.nallow_hosts))
        return http_send_error(r, 403, "Host '%.64s' is not allowed (see --allow-host)",
                               host);
    if (row < 0 && path_row >= 0) {
        char allow[64] = "";
        for (int i = 0; routes[i].method != NULL; i++)
            if (path_matches(&routes[i], url) && strstr(allow, routes[i].method) == NULL)
                snprintf(allow + strlen(allow), sizeof allow - strlen(allow), "%s%s",
                         allow[0] ? ", " : "", routes[i].method);
        return http_send_error_header(r, 405, MHD_HTTP_HEADER_ALLOW, allow,
                                      "method not allowed on this route");
    }
    if (row < 0)
        return routes[ROW_NOT_FOUND].fn(r, url, NULL);
    const route *rt = &routes[row];
    if (rt->auth &&
        !auth_bearer_ok(d->token, MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
                                                               MHD_HTTP_HEADER_AUTHORIZATION))) {
        return http_send_error_header(r, 401, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                                      "Bearer realm=\"attune\"", "missing or wrong bearer token");
    }
    const char *cl = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
                                                 MHD_HTTP_HEADER_CONTENT_LENGTH);
    const char *te = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
                                                 MHD_HTTP_HEADER_TRANSFER_ENCODING);
    r->limit = rt->body_max;
    if (rt->body_max == 0) {
        if ((cl != NULL && strcmp(cl, "0") != 0) || te != NULL)
            return http_fail(r, ATTUNE_ETOOBIG, "%s %s takes no request body", rt->method,
                             r->url); /* the path asked (a prefix route's id included) */
        /* answered on the next call: a response queued in this first call
         * is an "early" one to libmicrohttpd, which then closes the
         * connection (Connection: close) instead of keeping it alive for
         * the client's next request */
        return MHD_YES;
    }
    const char *ct = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
                                                 MHD_HTTP_HEADER_CONTENT_TYPE);
    if (ct != NULL && !http_content_type_json(ct))
        return http_send_error(r, 415, "Content-Type must be application/json");
    if (cl != NULL) {
        char *end;
        errno = 0;
        unsigned long long n = strtoull(cl, &end, 10);
        if (errno == 0 && *end == 0 && n > rt->body_max)
            return reject_body(r, 413);
        if (errno == 0 && *end == 0 && n > 0) {
            int st = body_reserve(r, (size_t)n);
            if (st != 0)
                return reject_body(r, (unsigned)st);
        }
    }
    return MHD_YES; /* the body follows */
}

/* The one place a route's query arguments are read and checked (the
 * pointers are valid during this call of the access handler only). */
static enum MHD_Result run_handler(req *r, const route *rt, const char *url)
{
    char err[ATTUNE_ERRLEN];
    http_args a;
    enum MHD_Result ret;
    if (rt->args == NULL)
        return rt->fn(r, url, NULL);
    /* the same bytes as a question answered before, nothing changed since */
    if (rt->fn == h_tactic && tactic_cache_answer(r, &ret))
        return ret;
    if (http_args_get(r->conn, rt->args, &a, err, sizeof err) != 0)
        return http_fail(r, ATTUNE_EINVAL, "%s", err);
    return rt->fn(r, url, &a);
}

enum MHD_Result routes_access(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version,
                              const char *upload_data, size_t *upload_data_size,
                              void **req_cls)
{
    req *r = *req_cls;
    if (r == NULL) {
        r = calloc(1, sizeof *r);
        if (r == NULL)
            return MHD_NO;
        r->d = cls;
        r->conn = c;
        r->method = method;
        r->url = url;
        r->version = version;
        clock_gettime(CLOCK_MONOTONIC, &r->t0);
        *req_cls = r;
        return first_call(r, url, method);
    }
    if (atomic_load(&r->ready))
        return http_send_ready(r);
    if (*upload_data_size > 0) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (r->too_big)
            return MHD_YES; /* discard the rest; answered when it ends */
        if (r->len + n > r->limit) {
            r->too_big = 413;
            return MHD_YES;
        }
        int st = body_reserve(r, r->len + n);
        if (st != 0) {
            r->too_big = st;
            return MHD_YES;
        }
        memcpy(r->body + r->len, upload_data, n);
        r->len += n;
        return MHD_YES;
    }
    if (r->work != NULL)
        return MHD_YES; /* deferred and not done: cannot happen while suspended */
    if (r->too_big)
        return reject_body(r, (unsigned)r->too_big);
    return run_handler(r, &routes[r->route], url);
}

void routes_completed(void *cls, struct MHD_Connection *c, void **req_cls,
                      enum MHD_RequestTerminationCode toe)
{
    req *r = *req_cls;
    conn_request_done(c);
    if (r == NULL)
        return;
    if (r->reserved > 0)
        atomic_fetch_sub(&r->d->body_bytes, (long long)r->reserved);
    free(r->body);
    free(r->resp);
    free(r->shapes);
    free(r);
    *req_cls = NULL;
}
