/* drift.c -- drift between two stacks of a device or a model (drift.h). */
#include "drift.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/grow.h"
#include "../common/json_num.h"
#include "../db/fleet_local.h"

/* A measurement with its shape key, for sorting by (stack, shape, tactic). */
typedef struct row {
    char key[ATTN_SHAPE_KEY_MAX];
    store_measurement m;
} row;

static int row_cmp(const void *pa, const void *pb)
{
    const row *a = pa, *b = pb;
    int c = strcmp(a->m.stack_id, b->m.stack_id);
    if (c == 0)
        c = strcmp(a->key, b->key);
    if (c == 0)
        c = strcmp(a->m.tactic, b->m.tactic);
    return c;
}

static int dbl_cmp(const void *pa, const void *pb)
{
    double a = *(const double *)pa, b = *(const double *)pb;
    return (a > b) - (a < b);
}

static int append_device(store *st, const char *id, row **rows, int *n, int *cap)
{
    store_measurement *m = NULL;
    int k = 0, rc = store_measurements_all(st, id, &m, &k);
    if (rc != 0)
        return rc;
    for (int i = 0; i < k; i++) {
        if ((rc = grow_array(rows, cap, *n, sizeof **rows)) != 0)
            break;
        row *r = &(*rows)[(*n)++];
        r->m = m[i];
        attn_shape_key(&m[i].shape, r->key, sizeof r->key);
    }
    free(m);
    return rc;
}

/* Combine the rows of several devices per (stack, shape, tactic): median
 * of the competing times, the largest error, the most common status.
 * rows sorted; compacts in place, *n updated. */
static int combine(row *rows, int *n)
{
    double *times = malloc(sizeof(double) * (size_t)(*n > 0 ? *n : 1));
    if (times == NULL)
        return ATTUNE_ENOMEM;
    int out = 0;
    for (int i = 0; i < *n;) {
        int j = i;
        while (j < *n && row_cmp(&rows[i], &rows[j]) == 0)
            j++;
        int nt = 0, count[4] = {0, 0, 0, 0};
        double err = NAN, abs_err = NAN;
        for (int k = i; k < j; k++) {
            const store_measurement *m = &rows[k].m;
            if (m->status == STORE_OK && isfinite(select_time(m)))
                times[nt++] = select_time(m);
            if ((unsigned)m->status <= STORE_INACCURATE)
                count[m->status]++;
            if (isfinite(m->rel_err) && !(m->rel_err <= err))
                err = m->rel_err;
            if (isfinite(m->max_abs_err) && !(m->max_abs_err <= abs_err))
                abs_err = m->max_abs_err;
        }
        row r = rows[i];
        if (nt > 0) /* qsort(NULL, 0) is UB */
            qsort(times, (size_t)nt, sizeof *times, dbl_cmp);
        r.m.time_us = nt == 0 ? NAN
                      : nt % 2 ? times[nt / 2]
                               : 0.5 * (times[nt / 2 - 1] + times[nt / 2]);
        r.m.time_us_min = nt ? times[0] : NAN;
        r.m.time_us_max = nt ? times[nt - 1] : NAN;
        r.m.time_us_copies = NAN;
        r.m.rel_err = err;
        r.m.max_abs_err = abs_err;
        r.m.incumbent = 0;
        r.m.n = j - i;
        int best = 0;
        for (int s = 1; s < 4; s++)
            if (count[s] > count[best])
                best = s;
        r.m.status = (store_status)best;
        rows[out++] = r;
        i = j;
    }
    free(times);
    *n = out;
    return 0;
}

/* Rows of one stack: [*lo, *hi) of the sorted array. */
static void stack_range(const row *rows, int n, const char *stack, int *lo, int *hi)
{
    *lo = *hi = 0;
    int i = 0;
    while (i < n && strcmp(rows[i].m.stack_id, stack) != 0)
        i++;
    *lo = i;
    while (i < n && strcmp(rows[i].m.stack_id, stack) == 0)
        i++;
    *hi = i;
}

/* Pick the stacks: given ones must have rows; otherwise the two whose
 * first row (min taken_at) is latest, a the older. */
static int pick_stacks(const row *rows, int n, const char *want_a, const char *want_b,
                       char *a, char *b, char *err, size_t errlen)
{
    char ids[2][24] = {"", ""};
    int64_t first[2] = {-1, -1};
    for (int i = 0; i < n;) {
        int j = i;
        int64_t t = rows[i].m.taken_at;
        while (j < n && strcmp(rows[j].m.stack_id, rows[i].m.stack_id) == 0) {
            if (rows[j].m.taken_at < t)
                t = rows[j].m.taken_at;
            j++;
        }
        /* keep the two latest: ids[1] newest */
        if (t > first[1] || (t == first[1] && strcmp(rows[i].m.stack_id, ids[1]) > 0)) {
            first[0] = first[1];
            memcpy(ids[0], ids[1], sizeof ids[0]);
            first[1] = t;
            snprintf(ids[1], sizeof ids[1], "%s", rows[i].m.stack_id);
        } else if (t > first[0]) {
            first[0] = t;
            snprintf(ids[0], sizeof ids[0], "%s", rows[i].m.stack_id);
        }
        i = j;
    }
    int lo, hi;
    if (want_a || want_b) {
        const char *w[2] = {want_a, want_b};
        for (int k = 0; k < 2; k++) {
            if (w[k] == NULL)
                return attune_fail(err, errlen, ATTUNE_EINVAL,
                                   "give both stacks (from and to) or neither");
            stack_range(rows, n, w[k], &lo, &hi);
            if (lo == hi)
                return attune_fail(err, errlen, ATTUNE_ENOTFOUND,
                                   "no measurements under stack '%.24s'", w[k]);
        }
        snprintf(a, 24, "%s", want_a);
        snprintf(b, 24, "%s", want_b);
        return 0;
    }
    if (first[0] < 0)
        return attune_fail(err, errlen, ATTUNE_ENOTFOUND,
                           "fewer than two stacks measured: nothing to compare");
    snprintf(a, 24, "%s", ids[0]);
    snprintf(b, 24, "%s", ids[1]);
    return 0;
}

static int acc_cmp(const void *pa, const void *pb)
{
    const drift_accuracy *a = pa, *b = pb;
    if (a->regression != b->regression)
        return b->regression - a->regression;
    int ha = (a->flags & (DRIFT_STATUS | DRIFT_BOUND)) != 0;
    int hb = (b->flags & (DRIFT_STATUS | DRIFT_BOUND)) != 0;
    if (ha != hb)
        return hb - ha;
    double ra = a->rel_err_b / a->rel_err_a, rb = b->rel_err_b / b->rel_err_a;
    if (isnan(ra))
        ra = 0;
    if (isnan(rb))
        rb = 0;
    if (ra != rb)
        return ra < rb ? 1 : -1;
    int c = strcmp(a->shape, b->shape);
    return c ? c : strcmp(a->tactic, b->tactic);
}

static int shape_cmp(const void *pa, const void *pb)
{
    const drift_shape *a = pa, *b = pb;
    int ca = strcmp(a->winner_a, a->winner_b) != 0, cb = strcmp(b->winner_a, b->winner_b) != 0;
    if (ca != cb)
        return cb - ca;
    double ra = isnan(a->ratio) ? -1 : a->ratio, rb = isnan(b->ratio) ? -1 : b->ratio;
    if (ra != rb)
        return ra < rb ? 1 : -1;
    return strcmp(a->shape, b->shape);
}

/* Accuracy finding of one tactic present under both stacks; 0 flags when
 * nothing changed. */
static void compare_tactic(const store_measurement *a, const store_measurement *b,
                           const select_policy *p, drift_accuracy *f)
{
    memset(f, 0, sizeof *f);
    f->status_a = a->status;
    f->status_b = b->status;
    f->rel_err_a = a->rel_err;
    f->rel_err_b = b->rel_err;
    f->bound = select_max_rel_err(p, a->shape.dtype);
    if (a->status != b->status)
        f->flags |= DRIFT_STATUS;
    int fa = isfinite(a->rel_err), fb = isfinite(b->rel_err);
    if (fa && fb && (a->rel_err <= f->bound) != (b->rel_err <= f->bound))
        f->flags |= DRIFT_BOUND;
    if (fa && fb && b->rel_err > 2 * a->rel_err)
        f->flags |= DRIFT_ERR2X;
    f->regression = (a->status == STORE_OK && b->status != STORE_OK) ||
                    (fa && fb && a->rel_err <= f->bound && b->rel_err > f->bound) ||
                    (f->flags & DRIFT_ERR2X) != 0;
}

/* Winner of rows[lo, hi) (one shape of one stack) as a plain array. */
static int winner_of(const row *rows, int lo, int hi, const select_policy *p,
                     store_measurement *scratch, char *tactic, double *time)
{
    int n = 0;
    for (int i = lo; i < hi; i++)
        scratch[n++] = rows[i].m;
    int w = n > 0 ? select_winner(scratch, n, p, 0) : -1;
    tactic[0] = 0;
    *time = NAN;
    if (w >= 0) {
        snprintf(tactic, ATTN_TACTIC_STR_MAX, "%s", scratch[w].tactic);
        *time = select_time(&scratch[w]);
    }
    return w;
}

/* The stack's fields for the report; ids alone when the store lacks them. */
static void stack_info(store *st, const char *id, attn_stack *out)
{
    if (fleet_local_stack(st, id, out) != 0) {
        memset(out, 0, sizeof *out);
        snprintf(out->id, sizeof out->id, "%s", id);
    }
}

int drift_compare(store *st, const char *device, int model, const char *stack_a,
                  const char *stack_b, const select_policy *p, drift_report *out, char *err,
                  size_t errlen)
{
    row *rows = NULL;
    int n = 0, cap = 0, rc;
    attn_device_info info, *infos = NULL;
    attn_stack latest, *stacks = NULL;
    store_measurement *scratch = NULL;
    memset(out, 0, sizeof *out);
    if ((rc = store_device_get(st, device, &info, &latest)) != 0) {
        attune_fail(err, errlen, rc, "unknown device '%.64s'", device);
        goto out;
    }
    snprintf(out->name, sizeof out->name, "%s", info.name);
    if (!model) {
        snprintf(out->subject, sizeof out->subject, "%s", info.id);
        out->devices = 1;
        if ((rc = append_device(st, info.id, &rows, &n, &cap)) != 0)
            goto out;
    } else {
        char mid[32], other[32];
        int nd = 0;
        fleet_model_id(&info, mid, sizeof mid);
        snprintf(out->subject, sizeof out->subject, "%s", mid);
        out->model = 1;
        if ((rc = store_devices_list(st, &infos, &stacks, &nd)) != 0)
            goto out;
        for (int i = 0; i < nd; i++) {
            fleet_model_id(&infos[i], other, sizeof other);
            if (strcmp(mid, other) != 0)
                continue;
            out->devices++;
            if ((rc = append_device(st, infos[i].id, &rows, &n, &cap)) != 0)
                goto out;
        }
    }
    if (n > 0) /* rows is NULL when no device has any: qsort(NULL, 0) is UB */
        qsort(rows, (size_t)n, sizeof *rows, row_cmp);
    if (model && (rc = combine(rows, &n)) != 0)
        goto out;
    if ((rc = pick_stacks(rows, n, stack_a, stack_b, out->stack_a, out->stack_b, err,
                          errlen)) != 0)
        goto out;
    stack_info(st, out->stack_a, &out->info_a);
    stack_info(st, out->stack_b, &out->info_b);
    scratch = malloc(sizeof *scratch * (size_t)(n > 0 ? n : 1));
    if (scratch == NULL) {
        rc = ATTUNE_ENOMEM;
        goto out;
    }
    int alo, ahi, blo, bhi, acap = 0, scap = 0;
    stack_range(rows, n, out->stack_a, &alo, &ahi);
    stack_range(rows, n, out->stack_b, &blo, &bhi);
    /* walk both stacks' rows shape by shape (sorted by key, tactic) */
    int i = alo, j = blo;
    while (i < ahi && j < bhi) {
        int c = strcmp(rows[i].key, rows[j].key);
        if (c != 0) {
            const char *skip = c < 0 ? rows[i].key : rows[j].key;
            int *k = c < 0 ? &i : &j, end = c < 0 ? ahi : bhi;
            while (*k < end && strcmp(rows[*k].key, skip) == 0)
                (*k)++;
            continue;
        }
        int ie = i, je = j;
        while (ie < ahi && strcmp(rows[ie].key, rows[i].key) == 0)
            ie++;
        while (je < bhi && strcmp(rows[je].key, rows[j].key) == 0)
            je++;
        /* tactics under both stacks */
        for (int x = i, y = j; x < ie && y < je;) {
            int t = strcmp(rows[x].m.tactic, rows[y].m.tactic);
            if (t < 0) {
                x++;
                continue;
            }
            if (t > 0) {
                y++;
                continue;
            }
            drift_accuracy f;
            compare_tactic(&rows[x].m, &rows[y].m, p, &f);
            if (f.flags != 0) {
                if ((rc = grow_array(&out->acc, &acap, out->nacc, sizeof *out->acc)) != 0)
                    goto out;
                snprintf(f.shape, sizeof f.shape, "%s", rows[x].key);
                snprintf(f.tactic, sizeof f.tactic, "%s", rows[x].m.tactic);
                out->acc[out->nacc++] = f;
            }
            x++;
            y++;
        }
        if ((rc = grow_array(&out->shapes, &scap, out->nshapes, sizeof *out->shapes)) != 0)
            goto out;
        drift_shape *s = &out->shapes[out->nshapes++];
        memset(s, 0, sizeof *s);
        snprintf(s->shape, sizeof s->shape, "%s", rows[i].key);
        winner_of(rows, i, ie, p, scratch, s->winner_a, &s->time_a);
        winner_of(rows, j, je, p, scratch, s->winner_b, &s->time_b);
        s->ratio = s->time_a > 0 && isfinite(s->time_b) ? s->time_b / s->time_a : NAN;
        if (strcmp(s->winner_a, s->winner_b) != 0)
            out->winner_changes++;
        i = ie;
        j = je;
    }
    if (out->nacc > 0)
        qsort(out->acc, (size_t)out->nacc, sizeof *out->acc, acc_cmp);
    if (out->nshapes > 0)
        qsort(out->shapes, (size_t)out->nshapes, sizeof *out->shapes, shape_cmp);
out:
    if (rc != 0)
        drift_report_free(out);
    free(rows);
    free(infos);
    free(stacks);
    free(scratch);
    return rc;
}

void drift_report_free(drift_report *r)
{
    free(r->acc);
    free(r->shapes);
    r->acc = NULL;
    r->shapes = NULL;
    r->nacc = r->nshapes = 0;
}

static void flags_text(int flags, char *buf, size_t len)
{
    snprintf(buf, len, "%s%s%s", flags & DRIFT_STATUS ? "status " : "",
             flags & DRIFT_BOUND ? "bound " : "", flags & DRIFT_ERR2X ? "error>2x " : "");
    size_t n = strlen(buf);
    if (n > 0)
        buf[n - 1] = 0;
}

int drift_report_text(const drift_report *r, char **out)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (f == NULL)
        return ATTUNE_ENOMEM;
    for (int i = 0; i < r->nacc; i++) {
        const drift_accuracy *a = &r->acc[i];
        char why[48];
        flags_text(a->flags, why, sizeof why);
        fprintf(f,
                "%s %s %s: status %s -> %s, rel_err %.3g -> %.3g (x%.3g, bound %.3g) [%s]\n",
                a->regression ? "ACCURACY REGRESSION" : "accuracy change", a->shape,
                a->tactic, store_status_name(a->status_a), store_status_name(a->status_b),
                a->rel_err_a, a->rel_err_b, a->rel_err_b / a->rel_err_a, a->bound, why);
    }
    for (int i = 0; i < r->nshapes; i++) {
        const drift_shape *s = &r->shapes[i];
        if (strcmp(s->winner_a, s->winner_b) != 0)
            fprintf(f, "winner changed %s: %s -> %s, %.4g us -> %.4g us (x%.3g)\n", s->shape,
                    s->winner_a[0] ? s->winner_a : "(none)",
                    s->winner_b[0] ? s->winner_b : "(none)", s->time_a, s->time_b, s->ratio);
        else
            fprintf(f, "time %s: %s %.4g us -> %.4g us (x%.3g)\n", s->shape,
                    s->winner_a[0] ? s->winner_a : "(none)", s->time_a, s->time_b, s->ratio);
    }
    fprintf(f,
            "drift of %s %s (%s, %d device%s): stack %s -> %s; %d shapes compared, %d "
            "accuracy changes, %d winner changes\n",
            r->model ? "model" : "device", r->subject, r->name, r->devices,
            r->devices == 1 ? "" : "s", r->stack_a, r->stack_b, r->nshapes, r->nacc,
            r->winner_changes);
    if (fclose(f) != 0 || buf == NULL) {
        free(buf);
        return ATTUNE_ENOMEM;
    }
    *out = buf;
    return 0;
}

static json_t *stack_json(const attn_stack *s)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "id", s->id, "driver", s->driver,
                     "runtime", s->runtime, "blas", s->blas, "attune", s->attune, "kernels",
                     s->kernels);
}

json_t *drift_report_json(const drift_report *r)
{
    json_t *acc = json_array(), *sh = json_array();
    if (acc == NULL || sh == NULL)
        goto fail;
    for (int i = 0; i < r->nacc; i++) {
        const drift_accuracy *a = &r->acc[i];
        json_t *why = json_array();
        if (why == NULL)
            goto fail;
        if (a->flags & DRIFT_STATUS)
            json_array_append_new(why, json_string("status"));
        if (a->flags & DRIFT_BOUND)
            json_array_append_new(why, json_string("bound"));
        if (a->flags & DRIFT_ERR2X)
            json_array_append_new(why, json_string("error_2x"));
        if (json_array_append_new(
                acc, json_pack("{s:s, s:s, s:b, s:o, s:s, s:s, s:o, s:o, s:o}", "shape",
                               a->shape, "tactic", a->tactic, "regression", a->regression,
                               "changes", why, "status_from", store_status_name(a->status_a),
                               "status_to", store_status_name(a->status_b), "rel_err_from",
                               json_num(a->rel_err_a), "rel_err_to", json_num(a->rel_err_b), "bound",
                               json_num(a->bound))) != 0)
            goto fail;
    }
    for (int i = 0; i < r->nshapes; i++) {
        const drift_shape *s = &r->shapes[i];
        if (json_array_append_new(
                sh, json_pack("{s:s, s:b, s:s?, s:s?, s:o, s:o, s:o}", "shape", s->shape,
                              "winner_changed", strcmp(s->winner_a, s->winner_b) != 0,
                              "winner_from", s->winner_a[0] ? s->winner_a : NULL, "winner_to",
                              s->winner_b[0] ? s->winner_b : NULL, "time_us_from",
                              json_num(s->time_a), "time_us_to", json_num(s->time_b), "time_ratio",
                              json_num(s->ratio))) != 0)
            goto fail;
    }
    return json_pack("{s:s, s:s, s:s, s:i, s:o, s:o, s:i, s:i, s:o, s:o}", "subject",
                     r->subject, "name", r->name, "scope", r->model ? "model" : "device",
                     "devices", r->devices, "stack_from", stack_json(&r->info_a), "stack_to",
                     stack_json(&r->info_b), "shapes_compared", r->nshapes, "winner_changes",
                     r->winner_changes, "accuracy", acc, "shapes", sh);
fail:
    json_decref(acc);
    json_decref(sh);
    return NULL;
}
