/* answer_json.c -- an index answer as the JSON of GET /v1/tactic. */
#include "answer_json.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../common/jbuf.h"

void answer_tactic_parts(const char *tactic, char *variant, size_t vlen, int *pad)
{
    attn_tactic t;
    *pad = 0;
    if (attn_tactic_parse(tactic, &t, NULL, 0) == 0) {
        snprintf(variant, vlen, "%s", attn_variant_name(t.variant));
        *pad = t.pad;
        return;
    }
    size_t n = strcspn(tactic, "/");
    snprintf(variant, vlen, "%.*s", (int)n, tactic);
}

/* The numbers of a predicted (nearest) answer: no measurement of this
 * shape backs them. */
static void predicted_fields(jbuf *b, const index_answer *ans)
{
    jbuf_num(b, "time_us", ans->source == INDEX_NEAREST ? select_time(&ans->m) : ans->m.time_us);
    jbuf_num(b, "predicted_us", ans->predicted_us);
    jbuf_num(b, "rel_err", ans->m.rel_err);
    jbuf_num(b, "max_abs_err", NAN);
    jbuf_str(b, "from_shape", ans->from_key);
    jbuf_num(b, "distance", ans->distance);
    char from[PREDICT_MAX_FROM * (ATTN_SHAPE_KEY_MAX + 1)];
    size_t fl = 0;
    from[0] = 0;
    for (int k = 0; k < ans->nfrom; k++)
        fl += (size_t)snprintf(from + fl, sizeof from - fl, "%s%s", k ? "," : "", ans->from[k]);
    jbuf_str(b, "from_shapes", from); /* comma-separated, heaviest first */
}

/* The numbers of a measured (fleet) answer: time_us is what a caller pays,
 * with the pad/unpad copies for a padded tactic (the figure the winner was
 * chosen on, select.h). */
static void measured_fields(jbuf *b, const index_answer *ans)
{
    jbuf_num(b, "time_us", select_time(&ans->m));
    jbuf_num(b, "time_us_kernel", ans->m.time_us);
    jbuf_num(b, "time_us_copies", ans->m.time_us_copies);
    jbuf_num(b, "rel_err", ans->m.rel_err);
    jbuf_num(b, "max_abs_err", ans->m.max_abs_err);
    if (ans->m.shape.dtype == ATTN_E4M3) /* FP8's whole cost: vs the bf16 source */
        jbuf_num(b, "src_rel_err", ans->m.src_rel_err);
    jbuf_str(b, "measured_stack", ans->m.stack_id);
}

/* A pinned answer: the pin that forced it, and the device's own numbers
 * for the tactic when it measured it (else null). */
static void pinned_fields(jbuf *b, const index_answer *ans)
{
    const pin *p = &ans->pinned;
    if (ans->m.stack_id[0] != 0) {
        measured_fields(b, ans);
    } else {
        jbuf_num(b, "time_us", NAN);
        jbuf_num(b, "rel_err", NAN);
        jbuf_num(b, "max_abs_err", NAN);
    }
    jbuf_int(b, "pin_id", (long long)p->id);
    jbuf_str(b, "pin_shape", p->shape);
    jbuf_str(b, "pin_device", p->device);
    jbuf_str(b, "pin_model", p->model);
    jbuf_str(b, "pin_reason", p->reason);
    jbuf_str(b, "pin_author", p->author);
}

char *answer_json(const index_answer *ans, double mre, variant_set vs, const char *tuning,
                  size_t *len)
{
    char variant[32];
    int pad;
    const char *tactic = ans->m.tactic; /* complete, listed for the shape (index.h) */
    answer_tactic_parts(tactic, variant, sizeof variant, &pad);
    jbuf b;
    jbuf_init(&b, 640);
    jbuf_str(&b, "device", ans->device_id);
    jbuf_str(&b, "shape", ans->key);
    jbuf_str(&b, "tactic", tactic);
    jbuf_str(&b, "variant", variant);
    jbuf_int(&b, "pad", pad);
    jbuf_str(&b, "source", index_source_name(ans->source));
    jbuf_bool(&b, "stale", ans->stale);
    jbuf_str(&b, "stack", ans->stack_id);
    if (ans->source == INDEX_DEFAULT) {
        jbuf_num(&b, "time_us", NAN);
        jbuf_num(&b, "rel_err", NAN);
        jbuf_num(&b, "max_abs_err", NAN);
    } else if (ans->source == INDEX_NEAREST || ans->source == INDEX_PREDICTED) {
        predicted_fields(&b, ans);
    } else if (ans->source == INDEX_PINNED) {
        pinned_fields(&b, ans);
    } else {
        measured_fields(&b, ans);
    }
    if (ans->source == INDEX_FLEET) {
        jbuf_str(&b, "from_shape", ans->from_key);
        jbuf_str(&b, "fleet_device", ans->fleet_device);
        jbuf_str(&b, "fleet_host", ans->fleet_host);
    }
    if (ans->nexcluded > 0)
        jbuf_int(&b, "pins_excluding", ans->nexcluded);
    if (tuning != NULL)
        jbuf_str(&b, "tuning", tuning);
    if (mre > 0)
        jbuf_num(&b, "max_rel_err", mre);
    if (vs != 0) {
        char vt[96];
        jbuf_str(&b, "variants", variant_set_str(vs, vt, sizeof vt));
    }
    return jbuf_finish(&b, len);
}

void answer_no_tactic_text(const index_answer *ans, variant_set vs, char *buf, size_t len)
{
    char want[96], listed[96];
    variant_set_str(vs, want, sizeof want);
    variant_set_str(ans->listed, listed, sizeof listed);
    /* the backend lists none of the asked variants: no pin is to blame */
    int unlisted = ans->listed != 0 && vs != 0 && (ans->listed & vs) == 0;
    if (ans->nexcluded > 0 && !unlisted)
        snprintf(buf, len,
                 "no tactic%s%s for %s on %s: %d exclusion pin%s (GET /v1/pins) leave%s no "
                 "tactic that qualifies", vs != 0 ? " of variants=" : "", vs != 0 ? want : "",
                 ans->key, ans->device_id, ans->nexcluded, ans->nexcluded > 1 ? "s" : "",
                 ans->nexcluded > 1 ? "" : "s");
    else if (ans->listed == 0 && ans->listing_pending)
        snprintf(buf, len,
                 "no tactic of variants=%s for %s on %s: nothing measured qualifies and the "
                 "device's tactics for the shape are being listed (ask again shortly)",
                 want, ans->key, ans->device_id);
    else if (ans->listed == 0)
        snprintf(buf, len,
                 "no tactic of variants=%s for %s on %s: nothing measured qualifies and this "
                 "host cannot list the device's tactics (the default is %s)",
                 want, ans->key, ans->device_id, INDEX_DEFAULT_TACTIC);
    else
        snprintf(buf, len,
                 "no tactic of variants=%s for %s on %s: the backend lists only %s for this "
                 "shape", want, ans->key, ans->device_id, listed);
}
