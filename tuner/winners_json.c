/* winners_json.c -- winners rows as JSON, shared by attuned and the CLI so
 * that GET /v1/winners and `attune winners --json` cannot drift apart. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../common/json_num.h"
#include "winners.h"

/* One tactic's summary; all = 0 leaves out the fields a runner-up or a
 * previous winner does not need. */
static json_t *tactic_json(const store_measurement *m, int all)
{
    attn_tactic t;
    char variant[32];
    int pad = 0;
    if (attn_tactic_parse(m->tactic, &t, NULL, 0) == 0) {
        snprintf(variant, sizeof variant, "%s", attn_variant_name(t.variant));
        pad = t.pad;
    } else { /* an imported oddity: shown as stored */
        snprintf(variant, sizeof variant, "%.*s", (int)strcspn(m->tactic, "/"), m->tactic);
    }
    json_t *o = json_pack("{s:s, s:s, s:i, s:s}", "tactic", m->tactic, "variant", variant,
                          "pad", pad, "stack", m->stack_id);
    if (o == NULL)
        return NULL;
    /* time_us_total is what competes (select_time): with the pad copies
     * when the tactic pads, the kernel time otherwise */
    json_object_set_new(o, "time_us", json_num(m->time_us));
    json_object_set_new(o, "time_us_copies", json_num(m->time_us_copies));
    json_object_set_new(o, "time_us_total", json_num(select_time(m)));
    json_object_set_new(o, "rel_err", json_num(m->rel_err));
    if (m->shape.dtype == ATTN_E4M3) /* FP8's whole cost: vs the bf16 source */
        json_object_set_new(o, "src_rel_err", json_num(m->src_rel_err));
    if (all) {
        json_object_set_new(o, "time_us_min", json_num(m->time_us_min));
        json_object_set_new(o, "time_us_max", json_num(m->time_us_max));
        json_object_set_new(o, "max_abs_err", json_num(m->max_abs_err));
        json_object_set_new(o, "n", json_integer(m->n));
        json_object_set_new(o, "taken_at", json_integer(m->taken_at));
    }
    return o;
}

static json_t *row_json(const winners_row *w)
{
    char key[ATTN_SHAPE_KEY_MAX];
    const attn_shape *s = &w->shape;
    json_t *o = json_pack(
        "{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:s, s:b, s:s, s:b, s:i, s:{s:i, s:i, "
        "s:i, s:i}}",
        "shape", attn_shape_key(s, key, sizeof key), "b", (json_int_t)s->b, "hq",
        (json_int_t)s->hq, "hkv", (json_int_t)s->hkv, "g", (json_int_t)attn_shape_group(s),
        "sq", (json_int_t)s->sq, "skv", (json_int_t)s->skv, "d", (json_int_t)s->d, "dtype",
        attn_dtype_name(s->dtype), "causal", s->causal, "stack", w->stack_id, "stale",
        w->stale, "tactics", w->ntactics, "status", "ok", w->nok, "inaccurate",
        w->ninaccurate, "failed", w->nfailed, "unsupported", w->nunsupported);
    if (o == NULL)
        return NULL;
    json_object_set_new(o, "winner", w->has_winner ? tactic_json(&w->winner, 1) : json_null());
    json_object_set_new(o, "runner_up",
                        w->has_runner_up ? tactic_json(&w->runner_up, 0) : json_null());
    json_object_set_new(o, "margin", json_num(w->margin));
    json_object_set_new(o, "previous",
                        w->has_previous ? tactic_json(&w->previous, 0) : json_null());
    return o;
}

json_t *winners_json(const winners_row *rows, int n)
{
    json_t *arr = json_array();
    for (int i = 0; i < n && arr != NULL; i++)
        if (json_array_append_new(arr, row_json(&rows[i])) != 0) {
            json_decref(arr);
            arr = NULL;
        }
    return arr;
}
